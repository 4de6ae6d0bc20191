//! Held output (`policy::route::held`): the replay gate's one exception, decided by `step`
//! alone. A failure after output may offer the session that holds it; the route holds the
//! output only when the candidate's policy retries that same candidate, and from then on a
//! start is either the retry that loads the session or refused, until the route cycle ends.

use crate::common;

use common::*;
use policy::{
    class::SemanticCode,
    classification::{Gate, GateReason},
    document::OnExhausted::{Skip, Stop},
    route::{
        FailureReport, HeldOutput, HeldSession, LaunchFacts, ManualAction, ResumeOffer, RouteEffect,
        RouteEvent, StateName,
    },
};

/// "a" retries transient failures as `retry` says (count, first interval), then skips to "b".
fn doc(retry: Option<(u32, u64)>) -> policy::document::ValidatedPolicyDocument {
    document(vec![
        candidate(
            "a",
            class_policy(retry, None, Skip),
            class_policy(None, None, Stop),
        ),
        candidate(
            "b",
            class_policy(None, None, Stop),
            class_policy(None, None, Stop),
        ),
    ])
}

fn session(candidate: &str) -> HeldSession {
    HeldSession {
        session_id: "sess-1".into(),
        agent_id: "claude".into(),
        candidate_id: candidate.into(),
        work_digest: "work-1".into(),
    }
}

fn on(agent: &str, work: &str) -> Option<LaunchFacts> {
    Some(LaunchFacts {
        agent_id: Some(agent.into()),
        work_digest: Some(work.into()),
    })
}

/// The current attempt's failure after output: the gate closed, and the session offered with
/// the gate as it would be were it resumed (open).
fn failed_after_output(d: &Driver, offer: Option<HeldSession>) -> RouteEvent {
    RouteEvent::Failed(Box::new(FailureReport {
        evidence_generation: d.gen(),
        classification: classified(SemanticCode::ProviderOverloaded, d.now),
        gate: Gate::deny(GateReason::AssistantOutput),
        policy: d.policy_now(),
        resume: offer.map(|session| ResumeOffer {
            session,
            gate: Gate::ALLOW,
        }),
    }))
}

fn start_on(d: &mut Driver, facts: Option<LaunchFacts>) -> RouteEffect {
    let generation = d.gen();
    let t = d.step(RouteEvent::DispatchStarted {
        generation,
        launch: facts,
    });
    assert_eq!(t.effects.len(), 1, "{:?}", t.effects);
    t.effects[0].clone()
}

fn resumed(effect: &RouteEffect) -> Option<&str> {
    match effect {
        RouteEffect::Launch { resume, .. } => resume.as_deref(),
        other => panic!("not a launch: {other:?}"),
    }
}

#[test]
fn a_granted_session_is_held_for_the_retry_which_loads_it_and_a_success_ends_it() {
    let mut d = Driver::start(doc(Some((2, 10))));
    d.dispatch();
    let failed_at = d.gen();
    let e = failed_after_output(&d, Some(session("a")));
    let t = d.step(e);
    assert_eq!(d.name(), StateName::RetryWait, "the offer's gate decided");
    assert_eq!(t.gate, Some(Gate::ALLOW), "and the transition says so");
    assert_eq!(
        d.state.held(),
        Some(&HeldOutput {
            session: session("a"),
            generation: failed_at,
        })
    );
    d.fire();
    let launch = start_on(&mut d, on("claude", "work-1"));
    assert_eq!(resumed(&launch), Some("sess-1"));
    assert!(d.state.held().is_some(), "held while the resumed attempt runs");
    d.succeed();
    assert_eq!(d.state.held(), None, "a success starts a new cycle");
    d.step(RouteEvent::WorkSubmitted {
        expected_generation: d.gen(),
    });
    assert_eq!(resumed(&start_on(&mut d, None)), None);
}

#[test]
fn without_an_offer_output_stops_for_a_person() {
    let mut d = Driver::start(doc(Some((2, 10))));
    d.dispatch();
    let e = failed_after_output(&d, None);
    d.step(e);
    assert_eq!(d.name(), StateName::ActionRequired);
    assert_eq!(d.state.held(), None);
}

#[test]
fn an_offer_is_not_granted_when_the_policy_would_not_retry_the_same_candidate() {
    // No retry: the open gate would skip to "b", which would replay the prompt there.
    let mut d = Driver::start(doc(None));
    d.dispatch();
    let e = failed_after_output(&d, Some(session("a")));
    let t = d.step(e);
    assert_eq!(d.name(), StateName::ActionRequired, "the closed gate decided");
    assert_eq!(
        t.gate,
        Some(Gate::deny(GateReason::AssistantOutput)),
        "the report's own"
    );
    assert_eq!(d.state.held(), None);
    // An offer for another candidate's session is not granted either.
    let mut d = Driver::start(doc(Some((2, 10))));
    d.dispatch();
    let e = failed_after_output(&d, Some(session("b")));
    d.step(e);
    assert_eq!(d.name(), StateName::ActionRequired);
    assert_eq!(d.state.held(), None);
}

#[test]
fn while_output_is_held_any_other_start_is_refused_until_a_person_starts_a_new_cycle() {
    for facts in [
        on("codex", "work-1"),
        on("claude", "work-2"),
        None,
        Some(LaunchFacts::default()),
    ] {
        let mut d = Driver::start(doc(Some((2, 10))));
        d.dispatch();
        let e = failed_after_output(&d, Some(session("a")));
        d.step(e);
        d.fire();
        let refused = start_on(&mut d, facts.clone());
        assert_eq!(
            refused,
            RouteEffect::RefuseStart { generation: d.gen() },
            "{facts:?}"
        );
        assert!(d.state.has_started_dispatch(), "recorded as started");
        // The server answers with the start's failure: output held, nothing may rerun it.
        d.fail(unclassified(d.now), Gate::deny(GateReason::AssistantOutput));
        assert_eq!(d.name(), StateName::ActionRequired);
        assert!(d.state.held().is_some(), "the same cycle");
        d.manual(ManualAction::RetryNow);
        assert_eq!(d.state.held(), None, "a person's decision starts a new cycle");
        assert_eq!(resumed(&start_on(&mut d, None)), None);
    }
}

#[test]
fn a_skip_during_the_retry_wait_keeps_the_cycle_so_the_next_candidate_is_refused() {
    let mut d = Driver::start(doc(Some((2, 10))));
    d.dispatch();
    let e = failed_after_output(&d, Some(session("a")));
    d.step(e);
    d.manual(ManualAction::SkipNow);
    d.evaluate();
    assert_eq!(d.state.candidate().id, "b");
    let refused = start_on(&mut d, on("claude", "work-1"));
    assert!(matches!(refused, RouteEffect::RefuseStart { .. }), "{refused:?}");
    d.fail(unclassified(d.now), Gate::deny(GateReason::AssistantOutput));
    assert_eq!(d.name(), StateName::ActionRequired, "stopped for a person");
}
