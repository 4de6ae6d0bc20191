//! Opening the store: SQLite (the embedded default: a file path or a `sqlite:` URL) or
//! PostgreSQL (a `postgres://` or `postgresql://` URL, for several replicas on one database).
//! Each has its own migrations, with the same versions: `migrations/sqlite/` and
//! `migrations/postgres/`.
//!
//! The rest of this note is about SQLite.
//!
//! WAL lets readers (the UI, the API) proceed while the route engine commits; foreign keys are
//! on because SQLite leaves them off by default; the busy timeout turns brief lock contention
//! into waiting rather than an error. Every connection of the pool gets the same pragmas.
//!
//! Durability: `synchronous = FULL` ([`SYNCHRONOUS`]). In WAL mode that makes every COMMIT
//! `fsync` the write-ahead log before it returns, so whatever the server does after a commit
//! (answers a person's action, lets a dispatch start, launches the work a timer allows) rests
//! on a commit that survives a power cut or a kernel panic, not only a killed process. With
//! `NORMAL` the log was synced only at checkpoints, and a power cut could drop the last
//! commits, among them a `DispatchStarted` whose work did run: the restarted server would then
//! see an unstarted attempt and run it again (`server/tests/it/power_loss.rs` shows exactly that
//! with `NORMAL` and that it cannot happen with `FULL`).
//!
//! Which commits pay the `fsync`: all of them, on every connection of the pool: the engine's
//! writer task (route transitions, grouped so one `fsync` covers every job of a group, see
//! `engine/writer.rs`), profile writes (a person is answered), and the small bookkeeping
//! writes outside the writer (agent process groups to clean up, the durable-error note,
//! clearing a fetched result). Some of the last kind would do without it (after a power cut
//! no agent process is left to clean up), but they are rare and small next
//! to route transitions, and one setting for the whole pool means no commit can end up on a
//! connection that does not sync. Readers commit nothing, so the setting costs them nothing.
//!
//! `EXTRA` adds nothing in WAL mode: its extra directory `fsync` is for a rollback journal
//! deleted at commit. The directory entries are covered by SQLite itself: a WAL file created by
//! a connection carries a one-time "sync the directory" flag, so its first `fsync` (the first
//! commit, with `FULL`) also syncs the folder, which holds the database file's entry too.

use crate::store::{Dialect, Pool};
use anyhow::Context;
use sqlx::{
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    ConnectOptions, PgPool, SqlitePool,
};
use std::{str::FromStr, time::Duration};

/// The SQLite migrations (`migrations/sqlite/`), embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

/// The PostgreSQL migrations (`migrations/postgres/`, the same versions), embedded in the binary.
pub static PG_MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

/// The migrations of a backend.
pub fn migrator(dialect: Dialect) -> &'static Migrator {
    match dialect {
        Dialect::Sqlite => &MIGRATOR,
        Dialect::Postgres => &PG_MIGRATOR,
    }
}

/// Whether `database` names a PostgreSQL database rather than a SQLite file.
pub fn is_postgres(database: &str) -> bool {
    database.starts_with("postgres://") || database.starts_with("postgresql://")
}

/// `database` as it may be shown: a URL's password replaced (a database URL may carry one;
/// no message, log line or error repeats it).
pub fn display_database(database: &str) -> String {
    let Some(scheme_end) = database.find("://").map(|i| i + 3) else {
        return database.to_owned();
    };
    let rest = &database[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let mut shown = database[..scheme_end].to_owned();
    match authority.rfind('@') {
        Some(at) => match authority[..at].find(':') {
            Some(colon) => {
                shown.push_str(&authority[..colon]);
                shown.push_str(":[redacted]");
                shown.push_str(&authority[at..]);
            }
            None => shown.push_str(authority),
        },
        None => shown.push_str(authority),
    }
    let tail = &rest[authority_end..];
    match tail.split_once('?') {
        None => shown.push_str(tail),
        Some((path, query)) => {
            shown.push_str(path);
            shown.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=[redacted]"),
                    _ => p.to_owned(),
                })
                .collect();
            shown.push_str(&params.join("&"));
        }
    }
    shown
}

