//! The transition owner's body, inside the writer's transaction: an input classified once
//! (evidence against the route's current generation and its candidate's current policy), the
//! route machine's step, and the writes that go with a change, queued for the job's commit:
//! the compare-and-set and its history row, the dispatch records, the timer row its plan arms,
//! the circuits and the outbox. The job bodies around it (`tx.rs`)
//! call [`transact`]; nothing here performs an effect.

use super::{circuits, input::Evidence, pending::Pending, plan::Plan, EngineError, Input};
use crate::store::{due_ms, DispatchInsert, HistoryInsert, RouteRow, TimerKind, Tx, Writes};
use crate::{engine::outbox::Change, metrics::FailureCause};
use chrono::{DateTime, Utc};
use classifier::{classify, Verdict};
use policy::{
    api::{CallerKind, CandidateTarget, DispatchOutcome, DispatcherKind, Profile, Work},
    document::ValidatedPolicyDocument,
    route::{
        step, DispatchState, EventKind, FailureReport, ResumeOffer, RouteEvent, RouteState, StateName,
        Transition, TransitionError,
    },
};

/// What one step did.
// (Short-lived and moved once; boxing `Committed` buys nothing.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum TxOutcome {
    Committed {
        prev: RouteState,
        transition: Transition,
        kind: EventKind,
        verdict: Option<Box<Verdict>>,
        /// The transition's effects, read: what runs after the commit.
        plan: Plan,
        /// Held dispatches must look again after the commit (a circuit opened or closed).
        release_holds: bool,
        /// What `Launch` needs, when the step asks for one: read in this same transaction, so
        /// the launch need not read it again.
        launch: Option<Box<LaunchContext>>,
        /// A change committed before this one in the same transaction, to be told first (a
        /// start refused where it was recorded); its effects do not run.
        earlier: Option<Box<Told>>,
    },
    Unchanged {
        state: RouteState,
        /// What runs all the same (a restart's re-arm wakes the scheduler).
        plan: Plan,
        verdict: Option<Box<Verdict>>,
    },
    Rejected {
        state: RouteState,
        error: Option<TransitionError>,
        verdict: Option<Box<Verdict>>,
    },
}

/// The attempt's candidate target and the caller's invocation id, for its dispatcher.
#[derive(Debug, Clone)]
pub(crate) struct LaunchContext {
    pub(crate) target: Option<CandidateTarget>,
    pub(crate) invocation_id: String,
    /// The route's work, when the step that asked for the launch had it in hand (a route's
    /// start); `None`: the dispatcher that wants it reads it.
    pub(crate) work: Option<Work>,
}

/// A committed change told to live pages after the commit, without its effects.
pub(crate) struct Told {
    pub(crate) prev: RouteState,
    pub(crate) transition: Transition,
    pub(crate) kind: EventKind,
    pub(crate) release_holds: bool,
}

/// A step that changed nothing and asks for nothing.
pub(crate) fn unchanged(state: RouteState) -> TxOutcome {
    TxOutcome::Unchanged {
        state,
        plan: Plan::default(),
        verdict: None,
    }
}

/// The dispatcher that runs the state's attempt: its candidate's, unless the caller runs the
/// route's attempts itself (they are leased: `external`).
pub(crate) fn dispatcher_of(caller: CallerKind, profile: &Profile, state: &RouteState) -> DispatcherKind {
    let target = profile
        .target(&state.candidate().id)
        .map_or(DispatcherKind::External, |t| t.dispatcher);
    super::dispatch::dispatcher_for(caller, target)
}

