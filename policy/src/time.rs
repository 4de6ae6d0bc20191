//! Deadline arithmetic that cannot panic or wrap, within the instants Recourse can store.
//!
//! Every deadline Recourse computes is "an instant plus a duration", and the durations come
//! from input (a reset hint, a policy, a script, a test clock set far ahead). `chrono` panics on
//! `DateTime + TimeDelta` overflow, so nothing outside this module adds to an instant: these
//! functions saturate. They saturate at [`latest`] (the last millisecond of the year 9999)
//! rather than at chrono's own limit, because deadlines are stored as RFC 3339 text, which has
//! four-digit years: the saturated deadline still round-trips through the database, and it
//! compares later than every real one, so it simply never fires.

use chrono::{DateTime, TimeDelta, Utc};

/// 9999-12-31T23:59:59.999Z in Unix milliseconds.
const LATEST_MS: i64 = 253_402_300_799_999;
/// 0000-01-01T00:00:00Z in Unix milliseconds.
const EARLIEST_MS: i64 = -62_167_219_200_000;

/// The last instant a deadline or a clock may hold: 9999-12-31T23:59:59.999Z.
pub fn latest() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(LATEST_MS).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The first instant a deadline or a clock may hold: 0000-01-01T00:00:00Z.
pub fn earliest() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(EARLIEST_MS).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// `t` brought within [`earliest`]..=[`latest`].
pub fn clamp(t: DateTime<Utc>) -> DateTime<Utc> {
    t.clamp(earliest(), latest())
}

/// `t + seconds`, saturating at [`latest`].
pub fn after_seconds(t: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    let delta = i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .unwrap_or(TimeDelta::MAX);
    after(t, delta)
}

/// `t + delta`, saturating at [`latest`] (or [`earliest`] for a negative `delta`).
pub fn after(t: DateTime<Utc>, delta: TimeDelta) -> DateTime<Utc> {
    clamp(
        t.checked_add_signed(delta)
            .unwrap_or(if delta < TimeDelta::zero() {
                earliest()
            } else {
                latest()
            }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{SecondsFormat, TimeZone};
    use proptest::prelude::*;

    #[test]
    fn adding_saturates_at_the_last_storable_instant_instead_of_panicking() {
        let t = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        assert_eq!(after_seconds(t, 5), t + TimeDelta::seconds(5));
        assert_eq!(after_seconds(t, u64::MAX), latest());
        assert_eq!(after_seconds(t, 10_000_000_000_000), latest());
        assert_eq!(after(DateTime::<Utc>::MAX_UTC, TimeDelta::seconds(1)), latest());
        assert_eq!(
            after(DateTime::<Utc>::MIN_UTC, TimeDelta::seconds(-1)),
            earliest()
        );
        assert_eq!(after(t, TimeDelta::MAX), latest());
        assert_eq!(
            latest().to_rfc3339_opts(SecondsFormat::Millis, true),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            earliest().to_rfc3339_opts(SecondsFormat::Millis, true),
            "0000-01-01T00:00:00.000Z"
        );
    }

    proptest! {
        #[test]
        fn no_sum_panics_leaves_the_storable_range_or_goes_backwards(
            ms in any::<i64>(),
            secs in any::<u64>(),
            delta_ms in any::<i64>(),
        ) {
            let t = DateTime::from_timestamp_millis(ms.clamp(EARLIEST_MS, LATEST_MS)).unwrap();
            let later = after_seconds(t, secs);
            prop_assert!(later >= t && later <= latest());
            let moved = after(t, TimeDelta::milliseconds(delta_ms));
            prop_assert!(moved >= earliest() && moved <= latest());
            if delta_ms >= 0 {
                prop_assert!(moved >= t);
            } else {
                prop_assert!(moved <= t);
            }
        }
    }
}
