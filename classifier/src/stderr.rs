//! Stderr lines grouped into the entries a person reads.
//!
//! A stderr line is not always a whole message. Terminals wrap long lines (Codex prints
//! `Stream disconnected before completion: Rate limit reached ... Requested 58487.` and, on the
//! next, indented line, `Please try again in 14.036s.`), agents pretty-print the provider's
//! JSON over many lines, and a private key arrives one base64 line at a time. Matching each
//! line alone would lose the timing, split the JSON into fragments that contradict each
//! other, and show a bare key line as an excerpt. So lines are grouped into *entries*:
//!
//! - a line that starts with whitespace continues the entry above it (the convention log
//!   collectors use for multi-line entries: stack traces, wrapped text);
//! - while a JSON bracket opened in the entry is still open (counted outside JSON strings, a
//!   string may span lines), every line belongs to it;
//! - from a `-----BEGIN ` line to its `-----END ` line, every line belongs to it;
//! - a box the agent drew (Gemini CLI frames its notices: `╭───╮`, `│ text │`, `╰───╯`) is
//!   one entry, from its first framed line to its bottom border, and its text is the text
//!   inside the frame: border lines are dropped, the `│` at either end of a line and the
//!   padding before it go, and the lines are joined with a space (the box wraps a sentence
//!   at its width, as a terminal does).
//!
//! An entry holds at most [`MAX_ENTRY_LINES`] lines and about `MAX_TEXT_BYTES` bytes; its
//! lines are joined with `\n`. A single-line entry borrows its line.

use crate::envelope::MAX_TEXT_BYTES;
use std::borrow::Cow;

/// Most lines in one entry.
pub(crate) const MAX_ENTRY_LINES: usize = 48;

/// The entries of a stderr item, in order.
pub(crate) fn entries<'a>(lines: &'a [Cow<'a, str>]) -> Vec<Cow<'a, str>> {
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let mut state = Open::default();
        state.feed(&lines[i]);
        let mut bytes = lines[i].len();
        // A box stays open until its bottom border.
        let mut boxed = frame(&lines[i]).is_some_and(|f| f != Frame::Bottom);
        let framed = boxed;
        let mut j = i + 1;
        while let Some(next) = lines.get(j) {
            let in_box = boxed && frame(next).is_some_and(|f| f != Frame::Top);
            let continues = state.is_open() || next.starts_with([' ', '\t']) || in_box;
            if !continues || j - i >= MAX_ENTRY_LINES || bytes + 1 + next.len() > MAX_TEXT_BYTES {
                break;
            }
            if in_box && frame(next) == Some(Frame::Bottom) {
                boxed = false;
            }
            state.feed(next);
            bytes += 1 + next.len();
            j += 1;
        }
        out.push(if framed {
            Cow::Owned(unframe(&lines[i..j]))
        } else if j == i + 1 {
            Cow::Borrowed(&*lines[i])
        } else {
            Cow::Owned(lines[i..j].join("\n"))
        });
        i = j;
    }
    out
}

/// The part of a drawn box a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `╭───╮`
    Top,
    /// `│ text │` (or a `├───┤` separator)
    Side,
    /// `╰───╯`
    Bottom,
}

/// Which part of a box `line` is, if any: its first character after indentation.
fn frame(line: &str) -> Option<Frame> {
    match line.trim_start().chars().next()? {
        '╭' | '┌' => Some(Frame::Top),
        '│' | '├' => Some(Frame::Side),
        '╰' | '└' => Some(Frame::Bottom),
        _ => None,
    }
}

/// Whether `c` draws a box (U+2500..U+257F).
fn is_box_drawing(c: char) -> bool {
    ('\u{2500}'..='\u{257f}').contains(&c)
}

/// The text inside a box's lines: borders dropped, side frames and their padding cut, the
/// lines joined with a space.
fn unframe(lines: &[Cow<'_, str>]) -> String {
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        let t = line.trim();
        if t.chars().all(|c| is_box_drawing(c) || c.is_whitespace()) {
            continue;
        }
        let t = t.strip_prefix('│').unwrap_or(t);
        let t = t.strip_suffix('│').unwrap_or(t).trim();
        if t.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(t);
    }
    out
}

/// What is still open at the end of the lines fed so far.
#[derive(Default)]
struct Open {
    /// JSON brackets opened and not closed, outside strings.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Inside a `-----BEGIN ...-----` block.
    armor: bool,
}

