//! The notification outbox's SQL: the rows a transition queues ([`Writes::notify_event`],
//! inside the writer's transaction), the delivery worker's claims and settlements, the in-app
//! list with each person's read position, and what operators see of deliveries.
//!
//! A claim is ONE statement: it leases the due, unleased head of each (channel, route) queue
//! (nothing of a route goes to a channel while an earlier event of that route is still pending
//! there, so a route's events arrive in order) and returns what it leased. On PostgreSQL the
//! rows are locked `FOR UPDATE SKIP LOCKED` as they are chosen, so two replicas never lease
//! the same delivery; a lease that runs out (its replica died mid-delivery) makes the delivery
//! claimable again. A settlement is fenced by the lease's token: a worker whose lease was taken
//! over writes nothing.

use super::{
    gen_i64, ms, non_negative, parse_ts,
    sql::{self, Bind, Dialect, Row},
    ts, Store, StoreError, Tx, Writes,
};
use chrono::{DateTime, Utc};
use policy::notify::{DeliveryStatus, DeliveryView, NotificationView, NotifyEventType};

const EVENTS: &str = "notify_events";
const DELIVERIES: &str = "notify_deliveries";

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

/// Rows as one JSON array of arrays (strings and integers only: it cannot fail).
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

/// A delivery a worker leased.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub event_seq: i64,
    pub channel_id: String,
    /// Attempts made before this one.
    pub attempts: u32,
    /// The event's body, as stored.
    pub payload: String,
    /// When the event was written (the engine's clock, Unix ms).
    pub created_ms: i64,
}

/// How an attempt ended, to settle its delivery.
#[derive(Debug, Clone)]
pub enum Settle {
    Delivered,
    /// Failed; try again at `due` (Unix ms).
    Retry {
        due_ms: i64,
        error: String,
    },
    /// Failed for the last time.
    Dead {
        error: String,
    },
}

fn decode_event(row: &Row) -> Result<NotifyEventType, StoreError> {
    let seq: i64 = row.try_get("seq")?;
    let t: String = row.try_get("type")?;
    NotifyEventType::parse(&t)
        .ok_or_else(|| StoreError::corrupt(EVENTS, seq.to_string(), format!("unknown type `{t}`")))
}

/// A settlement to write: how one leased attempt ended.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub claimed: Claimed,
    /// The lease the attempt was made under.
    pub token: String,
    pub settle: Settle,
    /// When the attempt ended.
    pub at: DateTime<Utc>,
}

/// The claim (values: token, lease end, now, now, limit). The pending rows are read in the
/// order of `notify_deliveries_pending` (event, pending only), so a claim reads about as many
/// rows as it leases plus those it passes over (leased, or behind a pending one of their
/// route), never the deliveries already settled.
fn claim_sql(dialect: Dialect) -> String {
    let skip_locked = match dialect {
        Dialect::Sqlite => "",
        Dialect::Postgres => " FOR UPDATE OF d SKIP LOCKED",
    };
    format!(
        "UPDATE notify_deliveries SET lease_owner = ?, lease_until_ms = ? \
         WHERE (event_seq, channel_id) IN (\
           SELECT d.event_seq, d.channel_id FROM notify_deliveries d \
           WHERE d.status = 'pending' AND d.due_ms <= ? \
             AND (d.lease_until_ms IS NULL OR d.lease_until_ms <= ?) \
             AND NOT EXISTS (SELECT 1 FROM notify_deliveries e WHERE e.channel_id = d.channel_id \
               AND e.route_id = d.route_id AND e.status = 'pending' AND e.event_seq < d.event_seq) \
           ORDER BY d.event_seq LIMIT ?{skip_locked}) \
         RETURNING event_seq, channel_id, attempts"
    )
}

/// The bodies of the events whose numbers are bound as one JSON array.
fn bodies_sql(dialect: Dialect) -> String {
    format!(
        "SELECT seq, payload, created_ms FROM notify_events WHERE seq IN ({})",
        dialect.json_int_array()
    )
}

/// SQLite: settlements from one JSON array of `[event, channel, token, status, attempts, due,
/// error, settled at]` rows; each writes only while the lease is still its token's.
const SETTLE_FROM_JSON: &str = "UPDATE notify_deliveries SET status = v.status, attempts = v.attempts, \
       due_ms = COALESCE(v.due, notify_deliveries.due_ms), lease_owner = NULL, lease_until_ms = NULL, \
       last_error = v.error, settled_at = v.settled \
     FROM (SELECT json_extract(value, '$[0]') AS seq, json_extract(value, '$[1]') AS channel, \
       json_extract(value, '$[2]') AS token, json_extract(value, '$[3]') AS status, \
       json_extract(value, '$[4]') AS attempts, json_extract(value, '$[5]') AS due, \
       json_extract(value, '$[6]') AS error, json_extract(value, '$[7]') AS settled FROM json_each(?)) AS v \
     WHERE notify_deliveries.event_seq = v.seq AND notify_deliveries.channel_id = v.channel \
       AND notify_deliveries.lease_owner = v.token AND notify_deliveries.status = 'pending' \
     RETURNING notify_deliveries.event_seq, notify_deliveries.channel_id";

