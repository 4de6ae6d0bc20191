//! Redaction: what may leave the classifier as `safe_excerpt`.
//!
//! Excerpts reach the database, the API and the UI, so they are redacted *before* they are
//! cut: at most [`REDACT_WINDOW_BYTES`] of the evidence is redacted, whitespace is collapsed,
//! and the result is cut to [`MAX_EXCERPT_CHARS`]. Removed: API keys and tokens of every
//! common shape, bearer/basic credentials, JWTs, e-mail addresses, URL query strings, values
//! of secret-looking keys, organisation/account/project/user IDs, UUIDs, long digit runs
//! (account numbers), long hex blobs and home-directory user names. Each becomes
//! `[redacted]`; a URL keeps its scheme, host and path. One `regex` alternation does the work,
//! in linear time.

use regex::Regex;
use std::sync::OnceLock;

/// The longest excerpt, in characters.
pub const MAX_EXCERPT_CHARS: usize = 240;
/// How much evidence is redacted before the excerpt is cut.
pub const REDACT_WINDOW_BYTES: usize = 1024;

const MARK: &str = "[redacted]";

/// The secret shapes, most specific first (the alternation is leftmost-first).
const PATTERNS: &[&str] = &[
    // URLs: the query string goes, the path stays (it is redacted by the patterns below).
    r#"(?i)(?P<url>(?-u:\b)https?://[^\s"'<>?#]+)\?[^\s"'<>]*"#,
    // Credentials in headers and key/value text: keep the key, drop the value.
    r#"(?i)(?-u:\b)(?:bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]{12,}"#,
    concat!(
        r#"(?i)(?P<key>(?:["']?(?-u:\b)(?:x-api-key|x-goog-api-key|api[_-]?key|apikey|access[_-]?token|refresh[_-]?token"#,
        r#"|id[_-]?token|client[_-]?secret|secret[_-]?key|aws_secret_access_key|aws_session_token|password"#,
        r#"|passwd|authorization|session[_-]?token|private[_-]?key"#,
        r#"|(?:organi[sz]ation|org|account|project|tenant|subscription|customer|user)[_ -]?(?:id|number))"#,
        r#"["']?\s*[:=]\s*)+)(?:(?:bearer|basic|token)\s+)?["']?[^\s"',;}\-][^\s"',;}]{3,}"#,
    ),
    // JWTs.
    r"(?-u:\b)eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
    // Provider keys and tokens.
    r"(?-u:\b)sk-(?:ant|proj|or|svcacct|admin)-[A-Za-z0-9_\-]{8,}",
    r"(?-u:\b)sk-[A-Za-z0-9_\-]{16,}",
    r"(?-u:\b)(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",
    r"(?-u:\b)AIza[0-9A-Za-z_\-]{20,}",
    r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{12,}",
    r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{20,}",
    r"(?-u:\b)github_pat_[A-Za-z0-9_]{20,}",
    r"(?-u:\b)xox[abposre]-[A-Za-z0-9\-]{10,}",
    r"(?-u:\b)glpat-[A-Za-z0-9_\-]{16,}",
    r"(?-u:\b)gsk_[A-Za-z0-9]{20,}",
    r"(?-u:\b)hf_[A-Za-z0-9]{20,}",
    r"(?-u:\b)xai-[A-Za-z0-9]{20,}",
    r"(?-u:\b)pplx-[A-Za-z0-9]{20,}",
    r"(?-u:\b)r8_[A-Za-z0-9]{20,}",
    r"(?-u:\b)npm_[A-Za-z0-9]{20,}",
    r"(?-u:\b)pypi-[A-Za-z0-9_\-]{20,}",
    r"(?-u:\b)ya29\.[A-Za-z0-9_\-]{10,}",
    r"(?-u:\b)1//[0-9A-Za-z_\-]{20,}",
    r"(?-u:\b)AccountKey=[A-Za-z0-9+/=]{10,}",
    r"(?-u:\b)(?:SharedAccessSignature|sig)=[A-Za-z0-9%+/=]{10,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    // E-mail addresses.
    r"(?-u:\b)[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}(?-u:\b)",
    // Organisation, account, project and user identifiers.
    r"(?-u:\b)(?:org|user|proj|acct|project|workspace|team|cus|sub)[-_][A-Za-z0-9]{10,}(?-u:\b)",
    r"(?i)(?-u:\b)(?P<coll>projects|organizations|folders|billingAccounts|accounts|subscriptions|tenants)/[^/\s'\x22,)]+",
    r"(?-u:\b)arn:aws[a-z\-]*:[A-Za-z0-9\-]*:[A-Za-z0-9\-]*:[0-9]{12}:[^\s'\x22,]*",
    r"(?i)(?-u:\b)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?-u:\b)",
    r"(?-u:\b)[0-9]{11,}(?-u:\b)",
    r"(?i)(?-u:\b)[0-9a-f]{32,}(?-u:\b)",
    // Request IDs carry no secret but identify an account's traffic; they go too.
    r"(?-u:\b)req_[A-Za-z0-9]{10,}",
    // Home directories name the user.
    r"(?P<home>/Users/|/home/|C:\\Users\\)[^/\\\s'\x22]+",
];