/// How many connections one replica keeps to PostgreSQL.
pub const PG_MAX_CONNECTIONS: u32 = 16;

/// Opens (creating if needed, for SQLite) the database `database` names and applies pending
/// migrations.
pub async fn open(database: &str) -> anyhow::Result<Pool> {
    Ok(if is_postgres(database) {
        Pool::Postgres(open_postgres(database).await?)
    } else {
        Pool::Sqlite(open_sqlite(database).await?)
    })
}

/// Connects to PostgreSQL and applies pending migrations (sqlx holds an advisory lock while it
/// migrates, so replicas starting together migrate once).
pub async fn open_postgres(url: &str) -> anyhow::Result<PgPool> {
    let shown = display_database(url);
    let options = PgConnectOptions::from_str(url).map_err(|_| {
        anyhow::anyhow!(
            "invalid PostgreSQL URL `{shown}` (expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)"
        )
    })?;
    let pool = PgPoolOptions::new()
        .max_connections(PG_MAX_CONNECTIONS)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.log_statements(STATEMENT_LOG))
        .await
        .with_context(|| format!("cannot open database `{shown}`"))?;
    PG_MIGRATOR
        .run(&pool)
        .await
        .with_context(|| format!("cannot migrate database `{shown}`"))?;
    Ok(pool)
}

/// The level sqlx logs each statement it runs at: TRACE (`RUST_LOG=sqlx=trace` shows them),
/// where sqlx's default is DEBUG. At DEBUG every statement's text was a line of the log (each
/// group commit's whole multi-statement text among them): three bytes in four of what
/// `RUST_LOG=debug` printed in the end-to-end redaction test (57 MB of 4,347 routes' log, 14.5
/// MB without them), around what Recourse itself logs there. Statements slower than a second
/// stay warnings (sqlx's default). No statement's values are ever logged (they are bound, never
/// part of the text).
pub const STATEMENT_LOG: log::LevelFilter = log::LevelFilter::Trace;

/// How long a statement waits for a lock held by another connection before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite's `synchronous` for every connection: `FULL`, a commit is on stable storage before
/// it returns (see the module docs).
pub const SYNCHRONOUS: SqliteSynchronous = SqliteSynchronous::Full;

/// Builds connect options from a file path or a `sqlite:` URL.
pub fn connect_options(database: &str) -> anyhow::Result<SqliteConnectOptions> {
    let opts = if database.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(database)
            .with_context(|| format!("invalid database URL `{database}`"))?
    } else {
        SqliteConnectOptions::new().filename(database)
    };
    Ok(opts
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SYNCHRONOUS)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT)
        .log_statements(STATEMENT_LOG))
}

/// SQLite: this process is the one serving the database file, until it ends (the kernel lets
/// the lock go whatever way the process ends, `SIGKILL` too).
///
/// A second `recourse serve` on the same file would run a second route engine on it: its
/// restart reconciliation would take the first one's attempts in flight for a crash's (they
/// would go to `action_required` as ambiguous), and both would fire timers. PostgreSQL is the
/// backend for several serving processes (replicas); one SQLite file has one.
#[derive(Debug)]
pub struct ServingLock {
    _file: std::fs::File,
}

