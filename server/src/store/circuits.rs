//! Circuit rows. Every decision about a circuit is `policy::circuit`'s; this persists them:
//! the rows the gate reads, the probe lease's compare-and-set, the row a failure writes, and
//! closing on success. Written only inside the writer's transaction.

use super::sql::{self, Exec, Row};
use super::{from_ms, ms, non_negative, ts, Store, StoreError, Tx};
use chrono::{DateTime, Utc};
use policy::api::{CircuitState, CircuitView};
use std::collections::HashMap;

const TABLE: &str = "circuits";
const COLUMNS: &str = "key, state, open_until_ms, failures, code, probe_route_id";

fn circuit_row(row: &Row) -> Result<CircuitView, StoreError> {
    let key: String = row.try_get("key")?;
    let state: String = row.try_get("state")?;
    let failures = non_negative(TABLE, &key, "failures", row.try_get::<i64, _>("failures")?)?;
    Ok(CircuitView {
        state: CircuitState::parse(&state)
            .ok_or_else(|| StoreError::corrupt(TABLE, &key, format!("unknown circuit state `{state}`")))?,
        open_until: row.try_get::<Option<i64>, _>("open_until_ms")?.map(from_ms),
        failures: u32::try_from(failures).unwrap_or(u32::MAX),
        code: row.try_get("code")?,
        probe_route_id: row.try_get("probe_route_id")?,
        key,
    })
}

async fn load(mut conn: Exec<'_>, sql: &str) -> Result<Vec<CircuitView>, StoreError> {
    let rows = sql::query(sql).fetch_all(conn.by_ref()).await?;
    rows.iter().map(circuit_row).collect()
}

impl Tx<'_> {
    /// The circuits that are not closed (the only ones that hold or block anything), by key.
    pub(crate) async fn open_circuits(&mut self) -> Result<HashMap<String, CircuitView>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM circuits WHERE state <> 'closed'{}",
            self.ex().dialect().for_update()
        );
        Ok(load(self.ex(), &sql)
            .await?
            .into_iter()
            .map(|c| (c.key.clone(), c))
            .collect())
    }

    /// The probe lease's compare-and-set: `route_id` takes the lease of the expired circuit
    /// `key` only if it is still open (exactly one route wins).
    pub(crate) async fn take_probe(
        &mut self,
        key: &str,
        route_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sql::query(
            "UPDATE circuits SET state = 'probing', probe_route_id = ?, updated_at = ? WHERE key = ? AND state = 'open'",
        )
        .bind(route_id)
        .bind(ts(now))
        .bind(key)
        .execute(&mut *self.conn)
        .await?;
        Ok(done == 1)
    }

    /// Writes a circuit as `policy::circuit` decided it.
    pub(crate) async fn put_circuit(
        &mut self,
        c: &CircuitView,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sql::query(
            "INSERT INTO circuits (key, state, open_until_ms, failures, code, probe_route_id, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state, \
             open_until_ms = excluded.open_until_ms, failures = excluded.failures, code = excluded.code, \
             probe_route_id = excluded.probe_route_id, updated_at = excluded.updated_at",
        )
        .bind(&c.key)
        .bind(c.state.as_str())
        .bind(c.open_until.map(ms))
        .bind(i64::from(c.failures))
        .bind(&c.code)
        .bind(&c.probe_route_id)
        .bind(ts(now))
        .execute(&mut *self.conn)
        .await?;
        Ok(())
    }

    /// Closes the circuits `keys` (a success on the resource); the keys that were not closed.
    pub(crate) async fn close_circuits(
        &mut self,
        keys: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // One statement for all of them (a success closes its provider's, account's and model's).
        let marks = vec!["?"; keys.len()].join(", ");
        let mut update = sql::query(format!(
            "UPDATE circuits SET state = 'closed', open_until_ms = NULL, failures = 0, code = NULL, \
             probe_route_id = NULL, updated_at = ? WHERE key IN ({marks}) AND state <> 'closed' RETURNING key"
        ))
        .bind(ts(now));
        for key in keys {
            update = update.bind(key);
        }
        let closed: Vec<String> = update.scalars(&mut *self.conn).await?;
        // In the order of `keys`, as before.
        let closed = keys.iter().filter(|k| closed.contains(k)).cloned().collect();
        Ok(closed)
    }

    /// Gives back every probe lease (restart reconciliation: the previous process's probes are
    /// ambiguous) and, if any was held, releases the holds; whether any was.
    pub(crate) async fn release_all_probe_leases(&mut self, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sql::query(
            "UPDATE circuits SET state = 'open', probe_route_id = NULL, updated_at = ? WHERE state = 'probing'",
        )
        .bind(ts(now))
        .execute(&mut *self.conn)
        .await?;
        if done > 0 {
            self.release_holds(now).await?;
        }
        Ok(done > 0)
    }

    /// Makes every held dispatch due now, for a re-check.
    pub(crate) async fn release_holds(&mut self, now: DateTime<Utc>) -> Result<(), StoreError> {
        sql::query(super::writes::RELEASE_HOLDS_SQL)
            .bind(ms(now))
            .execute(&mut *self.conn)
            .await?;
        Ok(())
    }
}

impl Store {
    /// Every circuit, for the API and the UI.
    pub(crate) async fn circuits(&self) -> Result<Vec<CircuitView>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        load(
            Exec::from(&mut conn),
            &format!("SELECT {COLUMNS} FROM circuits ORDER BY key"),
        )
        .await
    }
}
