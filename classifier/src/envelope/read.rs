//! The envelope's JSON read in one pass of the deserializer, with no tree in between.
//!
//! Every field is read straight into what the envelope keeps by a visitor that accepts every
//! JSON type (the envelope is lenient: an odd type is dropped, never an error), and every value
//! the envelope does not keep is walked by [`Skip`]. Both go through `deserialize_any`, as
//! `serde_json::Value`'s own visitor does, so what is valid JSON, the nesting limit, the number
//! range and every error message are `serde_json`'s, exactly as for a `Value`; nothing is built
//! for a skipped value, and strings borrow the input unless they hold escapes. The same visitors
//! read an already parsed `Value` (`&Value` is a deserializer too), so bytes and their `Value`
//! give one envelope by construction.
//!
//! A repeated key's last value counts, as in a `Value`. So each field is read into a value of its
//! own and the last one is kept; bounds (and whether they cut anything) are applied when the
//! envelope is assembled (`super::build`), to the values kept only. An item's keys come in any
//! order, its `kind` possibly last, so an item is read into a [`RawItem`] holding every field any
//! kind reads, and assembled by kind once its object ends. The one exception is an item's
//! `updates`, which are reduced as they are read (`super::build::Updates`): a prompt can carry
//! thousands, and effects are derived from all of them.

use super::{
    build::{self, Updates},
    Envelope, EnvelopeError,
};
use crate::json::Json;
use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::{borrow::Cow, fmt};

/// A scalar as read: what lenient fields accept (a string, a number, a boolean), or that the
/// value was something else.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar<'de> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'de, str>),
    /// An array or an object (walked, not kept).
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
pub(super) struct RawEnvelope<'de> {
    pub(super) invocation_id: Option<Scalar<'de>>,
    pub(super) generation: Option<Scalar<'de>>,
    pub(super) active_generation: Option<Scalar<'de>>,
    pub(super) phase: Option<Json<'de>>,
    pub(super) occurred_at: Option<Scalar<'de>>,
    pub(super) provider_id: Option<Scalar<'de>>,
    pub(super) model_id: Option<Scalar<'de>>,
    pub(super) agent: Option<Scalar<'de>>,
    pub(super) cancel_requested: Option<Scalar<'de>>,
    pub(super) effects: Option<RawEffects<'de>>,
    /// `Some(None)` when the last `items` was not an array.
    pub(super) items: Option<Option<build::Items<'de>>>,
}

/// The `effects` object's fields; `None` fields were absent. A non-object reads as absent.
#[derive(Default)]
pub(super) struct RawEffects<'de> {
    pub(super) assistant_output: Option<Scalar<'de>>,
    pub(super) tool_activity: Option<Scalar<'de>>,
    pub(super) partial_result: Option<Scalar<'de>>,
    pub(super) prompt_delivery: Option<Json<'de>>,
}

/// Every field any kind of item reads; assembled by kind in `super::build`.
#[derive(Default)]
pub(super) struct RawItem<'de> {
    pub(super) kind: Option<Scalar<'de>>,
    pub(super) status: Option<Scalar<'de>>,
    /// `Some(None)` when the last `headers` was not an object.
    pub(super) headers: Option<Option<Headers<'de>>>,
    pub(super) body: Option<Json<'de>>,
    pub(super) code: Option<Scalar<'de>>,
    pub(super) message: Option<Json<'de>>,
    pub(super) data: Option<Json<'de>>,
    /// `Some(None)` when the last `updates` was not an array.
    pub(super) updates: Option<Option<Updates<'de>>>,
    pub(super) prompt_result: Option<RawResult<'de>>,
    /// `Some(None)` when the last `prompt_error` was not an object.
    pub(super) prompt_error: Option<Option<RawError<'de>>>,
    pub(super) lines: Option<Lines<'de>>,
    pub(super) text: Option<Scalar<'de>>,
    pub(super) signal: Option<Scalar<'de>>,
}

/// An object's headers in document order, as read.
pub(super) type Headers<'de> = Vec<(Cow<'de, str>, HeaderValue<'de>)>;

