//! Secrets that stand alone: long random-looking tokens, account numbers, e-mail addresses.
//!
//! The text is cut into *units*: maximal runs of ASCII letters, digits and `_ - + / =` (the
//! alphabets of base64, base64url, hex and every key format we know). `.` separates units, so a
//! JWT or `SG.xxx.yyy` is several units and a host name keeps its dots. A unit goes when:
//!
//! - it is *random-looking*: one of its pieces (split at `_ - + / =`) of at least
//!   [`MIN_RANDOM_PIECE`] characters reads as noise rather than words. Words are runs like
//!   `Generate`, `REQUESTS`, `2024`; a piece whose average word is shorter than
//!   [`MAX_NOISE_WORD`] characters is noise (random base62 averages about two, camel-case
//!   error names five or more), and so is a piece of one letter case whose letters are not
//!   distributed like words (fewer than one vowel in five, more than one in eight of
//!   `j k q v w x z`, or pairs of letters rarer in English than at random; see
//!   `english_bigrams`). Pieces are split at `-` and `_`; base64's `+ / =` are glued back.
//!   A unit of both letter cases is also judged whole, across its pieces (base64url keys
//!   such as Recourse's own `rct_` tokens often have no long piece; see `random_joined`).
//!   Known key prefixes (`sk-`, `csk-`, `AKIA`, `ghp_`, ...) with enough characters after them
//!   go too;
//! - it is a number of [`MIN_ACCOUNT_DIGITS`] digits or more, or groups of digits joined by
//!   `-` adding up to that (account and project numbers);
//! - it is hexadecimal of [`MIN_RANDOM_PIECE`] digits or more, or [`MIN_HEX`] as a UUID's
//!   groups;
//! - it starts a phone number or an IBAN (judged by `numbers`).
//!
//! E-mail addresses (`@` in any spelling: `%40`, `%2540`, `\u0040`, `&#64;`, `&commat;`,
//! between a local part and a dotted domain) go whole.

/// The shortest piece judged for randomness.
pub(super) const MIN_RANDOM_PIECE: usize = 16;
/// A piece whose words average fewer characters than this is noise.
const MAX_NOISE_WORD: f64 = 3.0;
/// The shortest number treated as an account or project number.
pub(super) const MIN_ACCOUNT_DIGITS: usize = 10;
/// The shortest hexadecimal run in groups (a UUID's) treated as an identifier.
const MIN_HEX: usize = 24;

/// Prefixes of key and identifier formats (case-sensitive), by first byte: each must be
/// followed by at least 8 more letters or digits that are not plain lower-case words.
fn prefixes(first: u8) -> &'static [&'static str] {
    match first {
        b's' => &["sk-", "sk_", "sub_", "sess-", "sgp_", "shpat_", "sq0atp-"],
        b'p' => &["pk_", "pplx-", "pypi-", "proj_", "proj-"],
        b'r' => &["rct_", "rk_", "r8_", "req_"],
        b'c' => &["csk-", "cus_"],
        b'f' => &["fw_"],
        b'g' => &[
            "gsk_",
            "glpat-",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
        ],
        b'x' => &["xai-", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-"],
        b'h' => &["hf_"],
        b'n' => &["npm_", "nvapi-"],
        b'G' => &["GOCSPX-"],
        b'A' => &["AIza", "AGE-SECRET-KEY-"],
        b'y' => &["ya29"],
        b'o' => &["org-"],
        b'u' => &["user-"],
        b'a' => &["acct_", "api-"],
        b'k' => &["key-"],
        b't' => &["tok_", "tk-"],
        b'd' => &["dop_v1_"],
        b'e' => &["eyJ"],
        _ => &[],
    }
}

/// AWS access key IDs: one of these, then at least 12 capitals or digits.
const AWS_PREFIXES: &[&str] = &[
    "AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA", "ANPA", "ANVA", "APKA",
];

/// Byte classes, as a table: the unit scan reads every byte of every excerpt.
const ALNUM: u8 = 1;
const DIGIT: u8 = 2;
const HEX: u8 = 4;
const DASH: u8 = 8; // `-` or `_`: splits pieces
const B64: u8 = 16; // `+`, `/` or `=`: glued within a piece
const UPPER: u8 = 32;
const LOWER: u8 = 64;
const RARE: u8 = 128; // `j k q v w x z`, either case
/// The classes of a letter or digit (none for a separator).
const ALNUM_KINDS: u8 = ALNUM | DIGIT | UPPER | LOWER;
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let mut k = 0;
        if b.is_ascii_alphanumeric() {
            k |= ALNUM;
        }
        if b.is_ascii_digit() {
            k |= DIGIT;
        }
        if b.is_ascii_hexdigit() {
            k |= HEX;
        }
        if b == b'-' || b == b'_' {
            k |= DASH;
        }
        if b == b'+' || b == b'/' || b == b'=' {
            k |= B64;
        }
        if b.is_ascii_uppercase() {
            k |= UPPER;
        }
        if b.is_ascii_lowercase() {
            k |= LOWER;
        }
        if matches!(
            b.to_ascii_lowercase(),
            b'j' | b'k' | b'q' | b'v' | b'w' | b'x' | b'z'
        ) {
            k |= RARE;
        }
        t[c] = k;
        c += 1;
    }
    t
};

