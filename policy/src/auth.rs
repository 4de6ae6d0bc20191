//! Who may do what: the spec's permissions, the built-in roles (named sets of permissions), the
//! one route-dependent rule (Office assignment), and the wire types of accounts, sessions, API
//! tokens and the audit log, with their input parsed once here.
//!
//! The server enforces these (its rules table names the permission every endpoint needs); the
//! UI reads the same types to show a person only what they may do. Nothing here knows HTTP or
//! SQL.
//!
//! Permission spellings are stable (they are stored in roles and tokens):
//! `manage_profiles` (the only right that edits policies and profiles), `operate_routes`
//! (manual actions and a caller's lifecycle: start, work, complete, abandon), `view_routes`,
//! `assign_office` (start and steer routes whose caller is `office`; never implies profile
//! edits), `run_dispatches` (external runners and adapters: evidence, results, leases), `admin`
//! (accounts, roles, tokens, the audit log).

use crate::{
    api::CallerKind,
    document::{FieldError, ValidationCode, ValidationError, ValidationErrors},
    limits::{
        MAX_ACCOUNT_NAME_CHARS, MAX_ID_CHARS, MAX_PASSWORD_CHARS, MAX_TOKEN_DAYS, MAX_TOKEN_NAME_CHARS,
        MAX_TOKEN_PROFILES, MIN_PASSWORD_CHARS,
    },
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One right, as the spec names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Create, edit and delete profiles: the only right that edits policies.
    ManageProfiles,
    /// Manual actions on routes and a caller's lifecycle (start, work, complete, abandon).
    OperateRoutes,
    /// Read routes, profiles, circuits and the event stream.
    ViewRoutes,
    /// Start and steer routes whose caller is `office` (never edits policies).
    AssignOffice,
    /// External runners and adapters: evidence, results, the lease protocol.
    RunDispatches,
    /// Accounts, roles, every token, the audit log.
    Admin,
}

impl Permission {
    pub const ALL: [Permission; 6] = [
        Permission::ManageProfiles,
        Permission::OperateRoutes,
        Permission::ViewRoutes,
        Permission::AssignOffice,
        Permission::RunDispatches,
        Permission::Admin,
    ];

    /// The stable spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Permission::ManageProfiles => "manage_profiles",
            Permission::OperateRoutes => "operate_routes",
            Permission::ViewRoutes => "view_routes",
            Permission::AssignOffice => "assign_office",
            Permission::RunDispatches => "run_dispatches",
            Permission::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == text)
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of permissions. On the wire: an array of names, in [`Permission::ALL`] order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Permissions(u8);

impl Permissions {
    pub const NONE: Permissions = Permissions(0);
    pub const ALL: Permissions = Permissions::of(&Permission::ALL);

    pub const fn of(list: &[Permission]) -> Permissions {
        let mut bits = 0;
        let mut i = 0;
        while i < list.len() {
            bits |= list[i].bit();
            i += 1;
        }
        Permissions(bits)
    }

    pub const fn contains(self, p: Permission) -> bool {
        self.0 & p.bit() != 0
    }

    pub fn contains_any(self, list: &[Permission]) -> bool {
        list.iter().any(|p| self.contains(*p))
    }

    pub const fn is_subset_of(self, other: Permissions) -> bool {
        self.0 & !other.0 == 0
    }

    pub const fn intersection(self, other: Permissions) -> Permissions {
        Permissions(self.0 & other.0)
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// This set and `p`.
    pub const fn with(self, p: Permission) -> Permissions {
        Permissions(self.0 | p.bit())
    }

    /// This set without `p`.
    pub const fn without(self, p: Permission) -> Permissions {
        Permissions(self.0 & !p.bit())
    }

    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL.into_iter().filter(move |p| self.contains(*p))
    }

    /// The names, for storage (`["view_routes","admin"]`).
    pub fn to_json(self) -> String {
        serde_json::to_string(&self).unwrap_or_else(|_| "[]".to_owned())
    }
}

impl fmt::Debug for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Permission::as_str))
            .finish()
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        Permissions(iter.into_iter().fold(0, |bits, p| bits | p.bit()))
    }
}

impl Serialize for Permissions {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Vec::<Permission>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}

/// Whether someone holding `permissions` may steer (start, act on, send work to, complete,
/// abandon, clear the result of) a route whose caller is `caller`: `operate_routes` steers any
/// route, `assign_office` only Office assignments.
pub fn may_steer(permissions: Permissions, caller: CallerKind) -> bool {
    permissions.contains(Permission::OperateRoutes)
        || (permissions.contains(Permission::AssignOffice) && caller == CallerKind::Office)
}

