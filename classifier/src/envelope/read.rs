//! The envelope's JSON read in one pass, each field straight into what the envelope keeps.
//!
//! The reader pulls tokens from a `crate::json::pull::Source`: JSON text read directly, or an
//! already parsed `Value` walked; one reader serves both, so bytes and their `Value` give one
//! envelope by construction. Fields are lenient (an odd type is dropped, never an error), and
//! every value the envelope does not keep is skipped without building anything; strings borrow
//! the input unless they hold escapes.
//!
//! A repeated key's last value counts, as in a `Value`. So each field is read into a value of
//! its own and the last one is kept; bounds (and whether they cut anything) are applied when
//! the envelope is assembled (`super::build`), to the values kept only. An item's keys come in
//! any order, its `kind` possibly last, so an item is read into a [`RawItem`] holding every
//! field any kind reads, and assembled by kind once its object ends. The one exception is an
//! item's `updates`, which are reduced as they are read (`super::build::Updates`): a prompt can
//! carry thousands, and effects are derived from all of them.

use super::{
    build::{self, Updates},
    Envelope, EnvelopeError, MAX_ITEMS,
};
use crate::json::{
    pull::{Bail, Source, Tok},
    Json,
};
use serde_json::Number;
use std::borrow::Cow;

/// A scalar as read: what lenient fields accept (a string, a number, a boolean), or that the
/// value was something else.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    /// An array or an object (skipped).
    Compound,
}

impl Scalar<'_> {
    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The top-level object's fields (see the module documentation for repeated keys).
#[derive(Default)]
pub(super) struct RawEnvelope<'a> {
    pub(super) invocation_id: Option<Scalar<'a>>,
    pub(super) generation: Option<Scalar<'a>>,
    pub(super) active_generation: Option<Scalar<'a>>,
    pub(super) phase: Option<Json<'a>>,
    pub(super) occurred_at: Option<Scalar<'a>>,
    pub(super) provider_id: Option<Scalar<'a>>,
    pub(super) model_id: Option<Scalar<'a>>,
    pub(super) agent: Option<Scalar<'a>>,
    pub(super) cancel_requested: Option<Scalar<'a>>,
    pub(super) effects: Option<RawEffects<'a>>,
    /// `Some(None)` when the last `items` was not an array.
    pub(super) items: Option<Option<build::Items<'a>>>,
}

/// The `effects` object's fields; `None` fields were absent. A non-object reads as absent.
#[derive(Default)]
pub(super) struct RawEffects<'a> {
    pub(super) assistant_output: Option<Scalar<'a>>,
    pub(super) tool_activity: Option<Scalar<'a>>,
    pub(super) partial_result: Option<Scalar<'a>>,
    pub(super) prompt_delivery: Option<Json<'a>>,
}

/// Every field any kind of item reads; assembled by kind in `super::build`.
#[derive(Default)]
pub(super) struct RawItem<'a> {
    pub(super) kind: Option<Scalar<'a>>,
    pub(super) status: Option<Scalar<'a>>,
    /// `Some(None)` when the last `headers` was not an object.
    pub(super) headers: Option<Option<Headers<'a>>>,
    pub(super) body: Option<Json<'a>>,
    pub(super) code: Option<Scalar<'a>>,
    pub(super) message: Option<Json<'a>>,
    pub(super) data: Option<Json<'a>>,
    /// `Some(None)` when the last `updates` was not an array.
    pub(super) updates: Option<Option<Updates<'a>>>,
    pub(super) prompt_result: Option<RawResult<'a>>,
    /// `Some(None)` when the last `prompt_error` was not an object.
    pub(super) prompt_error: Option<Option<RawError<'a>>>,
    pub(super) lines: Option<Lines<'a>>,
    pub(super) text: Option<Scalar<'a>>,
    pub(super) signal: Option<Scalar<'a>>,
}

/// An object's headers in document order, as read.
pub(super) type Headers<'a> = Vec<(Cow<'a, str>, HeaderValue<'a>)>;

/// A header's value as read: a list gives its first element, if that is a string.
pub(super) enum HeaderValue<'a> {
    Str(Cow<'a, str>),
    Number(Number),
    First(Option<Cow<'a, str>>),
    Other,
}

/// `prompt_result`: `None` stop reasons when the value is not an object (`null` does not count
/// as a result at all).
pub(super) struct RawResult<'a> {
    pub(super) null: bool,
    pub(super) stop_reason: Option<Scalar<'a>>,
    pub(super) stop_reason_snake: Option<Scalar<'a>>,
    /// The last `usage` key's value, when it was an object (see [`RawUsage`]).
    pub(super) usage: Option<RawUsage>,
    /// Gemini CLI's own report, `_meta.quota.token_count` (`input_tokens`, `output_tokens`).
    pub(super) meta_usage: Option<RawUsage>,
}