/// A header's value as read: a list gives its first element, if that is a string.
pub(super) enum HeaderValue<'de> {
    Str(Cow<'de, str>),
    Number(Number),
    First(Option<Cow<'de, str>>),
    Other,
}

/// `prompt_result`: `None` stop reasons when the value is not an object (`Null` when it is
/// `null`, which does not count as a result at all).
pub(super) struct RawResult<'de> {
    pub(super) null: bool,
    pub(super) stop_reason: Option<Scalar<'de>>,
    pub(super) stop_reason_snake: Option<Scalar<'de>>,
}

/// A JSON-RPC error object's fields (`prompt_error`).
#[derive(Default)]
pub(super) struct RawError<'de> {
    pub(super) code: Option<Scalar<'de>>,
    pub(super) message: Option<Json<'de>>,
    pub(super) data: Option<Json<'de>>,
}

/// `lines`: a list (its strings; other elements are dropped), a string, or neither.
pub(super) enum Lines<'de> {
    List(Vec<Cow<'de, str>>),
    Str(Cow<'de, str>),
    Other,
}

/// Reads one document (see the module documentation): the envelope, or why the document is
/// valid JSON but no envelope.
pub(super) fn top<'de, D: Deserializer<'de>>(d: D) -> Result<Result<Envelope<'de>, EnvelopeError>, D::Error> {
    d.deserialize_any(TopVisitor)
}

/// [`top`] as a seed (for the fast reader).
pub(super) struct Top;

impl<'de> DeserializeSeed<'de> for Top {
    type Value = Result<Envelope<'de>, EnvelopeError>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        top(d)
    }
}

/// Implements the visits that only walk a value (every type but the ones a visitor reads) by
/// walking it as [`Skip`] does and answering `$other`.
macro_rules! walk_others {
    ($other:expr; $($skip:ident),*) => {
        $(walk_others!(@one $skip, $other);)*
    };
    (@one bool, $other:expr) => {
        fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> { Ok($other) }
    };
    (@one number, $other:expr) => {
        fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> { Ok($other) }
        fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> { Ok($other) }
        fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> { Ok($other) }
    };
    (@one str, $other:expr) => {
        fn visit_str<E: Error>(self, _: &str) -> Result<Self::Value, E> { Ok($other) }
    };
    (@one null, $other:expr) => {
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> { Ok($other) }
        fn visit_none<E: Error>(self) -> Result<Self::Value, E> { Ok($other) }
    };
    (@one seq, $other:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<Skip>()?.is_some() {}
            Ok($other)
        }
    };
    (@one map, $other:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_key::<Skip>()?.is_some() {
                map.next_value::<Skip>()?;
            }
            Ok($other)
        }
    };
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Result<Envelope<'de>, EnvelopeError>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(Err(EnvelopeError::NotAnObject); bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut raw = RawEnvelope::default();
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "items" => raw.items = Some(map.next_value_seed(Seed(ItemsVisitor))?),
                "invocation_id" => raw.invocation_id = Some(map.next_value()?),
                "generation" => raw.generation = Some(map.next_value()?),
                "active_generation" => raw.active_generation = Some(map.next_value()?),
                "phase" => raw.phase = Some(map.next_value()?),
                "occurred_at" => raw.occurred_at = Some(map.next_value()?),
                "provider_id" => raw.provider_id = Some(map.next_value()?),
                "model_id" => raw.model_id = Some(map.next_value()?),
                "agent" => raw.agent = Some(map.next_value()?),
                "cancel_requested" => raw.cancel_requested = Some(map.next_value()?),
                "effects" => raw.effects = Some(map.next_value_seed(Seed(EffectsVisitor))?),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(build::envelope(raw))
    }
}

/// A visitor used as a seed: reads one value with `deserialize_any`.
struct Seed<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Seed<V> {
    type Value = V::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        d.deserialize_any(self.0)
    }
}

/// Walks one JSON value as `serde_json::Value`'s visitor would, keeping nothing.
pub(super) struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(Skip; bool, number, str, null, seq, map);

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

