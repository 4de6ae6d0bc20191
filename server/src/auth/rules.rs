//! Who may call what: ONE table. Every REST route, page and form endpoint is listed by method
//! and route template (as axum matched it), every server function by name. The route layer
//! ([`crate::web::enforce::enforce`]) looks each request up here; a route that is not listed is
//! refused (403, and an error in the log), and the permission-matrix test fails for any
//! endpoint of the OpenAPI document or server function without an entry.
//!
//! Checks that depend on the route or the profile (Office-only callers steer only Office
//! routes; profile-scoped tokens reach only their profiles) come after the route is read, in
//! the handlers, through [`super::scope`]. Static assets are routed outside this layer (they
//! are public by construction); unknown paths reach the fallback, which needs a principal.
//!
//! README's "Permissions" table is this table, written out.

use super::{AuthError, Principal};
use policy::auth::Permission::{self, *};
use std::{collections::HashMap, sync::LazyLock};

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, signed in or not.
    Public,
    /// Any principal.
    Authenticated,
    /// A principal holding this permission.
    Permission(Permission),
    /// A principal holding at least one of these.
    AnyOf(&'static [Permission]),
}

impl Access {
    /// `Ok` when `principal` may pass; otherwise 401 (nobody) or 403 (naming what is needed).
    pub fn check(self, principal: Option<&Principal>) -> Result<(), AuthError> {
        if self == Access::Public {
            return Ok(());
        }
        let Some(principal) = principal else {
            return Err(AuthError::unauthenticated());
        };
        match self {
            Access::Public | Access::Authenticated => Ok(()),
            // Administration reaches every profile: never through a token scoped to some.
            Access::Permission(Admin) if principal.profile_ids.is_some() => Err(AuthError::Forbidden(
                "Administration needs a token without a profile scope.".to_owned(),
            )),
            Access::Permission(p) if principal.has(p) => Ok(()),
            Access::Permission(p) => Err(AuthError::needs(p)),
            Access::AnyOf(list) if principal.permissions.contains_any(list) => Ok(()),
            Access::AnyOf(list) => Err(AuthError::needs_any(list)),
        }
    }
}

/// What kind of surface a route is: how a refusal is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// JSON under `/api/`: 401/403 with a JSON body.
    Api,
    /// An HTML page: without a principal, a redirect to `/login`.
    Page,
    /// A Leptos server function (`/api/ui/{name}`).
    ServerFn,
    /// A form endpoint of the login page (`POST /login`, `POST /logout`): redirects.
    Form,
    /// The gateway (`/v1/...`, `crate::gateway`): an API token only, from `Authorization:
    /// Bearer` or `x-api-key` (what SDKs send), never a session; refusals in the style's shape.
    Gateway,
}

/// Reading profiles: viewers, and whoever edits them.
pub const READ_PROFILES: Access = Access::AnyOf(&[ViewRoutes, ManageProfiles]);
/// Steering a route (start, act, work, complete, abandon, clear the result): operators, and
/// Office-only callers for Office routes (checked after the route is read).
pub const STEER: Access = Access::AnyOf(&[OperateRoutes, AssignOffice]);
const VIEW: Access = Access::Permission(ViewRoutes);
/// A gateway call starts and steers a route of its own (caller `utility`).
const OPERATE: Access = Access::Permission(OperateRoutes);
const MANAGE: Access = Access::Permission(ManageProfiles);
const RUN: Access = Access::Permission(RunDispatches);
const ADMIN: Access = Access::Permission(Admin);

