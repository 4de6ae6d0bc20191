//! The data the API, the event stream and the UI share, in one place.
//!
//! Wire types live next to the logic that produces them (the policy document in
//! [`crate::document`], decisions in [`crate::evaluator`], classifications in
//! [`crate::classification`]); this module re-exports them and adds the two views built from a
//! route: the [`RouteSnapshot`] (API responses, 409 bodies) and the [`RouteEventPayload`]
//! (Server-Sent Events). Both are flat on purpose: a browser reads the stable code, class,
//! retry ordinal and maximum, absolute UTC deadline, pending outcome and generation without
//! walking the state machine's internals. No raw provider text reaches them: a decision holds
//! codes, rule ids and the catalogue version only.

pub use crate::{
    classification::{Classification, Gate},
    document::{
        CandidatePolicy, ClassPolicy, FieldError, OnExhausted, PolicyDocument, RetryPolicy, ValidationCode,
        ValidationError, ValidationErrors, WaitForResetPolicy,
    },
    evaluator::{Decision, DecisionKind, DecisionReason, WaitSkipReason},
    route::{
        ActionReason, Attempt, AttemptKind, DispatchState, EventKind, Hold, ManualAction, RouteEffect,
        StateName,
    },
};

use crate::{
    classification::ClassState,
    route::{RouteState, Transition},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The authoritative view of one route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteSnapshot {
    pub generation: u64,
    pub state: StateName,
    pub candidate_id: String,
    /// Position of the candidate in the profile when it was chosen.
    pub candidate_index: u32,
    pub cycle: u32,
    /// Candidates skipped in this cycle, sorted.
    pub excluded_candidates: Vec<String>,
    pub attempt: Option<Attempt>,
    /// Absolute UTC deadline of the pending wait or retry.
    pub deadline: Option<DateTime<Utc>>,
    /// The resource circuit the pending attempt is parked behind, and until when the dispatch
    /// gate waits before it looks again (sooner if the circuit closes).
    pub hold: Option<Hold>,
    /// The stable code of the latest decision (`"unclassified"` when there was none to find).
    pub code: Option<String>,
    pub class: Option<ClassState>,
    pub catalogue_version: Option<String>,
    /// Retry ordinal of the pending or running retry.
    pub retry_ordinal: Option<u32>,
    pub max_retries: Option<u32>,
    /// What the latest decision set in motion (`retry`, `wait_for_reset`, `skip`, ...).
    pub pending_outcome: Option<DecisionKind>,
    /// What happens once recovery on this candidate is used up.
    pub on_exhausted: Option<OnExhausted>,
    pub action_reason: Option<ActionReason>,
    /// The latest decision in full, with its policy snapshot.
    pub decision: Option<Decision>,
    /// Manual actions that would change the route now.
    pub allowed_actions: Vec<ManualAction>,
}

impl RouteSnapshot {
    pub fn of(state: &RouteState) -> RouteSnapshot {
        let d = state.decision();
        RouteSnapshot {
            generation: state.generation(),
            state: state.state_name(),
            candidate_id: state.candidate().id.clone(),
            candidate_index: state.candidate().index,
            cycle: state.cycle().number(),
            excluded_candidates: state.cycle().excluded().map(str::to_owned).collect(),
            attempt: state.attempt(),
            deadline: state.deadline(),
            hold: state.hold().cloned(),
            code: d.map(|d| d.code.map_or("unclassified", |c| c.as_str()).to_owned()),
            class: d.map(|d| d.class),
            catalogue_version: d.map(|d| d.catalogue_version.clone()),
            retry_ordinal: d.and_then(|d| d.retry_ordinal),
            max_retries: d.map(|d| d.max_retries),
            pending_outcome: d.map(|d| d.kind),
            on_exhausted: d.and_then(|d| d.on_exhausted),
            action_reason: state.action_reason(),
            decision: d.cloned(),
            allowed_actions: state.allowed_actions(),
        }
    }
}

impl RouteState {
    /// The wire view of this state.
    pub fn snapshot(&self) -> RouteSnapshot {
        RouteSnapshot::of(self)
    }
}

/// One accepted change of a route, as the event stream sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteEventPayload {
    pub event: EventKind,
    /// `None` for the route's creation.
    pub from: Option<StateName>,
    pub to: StateName,
    pub generation: u64,
    pub at: DateTime<Utc>,
    /// The decision this change made, if any.
    pub decision: Option<Decision>,
    pub snapshot: RouteSnapshot,
}

impl RouteEventPayload {
    /// Describes `transition`, which `event` caused on `from` (`None` for [`crate::route::start`]).
    pub fn new(
        event: EventKind,
        from: Option<&RouteState>,
        transition: &Transition,
        at: DateTime<Utc>,
    ) -> RouteEventPayload {
        RouteEventPayload {
            event,
            from: from.map(RouteState::state_name),
            to: transition.next.state_name(),
            generation: transition.next.generation(),
            at,
            decision: transition.decision.clone(),
            snapshot: transition.next.snapshot(),
        }
    }
}
