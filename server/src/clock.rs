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
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::{sync::watch, time::Instant};

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

/// Another clock moved by an offset: `now()` is the base clock's time plus the offset, which
/// can be changed at any time. Several replicas on one PostgreSQL database run on the
/// database's time this way (the offset is measured against `clock_timestamp()` and kept up to
/// date, `engine::replicas::sync_clock`), so a replica whose own clock is off neither fires a
/// timer early nor computes a deadline late.
pub struct OffsetClock {
    base: Arc<dyn Clock>,
    offset_ms: AtomicI64,
}

impl OffsetClock {
    pub fn new(base: Arc<dyn Clock>) -> OffsetClock {
        OffsetClock {
            base,
            offset_ms: AtomicI64::new(0),
        }
    }

    /// The base clock's own time.
    pub fn base_now(&self) -> DateTime<Utc> {
        self.base.now()
    }

    pub fn set_offset_ms(&self, ms: i64) {
        self.offset_ms.store(ms, Ordering::Relaxed);
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> DateTime<Utc> {
        policy::time::after(self.base.now(), TimeDelta::milliseconds(self.offset_ms()))
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> ClockFuture<'_> {
        Box::pin(async move {
            // The offset may change while sleeping: sleep at most a second at a time.
            loop {
                let now = self.now();
                if now >= deadline {
                    return;
                }
                let step = (deadline - now).min(TimeDelta::seconds(1));
                let until = policy::time::after(self.base.now(), step);
                self.base.sleep_until(until).await;
            }
        })
    }
}

/// The system clock off by a fixed amount (test only: `recourse serve --test-clock-skew-seconds`
/// plays a replica whose clock is wrong).
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock {
    pub skew: TimeDelta,
}

impl Clock for SkewedClock {
    fn now(&self) -> DateTime<Utc> {
        policy::time::after(Utc::now(), self.skew)
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> ClockFuture<'_> {
        SystemClock.sleep_until(policy::time::after(deadline, -self.skew))
    }
}

/// The clock the runners' watchdogs count on: an agent's silence in a turn, the turn's length,
/// the grace a cancel gets. Monotonic real time, unlike [`Clock`], in which routes' deadlines
/// are written: a watchdog measures how long a process has been running, not when something is
/// due. Nothing in the product moves it; a test may ([`WatchdogClock::skip`]) to fire a
/// watchdog once what it waits for has been seen, instead of waiting out the real time.
#[derive(Debug, Clone)]
pub struct WatchdogClock {
    skipped: Arc<watch::Sender<Duration>>,
}

/// A watchdog's deadline passed before what it watched ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl Default for WatchdogClock {
    fn default() -> WatchdogClock {
        WatchdogClock {
            skipped: Arc::new(watch::channel(Duration::ZERO).0),
        }
    }
}

impl WatchdogClock {
    pub fn now(&self) -> Instant {
        Instant::now() + *self.skipped.borrow()
    }

    /// Moves the clock forward by `by`: every watchdog whose deadline that reaches fires now.
    pub fn skip(&self, by: Duration) {
        self.skipped.send_modify(|s| *s += by);
    }

    /// `future`'s output, unless the clock reaches `deadline` first (`future` is polled first,
    /// as `tokio::time::timeout_at` does).
    pub async fn timeout_at<F: Future>(&self, deadline: Instant, future: F) -> Result<F::Output, Elapsed> {
        let mut moved = self.skipped.subscribe();
        let mut future = std::pin::pin!(future);
        loop {
            let now = Instant::now() + *moved.borrow_and_update();
            let left = deadline.saturating_duration_since(now);
            tokio::select! {
                biased;
                out = &mut future => return Ok(out),
                () = tokio::time::sleep(left) => {
                    if self.now() >= deadline {
                        return Err(Elapsed);
                    }
                }
                Ok(()) = moved.changed() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[tokio::test]
    async fn an_offset_clock_is_its_base_moved_by_the_offset_and_sleeps_on_that_time() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap();
        let base = ManualClock::new(t0);
        let clock = Arc::new(OffsetClock::new(Arc::new(base.clone())));
        clock.set_offset_ms(-600_000);
        assert_eq!(clock.now(), t0 - TimeDelta::minutes(10));
        let c2 = clock.clone();
        let sleeper = tokio::spawn(async move { c2.sleep_until(t0).await });
        tokio::task::yield_now().await;
        base.advance(TimeDelta::minutes(9));
        tokio::task::yield_now().await;
        assert!(
            !sleeper.is_finished(),
            "t0 on the offset clock is 10 minutes on the base"
        );
        // The offset is corrected meanwhile: the sleeper wakes on the new time.
        clock.set_offset_ms(60_000);
        base.advance(TimeDelta::seconds(1));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(sleeper.is_finished());
    }

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

    #[tokio::test]
    async fn a_skip_fires_the_watchdogs_it_reaches_at_once_and_only_those() {
        let clock = WatchdogClock::default();
        let hour = Duration::from_secs(3600);
        let soon = tokio::spawn({
            let clock = clock.clone();
            async move {
                clock
                    .timeout_at(clock.now() + hour, std::future::pending::<()>())
                    .await
            }
        });
        let later = tokio::spawn({
            let clock = clock.clone();
            async move {
                clock
                    .timeout_at(clock.now() + hour * 3, std::future::pending::<()>())
                    .await
            }
        });
        tokio::task::yield_now().await;
        clock.skip(hour + Duration::from_secs(1));
        let fired = tokio::time::timeout(Duration::from_secs(30), soon).await;
        assert_eq!(fired.expect("the skip woke it").unwrap(), Err(Elapsed));
        // One runtime thread: these yields let `later` see the skip and go back to sleep.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!later.is_finished(), "a deadline the skip did not reach fired");
        later.abort();
    }

    #[tokio::test]
    async fn what_a_watchdog_watches_wins_when_it_is_ready() {
        let clock = WatchdogClock::default();
        let now = clock.now();
        assert_eq!(clock.timeout_at(now, async { 7 }).await, Ok(7));
        clock.skip(Duration::from_secs(5));
        assert!(clock.now() >= now + Duration::from_secs(5));
    }
}
