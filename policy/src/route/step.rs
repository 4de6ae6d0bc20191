//! [`step`] and [`start`]: the whole transition table, as one `match` (see the table in the
//! parent module's docs, which this follows row by row).

use super::{
    held, ActionReason, Attempt, AttemptKind, CandidateOption, CandidateRef, DispatchState, Eligibility,
    FailureReport, HeldOutput, LaunchFacts, ManualAction, RouteCycle, RouteEffect, RouteEvent, RouteState,
    RouteStatus, StateName, Transition, TransitionError,
};
use crate::{
    classification::Gate,
    evaluator::{evaluate, DecisionKind, DecisionReason, Failure},
};
use chrono::{DateTime, Utc};

/// Starts a route on the first candidate eligible now, in preference order; when none is, on
/// the one that becomes eligible soonest (its attempt is then parked behind the circuit by the
/// dispatch gate). Only when no candidate can ever become eligible does the route start in
/// `action_required` (`no_eligible_candidate`), on the first candidate, so a person can still
/// retry it or skip onwards.
pub fn start(candidates: &[CandidateOption]) -> Result<Transition, TransitionError> {
    let first = candidates.first().ok_or(TransitionError::NoCandidates)?;
    let chosen = choose(candidates.iter().enumerate());
    let (index, id) = chosen.map_or((0, &first.id), |(i, c)| (i, &c.id));
    let mut next = RouteState {
        generation: 1,
        candidate: CandidateRef {
            id: id.clone(),
            index: index_u32(index),
        },
        cycle: RouteCycle {
            number: 1,
            ..RouteCycle::default()
        },
        attempts: 0,
        // Replaced below: an attempt on the chosen candidate, or a person when none is eligible.
        status: RouteStatus::Active { attempt: None },
        decision: None,
        hold: None,
        held: None,
    };
    let effects = if chosen.is_some() {
        vec![schedule_attempt(&mut next, AttemptKind::Initial, Slot::Active)]
    } else {
        next.status = RouteStatus::ActionRequired {
            reason: ActionReason::NoEligibleCandidate,
        };
        vec![RouteEffect::NotifyPerson {
            reason: ActionReason::NoEligibleCandidate,
        }]
    };
    Ok(Transition {
        next,
        effects,
        decision: None,
        gate: None,
        changed: true,
    })
}

/// The candidate to try: the first eligible now, else the earliest to become eligible (the
/// first of equals), else none.
fn choose<'a>(
    candidates: impl Iterator<Item = (usize, &'a CandidateOption)> + Clone,
) -> Option<(usize, &'a CandidateOption)> {
    candidates
        .clone()
        .find(|(_, c)| c.eligibility == Eligibility::Now)
        .or_else(|| {
            candidates
                .filter_map(|(i, c)| match c.eligibility {
                    Eligibility::At(t) => Some((t, i, c)),
                    _ => None,
                })
                .min_by_key(|(t, i, _)| (*t, *i))
                .map(|(_, i, c)| (i, c))
        })
}