static SECRETS: OnceLock<Regex> = OnceLock::new();
static SECRETS_FIND: OnceLock<Regex> = OnceLock::new();

fn joined(strip_names: bool) -> String {
    // Each pattern in its own group, so an inline flag like `(?i)` stays inside it.
    PATTERNS
        .iter()
        .map(|p| {
            let p = if strip_names {
                strip_group_names(p)
            } else {
                (*p).to_owned()
            };
            format!("(?:{p})")
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// `(?P<name>` -> `(?:`, so the search regex has no capture groups and runs on the fast DFA.
fn strip_group_names(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(i) = rest.find("(?P<") {
        out.push_str(&rest[..i]);
        out.push_str("(?:");
        rest = &rest[i + 4..];
        rest = rest.find('>').map_or("", |e| &rest[e + 1..]);
    }
    out.push_str(rest);
    out
}

/// The patterns are constants of this module, covered by its tests.
#[allow(clippy::expect_used)]
fn secrets() -> &'static Regex {
    SECRETS.get_or_init(|| Regex::new(&joined(false)).expect("redaction patterns compile"))
}

#[allow(clippy::expect_used)]
fn secrets_find() -> &'static Regex {
    SECRETS_FIND.get_or_init(|| Regex::new(&joined(true)).expect("redaction patterns compile"))
}

/// Replaces every secret shape in `text` with `[redacted]` (URLs keep scheme, host and path).
///
/// A capture-free regex finds the spans (fast); only a found span that a pattern with a kept
/// part could have produced is re-read with capture groups, to know which part to keep.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for m in secrets_find().find_iter(text) {
        out.push_str(&text[last..m.start()]);
        if may_keep_a_part(m.as_str()) {
            let replacement = secrets()
                .captures_at(text, m.start())
                .filter(|c| c.get(0).is_some_and(|g| g.start() == m.start()))
                .map_or_else(|| MARK.to_owned(), |caps| replacement(&caps));
            out.push_str(&replacement);
        } else {
            out.push_str(MARK);
        }
        last = m.end();
    }
    out.push_str(&text[last..]);
    out
}

/// Whether a match could come from a pattern with a named group (`url`, `key`, `coll`,
/// `home`). Each of those matches contains `:`, `=`, `/` or `\` (a URL's `://`, a key's
/// `:`/`=`, a collection's `/`, a home directory's separator), so a match with none of them
/// is replaced whole and needs no capture pass.
fn may_keep_a_part(m: &str) -> bool {
    m.bytes().any(|b| matches!(b, b':' | b'=' | b'/' | b'\\'))
}

fn replacement(caps: &regex::Captures<'_>) -> String {
    if let Some(url) = caps.name("url") {
        // Keep the URL up to its query; identifiers inside the path go too.
        return format!("{}?{MARK}", redact(url.as_str()));
    }
    if let Some(key) = caps.name("key") {
        return format!("{}{MARK}", key.as_str());
    }
    if let Some(coll) = caps.name("coll") {
        return format!("{}/{MARK}", coll.as_str());
    }
    if let Some(home) = caps.name("home") {
        return format!("{}{MARK}", home.as_str());
    }
    MARK.to_owned()
}

/// The bounded, redacted excerpt of a piece of evidence.
///
/// Only a window of the text is redacted. Secrets are unbroken runs of non-space characters,
/// so when the window cuts the text, the run it cuts through is dropped whole: a secret is
/// never half-kept where the pattern that would have caught it can no longer see it.
pub fn safe_excerpt(text: &str) -> String {
    let window = if text.len() <= REDACT_WINDOW_BYTES {
        text
    } else {
        let mut end = REDACT_WINDOW_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let cut = &text[..end];
        cut.rfind(char::is_whitespace).map_or("", |i| &cut[..i])
    };
    let redacted = redact(window);
    if redacted.is_ascii() {
        if redacted.len() <= MAX_EXCERPT_CHARS && is_collapsed(redacted.as_bytes()) {
            // Already single-spaced and short enough: collapsing would rebuild the same text.
            return redacted;
        }
        collapse(AsciiWords(&redacted), str::len)
    } else {
        collapse(redacted.split_whitespace(), |w| w.chars().count())
    }
}

