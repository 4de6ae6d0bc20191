//! Redaction: what may leave the classifier as `safe_excerpt`, `provider_id` and `model_id`.
//!
//! Excerpts reach the database, the API, the event stream, the log and the UI, and evidence
//! is written by parties we do not control, so redaction assumes an adversary: a key format
//! nobody has listed yet must not leak by default. Four detectors mark byte ranges, and every
//! range becomes `[redacted]` (overlapping ranges merge):
//!
//! - `context`: a credential *context* (a header name, `key=`, `token`, `secret`,
//!   `password`, `Bearer`, an identifier's name, a password flag of a command, SQL's
//!   `IDENTIFIED BY`, a `.netrc` entry, ...) redacts whatever value follows it;
//! - `tokens`: random-looking tokens of 16 characters or more, known key prefixes, account
//!   numbers, hex IDs and e-mail addresses go wherever they stand;
//! - `numbers`: phone and card numbers, IBANs and social security numbers in groups;
//! - `shapes`: URL credentials and query strings, webhook paths, armored private keys, home
//!   directories and account resource paths.
//!
//! Text with characters that stand for ASCII ones (no-break spaces, full-width forms,
//! look-alike letters, zero-width characters, JSON escapes such as `\u002d`) is read folded
//! (`fold`), so they hide nothing.
//!
//! **Order: cut, then redact.** [`safe_excerpt`] first cuts the evidence to what the excerpt
//! can show ([`MAX_EXCERPT_CHARS`] once whitespace is collapsed), never inside a run of
//! letters, digits and `_ - + / = . @ %` (so a token is kept whole or not at all), then
//! redacts that text, then collapses whitespace. Nothing can cross the cut: the detectors see
//! every character the excerpt shows, and also read `LOOKAHEAD_BYTES` past the cut, so a
//! secret the cut splits is still recognized by what follows it (a URL password by its
//! `@host`); the part of it the head holds is redacted, and nothing past the cut is shown. A
//! text redaction made longer is cut again (cutting redacted text cannot reveal anything).
//!
//! The text is bounded (the excerpt's window); one pass over its bytes finds the places each
//! detector looks at (see `secret_spans`), and the detectors read around those places only.
//! A stderr excerpt is redacted knowing the end of the line above it
//! ([`safe_excerpt_after`]), so a secret wrapped over two lines is known for one.

mod context;
mod fold;
pub mod names;
mod numbers;
mod shapes;
mod tokens;

use std::sync::OnceLock;

/// The longest excerpt, in characters.
pub const MAX_EXCERPT_CHARS: usize = 240;
/// How much evidence is looked at for the excerpt, in bytes.
pub const REDACT_WINDOW_BYTES: usize = 1024;

const MARK: &str = "[redacted]";

/// Replaces every secret `text` holds with `[redacted]` (see the module documentation).
pub fn redact(text: &str) -> String {
    let spans = secret_spans(text);
    if spans.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (s, e) in spans {
        out.push_str(&text[last..s]);
        out.push_str(MARK);
        last = e;
    }
    out.push_str(&text[last..]);
    out
}

/// The merged, sorted byte ranges of every secret in `text`.
///
/// One pass over the bytes builds bit planes of the text (see `Planes`), which say every
/// place a detector looks at: each unit (a run of letters, digits and `_ - + / =`) of 8 bytes
/// or more for `tokens` and `numbers` (shorter ones are never secrets alone); the blank after
/// a unit whose word may be a scheme or a credential word (`context`), that ends in a digit
/// or is followed by one (`numbers`), or is followed by a `-` (a command's flag, `context`);
/// each `:` and `=` for a credential name (`context`) and `://` (`shapes`); `?` and `#` for a
/// query; `@`, `%40`, `%2540`, `\\u0040`, `&#64;` and `&commat;` for an e-mail address; `/`,
/// `~`, `%2F` and backslashes for home directories and account paths; `(` and `[` for a quoted
/// name and its value (a tuple, a header pair), `</` for an element's text. Webhook markers and armor are found from a rare
/// byte (`k`, `B`); line breaks and non-ASCII bytes, already set apart for the collapse, say
/// where a line starts and whether the text must be folded. Each detector judges its places
/// independently, and the ranges are sorted and merged, so the order of the visits does not
/// matter.
fn secret_spans(text: &str) -> Vec<(usize, usize)> {
    spans_and_shape(text).0
}

