//! Accounts, sessions, API tokens and permissions: who is asking, and whether they may.
//!
//! - Every request resolves to at most one [`Principal`]: an API token from
//!   `Authorization: Bearer rct_...` (never from a query string; on the gateway's routes,
//!   `crate::gateway`, also from `x-api-key`, and never a session there), or a browser session
//!   (cookie `recourse_session`, HttpOnly, SameSite=Lax, Secure over TLS; server-side rows in
//!   SQLite through tower-sessions; the id changes at login; idle expiry 8 h and absolute
//!   expiry 7 days, both judged by the injected clock). Principals are rebuilt from the
//!   database on every request, so disabling an account, changing its role or password, or
//!   revoking a token takes effect on the next request.
//! - What each endpoint, server function and page needs is ONE table, [`rules`], applied by
//!   one route layer ([`crate::web::enforce::enforce`]); a route without an entry is refused. Checks that
//!   depend on the route or profile (an Office-only caller steers only Office routes; a
//!   profile-scoped token reaches only its profiles) run in the handlers through
//!   [`scope`], after the route is read.
//! - Unauthenticated: 401 `unauthenticated` with `WWW-Authenticate: Bearer` (pages redirect
//!   to `/login`). Authenticated without the right: 403 `forbidden`, naming the permission
//!   needed.
//! - Passwords: argon2id ([`password`]); login failures answer one message, whether or not
//!   the account exists, after the same argon2 work; login attempts are rate-limited per
//!   account name and per address ([`limit`]).
//! - Tokens ([`token`]) are shown once, stored as SHA-256, carry a subset of their account's
//!   permissions (intersected again on every request), may be scoped to profiles, always
//!   expire, and can be revoked.
//! - Every login, logout, policy edit, manual action, route start, token, account and role
//!   change is appended to the audit log ([`audit`]) with who, when, from where and what
//!   changed.
//! - [`bootstrap`]: `recourse user add|list`, `recourse token add`, and the demo account of
//!   `serve --demo`.
//!
//! CSRF: cookie sessions also pass [`crate::guard`] (same-origin writes, JSON only under
//! `/api/`), and the cookie is SameSite=Lax, so another site's page can neither send a write
//! with it nor read an answer.

pub mod accounts;
pub mod audit;
pub mod bootstrap;
pub mod limit;
pub mod password;
pub mod rules;
pub mod scope;
pub mod session;
pub mod token;

use crate::{clock::Clock, failure::Failure, store::Store};
use axum::response::{IntoResponse, Response};
use limit::{LoginLimiter, LoginLimits};
use policy::auth::{ActorKind, Permission, Permissions, PrincipalKind, WhoAmI};
use std::{
    net::IpAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
};

/// How the server authenticates, as `serve` configures it.
#[derive(Debug, Clone, Default)]
pub struct AuthSettings {
    /// `serve --demo`: pages sign visitors into the demo account automatically.
    pub demo: bool,
    /// Peers whose `X-Forwarded-For` names the client (reverse proxies the operator runs).
    pub trusted_proxies: Vec<IpAddr>,
    pub login_limits: LoginLimits,
    /// The `Host` names this server answers ([`crate::guard::hosts`], against DNS rebinding):
    /// `None` answers any; `Some(names)` answers loopback names and addresses and these.
    /// `serve` sets it when it listens on a loopback address or is given `--allowed-host`.
    pub allowed_hosts: Option<Vec<String>>,
}

/// The authentication service. Cheap to clone.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    settings: AuthSettings,
    limiter: LoginLimiter,
    /// Once an account exists it is never deleted, so a `true` can be cached.
    accounts_exist: AtomicBool,
    verifications: AtomicU64,
}

impl Auth {
    pub fn new(store: Store, clock: Arc<dyn Clock>, settings: AuthSettings) -> Auth {
        Auth {
            inner: Arc::new(Inner {
                limiter: LoginLimiter::new(settings.login_limits, clock.clone()),
                store,
                clock,
                settings,
                accounts_exist: AtomicBool::new(false),
                verifications: AtomicU64::new(0),
            }),
        }
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.inner.settings
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.inner.clock.now()
    }

    pub(crate) fn limiter(&self) -> &LoginLimiter {
        &self.inner.limiter
    }

    /// How many password verifications this service ran (the timing tests compare paths).
    pub fn verifications(&self) -> u64 {
        self.inner.verifications.load(Ordering::Relaxed)
    }

    /// Checks `password` against `stored` (or, with `None`, against the dummy hash: the same
    /// work), off the async threads.
    pub async fn verify_password(&self, password: &str, stored: Option<String>) -> bool {
        self.inner.verifications.fetch_add(1, Ordering::Relaxed);
        let password = password.to_owned();
        tokio::task::spawn_blocking(move || password::verify(&password, stored.as_deref()))
            .await
            .unwrap_or(false)
    }

    /// Whether any account exists yet.
    pub async fn accounts_exist(&self) -> Result<bool, AuthError> {
        if self.inner.accounts_exist.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let exist = self.inner.store.any_account().await?;
        if exist {
            self.inner.accounts_exist.store(true, Ordering::Relaxed);
        }
        Ok(exist)
    }
}

