//! Secrets recognised by where they stand in a larger shape.
//!
//! - URL credentials: the user information before `@` in `scheme://user:pass@host`, whatever
//!   the host (a name, an IP address, `localhost`) and whatever the password holds; also in a
//!   JSON-escaped URL (`https:\/\/user:pass@host`).
//! - Query strings and fragments with parameters (`?key=...`, `?token=...&x=y`,
//!   `#access_token=...`), on absolute, relative, `wss://` and JSON-escaped URLs alike: the
//!   whole query goes, the path stays.
//! - Webhook paths (`hooks.slack.com/services/...`, `discord.com/api/webhooks/...`, any
//!   `/webhook/` or `/webhooks/` segment): the path after the marker is the secret.
//! - Armored blocks (`-----BEGIN ... -----` to the matching `-----END ...-----`, or to the end of
//!   the text when the end marker is cut off): PEM and PGP private keys, whole.
//! - Home directories (`/Users/NAME`, `/home/NAME`, `C:\Users\NAME`, escaped `C:\\Users\\NAME`):
//!   the user name.
//! - Resource paths naming an account (`projects/NAME`, `organizations/NAME`,
//!   `billingAccounts/NAME`, `subscriptions/NAME`, `tenants/NAME`, `accounts/NAME`): the name.

/// Every start of `needle` in `hay`. Texts here are short (an excerpt), so a scan for the
/// needle's first byte beats building a substring searcher per call.
pub(super) fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    memchr::memchr_iter(needle[0], hay).filter(move |&i| hay[i..].starts_with(needle))
}

/// Characters that end a URL or a path in running text.
fn ends_url(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`')
}

/// Appends the byte ranges of shaped secrets in `t` to `spans`.
pub(super) fn spans(t: &str, spans: &mut Vec<(usize, usize)>) {
    let b = t.as_bytes();
    userinfo(b, spans);
    queries(b, spans);
    webhooks(b, spans);
    armored(b, spans);
    homes(b, spans);
    collections(b, spans);
}

fn userinfo(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    let starts = memchr::memchr_iter(b':', b).filter_map(|i| {
        let rest = &b[i + 1..];
        if rest.starts_with(b"//") {
            Some(i + 3)
        } else if rest.starts_with(b"\\/\\/") {
            Some(i + 5)
        } else {
            None
        }
    });
    for start in starts {
        // The authority ends at the path, the query or the end of the URL; user information
        // ends at its last `@` (a password may hold `@`).
        let mut end = start;
        while end < b.len() && !ends_url(b[end]) && !matches!(b[end], b'/' | b'\\' | b'?' | b'#') {
            end += 1;
        }
        if let Some(at) = memchr::memrchr(b'@', &b[start..end]) {
            if at > 0 {
                spans.push((start, start + at));
            }
        }
    }
}

fn queries(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    for q in memchr::memchr2_iter(b'?', b'#', b) {
        let s = q + 1;
        let name = b[s..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'[' | b']' | b'%'))
            .count();
        if name == 0 || b.get(s + name) != Some(&b'=') {
            continue;
        }
        let mut e = s;
        while e < b.len() && !ends_url(b[e]) && !(b[e] == b'\\' && b.get(e + 1) == Some(&b'"')) {
            e += 1;
        }
        spans.push((s, e));
    }
}

fn webhooks(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    const MARKERS: &[&[u8]] = &[
        b"hooks.slack.com/services/",
        b"hooks.slack.com/workflows/",
        b"hooks.slack.com/triggers/",
        b"/api/webhooks/",
        b"/webhookb2/",
        b"/webhooks/",
        b"/webhook/",
    ];
    // Every marker holds `hook`: most texts have none.
    if find_all(b, b"hook").next().is_none() {
        return;
    }
    for m in MARKERS {
        for i in find_all(b, m) {
            let s = i + m.len();
            let mut e = s;
            while e < b.len() && !ends_url(b[e]) && !matches!(b[e], b'?' | b'#') {
                e += 1;
            }
            if e > s {
                spans.push((s, e));
            }
        }
    }
}

fn armored(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    for s in find_all(b, b"-----BEGIN ") {
        let body = s + b"-----BEGIN ".len();
        let e = memchr::memmem::find(&b[body..], b"-----END ").map_or(b.len(), |i| {
            let end_marker = body + i + b"-----END ".len();
            // Past the label to the closing dashes.
            memchr::memmem::find(&b[end_marker..], b"-----").map_or(b.len(), |j| end_marker + j + 5)
        });
        spans.push((s, e));
    }
}

fn homes(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    let mut next = memchr::memchr2(b'/', b'\\', b);
    while let Some(i) = next {
        let c = b[i];
        // A separator is `/` or a run of backslashes (`\`, or `\\` once JSON-escaped, ...).
        let sep_len = if c == b'\\' {
            b[i..].iter().take_while(|x| **x == b'\\').count()
        } else {
            1
        };
        let word_at = i + sep_len;
        for dir in [b"users".as_slice(), b"home"] {
            let w_end = word_at + dir.len();
            let same_sep = b
                .get(w_end..w_end + sep_len)
                .is_some_and(|s| s.iter().all(|x| *x == c))
                && b.get(w_end + sep_len) != Some(&c);
            if b.get(word_at..w_end).is_some_and(|w| w.eq_ignore_ascii_case(dir)) && same_sep {
                let s = w_end + sep_len;
                let mut e = s;
                while e < b.len() && !ends_url(b[e]) && !matches!(b[e], b'/' | b'\\' | b':' | b',' | b')') {
                    e += 1;
                }
                if e > s {
                    spans.push((s, e));
                }
            }
        }
        next = memchr::memchr2(b'/', b'\\', &b[word_at..]).map(|j| word_at + j);
    }
}

fn collections(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    const NAMES: &[&[u8]] = &[
        b"projects/",
        b"organizations/",
        b"folders/",
        b"billingaccounts/",
        b"accounts/",
        b"subscriptions/",
        b"tenants/",
    ];
    // Every name ends in `s/`.
    for i in memchr::memchr_iter(b'/', b).filter(|&i| i > 0 && b[i - 1].eq_ignore_ascii_case(&b's')) {
        for n in NAMES {
            let Some(s) = (i + 1).checked_sub(n.len()) else {
                continue;
            };
            if !b[s..=i].eq_ignore_ascii_case(n) || (s > 0 && b[s - 1].is_ascii_alphanumeric()) {
                continue;
            }
            let v = i + 1;
            let mut e = v;
            while e < b.len() && !ends_url(b[e]) && !matches!(b[e], b'/' | b',' | b')' | b'\\') {
                e += 1;
            }
            if e > v {
                spans.push((v, e));
            }
        }
    }
}
