//! JSON inside text: the provider's error object as agents print it.
//!
//! Agents rarely hand over the provider's body as is. They print it inside their own banner
//! (`[API Error: [{ "error": { "code": 429, ... } }]]`, `Model call failed: {"message": ...}`,
//! `unexpected status 404 Not Found: {"error": ...}`), pretty-printed over several lines that
//! the terminal then wraps (a newline lands inside a JSON string, which JSON forbids), or
//! escaped inside another JSON string (Gemini CLI's `{"error":{"message":"{\n \"error\": ...`).
//! This module finds those objects so the catalogue's JSON conditions (the `structured` tier)
//! read them, instead of leaving them to broad text patterns.
//!
//! - [`embedded_json`]: the first JSON object or array in a text. It tries the text whole,
//!   then each `{` or `[` in turn (at most [`MAX_STARTS`]), parsing one value from there and
//!   ignoring what follows it. Control characters (the terminal's line breaks inside strings)
//!   are read as spaces first; outside strings that changes nothing, inside it repairs a wrap.
//! - [`nested_roots`]: JSON found inside the string values of a root (double encoding), to a
//!   bounded depth and count.
//!
//! Work is bounded: texts are already cut to `MAX_TEXT_BYTES`, at most [`MAX_STARTS`] parses
//! run per text, and nesting is followed [`MAX_NESTING`] levels deep for at most
//! [`MAX_NESTED`] strings.

use serde_json::Value;
use std::borrow::Cow;

/// Most start positions tried in one text.
pub(crate) const MAX_STARTS: usize = 8;
/// How many levels of JSON-in-a-string are followed.
pub(crate) const MAX_NESTING: usize = 2;
/// Most string values examined for nested JSON per root.
pub(crate) const MAX_NESTED: usize = 16;

/// The first JSON object or array in `text` (see the module documentation).
pub(crate) fn embedded_json(text: &str) -> Option<Value> {
    embedded_json_at(text).map(|(_, v)| v)
}

/// [`embedded_json`] with the byte range the value spans in `text`.
pub(crate) fn embedded_json_at(text: &str) -> Option<((usize, usize), Value)> {
    let lead = text.len() - text.trim_start().len();
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    let bytes = t.as_bytes();
    // Most texts hold no JSON at all: one vectorized search says so.
    let first = memchr::memchr2(b'{', b'[', bytes)?;
    // The terminal's line breaks inside strings are spaces to the parser; the copy keeps
    // every byte offset.
    let t: Cow<'_, str> = if bytes.iter().any(u8::is_ascii_control) {
        // Byte for byte (a control character is one byte, so the text stays UTF-8).
        let spaced: Vec<u8> = bytes
            .iter()
            .map(|&b| if b.is_ascii_control() { b' ' } else { b })
            .collect();
        Cow::Owned(String::from_utf8(spaced).ok()?)
    } else {
        Cow::Borrowed(t)
    };
    let mut at = first;
    for _ in 0..MAX_STARTS {
        if let Some((len, v)) = one_value(&t[at..]) {
            return Some(((lead + at, lead + at + len), v));
        }
        let next = at + 1;
        at = next + memchr::memchr2(b'{', b'[', t.as_bytes().get(next..)?)?;
    }
    None
}

/// One JSON object or array at the start of `s`, and its length; what follows is ignored.
fn one_value(s: &str) -> Option<(usize, Value)> {
    let mut values = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    let v = values.next()?.ok()?;
    let len = values.byte_offset();
    match &v {
        Value::Object(_) => Some((len, v)),
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => Some((len, v)),
        _ => None,
    }
}

/// JSON found inside the string values of `root` (double or triple encoding), in document
/// order, not including `root` itself.
pub(crate) fn nested_roots(root: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut budget = MAX_NESTED;
    collect_nested(root, 0, &mut budget, &mut out, 0);
    out
}

fn collect_nested(v: &Value, level: usize, budget: &mut usize, out: &mut Vec<Value>, depth: usize) {
    if level >= MAX_NESTING || *budget == 0 || depth > 16 {
        return;
    }
    match v {
        Value::String(s) => {
            // Only a string that holds an object or array can nest one.
            if memchr::memchr2(b'{', b'[', s.as_bytes()).is_none() {
                return;
            }
            *budget -= 1;
            if let Some(inner) = embedded_json(s) {
                collect_nested(&inner, level + 1, budget, out, 0);
                out.push(inner);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| collect_nested(x, level, budget, out, depth + 1)),
        Value::Object(o) => o
            .values()
            .for_each(|x| collect_nested(x, level, budget, out, depth + 1)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_code(v: &Value) -> Option<i64> {
        let e = match v {
            Value::Array(a) => a.first()?.get("error")?,
            other => other.get("error")?,
        };
        e.get("code")?.as_i64()
    }

    #[test]
    fn an_object_after_an_agent_banner_is_found() {
        let v =
            embedded_json(r#"Model call failed: {"message":"rate limit exceeded","code":"rate_limited"}"#)
                .expect("object");
        assert_eq!(v["code"], "rate_limited");
    }

    #[test]
    fn a_bracketed_banner_before_the_array_is_skipped() {
        let text = "✕ [API Error: [{\n    \"error\": {\n      \"code\": 429,\n      \"message\": \"Resource exhausted. Please refer to\n  https://cloud.google.com/x for more details.\",\n      \"status\": \"RESOURCE_EXHAUSTED\"\n    }\n  }\n  ]]";
        let v = embedded_json(text).expect("array");
        assert_eq!(error_code(&v), Some(429));
    }

    #[test]
    fn text_after_the_object_is_ignored() {
        let v = embedded_json(
            r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error"}} (retrying {1/3})"#,
        )
        .expect("object");
        assert_eq!(v["error"]["type"], "overloaded_error");
    }

    #[test]
    fn double_encoded_bodies_are_found_inside_strings() {
        let text = r#"[API Error: {"error":{"message":"{\n  \"error\": {\n    \"code\": 429,\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n","code":429,"status":"Too Many Requests"}}]"#;
        let outer = embedded_json(text).expect("outer");
        let inner = nested_roots(&outer);
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0]["error"]["status"], "RESOURCE_EXHAUSTED");
    }

    #[test]
    fn plain_text_and_scalars_are_not_json_roots() {
        assert_eq!(embedded_json("rate limit exceeded"), None);
        assert_eq!(embedded_json("[1, 2, 3]"), None);
        assert_eq!(embedded_json("see [docs] and {braces"), None);
    }

    #[test]
    fn nesting_is_bounded() {
        // Each level escapes the next: only MAX_NESTING levels are followed.
        let mut s = r#"{"deep":true}"#.to_owned();
        for _ in 0..6 {
            s = serde_json::json!({ "inner": s }).to_string();
        }
        let root: Value = serde_json::from_str(&s).expect("root");
        assert_eq!(nested_roots(&root).len(), MAX_NESTING);
    }
}
