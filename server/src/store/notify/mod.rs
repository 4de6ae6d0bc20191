//! The notification outbox's SQL: the rows a transition queues ([`Writes::notify_event`],
//! inside the writer's transaction), the in-app list with each person's read position, and what
//! operators see of deliveries. The delivery worker's claims and settlements are
//! [`deliveries`]; how long the outbox keeps what it sent, [`retention`].

use super::{
    gen_i64, ms, non_negative, parse_ts,
    sql::{self, Bind, Dialect, Row},
    ts, Store, StoreError, Writes,
};
use chrono::{DateTime, Utc};
use policy::notify::{DeliveryStatus, DeliveryView, NotificationView, NotifyEventType};

const EVENTS: &str = "notify_events";
const DELIVERIES: &str = "notify_deliveries";

mod deliveries;
mod retention;
pub use deliveries::{Claimed, Settle, Settlement};

/// A new event row, and the channels it is sent to (`in_app` is a column, not a channel here).
pub(crate) struct NotifyInsert {
    pub(crate) id: String,
    pub(crate) event: NotifyEventType,
    pub(crate) route_id: String,
    pub(crate) profile_id: String,
    pub(crate) at: DateTime<Utc>,
    pub(crate) payload: String,
    pub(crate) in_app: bool,
    pub(crate) channels: Vec<String>,
}

impl Writes {
    /// Queues an event row and one delivery row per channel, due now. They are written after
    /// the batch's queued statements, in the order queued (an event's `seq` follows it).
    pub(crate) fn notify_event(&mut self, e: NotifyInsert) {
        self.events.push(e);
    }

    /// The statements that write `events`. On SQLite, two for the whole batch, whatever it
    /// holds: the rows travel as one JSON array each, so the text is always the same. The
    /// batch's text is parsed again at every commit (it is new each time), and parsing is
    /// about as much of the writer's thread as running the statements; a statement per event
    /// and per channel made a profile that tells three channels pay for several of them per
    /// transition. On PostgreSQL (one statement at a time, each prepared once) a statement per
    /// event and one for its deliveries.
    pub(super) fn push_events(&mut self, events: Vec<NotifyInsert>, dialect: Dialect) {
        if events.is_empty() {
            return;
        }
        match dialect {
            Dialect::Sqlite => {
                let rows: Vec<_> = events
                    .iter()
                    .map(|e| {
                        (
                            &e.id,
                            e.event.as_str(),
                            &e.route_id,
                            &e.profile_id,
                            ts(e.at),
                            ms(e.at),
                            &e.payload,
                            i64::from(e.in_app),
                        )
                    })
                    .collect();
                let deliveries: Vec<_> = events
                    .iter()
                    .flat_map(|e| e.channels.iter().map(move |c| (&e.id, c, &e.route_id, ms(e.at))))
                    .collect();
                self.push_binds(EVENTS_FROM_JSON, vec![Bind::from(json_rows(&rows))]);
                if !deliveries.is_empty() {
                    self.push_binds(DELIVERIES_FROM_JSON, vec![Bind::from(json_rows(&deliveries))]);
                }
            }
            Dialect::Postgres => {
                for e in events {
                    self.push_binds(
                        "INSERT INTO notify_events (id, type, route_id, profile_id, at, created_ms, payload, in_app) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        vec![
                            Bind::from(e.id.as_str()),
                            Bind::from(e.event.as_str()),
                            Bind::from(e.route_id.as_str()),
                            Bind::from(e.profile_id.as_str()),
                            Bind::from(ts(e.at)),
                            Bind::from(ms(e.at)),
                            Bind::from(e.payload.as_str()),
                            Bind::from(i64::from(e.in_app)),
                        ],
                    );
                    for some in e.channels.chunks(DELIVERIES_INSERT.len()) {
                        let mut binds = vec![Bind::from(e.route_id.as_str()), Bind::from(ms(e.at))];
                        binds.extend(some.iter().map(|c| Bind::from(c.as_str())));
                        binds.push(Bind::from(e.id.as_str()));
                        self.push_binds(DELIVERIES_INSERT[some.len() - 1], binds);
                    }
                }
            }
        }
    }
}

