//! Browser sessions and API tokens resolved into a [`Principal`], and signing in and out.
//!
//! A session stores only `{account_id, login_ms, seen_ms, credentials_ms}`; everything else (the role, its
//! permissions, whether the account is disabled) is read from the database on every request.
//! Expiry is judged by the injected clock (so tests move time instead of waiting): idle after
//! [`IDLE`] without a request, and at the latest [`ABSOLUTE`] after the login. `seen_ms` is
//! written at most once per [`SEEN_EVERY`], so a busy page does not write on every request.
//! tower-sessions keeps its own wall-clock expiry on the row as well (8 h on inactivity), which
//! only serves to delete abandoned rows.

use super::{password, token, Actor, Auth, AuthError, Principal, Via};
use crate::store::accounts::AccountRow;
use chrono::TimeDelta;
use policy::auth::{ActorKind, BuiltinRole, Permissions};
use serde::{Deserialize, Serialize};
use tower_sessions::Session;

/// The session cookie's name.
pub const COOKIE: &str = "recourse_session";
/// A session ends after this long without a request.
pub const IDLE: TimeDelta = TimeDelta::hours(8);
/// A session ends this long after its login, however busy.
pub const ABSOLUTE: TimeDelta = TimeDelta::days(7);
/// How often a session's last-seen time (and a token's last use) is written.
pub const SEEN_EVERY: TimeDelta = TimeDelta::minutes(1);

const KEY: &str = "recourse.auth";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SessionAuth {
    account_id: String,
    login_ms: i64,
    seen_ms: i64,
    /// The account's `credentials_changed` at login: a new password ends the session.
    credentials_ms: i64,
}

/// What a login proved.
pub struct LoggedIn {
    pub account: AccountRow,
}

impl Auth {
    /// The permissions of a role name: built-in, custom, or none (a role that no longer
    /// exists grants nothing).
    pub async fn role_permissions(&self, role: &str) -> Result<Permissions, AuthError> {
        if let Some(builtin) = BuiltinRole::parse(role) {
            return Ok(builtin.permissions());
        }
        Ok(self
            .store()
            .custom_role(role)
            .await?
            .map_or(Permissions::NONE, |r| r.permissions))
    }

    /// The principal of a request: its bearer token if it has an `Authorization` header (a bad
    /// one is 401, never a fall back to the cookie), else its session, else nobody.
    pub async fn resolve(
        &self,
        headers: &axum::http::HeaderMap,
        session: Option<&Session>,
    ) -> Result<Option<Principal>, AuthError> {
        match token::credentials(headers) {
            token::Credentials::Bearer(secret) => self.resolve_token(secret).await.map(Some),
            token::Credentials::Invalid => Err(AuthError::Unauthenticated {
                message: "The Authorization header is not `Bearer <token>` with a Recourse token.",
            }),
            token::Credentials::None => match session {
                Some(s) => self.resolve_session(s).await,
                None => Ok(None),
            },
        }
    }

    /// The principal of a gateway request: its API token only (`Authorization: Bearer` or
    /// `x-api-key`), never a session.
    pub async fn resolve_key(&self, headers: &axum::http::HeaderMap) -> Result<Option<Principal>, AuthError> {
        match token::gateway_credentials(headers) {
            token::Credentials::Bearer(secret) => self.resolve_token(secret).await.map(Some),
            token::Credentials::Invalid => Err(AuthError::Unauthenticated {
                message: "The API key is not a Recourse token (`rct_...`).",
            }),
            token::Credentials::None => Ok(None),
        }
    }

    async fn resolve_token(&self, secret: &str) -> Result<Principal, AuthError> {
        let invalid = AuthError::Unauthenticated {
            message: "The token is unknown, expired or revoked.",
        };
        let Some((row, account)) = self.store().token_by_secret_hash(&token::digest(secret)).await? else {
            return Err(invalid);
        };
        let now = self.now();
        if row.revoked.is_some() || row.expires <= now {
            return Err(invalid);
        }
        // The demo account's tokens hold only while this server runs `--demo`: started
        // without it, the demo account is nobody, like an unknown token.
        if account.disabled || (account.demo && !self.settings().demo) {
            return Err(invalid);
        }
        let role = self.role_permissions(&account.role).await?;
        // Last use is bookkeeping: written at most once a minute (no write lock on most
        // requests), and a failed write (a read-only or busy database) never refuses the token.
        if row.last_used.is_none_or(|t| now - t >= SEEN_EVERY) {
            if let Err(e) = self
                .store()
                .touch_token(&row.id, now, SEEN_EVERY.num_milliseconds())
                .await
            {
                tracing::warn!(error = %e, token = %row.id, "a token's last use could not be recorded");
            }
        }
        Ok(Principal {
            account_id: row.account_id,
            account: row.account,
            role: account.role,
            via: Via::Token {
                id: row.id,
                name: row.name,
            },
            permissions: row.permissions.intersection(role),
            profile_ids: row.profile_ids,
            demo: account.demo,
        })
    }

