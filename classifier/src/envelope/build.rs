//! The fields `super::read` found, bounded and assembled into an [`Envelope`].
//!
//! Every cut sets the envelope's `truncated`. Fields are lenient: a whole number may be written
//! `3`, `3.0` or `"3"`, a status as text, a signal as a name or a number; anything else is
//! dropped. Effects implied by ACP updates are derived from *all* updates, before the list is
//! cut, so a tool call early in a long prompt still counts.

use super::{
    ansi,
    read::{HeaderValue, Lines, RawEffects, RawEnvelope, RawError, RawItem, RawUpdate, Scalar},
    AcpErrorEvidence, AcpUpdate, AcpUpdatesEvidence, DerivedEffects, Envelope, EnvelopeError, EvidenceItem,
    HttpEvidence, ProcessExitEvidence, StderrEvidence, MAX_HEADERS, MAX_LINES, MAX_LINE_BYTES,
    MAX_SHORT_BYTES, MAX_TEXT_BYTES, MAX_UPDATES,
};
use crate::json::Json;
use chrono::{DateTime, Utc};
use policy::classification::{Effects, PromptDelivery};
use serde::{de::value::StrDeserializer, Deserialize};
use serde_json::Value;
use std::{borrow::Cow, collections::BTreeMap};

/// The envelope of a top-level object read by `super::read`.
pub(super) fn envelope(raw: RawEnvelope<'_>) -> Result<Envelope<'_>, EnvelopeError> {
    let RawEnvelope {
        invocation_id,
        generation,
        active_generation,
        phase,
        occurred_at,
        provider_id,
        model_id,
        agent,
        cancel_requested,
        effects,
        items,
    } = raw;
    let items = items.flatten().ok_or(EnvelopeError::MissingItems)?;
    let mut b = Bounder {
        truncated: items.truncated,
    };
    Ok(Envelope {
        invocation_id: invocation_id.and_then(|v| b.short_str(v)),
        generation: generation.as_ref().and_then(as_u64),
        active_generation: active_generation.as_ref().and_then(as_u64),
        phase: phase.as_ref().and_then(enum_value),
        occurred_at: occurred_at
            .as_ref()
            .and_then(Scalar::as_str)
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|d| d.with_timezone(&Utc)),
        provider_id: provider_id.and_then(|v| b.short_str(v)),
        model_id: model_id.and_then(|v| b.short_str(v)),
        agent: agent.and_then(|v| b.short_str(v)),
        cancel_requested: matches!(cancel_requested, Some(Scalar::Bool(true))),
        effects: effects.map(self::effects).unwrap_or_default(),
        items: items.items,
        derived: items.derived,
        resume: None,
        truncated: b.truncated,
    })
}

/// A unit enum (`Phase`, `PromptDelivery`) as `serde_json::from_value` reads it from this
/// JSON: its variant's name, or the externally tagged form.
fn enum_value<T: for<'a> Deserialize<'a>>(v: &Json<'_>) -> Option<T> {
    match v {
        Json::String(s) => T::deserialize(StrDeserializer::<serde::de::value::Error>::new(s)).ok(),
        other => serde_json::from_value(other.to_value()).ok(),
    }
}

fn effects(e: RawEffects<'_>) -> Effects {
    let flag = |v: Option<Scalar<'_>>| matches!(v, Some(Scalar::Bool(true)));
    Effects {
        assistant_output: flag(e.assistant_output),
        tool_activity: flag(e.tool_activity),
        partial_result: flag(e.partial_result),
        prompt_delivery: match &e.prompt_delivery {
            None => PromptDelivery::NotSent,
            // An unreadable delivery value is not evidence of non-delivery: fail closed.
            Some(v) => enum_value(v).unwrap_or(PromptDelivery::Ambiguous),
        },
    }
}

