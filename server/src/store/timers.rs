//! Durable timers: at most one per route, written with the route state that needs it (through
//! [`super::Writes`]) and read here by the scheduler.

use super::sql;
use super::{
    from_ms, ms, non_negative,
    sql::{Bind, Dialect},
    Store, StoreError, Tx,
};
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::fmt;

const TABLE: &str = "timers";

/// What a timer does when it fires. Stored spellings; never rename one without a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerKind {
    /// A wait or retry deadline: `DeadlineReached { generation }`.
    Deadline,
    /// A pending attempt parked behind a circuit: run the dispatch gate again.
    CircuitHold,
    /// A dispatcher's scheduled report of the attempt started at `generation` (the payload is
    /// the report: success or an evidence envelope).
    Report,
    /// An external runner's acknowledged lease on the attempt started at `generation` runs
    /// out (heartbeats move it).
    Lease,
}

impl TimerKind {
    pub const ALL: [TimerKind; 4] = [
        TimerKind::Deadline,
        TimerKind::CircuitHold,
        TimerKind::Report,
        TimerKind::Lease,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            TimerKind::Deadline => "deadline",
            TimerKind::CircuitHold => "circuit_hold",
            TimerKind::Report => "report",
            TimerKind::Lease => "lease",
        }
    }

    pub fn parse(s: &str) -> Option<TimerKind> {
        TimerKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for TimerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A timer that is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueTimer {
    pub route_id: String,
    pub kind: TimerKind,
    pub generation: u64,
    pub payload: Option<String>,
    /// When it was due (its lateness is measured from here).
    pub due: DateTime<Utc>,
}

impl Tx<'_> {
    /// PostgreSQL: locks the timer rows of these routes until the transaction ends, skipping
    /// any another replica's transaction holds; the routes whose rows it got.
    pub(crate) async fn claim_timers(&mut self, route_ids: &[&str]) -> Result<HashSet<String>, StoreError> {
        if route_ids.is_empty() {
            return Ok(HashSet::new());
        }
        let marks = vec!["?"; route_ids.len()].join(", ");
        let ids = sql::query(format!(
            "SELECT route_id FROM timers WHERE route_id IN ({marks}) FOR UPDATE SKIP LOCKED"
        ))
        .bind_all(route_ids.iter().map(|id| Bind::from(*id)))
        .scalars::<String>(self.ex())
        .await?;
        Ok(ids.into_iter().collect())
    }
}

impl Store {
    /// Up to `limit` timers due at `now`, earliest first. On PostgreSQL, those another
    /// replica's transaction is firing right now are skipped (`SKIP LOCKED`; the locks are
    /// only looked at: this read holds none once it returns).
    pub async fn due_timers(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<DueTimer>, StoreError> {
        let skip = match self.dialect() {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        };
        let rows = sql::query(format!(
            "SELECT route_id, kind, generation, payload, due_ms FROM timers WHERE due_ms <= ? ORDER BY due_ms LIMIT ?{skip}"
        ))
        .bind(ms(now))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let route_id: String = r.try_get("route_id")?;
                let kind: String = r.try_get("kind")?;
                Ok(DueTimer {
                    kind: TimerKind::parse(&kind).ok_or_else(|| {
                        StoreError::corrupt(TABLE, &route_id, format!("unknown timer kind `{kind}`"))
                    })?,
                    generation: non_negative(
                        TABLE,
                        &route_id,
                        "generation",
                        r.try_get::<i64, _>("generation")?,
                    )?,
                    payload: r.try_get("payload")?,
                    due: from_ms(r.try_get("due_ms")?),
                    route_id,
                })
            })
            .collect()
    }

    /// How many timers are due at `now` and not yet fired (the `recourse_due_timers` gauge).
    pub async fn due_timer_count(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 = sql::query("SELECT COUNT(*) FROM timers WHERE due_ms <= ?")
            .bind(ms(now))
            .scalar(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// When the earliest timer is due.
    pub async fn next_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let next: Option<i64> = sql::query("SELECT MIN(due_ms) FROM timers")
            .scalar(&self.pool)
            .await?;
        Ok(next.map(from_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_spellings_round_trip() {
        for k in TimerKind::ALL {
            assert_eq!(TimerKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(TimerKind::parse("Deadline"), None);
    }
}
