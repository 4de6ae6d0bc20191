//! Properties, checked over random inputs (256 cases each, to keep the suite fast on 2 cores):
//!
//! - Random event sequences: `step` accepts exactly what the transition table in
//!   `policy::route`'s docs accepts and rejects everything else with exactly the error the
//!   table names (an independent model of the table, [`table`], is the oracle), no generation
//!   is advanced twice (a racing event for a generation that already moved never commits), the
//!   retry budget and the once-per-cycle reset wait are never exceeded, no retry delay exceeds
//!   24 h, no wait exceeds its maximum, terminal states absorb everything, and every state
//!   survives a JSON round trip.
//! - Every valid document round-trips through JSON and validates identically; any document,
//!   valid or not, gets the same verdict after a round trip.
//! - Arbitrary JSON never panics validation or legacy normalization.
//! - Retry delays stay within the cap for any input and grow monotonically.

use crate::common;

use chrono::{DateTime, Utc};
use common::*;
use policy::{
    class::{ErrorClass, SemanticCode},
    classification::{Gate, GateReason},
    document::{
        validate_candidate, validate_class_policy, validate_document, validate_number_text,
        validate_number_value, ClassPolicy, NumberField, OnExhausted, PolicyDocument,
        ValidatedPolicyDocument,
    },
    evaluator::DecisionKind,
    legacy::normalize,
    limits::MAX_RETRY_DELAY_SECONDS,
    route::{
        start, step, ActionReason, AttemptKind, CandidateOption, DispatchState, Eligibility, FailureReport,
        HeldOutput, HeldSession, LaunchFacts, ManualAction, ResumeOffer, RouteEffect, RouteEvent, RouteState,
        RouteStatus, StateName, TransitionError,
    },
    schedule::retry_delay_seconds,
};
use proptest::{prelude::*, sample::Index};
use serde_json::{json, Value};
use std::{collections::HashMap, num::NonZeroU32};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

// ---- Generators ---------------------------------------------------------------------------------

fn arb_class_policy() -> impl Strategy<Value = ClassPolicy> {
    let retries = prop_oneof![Just(1u32), Just(10u32), 1u32..=10];
    let interval = prop_oneof![Just(1u64), Just(3_600u64), 1u64..=3_600];
    let wait = prop_oneof![Just(1u64), Just(604_800u64), 1u64..=604_800];
    let outcome = prop_oneof![Just(OnExhausted::Skip), Just(OnExhausted::Stop)];
    (
        proptest::option::of((retries, interval)),
        proptest::option::of(wait),
        outcome,
    )
        .prop_map(|(r, w, o)| class_policy(r, w, o))
}

fn arb_document() -> impl Strategy<Value = PolicyDocument> {
    proptest::collection::vec((arb_class_policy(), arb_class_policy()), 1..=4).prop_map(|policies| {
        PolicyDocument {
            version: 1,
            candidates: policies
                .into_iter()
                .enumerate()
                .map(|(i, (t, h))| candidate(&format!("c{i}"), t, h))
                .collect(),
        }
    })
}