/// A whole number, however it is spelled: `3`, `3.0` (JSON Schema's `integer` includes it, so
/// the API accepts it) or the text `"3"` (lenient, for adapters).
pub(super) fn as_u64(v: &Scalar<'_>) -> Option<u64> {
    match v {
        Scalar::Number(n) => n.as_u64().or_else(|| policy::whole::parse(&n.to_string())),
        Scalar::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// See [`as_u64`].
fn as_i64(v: &Scalar<'_>) -> Option<i64> {
    match v {
        Scalar::Number(n) => n.as_i64().or_else(|| policy::whole::parse(&n.to_string())),
        Scalar::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Applies bounds and remembers whether it cut anything.
#[derive(Default)]
struct Bounder {
    truncated: bool,
}

impl Bounder {
    /// `s` cut to at most `max` bytes (at a character boundary).
    fn cut<'a>(&mut self, s: Cow<'a, str>, max: usize) -> Cow<'a, str> {
        if s.len() <= max {
            return s;
        }
        self.truncated = true;
        let end = floor_boundary(&s, max);
        match s {
            Cow::Owned(mut s) => {
                s.truncate(end);
                Cow::Owned(s)
            }
            Cow::Borrowed(s) => Cow::Borrowed(&s[..end]),
        }
    }

    fn short_str<'a>(&mut self, v: Scalar<'a>) -> Option<Cow<'a, str>> {
        match v {
            Scalar::Str(s) => Some(self.cut(s, MAX_SHORT_BYTES)),
            Scalar::Number(n) => Some(Cow::Owned(n.to_string())),
            _ => None,
        }
    }

    /// Text of a value: a string as is, anything else as compact JSON; bounded.
    fn text<'a>(&mut self, v: Json<'a>, max: usize) -> Cow<'a, str> {
        match v {
            Json::String(s) => self.cut(s, max),
            other => self.cut(Cow::Owned(other.to_value().to_string()), max),
        }
    }

    /// A JSON value kept whole if its serialization fits, else reduced to its bounded text.
    fn json(&mut self, v: Json<'_>) -> Value {
        match v {
            Json::String(s) => Value::String(self.cut(s, MAX_TEXT_BYTES).into_owned()),
            Json::Null | Json::Bool(_) | Json::Number(_) => v.to_value(),
            _ => {
                let v = v.to_value();
                let s = v.to_string();
                if s.len() <= MAX_TEXT_BYTES {
                    v
                } else {
                    Value::String(self.cut(Cow::Owned(s), MAX_TEXT_BYTES).into_owned())
                }
            }
        }
    }
}

/// The largest character boundary of `s` at or before `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The items read so far, assembled, and what assembling them cut and derived.
#[derive(Default)]
pub(super) struct Items<'a> {
    items: Vec<EvidenceItem<'a>>,
    pub(super) truncated: bool,
    derived: DerivedEffects,
}

impl<'a> Items<'a> {
    /// Assembles one item, taking its fields.
    pub(super) fn push(&mut self, raw: &mut RawItem<'a>) {
        let mut b = Bounder::default();
        if let Some(item) = item(raw, &mut b, &mut self.derived) {
            self.items.push(item);
        }
        self.truncated |= b.truncated;
    }
}

fn item<'a>(
    raw: &mut RawItem<'a>,
    b: &mut Bounder,
    derived: &mut DerivedEffects,
) -> Option<EvidenceItem<'a>> {
    let kind = raw.kind.take()?;
    Some(match kind.as_str()? {
        "http" => EvidenceItem::Http(http(raw, b)),
        "acp_error" => EvidenceItem::AcpError(acp_error(
            RawError {
                code: raw.code.take(),
                message: raw.message.take(),
                data: raw.data.take(),
            },
            b,
        )),
        "acp_updates" => EvidenceItem::AcpUpdates(updates(raw, b, derived)),
        "stderr" => EvidenceItem::Stderr(stderr(raw, b)),
        "process_exit" => EvidenceItem::ProcessExit(ProcessExitEvidence {
            code: raw.code.as_ref().and_then(as_i64),
            signal: raw.signal.as_ref().and_then(signal_name),
        }),
        // An unknown kind from a newer adapter is ignored, but not silently.
        _ => {
            b.truncated = true;
            return None;
        }
    })
}