/// An object key, borrowed when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor).map(Key)
    }
}

/// A string, borrowed when it can be.
struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

impl<'de> serde::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(Scalar::Compound; seq, map);

    fn visit_bool<E: Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Number(v.into()))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::Number(v.into()))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Self::Value, E> {
        // As a `Value` reads it: a float JSON cannot hold is null.
        Ok(Number::from_f64(v).map_or(Scalar::Null, Scalar::Number))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }

    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }

    fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct EffectsVisitor;

impl<'de> Visitor<'de> for EffectsVisitor {
    type Value = RawEffects<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(RawEffects::default(); bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut e = RawEffects::default();
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "assistant_output" => e.assistant_output = Some(map.next_value()?),
                "tool_activity" => e.tool_activity = Some(map.next_value()?),
                "partial_result" => e.partial_result = Some(map.next_value()?),
                "prompt_delivery" => e.prompt_delivery = Some(map.next_value()?),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(e)
    }
}

/// `items`: the first `MAX_ITEMS` are read and assembled, the rest walked.
struct ItemsVisitor;

impl<'de> Visitor<'de> for ItemsVisitor {
    type Value = Option<build::Items<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(None; bool, number, str, null, map);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = build::Items::default();
        let mut count = 0usize;
        loop {
            if count < super::MAX_ITEMS {
                if seq
                    .next_element_seed(Seed(ItemVisitor { items: &mut items }))?
                    .is_none()
                {
                    break;
                }
            } else if seq.next_element::<Skip>()?.is_none() {
                break;
            } else {
                items.truncated = true;
            }
            count += 1;
        }
        Ok(Some(items))
    }
}

/// One item: its fields read, then assembled by kind into `items` (a non-object is ignored).
struct ItemVisitor<'a, 'de> {
    items: &'a mut build::Items<'de>,
}

impl<'de> Visitor<'de> for ItemVisitor<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!((); bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut it = RawItem::default();
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "kind" => it.kind = Some(map.next_value()?),
                "status" => it.status = Some(map.next_value()?),
                "headers" => it.headers = Some(map.next_value_seed(Seed(HeadersVisitor))?),
                "body" => it.body = Some(map.next_value()?),
                "code" => it.code = Some(map.next_value()?),
                "message" => it.message = Some(map.next_value()?),
                "data" => it.data = Some(map.next_value()?),
                "updates" => it.updates = Some(map.next_value_seed(Seed(UpdatesVisitor))?),
                "prompt_result" => it.prompt_result = Some(map.next_value_seed(Seed(ResultVisitor))?),
                "prompt_error" => it.prompt_error = Some(map.next_value_seed(Seed(ErrorVisitor))?),
                "lines" => it.lines = Some(map.next_value_seed(Seed(LinesVisitor))?),
                "text" => it.text = Some(map.next_value()?),
                "signal" => it.signal = Some(map.next_value()?),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        self.items.push(&mut it);
        Ok(())
    }
}

struct HeadersVisitor;

impl<'de> Visitor<'de> for HeadersVisitor {
    type Value = Option<Headers<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(None; bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Key(key)) = map.next_key()? {
            out.push((key, map.next_value_seed(Seed(HeaderValueVisitor))?));
        }
        Ok(Some(out))
    }
}

struct HeaderValueVisitor;

impl<'de> Visitor<'de> for HeaderValueVisitor {
    type Value = HeaderValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(HeaderValue::Other; bool, null, map);

    fn visit_i64<E: Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(HeaderValue::Number(v.into()))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(HeaderValue::Number(v.into()))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Number::from_f64(v).map_or(HeaderValue::Other, HeaderValue::Number))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(HeaderValue::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(HeaderValue::Str(Cow::Borrowed(v)))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(HeaderValue::Str(Cow::Owned(v)))
    }

    /// Some clients give a repeated header as a list: its first element counts.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let first = match seq.next_element::<Scalar<'de>>()? {
            Some(Scalar::Str(s)) => Some(s),
            _ => None,
        };
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(HeaderValue::First(first))
    }
}