/// [`secret_spans`], and whether `text` is its own collapse (what [`is_collapsed`] says),
/// read from the same bit planes: the excerpt needs both, and one pass over the bytes gives
/// both.
fn spans_and_shape(text: &str) -> (Vec<(usize, usize)>, bool) {
    spans_and_shape_with(text, true)
}

/// [`spans_and_shape`]; `may_fold` is false for text already folded (see `fold`).
fn spans_and_shape_with(text: &str, may_fold: bool) -> (Vec<(usize, usize)>, bool) {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let n = b.len();
    // Bit planes of the text (see `Planes`), built without a branch per byte; the visits
    // below skip from set bit to set bit.
    let words = n.div_ceil(64);
    let mut stack = [Planes::default(); 20];
    let mut heap = Vec::new();
    let planes: &mut [Planes] = if words <= stack.len() {
        &mut stack[..words]
    } else {
        heap.resize(words, Planes::default());
        &mut heap
    };
    for (p, chunk) in planes.iter_mut().zip(b.chunks(64)) {
        *p = Planes::of(chunk);
    }
    // Line breaks and non-ASCII bytes are among the unsettled ones: text with a character
    // that folds is read folded (see `fold`); a line may start with a dotted number.
    for (w, p) in planes.iter().enumerate() {
        let mut bits = p.unsettled;
        while bits != 0 {
            let i = 64 * w + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if b[i] == b'\n' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                numbers::dotted_at(b, i + 1, &mut spans);
            } else if may_fold && b[i] >= 0xc2 && fold::folds_at(text, i) {
                return folded_spans(text);
            }
        }
    }
    // A name or a key spelled with JSON escapes (`x\\u002dapi\\u002dkey`) is read as it spells.
    if may_fold && fold::has_escape(b) {
        return folded_spans(text);
    }
    let get = |w: usize| planes.get(w).copied().unwrap_or_default();
    if b.first().is_some_and(u8::is_ascii_digit) {
        numbers::dotted_at(b, 0, &mut spans);
    }
    // Bytes the planes do not settle whether the text is collapsed (other whitespace,
    // non-ASCII), two blanks in a row, and the bytes of the rare markers `whole` looks for.
    let (mut unsettled, mut double_blank) = (0u64, 0u64);
    for w in 0..words {
        let (prev, cur, next) = (
            w.checked_sub(1).map(get).unwrap_or_default(),
            planes[w],
            get(w + 1),
        );
        unsettled |= cur.unsettled;
        double_blank |= cur.blank & ((cur.blank >> 1) | (next.blank << 63));
        // The places detectors look at, in any order (see above).
        let mut bits = cur.marked;
        while bits != 0 {
            let i = 64 * w + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            visit_marked(b, i, &mut spans);
        }
        // Units of 8 bytes or more (shorter ones are never secrets on their own): where 8
        // unit bytes in a row start, and the unit before was not already one.
        let shr = |k: u32| (cur.unit >> k) | (next.unit << (64 - k));
        let long = cur.unit & shr(1) & shr(2) & shr(3) & shr(4) & shr(5) & shr(6) & shr(7);
        let prev_long = prev.unit >> 63 != 0 && {
            // Whether the byte before this word starts or continues a long run.
            let i = 64 * w - 1;
            b[i..].len() >= 8 && b[i..i + 8].iter().all(|&c| tokens::is_unit_byte(c))
        };
        let mut starts = long & !((long << 1) | u64::from(prev_long));
        while starts != 0 {
            let start = 64 * w + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            let end = next_bit(planes, start).unwrap_or(n).min(n);
            tokens::unit(b, start, end, &mut spans);
        }
        // A blank after a unit whose word may be a scheme (`Bearer ...`, see
        // `context::scheme_before`) or a credential word (`password Tr0ub...`).
        let shl = |x: u64, px: u64, k: u32| (x << k) | (px >> (64 - k));
        let mut words = cur.blank & shl(cur.unit, prev.unit, 1);
        while words != 0 {
            let p = 64 * w + words.trailing_zeros() as usize;
            words &= words - 1;
            // `token` and `basic` start 5 bytes back with `t` or `b`, `bearer` and `digest`
            // 6 bytes back with `b` or `d` (any case): most words are no scheme.
            let starts = |back: usize, set: [u8; 2]| p >= back && set.contains(&(b[p - back] | 0x20));
            if starts(5, [b't', b'b']) || starts(6, [b'b', b'd']) {
                context::scheme_before(b, p, &mut spans);
            }
            context::word_before_blank(b, p, &mut spans);
            if b[p - 1].is_ascii_digit() {
                numbers::at_blank(b, p, &mut spans);
            }
            match b.get(p + 1) {
                Some(b'-') => context::short_flag_at(b, p + 1, &mut spans),
                // `415.555.0132`: dots split a number into short units.
                Some(b'0'..=b'9') => numbers::dotted_at(b, p + 1, &mut spans),
                _ => {}
            }
        }
    }
    // Webhook markers hold `hook`, armor `BEGIN`: without a `k` or a `B` there is neither.
    if memchr::memchr2(b'k', b'B', b).is_some() {
        shapes::whole(b, &mut spans);
    }
    let collapsed = if unsettled != 0 {
        is_collapsed(b)
    } else {
        // Only spaces and tabs are blanks here, and no tab (a tab is unsettled).
        double_blank == 0 && b.first() != Some(&b' ') && b.last() != Some(&b' ')
    };
    if spans.is_empty() {
        return (spans, collapsed);
    }
    (merge(text, spans), collapsed)
}