fn class(c: u8) -> u8 {
    CLASS[usize::from(c)]
}

fn is_piece_sep(c: u8) -> bool {
    class(c) & (DASH | B64) != 0
}

/// Whether `c` belongs to a unit (a letter, a digit, or one of `_ - + / =`).
#[inline(always)]
pub(super) const fn is_unit_byte(c: u8) -> bool {
    CLASS[c as usize] != 0
}

/// Judges the unit `b[start..end]` (a maximal run of unit bytes) and records it if it is a
/// secret on its own. Called for every unit of the text (see [`super::secret_spans`]).
#[inline]
pub(super) fn unit(b: &[u8], start: usize, end: usize, spans: &mut Vec<(usize, usize)>) {
    // Most units are words, too short to be anything.
    if end - start < 8 {
        return;
    }
    let u = &b[start..end];
    // Phone and card numbers in groups (`(415) 555-0132`), IBANs (see `numbers`).
    if u[0].is_ascii_digit() || u[0] == b'+' {
        super::numbers::in_unit(b, start, spans);
    } else if u[0].is_ascii_uppercase() && u.len() >= 15 {
        super::numbers::iban_unit(u, start, spans);
    }
    // Shorter than a random piece, a unit can only be a prefixed key or an account number
    // (see `secret_unit_with`): most are neither, which their first bytes say.
    if u.len() < MIN_RANDOM_PIECE
        && !prefixes(u[0]).iter().any(|p| u.starts_with(p.as_bytes()))
        && !(u.len() >= MIN_ACCOUNT_DIGITS && (u[0].is_ascii_digit() || u[0] == b'-'))
    {
        return;
    }
    if secret_unit_with(u, &stats(u)) {
        spans.push((start, end));
    }
}

/// What one scan of a unit found.
#[derive(Default)]
struct Stats {
    alnum: usize,
    digits: usize,
    hex: usize,
    /// `-` and `_`.
    dashes: usize,
    upper: usize,
    lower: usize,
    /// The longest piece between dashes, in letters and digits (base64's `+ / =` glued).
    longest_piece: usize,
}

/// Whether a unit is a secret on its own (see the module documentation).
#[cfg(test)]
pub(super) fn secret_unit(u: &[u8]) -> bool {
    let st = stats(u);
    st.alnum >= 8 && secret_unit_with(u, &st)
}

