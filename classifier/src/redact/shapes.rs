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
//! - Home directories (`/Users/NAME`, `/home/NAME`, `C:\Users\NAME`, escaped `C:\\Users\\NAME`
//!   and `\/home\/NAME`, percent-encoded `%2Fhome%2FNAME`, `~NAME/`): the user name, blanks
//!   and all (`/Users/Alice Smith/`).
//! - Resource paths naming an account (`projects/NAME`, `organizations/NAME`,
//!   `billingAccounts/NAME`, `subscriptions/NAME`, `tenants/NAME`, `accounts/NAME`): the name.

use memchr::memmem::Finder;
use std::sync::OnceLock;

/// Every start of `needle` in `hay`. Texts here are short (an excerpt), so a scan for the
/// needle's first byte beats building a substring searcher per call.
pub(super) fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    memchr::memchr_iter(needle[0], hay).filter(move |&i| hay[i..].starts_with(needle))
}

/// Characters that end a URL or a path in running text.
fn ends_url(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`')
}

/// The URL credentials after the `:` at `i`, if it starts `://` (or `:\/\/`). Called for
/// every `:` of the text, in any order.
pub(super) fn userinfo_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    let rest = &b[i + 1..];
    let start = if rest.starts_with(b"//") {
        i + 3
    } else if rest.starts_with(b"\\/\\/") {
        i + 5
    } else {
        return;
    };
    // The authority ends at the path, the query or the end of the URL; user information
    // ends at its last `@` (a password may hold `@`).
    let mut end = start;
    while end < b.len() && !ends_url(b[end]) && !matches!(b[end], b'/' | b'\\' | b'?' | b'#') {
        end += 1;
    }
    let at = memchr::memrchr(b'@', &b[start..end]).or_else(|| {
        // A password may hold an unencoded `/ ? #` (`redis://:pa#ss@cache`): then a `:` comes
        // before an `@` further on in the URL (read up to `MAX_USERINFO_BYTES` on).
        let limit = b.len().min(end + MAX_USERINFO_BYTES);
        let url_end = end + b[end..limit].iter().take_while(|c| !ends_url(**c)).count();
        let at = memchr::memchr(b'@', &b[end..url_end])? + (end - start);
        b[start..start + at].contains(&b':').then_some(at)
    });
    if let Some(at) = at.filter(|&at| at > 0) {
        spans.push((start, start + at));
    }
}

/// How far past the authority [`userinfo_at`] looks for the `@` of a password holding `/ ? #`.
const MAX_USERINFO_BYTES: usize = 256;

/// The query or fragment parameters after the `?` or `#` at `q`, if a `name=` follows it.
/// Called for every `?` and `#`, in any order.
pub(super) fn query_at(b: &[u8], q: usize, spans: &mut Vec<(usize, usize)>) {
    let s = q + 1;
    let name = b[s..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'[' | b']' | b'%'))
        .count();
    if name == 0 || b.get(s + name) != Some(&b'=') {
        return;
    }
    let mut e = s;
    while e < b.len() && !ends_url(b[e]) && !(b[e] == b'\\' && b.get(e + 1) == Some(&b'"')) {
        e += 1;
    }
    spans.push((s, e));
}

/// Webhook paths and armored blocks: found by substring search over the whole text (they are
/// rare, and a search for their markers skips the rest).
pub(super) fn whole(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    webhooks(b, spans);
    armored(b, spans);
}