/// [`spans_and_shape`] of text holding characters that fold: the spans found in the folded
/// text, mapped back to `text`.
#[cold]
fn folded_spans(text: &str) -> (Vec<(usize, usize)>, bool) {
    let (folded, from) = fold::fold(text);
    let (spans, _) = spans_and_shape_with(&folded, false);
    let mapped = spans
        .into_iter()
        .filter(|&(s, e)| s < e && e <= from.len())
        .map(|(s, e)| (from[s].0 as usize, from[e - 1].1 as usize))
        .collect();
    (merge(text, mapped), is_collapsed(text.as_bytes()))
}

/// `spans` sorted and merged (overlapping or touching ranges become one), at character
/// boundaries of `text`.
fn merge(text: &str, mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        // Ranges start and end at character boundaries (ASCII bytes, or the ends of folded
        // characters); clamp defensively all the same.
        let (s, e) = (floor_boundary(text, s), ceil_boundary(text, e));
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Where a detector looks at the byte at `i` (one of `: = ? # @ % \\ / ( [ & ~`), it looks.
fn visit_marked(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    match b[i] {
        b':' => {
            context::at_separator(b, i, spans);
            shapes::userinfo_at(b, i, spans);
            // `tel: 415.555.0132` (a dotted number after a blank that follows no unit).
            if b.get(i + 1) == Some(&b' ') && b.get(i + 2).is_some_and(u8::is_ascii_digit) {
                numbers::dotted_at(b, i + 2, spans);
            }
        }
        b'=' => context::at_separator(b, i, spans),
        b'?' => shapes::query_at(b, i, spans),
        b'#' => {
            // `&#64;` and `&#x40;`: an `@` written as an HTML entity.
            if i > 0 && b[i - 1] == b'&' {
                match b.get(i + 1..i + 4) {
                    Some(b"64;") => tokens::email_at(b, i - 1, 5, spans),
                    Some(b"x40" | b"X40") if b.get(i + 4) == Some(&b';') => {
                        tokens::email_at(b, i - 1, 6, spans)
                    }
                    _ => {}
                }
            }
            shapes::query_at(b, i, spans);
        }
        b'@' => {
            tokens::email_at(b, i, 1, spans);
            context::connect_at(b, i, spans);
        }
        b'&' if b[i + 1..].starts_with(b"commat;") => tokens::email_at(b, i, 8, spans),
        b'%' if b[i + 1..].starts_with(b"40") => tokens::email_at(b, i, 3, spans),
        b'%' if b[i + 1..].starts_with(b"2540") => tokens::email_at(b, i, 5, spans),
        b'%' if matches!(b.get(i + 1..i + 3), Some(b"3D" | b"3d" | b"3A" | b"3a")) => {
            context::at_percent_separator(b, i, spans);
        }
        b'%' if matches!(b.get(i + 1..i + 3), Some(b"2F" | b"2f")) => shapes::encoded_home_at(b, i, spans),
        b'\\' => {
            if b[i + 1..].starts_with(b"u0040") {
                tokens::email_at(b, i, 6, spans);
            }
            if i == 0 || b[i - 1] != b'\\' {
                shapes::home_at(b, i, spans);
            }
        }
        b'/' => {
            shapes::home_at(b, i, spans);
            if i > 0 && matches!(b[i - 1], b's' | b'S') {
                shapes::collection_at(b, i, spans);
            }
            if i > 0 && b[i - 1] == b'<' {
                context::xml_close_at(b, i, spans);
            }
        }
        b'(' | b'[' => context::tuple_at(b, i, spans),
        b'~' => shapes::tilde_home_at(b, i, spans),
        _ => {}
    }
}

/// Bit planes of 64 bytes of text: bit `k` says something of byte `k`.
#[derive(Clone, Copy, Default)]
struct Planes {
    /// A unit byte (a letter, a digit or `_ - + / =`).
    unit: u64,
    /// A byte a detector looks at: `: = ? # @ % \\ / ( [ & ~`.
    marked: u64,
    /// A blank: ` ` or a tab.
    blank: u64,
    /// Whitespace other than a space (`\t \n \r`, vertical tab, form feed) or a non-ASCII
    /// byte: where the planes alone do not say whether the text is collapsed.
    unsettled: u64,
}

const UNIT: u8 = 1;
const MARKED: u8 = 2;
const BLANK: u8 = 4;
const UNSETTLED: u8 = 8;
/// Per byte, its planes (see [`Planes`]).
static BYTE_FLAGS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if tokens::is_unit_byte(b) {
            t[c] |= UNIT;
        }
        if matches!(
            b,
            b':' | b'=' | b'?' | b'#' | b'@' | b'%' | b'\\' | b'/' | b'(' | b'[' | b'&' | b'~'
        ) {
            t[c] |= MARKED;
        }
        if matches!(b, b' ' | b'\t') {
            t[c] |= BLANK;
        }
        if matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) || b >= 0x80 {
            t[c] |= UNSETTLED;
        }
        c += 1;
    }
    t
};

