//! Credential contexts: a name that says "what follows is a secret" redacts whatever follows.
//!
//! A key format nobody has seen yet still sits behind a name: a header (`Authorization:`,
//! `x-api-key:`, `Cookie:`, `Ocp-Apim-Subscription-Key:`), a JSON or dict key
//! (`"SecretAccessKey":"..."`, `'api_key' => '...'`, escaped `\"x-api-key\":\"...\"`), an
//! environment assignment (`NAME_API_KEY=`, `DB_PASSWORD=`, `..._AUTH_TOKEN=`), a phrase
//! (`Invalid API key: ...`, `API key provided: ...`) or an authorization scheme (`Bearer`,
//! `Basic`, `token`). So the value after such a name goes, whatever its shape. The quotes may
//! be HTML entities (`&quot;password&quot;:`) or percent-encoded (`%22password%22%3A`), and
//! the name may stand apart from its value: a sibling names it (`{"name": "DB_PASSWORD",
//! "value": ...}`, `<add key="ApiKey" value=...>`), an element holds it
//! (`<password>...</password>`), or a tuple, a call or a list pairs it (`('password', '...')`,
//! `[["x-api-key", "..."]]`). A name spelled with JSON escapes (`x\u002dapi\u002dkey`) is read
//! as it spells (`super::fold`).
//!
//! A name is a credential name when one of its *components* is a credential word: names are
//! split at `_`, `-`, `.` and camel-case humps, so `SecretAccessKey`, `OPENAI_API_KEY` and
//! `x-goog-api-key` qualify and `max_tokens`, `keyword` or `monkey` do not. Names of
//! identifiers (`account_id`, `"project": "..."`) redact their value too, when it is one.
//!
//! A credential word followed by a blank rather than a separator (`password Tr0ub4dor&3`,
//! `client secret ...`, `api key ...`, `password is ...`, `api_key - ...`,
//! `ANTHROPIC_API_KEY ...`) redacts the word after it when that word looks like a secret (a
//! digit, a symbol, a capital after lower case, long, or letters in no English order): prose
//! (`token limit exceeded`, `the key is missing`) stays. A flag (`--password hunter2`), a
//! quoted value after a password word (SQL's `WITH PASSWORD 'x'`) and a `.netrc` entry
//! (`machine h login u password p`) redact the value whatever it looks like, and so does
//! SQL's `IDENTIFIED BY`. A percent-encoded separator (`access_token%3D...`) counts as `=`.
//! A secret value that ends its line goes on to the next line's first word when that word
//! looks like a secret (a wrapped key).
//!
//! Commands that take a password in a short flag redact it (`mysql -pSECRET`, `sshpass -p
//! SECRET`, `redis-cli -a SECRET`, see `PASSWORD_FLAGS`), and so does Oracle's
//! `user/password@db` after an Oracle client's name.
//!
//! The value: an optional scheme word (`Bearer`, `Basic`, ...), then a quoted string up to its
//! closing quote (a quote escaped once, `\"`, is closed by `\"`; an unclosed quote runs to the
//! end), a list or tuple of scalars, or, unquoted, a header's value to the end of its line
//! (and its folded lines) and any other value to the next whitespace. A password's unquoted
//! value of plain words runs on to the end of its clause (a passphrase: `password: correct
//! horse battery staple`, see `phrase_end`), and a key printed in groups (`key: 4f9k 2m8x
//! q7v3`) takes its groups.

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
    /// A password: as [`Kind::Secret`], and an unquoted value that starts with a plain word
    /// runs over the plain words after it to the end of its clause (a passphrase: `password:
    /// correct horse battery staple`; see `phrase_end`).
    Phrase,
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
    } else if end > 0 && b[end - 1] == b';' {
        // A quote written as an HTML entity (`&quot;password&quot;:`).
        end -= HTML_QUOTES
            .iter()
            .find(|q| b[..end].ends_with(q.as_bytes()))
            .map_or(0, |q| q.len());
    }
    let mut name = name_ending_at(b, end)?;
    // `{"name": "DB_PASSWORD", "value": "..."}`, `<add key="ApiKey" value="..."/>`: a value
    // whose sibling names a credential.
    if name.1.eq_ignore_ascii_case(b"value") && named_by_sibling(b, name.0) {
        return Some(Kind::Secret);
    }
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
        && matches!(before.last(), Some(b' ' | b'='))
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
    // Every filler starts with one of these letters (most names do not).
    if !name
        .first()
        .is_some_and(|c| matches!(c | 0x20, b'p' | b'g' | b'u' | b's' | b'v' | b'i' | b'w'))
    {
        return false;
    }
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
    matches!(judge(name), Some(Kind::Secret | Kind::Phrase | Kind::Line))
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
            WordKind::Password => Some(Kind::Phrase),
            WordKind::Id => Some(Kind::Id { needs_digit: true }),
            WordKind::IdSuffix | WordKind::Other => None,
        };
    }
    let mut has_id_word = false;
    let mut has_id_suffix = false;
    let mut n = 0;
    let mut secret = false;
    let mut password = false;
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
            WordKind::Password => password = true,
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
    if password {
        Some(Kind::Phrase)
    } else if secret {
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

#[derive(Clone, Copy)]
enum WordKind {
    Credential,
    /// A word for a password (see [`Kind::Phrase`]).
    Password,
    Id,
    IdSuffix,
    Other,
}

/// What a lower-case name component is (a `match`: the compiler switches on length first).
fn word_kind(w: &[u8]) -> WordKind {
    match w {
        b"password" | b"passwd" | b"pwd" | b"pass" | b"passphrase" | b"pw" => WordKind::Password,
        b"key" | b"apikey" | b"token" | b"secret" | b"credential" | b"credentials" | b"cred" | b"creds"
        | b"authorization" | b"auth" | b"cookie" | b"bearer" | b"signature" | b"sig" | b"sas"
        | b"session" | b"jwt" | b"otp" => WordKind::Credential,
        b"account" | b"project" | b"org" | b"organization" | b"organisation" | b"tenant"
        | b"subscription" | b"customer" | b"user" | b"workspace" | b"billing" | b"team" => WordKind::Id,
        b"id" | b"ids" | b"number" | b"no" | b"num" | b"uuid" | b"name" | b"email" => WordKind::IdSuffix,
        _ => glued_credential(w),
    }
}

/// What a component that glues a credential word to others is (`dbpassword`, `PGPASSWORD`,
/// `clientsecret`, `authtoken`, `PHPSESSID`): a strong credential word anywhere in it, or
/// `token` at its end (not `tokens`: `maxtokens` counts tokens). Also the word for password
/// in a few other languages, glued or not (the non-ASCII ones folded, see `super::fold`).
fn glued_credential(w: &[u8]) -> WordKind {
    if w.len() < 5 {
        WordKind::Other
    } else if w.ends_with(b"token") {
        WordKind::Credential
    } else if !w.windows(3).any(|t| GLUED_STARTS.contains(&[t[0], t[1], t[2]])) {
        // No word of `GLUED` can start anywhere in it: most names (`message`, `status`).
        WordKind::Other
    } else {
        GLUED
            .iter()
            .find(|(word, _)| w.len() >= word.len() && w.windows(word.len()).any(|x| x == *word))
            .map_or(WordKind::Other, |(_, kind)| *kind)
    }
}

/// The first three bytes of every word of [`GLUED`]: where none occurs, none of them can.
const GLUED_STARTS: [[u8; 3]; 12] = {
    let mut out = [[0u8; 3]; 12];
    let mut n = 0;
    let mut i = 0;
    while i < GLUED.len() {
        let w = GLUED[i].0;
        let t = [w[0], w[1], w[2]];
        let mut seen = false;
        let mut k = 0;
        while k < n {
            if out[k][0] == t[0] && out[k][1] == t[1] && out[k][2] == t[2] {
                seen = true;
            }
            k += 1;
        }
        if !seen {
            out[n] = t;
            n += 1;
        }
        i += 1;
    }
    assert!(n == out.len(), "GLUED_STARTS holds every distinct start of GLUED");
    out
};

/// Words [`glued_credential`] finds within a component: for a password, in English and a few
/// other languages, and other credential words strong enough to name one glued to other
/// words.
const GLUED: &[(&[u8], WordKind)] = &[
    (b"password", WordKind::Password),
    (b"passwd", WordKind::Password),
    (b"passwort", WordKind::Password),
    (b"passphrase", WordKind::Password),
    (b"senha", WordKind::Password),
    (b"contrasena", WordKind::Password),
    (b"kennwort", WordKind::Password),
    (b"wachtwoord", WordKind::Password),
    (b"motdepasse", WordKind::Password),
    (b"secret", WordKind::Credential),
    (b"apikey", WordKind::Credential),
    (b"accesskey", WordKind::Credential),
    (b"privatekey", WordKind::Credential),
    (b"credential", WordKind::Credential),
    (b"sessid", WordKind::Credential),
    (b"sessionid", WordKind::Credential),
];

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
        b'[' => return list_after(b, i, kind, b']').map(|(s, e)| (if start < i { start } else { s }, e)),
        // A tuple of scalars (Python's `auth=('bob', 'hunter2')`): the same.
        b'(' => return list_after(b, i, kind, b')').map(|(s, e)| (if start < i { start } else { s }, e)),
        // A quote written as an HTML entity (`&quot;...&quot;`): to the same entity.
        b'&' => {
            let q = HTML_QUOTES.iter().find(|q| b[i..].starts_with(q.as_bytes()))?;
            let inner = i + q.len();
            let close = memchr::memmem::find(&b[inner..], q.as_bytes()).map_or(b.len(), |k| inner + k);
            return (close > inner)
                .then_some((if start < i { start } else { inner }, close))
                .filter(|_| kind_accepts(kind, &b[inner..close]));
        }
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
        _ if kind == Kind::Line => line_end(b, i),
        _ => {
            let word_end = i + b[i..].iter().take_while(|c| !c.is_ascii_whitespace()).count();
            let mut e = word_end;
            // Punctuation that closes the surrounding text is not the value's.
            while e > i
                && matches!(
                    b[e - 1],
                    b',' | b';' | b'.' | b')' | b']' | b'}' | b'>' | b'"' | b'\'' | b'`'
                )
            {
                e -= 1;
            }
            if matches!(kind, Kind::Secret | Kind::Phrase) && e > i {
                if e == word_end {
                    e = if kind == Kind::Phrase {
                        phrase_end(b, i, e)
                    } else {
                        groups_end(b, i, e)
                    };
                }
                e = continuation(b, e).unwrap_or(e);
            }
            e
        }
    };
    (end > i && kind_accepts(kind, &b[i..end])).then_some((start, end))
}

