//! The event log reader (PostgreSQL): every replica's live pages see every replica's changes.
//!
//! With several replicas on one database, a change committed by replica B must reach the
//! browsers connected to replica A. On PostgreSQL each engine runs one reader task that reads
//! the history table in commit order after its cursor (`store::events`, which explains why
//! nothing is skipped or repeated) and sends each row to this engine's `events` channel, which
//! the SSE endpoint and everything else that subscribes listen to. The reader is then the ONLY
//! source of route events on PostgreSQL, for this replica's own commits too
//! (`effects::after_commit` sends nothing there), so every subscriber sees one order and no
//! change twice. SQLite keeps the direct path: one process serves the database, and its events
//! go out straight after each commit. Live attempt output (`updates`) stays local on both.
//!
//! The reader also stops attempts: a person's stop committed through replica B must stop the
//! agent replica A runs, as it would in one process. A reads B's stop here and tells its
//! dispatchers to stop the route's attempts that began before it (the generation fences a
//! stop read late from stopping an attempt a person started afterwards). Their reports would
//! be refused anyway (stale generation); this ends the work itself.
//!
//! When: every [`POLL`], and sooner when woken (at most once per [`GAP`]). Wake-ups come from
//! PostgreSQL's `LISTEN/NOTIFY` on [`CHANNEL`]: every writer commit that wrote history
//! notifies it, in its transaction (`store::Tx::commit`). The listener holds a connection of its own (a pool of
//! one beside the store's), and reconnects after it drops (`PgListener` does, and a lost
//! connection wakes the reader too, since notifications may have been missed meanwhile); the
//! poll goes on without it, so a lost notification only costs up to [`POLL`] of delay. A read
//! that fails (the database went away) is retried at the next poll from the same cursor.
//!
//! Where it starts: at the horizon of the moment the engine starts, so rows committed before
//! are not replayed (pages load the state first, then follow events).
//!
//! The task ends when the engine is dropped (it holds only a `Weak`) or the store's pool is
//! closed (`serve` closes it at the stop); the listener task ends with it.

use super::{Engine, RouteStreamEvent};
use crate::store::{
    events::{EventCursor, CHANNEL},
    Pool, Store,
};
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use std::{
    sync::{Arc, Weak},
    time::Duration,
};
use tokio::sync::{oneshot, Notify};

/// How often the reader reads the log without a wake-up.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// The least time from the end of one read to the next one a notification wakes: a burst of
/// commits costs one read per gap, not one per commit (at 1,000 route starts in a row, the
/// readers' reads took a quarter of the writer's throughput on two cores without it).
const GAP: Duration = Duration::from_millis(10);

/// Most rows one read takes (the reader reads again at once while a read comes back full).
const BATCH: u32 = 500;

/// How long the writer's first commit waits for the reader's starting point.
pub(super) const READY_WAIT: Duration = Duration::from_secs(5);

/// How long the listener waits before connecting again after a failure.
const RECONNECT: Duration = Duration::from_secs(1);

/// Starts the reader of `engine`'s store when it is PostgreSQL (nothing on SQLite).
pub(super) fn start(engine: &Arc<Engine>) {
    let Pool::Postgres(pool) = engine.store.pool().clone() else {
        return;
    };
    tokio::spawn(read_loop(Arc::downgrade(engine), pool));
}

/// The reader: reads after its cursor whenever woken or every [`POLL`], until the engine is
/// gone or the pool closes.
async fn read_loop(engine: Weak<Engine>, pool: PgPool) {
    let store = Store::new(pool.clone());
    let wake = Arc::new(Notify::new());
    // Dropped when this task ends, which ends the listener.
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(listen(pool.clone(), wake.clone(), stopped));
    let closed = pool.close_event();
    tokio::pin!(closed);
    let mut cursor: Option<EventCursor> = None;
    let mut failing = false;
    loop {
        if engine.strong_count() == 0 {
            return;
        }
        let read = match &mut cursor {
            Some(c) => read_all(&engine, &store, c).await,
            None => store.event_horizon().await.map(|h| {
                cursor = Some(EventCursor::at_horizon(h));
                if let Some(engine) = engine.upgrade() {
                    engine.delivered_up_to(h);
                }
            }),
        };
        match read {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("the event log reader reads again; it resumes from its cursor");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "the event log reader cannot read; live pages get no events until it can");
            }
            Err(_) => {}
        }
        let read_at = tokio::time::Instant::now();
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = wake.notified() => {
                // A burst of commits (each notifies) is read in one go, not one read apiece.
                tokio::time::sleep_until(read_at + GAP).await;
            }
            () = &mut closed => return,
        }
    }
}

/// Reads and sends every row after `cursor` below the current horizon, in bounded reads.
async fn read_all(
    engine: &Weak<Engine>,
    store: &Store,
    cursor: &mut EventCursor,
) -> Result<(), crate::store::StoreError> {
    loop {
        let batch = store.events_after(cursor, BATCH).await?;
        let Some(engine) = engine.upgrade() else {
            return Ok(());
        };
        let listening = engine.events.receiver_count() > 0;
        for e in batch.events {
            if e.payload.event.aborts_started_attempt() {
                engine.abort_started_before(&e.route_id, e.payload.generation);
            }
            if listening {
                let _ = engine.events.send(RouteStreamEvent {
                    route_id: e.route_id,
                    payload: e.payload,
                });
            }
        }
        *cursor = batch.cursor;
        if !batch.full {
            engine.delivered_up_to(batch.horizon);
            return Ok(());
        }
    }
}

impl Engine {
    /// A change that aborts the route's started attempt was committed (by any replica; this
    /// one's own commit has aborted it already, through its effects): stop what this replica
    /// runs of the route from before that change.
    fn abort_started_before(&self, route_id: &str, generation: u64) {
        for dispatcher in self.dispatchers.all() {
            dispatcher.cancel_started_before(route_id, generation);
        }
    }

    /// Notes that every row below `horizon` has been sent (never moving back).
    fn delivered_up_to(&self, horizon: u64) {
        self.delivered.send_if_modified(|h| {
            let later = horizon > *h;
            if later {
                *h = horizon;
            }
            later
        });
    }
}

/// Wakes the reader on every notification of [`CHANNEL`] and after every (re)connection, on a
/// connection of its own, until `stop` resolves.
async fn listen(pool: PgPool, wake: Arc<Notify>, mut stop: oneshot::Receiver<()>) {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with((*pool.connect_options()).clone());
    drop(pool);
    let mut listener: Option<PgListener> = None;
    loop {
        let Some(l) = listener.as_mut() else {
            let connected = tokio::select! {
                r = connect(&own) => r,
                _ = &mut stop => break,
            };
            match connected {
                Ok(l) => {
                    listener = Some(l);
                    wake.notify_one();
                }
                Err(e) => {
                    tracing::debug!(error = %e, "the event log listener cannot connect; the reader polls meanwhile");
                    tokio::select! {
                        () = tokio::time::sleep(RECONNECT) => {}
                        _ = &mut stop => break,
                    }
                }
            }
            continue;
        };
        let got = tokio::select! {
            r = l.try_recv() => r,
            _ = &mut stop => break,
        };
        match got {
            // A notification, or a lost connection PgListener has just re-established (what
            // was notified meanwhile is lost): read now either way.
            Ok(_) => wake.notify_one(),
            Err(e) => {
                tracing::debug!(error = %e, "the event log listener lost its connection; the reader polls meanwhile");
                listener = None;
            }
        }
    }
    drop(listener);
    own.close().await;
}

async fn connect(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(pool).await?;
    l.listen(CHANNEL).await?;
    Ok(l)
}