/// Whether ASCII text is its own collapse: words separated by single spaces, with no other
/// whitespace and none at either end. (Vectorized searches, so the common case costs little.)
fn is_collapsed(b: &[u8]) -> bool {
    b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && memchr::memchr3(b'\n', b'\r', b'\t', b).is_none()
        && memchr::memchr2(0x0b, 0x0c, b).is_none()
        && memchr::memmem::find(b, b"  ").is_none()
}

/// The words of ASCII text, as `split_whitespace` gives them, found byte by byte: in ASCII,
/// `char::is_whitespace` is exactly these bytes, and a word's length in characters is its
/// length in bytes.
struct AsciiWords<'a>(&'a str);

impl<'a> Iterator for AsciiWords<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let is_space = |b: &u8| matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
        let b = self.0.as_bytes();
        let start = b.iter().position(|c| !is_space(c))?;
        let end = b[start..]
            .iter()
            .position(is_space)
            .map_or(b.len(), |e| start + e);
        let word = self.0.get(start..end);
        self.0 = self.0.get(end..).unwrap_or_default();
        word
    }
}

/// Joins words with single spaces, cut to [`MAX_EXCERPT_CHARS`] characters with an ellipsis.
fn collapse<'w>(words: impl Iterator<Item = &'w str>, count: impl Fn(&str) -> usize) -> String {
    let mut out = String::with_capacity(MAX_EXCERPT_CHARS + 4);
    let mut chars = 0;
    for word in words {
        let add = usize::from(chars > 0) + count(word);
        if chars + add > MAX_EXCERPT_CHARS {
            let room = (MAX_EXCERPT_CHARS - 1).saturating_sub(chars + usize::from(chars > 0));
            if room > 0 {
                if chars > 0 {
                    out.push(' ');
                }
                out.extend(word.chars().take(room));
            } else if chars == MAX_EXCERPT_CHARS {
                // The words so far fill the bound exactly: give up their last character (and
                // a space it leaves at the end) for the ellipsis.
                out.pop();
                if out.ends_with(' ') {
                    out.pop();
                }
            }
            out.push('…');
            return out;
        }
        if chars > 0 {
            out.push(' ');
        }
        out.push_str(word);
        chars += add;
    }
    out
}