/// Quotes written as HTML entities (`&quot;password&quot;:&quot;...&quot;`).
const HTML_QUOTES: &[&str] = &["&quot;", "&#34;", "&#x22;", "&#39;", "&#x27;", "&apos;"];

/// The end of a header value starting at `i`: the end of its line, and of each line after it
/// that starts with a blank (a folded header, `obs-fold`; at most [`MAX_FOLDED_LINES`]).
fn line_end(b: &[u8], i: usize) -> usize {
    let to_eol = |k: usize| k + b[k..].iter().take_while(|c| **c != b'\n' && **c != b'\r').count();
    let mut e = to_eol(i);
    for _ in 0..MAX_FOLDED_LINES {
        let mut n = e;
        if b.get(n) == Some(&b'\r') {
            n += 1;
        }
        if b.get(n) != Some(&b'\n') || !matches!(b.get(n + 1), Some(b' ' | b'\t')) {
            break;
        }
        n += 1;
        while n < b.len() && matches!(b[n], b' ' | b'\t') {
            n += 1;
        }
        if n == b.len() || matches!(b[n], b'\n' | b'\r') {
            break;
        }
        e = to_eol(n);
    }
    e
}

/// The most folded lines [`line_end`] takes.
const MAX_FOLDED_LINES: usize = 4;

