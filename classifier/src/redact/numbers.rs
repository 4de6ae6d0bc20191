//! Personal and payment numbers written in groups: phone numbers, payment cards, IBANs and
//! US social security numbers (a number of `MIN_ACCOUNT_DIGITS` digits or more written as
//! one unit already goes as an account number, see `tokens`).
//!
//! A *digit sequence* is digit groups joined by single blanks, `-` or `.`, maybe opened by
//! `+` or with a group in parentheses (`+1 (415) 555-0132`). It goes when it is:
//!
//! - international (`+` and 8 to 15 digits) or has an area code in parentheses (9 to 15
//!   digits): a phone number;
//! - a social security number (`123-45-6789`, `123 45 6789`);
//! - three groups or more of 2 to 6 digits, one of them 4 digits or more, 9 to 19 digits in
//!   all, joined by blanks or `-`: a card (`4111 1111 1111 1111`, `3782 822463 10005`) or a
//!   phone number (`415 555 0132`, `0151 1234 5678`);
//! - joined by dots only as a North American number is (`415.555.0132`); other dotted
//!   numbers are versions and addresses (`1.2.3`, `10.0.0.12`).
//!
//! A sequence glued to a letter, or followed by `:` (a time: `2026-11-30 08:00`), is not one.
//! Lists of statuses (`429 500 503`) have no group of 4 digits; dates have 8 digits.
//!
//! An IBAN (two capitals, two check digits, 11 to 30 letters and digits) goes whole or in
//! groups of four (`DE89 3704 0044 0532 0130 00`) when its ISO 7064 check (mod 97) holds.
//!
//! The detectors are called at the blank after a group of digits and at a digit after a
//! blank (see `super::secret_spans`), and for units that start with a digit or `+` (or, for
//! an IBAN, a capital), and read at most [`MAX_SEQUENCE`] bytes either way.

/// The most bytes of a digit sequence read either way from where it is visited.
const MAX_SEQUENCE: usize = 40;

/// The blank at `p` follows a group of digits: judges the digit sequence it belongs to, and
/// the IBAN whose first group may end there (`DE89 ...`).
pub(super) fn at_blank(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    // A sequence whose groups are joined by blanks is visited at each of them with a digit
    // after it (the last group needs no visit of its own; `-` joins units, visited whole).
    if b.get(p + 1).is_some_and(u8::is_ascii_digit) {
        if let Some(span) = sequence(b, p - 1) {
            spans.push(span);
        }
    }
    if p >= 4 && b[p - 4].is_ascii_uppercase() && b[p - 3].is_ascii_uppercase() {
        grouped_iban(b, p - 4, spans);
    }
}

/// A unit starting at `start` with a digit or `+`: judges the digit sequence it belongs to
/// (`555-0132` in `(415) 555-0132`, `+14155550132`).
pub(super) fn in_unit(b: &[u8], start: usize, spans: &mut Vec<(usize, usize)>) {
    if let Some(span) = sequence(b, start) {
        spans.push(span);
    }
}

/// A number after the blank before `i` whose first group is followed by a `.`
/// (`415.555.0132`, whose dots cut it into units too short to be visited as such).
#[inline]
pub(super) fn dotted_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    if b.get(i + 3) == Some(&b'.') && b[i..i + 3].iter().all(u8::is_ascii_digit) {
        if let Some(span) = sequence(b, i) {
            spans.push(span);
        }
    }
}

fn joiner(c: u8) -> bool {
    matches!(c, b' ' | b'-' | b'.')
}

fn in_sequence(c: u8) -> bool {
    c.is_ascii_digit() || joiner(c) || matches!(c, b'(' | b')' | b'+')
}

/// The digit sequence holding the byte at `i`, if it is a number that goes (see the module
/// documentation).
fn sequence(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let lo = i.saturating_sub(MAX_SEQUENCE);
    let hi = b.len().min(i + MAX_SEQUENCE);
    let mut s = i;
    while s > lo && in_sequence(b[s - 1]) {
        s -= 1;
    }
    let mut e = i;
    while e < hi && in_sequence(b[e]) {
        e += 1;
    }
    // Joiners and parentheses at either end belong to the text, a leading `+` or `(` and a
    // trailing `)` to the number.
    while s < e && !(b[s].is_ascii_digit() || b[s] == b'+' || b[s] == b'(') {
        s += 1;
    }
    while e > s && !b[e - 1].is_ascii_digit() {
        e -= 1;
    }
    let time = b.get(e) == Some(&b':') && b.get(e + 1).is_some_and(u8::is_ascii_digit);
    if e <= s || time || (s > 0 && is_word_byte(b[s - 1])) || b.get(e).is_some_and(|c| is_word_byte(*c)) {
        return None;
    }
    let seq = &b[s..e];
    let plus = seq[0] == b'+';
    // Groups of digits, and how they are joined.
    let mut groups = [0u8; 12];
    let mut n = 0usize;
    let (mut dots, mut others, mut parens) = (false, false, false);
    let mut run = 0u8;
    let mut prev = 0u8;
    for (k, &c) in seq.iter().enumerate() {
        if c.is_ascii_digit() {
            run = run.saturating_add(1);
        } else {
            if run > 0 {
                *groups.get_mut(n)? = run;
                n += 1;
                run = 0;
            }
            match c {
                // Two joiners in a row end the number (`) ` is one joiner).
                b' ' | b'-' | b'.' if joiner(prev) => return None,
                b'.' => dots = true,
                b' ' | b'-' => others = true,
                b'(' | b')' => parens = true,
                // A `+` past the start.
                _ if k > 0 => return None,
                _ => {}
            }
        }
        prev = c;
    }
    if run > 0 {
        *groups.get_mut(n)? = run;
        n += 1;
    }
    let groups = &groups[..n];
    let digits: usize = groups.iter().map(|g| usize::from(*g)).sum();
    let phone = (plus && (8..=15).contains(&digits)) || (parens && (9..=15).contains(&digits));
    let ssn = !dots && !parens && groups == [3, 2, 4];
    let grouped = !dots
        && !parens
        && n >= 3
        && groups.iter().all(|g| (2..=6).contains(g))
        && groups.iter().any(|g| *g >= 4)
        && (9..=19).contains(&digits);
    let dotted = dots && !others && !parens && groups == [3, 3, 4];
    (phone || ssn || grouped || dotted).then_some((s, e))
}