/// Every route: `(method, template, surface, access)`. HEAD is looked up as GET.
pub const ROUTES: &[(&str, &str, Surface, Access)] = &[
    // Public.
    ("GET", "/healthz", Surface::Api, Access::Public),
    ("GET", "/readyz", Surface::Api, Access::Public),
    ("GET", "/login", Surface::Page, Access::Public),
    ("POST", "/login", Surface::Form, Access::Public),
    // Signing out without a session does nothing and shows the login page (a stale page's
    // button after the session expired).
    ("POST", "/logout", Surface::Form, Access::Public),
    ("POST", "/api/v1/session", Surface::Api, Access::Public),
    // Any principal.
    ("GET", "/api/openapi.json", Surface::Api, Access::Authenticated),
    ("GET", "/api/v1/session", Surface::Api, Access::Authenticated),
    ("DELETE", "/api/v1/session", Surface::Api, Access::Authenticated),
    ("GET", "/api/v1/tokens", Surface::Api, Access::Authenticated),
    ("POST", "/api/v1/tokens", Surface::Api, Access::Authenticated),
    (
        "DELETE",
        "/api/v1/tokens/{id}",
        Surface::Api,
        Access::Authenticated,
    ),
    // Pages.
    ("GET", "/", Surface::Page, VIEW),
    ("GET", "/profiles", Surface::Page, READ_PROFILES),
    ("GET", "/profiles/new", Surface::Page, READ_PROFILES),
    ("GET", "/profiles/{id}", Surface::Page, READ_PROFILES),
    ("GET", "/profiles/{id}/edit", Surface::Page, READ_PROFILES),
    ("GET", "/routes/{id}", Surface::Page, VIEW),
    ("GET", "/audit", Surface::Page, ADMIN),
    ("GET", "/notifications", Surface::Page, VIEW),
    // The person's own API tokens; accounts and roles for administrators.
    ("GET", "/access", Surface::Page, Access::Authenticated),
    // Profiles.
    ("GET", "/api/v1/profiles", Surface::Api, READ_PROFILES),
    ("POST", "/api/v1/profiles", Surface::Api, MANAGE),
    ("GET", "/api/v1/profiles/{id}", Surface::Api, READ_PROFILES),
    ("PUT", "/api/v1/profiles/{id}", Surface::Api, MANAGE),
    ("DELETE", "/api/v1/profiles/{id}", Surface::Api, MANAGE),
    // Routes.
    ("GET", "/api/v1/routes", Surface::Api, VIEW),
    ("POST", "/api/v1/routes", Surface::Api, STEER),
    ("GET", "/api/v1/routes/{id}", Surface::Api, VIEW),
    ("POST", "/api/v1/routes/{id}/evidence", Surface::Api, RUN),
    ("POST", "/api/v1/routes/{id}/actions", Surface::Api, STEER),
    ("POST", "/api/v1/routes/{id}/work", Surface::Api, STEER),
    ("GET", "/api/v1/routes/{id}/result", Surface::Api, VIEW),
    ("DELETE", "/api/v1/routes/{id}/result", Surface::Api, STEER),
    ("POST", "/api/v1/routes/{id}/result", Surface::Api, RUN),
    ("POST", "/api/v1/routes/{id}/complete", Surface::Api, STEER),
    ("POST", "/api/v1/routes/{id}/abandon", Surface::Api, STEER),
    ("GET", "/api/v1/circuits", Surface::Api, VIEW),
    ("GET", "/api/v1/events", Surface::Api, VIEW),
    // Notifications: the caller's own in-app list, deliveries, the channels rules may name.
    ("GET", "/api/v1/notifications", Surface::Api, VIEW),
    ("POST", "/api/v1/notifications/read", Surface::Api, VIEW),
    ("GET", "/api/v1/notifications/deliveries", Surface::Api, VIEW),
    (
        "GET",
        "/api/v1/notifications/channels",
        Surface::Api,
        READ_PROFILES,
    ),
    // Operations: Prometheus scrapes with an API token.
    ("GET", "/metrics", Surface::Api, VIEW),
    // External runners.
    ("POST", "/api/v1/dispatches/claim", Surface::Api, RUN),
    ("POST", "/api/v1/routes/{id}/claim", Surface::Api, RUN),
    (
        "POST",
        "/api/v1/dispatches/{route_id}/{attempt}/ack",
        Surface::Api,
        RUN,
    ),
    (
        "POST",
        "/api/v1/dispatches/{route_id}/{attempt}/heartbeat",
        Surface::Api,
        RUN,
    ),
    (
        "POST",
        "/api/v1/dispatches/{route_id}/{attempt}/report",
        Surface::Api,
        RUN,
    ),
    // Administration.
    ("GET", "/api/v1/accounts", Surface::Api, ADMIN),
    ("POST", "/api/v1/accounts", Surface::Api, ADMIN),
    ("PATCH", "/api/v1/accounts/{id}", Surface::Api, ADMIN),
    ("GET", "/api/v1/roles", Surface::Api, ADMIN),
    ("POST", "/api/v1/roles", Surface::Api, ADMIN),
    ("PUT", "/api/v1/roles/{name}", Surface::Api, ADMIN),
    ("DELETE", "/api/v1/roles/{name}", Surface::Api, ADMIN),
    ("GET", "/api/v1/audit", Surface::Api, ADMIN),
    // The gateway: SDKs and agents (an API token, as `Authorization: Bearer` or `x-api-key`).
    ("POST", "/v1/chat/completions", Surface::Gateway, OPERATE),
    ("POST", "/v1/messages", Surface::Gateway, OPERATE),
    ("GET", "/v1/models", Surface::Gateway, OPERATE),
    // `serve --test-clock` only.
    ("POST", "/api/v1/test/clock", Surface::Api, ADMIN),
];

