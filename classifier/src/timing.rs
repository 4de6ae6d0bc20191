//! Timing hints: when a provider says the request may succeed again, validated.
//!
//! Only the extractors a catalogue rule names run, on the signal that rule matched, so a stray
//! date in unrelated output never becomes a deadline. Every hint becomes an absolute
//! `reset_at` (rounded up to the second) plus `retry_after_seconds` counted from `now`.
//!
//! **Base time.** Relative hints ("retry-after: 20", "try again in 4h12m") count from the
//! envelope's `occurred_at` when present (when the provider said it), else from `now`; clock
//! hints ("resets 7pm (Europe/Istanbul)") are the next such local time after that same base.
//! Re-classifying a stored envelope later therefore yields the same `reset_at`, and a hint
//! that has since passed is dropped.
//!
//! **Validation.** A hint is dropped when it cannot be parsed, is vague ("in a moment", "in a
//! few minutes"), has no time zone, is at or before `now`, or is more than
//! [`MAX_HINT_SECS`] (31 days, a calendar month) after `now`.

use crate::{
    engine::{Signal, SignalJson},
    json::Json,
};
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use regex::Regex;
use std::sync::OnceLock;

/// The farthest credible hint: 31 days. Anything later is treated as absurd.
pub const MAX_HINT_SECS: i64 = 31 * 24 * 3600;

/// A validated hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    pub(crate) reset_at: DateTime<Utc>,
    pub(crate) retry_after_seconds: u64,
}

/// The extractors a rule may name in its `timing` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimingExtractor {
    /// `retry-after`: delay seconds or an HTTP date.
    RetryAfter,
    /// `retry-after-ms`: delay milliseconds (OpenAI, Azure).
    RetryAfterMs,
    /// `x-ratelimit-reset-*`: Go durations (`6m0s`, `644ms`) or epoch numbers.
    XRatelimitReset,
    /// `anthropic-ratelimit-*-reset`: RFC 3339 timestamps (the plan windows' `unified` ones:
    /// epoch seconds).
    AnthropicRatelimitReset,
    /// Google `RetryInfo.retryDelay` (`"39s"`) in a JSON body or in text.
    GoogleRetryInfo,
    /// "try again in 4h12m", "resets in 5 days 22 hours", "retry in 39.8s".
    TextDuration,
    /// "resets 7pm (Europe/Istanbul)", "reset at Oct 9, 10am (America/Los_Angeles)".
    TextClock,
    /// "limit reached|1767225600" (epoch seconds after a bar).
    EpochSuffix,
    /// An RFC 3339 timestamp with an offset after "reset"/"until"/"after", or
    /// "on 2026-04-01 at 00:00 UTC".
    TextTimestamp,
    /// `resets_in_seconds` (relative) or `resets_at` (epoch seconds) in a JSON body.
    JsonResetsAt,
}

impl TimingExtractor {
    pub(crate) fn parse(name: &str) -> Option<TimingExtractor> {
        Some(match name {
            "retry_after" => TimingExtractor::RetryAfter,
            "retry_after_ms" => TimingExtractor::RetryAfterMs,
            "x_ratelimit_reset" => TimingExtractor::XRatelimitReset,
            "anthropic_ratelimit_reset" => TimingExtractor::AnthropicRatelimitReset,
            "google_retry_info" => TimingExtractor::GoogleRetryInfo,
            "text_duration" => TimingExtractor::TextDuration,
            "text_clock" => TimingExtractor::TextClock,
            "epoch_suffix" => TimingExtractor::EpochSuffix,
            "text_timestamp" => TimingExtractor::TextTimestamp,
            "json_resets_at" => TimingExtractor::JsonResetsAt,
            _ => return None,
        })
    }

    /// Runs this extractor on one signal; `base` is when the evidence was produced.
    #[cfg(test)]
    pub(crate) fn extract(self, s: &Signal<'_>, base: DateTime<Utc>, now: DateTime<Utc>) -> Option<Hint> {
        self.extract_with(s, &SignalJson::new(s), base, now)
    }

