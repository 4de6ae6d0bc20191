//! Folding: non-ASCII text read as the ASCII it stands for, before the detectors run.
//!
//! The detectors read ASCII (names, separators, units). Text that hides a secret's shape
//! behind other characters is folded first, and the ranges found in the folded text are
//! mapped back to the original:
//!
//! - spaces other than ASCII's (no-break, thin, ideographic, ...) become a space, so
//!   `password:\u{a0}hunter2` has its blank;
//! - invisible characters (zero-width space, joiner and non-joiner, word joiner, byte-order
//!   mark, soft hyphen) are dropped, so a key they cut is one unit again;
//! - full-width forms (`ｐａｓｓｗｏｒｄ：`, `＠`, `＝`) and other colons (`꞉`, `∶`) become ASCII;
//! - Latin letters with diacritics become their base letter (`contraseña`, `bücher.de`), and
//!   Cyrillic and Greek letters that look like Latin ones become those (`pаssword` with a
//!   Cyrillic `а`, a key salted with look-alikes);
//! - the word for password in a few scripts (`пароль`, `密码`, `パスワード`, `비밀번호`)
//!   becomes `password`;
//! - a JSON escape of an ASCII letter, digit or separator (`\u002d`, `\u0061`, `\u003a`)
//!   becomes that character, so `"x\u002dapi\u002dkey": ...` is the name it spells and
//!   `sk\u002dproj\u002d...` the key (quotes and backslashes stay escaped: they delimit),
//!   also with its backslash escaped again (`\\u002d`, JSON inside a JSON string).
//!
//! Only text with such a character or escape is folded (see `folds_at`, `has_escape`): ASCII
//! text without escapes, and text whose only non-ASCII characters are others (`·`, `✕`,
//! emoji, CJK prose), is read as it is.

/// What a character folds to.
enum Fold {
    /// An ASCII byte.
    Ascii(u8),
    /// Nothing (an invisible character).
    Drop,
}

/// How `c` folds, if it does.
fn fold_char(c: char) -> Option<Fold> {
    let ascii = |b: u8| Some(Fold::Ascii(b));
    match c {
        '\u{a0}' | '\u{1680}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ascii(b' '),
        '\u{ad}' | '\u{180e}' | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' => Some(Fold::Drop),
        '\u{ff01}'..='\u{ff5e}' => ascii((u32::from(c) - 0xff01 + 0x21) as u8),
        '\u{a789}' | '\u{2236}' | '\u{fe55}' | '\u{fe13}' => ascii(b':'),
        '\u{fe66}' => ascii(b'='),
        '\u{c0}'..='\u{ff}' => latin(LATIN_1[(u32::from(c) - 0xc0) as usize]),
        '\u{100}'..='\u{17f}' => latin(LATIN_EXTENDED_A[(u32::from(c) - 0x100) as usize]),
        _ => look_alike(c).map(Fold::Ascii),
    }
}

fn latin(b: u8) -> Option<Fold> {
    (b != b'_').then_some(Fold::Ascii(b))
}

/// The base letters of U+00C0 to U+00FF (`_`: not a letter, `×` and `÷`).
const LATIN_1: &[u8; 64] = b"AAAAAAACEEEEIIIIDNOOOOO_OUUUUYTsaaaaaaaceeeeiiiidnooooo_ouuuuyty";

/// The base letters of U+0100 to U+017F.
const LATIN_EXTENDED_A: &[u8; 128] =
    b"AaAaAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjJjKkkLlLlLlLlLlNnNnNnnNnOoOoOoOoRrRrRrSsSsSsSsTtTtTtUuUuUuUuUuUuWwYyYZzZzZzs";

/// Cyrillic and Greek letters drawn like a Latin one.
fn look_alike(c: char) -> Option<u8> {
    Some(match c {
        'а' | 'α' => b'a',
        'е' | 'ε' => b'e',
        'о' | 'ο' | 'σ' => b'o',
        'р' | 'ρ' => b'p',
        'с' => b'c',
        'у' | 'γ' => b'y',
        'х' | 'χ' => b'x',
        'і' | 'ι' => b'i',
        'ј' => b'j',
        'ѕ' => b's',
        'һ' => b'h',
        'ԁ' => b'd',
        'ԛ' => b'q',
        'ԝ' | 'ω' => b'w',
        'ν' => b'v',
        'κ' | 'к' => b'k',
        'τ' | 'т' => b't',
        'υ' => b'u',
        'А' | 'Α' => b'A',
        'В' | 'Β' => b'B',
        'Е' | 'Ε' => b'E',
        'К' | 'Κ' => b'K',
        'М' | 'Μ' => b'M',
        'Н' | 'Η' => b'H',
        'О' | 'Ο' => b'O',
        'Р' | 'Ρ' => b'P',
        'С' => b'C',
        'Т' | 'Τ' => b'T',
        'Х' | 'Χ' => b'X',
        'І' | 'Ι' => b'I',
        'Ј' => b'J',
        'Ѕ' => b'S',
        'Ү' | 'Υ' => b'Y',
        'Ζ' => b'Z',
        'Ν' => b'N',
        _ => return None,
    })
}

/// The word for password in scripts folding cannot spell in ASCII.
const PASSWORD_WORDS: &[&str] = &[
    "пароль",
    "Пароль",
    "ПАРОЛЬ",
    "密码",
    "密碼",
    "パスワード",
    "비밀번호",
];

