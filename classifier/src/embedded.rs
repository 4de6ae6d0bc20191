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
//! - [`embedded_json_at`]: the first JSON object or array in a text. It tries each `{` or `[`
//!   in turn (at most [`MAX_STARTS`]), parsing one value from there and ignoring what follows
//!   it. Control characters (the terminal's line breaks inside strings) are read as spaces
//!   first; outside strings that changes nothing, inside it repairs a wrap. The value is a
//!   [`Json`] tree read by `serde_json` whose strings borrow the text (or its spaced copy).
//!   Where JSON fails, a Python literal (`{'error': {'type': ...}}`, the SDKs' and litellm's
//!   `repr` of the body) is read as JSON instead (`crate::pyrepr`).
//! - [`nested_roots`]: JSON found inside the string values of a root (double encoding), to a
//!   bounded depth and count; most roots have no string with a bracket, which one walk says.
//!
//! Work is bounded: texts are already cut to `MAX_TEXT_BYTES`, at most [`MAX_STARTS`] parses
//! run per text, and nesting is followed [`MAX_NESTING`] levels deep for at most
//! [`MAX_NESTED`] strings.

use crate::json::{
    pull::{Source, Text},
    Json,
};
use std::cell::OnceCell;

/// Most start positions tried in one text.
pub(crate) const MAX_STARTS: usize = 8;
/// How many levels of JSON-in-a-string are followed.
pub(crate) const MAX_NESTING: usize = 2;
/// Most string values examined for nested JSON per root.
pub(crate) const MAX_NESTED: usize = 16;

/// The first JSON object or array in `text` (see the module documentation), with the byte
/// range it spans in `text`. Its strings borrow `text`, or `spaced`, where a copy of `text`
/// with its control characters read as spaces is kept when there are any.
pub(crate) fn embedded_json_at<'t>(
    text: &'t str,
    spaced: &'t OnceCell<String>,
) -> Option<((usize, usize), Json<'t>)> {
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
    let t: &'t str = if has_control(bytes) {
        if spaced.get().is_none() {
            // Byte for byte (a control character is one byte, so the text stays UTF-8).
            let copy: Vec<u8> = bytes
                .iter()
                .map(|&b| if b.is_ascii_control() { b' ' } else { b })
                .collect();
            let _ = spaced.set(String::from_utf8(copy).ok()?);
        }
        spaced.get()?
    } else {
        t
    };
    let mut at = first;
    for _ in 0..MAX_STARTS {
        if let Some((len, v)) = one_value(&t[at..]).or_else(|| python_value(&t[at..])) {
            return Some(((lead + at, lead + at + len), v));
        }
        let next = at + 1;
        at = next + memchr::memchr2(b'{', b'[', t.as_bytes().get(next..)?)?;
    }
    None
}

/// Whether `b` holds an ASCII control character (tested 32 bytes at a time, without a branch
/// per byte).
fn has_control(b: &[u8]) -> bool {
    b.chunks(32)
        .any(|c| c.iter().fold(false, |any, x| any | x.is_ascii_control()))
}

/// One JSON object or array at the start of `s`, and its length; what follows is ignored.
fn one_value(s: &str) -> Option<(usize, Json<'_>)> {
    // Plain JSON read directly (`crate::json::pull`); anything else as `serde_json` reads it (an object or
    // an array ends at its closing bracket either way: neither checks what follows it).
    let mut text = Text::new(s);
    let (v, len) = match text.value().and_then(|t| Json::pull(&mut text, t)) {
        Ok(v) => (v, text.offset()),
        Err(_) => {
            let mut values = serde_json::Deserializer::from_str(s).into_iter::<Json<'_>>();
            let v = values.next()?.ok()?;
            (v, values.byte_offset())
        }
    };
    match &v {
        Json::Object(_) => Some((len, v)),
        Json::Array(a) if a.iter().any(|x| matches!(x, Json::Object(_) | Json::Array(_))) => Some((len, v)),
        _ => None,
    }
}

