//! A fast reader for the JSON the classifier sees most: a `serde::Deserializer` over text that
//! reads plain JSON (strings, whole numbers, `true`, `false`, `null`, arrays and objects) and
//! gives up on anything else, so `serde_json` reads that instead.
//!
//! `serde_json` stays the definition of what is valid JSON and of every error message: this
//! reader never answers where `serde_json` would not. It gives up ([`Bail`]) at the first thing
//! it does not read itself: a fraction or an exponent, `-0`, a number past 64 bits, a leading
//! zero, an escape it does not know, a lone surrogate, a control character in a string, nesting
//! deeper than [`MAX_DEPTH`], a trailing comma, or any other malformation. Where it answers, it
//! makes the visits `serde_json` makes for the same text (`visit_u64` for a non-negative
//! number, `visit_i64` for a negative one, `visit_borrowed_str` for a string without escapes,
//! an owned string for one with them), so a visitor gives the same value through either; the
//! differential property tests in `tests/properties.rs` hold them together. A visitor must not
//! act on the world: when this reader gives up midway, the visits it made are thrown away and
//! `serde_json` makes them again.
//!
//! Why: the envelopes and error bodies are small, so `serde_json`'s cost is mostly per token
//! (its generic reader, scratch buffers, number parsing that handles every case); this reader is
//! a few branches per token and finds the end of a string eight bytes at a time.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// Deeper than this, the fast reader gives up (`serde_json`'s limit is 128).
pub(crate) const MAX_DEPTH: u32 = 100;

/// The fast reader gave up: read the text with `serde_json` instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bail;

impl fmt::Display for Bail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read by the fast JSON reader")
    }
}

impl std::error::Error for Bail {}

impl de::Error for Bail {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Bail
    }
}

/// Reads `text` as one JSON document (whitespace around it allowed) with `seed`.
pub(crate) fn document<'a, S: DeserializeSeed<'a>>(text: &'a str, seed: S) -> Result<S::Value, Bail> {
    let mut r = Reader::new(text);
    let v = seed.deserialize(&mut r)?;
    r.skip_ws();
    if r.pos == r.b.len() {
        Ok(v)
    } else {
        Err(Bail)
    }
}

/// Reads the JSON value at the start of `text` with `seed`, ignoring whatever follows it, and
/// says where it ends.
pub(crate) fn prefix<'a, S: DeserializeSeed<'a>>(text: &'a str, seed: S) -> Result<(S::Value, usize), Bail> {
    let mut r = Reader::new(text);
    let v = seed.deserialize(&mut r)?;
    Ok((v, r.pos))
}

