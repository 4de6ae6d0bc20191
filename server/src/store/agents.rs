//! The `acp` dispatcher's agents (`agent_processes`): ACP agent process groups that are running
//! (or that a crashed Recourse left running), bookkeeping outside the engine's writer on purpose
//! (no route transition depends on it). A row is written right after an agent is spawned and
//! before it is prompted, deleted once the process is gone; at boot every group still alive
//! whose start time matches is stopped (see `engine::dispatch::acp`). (The session that holds a
//! route's output is the route's state: `policy::route::held`.)

use super::{sql, Store, StoreError};
use std::sync::LazyLock;

/// This machine's host name, as agent process rows are kept by (`''` when unreadable).
pub(crate) fn this_host() -> String {
    static HOST: LazyLock<String> = LazyLock::new(|| {
        nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default()
    });
    HOST.clone()
}
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
        sql::query(
            "INSERT INTO agent_processes (host, pgid, start_ticks, boot_id, route_id, attempt, agent_id, started_at, \
             instance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT(host, pgid) DO UPDATE SET start_ticks = excluded.start_ticks, boot_id = excluded.boot_id, \
             route_id = excluded.route_id, attempt = excluded.attempt, agent_id = excluded.agent_id, \
             started_at = excluded.started_at, instance = excluded.instance",
        )
        .bind(this_host())
        .bind(row.pgid)
        .bind(i64::try_from(row.start_ticks).unwrap_or(i64::MAX))
        .bind(&row.boot_id)
        .bind(&row.route_id)
        .bind(i64::from(row.attempt))
        .bind(&row.agent_id)
        .bind(super::ts(at))
        .bind(self.member().map_or("", |m| m.instance.as_str()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Forgets a process group whose process is gone.
    pub(crate) async fn forget_agent_process(&self, pgid: i32, start_ticks: u64) -> Result<(), StoreError> {
        sql::query("DELETE FROM agent_processes WHERE host IN (?, '') AND pgid = ? AND start_ticks = ?")
            .bind(this_host())
            .bind(pgid)
            .bind(i64::try_from(start_ticks).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every recorded agent process group.
    /// The agent processes on this host that no live Recourse process watches: all of them
    /// for a process that is not a registered replica (it is the only one), else those whose
    /// instance's lease ran out.
    pub(crate) async fn orphaned_agent_processes(
        &self,
        local: DateTime<Utc>,
    ) -> Result<Vec<AgentProcessRow>, StoreError> {
        let columns = "a.pgid, a.start_ticks, a.boot_id, a.route_id, a.attempt, a.agent_id";
        let rows = match self.member() {
            None => {
                sql::query(format!(
                    "SELECT {columns} FROM agent_processes a WHERE a.host IN (?, '') ORDER BY a.pgid"
                ))
                .bind(this_host())
                .fetch_all(&self.pool)
                .await?
            }
            Some(me) => {
                let now = self.db_now_ms(local).await?;
                sql::query(format!(
                    "SELECT {columns} FROM agent_processes a WHERE a.host IN (?, '') AND a.instance <> ? \
                     AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.instance = a.instance AND p.lease_until_ms >= ?) \
                     ORDER BY a.pgid"
                ))
                .bind(this_host())
                .bind(&me.instance)
                .bind(now)
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.into_iter()
            .map(|r| {
                let stored: i64 = r.try_get("pgid")?;
                let row = stored.to_string();
                let pgid = i32::try_from(stored).map_err(|_| {
                    StoreError::corrupt("agent_processes", &row, "process group id out of range")
                })?;
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