/// A provider or model ID as given, if it looks like an identifier; otherwise redacted.
pub(crate) fn identifier(s: &str) -> String {
    let plain = s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/' | b':' | b'@'));
    if plain && redact(s) == s {
        s.to_owned()
    } else {
        MARK.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Secret shapes (all synthetic): the text, and the part of it that must never survive.
    const CORPUS: &[(&str, &str)] = &[
        ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-abcdefghijklmnop", "AbCdEfGhIjKlMnOpQrSt"),
        ("sk-ant-admin01-ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210", "ZyXwVuTsRqPoNmLkJiHg"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefGHIJ", "AbCdEfGhIjKlMnOpQrSt"),
        ("sk-svcacct-AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrSt"),
        ("sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef", "0123456789abcdef0123"),
        ("sk-AbCdEfGhIjKlMnOpQrStT3BlbkFJuVwXyZ0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("sk-0123456789abcdef0123456789abcdef", "0123456789abcdef0123"),
        ("sk_live_AbCdEfGhIjKlMnOpQrSt1234", "AbCdEfGhIjKlMnOpQrSt"),
        ("rk_test_AbCdEfGhIjKlMnOpQrSt1234", "AbCdEfGhIjKlMnOpQrSt"),
        ("AIzaSyAbCdEfGhIjKlMnOpQrStUvWxYz0123456", "SyAbCdEfGhIjKlMnOpQr"),
        ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
        ("ASIAZXCVBNMASDFGHJKL", "ZXCVBNMASDFGHJKL"),
        ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("gho_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("ghu_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("ghs_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("github_pat_11ABCDEFG0123456789_AbCdEfGhIjKlMnOpQrStUvWxYz", "11ABCDEFG0123456789"),
        ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrSt"),
        ("xoxp-123456789012-AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
        ("glpat-AbCdEfGhIjKlMnOpQrSt", "AbCdEfGhIjKlMnOpQrSt"),
        ("gsk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234", "AbCdEfGhIjKlMnOpQrSt"),
        ("xai-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("pplx-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("r8_AbCdEfGhIjKlMnOpQrStUvWxYz01234", "AbCdEfGhIjKlMnOpQrSt"),
        ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
        ("pypi-AgEIcHlwaS5vcmcCJDAbCdEfGhIjKlMnOp", "AgEIcHlwaS5vcmcCJDAb"),
        ("ya29.a0AfH6SMBAbCdEfGhIjKlMnOpQrStUvWxYz", "a0AfH6SMBAbCdEfGhIjK"),
        ("1//0gAbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "0gAbCdEfGhIjKlMnOpQr"),
        (
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "SflKxwRJSMeKKF2QT4fw",
        ),
        ("Bearer abcDEF0123456789ghiJKLmnopQRSTuv", "abcDEF0123456789ghiJ"),
        ("Basic dXNlcjpwYXNzd29yZDEyMzQ1Ng==", "dXNlcjpwYXNzd29yZDEy"),
        ("api_key=ZXCVBNMASDFGHJKLQWERTY123", "ZXCVBNMASDFGHJKLQWER"),
        ("\"x-api-key\": \"p4ssw0rdLikeValue9876\"", "p4ssw0rdLikeValue9876"),
        ("password=hunter2hunter2", "hunter2hunter2"),
        ("client_secret: GOCSPX-AbCdEfGhIjKlMnOp", "GOCSPX-AbCdEfGhIjKlMnOp"),
        ("AccountKey=AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/==", "AbCdEfGhIjKlMnOpQrSt"),
        ("alice.smith@example.com", "alice.smith"),
        ("org-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrSt"),
        ("user-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrSt"),
        ("proj_AbCdEfGhIjKlMnOpQrSt", "AbCdEfGhIjKlMnOpQrSt"),
        ("projects/my-secret-project-4711", "my-secret-project-4711"),
        ("organizations/883377112233", "883377112233"),
        ("account 123456789012 is suspended", "123456789012"),
        ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/abc", "123456789012"),
        ("3f2b9c4e-8d7a-4b1c-9e6f-0a1b2c3d4e5f", "3f2b9c4e-8d7a"),
        ("0123456789abcdef0123456789abcdef", "0123456789abcdef0123"),
        ("https://api.example.com/v1/chat?key=AIzaSecretQuery&user=bob", "AIzaSecretQuery"),
        ("organization_id: 7d2c1a9e88", "7d2c1a9e88"),
        ("/Users/alicesmith/project", "alicesmith"),
        ("/home/bobjones/.config", "bobjones"),
        ("req_011CVAbCdEfGhIjKlMn", "011CVAbCdEfGhIjKlMn"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", "MIIEvQIBADANBgkqhkiG"),
    ];

    #[test]
    fn corpus_has_at_least_forty_shapes() {
        assert!(CORPUS.len() >= 40, "{}", CORPUS.len());
    }

    #[test]
    fn no_secret_in_the_corpus_survives_redaction_in_any_context() {
        let contexts = [
            "{}",
            "Error: 401 {{\"error\":{{\"message\":\"Incorrect API key provided: {}\"}}}}",
            "header Authorization: {} rejected",
            "see ({}) for details",
            "'{}',",
            "line one\nkey={}\nline three",
        ];
        let mut leaks = Vec::new();
        for (secret, core) in CORPUS {
            for ctx in contexts {
                let text = ctx
                    .replacen("{}", secret, 1)
                    .replace("{{", "{")
                    .replace("}}", "}");
                for out in [redact(&text), safe_excerpt(&text)] {
                    if out.contains(core) {
                        leaks.push(format!("{secret:?} in {ctx:?} -> {out:?}"));
                    }
                }
            }
        }
        assert!(leaks.is_empty(), "{} leak(s):\n{}", leaks.len(), leaks.join("\n"));
    }

    /// Redaction as it was before the capture pass was skipped: every span re-read.
    fn redact_with_captures_everywhere(text: &str) -> String {
        let mut out = String::new();
        let mut last = 0;
        for m in secrets_find().find_iter(text) {
            out.push_str(&text[last..m.start()]);
            let caps = secrets()
                .captures_at(text, m.start())
                .filter(|c| c.get(0).is_some_and(|g| g.start() == m.start()));
            out.push_str(&caps.map_or_else(|| MARK.to_owned(), |c| replacement(&c)));
            last = m.end();
        }
        out.push_str(&text[last..]);
        out
    }

    #[test]
    fn skipping_the_capture_pass_never_changes_the_redaction() {
        let mut texts: Vec<String> = CORPUS.iter().map(|(s, _)| (*s).to_owned()).collect();
        texts.push(CORPUS.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(" "));
        texts.push(CORPUS.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(""));
        texts.push("token=abcdefghijkl user_id: 12345678901 https://x.io/a?b=c projects/p/x".into());
        for t in &texts {
            assert_eq!(redact(t), redact_with_captures_everywhere(t), "{t}");
        }
    }

    #[test]
    fn text_that_is_its_own_collapse_is_recognised_exactly() {
        for t in [
            "", "a", "a b", " a", "a ", "a  b", "a\tb", "a\nb", "a\x0bb", "a\x0cb", "a\rb", "x\x1cy z",
        ] {
            let collapsed = t.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(is_collapsed(t.as_bytes()), collapsed == t, "{t:?}");
        }
    }

    #[test]
    fn ascii_words_are_the_words_split_whitespace_gives() {
        for t in [
            "",
            "   ",
            "a",
            " a  b\t\tc\n",
            "x\x0by\x0cz\rw",
            "keep\x1cthe\x1funit separators\x00",
        ] {
            assert_eq!(
                AsciiWords(t).collect::<Vec<_>>(),
                t.split_whitespace().collect::<Vec<_>>(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn a_secret_cut_by_the_window_is_dropped_not_half_kept() {
        let text = format!(
            "{} alice.smith@example.com tail",
            "a ".repeat((REDACT_WINDOW_BYTES - 10) / 2)
        );
        let e = safe_excerpt(&text);
        assert!(!e.contains("alice"), "{e}");
    }

    #[test]
    fn urls_keep_their_host_and_path() {
        assert_eq!(
            redact("see https://docs.anthropic.com/en/api/rate-limits?ref=abc for more"),
            "see https://docs.anthropic.com/en/api/rate-limits?[redacted] for more"
        );
        assert_eq!(
            redact("https://console.anthropic.com/settings/billing"),
            "https://console.anthropic.com/settings/billing"
        );
    }

    #[test]
    fn ordinary_error_text_is_kept() {
        let t = "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
        assert_eq!(redact(t), t);
        let t =
            "Rate limit reached for gpt-4o in organization [redacted] on tokens per min (TPM): Limit 30000";
        assert_eq!(redact(t), t);
    }

    #[test]
    fn an_excerpt_whose_words_fill_the_bound_exactly_still_ends_within_it() {
        // 39 words of 5 characters, one of 6 and their separators: exactly 240 characters,
        // then one more word.
        for tail in ["x", "ünïcödé"] {
            let full = format!("{} abécdé", vec!["abécd"; 39].join(" "));
            assert_eq!(full.chars().count(), MAX_EXCERPT_CHARS);
            let e = safe_excerpt(&format!("{full} {tail}"));
            assert_eq!(e.chars().count(), MAX_EXCERPT_CHARS, "{e}");
            assert!(e.ends_with(" abécd…"), "{e}");
            let ascii = format!("{} abXcdX", vec!["abXcd"; 39].join(" "));
            let e = safe_excerpt(&format!("{ascii} {tail}"));
            assert_eq!(e.chars().count(), MAX_EXCERPT_CHARS, "{e}");
        }
    }

    #[test]
    fn excerpts_are_bounded_and_collapse_whitespace() {
        let long = "word ".repeat(500);
        let e = safe_excerpt(&long);
        assert_eq!(e.chars().count(), MAX_EXCERPT_CHARS);
        assert!(e.ends_with('…'));
        let e = safe_excerpt(&"x".repeat(5000));
        assert!(e.chars().count() <= MAX_EXCERPT_CHARS);
        assert_eq!(safe_excerpt("a\n\n  b\tc"), "a b c");
    }

    #[test]
    fn identifiers_pass_unless_they_look_secret() {
        assert_eq!(identifier("claude-sonnet-4-5"), "claude-sonnet-4-5");
        assert_eq!(
            identifier("anthropic.claude-3-5-sonnet-20241022-v2:0"),
            "anthropic.claude-3-5-sonnet-20241022-v2:0"
        );
        assert_eq!(identifier("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx"), "[redacted]");
        assert_eq!(identifier("has space"), "[redacted]");
    }
}
