//! The injected clock. Every "now" the engine and the scheduler use comes from here, so tests
//! drive a 5-10-20 s schedule or a seven-day wait in microseconds with a [`ManualClock`], and
//! the crash test moves the real process's time through `--test-clock`.
//!
//! Why `sleep_until` is on the clock and not `tokio::time::sleep`: with a manual clock, time
//! moves only when a test says so, and the sleeper must wake exactly then, not after some real
//! duration. The system clock sleeps with tokio (so `tokio::time::pause` also works on it).

use chrono::{DateTime, TimeDelta, Utc};
use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
};
use tokio::sync::watch;

/// A boxed, sendable future.
pub type ClockFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where "now" comes from.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
    /// Resolves once `now() >= deadline` (cancel-safe: drop it to stop waiting).
    fn sleep_until(&self, deadline: DateTime<Utc>) -> ClockFuture<'_>;
}

/// Wall-clock UTC time; sleeps with tokio.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> ClockFuture<'_> {
        Box::pin(async move {
            loop {
                let left = deadline - Utc::now();
                if left <= TimeDelta::zero() {
                    return;
                }
                // Wall time can jump; re-check after sleeping.
                tokio::time::sleep(left.to_std().unwrap_or_default()).await;
            }
        })
    }
}

/// A clock that moves only when told to. Sleepers wake when it is set at or past their
/// deadline.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    now: Mutex<DateTime<Utc>>,
    tick: watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        let (tick, _) = watch::channel(start);
        ManualClock {
            inner: Arc::new(ManualInner {
                now: Mutex::new(start),
                tick,
            }),
        }
    }

    /// Sets the time (never backwards: an earlier time is ignored; never past the last instant
    /// Recourse can store, `policy::time::latest`) and wakes due sleepers.
    pub fn set(&self, to: DateTime<Utc>) {
        let to = policy::time::clamp(to);
        let now = {
            let mut now = self.inner.now.lock().unwrap_or_else(|e| e.into_inner());
            if to > *now {
                *now = to;
            }
            *now
        };
        self.inner.tick.send_replace(now);
    }

    pub fn advance(&self, by: TimeDelta) {
        self.set(policy::time::after(self.now(), by));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.inner.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> ClockFuture<'_> {
        let mut rx = self.inner.tick.subscribe();
        Box::pin(async move {
            // `wait_for` checks the current value first, so a set before we got here counts.
            let _ = rx.wait_for(|now| *now >= deadline).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[tokio::test]
    async fn a_manual_sleeper_wakes_when_the_clock_passes_its_deadline() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        let clock = ManualClock::new(t0);
        let c2 = clock.clone();
        let sleeper = tokio::spawn(async move { c2.sleep_until(t0 + TimeDelta::days(7)).await });
        tokio::task::yield_now().await;
        clock.advance(TimeDelta::days(6));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(TimeDelta::days(1));
        sleeper.await.unwrap();
        assert_eq!(clock.now(), t0 + TimeDelta::days(7));
    }

    #[test]
    fn a_manual_clock_never_goes_backwards() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        let clock = ManualClock::new(t0);
        clock.set(t0 - TimeDelta::seconds(1));
        assert_eq!(clock.now(), t0);
    }
}