struct Reader<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: u32,
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` that are zero, as their high bits; exact for the lowest such byte (borrows
/// only run upward).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Reader<'a> {
        Reader {
            text,
            b: text.as_bytes(),
            pos: 0,
            depth: 0,
        }
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.pos += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// The first byte at or after `i` that ends a string's plain run: `"`, `\` or a control
    /// character (the end of the text when there is none).
    #[inline]
    fn special_from(&self, mut i: usize) -> usize {
        let b = self.b;
        while let Some(chunk) = b.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            let x = u64::from_le_bytes(w);
            let hits = zero_bytes(x ^ (LO * u64::from(b'"')))
                | zero_bytes(x ^ (LO * u64::from(b'\\')))
                // Bytes below 0x20 (a byte of 0x80 or more never counts: `!x` clears it).
                | (x.wrapping_sub(LO * 0x20) & !x & HI);
            if hits != 0 {
                return i + (hits.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
        while let Some(&c) = b.get(i) {
            if c == b'"' || c == b'\\' || c < 0x20 {
                return i;
            }
            i += 1;
        }
        i
    }

    /// A string whose opening quote is at `pos`: borrowed when it holds no escape.
    fn string(&mut self) -> Result<Text<'a>, Bail> {
        let start = self.pos + 1;
        let end = self.special_from(start);
        match self.b.get(end) {
            Some(b'"') => {
                self.pos = end + 1;
                // Both ends are ASCII quotes of valid UTF-8 text: character boundaries.
                self.text.get(start..end).map(Text::Borrowed).ok_or(Bail)
            }
            Some(b'\\') => self.escaped(start, end).map(Text::Owned),
            _ => Err(Bail),
        }
    }

    /// The rest of a string from its first escape at `at`, decoded.
    ///
    /// Escapes are dense in the JSON bodies agents nest in strings (`{\"type\":\"error\"...`),
    /// so the runs between them are short: copied byte by byte when they are, which costs less
    /// than a call to copy them.
    fn escaped(&mut self, start: usize, mut at: usize) -> Result<String, Bail> {
        let b = self.b;
        let mut out: Vec<u8> = Vec::with_capacity(2 * (at - start) + 32);
        out.extend_from_slice(b.get(start..at).ok_or(Bail)?);
        loop {
            match *b.get(at).ok_or(Bail)? {
                b'"' => {
                    self.pos = at + 1;
                    // Escapes decode to whole characters, and the runs between them are whole
                    // characters of valid text: this cannot fail.
                    return String::from_utf8(out).map_err(|_| Bail);
                }
                b'\\' => {
                    let c = match *b.get(at + 1).ok_or(Bail)? {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let (c, len) = self.unicode_escape(at)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            at += len;
                            continue;
                        }
                        _ => return Err(Bail),
                    };
                    out.push(c);
                    at += 2;
                }
                c if c < 0x20 => return Err(Bail),
                _ => {
                    let next = self.special_from(at);
                    let run = b.get(at..next).ok_or(Bail)?;
                    if run.len() <= 16 {
                        for &c in run {
                            out.push(c);
                        }
                    } else {
                        out.extend_from_slice(run);
                    }
                    at = next;
                }
            }
        }
    }

    /// The character of the `\uXXXX` escape at `at` (a surrogate pair takes two), and the
    /// escape's length in bytes. A lone surrogate gives up.
    fn unicode_escape(&self, at: usize) -> Result<(char, usize), Bail> {
        let hex4 = |i: usize| -> Result<u32, Bail> {
            let digits = self.b.get(i..i + 4).ok_or(Bail)?;
            digits.iter().try_fold(0u32, |n, &d| {
                let v = char::from(d).to_digit(16).ok_or(Bail)?;
                Ok(n * 16 + v)
            })
        };
        let first = hex4(at + 2)?;
        match first {
            0xD800..=0xDBFF => {
                if self.b.get(at + 6..at + 8) != Some(b"\\u") {
                    return Err(Bail);
                }
                let second = hex4(at + 8)?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(Bail);
                }
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                Ok((char::from_u32(c).ok_or(Bail)?, 12))
            }
            0xDC00..=0xDFFF => Err(Bail),
            c => Ok((char::from_u32(c).ok_or(Bail)?, 6)),
        }
    }

    /// A whole number at `pos` with no fraction or exponent: (negative, magnitude).
    fn integer(&mut self) -> Result<(bool, u64), Bail> {
        let negative = self.peek() == Some(b'-');
        let digits_at = self.pos + usize::from(negative);
        let mut i = digits_at;
        let mut n: u64 = 0;
        while let Some(&d) = self.b.get(i) {
            if !d.is_ascii_digit() {
                break;
            }
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d - b'0')))
                .ok_or(Bail)?;
            i += 1;
        }
        let len = i - digits_at;
        // No digits, a leading zero, `-0`, or a fraction or exponent: `serde_json` reads it.
        if len == 0
            || (len > 1 && self.b[digits_at] == b'0')
            || (negative && n == 0)
            || matches!(self.b.get(i), Some(b'.' | b'e' | b'E'))
        {
            return Err(Bail);
        }
        self.pos = i;
        Ok((negative, n))
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Bail> {
        if self.b.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    fn enter(&mut self) -> Result<(), Bail> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.pos += 1;
        Ok(())
    }
}

/// A string as read: borrowed from the text, or decoded from escapes.
enum Text<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl<'a> Text<'a> {
    fn visit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self {
            Text::Borrowed(s) => visitor.visit_borrowed_str(s),
            Text::Owned(s) => visitor.visit_string(s),
        }
    }
}