/// The one transition function. Pure: `now` is only compared with deadlines and stamped on
/// decisions.
pub fn step(
    state: &RouteState,
    event: RouteEvent,
    now: DateTime<Utc>,
) -> Result<Transition, TransitionError> {
    use ManualAction as M;
    use RouteEvent as E;
    use RouteStatus as S;

    let kind = event.kind();
    let not_allowed = || {
        Err(TransitionError::NotAllowed {
            state: state.state_name(),
            event: kind,
        })
    };

    match (&state.status, event) {
        // A finished route: a repeat of the request that finished it is answered as done
        // (idempotent); a restart changes nothing; anything else was issued for a route that
        // is gone and is told so (stale generation or not allowed), never silently accepted.
        (
            S::Completed,
            E::Complete {
                expected_generation: g,
            },
        )
        | (
            S::Abandoned,
            E::Abandon {
                expected_generation: g,
            },
        ) if g == state.generation || g.checked_add(1) == Some(state.generation) => {
            Ok(unchanged(state, vec![]))
        }
        (S::Completed | S::Abandoned, E::Restarted) => Ok(unchanged(state, vec![])),
        (S::Completed | S::Abandoned, e) => match e.generation() {
            Some(g) if g != state.generation => stale(state, g),
            _ => not_allowed(),
        },

        // Nothing automatic is pending: cancelling or stopping again is a no-op (idempotent),
        // for the current generation and for a repeat of the very request that stopped it.
        (
            S::ActionRequired { reason },
            E::Manual {
                action: action @ (M::CancelWait | M::Stop),
                expected_generation: g,
            },
        ) if g == state.generation
            || (g.checked_add(1) == Some(state.generation)
                && matches!(
                    (action, reason),
                    (M::CancelWait, ActionReason::WaitCancelled) | (M::Stop, ActionReason::StoppedByUser)
                )) =>
        {
            Ok(unchanged(state, vec![]))
        }

        // Generation fencing: one winner per generation.
        (_, e) if e.generation().is_some_and(|g| g != state.generation) => {
            stale(state, e.generation().unwrap_or_default())
        }

        // The dispatch gate parks the pending attempt behind a circuit (a changed hold is a
        // new durable fact: deadline and circuit in the snapshot, a timer at `until`).
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::DispatchHeld { hold, .. })
            if a.dispatch == DispatchState::Pending =>
        {
            if state.hold.as_ref() == Some(&hold) {
                return Ok(unchanged(state, vec![]));
            }
            let mut next = advance(state)?;
            let arm = RouteEffect::ArmTimer {
                deadline: hold.until,
                generation: next.generation,
            };
            next.hold = Some(hold);
            Ok(changed(next, vec![arm], None))
        }

        // Recording the start of a scheduled attempt, then launching it (or, while a session
        // holds the route's output, refusing any start but the retry that resumes it).
        (S::Active { attempt: Some(a) }, E::DispatchStarted { launch: facts, .. })
            if a.dispatch == DispatchState::Pending =>
        {
            let mut next = advance(state)?;
            let started = Attempt {
                dispatch: DispatchState::Started,
                ..*a
            };
            next.status = S::Active {
                attempt: Some(started),
            };
            let launch = launch(&next, started, facts.as_ref());
            Ok(changed(next, vec![launch], None))
        }
        (S::Retrying { attempt: a }, E::DispatchStarted { launch: facts, .. })
            if a.dispatch == DispatchState::Pending =>
        {
            let mut next = advance(state)?;
            let started = Attempt {
                dispatch: DispatchState::Started,
                ..*a
            };
            next.status = S::Retrying { attempt: started };
            let launch = launch(&next, started, facts.as_ref());
            Ok(changed(next, vec![launch], None))
        }

        // A classified failure of the attempt in flight: the evaluator decides.
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Failed(report))
            if a.dispatch == DispatchState::Started =>
        {
            on_failure(state, *report, now)
        }

        // An external runner acknowledged the attempt and then went silent past its lease: it
        // may have run, so it is never repeated automatically.
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::LeaseExpired { .. })
            if a.dispatch == DispatchState::Started =>
        {
            let mut next = advance(state)?;
            let notify = needs_person(&mut next, ActionReason::AmbiguousDispatch);
            Ok(changed(next, vec![notify], None))
        }

        // Success settles the attempt and starts a new cycle.
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Succeeded { .. })
            if a.dispatch == DispatchState::Started =>
        {
            let mut next = advance(state)?;
            next.status = S::Active { attempt: None };
            new_cycle(&mut next);
            next.decision = None;
            Ok(changed(next, vec![], None))
        }

        // More work on a healthy route; finishing it.
        (S::Active { attempt: None }, E::WorkSubmitted { .. }) => {
            let mut next = advance(state)?;
            let begin = schedule_attempt(&mut next, AttemptKind::Initial, Slot::Active);
            Ok(changed(next, vec![begin], None))
        }
        (S::Active { attempt: None }, E::Complete { .. }) => {
            let mut next = advance(state)?;
            next.status = S::Completed;
            Ok(changed(
                next,
                vec![RouteEffect::RouteClosed {
                    state: StateName::Completed,
                }],
                None,
            ))
        }

        // A durable wait ends: the post-wait attempt or the retry.
        (S::WaitingForReset { deadline } | S::RetryWait { deadline }, E::DeadlineReached { .. }) => {
            if now < *deadline {
                return Err(TransitionError::DeadlineNotReached {
                    deadline: *deadline,
                    now,
                });
            }
            let mut next = advance(state)?;
            let begin = schedule_attempt(&mut next, after_wait(&state.status), Slot::Retrying);
            Ok(changed(next, vec![begin], None))
        }

        // A person acts on a pending wait.
        (S::WaitingForReset { .. } | S::RetryWait { .. }, E::Manual { action, .. }) => {
            let mut next = advance(state)?;
            let mut effects = vec![RouteEffect::CancelTimer];
            match action {
                M::RetryNow => {
                    effects.push(schedule_attempt(
                        &mut next,
                        after_wait(&state.status),
                        Slot::Retrying,
                    ));
                }
                M::SkipNow => effects.push(switch(&mut next)),
                M::CancelWait => {
                    next.status = S::ActionRequired {
                        reason: ActionReason::WaitCancelled,
                    }
                }
                M::Stop => {
                    next.status = S::ActionRequired {
                        reason: ActionReason::StoppedByUser,
                    }
                }
            }
            Ok(changed(next, effects, None))
        }

        // Switching: the server says which candidates are eligible.
        (S::Switching, E::CandidatesEvaluated { candidates, .. }) => {
            let mut next = advance(state)?;
            let pick = choose(
                candidates
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.id != state.candidate.id && !state.cycle.is_excluded(&c.id)),
            );
            let effect = match pick {
                Some((index, c)) => {
                    next.candidate = CandidateRef {
                        id: c.id.clone(),
                        index: index_u32(index),
                    };
                    schedule_attempt(&mut next, AttemptKind::Switch, Slot::Active)
                }
                None => needs_person(&mut next, ActionReason::NoEligibleCandidate),
            };
            Ok(changed(next, vec![effect], None))
        }

        // A person takes over from manual recovery: a new cycle either way.
        (
            S::ActionRequired { .. },
            E::Manual {
                action: M::RetryNow, ..
            },
        ) => {
            let mut next = advance(state)?;
            new_cycle(&mut next);
            let begin = schedule_attempt(&mut next, AttemptKind::Manual, Slot::Retrying);
            Ok(changed(next, vec![begin], None))
        }
        (
            S::ActionRequired { .. },
            E::Manual {
                action: M::SkipNow, ..
            },
        ) => {
            let mut next = advance(state)?;
            new_cycle(&mut next);
            let evaluate = switch(&mut next);
            Ok(changed(next, vec![evaluate], None))
        }

        // Stopping automatic work that is running or about to run.
        (S::Active { .. } | S::Retrying { .. } | S::Switching, E::Manual { action: M::Stop, .. }) => {
            let mut next = advance(state)?;
            next.status = S::ActionRequired {
                reason: ActionReason::StoppedByUser,
            };
            Ok(changed(next, abort_if_started(state), None))
        }

        // Ending the route from any non-terminal state.
        (_, E::Abandon { .. }) => {
            let mut next = advance(state)?;
            let mut effects = Vec::new();
            if state.deadline().is_some() {
                effects.push(RouteEffect::CancelTimer);
            }
            effects.extend(abort_if_started(state));
            effects.push(RouteEffect::RouteClosed {
                state: StateName::Abandoned,
            });
            next.status = S::Abandoned;
            Ok(changed(next, effects, None))
        }

        // Restart reconciliation.
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Restarted) => match a.dispatch {
            DispatchState::Pending => Ok(unchanged(state, vec![begin_dispatch(state, *a)])),
            DispatchState::Started => {
                let mut next = advance(state)?;
                let notify = needs_person(&mut next, ActionReason::AmbiguousDispatch);
                Ok(changed(next, vec![notify], None))
            }
        },
        (S::WaitingForReset { deadline } | S::RetryWait { deadline }, E::Restarted) => Ok(unchanged(
            state,
            vec![RouteEffect::ArmTimer {
                deadline: *deadline,
                generation: state.generation,
            }],
        )),
        (S::Switching, E::Restarted) => Ok(unchanged(state, vec![evaluate_candidates(state)])),
        (S::Active { attempt: None } | S::ActionRequired { .. }, E::Restarted) => {
            Ok(unchanged(state, vec![]))
        }

        // Everything else makes no sense in its state.
        (
            S::Active { .. }
            | S::WaitingForReset { .. }
            | S::RetryWait { .. }
            | S::Retrying { .. }
            | S::Switching
            | S::ActionRequired { .. },
            E::DispatchStarted { .. }
            | E::DispatchHeld { .. }
            | E::LeaseExpired { .. }
            | E::Failed(_)
            | E::Succeeded { .. }
            | E::DeadlineReached { .. }
            | E::CandidatesEvaluated { .. }
            | E::WorkSubmitted { .. }
            | E::Manual { .. }
            | E::Complete { .. },
        ) => not_allowed(),
    }
}