const KEYS: [&str; 18] = [
    "version",
    "candidates",
    "id",
    "transient",
    "hard",
    "unclassified",
    "retry",
    "wait_for_reset",
    "on_exhausted",
    "enabled",
    "max_retries",
    "initial_interval_seconds",
    "max_wait_seconds",
    "on_error",
    "rules",
    "rate_limited",
    "quota_limited",
    "x",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        // Quarters round-trip exactly through JSON text.
        (-40_000i64..40_000_000).prop_map(|q| json!(q as f64 / 4.0)),
        prop_oneof![
            Just("skip"),
            Just("stop"),
            Just("later"),
            Just("try_next"),
            Just("retry_same"),
            Just("c0"),
            Just("")
        ]
        .prop_map(|s| json!(s)),
        "\\PC{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        let key = prop_oneof![
            4 => proptest::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
            1 => "\\PC{0,8}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..7)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer inside a value, the root included.
fn pointers(v: &Value, here: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                pointers(
                    child,
                    format!("{here}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{here}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(here);
}

/// A valid document with one random change: a replaced value, a removed key or an added key.
fn arb_near_valid() -> impl Strategy<Value = Value> {
    (
        arb_document(),
        any::<Index>(),
        arb_json(),
        0u8..3,
        proptest::sample::select(KEYS.to_vec()),
    )
        .prop_map(|(doc, at, new, mode, key)| {
            let mut v = serde_json::to_value(doc).unwrap();
            let mut all = Vec::new();
            pointers(&v, String::new(), &mut all);
            let target = all[at.index(all.len())].clone();
            match mode {
                0 if target.is_empty() => v = new,
                0 => {
                    if let Some(slot) = v.pointer_mut(&target) {
                        *slot = new;
                    }
                }
                1 => {
                    let (parent, last) = target.rsplit_once('/').unwrap_or(("", ""));
                    if let Some(Value::Object(m)) = v.pointer_mut(parent) {
                        m.remove(last);
                    }
                }
                _ => {
                    if let Some(Value::Object(m)) = v.pointer_mut(&target) {
                        m.insert(key.to_owned(), new);
                    }
                }
            }
            v
        })
}

// ---- Documents ----------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_valid_document_round_trips_through_json_and_validates_identically(doc in arb_document()) {
        let direct = validate_document(&serde_json::to_value(&doc).unwrap()).expect("generated documents are valid");
        let text = serde_json::to_string(&doc).unwrap();
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        let again = validate_document(&reparsed).unwrap();
        prop_assert_eq!(&direct, &again);
        prop_assert_eq!(direct.to_wire(), doc.clone());
        prop_assert_eq!(ValidatedPolicyDocument::try_from(doc).unwrap(), direct.clone());
        let typed: ValidatedPolicyDocument = serde_json::from_str(&serde_json::to_string(&direct).unwrap()).unwrap();
        prop_assert_eq!(typed, direct);
    }

    #[test]
    fn any_document_gets_the_same_verdict_after_a_json_round_trip(v in arb_near_valid()) {
        let reparsed: Value = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        prop_assert_eq!(validate_document(&v), validate_document(&reparsed));
        prop_assert_eq!(normalize(&v), normalize(&reparsed));
    }

    #[test]
    fn arbitrary_json_never_panics_validation(v in arb_json()) {
        check_never_panics(&v);
    }

    #[test]
    fn nearly_valid_json_never_panics_validation_and_reports_a_reason(v in arb_near_valid()) {
        check_never_panics(&v);
        if let Err(e) = validate_document(&v) {
            prop_assert!(!e.errors.is_empty());
            prop_assert!(e.errors.iter().all(|e| !e.message.is_empty()));
        }
    }

    #[test]
    fn typed_text_and_json_numbers_get_the_same_verdict(n in any::<i64>(), quarter in -4_000i64..40_000_000, enabled in any::<bool>()) {
        for field in NumberField::ALL {
            prop_assert_eq!(validate_number_text(field, enabled, &n.to_string()), validate_number_value(field, enabled, &json!(n)));
            let f = quarter as f64 / 4.0;
            prop_assert_eq!(validate_number_text(field, enabled, &f.to_string()), validate_number_value(field, enabled, &json!(f)));
        }
    }

    #[test]
    fn any_typed_text_is_judged_without_panicking(s in "\\PC{0,24}", enabled in any::<bool>()) {
        for field in NumberField::ALL {
            let _ = validate_number_text(field, enabled, &s);
        }
    }

    #[test]
    fn retry_delays_stay_within_the_cap_and_never_shrink(initial in any::<u64>(), k in 1u32..u32::MAX) {
        let this = retry_delay_seconds(initial, NonZeroU32::new(k).unwrap());
        let next = retry_delay_seconds(initial, NonZeroU32::new(k + 1).unwrap());
        prop_assert!(this <= MAX_RETRY_DELAY_SECONDS);
        prop_assert!(next >= this);
        if k <= 64 {
            let exact = u128::from(initial) << (k - 1);
            prop_assert_eq!(u128::from(this), exact.min(u128::from(MAX_RETRY_DELAY_SECONDS)));
        }
    }
}

fn check_never_panics(v: &Value) {
    let _ = validate_document(v);
    let _ = normalize(v);
    let _ = validate_class_policy(v, "x");
    let _ = validate_candidate(v, "candidates[0]");
    let _ = serde_json::from_value::<ValidatedPolicyDocument>(v.clone());
}

// ---- Routes -------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct FailSpec {
    /// An index into `SemanticCode::ALL`, or past its end for unclassified evidence.
    code: usize,
    gate: Option<GateReason>,
    retry_after: Option<u64>,
    reset_in: Option<i64>,
    /// Carry another candidate's policy (a caller bug the machine must reject), when the
    /// document has another candidate.
    foreign_policy: bool,
    /// Output was shown, and the agent's session that holds it is offered (the gate closed for
    /// output, open were the session resumed).
    offer: bool,
}