fn http<'a>(raw: &mut RawItem<'a>, b: &mut Bounder) -> HttpEvidence<'a> {
    let mut headers = BTreeMap::new();
    if let Some(Some(mut h)) = raw.headers.take() {
        // In key order, one per key (a repeated key's last value), as a `Value` holds them:
        // the sort is stable, so among equal keys document order stays.
        h.sort_by(|x, y| x.0.cmp(&y.0));
        let mut unique: Vec<(Cow<'a, str>, HeaderValue<'a>)> = Vec::with_capacity(h.len());
        for (name, value) in h {
            match unique.last_mut() {
                Some(last) if last.0 == name => last.1 = value,
                _ => unique.push((name, value)),
            }
        }
        if unique.len() > MAX_HEADERS {
            b.truncated = true;
        }
        for (name, value) in unique.into_iter().take(MAX_HEADERS) {
            let value = match value {
                HeaderValue::Str(s) | HeaderValue::First(Some(s)) => b.cut(s, MAX_SHORT_BYTES),
                HeaderValue::Number(n) => Cow::Owned(n.to_string()),
                HeaderValue::First(None) | HeaderValue::Other => continue,
            };
            let name = if name.bytes().any(|c| c.is_ascii_uppercase()) {
                Cow::Owned(name.to_ascii_lowercase())
            } else {
                name
            };
            headers.insert(b.cut(name, MAX_SHORT_BYTES), value);
        }
    }
    HttpEvidence {
        status: raw
            .status
            .as_ref()
            .and_then(as_u64)
            .and_then(|s| u16::try_from(s).ok()),
        headers,
        body: raw
            .body
            .take()
            .filter(|v| !matches!(v, Json::Null))
            .map(|v| b.text(v, MAX_TEXT_BYTES)),
    }
}

fn acp_error<'a>(e: RawError<'a>, b: &mut Bounder) -> AcpErrorEvidence<'a> {
    AcpErrorEvidence {
        code: e.code.as_ref().and_then(as_i64),
        message: e
            .message
            .filter(|v| !matches!(v, Json::Null))
            .map(|v| b.text(v, MAX_TEXT_BYTES)),
        data: e.data.filter(|v| !matches!(v, Json::Null)).map(|v| b.json(v)),
    }
}

fn updates<'a>(
    raw: &mut RawItem<'a>,
    b: &mut Bounder,
    derived: &mut DerivedEffects,
) -> AcpUpdatesEvidence<'a> {
    let mut out = AcpUpdatesEvidence::default();
    if let Some(Some(u)) = raw.updates.take() {
        b.truncated |= u.truncated;
        derived.delivered |= u.delivered;
        derived.tool_activity |= u.tool_activity;
        out.updates = u.updates;
    }
    if let Some(r) = raw.prompt_result.take().filter(|r| !r.null) {
        derived.delivered = true;
        // `stopReason` when given at all (even as a non-string), else `stop_reason`.
        let reason = if r.stop_reason.is_some() {
            r.stop_reason
        } else {
            r.stop_reason_snake
        };
        out.stop_reason = match reason {
            Some(Scalar::Str(s)) => Some(b.cut(s, MAX_SHORT_BYTES)),
            _ => None,
        };
        // ACP's `usage` when given, else Gemini CLI's own report.
        out.usage_tokens = r.usage.or(r.meta_usage).and_then(|u| match u.total {
            Some(t) => Some(t),
            None => (u.counts > 0).then_some(u.sum),
        });
    }
    if let Some(Some(e)) = raw.prompt_error.take() {
        out.prompt_error = Some(acp_error(e, b));
    }
    out
}

/// An item's updates, reduced as they are read: the first [`MAX_UPDATES`] as the classifier
/// reads them, and the effects all of them imply.
#[derive(Default)]
pub(super) struct Updates<'a> {
    updates: Vec<AcpUpdate<'a>>,
    truncated: bool,
    /// Some update came back for this prompt: it was delivered.
    delivered: bool,
    tool_activity: bool,
    /// Updates seen, kept or not.
    seen: usize,
}

