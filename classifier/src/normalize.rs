//! Whitespace as a person reads it, in the text rules match.
//!
//! Terminals pad and wrap. Claude Code's `(not your usage limit)` reaches a report as
//! `(not your     usage limit)` (a wide line pasted) or `(not your usage\n     limit)` (the
//! terminal wrapped it and indented the rest), and a litellm exception wraps inside its
//! message. A catalogue literal written with single spaces matches neither. So before a signal
//! is matched, runs of whitespace (space, tab, carriage return, line feed) are read as one
//! space:
//!
//! - in stderr entries and ACP errors, every run of two or more (a line break followed by the
//!   continuation's indentation, padding), and a lone tab or carriage return, becomes one
//!   space; a lone line break stays, so a rule anchored at a line start still sees the lines
//!   the agent printed without indentation (a JSON bracket's continuation lines, a new entry
//!   in an ACP error's data);
//! - in agent message runs, only runs within a line become one space: line breaks stay where
//!   they are, because the text before the failure's line is the agent's real output (see
//!   `engine::combine_effects`);
//! - HTTP bodies are the provider's own bytes and are left as they are.
//!
//! The normalized text is the signal's text for matching: the literal scan, the rules'
//! regexes, the JSON found in the text, `match_start` and the timing extractors all read it,
//! so their byte offsets agree with each other and nothing maps back to the original. Only the
//! excerpt reads the original: redaction judges a secret by the lines it was printed on (a key
//! wrapped onto an indented line is one key), and it collapses whitespace itself.
//! A text with nothing to normalize (most) is kept as it is, borrowed, after a few vectorized
//! searches (`memchr`: a double space, a tab or carriage return, line breaks); only a text
//! that needs it is copied, once.

use crate::catalogue::SignalKind;
use std::sync::OnceLock;

/// `text` as the rules of a `kind` signal read it (see the module documentation), or `None`
/// when they read it as it is.
pub(crate) fn for_rules(kind: SignalKind, text: &str) -> Option<String> {
    match kind {
        SignalKind::Stderr | SignalKind::AcpError => collapse::<true>(text),
        SignalKind::AcpMessage => collapse::<false>(text),
        SignalKind::Http | SignalKind::AcpResult | SignalKind::Exit => None,
    }
}

/// Whether `x` belongs to a run of whitespace (line breaks only where lines merge).
fn is_space<const MERGE: bool>(x: u8) -> bool {
    (x == b' ') | (x == b'\t') | (x == b'\r') | (MERGE & (x == b'\n'))
}

/// Where the next run to replace may start, found with vectorized searches (a double space,
/// a tab or carriage return, and where lines merge a line break beside whitespace), each
/// search resumed only once the collapse has passed its last hit, so a text is searched
/// once per needle whatever its number of runs. Most texts have no hit and are read once per
/// needle, at memchr's speed.
struct Runs<'t, const MERGE: bool> {
    b: &'t [u8],
    /// The next hit of each search at or after the last `from` (`Some(usize::MAX)`: none
    /// left; `None`: not searched yet).
    double: Option<usize>,
    tab_cr: Option<usize>,
    line: Option<usize>,
}

fn double_space() -> &'static memchr::memmem::Finder<'static> {
    static DOUBLE_SPACE: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
    DOUBLE_SPACE.get_or_init(|| memchr::memmem::Finder::new(b"  "))
}

impl<'t, const MERGE: bool> Runs<'t, MERGE> {
    fn new(b: &'t [u8]) -> Self {
        Runs {
            b,
            double: None,
            tab_cr: None,
            line: None,
        }
    }

    /// The first offset at or after `from` where a run to replace may start (any offset inside
    /// the run; `collapse` finds its ends).
    fn next(&mut self, from: usize) -> Option<usize> {
        let b = self.b;
        let tail = b.get(from..)?;
        let stale = |hit: Option<usize>| hit.is_none_or(|h| h < from);
        if stale(self.double) {
            self.double = Some(double_space().find(tail).map_or(usize::MAX, |i| from + i));
        }
        if stale(self.tab_cr) {
            self.tab_cr = Some(memchr::memchr2(b'\t', b'\r', tail).map_or(usize::MAX, |i| from + i));
        }
        if MERGE && stale(self.line) {
            let near_space = |i: &usize| {
                b.get(i + 1).is_some_and(|&x| is_space::<true>(x)) || (*i > 0 && is_space::<true>(b[i - 1]))
            };
            self.line = Some(
                memchr::memchr_iter(b'\n', tail)
                    .map(|i| from + i)
                    .find(near_space)
                    .unwrap_or(usize::MAX),
            );
        }
        let hit = |h: Option<usize>| h.unwrap_or(usize::MAX);
        let at = hit(self.double)
            .min(hit(self.tab_cr))
            .min(if MERGE { hit(self.line) } else { usize::MAX });
        (at != usize::MAX).then_some(at)
    }
}

