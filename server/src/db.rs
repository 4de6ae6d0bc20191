//! Opening the SQLite store.
//!
//! WAL lets readers (the UI, the API) proceed while the route engine commits; foreign keys are
//! on because SQLite leaves them off by default; the busy timeout turns brief lock contention
//! into waiting rather than an error. Every connection of the pool gets the same pragmas.

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
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT))
}

/// Opens (creating if needed) the database and applies pending migrations.
pub async fn open(database: &str) -> anyhow::Result<SqlitePool> {
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(connect_options(database)?)
        .await
        .with_context(|| format!("cannot open database `{database}`"))?;
    MIGRATOR
        .run(&pool)
        .await
        .with_context(|| format!("cannot migrate database `{database}`"))?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_database_file_is_created_in_wal_mode_with_foreign_keys_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.db");
        let pool = open(path.to_str().unwrap()).await.unwrap();
        assert!(path.exists());
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
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