/// One scan of a unit: what the judgement needs (without a branch per byte).
fn stats(u: &[u8]) -> Stats {
    let mut st = Stats::default();
    let mut piece = 0;
    for &c in u {
        let k = class(c);
        let alnum = usize::from(k & ALNUM != 0);
        let dash = usize::from(k & DASH != 0);
        st.alnum += alnum;
        st.digits += usize::from(k & DIGIT != 0);
        st.hex += usize::from(k & HEX != 0);
        st.dashes += dash;
        st.upper += usize::from(k & UPPER != 0);
        st.lower += usize::from(k & LOWER != 0);
        // A dash ends the piece; `+ / =` neither count nor end it.
        piece = (piece + alnum) * (1 - dash);
        st.longest_piece = st.longest_piece.max(piece);
    }
    st
}

fn secret_unit_with(u: &[u8], st: &Stats) -> bool {
    if st.alnum < 8 {
        return false;
    }
    let prefixed = prefixes(u[0]).iter().any(|p| {
        u.starts_with(p.as_bytes()) && u[p.len()..].iter().filter(|c| c.is_ascii_alphanumeric()).count() >= 8
    }) && !plain_words(u);
    let aws = u[0] == b'A'
        && AWS_PREFIXES.iter().any(|p| {
            u.starts_with(p.as_bytes())
                && u[p.len()..]
                    .iter()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                    .count()
                    >= 12
        });
    if prefixed || aws {
        return true;
    }
    // Without a digit, or both letter cases, or a piece of [`MIN_RANDOM_PIECE`], none of the
    // judgements below can hold (most error names: `rate_limit_error`, `RESOURCE_EXHAUSTED`).
    if st.digits == 0 && (st.upper == 0 || st.lower == 0) && st.longest_piece < MIN_RANDOM_PIECE {
        return false;
    }
    let only_dashes_besides = |n: usize| n + st.dashes == u.len() && !u.contains(&b'_');
    // Account and project numbers: digits, alone or in `-` groups.
    if st.digits >= MIN_ACCOUNT_DIGITS && only_dashes_besides(st.digits) {
        return true;
    }
    // Hex identifiers and UUIDs, with a letter and a digit among them; unbroken hex from
    // [`MIN_RANDOM_PIECE`] digits (a 64-bit key or ID, `3f2b9c4e8d7a6b5c`).
    let hex_len = if st.dashes == 0 { MIN_RANDOM_PIECE } else { MIN_HEX };
    if st.hex >= hex_len && only_dashes_besides(st.hex) && st.digits > 0 && st.digits < st.hex {
        return true;
    }
    if random_joined(u, st) || random_groups(u) {
        return true;
    }
    if st.longest_piece < MIN_RANDOM_PIECE {
        return false;
    }
    // Pieces are split at `-` and `_`; base64's `+`, `/` and `=` are glued back, so a key
    // whose separators happen to fall every few characters is still judged whole.
    u.split(|c| class(*c) & DASH != 0).any(|piece| {
        if piece.iter().any(|c| class(*c) & B64 != 0) {
            let glued: Vec<u8> = piece.iter().copied().filter(u8::is_ascii_alphanumeric).collect();
            random_piece_within(&glued, piece)
        } else {
            random_piece(piece)
        }
    })
}

/// A key printed in groups of one letter case (`4prxo181ko-w9g1mgh55x-iktimf0w9o`, licence
/// keys `S0J8H-T9LGM-XG9ED`, `5v2seh60_kvj50ce9_uvw53efr`): no piece is long and the unit has
/// one letter case, so neither [`random_joined`] nor [`random_piece`] sees it. It is judged by
/// its groups: at least [`MIN_GROUPS`] pieces (split at `-` and `_`) of [`MIN_GROUP`] or more
/// letters and digits that mix both. Identifiers agents print have at most one such piece
/// (`claude-sonnet-4-5-20250929`, `gpt-4o-mini`, `Mixtral-8x7B-Instruct-v0`).
fn random_groups(u: &[u8]) -> bool {
    u.split(|c| class(*c) & DASH != 0)
        .filter(|piece| {
            piece.len() >= MIN_GROUP
                && piece.iter().all(u8::is_ascii_alphanumeric)
                && piece.iter().any(u8::is_ascii_digit)
                && piece.iter().any(u8::is_ascii_alphabetic)
        })
        .count()
        >= MIN_GROUPS
}