/// The failure row of the table: evaluate, then move as the decision says.
fn on_failure(
    state: &RouteState,
    report: FailureReport,
    now: DateTime<Utc>,
) -> Result<Transition, TransitionError> {
    if let Some(policy) = &report.policy {
        if policy.id() != state.candidate.id {
            return Err(TransitionError::PolicyForOtherCandidate {
                given: policy.id().to_owned(),
                current: state.candidate.id.clone(),
            });
        }
    }
    let failure = |gate: Gate| Failure {
        classification: &report.classification,
        gate,
        policy: report.policy.as_ref(),
        usage: state.cycle.usage(&state.candidate.id),
    };
    // The gate's one exception: a session that holds the output, for the retry that resumes it.
    let resumed = report.resume.as_ref().filter(|offer| {
        held::granted(
            offer,
            report.evidence_generation,
            state.generation,
            &state.candidate.id,
            || {
                let open = evaluate(&failure(Gate::ALLOW), now);
                matches!(open.kind, DecisionKind::Retry | DecisionKind::WaitForReset)
            },
        )
    });
    let gate = resumed.map_or(report.gate, |offer| offer.gate);
    let decision = evaluate(&failure(gate), now);
    let mut next = advance(state)?;
    if let Some(offer) = resumed {
        if matches!(decision.kind, DecisionKind::Retry | DecisionKind::WaitForReset) {
            next.held = Some(HeldOutput {
                session: offer.session.clone(),
                generation: state.generation,
            });
        }
    }
    let candidate = state.candidate.id.clone();
    let effect = match (decision.kind, decision.deadline, decision.error_class()) {
        (DecisionKind::WaitForReset, Some(deadline), Some(class)) => {
            let usage = next.cycle.usage.entry(candidate).or_default();
            usage.class_mut(class).reset_wait_used = true;
            next.status = RouteStatus::WaitingForReset { deadline };
            RouteEffect::ArmTimer {
                deadline,
                generation: next.generation,
            }
        }
        (DecisionKind::Retry, Some(deadline), Some(class)) => {
            let usage = next.cycle.usage.entry(candidate).or_default();
            let used = &mut usage.class_mut(class).retries_used;
            *used = decision.retry_ordinal.unwrap_or(used.saturating_add(1));
            next.status = RouteStatus::RetryWait { deadline };
            RouteEffect::ArmTimer {
                deadline,
                generation: next.generation,
            }
        }
        (DecisionKind::Skip, _, _) => switch(&mut next),
        (DecisionKind::Stop, _, _) => needs_person(&mut next, ActionReason::PolicyStop),
        // Manual, or a wait/retry without its deadline or class (cannot happen; fail closed).
        _ => needs_person(&mut next, manual_reason(decision.reason)),
    };
    next.decision = Some(decision.clone());
    Ok(Transition {
        gate: Some(gate),
        ..changed(next, vec![effect], Some(decision))
    })
}

