//! The evidence envelope (design contract 1), parsed leniently and bounded.
//!
//! Envelopes come from adapters, from `external` dispatchers over the API and from people
//! piping JSON into `recourse classify`, so they are untrusted. Parsing therefore never
//! rejects an envelope for an odd field type (a status sent as `"429"`, a signal sent as `15`):
//! it keeps what it can read, drops what it cannot, and bounds every string, list and the
//! whole input. Each cut sets [`Envelope::truncated`], so truncation is recorded, never silent.
//! Effects implied by ACP updates are derived here, from *all* updates, before the list is cut,
//! so a tool call early in a long prompt still counts.
//!
//! - `read`: one pass of `serde_json`'s deserializer, no tree in between: each field is read by
//!   a visitor straight into what the envelope keeps, everything else is walked and dropped.
//!   Bytes and an already parsed `Value` go through the same visitors, so [`Envelope::parse`]
//!   and [`Envelope::from_value`] agree by construction (a property test checks it, repeated
//!   keys and any key order included).
//! - `build`: the fields read, bounded and assembled into an [`Envelope`].
//! - `ansi`: terminal escape sequences read out of stderr lines (agents colour their logs).

mod ansi;
mod build;
mod read;

use crate::json::pull::{Text, Walk};

use chrono::{DateTime, Utc};
use policy::classification::{Effects, Phase};
use serde::Serialize;
use serde_json::Value;
use std::{borrow::Cow, collections::BTreeMap};

/// Largest accepted envelope, in bytes of JSON. Larger input is an error, not a silent cut.
pub const MAX_ENVELOPE_BYTES: usize = 1024 * 1024;
/// Most evidence items kept per envelope.
pub const MAX_ITEMS: usize = 32;
/// Longest kept text per field (HTTP body, ACP message, error data), in bytes. An HTTP body
/// keeps its first 16 KiB (a JSON body given as a value: the first 16 KiB of its compact
/// serialization): a provider's error object comes first, and a larger body is a page or a
/// stream. A cut sets [`Envelope::truncated`], which the verdict carries as `truncated` in
/// every `recourse classify` line, so an error hidden past the bound is never a silent miss.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Longest kept stderr line, in bytes.
pub const MAX_LINE_BYTES: usize = 2 * 1024;
/// Most stderr lines kept per item (the last ones: errors come at the end).
pub const MAX_LINES: usize = 64;
/// Most headers kept per HTTP item.
pub const MAX_HEADERS: usize = 64;
/// Longest kept header value or identifier, in bytes.
pub const MAX_SHORT_BYTES: usize = 256;
/// Most ACP updates examined per item; effects are derived from all of them regardless.
pub const MAX_UPDATES: usize = 1024;

/// Why an envelope could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("envelope is {size} bytes; the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("envelope is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("envelope must be a JSON object")]
    NotAnObject,
    #[error("envelope has no `items` array")]
    MissingItems,
}

impl EnvelopeError {
    /// A stable machine spelling, used in `recourse classify` error lines.
    pub fn kind(&self) -> &'static str {
        match self {
            EnvelopeError::TooLarge { .. } => "too_large",
            EnvelopeError::Json(_) => "malformed_json",
            EnvelopeError::NotAnObject => "not_an_object",
            EnvelopeError::MissingItems => "missing_items",
        }
    }
}

/// One failure observation, bounded. Build it with [`Envelope::parse`] or
/// [`Envelope::from_value`]; both apply the limits above. Its texts borrow the JSON it was read
/// from where they can (strings without escapes, within their bounds): [`Envelope::into_owned`]
/// makes one that outlives it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Envelope<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_generation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_id: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<Cow<'a, str>>,
    pub cancel_requested: bool,
    /// Effects as the adapter reported them (not yet combined with derived ones).
    pub effects: Effects,
    pub items: Vec<EvidenceItem<'a>>,
    /// Effects derived from ACP updates while parsing (tool calls, any agent update).
    #[serde(skip)]
    pub(crate) derived: DerivedEffects,
    /// The provider-native session that holds this prompt generation's output and that a
    /// retry can load (the gate's one exception after assistant output, see `gate`). Never
    /// read from JSON: only the `acp` dispatcher sets it, in process, for an agent that
    /// advertised `loadSession`; an envelope from the API, a profile script or `recourse
    /// classify` cannot claim it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// True when any string, list or item was cut to its bound.
    pub truncated: bool,
}