    /// Runs this extractor on one signal whose JSON is `json`; `base` is when the evidence was
    /// produced.
    pub(crate) fn extract_with(
        self,
        s: &Signal<'_>,
        json: &SignalJson<'_>,
        base: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<Hint> {
        let header = |name: &str| s.headers.and_then(|h| h.get(name)).map(|v| &**v);
        let at = match self {
            TimingExtractor::RetryAfter => retry_after(header("retry-after")?, base)?,
            TimingExtractor::RetryAfterMs => {
                let ms = parse_decimal_millis(header("retry-after-ms")?, 1)?;
                base.checked_add_signed(Duration::milliseconds(ms))?
            }
            TimingExtractor::XRatelimitReset => family_reset(s, base, "x-ratelimit-reset", |v| {
                parse_go_duration(v)
                    .map(DateTimeOrDelta::Delta)
                    .or_else(|| parse_number_reset(v))
            })?,
            TimingExtractor::AnthropicRatelimitReset => family_reset(s, base, "anthropic-ratelimit-", |v| {
                DateTime::parse_from_rfc3339(v.trim())
                    .ok()
                    .map(|d| DateTimeOrDelta::At(d.with_timezone(&Utc)))
                    // The plan windows' `anthropic-ratelimit-unified-reset` is epoch seconds.
                    .or_else(|| {
                        let v = v.trim();
                        (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                            .then(|| parse_number_reset(v))
                            .flatten()
                    })
            })?,
            TimingExtractor::GoogleRetryInfo => {
                let d = json
                    .roots()
                    .find_map(|v| find_retry_delay(v, 0))
                    // Code Assist's `ErrorInfo` names the reset of an exhausted quota too.
                    .or_else(|| {
                        json.roots()
                            .find_map(|v| find_string(v, "quotaResetDelay", 0))
                            .and_then(parse_go_duration)
                    })
                    .or_else(|| {
                        let c = re(
                            &RETRY_DELAY_TEXT,
                            r#"["']retryDelay["']\s*:\s*["']([0-9]+(?:\.[0-9]+)?)s["']"#,
                        )
                        .captures(&s.text)?;
                        parse_decimal_millis(c.get(1)?.as_str(), 1000).map(Duration::milliseconds)
                    })?;
                base.checked_add_signed(d)?
            }
            TimingExtractor::TextDuration => {
                let r = re(
                    &TEXT_DURATION,
                    r"(?i)(?-u:\b)(?:(?:try\s+again|retry(?:ing)?|resets?|available(?:\s+again)?)\s+(?:in|after):?|wait(?:\s+for)?)\s+",
                );
                let d = r
                    .find_iter(&s.text)
                    .find_map(|m| parse_duration_phrase(&s.text[m.end()..]))?;
                base.checked_add_signed(d)?
            }
            TimingExtractor::TextClock => text_clock(&s.text, base)?,
            TimingExtractor::EpochSuffix => {
                let c = re(&EPOCH_SUFFIX, r"\|([0-9]{10})(?-u:\b)").captures(&s.text)?;
                let secs: i64 = c.get(1)?.as_str().parse().ok()?;
                DateTime::from_timestamp(secs, 0)?
            }
            TimingExtractor::TextTimestamp => {
                let r = re(
                    &TEXT_TIMESTAMP,
                    r"(?i)(?-u:\b)(?:resets?|reset|until|after|at)\s+([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2}))",
                );
                match r.captures(&s.text) {
                    Some(c) => {
                        let t = c.get(1)?.as_str().replace(' ', "T");
                        DateTime::parse_from_rfc3339(&t).ok()?.with_timezone(&Utc)
                    }
                    None => {
                        let c = re(
                            &TEXT_UTC_DAY,
                            r"(?-u:\b)([0-9]{4}-[0-9]{2}-[0-9]{2}) at ([0-9]{2}:[0-9]{2}) UTC(?-u:\b)",
                        )
                        .captures(&s.text)?;
                        let t = format!("{}T{}:00Z", c.get(1)?.as_str(), c.get(2)?.as_str());
                        DateTime::parse_from_rfc3339(&t).ok()?.with_timezone(&Utc)
                    }
                }
            }
            TimingExtractor::JsonResetsAt => json.roots().find_map(|v| json_resets_at(v, base, 0))?,
        };
        validate(at, now)
    }
}

static RETRY_DELAY_TEXT: OnceLock<Regex> = OnceLock::new();
static TEXT_DURATION: OnceLock<Regex> = OnceLock::new();
static TEXT_CLOCK: OnceLock<Regex> = OnceLock::new();
static EPOCH_SUFFIX: OnceLock<Regex> = OnceLock::new();
static TEXT_TIMESTAMP: OnceLock<Regex> = OnceLock::new();
static TEXT_UTC_DAY: OnceLock<Regex> = OnceLock::new();

/// These patterns are constants of this module, covered by its tests.
#[allow(clippy::expect_used)]
fn re<'a>(cell: &'a OnceLock<Regex>, pattern: &str) -> &'a Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("timing pattern compiles"))
}

