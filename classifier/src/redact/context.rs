//! Credential contexts: a name that says "what follows is a secret" redacts whatever follows.
//!
//! A key format nobody has seen yet still sits behind a name: a header (`Authorization:`,
//! `x-api-key:`, `Cookie:`, `Ocp-Apim-Subscription-Key:`), a JSON or dict key
//! (`"SecretAccessKey":"..."`, `'api_key' => '...'`, escaped `\"x-api-key\":\"...\"`), an
//! environment assignment (`NAME_API_KEY=`, `DB_PASSWORD=`, `..._AUTH_TOKEN=`), a phrase
//! (`Invalid API key: ...`, `API key provided: ...`) or an authorization scheme (`Bearer`,
//! `Basic`, `token`). So the value after such a name goes, whatever its shape.
//!
//! A name is a credential name when one of its *components* is a credential word: names are
//! split at `_`, `-`, `.` and camel-case humps, so `SecretAccessKey`, `OPENAI_API_KEY` and
//! `x-goog-api-key` qualify and `max_tokens`, `keyword` or `monkey` do not. Names of
//! identifiers (`account_id`, `"project": "..."`) redact their value too, when it is one.
//!
//! A credential word followed by a blank rather than a separator (`password Tr0ub4dor&3`,
//! `client secret ...`, `api key ...`, `password is ...`, `api_key - ...`,
//! `ANTHROPIC_API_KEY ...`) redacts the word after it when that word looks like a secret (a
//! digit, a symbol, a capital after lower case, or long): prose (`token limit exceeded`,
//! `the key is missing`) stays. A percent-encoded separator (`access_token%3D...`) counts as
//! `=`. A secret value that ends its line goes on to the next line's first word when that
//! word looks like a secret (a wrapped key).
//!
//! The value: an optional scheme word (`Bearer`, `Basic`, ...), then a quoted string up to its
//! closing quote (a quote escaped once, `\"`, is closed by `\"`; an unclosed quote runs to the
//! end), or, unquoted, a header's value to the end of its line and any other value to the next
//! whitespace.

/// Names whose value runs to the end of the line (HTTP header values).
const LINE_VALUE_NAMES: &[&str] = &["authorization", "proxy-authorization", "cookie", "set-cookie"];

/// Words that may stand between a name and its separator (`API key provided: ...`).
const FILLERS: &[&str] = &[
    "provided", "given", "used", "supplied", "passed", "value", "is", "was",
];

/// Schemes that may precede a credential value.
const SCHEMES: &[&str] = &[
    "bearer",
    "basic",
    "digest",
    "token",
    "negotiate",
    "apikey",
    "key",
    "sharedaccesssignature",
    "aws4-hmac-sha256",
];

/// The credential value named before the `:` or `=` at `p`, if any (`spans` gets its range).
/// Called for every `:` and `=` in the text, in any order.
pub(super) fn at_separator(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    // `://` is a URL, `::` a path, `==` a comparison or base64 padding.
    if b.get(p + 1)
        .is_some_and(|&c| c == b'/' || c == b':' || (b[p] == b'=' && c == b'='))
        || (b[p] == b':' && p > 0 && b[p - 1] == b':')
    {
        return;
    }
    let Some(kind) = name_before(b, p) else {
        return;
    };
    let mut v = p + 1;
    if b[p] == b'=' && b.get(v) == Some(&b'>') {
        v += 1;
    }
    // The value is scanned for contexts too (every separator is visited): `credentials:
    // password="a b"` holds a second context whose quoted value reaches further than the
    // first one's word.
    if let Some(span) = value_after(b, v, kind) {
        spans.push(span);
    }
}

/// What a name before a separator asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// A credential: the value goes whatever it is.
    Secret,
    /// A header whose value runs to the end of the line.
    Line,
    /// An identifier: the value goes when it looks like one.
    Id { needs_digit: bool },
}

