//! Managing accounts, roles and API tokens: the services behind `/api/v1/accounts`, `/roles`
//! and `/tokens`, and behind `recourse user add` and `recourse token add`. Input arrives as the
//! wire types of `policy::auth` and is checked once here; every change is audited.

use super::{token, Actor, Auth, AuthError, Principal};
use crate::failure::Failure;
use crate::store::{
    accounts::{is_duplicate, AccountChange, AccountRow, NewAccount, Refused},
    new_id,
    tokens::{NewToken, TokenRow},
    StoreError,
};
use axum::response::{IntoResponse, Response};
use chrono::TimeDelta;
use policy::{
    auth::{
        AccountCreate, AccountPatch, BuiltinRole, Permission, Permissions, RoleCreate, RoleUpdate, RoleView,
        TokenCreate, TokenCreated,
    },
    document::{FieldError, ValidationCode, ValidationErrors},
};
use serde_json::json;

/// Why an account, role or token change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("{0}")]
    Invalid(ValidationErrors),
    #[error("{0}")]
    Conflict(String),
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
}

impl From<ValidationErrors> for ManageError {
    fn from(e: ValidationErrors) -> Self {
        ManageError::Invalid(e)
    }
}

impl From<StoreError> for ManageError {
    fn from(e: StoreError) -> Self {
        ManageError::Auth(AuthError::Store(e))
    }
}

/// An account, role or token refusal, through [`Failure`] as every API error.
impl From<ManageError> for Failure {
    fn from(e: ManageError) -> Self {
        match e {
            ManageError::Invalid(errors) => Failure::Invalid(errors),
            ManageError::Conflict(m) => Failure::Conflict(m),
            ManageError::NotFound(what) => Failure::NotFound(what),
            ManageError::Forbidden(m) => Failure::Forbidden(m),
            ManageError::Auth(e) => Failure::from(e),
        }
    }
}

impl IntoResponse for ManageError {
    fn into_response(self) -> Response {
        Failure::from(self).into_response()
    }
}

/// A guarded store write's refusal, as the API says it.
fn refused(e: Refused, what: &'static str) -> ManageError {
    match e {
        Refused::NotFound => ManageError::NotFound(what),
        Refused::LastAdministrator => ManageError::Conflict(
            "This would leave no enabled administrator; give another account the admin role first."
                .to_owned(),
        ),
        Refused::InUse(n) => ManageError::Conflict(format!(
            "{n} account{} hold{} this role; give {} another role first.",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
            if n == 1 { "it" } else { "them" },
        )),
        Refused::Store(e) => e.into(),
    }
}

/// A built-in role named in a path: they are fixed.
fn builtin_is_fixed(name: &str) -> Result<(), ManageError> {
    match BuiltinRole::parse(name) {
        Some(_) => Err(ManageError::Conflict(
            "Built-in roles are fixed; make a custom role (POST /api/v1/roles) with the permissions you want."
                .to_owned(),
        )),
        None => Ok(()),
    }
}

/// The same refusals, as the pages' port says them (the pages and the API agree: both go
/// through [`Failure`]).
impl From<ManageError> for app::backend::BackendError {
    fn from(e: ManageError) -> Self {
        Failure::from(e).into()
    }
}

fn invalid(path: &str, code: ValidationCode, message: &str) -> ManageError {
    ManageError::Invalid(ValidationErrors {
        errors: vec![FieldError::new(code, message).at(path)],
    })
}

impl Auth {
    /// A role's canonical name (as stored), or a 422 at `path` when there is no such role.
    async fn known_role(&self, name: &str, path: &str) -> Result<String, ManageError> {
        if let Some(builtin) = BuiltinRole::parse(name) {
            return Ok(builtin.name().to_owned());
        }
        match self.store().custom_role(name).await? {
            Some(role) => Ok(role.name),
            None => Err(invalid(
                path,
                ValidationCode::UnknownField,
                "No such role; GET /api/v1/roles lists them.",
            )),
        }
    }

    pub async fn create_account(
        &self,
        actor: &Actor,
        input: &AccountCreate,
        demo: bool,
    ) -> Result<AccountRow, ManageError> {
        input.check()?;
        let role = self.known_role(&input.role, "role").await?;
        let hash = self.hash_password(&input.password).await?;
        let now = self.now();
        let id = new_id("acct", now);
        let account = self
            .store()
            .insert_account(
                NewAccount {
                    id: &id,
                    name: &input.name,
                    password_hash: &hash,
                    role: &role,
                    demo,
                },
                now,
            )
            .await
            .map_err(|e| {
                if is_duplicate(&e) {
                    ManageError::Conflict("An account with this name exists (names ignore case).".to_owned())
                } else {
                    e.into()
                }
            })?;
        self.audit(
            actor,
            "account.create",
            Some(&account.id),
            json!({"name": account.name, "role": account.role}),
        )
        .await;
        Ok(account)
    }

