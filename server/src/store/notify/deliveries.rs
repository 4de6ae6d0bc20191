//! The delivery worker's SQL: its claims and settlements, the leases given back at a start,
//! when the next delivery is due, and the counts `/metrics` shows.
//!
//! A claim is ONE statement: it leases the due, unleased head of each (channel, route) queue
//! (nothing of a route goes to a channel while an earlier event of that route is still pending
//! there, so a route's events arrive in order) and returns what it leased. On PostgreSQL the
//! rows are locked `FOR UPDATE SKIP LOCKED` as they are chosen, so two replicas never lease
//! the same delivery; a lease that runs out (its replica died mid-delivery) makes the delivery
//! claimable again. A settlement is fenced by the lease's token: a worker whose lease was taken
//! over writes nothing.

use super::{json_rows, DELIVERIES};
use crate::store::{
    ms, non_negative,
    sql::{self, Dialect},
    ts, Store, StoreError, Tx,
};
use chrono::{DateTime, Utc};
use policy::notify::DeliveryStatus;

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
        Ok(due.map(crate::store::from_ms))
    }

    /// Deliveries by status, for `/metrics` (pending and dead).
    pub async fn delivery_counts(&self) -> Result<(u64, u64), StoreError> {
        let row = sql::query(DELIVERY_COUNTS).fetch_one(&self.pool).await?;
        let pending = non_negative(DELIVERIES, "*", "pending", row.try_get("pending")?)?;
        let dead = non_negative(DELIVERIES, "*", "dead", row.try_get("dead")?)?;
        Ok((pending, dead))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's plans for the worker's statements on a migrated database: every scan of
    /// `notify_deliveries` goes through a partial index of the rows still to act on (a scan of
    /// the whole table reads every delivery ever made), and nothing is sorted (the claim reads
    /// the pending rows in event order and stops at its limit; sorting them first reads the
    /// whole backlog at every claim).
    #[tokio::test]
    async fn the_workers_statements_never_read_settled_deliveries() {
        let dir = tempfile::tempdir().unwrap();
        let statements: [(&str, String, usize); 5] = [
            ("claim", claim_sql(Dialect::Sqlite), 5),
            ("counts", DELIVERY_COUNTS.to_owned(), 0),
            ("next due", NEXT_DUE.to_owned(), 0),
            ("settle", SETTLE_FROM_JSON.to_owned(), 1),
            ("bodies", bodies_sql(Dialect::Sqlite), 1),
        ];
        for (what, sql, values) in statements {
            let plan = super::super::sqlite_plan(&dir, &sql, values).await;
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
