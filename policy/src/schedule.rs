//! Retry delays and the human-readable schedule preview.
//!
//! Retry is a question, not an action: these functions say how long, and the server stores an
//! absolute deadline and owns the timer. The delay for retry ordinal `k` is
//! `initial * 2^(k-1)`, capped at [`MAX_RETRY_DELAY_SECONDS`]. All arithmetic saturates, so any
//! `u64` interval and any `u32` ordinal give an answer within the cap and never overflow.
//!
//! The preview strings are what the policy form shows under the controls, computed by the same
//! code the evaluator uses, so the UI cannot describe a schedule the server would not run.

use crate::{
    document::{OnExhausted, ValidatedClassPolicy},
    limits::{MAX_MAX_RETRIES, MAX_RETRY_DELAY_SECONDS},
};
use std::num::NonZeroU32;

/// The delay before retry number `ordinal` (1-based), in seconds, capped at 24 h.
pub fn retry_delay_seconds(initial_interval_seconds: u64, ordinal: NonZeroU32) -> u64 {
    let doublings = ordinal.get() - 1;
    let factor = 1u64.checked_shl(doublings).unwrap_or(u64::MAX);
    initial_interval_seconds
        .saturating_mul(factor)
        .min(MAX_RETRY_DELAY_SECONDS)
}

/// The delays of a whole retry budget, in order. `max_retries` is clamped to
/// [`MAX_MAX_RETRIES`] so a form's half-typed value cannot allocate without bound.
pub fn retry_schedule(initial_interval_seconds: u64, max_retries: u32) -> Vec<u64> {
    (1..=max_retries.min(MAX_MAX_RETRIES))
        .filter_map(NonZeroU32::new)
        .map(|k| retry_delay_seconds(initial_interval_seconds, k))
        .collect()
}

/// The delays a validated policy would use (empty when retry is disabled).
pub fn retry_delays(policy: &ValidatedClassPolicy) -> Vec<u64> {
    policy
        .retry()
        .map(|r| retry_schedule(r.initial_interval_seconds(), r.max_retries()))
        .unwrap_or_default()
}

/// A duration a person can read: `45 s`, `1 min 30 s`, `2 h 5 min`, `7 days`, `1 day 1 h`.
/// Zero units are left out; zero itself is `0 s`.
pub fn format_duration(seconds: u64) -> String {
    if seconds == 0 {
        return "0 s".to_owned();
    }
    let days = seconds / 86_400;
    let hours = seconds % 86_400 / 3_600;
    let minutes = seconds % 3_600 / 60;
    let secs = seconds % 60;
    let mut parts = Vec::with_capacity(4);
    match days {
        0 => {}
        1 => parts.push("1 day".to_owned()),
        d => parts.push(format!("{d} days")),
    }
    for (n, unit) in [(hours, "h"), (minutes, "min"), (secs, "s")] {
        if n > 0 {
            parts.push(format!("{n} {unit}"));
        }
    }
    parts.join(" ")
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// What `on_exhausted` does, as the end of a sentence.
pub fn describe_outcome(outcome: OnExhausted) -> &'static str {
    match outcome {
        OnExhausted::Skip => "skip to the next candidate",
        OnExhausted::Stop => "stop for manual recovery",
    }
}

/// The retry part of the preview, e.g.
/// `retries after 5 s, 10 s and 20 s (35 s in all), then skip to the next candidate`.
pub fn schedule_preview(policy: &ValidatedClassPolicy) -> String {
    let outcome = describe_outcome(policy.on_exhausted());
    let delays = retry_delays(policy);
    match delays.as_slice() {
        [] if policy.max_wait_seconds().is_some() => format!("no retries, then {outcome}"),
        [] => format!("no retries: {outcome} immediately"),
        [one] => format!("retries once after {}, then {outcome}", format_duration(*one)),
        many => {
            let total = many.iter().fold(0u64, |acc, d| acc.saturating_add(*d));
            let listed: Vec<String> = many.iter().map(|d| format_duration(*d)).collect();
            format!(
                "retries after {} ({} in all), then {outcome}",
                join_and(&listed),
                format_duration(total)
            )
        }
    }
}

/// The reset-waiting part of the preview, when reset waiting is enabled.
pub fn wait_preview(policy: &ValidatedClassPolicy) -> Option<String> {
    policy.max_wait_seconds().map(|w| {
        format!(
            "waits once for a trusted reset time up to {} away, then tries again",
            format_duration(w)
        )
    })
}