#[derive(Debug, Clone)]
enum Op {
    /// What the server would do next: begin the pending dispatch, fire the pending timer,
    /// answer the eligibility question (with these verdicts), report the attempt in flight
    /// (success when the flag says so, else this failure), submit more work, or retry by hand.
    Follow(Vec<bool>, FailSpec, bool),
    Dispatch,
    Fail(FailSpec),
    Succeed,
    Fire,
    /// The timer fires at the current time, which may be before its deadline.
    FireEarly,
    Evaluate(Vec<bool>),
    Work,
    Manual(ManualAction),
    Complete,
    Abandon,
    Restart,
    Advance(i64),
}

fn arb_fail() -> impl Strategy<Value = FailSpec> {
    let gate = prop_oneof![
        6 => Just(None),
        1 => proptest::sample::select(vec![
            GateReason::Stale,
            GateReason::Unclassified,
            GateReason::AssistantOutput,
            GateReason::ToolActivity,
            GateReason::PartialResult,
            GateReason::AmbiguousDelivery,
            GateReason::CancelRequested,
        ])
        .prop_map(Some),
    ];
    (
        0usize..14,
        gate,
        proptest::option::of(prop_oneof![4 => 0u64..600, 1 => 0u64..700_000, 1 => Just(u64::MAX)]),
        proptest::option::of(prop_oneof![4 => -10i64..600, 1 => -100i64..700_000]),
        proptest::bool::weighted(0.05),
        proptest::bool::weighted(0.3),
    )
        .prop_map(
            |(code, gate, retry_after, reset_in, foreign_policy, offer)| FailSpec {
                code,
                gate,
                retry_after,
                reset_in,
                foreign_policy,
                offer,
            },
        )
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        50 => (
            proptest::collection::vec(prop_oneof![4 => Just(true), 1 => Just(false)], 4),
            arb_fail(),
            proptest::bool::weighted(0.2),
        )
            .prop_map(|(eligible, fail, succeed)| Op::Follow(eligible, fail, succeed)),
        4 => Just(Op::Dispatch),
        12 => arb_fail().prop_map(Op::Fail),
        3 => Just(Op::Succeed),
        4 => Just(Op::Fire),
        2 => Just(Op::FireEarly),
        3 => proptest::collection::vec(any::<bool>(), 4).prop_map(Op::Evaluate),
        2 => Just(Op::Work),
        6 => proptest::sample::select(ManualAction::ALL.to_vec()).prop_map(Op::Manual),
        1 => Just(Op::Complete),
        1 => Just(Op::Abandon),
        3 => Just(Op::Restart),
        4 => (0i64..100_000).prop_map(Op::Advance),
    ]
}

