//! A borrowed JSON tree: the provider's error object as the catalogue's JSON conditions read it.
//!
//! `serde_json::Value` owns every string and keeps objects in a `BTreeMap`, so reading the JSON
//! found in evidence through it allocates for every key, string and object and frees it all
//! again. [`Json`] is the same document read by the same parser (`serde_json`'s, so what is
//! valid JSON, the nesting limit, numbers and error messages do not change), but strings without
//! escapes borrow the input and an object is one vector of its entries in document order. Where
//! a `Value` would differ from document order, [`Json`] reads as a `Value` does: a repeated key's
//! last value counts ([`Json::get`]), and object entries are visited in key order
//! ([`Json::entries`]).

pub(crate) mod pull;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::{borrow::Cow, fmt};

/// A JSON document whose strings borrow the input where they can (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Entries in document order, repeated keys included (the last one counts).
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl Json<'_> {
    /// The same document owning its strings.
    pub(crate) fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(n),
            Json::String(s) => Json::String(Cow::Owned(s.into_owned())),
            Json::Array(a) => Json::Array(a.into_iter().map(Json::into_owned).collect()),
            Json::Object(o) => Json::Object(
                o.into_iter()
                    .map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned()))
                    .collect(),
            ),
        }
    }

    /// A `serde_json::Value` as a document borrowing its strings (objects in key order).
    pub(crate) fn borrow(v: &Value) -> Json<'_> {
        match v {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(Cow::Borrowed(s)),
            Value::Array(a) => Json::Array(a.iter().map(Json::borrow).collect()),
            Value::Object(o) => Json::Object(
                o.iter()
                    .map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::borrow(v)))
                    .collect(),
            ),
        }
    }

    /// Whether any value of an object (the last of a repeated key) satisfies `f`; false for
    /// non-objects. Order does not matter to the answer, so small objects are not sorted.
    pub(crate) fn any_value(&self, mut f: impl FnMut(&Self) -> bool) -> bool {
        let Json::Object(o) = self else {
            return false;
        };
        if o.len() <= 16 {
            // A value counts unless a later entry repeats its key.
            return o
                .iter()
                .enumerate()
                .any(|(i, (k, v))| !o[i + 1..].iter().any(|(later, _)| later == k) && f(v));
        }
        self.entries().into_iter().flatten().any(|(_, v)| f(v))
    }
}

impl<'a> Json<'a> {
    /// The string, if this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in an object (the last one, if repeated); `None` for non-objects.
    pub(crate) fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Json::Object(o) => o.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// An object's entries in key order, one per key (the last value of a repeated key);
    /// `None` for non-objects.
    pub(crate) fn entries(&self) -> Option<Vec<(&str, &Self)>> {
        let Json::Object(o) = self else {
            return None;
        };
        let mut e: Vec<(&str, &Self)> = o.iter().map(|(k, v)| (k.as_ref(), v)).collect();
        // Stable: among equal keys document order stays, and the last one is kept.
        e.sort_by(|a, b| a.0.cmp(b.0));
        let mut out: Vec<(&str, &Self)> = Vec::with_capacity(e.len());
        for (k, v) in e {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        Some(out)
    }

    /// The node as a `serde_json::Value` (for values kept or serialized whole).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.as_ref().to_owned()),
            Json::Array(a) => Value::Array(a.iter().map(Json::to_value).collect()),
            // Inserted in document order: a repeated key's last value counts, as in parsing.
            Json::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (k.as_ref().to_owned(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

impl<'a> Json<'a> {
    /// The value `tok` starts, read from `source` (see `pull`).
    pub(crate) fn pull<S: pull::Source<'a>>(
        source: &mut S,
        tok: pull::Tok<'a>,
    ) -> Result<Json<'a>, pull::Bail> {
        Ok(match tok {
            pull::Tok::Null => Json::Null,
            pull::Tok::Bool(b) => Json::Bool(b),
            pull::Tok::Number(n) => Json::Number(n),
            pull::Tok::Str(s) => Json::String(s),
            pull::Tok::Object => {
                let mut entries = Vec::new();
                while let Some(k) = source.key()? {
                    let t = source.value()?;
                    entries.push((k, Json::pull(source, t)?));
                }
                Json::Object(entries)
            }
            pull::Tok::Array => {
                let mut elements = Vec::new();
                while source.more()? {
                    let t = source.value()?;
                    elements.push(Json::pull(source, t)?);
                }
                Json::Array(elements)
            }
        })
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

/// Builds [`Json`] nodes exactly as `serde_json::Value`'s visitor builds its nodes.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Json<'de>, E> {
        Ok(Number::from_f64(v).map_or(Json::Null, Json::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(v.to_owned())))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(v)))
    }