/// A resumable retry guarantee: the session that holds the output, and the prompt generation
/// it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resume {
    pub session_id: String,
    pub generation: u64,
}

/// Effects read from ACP updates: facts only; whether message text is real output is decided
/// by the engine, which knows which messages are failure signals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DerivedEffects {
    pub(crate) tool_activity: bool,
    /// Some update, result or prompt error came back for this prompt: it was delivered.
    pub(crate) delivered: bool,
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EvidenceItem<'a> {
    Http(HttpEvidence<'a>),
    AcpError(AcpErrorEvidence<'a>),
    AcpUpdates(AcpUpdatesEvidence<'a>),
    Stderr(StderrEvidence<'a>),
    ProcessExit(ProcessExitEvidence),
}

/// An HTTP response's headers: lower-cased names (header names are case-insensitive).
pub type Headers<'a> = BTreeMap<Cow<'a, str>, Cow<'a, str>>;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HttpEvidence<'a> {
    pub status: Option<u16>,
    pub headers: Headers<'a>,
    /// The body as text (a JSON body is kept as its compact serialization).
    pub body: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AcpErrorEvidence<'a> {
    pub code: Option<i64>,
    pub message: Option<Cow<'a, str>>,
    pub data: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AcpUpdatesEvidence<'a> {
    /// The ordered updates that matter to classification (messages, tool calls, thoughts);
    /// bounded in count, with text fields bounded in length.
    pub updates: Vec<AcpUpdate<'a>>,
    pub stop_reason: Option<Cow<'a, str>>,
    /// The tokens the prompt's result says the turn used (ACP's `usage`, else Gemini CLI's
    /// `_meta.quota.token_count`: its total, else the sum of its token counts); `None` when the
    /// result reports none. Zero on an `end_turn` is a turn the provider never answered (an
    /// agent that gave up on a broken stream and ended the turn anyway), see the catalogue's
    /// `zero_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_tokens: Option<u64>,
    pub prompt_error: Option<AcpErrorEvidence<'a>>,
}

/// One ACP `session/update`, reduced to what classification reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "sessionUpdate", rename_all = "snake_case")]
pub enum AcpUpdate<'a> {
    AgentMessageChunk { text: Cow<'a, str> },
    AgentThoughtChunk { text: Cow<'a, str> },
    ToolCall { status: Option<Cow<'a, str>> },
    Other { name: Cow<'a, str> },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StderrEvidence<'a> {
    pub lines: Vec<Cow<'a, str>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessExitEvidence {
    pub code: Option<i64>,
    /// Signal name, upper case with the `SIG` prefix (`SIGTERM`), whether sent as a name or a number.
    pub signal: Option<String>,
}

/// A text that outlives what it was read from.
fn owned(s: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(s.into_owned())
}

impl Envelope<'_> {
    /// The same envelope owning its texts (to keep it past the JSON it was read from).
    pub fn into_owned(self) -> Envelope<'static> {
        Envelope {
            invocation_id: self.invocation_id.map(owned),
            generation: self.generation,
            active_generation: self.active_generation,
            phase: self.phase,
            occurred_at: self.occurred_at,
            provider_id: self.provider_id.map(owned),
            model_id: self.model_id.map(owned),
            agent: self.agent.map(owned),
            cancel_requested: self.cancel_requested,
            effects: self.effects,
            items: self.items.into_iter().map(EvidenceItem::into_owned).collect(),
            derived: self.derived,
            resume: self.resume,
            truncated: self.truncated,
        }
    }
}

impl EvidenceItem<'_> {
    fn into_owned(self) -> EvidenceItem<'static> {
        match self {
            EvidenceItem::Http(h) => EvidenceItem::Http(HttpEvidence {
                status: h.status,
                headers: h.headers.into_iter().map(|(k, v)| (owned(k), owned(v))).collect(),
                body: h.body.map(owned),
            }),
            EvidenceItem::AcpError(e) => EvidenceItem::AcpError(e.into_owned()),
            EvidenceItem::AcpUpdates(u) => EvidenceItem::AcpUpdates(AcpUpdatesEvidence {
                updates: u
                    .updates
                    .into_iter()
                    .map(|x| match x {
                        AcpUpdate::AgentMessageChunk { text } => {
                            AcpUpdate::AgentMessageChunk { text: owned(text) }
                        }
                        AcpUpdate::AgentThoughtChunk { text } => {
                            AcpUpdate::AgentThoughtChunk { text: owned(text) }
                        }
                        AcpUpdate::ToolCall { status } => AcpUpdate::ToolCall {
                            status: status.map(owned),
                        },
                        AcpUpdate::Other { name } => AcpUpdate::Other { name: owned(name) },
                    })
                    .collect(),
                stop_reason: u.stop_reason.map(owned),
                usage_tokens: u.usage_tokens,
                prompt_error: u.prompt_error.map(AcpErrorEvidence::into_owned),
            }),
            EvidenceItem::Stderr(s) => EvidenceItem::Stderr(StderrEvidence {
                lines: s.lines.into_iter().map(owned).collect(),
            }),
            EvidenceItem::ProcessExit(p) => EvidenceItem::ProcessExit(p),
        }
    }
}

impl AcpErrorEvidence<'_> {
    fn into_owned(self) -> AcpErrorEvidence<'static> {
        AcpErrorEvidence {
            code: self.code,
            message: self.message.map(owned),
            data: self.data,
        }
    }
}

impl<'a> Envelope<'a> {
    /// Parses one envelope from JSON bytes, applying every bound.
    ///
    /// One pass of `serde_json`'s deserializer reads each field straight into the envelope
    /// (`read`), walking what it does not keep, and strings are copied once, into the envelope,
    /// up to their bounds; the result is the same as [`Envelope::from_value`] on the same bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Envelope<'a>, EnvelopeError> {
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(EnvelopeError::TooLarge {
                size: bytes.len(),
                limit: MAX_ENVELOPE_BYTES,
            });
        }
        // One UTF-8 check of the whole input (vectorized) rather than one per string as the
        // byte reader makes; input that is not UTF-8 goes through the byte reader, so its
        // error is the one `serde_json` gives for it (the two readers agree on valid text).
        // Plain JSON is read directly (`crate::json::pull`); anything that reader does not
        // read (a float, an odd escape, malformed input) is read by `serde_json`, whose
        // reading and errors are the definition. One UTF-8 check of the whole input
        // (vectorized); input that is not UTF-8 goes to `serde_json`'s byte reader, so its
        // error is the one `serde_json` gives for it.
        let value: Value = match std::str::from_utf8(bytes) {
            Ok(text) => {
                let mut t = Text::new(text);
                if let Ok(envelope) = read::top(&mut t) {
                    if t.at_end() {
                        return envelope;
                    }
                }
                serde_json::from_str(text)?
            }
            Err(_) => serde_json::from_slice(bytes)?,
        };
        Envelope::from_value(&value).map(Envelope::into_owned)
    }

    /// Builds an envelope from an already parsed JSON value, leniently and bounded.
    pub fn from_value(value: &'a Value) -> Result<Envelope<'a>, EnvelopeError> {
        // A walk of a value never gives up: every token it gives is what the reader asked for.
        read::top(&mut Walk::new(value)).unwrap_or(Err(EnvelopeError::NotAnObject))
    }

    /// True when `generation` and `active_generation` are both given and differ.
    pub fn is_stale(&self) -> bool {
        matches!((self.generation, self.active_generation), (Some(g), Some(a)) if g != a)
    }
}