/// The token counts of a prompt result: ACP's `usage` (`totalTokens`, `inputTokens`,
/// `outputTokens`, ...) or Gemini CLI's `token_count` (`input_tokens`, `output_tokens`): its
/// total, and how many other counts it holds and their sum. Counts are whole numbers under
/// keys ending in `Tokens` or `_tokens`; anything else in it is skipped.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RawUsage {
    pub(super) total: Option<u64>,
    pub(super) counts: usize,
    pub(super) sum: u64,
}

/// A JSON-RPC error object's fields (`prompt_error`).
#[derive(Default)]
pub(super) struct RawError<'a> {
    pub(super) code: Option<Scalar<'a>>,
    pub(super) message: Option<Json<'a>>,
    pub(super) data: Option<Json<'a>>,
}

/// `lines`: a list (its strings; other elements are dropped), a string, or neither.
pub(super) enum Lines<'a> {
    List(Vec<Cow<'a, str>>),
    Str(Cow<'a, str>),
    Other,
}

/// One update's fields. `inner` is the last `update` key's value (`Some(None)` when that was
/// not an object), read only at the outer level.
#[derive(Default)]
pub(super) struct RawUpdate<'a> {
    pub(super) kind: Option<Scalar<'a>>,
    pub(super) content: Option<Cow<'a, str>>,
    pub(super) status: Option<Scalar<'a>>,
    inner: Option<Option<Box<RawUpdate<'a>>>>,
}

/// Reads one document: the envelope, or why the document is JSON but no envelope.
pub(super) fn top<'a, S: Source<'a>>(s: &mut S) -> Result<Result<Envelope<'a>, EnvelopeError>, Bail> {
    let tok = s.value()?;
    if tok != Tok::Object {
        s.skip(tok)?;
        return Ok(Err(EnvelopeError::NotAnObject));
    }
    let mut raw = RawEnvelope::default();
    while let Some(key) = s.key()? {
        match &*key {
            "items" => raw.items = Some(items(s)?),
            "invocation_id" => raw.invocation_id = Some(scalar(s)?),
            "generation" => raw.generation = Some(scalar(s)?),
            "active_generation" => raw.active_generation = Some(scalar(s)?),
            "phase" => raw.phase = Some(json(s)?),
            "occurred_at" => raw.occurred_at = Some(scalar(s)?),
            "provider_id" => raw.provider_id = Some(scalar(s)?),
            "model_id" => raw.model_id = Some(scalar(s)?),
            "agent" => raw.agent = Some(scalar(s)?),
            "cancel_requested" => raw.cancel_requested = Some(scalar(s)?),
            "effects" => raw.effects = Some(effects(s)?),
            _ => skip(s)?,
        }
    }
    Ok(build::envelope(raw))
}

/// Reads the start of the next value: whether it is `want` (an object or an array, whose
/// content the caller then reads); any other value is skipped.
fn opens<'a, S: Source<'a>>(s: &mut S, want: Tok<'static>) -> Result<bool, Bail> {
    let t = s.value()?;
    if t == want {
        return Ok(true);
    }
    s.skip(t)?;
    Ok(false)
}

fn skip<'a, S: Source<'a>>(s: &mut S) -> Result<(), Bail> {
    let t = s.value()?;
    s.skip(t)
}

fn json<'a, S: Source<'a>>(s: &mut S) -> Result<Json<'a>, Bail> {
    let t = s.value()?;
    Json::pull(s, t)
}

fn scalar<'a, S: Source<'a>>(s: &mut S) -> Result<Scalar<'a>, Bail> {
    Ok(match s.value()? {
        Tok::Null => Scalar::Null,
        Tok::Bool(b) => Scalar::Bool(b),
        // As a `Value` reads it: a float JSON cannot hold is null (a `Value` source never
        // holds one; the text source never reads floats).
        Tok::Number(n) => Scalar::Number(n),
        Tok::Str(v) => Scalar::Str(v),
        t @ (Tok::Object | Tok::Array) => {
            s.skip(t)?;
            Scalar::Compound
        }
    })
}

