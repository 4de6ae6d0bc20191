//! A step inside the writer's transaction: the bodies of the jobs (apply an input, begin a
//! dispatch through the gate, fire a timer, record a launch, start a route, the external
//! runners' claims and leases). Everything here runs between `BEGIN IMMEDIATE` and `COMMIT`;
//! nothing here performs an effect.
//!
//! The jobs read and queue through the transaction's cache, [`Pending`] (`pending.rs`).

use super::{
    circuits,
    dispatch::{Launched, Report},
    held,
    pending::Pending,
    plan::Plan,
    transact::{dispatcher_of, transact, unchanged, Told, TxOutcome},
    EngineError, Input,
};
use crate::engine::outbox::Change;
use crate::store::{
    audit::{AuditActor, AuditInsert},
    due_ms, new_id, DispatchInsert, DueTimer, HistoryInsert, Lease, RouteRow, TimerKind, Tx,
};
use chrono::{DateTime, Utc};
use policy::{
    api::Profile,
    input::ValidatedStartRoute,
    route::{start, DispatchState, EventKind, RouteEvent, Transition, TransitionError},
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

/// The dispatch a committed step asked to begin (its generation), already begun in the same
/// transaction: a step that makes an attempt pending and the gate that follows it are one job.
pub(crate) type Chain = Option<(u64, TxOutcome)>;

/// A job's result: its step and the dispatch it chained.
pub(crate) type Stepped = (TxOutcome, Chain);

/// A new route's row, its profile, its first transition and that transition's effects, read.
pub(crate) type Started = (RouteRow, Profile, Transition, Plan);

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
    let TxOutcome::Committed { transition, plan, .. } = &outcome else {
        return Ok((outcome, None));
    };
    let Some(generation) = plan.chained_begin() else {
        return Ok((outcome, None));
    };
    // The row as this transaction writes it: no need to read it.
    route.state = transition.next.clone();
    let begun = begin_loaded(tx, pending, route, Some(profile), generation, now).await?;
    Ok((outcome, Some((generation, begun))))
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
        None => RouteEvent::DispatchStarted {
            generation,
            launch: held::launch_facts(tx, pending, &route, profile, now).await?,
        },
        Some(hold) => RouteEvent::DispatchHeld { generation, hold },
    };
    // Only a refused start needs the row again, for the refusal's step.
    let row = route.state.held().is_some().then(|| route.clone());
    let outcome = transact(tx, pending, route, profile, Input::Event(event), now).await?;
    // Recorded as started, then refused in the same transaction: no dispatcher is asked. The
    // start is told before its refusal, as every committed change is.
    let refused_at = match &outcome {
        TxOutcome::Committed { plan, .. } => plan.refused,
        _ => None,
    };
    let (Some(mut route), Some(refused_at)) = (row, refused_at) else {
        return Ok(outcome);
    };
    let TxOutcome::Committed {
        prev,
        transition,
        kind,
        release_holds,
        ..
    } = outcome
    else {
        return Ok(outcome);
    };
    tracing::warn!(
        route_id = route.id,
        candidate = transition.next.candidate().id,
        "not started: an agent session holds this prompt's output; starting it elsewhere would replay it"
    );
    route.state = transition.next.clone();
    let mut refused = transact(
        tx,
        pending,
        route,
        profile,
        Input::Event(held::refusal(refused_at)),
        now,
    )
    .await?;
    if let TxOutcome::Committed { earlier, .. } = &mut refused {
        *earlier = Some(Box::new(Told {
            prev,
            transition,
            kind,
            release_holds,
        }));
    }
    Ok(refused)
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
    let plan = Plan::of(&transition.effects);
    let started_outcome = TxOutcome::Committed {
        prev: transition.next.clone(),
        transition: transition.clone(),
        kind: EventKind::Started,
        verdict: None,
        plan: plan.clone(),
        release_holds: false,
        launch: None,
        earlier: None,
    };
    let (_, mut chained) = chain(tx, pending, route.clone(), &profile, started_outcome, now).await?;
    // The attempt it launches runs the work this start stores: no need to read it back.
    if let Some((_, TxOutcome::Committed { launch: Some(l), .. })) = chained.as_mut() {
        l.work = request.work().cloned();
    }
    Ok(((route, profile, transition, plan), chained))
}