/// The fewest mixed groups [`random_groups`] judges a key.
const MIN_GROUPS: usize = 3;
/// The shortest group [`random_groups`] counts.
const MIN_GROUP: usize = 5;

/// A base64url secret (`A-Z a-z 0-9 - _`) whose `-` and `_` happen to fall every few
/// characters has no long piece, and a short random piece can read as words by chance, so a
/// unit of at least [`MIN_RANDOM_PIECE`] characters (base64's `+ / =` counted, and up to two
/// `-` or `_`) holding both letter cases is also judged whole. It is noise when any of these holds:
///
/// - it switches between lower case and a capital, or a letter and a digit, at
///   [`SWITCH_TENTHS`] tenths of its places or more;
/// - more than one letter in five is one of `j k q v w x z`;
/// - no piece (split at `_ - + / =`) reads as a word (see [`dictionary_piece`]), and its
///   words, counted piece by piece, average fewer than [`MAX_NOISE_WORD`] characters or, in
///   a unit of fewer than 24 letters and digits, its letters (12 or more) do not follow each
///   other as in English words (see [`english_bigrams`]).
///
/// Identifiers agents print fail all three: they hold words (`Mixtral-8x7B-Instruct-v0`,
/// `X-RateLimit-Remaining`, `GenerateRequestsPerDayPerProjectPerModel-FreeTier`) or one
/// letter case (`claude-sonnet-4-5-20250929`, `provider_overloaded`, `RESOURCE_EXHAUSTED`).
fn random_joined(u: &[u8], st: &Stats) -> bool {
    // Base64's `+ / =` count towards the length, and up to two `-` or `_` (`q8Zk+XyW/Ab3Cd9e`
    // and `BUOBk6T-KNsXTNvf` are 16 characters of key).
    let b64 = u.len() - st.alnum - st.dashes;
    if st.alnum + b64 + st.dashes.min(2) < MIN_RANDOM_PIECE || st.upper == 0 || st.lower == 0 {
        return false;
    }
    // One pass: case and digit switches between neighbours within a piece, rare letters.
    let (mut rare, mut pairs, mut switches) = (0usize, 0usize, 0usize);
    // The class of the byte before, within the piece (0 at a piece's start).
    let mut prev = 0u8;
    for &c in u {
        let k = class(c);
        rare += usize::from(k & RARE != 0);
        let inside = usize::from(prev != 0 && k & ALNUM != 0);
        pairs += inside;
        switches += inside * usize::from((prev & LOWER != 0 && k & UPPER != 0) || (prev ^ k) & DIGIT != 0);
        prev = k & ALNUM_KINDS;
    }
    let letters = st.upper + st.lower;
    // Letters drawn at random hold `j k q v w x z` at about one in four; words, at one in
    // thirty.
    if switches * 10 >= pairs * SWITCH_TENTHS || (letters >= 12 && rare * 5 > letters) {
        return true;
    }
    let mut words = 0usize;
    for piece in u.split(|c| is_piece_sep(*c)) {
        if dictionary_piece(piece) {
            return false;
        }
        words += word_count(piece);
    }
    #[allow(clippy::cast_precision_loss)] // lengths are at most a few hundred
    let average = st.alnum as f64 / words.max(1) as f64;
    // Letter pairs judge short units; in a longer one, random letters show in the tests above.
    average < MAX_NOISE_WORD || (letters >= 12 && st.alnum < 24 && !english_bigrams(u))
}

/// A unit whose letters and digits switch (lower case to a capital, a letter to a digit or
/// back) at this many tenths of its places reads as noise: random base64url switches at
/// about 45 of every hundred, camel-case words and version numbers at 5 to 25.
const SWITCH_TENTHS: usize = 3;

