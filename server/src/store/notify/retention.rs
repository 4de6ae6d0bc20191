//! How long the outbox keeps what it sent: an event whose every delivery is settled (delivered
//! or dead) and that is older than `[notify] keep_days` is removed, its deliveries with it (the
//! foreign key cascades). An event with a delivery still pending is never removed, however old:
//! removing it would lose that delivery. The delivery worker calls [`Store::prune_notifications`]
//! (`crate::notify::worker`).

use super::super::{sql, Dialect, Store, StoreError};

/// Removes up to `limit` of the oldest events created before `before_ms` (milliseconds since
/// the epoch) with no pending delivery (values: `before_ms`, `before_ms`, `limit`).
///
/// The events are read in `seq` order, which is the order they were made in, and the read is
/// bounded by the first event made at or after `before_ms`: a pass that finds nothing left to
/// remove stops there instead of reading every event kept. A slow replica's clock can make an
/// event a little older than one before it; such an event waits for a later pass. On
/// PostgreSQL the events are locked as they are picked, skipping those another replica's pass
/// holds, so two replicas pruning at once take different events and never wait for each other.
fn prune_sql(dialect: Dialect) -> String {
    let skip_locked = match dialect {
        Dialect::Sqlite => "",
        Dialect::Postgres => " FOR UPDATE OF e SKIP LOCKED",
    };
    format!(
        "DELETE FROM notify_events WHERE seq IN ( \
           SELECT e.seq FROM notify_events e \
           WHERE e.seq < COALESCE((SELECT n.seq FROM notify_events n WHERE n.created_ms >= ? \
                                   ORDER BY n.seq LIMIT 1), 9223372036854775807) \
             AND e.created_ms < ? \
             AND NOT EXISTS (SELECT 1 FROM notify_deliveries d \
                             WHERE d.event_seq = e.seq AND d.status = 'pending') \
           ORDER BY e.seq LIMIT ?{skip_locked})"
    )
}

impl Store {
    /// Removes up to `limit` events made before `before_ms` whose deliveries are all settled,
    /// and their deliveries; how many events it removed. Callers repeat while it returns
    /// `limit`, each call a short transaction of its own.
    pub async fn prune_notifications(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        Ok(sql::query(prune_sql(self.dialect()))
            .bind(before_ms)
            .bind(before_ms)
            .bind(i64::from(limit))
            .execute(&self.pool)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plan: the events are read in `seq` order (the primary key), bounded, and each
    /// one's pending deliveries are looked up by the deliveries' key; nothing is sorted.
    #[tokio::test]
    async fn a_prune_reads_the_events_in_order_and_never_sorts() {
        let dir = tempfile::tempdir().unwrap();
        let plan = super::super::sqlite_plan(&dir, &prune_sql(Dialect::Sqlite), 3).await;
        assert!(
            !plan.iter().any(|line| line.contains("TEMP B-TREE")),
            "the prune sorts: {plan:?}"
        );
        assert!(
            !plan
                .iter()
                .any(|line| line.starts_with("SCAN d") || line.starts_with("SCAN notify_deliveries")),
            "the prune reads every delivery: {plan:?}"
        );
        assert!(
            plan.iter()
                .any(|line| line.contains("SEARCH e USING INTEGER PRIMARY KEY (rowid<?)")),
            "the prune's read of the events is not bounded: {plan:?}"
        );
    }
}