impl<'a> Updates<'a> {
    /// Takes the next update (`None`: not an object).
    pub(super) fn push(&mut self, u: Option<RawUpdate<'a>>) {
        let index = self.seen;
        self.seen += 1;
        if index == MAX_UPDATES {
            self.truncated = true;
        }
        let Some(mut u) = u else {
            return;
        };
        let Some(Scalar::Str(kind)) = u.kind.take() else {
            return;
        };
        let keep = index < MAX_UPDATES;
        let mut b = Bounder::default();
        let update = match &*kind {
            "agent_message_chunk" | "agent_thought_chunk" => {
                self.delivered = true;
                if !keep {
                    return;
                }
                let text = b.cut(u.content.take().unwrap_or_default(), MAX_TEXT_BYTES);
                if kind == "agent_message_chunk" {
                    AcpUpdate::AgentMessageChunk { text }
                } else {
                    AcpUpdate::AgentThoughtChunk { text }
                }
            }
            "tool_call" | "tool_call_update" => {
                self.delivered = true;
                self.tool_activity = true;
                if !keep {
                    return;
                }
                AcpUpdate::ToolCall {
                    status: match u.status.take() {
                        Some(Scalar::Str(s)) => Some(b.cut(s, MAX_SHORT_BYTES)),
                        _ => None,
                    },
                }
            }
            // The user's own echoed prompt proves nothing about the agent.
            "user_message_chunk" => return,
            other => {
                self.delivered = true;
                if !keep {
                    return;
                }
                AcpUpdate::Other {
                    name: b.cut(Cow::Owned(other.to_owned()), MAX_SHORT_BYTES),
                }
            }
        };
        self.truncated |= b.truncated;
        self.updates.push(update);
    }
}

fn stderr<'a>(raw: &mut RawItem<'a>, b: &mut Bounder) -> StderrEvidence<'a> {
    // Every line, a single "line" holding many lines split, so each is matched on its own:
    // borrowed where the text was, in order (`lines`, then `text`).
    let mut split: Vec<Cow<'a, str>> = Vec::new();
    let mut add = |text: Cow<'a, str>| {
        // Most lines are one line without terminal escapes: kept as they are (an empty one
        // not), after one search for the three bytes that would change them.
        if memchr::memchr3(b'\n', b'\r', ansi::ESC, text.as_bytes()).is_none() {
            if !text.is_empty() {
                split.push(text);
            }
            return;
        }
        // Escapes read out here (`super::ansi`), so they take no room in the line's bound.
        match text {
            Cow::Borrowed(t) => split.extend(t.lines().map(|l| ansi::strip(Cow::Borrowed(l)))),
            Cow::Owned(t) => split.extend(t.lines().map(|l| ansi::strip(Cow::Owned(l.to_owned())))),
        }
    };
    match raw.lines.take() {
        Some(Lines::List(a)) => a.into_iter().for_each(&mut add),
        Some(Lines::Str(s)) => add(s),
        Some(Lines::Other) | None => {}
    }
    if let Some(Scalar::Str(s)) = raw.text.take() {
        add(s);
    }
    if split.len() > MAX_LINES {
        b.truncated = true;
        split.drain(..split.len() - MAX_LINES);
    }
    StderrEvidence {
        lines: split
            .into_iter()
            .map(|l| b.cut(l, MAX_LINE_BYTES))
            .filter(|l| !l.trim().is_empty())
            .collect(),
    }
}

/// A signal's name, upper case with the `SIG` prefix, whether sent as a name or a number.
fn signal_name(v: &Scalar<'_>) -> Option<String> {
    const NAMES: [(i64, &str); 15] = [
        (1, "SIGHUP"),
        (2, "SIGINT"),
        (3, "SIGQUIT"),
        (4, "SIGILL"),
        (6, "SIGABRT"),
        (7, "SIGBUS"),
        (8, "SIGFPE"),
        (9, "SIGKILL"),
        (11, "SIGSEGV"),
        (13, "SIGPIPE"),
        (14, "SIGALRM"),
        (15, "SIGTERM"),
        (10, "SIGUSR1"),
        (12, "SIGUSR2"),
        (24, "SIGXCPU"),
    ];
    match v {
        Scalar::Number(_) => {
            let n = as_i64(v)?;
            Some(
                NAMES
                    .iter()
                    .find(|(k, _)| *k == n)
                    .map_or_else(|| format!("SIG{n}"), |(_, s)| (*s).to_owned()),
            )
        }
        Scalar::Str(s) => {
            let s = s.trim().to_ascii_uppercase();
            if s.is_empty() || s.len() > 16 {
                return None;
            }
            Some(if s.starts_with("SIG") {
                s
            } else {
                format!("SIG{s}")
            })
        }
        _ => None,
    }
}
