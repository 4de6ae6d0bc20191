//! `policy`: the pure core of Recourse, compiled into both the server and the WASM UI.
//!
//! Everything here is deterministic: no IO, no clock, no randomness. Time is always passed in
//! as an argument, so the server, the browser and the tests compute the same answers.
//!
//! Crate map, in the order data flows:
//! - [`class`]: the two configurable error classes and the registry of semantic codes.
//! - [`classification`]: the classifier's output (contract 2) and the effect-safety gate.
//! - [`limits`]: the backend-owned limits (`MIN_*`, `MAX_*`, `DEFAULT_*`) the UI shares.
//! - [`time`]: deadline arithmetic that saturates instead of panicking.
//! - [`document`]: the version-1 policy document, its validation from untrusted JSON (every
//!   problem, with paths and stable codes), per-field validators for the UI, and the
//!   `Validated*` types that alone reach the evaluator.
//! - [`legacy`]: `try_next` / `stop` / `retry_same` and per-code rules, normalized once.
//! - [`schedule`]: retry delays (doubling, capped at 24 h, saturating) and readable previews.
//! - [`evaluator`]: one classified failure + one candidate policy -> one [`evaluator::Decision`],
//!   in the spec's order.
//! - [`transcript`]: an agent's live updates folded into what a person reads (messages,
//!   thoughts, tool calls), bounded per attempt.
//! - [`trial`]: "Try an error": the server's classification of pasted evidence, and what a
//!   profile's (unsaved) policy would do with it, step by step, played with the evaluator.
//! - [`input`]: untrusted API input (profile writes, route starts) parsed once into
//!   `Validated*` types, every string and number bounded.
//! - [`circuit`]: shared resource circuits: which keys a target has, what a trusted scoped
//!   failure opens, what the dispatch gate decides, a candidate's eligibility.
//! - [`route`]: the route state machine: `start` and `step(&RouteState, RouteEvent, now)`,
//!   returning the next state and the effects the server performs after committing it.
//! - [`notify`]: what a route transition is worth telling people (`route.needs_person`,
//!   `route.switched`, ...), a profile's notification rules, and a delivery's backoff.
//! - [`envelope`]: the evidence envelope (contract 1) as the API takes it, typed.
//! - [`whole`]: whole numbers from JSON (`5.0` is the integer 5, as JSON Schema says).
//! - [`wire`]: route snapshots and event payloads, and re-exports of every wire type.
//! - [`gateway`]: Recourse as the base URL SDKs and agents point at: a call's request parsed,
//!   whether a profile serves its style, what a held call does with its route's snapshot, and
//!   errors in the OpenAI and Anthropic shapes.
//! - [`auth`]: permissions, built-in roles, and the account, session, token and audit wire
//!   types; names, passwords and token requests parsed once.
//!
//! A tour, as the server drives it (persist each `next`, then perform its effects):
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use policy::{
//!     classification::{ClassState, Classification, Confidence, Gate},
//!     class::SemanticCode,
//!     legacy::normalize,
//!     route::{start, step, CandidateOption, FailureReport, RouteEffect, RouteEvent, StateName},
//! };
//!
//! // A profile document from the API (legacy shapes are accepted and normalized too).
//! let doc = normalize(&serde_json::json!({"version": 1, "candidates": [{"id": "main",
//!     "transient": {"retry": {"enabled": true, "max_retries": 3, "initial_interval_seconds": 5},
//!                   "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
//!     "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
//!              "wait_for_reset": {"enabled": true, "max_wait_seconds": 300}, "on_exhausted": "stop"}}]}))
//!     .expect("valid")
//!     .document;
//! let now = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
//!
//! // Start on the first eligible candidate; the effect says "begin a dispatch".
//! let t = start(&[CandidateOption::now("main")]).unwrap();
//! assert!(matches!(t.effects[0], RouteEffect::BeginDispatch { generation: 1, .. }));
//! // Record the start before launching; the Launch effect carries the invocation generation.
//! let t = step(&t.next, RouteEvent::DispatchStarted { generation: 1, launch: None }, now).unwrap();
//! assert!(matches!(t.effects[0], RouteEffect::Launch { invocation_generation: 2, .. }));
//!
//! // The provider is overloaded: the transient policy retries after 5 s.
//! let classification = Classification {
//!     code: Some(SemanticCode::ProviderOverloaded), class: ClassState::Transient, reason: None,
//!     catalogue_version: "2026.11.1".into(), confidence: Confidence::High, scope: None,
//!     classifier_rule: Some("anthropic.overloaded".into()), provider_id: None, model_id: None,
//!     phase: None, occurred_at: Some(now), retry_after_seconds: None, reset_at: None, safe_excerpt: None,
//! };
//! let report = FailureReport {
//!     evidence_generation: 2,
//!     classification,
//!     gate: Gate::ALLOW,
//!     policy: doc.candidate("main").cloned(),
//!     resume: None,
//! };
//! let t = step(&t.next, RouteEvent::Failed(Box::new(report)), now).unwrap();
//! assert_eq!(t.next.state_name(), StateName::RetryWait);
//! assert_eq!(t.next.snapshot().retry_ordinal, Some(1));
//! let deadline = now + chrono::TimeDelta::seconds(5);
//! assert_eq!(t.effects, vec![RouteEffect::ArmTimer { deadline, generation: 3 }]);
//! ```
//!
//! Invariants:
//! - Only `Validated*` policies are evaluated; they are built by validation and nothing else.
//! - Every accepted route change increments the generation; every fenced event must carry the
//!   current one; a finished route changes no more (a repeat of its finishing request is
//!   answered as done, anything else is refused).
//! - No computed retry delay exceeds 24 h; no reset wait exceeds its policy's maximum.
//! - Unclassified, stale, inconsistent or effect-unsafe evidence never schedules work.

pub mod api;
pub mod auth;
pub mod circuit;
pub mod class;
pub mod classification;
pub mod document;
pub mod envelope;
pub mod evaluator;
pub mod gateway;
pub mod input;
pub mod legacy;
pub mod limits;
pub mod notify;
pub mod route;
pub mod schedule;
pub mod time;
pub mod transcript;
pub mod trial;
pub mod whole;
pub mod wire;
