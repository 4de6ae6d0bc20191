//! Circuits inside a step's transaction: `policy::circuit` decides, this reads the rows it
//! needs and persists what it decided.
//!
//! - [`options`]: each candidate's eligibility for a route (start, switching).
//! - [`gate`]: the dispatch gate for a pending attempt: go (taking expired circuits' probe
//!   leases with a compare-and-set on the row: exactly one route wins) or hold.
//! - [`maintain`]: a success closes the candidate's circuits; a trusted scoped failure opens
//!   one. Giving back the route's probe leases is left to the caller, which batches it.
//!
//! The route whose scoped failure opens a circuit holds its probe lease for as long as it stays
//! on that candidate with recovery pending (its own policy's retry or reset wait is the probe);
//! every other route is held or sees the candidate as not yet eligible. The lease goes back when
//! the holder leaves the candidate, stops or ends; any success closes the circuit.

use super::{pending::Pending, EngineError};
use crate::{
    config::RunnerConfig,
    store::{RouteRow, Tx},
};
use chrono::{DateTime, Utc};
use classifier::Verdict;
use policy::{
    api::{CandidateTarget, CircuitState, DispatcherKind, Profile},
    circuit::{self, GateDecision},
    notify::Notable,
    route::{CandidateOption, EventKind, Hold, RouteState, StateName},
};

/// The circuit keys of a candidate of `profile` (none without a target or a provider).
fn keys_of(profile: &Profile, candidate_id: &str) -> Vec<String> {
    profile.target(candidate_id).map_or_else(Vec::new, |t| {
        circuit::keys(t.provider_id.as_deref(), t.model_id.as_deref())
    })
}

/// Eligibility of each of the profile's candidates for `route_id`, in preference order. A route
/// pinned to one candidate (`pin`) never finds another eligible.
pub(super) async fn options(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    profile: &Profile,
    route_id: &str,
    pin: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<CandidateOption>, EngineError> {
    let mut out = Vec::with_capacity(profile.policy.candidates.len());
    for c in &profile.policy.candidates {
        let keys = keys_of(profile, &c.id);
        let runnable = profile
            .target(&c.id)
            .is_none_or(|t| runner_configured(t, &pending.config))
            && pin.is_none_or(|p| p == c.id);
        let eligibility = if !runnable {
            // Its agent or endpoint left the configuration, or the route is pinned to another:
            // no wait makes it runnable.
            policy::route::Eligibility::Never
        } else if keys.is_empty() {
            policy::route::Eligibility::Now
        } else {
            let rows = pending.circuits(tx, &keys, now).await?;
            circuit::eligibility(&rows, route_id, now)
        };
        out.push(CandidateOption {
            id: c.id.clone(),
            eligibility,
        });
    }
    Ok(out)
}

/// Whether the agent or endpoint a target names is in the configuration (targets of other
/// dispatchers need none).
pub(super) fn runner_configured(target: &CandidateTarget, config: &RunnerConfig) -> bool {
    match (target.dispatcher, target.runner.as_deref()) {
        (DispatcherKind::Acp, Some(id)) => config.agent(id).is_some(),
        (DispatcherKind::Http, Some(id)) => config.endpoint(id).is_some(),
        (DispatcherKind::Acp | DispatcherKind::Http, None) => false,
        (DispatcherKind::Simulated | DispatcherKind::External, _) => true,
    }
}

/// The dispatch gate for `route`'s pending attempt: `None` to go (any probe lease it needs is
/// taken), or the hold to park it behind.
pub(super) async fn gate(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route: &RouteRow,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Result<Option<Hold>, EngineError> {
    let keys = keys_of(profile, &route.state.candidate().id);
    if keys.is_empty() {
        return Ok(None);
    }
    let rows = pending.circuits(tx, &keys, now).await?;
    match circuit::gate(&rows, &route.id, now) {
        GateDecision::Hold(hold) => Ok(Some(hold)),
        GateDecision::Go { probe } => {
            for key in &probe {
                pending.before_circuit_write(tx, now).await?;
                if !tx.take_probe(key, &route.id, now).await? {
                    return Ok(Some(circuit::probe_lost(key, now)));
                }
            }
            Ok(None)
        }
    }
}

/// What [`maintain`] did and leaves to the step's batched writes.
pub(super) struct CircuitChanges {
    /// The route keeps any probe lease it holds; otherwise the batched writes give its
    /// leases back.
    pub(super) keeps_probing: bool,
    /// A circuit opened or closed: held dispatches must look again.
    pub(super) release: bool,
    /// The circuits this transition opened (from closed) or closed, for the outbox: noted
    /// only when the profile's rules ask for circuit events.
    pub(super) moved: Vec<Notable>,
}

/// Opens or closes circuits as this transition says.
#[allow(clippy::too_many_arguments)]
pub(super) async fn maintain(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    prev: &RouteState,
    next: &RouteState,
    kind: EventKind,
    verdict: Option<&Verdict>,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Result<CircuitChanges, EngineError> {
    use StateName as N;
    let keeps_probing = next.candidate().id == prev.candidate().id
        && matches!(next.state_name(), N::RetryWait | N::WaitingForReset | N::Retrying);
    let mut release = false;
    let mut moved = Vec::new();
    let tell = crate::engine::outbox::wants_circuits(profile);
    let target = profile.target(&prev.candidate().id);
    if kind == EventKind::Succeeded {
        let keys = keys_of(profile, &prev.candidate().id);
        if !keys.is_empty() {
            pending.before_circuit_write(tx, now).await?;
            let closed = tx.close_circuits(&keys, now).await?;
            release |= !closed.is_empty();
            if tell {
                moved.extend(closed.iter().map(|key| Notable::circuit_closed(key)));
            }
        }
    }
    if let (EventKind::Failed, Some(v)) = (kind, verdict) {
        let key = circuit::key_opened_by(
            &v.classification,
            target.and_then(|t| t.provider_id.as_deref()),
            target.and_then(|t| t.model_id.as_deref()),
        );
        // Only a candidate with a target has circuits of its own to open.
        if let (Some(key), Some(_)) = (key, target) {
            let current = pending.circuits(tx, std::slice::from_ref(&key), now).await?.pop();
            let opened = circuit::open_after_failure(
                current.as_ref(),
                &key,
                route_id,
                keeps_probing,
                &v.classification,
                now,
            );
            pending.before_circuit_write(tx, now).await?;
            tx.put_circuit(&opened, now).await?;
            release = true;
            let was_closed = current.as_ref().is_none_or(|c| c.state == CircuitState::Closed);
            if tell && was_closed {
                moved.push(Notable::circuit_opened(
                    &key,
                    opened.code.as_deref(),
                    opened.open_until,
                ));
            }
        }
    }
    Ok(CircuitChanges {
        keeps_probing,
        release,
        moved,
    })
}
