//! The route state machine, row by row: one named test per row of the spec's state-machine
//! table, then the whole state x event matrix, fencing, terminal absorption and restart
//! reconciliation. Public API only.

use crate::common;

use common::*;
use policy::{
    class::SemanticCode,
    classification::{Gate, GateReason},
    document::OnExhausted::{Skip, Stop},
    evaluator::{DecisionKind, DecisionReason},
    route::{
        start, ActionReason, AttemptKind, CandidateOption, DispatchState, Hold, ManualAction, RouteEffect,
        RouteEvent, RouteState, StateName, TransitionError,
    },
};

/// Candidate "a": transient retries twice from 5 s and may wait 5 min, then skips; hard may wait
/// 5 min, never retries, then stops. Candidate "b": defaults.
fn standard() -> Driver {
    Driver::start(document(vec![
        candidate(
            "a",
            class_policy(Some((2, 5)), Some(300), Skip),
            class_policy(None, Some(300), Stop),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]))
}

fn transient(d: &Driver) -> policy::classification::Classification {
    classified(SemanticCode::ProviderOverloaded, d.now)
}

fn quota(d: &Driver) -> policy::classification::Classification {
    classified(SemanticCode::QuotaLimited, d.now)
}

fn quota_reset_in(d: &Driver, seconds: i64) -> policy::classification::Classification {
    with_reset(quota(d), d.now + secs(seconds))
}

// ---- The spec's table, one test per row -------------------------------------------------------

#[test]
fn row_01_active_failure_with_eligible_reset_wait_goes_to_waiting_for_reset() {
    let mut d = standard();
    d.dispatch();
    let g = d.gen();
    let t = d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    assert_eq!(d.name(), StateName::WaitingForReset);
    assert_eq!(d.state.deadline(), Some(t0() + secs(60)));
    assert_eq!(
        t.effects,
        vec![RouteEffect::ArmTimer {
            deadline: t0() + secs(60),
            generation: g + 1
        }]
    );
    assert_eq!(t.decision.map(|d| d.reason), Some(DecisionReason::ResetWait));
}

#[test]
fn row_02_active_failure_with_retry_budget_goes_to_retry_wait() {
    let mut d = standard();
    d.dispatch();
    let t = d.fail(transient(&d), Gate::ALLOW);
    assert_eq!(d.name(), StateName::RetryWait);
    assert_eq!(armed(&t), Some(t0() + secs(5)));
    let decision = t.decision.unwrap();
    assert_eq!((decision.retry_ordinal, decision.max_retries), (Some(1), 2));
}

#[test]
fn row_03_active_recovery_exhausted_with_skip_goes_to_switching() {
    let mut d = Driver::start(document(vec![
        candidate(
            "a",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]));
    d.dispatch();
    let g = d.gen();
    let t = d.fail(transient(&d), Gate::ALLOW);
    assert_eq!(d.name(), StateName::Switching);
    assert_eq!(
        t.effects,
        vec![RouteEffect::EvaluateCandidates {
            generation: g + 1,
            excluded: vec!["a".into()]
        }]
    );
    assert_eq!(
        t.decision.map(|d| (d.kind, d.reason)),
        Some((DecisionKind::Skip, DecisionReason::RetryDisabled))
    );
}

#[test]
fn row_04_active_recovery_exhausted_with_stop_or_unsafe_or_unclassified_failure_goes_to_action_required() {
    // Exhausted with stop: the hard policy has no retry and no hint applies.
    let mut d = standard();
    d.dispatch();
    let t = d.fail(quota(&d), Gate::ALLOW);
    assert_eq!(d.state.action_reason(), Some(ActionReason::PolicyStop));
    assert_eq!(
        t.effects,
        vec![RouteEffect::NotifyPerson {
            reason: ActionReason::PolicyStop
        }]
    );

    // Unsafe: tool activity, although the transient policy would retry.
    let mut d = standard();
    d.dispatch();
    d.fail(transient(&d), deny(GateReason::ToolActivity));
    assert_eq!(d.state.action_reason(), Some(ActionReason::EffectUnsafe));

    // Unclassified.
    let mut d = standard();
    d.dispatch();
    d.fail(unclassified(d.now), deny(GateReason::Unclassified));
    assert_eq!(d.state.action_reason(), Some(ActionReason::Unclassified));
}

#[test]
fn row_05_waiting_for_reset_deadline_reached_with_current_generation_goes_to_retrying() {
    let mut d = standard();
    d.dispatch();
    d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    let stale = d.gen() - 1;
    d.now += secs(60);
    assert!(matches!(
        d.try_step(RouteEvent::DeadlineReached { generation: stale }),
        Err(TransitionError::StaleGeneration { .. })
    ));
    let t = d.fire();
    assert_eq!(d.name(), StateName::Retrying);
    assert_eq!(
        d.state.attempt().map(|a| (a.kind, a.dispatch)),
        Some((AttemptKind::PostWait, DispatchState::Pending))
    );
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch {
            kind: AttemptKind::PostWait,
            ..
        }]
    ));
}