/// A password's unquoted value whose first word `b[i..e]` ends at a blank: when that word
/// is a plain word (letters that do not look like a secret, see [`secret_like`]), the plain
/// words after it to the end of the clause (a passphrase, `password: correct horse battery
/// staple`). The clause ends at the end of the line, at punctuation that ends a word (`, ;
/// . ! ?`, a closing bracket or quote), at a word that is not letters (`-h`, `user=bob`,
/// `/tmp`), or after [`MAX_PHRASE_WORDS`] words. A value that starts with a secret-looking
/// word (`Tr0ub4dor&3 rejected`) is that word. So text after `password:` in plain words is
/// taken for the password: `Invalid password: please try again.` loses its advice, never a
/// passphrase.
fn phrase_end(b: &[u8], i: usize, mut e: usize) -> usize {
    let plain = |w: &[u8]| w.iter().all(u8::is_ascii_alphabetic);
    if !plain(&b[i..e]) || secret_like(&b[i..e]) {
        return e;
    }
    for _ in 1..MAX_PHRASE_WORDS {
        let mut k = e;
        while k < b.len() && matches!(b[k], b' ' | b'\t') {
            k += 1;
        }
        if k == e || k == b.len() {
            break;
        }
        // A word ends at whitespace, at a double quote or a backtick (closing the string the
        // value stands in), or at an escape (`\n`, `\"` in a JSON string).
        let w_end = k + b[k..]
            .iter()
            .take_while(|c| !c.is_ascii_whitespace() && !matches!(c, b'\\' | b'"' | b'`'))
            .count();
        let mut we = w_end;
        while we > k
            && matches!(
                b[we - 1],
                b',' | b';' | b'.' | b'!' | b'?' | b')' | b']' | b'}' | b'>' | b'"' | b'\'' | b'`'
            )
        {
            we -= 1;
        }
        if we == k || !plain(&b[k..we]) {
            break;
        }
        e = we;
        if we < w_end || !matches!(b.get(w_end), Some(b' ' | b'\t')) {
            break;
        }
    }
    e
}

