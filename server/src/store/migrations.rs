//! What sqlx recorded as applied in `_sqlx_migrations`, for the readiness check (`/readyz`
//! compares it with the migrations the binary embeds, `crate::db::migration_status`).

use super::{sql, Dialect};
use super::{Store, StoreError};

/// One row of `_sqlx_migrations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    pub version: i64,
    /// `false`: sqlx began it and it failed (the database is "dirty").
    pub success: bool,
    pub checksum: Vec<u8>,
}

impl Store {
    /// Every migration the database records, by version. A database that was never migrated has
    /// no `_sqlx_migrations` table: that is no migration applied, not an error.
    pub async fn applied_migrations(&self) -> Result<Vec<AppliedMigration>, StoreError> {
        let exists: i64 = sql::query(match self.dialect() {
            Dialect::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
            }
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
            }
        })
        .scalar(&self.pool)
        .await?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        let rows = sql::query("SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(AppliedMigration {
                    version: r.try_get("version")?,
                    success: r.try_get("success")?,
                    checksum: r.try_get("checksum")?,
                })
            })
            .collect()
    }
}
