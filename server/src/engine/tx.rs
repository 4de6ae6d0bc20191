//! A step inside the writer's transaction: the bodies of the jobs (apply an input, begin a
//! dispatch through the gate, fire a timer, record a launch, start a route, the external
//! runners' claims and leases). Everything here runs between `BEGIN IMMEDIATE` and `COMMIT`;
//! nothing here performs an effect.
//!
//! The jobs read and queue through the transaction's cache, [`Pending`] (`pending.rs`).

use super::{
    circuits,
    dispatch::{Launched, Report},
    pending::Pending,
    EngineError, Input,
};
use crate::store::{
    audit::{AuditActor, AuditInsert},
    due_ms, new_id, DispatchInsert, DueTimer, HistoryInsert, Lease, RouteRow, TimerKind, Tx, Writes,
};
use crate::{engine::outbox::Change, metrics::FailureCause};
use chrono::{DateTime, Utc};
use classifier::{classify, Verdict};
use policy::{
    api::{CallerKind, CandidateTarget, DispatchOutcome, DispatcherKind, Profile, Work},
    document::ValidatedPolicyDocument,
    input::ValidatedStartRoute,
    route::{
        start, step, DispatchState, EventKind, FailureReport, RouteEffect, RouteEvent, RouteState, StateName,
        Transition, TransitionError,
    },
};

/// What a runner does with its lease.
#[derive(Debug, Clone)]
pub(super) struct LeaseOp {
    pub(super) attempt: u32,
    pub(super) lease_id: String,
    pub(super) seconds: u64,
    /// `true`: the acknowledgement (the runner starts the work now); `false`: a heartbeat of
    /// an acknowledged lease.
    pub(super) ack: bool,
}

