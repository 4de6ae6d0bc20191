//! The durable scheduler: one task that sleeps until the earliest timer row is due or until
//! woken, then fires every due timer through the transition owner.
//!
//! Timers live in the `timers` table, written in the same transaction as the route state
//! that needs them, so a restart simply reloads them: nothing is kept only in memory. A
//! `deadline` timer submits `DeadlineReached { generation }` (a stale or early one is rejected
//! by the route machine and dropped or kept); a `circuit_hold` timer re-runs the dispatch gate.
//! Time comes from the engine's injected clock, so tests move it without sleeping.
//!
//! The due deadlines of one pass reach the engine's writer as one delivery
//! ([`Engine::submit_all`]) and commit as one group (or a few, of at most 256 steps), each with
//! its own compare-and-set and history row, so a burst of thousands of deadlines costs a few
//! commits instead of thousands, and lateness stays in milliseconds. (Submitted one by one,
//! the writer would start on the first while the runtime was still spawning the rest: a
//! 10,000-timer burst then fired at half the rate.)

use crate::{
    engine::{Applied, Engine, EngineError, Input},
    store::{self, from_ms, ms},
};
use chrono::TimeDelta;
use policy::route::{RouteEvent, TransitionError};
use sqlx::Row;
use std::{future::Future, sync::Arc};

/// Due timers fired per pass before the next look at the table.
const BATCH: i64 = 512;

struct Due {
    route_id: String,
    kind: String,
    generation: u64,
}

/// Runs until `shutdown` resolves.
pub async fn run(engine: Arc<Engine>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let now = engine.now();
        let next = match fire_due(&engine, now).await {
            Ok(Pass {
                full: true,
                stuck: false,
                ..
            }) => continue,
            // Something could not fire (storage trouble): look again in a second, not at once.
            Ok(Pass { stuck: true, .. }) => Some(now + TimeDelta::seconds(1)),
            Ok(_) => next_due(&engine).await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "scheduler cannot read timers; retrying in a second");
                Some(now + TimeDelta::seconds(1))
            }),
            Err(e) => {
                tracing::error!(error = %e, "scheduler cannot read timers; retrying in a second");
                Some(now + TimeDelta::seconds(1))
            }
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

/// Fires every timer due now, including those that become due while firing, and returns
/// how many fired. The test clock endpoint and tests call this to run a pass in line.
pub async fn tick(engine: &Engine) -> Result<usize, sqlx::Error> {
    let mut fired = 0;
    loop {
        let pass = fire_due(engine, engine.now()).await?;
        fired += pass.fired;
        if !pass.full || pass.stuck {
            return Ok(fired);
        }
    }
}

async fn next_due(engine: &Engine) -> Result<Option<chrono::DateTime<chrono::Utc>>, sqlx::Error> {
    let next: Option<i64> = sqlx::query_scalar("SELECT MIN(due_ms) FROM timers")
        .fetch_one(engine.pool())
        .await?;
    Ok(next.map(from_ms))
}

struct Pass {
    /// A full batch was due: look again at once.
    full: bool,
    /// A due timer could not fire.
    stuck: bool,
    fired: usize,
}

/// Fires the due timers.
async fn fire_due(engine: &Engine, now: chrono::DateTime<chrono::Utc>) -> Result<Pass, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT route_id, kind, generation FROM timers WHERE due_ms <= ? ORDER BY due_ms LIMIT ?",
    )
    .bind(ms(now))
    .bind(BATCH)
    .fetch_all(engine.pool())
    .await?;
    let due: Vec<Due> = rows
        .iter()
        .map(|r| {
            Ok(Due {
                route_id: r.try_get("route_id")?,
                kind: r.try_get("kind")?,
                generation: u64::try_from(r.try_get::<i64, _>("generation")?).unwrap_or(0),
            })
        })
        .collect::<Result<_, sqlx::Error>>()?;
    let full = i64::try_from(due.len()).unwrap_or(0) == BATCH;
    let fired = due.len();
    let (holds, deadlines): (Vec<&Due>, Vec<&Due>) = due.iter().partition(|d| d.kind == "circuit_hold");
    // The deadlines in one delivery: the engine's writer commits them as one group (or a few,
    // at most 256 steps each), each still with its own compare-and-set and history row.
    let inputs = deadlines
        .iter()
        .map(|d| {
            let event = RouteEvent::DeadlineReached {
                generation: d.generation,
            };
            (d.route_id.clone(), Input::Event(event))
        })
        .collect();
    let answers = engine.submit_all(inputs).await;
    let fired_deadlines = futures_util::future::join_all(
        deadlines
            .iter()
            .zip(answers)
            .map(|(d, answer)| deadline_fired(engine, d, answer)),
    );
    let rechecked = futures_util::future::join_all(holds.iter().map(|d| recheck(engine, d)));
    let (left, held) = tokio::join!(fired_deadlines, rechecked);
    let stuck = left.iter().chain(&held).any(|gone| !gone);
    Ok(Pass { full, stuck, fired })
}

/// Re-runs the dispatch gate of a held attempt; returns whether the timer left the due set.
async fn recheck(engine: &Engine, d: &Due) -> bool {
    match engine.recheck_hold(&d.route_id, d.generation).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(route_id = d.route_id, error = %e, "circuit hold re-check failed");
            false
        }
    }
}

/// What a fired deadline's step came to; returns whether the timer left the due set.
async fn deadline_fired(engine: &Engine, d: &Due, answer: Result<Applied, EngineError>) -> bool {
    match answer {
        Ok(_) => true,
        Err(EngineError::Rejected {
            error: Some(TransitionError::DeadlineNotReached { .. }),
            ..
        }) => false,
        Err(EngineError::Rejected { .. }) | Err(EngineError::RouteNotFound(_)) => {
            // Stale: the route moved on (its own transaction replaced or removed the row).
            let _ =
                sqlx::query("DELETE FROM timers WHERE route_id = ? AND generation = ? AND kind = 'deadline'")
                    .bind(&d.route_id)
                    .bind(store::gen_i64(d.generation))
                    .execute(engine.pool())
                    .await;
            true
        }
        Err(e) => {
            tracing::warn!(route_id = d.route_id, error = %e, "timer could not fire; it stays armed");
            false
        }
    }
}