/// Pending and dead deliveries, each counted through its partial index (the delivered ones,
/// nearly all rows, are never read).
const DELIVERY_COUNTS: &str = "SELECT \
       (SELECT COUNT(*) FROM notify_deliveries WHERE status = 'pending') AS pending, \
       (SELECT COUNT(*) FROM notify_deliveries WHERE status = 'dead') AS dead";

/// The earliest due time of a pending delivery: a scan of `notify_deliveries_pending`, which
/// carries it (the pending deliveries only: few, unless receivers are down).
const NEXT_DUE: &str = "SELECT MIN(due_ms) FROM notify_deliveries WHERE status = 'pending'";

impl Tx<'_> {
    /// Leases up to `limit` due deliveries (the head of each channel's queue per route) for
    /// `token` until `lease_until`; returns them oldest first.
    pub(crate) async fn claim_deliveries(
        &mut self,
        token: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Claimed>, StoreError> {
        let now_ms = ms(now);
        let rows = sql::query(claim_sql(self.dialect()))
            .bind(token)
            .bind(ms(lease_until))
            .bind(now_ms)
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all(self.ex())
            .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut leased = Vec::with_capacity(rows.len());
        for row in rows {
            let seq: i64 = row.try_get("event_seq")?;
            let channel_id: String = row.try_get("channel_id")?;
            let attempts = non_negative(DELIVERIES, &seq.to_string(), "attempts", row.try_get("attempts")?)?;
            leased.push((seq, channel_id, u32::try_from(attempts).unwrap_or(u32::MAX)));
        }
        // The events' bodies in one read (a claim takes at most a few dozen), their numbers
        // bound as one JSON array: the text is the same whatever their number.
        let mut seqs: Vec<i64> = leased.iter().map(|(seq, _, _)| *seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        let read = sql::query(bodies_sql(self.dialect())).bind(json_rows(&seqs));
        let mut bodies = std::collections::HashMap::with_capacity(seqs.len());
        for row in read.fetch_all(self.ex()).await? {
            let seq: i64 = row.try_get("seq")?;
            let payload: String = row.try_get("payload")?;
            let created_ms: i64 = row.try_get("created_ms")?;
            bodies.insert(seq, (payload, created_ms));
        }
        let mut out = Vec::with_capacity(leased.len());
        for (seq, channel_id, attempts) in leased {
            let Some((payload, created_ms)) = bodies.get(&seq) else {
                return Err(StoreError::corrupt(
                    DELIVERIES,
                    seq.to_string(),
                    "its event is missing",
                ));
            };
            out.push(Claimed {
                event_seq: seq,
                channel_id,
                attempts,
                payload: payload.clone(),
                created_ms: *created_ms,
            });
        }
        out.sort_by_key(|c| c.event_seq);
        Ok(out)
    }

    /// Settles leased deliveries after one attempt each, in one statement; the ones not written,
    /// as (channel, event), because their lease is not their token's any more (it ran out and
    /// another worker took the delivery).
    pub(crate) async fn settle_deliveries(
        &mut self,
        all: &[Settlement],
    ) -> Result<Vec<(String, i64)>, StoreError> {
        if all.is_empty() {
            return Ok(Vec::new());
        }
        // One row of values per settlement: (event, channel, token, status, attempts, due,
        // error, settled at).
        let rows: Vec<_> = all
            .iter()
            .map(|s| {
                let (status, due, error) = match &s.settle {
                    Settle::Delivered => (DeliveryStatus::Delivered, None, None),
                    Settle::Retry { due_ms, error } => (DeliveryStatus::Pending, Some(*due_ms), Some(error)),
                    Settle::Dead { error } => (DeliveryStatus::Dead, None, Some(error)),
                };
                (
                    s.claimed.event_seq,
                    &s.claimed.channel_id,
                    &s.token,
                    status.as_str(),
                    i64::from(s.claimed.attempts.saturating_add(1)),
                    due,
                    error,
                    (status != DeliveryStatus::Pending).then(|| ts(s.at)),
                )
            })
            .collect();
        let update = match self.dialect() {
            // One text whatever the number of rows, bound as one JSON array (as the batch's
            // events: a text per number of rows would be parsed again and again).
            Dialect::Sqlite => sql::query(SETTLE_FROM_JSON).bind(json_rows(&rows)),
            // `column1` ... `column8` name a `VALUES` list's columns.
            Dialect::Postgres => {
                let marks = vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; rows.len()].join(", ");
                let mut update = sql::query(format!(
                    "UPDATE notify_deliveries SET status = v.column4, attempts = v.column5, \
                     due_ms = COALESCE(v.column6, notify_deliveries.due_ms), lease_owner = NULL, \
                     lease_until_ms = NULL, last_error = v.column7, settled_at = v.column8 \
                     FROM (VALUES {marks}) AS v \
                     WHERE notify_deliveries.event_seq = v.column1 AND notify_deliveries.channel_id = v.column2 \
                       AND notify_deliveries.lease_owner = v.column3 AND notify_deliveries.status = 'pending' \
                     RETURNING notify_deliveries.event_seq, notify_deliveries.channel_id"
                ));
                for (seq, channel, token, status, attempts, due, error, settled_at) in rows {
                    update = update
                        .bind(seq)
                        .bind(channel.as_str())
                        .bind(token.as_str())
                        .bind(status)
                        .bind(attempts)
                        .bind(due)
                        .bind(error.cloned())
                        .bind(settled_at);
                }
                update
            }
        };
        let mut written = std::collections::HashSet::with_capacity(all.len());
        for row in update.fetch_all(self.ex()).await? {
            let seq: i64 = row.try_get("event_seq")?;
            let channel: String = row.try_get("channel_id")?;
            written.insert((seq, channel));
        }
        Ok(all
            .iter()
            .filter(|s| !written.contains(&(s.claimed.event_seq, s.claimed.channel_id.clone())))
            .map(|s| (s.claimed.channel_id.clone(), s.claimed.event_seq))
            .collect())
    }
}