/// What one step did.
// (Short-lived and moved once; boxing `Committed` buys nothing.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum TxOutcome {
    Committed {
        prev: RouteState,
        transition: Transition,
        kind: EventKind,
        verdict: Option<Box<Verdict>>,
        /// Held dispatches must look again after the commit (a circuit opened or closed).
        release_holds: bool,
        /// What `Launch` needs, when the step asks for one: read in this same transaction, so
        /// the launch need not read it again.
        launch: Option<Box<LaunchContext>>,
    },
    Unchanged {
        state: RouteState,
        effects: Vec<RouteEffect>,
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

/// The dispatch a committed step asked to begin (its generation), already begun in the same
/// transaction: a step that makes an attempt pending and the gate that follows it are one job.
pub(crate) type Chain = Option<(u64, TxOutcome)>;

/// A job's result: its step and the dispatch it chained.
pub(crate) type Stepped = (TxOutcome, Chain);

/// A new route's row, its profile and its first transition.
pub(crate) type Started = (RouteRow, Profile, Transition);

// ------------------------------------------------------------------------------------------------
// Job bodies
// ------------------------------------------------------------------------------------------------

/// An input to a route, then the dispatch its step asks to begin (same transaction).
pub(crate) async fn apply(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    input: Input,
    now: DateTime<Utc>,
) -> Result<Stepped, EngineError> {
    let (route, profile) = pending.route_and_profile(tx, route_id).await?;
    let outcome = transact(tx, pending, route.clone(), &profile, input, now).await?;
    chain(tx, pending, route, &profile, outcome, now).await
}

/// The chain of a step: the dispatch its committed transition asks to begin, if nothing with
/// reads or writes of its own comes first (timer wake-ups, notices and aborting an old attempt
/// are in memory only). The commit then covers the step, the gate and its outcome; `Launch`
/// still runs only after it.
async fn chain(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    mut route: RouteRow,
    profile: &Profile,
    outcome: TxOutcome,
    now: DateTime<Utc>,
) -> Result<Stepped, EngineError> {
    let TxOutcome::Committed { transition, .. } = &outcome else {
        return Ok((outcome, None));
    };
    for effect in &transition.effects {
        match effect {
            RouteEffect::ArmTimer { .. }
            | RouteEffect::CancelTimer
            | RouteEffect::NotifyPerson { .. }
            | RouteEffect::AbortDispatch { .. } => {}
            RouteEffect::BeginDispatch { generation, .. } => {
                // The row as this transaction writes it: no need to read it.
                route.state = transition.next.clone();
                let begun = begin_loaded(tx, pending, route, Some(profile), *generation, now).await?;
                let generation = *generation;
                return Ok((outcome, Some((generation, begun))));
            }
            _ => return Ok((outcome, None)),
        }
    }
    Ok((outcome, None))
}

/// The dispatch gate for the pending attempt at `generation`, and its step: `dispatch_started`
/// when nothing holds it, `dispatch_held` when a circuit does (a stale request steps nothing).
pub(crate) async fn begin(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    generation: u64,
    now: DateTime<Utc>,
) -> Result<TxOutcome, EngineError> {
    let Some((route, profile)) = pending.route(tx, route_id).await? else {
        return Err(EngineError::RouteNotFound(route_id.to_owned()));
    };
    begin_loaded(tx, pending, route, profile.as_ref(), generation, now).await
}

async fn begin_loaded(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route: RouteRow,
    profile: Option<&Profile>,
    generation: u64,
    now: DateTime<Utc>,
) -> Result<TxOutcome, EngineError> {
    let pending_now = route
        .state
        .attempt()
        .is_some_and(|a| a.dispatch == DispatchState::Pending);
    if route.state.generation() != generation || !pending_now {
        return Ok(TxOutcome::Rejected {
            state: route.state,
            error: None,
            verdict: None,
        });
    }
    let profile = profile.ok_or_else(|| EngineError::ProfileNotFound(route.profile_id.clone()))?;
    let event = match circuits::gate(tx, pending, &route, profile, now).await? {
        None => RouteEvent::DispatchStarted { generation },
        Some(hold) => RouteEvent::DispatchHeld { generation, hold },
    };
    transact(tx, pending, route, profile, Input::Event(event), now).await
}

/// Switching: each candidate's eligibility (circuits read in this transaction), then the step
/// that picks one.
pub(crate) async fn evaluate(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    generation: u64,
    now: DateTime<Utc>,
) -> Result<Stepped, EngineError> {
    let (route, profile) = pending.route_and_profile(tx, route_id).await?;
    // Only a route whose caller runs its attempts may be pinned (`ValidatedStartRoute`).
    let pin = match route.caller.kind.runs_attempts() {
        true => tx.pin(route_id).await?,
        false => None,
    };
    let candidates = circuits::options(tx, pending, &profile, route_id, pin.as_deref(), now).await?;
    let event = RouteEvent::CandidatesEvaluated {
        expected_generation: generation,
        candidates,
    };
    apply(tx, pending, route_id, Input::Event(event), now).await
}

/// A due timer: the deadline's step, the held attempt's gate, or the scheduled report. A timer
/// that no longer applies (the route moved on) is removed in the same transaction.
pub(crate) async fn fire(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    timer: &DueTimer,
    now: DateTime<Utc>,
) -> Result<Stepped, EngineError> {
    let g = timer.generation;
    let stepped = match timer.kind {
        TimerKind::Deadline => {
            let input = Input::Event(RouteEvent::DeadlineReached { generation: g });
            apply(tx, pending, &timer.route_id, input, now).await?
        }
        TimerKind::CircuitHold => (begin(tx, pending, &timer.route_id, g, now).await?, None),
        TimerKind::Lease => match tx.lease(&timer.route_id).await? {
            // Renewed meanwhile: watch the new expiry.
            Some(lease) if lease.acked && lease.generation == g && lease.expires > now => {
                pending.writes.upsert_timer(
                    &timer.route_id,
                    TimerKind::Lease,
                    g,
                    due_ms(lease.expires),
                    None,
                );
                let (route, _) = pending.route_and_profile(tx, &timer.route_id).await?;
                (unchanged(route.state), None)
            }
            _ => {
                let input = Input::Event(RouteEvent::LeaseExpired { generation: g });
                apply(tx, pending, &timer.route_id, input, now).await?
            }
        },
        TimerKind::Report => {
            let report: Report = timer
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok())
                .ok_or_else(|| {
                    EngineError::Corrupt(format!("timers row `{}`: unreadable report", timer.route_id))
                })?;
            apply(tx, pending, &timer.route_id, report.into_input(g), now).await?
        }
    };
    // An early deadline stays armed; anything else that did not re-arm this timer is done.
    let early = matches!(
        &stepped.0,
        TxOutcome::Rejected {
            error: Some(TransitionError::DeadlineNotReached { .. }),
            ..
        }
    );
    if !early {
        pending.writes.delete_fired_timer(&timer.route_id, timer.kind, g);
        pending.observed.timer_fired(timer.due, now);
    }
    Ok(stepped)
}

/// What a dispatcher did with the attempt started at `generation`: the launch is recorded, and
/// its report is applied now or armed as a durable `report` timer (only while the route is
/// still running that attempt).
pub(crate) async fn launched(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    attempt: u32,
    generation: u64,
    launched: Launched,
    now: DateTime<Utc>,
) -> Result<Stepped, EngineError> {
    if launched.audit {
        pending
            .writes
            .simulated_launch(route_id, attempt, generation, now);
    }
    let (route, _) = pending.route_and_profile(tx, route_id).await?;
    let running = route.state.generation() == generation
        && route
            .state
            .attempt()
            .is_some_and(|a| a.number == attempt && a.dispatch == DispatchState::Started);
    match launched.report {
        Some((due, report)) if due <= now => {
            apply(tx, pending, route_id, report.into_input(generation), now).await
        }
        Some((due, report)) if running => {
            let payload = crate::store::to_json(&report);
            pending.writes.upsert_timer(
                route_id,
                TimerKind::Report,
                generation,
                due_ms(due),
                Some(payload),
            );
            Ok((unchanged(route.state), None))
        }
        _ => Ok((unchanged(route.state), None)),
    }
}

