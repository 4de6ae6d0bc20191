//! A Python literal read as JSON: the provider's error as Python SDKs print it.
//!
//! The openai and anthropic Python SDKs, and litellm on top of them, put the provider's body
//! in the exception's message with `repr`: `Error code: 429 - {'error': {'message': '...',
//! 'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}}`. That is not
//! JSON (single quotes, `None`, `True`, tuples), so the catalogue's JSON conditions could not
//! read it and only broad text patterns were left. [`to_json`] rewrites one such literal,
//! starting at an opening `{` or `[`, into JSON text, which `crate::embedded` then parses like
//! any other embedded object.
//!
//! Only what `repr` of dicts, lists, tuples, strings, numbers, `None`, `True` and `False`
//! produces is accepted; anything else (an object's `<Foo at 0x...>`, a call, a bare name)
//! rejects the literal. Work is linear in the literal and bounded: at most [`MAX_DEPTH`]
//! brackets deep, and the input is already bounded by the envelope.

/// Deepest nesting accepted.
const MAX_DEPTH: usize = 64;

/// The Python literal at the start of `s` (a dict or a list) as JSON text, and how many bytes
/// of `s` it spans; `None` unless `s` starts with one that holds a quoted string.
pub(crate) fn to_json(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    if !matches!(b.first(), Some(b'{' | b'[')) {
        return None;
    }
    let mut out = String::with_capacity(s.len().min(4096));
    let mut stack: Vec<u8> = Vec::new();
    let mut quoted = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'{' | b'[' | b'(' => {
                if stack.len() >= MAX_DEPTH {
                    return None;
                }
                stack.push(c);
                out.push(if c == b'{' { '{' } else { '[' });
                i += 1;
            }
            b'}' | b']' | b')' => {
                let open = stack.pop()?;
                if !matches!((open, c), (b'{', b'}') | (b'[', b']') | (b'(', b')')) {
                    return None;
                }
                // A one-element tuple's trailing comma: `(1,)`.
                if out.ends_with(',') {
                    out.pop();
                }
                out.push(if c == b'}' { '}' } else { ']' });
                i += 1;
                if stack.is_empty() {
                    return quoted.then_some((out, i));
                }
            }
            b'\'' | b'"' => {
                i = string(s, i, &mut out)?;
                quoted = true;
            }
            b':' | b',' => {
                out.push(char::from(c));
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {
                out.push(' ');
                i += 1;
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => {
                let end = i + b[i..]
                    .iter()
                    .position(|x| !matches!(x, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(b.len() - i);
                out.push_str(s.get(i..end)?);
                i = end;
            }
            _ => {
                let end = i + b[i..]
                    .iter()
                    .position(|x| !x.is_ascii_alphanumeric() && *x != b'_')
                    .unwrap_or(b.len() - i);
                out.push_str(match &s[i..end] {
                    "None" => "null",
                    "True" => "true",
                    "False" => "false",
                    _ => return None,
                });
                i = end;
            }
        }
    }
    None
}

/// Rewrites the Python string literal at `s[at]` (its quote) as a JSON string onto `out`;
/// returns the offset after its closing quote.
fn string(s: &str, at: usize, out: &mut String) -> Option<usize> {
    let b = s.as_bytes();
    let quote = b[at];
    out.push('"');
    let mut i = at + 1;
    let mut plain = i;
    while i < b.len() {
        let c = b[i];
        if c == quote {
            out.push_str(&s[plain..i]);
            out.push('"');
            return Some(i + 1);
        }
        let replacement: Option<(&str, usize)> = match c {
            b'"' => Some(("\\\"", 1)),
            // The terminal's line breaks inside a string are spaces.
            b'\n' | b'\r' | b'\t' => Some((" ", 1)),
            b'\\' => match b.get(i + 1)? {
                b'\'' => Some(("'", 2)),
                b'"' => Some(("\\\"", 2)),
                b'\\' => Some(("\\\\", 2)),
                b'n' => Some(("\\n", 2)),
                b't' => Some(("\\t", 2)),
                b'r' => Some(("\\r", 2)),
                b'x' => {
                    // `\xNN` is `\u00NN`.
                    let hex = s.get(i + 2..i + 4)?;
                    u8::from_str_radix(hex, 16).ok()?;
                    out.push_str(&s[plain..i]);
                    out.push_str("\\u00");
                    out.push_str(hex);
                    i += 4;
                    plain = i;
                    continue;
                }
                b'u' => Some(("\\u", 2)),
                // Any other escape is kept: a backslash, then its character as it is.
                _ => Some(("\\\\", 1)),
            },
            c if c < 0x20 => Some((" ", 1)),
            _ => None,
        };
        if let Some((r, len)) = replacement {
            out.push_str(&s[plain..i]);
            out.push_str(r);
            i += len;
            plain = i;
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn read(s: &str) -> Option<(Value, usize)> {
        let (j, len) = to_json(s)?;
        Some((serde_json::from_str(&j).expect("valid JSON"), len))
    }

    #[test]
    fn an_sdk_exception_body_reads_as_json() {
        let text = "{'error': {'message': 'You exceeded your current quota, please check your plan.', 'type': 'insufficient_quota', 'param': None, 'code': 'insufficient_quota'}} trailing";
        let (v, len) = read(text).expect("literal");
        assert_eq!(v["error"]["type"], "insufficient_quota");
        assert_eq!(v["error"]["param"], Value::Null);
        assert_eq!(&text[len..], " trailing");
    }

    #[test]
    fn quotes_escapes_and_tuples() {
        let (v, _) =
            read(r#"{"msg": "it's", 'b': 'say "hi" \'x\' \\ \x41', 'n': -1.5e3, 't': (1,), 'ok': True}"#)
                .expect("literal");
        assert_eq!(
            v,
            json!({"msg": "it's", "b": "say \"hi\" 'x' \\ A", "n": -1500.0, "t": [1], "ok": true})
        );
    }

    #[test]
    fn a_wrapped_string_is_repaired() {
        let (v, _) = read("{'error': {'message': 'Rate limit\n  reached', 'type': 'rate_limit_error'}}")
            .expect("literal");
        assert_eq!(v["error"]["message"], "Rate limit   reached");
    }

    #[test]
    fn what_repr_does_not_print_is_refused() {
        assert_eq!(to_json("{'a': <object at 0x1>}"), None);
        assert_eq!(to_json("{'a': foo(1)}"), None);
        assert_eq!(to_json("{'a': 1"), None);
        assert_eq!(to_json("{1: 2}"), None, "no string: not an error body");
        assert_eq!(to_json("{'a': [1}"), None);
        let deep = "[".repeat(100) + "'x'" + &"]".repeat(100);
        assert_eq!(to_json(&deep), None);
    }
}