/// Generation skew of an event: mostly current, sometimes one behind or ahead.
fn arb_skew() -> impl Strategy<Value = i64> {
    prop_oneof![8 => Just(0i64), 1 => Just(-1i64), 1 => Just(1i64)]
}

struct World {
    doc: ValidatedPolicyDocument,
    now: DateTime<Utc>,
}

impl World {
    /// The event the server would submit for `op`, issued for generation `g`; `None` for pure
    /// clock moves.
    fn event(&mut self, state: &RouteState, op: &Op, g: u64) -> Option<RouteEvent> {
        Some(match op {
            Op::Follow(eligible, fail, succeed) => {
                let next = match state.status() {
                    RouteStatus::Active { attempt: Some(a) } | RouteStatus::Retrying { attempt: a }
                        if a.dispatch == DispatchState::Pending =>
                    {
                        Op::Dispatch
                    }
                    RouteStatus::WaitingForReset { .. } | RouteStatus::RetryWait { .. } => Op::Fire,
                    RouteStatus::Switching => Op::Evaluate(eligible.clone()),
                    RouteStatus::Active { attempt: None } => Op::Work,
                    RouteStatus::ActionRequired { .. } => Op::Manual(ManualAction::RetryNow),
                    _ if *succeed => Op::Succeed,
                    _ => Op::Fail(fail.clone()),
                };
                return self.event(state, &next, g);
            }
            Op::Dispatch => RouteEvent::DispatchStarted {
                generation: g,
                launch: launch_facts(g),
            },
            Op::Fail(spec) => {
                let mut c = match SemanticCode::ALL.get(spec.code) {
                    Some(code) => classified(*code, self.now),
                    None => unclassified(self.now),
                };
                c.retry_after_seconds = spec.retry_after;
                c.reset_at = spec.reset_in.map(|s| self.now + secs(s));
                let gate = match spec.gate {
                    Some(reason) => Gate::deny(reason),
                    None if c.code.is_none() => Gate::deny(GateReason::Unclassified),
                    None if spec.offer => Gate::deny(GateReason::AssistantOutput),
                    None => Gate::ALLOW,
                };
                let current = &state.candidate().id;
                let resume = spec.offer.then(|| ResumeOffer {
                    session: session_of(current),
                    gate: Gate::ALLOW,
                });
                let foreign = spec
                    .foreign_policy
                    .then(|| self.doc.candidates().iter().find(|p| p.id() != current))
                    .flatten();
                RouteEvent::Failed(Box::new(FailureReport {
                    evidence_generation: g,
                    classification: c,
                    gate,
                    policy: foreign.or_else(|| self.doc.candidate(current)).cloned(),
                    resume,
                }))
            }
            Op::Succeed => RouteEvent::Succeeded { generation: g },
            Op::Fire => {
                if let Some(deadline) = state.deadline() {
                    self.now = self.now.max(deadline);
                }
                RouteEvent::DeadlineReached { generation: g }
            }
            Op::FireEarly => RouteEvent::DeadlineReached { generation: g },
            Op::Evaluate(eligible) => RouteEvent::CandidatesEvaluated {
                expected_generation: g,
                candidates: self
                    .doc
                    .candidates()
                    .iter()
                    .zip(eligible)
                    .map(|(c, e)| CandidateOption {
                        id: c.id().to_owned(),
                        eligibility: if *e { Eligibility::Now } else { Eligibility::Never },
                    })
                    .collect(),
            },
            Op::Work => RouteEvent::WorkSubmitted {
                expected_generation: g,
            },
            Op::Manual(action) => RouteEvent::Manual {
                action: *action,
                expected_generation: g,
            },
            Op::Complete => RouteEvent::Complete {
                expected_generation: g,
            },
            Op::Abandon => RouteEvent::Abandon {
                expected_generation: g,
            },
            Op::Restart => RouteEvent::Restarted,
            Op::Advance(s) => {
                self.now += secs(*s);
                return None;
            }
        })
    }
}

