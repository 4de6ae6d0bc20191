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
//! work a route carries and its result), [`leases`] (external runners' leases), [`events`] (the
//! history table read as every replica's event log; PostgreSQL),
//! [`migrations`] (what sqlx recorded as applied, for `/readyz`), [`notify`] (the notification
//! outbox: events and deliveries, queued in the writer's transaction, claimed with a lease by
//! the delivery worker; the in-app list and read positions), and [`writes`] (the batch).
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
pub mod events;
mod history;
mod leases;
mod migrations;
pub mod notify;
mod pins;
mod profiles;
mod replicas;
mod routes;
mod sessions;
pub mod sql;
mod timers;
pub mod tokens;
mod work;
mod writes;

pub(crate) use agents::{this_host, AgentProcessRow};
pub(crate) use dispatches::outcome_str;
pub(crate) use leases::Lease;
pub use migrations::AppliedMigration;
pub(crate) use notify::NotifyInsert;
pub(crate) use profiles::{ProfileDelete, ProfileUpdate};
pub(crate) use routes::RouteRow;
pub use timers::{DueTimer, TimerKind};
pub use work::RouteResult;
pub(crate) use writes::{DispatchInsert, HistoryInsert, Returned, Writes};

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
pub(crate) use replicas::Renewal;
use serde::de::DeserializeOwned;
pub use sessions::Sessions;
use sql::{Conn, Exec};
pub use sql::{Dialect, Pool};
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, OnceLock,
};

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
    pool: Pool,
    /// This process as a registered replica, once it is one (shared by every clone).
    member: Arc<OnceLock<Member>>,
}

/// This process as one of the replicas serving the database.
#[derive(Debug, Clone)]
pub struct Member {
    /// The replica id and a random suffix: new at every start, what `routes.owner` and
    /// `agent_processes.instance` hold.
    pub instance: String,
    pub replica_id: String,
    /// The host name (agent process groups are only this host's to stop).
    pub host: String,
}

impl Store {
    pub fn new(pool: impl Into<Pool>) -> Store {
        Store {
            pool: pool.into(),
            member: Arc::new(OnceLock::new()),
        }
    }

    /// This process as a registered replica, if it is one.
    pub fn member(&self) -> Option<&Member> {
        self.member.get()
    }

    /// Records that this process is the replica `member` (once).
    pub(crate) fn set_member(&self, member: Member) {
        let _ = self.member.set(member);
    }

    /// Which backend this is.
    pub fn dialect(&self) -> Dialect {
        self.pool.dialect()
    }

    /// The pool, for what lives beside the store on the same database (the browser sessions).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Whether the database takes a query (`/healthz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sql::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The connection the engine's writer task commits on, for as long as it lives.
    pub(crate) async fn writer(&self) -> Result<Writer, StoreError> {
        Ok(Writer {
            conn: self.pool.acquire().await?,
        })
    }

    /// SQLite: copies the write-ahead log back into the database file on a connection of its
    /// own (a passive checkpoint never blocks the writer). PostgreSQL checkpoints by itself.
    pub(crate) async fn checkpoint(&self) -> Result<(), StoreError> {
        if let Pool::Sqlite(_) = self.pool {
            sql::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// Closes every connection (at shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

impl From<sqlx::SqlitePool> for Pool {
    fn from(p: sqlx::SqlitePool) -> Pool {
        Pool::Sqlite(p)
    }
}

impl From<sqlx::PgPool> for Pool {
    fn from(p: sqlx::PgPool) -> Pool {
        Pool::Postgres(p)
    }
}

/// The writer task's connection.
pub(crate) struct Writer {
    conn: Conn,
}

impl Writer {
    /// Whether this very connection's commits reach stable storage before they return, as
    /// SQLite's `PRAGMA synchronous` level (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA). On PostgreSQL the
    /// same scale: 2 when `fsync` is on and `synchronous_commit` is not `off` (a commit is
    /// flushed before it returns), else 0.
    pub(crate) async fn synchronous(&mut self) -> Result<i64, StoreError> {
        let mut ex = Exec::from(&mut self.conn);
        Ok(match ex.dialect() {
            Dialect::Sqlite => sql::query("PRAGMA synchronous").scalar::<i64>(ex).await?,
            Dialect::Postgres => {
                let commit: String = sql::query("SELECT current_setting('synchronous_commit')")
                    .scalar(ex.by_ref())
                    .await?;
                let fsync: String = sql::query("SELECT current_setting('fsync')").scalar(ex).await?;
                if commit != "off" && fsync == "on" {
                    2
                } else {
                    0
                }
            }
        })
    }

    /// Whether this connection still takes a query.
    pub(crate) async fn ping(&mut self) -> Result<(), StoreError> {
        sql::query("SELECT 1").execute(&mut self.conn).await?;
        Ok(())
    }

    /// Opens a write transaction. SQLite: `BEGIN IMMEDIATE` takes the write lock at once, so
    /// everything the transaction reads stays true until it commits. PostgreSQL: the rows the
    /// transaction writes are read `FOR UPDATE` ([`Dialect::for_update`]), and the generation
    /// compare-and-set fences the rest.
    pub(crate) async fn begin(&mut self) -> Result<Tx<'_>, StoreError> {
        let begin = match self.conn {
            Conn::Sqlite(_) => "BEGIN IMMEDIATE",
            Conn::Postgres(_) => "BEGIN",
        };
        sql::query(begin).execute(&mut self.conn).await?;
        Ok(Tx {
            conn: &mut self.conn,
            notify: false,
        })
    }
}

/// One open write transaction of the writer. Dropping it without [`Tx::commit`] leaves the
/// transaction open; always end it with `commit` or `rollback`.
pub(crate) struct Tx<'c> {
    conn: &'c mut Conn,
    /// A history row was written: on PostgreSQL the commit notifies the other replicas' event
    /// readers ([`events::CHANNEL`]).
    notify: bool,
}

impl Tx<'_> {
    pub(super) fn ex(&mut self) -> Exec<'_> {
        Exec::from(&mut *self.conn)
    }

    /// Which backend the transaction runs on.
    pub(crate) fn dialect(&self) -> Dialect {
        match self.conn {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Commits; on failure the transaction is rolled back and the error returned.
    ///
    /// PostgreSQL, when the transaction wrote history: `NOTIFY` the event readers' channel
    /// first, in the same round trip (a notification sent inside a transaction is delivered at
    /// its commit, and never if it rolls back). One per transaction, however many rows it
    /// wrote: the readers read every row after their cursor anyway.
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        let committed = if self.notify && self.ex().dialect() == Dialect::Postgres {
            sql::batch(events::NOTIFY_AND_COMMIT, self.ex()).await
        } else {
            sql::query("COMMIT").execute(self.ex()).await.map(drop)
        };
        if let Err(e) = committed {
            let _ = sql::query("ROLLBACK").execute(self.ex()).await;
            return Err(e.into());
        }
        Ok(())
    }

    pub(crate) async fn rollback(mut self) {
        let _ = sql::query("ROLLBACK").execute(self.ex()).await;
    }

    /// Sends a batch of writes (in one round trip on SQLite); what its `RETURNING` statements
    /// reported.
    pub(crate) async fn run(&mut self, writes: Writes) -> Result<Returned, StoreError> {
        self.notify |= writes.has_history();
        Ok(writes.run(self.ex()).await?)
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