    /// Changes an account's role, disables or enables it, or sets a new password (its
    /// sessions end). Takes effect on the account's next request.
    pub async fn update_account(
        &self,
        actor: &Actor,
        id: &str,
        patch: &AccountPatch,
    ) -> Result<AccountRow, ManageError> {
        patch.check()?;
        let before = self
            .store()
            .account(id)
            .await?
            .ok_or(ManageError::NotFound("account"))?;
        let role = match &patch.role {
            Some(r) => Some(self.known_role(r, "role").await?),
            None => None,
        };
        let hash = match &patch.password {
            Some(p) => Some(self.hash_password(p).await?),
            None => None,
        };
        let after = self
            .store()
            .update_account(
                id,
                AccountChange {
                    role: role.as_deref(),
                    disabled: patch.disabled,
                    password_hash: hash.as_deref(),
                },
                self.now(),
            )
            .await
            .map_err(|e| refused(e, "account"))?;
        let mut detail = serde_json::Map::new();
        if before.role != after.role {
            detail.insert("role".into(), json!({"before": before.role, "after": after.role}));
        }
        if before.disabled != after.disabled {
            detail.insert(
                "disabled".into(),
                json!({"before": before.disabled, "after": after.disabled}),
            );
        }
        if hash.is_some() {
            detail.insert("password_changed".into(), json!(true));
        }
        self.audit(actor, "account.update", Some(&after.id), detail.into())
            .await;
        Ok(after)
    }

    /// Built-in roles first, then custom ones by name.
    pub async fn roles(&self) -> Result<Vec<RoleView>, ManageError> {
        let mut out: Vec<RoleView> = BuiltinRole::ALL
            .into_iter()
            .map(|r| RoleView {
                name: r.name().to_owned(),
                permissions: r.permissions(),
                builtin: true,
            })
            .collect();
        out.extend(self.store().custom_roles().await?.into_iter().map(|r| RoleView {
            name: r.name,
            permissions: r.permissions,
            builtin: false,
        }));
        Ok(out)
    }

    pub async fn create_role(&self, actor: &Actor, input: &RoleCreate) -> Result<RoleView, ManageError> {
        input.check()?;
        if BuiltinRole::parse(&input.name).is_some() {
            return Err(ManageError::Conflict(
                "That is a built-in role's name (names ignore case); choose another.".to_owned(),
            ));
        }
        self.store()
            .insert_role(&input.name, input.permissions, self.now())
            .await
            .map_err(|e| {
                if is_duplicate(&e) {
                    ManageError::Conflict("A role with this name exists (names ignore case).".to_owned())
                } else {
                    e.into()
                }
            })?;
        self.audit(
            actor,
            "role.create",
            Some(&input.name),
            json!({"permissions": input.permissions}),
        )
        .await;
        Ok(RoleView {
            name: input.name.clone(),
            permissions: input.permissions,
            builtin: false,
        })
    }

    /// Gives a custom role new permissions: its accounts have them from their next request.
    pub async fn update_role(
        &self,
        actor: &Actor,
        name: &str,
        input: &RoleUpdate,
    ) -> Result<RoleView, ManageError> {
        builtin_is_fixed(name)?;
        input.check()?;
        let before = self
            .store()
            .update_role(name, input.permissions)
            .await
            .map_err(|e| refused(e, "role"))?;
        self.audit(
            actor,
            "role.update",
            Some(&before.name),
            json!({"permissions": {"before": before.permissions, "after": input.permissions}}),
        )
        .await;
        Ok(RoleView {
            name: before.name,
            permissions: input.permissions,
            builtin: false,
        })
    }

    /// Deletes a custom role that no account holds.
    pub async fn delete_role(&self, actor: &Actor, name: &str) -> Result<(), ManageError> {
        builtin_is_fixed(name)?;
        let gone = self
            .store()
            .delete_role(name)
            .await
            .map_err(|e| refused(e, "role"))?;
        self.audit(
            actor,
            "role.delete",
            Some(&gone.name),
            json!({"permissions": gone.permissions}),
        )
        .await;
        Ok(())
    }

