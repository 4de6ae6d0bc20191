//! Dispatch records: one per attempt, scheduled (provably not started), started, settled.
//! Inserted and updated through [`super::Writes`]; read here.

use super::sql::{self, Exec};
use super::{non_negative, parse_ts, Store, StoreError};
use chrono::{DateTime, Utc};
use policy::{
    api::{DispatchOutcome, DispatchRecord, DispatchStatus, DispatcherKind},
    route::AttemptKind,
};

const TABLE: &str = "dispatches";

pub(super) fn attempt_kind_str(k: AttemptKind) -> &'static str {
    match k {
        AttemptKind::Initial => "initial",
        AttemptKind::Retry => "retry",
        AttemptKind::PostWait => "post_wait",
        AttemptKind::Switch => "switch",
        AttemptKind::Manual => "manual",
    }
}

pub(crate) fn outcome_str(o: DispatchOutcome) -> &'static str {
    match o {
        DispatchOutcome::Succeeded => "succeeded",
        DispatchOutcome::Failed => "failed",
        DispatchOutcome::Aborted => "aborted",
        DispatchOutcome::Superseded => "superseded",
        DispatchOutcome::Ambiguous => "ambiguous",
    }
}

pub(super) async fn load(mut conn: Exec<'_>, route_id: &str) -> Result<Vec<DispatchRecord>, StoreError> {
    let rows = sql::query(
        "SELECT attempt, candidate_id, kind, dispatcher, scheduled_generation, invocation_generation, status, \
         outcome, scheduled_at, started_at, settled_at FROM dispatches WHERE route_id = ? ORDER BY attempt",
    )
    .bind(route_id)
    .fetch_all(conn.by_ref())
    .await?;
    rows.iter()
        .map(|row| {
            let attempt = row.try_get::<i64, _>("attempt")?;
            let key = format!("{route_id}#{attempt}");
            // A stored tag as the JSON string serde decodes (an unknown one is corruption).
            let tag = |col: &str| -> Result<String, StoreError> {
                Ok(format!("\"{}\"", &row.try_get::<String, _>(col)?))
            };
            let opt_ts = |col: &str| -> Result<Option<DateTime<Utc>>, StoreError> {
                row.try_get::<Option<String>, _>(col)?
                    .as_deref()
                    .map(|s| parse_ts(TABLE, &key, s))
                    .transpose()
            };
            let dispatcher: String = row.try_get("dispatcher")?;
            let outcome: Option<String> = row.try_get("outcome")?;
            Ok(DispatchRecord {
                attempt: u32::try_from(attempt)
                    .map_err(|_| StoreError::corrupt(TABLE, &key, format!("attempt {attempt}")))?,
                candidate_id: row.try_get("candidate_id")?,
                kind: super::json(TABLE, &key, "attempt kind", &tag("kind")?)?,
                dispatcher: DispatcherKind::parse(&dispatcher).ok_or_else(|| {
                    StoreError::corrupt(TABLE, &key, format!("unknown dispatcher `{dispatcher}`"))
                })?,
                scheduled_generation: non_negative(
                    TABLE,
                    &key,
                    "scheduled generation",
                    row.try_get::<i64, _>("scheduled_generation")?,
                )?,
                invocation_generation: row
                    .try_get::<Option<i64>, _>("invocation_generation")?
                    .map(|g| non_negative(TABLE, &key, "invocation generation", g))
                    .transpose()?,
                status: super::json::<DispatchStatus>(TABLE, &key, "status", &tag("status")?)?,
                outcome: outcome
                    .map(|o| super::json::<DispatchOutcome>(TABLE, &key, "outcome", &format!("\"{o}\"")))
                    .transpose()?,
                scheduled_at: parse_ts(TABLE, &key, &row.try_get::<String, _>("scheduled_at")?)?,
                started_at: opt_ts("started_at")?,
                settled_at: opt_ts("settled_at")?,
            })
        })
        .collect()
}

impl Store {
    /// Which attempt on `candidate_id` attempt `attempt` of the route is (1-based): a simulated
    /// script plays its steps in this order.
    pub(crate) async fn candidate_ordinal(
        &self,
        route_id: &str,
        candidate_id: &str,
        attempt: u32,
    ) -> Result<u32, StoreError> {
        let n: i64 = sql::query(
            "SELECT COUNT(*) FROM dispatches WHERE route_id = ? AND candidate_id = ? AND attempt <= ?",
        )
        .bind(route_id)
        .bind(candidate_id)
        .bind(attempt)
        .scalar(&self.pool)
        .await?;
        Ok(u32::try_from(n.max(1)).unwrap_or(u32::MAX))
    }
}