/// The session a failure on `candidate` offers: the agent `claude`'s, for the work `w1`.
fn session_of(candidate: &str) -> HeldSession {
    HeldSession {
        session_id: format!("sess-{candidate}"),
        agent_id: "claude".into(),
        candidate_id: candidate.into(),
        work_digest: "w1".into(),
    }
}

/// What a start at `g` runs on: nothing said, the offering agent and work, another agent, or
/// other work (varied by generation, so sequences meet each).
fn launch_facts(g: u64) -> Option<LaunchFacts> {
    let on = |agent: &str, work: &str| {
        Some(LaunchFacts {
            agent_id: Some(agent.into()),
            work_digest: Some(work.into()),
        })
    };
    match g % 5 {
        0 => None,
        1 | 2 => on("claude", "w1"),
        3 => on("codex", "w1"),
        _ => on("claude", "w2"),
    }
}

/// What the start of `attempt` must launch while `held` (written out again from
/// `policy::route::held`'s docs): the retry of the session's candidate, on its agent, for its
/// work, loads it; any other start is refused; with nothing held, a plain launch.
fn expected_start(
    held: Option<&HeldOutput>,
    candidate: &str,
    kind: AttemptKind,
    facts: Option<&LaunchFacts>,
) -> Result<Option<String>, ()> {
    let Some(h) = held else { return Ok(None) };
    let retry = matches!(kind, AttemptKind::Retry | AttemptKind::PostWait);
    let same = facts.is_some_and(|f| {
        f.agent_id.as_deref() == Some(h.session.agent_id.as_str())
            && f.work_digest.as_deref() == Some(h.session.work_digest.as_str())
    });
    if retry && candidate == h.session.candidate_id && same {
        Ok(Some(h.session.session_id.clone()))
    } else {
        Err(())
    }
}

fn skewed(g: u64, skew: i64) -> u64 {
    g.saturating_add_signed(skew)
}

/// What the transition table (the docs of `policy::route`) says about `event` in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Accepted without a change ("=" in the table).
    Same,
    /// Accepted as a change, to this state when the table names one (a failure and an
    /// eligibility answer have several rows; the evaluator decides among them).
    Moves(Option<StateName>),
}