#[test]
fn row_06_retry_wait_deadline_reached_with_current_generation_goes_to_retrying() {
    let mut d = standard();
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    let t = d.fire();
    assert_eq!(d.name(), StateName::Retrying);
    assert_eq!(d.now, t0() + secs(5));
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch {
            kind: AttemptKind::Retry,
            ..
        }]
    ));
}

#[test]
fn row_07_skip_now_from_waiting_for_reset_or_retry_wait_goes_to_switching() {
    for reset in [Some(60), None] {
        let mut d = standard();
        d.dispatch();
        match reset {
            Some(s) => d.fail(quota_reset_in(&d, s), Gate::ALLOW),
            None => d.fail(transient(&d), Gate::ALLOW),
        };
        let waiting = d.name();
        let t = d.manual(ManualAction::SkipNow);
        assert_eq!(d.name(), StateName::Switching, "from {waiting}");
        assert_eq!(t.effects[0], RouteEffect::CancelTimer);
        assert!(
            matches!(&t.effects[1], RouteEffect::EvaluateCandidates { excluded, .. } if excluded == &["a"])
        );
    }
}

#[test]
fn row_08_cancel_or_stop_from_waiting_for_reset_or_retry_wait_goes_to_action_required() {
    for (action, reason) in [
        (ManualAction::CancelWait, ActionReason::WaitCancelled),
        (ManualAction::Stop, ActionReason::StoppedByUser),
    ] {
        for reset in [Some(60), None] {
            let mut d = standard();
            d.dispatch();
            match reset {
                Some(s) => d.fail(quota_reset_in(&d, s), Gate::ALLOW),
                None => d.fail(transient(&d), Gate::ALLOW),
            };
            let t = d.manual(action);
            assert_eq!(d.state.action_reason(), Some(reason));
            assert_eq!(t.effects, vec![RouteEffect::CancelTimer]);
        }
    }
}

#[test]
fn row_09_retrying_success_goes_to_active() {
    let mut d = standard();
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    d.fire();
    d.dispatch();
    let cycle = d.state.cycle().number();
    let t = d.succeed();
    assert_eq!(d.name(), StateName::Active);
    assert_eq!(d.state.attempt(), None);
    assert_eq!(d.state.cycle().number(), cycle + 1);
    assert_eq!(d.state.cycle().usage("a"), Default::default());
    assert!(t.effects.is_empty());
}

#[test]
fn row_10_retrying_classified_failure_with_budget_remaining_goes_to_waiting_for_reset_or_retry_wait() {
    // To retry_wait with the next ordinal.
    let mut d = standard();
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    d.fire();
    d.dispatch();
    let t = d.fail(transient(&d), Gate::ALLOW);
    assert_eq!(d.name(), StateName::RetryWait);
    assert_eq!(t.decision.as_ref().unwrap().retry_ordinal, Some(2));
    assert_eq!(armed(&t), Some(d.now + secs(10)));

    // To waiting_for_reset when a trusted reset now applies.
    let mut d = standard();
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    d.fire();
    d.dispatch();
    let c = with_reset(transient(&d), d.now + secs(120));
    d.fail(c, Gate::ALLOW);
    assert_eq!(d.name(), StateName::WaitingForReset);
}

