//! JSON read as a stream of tokens, pulled by the reader that wants them.
//!
//! The envelope reader and the tree of the JSON found in evidence read their input through
//! [`Source`]: the start of the next value ([`Tok`]), an object's next key, whether an array
//! has another element. Two sources implement it:
//!
//! - [`Text`]: JSON text, read directly. It reads plain JSON (strings, whole numbers, `true`,
//!   `false`, `null`, arrays and objects) and gives up ([`Bail`]) on anything else: a fraction
//!   or an exponent, `-0`, a number past 64 bits, a leading zero, an escape it does not know, a
//!   lone surrogate, a control character in a string, nesting deeper than [`MAX_DEPTH`], a
//!   trailing comma, or any other malformation. The caller then reads the text with
//!   `serde_json` (into a `Value`, read by the second source), which stays the definition of
//!   what is valid JSON and of every error message: this reader never accepts what `serde_json`
//!   rejects, and reads what it accepts as `serde_json` does (the property tests hold the two
//!   together).
//! - [`Walk`]: an already parsed `serde_json::Value`, walked; objects in their map's order.
//!
//! Why not `serde`'s visitors: one reader written against a small trait is a few kilobytes of
//! code, where `serde`'s generic visitors were many instances of it, one per visitor and
//! deserializer; the classifier reads small documents one after another, so the code that runs
//! per document (and must be fetched again for each) matters as much as the work it does.

use serde_json::{Number, Value};
use std::{borrow::Cow, fmt};

/// Deeper than this, [`Text`] gives up (`serde_json`'s limit is 128).
pub(crate) const MAX_DEPTH: u32 = 100;

/// The text reader gave up: read the text with `serde_json` instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bail;

impl fmt::Display for Bail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read by the fast JSON reader")
    }
}

/// The start of a value: a scalar, read whole, or the opening of an object or an array (whose
/// content is then pulled with [`Source::key`] or [`Source::more`] until they say it ended).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    Object,
    Array,
}