/// `t` with its runs of whitespace read as one space (see the module documentation), or
/// `None` when there is none to replace. Whitespace bytes are ASCII, never inside a
/// multi-byte character, so every cut below is a character boundary; the text between runs is
/// copied in whole slices.
fn collapse<const MERGE: bool>(t: &str) -> Option<String> {
    let b = t.as_bytes();
    let mut runs = Runs::<MERGE>::new(b);
    let mut at = runs.next(0)?;
    let mut out = String::with_capacity(t.len());
    let mut copied = 0;
    let mut floor = 0;
    loop {
        // The whole run: back to its first whitespace byte (a line break before two spaces
        // belongs to it), and on to its last.
        while at > floor && matches!(b[at - 1], b' ' | b'\t' | b'\r' | b'\n') {
            at -= 1;
        }
        let mut end = at;
        while end < b.len() && matches!(b[end], b' ' | b'\t' | b'\r' | b'\n') {
            end += 1;
        }
        // In a message run, a run that breaks the line stays as it is.
        if MERGE || !b[at..end].contains(&b'\n') {
            out.push_str(&t[copied..at]);
            out.push(' ');
            copied = end;
        }
        floor = end;
        // Every hit is whitespace, so `end > at`; `max` keeps the loop moving whatever happens.
        match runs.next(end.max(at + 1)) {
            Some(next) => at = next,
            None => break,
        }
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&t[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stderr(t: &str) -> String {
        for_rules(SignalKind::Stderr, t).unwrap_or_else(|| t.to_owned())
    }

    fn message(t: &str) -> String {
        for_rules(SignalKind::AcpMessage, t).unwrap_or_else(|| t.to_owned())
    }

    #[test]
    fn padding_and_wraps_read_as_one_space() {
        assert_eq!(
            stderr("limiting requests (not your     usage limit) · Rate limited"),
            "limiting requests (not your usage limit) · Rate limited"
        );
        assert_eq!(
            stderr("(not your usage\n     limit) · Rate limited"),
            "(not your usage limit) · Rate limited"
        );
        assert_eq!(stderr("a\tb\r\nc"), "a b c");
        assert_eq!(stderr("trailing \nnext"), "trailing next");
    }

    #[test]
    fn a_lone_line_break_and_single_spaces_stay_and_nothing_is_copied() {
        let t = "{\n\"error\": {\n\"code\": 429\n}\n}";
        assert_eq!(for_rules(SignalKind::Stderr, t), None);
        assert_eq!(for_rules(SignalKind::AcpMessage, "one two\n\nthree"), None);
    }

    #[test]
    fn message_runs_keep_their_lines() {
        assert_eq!(
            message("Here is the fix.\n\n  API Error:   Rate limited"),
            "Here is the fix.\n\n  API Error: Rate limited"
        );
    }

    #[test]
    fn http_bodies_are_left_alone() {
        assert_eq!(for_rules(SignalKind::Http, "{\n    \"error\":   {}\n}"), None);
    }

    #[test]
    fn runs_are_found_across_blocks_and_at_the_ends() {
        let block = "0123456789012345678901234567890123456789012345678901234567890123";
        for (t, want) in [
            ("", None),
            (" ", None),
            ("a b", None),
            ("a\nb", None),
            ("a  b", Some("a b")),
            ("a\t", Some("a ")),
            ("\ta", Some(" a")),
            ("a\n b", Some("a b")),
            ("a \nb", Some("a b")),
            ("a\n\nb", Some("a b")),
        ] {
            assert_eq!(collapse::<true>(t).as_deref(), want, "{t:?}");
        }
        // Runs far into a longer text.
        let t = format!("{block}  z");
        assert_eq!(collapse::<true>(&t), Some(format!("{block} z")));
        let t = format!("{}\n z", &block[..63]);
        assert_eq!(collapse::<true>(&t), Some(format!("{} z", &block[..63])));
        // Message runs: line breaks are not runs, and a run holding one stays.
        assert_eq!(collapse::<false>("a\n\nb"), None);
        assert_eq!(collapse::<false>("a  \n b  c").as_deref(), Some("a  \n b c"));
        assert_eq!(collapse::<false>("a  \nb"), None);
    }

    #[test]
    fn multi_byte_text_survives() {
        assert_eq!(stderr("⎿  API Error:  résumé  ✕"), "⎿ API Error: résumé ✕");
    }
}
