//! The durable scheduler: one task that sleeps until the earliest timer row is due or until
//! woken, then fires every due timer through the transition owner.
//!
//! Timers live in the `timers` table, written in the same transaction as the route state that
//! needs them, so a restart simply reloads them: nothing is kept only in memory. The scheduler
//! only reads: it hands each pass's due timers to the engine's writer as one delivery
//! ([`Engine::fire_all`]), where each fires in the route's own fenced step (a `deadline` submits
//! `DeadlineReached`, a `circuit_hold` runs the dispatch gate again, a `report` applies a
//! dispatcher's scheduled report) and a timer that no longer applies is removed in the same
//! transaction. Time comes from the engine's injected clock, so tests move it without
//! sleeping.
//!
//! Several replicas on PostgreSQL: each runs this scheduler on the database's time. A pass
//! reads due timers skipping those another replica's transaction holds, and the writer claims
//! the ones it fires with `FOR UPDATE SKIP LOCKED` in the firing transaction itself, so each
//! timer fires in exactly one replica's transaction (the route's compare-and-set would refuse
//! a second anyway); a replica that dies mid-claim rolls back and its timers are due again for
//! the others, who look at the table at least every [`POLL_BOUND`].
//!
//! One delivery per pass matters: submitted one by one, the writer would start on the first
//! while the runtime was still spawning the rest, and a 10,000-timer burst fired at half the
//! rate. Together they commit as one group (or a few, of at most 256 steps), each with its own
//! compare-and-set and history row.

use crate::{
    engine::{Engine, EngineError},
    store::StoreError,
};
use chrono::TimeDelta;
use policy::route::TransitionError;
use std::{future::Future, sync::Arc};

/// Due timers fired per pass before the next look at the table.
const BATCH: u32 = 512;

/// With several replicas, the longest a scheduler sleeps before it looks at the table again:
/// another replica may arm an earlier timer (and it wakes only its own scheduler), or die
/// holding claims that must be fired by someone else.
pub const POLL_BOUND: TimeDelta = TimeDelta::seconds(1);

/// Runs until `shutdown` resolves.
pub async fn run(engine: Arc<Engine>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let now = engine.now();
        let next = match fire_due(&engine).await {
            Ok(Pass {
                full: true,
                stuck: false,
                ..
            }) => continue,
            // Something could not fire (storage trouble): look again in a second, not at once.
            Ok(Pass { stuck: true, .. }) => Some(policy::time::after(now, TimeDelta::seconds(1))),
            Ok(_) => engine.store().next_due().await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "scheduler cannot read timers; retrying in a second");
                Some(policy::time::after(now, TimeDelta::seconds(1)))
            }),
            Err(e) => {
                tracing::error!(error = %e, "scheduler cannot read timers; retrying in a second");
                Some(policy::time::after(now, TimeDelta::seconds(1)))
            }
        };
        // Several replicas: look again within the poll bound, whatever this one knows.
        let next = match engine.store().member() {
            Some(_) => {
                let bound = policy::time::after(now, POLL_BOUND);
                Some(next.map_or(bound, |n| n.min(bound)))
            }
            None => next,
        };
        let wake = engine.wake_handle().notified();
        let clock = engine.clock().clone();
        let sleep = async {
            match next {
                Some(at) => clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = wake => {}
            () = sleep => {}
        }
    }
}

/// Fires every timer due now, including those that become due while firing, and returns how
/// many fired. The test clock endpoint and tests call this to run a pass in line.
pub async fn tick(engine: &Engine) -> Result<usize, StoreError> {
    let mut fired = 0;
    loop {
        let pass = fire_due(engine).await?;
        fired += pass.fired;
        if !pass.full || pass.stuck {
            return Ok(fired);
        }
    }
}

struct Pass {
    /// A full batch was due: look again at once.
    full: bool,
    /// A due timer could not fire (it stays due).
    stuck: bool,
    fired: usize,
}

/// Fires the timers due now.
async fn fire_due(engine: &Engine) -> Result<Pass, StoreError> {
    let due = engine.store().due_timers(engine.now(), BATCH).await?;
    let full = due.len() == BATCH as usize;
    let fired = due.len();
    let answers = engine.fire_all(due).await;
    let stuck = answers.iter().any(|answer| match answer {
        // An early deadline (only a clock that went back can make one) stays armed: look
        // again in a second rather than at once.
        Err(EngineError::Rejected {
            error: Some(TransitionError::DeadlineNotReached { .. }),
            ..
        }) => true,
        // Fired, or no longer applies (its step removed it), or another replica fires it.
        Ok(_)
        | Err(EngineError::Rejected { .. })
        | Err(EngineError::RouteNotFound(_))
        | Err(EngineError::ClaimedElsewhere) => false,
        Err(e) => {
            tracing::warn!(error = %e, "a timer could not fire; it stays armed");
            true
        }
    });
    Ok(Pass { full, stuck, fired })
}