/// How a principal proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    Session,
    Token { id: String, name: String },
}

/// Who is asking: an account, through a session or one of its tokens, with what that allows.
#[derive(Debug, Clone)]
pub struct Principal {
    pub account_id: String,
    pub account: String,
    pub role: String,
    pub via: Via,
    /// A session: the role's permissions. A token: its own, within the role's.
    pub permissions: Permissions,
    /// A token scoped to profiles reaches only these.
    pub profile_ids: Option<Vec<String>>,
    pub demo: bool,
}

impl Principal {
    pub fn has(&self, p: Permission) -> bool {
        self.permissions.contains(p)
    }

    /// Whether this principal may administer the installation (accounts, roles, every
    /// token, the audit log): `admin`, and no profile scope. Administration reaches every
    /// profile, so a token scoped to profiles never administers, even one stored with `admin`
    /// before such tokens were refused.
    pub fn administers(&self) -> bool {
        self.has(Permission::Admin) && self.profile_ids.is_none()
    }

    pub fn who_am_i(&self) -> WhoAmI {
        WhoAmI {
            name: self.account.clone(),
            kind: match self.via {
                Via::Session => PrincipalKind::Session,
                Via::Token { .. } => PrincipalKind::Token,
            },
            role: self.role.clone(),
            permissions: self.permissions,
            profile_ids: self.profile_ids.clone(),
            demo: self.demo,
        }
    }

    /// Whether `profile_id` is within this principal's reach.
    pub fn reaches_profile(&self, profile_id: &str) -> bool {
        self.profile_ids
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id == profile_id))
    }
}

/// Who did something and from where: what the audit log records. Every request that passed
/// the rules layer carries one (anonymous on public routes).
#[derive(Debug, Clone)]
pub struct Actor {
    pub kind: ActorKind,
    pub name: Option<String>,
    pub address: Option<String>,
}

impl Actor {
    /// The actor as the engine's writer records it (a route start's audit row).
    pub fn to_audit(&self) -> crate::store::audit::AuditActor {
        crate::store::audit::AuditActor {
            kind: self.kind,
            name: self.name.clone(),
            address: self.address.clone(),
        }
    }

    pub fn of(principal: Option<&Principal>, address: Option<String>) -> Actor {
        match principal {
            None => Actor {
                kind: ActorKind::Anonymous,
                name: None,
                address,
            },
            Some(p) => match &p.via {
                Via::Session => Actor {
                    kind: ActorKind::Account,
                    name: Some(p.account.clone()),
                    address,
                },
                Via::Token { name, .. } => Actor {
                    kind: ActorKind::Token,
                    name: Some(format!("{}/{name}", p.account)),
                    address,
                },
            },
        }
    }

    /// The command line on the server.
    pub fn cli() -> Actor {
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty());
        Actor {
            kind: ActorKind::Cli,
            name: user,
            address: None,
        }
    }
}

/// Why a request was not let through, as the client must react.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No principal, or credentials that do not hold (401).
    #[error("unauthenticated")]
    Unauthenticated { message: &'static str },
    /// A principal without the right (403); the message names what is needed.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A login that failed: one answer whatever the reason (401).
    #[error("login failed")]
    LoginFailed,
    /// Too many login attempts (429).
    #[error("rate limited")]
    RateLimited { retry_after_secs: u64 },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The session store, a blocking task or the OS random source failed (503).
    #[error("[AU1003] {0}")]
    Internal(String),
}

impl AuthError {
    pub fn needs(permission: Permission) -> AuthError {
        AuthError::Forbidden(format!("This needs the `{permission}` permission."))
    }

    pub fn needs_any(list: &[Permission]) -> AuthError {
        if let [one] = list {
            return AuthError::needs(*one);
        }
        let names: Vec<String> = list.iter().map(|p| format!("`{p}`")).collect();
        AuthError::Forbidden(format!("This needs one of the permissions {}.", names.join(", ")))
    }

    pub fn unauthenticated() -> AuthError {
        AuthError::Unauthenticated {
            message: "Sign in, or send an API token as `Authorization: Bearer <token>`.",
        }
    }
}

impl From<tower_sessions::session::Error> for AuthError {
    fn from(e: tower_sessions::session::Error) -> Self {
        AuthError::Internal(e.to_string())
    }
}

/// The one rendering of an authentication refusal: through [`Failure`], as every API error.
impl From<AuthError> for Failure {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthenticated { message } => Failure::Unauthenticated(message),
            AuthError::Forbidden(message) => Failure::Forbidden(message),
            AuthError::LoginFailed => Failure::LoginFailed,
            AuthError::RateLimited { retry_after_secs } => Failure::RateLimited { retry_after_secs },
            AuthError::Store(e) => {
                tracing::error!(error = %e, "authentication: storage failure");
                Failure::CannotCheck
            }
            AuthError::Internal(e) => {
                tracing::error!(error = %e, "authentication: internal failure");
                Failure::CannotCheck
            }
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        Failure::from(self).into_response()
    }
}