/// Takes the [`ServingLock`] of the SQLite database `database` names, an exclusive lock on the
/// file beside it with `.lock` appended (not inherited by agent processes: Rust opens files
/// close-on-exec), holding this process's id. `None` for an in-memory database and for
/// PostgreSQL (several replicas serve one database). Fails, naming the process that holds it,
/// when another process serves the file.
pub fn hold_serving_lock(database: &str) -> anyhow::Result<Option<ServingLock>> {
    use std::io::{Read, Seek, Write};
    if is_postgres(database) {
        return Ok(None);
    }
    let options = connect_options(database)?;
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" {
        return Ok(None);
    }
    let mut path = file.as_os_str().to_owned();
    path.push(".lock");
    let shown = std::path::Path::new(&path).display().to_string();
    let mut lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open the serving lock `{shown}`"))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // A pid is a few digits: read no more than that much of a file anyone may write.
            let _ = (&lock).take(32).read_to_string(&mut holder);
            let holder = holder
                .trim()
                .parse::<u32>()
                .map_or_else(|_| "another process".to_owned(), |pid| format!("process {pid}"));
            anyhow::bail!(
                "database `{}` is served already, by {holder} (it holds `{shown}`): one SQLite file has \
                 one serving process; stop that one first, or use PostgreSQL for several replicas",
                file.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock `{shown}`"));
        }
    }
    // Who holds it, for the next one's message (best effort: the lock is what counts).
    let _ = lock.set_len(0);
    let _ = lock.rewind();
    let _ = write!(lock, "{}", std::process::id());
    Ok(Some(ServingLock { _file: lock }))
}

/// Opens (creating if needed) a SQLite database and applies pending migrations.
pub async fn open_sqlite(database: &str) -> anyhow::Result<SqlitePool> {
    open_with(database, connect_options(database)?).await
}

/// [`open`] with these connect options (the engine benchmark compares `synchronous` settings
/// with it; the server always uses [`connect_options`]).
pub async fn open_with(database: &str, options: SqliteConnectOptions) -> anyhow::Result<SqlitePool> {
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .with_context(|| format!("cannot open database `{database}`"))?;
    MIGRATOR
        .run(&pool)
        .await
        .with_context(|| format!("cannot migrate database `{database}`"))?;
    Ok(pool)
}

/// Whether a database holds every migration this binary embeds ([`MIGRATOR`]), as `/readyz`
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationStatus {
    /// Every embedded migration is applied, successfully and with this binary's checksum.
    Current { embedded: usize },
    /// Embedded migrations the database does not have (it is older than the binary).
    Pending {
        embedded: usize,
        missing: usize,
        first: i64,
    },
    /// A migration began and failed: sqlx left the database dirty.
    Failed { version: i64 },
    /// A migration was applied with other contents than this binary's (an edited migration).
    Changed { version: i64 },
}

impl MigrationStatus {
    pub fn is_current(self) -> bool {
        matches!(self, MigrationStatus::Current { .. })
    }
}