#[test]
fn row_11_retrying_recovery_exhausted_goes_to_switching_or_action_required() {
    // Transient: both retries used, then skip.
    let mut d = standard();
    d.dispatch();
    for _ in 0..2 {
        d.fail(transient(&d), Gate::ALLOW);
        d.fire();
        d.dispatch();
    }
    let t = d.fail(transient(&d), Gate::ALLOW);
    assert_eq!(d.name(), StateName::Switching);
    assert_eq!(t.decision.unwrap().reason, DecisionReason::RetryBudgetExhausted);

    // Hard: the post-wait attempt fails again; the wait was used; stop.
    let mut d = standard();
    d.dispatch();
    d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    d.fire();
    d.dispatch();
    let t = d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    assert_eq!(d.state.action_reason(), Some(ActionReason::PolicyStop));
    assert_eq!(
        t.decision.unwrap().wait_skipped,
        Some(policy::evaluator::WaitSkipReason::AlreadyUsed)
    );
}

// ---- The whole matrix ---------------------------------------------------------------------------

/// Builds a route in each named situation.
fn situation(name: &str) -> Driver {
    let mut d = standard();
    match name {
        "active(pending)" => {}
        "active(started)" => {
            d.dispatch();
        }
        "active(idle)" => {
            d.dispatch();
            d.succeed();
        }
        "waiting_for_reset" => {
            d.dispatch();
            d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
        }
        "retry_wait" => {
            d.dispatch();
            d.fail(transient(&d), Gate::ALLOW);
        }
        "retrying(pending)" | "retrying(started)" | "switching" => {
            // Retry budget 2: use both, then the third failure skips.
            d.dispatch();
            d.fail(transient(&d), Gate::ALLOW);
            d.fire();
            d.dispatch();
            d.fail(transient(&d), Gate::ALLOW);
            d.fire();
            if name != "retrying(pending)" {
                d.dispatch();
            }
            if name == "switching" {
                d.fail(transient(&d), Gate::ALLOW);
            }
        }
        "action_required" => {
            d.dispatch();
            d.fail(quota(&d), Gate::ALLOW);
        }
        "completed" => {
            d.dispatch();
            d.succeed();
            let expected_generation = d.gen();
            d.step(RouteEvent::Complete { expected_generation });
        }
        "abandoned" => {
            let expected_generation = d.gen();
            d.step(RouteEvent::Abandon { expected_generation });
        }
        other => panic!("unknown situation {other}"),
    }
    d
}

/// The situations of a route that is not finished.
const LIVE: [&str; 9] = [
    "active(idle)",
    "active(pending)",
    "active(started)",
    "waiting_for_reset",
    "retry_wait",
    "retrying(pending)",
    "retrying(started)",
    "switching",
    "action_required",
];

const EVENTS: [&str; 15] = [
    "DS", "DH", "LE", "F", "S", "DR", "CE", "WS", "RN", "SN", "CW", "ST", "C", "A", "R",
];

fn event(d: &Driver, code: &str) -> RouteEvent {
    let g = d.gen();
    match code {
        "DS" => RouteEvent::DispatchStarted {
            generation: g,
            launch: None,
        },
        "DH" => RouteEvent::DispatchHeld {
            generation: g,
            hold: Hold {
                circuit: "provider:p".into(),
                until: d.now + secs(30),
            },
        },
        "LE" => RouteEvent::LeaseExpired { generation: g },
        "F" => d.failure(transient(d), Gate::ALLOW),
        "S" => RouteEvent::Succeeded { generation: g },
        "DR" => RouteEvent::DeadlineReached { generation: g },
        "CE" => RouteEvent::CandidatesEvaluated {
            expected_generation: g,
            candidates: options(&d.doc, &[]),
        },
        "WS" => RouteEvent::WorkSubmitted {
            expected_generation: g,
        },
        "RN" => RouteEvent::Manual {
            action: ManualAction::RetryNow,
            expected_generation: g,
        },
        "SN" => RouteEvent::Manual {
            action: ManualAction::SkipNow,
            expected_generation: g,
        },
        "CW" => RouteEvent::Manual {
            action: ManualAction::CancelWait,
            expected_generation: g,
        },
        "ST" => RouteEvent::Manual {
            action: ManualAction::Stop,
            expected_generation: g,
        },
        "C" => RouteEvent::Complete {
            expected_generation: g,
        },
        "A" => RouteEvent::Abandon {
            expected_generation: g,
        },
        "R" => RouteEvent::Restarted,
        other => panic!("unknown event {other}"),
    }
}