fn manual_reason(reason: DecisionReason) -> ActionReason {
    match reason {
        DecisionReason::StaleEvidence => ActionReason::StaleEvidence,
        DecisionReason::Unclassified => ActionReason::Unclassified,
        DecisionReason::InconsistentClassification => ActionReason::InconsistentClassification,
        DecisionReason::EffectUnsafe => ActionReason::EffectUnsafe,
        DecisionReason::ConfigurationError => ActionReason::ConfigurationError,
        DecisionReason::ResetWait
        | DecisionReason::RetryBudgetRemaining
        | DecisionReason::RetryBudgetExhausted
        | DecisionReason::RetryDisabled => ActionReason::PolicyStop,
    }
}

/// The kind of the attempt that follows a wait.
fn after_wait(status: &RouteStatus) -> AttemptKind {
    match status {
        RouteStatus::WaitingForReset { .. } => AttemptKind::PostWait,
        _ => AttemptKind::Retry,
    }
}

/// The next generation of `state`. A hold belongs to one generation of a pending attempt:
/// every change clears it (only `dispatch_held` sets it again).
fn advance(state: &RouteState) -> Result<RouteState, TransitionError> {
    let mut next = state.clone();
    next.generation = state
        .generation
        .checked_add(1)
        .ok_or(TransitionError::GenerationExhausted)?;
    next.hold = None;
    Ok(next)
}