/// Accepts a hint only if it is in the future and no more than [`MAX_HINT_SECS`] away.
///
/// `reset_at` keeps the provider's sub-second precision, rounded up to the millisecond (never
/// wake before the provider said); `retry_after_seconds` is that delay rounded up to the
/// second.
pub(crate) fn validate(at: DateTime<Utc>, now: DateTime<Utc>) -> Option<Hint> {
    let millis = at.timestamp_millis() + i64::from(!at.timestamp_subsec_nanos().is_multiple_of(1_000_000));
    let at = DateTime::from_timestamp_millis(millis)?;
    let delta = (at - now).num_milliseconds();
    if delta <= 0 || delta > MAX_HINT_SECS * 1000 {
        return None;
    }
    let retry_after_seconds = u64::try_from((delta + 999) / 1000).ok()?;
    Some(Hint {
        reset_at: at,
        retry_after_seconds,
    })
}

/// `retry-after`: delta seconds (RFC 9110) or an HTTP date in any of the three formats RFC
/// 9110 says a recipient must accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
/// obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and C's asctime
/// (`Sun Nov  6 08:49:37 1994`). An HTTP date is UTC by definition, asctime's included, so
/// none of them is a date "without a time zone". The `httpdate` crate reads the latter two
/// (a two-digit year below 70 is 20xx) and checks the weekday against the date.
pub(crate) fn retry_after(v: &str, base: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let v = v.trim();
    if v.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        let ms = parse_decimal_millis(v, 1000)?;
        return base.checked_add_signed(Duration::milliseconds(ms));
    }
    DateTime::parse_from_rfc2822(v)
        .map(|d| d.with_timezone(&Utc))
        .ok()
        .or_else(|| httpdate::parse_http_date(v).ok().map(DateTime::<Utc>::from))
}

/// A non-negative decimal number scaled to milliseconds (`scale` = ms per unit); at most 15
/// integer digits, so nothing overflows.
fn parse_decimal_millis(v: &str, scale: i64) -> Option<i64> {
    let v = v.trim();
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if int.is_empty() || int.len() > 15 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int: i64 = int.parse().ok()?;
    let mut ms = int.checked_mul(scale)?;
    // Fraction digits beyond what the scale resolves round the result up: a hint is never
    // earlier than the provider said.
    let mut unit = scale;
    for (i, b) in frac.bytes().enumerate() {
        unit /= 10;
        if unit == 0 {
            let rest = &frac.as_bytes()[i..];
            ms = ms.checked_add(i64::from(rest.iter().any(|&d| d != b'0')))?;
            break;
        }
        ms = ms.checked_add(i64::from(b - b'0') * unit)?;
    }
    Some(ms)
}

/// A Go `time.Duration` string: `6m0s`, `644ms`, `1h2m3.5s`, `2m59.56s`, `39s`.
pub(crate) fn parse_go_duration(v: &str) -> Option<Duration> {
    let mut rest = v.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total_ms: i64 = 0;
    while !rest.is_empty() {
        let n_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if n_end == 0 {
            return None;
        }
        let (num, tail) = rest.split_at(n_end);
        let (unit, scale, len) = if tail.starts_with("ms") {
            ("ms", 1, 2)
        } else if tail.starts_with("us") || tail.starts_with("µs") || tail.starts_with("ns") {
            // Sub-millisecond parts do not change a deadline measured in seconds.
            ("sub", 0, if tail.starts_with("µs") { "µs".len() } else { 2 })
        } else if tail.starts_with('h') {
            ("h", 3_600_000, 1)
        } else if tail.starts_with('m') {
            ("m", 60_000, 1)
        } else if tail.starts_with('s') {
            ("s", 1000, 1)
        } else {
            return None;
        };
        if unit != "sub" {
            total_ms = total_ms.checked_add(parse_decimal_millis(num, scale)?)?;
        } else {
            parse_decimal_millis(num, 1)?;
        }
        rest = &tail[len..];
    }
    Some(Duration::milliseconds(total_ms))
}

/// A bare number in an `x-ratelimit-reset*` header: epoch milliseconds, epoch seconds, or a
/// delay in seconds, told apart by size.
fn parse_number_reset(v: &str) -> Option<DateTimeOrDelta> {
    let ms = parse_decimal_millis(v, 1000)?;
    let n = ms / 1000;
    if n >= 1_000_000_000_000 {
        // Epoch milliseconds.
        DateTime::from_timestamp_millis(n).map(DateTimeOrDelta::At)
    } else if n >= 1_000_000_000 {
        DateTime::from_timestamp(n, 0).map(DateTimeOrDelta::At)
    } else {
        Some(DateTimeOrDelta::Delta(Duration::milliseconds(ms)))
    }
}

