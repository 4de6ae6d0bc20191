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
mod lazy_regex;
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
use policy::classification::Gate;

/// The gate `verdict`'s evidence would get were a retry to resume `session_id`, the agent
/// session that still holds the attempt's output (the gate's one exception, see
/// [`gate`](crate::gate)). Offered to the route only when the evidence shows real assistant
/// output and no other effect (no tool activity, no partial result); `None` otherwise. Whether
/// the route takes it (its policy would retry that same candidate) is the route's step's
/// decision (`policy::route::held`). `envelope` is the one `verdict` classified, as it was.
pub fn resumed_gate(envelope: &mut Envelope, verdict: &Verdict, session_id: &str) -> Option<Gate> {
    let e = &verdict.effects;
    if !e.assistant_output || e.tool_activity || e.partial_result || session_id.is_empty() {
        return None;
    }
    let resume = envelope::Resume {
        session_id: session_id.to_owned(),
        generation: envelope.generation?,
    };
    let before = envelope.resume.replace(resume);
    let gate = gate::decide(envelope, &verdict.classification, &verdict.effects);
    envelope.resume = before;
    Some(gate)
}

/// Classifies one envelope with the built-in catalogue. `now` is the current time, used to
/// validate timing hints; relative hints count from the envelope's `occurred_at` if given.
pub fn classify(envelope: &Envelope, now: DateTime<Utc>) -> Verdict {
    Catalogue::builtin().classify(envelope, now)
}

#[cfg(test)]
mod resumed_gate_tests {
    use super::*;
    use policy::classification::GateReason;
    use serde_json::json;

    fn failed_after(updates: serde_json::Value) -> serde_json::Value {
        json!({
            "generation": 3,
            "effects": {"prompt_delivery": "confirmed"},
            "items": [{
                "kind": "acp_updates",
                "updates": updates,
                "prompt_error": {"code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}
            }]
        })
    }

    fn text(t: &str) -> serde_json::Value {
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}})
    }

    #[test]
    fn output_alone_is_offered_the_open_gate_and_anything_more_is_not_offered() {
        let now = "2026-11-30T08:00:00Z".parse().unwrap();
        let value = failed_after(json!([text("Here is the first half of the answer")]));
        let mut env = Envelope::from_value(&value).unwrap().into_owned();
        let verdict = classify(&env, now);
        assert_eq!(verdict.gate, Gate::deny(GateReason::AssistantOutput));
        assert_eq!(resumed_gate(&mut env, &verdict, "sess-1"), Some(Gate::ALLOW));
        assert_eq!(env.resume, None, "the envelope is left as it was");
        assert_eq!(resumed_gate(&mut env, &verdict, ""), None, "no session");
        // A tool call: nothing is offered.
        let value = failed_after(json!([
            text("Let me look"),
            {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read", "status": "completed"}
        ]));
        let mut env = Envelope::from_value(&value).unwrap().into_owned();
        let verdict = classify(&env, now);
        assert_eq!(resumed_gate(&mut env, &verdict, "sess-1"), None);
        // No output: nothing to resume, the gate is open anyway.
        let value = failed_after(json!([]));
        let mut env = Envelope::from_value(&value).unwrap().into_owned();
        let verdict = classify(&env, now);
        assert_eq!(verdict.gate, Gate::ALLOW);
        assert_eq!(resumed_gate(&mut env, &verdict, "sess-1"), None);
    }
}
