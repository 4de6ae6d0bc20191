//! The store: every SQL statement of the server, behind two narrow types.
//!
//! - [`Store`] is the read side and the profile writes: a cheap handle on the pool that pages,
//!   the REST API, the scheduler and the engine read through.
//! - [`Writer`] owns the one connection the engine's writer task commits on, and [`Tx`] is one
//!   of its transactions: the only place route rows, history, dispatch records, timers and
//!   circuits are written. The engine queues a step's writes in a [`Writes`] batch and sends
//!   them in one round trip.
//!
//! Why the seam is here: a second backend (PostgreSQL for several replicas) implements these
//! same methods with its own SQL and migrations; nothing above this module knows a statement,
//! a placeholder style or a connection type. By table: [`agents`] (agent processes Recourse
//! started, for cleanup after a crash), [`routes`] (route rows, summaries,
//! lists), [`history`], [`dispatches`], [`timers`], [`circuits`], [`profiles`], [`work`] (the
//! work a route carries and its result), [`leases`] (external runners' leases),
//! [`migrations`] (what sqlx recorded as applied, for `/readyz`), and [`writes`] (the batch).
//! Accounts and custom roles ([`accounts`]), API tokens ([`tokens`]), the append-only audit
//! log ([`audit`]) and the browser-session table ([`Store::session_store`])
//! belong to `crate::auth`.
//!
//! Stored tags (timer kinds, circuit states, dispatcher kinds, state names) are enums; a value
//! that does not decode is [`StoreError::Corrupt`] naming the table and the row, never a silent
//! default.
//!
//! Times people read are RFC 3339 UTC text with milliseconds (fixed width, so they also sort);
//! times the engine orders by are integer Unix milliseconds.

pub mod accounts;
mod agents;
pub mod audit;
mod circuits;
mod dispatches;
mod history;
mod leases;
mod migrations;
mod profiles;
mod routes;
mod timers;
pub mod tokens;
mod work;
mod writes;

pub(crate) use agents::{AgentProcessRow, ResumableRow};
pub(crate) use dispatches::outcome_str;
pub(crate) use leases::Lease;
pub use migrations::AppliedMigration;
pub(crate) use profiles::{ProfileDelete, ProfileUpdate};
pub(crate) use routes::RouteRow;
pub use timers::{DueTimer, TimerKind};
pub use work::RouteResult;
pub(crate) use writes::{DispatchInsert, HistoryInsert, Returned, Writes};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::de::DeserializeOwned;
use sqlx::{pool::PoolConnection, Sqlite, SqliteConnection, SqlitePool};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("[ST1001] storage: {0}")]
    Sql(#[from] sqlx::Error),
    /// A stored value that does not decode: which table, which row, what is wrong.
    #[error("[ST1002] corrupt {table} row `{row}`: {detail}")]
    Corrupt {
        table: &'static str,
        row: String,
        detail: String,
    },
}

impl StoreError {
    pub(crate) fn corrupt(
        table: &'static str,
        row: impl Into<String>,
        detail: impl Into<String>,
    ) -> StoreError {
        StoreError::Corrupt {
            table,
            row: row.into(),
            detail: detail.into(),
        }
    }
}

/// The read side of the store, and profile writes. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    pub fn new(pool: SqlitePool) -> Store {
        Store { pool }
    }

    /// Whether the database takes a query (`/healthz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query_scalar::<_, i64>("SELECT 1")
            .fetch_one(&self.pool)
            .await?;
        Ok(())
    }

    /// The connection the engine's writer task commits on, for as long as it lives.
    pub(crate) async fn writer(&self) -> Result<Writer, StoreError> {
        Ok(Writer {
            conn: self.pool.acquire().await?,
        })
    }

    /// Copies the write-ahead log back into the database file on a connection of its own (a
    /// passive checkpoint never blocks the writer).
    pub(crate) async fn checkpoint(&self) -> Result<(), StoreError> {
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The browser-session store (tower-sessions) on this same pool; its table is created by
    /// the migrations, like every other.
    pub fn session_store(&self) -> tower_sessions_sqlx_store::SqliteStore {
        tower_sessions_sqlx_store::SqliteStore::new(self.pool.clone())
    }

    /// Closes every connection (at shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The writer task's connection.
pub(crate) struct Writer {
    conn: PoolConnection<Sqlite>,
}

impl Writer {
    /// SQLite's `PRAGMA synchronous` on this very connection (0 OFF, 1 NORMAL, 2 FULL, 3
    /// EXTRA): whether its commits reach stable storage before they return.
    pub(crate) async fn synchronous(&mut self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut *self.conn)
            .await?)
    }

    /// Opens a write transaction. `BEGIN IMMEDIATE` takes SQLite's write lock at once, so
    /// everything the transaction reads stays true until it commits.
    pub(crate) async fn begin(&mut self) -> Result<Tx<'_>, StoreError> {
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *self.conn).await?;
        Ok(Tx { conn: &mut self.conn })
    }
}

/// One open write transaction of the writer. Dropping it without [`Tx::commit`] leaves the
/// transaction open; always end it with `commit` or `rollback`.
pub(crate) struct Tx<'c> {
    conn: &'c mut SqliteConnection,
}

impl Tx<'_> {
    /// Commits; on failure the transaction is rolled back and the error returned.
    pub(crate) async fn commit(self) -> Result<(), StoreError> {
        if let Err(e) = sqlx::query("COMMIT").execute(&mut *self.conn).await {
            let _ = sqlx::query("ROLLBACK").execute(&mut *self.conn).await;
            return Err(e.into());
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) {
        let _ = sqlx::query("ROLLBACK").execute(&mut *self.conn).await;
    }

    /// Sends a batch of writes in one round trip; what its `RETURNING` statements reported.
    pub(crate) async fn run(&mut self, writes: Writes) -> Result<Returned, StoreError> {
        Ok(writes.run(self.conn).await?)
    }
}

// ------------------------------------------------------------------------------------------------
// Conversions shared by the tables
// ------------------------------------------------------------------------------------------------

pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn parse_ts(table: &'static str, row: &str, s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| StoreError::corrupt(table, row, format!("timestamp `{s}`: {e}")))
}

pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or(if ms < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    })
}

/// Deadline in whole milliseconds, rounded up (a timer never fires before its deadline).
pub(crate) fn due_ms(deadline: DateTime<Utc>) -> i64 {
    let m = deadline.timestamp_millis();
    if deadline.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        m
    } else {
        m.saturating_add(1)
    }
}

pub(crate) fn json<T: DeserializeOwned>(
    table: &'static str,
    row: &str,
    what: &str,
    s: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::corrupt(table, row, format!("{what}: {e}")))
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serializing our own wire types to a string cannot fail (no maps with non-string keys).
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

pub(crate) fn gen_i64(g: u64) -> i64 {
    i64::try_from(g).unwrap_or(i64::MAX)
}

/// A stored non-negative integer as `u64`; a negative one is corruption.
pub(crate) fn non_negative(table: &'static str, row: &str, what: &str, v: i64) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::corrupt(table, row, format!("{what} is negative ({v})")))
}

static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new unique id: time, process and a counter (no RNG needed; ids are not secrets).
pub(crate) fn new_id(prefix: &str, now: DateTime<Utc>) -> String {
    let n = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}-{:x}{:04x}{:x}",
        now.timestamp_micros(),
        std::process::id() & 0xffff,
        n
    )
}