impl Planes {
    /// The planes of up to 64 bytes: eight bytes' flags read into one word, then each plane's
    /// bits gathered with one multiplication.
    fn of(chunk: &[u8]) -> Planes {
        let mut p = Planes::default();
        let mut groups = chunk.chunks_exact(8);
        let mut at = 0;
        for g in &mut groups {
            let mut group = [0u8; 8];
            group.copy_from_slice(g);
            p.add(group, at);
            at += 8;
        }
        let rest = groups.remainder();
        if !rest.is_empty() {
            // Padded with NUL bytes, which have no flags.
            let mut group = [0u8; 8];
            group[..rest.len()].copy_from_slice(rest);
            p.add(group, at);
        }
        p
    }

    /// Adds the flags of the eight bytes at `at`.
    #[inline(always)]
    fn add(&mut self, group: [u8; 8], at: u32) {
        const LOW: u64 = 0x0101_0101_0101_0101;
        // Gathers the low bit of each byte of `x` (whose bytes are 0 or 1) into 8 bits.
        let gather = |x: u64| x.wrapping_mul(0x0102_0408_1020_4080) >> 56;
        let t = |k: usize| BYTE_FLAGS[usize::from(group[k])];
        let f = u64::from_le_bytes([t(0), t(1), t(2), t(3), t(4), t(5), t(6), t(7)]);
        self.unit |= gather(f & LOW) << at;
        self.marked |= gather((f >> 1) & LOW) << at;
        self.blank |= gather((f >> 2) & LOW) << at;
        self.unsettled |= gather((f >> 3) & LOW) << at;
    }
}

