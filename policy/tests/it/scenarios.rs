//! The spec's scenarios that this layer decides (1 to 8), each end to end through the route
//! machine with an injected clock: what the server would persist and do, step by step.

use crate::common;

use common::*;
use policy::{
    class::SemanticCode,
    classification::{Gate, GateReason},
    document::OnExhausted::{Skip, Stop},
    evaluator::{DecisionKind, DecisionReason, WaitSkipReason},
    route::{step, ActionReason, AttemptKind, RouteEffect, StateName},
};

/// GIVEN a candidate returns a high-confidence capacity error before output, WHEN its transient
/// policy allows three retries starting at 5 seconds, THEN the route persists waits of 5, 10
/// and 20 seconds before applying the configured exhausted outcome.
#[test]
fn scenario_1_capacity_error_waits_5_10_20_seconds_then_applies_the_exhausted_outcome() {
    let doc = document(vec![
        candidate(
            "a",
            class_policy(Some((3, 5)), None, Skip),
            class_policy(None, None, Stop),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let mut waits = Vec::new();
    for ordinal in 1..=3 {
        let failed_at = d.now;
        let t = d.fail(classified(SemanticCode::ModelCapacity, d.now), Gate::ALLOW);
        assert_eq!(d.name(), StateName::RetryWait);
        let decision = t.decision.clone().unwrap();
        assert_eq!((decision.retry_ordinal, decision.max_retries), (Some(ordinal), 3));
        // Persisted before the timer is armed: the state carries the deadline and decision.
        assert_eq!(d.state.deadline(), armed(&t));
        assert_eq!(d.state.decision(), Some(&decision));
        waits.push((armed(&t).unwrap() - failed_at).num_seconds());
        d.fire();
        d.dispatch();
    }
    assert_eq!(waits, vec![5, 10, 20]);
    let t = d.fail(classified(SemanticCode::ModelCapacity, d.now), Gate::ALLOW);
    assert_eq!(d.name(), StateName::Switching);
    let decision = t.decision.unwrap();
    assert_eq!(
        (decision.kind, decision.reason),
        (DecisionKind::Skip, DecisionReason::RetryBudgetExhausted)
    );
}

/// GIVEN a quota error includes a trusted reset one minute from now, WHEN the hard policy allows
/// reset waits up to five minutes, THEN the route waits durably until the reset and retries the
/// same candidate once.
#[test]
fn scenario_2_a_reset_one_minute_away_is_waited_for_and_retried_once() {
    let doc = document(vec![
        candidate(
            "a",
            class_policy(None, None, Skip),
            class_policy(None, Some(300), Skip),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let reset = d.now + secs(60);
    let t = d.fail(
        with_reset(classified(SemanticCode::QuotaLimited, d.now), reset),
        Gate::ALLOW,
    );
    assert_eq!(d.name(), StateName::WaitingForReset);
    assert_eq!(armed(&t), Some(reset), "the wait ends exactly at the reset");

    let t = d.fire();
    assert_eq!(d.now, reset);
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch { candidate_id, kind: AttemptKind::PostWait, .. }] if candidate_id == "a"
    ));
    d.dispatch();

    // The one post-wait attempt fails with a fresh reset: no second wait in this cycle.
    let t = d.fail(
        with_reset(classified(SemanticCode::QuotaLimited, d.now), d.now + secs(60)),
        Gate::ALLOW,
    );
    let decision = t.decision.unwrap();
    assert_eq!(decision.wait_skipped, Some(WaitSkipReason::AlreadyUsed));
    assert_eq!(d.name(), StateName::Switching);
    assert_eq!(
        d.state.cycle().usage("a").hard.retries_used,
        0,
        "waiting used no retry budget"
    );
}

/// GIVEN the same reset is six hours away, WHEN the maximum wait is five minutes, THEN the
/// route neither shortens nor waits for it and proceeds to the configured retry or exhausted
/// outcome.
#[test]
fn scenario_3_a_reset_six_hours_away_is_neither_shortened_nor_waited_for() {
    // With a retry configured: the retry's own delay, not the reset and not five minutes.
    let doc = document(vec![candidate(
        "a",
        class_policy(None, None, Skip),
        class_policy(Some((1, 30)), Some(300), Stop),
    )]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let far = d.now + secs(6 * 3600);
    let t = d.fail(
        with_reset(classified(SemanticCode::QuotaLimited, d.now), far),
        Gate::ALLOW,
    );
    let decision = t.decision.clone().unwrap();
    assert_eq!(decision.kind, DecisionKind::Retry);
    assert_eq!(decision.wait_skipped, Some(WaitSkipReason::HintBeyondMaximum));
    assert_eq!(armed(&t), Some(t0() + secs(30)));

    // Without a retry: straight to the exhausted outcome.
    let doc = document(vec![candidate(
        "a",
        class_policy(None, None, Skip),
        class_policy(None, Some(300), Stop),
    )]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let t = d.fail(
        with_reset(classified(SemanticCode::QuotaLimited, d.now), far),
        Gate::ALLOW,
    );
    assert_eq!(d.state.action_reason(), Some(ActionReason::PolicyStop));
    assert!(armed(&t).is_none(), "no timer at all");
}

/// GIVEN a transient retry budget is exhausted with `on_exhausted=skip`, WHEN another candidate
/// is eligible, THEN the same logical route advances to that candidate.
#[test]
fn scenario_4_skip_advances_the_same_route_to_the_next_eligible_candidate() {
    let doc = document(vec![
        candidate(
            "a",
            class_policy(Some((1, 5)), None, Skip),
            class_policy(None, None, Skip),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let mut d = Driver::start(doc);
    d.dispatch();
    d.fail(classified(SemanticCode::ProviderOverloaded, d.now), Gate::ALLOW);
    d.fire();
    d.dispatch();
    d.fail(classified(SemanticCode::ProviderOverloaded, d.now), Gate::ALLOW);
    assert_eq!(d.name(), StateName::Switching);
    let before = d.gen();
    let t = d.evaluate();
    assert_eq!(d.name(), StateName::Active);
    assert_eq!(d.state.candidate().id, "b");
    assert_eq!(d.gen(), before + 1, "same route, next generation");
    assert!(matches!(
        t.effects.as_slice(),
        [RouteEffect::BeginDispatch { candidate_id, kind: AttemptKind::Switch, .. }] if candidate_id == "b"
    ));
    assert!(d.state.cycle().is_excluded("a"));
}

/// GIVEN a hard policy has no retry or wait and ends in `stop`, WHEN the provider reports
/// exhausted credits, THEN the route enters manual recovery without trying another provider.
#[test]
fn scenario_5_hard_stop_without_retry_or_wait_goes_to_manual_recovery_without_switching() {
    let doc = document(vec![
        candidate(
            "a",
            class_policy(None, None, Skip),
            class_policy(None, None, Stop),
        ),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let t = d.fail(classified(SemanticCode::QuotaLimited, d.now), Gate::ALLOW);
    assert_eq!(d.state.action_reason(), Some(ActionReason::PolicyStop));
    assert_eq!(d.state.candidate().id, "a");
    assert_eq!(
        t.effects,
        vec![RouteEffect::NotifyPerson {
            reason: ActionReason::PolicyStop
        }]
    );
    assert_eq!(t.decision.unwrap().reason, DecisionReason::RetryDisabled);
}

/// GIVEN an agent emits an unknown string error, WHEN no deterministic catalogue rule matches,
/// THEN automatic recovery stops (whatever the policy says).
#[test]
fn scenario_6_unknown_evidence_stops_automatic_recovery() {
    let generous = class_policy(Some((10, 1)), Some(604_800), Skip);
    let doc = document(vec![
        candidate("a", generous, generous),
        candidate(
            "b",
            class_policy(None, None, Skip),
            class_policy(None, None, Skip),
        ),
    ]);
    let mut d = Driver::start(doc);
    d.dispatch();
    let t = d.fail(unclassified(d.now), deny(GateReason::Unclassified));
    assert_eq!(d.state.action_reason(), Some(ActionReason::Unclassified));
    let decision = t.decision.unwrap();
    assert_eq!((decision.kind, decision.code), (DecisionKind::Manual, None));
    assert!(
        !t.effects.iter().any(|e| matches!(
            e,
            RouteEffect::ArmTimer { .. }
                | RouteEffect::BeginDispatch { .. }
                | RouteEffect::EvaluateCandidates { .. }
        )),
        "no work is scheduled"
    );
    // Even a gate that (wrongly) allows it cannot make unclassified evidence act.
    let mut d = Driver::start(document(vec![candidate("a", generous, generous)]));
    d.dispatch();
    d.fail(unclassified(d.now), Gate::ALLOW);
    assert_eq!(d.state.action_reason(), Some(ActionReason::Unclassified));
}

/// GIVEN a failure follows tool activity, WHEN the candidate policy says retry or skip, THEN
/// effect safety overrides the policy and the route stops for manual recovery.
#[test]
fn scenario_7_tool_activity_overrides_retry_and_skip() {
    for policy in [
        class_policy(Some((3, 5)), None, Skip),
        class_policy(None, None, Skip),
    ] {
        let doc = document(vec![
            candidate("a", policy, policy),
            candidate(
                "b",
                class_policy(None, None, Skip),
                class_policy(None, None, Skip),
            ),
        ]);
        let mut d = Driver::start(doc);
        d.dispatch();
        let t = d.fail(
            classified(SemanticCode::ProviderOverloaded, d.now),
            deny(GateReason::ToolActivity),
        );
        assert_eq!(d.state.action_reason(), Some(ActionReason::EffectUnsafe));
        let decision = t.decision.unwrap();
        assert_eq!(decision.gate_reason, Some(GateReason::ToolActivity));
        assert_eq!(
            decision.policy,
            Some(policy),
            "the overridden policy is on record"
        );
        assert_eq!(d.state.candidate().id, "a", "no switch");
    }
}

/// GIVEN the same dynamic profile is selected by Kanban and Office, WHEN each sees the same
/// classified, effect-safe error, THEN both apply the same candidate policy and transition.
/// (The caller is not even an input of the machine.)
#[test]
fn scenario_8_kanban_and_office_get_the_same_transition() {
    let doc = document(vec![candidate(
        "a",
        class_policy(Some((2, 7)), Some(120), Skip),
        class_policy(None, None, Stop),
    )]);
    let mut kanban = Driver::start(doc.clone());
    let mut office = Driver::start(doc);
    kanban.dispatch();
    office.dispatch();
    let c = classified(SemanticCode::RateLimited, kanban.now);
    let a = step(&kanban.state, kanban.failure(c.clone(), Gate::ALLOW), kanban.now).unwrap();
    let b = step(&office.state, office.failure(c, Gate::ALLOW), office.now).unwrap();
    assert_eq!(a, b);
}
