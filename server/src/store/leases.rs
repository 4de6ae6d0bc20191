//! Leases of external runners, written only inside the writer's transaction (a lease and the
//! `lease` timer that watches it change together).

use super::sql::{self, Row};
use super::{from_ms, gen_i64, ms, non_negative, ts, Store, StoreError, Tx, Writes};
use chrono::{DateTime, Utc};
use policy::api::CallerKind;

const TABLE: &str = "dispatch_leases";

/// A runner's lease on a route's current attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) route_id: String,
    pub(crate) attempt: u32,
    pub(crate) generation: u64,
    pub(crate) lease_id: String,
    pub(crate) runner: String,
    pub(crate) acked: bool,
    pub(crate) expires: DateTime<Utc>,
}

fn lease_row(r: &Row) -> Result<Lease, StoreError> {
    let route_id: String = r.try_get("route_id")?;
    let attempt = non_negative(TABLE, &route_id, "attempt", r.try_get("attempt")?)?;
    Ok(Lease {
        attempt: u32::try_from(attempt).map_err(|_| StoreError::corrupt(TABLE, &route_id, "attempt"))?,
        generation: non_negative(TABLE, &route_id, "generation", r.try_get("generation")?)?,
        lease_id: r.try_get("lease_id")?,
        runner: r.try_get("runner")?,
        acked: r.try_get::<i64, _>("acked")? != 0,
        expires: from_ms(r.try_get("expires_ms")?),
        route_id,
    })
}

const COLUMNS: &str = "route_id, attempt, generation, lease_id, runner, acked, expires_ms";

/// A started `external` attempt of the route's current generation that no runner holds (no
/// lease, a lease on another attempt, or a claim that lapsed unacknowledged); the caller's own
/// filter follows, then [`OLDEST`].
const CLAIMABLE: &str = "SELECT d.route_id, d.attempt, d.invocation_generation FROM dispatches d \
     JOIN routes r ON r.id = d.route_id \
     LEFT JOIN dispatch_leases l ON l.route_id = d.route_id \
     WHERE d.status = 'started' AND d.dispatcher = 'external' AND r.generation = d.invocation_generation";

/// The oldest first; the unacknowledged claim's lapse time is the last bind.
const OLDEST: &str =
    "AND (l.route_id IS NULL OR l.attempt <> d.attempt OR (l.acked = 0 AND l.expires_ms <= ?)) \
     ORDER BY d.started_at, d.route_id LIMIT 1";

impl Tx<'_> {
    /// The oldest started `external` attempt no runner holds (no lease, or a claim that lapsed
    /// before it was acknowledged), of a route whose caller does not run its attempts itself
    /// (not `editor`): `(route_id, attempt, invocation_generation)`.
    pub(crate) async fn claimable_external(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, u32, u64)>, StoreError> {
        self.claimable(None, now).await
    }

    /// The started attempt of route `route_id`, if no runner holds it and the route's caller
    /// runs its attempts itself (`editor`): a claim limited to that route.
    pub(crate) async fn claimable_of_route(
        &mut self,
        route_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, u32, u64)>, StoreError> {
        self.claimable(Some(route_id), now).await
    }

    async fn claimable(
        &mut self,
        route_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, u32, u64)>, StoreError> {
        let runs_attempts = CallerKind::Editor.as_str();
        let query = match route_id {
            None => sql::query(format!("{CLAIMABLE} AND r.caller_kind <> ? {OLDEST}")).bind(runs_attempts),
            Some(id) => sql::query(format!(
                "{CLAIMABLE} AND r.caller_kind = ? AND d.route_id = ? {OLDEST}"
            ))
            .bind(runs_attempts)
            .bind(id),
        };
        let row = query.bind(ms(now)).fetch_optional(&mut *self.conn).await?;
        row.map(|r| {
            let route_id: String = r.try_get("route_id")?;
            let attempt = non_negative("dispatches", &route_id, "attempt", r.try_get("attempt")?)?;
            let generation = non_negative(
                "dispatches",
                &route_id,
                "invocation generation",
                r.try_get::<Option<i64>, _>("invocation_generation")?
                    .unwrap_or(-1),
            )?;
            Ok((
                route_id.clone(),
                u32::try_from(attempt)
                    .map_err(|_| StoreError::corrupt("dispatches", &route_id, "attempt"))?,
                generation,
            ))
        })
        .transpose()
    }

    /// The route's lease, as this transaction sees it.
    pub(crate) async fn lease(&mut self, route_id: &str) -> Result<Option<Lease>, StoreError> {
        let row = sql::query(format!(
            "SELECT {COLUMNS} FROM dispatch_leases WHERE route_id = ?{}",
            self.ex().dialect().for_update()
        ))
        .bind(route_id)
        .fetch_optional(&mut *self.conn)
        .await?;
        row.as_ref().map(lease_row).transpose()
    }
}

impl Writes {
    /// Writes (or replaces) the route's lease.
    pub(crate) fn put_lease(&mut self, lease: &Lease, now: DateTime<Utc>) {
        self.push_binds(
            "INSERT INTO dispatch_leases (route_id, attempt, generation, lease_id, runner, acked, expires_ms, claimed_at, \
             heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(route_id) DO UPDATE SET \
             attempt = excluded.attempt, generation = excluded.generation, lease_id = excluded.lease_id, \
             runner = excluded.runner, acked = excluded.acked, expires_ms = excluded.expires_ms, \
             claimed_at = CASE WHEN dispatch_leases.lease_id = excluded.lease_id THEN dispatch_leases.claimed_at \
             ELSE excluded.claimed_at END, heartbeat_at = excluded.heartbeat_at",
            vec![
                Some(lease.route_id.clone()).into(),
                Some(i64::from(lease.attempt)).into(),
                Some(gen_i64(lease.generation)).into(),
                Some(lease.lease_id.clone()).into(),
                Some(lease.runner.clone()).into(),
                Some(i64::from(lease.acked)).into(),
                Some(ms(lease.expires)).into(),
                Some(ts(now)).into(),
                Some(ts(now)).into(),
            ],
        );
    }

    /// Ends the route's lease (its attempt settled or the route moved on).
    pub(crate) fn delete_lease(&mut self, route_id: &str) {
        self.push_text("DELETE FROM dispatch_leases WHERE route_id = ?", &[route_id]);
    }
}

impl Store {
    /// The route's lease, if any.
    pub(crate) async fn lease(&self, route_id: &str) -> Result<Option<Lease>, StoreError> {
        let row = sql::query(format!(
            "SELECT {COLUMNS} FROM dispatch_leases WHERE route_id = ?"
        ))
        .bind(route_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(lease_row).transpose()
    }
}