/// Binds `within` (the profiles a token is scoped to, or `None`: any) twice, as
/// [`Store::within_profiles`]' fragment reads it.
fn bind_within<'q>(query: sql::Query<'q>, within: Option<&[String]>) -> sql::Query<'q> {
    let scope = within.map(|w| super::to_json(&w));
    query.bind(scope.clone()).bind(scope)
}

/// Rows as one JSON array of arrays (strings, integers and nulls only: it cannot fail).
fn json_rows(rows: &[impl serde::Serialize]) -> String {
    serde_json::to_string(rows).unwrap_or_default()
}

/// SQLite: a batch's events, from one JSON array of `[id, type, route, profile, at,
/// created_ms, payload, in_app]` rows, inserted in the array's order (their `seq` follows it).
const EVENTS_FROM_JSON: &str =
    "INSERT INTO notify_events (id, type, route_id, profile_id, at, created_ms, payload, in_app) \
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), \
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'), \
       json_extract(value, '$[6]'), json_extract(value, '$[7]') \
     FROM json_each(?) ORDER BY key";

/// SQLite: a batch's deliveries, from one JSON array of `[event id, channel, route, due]` rows.
const DELIVERIES_FROM_JSON: &str =
    "INSERT INTO notify_deliveries (event_seq, channel_id, route_id, status, attempts, due_ms) \
     SELECT e.seq, json_extract(d.value, '$[1]'), json_extract(d.value, '$[2]'), 'pending', 0, \
       json_extract(d.value, '$[3]') \
     FROM json_each(?) AS d JOIN notify_events e ON e.id = json_extract(d.value, '$[0]')";

/// PostgreSQL: the insert of an event's deliveries to one, two or three channels (values:
/// route, due, each channel, the event's id); `column1` names a `VALUES` list's column.
const DELIVERIES_INSERT: [&str; 3] = [
    "INSERT INTO notify_deliveries (event_seq, channel_id, route_id, status, attempts, due_ms) \
     SELECT e.seq, v.column1, ?, 'pending', 0, ? FROM (VALUES (?)) AS v, notify_events e WHERE e.id = ?",
    "INSERT INTO notify_deliveries (event_seq, channel_id, route_id, status, attempts, due_ms) \
     SELECT e.seq, v.column1, ?, 'pending', 0, ? FROM (VALUES (?), (?)) AS v, notify_events e WHERE e.id = ?",
    "INSERT INTO notify_deliveries (event_seq, channel_id, route_id, status, attempts, due_ms) \
     SELECT e.seq, v.column1, ?, 'pending', 0, ? FROM (VALUES (?), (?), (?)) AS v, notify_events e \
     WHERE e.id = ?",
];

fn decode_event(row: &Row) -> Result<NotifyEventType, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    let t: String = row.try_get("type")?;
    NotifyEventType::parse(&t)
        .ok_or_else(|| StoreError::corrupt(EVENTS, seq.to_string(), format!("unknown type `{t}`")))
}