/// Whether a piece reads as a word or a number: three letters or more of one case
/// (`sonnet`, `API`) or capitalized (`Instruct`), or four digits or more (`2025`).
fn dictionary_piece(p: &[u8]) -> bool {
    if p.len() < 3 {
        return false;
    }
    if p.iter().all(u8::is_ascii_digit) {
        return p.len() >= 4;
    }
    p.iter().all(u8::is_ascii_lowercase)
        || p.iter().all(u8::is_ascii_uppercase)
        || (p[0].is_ascii_uppercase() && p[1..].iter().all(u8::is_ascii_lowercase))
}

/// `sk-proj` alone, `user-agent`, `api-version-2024-05-01`: ordinary words and short numbers
/// after a prefix are not a key.
fn plain_words(u: &[u8]) -> bool {
    u.split(|c| is_piece_sep(*c)).all(|p| {
        p.len() < MIN_RANDOM_PIECE
            && (p.iter().all(u8::is_ascii_lowercase) || p.iter().all(u8::is_ascii_digit))
    })
}

/// How many words a piece (letters and digits) reads as: runs of digits, of lower case, a
/// capital with the lower case after it (`Generate`), or a capital run (`HTTPS`, whose last
/// letter starts the next word when lower case follows).
fn word_count(p: &[u8]) -> usize {
    let mut words = 0usize;
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        let mut j = i + 1;
        if c.is_ascii_digit() {
            while j < p.len() && p[j].is_ascii_digit() {
                j += 1;
            }
        } else if c.is_ascii_lowercase() {
            while j < p.len() && p[j].is_ascii_lowercase() {
                j += 1;
            }
        } else {
            // Capitals: `Generate` (one capital then lower case) or `HTTPS` (a capital run,
            // whose last letter starts the next word when lower case follows).
            while j < p.len() && p[j].is_ascii_uppercase() {
                j += 1;
            }
            if j - i == 1 {
                while j < p.len() && p[j].is_ascii_lowercase() {
                    j += 1;
                }
            } else if j < p.len() && p[j].is_ascii_lowercase() {
                j -= 1;
            }
        }
        words += 1;
        i = j;
    }
    words
}

/// Whether one piece (no separators) reads as noise.
pub(super) fn random_piece(p: &[u8]) -> bool {
    random_piece_within(p, p)
}

/// [`random_piece`] of `p`, the letters and digits of `whole` glued: letter pairs are judged
/// within `whole` (`/opt/homebrew/lib` pairs no letters across a `/`).
fn random_piece_within(p: &[u8], whole: &[u8]) -> bool {
    if p.len() < MIN_RANDOM_PIECE || !p.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    if p.iter().all(u8::is_ascii_digit) {
        return false; // numbers are judged as account numbers
    }
    let words = word_count(p);
    #[allow(clippy::cast_precision_loss)] // lengths are at most a few hundred
    let average = p.len() as f64 / words as f64;
    if average < MAX_NOISE_WORD {
        return true;
    }
    // Letters of one case (with or without digits) read as words only if their letters are
    // distributed like words: enough vowels, few of the rare letters. Camel case is judged by
    // its words above.
    let has_upper = p.iter().any(u8::is_ascii_uppercase);
    let has_lower = p.iter().any(u8::is_ascii_lowercase);
    let letters = p.iter().filter(|c| c.is_ascii_alphabetic()).count();
    if (has_upper && has_lower) || letters < 12 {
        return false;
    }
    let count = |set: &[u8]| p.iter().filter(|c| set.contains(&c.to_ascii_lowercase())).count();
    let vowels = count(b"aeiouy");
    let rare = count(b"jkqvwxz");
    vowels * 5 < letters || rare * 8 > letters || !english_bigrams(whole)
}