/// The table, written out again from its documentation, independently of `step`'s code: the
/// oracle the random sequences check `step` against. `Err` is the exact rejection the table
/// names; an event the table has no row for is `NotAllowed`.
fn table(state: &RouteState, event: &RouteEvent, now: DateTime<Utc>) -> Result<Verdict, TransitionError> {
    use ManualAction as M;
    use RouteEvent as E;
    use RouteStatus as S;
    use StateName as N;

    let pending = |a: &policy::route::Attempt| a.dispatch == DispatchState::Pending;
    let started = |a: &policy::route::Attempt| a.dispatch == DispatchState::Started;
    let status = state.status();
    let name = state.state_name();
    let current = state.generation();
    // A repeat of the request made at `g`: the current generation, or the one just before.
    let repeat = |g: u64| g == current || g.checked_add(1) == Some(current);
    // Rows that come before generation fencing.
    match (status, event) {
        // A finished route answers a repeat of its finishing request as done, ignores a
        // restart, and refuses everything else (stale, or not allowed).
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
        ) if repeat(*g) => return Ok(Verdict::Same),
        (S::Completed | S::Abandoned, E::Restarted) => return Ok(Verdict::Same),
        (S::Completed | S::Abandoned, e) => {
            return Err(match e.generation() {
                Some(given) if given != current => TransitionError::StaleGeneration {
                    given,
                    current,
                    state: name,
                },
                _ => TransitionError::NotAllowed {
                    state: name,
                    event: e.kind(),
                },
            })
        }
        // Cancel or stop with nothing automatic pending: done, for the current generation and
        // for a repeat of the very request that stopped the route.
        (
            S::ActionRequired { reason },
            E::Manual {
                action,
                expected_generation: g,
            },
        ) if matches!(action, M::CancelWait | M::Stop)
            && (*g == current
                || (g.checked_add(1) == Some(current)
                    && matches!(
                        (action, reason),
                        (M::CancelWait, ActionReason::WaitCancelled) | (M::Stop, ActionReason::StoppedByUser)
                    ))) =>
        {
            return Ok(Verdict::Same)
        }
        _ => {}
    }
    if let Some(given) = event.generation() {
        if given != state.generation() {
            return Err(TransitionError::StaleGeneration {
                given,
                current: state.generation(),
                state: name,
            });
        }
    }
    let to = |n: StateName| Ok(Verdict::Moves(Some(n)));
    match (status, event) {
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::DispatchStarted { .. })
            if pending(a) =>
        {
            to(name)
        }
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::DispatchHeld { hold, .. })
            if pending(a) =>
        {
            if state.hold() == Some(hold) {
                Ok(Verdict::Same)
            } else {
                to(name)
            }
        }
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Failed(report)) if started(a) => {
            match &report.policy {
                Some(p) if p.id() != state.candidate().id => Err(TransitionError::PolicyForOtherCandidate {
                    given: p.id().to_owned(),
                    current: state.candidate().id.clone(),
                }),
                _ => Ok(Verdict::Moves(None)),
            }
        }
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::LeaseExpired { .. })
            if started(a) =>
        {
            to(N::ActionRequired)
        }
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Succeeded { .. }) if started(a) => {
            to(N::Active)
        }
        (S::Active { attempt: None }, E::WorkSubmitted { .. }) => to(N::Active),
        (S::Active { attempt: None }, E::Complete { .. }) => to(N::Completed),
        (S::WaitingForReset { deadline } | S::RetryWait { deadline }, E::DeadlineReached { .. }) => {
            if now < *deadline {
                Err(TransitionError::DeadlineNotReached {
                    deadline: *deadline,
                    now,
                })
            } else {
                to(N::Retrying)
            }
        }
        (S::WaitingForReset { .. } | S::RetryWait { .. }, E::Manual { action, .. }) => to(match action {
            M::RetryNow => N::Retrying,
            M::SkipNow => N::Switching,
            M::CancelWait | M::Stop => N::ActionRequired,
        }),
        (S::Switching, E::CandidatesEvaluated { .. }) => Ok(Verdict::Moves(None)),
        (
            S::ActionRequired { .. },
            E::Manual {
                action: M::RetryNow, ..
            },
        ) => to(N::Retrying),
        (
            S::ActionRequired { .. },
            E::Manual {
                action: M::SkipNow, ..
            },
        ) => to(N::Switching),
        (S::Active { .. } | S::Retrying { .. } | S::Switching, E::Manual { action: M::Stop, .. }) => {
            to(N::ActionRequired)
        }
        (_, E::Abandon { .. }) => to(N::Abandoned),
        (S::Active { attempt: Some(a) } | S::Retrying { attempt: a }, E::Restarted) => {
            if started(a) {
                to(N::ActionRequired)
            } else {
                Ok(Verdict::Same)
            }
        }
        (
            S::WaitingForReset { .. }
            | S::RetryWait { .. }
            | S::Switching
            | S::Active { attempt: None }
            | S::ActionRequired { .. },
            E::Restarted,
        ) => Ok(Verdict::Same),
        _ => Err(TransitionError::NotAllowed {
            state: name,
            event: event.kind(),
        }),
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_event_sequences_keep_every_route_invariant(
        doc in arb_document(),
        start_ineligible in proptest::collection::vec(any::<bool>(), 4),
        ops in proptest::collection::vec((arb_op(), arb_skew(), arb_op()), 1..80),
    ) {
        let doc = ValidatedPolicyDocument::try_from(doc).unwrap();
        let options: Vec<CandidateOption> = doc
            .candidates()
            .iter()
            .zip(&start_ineligible)
            .map(|(c, no)| if *no { CandidateOption::never(c.id()) } else { CandidateOption::now(c.id()) })
            .collect();
        let mut state = start(&options).unwrap().next;
        let mut world = World { doc, now: t0() };
        // Reset waits and retries decided per (cycle, candidate, class), counted from outside.
        let mut waits: HashMap<(u32, String, ErrorClass), u32> = HashMap::new();
        let mut retries: HashMap<(u32, String, ErrorClass), u32> = HashMap::new();

        for (op, skew, racer) in ops {
            let g = state.generation();
            let Some(event) = world.event(&state, &op, skewed(g, skew)) else { continue };
            let fenced = event.generation().is_some();
            let now = world.now;
            let expected = table(&state, &event, now);
            let result = step(&state, event.clone(), now);

            if state.is_terminal() {
                // A finished route never changes again: it refuses, or answers a repeat as done.
                if let Ok(t) = &result {
                    prop_assert!(!t.changed && t.effects.is_empty());
                }
            }
            // Every rejection must be one the table names for this state and event, and every
            // event the table accepts must be accepted: an unexpected error fails the property.
            let (t, verdict) = match (result, expected) {
                (Ok(t), Ok(verdict)) => (t, verdict),
                (Err(got), Err(want)) => {
                    prop_assert_eq!(got, want, "{:?} in {:?}", event.kind(), state.status());
                    continue;
                }
                (Err(got), Ok(verdict)) => {
                    return Err(TestCaseError::fail(format!(
                        "{:?} in {:?}: the table says {verdict:?}, step rejected it: {got}",
                        event.kind(),
                        state.status(),
                    )));
                }
                (Ok(t), Err(want)) => {
                    return Err(TestCaseError::fail(format!(
                        "{:?} in {:?}: the table rejects it ({want}), step accepted it (to {:?})",
                        event.kind(),
                        state.status(),
                        t.next.status(),
                    )));
                }
            };
            if fenced && skew != 0 {
                prop_assert!(!t.changed, "an event for another generation changed the route: {:?}", op);
            }
            match verdict {
                Verdict::Same => {
                    prop_assert!(!t.changed, "{:?} in {:?} must change nothing", event.kind(), state.status());
                }
                Verdict::Moves(to) => {
                    prop_assert!(t.changed, "{:?} in {:?} must change the route", event.kind(), state.status());
                    if let Some(to) = to {
                        prop_assert_eq!(t.next.state_name(), to, "{:?} in {:?}", event.kind(), state.status());
                    }
                }
            }
            if !t.changed {
                prop_assert_eq!(&t.next, &state);
                continue;
            }
            prop_assert_eq!(t.next.generation(), g + 1, "every change advances the generation by one");
            // Held output: a start loads the session the route holds, or is refused; the fact
            // comes only with a failure that offered it and retries that same candidate, and
            // goes only with the route cycle.
            if let RouteEvent::DispatchStarted { launch, .. } = &event {
                let attempt = state.attempt().unwrap();
                let want = expected_start(state.held(), &state.candidate().id, attempt.kind, launch.as_ref());
                let got = match t.effects.as_slice() {
                    [RouteEffect::Launch { resume, .. }] => Ok(resume.clone()),
                    [RouteEffect::RefuseStart { generation }] if *generation == t.next.generation() => Err(()),
                    other => return Err(TestCaseError::fail(format!("a start did {other:?}"))),
                };
                prop_assert_eq!(got, want, "held {:?}, facts {:?}", state.held(), launch);
            }
            let new_cycle = t.next.cycle().number() != state.cycle().number();
            if new_cycle {
                prop_assert_eq!(t.next.held(), None, "a new cycle ends held output");
            } else if t.next.held() != state.held() {
                let RouteEvent::Failed(report) = &event else {
                    return Err(TestCaseError::fail(format!("{:?} changed held output", event.kind())));
                };
                let offer = report.resume.as_ref().expect("only an offer is held");
                prop_assert_eq!(
                    t.next.held(),
                    Some(&HeldOutput { session: offer.session.clone(), generation: g })
                );
                let kind = t.decision.as_ref().map(|d| d.kind);
                prop_assert!(
                    matches!(kind, Some(DecisionKind::Retry | DecisionKind::WaitForReset)),
                    "held output for a decision that does not retry the same candidate: {:?}", kind
                );
            }
            // The timer a change arms is its effect's: a wait's deadline or a hold's end, at the
            // new generation; a change to a state with neither arms nothing (the server keeps
            // the route's one timer row from this effect alone).
            let armed: Vec<_> = t
                .effects
                .iter()
                .filter_map(|e| match e {
                    RouteEffect::ArmTimer { deadline, generation } => Some((*deadline, *generation)),
                    _ => None,
                })
                .collect();
            let due = t.next.deadline().or_else(|| t.next.hold().map(|h| h.until));
            prop_assert_eq!(
                armed,
                due.map(|d| (d, t.next.generation())).into_iter().collect::<Vec<_>>(),
                "{:?} in {:?}", event.kind(), state.status()
            );

            // A racing event issued for the generation that just moved never commits.
            for rival in [Some(event.clone()), world.event(&state, &racer, g)].into_iter().flatten() {
                if rival.generation().is_some() {
                    match step(&t.next, rival, world.now) {
                        Err(TransitionError::StaleGeneration { .. }) => {}
                        Ok(x) => prop_assert!(!x.changed, "generation {} advanced twice", g),
                        Err(other) => prop_assert!(false, "a rival for generation {} got {}", g, other),
                    }
                }
            }

            if let Some(d) = &t.decision {
                let policy = world.doc.candidate(&state.candidate().id).unwrap();
                match d.kind {
                    DecisionKind::Retry => {
                        let class = d.error_class().unwrap();
                        let delay = d.delay_seconds.unwrap();
                        prop_assert!(delay <= MAX_RETRY_DELAY_SECONDS);
                        prop_assert!((d.deadline.unwrap() - now).num_seconds() as u64 <= MAX_RETRY_DELAY_SECONDS);
                        prop_assert!(d.retry_ordinal.unwrap() <= policy.policy(class).max_retries());
                        let n = retries
                            .entry((state.cycle().number(), state.candidate().id.clone(), class))
                            .or_default();
                        *n += 1;
                        prop_assert!(*n <= policy.policy(class).max_retries(), "retry budget exceeded");
                        prop_assert_eq!(d.retry_ordinal, Some(*n));
                    }
                    DecisionKind::WaitForReset => {
                        let class = d.error_class().unwrap();
                        let max = policy.policy(class).max_wait_seconds().unwrap();
                        let wait = d.deadline.unwrap() - now;
                        prop_assert!(wait > chrono::TimeDelta::zero());
                        prop_assert!(wait <= secs(max as i64), "waited {} > {}", wait, max);
                        let n = waits
                            .entry((state.cycle().number(), state.candidate().id.clone(), class))
                            .or_default();
                        *n += 1;
                        prop_assert!(*n <= 1, "reset waiting used twice in one cycle");
                    }
                    _ => {}
                }
            }
            for (id, usage) in t.next.cycle().all_usage() {
                let policy = world.doc.candidate(id).unwrap();
                for class in ErrorClass::ALL {
                    prop_assert!(usage.class(class).retries_used <= policy.policy(class).max_retries());
                }
            }

            let json = serde_json::to_string(&t.next).unwrap();
            prop_assert_eq!(serde_json::from_str::<RouteState>(&json).unwrap(), t.next.clone());
            let _ = serde_json::to_string(&t.next.snapshot()).unwrap();
            state = t.next;
        }
    }
}
