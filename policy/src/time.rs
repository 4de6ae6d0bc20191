//! Deadline arithmetic that cannot panic or wrap.
//!
//! Every deadline Recourse computes is "an instant plus a duration", and the durations come
//! from input (a reset hint, a policy, a script, a test clock set far ahead). `chrono` panics on
//! `DateTime + TimeDelta` overflow, so nothing outside this module adds to an instant: these
//! functions saturate at the latest instant chrono can hold, which compares later than every
//! real deadline and so simply never fires.

use chrono::{DateTime, TimeDelta, Utc};

/// `t + seconds`, saturating.
pub fn after_seconds(t: DateTime<Utc>, seconds: u64) -> DateTime<Utc> {
    let delta = i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .unwrap_or(TimeDelta::MAX);
    after(t, delta)
}

/// `t + delta`, saturating (a negative `delta` saturates at the earliest instant).
pub fn after(t: DateTime<Utc>, delta: TimeDelta) -> DateTime<Utc> {
    t.checked_add_signed(delta)
        .unwrap_or(if delta < TimeDelta::zero() {
            DateTime::<Utc>::MIN_UTC
        } else {
            DateTime::<Utc>::MAX_UTC
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn adding_saturates_instead_of_panicking() {
        let t = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        assert_eq!(after_seconds(t, 5), t + TimeDelta::seconds(5));
        assert_eq!(after_seconds(t, u64::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(after_seconds(t, 10_000_000_000_000), DateTime::<Utc>::MAX_UTC);
        assert_eq!(
            after(DateTime::<Utc>::MAX_UTC, TimeDelta::seconds(1)),
            DateTime::<Utc>::MAX_UTC
        );
        assert_eq!(
            after(DateTime::<Utc>::MIN_UTC, TimeDelta::seconds(-1)),
            DateTime::<Utc>::MIN_UTC
        );
        assert_eq!(after(t, TimeDelta::MAX), DateTime::<Utc>::MAX_UTC);
    }
}
