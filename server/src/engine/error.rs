//! [`EngineError`]: why a submission did not commit, classified by how the caller reacts.
//! `crate::failure` maps it to HTTP and to the UI's errors, once.

use crate::store::StoreError;
use classifier::Verdict;
use policy::{document::ValidationErrors, route::TransitionError, wire::RouteSnapshot};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("[EN1001] no such route")]
    RouteNotFound(String),
    #[error("[EN1002] no such profile")]
    ProfileNotFound(String),
    /// Stale generation, or not allowed now: the route is untouched; here is where it is.
    #[error("[EN1003] rejected: {reason}")]
    Rejected {
        reason: String,
        error: Option<TransitionError>,
        snapshot: Box<RouteSnapshot>,
        verdict: Option<Box<Verdict>>,
    },
    /// The input was refused before it reached a route (every problem with its field path).
    #[error("[EN1008] {0}")]
    Invalid(ValidationErrors),
    /// The decision could not be written: nothing was armed, launched or repeated.
    #[error("[EN1004] the decision could not be written durably: {0}")]
    Storage(#[source] StoreError),
    /// A stored row that does not decode (the message names the table and the row).
    #[error("[EN1005] {0}")]
    Corrupt(String),
    /// The request conflicts with what exists (the message is safe to show).
    #[error("[EN1006] {0}")]
    Conflict(String),
    #[error("[EN1007] the engine task failed")]
    Task,
    /// A due timer another replica is firing right now (its row is locked by that replica's
    /// transaction): nothing was done here, and nothing needs to be.
    #[error("[EN1009] another replica is firing this timer")]
    ClaimedElsewhere,
    /// The engine is stopping (`Engine::shutdown`): it takes no new work. Nothing changed.
    #[error("[EN1010] the server is stopping")]
    Stopping,
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Sql(_) => EngineError::Storage(e),
            StoreError::Corrupt { .. } => EngineError::Corrupt(e.to_string()),
        }
    }
}