/// A letter, a digit or `_`: a number glued to one is part of a word (`v1`, `x86_64`).
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// An IBAN written whole (`DE89370400440532013000`): the unit `u` at `start`.
pub(super) fn iban_unit(u: &[u8], start: usize, spans: &mut Vec<(usize, usize)>) {
    if (15..=34).contains(&u.len())
        && iban_shape(u)
        && u.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && mod97(u.iter().copied())
    {
        spans.push((start, start + u.len()));
    }
}

/// Two capitals, then two digits.
fn iban_shape(u: &[u8]) -> bool {
    u.len() >= 4
        && u[0].is_ascii_uppercase()
        && u[1].is_ascii_uppercase()
        && u[2].is_ascii_digit()
        && u[3].is_ascii_digit()
}

/// An IBAN in groups of four whose first group starts at `s` (`DE89 3704 0044 ...`).
fn grouped_iban(b: &[u8], s: usize, spans: &mut Vec<(usize, usize)>) {
    if !iban_shape(&b[s..]) || (s > 0 && is_word_byte(b[s - 1])) {
        return;
    }
    // Groups of one to four capitals or digits, joined by single blanks; all but the last
    // of four.
    let mut e = s + 4;
    let mut chars = 4;
    while b.get(e) == Some(&b' ') && chars < 34 {
        let g = b[e + 1..]
            .iter()
            .take(5)
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            .count();
        if g == 0 || g > 4 || (e + 1 + g < b.len() && is_word_byte(b[e + 1 + g])) {
            break;
        }
        e += 1 + g;
        chars += g;
        if g < 4 {
            break;
        }
    }
    if (15..=34).contains(&chars) && mod97(b[s..e].iter().copied().filter(|c| *c != b' ')) {
        spans.push((s, e));
    }
}

/// The ISO 7064 check of an IBAN: the first four characters moved to the end, letters read
/// as 10 to 35, the number is 1 modulo 97.
fn mod97(chars: impl Iterator<Item = u8> + Clone) -> bool {
    let digit = |c: u8| {
        if c.is_ascii_digit() {
            u32::from(c - b'0')
        } else {
            u32::from(c - b'A') + 10
        }
    };
    let mut rem = 0u32;
    for c in chars.clone().skip(4).chain(chars.take(4)) {
        let v = digit(c);
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(t: &str) -> Vec<&str> {
        let b = t.as_bytes();
        let mut spans = Vec::new();
        for i in 0..b.len() {
            let starts = i == 0 || !is_word_byte(b[i - 1]);
            if b[i] == b' ' && i > 0 && b[i - 1].is_ascii_digit() {
                at_blank(b, i, &mut spans);
            }
            if starts && (b[i].is_ascii_digit() || b[i] == b'+') {
                in_unit(b, i, &mut spans);
            }
            if starts {
                let n = b[i..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
                iban_unit(&b[i..i + n], i, &mut spans);
            }
        }
        spans.sort_unstable();
        spans.dedup();
        spans.iter().map(|&(s, e)| &t[s..e]).collect()
    }

    #[test]
    fn grouped_personal_numbers_are_found() {
        for (t, n) in [
            ("call +1 415 555 0132 now", "+1 415 555 0132"),
            ("call +1-415-555-0132.", "+1-415-555-0132"),
            ("tel (415) 555-0132", "(415) 555-0132"),
            ("tel 415.555.0132", "415.555.0132"),
            ("+44 20 7946 0958", "+44 20 7946 0958"),
            ("m: +4915112345678", "+4915112345678"),
            ("0151 1234 5678", "0151 1234 5678"),
            ("card 4111 1111 1111 1111 declined", "4111 1111 1111 1111"),
            ("amex 3782 822463 10005", "3782 822463 10005"),
            ("ssn 123-45-6789", "123-45-6789"),
            ("ssn 123 45 6789.", "123 45 6789"),
            (
                "IBAN DE89 3704 0044 0532 0130 00 ok",
                "DE89 3704 0044 0532 0130 00",
            ),
            ("IBAN GB82 WEST 1234 5698 7654 32", "GB82 WEST 1234 5698 7654 32"),
            ("IBAN DE89370400440532013000", "DE89370400440532013000"),
        ] {
            assert!(found(t).contains(&n), "{t}: {:?}", found(t));
        }
    }

    #[test]
    fn versions_dates_times_and_statuses_are_not_numbers() {
        for t in [
            "at 2026-11-30 08:00:00Z",
            "2026-11-30T08:00:00Z",
            "version 1.2.3 and 10.0.0.12:8080",
            "retry on 429 500 503",
            "Limit 30000, Used 30000, Requested 58487",
            "claude-sonnet-4-5-20250929",
            "gemini-2.5-pro",
            "took 14.036s",
            "x86_64 1234 5678 9012",
            "DE89 3704 0044 0532 0130 01",
            "port 8080 pid 12345",
        ] {
            assert!(found(t).is_empty(), "{t}: {:?}", found(t));
        }
    }
}