/// The most words [`phrase_end`] reads as one passphrase.
const MAX_PHRASE_WORDS: usize = 8;

/// A key printed in groups (`key: 4f9k 2m8x q7v3 ...`): when the value word `b[i..e]` is a
/// group of 4 to 8 letters and digits followed by a blank, the groups of the same length that
/// follow it (at least two, one of them holding a digit) belong to it.
fn groups_end(b: &[u8], i: usize, e: usize) -> usize {
    let n = e - i;
    let group = |k: usize| {
        b.get(k..k + n)
            .is_some_and(|g| g.iter().all(u8::is_ascii_alphanumeric))
            && b.get(k + n).is_none_or(|c| !c.is_ascii_alphanumeric())
    };
    if !(4..=8).contains(&n) || !group(i) {
        return e;
    }
    let (mut end, mut count, mut digit) = (e, 1, b[i..e].iter().any(u8::is_ascii_digit));
    while b.get(end) == Some(&b' ') && group(end + 1) && count < 16 {
        digit |= b[end + 1..end + 1 + n].iter().any(u8::is_ascii_digit);
        end += 1 + n;
        count += 1;
    }
    if count >= 3 && digit {
        end
    } else {
        e
    }
}

/// The elements of the list (or tuple) of scalars opened at `i` and closed by `close`, as one
/// range (from the first element to the last one's end), when `kind` accepts them; `None`
/// for an empty list, a list holding an object or a list, or one that does not close on its
/// line within [`MAX_LIST_BYTES`].
fn list_after(b: &[u8], i: usize, kind: Kind, close_byte: u8) -> Option<(usize, usize)> {
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
                _ if c == close_byte => {
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
/// word of prose: a digit, a symbol (not `- _ . '`), a capital after lower case (`PTsDSuFEhb`),
/// long and not a word of one case, or 8 letters or more that do not follow each other as in
/// English words (`jbkixvomgmqz`; see `tokens::english_bigrams`). `token limit exceeded`,
/// `password reset required`, `the key is missing` stay. A number needs 8 digits (`max
/// token 128000` stays).
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
        || (v.len() >= 8 && v.iter().all(u8::is_ascii_alphabetic) && !super::tokens::english_bigrams(v))
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
/// and a value that looks like a secret (see [`secret_like`]). The value goes whatever it
/// looks like when the word is a command-line flag (`--password hunter2`), when a password
/// word is followed by a quoted value (SQL's `WITH PASSWORD 'x'`) or stands in a `.netrc`
/// entry (`machine h login u password p`), and after SQL's `IDENTIFIED BY`. Called for every
/// blank right after a unit (see [`super::secret_spans`]).
#[inline]
pub(super) fn word_before_blank(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    if p < 3 {
        return;
    }
    // Every credential word ends in one of these three letters (any case); most words do not.
    let tail = [b[p - 3] | 0x20, b[p - 2] | 0x20, b[p - 1] | 0x20];
    if matches!(
        tail,
        [b'k', b'e', b'y']
            | [b'k', b'e', b'n']
            | [b'r', b'e', b't']
            | [b'o', b'r', b'd']
            | [b's', b'w', b'd']
            | [b'p', b'w', b'd']
            | [b'a', b's', b'e']
            | [b'i', b'a', b'l']
            | [b'a', b'l', b's']
    ) {
        credential_word_before_blank(b, p, tail, spans);
    } else if tail == *b" by" {
        identified_by(b, p, spans);
    }
}

/// [`word_before_blank`] once the three letters before the blank at `p` (`tail`, lower-cased)
/// may end a credential word.
#[inline(never)]
fn credential_word_before_blank(b: &[u8], p: usize, tail: [u8; 3], spans: &mut Vec<(usize, usize)>) {
    if !credential_word_ends_at(b, p) {
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
    let name = name_ending_at(b, p);
    let flag = name.is_some_and(|(_, n)| n.starts_with(b"-"));
    let password = matches!(
        tail,
        [b'o', b'r', b'd'] | [b's', b'w', b'd'] | [b'p', b'w', b'd'] | [b'a', b's', b'e']
    );
    if flag || password {
        if let Some(span) = quoted_on_line(b, v) {
            spans.push(span);
            return;
        }
    }
    let Some((s, mut e)) = word_value(b, v) else {
        return;
    };
    // A flag's value, unless it is another flag or a placeholder (`--api-key <KEY>`,
    // `--token $TOKEN`).
    let flag_value = flag && !matches!(b[v], b'-' | b'<' | b'[' | b'{' | b'$');
    let explicit = flag_value || (password && name.is_some_and(|(start, _)| in_netrc(b, start)));
    if explicit || secret_like(&b[s..e]) {
        e = continuation(b, e).unwrap_or(e);
        spans.push((s, e));
    }
}

/// The quoted string opened at `q` (`'...'`, `"..."`, or escaped, `\"...\"`), closed on its
/// line within [`MAX_LIST_BYTES`]: the range inside the quotes. `None` when no quote opens
/// at `q`.
fn quoted_on_line(b: &[u8], q: usize) -> Option<(usize, usize)> {
    let (quote, slashes, open_len) = quote_at(b, q)?;
    let inner = q + open_len;
    let window = &b[..b.len().min(inner + MAX_LIST_BYTES)];
    let close = closing_quote(window, inner, quote, slashes)?;
    let mut e = close;
    while slashes > 0 && e > inner && b[e - 1] == b'\\' {
        e -= 1;
    }
    (e > inner && memchr::memchr(b'\n', &b[inner..e]).is_none()).then_some((inner, e))
}

/// Whether the password word at `start` stands in a `.netrc` entry: `machine` or `login`
/// before it, on its line or the two before.
fn in_netrc(b: &[u8], start: usize) -> bool {
    let from = start.saturating_sub(MAX_ENTRY_BYTES);
    let before = &b[from..start];
    let lines = memchr::memrchr_iter(b'\n', before).nth(2).map_or(0, |i| i + 1);
    let before = &before[lines..];
    [b"login ".as_slice(), b"machine "]
        .iter()
        .any(|w| memchr::memmem::find_iter(before, w).any(|i| i == 0 || before[i - 1].is_ascii_whitespace()))
}

/// How far back [`in_netrc`] and the command-line detectors read, in bytes.
const MAX_ENTRY_BYTES: usize = 160;

/// SQL's `IDENTIFIED BY 'secret'` (also `IDENTIFIED WITH plugin BY ...`): the blank at `p`
/// follows `BY`.
#[inline(never)]
fn identified_by(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    let from = p.saturating_sub(64);
    let before = &b[from..p];
    let line = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    if !before[line..]
        .windows(11)
        .any(|w| w[..10].eq_ignore_ascii_case(b"identified") && matches!(w[10], b' ' | b'\t'))
    {
        return;
    }
    let mut v = p;
    while v < b.len() && matches!(b[v], b' ' | b'\t') {
        v += 1;
    }
    if let Some(span) = quoted_on_line(b, v).or_else(|| word_value(b, v)) {
        spans.push(span);
    }
}

/// Whether the `value` name starting at `start` has a sibling before it that names a
/// credential: `name`, `key` or `header` (any case) and a separator, then the credential
/// name, quoted or not (`{"Name": "DB_PASSWORD", "Value": ...}`, `- name: API_KEY` and
/// `value:` on the next line, `<add key="ApiKey" value=...`, `{"header": "x-api-key",
/// "value": ...}`).
fn named_by_sibling(b: &[u8], start: usize) -> bool {
    let from = start.saturating_sub(MAX_ENTRY_BYTES);
    // Back over what separates siblings: blanks, line breaks, `,`, `;`, quotes.
    let mut i = start;
    while i > from
        && matches!(
            b[i - 1],
            b' ' | b'\t' | b'\n' | b'\r' | b',' | b';' | b'"' | b'\'' | b'\\' | b'-'
        )
    {
        i -= 1;
    }
    // The sibling's value: a credential name.
    let Some((s, name)) = name_ending_at(b, i) else {
        return false;
    };
    if !matches!(judge(name), Some(Kind::Secret | Kind::Phrase | Kind::Line)) {
        return false;
    }
    // Its separator and its own name.
    let mut k = s;
    while k > from && matches!(b[k - 1], b' ' | b'\t' | b'"' | b'\'' | b'\\') {
        k -= 1;
    }
    if k == from || !matches!(b[k - 1], b':' | b'=') {
        return false;
    }
    k -= 1;
    while k > from && matches!(b[k - 1], b' ' | b'\t' | b'"' | b'\'' | b'\\') {
        k -= 1;
    }
    name_ending_at(b, k).is_some_and(|(_, n)| {
        n.eq_ignore_ascii_case(b"name") || n.eq_ignore_ascii_case(b"key") || n.eq_ignore_ascii_case(b"header")
    })
}

/// Commands whose short flag takes a password, and how: the value glued to the flag
/// (`mysql -pSECRET`, `7z x a.7z -pSECRET`), glued or after a blank (`sshpass -p SECRET`,
/// `redis-cli -a SECRET`, `zip -P SECRET`), after the user and a `%` (`smbclient -U
/// user%SECRET`), or the third word after the flags (`htpasswd -b[c] FILE USER SECRET`).
const PASSWORD_FLAGS: &[(&str, u8, FlagValue)] = &[
    ("mysql", b'p', FlagValue::Glued),
    ("mysqldump", b'p', FlagValue::Glued),
    ("mysqladmin", b'p', FlagValue::Glued),
    ("mysqlimport", b'p', FlagValue::Glued),
    ("mysqlcheck", b'p', FlagValue::Glued),
    ("mysqlshow", b'p', FlagValue::Glued),
    ("mariadb", b'p', FlagValue::Glued),
    ("mariadb-dump", b'p', FlagValue::Glued),
    ("mariadb-admin", b'p', FlagValue::Glued),
    ("7z", b'p', FlagValue::Glued),
    ("7za", b'p', FlagValue::Glued),
    ("7zr", b'p', FlagValue::Glued),
    ("rar", b'p', FlagValue::Glued),
    ("unrar", b'p', FlagValue::Glued),
    ("sshpass", b'p', FlagValue::Next),
    ("mongo", b'p', FlagValue::Next),
    ("mongosh", b'p', FlagValue::Next),
    ("mongodump", b'p', FlagValue::Next),
    ("mongorestore", b'p', FlagValue::Next),
    ("mongoexport", b'p', FlagValue::Next),
    ("mongoimport", b'p', FlagValue::Next),
    ("redis-cli", b'a', FlagValue::Next),
    ("zip", b'P', FlagValue::Next),
    ("unzip", b'P', FlagValue::Next),
    ("smbclient", b'U', FlagValue::AfterPercent),
    ("rpcclient", b'U', FlagValue::AfterPercent),
    ("htpasswd", b'b', FlagValue::ThirdWord),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum FlagValue {
    Glued,
    Next,
    AfterPercent,
    ThirdWord,
}

/// A short flag at `f` (its `-`, after a blank) that takes a password for the command its
/// line runs (see [`PASSWORD_FLAGS`]): the password goes. Called for every blank after a
/// unit that a `-` follows (see [`super::secret_spans`]).
pub(super) fn short_flag_at(b: &[u8], f: usize, spans: &mut Vec<(usize, usize)>) {
    let Some(&letter) = b.get(f + 1) else {
        return;
    };
    if !matches!(letter, b'p' | b'P' | b'a' | b'U' | b'b' | b'c' | b'B') {
        return;
    }
    // The flag's letters (`-p`, or a cluster such as `-bc`).
    let cluster = b[f + 1..].iter().take_while(|c| c.is_ascii_alphabetic()).count();
    let Some(how) = PASSWORD_FLAGS
        .iter()
        .filter(|(_, l, how)| {
            *l == letter || (*how == FlagValue::ThirdWord && b[f + 1..f + 1 + cluster].contains(l))
        })
        .find(|(cmd, _, _)| runs_command(b, f, cmd.as_bytes()))
        .map(|(_, _, how)| *how)
    else {
        return;
    };
    if how == FlagValue::ThirdWord {
        // Past the flags, then the file and the user: the password.
        let mut k = f;
        let mut words = 0;
        while k < b.len() && words < 3 {
            while k < b.len() && matches!(b[k], b' ' | b'\t') {
                k += 1;
            }
            let w = b[k..].iter().take_while(|c| !c.is_ascii_whitespace()).count();
            if w == 0 {
                return;
            }
            if b[k] != b'-' {
                words += 1;
                if words == 3 {
                    spans.push((k, k + w));
                }
            }
            k += w;
        }
        return;
    }
    let glued = f + 2;
    let value_at = match b.get(glued) {
        // `-p` alone: the value is the next word, unless the flag's value is optional.
        Some(b' ' | b'\t') if how != FlagValue::Glued => {
            let mut v = glued;
            while v < b.len() && matches!(b[v], b' ' | b'\t') {
                v += 1;
            }
            v
        }
        Some(c) if !c.is_ascii_whitespace() => glued,
        _ => return,
    };
    let span = quoted_on_line(b, value_at).or_else(|| {
        let e = value_at
            + b[value_at..]
                .iter()
                .take_while(|c| !c.is_ascii_whitespace())
                .count();
        (e > value_at).then_some((value_at, e))
    });
    let Some((mut s, e)) = span else {
        return;
    };
    if how == FlagValue::AfterPercent {
        let Some(pct) = memchr::memchr(b'%', &b[s..e]) else {
            return;
        };
        s += pct + 1;
    }
    if e > s && b[s] != b'-' {
        spans.push((s, e));
    }
}

/// Whether `cmd` runs before the flag at `f`: the command as a word of its own, or the last
/// part of a path (`/usr/bin/mysql`), within [`MAX_ENTRY_BYTES`] (a wrapped command line
/// goes on on the next line).
fn runs_command(b: &[u8], f: usize, cmd: &[u8]) -> bool {
    let before = &b[f.saturating_sub(MAX_ENTRY_BYTES)..f];
    memchr::memmem::find_iter(before, cmd).any(|i| {
        let end = i + cmd.len();
        (i == 0
            || matches!(
                before[i - 1],
                b' ' | b'\t' | b'\n' | b'/' | b'"' | b'\'' | b'`' | b'(' | b';' | b'|' | b'&' | b'$'
            ))
            && before.get(end).is_some_and(|c| c.is_ascii_whitespace())
    })
}

/// `('password', 'hunter2')`, `setenv("API_KEY", "...")`, a header as a pair in a list
/// (`[["x-api-key", "..."], ...]`, also printed over lines): a credential name quoted right
/// after the `(` or `[` at `i`, a `,`, and the value after it. Called for every `(` and `[`.
pub(super) fn tuple_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    // Blanks, and the line breaks and indentation of a pretty-printed list (bounded).
    let skip = |mut k: usize| {
        let end = b.len().min(k + 64);
        while k < end && matches!(b[k], b' ' | b'\t' | b'\n' | b'\r') {
            k += 1;
        }
        k
    };
    let q = skip(i + 1);
    let Some((name_start, name_end)) = quoted_on_line(b, q) else {
        return;
    };
    let name = &b[name_start..name_end];
    if name.len() > 96
        || !name
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        || !matches!(judge(name), Some(Kind::Secret | Kind::Phrase | Kind::Line))
    {
        return;
    }
    // Past the closing quote (escaped or not).
    let v = skip(name_end + b[name_end..].iter().take_while(|c| **c == b'\\').count() + 1);
    if b.get(v) != Some(&b',') {
        return;
    }
    let v = skip(v + 1);
    if let Some(span) = quoted_on_line(b, v).or_else(|| word_value(b, v)) {
        spans.push(span);
    }
}

/// `<password>...</password>`, `<ApiKey>...</ApiKey>`: the element's text, when its name is
/// a credential name. Called for every `/` after a `<` (the closing tag's), at `i`.
pub(super) fn xml_close_at(b: &[u8], i: usize, spans: &mut Vec<(usize, usize)>) {
    let name_len = b[i + 1..]
        .iter()
        .take(97)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'))
        .count();
    let name = &b[i + 1..i + 1 + name_len];
    if name.is_empty()
        || b.get(i + 1 + name_len) != Some(&b'>')
        || !matches!(judge(name), Some(Kind::Secret | Kind::Phrase | Kind::Line))
    {
        return;
    }
    // The text runs back from the `<` to the opening tag's `>`.
    let lt = i - 1;
    let from = lt.saturating_sub(MAX_LIST_BYTES);
    let Some(gt) = memchr::memrchr(b'>', &b[from..lt]).map(|k| from + k) else {
        return;
    };
    let open = memchr::memrchr(b'<', &b[from..gt]).map(|k| from + k);
    let opens_same = open.is_some_and(|o| {
        b.get(o + 1..o + 1 + name.len())
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    });
    if opens_same && gt + 1 < lt {
        spans.push((gt + 1, lt));
    }
}

/// Oracle's `user/password@db` (`sqlplus scott/tiger@orcl`, `jdbc:oracle:thin:scott/tiger@host`):
/// the password before the `@` at `at`, when the line names an Oracle client or `connect`.
/// Called for every `@`.
pub(super) fn connect_at(b: &[u8], at: usize, spans: &mut Vec<(usize, usize)>) {
    let from = at.saturating_sub(64);
    let mut slash = at;
    while slash > from && !matches!(b[slash - 1], b'/' | b' ' | b'\t' | b'\n' | b'"' | b'\'') {
        slash -= 1;
    }
    if slash == at || slash == from || b[slash - 1] != b'/' {
        return;
    }
    let user_end = slash - 1;
    let user = b[..user_end]
        .iter()
        .rev()
        .take(64)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'#'))
        .count();
    let user_start = user_end - user;
    if user == 0
        || (user_start > 0 && !matches!(b[user_start - 1], b' ' | b'\t' | b':' | b'"' | b'\'' | b'='))
    {
        return;
    }
    let line_from = user_start.saturating_sub(MAX_ENTRY_BYTES);
    let before = &b[line_from..user_start];
    let line = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    let before = &before[line..];
    const CLIENTS: &[&[u8]] = &[
        b"sqlplus",
        b"sqlldr",
        b"expdp",
        b"impdp",
        b"exp",
        b"imp",
        b"rman",
        b"dgmgrl",
        b"connect",
        b"conn",
        b"oracle:thin:",
        b"oracle:oci:",
    ];
    let named = CLIENTS.iter().any(|c| {
        before.windows(c.len()).enumerate().any(|(k, w)| {
            w.eq_ignore_ascii_case(c)
                && (k == 0 || !before[k - 1].is_ascii_alphanumeric())
                && before.get(k + c.len()).is_none_or(|n| !n.is_ascii_alphanumeric())
        })
    });
    if named {
        spans.push((slash, at));
    }
}

/// `access_token%3D...`, `password%3A...`: a credential name, a percent-encoded `=` or `:`
/// at `p` (the `%`), and whatever value follows, to the next `&`, blank or quote.
pub(super) fn at_percent_separator(b: &[u8], p: usize, spans: &mut Vec<(usize, usize)>) {
    // A percent-encoded quote around the name (`%22password%22%3A%22...%22`).
    let quoted = |at: usize| matches!(b.get(at..at + 3), Some(b"%22" | b"%27"));
    let end = if p >= 3 && quoted(p - 3) { p - 3 } else { p };
    let Some((_, name)) = name_ending_at(b, end) else {
        return;
    };
    if !matches!(judge(name), Some(Kind::Secret | Kind::Phrase | Kind::Line)) {
        return;
    }
    let mut v = p + 3;
    while b[v..].starts_with(b"%20") || b.get(v) == Some(&b'+') || quoted(v) {
        v += if b[v] == b'+' { 1 } else { 3 };
    }
    let mut e = v;
    while e < b.len()
        && !b[e].is_ascii_whitespace()
        && !matches!(b[e], b'&' | b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
        && !quoted(e)
    {
        e += 1;
    }
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
    fn every_filler_passes_the_first_letter_check() {
        for f in FILLERS {
            assert!(is_filler(f.as_bytes()), "{f}");
            assert!(is_filler(f.to_ascii_uppercase().as_bytes()), "{f}");
        }
        assert!(!is_filler(b"message"));
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
            let want = if name.to_ascii_lowercase().contains("password") {
                Kind::Phrase
            } else {
                Kind::Secret
            };
            assert_eq!(judge(name.as_bytes()), Some(want), "{name}");
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