/// The first position at or after `from` that is not a unit byte (past the text's end when
/// the text ends in a unit; callers clamp), if within the planes.
fn next_bit(planes: &[Planes], from: usize) -> Option<usize> {
    let mut w = from / 64;
    let mut bits = !planes.get(w)?.unit & (!0u64 << (from % 64));
    loop {
        if bits != 0 {
            return Some(64 * w + bits.trailing_zeros() as usize);
        }
        w += 1;
        bits = !planes.get(w)?.unit;
    }
}

fn floor_boundary(t: &str, mut i: usize) -> usize {
    i = i.min(t.len());
    while !t.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(t: &str, mut i: usize) -> usize {
    i = i.min(t.len());
    while !t.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The bounded, redacted excerpt of a piece of evidence (see the module documentation).
///
/// Redaction usually shortens what it redacts (a 100-character key becomes `[redacted]`), so
/// when the cut text redacts to much less than it was, a longer head is cut and redacted
/// again (at most three times). Every pass redacts exactly the text it shows.
pub fn safe_excerpt(text: &str) -> String {
    safe_excerpt_after("", text)
}

/// [`safe_excerpt`] of `text`, which follows `before` in the evidence (the stderr line above
/// it): the detectors also read the last `LOOKBEHIND_BYTES` of `before`, so a secret whose
/// name or first half is on the line above (`password=` and a line break, a key wrapped by a
/// terminal) is still known for one. The two are read as two lines, and, when `before` ends
/// inside a word and `text` starts with one, glued as well (a wrapped token; the first line
/// of `text` only). Nothing of `before` is shown.
pub fn safe_excerpt_after(before: &str, text: &str) -> String {
    let context = &before[ceil_boundary(before, before.len().saturating_sub(LOOKBEHIND_BYTES))..];
    // The spans of `t` (a head of `text`), and whether `t` is its own collapse (when known).
    let mut joined = String::new();
    let mut spans_of = |t: &str| -> (Vec<(usize, usize)>, bool) {
        if context.is_empty() {
            return spans_and_shape(t);
        }
        // The spans of `context`, then `sep`, then `t`, in `t`.
        let mut read = |sep: &str, t: &str| {
            joined.clear();
            joined.push_str(context);
            joined.push_str(sep);
            let shift = joined.len();
            joined.push_str(t);
            secret_spans(&joined)
                .into_iter()
                .filter(|&(_, e)| e > shift)
                .map(|(s, e)| (s.max(shift) - shift, e - shift))
                .collect::<Vec<_>>()
        };
        let mut spans = read("\n", t);
        // A line that ends inside a word, above one that starts with one, may also be a token
        // a terminal wrapped: the first line is read glued to the line above too.
        if context
            .as_bytes()
            .last()
            .is_some_and(|c| tokens::is_unit_byte(*c))
            && t.as_bytes().first().is_some_and(|c| tokens::is_unit_byte(*c))
        {
            let line = memchr::memchr(b'\n', t.as_bytes()).unwrap_or(t.len());
            let glued = read("", &t[..floor_boundary(t, line.min(LOOKAHEAD_BYTES))]);
            if !glued.is_empty() {
                spans.extend(glued);
                spans = merge(t, spans);
            }
        }
        (spans, false)
    };
    let mut budget = MAX_EXCERPT_CHARS;
    let mut out = String::new();
    for pass in 0..CUT_PASSES {
        let (head, cut, head_chars, collapsed) = cut(text, budget);
        let (spans, shape_collapsed) = if cut {
            // The detectors read past the cut, so a secret it splits is still known for one
            // (`postgres://app:Pa55w0rd` is a password only with the `@host` the cut left out),
            // and what of it the head holds is redacted; nothing past the cut is shown.
            let seen = &text[..floor_boundary(text, head.len() + LOOKAHEAD_BYTES)];
            (clip(spans_of(seen).0, head.len()), false)
        } else {
            spans_of(head)
        };
        out = collapse_redacted(head, &spans, collapsed || shape_collapsed);
        if cut {
            out.push('…');
        }
        if !cut || spans.is_empty() || pass + 1 == CUT_PASSES {
            break;
        }
        // Room the redaction freed: worth another, longer cut only if it is more than a word.
        let n = out.chars().count();
        let freed = (head_chars + 1).saturating_sub(n);
        if freed < 8 || n >= MAX_EXCERPT_CHARS {
            break;
        }
        budget += freed;
    }
    if out.len() > MAX_EXCERPT_CHARS && out.chars().count() > MAX_EXCERPT_CHARS {
        // Redaction lengthened the text: cut the (already redacted) text again.
        let (head, _, _) = cut_words(&out, MAX_EXCERPT_CHARS - 1);
        let mut shorter = head.trim_end().to_owned();
        shorter.push('…');
        out = shorter;
    }
    out
}

/// How far past a cut the detectors read: enough for the rest of a URL, a header value or a
/// key the cut split.
const LOOKAHEAD_BYTES: usize = 256;

/// How much of the evidence before an excerpt ([`safe_excerpt_after`]) the detectors read:
/// enough for a credential's name and the first part of a wrapped value.
const LOOKBEHIND_BYTES: usize = 128;

/// `spans` (sorted, merged) limited to the first `end` bytes.
fn clip(mut spans: Vec<(usize, usize)>, end: usize) -> Vec<(usize, usize)> {
    spans.retain(|&(s, _)| s < end);
    for span in &mut spans {
        span.1 = span.1.min(end);
    }
    spans
}

/// Whether text is its own collapse: words separated by single spaces, no other whitespace
/// and none at either end. (Vectorized searches; non-ASCII whitespace sends it the slow way.)
fn is_collapsed(b: &[u8]) -> bool {
    static DOUBLE_SPACE: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && memchr::memchr3(b'\n', b'\r', b'\t', b).is_none()
        && memchr::memchr2(0x0b, 0x0c, b).is_none()
        && DOUBLE_SPACE
            .get_or_init(|| memchr::memmem::Finder::new(b"  "))
            .find(b)
            .is_none()
        && (b.is_ascii()
            || !std::str::from_utf8(b).is_ok_and(|t| t.chars().any(|c| !c.is_ascii() && c.is_whitespace())))
}

/// How many times [`safe_excerpt`] may cut and redact.
const CUT_PASSES: usize = 3;

/// `text` with `spans` replaced by the mark and whitespace collapsed, in one pass.
fn collapse_redacted(text: &str, spans: &[(usize, usize)], known_collapsed: bool) -> String {
    if known_collapsed || is_collapsed(text.as_bytes()) {
        // The common case: one line, single spaces. Spans start and end at non-blank text,
        // so splicing the mark in keeps it single-spaced.
        let mut out = String::with_capacity(text.len() + spans.len() * MARK.len());
        let mut last = 0;
        for &(s, e) in spans {
            out.push_str(&text[last..s]);
            out.push_str(MARK);
            last = e;
        }
        out.push_str(&text[last..]);
        return out;
    }
    let mut out = String::with_capacity(text.len().min(MAX_EXCERPT_CHARS * 2) + 16);
    // Whitespace seen but not yet written: written as one space before the next character.
    let mut pending = false;
    let mut last = 0;
    for &(s, e) in spans {
        push_collapsed(&mut out, &text[last..s], &mut pending);
        push_collapsed(&mut out, MARK, &mut pending);
        last = e;
    }
    push_collapsed(&mut out, &text[last..], &mut pending);
    out
}

/// Appends `piece` with its whitespace collapsed (see [`collapse_redacted`]).
fn push_collapsed(out: &mut String, piece: &str, pending: &mut bool) {
    if piece.is_ascii() {
        // Byte by byte; runs without whitespace are copied whole.
        let b = piece.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
                *pending = true;
                i += 1;
                continue;
            }
            let run = b[i..]
                .iter()
                .position(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
                .map_or(b.len(), |n| i + n);
            if *pending && !out.is_empty() {
                out.push(' ');
            }
            *pending = false;
            out.push_str(&piece[i..run]);
            i = run;
        }
        return;
    }
    for (i, w) in piece.split(char::is_whitespace).enumerate() {
        *pending |= i > 0;
        if w.is_empty() {
            continue;
        }
        if *pending && !out.is_empty() {
            out.push(' ');
        }
        *pending = false;
        out.push_str(w);
    }
}

/// Whether a byte belongs to a run that must never be split by a cut.
fn is_run(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=' | '.' | '@' | '%' | '\\')
}

/// The head of `text` whose collapsed form fits `max` characters, whether anything was left
/// out, and the head's collapsed length in characters. Only [`REDACT_WINDOW_BYTES`] are looked
/// at. When the text does not fit, room is kept for the ellipsis, and the cut falls at
/// whitespace or between two characters of which one is not a run character. The last value
/// is true when the head is known to be its own collapse (see `is_collapsed`).
fn cut(text: &str, max: usize) -> (&str, bool, usize, bool) {
    if text.len() <= max {
        // As many bytes as the bound allows characters: it fits whatever it holds.
        return (text, false, text.len(), false);
    }
    let window_end = floor_boundary(text, REDACT_WINDOW_BYTES);
    let window = &text[..window_end];
    let head_bytes = window.as_bytes().get(..max).unwrap_or(window.as_bytes());
    let rest_blank = text.as_bytes()[max..].iter().all(u8::is_ascii_whitespace);
    if head_bytes.is_ascii() && is_collapsed(head_bytes) && !rest_blank {
        // Single-spaced ASCII (the common case): a character is a byte, so the cut is at
        // `max - 1` bytes, moved back out of any run it falls into.
        // A head of single-spaced text without its trailing blank is single-spaced.
        let head = safe_cut_before(window, max - 1);
        let head = head.trim_end();
        return (head, true, head.len(), true);
    }
    // One scan says where the collapsed text passes `max` and `max - 1` characters.
    let o = overflow(window, max);
    if o.past_max.is_none() && window_end == text.len() {
        return (window, false, o.chars, false);
    }
    // Room for the ellipsis: the head holds at most `max - 1` characters.
    let head = match o.past_max_minus_1 {
        Some(i) => safe_cut_before(window, i),
        // The window's end falls inside the text, maybe inside a run: drop that run.
        None => safe_cut_before(window, window.len()),
    };
    (head, true, collapsed_len(head), false)
}

/// The longest head of `t` whose collapsed form has at most `max` characters, cut safely;
/// whether all of `t` fits; and the head's collapsed length in characters.
fn cut_words(t: &str, max: usize) -> (&str, bool, usize) {
    let o = overflow(t, max);
    match o.past_max {
        Some(i) => {
            let head = safe_cut_before(t, i);
            (head, false, collapsed_len(head))
        }
        None => (t, true, o.chars),
    }
}

/// Where the collapsed form of a text first passes `max` and `max - 1` characters.
struct Overflow {
    /// The byte offset of the first character that does not fit `max` characters.
    past_max: Option<usize>,
    /// The same for `max - 1` characters (at or before `past_max`).
    past_max_minus_1: Option<usize>,
    /// Collapsed characters up to `past_max` (all of them when it is `None`).
    chars: usize,
}

/// One scan of `t` for [`Overflow`].
fn overflow(t: &str, max: usize) -> Overflow {
    let mut chars = 0usize;
    let mut pending_space = false;
    let mut past_max_minus_1 = None;
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let (is_space, len) = if c < 0x80 {
            // ASCII, the common case: one byte, one character.
            (matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c), 1)
        } else {
            let ch = t[i..].chars().next().unwrap_or(' ');
            (ch.is_whitespace(), ch.len_utf8())
        };
        if is_space {
            pending_space = chars > 0;
        } else {
            let add = 1 + usize::from(pending_space);
            if chars + add > max - 1 && past_max_minus_1.is_none() {
                past_max_minus_1 = Some(i);
            }
            if chars + add > max {
                return Overflow {
                    past_max: Some(i),
                    past_max_minus_1,
                    chars,
                };
            }
            chars += add;
            pending_space = false;
        }
        i += len;
    }
    Overflow {
        past_max: None,
        past_max_minus_1,
        chars,
    }
}