fn outcome(d: &mut Driver, code: &str) -> String {
    // Timers fire late rather than early in this matrix.
    d.now += secs(86_400 * 8);
    let e = event(d, code);
    match d.try_step(e) {
        Ok(t) if !t.changed => "=".to_owned(),
        Ok(t) => short(t.next.state_name()).to_owned(),
        Err(TransitionError::NotAllowed { .. }) => "x".to_owned(),
        Err(e) => format!("!{e}"),
    }
}

fn short(name: StateName) -> &'static str {
    match name {
        StateName::Active => "act",
        StateName::WaitingForReset => "wfr",
        StateName::RetryWait => "rw",
        StateName::Retrying => "rt",
        StateName::Switching => "sw",
        StateName::ActionRequired => "ar",
        StateName::Completed => "done",
        StateName::Abandoned => "aban",
    }
}

#[test]
fn every_state_and_event_pair_has_the_tabled_outcome() {
    // "=": accepted, no change; "x": rejected as not allowed; otherwise the next state.
    let expected = "
        situation          DS   DH   LE   F    S    DR   CE   WS   RN   SN   CW   ST   C    A    R
        active(idle)       x    x    x    x    x    x    x    act  x    x    x    ar   done aban =
        active(pending)    act  act  x    x    x    x    x    x    x    x    x    ar   x    aban =
        active(started)    x    x    ar   rw   act  x    x    x    x    x    x    ar   x    aban ar
        waiting_for_reset  x    x    x    x    x    rt   x    x    rt   sw   ar   ar   x    aban =
        retry_wait         x    x    x    x    x    rt   x    x    rt   sw   ar   ar   x    aban =
        retrying(pending)  rt   rt   x    x    x    x    x    x    x    x    x    ar   x    aban =
        retrying(started)  x    x    ar   sw   act  x    x    x    x    x    x    ar   x    aban ar
        switching          x    x    x    x    x    x    act  x    x    x    x    ar   x    aban =
        action_required    x    x    x    x    x    x    x    x    rt   sw   =    =    x    aban =
        completed          x    x    x    x    x    x    x    x    x    x    x    x    =    x    =
        abandoned          x    x    x    x    x    x    x    x    x    x    x    x    x    =    =
    ";
    let mut lines = expected.lines().map(str::trim).filter(|l| !l.is_empty());
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().skip(1).collect();
    assert_eq!(header, EVENTS);
    let mut mismatches = Vec::new();
    for line in lines {
        let mut cells = line.split_whitespace();
        let name = cells.next().unwrap();
        for (code, want) in EVENTS.iter().zip(cells) {
            let got = outcome(&mut situation(name), code);
            if got != want {
                mismatches.push(format!("{name} + {code}: expected {want}, got {got}"));
            }
        }
    }
    assert!(mismatches.is_empty(), "\n{}", mismatches.join("\n"));
}

#[test]
fn every_fenced_event_with_an_old_generation_is_rejected_in_every_live_state() {
    for name in LIVE {
        for code in EVENTS.iter().filter(|c| **c != "R") {
            let mut d = situation(name);
            let before = d.state.clone();
            let mut e = event(&d, code);
            set_generation(&mut e, d.gen() - 1);
            let result = d.try_step(e);
            // (This action_required was reached by a policy stop: a cancel or stop with an
            // older generation is not a repeat of the request that stopped it.)
            match result {
                Err(TransitionError::StaleGeneration { given, current, .. }) => {
                    assert_eq!((given, current), (before.generation() - 1, before.generation()));
                }
                other => panic!("{name} + {code} with an old generation: {other:?}"),
            }
            assert_eq!(d.state, before, "a rejected event changes nothing");
        }
    }
}