/// An external runner claims the oldest started `external` attempt nobody holds (or, `route`
/// given, that route's, if its caller runs its attempts): a lease of `seconds` that lapses (and
/// the attempt is offered again) unless it is acknowledged.
///
/// `acknowledge`: the runner starts the work at once, so the claim is acknowledged in the same
/// step (one round trip and one commit fewer): from its commit on, the attempt may have run,
/// and the lease's timer watches it as after `ack`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn claim(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    runner: &str,
    route: Option<&str>,
    seconds: u64,
    acknowledge: bool,
    now: DateTime<Utc>,
) -> Result<Option<Lease>, EngineError> {
    pending.flush(tx, now).await?;
    let claimable = match route {
        None => tx.claimable_external(now).await?,
        Some(id) => tx.claimable_of_route(id, now).await?,
    };
    let Some((route_id, attempt, generation)) = claimable else {
        return Ok(None);
    };
    let lease = Lease {
        route_id,
        attempt,
        generation,
        lease_id: new_id("ls", now),
        runner: runner.to_owned(),
        acked: acknowledge,
        expires: policy::time::after_seconds(now, seconds),
    };
    pending.writes.put_lease(&lease, now);
    if acknowledge {
        pending.writes.upsert_timer(
            &lease.route_id,
            TimerKind::Lease,
            lease.generation,
            due_ms(lease.expires),
            None,
        );
    }
    Ok(Some(lease))
}

/// A runner acknowledges (it starts the work now) or renews its lease. `None` when the lease
/// is not theirs any more (another claim, lapsed before the acknowledgement, already ran out,
/// or the route moved on): the runner must stop and report nothing.
pub(crate) async fn lease(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route_id: &str,
    op: &LeaseOp,
    now: DateTime<Utc>,
) -> Result<Option<Lease>, EngineError> {
    pending.flush(tx, now).await?;
    let (route, _) = pending.route_and_profile(tx, route_id).await?;
    let Some(mut lease) = tx.lease(route_id).await? else {
        return Ok(None);
    };
    let running = route.state.generation() == lease.generation
        && route
            .state
            .attempt()
            .is_some_and(|a| a.number == lease.attempt && a.dispatch == DispatchState::Started);
    let valid = running
        && lease.lease_id == op.lease_id
        && lease.attempt == op.attempt
        && lease.expires > now
        && lease.acked != op.ack;
    if !valid {
        return Ok(None);
    }
    lease.acked = true;
    lease.expires = policy::time::after_seconds(now, op.seconds);
    pending.writes.put_lease(&lease, now);
    pending.writes.upsert_timer(
        route_id,
        TimerKind::Lease,
        lease.generation,
        due_ms(lease.expires),
        None,
    );
    Ok(Some(lease))
}

fn unchanged(state: RouteState) -> TxOutcome {
    TxOutcome::Unchanged {
        state,
        effects: Vec::new(),
        verdict: None,
    }
}