/// Whether someone holding `permissions` may start a route whose caller is `caller`: whoever
/// may steer it, and for a caller that runs the route's attempts itself (`editor`), only who
/// also runs dispatches (`run_dispatches`): starting one is taking on its attempts.
pub fn may_start(permissions: Permissions, caller: CallerKind) -> bool {
    may_steer(permissions, caller)
        && (!caller.runs_attempts() || permissions.contains(Permission::RunDispatches))
}

/// The roles every installation has. They are fixed; a different set is a custom role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinRole {
    Admin,
    ProfileManager,
    Operator,
    Viewer,
    Office,
    Runner,
}

impl BuiltinRole {
    pub const ALL: [BuiltinRole; 6] = [
        BuiltinRole::Admin,
        BuiltinRole::ProfileManager,
        BuiltinRole::Operator,
        BuiltinRole::Viewer,
        BuiltinRole::Office,
        BuiltinRole::Runner,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            BuiltinRole::Admin => "admin",
            BuiltinRole::ProfileManager => "profile_manager",
            BuiltinRole::Operator => "operator",
            BuiltinRole::Viewer => "viewer",
            BuiltinRole::Office => "office",
            BuiltinRole::Runner => "runner",
        }
    }

    pub const fn permissions(self) -> Permissions {
        use Permission::*;
        match self {
            BuiltinRole::Admin => Permissions::ALL,
            BuiltinRole::ProfileManager => Permissions::of(&[ManageProfiles, ViewRoutes, OperateRoutes]),
            BuiltinRole::Operator => Permissions::of(&[OperateRoutes, ViewRoutes]),
            BuiltinRole::Viewer => Permissions::of(&[ViewRoutes]),
            BuiltinRole::Office => Permissions::of(&[AssignOffice, ViewRoutes]),
            BuiltinRole::Runner => Permissions::of(&[RunDispatches]),
        }
    }

    /// The built-in role of this name (names compare without regard to case).
    pub fn parse(name: &str) -> Option<BuiltinRole> {
        BuiltinRole::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(name))
    }
}

// ------------------------------------------------------------------------------------------------
// Parsing names, passwords and token requests
// ------------------------------------------------------------------------------------------------

/// An account or role name: 1 to [`MAX_ACCOUNT_NAME_CHARS`] letters, digits and `. _ @ -`,
/// starting with a letter or digit. Names are unique without regard to case.
pub fn check_name(text: &str, what: &str) -> Result<(), FieldError> {
    if text.is_empty() {
        return Err(FieldError::new(ValidationCode::Missing, format!("Give {what}.")));
    }
    if text.chars().count() > MAX_ACCOUNT_NAME_CHARS {
        return Err(FieldError::new(
            ValidationCode::TooLong,
            format!("Use at most {MAX_ACCOUNT_NAME_CHARS} characters for {what}."),
        ));
    }
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c)) {
        return Err(FieldError::new(
            ValidationCode::InvalidCharacters,
            format!("Use only letters, digits and . _ @ - for {what}, starting with a letter or digit."),
        ));
    }
    Ok(())
}

/// A password: [`MIN_PASSWORD_CHARS`] to [`MAX_PASSWORD_CHARS`] characters. The message never
/// repeats it.
pub fn check_password(text: &str) -> Result<(), FieldError> {
    let n = text.chars().count();
    if n < MIN_PASSWORD_CHARS {
        return Err(FieldError::new(
            ValidationCode::OutOfRange,
            format!("Use at least {MIN_PASSWORD_CHARS} characters for the password."),
        ));
    }
    if n > MAX_PASSWORD_CHARS {
        return Err(FieldError::new(
            ValidationCode::TooLong,
            format!("Use at most {MAX_PASSWORD_CHARS} characters for the password."),
        ));
    }
    Ok(())
}

fn errors(list: Vec<ValidationError>) -> Result<(), ValidationErrors> {
    if list.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors { errors: list })
    }
}

/// `POST /api/v1/session`: sign in. Its `Debug` never shows the password.
#[derive(Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub name: String,
    pub password: String,
}

impl fmt::Debug for LoginRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginRequest")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// How the caller is signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A browser session (cookie).
    Session,
    /// An API token (`Authorization: Bearer`).
    Token,
}

