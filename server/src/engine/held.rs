//! Held output, the server's part: the facts the route's step decides from, and the failure
//! that answers a refused start. The decisions are `policy::route::held`'s, in the step, and
//! the fact that the route holds output is in the route's state, committed with the step:
//! 1. An attempt fails with a confirmed delivery, no cancel and no tool call seen, on an agent
//!    that advertised `loadSession` and whose operator said its session keeps a failed turn's
//!    output (`resume_after_output`). The `acp` dispatcher reports the evidence with the
//!    session it holds (`Evidence::session`); it classifies and evaluates nothing for this.
//! 2. The failure's transaction (`transact`) classifies the evidence once and, when it shows
//!    real output and no other effect, offers the session to the step with the gate the
//!    evidence would get were it resumed (`classifier::resumed_gate`). The step grants it when
//!    the candidate's policy would retry that same candidate.
//! 3. While the route holds output, a pending attempt's start carries what it would run on
//!    ([`launch_facts`]: the agent, the digest of the work). The step launches the retry that
//!    session waits for with the session to load, and refuses any other start: it is recorded
//!    as started, then fails at once in the same transaction ([`refusal`]), and the route stops
//!    for a person. No dispatcher is asked. Live pages are told both changes, the start first
//!    (`TxOutcome::Committed::earlier`).
//!
//! A person's "skip now" during the retry wait stays in the same cycle, so the next candidate
//! is not started on it: the route stops, and a second, explicit decision from
//! `action_required` (which starts a new cycle, and ends the held output) moves on.

use super::{input::work_digest, pending::Pending, EngineError};
use crate::store::{RouteRow, Tx};
use chrono::{DateTime, Utc};
use policy::{
    api::{DispatcherKind, Profile},
    classification::{Classification, Gate, GateReason, UnclassifiedReason},
    route::{FailureReport, LaunchFacts, RouteEvent},
};

/// What the pending attempt of `route` would run on, were it started now: given only while
/// the route holds output (nothing else asks). Reads the route's work in the transaction,
/// after flushing what it queued.
pub(super) async fn launch_facts(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route: &RouteRow,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Result<Option<LaunchFacts>, EngineError> {
    if route.state.held().is_none() {
        return Ok(None);
    }
    // Only an agent Recourse starts can load a session.
    let agent_id = profile
        .target(&route.state.candidate().id)
        .cloned()
        .map(|t| super::dispatch::launched_as(route.caller.kind, t))
        .filter(|t| t.dispatcher == DispatcherKind::Acp)
        .and_then(|t| t.runner);
    pending.flush(tx, now).await?;
    let work_digest = tx.route_work(&route.id).await?.map(|work| work_digest(&work));
    Ok(Some(LaunchFacts {
        agent_id,
        work_digest,
    }))
}

/// The failure of a start the step refused (`RouteEffect::RefuseStart`), for the attempt
/// recorded as started at `generation`: not a provider error, and the output is held
/// elsewhere, so nothing may run it again automatically.
pub(super) fn refusal(generation: u64) -> RouteEvent {
    RouteEvent::Failed(Box::new(FailureReport {
        evidence_generation: generation,
        classification: Classification::unclassified(
            UnclassifiedReason::NotProviderError,
            classifier::Catalogue::builtin().version().to_owned(),
        ),
        gate: Gate::deny(GateReason::AssistantOutput),
        policy: None,
        resume: None,
    }))
}