    /// A new token for the principal's own account: its permissions a subset of the
    /// principal's, its profiles within the principal's scope.
    pub async fn create_token(
        &self,
        actor: &Actor,
        principal: &Principal,
        input: &TokenCreate,
    ) -> Result<TokenCreated, ManageError> {
        input.check()?;
        let beyond: Vec<Permission> = input
            .permissions
            .iter()
            .filter(|p| !principal.permissions.contains(*p))
            .collect();
        if !beyond.is_empty() {
            let names: Vec<String> = beyond.iter().map(|p| format!("`{p}`")).collect();
            return Err(ManageError::Forbidden(format!(
                "A token carries only permissions its creator holds; you do not hold {}.",
                names.join(", ")
            )));
        }
        if let Some(scope) = &principal.profile_ids {
            let within = input
                .profile_ids
                .as_ref()
                .is_some_and(|ids| ids.iter().all(|id| scope.contains(id)));
            if !within {
                return Err(ManageError::Forbidden(
                    "A token scoped to profiles may create tokens only for those profiles.".to_owned(),
                ));
            }
        }
        let account = self
            .store()
            .account(&principal.account_id)
            .await?
            .ok_or(ManageError::NotFound("account"))?;
        self.issue_token(actor, &account, input).await
    }

    /// Makes a token for `account` (the command line's way, and the end of
    /// [`Auth::create_token`]). Its permissions must lie within the account's role.
    pub async fn issue_token(
        &self,
        actor: &Actor,
        account: &AccountRow,
        input: &TokenCreate,
    ) -> Result<TokenCreated, ManageError> {
        input.check()?;
        if input.profile_ids.is_some() && input.permissions.contains(Permission::Admin) {
            return Err(invalid(
                "profile_ids",
                ValidationCode::OutOfRange,
                "A token scoped to profiles cannot carry `admin`: administration reaches every profile. \
                 Leave profile_ids out, or leave `admin` out.",
            ));
        }
        let role = self.role_permissions(&account.role).await?;
        if !input.permissions.is_subset_of(role) {
            return Err(ManageError::Forbidden(
                "A token carries only permissions its account's role grants.".to_owned(),
            ));
        }
        if let Some(ids) = &input.profile_ids {
            for (i, id) in ids.iter().enumerate() {
                if self.store().profile(id).await?.is_none() {
                    return Err(invalid(
                        &format!("profile_ids[{i}]"),
                        ValidationCode::UnknownField,
                        "No such profile.",
                    ));
                }
            }
        }
        let now = self.now();
        let secret = token::generate().map_err(|e| AuthError::Internal(e.to_string()))?;
        let id = new_id("tok", now);
        let expires = policy::time::after(now, TimeDelta::days(i64::from(input.expires_in_days)));
        let row = self
            .store()
            .insert_token(
                NewToken {
                    id: &id,
                    account_id: &account.id,
                    name: &input.name,
                    secret_hash: &token::digest(&secret),
                    permissions: input.permissions,
                    profile_ids: input.profile_ids.as_deref(),
                    expires,
                },
                now,
            )
            .await?;
        self.audit(
            actor,
            "token.create",
            Some(&row.id),
            json!({"name": row.name, "account": row.account, "permissions": row.permissions,
                   "profile_ids": row.profile_ids, "expires_at": row.expires}),
        )
        .await;
        Ok(TokenCreated {
            secret,
            token: row.view(),
        })
    }

    /// Tokens the principal may see: every token for administrators, else its account's.
    pub async fn visible_tokens(&self, principal: &Principal) -> Result<Vec<TokenRow>, ManageError> {
        let only = (!principal.administers()).then_some(principal.account_id.as_str());
        Ok(self.store().tokens(only).await?)
    }

    /// Revokes a token of the principal's account (any token, for administrators). Another
    /// account's token is "not found" to everyone else.
    pub async fn revoke_token(
        &self,
        actor: &Actor,
        principal: &Principal,
        id: &str,
    ) -> Result<(), ManageError> {
        let row = self
            .store()
            .token(id)
            .await?
            .filter(|t| principal.administers() || t.account_id == principal.account_id)
            .ok_or(ManageError::NotFound("token"))?;
        self.store().revoke_token(&row.id, self.now()).await?;
        self.audit(
            actor,
            "token.revoke",
            Some(&row.id),
            json!({"name": row.name, "account": row.account}),
        )
        .await;
        Ok(())
    }
}

/// Permissions from names (the command line).
pub fn parse_permissions(names: &[String]) -> Result<Permissions, String> {
    names
        .iter()
        .map(|n| Permission::parse(n).ok_or_else(|| format!("unknown permission `{n}`")))
        .collect()
}