impl Open {
    fn is_open(&self) -> bool {
        self.depth > 0 || self.armor
    }

    fn feed(&mut self, line: &str) {
        let b = line.as_bytes();
        // Armor markers start with five dashes; most lines have none.
        if memchr::memchr_iter(b'-', b).any(|i| b[i..].starts_with(b"-----")) {
            if contains(b, b"-----BEGIN ") {
                self.armor = true;
            }
            if contains(b, b"-----END ") {
                self.armor = false;
            }
        }
        // Only lines with brackets or quotes change the JSON state.
        if memchr::memchr3(b'{', b'[', b'"', b).is_none() && self.depth == 0 && !self.in_string {
            return;
        }
        let mut i = 0;
        while i < b.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                // Inside a string only a quote or a backslash matters: jump to the next one.
                let Some(k) = memchr::memchr2(b'"', b'\\', &b[i..]) else {
                    return;
                };
                if b[i + k] == b'"' {
                    self.in_string = false;
                } else {
                    self.escaped = true;
                }
                i += k + 1;
                continue;
            }
            match b[i] {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth = self.depth.saturating_add(1),
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
            i += 1;
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memchr_iter(needle[0], hay).any(|i| hay[i..].starts_with(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(lines: &[&str]) -> Vec<String> {
        let owned: Vec<Cow<'_, str>> = lines.iter().map(|s| Cow::Borrowed(*s)).collect();
        entries(&owned).into_iter().map(Cow::into_owned).collect()
    }

    #[test]
    fn separate_lines_stay_separate() {
        assert_eq!(
            group(&["one", "two", "[INFO] three"]),
            ["one", "two", "[INFO] three"]
        );
    }

    #[test]
    fn an_indented_line_continues_the_entry_above() {
        let g = group(&[
            "  └ Stream disconnected before completion: Rate limit reached. Requested 58487.",
            "    Please try again in 14.036s.",
            "next entry",
        ]);
        assert_eq!(g.len(), 2);
        assert!(g[0].ends_with("Please try again in 14.036s."), "{g:?}");
    }

    #[test]
    fn pretty_printed_json_is_one_entry_even_unindented() {
        let g = group(&[
            "✕ [API Error: [{",
            "\"error\": {",
            "\"code\": 429,",
            "\"message\": \"Resource exhausted. Please refer to",
            "https://example.com/x for more details.\",",
            "\"status\": \"RESOURCE_EXHAUSTED\"",
            "}",
            "}",
            "]]",
            "Switching to the gemini-2.5-flash model.",
        ]);
        assert_eq!(g.len(), 2, "{g:?}");
        assert!(g[0].ends_with("]]"));
    }

    #[test]
    fn an_armored_block_is_one_entry() {
        let g = group(&[
            "-----BEGIN PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "Q0vZ4g==",
            "-----END PRIVATE KEY-----",
            "after",
        ]);
        assert_eq!(g.len(), 2, "{g:?}");
    }

    #[test]
    fn a_drawn_box_is_one_entry_of_the_text_inside_it() {
        let g = group(&[
            "╭──────────────────────────────────────────────╮",
            "│                                              │",
            "│ You have exhausted your capacity on this     │",
            "│ model. Your quota will reset after 2h5m.     │",
            "│ ● 1. Keep trying                             │",
            "╰──────────────────────────────────────────────╯",
            "after the box",
        ]);
        assert_eq!(
            g,
            [
                "You have exhausted your capacity on this model. Your quota will reset after 2h5m. ● 1. Keep trying",
                "after the box"
            ]
        );
        // A box whose top border scrolled away still holds together.
        let g = group(&[
            "│ Usage limit reached for all Pro models. │",
            "│ /stats for usage details │",
            "next",
        ]);
        assert_eq!(
            g,
            [
                "Usage limit reached for all Pro models. /stats for usage details",
                "next"
            ]
        );
    }

    #[test]
    fn an_entry_is_bounded() {
        let lines: Vec<Cow<'_, str>> = std::iter::once(Cow::Borrowed("{"))
            .chain((0..200).map(|i| Cow::Owned(format!("\"k{i}\": 1,"))))
            .collect();
        let e = entries(&lines);
        assert!(e.iter().all(|x| x.lines().count() <= MAX_ENTRY_LINES));
        assert_eq!(e.iter().map(|x| x.lines().count()).sum::<usize>(), lines.len());
    }
}
