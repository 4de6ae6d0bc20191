//! `policy`: the pure core of Recourse, compiled into both the server and the WASM UI.
//!
//! Everything here is deterministic: no IO, no clock, no randomness. Time is always passed in
//! as an argument, so the server, the browser and the tests compute the same answers.
//!
//! Crate map, in the order data flows:
//! - [`class`]: the two configurable error classes and the registry of semantic codes.
//! - [`classification`]: the classifier's output (contract 2) and the effect-safety gate.
//! - [`limits`]: the backend-owned limits (`MIN_*`, `MAX_*`, `DEFAULT_*`) the UI shares.
//! - [`document`]: the version-1 policy document, its validation from untrusted JSON (every
//!   problem, with paths and stable codes), per-field validators for the UI, and the
//!   `Validated*` types that alone reach the evaluator.
//! - [`legacy`]: `try_next` / `stop` / `retry_same` and per-code rules, normalized once.
//! - [`schedule`]: retry delays (doubling, capped at 24 h, saturating) and readable previews.
//! - [`evaluator`]: one classified failure + one candidate policy -> one [`evaluator::Decision`],
//!   in the spec's order.
//! - [`route`]: the route state machine: `start` and `step(&RouteState, RouteEvent, now)`,
//!   returning the next state and the effects the server performs after committing it.
//! - [`wire`]: route snapshots and event payloads, and re-exports of every wire type.
//!
//! Invariants:
//! - Only `Validated*` policies are evaluated; they are built by validation and nothing else.
//! - Every accepted route change increments the generation; every fenced event must carry the
//!   current one; terminal states ignore late events.
//! - No computed retry delay exceeds 24 h; no reset wait exceeds its policy's maximum.
//! - Unclassified, stale, inconsistent or effect-unsafe evidence never schedules work.

pub mod class;
pub mod classification;
pub mod document;
pub mod evaluator;
pub mod legacy;
pub mod limits;
pub mod route;
pub mod schedule;
pub mod wire;