/// Every server function, by name.
pub const SERVER_FNS: &[(&str, Access)] = &[
    ("current_session", Access::Public),
    ("list_profiles", READ_PROFILES),
    ("get_profile", READ_PROFILES),
    // Ids and labels of the configured agents and endpoints, for the profile forms.
    ("list_runners", READ_PROFILES),
    ("create_profile", MANAGE),
    ("save_profile", MANAGE),
    ("delete_profile", MANAGE),
    ("list_routes", VIEW),
    ("get_route", VIEW),
    ("get_transcripts", VIEW),
    ("act_on_route", STEER),
    // The signed-in person's notifications, deliveries, and the channels rules may name.
    ("list_notifications", VIEW),
    ("mark_notifications_read", VIEW),
    ("list_deliveries", VIEW),
    ("list_channels", READ_PROFILES),
    ("list_audit", ADMIN),
    // The caller's own API tokens (administrators: every token).
    ("list_tokens", Access::Authenticated),
    ("create_token", Access::Authenticated),
    ("revoke_token", Access::Authenticated),
    ("list_accounts", ADMIN),
    ("list_roles", ADMIN),
    ("create_account", ADMIN),
    ("update_account", ADMIN),
    // "Try an error" in the profile editor: nothing is stored or sent.
    ("try_evidence", READ_PROFILES),
    ("list_fixtures", READ_PROFILES),
    ("fixture_evidence", READ_PROFILES),
];

/// The route every server function is served under.
pub const SERVER_FN_ROUTE: &str = "/api/{*fn_name}";

/// The rule for `method` on `template`.
pub fn route(method: &str, template: &str) -> Option<(Surface, Access)> {
    let method = if method == "HEAD" { "GET" } else { method };
    ROUTES
        .iter()
        .find(|(m, t, _, _)| *m == method && *t == template)
        .map(|(_, _, s, a)| (*s, *a))
}

pub fn server_fn(name: &str) -> Option<Access> {
    SERVER_FNS.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)
}

/// The name of a server function from its name part (`list_profiles1234...`: Leptos appends a
/// hash of the module path).
pub fn server_fn_name(registered: &str) -> &str {
    let tail = registered.rsplit('/').next().unwrap_or(registered);
    tail.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Every registered server function: path -> name.
static REGISTERED: LazyLock<HashMap<&'static str, &'static str>> = LazyLock::new(|| {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| (path, server_fn_name(path)))
        .collect()
});

/// The server function at `path`, if one is registered there.
pub fn registered_server_fn(path: &str) -> Option<&'static str> {
    REGISTERED.get(path).copied()
}

/// Every registered server function's name (the matrix test walks them).
pub fn registered_server_fns() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = REGISTERED.values().copied().collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_listed_once() {
        for (i, (m, t, _, _)) in ROUTES.iter().enumerate() {
            assert!(
                !ROUTES[..i].iter().any(|(m2, t2, _, _)| m2 == m && t2 == t),
                "{m} {t} is listed twice"
            );
        }
        for (i, (n, _)) in SERVER_FNS.iter().enumerate() {
            assert!(!SERVER_FNS[..i].iter().any(|(n2, _)| n2 == n), "{n} twice");
        }
    }

    #[test]
    fn head_is_get_and_unknown_routes_have_no_rule() {
        assert_eq!(route("HEAD", "/healthz"), route("GET", "/healthz"));
        assert_eq!(route("GET", "/api/v1/nope"), None);
        assert_eq!(route("TRACE", "/healthz"), None);
    }

    #[test]
    fn server_function_names_drop_the_module_hash() {
        assert_eq!(server_fn_name("/api/ui/list_profiles1473829"), "list_profiles");
        assert_eq!(server_fn_name("/api/ui/act_on_route"), "act_on_route");
    }

    #[test]
    fn a_principal_scoped_to_profiles_never_administers() {
        use crate::auth::Via;
        let mut p = Principal {
            account_id: "a".into(),
            account: "ada".into(),
            role: "admin".into(),
            via: Via::Session,
            permissions: policy::auth::Permissions::ALL,
            profile_ids: None,
            demo: false,
        };
        assert!(ADMIN.check(Some(&p)).is_ok());
        p.profile_ids = Some(vec!["p1".into()]);
        assert!(matches!(ADMIN.check(Some(&p)), Err(AuthError::Forbidden(_))));
        assert!(!p.administers());
        assert!(MANAGE.check(Some(&p)).is_ok(), "its other rights stay");
    }

    #[test]
    fn only_manage_profiles_edits_profiles() {
        for (m, t, _, a) in ROUTES {
            let edits = t.starts_with("/api/v1/profiles") && *m != "GET";
            if edits {
                assert_eq!(*a, MANAGE, "{m} {t}");
            }
        }
        for name in ["create_profile", "save_profile", "delete_profile"] {
            assert_eq!(server_fn(name), Some(MANAGE));
        }
    }
}
