//! Redaction: what may leave the classifier as `safe_excerpt`, `provider_id` and `model_id`.
//!
//! Excerpts reach the database, the API, the event stream, the log and the UI, and evidence
//! is written by parties we do not control, so redaction assumes an adversary: a key format
//! nobody has listed yet must not leak by default. Three detectors mark byte ranges, and every
//! range becomes `[redacted]` (overlapping ranges merge):
//!
//! - `context`: a credential *context* (a header name, `key=`, `token`, `secret`,
//!   `password`, `Bearer`, an identifier's name, ...) redacts whatever value follows it;
//! - `tokens`: long random-looking tokens, known key prefixes, account numbers, hex IDs and
//!   e-mail addresses go wherever they stand;
//! - `shapes`: URL credentials and query strings, webhook paths, armored private keys, home
//!   directories and account resource paths.
//!
//! **Order: cut, then redact.** [`safe_excerpt`] first cuts the evidence to what the excerpt
//! can show ([`MAX_EXCERPT_CHARS`] once whitespace is collapsed), never inside a run of
//! letters, digits and `_ - + / = . @ %` (so a token is kept whole or not at all), then
//! redacts exactly that text, then collapses whitespace. Nothing can cross the cut: the
//! detectors see every character the excerpt shows, and nothing it does not show. A text
//! redaction made longer is cut again (cutting redacted text cannot reveal anything).
//!
//! Work is linear in the (bounded) text: each detector is a few passes of byte scans.

mod context;
mod shapes;
mod tokens;

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
fn secret_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    context::spans(text, &mut spans);
    tokens::spans(text, &mut spans);
    shapes::spans(text, &mut spans);
    if spans.is_empty() {
        return spans;
    }
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        // Ranges always start and end at ASCII bytes, so at character boundaries; clamp
        // defensively all the same.
        let (s, e) = (floor_boundary(text, s), ceil_boundary(text, e));
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
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
    let mut budget = MAX_EXCERPT_CHARS;
    let mut out = String::new();
    for pass in 0..CUT_PASSES {
        let (head, cut, head_chars) = cut(text, budget);
        let spans = secret_spans(head);
        out = collapse_redacted(head, &spans);
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

/// Whether text is its own collapse: words separated by single spaces, no other whitespace
/// and none at either end. (Vectorized searches; non-ASCII whitespace sends it the slow way.)
fn is_collapsed(b: &[u8]) -> bool {
    b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && memchr::memchr3(b'\n', b'\r', b'\t', b).is_none()
        && memchr::memchr2(0x0b, 0x0c, b).is_none()
        && memchr::memmem::find(b, b"  ").is_none()
        && (b.is_ascii()
            || !std::str::from_utf8(b).is_ok_and(|t| t.chars().any(|c| !c.is_ascii() && c.is_whitespace())))
}

/// How many times [`safe_excerpt`] may cut and redact.
const CUT_PASSES: usize = 3;

/// `text` with `spans` replaced by the mark and whitespace collapsed, in one pass.
fn collapse_redacted(text: &str, spans: &[(usize, usize)]) -> String {
    if is_collapsed(text.as_bytes()) {
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
/// whitespace or between two characters of which one is not a run character.
fn cut(text: &str, max: usize) -> (&str, bool, usize) {
    if text.len() <= max {
        // As many bytes as the bound allows characters: it fits whatever it holds.
        return (text, false, text.len());
    }
    let window_end = floor_boundary(text, REDACT_WINDOW_BYTES);
    let window = &text[..window_end];
    let head_bytes = window.as_bytes().get(..max).unwrap_or(window.as_bytes());
    let rest_blank = text.as_bytes()[max..].iter().all(u8::is_ascii_whitespace);
    if head_bytes.is_ascii() && is_collapsed(head_bytes) && !rest_blank {
        // Single-spaced ASCII (the common case): a character is a byte, so the cut is at
        // `max - 1` bytes, moved back out of any run it falls into.
        let head = safe_cut_before(window, max - 1);
        let head = head.trim_end();
        return (head, true, head.len());
    }
    let (head, fits, chars) = cut_words(window, max);
    if fits && window_end == text.len() {
        return (head, false, chars);
    }
    let (head, fits, chars) = cut_words(window, max - 1);
    if fits {
        // The window's end falls inside the text, maybe inside a run: drop that run.
        let head = safe_cut_before(window, window.len());
        return (head, true, collapsed_len(head));
    }
    (head, true, chars)
}

/// The longest head of `t` whose collapsed form has at most `max` characters, cut safely;
/// whether all of `t` fits; and the head's collapsed length in characters.
fn cut_words(t: &str, max: usize) -> (&str, bool, usize) {
    let mut chars = 0usize;
    let mut pending_space = false;
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
            if chars + add > max {
                let head = safe_cut_before(t, i);
                return (head, false, collapsed_len(head));
            }
            chars += add;
            pending_space = false;
        }
        i += len;
    }
    (t, true, chars)
}

/// The collapsed length of a head that was cut back (only at a cut).
fn collapsed_len(t: &str) -> usize {
    let mut chars = 0usize;
    let mut pending = false;
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

/// A provider or model ID as given, if it looks like an identifier and holds nothing
/// redaction would remove; otherwise `[redacted]`.
pub(crate) fn identifier(s: &str) -> String {
    let plain = s.len() <= 128
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/' | b':' | b'@' | b'[' | b']')
        });
    if plain && secret_spans(s).is_empty() {
        s.to_owned()
    } else {
        MARK.to_owned()
    }
}

#[cfg(test)]
mod tests;