/// The name that ends just before the separator at `p` (skipping a closing quote, escaped or
/// not, and blanks), judged; `None` when it is not a credential or identifier name.
fn name_before(b: &[u8], p: usize) -> Option<Kind> {
    let mut end = p;
    while end > 0 && matches!(b[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    if end > 0 && matches!(b[end - 1], b'"' | b'\'' | b'`') {
        end -= 1;
        while end > 0 && b[end - 1] == b'\\' {
            end -= 1;
        }
    }
    let mut name = name_ending_at(b, end)?;
    if is_filler(name.1) {
        // `API key provided:`: the name is the word before the filler.
        let mut e = name.0;
        while e > 0 && matches!(b[e - 1], b' ' | b'\t') {
            e -= 1;
        }
        name = name_ending_at(b, e)?;
    }
    // `curl -u admin:pw`, `--user admin:pw`, `--user=admin:pw`: the name is a user, and what
    // follows the `:` is the password (only `:` separates them).
    let before = &b[..name.0];
    if b[p] == b':'
        && [&b"-u "[..], b"--user ", b"--user=", b"--proxy-user "]
            .iter()
            .any(|f| before.ends_with(f))
    {
        return Some(Kind::Secret);
    }
    judge(name.1)
}

/// Whether a name is one of [`FILLERS`] (any case).
fn is_filler(name: &[u8]) -> bool {
    let mut buf = [0u8; 8];
    let Some(lower) = buf.get_mut(..name.len()) else {
        return false;
    };
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    FILLERS.iter().any(|f| *lower == *f.as_bytes())
}

/// The name characters ending at `end`: (start, name).
fn name_ending_at(b: &[u8], end: usize) -> Option<(usize, &[u8])> {
    static NAME_BYTE: [bool; 256] = {
        let mut t = [false; 256];
        let mut c = 0;
        while c < 256 {
            let b = c as u8;
            t[c] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
            c += 1;
        }
        t
    };
    let mut start = end;
    while start > 0 && NAME_BYTE[usize::from(b[start - 1])] {
        start -= 1;
    }
    (start < end && end - start <= 96).then(|| (start, &b[start..end]))
}

/// Whether a name (a JSON key) names a credential or a header whose value is one.
pub(super) fn is_credential_name(name: &[u8]) -> bool {
    matches!(judge(name), Some(Kind::Secret | Kind::Line))
}

fn judge(name: &[u8]) -> Option<Kind> {
    if matches!(name.len(), 6 | 10 | 13 | 19)
        && LINE_VALUE_NAMES
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    {
        return Some(Kind::Line);
    }
    // Most names (JSON keys) are one lower-case word: one component, compared as it is.
    if name.len() <= 16 && name.iter().all(u8::is_ascii_lowercase) {
        return match word_kind(name) {
            WordKind::Credential => Some(Kind::Secret),
            WordKind::Id => Some(Kind::Id { needs_digit: true }),
            WordKind::IdSuffix | WordKind::Other => None,
        };
    }
    let mut has_id_word = false;
    let mut has_id_suffix = false;
    let mut n = 0;
    let mut secret = false;
    // One pass over the name: its components (see `components`), each lower-cased into a
    // small buffer as it is read (no word is longer than 16 bytes).
    let mut word = [0u8; 16];
    let mut len = 0usize;
    let mut flush = |word: &[u8; 16], len: usize| {
        n += 1;
        if len > 16 {
            return;
        }
        match word_kind(&word[..len]) {
            WordKind::Credential => secret = true,
            WordKind::Id => has_id_word = true,
            WordKind::IdSuffix => has_id_suffix = true,
            WordKind::Other => {}
        }
    };
    let mut in_word = false;
    let mut prev = 0u8;
    let mut cur = name.first().map_or(0, |&c| case_kind(c));
    for i in 0..name.len() {
        let next = name.get(i + 1).map_or(0, |&c| case_kind(c));
        if is_component_boundary(prev, cur, next) && in_word {
            flush(&word, len);
            in_word = false;
        }
        if cur != 0 {
            if !in_word {
                in_word = true;
                len = 0;
            }
            if let Some(slot) = word.get_mut(len) {
                *slot = name[i].to_ascii_lowercase();
            }
            len += 1;
        }
        prev = cur;
        cur = next;
    }
    if in_word {
        flush(&word, len);
    }
    if secret {
        Some(Kind::Secret)
    } else if has_id_word && has_id_suffix {
        Some(Kind::Id { needs_digit: false })
    } else if has_id_word && n == 1 {
        Some(Kind::Id { needs_digit: true })
    } else {
        None
    }
}

const UPPER: u8 = 1;
const LOWER: u8 = 2;
const DIGIT: u8 = 4;

/// Whether a byte is an upper-case letter, a lower-case one, a digit (or none: 0).
fn case_kind(c: u8) -> u8 {
    static KIND: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut c = 0;
        while c < 256 {
            t[c] = match c as u8 {
                b'A'..=b'Z' => UPPER,
                b'a'..=b'z' => LOWER,
                b'0'..=b'9' => DIGIT,
                _ => 0,
            };
            c += 1;
        }
        t
    };
    KIND[usize::from(c)]
}

/// Whether a component of a name ends before a byte of kind `cur` (see [`case_kind`]),
/// given the kinds of the bytes around it (see `components`).
fn is_component_boundary(prev: u8, cur: u8, next: u8) -> bool {
    cur == 0 || (cur == UPPER && (prev & (LOWER | DIGIT) != 0 || (prev == UPPER && next == LOWER)))
}

enum WordKind {
    Credential,
    Id,
    IdSuffix,
    Other,
}

/// What a lower-case name component is (a `match`: the compiler switches on length first).
fn word_kind(w: &[u8]) -> WordKind {
    match w {
        b"key" | b"apikey" | b"token" | b"secret" | b"password" | b"passwd" | b"pwd" | b"pass"
        | b"passphrase" | b"credential" | b"credentials" | b"cred" | b"creds" | b"authorization"
        | b"auth" | b"cookie" | b"bearer" | b"signature" | b"sig" | b"sas" | b"session" | b"jwt" | b"otp"
        | b"pw" => WordKind::Credential,
        b"account" | b"project" | b"org" | b"organization" | b"organisation" | b"tenant"
        | b"subscription" | b"customer" | b"user" | b"workspace" | b"billing" | b"team" => WordKind::Id,
        b"id" | b"ids" | b"number" | b"no" | b"num" | b"uuid" | b"name" | b"email" => WordKind::IdSuffix,
        _ if glued_credential(w) => WordKind::Credential,
        _ => WordKind::Other,
    }
}

/// Whether a component glues a credential word to others (`dbpassword`, `PGPASSWORD`,
/// `clientsecret`, `authtoken`, `PHPSESSID`): a strong credential word anywhere in it, or
/// `token` at its end (not `tokens`: `maxtokens` counts tokens). Also the word for password
/// in a few other languages, glued or not.
fn glued_credential(w: &[u8]) -> bool {
    const STRONG: &[&[u8]] = &[
        b"password",
        b"passwd",
        b"passwort",
        b"passphrase",
        b"secret",
        b"apikey",
        b"accesskey",
        b"privatekey",
        b"credential",
        b"sessid",
        b"sessionid",
        b"senha",
        b"contrasena",
        b"kennwort",
        b"wachtwoord",
        b"motdepasse",
    ];
    w.len() >= 5
        && (w.ends_with(b"token")
            || STRONG
                .iter()
                .any(|s| w.len() >= s.len() && w.windows(s.len()).any(|x| x == *s)))
}

/// Calls `f` with each component of a name: split at non-alphanumerics, at a lower-case or
/// digit followed by an upper-case letter (`secretAccess`), and before the last upper-case
/// letter of an upper-case run followed by a lower-case one (`APIKey` -> `API`, `Key`).
#[cfg(test)]
pub(super) fn components(name: &[u8], mut f: impl FnMut(&[u8])) {
    component_bounds(name, |s, e| f(&name[s..e]));
}

/// [`components`] as byte ranges `(start, end)` of `name`.
#[cfg(test)]
fn component_bounds(name: &[u8], mut f: impl FnMut(usize, usize)) {
    let mut start = None::<usize>;
    let mut prev = 0u8;
    let mut cur = name.first().map_or(0, |&c| case_kind(c));
    for i in 0..name.len() {
        let next = name.get(i + 1).map_or(0, |&c| case_kind(c));
        if is_component_boundary(prev, cur, next) {
            if let Some(s) = start.take() {
                f(s, i);
            }
        }
        if cur != 0 && start.is_none() {
            start = Some(i);
        }
        prev = cur;
        cur = next;
    }
    if let Some(s) = start {
        f(s, name.len());
    }
}

/// The span of the value starting at or after `v` (blanks and up to one line break skipped).
fn value_after(b: &[u8], v: usize, kind: Kind) -> Option<(usize, usize)> {
    let mut i = v;
    let mut breaks = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        breaks += usize::from(b[i] == b'\n');
        if breaks > 1 || i - v > 16 {
            return None;
        }
        i += 1;
    }
    let start = i;
    // An optional scheme word and its blank belong to the value.
    let word_end = i + b[i..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'-')
        .count();
    if word_end > i
        && b.get(word_end).is_some_and(|c| *c == b' ' || *c == b'\t')
        && SCHEMES
            .iter()
            .any(|s| b[i..word_end].eq_ignore_ascii_case(s.as_bytes()))
        && kind != (Kind::Id { needs_digit: true })
    {
        i = word_end;
        while i < b.len() && matches!(b[i], b' ' | b'\t') {
            i += 1;
        }
    }
    let end = match b.get(i)? {
        // A nested object: its own names decide. A braced value that is not an object
        // (ODBC's `Pwd={Tr0ub;4dor}`) is the value, braces and all.
        b'{' => {
            let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
            if matches!(next, None | Some(b'"' | b'\'' | b'\\' | b'}' | b'{' | b'[')) {
                return None;
            }
            let close = i + 1 + memchr::memchr2(b'}', b'\n', &b[i + 1..b.len().min(i + 1 + MAX_LIST_BYTES)])?;
            if b[close] != b'}' || !kind_accepts(kind, &b[i + 1..close]) {
                return None;
            }
            return Some((start, close + 1));
        }
        // A list of scalars (`"api_key": ["..."]`, Go's `X-Api-Key:[...]`): every element is
        // the value. A list of objects or lists: their own names decide.
        b'[' => return list_after(b, i, kind).map(|(s, e)| (if start < i { start } else { s }, e)),
        _ if quote_at(b, i).is_some() => {
            let (q, slashes, open_len) = quote_at(b, i)?;
            let inner = i + open_len;
            let close = closing_quote(b, inner, q, slashes).unwrap_or(b.len());
            // `value\"`: the backslashes before an escaped closing quote are the quote's.
            let mut e = close;
            while slashes > 0 && e > inner && b[e - 1] == b'\\' {
                e -= 1;
            }
            return (e > inner)
                .then_some((if start < i { start } else { inner }, e))
                .filter(|_| kind_accepts(kind, &b[inner..e]));
        }
        _ if kind == Kind::Line => i + b[i..].iter().take_while(|c| **c != b'\n' && **c != b'\r').count(),
        _ => {
            let mut e = i + b[i..].iter().take_while(|c| !c.is_ascii_whitespace()).count();
            // Punctuation that closes the surrounding text is not the value's.
            while e > i
                && matches!(
                    b[e - 1],
                    b',' | b';' | b'.' | b')' | b']' | b'}' | b'>' | b'"' | b'\'' | b'`'
                )
            {
                e -= 1;
            }
            if kind == Kind::Secret && e > i {
                e = continuation(b, e).unwrap_or(e);
            }
            e
        }
    };
    (end > i && kind_accepts(kind, &b[i..end])).then_some((start, end))
}