fn stale(state: &RouteState, given: u64) -> Result<Transition, TransitionError> {
    Err(TransitionError::StaleGeneration {
        given,
        current: state.generation,
        state: state.state_name(),
    })
}

fn unchanged(state: &RouteState, effects: Vec<RouteEffect>) -> Transition {
    Transition {
        next: state.clone(),
        effects,
        decision: None,
        gate: None,
        changed: false,
    }
}

fn changed(
    next: RouteState,
    effects: Vec<RouteEffect>,
    decision: Option<crate::evaluator::Decision>,
) -> Transition {
    Transition {
        next,
        effects,
        decision,
        gate: None,
        changed: true,
    }
}

#[derive(Clone, Copy)]
enum Slot {
    Active,
    Retrying,
}

/// Puts a new pending attempt on `next` (already advanced) and returns its `BeginDispatch`.
fn schedule_attempt(next: &mut RouteState, kind: AttemptKind, slot: Slot) -> RouteEffect {
    next.attempts = next.attempts.saturating_add(1);
    let attempt = Attempt {
        number: next.attempts,
        kind,
        dispatch: DispatchState::Pending,
    };
    next.status = match slot {
        Slot::Active => RouteStatus::Active {
            attempt: Some(attempt),
        },
        Slot::Retrying => RouteStatus::Retrying { attempt },
    };
    begin_dispatch(next, attempt)
}

fn begin_dispatch(state: &RouteState, attempt: Attempt) -> RouteEffect {
    RouteEffect::BeginDispatch {
        candidate_id: state.candidate.id.clone(),
        candidate_index: state.candidate.index,
        attempt: attempt.number,
        kind: attempt.kind,
        generation: state.generation,
    }
}

/// The launch of the attempt just recorded as started: plain, or loading the session that
/// holds the route's output when it is the retry that session waits for; any other start while
/// output is held is refused (see [`held`]).
fn launch(state: &RouteState, attempt: Attempt, facts: Option<&LaunchFacts>) -> RouteEffect {
    let resume = match &state.held {
        None => None,
        Some(h) => {
            let retry = matches!(attempt.kind, AttemptKind::Retry | AttemptKind::PostWait);
            if !held::loads(h, retry, &state.candidate.id, facts) {
                return RouteEffect::RefuseStart {
                    generation: state.generation,
                };
            }
            Some(h.session.session_id.clone())
        }
    };
    RouteEffect::Launch {
        candidate_id: state.candidate.id.clone(),
        candidate_index: state.candidate.index,
        attempt: attempt.number,
        kind: attempt.kind,
        invocation_generation: state.generation,
        resume,
    }
}

/// A new route cycle: its bookkeeping starts over, and output a session held for the last one
/// is no longer the route's (see [`held`]).
fn new_cycle(next: &mut RouteState) {
    next.cycle = next.cycle.next();
    next.held = None;
}

/// Excludes the current candidate for this cycle and asks for eligibility.
fn switch(next: &mut RouteState) -> RouteEffect {
    next.cycle.excluded.insert(next.candidate.id.clone());
    next.status = RouteStatus::Switching;
    evaluate_candidates(next)
}

fn evaluate_candidates(state: &RouteState) -> RouteEffect {
    RouteEffect::EvaluateCandidates {
        generation: state.generation,
        excluded: state.cycle.excluded.iter().cloned().collect(),
    }
}

fn needs_person(next: &mut RouteState, reason: ActionReason) -> RouteEffect {
    next.status = RouteStatus::ActionRequired { reason };
    RouteEffect::NotifyPerson { reason }
}

fn abort_if_started(state: &RouteState) -> Vec<RouteEffect> {
    match state.attempt() {
        Some(a) if a.dispatch == DispatchState::Started => {
            vec![RouteEffect::AbortDispatch { attempt: a.number }]
        }
        _ => vec![],
    }
}

fn index_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}
