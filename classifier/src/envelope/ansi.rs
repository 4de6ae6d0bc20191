//! Terminal escape sequences read out of stderr text.
//!
//! Agents log to stderr as they would to a terminal: Codex's `tracing` output colours every
//! level, target and field (`\x1b[2m2026-…\x1b[0m \x1b[31mERROR\x1b[0m …`). A person reading
//! the terminal sees the text between the escapes, and so must the rules (a literal or a JSON
//! object with a colour change inside it would not match) and the excerpt (escapes are noise,
//! and a log viewer could render them). So stderr lines are read without them, once, when the
//! envelope is built.
//!
//! Removed: CSI sequences (`ESC [`, parameters, intermediates, one final byte: colours, cursor
//! moves, erases), OSC strings (`ESC ]` to BEL or `ESC \`: titles, hyperlinks, whose text is
//! the link's label and stays), character set designations (`ESC ( B`), other two-byte escapes
//! (`ESC =`, `ESC M`), and a lone `ESC`. An unfinished sequence at the end of a line is dropped with its `ESC`.
//! Everything removed is ASCII, so what remains is valid UTF-8 without re-checking.

use std::borrow::Cow;

pub(super) const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// `text` without its terminal escape sequences; borrowed when it has none.
pub(super) fn strip(text: Cow<'_, str>) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let Some(first) = memchr::memchr(ESC, bytes) else {
        return text;
    };
    let mut out = String::with_capacity(text.len());
    let mut kept = 0; // start of the text not yet copied
    let mut at = first;
    loop {
        out.push_str(&text[kept..at]);
        kept = sequence_end(bytes, at);
        match memchr::memchr(ESC, &bytes[kept..]) {
            Some(i) => at = kept + i,
            None => break,
        }
    }
    out.push_str(&text[kept..]);
    Cow::Owned(out)
}

/// Where the escape sequence starting with the `ESC` at `at` ends (the first byte after it).
fn sequence_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    match b.get(i) {
        // CSI: parameter bytes, intermediate bytes, then one final byte.
        Some(b'[') => {
            i += 1;
            while b.get(i).is_some_and(|c| (0x30..=0x3f).contains(c)) {
                i += 1;
            }
            while b.get(i).is_some_and(|c| (0x20..=0x2f).contains(c)) {
                i += 1;
            }
            if b.get(i).is_some_and(|c| (0x40..=0x7e).contains(c)) {
                i += 1;
            }
            i
        }
        // OSC: up to BEL or ST (`ESC \`); unterminated, it runs to the end of the line. Its
        // payload is ASCII by the standard; a non-ASCII byte ends it early, so the cut is
        // always at a character boundary.
        Some(b']') => {
            i += 1;
            while let Some(&c) = b.get(i) {
                if c == BEL {
                    return i + 1;
                }
                if c == ESC {
                    return if b.get(i + 1) == Some(&b'\\') { i + 2 } else { i };
                }
                if !c.is_ascii() {
                    return i;
                }
                i += 1;
            }
            i
        }
        // nF escapes: intermediate bytes, then one final byte (`ESC ( B`: a character set).
        Some(c) if (0x20..=0x2f).contains(c) => {
            while b.get(i).is_some_and(|c| (0x20..=0x2f).contains(c)) {
                i += 1;
            }
            if b.get(i).is_some_and(|c| (0x30..=0x7e).contains(c)) {
                i += 1;
            }
            i
        }
        // Other two-byte escapes (`ESC =`, `ESC M`, `ESC 7`, ...).
        Some(c) if (0x30..=0x7e).contains(c) => i + 1,
        // A lone ESC.
        _ => i,
    }
}

#[cfg(test)]
mod tests {
    use super::strip;
    use std::borrow::Cow;

    fn s(t: &str) -> String {
        strip(Cow::Borrowed(t)).into_owned()
    }

    #[test]
    fn text_without_escapes_is_borrowed_unchanged() {
        assert!(matches!(
            strip(Cow::Borrowed("plain ✓ text")),
            Cow::Borrowed("plain ✓ text")
        ));
    }

    #[test]
    fn codex_tracing_colours_are_read_as_their_text() {
        let line = "\u{1b}[2m2026-12-03T07:58:45.651655Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m \u{1b}[2mcodex_acp::thread\u{1b}[0m\u{1b}[2m:\u{1b}[0m Unhandled error during turn: exceeded retry limit, last status: 429 Too Many Requests";
        assert_eq!(
            s(line),
            "2026-12-03T07:58:45.651655Z ERROR codex_acp::thread: Unhandled error during turn: exceeded retry limit, last status: 429 Too Many Requests"
        );
        assert_eq!(
            s("\u{1b}[1mconnection\u{1b}[0m\u{1b}[1m{\u{1b}[0m\u{1b}[3mname\u{1b}[0m\u{1b}[2m=\u{1b}[0m\"codex-acp\"\u{1b}[1m}\u{1b}[0m"),
            "connection{name=\"codex-acp\"}"
        );
    }

    #[test]
    fn every_kind_of_sequence_goes_and_the_rest_stays() {
        assert_eq!(s("a\u{1b}[38;5;208mb\u{1b}[0m"), "ab");
        assert_eq!(s("\u{1b}[2K\u{1b}[1Gdone"), "done");
        assert_eq!(s("\u{1b}]8;;https://x.example/\u{7}link\u{1b}]8;;\u{7}"), "link");
        assert_eq!(s("\u{1b}]0;title\u{1b}\\after"), "after");
        assert_eq!(s("\u{1b}(Bx\u{1b}=y\u{1b}Mz"), "xyz");
        assert_eq!(s("end\u{1b}"), "end");
        assert_eq!(s("end\u{1b}[31"), "end");
        assert_eq!(s("\u{1b}\u{1b}[0mé"), "é");
        assert_eq!(s("\u{1b}]8;;é"), "é");
        assert_eq!(s("\u{1b}[é"), "é");
    }
}