/// The elements of the list of scalars opened at `i`, as one range (from the first element to
/// the last one's end), when `kind` accepts them; `None` for an empty list, a list holding an
/// object or a list, or one that does not close on its line within [`MAX_LIST_BYTES`].
fn list_after(b: &[u8], i: usize, kind: Kind) -> Option<(usize, usize)> {
    let from = i + 1;
    let window = &b[from..b.len().min(from + MAX_LIST_BYTES)];
    let mut close = None;
    let mut quote: Option<u8> = None;
    let mut k = 0;
    while k < window.len() {
        let c = window[k];
        if c == b'\\' {
            // An escaped byte, in a string or in escaped JSON (`[\"...\"]`): never a delimiter.
            k += 2;
            continue;
        }
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' | b'`' => quote = Some(c),
                b']' => {
                    close = Some(from + k);
                    break;
                }
                b'{' | b'[' | b'\n' | b'\r' => return None,
                _ => {}
            },
        }
        k += 1;
    }
    let close = close?;
    let mut s = from;
    while s < close && b[s].is_ascii_whitespace() {
        s += 1;
    }
    let mut e = close;
    while e > s && b[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    (e > s && kind_accepts(kind, &b[s..e])).then_some((s, e))
}

/// The longest list [`list_after`] reads as a value, in bytes.
const MAX_LIST_BYTES: usize = 512;

/// A secret value that ends its line at `e` may go on at the start of the next (a terminal
/// wraps a long key; stderr lines are joined with `\n` in one entry, and a JSON string
/// escapes the break as `\\n`): where that continuation ends, when the next line starts
/// (after its indentation) with a word that looks like a secret.
fn continuation(b: &[u8], e: usize) -> Option<usize> {
    let mut n = e;
    if b[..e].ends_with(b"\\n") {
        // A line break escaped in a JSON string (`key=abc\n  def`): the value ran over it.
    } else {
        if b.get(n) == Some(&b'\r') {
            n += 1;
        }
        if b.get(n) != Some(&b'\n') {
            return None;
        }
        n += 1;
    }
    while n < b.len() && matches!(b[n], b' ' | b'\t') {
        n += 1;
    }
    let (v, end) = word_value(b, n)?;
    secret_like(&b[v..end]).then_some(end)
}

/// The value word at `i`: up to whitespace, a quote or an escaped quote, without the
/// punctuation around it that belongs to the text (`(`, `'`, a closing `.` or `,`):
/// (start, end).
fn word_value(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let ends = |e: usize| {
        b[e].is_ascii_whitespace()
            || matches!(b[e], b'"' | b'`')
            || (b[e] == b'\\' && b.get(e + 1) == Some(&b'"'))
    };
    let mut e = i;
    while e < b.len() && !ends(e) {
        e += 1;
    }
    let mut s = i;
    while s < e && matches!(b[s], b'(' | b'[' | b'<' | b'\'') {
        s += 1;
    }
    while e > s
        && matches!(
            b[e - 1],
            b',' | b';' | b'.' | b')' | b']' | b'}' | b'>' | b'\'' | b':' | b'!' | b'?'
        )
    {
        e -= 1;
    }
    (e > s).then_some((s, e))
}

/// Whether a value after a blank (not after `:` or `=`) looks like a secret rather than a
/// word of prose: a digit, a symbol (not `- _ . '`), a capital after lower case (`PTsDSuFEhb`), or long
/// and not a word of one case (`token limit exceeded`, `password reset required`, `the key
/// is missing` stay). A number needs 8 digits (`max token 128000` stays).
fn secret_like(v: &[u8]) -> bool {
    // A URL or a path after the word is a reference, not the value (`get an API key
    // https://...`; its query and credentials are redacted as such).
    if v.len() < 6 || !v.is_ascii() || v[0] == b'/' || memchr::memmem::find(v, b"://").is_some() {
        return false;
    }
    if v.iter().all(u8::is_ascii_digit) {
        return v.len() >= 8;
    }
    let one_case_word = v
        .iter()
        .all(|c| c.is_ascii_lowercase() || matches!(c, b'-' | b'_'))
        || v.iter()
            .all(|c| c.is_ascii_uppercase() || matches!(c, b'-' | b'_'));
    v.iter()
        .any(|c| c.is_ascii_digit() || (c.is_ascii_punctuation() && !matches!(c, b'-' | b'_' | b'.' | b'\'')))
        || v.windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        || (v.len() >= 24 && !one_case_word)
}

/// Credential words whose value may follow a blank rather than `:` or `=`, as the last
/// component of a name (`password`, `client secret`, `api key`, `ANTHROPIC_API_KEY`).
const BLANK_VALUE_WORDS: &[&str] = &[
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "credential",
    "credentials",
];

/// Whether a credential word of [`BLANK_VALUE_WORDS`] ends at `p`, as a whole component of
/// its name (`api_key`, `apiKey`, `API key`; not `monkey`).
fn credential_word_ends_at(b: &[u8], p: usize) -> bool {
    BLANK_VALUE_WORDS.iter().any(|w| {
        let n = w.len();
        p >= n && b[p - n..p].eq_ignore_ascii_case(w.as_bytes()) && {
            let s = p - n;
            s == 0
                || !b[s - 1].is_ascii_alphanumeric()
                || ((b[s - 1].is_ascii_lowercase() || b[s - 1].is_ascii_digit()) && b[s].is_ascii_uppercase())
        }
    })
}

/// `password Tr0ub4dor&3`, `client secret ...`, `api key ...`, `password is ...`,
/// `api_key - ...`: a credential word, a blank (then maybe `is`, `was` or `-` and a blank),
/// and a value that looks like a secret (see [`secret_like`]). Called for every blank right
/// after a unit (see [`super::secret_spans`]).
pub(super) fn word_before_blank(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    // Every credential word ends in one of these three letters (any case); most words do not.
    if p < 3
        || !matches!(
            [b[p - 3] | 0x20, b[p - 2] | 0x20, b[p - 1] | 0x20],
            [b'k', b'e', b'y']
                | [b'k', b'e', b'n']
                | [b'r', b'e', b't']
                | [b'o', b'r', b'd']
                | [b's', b'w', b'd']
                | [b'p', b'w', b'd']
                | [b'a', b's', b'e']
                | [b'i', b'a', b'l']
                | [b'a', b'l', b's']
        )
        || !credential_word_ends_at(b, p)
    {
        return;
    }
    let skip = |mut i: usize| {
        while i < b.len() && matches!(b[i], b' ' | b'\t') {
            i += 1;
        }
        i
    };
    let mut v = skip(p);
    let filler = b[v..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic() || **c == b'-')
        .count();
    if filler > 0
        && b.get(v + filler).is_some_and(|c| *c == b' ' || *c == b'\t')
        && [b"is".as_slice(), b"was", b"-"]
            .iter()
            .any(|f| b[v..v + filler].eq_ignore_ascii_case(f))
    {
        v = skip(v + filler);
    }
    let Some((s, mut e)) = word_value(b, v) else {
        return;
    };
    if secret_like(&b[s..e]) {
        e = continuation(b, e).unwrap_or(e);
        spans.push((s, e));
    }
}

/// `access_token%3D...`, `password%3A...`: a credential name, a percent-encoded `=` or `:`
/// at `p` (the `%`), and whatever value follows, to the next `&`, blank or quote.
pub(super) fn at_percent_separator(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    let Some((_, name)) = name_ending_at(b, p) else {
        return;
    };
    if !matches!(judge(name), Some(Kind::Secret | Kind::Line)) {
        return;
    }
    let mut v = p + 3;
    while b[v..].starts_with(b"%20") || b.get(v) == Some(&b'+') {
        v += if b[v] == b'+' { 1 } else { 3 };
    }
    let e = v + b[v..]
        .iter()
        .take_while(|c| {
            !c.is_ascii_whitespace() && !matches!(c, b'&' | b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
        })
        .count();
    if e > v {
        spans.push((v, e));
    }
}

fn kind_accepts(kind: Kind, value: &[u8]) -> bool {
    match kind {
        Kind::Id { needs_digit: true } => value.iter().any(u8::is_ascii_digit),
        _ => true,
    }
}

/// A quote at `i`, possibly escaped by backslashes: (quote, backslashes, length).
fn quote_at(b: &[u8], i: usize) -> Option<(u8, usize, usize)> {
    let slashes = b[i..].iter().take_while(|c| **c == b'\\').count();
    let q = *b.get(i + slashes)?;
    matches!(q, b'"' | b'\'' | b'`').then_some((q, slashes, slashes + 1))
}

/// Where the string opened by `q` (escaped with `slashes` backslashes) closes: the first `q`
/// preceded by exactly `slashes` backslashes (for `slashes == 0`: by an even number).
fn closing_quote(b: &[u8], from: usize, q: u8, slashes: usize) -> Option<usize> {
    let mut at = from;
    while let Some(off) = memchr::memchr(q, b.get(at..)?) {
        let p = at + off;
        let before = b[..p].iter().rev().take_while(|c| **c == b'\\').count();
        let closes = if slashes == 0 {
            before % 2 == 0
        } else {
            before == slashes
        };
        if closes {
            return Some(p);
        }
        at = p + 1;
    }
    None
}

/// `Bearer <v>`, `Basic <v>`, `Digest <v>` and `token <v>` anywhere: the value after the
/// blank at `p` goes when the word before it is such a scheme. Only a blank right after a
/// letter can follow a scheme word, so callers need call it only there (at the end of a
/// unit, see [`super::secret_spans`]).
pub(super) fn scheme_before(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    // Most words are not schemes: `token` and `basic` start 5 bytes back with `t` or `b`,
    // `bearer` and `digest` 6 bytes back with `b` or `d` (any case).
    let starts = |back: usize, set: [u8; 2]| p >= back && set.contains(&(b[p - back] | 0x20));
    if !starts(5, [b't', b'b']) && !starts(6, [b'b', b'd']) {
        return;
    }
    // The word before the blank: 5 or 6 letters, not the end of a longer word.
    let w_start = p - b[..p]
        .iter()
        .rev()
        .take(7)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let word = &b[w_start..p];
    if !(5..=6).contains(&word.len()) || (w_start > 0 && b[w_start - 1].is_ascii_alphanumeric()) {
        return;
    }
    let min = if word.eq_ignore_ascii_case(b"token") {
        12
    } else if [b"bearer".as_slice(), b"basic", b"digest"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
    {
        6
    } else {
        return;
    };
    let mut v = p;
    while v < b.len() && matches!(b[v], b' ' | b'\t') {
        v += 1;
    }
    // A run of blanks is visited once, from its first blank.
    if b[p - 1] == b' ' || b[p - 1] == b'\t' {
        return;
    }
    let mut e = v + b[v..].iter().take_while(|c| !c.is_ascii_whitespace()).count();
    while e > v && matches!(b[e - 1], b',' | b';' | b'.' | b')' | b']' | b'}' | b'"' | b'\'') {
        e -= 1;
    }
    let value = &b[v..e];
    // A credential has a digit, a capital or a symbol; plain words ("Bearer token") stay.
    let credential_like = value.iter().any(|c| {
        c.is_ascii_digit() || c.is_ascii_uppercase() || matches!(c, b'_' | b'-' | b'.' | b'+' | b'/' | b'=')
    });
    if value.len() >= min && credential_like {
        spans.push((v, e));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        components(s.as_bytes(), |c| v.push(String::from_utf8_lossy(c).into_owned()));
        v
    }

    #[test]
    fn names_split_into_components() {
        assert_eq!(comps("SecretAccessKey"), ["Secret", "Access", "Key"]);
        assert_eq!(comps("OPENAI_API_KEY"), ["OPENAI", "API", "KEY"]);
        assert_eq!(comps("x-goog-api-key"), ["x", "goog", "api", "key"]);
        assert_eq!(comps("APIKey"), ["API", "Key"]);
        assert_eq!(comps("apiKey2"), ["api", "Key2"]);
        assert_eq!(comps("max_tokens"), ["max", "tokens"]);
    }

    #[test]
    fn only_credential_and_identifier_names_qualify() {
        for name in [
            "SecretAccessKey",
            "DB_PASSWORD",
            "GITHUB_AUTH_TOKEN",
            "Ocp-Apim-Subscription-Key",
            "x-api-key",
            "key",
            "apiKey",
            "client_secret",
            "AccountKey",
            "sig",
        ] {
            assert_eq!(judge(name.as_bytes()), Some(Kind::Secret), "{name}");
        }
        for name in [
            "max_tokens",
            "keyword",
            "monkey",
            "model",
            "type",
            "message",
            "status",
            "tokens",
        ] {
            assert_eq!(judge(name.as_bytes()), None, "{name}");
        }
        assert_eq!(judge(b"Cookie"), Some(Kind::Line));
        assert_eq!(judge(b"account_id"), Some(Kind::Id { needs_digit: false }));
        assert_eq!(judge(b"project"), Some(Kind::Id { needs_digit: true }));
    }
}