impl Store {
    /// The in-app list for `account_id`, newest first, older than `before` when given, of the
    /// profiles `within` only when given (a token scoped to profiles); the summary of each is
    /// made by `summarize` from the stored body.
    pub async fn notifications(
        &self,
        account_id: &str,
        within: Option<&[String]>,
        before: Option<i64>,
        limit: u32,
        summarize: impl Fn(&str) -> String,
    ) -> Result<Vec<NotificationView>, StoreError> {
        let through = self.read_through(account_id).await?;
        let sql = format!(
            "SELECT seq, id, type, route_id, at, payload FROM notify_events \
             WHERE in_app = 1 AND seq < ? AND {} ORDER BY seq DESC LIMIT ?",
            self.within_profiles("profile_id")
        );
        let query = sql::query(sql).bind(before.unwrap_or(i64::MAX));
        let rows = bind_within(query, within)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let key = seq.to_string();
                let payload: String = row.try_get("payload")?;
                Ok(NotificationView {
                    seq: non_negative(EVENTS, &key, "seq", seq)?,
                    id: row.try_get("id")?,
                    event: decode_event(row)?,
                    at: parse_ts(EVENTS, &key, &row.try_get::<String, _>("at")?)?,
                    route_id: row.try_get("route_id")?,
                    summary: summarize(&payload),
                    read: seq <= through,
                })
            })
            .collect()
    }

    /// How many in-app notifications (of the profiles `within`, when given) `account_id` has
    /// not marked read.
    pub async fn unread_notifications(
        &self,
        account_id: &str,
        within: Option<&[String]>,
    ) -> Result<u64, StoreError> {
        let through = self.read_through(account_id).await?;
        let sql = format!(
            "SELECT COUNT(*) FROM notify_events WHERE in_app = 1 AND seq > ? AND {}",
            self.within_profiles("profile_id")
        );
        let query = sql::query(sql).bind(through);
        let n: i64 = bind_within(query, within).scalar(&self.pool).await?;
        non_negative(EVENTS, "*", "unread", n)
    }

    /// `column` is one of the profiles of a JSON array bound twice (or the array is NULL: any);
    /// [`bind_within`] binds it.
    fn within_profiles(&self, column: &str) -> String {
        format!(
            "(? IS NULL OR {column} IN ({}))",
            self.dialect().json_text_array()
        )
    }

    async fn read_through(&self, account_id: &str) -> Result<i64, StoreError> {
        Ok(
            sql::query("SELECT through_seq FROM notify_reads WHERE account_id = ?")
                .bind(account_id)
                .scalar_optional::<i64>(&self.pool)
                .await?
                .unwrap_or(0),
        )
    }

    /// Marks everything up to `through_seq` read for `account_id` (never moves back).
    pub async fn mark_notifications_read(
        &self,
        account_id: &str,
        through_seq: u64,
    ) -> Result<(), StoreError> {
        let greatest = self
            .dialect()
            .greatest("notify_reads.through_seq", "excluded.through_seq");
        let sql = format!(
            "INSERT INTO notify_reads (account_id, through_seq) VALUES (?, ?) \
             ON CONFLICT (account_id) DO UPDATE SET through_seq = {greatest}"
        );
        sql::query(sql)
            .bind(account_id)
            .bind(gen_i64(through_seq))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deliveries with `status` (every status when `None`) of the profiles `within` (when
    /// given), newest event first, older than `before` (an event's `seq`) when given.
    pub async fn deliveries(
        &self,
        status: Option<DeliveryStatus>,
        within: Option<&[String]>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<DeliveryView>, StoreError> {
        let sql = format!(
            "SELECT e.seq, e.id, e.type, e.at, d.channel_id, d.route_id, d.status, d.attempts, d.last_error \
             FROM notify_deliveries d JOIN notify_events e ON e.seq = d.event_seq \
             WHERE (? IS NULL OR d.status = ?) AND e.seq < ? AND {} ORDER BY e.seq DESC, d.channel_id LIMIT ?",
            self.within_profiles("e.profile_id")
        );
        let query = sql::query(sql)
            .bind(status.map(|s| s.as_str()))
            .bind(status.map(|s| s.as_str()))
            .bind(before.unwrap_or(i64::MAX));
        let rows = bind_within(query, within)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let key = seq.to_string();
                let s: String = row.try_get("status")?;
                Ok(DeliveryView {
                    event_id: row.try_get("id")?,
                    event: decode_event(row)?,
                    channel_id: row.try_get("channel_id")?,
                    route_id: row.try_get("route_id")?,
                    status: DeliveryStatus::parse(&s).ok_or_else(|| {
                        StoreError::corrupt(DELIVERIES, &key, format!("unknown status `{s}`"))
                    })?,
                    attempts: u32::try_from(non_negative(
                        DELIVERIES,
                        &key,
                        "attempts",
                        row.try_get("attempts")?,
                    )?)
                    .unwrap_or(u32::MAX),
                    last_error: row.try_get("last_error")?,
                    at: parse_ts(EVENTS, &key, &row.try_get::<String, _>("at")?)?,
                })
            })
            .collect()
    }
}

/// SQLite's query plan (`EXPLAIN QUERY PLAN`'s lines) of `sql` with `values` zeros bound, on a
/// migrated database in `dir`: what the plan tests of the worker's statements read.
#[cfg(test)]
async fn sqlite_plan(dir: &tempfile::TempDir, sql: &str, values: usize) -> Vec<String> {
    let path = dir.path().join("plans.db");
    let pool = super::Pool::from(crate::db::open_sqlite(path.to_str().unwrap()).await.unwrap());
    let mut explain = sql::query(format!("EXPLAIN QUERY PLAN {sql}"));
    for _ in 0..values {
        explain = explain.bind(0i64);
    }
    explain
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get::<String, _>("detail").unwrap())
        .collect()
}
