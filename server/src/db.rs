//! Opening the SQLite store.
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
//! see an unstarted attempt and run it again (`server/tests/power_loss.rs` shows exactly that
//! with `NORMAL` and that it cannot happen with `FULL`).
//!
//! Which commits pay the `fsync`: all of them, on every connection of the pool: the engine's
//! writer task (route transitions, grouped so one `fsync` covers every job of a group, see
//! `engine/writer.rs`), profile writes (a person is answered), and the small bookkeeping
//! writes outside the writer (agent process groups to clean up, resumable ACP sessions, the
//! durable-error note, clearing a fetched result). Some of the last kind would do without it
//! (after a power cut no agent process is left to clean up), but they are rare and small next
//! to route transitions, and one setting for the whole pool means no commit can end up on a
//! connection that does not sync. Readers commit nothing, so the setting costs them nothing.
//!
//! `EXTRA` adds nothing in WAL mode: its extra directory `fsync` is for a rollback journal
//! deleted at commit. The directory entries are covered by SQLite itself: a WAL file created by
//! a connection carries a one-time "sync the directory" flag, so its first `fsync` (the first
//! commit, with `FULL`) also syncs the folder, which holds the database file's entry too.

use anyhow::Context;
use sqlx::{
    migrate::Migrator,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};
use std::{str::FromStr, time::Duration};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

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
        .busy_timeout(BUSY_TIMEOUT))
}

/// Opens (creating if needed) the database and applies pending migrations.
pub async fn open(database: &str) -> anyhow::Result<SqlitePool> {
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

/// Compares what the database recorded with what the binary embeds. Versions the database has
/// and the binary does not (a newer binary migrated it) are not this check's business: the
/// binary's own schema is all there.
pub fn migration_status(applied: &[crate::store::AppliedMigration]) -> MigrationStatus {
    if let Some(m) = applied.iter().find(|m| !m.success) {
        return MigrationStatus::Failed { version: m.version };
    }
    let embedded: Vec<_> = MIGRATOR
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
            migration_status(&all_applied()),
            MigrationStatus::Current { embedded: n }
        );
        let mut older = all_applied();
        let last = older.pop().unwrap();
        assert_eq!(
            migration_status(&older),
            MigrationStatus::Pending {
                embedded: n,
                missing: 1,
                first: last.version
            }
        );
        assert_eq!(
            migration_status(&[]),
            MigrationStatus::Pending {
                embedded: n,
                missing: n,
                first: MIGRATOR.iter().next().unwrap().version
            }
        );
        let mut dirty = all_applied();
        dirty[1].success = false;
        assert_eq!(
            migration_status(&dirty),
            MigrationStatus::Failed {
                version: dirty[1].version
            }
        );
        let mut edited = all_applied();
        edited[0].checksum = vec![0; 48];
        assert_eq!(
            migration_status(&edited),
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
            migration_status(&newer).is_current(),
            "a newer database still has our schema"
        );
    }

    #[tokio::test]
    async fn a_new_database_file_is_created_in_wal_mode_with_full_sync_and_foreign_keys_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.db");
        let pool = open(path.to_str().unwrap()).await.unwrap();
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