fn set_generation(e: &mut RouteEvent, g: u64) {
    match e {
        RouteEvent::DispatchStarted { generation, .. }
        | RouteEvent::DispatchHeld { generation, .. }
        | RouteEvent::LeaseExpired { generation }
        | RouteEvent::Succeeded { generation }
        | RouteEvent::DeadlineReached { generation } => *generation = g,
        RouteEvent::Failed(r) => r.evidence_generation = g,
        RouteEvent::CandidatesEvaluated {
            expected_generation, ..
        }
        | RouteEvent::WorkSubmitted { expected_generation }
        | RouteEvent::Manual {
            expected_generation, ..
        }
        | RouteEvent::Complete { expected_generation }
        | RouteEvent::Abandon { expected_generation } => *expected_generation = g,
        RouteEvent::Restarted => {}
    }
}

// ---- Behaviours around the table ----------------------------------------------------------------

#[test]
fn every_accepted_change_increments_the_generation_by_one() {
    let mut d = standard();
    assert_eq!(d.gen(), 1);
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    d.fire();
    d.dispatch();
    d.succeed();
    let gens: Vec<u64> = d.history.iter().map(|t| t.next.generation()).collect();
    assert_eq!(gens, vec![1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_finished_route_refuses_late_events_but_answers_a_repeat_of_its_finishing_request() {
    for (name, finisher) in [("completed", "C"), ("abandoned", "A")] {
        let mut d = situation(name);
        let before = d.state.clone();
        for code in EVENTS {
            // Issued for a generation the route left long ago: stale, never a silent 200.
            let mut e = event(&d, code);
            set_generation(&mut e, 0);
            match d.try_step(e) {
                Ok(t) if code == "R" => assert!(!t.changed && t.effects.is_empty()),
                Err(TransitionError::StaleGeneration {
                    given: 0, current, ..
                }) => {
                    assert_eq!(current, before.generation(), "{name} + {code}")
                }
                other => panic!("{name} + {code} with generation 0: {other:?}"),
            }
        }
        // The request that finished it, sent again (a retried HTTP call), with the generation
        // it carried the first time or the current one: answered as done.
        for g in [before.generation() - 1, before.generation()] {
            let mut e = event(&d, finisher);
            set_generation(&mut e, g);
            let t = d.try_step(e).expect("an idempotent repeat");
            assert!(!t.changed && t.effects.is_empty(), "{name} + {finisher}({g})");
        }
        assert_eq!(d.state, before);
    }
}

#[test]
fn cancellation_is_idempotent() {
    let mut d = situation("retry_wait");
    let g = d.gen();
    d.manual(ManualAction::CancelWait);
    // The same request again (a retried HTTP call) with the generation it saw, or the new one.
    for expected_generation in [g, g + 1] {
        let t = d
            .try_step(RouteEvent::Manual {
                action: ManualAction::CancelWait,
                expected_generation,
            })
            .unwrap();
        assert!(!t.changed && t.effects.is_empty());
    }
    assert_eq!(d.gen(), g + 1);
    // A stop issued for the generation before the cancel is not a repeat of it: stale.
    assert!(matches!(
        d.try_step(RouteEvent::Manual {
            action: ManualAction::Stop,
            expected_generation: g,
        }),
        Err(TransitionError::StaleGeneration { .. })
    ));
}

#[test]
fn a_held_attempt_shows_its_circuit_and_deadline_until_it_starts() {
    let mut d = standard();
    let g = d.gen();
    let hold = Hold {
        circuit: "provider:p".into(),
        until: t0() + secs(90),
    };
    let t = d.step(RouteEvent::DispatchHeld {
        generation: g,
        hold: hold.clone(),
    });
    assert_eq!(
        t.effects,
        vec![RouteEffect::ArmTimer {
            deadline: t0() + secs(90),
            generation: g + 1
        }]
    );
    assert_eq!(d.state.snapshot().hold, Some(hold.clone()));
    assert_eq!(
        d.state.attempt().map(|a| a.dispatch),
        Some(DispatchState::Pending)
    );
    // The same hold again (the gate re-checked early) changes nothing.
    let t = d.step(RouteEvent::DispatchHeld {
        generation: g + 1,
        hold,
    });
    assert!(!t.changed);
    // Dispatching clears it.
    d.dispatch();
    assert_eq!(d.state.hold(), None);
    assert_eq!(d.state.snapshot().hold, None);
}

#[test]
fn a_route_waits_for_the_candidate_eligible_soonest_and_needs_a_person_only_when_none_ever_is() {
    let later = t0() + secs(300);
    let sooner = t0() + secs(60);
    let t = start(&[CandidateOption::at("a", later), CandidateOption::at("b", sooner)]).unwrap();
    assert_eq!(t.next.candidate().id, "b");
    assert_eq!(t.next.state_name(), StateName::Active);
    assert!(matches!(t.effects[..], [RouteEffect::BeginDispatch { .. }]));
    // One eligible now beats any wait.
    let t = start(&[CandidateOption::at("a", sooner), CandidateOption::now("b")]).unwrap();
    assert_eq!(t.next.candidate().id, "b");
    // None ever: a person.
    let t = start(&[CandidateOption::never("a"), CandidateOption::never("b")]).unwrap();
    assert_eq!(t.next.action_reason(), Some(ActionReason::NoEligibleCandidate));

    // Switching does the same among the candidates not excluded.
    let mut d = situation("switching");
    let g = d.gen();
    let t = d.step(RouteEvent::CandidatesEvaluated {
        expected_generation: g,
        candidates: vec![CandidateOption::now("a"), CandidateOption::at("b", later)],
    });
    assert_eq!(
        (d.state.candidate().id.as_str(), d.name()),
        ("b", StateName::Active)
    );
    assert!(matches!(t.effects[..], [RouteEffect::BeginDispatch { .. }]));
}

#[test]
fn an_early_timer_is_rejected_so_the_server_re_arms_it() {
    let mut d = situation("retry_wait");
    let deadline = d.state.deadline().unwrap();
    d.now = deadline - secs(1);
    let g = d.gen();
    assert_eq!(
        d.try_step(RouteEvent::DeadlineReached { generation: g }),
        Err(TransitionError::DeadlineNotReached { deadline, now: d.now })
    );
}

#[test]
fn a_failure_carrying_another_candidates_policy_is_rejected() {
    let mut d = situation("active(started)");
    let mut e = d.failure(transient(&d), Gate::ALLOW);
    if let RouteEvent::Failed(r) = &mut e {
        r.policy = d.doc.candidate("b").cloned();
    }
    assert!(matches!(
        d.try_step(e),
        Err(TransitionError::PolicyForOtherCandidate { .. })
    ));
}

#[test]
fn a_failure_without_a_usable_policy_goes_to_a_person() {
    let mut d = situation("active(started)");
    let mut e = d.failure(transient(&d), Gate::ALLOW);
    if let RouteEvent::Failed(r) = &mut e {
        r.policy = None;
    }
    d.step(e);
    assert_eq!(d.state.action_reason(), Some(ActionReason::ConfigurationError));
}

#[test]
fn evidence_for_an_attempt_that_never_started_is_not_allowed() {
    let mut d = situation("active(pending)");
    let e = d.failure(transient(&d), Gate::ALLOW);
    assert!(matches!(d.try_step(e), Err(TransitionError::NotAllowed { .. })));
}

#[test]
fn a_dispatch_is_recorded_as_started_before_it_launches() {
    let mut d = standard();
    let begin = d.history[0].effects.clone();
    assert_eq!(
        begin,
        vec![RouteEffect::BeginDispatch {
            candidate_id: "a".into(),
            candidate_index: 0,
            attempt: 1,
            kind: AttemptKind::Initial,
            generation: 1
        }]
    );
    let t = d.dispatch();
    assert_eq!(
        d.state.attempt().map(|a| a.dispatch),
        Some(DispatchState::Started)
    );
    assert_eq!(
        t.effects,
        vec![RouteEffect::Launch {
            candidate_id: "a".into(),
            candidate_index: 0,
            attempt: 1,
            kind: AttemptKind::Initial,
            invocation_generation: 2,
            resume: None,
        }]
    );
}

#[test]
fn restart_re_arms_waits_and_re_begins_provably_undispatched_attempts() {
    let d = situation("retry_wait");
    let t = policy::route::step(&d.state, RouteEvent::Restarted, d.now).unwrap();
    assert!(!t.changed);
    assert_eq!(
        t.effects,
        vec![RouteEffect::ArmTimer {
            deadline: d.state.deadline().unwrap(),
            generation: d.gen()
        }]
    );

    let d = situation("retrying(pending)");
    let t = policy::route::step(&d.state, RouteEvent::Restarted, d.now).unwrap();
    assert!(!t.changed);
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch { kind: AttemptKind::Retry, generation, .. }] if *generation == d.gen()
    ));

    let d = situation("switching");
    let t = policy::route::step(&d.state, RouteEvent::Restarted, d.now).unwrap();
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::EvaluateCandidates { .. }]
    ));
}