impl Store {
    /// Gives back every lease (SQLite at start: the file has one serving process, so every
    /// lease was the previous process's, and what it was sending when it stopped is sent again).
    pub async fn release_delivery_leases(&self) -> Result<u64, StoreError> {
        Ok(sql::query(
            "UPDATE notify_deliveries SET lease_owner = NULL, lease_until_ms = NULL \
             WHERE status = 'pending' AND lease_owner IS NOT NULL",
        )
        .execute(&self.pool)
        .await?)
    }

    /// The earliest due time of a pending delivery (ignoring leases), if any.
    pub async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let due: Option<i64> = sql::query(NEXT_DUE).scalar(&self.pool).await?;
        Ok(due.map(super::from_ms))
    }

    /// Deliveries by status, for `/metrics` (pending and dead).
    pub async fn delivery_counts(&self) -> Result<(u64, u64), StoreError> {
        let row = sql::query(DELIVERY_COUNTS).fetch_one(&self.pool).await?;
        let pending = non_negative(DELIVERIES, "*", "pending", row.try_get("pending")?)?;
        let dead = non_negative(DELIVERIES, "*", "dead", row.try_get("dead")?)?;
        Ok((pending, dead))
    }

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
        let scope = within.map(|w| super::to_json(&w));
        let rows = sql::query(sql)
            .bind(before.unwrap_or(i64::MAX))
            .bind(scope.clone())
            .bind(scope)
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
        let scope = within.map(|w| super::to_json(&w));
        let n: i64 = sql::query(sql)
            .bind(through)
            .bind(scope.clone())
            .bind(scope)
            .scalar(&self.pool)
            .await?;
        non_negative(EVENTS, "*", "unread", n)
    }

    /// `column` is one of the profiles of a JSON array bound twice (or the array is NULL: any).
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
        let scope = within.map(|w| super::to_json(&w));
        let rows = sql::query(sql)
            .bind(status.map(|s| s.as_str()))
            .bind(status.map(|s| s.as_str()))
            .bind(before.unwrap_or(i64::MAX))
            .bind(scope.clone())
            .bind(scope)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Pool;

    /// SQLite's plans for the worker's statements on a migrated database: every scan of
    /// `notify_deliveries` goes through a partial index of the rows still to act on (a scan of
    /// the whole table reads every delivery ever made), and nothing is sorted (the claim reads
    /// the pending rows in event order and stops at its limit; sorting them first reads the
    /// whole backlog at every claim).
    #[tokio::test]
    async fn the_workers_statements_never_read_settled_deliveries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plans.db");
        let pool = Pool::from(crate::db::open_sqlite(path.to_str().unwrap()).await.unwrap());
        let statements: [(&str, String, usize); 5] = [
            ("claim", claim_sql(Dialect::Sqlite), 5),
            ("counts", DELIVERY_COUNTS.to_owned(), 0),
            ("next due", NEXT_DUE.to_owned(), 0),
            ("settle", SETTLE_FROM_JSON.to_owned(), 1),
            ("bodies", bodies_sql(Dialect::Sqlite), 1),
        ];
        for (what, sql, values) in statements {
            let mut explain = sql::query(format!("EXPLAIN QUERY PLAN {sql}"));
            for _ in 0..values {
                explain = explain.bind(0i64);
            }
            let plan: Vec<String> = explain
                .fetch_all(&pool)
                .await
                .unwrap()
                .iter()
                .map(|row| row.try_get::<String, _>("detail").unwrap())
                .collect();
            let partial = ["notify_deliveries_pending", "notify_deliveries_dead"];
            for line in &plan {
                let table_scan = line.starts_with("SCAN")
                    && !line.contains("CONSTANT ROW")
                    && !line.starts_with("SCAN json_each");
                if table_scan {
                    assert!(
                        partial.iter().any(|index| line.contains(index)),
                        "{what} scans more than the pending or dead deliveries: {plan:?}"
                    );
                }
            }
            // A sort reads every pending delivery before the first is leased.
            assert!(
                !plan.iter().any(|line| line.contains("TEMP B-TREE")),
                "{what} sorts: {plan:?}"
            );
        }
    }
}
