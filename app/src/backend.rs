//! The backend port (server side only): the one trait through which pages and server
//! functions reach profiles and routes. `server` implements it over SQLite and the route
//! engine and hands it to Leptos as context; tests hand in a fake. `app` never touches SQL.
//!
//! Why boxed futures instead of `async fn` in the trait: the port travels as
//! `Arc<dyn Backend>` through Leptos context, so it must be object safe, and a boxed future
//! is what `async-trait` would generate anyway, without the extra dependency.
//!
//! Use from a server function:
//!
//! ```ignore
//! let backend = app::backend::backend()?; // Arc<dyn Backend> from context
//! let profiles = backend.list_profiles().await?;
//! ```

use leptos::prelude::use_context;
use policy::{
    api::{
        ActionOutcome, ManualActionRequest, Profile, ProfileSummary, RouteDetail, RouteFilter, RouteSummary,
        RunnerOption,
    },
    auth::{
        AccountCreate, AccountPatch, AccountView, AuditEntry, RoleView, TokenCreate, TokenCreated, TokenView,
    },
    document::ValidationErrors,
    input::ValidatedProfile,
    notify::{ChannelOption, DeliveryStatus, DeliveryView, NotificationPage},
    trial::EvidenceTrial,
    wire::RouteSnapshot,
};
use std::{fmt, future::Future, pin::Pin, sync::Arc};

