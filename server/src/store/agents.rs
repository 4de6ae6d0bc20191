//! ACP agent processes that are running (or that a crashed Recourse left running), one row per
//! process group. Bookkeeping, not route state: the `acp` dispatcher writes a row right after
//! it spawns an agent and before it prompts it, deletes it once the process is gone, and at
//! boot stops every group still alive whose start time matches (see
//! `engine::dispatch::acp`). Outside the engine's writer, on purpose: no route transition
//! depends on it.

use super::{Store, StoreError};
use chrono::{DateTime, Utc};

/// One agent process group as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentProcessRow {
    /// The process group id (the agent's pid: it leads its own group).
    pub(crate) pgid: i32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks after boot when the process started.
    pub(crate) start_ticks: u64,
    /// The kernel's boot id when it started (start ticks restart at each boot).
    pub(crate) boot_id: String,
    pub(crate) route_id: String,
    pub(crate) attempt: u32,
    pub(crate) agent_id: String,
}

impl Store {
    /// Records a running agent process group (replacing a stale row of a reused id).
    pub(crate) async fn record_agent_process(
        &self,
        row: &AgentProcessRow,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO agent_processes (pgid, start_ticks, boot_id, route_id, attempt, agent_id, started_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT(pgid) DO UPDATE SET start_ticks = excluded.start_ticks, boot_id = excluded.boot_id, \
             route_id = excluded.route_id, attempt = excluded.attempt, agent_id = excluded.agent_id, \
             started_at = excluded.started_at",
        )
        .bind(row.pgid)
        .bind(i64::try_from(row.start_ticks).unwrap_or(i64::MAX))
        .bind(&row.boot_id)
        .bind(&row.route_id)
        .bind(i64::from(row.attempt))
        .bind(&row.agent_id)
        .bind(super::ts(at))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Forgets a process group whose process is gone.
    pub(crate) async fn forget_agent_process(&self, pgid: i32, start_ticks: u64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM agent_processes WHERE pgid = ? AND start_ticks = ?")
            .bind(pgid)
            .bind(i64::try_from(start_ticks).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every recorded agent process group.
    pub(crate) async fn agent_processes(&self) -> Result<Vec<AgentProcessRow>, StoreError> {
        use sqlx::Row;
        let rows = sqlx::query(
            "SELECT pgid, start_ticks, boot_id, route_id, attempt, agent_id FROM agent_processes ORDER BY pgid",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|r| {
                let pgid: i32 = r.try_get("pgid")?;
                let row = pgid.to_string();
                Ok(AgentProcessRow {
                    pgid,
                    start_ticks: super::non_negative(
                        "agent_processes",
                        &row,
                        "start_ticks",
                        r.try_get("start_ticks")?,
                    )?,
                    boot_id: r.try_get("boot_id")?,
                    route_id: r.try_get("route_id")?,
                    attempt: u32::try_from(r.try_get::<i64, _>("attempt")?)
                        .map_err(|_| StoreError::corrupt("agent_processes", &row, "attempt out of range"))?,
                    agent_id: r.try_get("agent_id")?,
                })
            })
            .collect()
    }
}