/// The whole policy in one sentence, e.g. "Waits once for a trusted reset time up to 5 min
/// away, then tries again; retries once after 5 s, then stop for manual recovery."
pub fn describe_policy(policy: &ValidatedClassPolicy) -> String {
    let mut parts: Vec<String> = wait_preview(policy).into_iter().collect();
    parts.push(schedule_preview(policy));
    let mut sentence = parts.join("; ");
    if let Some(first) = sentence.get(..1) {
        let upper = first.to_ascii_uppercase();
        sentence.replace_range(..1, &upper);
    }
    sentence.push('.');
    sentence
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{ClassPolicy, RetryPolicy, WaitForResetPolicy};

    fn k(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn policy(retry: Option<(u32, u64)>, wait: Option<u64>, on: OnExhausted) -> ValidatedClassPolicy {
        ValidatedClassPolicy::new(ClassPolicy {
            retry: match retry {
                Some((max_retries, initial_interval_seconds)) => RetryPolicy {
                    enabled: true,
                    max_retries,
                    initial_interval_seconds,
                },
                None => ClassPolicy::default().retry,
            },
            wait_for_reset: match wait {
                Some(max_wait_seconds) => WaitForResetPolicy {
                    enabled: true,
                    max_wait_seconds,
                },
                None => ClassPolicy::default().wait_for_reset,
            },
            on_exhausted: on,
        })
        .unwrap()
    }

    #[test]
    fn delays_double_from_the_initial_interval() {
        assert_eq!(retry_schedule(5, 3), vec![5, 10, 20]);
        assert_eq!(retry_schedule(1, 10), vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
    }

    #[test]
    fn delay_never_exceeds_twenty_four_hours() {
        assert_eq!(retry_schedule(3_600, 10).last(), Some(&86_400));
        assert_eq!(retry_delay_seconds(3_600, k(5)), 57_600);
        assert_eq!(retry_delay_seconds(3_600, k(6)), 86_400);
    }

    #[test]
    fn delay_calculation_does_not_overflow() {
        assert_eq!(
            retry_delay_seconds(u64::MAX, k(u32::MAX)),
            MAX_RETRY_DELAY_SECONDS
        );
        assert_eq!(retry_delay_seconds(1, k(64)), MAX_RETRY_DELAY_SECONDS);
        assert_eq!(retry_delay_seconds(1, k(65)), MAX_RETRY_DELAY_SECONDS);
        assert_eq!(retry_delay_seconds(u64::MAX, k(1)), MAX_RETRY_DELAY_SECONDS);
        assert_eq!(retry_delay_seconds(0, k(u32::MAX)), 0);
    }

    #[test]
    fn schedule_length_is_bounded_by_the_limit() {
        assert_eq!(retry_schedule(5, u32::MAX).len(), MAX_MAX_RETRIES as usize);
        assert!(retry_schedule(5, 0).is_empty());
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(format_duration(0), "0 s");
        assert_eq!(format_duration(45), "45 s");
        assert_eq!(format_duration(90), "1 min 30 s");
        assert_eq!(format_duration(3_600), "1 h");
        assert_eq!(format_duration(7_500), "2 h 5 min");
        assert_eq!(format_duration(86_400), "1 day");
        assert_eq!(format_duration(90_000), "1 day 1 h");
        assert_eq!(format_duration(604_800), "7 days");
        assert_eq!(format_duration(3_661), "1 h 1 min 1 s");
    }

    #[test]
    fn preview_matches_the_issue_example() {
        let p = policy(Some((3, 5)), None, OnExhausted::Skip);
        assert_eq!(
            schedule_preview(&p),
            "retries after 5 s, 10 s and 20 s (35 s in all), then skip to the next candidate"
        );
    }

    #[test]
    fn preview_covers_one_retry_none_and_waiting() {
        assert_eq!(
            schedule_preview(&policy(Some((1, 5)), None, OnExhausted::Stop)),
            "retries once after 5 s, then stop for manual recovery"
        );
        assert_eq!(
            schedule_preview(&policy(None, None, OnExhausted::Skip)),
            "no retries: skip to the next candidate immediately"
        );
        assert_eq!(
            describe_policy(&policy(None, Some(300), OnExhausted::Stop)),
            "Waits once for a trusted reset time up to 5 min away, then tries again; no retries, then stop \
             for manual recovery."
        );
        assert_eq!(
            describe_policy(&policy(Some((2, 90)), None, OnExhausted::Skip)),
            "Retries after 1 min 30 s and 3 min (4 min 30 s in all), then skip to the next candidate."
        );
    }
}