/// Whether the letters of a piece follow each other as in English words: the sum over
/// neighbouring letters (within runs of [`MIN_LETTER_RUN`] letters or more, in its first
/// [`MAX_BIGRAM_BYTES`] bytes) of [`BIGRAM_LOG_ODDS`] is not negative. Words and names glued from words
/// (`cloudresourcemanager`, `generativelanguage`) score well above zero; letters drawn at
/// random score below it 997 times in 1000 at 16 letters (a piece whose vowels happen to be
/// frequent enough for the test above). A piece of fewer than [`MIN_DISTINCT_LETTERS`]
/// different letters passes.
pub(super) fn english_bigrams(p: &[u8]) -> bool {
    let mut score = 0i32;
    // The letters seen: a run of a few letters repeated (`aaaaaaaa`, `abababab`) holds no
    // secret, whatever its pairs.
    let mut seen = 0u32;
    // The current run of letters: its length, its pairs' score, its letters.
    let (mut run, mut run_score, mut run_seen) = (0usize, 0i32, 0u32);
    // The letter before (0 to 25, either case), or `NOT_LETTER`.
    let mut prev = NOT_LETTER;
    // Random letters show in their first pairs; a long identifier need not be read whole.
    for &c in p[..p.len().min(MAX_BIGRAM_BYTES)]
        .iter()
        .chain(std::iter::once(&0))
    {
        let x = LETTER_INDEX[usize::from(c)];
        if x == NOT_LETTER {
            // A run ends. Short runs are abbreviations and path parts (`npm`, `bin`): their
            // pairs say little.
            if run >= MIN_LETTER_RUN {
                score += run_score;
                seen |= run_seen;
            }
            (run, run_score, run_seen) = (0, 0, 0);
        } else {
            if prev != NOT_LETTER {
                run_score += i32::from(BIGRAM_LOG_ODDS[usize::from(prev)][usize::from(x)]) - i32::from(b'i');
            }
            run += 1;
            run_seen |= 1 << x;
        }
        prev = x;
    }
    score >= 0 || seen.count_ones() < MIN_DISTINCT_LETTERS
}

/// The most bytes of a piece [`english_bigrams`] reads.
const MAX_BIGRAM_BYTES: usize = 40;

/// The shortest run of letters whose pairs [`english_bigrams`] counts.
const MIN_LETTER_RUN: usize = 4;

const NOT_LETTER: u8 = 26;

/// Per byte: its letter, 0 to 25 (either case), or [`NOT_LETTER`].
static LETTER_INDEX: [u8; 256] = {
    let mut t = [NOT_LETTER; 256];
    let mut c = 0;
    while c < 26 {
        t[b'a' as usize + c] = c as u8;
        t[b'A' as usize + c] = c as u8;
        c += 1;
    }
    t
};

/// The fewest different letters [`english_bigrams`] judges.
const MIN_DISTINCT_LETTERS: u32 = 6;

/// How much likelier each pair of letters is in English technical text than at random, as a
/// rounded base-2 logarithm from -8 to 4, written as a letter (`a` is -8, `i` is 0, `m` is 4):
/// row `x`, column `y` is the pair `xy`. Counted over the words of Vim's reference manual
/// (five million letter pairs, camel-case words split, lower-cased).
const BIGRAM_LOG_ODDS: [&[u8; 26]; 26] = [
    b"ejjjdhjdibjljldjblkliighid", // a
    b"ifeekbdahfakdchdahgejecaia", // b
    b"kdgejdblhbjjidlfajgkjbdafa", // c
    b"heeikfcckfcgfekdagighdddfa", // d
    b"jgkljjhehbdjklfiglmkdihkhc", // e
    b"ibcfjjdblaahdfkcahfiibdbfa", // f
    b"hcddjdgiicahdhgdchhgifdaac", // g
    b"kbbdmbcakachfejeagfifabada", // h
    b"ihjiijjdebhlkmlifklkdhchch", // i
    b"faaafaaadacaaagbaaeahaaaaa", // j
    b"gbbcjgdchabdceecadhdfceada", // k
    b"jfeimgddkabkdfkgaeiikefbja", // l
    b"lifikedbjaegjgjjafidhebafe", // m
    b"jdjlkhldicghfhkfafjkigdcgc", // n
    b"hkjjhjhfhdgkklhjaljkkijedd", // o
    b"keefjdbgiaajecjiakhjidfaha", // p
    b"caaaadaaaaadabaaabaaiaaaaa", // q
    b"jelilgidkaiijileaijjifhbia", // r
    b"idjeleeikaggfgkieljlidgbib", // s
    b"kekjmgcmlbfhgdlgcjjiidhhic", // t
    b"ihggiiheiadjjkfiajkkabadac", // u
    b"jbeakabakaacebgaaadfbababa", // v
    b"iccdhcbkkaadcgicbhhbbaebaa", // w
    b"hbfehdabgaabdabiacdjcbbeca", // x
    b"fdccgbeaeabffhiiadhhdafcbc", // y
    b"eaaahaaceaaaaadaabdacaaaed", // z
];