/// A boxed, sendable future: what every port method returns.
pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a port call failed, classified by how the caller reacts. The server builds it from its
/// own errors in one place (the same place that builds its REST responses), so the UI and the
/// API always agree on what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// No such profile or route (`what` is `"profile"` or `"route"`).
    NotFound { what: &'static str },
    /// The input was rejected; every problem with its field path (REST: 422).
    Invalid(ValidationErrors),
    /// The write was based on an outdated revision, or conflicts with current data (e.g. a
    /// profile with open routes cannot be deleted). The message is safe to show.
    Conflict(String),
    /// The route changed first (a stale generation) or the request does not apply to it now;
    /// nothing was done, and this is how the route is.
    RouteChanged(Box<RouteSnapshot>),
    /// The store could not be read or written. The cause is logged on the server; this
    /// carries nothing internal.
    Unavailable,
    /// The signed-in person may not do this here (for example, Office assignment steers only
    /// Office routes); the message says what is needed and is safe to show.
    Forbidden(String),
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::NotFound { what } => write!(f, "no such {what}"),
            BackendError::Invalid(errors) => write!(f, "{errors}"),
            BackendError::Conflict(message) => f.write_str(message),
            BackendError::RouteChanged(_) => f.write_str("the route changed first; nothing was done"),
            BackendError::Unavailable => f.write_str("the store is unavailable; try again"),
            BackendError::Forbidden(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for BackendError {}

/// The operations the UI needs. Implemented by `server` (SQLite and the route engine).
pub trait Backend: Send + Sync + 'static {
    /// All profiles, by name.
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>>;

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>>;

    /// Stores a new profile (parsed at the server function's boundary); returns it with its
    /// normalized version-1 document.
    fn create_profile(&self, profile: ValidatedProfile) -> BackendFuture<'_, Result<Profile, BackendError>>;

    /// Replaces a profile. Affects the next decision of its routes only: pending timers and
    /// history stay as they are.
    fn update_profile(
        &self,
        id: String,
        profile: ValidatedProfile,
    ) -> BackendFuture<'_, Result<Profile, BackendError>>;

    /// Deletes a profile with no open routes (`Conflict` otherwise).
    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>>;

    /// The agents and endpoints of the server's configuration as it is now (it may be reloaded
    /// at any time): agents first, each in the file's order. Ids and labels only.
    fn list_runners(&self) -> BackendFuture<'_, Result<Vec<RunnerOption>, BackendError>>;

    /// Routes matching `filter`, most recently changed first.
    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>>;

    /// One route with its history and dispatch records.
    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>>;

    /// What the agents of a route's recent attempts said and did, oldest attempt first.
    fn transcripts(
        &self,
        id: String,
    ) -> BackendFuture<'_, Result<Vec<policy::transcript::AttemptTranscript>, BackendError>>;

    /// Performs a manual action. `Applied` with the new snapshot, or `Conflict` with the
    /// current one when `expected_generation` is stale. Cancel is idempotent.
    fn perform_action(
        &self,
        route_id: String,
        request: ManualActionRequest,
    ) -> BackendFuture<'_, Result<ActionOutcome, BackendError>>;

    /// The signed-in person's in-app notifications, newest first, before `before` (a `seq`)
    /// when given, and how many are unread.
    fn notifications(&self, before: Option<i64>)
        -> BackendFuture<'_, Result<NotificationPage, BackendError>>;

    /// Marks the signed-in person's notifications read up to `through_seq`; how many stay
    /// unread.
    fn mark_notifications_read(&self, through_seq: u64) -> BackendFuture<'_, Result<u64, BackendError>>;

    /// Deliveries to configured channels (webhooks, e-mail) in `status` (all when `None`),
    /// newest first.
    fn deliveries(
        &self,
        status: Option<DeliveryStatus>,
    ) -> BackendFuture<'_, Result<Vec<DeliveryView>, BackendError>>;

    /// The channels a profile's notification rules may name now (`in_app`, then the server
    /// configuration's): ids, kinds and labels only.
    fn list_channels(&self) -> BackendFuture<'_, Result<Vec<ChannelOption>, BackendError>>;

    /// One page of the audit log, newest first, before `before` (a `seq`) when given
    /// (administrators only).
    fn audit_page(&self, before: Option<i64>) -> BackendFuture<'_, Result<Vec<AuditEntry>, BackendError>>;

    /// The caller's API tokens (every account's, for administrators), never a secret.
    fn tokens(&self) -> BackendFuture<'_, Result<Vec<TokenView>, BackendError>>;

    /// A new token for the caller's own account, within the caller's permissions and
    /// profiles; the answer carries the secret, this once.
    fn create_token(&self, input: TokenCreate) -> BackendFuture<'_, Result<TokenCreated, BackendError>>;

    /// Revokes one of the caller's tokens (any token, for administrators).
    fn revoke_token(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>>;

    /// Every account, by name (administrators only).
    fn accounts(&self) -> BackendFuture<'_, Result<Vec<AccountView>, BackendError>>;

    /// Built-in roles, then custom ones (administrators only).
    fn roles(&self) -> BackendFuture<'_, Result<Vec<RoleView>, BackendError>>;

    /// A new account (administrators only).
    fn create_account(&self, input: AccountCreate) -> BackendFuture<'_, Result<AccountView, BackendError>>;

    /// A new role, disabled or enabled, or a new password (administrators only). Refused with
    /// `Conflict` when it would leave no enabled administrator.
    fn update_account(
        &self,
        id: String,
        patch: AccountPatch,
    ) -> BackendFuture<'_, Result<AccountView, BackendError>>;

    /// Classifies an evidence envelope as of the server's now, as `recourse classify` would
    /// (`Invalid` at `envelope` when it cannot be read as one); nothing is stored or sent.
    fn try_evidence(
        &self,
        envelope: serde_json::Value,
    ) -> BackendFuture<'_, Result<EvidenceTrial, BackendError>>;

    /// The names of the classifier catalogue's fixtures (`source/case`), sorted.
    fn fixtures(&self) -> BackendFuture<'_, Result<Vec<String>, BackendError>>;

    /// One fixture's evidence envelope; `NotFound` for a name that is not one.
    fn fixture(&self, name: String) -> BackendFuture<'_, Result<serde_json::Value, BackendError>>;
}

/// The backend provided as Leptos context by the server (pages and server functions).
pub fn backend() -> Result<Arc<dyn Backend>, BackendError> {
    use_context::<Arc<dyn Backend>>().ok_or(BackendError::Unavailable)
}

// The port must stay object safe: this fails to compile otherwise.
const _: Option<&dyn Backend> = None;
