//! Replicas: the processes serving one database, each alive while its lease (database time)
//! is ahead, and what they own. A route in flight is owned by the instance that committed its
//! latest transition (`routes.owner`, written with the compare-and-set); when that instance's
//! lease runs out, any other replica takes the route up.
//!
//! Time here is the database's (`clock_timestamp()` on PostgreSQL), never a replica's own
//! clock, so a replica whose clock is off cannot declare a live one dead. SQLite has one
//! process and no clock of its own: there the caller's time stands in.

use super::{sql, Dialect, Store, StoreError, Tx};
use chrono::{DateTime, Utc};
use policy::route::StateName;

/// The states a route is "in flight" in: a process launches or watches its attempt, or decides
/// its switch (the states restart reconciliation takes up).
pub(crate) const IN_FLIGHT: [StateName; 3] = [StateName::Active, StateName::Retrying, StateName::Switching];

/// Whether a route in `state` is in flight (and so has an owner).
pub(crate) fn in_flight(state: StateName) -> bool {
    IN_FLIGHT.contains(&state)
}

/// The routes `r` that restart reconciliation takes up, as SQL conditions: in flight, not
/// running an attempt whose report is already durable (a scheduled report fires as if nothing
/// happened), and not running an external runner's attempt (its lease protocol decides).
pub(crate) fn taken_up_on_restart() -> String {
    let states: Vec<String> = IN_FLIGHT.iter().map(|s| format!("'{}'", s.as_str())).collect();
    format!(
        "r.state IN ({}) \
         AND NOT EXISTS (SELECT 1 FROM timers t WHERE t.route_id = r.id AND t.kind = 'report') \
         AND NOT EXISTS (SELECT 1 FROM dispatches d WHERE d.route_id = r.id AND d.status = 'started' \
         AND d.dispatcher = 'external')",
        states.join(", ")
    )
}

/// The database's time in SQL, Unix ms (PostgreSQL).
const PG_NOW_MS: &str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease is extended.
    Renewed,
    /// The lease had run out (the process was stopped or starved): other replicas may have
    /// taken its routes up. A new lease is taken, but what was running must stop.
    Lapsed,
}

/// The database's time as SQL, Unix ms (PostgreSQL), or a `?` for the caller's (SQLite).
fn now_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "?",
        Dialect::Postgres => PG_NOW_MS,
    }
}

impl Tx<'_> {
    /// Whether the route's owner is alive (read inside the transaction that holds its row).
    pub(crate) async fn owner_alive(
        &mut self,
        route_id: &str,
        local: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut ex = self.ex();
        let dialect = ex.dialect();
        let q = sql::query(format!(
            "SELECT COUNT(*) FROM routes r JOIN replicas p ON p.instance = r.owner \
             WHERE r.id = ? AND p.lease_until_ms >= {}",
            now_sql(dialect)
        ))
        .bind(route_id);
        let q = match dialect {
            Dialect::Sqlite => q.bind(local.timestamp_millis()),
            Dialect::Postgres => q,
        };
        Ok(q.scalar::<i64>(ex.by_ref()).await? > 0)
    }

    /// Gives back the probe leases of routes whose owner is not alive (their probes are
    /// ambiguous) and, if any was held, releases the holds; whether any was.
    pub(crate) async fn release_orphaned_probe_leases(
        &mut self,
        local: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let dialect = self.ex().dialect();
        let q = sql::query(format!(
            "UPDATE circuits SET state = 'open', probe_route_id = NULL, updated_at = ? WHERE state = 'probing' \
             AND NOT EXISTS (SELECT 1 FROM routes r JOIN replicas p ON p.instance = r.owner \
             WHERE r.id = circuits.probe_route_id AND p.lease_until_ms >= {})",
            now_sql(dialect)
        ))
        .bind(super::ts(local));
        let q = match dialect {
            Dialect::Sqlite => q.bind(local.timestamp_millis()),
            Dialect::Postgres => q,
        };
        let done = q.execute(self.ex()).await?;
        if done > 0 {
            self.release_holds(local).await?;
        }
        Ok(done > 0)
    }
}