/// The e-mail address around the `@` written at `at` in `len` bytes (`@`, `%40`, `%2540`,
/// `\\u0040`, `&#64;`, `&#x40;` or `&commat;`), if any. Called for every such spelling in the
/// text, in any order.
///
/// The local part may hold an apostrophe between letters (`o'neil`) or be quoted (`"a b"@`);
/// both parts may hold non-ASCII letters (internationalized addresses); the top-level domain
/// is two letters or more, or punycode (`xn--p1ai`).
pub(super) fn email_at(b: &[u8], at: usize, len: usize, spans: &mut Vec<(usize, usize)>) {
    let is_local =
        |c: u8| c.is_ascii_alphanumeric() || c >= 0x80 || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-');
    let is_domain = |c: u8| c.is_ascii_alphanumeric() || c >= 0x80 || matches!(c, b'.' | b'-');
    // `\\u0040` (escaped once more): the backslashes belong to the `@`.
    let mut s = at;
    while s > 0 && b[s - 1] == b'\\' {
        s -= 1;
    }
    let d = at + len;
    let mut e = d;
    while e < b.len() && is_domain(b[e]) {
        e += 1;
    }
    while e > d && b[e - 1] == b'.' {
        e -= 1;
    }
    let domain = &b[d..e];
    let tld_ok = domain.rsplit(|c| *c == b'.').next().is_some_and(|tld| {
        (tld.len() >= 2 && tld.iter().all(|c| c.is_ascii_alphabetic() || *c >= 0x80))
            || (tld.len() > 4 && tld[..4].eq_ignore_ascii_case(b"xn--"))
    });
    if !domain.contains(&b'.') || !tld_ok {
        return;
    }
    let local_end = s;
    if s > 0 && b[s - 1] == b'"' {
        // A quoted local part (`"alice smith"@example.com`): back to its opening quote.
        let from = (s - 1).saturating_sub(MAX_QUOTED_LOCAL);
        if let Some(open) = memchr::memrchr(b'"', &b[from..s - 1]) {
            let open = from + open;
            if !b[open..s].contains(&b'\n') {
                spans.push((open, e));
            }
        }
        return;
    }
    while s > 0
        && (is_local(b[s - 1]) || (b[s - 1] == b'\'' && s >= 2 && s < local_end && is_local(b[s - 2])))
    {
        s -= 1;
    }
    if s < local_end {
        spans.push((s, e));
    }
}

/// The longest quoted local part [`email_at`] reads back, in bytes.
const MAX_QUOTED_LOCAL: usize = 64;