/// `GET /api/v1/session`: who is asking, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WhoAmI {
    /// The account's name.
    pub name: String,
    pub kind: PrincipalKind,
    /// The account's role.
    pub role: String,
    /// What this session or token may do (a token: its own permissions within the account's).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
    /// A token scoped to profiles reaches only these (and their routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ids: Option<Vec<String>>,
    /// The demo account of `serve --demo`, signed in automatically.
    pub demo: bool,
}

/// An account, as administrators see it (never its password hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountView {
    pub id: String,
    pub name: String,
    pub role: String,
    pub disabled: bool,
    pub demo: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `POST /api/v1/accounts`. Its `Debug` never shows the password.
#[derive(Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AccountCreate {
    pub name: String,
    pub role: String,
    pub password: String,
}

impl fmt::Debug for AccountCreate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountCreate")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl AccountCreate {
    /// Every problem of the name, role name and password, by field.
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut list = Vec::new();
        if let Err(e) = check_name(&self.name, "the account name") {
            list.push(e.at("name"));
        }
        if let Err(e) = check_name(&self.role, "the role") {
            list.push(e.at("role"));
        }
        if let Err(e) = check_password(&self.password) {
            list.push(e.at("password"));
        }
        errors(list)
    }
}

/// `PATCH /api/v1/accounts/{id}`: any of a new role, disabled or enabled, a new password.
/// Its `Debug` never shows the password.
#[derive(Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AccountPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// A new password; the account's sessions end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl fmt::Debug for AccountPatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountPatch")
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .finish()
    }
}

impl AccountPatch {
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut list = Vec::new();
        if let Some(role) = &self.role {
            if let Err(e) = check_name(role, "the role") {
                list.push(e.at("role"));
            }
        }
        if let Some(password) = &self.password {
            if let Err(e) = check_password(password) {
                list.push(e.at("password"));
            }
        }
        if self.role.is_none() && self.disabled.is_none() && self.password.is_none() {
            list.push(
                FieldError::new(ValidationCode::Missing, "Give a role, disabled, or a password.").at(""),
            );
        }
        errors(list)
    }
}

/// A role: a named set of permissions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoleView {
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
    /// Built-in roles are fixed; make a custom role for another set.
    pub builtin: bool,
}

/// `POST /api/v1/roles`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RoleCreate {
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
}

impl RoleCreate {
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut list = Vec::new();
        // A built-in role's name is taken (409 when the role is made), like a custom role's.
        if let Err(e) = check_name(&self.name, "the role name") {
            list.push(e.at("name"));
        }
        if self.permissions.is_empty() {
            list.push(
                FieldError::new(ValidationCode::Empty, "Give at least one permission.").at("permissions"),
            );
        }
        errors(list)
    }
}

/// `PUT /api/v1/roles/{name}`: a custom role's new permissions. Accounts holding the role have
/// them from their next request (a token keeps its own permissions within them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RoleUpdate {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
}

impl RoleUpdate {
    pub fn check(&self) -> Result<(), ValidationErrors> {
        if self.permissions.is_empty() {
            return errors(vec![FieldError::new(
                ValidationCode::Empty,
                "Give at least one permission.",
            )
            .at("permissions")]);
        }
        Ok(())
    }
}

/// `POST /api/v1/tokens`: a new API token for the caller's account.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TokenCreate {
    /// What the token is for (shown in lists).
    pub name: String,
    /// A subset of the creator's own permissions.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
    /// Only these profiles and their routes (absent: every profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ids: Option<Vec<String>>,
    /// Days until the token expires (1 to 365; every token expires).
    #[serde(deserialize_with = "crate::whole::u32")]
    pub expires_in_days: u32,
}