#[test]
fn restart_turns_an_ambiguous_dispatch_into_action_required() {
    for name in ["active(started)", "retrying(started)"] {
        let mut d = situation(name);
        let t = d.step(RouteEvent::Restarted);
        assert!(t.changed);
        assert_eq!(d.state.action_reason(), Some(ActionReason::AmbiguousDispatch));
        assert_eq!(
            t.effects,
            vec![RouteEffect::NotifyPerson {
                reason: ActionReason::AmbiguousDispatch
            }]
        );
    }
}

#[test]
fn stopping_an_attempt_in_flight_aborts_it_and_its_late_evidence_is_stale() {
    let mut d = situation("active(started)");
    let late = d.failure(transient(&d), Gate::ALLOW);
    let t = d.manual(ManualAction::Stop);
    assert_eq!(t.effects, vec![RouteEffect::AbortDispatch { attempt: 1 }]);
    assert!(matches!(
        d.try_step(late),
        Err(TransitionError::StaleGeneration { .. })
    ));
}

#[test]
fn the_events_said_to_abort_a_started_attempt_are_exactly_those_whose_change_aborts_it() {
    let mut aborting = Vec::new();
    for name in LIVE {
        for code in EVENTS {
            let mut d = situation(name);
            d.now += secs(86_400 * 8);
            let started = d
                .state
                .attempt()
                .is_some_and(|a| a.dispatch == DispatchState::Started);
            let e = event(&d, code);
            let kind = e.kind();
            let Ok(t) = d.try_step(e) else { continue };
            let aborts = t
                .effects
                .iter()
                .any(|e| matches!(e, RouteEffect::AbortDispatch { .. }));
            if aborts {
                aborting.push(format!("{name} + {code}"));
            }
            if started && t.changed {
                assert_eq!(
                    aborts,
                    kind.aborts_started_attempt(),
                    "{name} + {code}: the change aborts the attempt: {aborts}"
                );
            } else {
                assert!(!aborts, "{name} + {code}: nothing started to abort");
            }
        }
    }
    assert_eq!(
        aborting,
        [
            "active(started) + ST",
            "active(started) + A",
            "retrying(started) + ST",
            "retrying(started) + A"
        ]
    );
}