/// Reads a family of reset headers (`x-ratelimit-reset-requests`, `-tokens`, ...). When a
/// matching `remaining` header says 0, only the exhausted limits count; the latest reset wins.
fn family_reset<F>(s: &Signal<'_>, base: DateTime<Utc>, prefix: &str, parse: F) -> Option<DateTime<Utc>>
where
    F: Fn(&str) -> Option<DateTimeOrDelta>,
{
    let headers = s.headers?;
    let mut all = Vec::new();
    let mut exhausted = Vec::new();
    for (name, value) in
        headers.range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
    {
        if !name.starts_with(prefix) {
            break;
        }
        let Some(limit) = reset_limit_name(name, prefix) else {
            continue;
        };
        let Some(at) = parse(value).and_then(|d| d.at(base)) else {
            continue;
        };
        let remaining = remaining_header(prefix, &limit);
        // A plan window says it is used up by its status (`anthropic-ratelimit-unified-status:
        // rejected`), not by a remaining count.
        let rejected = || {
            headers
                .get(format!("{prefix}{limit}-status").as_str())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("rejected"))
        };
        if headers.get(remaining.as_str()).is_some_and(|r| r.trim() == "0") || rejected() {
            exhausted.push(at);
        }
        all.push(at);
    }
    if exhausted.is_empty() {
        all.into_iter().max()
    } else {
        exhausted.into_iter().max()
    }
}

/// `x-ratelimit-reset-tokens` -> `tokens`; `x-ratelimit-reset` -> ``;
/// `anthropic-ratelimit-input-tokens-reset` -> `input-tokens`.
fn reset_limit_name(name: &str, prefix: &str) -> Option<String> {
    let rest = &name[prefix.len()..];
    if prefix == "x-ratelimit-reset" {
        return Some(rest.trim_start_matches('-').to_owned());
    }
    rest.strip_suffix("-reset").map(str::to_owned)
}

fn remaining_header(prefix: &str, limit: &str) -> String {
    if prefix == "x-ratelimit-reset" {
        if limit.is_empty() {
            "x-ratelimit-remaining".to_owned()
        } else {
            format!("x-ratelimit-remaining-{limit}")
        }
    } else {
        format!("{prefix}{limit}-remaining")
    }
}

/// What a reset header parses to.
enum DateTimeOrDelta {
    At(DateTime<Utc>),
    Delta(Duration),
}

impl DateTimeOrDelta {
    fn at(self, base: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            DateTimeOrDelta::At(t) => Some(t),
            DateTimeOrDelta::Delta(d) => base.checked_add_signed(d),
        }
    }
}

/// Finds `resets_in_seconds` (preferred: no clock skew) or `resets_at` anywhere in a body.
fn json_resets_at(v: &Json<'_>, base: DateTime<Utc>, depth: usize) -> Option<DateTime<Utc>> {
    if depth > 12 {
        return None;
    }
    let num = |x: &Json<'_>| as_i64(x).or_else(|| x.as_str()?.trim().parse().ok());
    match v {
        Json::Object(_) => {
            if let Some(secs) = v.get("resets_in_seconds").and_then(num) {
                return base.checked_add_signed(Duration::seconds(secs.clamp(-1, MAX_HINT_SECS * 2)));
            }
            if let Some(at) = v.get("resets_at").and_then(num) {
                return DateTime::from_timestamp(at, 0);
            }
            v.entries()?
                .into_iter()
                .find_map(|(_, x)| json_resets_at(x, base, depth + 1))
        }
        Json::Array(a) => a.iter().find_map(|x| json_resets_at(x, base, depth + 1)),
        _ => None,
    }
}