fn effects<'a, S: Source<'a>>(s: &mut S) -> Result<RawEffects<'a>, Bail> {
    let mut e = RawEffects::default();
    if !opens(s, Tok::Object)? {
        return Ok(e);
    }
    while let Some(key) = s.key()? {
        match &*key {
            "assistant_output" => e.assistant_output = Some(scalar(s)?),
            "tool_activity" => e.tool_activity = Some(scalar(s)?),
            "partial_result" => e.partial_result = Some(scalar(s)?),
            "prompt_delivery" => e.prompt_delivery = Some(json(s)?),
            _ => skip(s)?,
        }
    }
    Ok(e)
}

/// `items`: the first [`MAX_ITEMS`] are read and assembled, the rest skipped; `None` for a
/// non-array.
fn items<'a, S: Source<'a>>(s: &mut S) -> Result<Option<build::Items<'a>>, Bail> {
    if !opens(s, Tok::Array)? {
        return Ok(None);
    }
    let mut items = build::Items::default();
    let mut count = 0usize;
    while s.more()? {
        if count < MAX_ITEMS {
            item(s, &mut items)?;
        } else {
            skip(s)?;
            items.truncated = true;
        }
        count += 1;
    }
    Ok(Some(items))
}

/// One item: its fields read, then assembled by kind into `items` (a non-object is ignored).
fn item<'a, S: Source<'a>>(s: &mut S, items: &mut build::Items<'a>) -> Result<(), Bail> {
    if !opens(s, Tok::Object)? {
        return Ok(());
    }
    let mut it = RawItem::default();
    while let Some(key) = s.key()? {
        match &*key {
            "kind" => it.kind = Some(scalar(s)?),
            "status" => it.status = Some(scalar(s)?),
            "headers" => it.headers = Some(headers(s)?),
            "body" => it.body = Some(json(s)?),
            "code" => it.code = Some(scalar(s)?),
            "message" => it.message = Some(json(s)?),
            "data" => it.data = Some(json(s)?),
            "updates" => it.updates = Some(updates(s)?),
            "prompt_result" => it.prompt_result = Some(prompt_result(s)?),
            "prompt_error" => it.prompt_error = Some(prompt_error(s)?),
            "lines" => it.lines = Some(lines(s)?),
            "text" => it.text = Some(scalar(s)?),
            "signal" => it.signal = Some(scalar(s)?),
            _ => skip(s)?,
        }
    }
    items.push(&mut it);
    Ok(())
}

fn headers<'a, S: Source<'a>>(s: &mut S) -> Result<Option<Headers<'a>>, Bail> {
    if !opens(s, Tok::Object)? {
        return Ok(None);
    }
    let mut out = Vec::new();
    while let Some(key) = s.key()? {
        let value = match s.value()? {
            Tok::Str(v) => HeaderValue::Str(v),
            Tok::Number(n) => HeaderValue::Number(n),
            // Some clients give a repeated header as a list: its first element counts.
            Tok::Array => {
                let mut first = None;
                if s.more()? {
                    if let Scalar::Str(v) = scalar(s)? {
                        first = Some(v);
                    }
                    while s.more()? {
                        skip(s)?;
                    }
                }
                HeaderValue::First(first)
            }
            t => {
                s.skip(t)?;
                HeaderValue::Other
            }
        };
        out.push((key, value));
    }
    Ok(Some(out))
}

fn prompt_result<'a, S: Source<'a>>(s: &mut S) -> Result<RawResult<'a>, Bail> {
    let mut r = RawResult {
        null: false,
        stop_reason: None,
        stop_reason_snake: None,
        usage: None,
        meta_usage: None,
    };
    match s.value()? {
        Tok::Null => r.null = true,
        Tok::Object => {
            while let Some(key) = s.key()? {
                match &*key {
                    "stopReason" => r.stop_reason = Some(scalar(s)?),
                    "stop_reason" => r.stop_reason_snake = Some(scalar(s)?),
                    "usage" => r.usage = usage(s)?,
                    "_meta" => r.meta_usage = meta_usage(s)?,
                    _ => skip(s)?,
                }
            }
        }
        t => s.skip(t)?,
    }
    Ok(r)
}

/// A prompt result's token counts (`None` for a non-object). A count is a whole number however
/// it is spelled (`3`, `3.0`, `"3"`, see `build::as_u64`); anything else is not counted.
fn usage<'a, S: Source<'a>>(s: &mut S) -> Result<Option<RawUsage>, Bail> {
    if !opens(s, Tok::Object)? {
        return Ok(None);
    }
    let mut u = RawUsage::default();
    while let Some(key) = s.key()? {
        let value = scalar(s)?;
        let count = (key.ends_with("Tokens") || key.ends_with("_tokens"))
            .then(|| build::as_u64(&value))
            .flatten();
        let Some(n) = count else { continue };
        if key == "totalTokens" || key == "total_tokens" {
            u.total = Some(n);
        } else {
            u.counts += 1;
            u.sum = u.sum.saturating_add(n);
        }
    }
    Ok(Some(u))
}