/// Where JSON tokens come from (see the module documentation).
pub(crate) trait Source<'a> {
    /// The start of the next value.
    fn value(&mut self) -> Result<Tok<'a>, Bail>;
    /// Inside an object: its next key (then read its value), or `None` at its end.
    fn key(&mut self) -> Result<Option<Cow<'a, str>>, Bail>;
    /// Inside an array: whether another element follows (then read it).
    fn more(&mut self) -> Result<bool, Bail>;

    /// Reads past the rest of the value `tok` started.
    fn skip(&mut self, tok: Tok<'a>) -> Result<(), Bail> {
        match tok {
            Tok::Object => {
                while self.key()?.is_some() {
                    let t = self.value()?;
                    self.skip(t)?;
                }
            }
            Tok::Array => {
                while self.more()? {
                    let t = self.value()?;
                    self.skip(t)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// JSON text, read directly (see the module documentation).
pub(crate) struct Text<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: u32,
    /// Just inside an object or array: no comma before its first entry.
    first: bool,
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` that are zero, as their high bits; exact for the lowest such byte (borrows
/// only run upward).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

impl<'a> Text<'a> {
    pub(crate) fn new(text: &'a str) -> Text<'a> {
        Text {
            text,
            b: text.as_bytes(),
            pos: 0,
            depth: 0,
            first: false,
        }
    }

    /// Where the reader is: after the last value read, once it has ended.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    /// Whether only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos == self.b.len()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c > b' ' || !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The first byte at or after `i` that ends a string's plain run: `"`, `\` or a control
    /// character (the end of the text when there is none), eight bytes at a time.
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
    fn string(&mut self) -> Result<Cow<'a, str>, Bail> {
        let start = self.pos + 1;
        let end = self.special_from(start);
        match self.b.get(end) {
            Some(b'"') => {
                self.pos = end + 1;
                // Both ends are ASCII bytes of valid UTF-8 text: character boundaries.
                self.text.get(start..end).map(Cow::Borrowed).ok_or(Bail)
            }
            Some(b'\\') => self.escaped(start, end).map(Cow::Owned),
            _ => Err(Bail),
        }
    }

    /// The rest of a string from its first escape at `at`, decoded.
    ///
    /// Escapes are dense in the JSON bodies agents nest in strings (`{\"type\":\"error\"...`),
    /// so the runs between them are short: a short ASCII run is copied character by character,
    /// which costs less than a call to copy it. Runs start and end at ASCII bytes (a quote, a
    /// backslash, a control character), so they are whole characters of the (valid) text.
    fn escaped(&mut self, start: usize, mut at: usize) -> Result<String, Bail> {
        let (b, text) = (self.b, self.text);
        let mut out = String::with_capacity(2 * (at - start) + 32);
        out.push_str(text.get(start..at).ok_or(Bail)?);
        loop {
            match *b.get(at).ok_or(Bail)? {
                b'"' => {
                    self.pos = at + 1;
                    return Ok(out);
                }
                b'\\' => {
                    let c = match *b.get(at + 1).ok_or(Bail)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let (c, len) = self.unicode_escape(at)?;
                            out.push(c);
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
                    if run.len() <= 8 && run.is_ascii() {
                        for &c in run {
                            out.push(char::from(c));
                        }
                    } else {
                        out.push_str(text.get(at..next).ok_or(Bail)?);
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

    /// A whole number at `pos` with no fraction or exponent, as `serde_json` reads it (`u64`
    /// when not negative, else `i64`).
    fn number(&mut self) -> Result<Number, Bail> {
        let negative = self.b.get(self.pos) == Some(&b'-');
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
        if negative {
            // Down to `i64::MIN`; past it `serde_json` reads a float.
            Ok(Number::from(0i64.checked_sub_unsigned(n).ok_or(Bail)?))
        } else {
            Ok(Number::from(n))
        }
    }

    fn literal(&mut self, word: &[u8], tok: Tok<'a>) -> Result<Tok<'a>, Bail> {
        if self.b.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(tok)
        } else {
            Err(Bail)
        }
    }

    fn open(&mut self, tok: Tok<'a>) -> Result<Tok<'a>, Bail> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.pos += 1;
        self.first = true;
        Ok(tok)
    }

    /// At the closing bracket `close`, or before the comma of the next entry: whether there
    /// is a next entry (the comma read).
    fn next_entry(&mut self, close: u8) -> Result<bool, Bail> {
        self.skip_ws();
        let c = *self.b.get(self.pos).ok_or(Bail)?;
        if c == close {
            self.pos += 1;
            self.depth -= 1;
            // The enclosing container holds this one: not before its first entry any more.
            self.first = false;
            return Ok(false);
        }
        if self.first {
            self.first = false;
        } else if c == b',' {
            self.pos += 1;
            self.skip_ws();
        } else {
            return Err(Bail);
        }
        Ok(true)
    }
}

impl<'a> Source<'a> for Text<'a> {
    fn value(&mut self) -> Result<Tok<'a>, Bail> {
        self.skip_ws();
        match *self.b.get(self.pos).ok_or(Bail)? {
            b'"' => self.string().map(Tok::Str),
            b'{' => self.open(Tok::Object),
            b'[' => self.open(Tok::Array),
            b't' => self.literal(b"true", Tok::Bool(true)),
            b'f' => self.literal(b"false", Tok::Bool(false)),
            b'n' => self.literal(b"null", Tok::Null),
            b'-' | b'0'..=b'9' => self.number().map(Tok::Number),
            _ => Err(Bail),
        }
    }

    fn key(&mut self) -> Result<Option<Cow<'a, str>>, Bail> {
        if !self.next_entry(b'}')? {
            return Ok(None);
        }
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(Bail);
        }
        let key = self.string()?;
        self.skip_ws();
        if self.b.get(self.pos) != Some(&b':') {
            return Err(Bail);
        }
        self.pos += 1;
        Ok(Some(key))
    }

    fn more(&mut self) -> Result<bool, Bail> {
        self.next_entry(b']')
    }
}

/// An already parsed `Value`, walked (see the module documentation).
pub(crate) struct Walk<'a> {
    /// The value the next [`Source::value`] reads.
    next: Option<&'a Value>,
    /// The objects and arrays entered and not yet ended, innermost last.
    open: Vec<Frame<'a>>,
}

enum Frame<'a> {
    Object(serde_json::map::Iter<'a>),
    Array(std::slice::Iter<'a, Value>),
}

impl<'a> Walk<'a> {
    pub(crate) fn new(v: &'a Value) -> Walk<'a> {
        Walk {
            next: Some(v),
            open: Vec::new(),
        }
    }
}

impl<'a> Source<'a> for Walk<'a> {
    fn value(&mut self) -> Result<Tok<'a>, Bail> {
        Ok(match self.next.take().ok_or(Bail)? {
            Value::Null => Tok::Null,
            Value::Bool(b) => Tok::Bool(*b),
            Value::Number(n) => Tok::Number(n.clone()),
            Value::String(s) => Tok::Str(Cow::Borrowed(s)),
            Value::Object(o) => {
                self.open.push(Frame::Object(o.iter()));
                Tok::Object
            }
            Value::Array(a) => {
                self.open.push(Frame::Array(a.iter()));
                Tok::Array
            }
        })
    }

    fn key(&mut self) -> Result<Option<Cow<'a, str>>, Bail> {
        let Some(Frame::Object(entries)) = self.open.last_mut() else {
            return Err(Bail);
        };
        match entries.next() {
            Some((k, v)) => {
                self.next = Some(v);
                Ok(Some(Cow::Borrowed(k)))
            }
            None => {
                self.open.pop();
                Ok(None)
            }
        }
    }

    fn more(&mut self) -> Result<bool, Bail> {
        let Some(Frame::Array(elements)) = self.open.last_mut() else {
            return Err(Bail);
        };
        match elements.next() {
            Some(v) => {
                self.next = Some(v);
                Ok(true)
            }
            None => {
                self.open.pop();
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;
    use serde_json::Value;

    /// A whole document read by [`Text`], as a `Value`.
    fn document(text: &str) -> Result<Value, Bail> {
        let mut t = Text::new(text);
        let tok = t.value()?;
        let v = Json::pull(&mut t, tok)?;
        if t.at_end() {
            Ok(v.to_value())
        } else {
            Err(Bail)
        }
    }

    /// What the text reader reads, it reads as `serde_json` does; what it does not, it leaves.
    fn same(text: &str) -> bool {
        let fast = document(text);
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
    fn the_text_reader_never_disagrees_with_serde_json() {
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
        // Not vacuous: a good share of the generated documents are plain JSON the text reader reads.
        assert!(read.get() > 500, "the text reader read {} of 4096", read.get());
    }

    #[test]
    fn a_walked_value_gives_the_same_tree() {
        let v: Value = serde_json::from_str(r#"{"b":[1,-2,1.5,{"c":null}],"a":"x","d":{}}"#).expect("json");
        let mut w = Walk::new(&v);
        let tok = w.value().expect("a value");
        assert_eq!(Json::pull(&mut w, tok).expect("walks").to_value(), v);
    }

    #[test]
    fn a_prefix_ends_where_its_value_does() {
        let mut t = Text::new(r#"{"a":1} trailing {"#);
        let tok = t.value().expect("a value");
        let v = Json::pull(&mut t, tok).expect("reads");
        assert_eq!(v.to_value(), serde_json::json!({"a":1}));
        assert_eq!(t.offset(), 7);
    }
}
