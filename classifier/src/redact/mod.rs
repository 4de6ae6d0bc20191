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
/// when the cut text redacts to much less than the bound, a longer head is cut and redacted
/// again (at most [`CUT_PASSES`] times). Every pass redacts exactly the text it shows.
pub fn safe_excerpt(text: &str) -> String {
    let mut budget = MAX_EXCERPT_CHARS;
    let mut out = String::new();
    for pass in 0..CUT_PASSES {
        let (head, cut) = cut(text, budget);
        out = collapse(&redact(head));
        if cut {
            out.push('…');
        }
        let n = out.chars().count();
        if !cut || pass + 1 == CUT_PASSES || n + 8 >= MAX_EXCERPT_CHARS {
            break;
        }
        budget += MAX_EXCERPT_CHARS.saturating_sub(n);
    }
    if out.chars().count() > MAX_EXCERPT_CHARS {
        // Redaction lengthened the text: cut the (already redacted) text again.
        let (head, _) = cut_words(&out, MAX_EXCERPT_CHARS - 1);
        let mut shorter = head.trim_end().to_owned();
        shorter.push('…');
        out = shorter;
    }
    out
}

/// How many times [`safe_excerpt`] may cut and redact.
const CUT_PASSES: usize = 3;

/// Whether a byte belongs to a run that must never be split by a cut.
fn is_run(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=' | '.' | '@' | '%' | '\\')
}

/// The head of `text` whose collapsed form fits `max` characters, and whether anything was
/// left out. Only [`REDACT_WINDOW_BYTES`] are looked at. When the text does not fit, room is
/// kept for the ellipsis, and the cut falls at whitespace or between two characters of
/// which one is not a run character.
fn cut(text: &str, max: usize) -> (&str, bool) {
    let window_end = floor_boundary(text, REDACT_WINDOW_BYTES);
    let window = &text[..window_end];
    let (head, fits) = cut_words(window, max);
    if fits && window_end == text.len() {
        return (head, false);
    }
    let (head, _) = cut_words(window, max - 1);
    // The window's end may fall inside a run: drop that run.
    let head = if head.len() == window.len() && window_end < text.len() {
        safe_cut_before(window, window.len())
    } else {
        head
    };
    (head, true)
}

/// The longest head of `t` whose collapsed form has at most `max` characters, cut safely; and
/// whether all of `t` fits.
fn cut_words(t: &str, max: usize) -> (&str, bool) {
    let mut chars = 0usize;
    let mut pending_space = false;
    for (i, c) in t.char_indices() {
        if c.is_whitespace() {
            pending_space = chars > 0;
            continue;
        }
        let add = 1 + usize::from(pending_space);
        if chars + add > max {
            return (safe_cut_before(t, i), false);
        }
        chars += add;
        pending_space = false;
    }
    (t, true)
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

/// Whitespace collapsed to single spaces, none at either end.
fn collapse(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    for w in t.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
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