/// A prompt result's `_meta`: the token counts at `quota.token_count` (Gemini CLI), if any.
fn meta_usage<'a, S: Source<'a>>(s: &mut S) -> Result<Option<RawUsage>, Bail> {
    at_key(s, "quota", |s| at_key(s, "token_count", usage))
}

/// The value `read` makes of the last `key` of the object that comes next (`None` for a
/// non-object or no such key); the rest of the object is skipped.
fn at_key<'a, S: Source<'a>, T>(
    s: &mut S,
    key: &str,
    read: impl Fn(&mut S) -> Result<Option<T>, Bail>,
) -> Result<Option<T>, Bail> {
    let mut found = None;
    if opens(s, Tok::Object)? {
        while let Some(k) = s.key()? {
            if k == key {
                found = read(s)?;
            } else {
                skip(s)?;
            }
        }
    }
    Ok(found)
}

fn prompt_error<'a, S: Source<'a>>(s: &mut S) -> Result<Option<RawError<'a>>, Bail> {
    if !opens(s, Tok::Object)? {
        return Ok(None);
    }
    let mut e = RawError::default();
    while let Some(key) = s.key()? {
        match &*key {
            "code" => e.code = Some(scalar(s)?),
            "message" => e.message = Some(json(s)?),
            "data" => e.data = Some(json(s)?),
            _ => skip(s)?,
        }
    }
    Ok(Some(e))
}

fn lines<'a, S: Source<'a>>(s: &mut S) -> Result<Lines<'a>, Bail> {
    Ok(match s.value()? {
        Tok::Str(v) => Lines::Str(v),
        Tok::Array => {
            let mut out = Vec::new();
            while s.more()? {
                if let Scalar::Str(v) = scalar(s)? {
                    out.push(v);
                }
            }
            Lines::List(out)
        }
        t => {
            s.skip(t)?;
            Lines::Other
        }
    })
}

/// `updates`: each update reduced as it is read (see `build::Updates`); `None` for a
/// non-array.
fn updates<'a, S: Source<'a>>(s: &mut S) -> Result<Option<Updates<'a>>, Bail> {
    if !opens(s, Tok::Array)? {
        return Ok(None);
    }
    let mut out = Updates::default();
    while s.more()? {
        // A non-object is no update; an object whose `update` is an object is the whole
        // `session/update` params: the inner object is the update.
        let u = update(s, true)?.map(|u| match u.inner {
            Some(Some(inner)) => *inner,
            _ => u,
        });
        out.push(u);
    }
    Ok(Some(out))
}

/// One update's fields (`None` for a non-object); `unwrap`: read an `update` key inside.
fn update<'a, S: Source<'a>>(s: &mut S, unwrap: bool) -> Result<Option<RawUpdate<'a>>, Bail> {
    if !opens(s, Tok::Object)? {
        return Ok(None);
    }
    let mut u = RawUpdate::default();
    while let Some(key) = s.key()? {
        match &*key {
            "sessionUpdate" => u.kind = Some(scalar(s)?),
            "content" => {
                let t = s.value()?;
                u.content = Some(content(s, t)?);
            }
            "status" => u.status = Some(scalar(s)?),
            "update" if unwrap => u.inner = Some(update(s, false)?.map(Box::new)),
            _ => skip(s)?,
        }
    }
    Ok(Some(u))
}

/// The text of an ACP content block that `t` starts: a string, an object's `text` (a
/// non-string is none), or the texts of a list of blocks joined.
fn content<'a, S: Source<'a>>(s: &mut S, t: Tok<'a>) -> Result<Cow<'a, str>, Bail> {
    Ok(match t {
        Tok::Str(v) => v,
        Tok::Object => {
            let mut text = Cow::Borrowed("");
            while let Some(key) = s.key()? {
                if key == "text" {
                    text = match scalar(s)? {
                        Scalar::Str(v) => v,
                        _ => Cow::Borrowed(""),
                    };
                } else {
                    skip(s)?;
                }
            }
            text
        }
        Tok::Array => {
            let mut out: Cow<'a, str> = Cow::Borrowed("");
            while s.more()? {
                let t = s.value()?;
                let part = content(s, t)?;
                if out.is_empty() {
                    out = part;
                } else if !part.is_empty() {
                    out.to_mut().push_str(&part);
                }
            }
            out
        }
        _ => Cow::Borrowed(""),
    })
}
