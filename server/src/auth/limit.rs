//! Login rate limits, per account name and per client address (`governor`'s keyed GCRA
//! limiters, in memory, on the server's injected clock so tests move time instead of waiting).
//! Every attempt counts, successful or not, and the account limit applies to names nobody has
//! too, so a 429 never tells whether an account exists.
//!
//! Trade-off: someone who knows an account's name can keep it rate-limited (they cannot
//! lock it: the limit refills). The per-address limit bounds how fast one client can try
//! names. Keys are bounded (names by `policy::limits::MAX_ACCOUNT_NAME_CHARS`) and idle keys
//! are dropped by [`LoginLimiter::tidy`], which `serve` runs periodically.

use governor::{
    clock::Clock as _, middleware::NoOpMiddleware, state::keyed::HashMapStateStore, Quota, RateLimiter,
};
use std::{num::NonZeroU32, sync::Arc, time::Duration};

/// The server's clock as governor reads it: time since the Unix epoch (never negative).
#[derive(Clone)]
struct InjectedClock(Arc<dyn crate::clock::Clock>);

impl governor::clock::Clock for InjectedClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        let micros = self.0.now().timestamp_micros().max(0);
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    }
}

type Keyed = RateLimiter<String, HashMapStateStore<String>, InjectedClock, NoOpMiddleware<Duration>>;

/// How many attempts, how fast.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    /// Attempts for one account name: a burst, then one per period.
    pub per_account: Quota,
    /// Attempts from one address.
    pub per_address: Quota,
}

impl Default for LoginLimits {
    /// Five attempts at a name, then one every 12 s; thirty from an address, then one every 2 s.
    fn default() -> Self {
        LoginLimits {
            per_account: quota(5, Duration::from_secs(12)),
            per_address: quota(30, Duration::from_secs(2)),
        }
    }
}

impl LoginLimits {
    /// No practical limit (benchmarks and tests that sign in many times).
    pub fn generous() -> Self {
        LoginLimits {
            per_account: quota(1_000_000, Duration::from_millis(1)),
            per_address: quota(1_000_000, Duration::from_millis(1)),
        }
    }
}

/// `burst` attempts at once, then one per `every`.
pub fn quota(burst: u32, every: Duration) -> Quota {
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(every)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(burst)
}

pub struct LoginLimiter {
    account: Keyed,
    address: Keyed,
    clock: InjectedClock,
}

impl LoginLimiter {
    pub fn new(limits: LoginLimits, clock: Arc<dyn crate::clock::Clock>) -> LoginLimiter {
        let clock = InjectedClock(clock);
        LoginLimiter {
            account: RateLimiter::hashmap_with_clock(limits.per_account, clock.clone()),
            address: RateLimiter::hashmap_with_clock(limits.per_address, clock.clone()),
            clock,
        }
    }

    /// Counts one attempt at `account` from `address`; `Err(wait)` when either limit is
    /// reached (nothing else is checked then).
    pub fn check(&self, account: &str, address: &str) -> Result<(), Duration> {
        let clock = &self.clock;
        self.address
            .check_key(&address.to_owned())
            .map_err(|n| n.wait_time_from(clock.now()))?;
        let name: String = account
            .chars()
            .take(policy::limits::MAX_ACCOUNT_NAME_CHARS)
            .flat_map(char::to_lowercase)
            .collect();
        self.account
            .check_key(&name)
            .map_err(|n| n.wait_time_from(clock.now()))
    }

    /// Forgets keys whose limits have refilled.
    pub fn tidy(&self) {
        self.account.retain_recent();
        self.address.retain_recent();
        self.account.shrink_to_fit();
        self.address.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use chrono::{TimeDelta, TimeZone, Utc};

    fn limiter() -> (LoginLimiter, ManualClock) {
        let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap());
        (
            LoginLimiter::new(LoginLimits::default(), Arc::new(clock.clone())),
            clock,
        )
    }

    #[test]
    fn the_sixth_quick_attempt_at_one_name_waits_and_other_names_do_not() {
        let (l, clock) = limiter();
        for _ in 0..5 {
            assert!(l.check("ada", "10.0.0.1").is_ok());
        }
        let wait = l.check("ADA", "10.0.0.1").unwrap_err();
        assert_eq!(wait, Duration::from_secs(12));
        assert!(l.check("grace", "10.0.0.1").is_ok());
        // One more attempt once the wait has passed, and only one.
        clock.advance(TimeDelta::seconds(12));
        assert!(l.check("ada", "10.0.0.1").is_ok());
        assert!(l.check("ada", "10.0.0.1").is_err());
    }

    #[test]
    fn one_address_trying_many_names_is_limited() {
        let (l, _) = limiter();
        for i in 0..30 {
            assert!(l.check(&format!("name{i}"), "10.0.0.2").is_ok());
        }
        assert!(l.check("another", "10.0.0.2").is_err());
        assert!(l.check("another", "10.0.0.3").is_ok());
    }
}