/// Every e-mail address in `b`, with `@` written plainly, percent-encoded or JSON-escaped
/// (the visits [`super::secret_spans`] makes in its one pass, for tests).
#[cfg(test)]
fn emails(b: &[u8], spans: &mut Vec<(usize, usize)>) {
    let plain = memchr::memchr_iter(b'@', b).map(|i| (i, 1));
    let pct = super::shapes::find_all(b, b"%40").map(|i| (i, 3));
    let esc = super::shapes::find_all(b, b"\\u0040").map(|i| (i, 6));
    for (at, len) in plain.chain(pct).chain(esc) {
        email_at(b, at, len, spans);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_pieces_are_noise_and_words_are_not() {
        for noise in [
            "9x8f7g6h5j4k3l2m1n0b9v8c7x6z5a4s",
            "T3BlbkFJuVwXyZ0123456789",
            "qwxzkvbnmtrplkjhgfds",
            "zkqxwvbnm7trplkjhgfd",
            "QWXZKVBNMTRPLKJHGF",
            "3f2b9c4e8d7a6b5c",
            "X7K2M9P4Q1R8T5V3",
            "AbCdEfGhIjKlMnOpQrSt",
        ] {
            assert!(random_piece(noise.as_bytes()), "{noise}");
        }
        for word in [
            "GenerateRequestsPerDayPerProjectPerModel",
            "generativelanguage",
            "ResourceNotFoundException",
            "InvokeModelWithResponseStream",
            "HTTPSConnectionPool",
            "internationalization",
            "cloudresourcemanager",
            "streamgeneratecontent",
            "ServiceQuotaExceededException",
            "UNABLE",
            "ThrottlingException",
            "20250929",
        ] {
            assert!(!random_piece(word.as_bytes()), "{word}");
        }
    }

    #[test]
    fn model_ids_and_error_names_are_not_secrets() {
        for unit in [
            "gpt-4o-mini-2024-07-18",
            "claude-3-5-sonnet-20241022",
            "claude-sonnet-4-5-20250929",
            "Llama-3",
            "meta-llama/Llama-3",
            "Qwen/Qwen2",
            "Mixtral-8x7B-Instruct-v0",
            "llama-v3p1-405b-instruct",
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
            "x-ratelimit-remaining-tokens",
            "RESOURCE_EXHAUSTED",
            "/v1/chat/completions",
            "2026-11-30",
            "user-agent",
            "api-version-2024-05-01",
            "Asianification",
            "AKIAtraining",
            "sk-proj",
            "Asian",
            "X-RateLimit-Remaining",
            "AI_TypeValidationError",
            "run-sendMessageStream-2025-07-23T09-10-46-934Z",
            "provider_overloaded",
            "rate_limit_exceeded",
        ] {
            assert!(!secret_unit(unit.as_bytes()), "{unit}");
        }
    }

    #[test]
    fn keys_numbers_and_hex_ids_are_secrets() {
        for unit in [
            "csk-9x8f7g6h5j4k3l2m1n0b9v8c7x6z5a4s3d2f1g0h",
            "fw_3ZabcdEFGhijKLMnop12",
            "GOCSPX-AbCdEfGhIjKlMnOpQrStUvWx",
            "sk-ant-api03-AbCdEfGhIjKl",
            "AKIAIOSFODNN7EXAMPLE",
            "123456789012",
            "1234-5678-9012",
            "3f2b9c4e-8d7a-4b1c-9e6f-0a1b2c3d4e5f",
            "0123456789abcdef01234567",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
            "q8Zk2+XyWv/Ab3+Cd9e/Fg7H+iJkL/mN0p",
            // Recourse's own API token, and base64url whose `-` and `_` leave no long piece.
            "rct_il4s5oq3bXNfJKZ-R6pMiLwJ9z1n_qhh2Tz__LK-2HN",
            "LJeC2iCNQE5ptR-RNI-fd2Hpm2A",
            "tsb-Hz6erTDk1yV2-nTXF9tMm",
            "QBjvoqpKe-a84ESFimhgi-bkeTUJFT",
            "GbrxRrYlacJNUIthqXH-",
        ] {
            assert!(secret_unit(unit.as_bytes()), "{unit}");
        }
    }

    #[test]
    fn emails_in_every_spelling() {
        for t in [
            "mail alice.smith@example.com now",
            "u=alice.smith%40example.com&x",
            r"to alice\u0040example.com",
        ] {
            let mut s = Vec::new();
            emails(t.as_bytes(), &mut s);
            assert_eq!(s.len(), 1, "{t}");
            assert!(t[s[0].0..s[0].1].contains("alice"), "{t}");
        }
        let mut s = Vec::new();
        emails(b"@cf/meta/llama and a@b", &mut s);
        assert!(s.is_empty());
    }
}