    async fn resolve_session(&self, session: &Session) -> Result<Option<Principal>, AuthError> {
        // No cookie, no lookup: anonymous requests never touch the session table.
        if session.id().is_none() {
            return Ok(None);
        }
        let Some(mut data) = session.get::<SessionAuth>(KEY).await? else {
            return Ok(None);
        };
        let now = self.now();
        let now_ms = now.timestamp_millis();
        let expired = now_ms.saturating_sub(data.seen_ms) > IDLE.num_milliseconds()
            || now_ms.saturating_sub(data.login_ms) > ABSOLUTE.num_milliseconds();
        let account = if expired {
            None
        } else {
            self.store().account(&data.account_id).await?
        };
        let Some(account) = account.filter(|a| {
            !a.disabled
                && (!a.demo || self.settings().demo)
                && data.credentials_ms == a.credentials_changed.timestamp_millis()
        }) else {
            // Expired, disabled, deleted, the password changed since, or the demo account's
            // session on a server that no longer runs `--demo`: the session ends.
            session.flush().await?;
            return Ok(None);
        };
        if now_ms.saturating_sub(data.seen_ms) >= SEEN_EVERY.num_milliseconds() {
            data.seen_ms = now_ms;
            session.insert(KEY, &data).await?;
        }
        self.session_principal(account).await.map(Some)
    }

    /// The principal of a session signed into `account`.
    pub async fn session_principal(&self, account: AccountRow) -> Result<Principal, AuthError> {
        let permissions = self.role_permissions(&account.role).await?;
        Ok(Principal {
            account_id: account.id,
            account: account.name,
            role: account.role,
            via: Via::Session,
            permissions,
            profile_ids: None,
            demo: account.demo,
        })
    }

    /// Signs in with a name and password (REST and the login form): rate limits, the
    /// credential check, a new session id, and the audit row (a failure is recorded too, with
    /// the account it aimed at when there is one; a rate-limited attempt is not).
    pub async fn login(
        &self,
        session: &Session,
        name: &str,
        password: &str,
        actor: &Actor,
    ) -> Result<AccountRow, AuthError> {
        let address = actor.address.as_deref().unwrap_or("unknown");
        match self.check_login(name, password, address).await {
            Ok(LoggedIn { account }) => {
                self.start_session(session, &account).await?;
                let who = Actor {
                    kind: ActorKind::Account,
                    name: Some(account.name.clone()),
                    address: actor.address.clone(),
                };
                self.audit(&who, "session.login", Some(&account.id), serde_json::json!({}))
                    .await;
                Ok(account)
            }
            Err(AuthError::LoginFailed) => {
                let target = self
                    .store()
                    .account_by_name(name)
                    .await
                    .ok()
                    .flatten()
                    .map(|a| a.id);
                self.audit(
                    actor,
                    "session.login_failed",
                    target.as_deref(),
                    serde_json::json!({}),
                )
                .await;
                Err(AuthError::LoginFailed)
            }
            Err(e) => Err(e),
        }
    }

    /// Signs out: the session ends here and in the store.
    pub async fn logout(&self, session: &Session, actor: &Actor) -> Result<(), AuthError> {
        let had = session.id().is_some();
        self.end_session(session).await?;
        if had {
            self.audit(actor, "session.logout", None, serde_json::json!({}))
                .await;
        }
        Ok(())
    }

    /// Checks a name and password, counting the attempt against the rate limits first. One
    /// answer for an unknown name, a wrong password and a disabled account, after the same
    /// argon2 work.
    pub async fn check_login(
        &self,
        name: &str,
        password: &str,
        address: &str,
    ) -> Result<LoggedIn, AuthError> {
        if let Err(wait) = self.limiter().check(name, address) {
            return Err(AuthError::RateLimited {
                retry_after_secs: wait.as_secs().max(1),
            });
        }
        self.check_credentials(name, password).await
    }

    /// The credential check alone (no rate limit): what the login benchmark measures.
    pub async fn check_credentials(&self, name: &str, password: &str) -> Result<LoggedIn, AuthError> {
        let bounded = name.chars().count() <= policy::limits::MAX_ACCOUNT_NAME_CHARS
            && password.chars().count() <= policy::limits::MAX_PASSWORD_CHARS;
        let account = if bounded && !name.is_empty() {
            self.store().account_by_name(name).await?
        } else {
            None
        };
        // Over-long input is checked against the dummy hash too (truncated, so the work stays
        // bounded): the answer and its timing are the same as for any other failure.
        let candidate: String = password
            .chars()
            .take(policy::limits::MAX_PASSWORD_CHARS)
            .collect();
        let ok = self
            .verify_password(&candidate, account.as_ref().map(|a| a.password_hash.clone()))
            .await;
        match account {
            Some(account) if ok && bounded && !account.disabled => Ok(LoggedIn { account }),
            _ => Err(AuthError::LoginFailed),
        }
    }

    /// Signs `account` into `session` under a new session id (fixation defence).
    pub async fn start_session(&self, session: &Session, account: &AccountRow) -> Result<(), AuthError> {
        let now_ms = self.now().timestamp_millis();
        session.cycle_id().await?;
        session.clear().await;
        session
            .insert(
                KEY,
                SessionAuth {
                    account_id: account.id.clone(),
                    login_ms: now_ms,
                    seen_ms: now_ms,
                    credentials_ms: account.credentials_changed.timestamp_millis(),
                },
            )
            .await?;
        Ok(())
    }

    /// Ends the session here and in the store.
    pub async fn end_session(&self, session: &Session) -> Result<(), AuthError> {
        session.flush().await?;
        Ok(())
    }

    /// Hashes a new password off the async threads.
    pub async fn hash_password(&self, password: &str) -> Result<String, AuthError> {
        let password = password.to_owned();
        tokio::task::spawn_blocking(move || password::hash(&password))
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?
            .map_err(|e| AuthError::Internal(e.to_string()))
    }
}
