//! `classifier`: evidence envelopes (design contract 1) in, classifications (contract 2) out.
//!
//! Users judge Recourse first by this crate: does it recognise what their agent just said, and
//! does it never turn an unknown string or a tool's own error into an automatic retry or a
//! provider switch? So it is deterministic and pure: no IO, no clock (`now` is an argument),
//! no model calls. Provider knowledge is data, not code: rules live in TOML under
//! `fixtures/catalogue/`, each proven by real, sanitized fixtures under `fixtures/classifier/`.
//!
//! Crate map:
//! - [`envelope`]: the untrusted input, parsed leniently and bounded; truncation is recorded;
//!   stderr lines read without their terminal escape sequences (agents colour their logs).
//! - `json`: JSON pulled as tokens (`json::pull`: text read directly where it is plain JSON,
//!   `serde_json` for the rest; or a parsed `Value` walked), so bytes and an already parsed
//!   `Value` give the same envelope through one reader; and the borrowed tree (strings borrow
//!   the input, objects are vectors) the catalogue's JSON conditions read.
//! - [`catalogue`]: rules as data, compiled once (regexes, one literal automaton), with a
//!   content-hash version.
//! - `scan`: the one per-byte pass, every literal's first offset in a text (a gram filter:
//!   one table read per even position, exact comparison only where it fires).
//! - `engine`: signals, matching and resolution (tiers, conflicts, low confidence, staleness),
//!   effects derived from ACP updates; produces the [`Verdict`].
//! - `normalize`: whitespace as a person reads it (padding and terminal wraps read as one
//!   space) in the text rules match.
//! - `stderr`: stderr lines grouped into entries (wrapped lines, pretty-printed JSON, armored
//!   blocks), one signal each.
//! - `embedded`: the provider's JSON inside agent text (after a banner, wrapped by the
//!   terminal, escaped inside strings), for the catalogue's JSON conditions.
//! - `pyrepr`: a Python literal (an SDK's `repr` of the provider's body) read as JSON.
//! - `timing`: validated retry/reset hints (headers, Google `RetryInfo`, CLI prose).
//! - [`redact`]: the bounded `safe_excerpt`, cut then redacted against an adversary
//!   (credential contexts, random-looking tokens, shaped secrets), in one pass over bit planes
//!   of the text.
//! - `gate`: the replay and effect-safety verdict.
//! - [`cli`]: `recourse classify` (streams). [`check`]: `recourse catalogue check`.
//!
//! Invariant: worst-case time is linear in the input size. The literal scan does bounded work
//! per position (its fallback is an Aho-Corasick DFA), regexes are the `regex` crate's
//! (finite automata, no backtracking), JSON is looked for at a bounded number of places and
//! nested a bounded number of levels, redaction makes a fixed number of byte scans, and every
//! input is bounded before it is searched.

pub mod catalogue;
pub mod check;
pub mod cli;
mod embedded;
mod engine;
pub mod envelope;
mod gate;
mod json;
mod normalize;
mod pyrepr;
pub mod redact;
mod scan;
mod stderr;
mod timing;

pub use catalogue::Catalogue;
pub use engine::{Verdict, SHORT_RATE_LIMIT_SECS};
pub use envelope::{Envelope, EnvelopeError};
pub use timing::MAX_HINT_SECS;

use chrono::{DateTime, Utc};

/// Decides `verdict`'s gate again for `envelope` as it is now, without classifying again:
/// for the route engine, once it has granted the resumable-retry exception by setting the
/// envelope's resume fact (see [`gate`](crate::gate)'s exception).
pub fn regate(envelope: &Envelope, verdict: &mut Verdict) {
    verdict.gate = gate::decide(envelope, &verdict.classification, &verdict.effects);
}

/// Classifies one envelope with the built-in catalogue. `now` is the current time, used to
/// validate timing hints; relative hints count from the envelope's `occurred_at` if given.
pub fn classify(envelope: &Envelope, now: DateTime<Utc>) -> Verdict {
    Catalogue::builtin().classify(envelope, now)
}