struct ResultVisitor;

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = RawResult<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(RawResult { null: false, stop_reason: None, stop_reason_snake: None }; bool, number, str, seq);

    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(RawResult {
            null: true,
            stop_reason: None,
            stop_reason_snake: None,
        })
    }

    fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
        self.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut r = RawResult {
            null: false,
            stop_reason: None,
            stop_reason_snake: None,
        };
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "stopReason" => r.stop_reason = Some(map.next_value()?),
                "stop_reason" => r.stop_reason_snake = Some(map.next_value()?),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(r)
    }
}

struct ErrorVisitor;

impl<'de> Visitor<'de> for ErrorVisitor {
    type Value = Option<RawError<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(None; bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut e = RawError::default();
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "code" => e.code = Some(map.next_value()?),
                "message" => e.message = Some(map.next_value()?),
                "data" => e.data = Some(map.next_value()?),
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Some(e))
    }
}

struct LinesVisitor;

impl<'de> Visitor<'de> for LinesVisitor {
    type Value = Lines<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(Lines::Other; bool, number, null, map);

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Lines::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Lines::Str(Cow::Borrowed(v)))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Lines::Str(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(8).min(64));
        while let Some(s) = seq.next_element::<Scalar<'de>>()? {
            if let Scalar::Str(s) = s {
                out.push(s);
            }
        }
        Ok(Lines::List(out))
    }
}

/// `updates`: each update reduced as it is read (see `build::Updates`).
struct UpdatesVisitor;

impl<'de> Visitor<'de> for UpdatesVisitor {
    type Value = Option<Updates<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(None; bool, number, str, null, map);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Updates::default();
        while let Some(u) = seq.next_element_seed(Seed(UpdateVisitor { unwrap: true }))? {
            // A non-object is no update; an object whose `update` is an object is the whole
            // `session/update` params: the inner object is the update.
            let u = u.map(|u| match u.inner {
                Some(Some(inner)) => *inner,
                _ => u,
            });
            out.push(u);
        }
        Ok(Some(out))
    }
}

/// One update's fields. `inner` is the last `update` key's value (`Some(None)` when that was
/// not an object), read only at the outer level.
#[derive(Default)]
pub(super) struct RawUpdate<'de> {
    pub(super) kind: Option<Scalar<'de>>,
    pub(super) content: Option<Cow<'de, str>>,
    pub(super) status: Option<Scalar<'de>>,
    inner: Option<Option<Box<RawUpdate<'de>>>>,
}

struct UpdateVisitor {
    unwrap: bool,
}

impl<'de> Visitor<'de> for UpdateVisitor {
    type Value = Option<RawUpdate<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(None; bool, number, str, null, seq);

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut u = RawUpdate::default();
        while let Some(Key(key)) = map.next_key()? {
            match &*key {
                "sessionUpdate" => u.kind = Some(map.next_value()?),
                "content" => u.content = Some(map.next_value_seed(Seed(ContentVisitor))?),
                "status" => u.status = Some(map.next_value()?),
                "update" if self.unwrap => {
                    u.inner = Some(
                        map.next_value_seed(Seed(UpdateVisitor { unwrap: false }))?
                            .map(Box::new),
                    );
                }
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(Some(u))
    }
}

/// The text of an ACP content block: a string, an object's `text` (a non-string is none), or
/// the texts of a list of blocks joined.
struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    walk_others!(Cow::Borrowed(""); bool, number, null);

    fn visit_str<E: Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut text = Cow::Borrowed("");
        while let Some(Key(key)) = map.next_key()? {
            if key == "text" {
                text = match map.next_value::<Scalar<'de>>()? {
                    Scalar::Str(s) => s,
                    _ => Cow::Borrowed(""),
                };
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(text)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out: Cow<'de, str> = Cow::Borrowed("");
        while let Some(part) = seq.next_element_seed(Seed(ContentVisitor))? {
            if out.is_empty() {
                out = part;
            } else if !part.is_empty() {
                out.to_mut().push_str(&part);
            }
        }
        Ok(out)
    }
}