/// The collapsed length of a head that was cut back (only at a cut).
fn collapsed_len(t: &str) -> usize {
    let mut chars = 0usize;
    let mut pending = false;
    if t.is_ascii() {
        for &c in t.as_bytes() {
            let space = matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
            chars += usize::from(!space) * (1 + usize::from(pending));
            pending = space && chars > 0;
        }
        return chars;
    }
    for c in t.chars() {
        if c.is_whitespace() {
            pending = chars > 0;
        } else {
            chars += 1 + usize::from(pending);
            pending = false;
        }
    }
    chars
}

/// The longest head of `t[..i]` that does not end inside a run continuing at `i`.
fn safe_cut_before(t: &str, mut i: usize) -> &str {
    let runs_on = |i: usize| {
        let before = t[..i].chars().next_back();
        let after = t[i..].chars().next();
        matches!((before, after), (Some(b), Some(a)) if is_run(b) && is_run(a))
    };
    while i > 0 && runs_on(i) {
        i = floor_boundary(t, i - 1);
    }
    &t[..i]
}

/// Whether a JSON key names a credential (`password`, `x-api-key`, `Authorization`, ...): its
/// value is never evidence of a failure, and is left out wherever keys are dropped (see
/// [`names`] for the names that stand beside a value).
pub fn is_credential_name(name: &str) -> bool {
    context::is_credential_name(name.as_bytes())
}