/// Compares what the database recorded with what the binary embeds for its backend. Versions the database has
/// and the binary does not (a newer binary migrated it) are not this check's business: the
/// binary's own schema is all there.
pub fn migration_status(dialect: Dialect, applied: &[crate::store::AppliedMigration]) -> MigrationStatus {
    if let Some(m) = applied.iter().find(|m| !m.success) {
        return MigrationStatus::Failed { version: m.version };
    }
    let embedded: Vec<_> = migrator(dialect)
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .collect();
    let mut missing = Vec::new();
    for m in &embedded {
        match applied.iter().find(|a| a.version == m.version) {
            Some(a) if *a.checksum != *m.checksum => return MigrationStatus::Changed { version: m.version },
            Some(_) => {}
            None => missing.push(m.version),
        }
    }
    match missing.first() {
        None => MigrationStatus::Current {
            embedded: embedded.len(),
        },
        Some(first) => MigrationStatus::Pending {
            embedded: embedded.len(),
            missing: missing.len(),
            first: *first,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::AppliedMigration;

    fn all_applied() -> Vec<AppliedMigration> {
        MIGRATOR
            .iter()
            .map(|m| AppliedMigration {
                version: m.version,
                success: true,
                checksum: m.checksum.to_vec(),
            })
            .collect()
    }

    #[test]
    fn migrations_are_current_only_when_every_embedded_one_applied_as_embedded() {
        let n = MIGRATOR.iter().count();
        assert!(n > 1);
        assert_eq!(
            migration_status(Dialect::Sqlite, &all_applied()),
            MigrationStatus::Current { embedded: n }
        );
        let mut older = all_applied();
        let last = older.pop().unwrap();
        assert_eq!(
            migration_status(Dialect::Sqlite, &older),
            MigrationStatus::Pending {
                embedded: n,
                missing: 1,
                first: last.version
            }
        );
        assert_eq!(
            migration_status(Dialect::Sqlite, &[]),
            MigrationStatus::Pending {
                embedded: n,
                missing: n,
                first: MIGRATOR.iter().next().unwrap().version
            }
        );
        let mut dirty = all_applied();
        dirty[1].success = false;
        assert_eq!(
            migration_status(Dialect::Sqlite, &dirty),
            MigrationStatus::Failed {
                version: dirty[1].version
            }
        );
        let mut edited = all_applied();
        edited[0].checksum = vec![0; 48];
        assert_eq!(
            migration_status(Dialect::Sqlite, &edited),
            MigrationStatus::Changed {
                version: edited[0].version
            }
        );
        let mut newer = all_applied();
        newer.push(AppliedMigration {
            version: i64::MAX,
            success: true,
            checksum: vec![1],
        });
        assert!(
            migration_status(Dialect::Sqlite, &newer).is_current(),
            "a newer database still has our schema"
        );
    }

    #[test]
    fn both_backends_embed_the_same_migration_versions() {
        let versions = |m: &Migrator| {
            m.iter()
                .map(|m| (m.version, m.description.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(versions(&MIGRATOR), versions(&PG_MIGRATOR));
        assert_eq!(
            migrator(Dialect::Postgres).iter().count(),
            MIGRATOR.iter().count()
        );
    }

    #[test]
    fn a_postgres_url_is_told_from_a_file_and_shown_without_its_password() {
        assert!(is_postgres("postgres://u@h/db"));
        assert!(is_postgres("postgresql://u@h/db"));
        assert!(!is_postgres("recourse.db"));
        assert!(!is_postgres("sqlite:recourse.db"));
        assert_eq!(
            display_database("postgres://app:s3cr%40t:x@db.internal:5432/recourse?sslmode=require"),
            "postgres://app:[redacted]@db.internal:5432/recourse?sslmode=require"
        );
        assert_eq!(display_database("postgres://app@h/db"), "postgres://app@h/db");
        assert_eq!(
            display_database("postgres://h/db?user=a@b"),
            "postgres://h/db?user=a@b"
        );
        assert_eq!(display_database("/var/lib/recourse.db"), "/var/lib/recourse.db");
        assert_eq!(
            display_database("postgres://h/db?user=app&password=hunter2&sslmode=require"),
            "postgres://h/db?user=app&password=[redacted]&sslmode=require"
        );
    }

    #[tokio::test]
    async fn a_bad_postgres_url_or_server_is_a_clear_error_that_keeps_the_password_out() {
        let err = open("postgres://app:hunter2hunter2@127.0.0.1:1/recourse")
            .await
            .unwrap_err();
        let shown = format!("{err:#}");
        assert!(
            shown.contains("cannot open database `postgres://app:[redacted]@127.0.0.1:1/recourse`"),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
        let err = open("postgres://app:hunter2hunter2@[bad/recourse")
            .await
            .unwrap_err();
        let shown = format!("{err:#}");
        assert!(shown.contains("invalid PostgreSQL URL"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[tokio::test]
    async fn a_new_database_file_is_created_in_wal_mode_with_full_sync_and_foreign_keys_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.db");
        let pool = open_sqlite(path.to_str().unwrap()).await.unwrap();
        assert!(path.exists());
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(sync, 2, "synchronous = FULL");
        let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(fk, 1);
        let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(busy, 5000);
    }

    #[tokio::test]
    async fn a_database_in_a_missing_folder_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/folder/x.db");
        let err = open(path.to_str().unwrap()).await.unwrap_err();
        assert!(format!("{err:#}").contains("cannot open database"), "{err:#}");
    }
}