impl TokenCreate {
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut list = Vec::new();
        let chars = self.name.chars().count();
        if self.name.trim().is_empty() {
            list.push(FieldError::new(ValidationCode::Missing, "Give the token a name.").at("name"));
        } else if chars > MAX_TOKEN_NAME_CHARS {
            list.push(
                FieldError::new(
                    ValidationCode::TooLong,
                    format!("Use at most {MAX_TOKEN_NAME_CHARS} characters for the token's name."),
                )
                .at("name"),
            );
        } else if self.name.chars().any(char::is_control) {
            list.push(
                FieldError::new(
                    ValidationCode::InvalidCharacters,
                    "The token's name may not hold control characters.",
                )
                .at("name"),
            );
        }
        if self.permissions.is_empty() {
            list.push(
                FieldError::new(ValidationCode::Empty, "Give at least one permission.").at("permissions"),
            );
        }
        if let Some(ids) = &self.profile_ids {
            if ids.is_empty() {
                list.push(
                    FieldError::new(
                        ValidationCode::Empty,
                        "Name at least one profile, or leave profile_ids out for every profile.",
                    )
                    .at("profile_ids"),
                );
            } else if ids.len() > MAX_TOKEN_PROFILES {
                list.push(
                    FieldError::new(
                        ValidationCode::TooMany,
                        format!("A token may name at most {MAX_TOKEN_PROFILES} profiles."),
                    )
                    .at("profile_ids"),
                );
            } else {
                for (i, id) in ids.iter().enumerate() {
                    if id.is_empty() || id.chars().count() > MAX_ID_CHARS || id.chars().any(char::is_control)
                    {
                        list.push(
                            FieldError::new(
                                ValidationCode::OutOfRange,
                                format!("A profile id has 1 to {MAX_ID_CHARS} characters."),
                            )
                            .at(&format!("profile_ids[{i}]")),
                        );
                    } else if ids[..i].contains(id) {
                        list.push(
                            FieldError::new(ValidationCode::Duplicate, "This profile is named twice.")
                                .at(&format!("profile_ids[{i}]")),
                        );
                    }
                }
            }
        }
        if !(1..=MAX_TOKEN_DAYS).contains(&self.expires_in_days) {
            list.push(
                FieldError::new(
                    ValidationCode::OutOfRange,
                    format!("A token lives 1 to {MAX_TOKEN_DAYS} days."),
                )
                .at("expires_in_days"),
            );
        }
        errors(list)
    }
}

/// An API token as lists show it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenView {
    pub id: String,
    pub name: String,
    /// The account the token acts for (it never exceeds that account's permissions).
    pub account: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Permission>))]
    pub permissions: Permissions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_ids: Option<Vec<String>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// Updated at most once a minute.
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The answer to `POST /api/v1/tokens`: the only time the secret is shown. Its `Debug` never
/// shows it.
#[derive(Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreated {
    /// Send it as `Authorization: Bearer <secret>`. It cannot be shown again.
    pub secret: String,
    pub token: TokenView,
}

impl fmt::Debug for TokenCreated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCreated")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// Who did something, for the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A person in a browser session.
    Account,
    /// An API token.
    Token,
    /// Someone not signed in (a failed login).
    Anonymous,
    /// The `recourse` command line on the server.
    Cli,
}

impl ActorKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            ActorKind::Account => "account",
            ActorKind::Token => "token",
            ActorKind::Anonymous => "anonymous",
            ActorKind::Cli => "cli",
        }
    }

    pub fn parse(text: &str) -> Option<ActorKind> {
        [
            ActorKind::Account,
            ActorKind::Token,
            ActorKind::Anonymous,
            ActorKind::Cli,
        ]
        .into_iter()
        .find(|k| k.as_str() == text)
    }
}