/// An envelope owning its texts, read from any deserializer (`serde_json::from_value`, ...).
impl<'de> serde::Deserialize<'de> for Envelope<'static> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Envelope::from_value(&value)
            .map(Envelope::into_owned)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_field_types_are_read_leniently() {
        let env = Envelope::parse(
            br#"{"generation":"3","items":[{"kind":"http","status":"429","headers":{"Retry-After":20}},
                {"kind":"process_exit","code":"127","signal":15}]}"#,
        )
        .expect("parses");
        assert_eq!(env.generation, Some(3));
        let EvidenceItem::Http(h) = &env.items[0] else {
            panic!("http first")
        };
        assert_eq!(h.status, Some(429));
        assert_eq!(h.headers.get("retry-after").map(|v| &**v), Some("20"));
        let EvidenceItem::ProcessExit(p) = &env.items[1] else {
            panic!("exit second")
        };
        assert_eq!(p.code, Some(127));
        assert_eq!(p.signal.as_deref(), Some("SIGTERM"));
        assert!(!env.truncated);
    }

    #[test]
    fn oversize_text_is_cut_and_recorded() {
        let body = "x".repeat(MAX_TEXT_BYTES + 10);
        let json = serde_json::json!({"items":[{"kind":"http","status":500,"body":body}]});
        let env = Envelope::from_value(&json).expect("parses");
        assert!(env.truncated);
        let EvidenceItem::Http(h) = &env.items[0] else {
            panic!("http")
        };
        assert_eq!(h.body.as_ref().map(|b| b.len()), Some(MAX_TEXT_BYTES));
    }

    #[test]
    fn cutting_never_splits_a_character() {
        let body = "é".repeat(MAX_TEXT_BYTES);
        let json = serde_json::json!({"items":[{"kind":"stderr","lines":[body]}]});
        let env = Envelope::from_value(&json).expect("parses");
        let EvidenceItem::Stderr(s) = &env.items[0] else {
            panic!("stderr")
        };
        assert!(s.lines[0].len() <= MAX_LINE_BYTES);
        assert!(env.truncated);
    }

    #[test]
    fn too_large_input_is_an_error_not_a_silent_cut() {
        let big = vec![b' '; MAX_ENVELOPE_BYTES + 1];
        assert!(matches!(
            Envelope::parse(&big),
            Err(EnvelopeError::TooLarge { .. })
        ));
    }

    #[test]
    fn tool_calls_beyond_the_update_bound_still_count_as_effects() {
        let mut updates: Vec<Value> = (0..MAX_UPDATES + 5)
            .map(|_| serde_json::json!({"sessionUpdate":"plan","entries":[]}))
            .collect();
        updates.push(serde_json::json!({"sessionUpdate":"tool_call","toolCallId":"t1"}));
        let json = serde_json::json!({"items":[{"kind":"acp_updates","updates":updates}]});
        let env = Envelope::from_value(&json).expect("parses");
        assert!(env.derived.tool_activity);
        assert!(env.truncated);
    }

    #[test]
    fn a_resume_claim_in_json_is_never_read() {
        let env =
            Envelope::parse(br#"{"generation":3,"resume":{"session_id":"s-1","generation":3},"items":[]}"#)
                .expect("parses");
        assert_eq!(env.resume, None);
    }

    #[test]
    fn malformed_input_gets_serde_jsons_error_whether_or_not_it_is_utf8() {
        // Valid UTF-8 is read as text, anything else as bytes: the error must not depend on
        // which reader ran, including where it says the problem is.
        for bad in [
            &b"{\"items\":[{\"kind\":\"stderr\",\"lines\":[\"a\xffb\"]}]}"[..],
            b"{\"items\":[],\n\"x\":\xff}",
            b"{\"items\":[{\"kind\":\"http\",\"body\":\"\xc3\"}]}",
            b"{\"items\":[],\n \"a\":}",
            b"{\"items\":[{\"kind\":\"stderr\",\"lines\":[\"\xc3\xa9\\q\"]}]}",
            b"{\"items\":[]} x",
        ] {
            let want = serde_json::from_slice::<Value>(bad).expect_err("serde_json rejects");
            match Envelope::parse(bad) {
                Err(EnvelopeError::Json(e)) => assert_eq!(e.to_string(), want.to_string()),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn whole_numbers_written_as_floats_are_read_as_integers() {
        let env = Envelope::parse(
            br#"{"generation":3.0,"active_generation":3e0,"items":[{"kind":"http","status":429.0},
                {"kind":"acp_error","code":-32603.0},{"kind":"process_exit","code":1.0,"signal":15.0}]}"#,
        )
        .expect("parses");
        assert_eq!((env.generation, env.active_generation), (Some(3), Some(3)));
        assert!(matches!(&env.items[0], EvidenceItem::Http(h) if h.status == Some(429)));
        assert!(matches!(&env.items[1], EvidenceItem::AcpError(e) if e.code == Some(-32603)));
        assert!(
            matches!(&env.items[2], EvidenceItem::ProcessExit(p) if p.code == Some(1) && p.signal.as_deref() == Some("SIGTERM"))
        );
        let fraction = Envelope::parse(br#"{"generation":2.5,"items":[]}"#).expect("parses");
        assert_eq!(fraction.generation, None, "a fraction is no generation");
    }

    #[test]
    fn a_results_token_usage_is_read_from_acp_or_gemini_cli() {
        let usage = |result: &str| {
            let text =
                format!(r#"{{"items":[{{"kind":"acp_updates","updates":[],"prompt_result":{result}}}]}}"#);
            let env = Envelope::parse(text.as_bytes()).expect("parses");
            let value: Value = serde_json::from_str(&text).expect("json");
            assert_eq!(env, Envelope::from_value(&value).expect("parses"), "{result}");
            match &env.items[0] {
                EvidenceItem::AcpUpdates(u) => u.usage_tokens,
                _ => panic!("updates"),
            }
        };
        // claude-agent-acp: all zero after a broken stream, the total when it answered.
        let zero = r#"{"stopReason":"end_turn","usage":{"inputTokens":0,"outputTokens":0,"cachedReadTokens":0,"cachedWriteTokens":0,"totalTokens":0}}"#;
        assert_eq!(usage(zero), Some(0));
        assert_eq!(
            usage(
                r#"{"stopReason":"end_turn","usage":{"inputTokens":25,"outputTokens":7,"totalTokens":32}}"#
            ),
            Some(32)
        );
        // No total: the sum of the counts; counts however a whole number is spelled.
        assert_eq!(
            usage(r#"{"usage":{"inputTokens":"2","outputTokens":3.0}}"#),
            Some(5)
        );
        // Gemini CLI's own report, and ACP's `usage` first when both are there.
        let gemini = r#"{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":0,"output_tokens":0},"model_usage":[]}}}"#;
        assert_eq!(usage(gemini), Some(0));
        assert_eq!(
            usage(r#"{"_meta":{"quota":{"token_count":{"input_tokens":25}}},"usage":{"totalTokens":0}}"#),
            Some(0)
        );
        // No usage at all, or nothing countable in it, is not zero usage.
        for none in [
            r#"{"stopReason":"end_turn"}"#,
            r#"{"stopReason":"end_turn","usage":null}"#,
            r#"{"stopReason":"end_turn","usage":{"cost":0,"inputTokens":-1,"outputTokens":"many"}}"#,
            r#"{"stopReason":"end_turn","_meta":{"qwen.branchPoint":{"checkpointUuid":"x"}}}"#,
            r#"{"stopReason":"end_turn","_meta":{"quota":7}}"#,
            r#"{"usage":{"totalTokens":0},"usage":"later"}"#,
        ] {
            assert_eq!(usage(none), None, "{none}");
        }
    }

    #[test]
    fn missing_items_is_an_error() {
        assert!(matches!(Envelope::parse(b"{}"), Err(EnvelopeError::MissingItems)));
        assert!(matches!(Envelope::parse(b"[]"), Err(EnvelopeError::NotAnObject)));
    }

    #[test]
    fn stale_needs_both_generations_and_a_difference() {
        let mut env = Envelope::default();
        assert!(!env.is_stale());
        env.generation = Some(2);
        assert!(!env.is_stale());
        env.active_generation = Some(3);
        assert!(env.is_stale());
        env.active_generation = Some(2);
        assert!(!env.is_stale());
    }
}