/// A new route: its row, its first transition and its history row; then the dispatch that
/// transition asks to begin.
pub(crate) async fn start_route(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    request: &ValidatedStartRoute,
    by: Option<&AuditActor>,
    now: DateTime<Utc>,
) -> Result<(Started, Chain), EngineError> {
    let profile = tx
        .profile(request.profile_id())
        .await?
        .ok_or_else(|| EngineError::ProfileNotFound(request.profile_id().to_owned()))?;
    // An earlier job of this transaction may have started this invocation.
    pending.flush(tx, now).await?;
    if tx
        .route_of_invocation(request.caller_kind(), &request.caller().invocation_id)
        .await?
        .is_some()
    {
        return Err(EngineError::Conflict(
            "this caller invocation already has a route; start new work with a new invocation id".to_owned(),
        ));
    }
    let id = new_id("rt", now);
    if let Some(pin) = request.pin() {
        if !profile.policy.candidates.iter().any(|c| c.id == pin) {
            return Err(EngineError::Invalid(policy::document::ValidationErrors {
                errors: vec![policy::document::ValidationError {
                    path: "pin".to_owned(),
                    code: policy::document::ValidationCode::OutOfRange,
                    message: "The pinned candidate is not one of the profile's.".to_owned(),
                }],
            }));
        }
    }
    let options = circuits::options(tx, pending, &profile, &id, request.pin(), now).await?;
    let transition = start(&options).map_err(|e| EngineError::Conflict(e.to_string()))?;
    let route = RouteRow {
        id: id.clone(),
        profile_id: profile.id.clone(),
        caller: request.caller().clone(),
        title: request.title().map(str::to_owned),
        state: transition.next.clone(),
        durable_error: None,
        created_at: now,
        updated_at: now,
    };
    pending.insert_route(&route, &profile);
    let writes = &mut pending.writes;
    if let Some(work) = request.work() {
        writes.put_work(&id, work, now);
    }
    if let Some(pin) = request.pin() {
        writes.put_pin(&id, pin);
    }
    if let Some(actor) = by {
        let detail = serde_json::json!({"profile_id": route.profile_id, "caller": route.caller});
        writes.audit(
            AuditInsert {
                actor_kind: actor.kind,
                actor: actor.name.as_deref(),
                address: actor.address.as_deref(),
                action: "route.start",
                target: Some(&id),
                detail: &detail,
            },
            now,
        );
    }
    writes.history(HistoryInsert {
        route_id: &id,
        at: now,
        event: EventKind::Started,
        from: None,
        next: &transition.next,
        profile_revision: profile.revision,
        decision_json: None,
        classification_json: None,
    });
    pending.tell(&Change {
        route_id: &id,
        caller: request.caller(),
        title: request.title(),
        profile: &profile,
        prev: None,
        transition: &transition,
        circuits: &[],
        now,
    });
    let writes = &mut pending.writes;
    if let Some(a) = transition.next.attempt() {
        writes.insert_dispatch(DispatchInsert {
            route_id: &id,
            attempt: a.number,
            candidate_id: &transition.next.candidate().id,
            kind: a.kind,
            dispatcher: dispatcher_of(request.caller_kind(), &profile, &transition.next),
            generation: transition.next.generation(),
            at: now,
        });
    }
    pending
        .observed
        .transition(&id, None, &transition.next, EventKind::Started, None);
    let started_outcome = TxOutcome::Committed {
        prev: transition.next.clone(),
        transition: transition.clone(),
        kind: EventKind::Started,
        verdict: None,
        release_holds: false,
        launch: None,
    };
    let (_, mut chained) = chain(tx, pending, route.clone(), &profile, started_outcome, now).await?;
    // The attempt it launches runs the work this start stores: no need to read it back.
    if let Some((_, TxOutcome::Committed { launch: Some(l), .. })) = chained.as_mut() {
        l.work = request.work().cloned();
    }
    Ok(((route, profile, transition), chained))
}

/// The dispatcher that runs the state's attempt: its candidate's, unless the caller runs the
/// route's attempts itself (they are leased: `external`).
fn dispatcher_of(caller: CallerKind, profile: &Profile, state: &RouteState) -> DispatcherKind {
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
    let (event, verdict) = match input {
        Input::Event(e) => (e, None),
        Input::Orphaned => {
            // Read with the row locked: another replica may have taken the route up since it
            // was found orphaned, or its owner may have renewed its lease.
            if tx.owner_alive(route_id, now).await? {
                return Ok(TxOutcome::Unchanged {
                    state: prev,
                    effects: Vec::new(),
                    verdict: None,
                });
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
        Input::Evidence(env) => {
            let mut env = *env;
            env.active_generation = Some(prev.generation());
            let verdict = classify(&env, now);
            let policy = ValidatedPolicyDocument::try_from(profile.policy.clone())
                .ok()
                .and_then(|doc| doc.candidate(&prev.candidate().id).cloned());
            let report = FailureReport {
                evidence_generation: env.generation.unwrap_or(0),
                classification: verdict.classification.clone(),
                gate: verdict.gate,
                policy,
            };
            (RouteEvent::Failed(Box::new(report)), Some(Box::new(verdict)))
        }
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
            effects: transition.effects,
            verdict,
        });
    }
    pending.cas_route(route_id, prev.generation(), &transition.next, now);
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
    maintain_timer(writes, route_id, &prev, &transition);
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
    let launch = transition
        .effects
        .iter()
        .any(|e| matches!(e, RouteEffect::Launch { .. }))
        .then(|| {
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
        release_holds: changes.release,
        launch,
    })
}

/// Keeps the route's one timer row in step with the transition: the timer its `ArmTimer` effect
/// arms (a wait's deadline, or a held attempt's re-check, at the new generation: the effect is
/// the one source of the due time), or none. A step from a state that can have had no row (no
/// deadline, no hold, no attempt in flight whose report may be scheduled) skips the statement.
fn maintain_timer(writes: &mut Writes, route_id: &str, prev: &RouteState, t: &Transition) {
    let armed = t.effects.iter().find_map(|e| match e {
        RouteEffect::ArmTimer { deadline, generation } => Some((*deadline, *generation)),
        _ => None,
    });
    if let Some((due, generation)) = armed {
        let kind = match t.next.hold() {
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
