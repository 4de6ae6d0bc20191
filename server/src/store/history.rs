//! The append-only attempt history (rows are inserted through [`super::Writes::history`]; a
//! trigger refuses updates).

use super::sql::{self, Exec};
use super::{non_negative, parse_ts, StoreError};
use policy::{
    api::HistoryEntry,
    route::{EventKind, StateName},
};

const TABLE: &str = "route_history";

pub(super) async fn load(mut conn: Exec<'_>, route_id: &str) -> Result<Vec<HistoryEntry>, StoreError> {
    let rows = sql::query(
        "SELECT seq, at, event, from_state, to_state, generation, candidate_id, attempt, profile_revision, \
         decision_json, classification_json FROM route_history WHERE route_id = ? ORDER BY seq",
    )
    .bind(route_id)
    .fetch_all(conn.by_ref())
    .await?;
    rows.iter()
        .map(|row| {
            let seq = row.try_get::<i64, _>("seq")?;
            let key = format!("{route_id}#{seq}");
            let state = |s: &str| {
                StateName::parse(s)
                    .ok_or_else(|| StoreError::corrupt(TABLE, &key, format!("unknown state `{s}`")))
            };
            let event: String = row.try_get("event")?;
            let event: EventKind = super::json(TABLE, &key, "event", &format!("\"{event}\""))?;
            let from: Option<String> = row.try_get("from_state")?;
            let decision: Option<String> = row.try_get("decision_json")?;
            let classification: Option<String> = row.try_get("classification_json")?;
            Ok(HistoryEntry {
                seq: non_negative(TABLE, &key, "seq", seq)?,
                at: parse_ts(TABLE, &key, &row.try_get::<String, _>("at")?)?,
                event,
                from: from.as_deref().map(state).transpose()?,
                to: state(&row.try_get::<String, _>("to_state")?)?,
                generation: non_negative(TABLE, &key, "generation", row.try_get::<i64, _>("generation")?)?,
                candidate_id: row.try_get("candidate_id")?,
                attempt: row
                    .try_get::<Option<i64>, _>("attempt")?
                    .map(|a| {
                        u32::try_from(a).map_err(|_| StoreError::corrupt(TABLE, &key, format!("attempt {a}")))
                    })
                    .transpose()?,
                profile_revision: non_negative(
                    TABLE,
                    &key,
                    "profile revision",
                    row.try_get::<i64, _>("profile_revision")?,
                )?,
                decision: decision
                    .as_deref()
                    .map(|d| super::json(TABLE, &key, "decision", d))
                    .transpose()?,
                classification: classification
                    .as_deref()
                    .map(|c| super::json(TABLE, &key, "classification", c))
                    .transpose()?,
            })
        })
        .collect()
}