impl<'de> Deserializer<'de> for &mut Reader<'de> {
    type Error = Bail;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.skip_ws();
        match self.peek().ok_or(Bail)? {
            b'"' => self.string()?.visit(visitor),
            b'{' => {
                self.enter()?;
                let v = visitor.visit_map(Entries {
                    r: &mut *self,
                    first: true,
                })?;
                self.skip_ws();
                if self.peek() != Some(b'}') {
                    return Err(Bail);
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(v)
            }
            b'[' => {
                self.enter()?;
                let v = visitor.visit_seq(Elements {
                    r: &mut *self,
                    first: true,
                })?;
                self.skip_ws();
                if self.peek() != Some(b']') {
                    return Err(Bail);
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(v)
            }
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b'-' | b'0'..=b'9' => match self.integer()? {
                (false, n) => visitor.visit_u64(n),
                (true, n) => {
                    // Down to `i64::MIN`; past it `serde_json` reads a float.
                    let v = 0i64.checked_sub_unsigned(n).ok_or(Bail)?;
                    visitor.visit_i64(v)
                }
            },
            _ => Err(Bail),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// An object's entries; the reader is inside its braces.
struct Entries<'r, 'a> {
    r: &'r mut Reader<'a>,
    first: bool,
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Bail;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Bail> {
        self.r.skip_ws();
        match self.r.peek() {
            Some(b'}') if self.first => return Ok(None),
            Some(b'}') => return Ok(None),
            Some(b',') if !self.first => {
                self.r.pos += 1;
                self.r.skip_ws();
            }
            Some(b'"') if self.first => {}
            _ => return Err(Bail),
        }
        self.first = false;
        if self.r.peek() != Some(b'"') {
            return Err(Bail);
        }
        seed.deserialize(KeyReader { r: &mut *self.r }).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        self.r.skip_ws();
        if self.r.peek() != Some(b':') {
            return Err(Bail);
        }
        self.r.pos += 1;
        seed.deserialize(&mut *self.r)
    }
}

/// An array's elements; the reader is inside its brackets.
struct Elements<'r, 'a> {
    r: &'r mut Reader<'a>,
    first: bool,
}

impl<'de> SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Bail;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Bail> {
        self.r.skip_ws();
        match self.r.peek() {
            Some(b']') => return Ok(None),
            Some(b',') if !self.first => self.r.pos += 1,
            Some(_) if self.first => {}
            _ => return Err(Bail),
        }
        self.first = false;
        seed.deserialize(&mut *self.r).map(Some)
    }
}

/// An object key: a string, whatever the seed asks for.
struct KeyReader<'r, 'a> {
    r: &'r mut Reader<'a>,
}

impl<'de> Deserializer<'de> for KeyReader<'_, 'de> {
    type Error = Bail;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.r.string()?.visit(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;
    use serde_json::Value;

    /// What the fast reader reads, it reads as `serde_json` does; what it does not, it leaves.
    fn same(text: &str) -> bool {
        let fast = document(text, std::marker::PhantomData::<Json<'_>>).map(|j| j.to_value());
        let slow = serde_json::from_str::<Value>(text);
        match (fast, slow) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                true
            }
            (Ok(a), Err(e)) => panic!("fast read {a} where serde_json fails ({e}): {text}"),
            (Err(Bail), _) => false,
        }
    }

    #[test]
    fn plain_json_is_read_as_serde_json_reads_it() {
        for text in [
            r#"{"a":[1,-2,true,false,null,"x"],"b":{},"c":[],"a":"last"}"#,
            " [ 1 , { \"k\" : \"v\" } ] ",
            r#""esc\"aped\\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00""#,
            "18446744073709551615",
            "-9223372036854775808",
            r#"{"é":"ü"}"#,
        ] {
            assert!(same(text), "{text}");
        }
    }

    #[test]
    fn anything_else_is_left_to_serde_json() {
        for text in [
            "1.5",
            "1e3",
            "-0",
            "01",
            "18446744073709551616",
            "-9223372036854775809",
            r#""\ud800""#,
            r#""\udc00x""#,
            r#""\x""#,
            "\"a\u{1}b\"",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{1:2}",
            "[1 2]",
            "tru",
            "nul",
            "\"unclosed",
            "[",
            "",
            "{} x",
        ] {
            assert!(!same(text), "{text}");
        }
        let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
        assert!(!same(&deep));
        let fine = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(same(&fine));
    }

    /// JSON-like text: valid documents of every shape, and the same with a byte changed.
    fn text() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| f.to_string()),
            Just("-0".to_owned()),
            Just("1e400".to_owned()),
            any::<String>().prop_map(|s| Value::from(s).to_string()),
            "[a-z\\\"/ ]{0,12}".prop_map(|s| format!("\"{s}\"")),
            "(\\\\u[0-9a-fA-F]{4}|\\\\[nrtbf/\"]|[a-z]){0,6}".prop_map(|s| format!("\"{s}\"")),
        ];
        let doc = leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(" , "))),
                proptest::collection::vec(("[a-z\\\"]{0,4}", inner), 0..5).prop_map(|v| {
                    let e: Vec<String> = v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{ {} }}", e.join(","))
                }),
            ]
        });
        (doc, any::<Option<(u16, u8)>>(), " {0,2}").prop_map(|(d, change, pad)| {
            let mut b = format!("{pad}{d}{pad}").into_bytes();
            if let Some((at, byte)) = change {
                if !b.is_empty() {
                    let i = usize::from(at) % b.len();
                    b[i] = byte % 128;
                }
            }
            String::from_utf8_lossy(&b).into_owned()
        })
    }

    #[test]
    fn the_fast_reader_never_disagrees_with_serde_json() {
        use proptest::test_runner::{Config, TestRunner};
        let read = std::cell::Cell::new(0usize);
        let mut runner = TestRunner::new(Config {
            cases: 4096,
            ..Config::default()
        });
        runner
            .run(&text(), |t| {
                read.set(read.get() + usize::from(same(&t)));
                Ok(())
            })
            .expect("no disagreement");
        // Not vacuous: a good share of the generated documents are plain JSON the fast reader reads.
        assert!(read.get() > 500, "the fast reader read {} of 4096", read.get());
    }

    #[test]
    fn a_prefix_ends_where_its_value_does() {
        let (v, end) = prefix(r#"{"a":1} trailing {"#, std::marker::PhantomData::<Json<'_>>).expect("reads");
        assert_eq!(v.to_value(), serde_json::json!({"a":1}));
        assert_eq!(end, 7);
    }
}