/// The transition owner's body: classify evidence against the route's current generation and
/// the profile's current policy, step the route machine, and queue the compare-and-set, the
/// history row, the dispatch records, the timer row and the circuit changes.
pub(crate) async fn transact(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route: RouteRow,
    profile: &Profile,
    input: Input,
    now: DateTime<Utc>,
) -> Result<TxOutcome, EngineError> {
    let route_id = route.id.as_str();
    let prev = route.state;
    let mut new_work = None;
    let mut result = None;
    let mut adopt = false;
    let (event, mut verdict) = match input {
        Input::Event(e) => (e, None),
        Input::Orphaned => {
            // Read with the row locked: another replica may have taken the route up since it
            // was found orphaned, or its owner may have renewed its lease.
            if tx.owner_alive(route_id, now).await? {
                return Ok(unchanged(prev));
            }
            adopt = true;
            (RouteEvent::Restarted, None)
        }
        Input::Succeeded {
            generation,
            result: body,
        } => {
            result = Some(body);
            (RouteEvent::Succeeded { generation }, None)
        }
        Input::Work {
            expected_generation,
            work,
        } => {
            new_work = work;
            (RouteEvent::WorkSubmitted { expected_generation }, None)
        }
        Input::Finish { after } => {
            let idle = prev.state_name() == StateName::Active && prev.attempt().is_none();
            if !idle || prev.generation() <= after {
                return Ok(unchanged(prev));
            }
            let expected_generation = prev.generation();
            (RouteEvent::Complete { expected_generation }, None)
        }
        Input::Evidence(evidence) => reported(*evidence, &prev, profile, now),
    };
    let kind = event.kind();
    let cause = match &event {
        RouteEvent::Failed(report) => Some(FailureCause {
            class: report.classification.class,
            code: report.classification.code,
        }),
        _ => None,
    };
    let transition = match step(&prev, event, now) {
        Ok(t) => t,
        Err(error) => {
            return Ok(TxOutcome::Rejected {
                state: prev,
                error: Some(error),
                verdict,
            })
        }
    };
    if !transition.changed {
        if adopt {
            // Taken up with nothing to change (its launch, if any, follows): it is this
            // replica's now, so no other takes it up again.
            pending.writes.adopt(route_id, prev.generation());
        }
        // An unchanged hold keeps its timer (a restart may have come between).
        if let (EventKind::DispatchHeld, Some(hold)) = (kind, prev.hold()) {
            pending.writes.upsert_timer(
                route_id,
                TimerKind::CircuitHold,
                prev.generation(),
                due_ms(hold.until),
                None,
            );
        }
        return Ok(TxOutcome::Unchanged {
            state: prev,
            plan: Plan::of(&transition.effects),
            verdict,
        });
    }
    pending.cas_route(route_id, prev.generation(), &transition.next, now);
    if let (Some(gate), Some(verdict)) = (transition.gate, verdict.as_mut()) {
        // The gate the step decided with: the session's, when it granted the session that
        // holds the output (the route holds it from this failure on).
        verdict.gate = gate;
    }
    // Circuits (rare: a success closes, a scoped failure opens; these read, so they flush
    // first), then the rest of the step's writes, queued for the job's one round trip.
    let changes = circuits::maintain(
        tx,
        pending,
        route_id,
        &prev,
        &transition.next,
        kind,
        verdict.as_deref(),
        profile,
        now,
    )
    .await?;
    if !changes.keeps_probing {
        // A lease given back releases the holds when the writes are flushed.
        pending.release_probe_leases(route_id, now);
    }
    let writes = &mut pending.writes;
    writes.history(HistoryInsert {
        route_id,
        at: now,
        event: kind,
        from: Some(prev.state_name()),
        next: &transition.next,
        profile_revision: profile.revision,
        decision_json: transition.decision.as_ref().map(crate::store::to_json),
        classification_json: verdict.as_ref().map(|v| crate::store::to_json(&v.classification)),
    });
    // The outbox: what this transition is worth telling, in this same transaction.
    pending.tell(&Change {
        route_id,
        caller: &route.caller,
        title: route.title.as_deref(),
        profile,
        prev: Some(&prev),
        transition: &transition,
        circuits: &changes.moved,
        now,
    });
    let writes = &mut pending.writes;
    let settled = maintain_dispatches(
        writes,
        route_id,
        route.caller.kind,
        &prev,
        &transition.next,
        kind,
        profile,
        now,
    )
    .map(|outcome| (outcome, cause));
    let plan = Plan::of(&transition.effects);
    maintain_timer(writes, route_id, &prev, &transition.next, &plan);
    if let Some(work) = &new_work {
        writes.put_work(route_id, work, now);
    }
    if let Some(body) = &result {
        writes.put_result(route_id, prev.generation(), body, now);
    }
    if changes.release {
        writes.release_holds(now);
    }
    pending
        .observed
        .transition(route_id, Some(&prev), &transition.next, kind, settled);
    let launch = plan.launches().then(|| {
        Box::new(LaunchContext {
            target: profile
                .target(&transition.next.candidate().id)
                .cloned()
                .map(|t| super::dispatch::launched_as(route.caller.kind, t)),
            invocation_id: route.caller.invocation_id.clone(),
            work: None,
        })
    });
    Ok(TxOutcome::Committed {
        prev,
        transition,
        kind,
        verdict,
        plan,
        release_holds: changes.release,
        launch,
        earlier: None,
    })
}