#[test]
fn abandon_closes_the_route_and_cancels_its_timer() {
    let mut d = situation("waiting_for_reset");
    let expected_generation = d.gen();
    let t = d.step(RouteEvent::Abandon { expected_generation });
    assert_eq!(
        t.effects,
        vec![
            RouteEffect::CancelTimer,
            RouteEffect::RouteClosed {
                state: StateName::Abandoned
            }
        ]
    );
}

#[test]
fn a_route_starts_on_the_first_eligible_candidate() {
    let doc = document(vec![
        candidate(
            "a",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let d = Driver::start_with(doc.clone(), &["a"]);
    assert_eq!(
        (d.state.candidate().id.as_str(), d.state.candidate().index),
        ("b", 1)
    );
    assert_eq!(d.name(), StateName::Active);

    let d = Driver::start_with(doc, &["a", "b"]);
    assert_eq!(d.state.action_reason(), Some(ActionReason::NoEligibleCandidate));
    assert_eq!(d.state.candidate().id, "a");
    assert_eq!(policy::route::start(&[]), Err(TransitionError::NoCandidates));
}

#[test]
fn switching_takes_the_first_eligible_candidate_that_is_not_excluded() {
    let skip = || class_policy(None, None, Skip);
    let doc = document(vec![
        candidate("a", skip(), skip()),
        candidate("b", skip(), skip()),
        candidate("c", skip(), skip()),
    ]);
    let mut d = Driver::start(doc);
    d.ineligible = vec!["b".into()];
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    let t = d.evaluate();
    assert_eq!(d.state.candidate().id, "c");
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch {
            kind: AttemptKind::Switch,
            candidate_index: 2,
            ..
        }]
    ));

    // c fails too; a is excluded, b is ineligible: a person is needed.
    d.dispatch();
    d.fail(transient(&d), Gate::ALLOW);
    let t = d.evaluate();
    assert_eq!(d.state.action_reason(), Some(ActionReason::NoEligibleCandidate));
    assert_eq!(
        t.effects,
        vec![RouteEffect::NotifyPerson {
            reason: ActionReason::NoEligibleCandidate
        }]
    );
    assert_eq!(d.state.cycle().excluded().collect::<Vec<_>>(), vec!["a", "c"]);

    // A person skips: a new cycle, only c (current) excluded, so a is back.
    d.ineligible.clear();
    d.manual(ManualAction::SkipNow);
    d.evaluate();
    assert_eq!(d.state.candidate().id, "a");
}