/// A JSON number as an `i64`, if it is one.
fn as_i64(v: &Json<'_>) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// The first string value of `key` anywhere in `v` (bounded depth; objects in key order).
fn find_string<'v>(v: &'v Json<'_>, key: &str, depth: usize) -> Option<&'v str> {
    if depth > 12 {
        return None;
    }
    match v {
        Json::Object(_) => v.get(key).and_then(Json::as_str).or_else(|| {
            v.entries()?
                .into_iter()
                .find_map(|(_, x)| find_string(x, key, depth + 1))
        }),
        Json::Array(a) => a.iter().find_map(|x| find_string(x, key, depth + 1)),
        _ => None,
    }
}

/// Finds `RetryInfo.retryDelay` anywhere in a Google error body (bounded depth).
fn find_retry_delay(v: &Json<'_>, depth: usize) -> Option<Duration> {
    if depth > 12 {
        return None;
    }
    match v {
        Json::Object(_) => {
            let is_retry_info = v
                .get("@type")
                .and_then(Json::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"));
            if is_retry_info {
                match v.get("retryDelay") {
                    Some(Json::String(s)) => return parse_go_duration(s),
                    Some(d @ Json::Object(_)) => {
                        let secs = d
                            .get("seconds")
                            .and_then(|x| as_i64(x).or_else(|| x.as_str()?.parse().ok()))?;
                        let nanos = d.get("nanos").and_then(as_i64).unwrap_or(0);
                        return Some(
                            Duration::seconds(secs.clamp(0, MAX_HINT_SECS * 2))
                                + Duration::nanoseconds(nanos),
                        );
                    }
                    _ => return None,
                }
            }
            v.entries()?
                .into_iter()
                .find_map(|(_, x)| find_retry_delay(x, depth + 1))
        }
        Json::Array(a) => a.iter().find_map(|x| find_retry_delay(x, depth + 1)),
        _ => None,
    }
}

/// Parses "4h12m", "5 days 22 hours", "1m30s", "6.5s", "20ms", "~151 min", "2 hours and 5
/// minutes" at the start of `s`. Needs at least one number with a unit; "a moment" is vague.
pub(crate) fn parse_duration_phrase(s: &str) -> Option<Duration> {
    let mut rest = s.trim_start();
    for p in ["~", "about ", "approximately ", "approx. ", "roughly "] {
        if let Some(r) = rest.strip_prefix(p) {
            rest = r.trim_start();
        }
    }
    let mut total_ms: i64 = 0;
    let mut parts = 0;
    loop {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if n_end == 0 {
            break;
        }
        let num = rest[..n_end].trim_end_matches('.');
        let after = rest[n_end..].trim_start();
        let word_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let word = after[..word_end].to_ascii_lowercase();
        let scale: i64 = match word.as_str() {
            "d" | "day" | "days" => 86_400_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "s" | "sec" | "secs" | "second" | "seconds" => 1000,
            "ms" | "millisecond" | "milliseconds" => 1,
            _ => break,
        };
        total_ms = total_ms.checked_add(parse_decimal_millis(num, scale)?)?;
        parts += 1;
        // A terminal may wrap the phrase anywhere: any whitespace separates its parts.
        rest = after[word_end..].trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if let Some(r) = rest
            .strip_prefix("and")
            .filter(|r| r.starts_with(char::is_whitespace))
        {
            rest = r.trim_start();
        }
    }
    (parts > 0).then(|| Duration::milliseconds(total_ms))
}

/// "resets 7pm (Europe/Istanbul)", "reset at 3:30 AM (America/New_York)",
/// "resets Oct 9, 10am (America/Los_Angeles)", "resets 19:00 (UTC)". The zone is required.
fn text_clock(text: &str, base: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let r = re(
        &TEXT_CLOCK,
        r"(?i)(?-u:\b)resets?\s+(?:at\s+|on\s+)?(?:(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+([0-9]{1,2})(?:st|nd|rd|th)?,?\s+(?:at\s+)?)?([0-9]{1,2})(?::([0-9]{2}))?\s*(am|pm)?\s*\(([A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2})\)",
    );
    let c = r.captures(text)?;
    let tz: chrono_tz::Tz = c.get(6)?.as_str().parse().ok()?;
    let mut hour: u32 = c.get(3)?.as_str().parse().ok()?;
    let minute: u32 = c.get(4).map_or(Some(0), |m| m.as_str().parse().ok())?;
    match c.get(5).map(|m| m.as_str().to_ascii_lowercase()) {
        Some(ap) => {
            if !(1..=12).contains(&hour) {
                return None;
            }
            hour %= 12;
            if ap == "pm" {
                hour += 12;
            }
        }
        None if hour > 23 => return None,
        None => {}
    }
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    let local_base = base.with_timezone(&tz);
    let resolve = |date: NaiveDate| -> Option<DateTime<Utc>> {
        tz.from_local_datetime(&date.and_time(time))
            .earliest()
            .map(|d| d.with_timezone(&Utc))
    };
    match (c.get(1), c.get(2)) {
        (Some(mon), Some(day)) => {
            let month = month_number(mon.as_str())?;
            let day: u32 = day.as_str().parse().ok()?;
            let this_year = resolve(NaiveDate::from_ymd_opt(local_base.year(), month, day)?)?;
            if this_year > base {
                Some(this_year)
            } else {
                resolve(NaiveDate::from_ymd_opt(local_base.year() + 1, month, day)?)
            }
        }
        _ => {
            let today = resolve(local_base.date_naive())?;
            if today > base {
                Some(today)
            } else {
                resolve(local_base.date_naive().succ_opt()?)
            }
        }
    }
}

fn month_number(m: &str) -> Option<u32> {
    const M: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let m = m.to_ascii_lowercase();
    M.iter()
        .position(|x| *x == m)
        .and_then(|i| u32::try_from(i + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{catalogue::SignalKind, engine::Signal};
    use std::borrow::Cow;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("test time")
            .with_timezone(&Utc)
    }

    const NOW: &str = "2026-11-30T08:00:00Z";

    fn text_hint(x: &str, text: &str) -> Option<Hint> {
        let s = Signal::for_test(SignalKind::Stderr, Cow::Borrowed(text), None);
        TimingExtractor::parse(x)
            .expect("extractor")
            .extract(&s, t(NOW), t(NOW))
    }

    fn header_hint(x: &str, headers: &[(&str, &str)]) -> Option<Hint> {
        let h: crate::envelope::Headers<'_> = headers
            .iter()
            .map(|(k, v)| (Cow::Borrowed(*k), Cow::Borrowed(*v)))
            .collect();
        let s = Signal::for_test(SignalKind::Http, Cow::Borrowed(""), Some(&h));
        TimingExtractor::parse(x)
            .expect("extractor")
            .extract(&s, t(NOW), t(NOW))
    }

    fn secs(h: Option<Hint>) -> Option<u64> {
        h.map(|h| h.retry_after_seconds)
    }

    #[test]
    fn retry_after_seconds_and_http_dates_are_read() {
        assert_eq!(
            secs(header_hint("retry_after", &[("retry-after", "20")])),
            Some(20)
        );
        let h =
            header_hint("retry_after", &[("retry-after", "Mon, 30 Nov 2026 08:05:00 GMT")]).expect("date");
        assert_eq!(h.reset_at, t("2026-11-30T08:05:00Z"));
        assert_eq!(h.retry_after_seconds, 300);
    }

    #[test]
    fn retry_after_reads_the_obsolete_rfc_850_and_asctime_http_dates() {
        for date in [
            "Monday, 30-Nov-26 08:05:00 GMT",
            "Mon Nov 30 08:05:00 2026",
            " Mon Nov 30 08:05:00 2026 ",
        ] {
            let h = header_hint("retry_after", &[("retry-after", date)]).expect(date);
            assert_eq!(h.reset_at, t("2026-11-30T08:05:00Z"), "{date}");
            assert_eq!(h.retry_after_seconds, 300, "{date}");
        }
        // asctime pads a one-digit day with a space.
        let h = header_hint("retry_after", &[("retry-after", "Tue Dec  1 08:00:00 2026")]).expect("padded");
        assert_eq!(h.reset_at, t("2026-12-01T08:00:00Z"));
    }

    #[test]
    fn obsolete_http_dates_that_are_past_wrong_or_malformed_give_no_hint() {
        for date in [
            // In the past.
            "Sunday, 29-Nov-26 08:05:00 GMT",
            "Sun Nov 29 08:05:00 2026",
            // The weekday does not fit the date.
            "Tuesday, 30-Nov-26 08:05:00 GMT",
            "Tue Nov 30 08:05:00 2026",
            // Malformed: no zone in RFC 850, a bad month, a bad hour.
            "Monday, 30-Nov-26 08:05:00",
            "Mon Nox 30 08:05:00 2026",
            "Mon Nov 30 28:05:00 2026",
            // Too far (more than a month).
            "Fri Jan 29 08:05:00 2027",
        ] {
            assert_eq!(
                header_hint("retry_after", &[("retry-after", date)]),
                None,
                "{date}"
            );
        }
    }

    #[test]
    fn retry_after_rejects_zero_past_garbage_and_absurd_values() {
        assert_eq!(header_hint("retry_after", &[("retry-after", "0")]), None);
        assert_eq!(header_hint("retry_after", &[("retry-after", "-5")]), None);
        assert_eq!(header_hint("retry_after", &[("retry-after", "soon")]), None);
        assert_eq!(
            header_hint("retry_after", &[("retry-after", "Sun, 29 Nov 2026 08:05:00 GMT")]),
            None
        );
        assert_eq!(
            header_hint("retry_after", &[("retry-after", "99999999999999")]),
            None
        );
        assert_eq!(header_hint("retry_after", &[("retry-after", "3000000")]), None);
    }

    #[test]
    fn retry_after_ms_rounds_up_to_the_second() {
        assert_eq!(
            secs(header_hint("retry_after_ms", &[("retry-after-ms", "644")])),
            Some(1)
        );
        assert_eq!(
            secs(header_hint("retry_after_ms", &[("retry-after-ms", "20000")])),
            Some(20)
        );
    }

    #[test]
    fn go_durations_from_ratelimit_headers_prefer_the_exhausted_limit() {
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::minutes(6)));
        assert_eq!(parse_go_duration("644ms"), Some(Duration::milliseconds(644)));
        assert_eq!(
            parse_go_duration("2m59.56s"),
            Some(Duration::milliseconds(179_560))
        );
        assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::seconds(3723)));
        assert_eq!(parse_go_duration("6 minutes"), None);
        assert_eq!(parse_go_duration(""), None);
        let h = &[
            ("x-ratelimit-reset-requests", "644ms"),
            ("x-ratelimit-reset-tokens", "6m0s"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-remaining-tokens", "1200"),
        ];
        assert_eq!(secs(header_hint("x_ratelimit_reset", h)), Some(1));
        let h = &[
            ("x-ratelimit-reset-requests", "644ms"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(secs(header_hint("x_ratelimit_reset", h)), Some(360));
    }

    #[test]
    fn bare_ratelimit_reset_numbers_are_told_apart_by_size() {
        // Epoch milliseconds (OpenRouter), epoch seconds, and plain delay seconds.
        let ms = (t(NOW) + Duration::seconds(90)).timestamp_millis().to_string();
        assert_eq!(
            secs(header_hint("x_ratelimit_reset", &[("x-ratelimit-reset", &ms)])),
            Some(90)
        );
        let s = (t(NOW) + Duration::seconds(90)).timestamp().to_string();
        assert_eq!(
            secs(header_hint("x_ratelimit_reset", &[("x-ratelimit-reset", &s)])),
            Some(90)
        );
        assert_eq!(
            secs(header_hint("x_ratelimit_reset", &[("x-ratelimit-reset", "30")])),
            Some(30)
        );
    }

    #[test]
    fn anthropic_reset_timestamps_are_rfc3339() {
        let h = &[
            ("anthropic-ratelimit-requests-reset", "2026-11-30T08:00:30Z"),
            ("anthropic-ratelimit-requests-remaining", "40"),
            ("anthropic-ratelimit-input-tokens-reset", "2026-11-30T08:00:12Z"),
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
        ];
        let hint = header_hint("anthropic_ratelimit_reset", h).expect("hint");
        assert_eq!(hint.reset_at, t("2026-11-30T08:00:12Z"));
        assert_eq!(
            header_hint(
                "anthropic_ratelimit_reset",
                &[("anthropic-ratelimit-tokens-reset", "soon")]
            ),
            None
        );
    }

    #[test]
    fn google_retry_info_is_read_from_json_and_from_text() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"39s"}]}}"#;
        assert_eq!(secs(text_hint("google_retry_info", body)), Some(39));
        let text = "[{'@type': 'type.googleapis.com/google.rpc.RetryInfo', 'retryDelay': '6.5s'}]";
        assert_eq!(secs(text_hint("google_retry_info", text)), Some(7));
        assert_eq!(text_hint("google_retry_info", r#"{"retryDelay":"soon"}"#), None);
    }

    #[test]
    fn text_durations_in_each_wording() {
        assert_eq!(
            secs(text_hint("text_duration", "Please try again in 4h12m.")),
            Some(4 * 3600 + 12 * 60)
        );
        assert_eq!(
            secs(text_hint("text_duration", "Your limit resets in 5 days 22 hours")),
            Some(5 * 86400 + 22 * 3600)
        );
        assert_eq!(
            secs(text_hint("text_duration", "Please retry in 39.866412418s.")),
            Some(40)
        );
        assert_eq!(
            secs(text_hint("text_duration", "Please try again in 20ms.")),
            Some(1)
        );
        assert_eq!(
            secs(text_hint("text_duration", "try again in ~151 min.")),
            Some(151 * 60)
        );
        assert_eq!(
            secs(text_hint("text_duration", "try again in 2 hours and 5 minutes")),
            Some(7500)
        );
        assert_eq!(
            secs(text_hint("text_duration", "Please try again in 6m0s.")),
            Some(360)
        );
    }

    #[test]
    fn prose_durations_the_way_terminals_print_them() {
        let cases: &[(&str, i64)] = &[
            ("Please try again in 250ms.", 250),
            ("Please try again in 12.5s.", 12_500),
            (
                "Rate limit exceeded, please retry after 45 seconds and try again",
                45_000,
            ),
            ("Please retry after: 30s", 30_000),
            ("try again in 2hr 5min", 7_500_000),
            ("try again in 3 hours 10 minutes", 11_400_000),
            ("or try again in 2 days 4 hours 30 minutes.", 189_000_000),
            ("It will reset in 3 days.", 259_200_000),
            ("Your quota will reset after 8h44m7s.", 31_447_000),
            // Wrapped by the terminal: inside the lead-in, between number and unit, between parts.
            ("Please try\n    again in 14.036s.", 14_036),
            ("or try again in 5 days 22 hours 11\nminutes.", 511_860_000),
            ("Please try again in 15 hours\n  23 minutes.", 55_380_000),
            ("try again in 2 hours and\n 5 minutes", 7_500_000),
        ];
        for (text, ms) in cases {
            let h = text_hint("text_duration", text).unwrap_or_else(|| panic!("{text:?}"));
            assert_eq!(h.reset_at, t(NOW) + Duration::milliseconds(*ms), "{text:?}");
            assert_eq!(
                h.retry_after_seconds,
                u64::try_from((ms + 999) / 1000).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn sub_second_precision_is_kept_in_reset_at_and_rounded_up_in_seconds() {
        let h = text_hint("text_duration", "Please try again in 9.816s.").expect("hint");
        assert_eq!(h.reset_at, t("2026-11-30T08:00:09.816Z"));
        assert_eq!(h.retry_after_seconds, 10);
        // Beyond a millisecond, the reset rounds up: never before the provider said.
        let h = text_hint("text_duration", "Please retry in 39.866412418s.").expect("hint");
        assert_eq!(h.reset_at, t("2026-11-30T08:00:39.867Z"));
        assert_eq!(h.retry_after_seconds, 40);
    }

    #[test]
    fn code_assist_quota_reset_delay_is_read_when_retry_info_is_absent() {
        let body = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"QUOTA_EXHAUSTED","metadata":{"quotaResetDelay":"2h28m20.5s"}}]}}"#;
        let h = text_hint("google_retry_info", body).expect("hint");
        assert_eq!(h.reset_at, t(NOW) + Duration::milliseconds(8_900_500));
    }

    #[test]
    fn vague_text_gives_no_hint() {
        assert_eq!(text_hint("text_duration", "Please try again in a moment."), None);
        assert_eq!(text_hint("text_duration", "try again in a few minutes"), None);
        assert_eq!(text_hint("text_duration", "try again in 20"), None);
        assert_eq!(text_hint("text_duration", "try again later"), None);
        assert_eq!(text_hint("text_duration", "resets in 45 days"), None);
        assert_eq!(
            text_hint("text_duration", "Please wait and try sending again later."),
            None
        );
        assert_eq!(
            text_hint("text_duration", "Please wait a moment before trying again."),
            None
        );
    }

    #[test]
    fn clock_times_need_a_real_zone() {
        // 08:00Z is 11:00 in Istanbul (UTC+3); 7pm there is 16:00Z the same day.
        let h = text_hint(
            "text_clock",
            "5-hour limit reached ∙ resets 7pm (Europe/Istanbul)",
        )
        .expect("hint");
        assert_eq!(h.reset_at, t("2026-11-30T16:00:00Z"));
        // 10am Istanbul already passed today, so it is tomorrow's.
        let h = text_hint("text_clock", "resets 10am (Europe/Istanbul)").expect("hint");
        assert_eq!(h.reset_at, t("2026-12-01T07:00:00Z"));
        let h = text_hint(
            "text_clock",
            "Your limit will reset at 3:30 AM (America/New_York)",
        )
        .expect("hint");
        assert_eq!(h.reset_at, t("2026-11-30T08:30:00Z"));
        let h = text_hint(
            "text_clock",
            "Weekly limit reached ∙ resets Dec 3, 10am (America/Los_Angeles)",
        )
        .expect("hint");
        assert_eq!(h.reset_at, t("2026-12-03T18:00:00Z"));
        assert_eq!(text_hint("text_clock", "resets 7pm"), None);
        assert_eq!(text_hint("text_clock", "resets 7pm (Mars/Olympus)"), None);
        assert_eq!(text_hint("text_clock", "resets 13pm (UTC)"), None);
        assert_eq!(text_hint("text_clock", "resets 25:00 (UTC)"), None);
    }

    #[test]
    fn epoch_suffix_and_timestamps() {
        let h = text_hint("epoch_suffix", "Claude AI usage limit reached|1796032800").expect("hint");
        assert_eq!(
            h.reset_at,
            DateTime::from_timestamp(1_796_032_800, 0).expect("ts")
        );
        assert_eq!(
            text_hint("epoch_suffix", "Claude AI usage limit reached|1600000000"),
            None
        );
        assert_eq!(text_hint("epoch_suffix", "usage limit reached"), None);
        let h = text_hint("text_timestamp", "quota resets at 2026-11-30T09:00:00Z").expect("hint");
        assert_eq!(h.retry_after_seconds, 3600);
        assert_eq!(
            text_hint("text_timestamp", "quota resets at 2026-11-30T09:00:00"),
            None
        );
    }

    #[test]
    fn relative_hints_count_from_when_the_evidence_occurred() {
        let s = Signal::for_test(SignalKind::Stderr, Cow::Borrowed("try again in 10m"), None);
        let x = TimingExtractor::TextDuration;
        let occurred = t("2026-11-30T07:55:00Z");
        let h = x.extract(&s, occurred, t(NOW)).expect("hint");
        assert_eq!(h.reset_at, t("2026-11-30T08:05:00Z"));
        assert_eq!(h.retry_after_seconds, 300);
        // Evidence from an hour ago whose hint has passed gives nothing.
        assert_eq!(x.extract(&s, t("2026-11-30T07:00:00Z"), t(NOW)), None);
    }
}
