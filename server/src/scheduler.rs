//! The durable scheduler: one task that sleeps until the earliest timer row is due or until
//! woken, then fires every due timer through the transition owner.
//!
//! Timers live in the `timers` table, written in the same transaction as the route state
//! that needs them, so a restart simply reloads them: nothing is kept only in memory. A
//! `deadline` timer submits `DeadlineReached { generation }` (a stale or early one is rejected
//! by the route machine and dropped or kept); a `circuit_hold` timer re-runs the dispatch gate.
//! Time comes from the engine's injected clock, so tests move it without sleeping.
//!
//! The due timers of one pass fire concurrently: their steps reach the engine's writer
//! together and commit as one group (each with its own compare-and-set and history row), so a
//! burst of thousands of deadlines costs a few commits instead of thousands, and lateness
//! stays in milliseconds.

use crate::{
    engine::{Engine, EngineError, Input},
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
    // All at once: their steps queue together and the engine's writer commits them as one
    // group (each still with its own compare-and-set and history row).
    let left = futures_util::future::join_all(due.iter().map(|d| fire(engine, d))).await;
    let stuck = left.iter().any(|gone| !gone);
    Ok(Pass { full, stuck, fired })
}

/// Fires one timer; returns whether it left the due set.
async fn fire(engine: &Engine, d: &Due) -> bool {
    if d.kind == "circuit_hold" {
        return match engine.recheck_hold(&d.route_id, d.generation).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(route_id = d.route_id, error = %e, "circuit hold re-check failed");
                false
            }
        };
    }
    let event = RouteEvent::DeadlineReached {
        generation: d.generation,
    };
    match engine.submit(&d.route_id, Input::Event(event)).await {
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