#[test]
fn a_person_retrying_from_action_required_starts_a_new_cycle_on_the_same_candidate() {
    let mut d = situation("action_required");
    let cycle = d.state.cycle().number();
    let t = d.manual(ManualAction::RetryNow);
    assert_eq!(d.name(), StateName::Retrying);
    assert_eq!(d.state.cycle().number(), cycle + 1);
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch {
            kind: AttemptKind::Manual,
            ..
        }]
    ));
}

#[test]
fn reset_waiting_is_used_once_per_cycle_and_again_after_a_success() {
    let mut d = standard();
    d.dispatch();
    d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    d.fire();
    d.dispatch();
    d.succeed();
    d.step(RouteEvent::WorkSubmitted {
        expected_generation: d.gen(),
    });
    d.dispatch();
    d.fail(quota_reset_in(&d, 60), Gate::ALLOW);
    assert_eq!(d.name(), StateName::WaitingForReset, "a new cycle may wait again");
}

#[test]
fn route_state_survives_a_json_round_trip_in_every_situation() {
    for name in LIVE.into_iter().chain(["completed", "abandoned"]) {
        let d = situation(name);
        let json = serde_json::to_string(&d.state).unwrap();
        let back: RouteState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d.state, "{name}");
    }
}

#[test]
fn snapshot_exposes_code_class_ordinal_deadline_and_pending_outcome() {
    let d = situation("retry_wait");
    let s = d.state.snapshot();
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["state"], "retry_wait");
    assert_eq!(v["code"], "provider_overloaded");
    assert_eq!(v["class"], "transient");
    assert_eq!(v["catalogue_version"], "2026.11.1");
    assert_eq!(v["retry_ordinal"], 1);
    assert_eq!(v["max_retries"], 2);
    assert_eq!(v["deadline"], "2026-11-30T08:00:05Z");
    assert_eq!(v["pending_outcome"], "retry");
    assert_eq!(v["on_exhausted"], "skip");
    assert_eq!(v["generation"], d.gen());
    assert_eq!(
        v["allowed_actions"],
        serde_json::json!(["retry_now", "skip_now", "cancel_wait", "stop"])
    );
    assert_eq!(v["decision"]["policy"]["retry"]["max_retries"], 2);
}

#[test]
fn event_payload_names_the_change() {
    let mut d = situation("retry_wait");
    let before = d.state.clone();
    let t = d.fire();
    let p = policy::wire::RouteEventPayload::new(
        policy::route::EventKind::DeadlineReached,
        Some(&before),
        &t,
        d.now,
    );
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["event"], "deadline_reached");
    assert_eq!(v["from"], "retry_wait");
    assert_eq!(v["to"], "retrying");
    assert_eq!(v["snapshot"]["attempt"]["kind"], "retry");
    assert_eq!(v["snapshot"]["attempt"]["dispatch"], "pending");
}

#[test]
fn effects_serialize_with_a_tag_the_server_can_store() {
    let e = RouteEffect::ArmTimer {
        deadline: t0(),
        generation: 7,
    };
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"effect": "arm_timer", "deadline": "2026-11-30T08:00:00Z", "generation": 7})
    );
    let back: RouteEffect = serde_json::from_value(v).unwrap();
    assert_eq!(back, e);
}