/// What an attempt's evidence reports: classified once, against the route's current
/// generation. A turn the agent ended normally is a success unless the evidence carries a
/// failure signal; anything else is the failure it shows, against its candidate's current
/// policy.
fn reported(
    Evidence {
        envelope: mut env,
        turn_ended,
        session,
    }: Evidence,
    prev: &RouteState,
    profile: &Profile,
    now: DateTime<Utc>,
) -> (RouteEvent, Option<Box<Verdict>>) {
    env.active_generation = Some(prev.generation());
    let verdict = classify(&env, now);
    if turn_ended && !verdict.signals_failure() {
        let generation = env.generation.unwrap_or(0);
        return (RouteEvent::Succeeded { generation }, None);
    }
    // A session that still holds the output is offered to the step, which decides whether the
    // route holds it (`policy::route::held`), with the gate the evidence would get were it
    // resumed (only when the evidence shows output and no other effect).
    let resume = session.and_then(|session| {
        let gate = classifier::resumed_gate(&mut env, &verdict, &session.session_id)?;
        Some(ResumeOffer { session, gate })
    });
    let report = FailureReport {
        evidence_generation: env.generation.unwrap_or(0),
        classification: verdict.classification.clone(),
        gate: verdict.gate,
        policy: ValidatedPolicyDocument::try_from(profile.policy.clone())
            .ok()
            .and_then(|doc| doc.candidate(&prev.candidate().id).cloned()),
        resume,
    };
    (RouteEvent::Failed(Box::new(report)), Some(Box::new(verdict)))
}

/// Keeps the route's one timer row in step with the transition: the timer its plan arms (a
/// wait's deadline, or a held attempt's re-check, at the new generation: the `ArmTimer`
/// deadline is the one source of the due time), or none. A step from a state that can have
/// had no row (no deadline, no hold, no attempt in flight whose report may be scheduled) skips
/// the statement.
fn maintain_timer(writes: &mut Writes, route_id: &str, prev: &RouteState, next: &RouteState, plan: &Plan) {
    if let Some((due, generation)) = plan.timer {
        let kind = match next.hold() {
            Some(_) => TimerKind::CircuitHold,
            None => TimerKind::Deadline,
        };
        writes.upsert_timer(route_id, kind, generation, due_ms(due), None);
    } else if prev.deadline().is_some() || prev.hold().is_some() || prev.attempt().is_some() {
        writes.delete_timer(route_id);
    }
}

/// Keeps the dispatch records in step with the transition; returns the outcome of the record it
/// settled, if any.
#[allow(clippy::too_many_arguments)]
fn maintain_dispatches(
    writes: &mut Writes,
    route_id: &str,
    caller: CallerKind,
    prev: &RouteState,
    next: &RouteState,
    kind: EventKind,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Option<DispatchOutcome> {
    let p = prev.attempt();
    let n = next.attempt();
    let mut settled = None;
    if let Some(p) = p {
        if n.map(|n| n.number) != Some(p.number) {
            let outcome = match (p.dispatch, kind) {
                (_, EventKind::Succeeded) => DispatchOutcome::Succeeded,
                (DispatchState::Started, EventKind::Failed) => DispatchOutcome::Failed,
                (DispatchState::Started, EventKind::Restarted | EventKind::LeaseExpired) => {
                    DispatchOutcome::Ambiguous
                }
                (DispatchState::Pending, _) => DispatchOutcome::Superseded,
                (DispatchState::Started, _) => DispatchOutcome::Aborted,
            };
            writes.settle_dispatch(route_id, p.number, outcome, now);
            settled = Some(outcome);
            if p.dispatch == DispatchState::Started
                && dispatcher_of(caller, profile, prev) == DispatcherKind::External
            {
                // The attempt is over: so is any runner's lease on it.
                writes.delete_lease(route_id);
            }
        }
    }
    if let Some(n) = n {
        let is_new = p.map(|p| p.number) != Some(n.number);
        if is_new {
            writes.insert_dispatch(DispatchInsert {
                route_id,
                attempt: n.number,
                candidate_id: &next.candidate().id,
                kind: n.kind,
                dispatcher: dispatcher_of(caller, profile, next),
                generation: next.generation(),
                at: now,
            });
        }
        let started_now = n.dispatch == DispatchState::Started
            && (is_new || p.is_some_and(|p| p.dispatch == DispatchState::Pending));
        if started_now {
            writes.mark_dispatch_started(route_id, n.number, next.generation(), now);
        }
    }
    settled
}