/// One row of the audit log (append-only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// Increasing; page backwards with `?before=seq`.
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub actor_kind: ActorKind,
    /// The account's name (a token: `account/token name`), if anyone signed in.
    pub actor: Option<String>,
    /// Where the request came from (the peer, or what a trusted proxy says).
    pub address: Option<String>,
    /// `profile.create|update|delete`, `route.start`, `route.action`, `session.login`,
    /// `session.login_failed`, `session.logout`, `token.create|revoke`, `account.create|update`,
    /// `role.create`.
    pub action: String,
    pub target: Option<String>,
    /// What changed (a policy edit: the changed JSON paths with before and after values).
    /// Never a password or a token's secret.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub detail: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_roles_are_the_designed_sets() {
        use Permission::*;
        let names = |r: BuiltinRole| r.permissions().iter().map(Permission::as_str).collect::<Vec<_>>();
        assert_eq!(names(BuiltinRole::Admin).len(), 6);
        assert_eq!(
            names(BuiltinRole::ProfileManager),
            ["manage_profiles", "operate_routes", "view_routes"]
        );
        assert_eq!(names(BuiltinRole::Operator), ["operate_routes", "view_routes"]);
        assert_eq!(names(BuiltinRole::Viewer), ["view_routes"]);
        assert_eq!(names(BuiltinRole::Office), ["view_routes", "assign_office"]);
        assert_eq!(names(BuiltinRole::Runner), ["run_dispatches"]);
        // Office assignment never implies profile edits.
        assert!(!BuiltinRole::Office.permissions().contains(ManageProfiles));
    }

    #[test]
    fn permissions_round_trip_as_names_and_unknown_names_are_refused() {
        let set = Permissions::of(&[Permission::Admin, Permission::ViewRoutes]);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#"["view_routes","admin"]"#);
        assert_eq!(serde_json::from_str::<Permissions>(&json).unwrap(), set);
        assert!(serde_json::from_str::<Permissions>(r#"["root"]"#).is_err());
        for p in Permission::ALL {
            assert_eq!(Permission::parse(p.as_str()), Some(p));
        }
    }

    #[test]
    fn set_algebra() {
        let view = Permissions::of(&[Permission::ViewRoutes]);
        let op = BuiltinRole::Operator.permissions();
        assert!(view.is_subset_of(op));
        assert!(!op.is_subset_of(view));
        assert_eq!(op.intersection(view), view);
        assert!(Permissions::NONE.is_subset_of(view));
    }

    #[test]
    fn office_steers_only_office_routes_and_operators_steer_all() {
        let office = BuiltinRole::Office.permissions();
        assert!(may_steer(office, CallerKind::Office));
        for kind in [CallerKind::KanbanTask, CallerKind::Workflow, CallerKind::Utility] {
            assert!(!may_steer(office, kind));
            assert!(may_steer(BuiltinRole::Operator.permissions(), kind));
        }
        assert!(!may_steer(BuiltinRole::Viewer.permissions(), CallerKind::Office));
    }

    #[test]
    fn an_editor_route_is_started_only_by_who_also_runs_dispatches() {
        let op = BuiltinRole::Operator.permissions();
        assert!(may_start(op, CallerKind::Workflow));
        assert!(!may_start(op, CallerKind::Editor), "operate_routes alone");
        assert!(
            !may_start(BuiltinRole::Runner.permissions(), CallerKind::Editor),
            "run_dispatches alone"
        );
        let editor = Permissions::of(&[Permission::OperateRoutes, Permission::RunDispatches]);
        assert!(may_start(editor, CallerKind::Editor));
        assert!(may_start(BuiltinRole::Admin.permissions(), CallerKind::Editor));
        assert!(!may_start(BuiltinRole::Office.permissions(), CallerKind::Editor));
    }

    #[test]
    fn names_and_passwords_are_bounded_and_messages_never_repeat_them() {
        assert!(check_name("ada", "x").is_ok());
        assert!(check_name("ada.lovelace@example-1", "x").is_ok());
        for bad in ["", ".ada", "ada lovelace", "ådа", &"a".repeat(65)] {
            assert!(check_name(bad, "x").is_err(), "{bad}");
        }
        let secret = "short-pw";
        let err = check_password(secret).unwrap_err();
        assert!(!err.message.contains(secret));
        assert!(check_password(&"p".repeat(12)).is_ok());
        assert!(check_password(&"p".repeat(1025)).is_err());
    }

    #[test]
    fn debug_output_never_shows_a_secret() {
        let login = LoginRequest {
            name: "ada".into(),
            password: "correct horse battery".into(),
        };
        assert!(!format!("{login:?}").contains("horse"));
        let patch = AccountPatch {
            password: Some("correct horse battery".into()),
            ..AccountPatch::default()
        };
        assert!(!format!("{patch:?}").contains("horse"));
        let create = AccountCreate {
            name: "ada".into(),
            role: "admin".into(),
            password: "correct horse battery".into(),
        };
        assert!(!format!("{create:?}").contains("horse"));
    }

    #[test]
    fn a_token_request_names_every_problem() {
        let bad = TokenCreate {
            name: String::new(),
            permissions: Permissions::NONE,
            profile_ids: Some(vec!["p".into(), "p".into()]),
            expires_in_days: 0,
        };
        let paths: Vec<String> = bad
            .check()
            .unwrap_err()
            .errors
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(
            paths,
            ["name", "permissions", "profile_ids[1]", "expires_in_days"]
        );
        let good = TokenCreate {
            name: "ci runner".into(),
            permissions: BuiltinRole::Runner.permissions(),
            profile_ids: None,
            expires_in_days: 30,
        };
        assert!(good.check().is_ok());
    }

    /// Whether a name is taken (a built-in role's among them) is the server's answer, 409 like
    /// any taken name (server/tests/it/contract.rs); the request itself is well formed.
    #[test]
    fn a_role_request_with_a_builtin_name_is_well_formed() {
        let r = RoleCreate {
            name: "Admin".into(),
            permissions: Permissions::ALL,
        };
        assert!(r.check().is_ok());
    }
}