impl Store {
    /// The database's time, Unix ms (SQLite: `local`).
    pub(crate) async fn db_now_ms(&self, local: DateTime<Utc>) -> Result<i64, StoreError> {
        Ok(match self.dialect() {
            Dialect::Sqlite => local.timestamp_millis(),
            Dialect::Postgres => {
                sql::query(format!("SELECT {PG_NOW_MS}"))
                    .scalar::<i64>(self.pool())
                    .await?
            }
        })
    }

    /// Registers this process as a live replica for `lease_ms` from now. A replica id names one
    /// process at a time: an earlier instance under the same id (the same replica, restarted)
    /// is retired at once, so its routes are taken up now rather than when its lease runs out.
    pub(crate) async fn register_replica(
        &self,
        instance: &str,
        replica_id: &str,
        host: &str,
        lease_ms: i64,
        local: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let now = self.db_now_ms(local).await?;
        sql::query("DELETE FROM replicas WHERE replica_id = ? AND instance <> ?")
            .bind(replica_id)
            .bind(instance)
            .execute(self.pool())
            .await?;
        sql::query(
            "INSERT INTO replicas (instance, replica_id, host, started_ms, lease_until_ms) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(instance)
        .bind(replica_id)
        .bind(host)
        .bind(now)
        .bind(now.saturating_add(lease_ms))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The heartbeat: extends this instance's lease, and says whether it had run out first.
    pub(crate) async fn renew_replica(
        &self,
        instance: &str,
        replica_id: &str,
        host: &str,
        lease_ms: i64,
        local: DateTime<Utc>,
    ) -> Result<Renewal, StoreError> {
        // The database's time as the statement runs (PostgreSQL), not read before it: a process
        // stopped between reading the time and renewing (SIGSTOP, a long pause) renewed a lease
        // that had run out meanwhile, and never learnt that others had taken its routes up.
        let dialect = self.dialect();
        let now = now_sql(dialect);
        let q = sql::query(format!(
            "UPDATE replicas SET lease_until_ms = {now} + ? WHERE instance = ? AND lease_until_ms >= {now}"
        ));
        let local_ms = local.timestamp_millis();
        let q = match dialect {
            Dialect::Sqlite => q.bind(local_ms).bind(lease_ms).bind(instance).bind(local_ms),
            Dialect::Postgres => q.bind(lease_ms).bind(instance),
        };
        let renewed = q.execute(self.pool()).await?;
        if renewed == 1 {
            return Ok(Renewal::Renewed);
        }
        // Lapsed (or swept away): take a lease again, so this process counts as alive from now.
        sql::query("DELETE FROM replicas WHERE instance = ?")
            .bind(instance)
            .execute(self.pool())
            .await?;
        self.register_replica(instance, replica_id, host, lease_ms, local)
            .await?;
        Ok(Renewal::Lapsed)
    }

    /// A clean stop: the instance is gone at once, so the others take its routes up now.
    pub(crate) async fn retire_replica(&self, instance: &str) -> Result<(), StoreError> {
        sql::query("DELETE FROM replicas WHERE instance = ?")
            .bind(instance)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Up to `limit` routes in flight whose owner is not alive, as restart reconciliation takes
    /// them up (no scheduled report waiting, no external runner's attempt), and the instances
    /// that owned them.
    pub(crate) async fn orphaned_routes(
        &self,
        local: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        let now = self.db_now_ms(local).await?;
        Ok(sql::query(format!(
            "SELECT r.id FROM routes r WHERE {} \
             AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.instance = r.owner AND p.lease_until_ms >= ?) \
             ORDER BY r.id LIMIT ?",
            taken_up_on_restart()
        ))
        .bind(now)
        .bind(limit)
        .scalars(self.pool())
        .await?)
    }

    /// Forgets replicas whose lease ran out more than `after_ms` ago (what they owned is judged
    /// by the absence of a live row, so the row itself is no longer needed).
    pub(crate) async fn forget_dead_replicas(
        &self,
        after_ms: i64,
        local: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let now = self.db_now_ms(local).await?;
        Ok(sql::query("DELETE FROM replicas WHERE lease_until_ms < ?")
            .bind(now.saturating_sub(after_ms))
            .execute(self.pool())
            .await?)
    }
}