/// A searcher built once: `memmem::find` would build one per call.
fn finder(cell: &'static OnceLock<Finder<'static>>, needle: &'static [u8]) -> &'static Finder<'static> {
    cell.get_or_init(|| Finder::new(needle))
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
    // Every marker holds `hook`: most texts have none (and few have a `k`).
    if !memchr::memchr_iter(b'k', b).any(|i| i >= 3 && &b[i - 3..i] == b"hoo") {
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
    static END: OnceLock<Finder<'static>> = OnceLock::new();
    // Found by its `B`, which few texts have.
    let begins = memchr::memchr_iter(b'B', b)
        .filter(|&i| i >= 5 && b[i - 5..].starts_with(b"-----BEGIN "))
        .map(|i| i - 5);
    for s in begins {
        let body = s + b"-----BEGIN ".len();
        let e = finder(&END, b"-----END ").find(&b[body..]).map_or(b.len(), |i| {
            let end_marker = body + i + b"-----END ".len();
            // Past the label to the closing dashes.
            memchr::memmem::find(&b[end_marker..], b"-----").map_or(b.len(), |j| end_marker + j + 5)
        });
        spans.push((s, e));
    }
}

/// The user name after a home directory that the separator at `i` opens (`/Users/NAME`,
/// `\\home\\NAME`, JSON's `\\/home\\/NAME`, ...). A separator is `/`, a run of backslashes, or
/// backslashes and a `/`: call this for every `/` and for the first backslash of every run,
/// in any order. A name may hold blanks (`/Users/Alice Smith/Documents`) when a separator
/// follows its last word.
pub(super) fn home_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    let c = b[i];
    // A separator is `/` or a run of backslashes (`\\`, or `\\\\` once JSON-escaped, ...),
    // maybe closed by a `/` (`\\/`, a JSON-escaped slash).
    let mut sep_len = if c == b'\\' {
        b[i..].iter().take_while(|x| **x == b'\\').count()
    } else {
        1
    };
    if c == b'\\' && b.get(i + sep_len) == Some(&b'/') {
        sep_len += 1;
    }
    let word_at = i + sep_len;
    // Most separators open neither directory.
    if !matches!(b.get(word_at), Some(b'u' | b'U' | b'h' | b'H')) {
        return;
    }
    let sep = &b[i..i + sep_len];
    for dir in [b"users".as_slice(), b"home"] {
        let w_end = word_at + dir.len();
        let same_sep = b.get(w_end..w_end + sep_len).is_some_and(|s| s == sep)
            && b.get(w_end + sep_len) != Some(&sep[sep_len - 1]);
        if b.get(word_at..w_end).is_some_and(|w| w.eq_ignore_ascii_case(dir)) && same_sep {
            let s = w_end + sep_len;
            let e = user_name_end(b, s);
            if e > s {
                spans.push((s, e));
            }
        }
    }
}

/// Where a user name starting at `s` ends: at a separator, a quote or the end of the path;
/// past blanks when the words after them lead to a separator (`Alice Smith/`).
fn user_name_end(b: &[u8], s: usize) -> usize {
    let stops = |c: u8| ends_url(c) || matches!(c, b'/' | b'\\' | b':' | b',' | b')' | b'%');
    let mut e = s;
    while e < b.len() && !stops(b[e]) {
        e += 1;
    }
    // `Alice Smith/`: words joined by single blanks, the last one glued to a separator.
    let mut k = e;
    while b.get(k) == Some(&b' ') && k - s < MAX_USER_NAME {
        let w = b[k + 1..].iter().take_while(|c| !stops(**c)).count();
        if w == 0 {
            break;
        }
        k += 1 + w;
        if matches!(b.get(k), Some(b'/' | b'\\')) {
            e = k;
            break;
        }
    }
    e
}

/// The longest user name with blanks [`user_name_end`] reads, in bytes.
const MAX_USER_NAME: usize = 64;

/// `~alice/...`: the user name after the `~` at `i`, when it stands at the start of a path
/// and a separator follows. Called for every `~`.
pub(super) fn tilde_home_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    if i > 0
        && !matches!(
            b[i - 1],
            b' ' | b'\t' | b'\n' | b'"' | b'\'' | b'`' | b'=' | b':' | b'(' | b'['
        )
    {
        return;
    }
    let s = i + 1;
    let n = b[s..]
        .iter()
        .take(MAX_USER_NAME)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        .count();
    if n > 0 && b[s].is_ascii_alphabetic() && matches!(b.get(s + n), Some(b'/' | b'\\')) {
        spans.push((s, s + n));
    }
}

/// A percent-encoded home directory (`%2Fhome%2FNAME`, `%2FUsers%2FNAME`): the user name
/// after the `%2F` at `i`. Called for every `%2F` (any case).
pub(super) fn encoded_home_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    let sep = |k: usize| b.get(k..k + 3).is_some_and(|x| x.eq_ignore_ascii_case(b"%2F"));
    for dir in [b"users".as_slice(), b"home"] {
        let w = i + 3;
        let w_end = w + dir.len();
        if b.get(w..w_end).is_some_and(|x| x.eq_ignore_ascii_case(dir)) && sep(w_end) {
            let s = w_end + 3;
            let mut e = s;
            while e < b.len() && !ends_url(b[e]) && !matches!(b[e], b'%' | b'/' | b'&' | b'\\') {
                e += 1;
            }
            if e > s {
                spans.push((s, e));
            }
        }
    }
}

/// The name after an account collection (`projects/NAME`, ...) whose `s/` ends at the `/` at
/// `i`. Called for every `/` after an `s` or `S`, in any order.
pub(super) fn collection_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    const NAMES: &[&[u8]] = &[
        b"projects/",
        b"organizations/",
        b"folders/",
        b"billingaccounts/",
        b"accounts/",
        b"subscriptions/",
        b"tenants/",
    ];
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