/// A Python literal at the start of `s` (a dict or list whose first item is a quoted string:
/// `{'error': ...}`, `[{'type': ...}]`), read as JSON (see `crate::pyrepr`), and its length
/// in `s`. Tried only where JSON failed, and only when the bracket opens a single-quoted
/// string, so ordinary text pays one look at a few bytes.
fn python_value(s: &str) -> Option<(usize, Json<'static>)> {
    let first = s
        .bytes()
        .take(16)
        .find(|b| !matches!(b, b'{' | b'[' | b'(' | b' ' | b'\t' | b'\r' | b'\n'))?;
    if first != b'\'' {
        return None;
    }
    let (json, len) = crate::pyrepr::to_json(s)?;
    let (_, v) = one_value(&json)?;
    Some((len, v.into_owned()))
}

/// JSON found inside the string values of `root` (double or triple encoding), in document
/// order (objects read in key order, as a `serde_json::Value` holds them), not including
/// `root` itself. Found values own their strings: they were read from strings of `root`.
pub(crate) fn nested_roots(root: &Json<'_>) -> Vec<Json<'static>> {
    let mut out = Vec::new();
    // Most roots hold no string that could hold JSON: one walk in any order says so.
    if !has_bracket_string(root, 0) {
        return out;
    }
    let mut budget = MAX_NESTED;
    collect_nested(root, 0, &mut budget, &mut out, 0);
    out
}

/// Whether some string under `v` (within the depth `collect_nested` reads) holds `{` or `[`.
fn has_bracket_string(v: &Json<'_>, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match v {
        Json::String(s) => memchr::memchr2(b'{', b'[', s.as_bytes()).is_some(),
        Json::Array(a) => a.iter().any(|x| has_bracket_string(x, depth + 1)),
        Json::Object(o) => o.iter().any(|(_, x)| has_bracket_string(x, depth + 1)),
        _ => false,
    }
}

fn collect_nested(
    v: &Json<'_>,
    level: usize,
    budget: &mut usize,
    out: &mut Vec<Json<'static>>,
    depth: usize,
) {
    if level >= MAX_NESTING || *budget == 0 || depth > 16 {
        return;
    }
    match v {
        Json::String(s) => {
            // Only a string that holds an object or array can nest one.
            if memchr::memchr2(b'{', b'[', s.as_bytes()).is_none() {
                return;
            }
            *budget -= 1;
            let spaced = OnceCell::new();
            if let Some((_, inner)) = embedded_json_at(s, &spaced) {
                let inner = inner.into_owned();
                collect_nested(&inner, level + 1, budget, out, 0);
                out.push(inner);
            }
        }
        Json::Array(a) => a
            .iter()
            .for_each(|x| collect_nested(x, level, budget, out, depth + 1)),
        Json::Object(_) => v
            .entries()
            .into_iter()
            .flatten()
            .for_each(|(_, x)| collect_nested(x, level, budget, out, depth + 1)),
        _ => {}
    }
}

/// [`embedded_json_at`] as a `serde_json::Value` (for tests).
#[cfg(test)]
pub(crate) fn embedded_json(text: &str) -> Option<serde_json::Value> {
    embedded_json_at(text, &OnceCell::new()).map(|(_, v)| v.to_value())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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

    /// [`nested_roots`] of a `serde_json::Value`, as values.
    fn nested_roots(root: &Value) -> Vec<Value> {
        let text = root.to_string();
        let spaced = OnceCell::new();
        let (_, root) = embedded_json_at(&text, &spaced).expect("a root");
        super::nested_roots(&root).iter().map(Json::to_value).collect()
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
    fn a_python_repr_after_an_sdk_banner_is_read_as_json() {
        let text = "openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached for RPM', 'type': 'rate_limit_exceeded', 'param': None}}";
        let spaced = OnceCell::new();
        let ((start, end), v) = embedded_json_at(text, &spaced).expect("repr");
        assert_eq!(v.to_value()["error"]["type"], "rate_limit_exceeded");
        assert_eq!(&text[start..start + 2], "{'");
        assert_eq!(end, text.len());
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