/// Whether the character at byte `i` of `t` (a lead byte) is one folding changes.
pub(super) fn folds_at(t: &str, i: usize) -> bool {
    // Most non-ASCII characters in evidence (`·`, `✕`, box drawing, emoji) fold to nothing:
    // their first two bytes say so without decoding them.
    let b = t.as_bytes();
    let second = b.get(i + 1).copied().unwrap_or(0);
    let may_fold = match b[i] {
        0xc2 => matches!(second, 0xa0 | 0xad),
        0xc3..=0xc5 | 0xce | 0xcf | 0xd0 | 0xd1 | 0xd4 => true,
        0xd2 => matches!(second, 0xae | 0xbb),
        0xe1 => matches!(second, 0x9a | 0xa0),
        0xe2 => matches!(second, 0x80 | 0x81 | 0x88),
        0xe3 => matches!(second, 0x80 | 0x83),
        0xe5 => second == 0xaf,
        0xea => second == 0x9e,
        0xeb => second == 0xb9,
        0xef => matches!(second, 0xb8 | 0xb9 | 0xbb | 0xbc | 0xbd),
        _ => false,
    };
    may_fold
        && t.get(i..)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|c| fold_char(c).is_some() || PASSWORD_WORDS.iter().any(|w| w.starts_with(c)))
}

/// The ASCII byte the JSON escape `\uXXXX` at `i` of `b` stands for, and the escape's length,
/// when folding reads it: a letter, a digit, a blank or a separator a detector reads (not a
/// quote or a backslash, which delimit strings, nor a control character). The backslash may
/// be doubled (or more): JSON inside a JSON string escapes the inner escape's backslash.
pub(super) fn escape_at(b: &[u8], i: usize) -> Option<(u8, usize)> {
    let slashes = b.get(i..)?.iter().take(8).take_while(|&&c| c == b'\\').count();
    let e = b.get(i + slashes..i + slashes + 5)?;
    if slashes == 0 || e[0] != b'u' || e[1] != b'0' || e[2] != b'0' {
        return None;
    }
    let hex = |c: u8| char::from(c).to_digit(16);
    let c = u8::try_from(hex(e[3])? * 16 + hex(e[4])?).ok()?;
    (c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\') || c == b' ').then_some((c, slashes + 5))
}

/// Whether `b` holds a JSON escape folding reads (see [`escape_at`]).
pub(super) fn has_escape(b: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', b).any(|i| escape_at(b, i).is_some())
}

/// `t` folded, and for each byte of it the range of `t` it comes from.
pub(super) fn fold(t: &str) -> (String, Vec<(u32, u32)>) {
    let mut out = String::with_capacity(t.len());
    let mut from = Vec::with_capacity(t.len());
    let mut rest = t.char_indices().peekable();
    while let Some((i, c)) = rest.next() {
        let end = i + c.len_utf8();
        let pos = |i: usize, e: usize| {
            (
                u32::try_from(i).unwrap_or(u32::MAX),
                u32::try_from(e).unwrap_or(u32::MAX),
            )
        };
        if c == '\\' {
            if let Some((e, len)) = escape_at(t.as_bytes(), i) {
                out.push(char::from(e));
                from.push(pos(i, i + len));
                // The rest of the escape (backslashes, `u00XX`) is ASCII: a character a byte.
                for _ in 1..len {
                    rest.next();
                }
                continue;
            }
        }
        if c.is_ascii() {
            out.push(c);
            from.push(pos(i, end));
            continue;
        }
        if let Some(w) = PASSWORD_WORDS.iter().find(|w| t[i..].starts_with(**w)) {
            let e = i + w.len();
            out.push_str("password");
            from.extend(std::iter::repeat_n(pos(i, e), "password".len()));
            while rest.peek().is_some_and(|(k, _)| *k < e) {
                rest.next();
            }
            continue;
        }
        match fold_char(c) {
            Some(Fold::Ascii(b)) => {
                out.push(char::from(b));
                from.push(pos(i, end));
            }
            Some(Fold::Drop) => {}
            None => {
                out.push(c);
                from.extend(std::iter::repeat_n(pos(i, end), c.len_utf8()));
            }
        }
    }
    (out, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_reads_what_the_characters_stand_for() {
        for (t, f) in [
            ("password:\u{a0}x", "password: x"),
            ("ｐａｓｓｗｏｒｄ：ｘ", "password:x"),
            ("ab\u{200b}cd\u{ad}ef", "abcdef"),
            ("p\u{430}ssword", "password"),
            ("contraseña büro", "contrasena buro"),
            ("密码：x", "password:x"),
            ("пароль: x", "password: x"),
            ("日本語 · ✕", "日本語 · ✕"),
            ("\"x\\u002dapi\\u002dKey\":1", "\"x-api-Key\":1"),
            ("{\\\"\\\\u0070\\\\u0077\\\":1", "{\\\"pw\\\":1"),
            (
                "\\u0041\\u0075th: \\u0022q\\u005c \\u00e9 \\u001f \\u12",
                "Auth: \\u0022q\\u005c \\u00e9 \\u001f \\u12",
            ),
        ] {
            assert_eq!(fold(t).0, f, "{t}");
            let (folded, from) = fold(t);
            assert_eq!(folded.len(), from.len());
        }
        assert!(LATIN_1.len() == 64 && LATIN_EXTENDED_A.len() == 128);
        assert!(folds_at("a\u{a0}", 1));
        assert!(has_escape(br"a\u002db") && has_escape(br"\u0020"));
        assert!(!has_escape(br"a\u0022b \u005c \u00e9 \u002 \n"));
        assert!(!folds_at("a·", 1));
        // Every character that folds passes the first-bytes filter.
        for c in (0x80..0x10000).filter_map(char::from_u32) {
            let t = c.to_string();
            let folds = fold_char(c).is_some() || PASSWORD_WORDS.iter().any(|w| w.starts_with(c));
            assert_eq!(folds_at(&t, 0), folds, "U+{:04X}", u32::from(c));
        }
    }
}