/// A provider or model ID as given, if it looks like an identifier and holds nothing
/// redaction would remove; otherwise `[redacted]`.
pub(crate) fn identifier(s: &str) -> String {
    let plain = s.len() <= 128
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'[' | b']')
        });
    // `user:password@host` (userinfo without a scheme), `user:password` (a `:` before what
    // is not a tag, see `is_tag`), and a long segment mixing upper-case letters, lower-case
    // ones and digits (a key, not a model name: those are lower-case or name their parts,
    // `Qwen2.5-Coder-32B-Instruct`).
    let userinfo = s.find('@').is_some_and(|at| s[..at].contains(':'))
        || memchr::memchr_iter(b':', s.as_bytes()).any(|i| !is_tag(&s[i + 1..]));
    let random_segment = s.split(['-', '_', '.', '/', ':', '@']).any(|seg| {
        seg.len() >= 12
            && seg.bytes().any(|b| b.is_ascii_uppercase())
            && seg.bytes().any(|b| b.is_ascii_lowercase())
            && seg.bytes().any(|b| b.is_ascii_digit())
    });
    if plain && !userinfo && !random_segment && secret_spans(s).is_empty() {
        s.to_owned()
    } else {
        MARK.to_owned()
    }
}

/// Whether what follows a `:` in an identifier is a tag, not the password of `user:password`:
/// a version or a size (`v1:0`, `llama3:8b`), a short or a known variant (`:o1`, `:free`,
/// `:latest`, `:thinking`), a model named with its parts (`openai:gpt-4o`,
/// `openrouter:meta-llama/llama-3`), or a family and its version (`ollama:qwen2`). Anything
/// else (`bob:correcthorse`) may be a password.
fn is_tag(t: &str) -> bool {
    const TAGS: &[&str] = &[
        "latest", "free", "beta", "alpha", "nitro", "online", "floor", "thinking", "extended", "exacto",
        "preview", "instruct", "stable", "default", "vision", "chat", "code", "text", "base", "turbo",
        "mini", "lite", "plus", "pro", "max", "fast", "small", "medium", "large",
    ];
    let family_version = {
        let letters = t.bytes().take_while(u8::is_ascii_alphabetic).count();
        letters > 0
            && t.len() > letters
            && t[letters..].bytes().all(|c| c.is_ascii_digit() || c == b'.')
            && t.as_bytes()[letters].is_ascii_digit()
    };
    t.len() <= 4
        || t.as_bytes()[0].is_ascii_digit()
        || t.contains(['-', '.', '/', ':'])
        || family_version
        || TAGS.iter().any(|g| t.eq_ignore_ascii_case(g))
}

#[cfg(test)]
mod tests;