    fn visit_string<E>(self, v: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(v)))
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json<'de>, D::Error> {
        Deserialize::deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        // `serde_json` gives no size hint: objects here (envelopes, items, error bodies) mostly
        // hold a handful of keys, so room for eight spares most of the regrowth.
        let mut v = Vec::with_capacity(map.size_hint().unwrap_or(8).min(64));
        while let Some(Key(k)) = map.next_key()? {
            v.push((k, map.next_value()?));
        }
        Ok(Json::Object(v))
    }
}

/// An object key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }

            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }

            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> (Value, Json<'_>) {
        (
            serde_json::from_str(text).expect("value"),
            serde_json::from_str(text).expect("json"),
        )
    }

    #[test]
    fn a_document_converts_to_the_value_serde_json_reads() {
        for text in [
            r#"{"b":1,"a":[true,null,-2,1.5,1e3,18446744073709551615],"s":"x\"y\u00e9","b":{"z":{}}}"#,
            r#"[{"k":"v"},"é",{}]"#,
            "\"plain\"",
            "-0",
        ] {
            let (v, j) = both(text);
            assert_eq!(j.to_value(), v, "{text}");
        }
    }

    #[test]
    fn strings_without_escapes_borrow_the_input() {
        let (_, j) = both(r#"{"key":"plain","esc":"a\nb"}"#);
        let Json::Object(o) = &j else { panic!("object") };
        assert!(matches!(o[0].0, Cow::Borrowed(_)));
        assert!(matches!(o[0].1, Json::String(Cow::Borrowed("plain"))));
        assert!(matches!(o[1].1, Json::String(Cow::Owned(_))));
    }

    #[test]
    fn repeated_keys_read_as_a_value_reads_them() {
        let (v, j) = both(r#"{"b":1,"a":2,"b":3,"A":4}"#);
        assert_eq!(j.get("b").map(Json::to_value), v.get("b").cloned());
        let keys: Vec<&str> = j.entries().expect("object").iter().map(|e| e.0).collect();
        let mut value_keys: Vec<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        value_keys.sort_unstable();
        assert_eq!(keys, value_keys);
        assert_eq!(keys, ["A", "a", "b"]);
        let last: Vec<Value> = j
            .entries()
            .expect("object")
            .iter()
            .map(|e| e.1.to_value())
            .collect();
        assert_eq!(last, [Value::from(4), Value::from(2), Value::from(3)]);
    }

    #[test]
    fn invalid_json_fails_with_serde_jsons_own_error() {
        for text in [
            "{\"a\":}",
            "[1,]",
            "{\"a\":1} x",
            "\"\\ud800\"",
            "01",
            "1e999",
            "\"\u{1}\"",
        ] {
            let v = serde_json::from_str::<Value>(text).expect_err("value rejects");
            let j = serde_json::from_str::<Json<'_>>(text).expect_err("json rejects");
            assert_eq!(j.to_string(), v.to_string(), "{text}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            serde_json::from_str::<Json<'_>>(&deep).is_err(),
            "nesting is limited"
        );
    }
}
