//! The history table read as an event log after a cursor, never skipping a row (PostgreSQL only).
//!
//! Why: with several replicas on one database, a browser connected to replica A must see what
//! replica B commits. Every accepted change already writes one `route_history` row in the
//! transaction that makes it, so the history table is the log; each replica's engine reads it
//! (`engine::events`) and fans the rows out to its own live pages.
//!
//! The hard part is order. Rows become visible in commit order, not in the order their
//! transactions started or their keys sort: a transaction T1 that began first can commit after
//! T2, so a reader that remembered "the last row I saw" by any key assigned at insert time
//! could pass T1's row before it is visible and never come back for it. So each row records the
//! writing transaction's id (`xact_id`, PostgreSQL's 64-bit `pg_current_xact_id()`, migration
//! `20261203090000_add_history_xact`), and a read delivers only rows whose transaction is below
//! the **horizon**: the xmin of the reading statement's own snapshot
//! (`pg_snapshot_xmin(pg_current_snapshot())`), the lowest transaction id still running when
//! the snapshot was taken. Every transaction below it has finished (committed, and so visible
//! to that same snapshot, or rolled back), and every transaction that starts later gets an id
//! at or above the snapshot's xmax, so no row with an `xact_id` below the horizon can ever
//! appear after the read. Rows at or above the horizon wait for a later read.
//!
//! Delivered rows are ordered by `(xact_id, route_id, seq)` (unique: `(route_id, seq)` is the
//! key) and the [`EventCursor`] is the last one delivered; the next read takes the rows after
//! it, below its own horizon. Hence no committed row is ever skipped (it is below some later
//! horizon, and above the cursor until delivered) and none is delivered twice (the cursor only
//! moves forward past what was delivered). A read is bounded ([`Store::events_after`]'s
//! `limit`); a full batch means more may be waiting below the same horizon.
//!
//! That order is the same for every reader, and within one writer it is the commit order (its
//! transactions run one after another). Across writers it is the order in which transactions
//! took their ids: a transaction that took its id first but committed last is delivered
//! first, once the horizon passes it. So if two writers' transactions both moved one route,
//! the route's later row (higher `seq` and generation) can come first. Each event carries its
//! generation and the route's current snapshot (below), and live pages only reload the route
//! an event names, so they still end up showing the latest state.
//!
//! The horizon is the whole PostgreSQL cluster's: a long transaction that holds a transaction
//! id anywhere on the server (even in another database) holds every event back until it ends.
//! Events are late then, never lost.
//!
//! Each event carries the route's snapshot from the route's CURRENT row, joined in the same
//! statement: the route's state when the event was read. For the route's latest change that
//! is the state the change made; for an earlier row (a transaction that moved the route more
//! than once, or a reader catching up) it is a later state than the transition's. Live pages
//! only show the newest state, so this is what they want.

use super::sql;
use super::{json, non_negative, parse_ts, Store, StoreError};
use policy::{
    route::{EventKind, RouteState, StateName},
    wire::{Decision, RouteEventPayload},
};

const TABLE: &str = "route_history";

/// The channel a writer's commit notifies when it wrote history: a wake-up for every replica's
/// reader, without a payload (the rows are in the table).
pub const CHANNEL: &str = "recourse_history";

/// What the writer sends instead of `COMMIT` when its transaction wrote history (see
/// `Tx::commit`).
pub(super) const NOTIFY_AND_COMMIT: &str = "NOTIFY recourse_history; COMMIT";

/// Where a reader of the event log stands: the last row delivered, in commit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCursor {
    /// The delivered row's transaction id (`xid8`).
    pub xact_id: u64,
    pub route_id: String,
    pub seq: i64,
}

impl EventCursor {
    /// A cursor before every row of transactions at or above `horizon` (the empty route id
    /// sorts before every route id).
    pub fn at_horizon(horizon: u64) -> EventCursor {
        EventCursor {
            xact_id: horizon,
            route_id: String::new(),
            seq: 0,
        }
    }
}

/// One history row as an event: the route and the payload live pages receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    pub route_id: String,
    pub payload: RouteEventPayload,
}

/// What one read of the log returned.
#[derive(Debug, Clone)]
pub struct EventBatch {
    /// The rows after the cursor and below the horizon, in commit order.
    pub events: Vec<LoggedEvent>,
    /// The last row delivered (the cursor given when there was none).
    pub cursor: EventCursor,
    /// The horizon of this read: every transaction below it had finished.
    pub horizon: u64,
    /// Whether the read hit its limit (more rows may wait below the same horizon).
    pub full: bool,
}

impl Store {
    /// The horizon now: the lowest transaction id still running on the server (PostgreSQL).
    /// A reader that starts from [`EventCursor::at_horizon`] of it sees every row committed
    /// from now on, and perhaps a few committed just before (above the horizon already).
    pub async fn event_horizon(&self) -> Result<u64, StoreError> {
        let h: String = sql::query("SELECT CAST(pg_snapshot_xmin(pg_current_snapshot()) AS text)")
            .scalar(&self.pool)
            .await?;
        parse_xid("horizon", &h)
    }

    /// The next transaction id to be handed out (PostgreSQL): every transaction that has
    /// committed by now is below it, so once a read's horizon reaches it, the reader has seen
    /// all of them.
    pub async fn next_xact_id(&self) -> Result<u64, StoreError> {
        let x: String = sql::query("SELECT CAST(pg_snapshot_xmax(pg_current_snapshot()) AS text)")
            .scalar(&self.pool)
            .await?;
        parse_xid("next transaction id", &x)
    }

    /// Up to `limit` history rows after `cursor` whose transactions are below this read's
    /// horizon, in commit order, each with its route's current snapshot (PostgreSQL). One
    /// statement, so the horizon and what is visible come from one snapshot.
    pub async fn events_after(&self, cursor: &EventCursor, limit: u32) -> Result<EventBatch, StoreError> {
        let rows = sql::query(
            "SELECT CAST(h.horizon AS text) AS horizon, CAST(e.xact_id AS text) AS xact, e.route_id, e.seq, \
             e.at, e.event, e.from_state, e.to_state, e.generation, e.decision_json, e.state_json \
             FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon) h \
             LEFT JOIN LATERAL ( \
               SELECT rh.xact_id, rh.route_id, rh.seq, rh.at, rh.event, rh.from_state, rh.to_state, \
                      rh.generation, rh.decision_json, r.state_json \
               FROM route_history rh JOIN routes r ON r.id = rh.route_id \
               WHERE rh.xact_id < h.horizon \
                 AND (rh.xact_id, rh.route_id, rh.seq) > (CAST(? AS xid8), ?, ?) \
               ORDER BY rh.xact_id, rh.route_id, rh.seq \
               LIMIT ? \
             ) e ON true \
             ORDER BY e.xact_id, e.route_id, e.seq",
        )
        .bind(cursor.xact_id.to_string())
        .bind(&cursor.route_id)
        .bind(cursor.seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut horizon = None;
        let mut events = Vec::with_capacity(rows.len());
        let mut last = cursor.clone();
        for row in &rows {
            if horizon.is_none() {
                horizon = Some(parse_xid("horizon", &row.try_get::<String, _>("horizon")?)?);
            }
            // The one row of an empty read has no history columns.
            let Some(xact) = row.try_get::<Option<String>, _>("xact")? else {
                continue;
            };
            let route_id: String = row.try_get("route_id")?;
            let seq: i64 = row.try_get("seq")?;
            let key = format!("{route_id}#{seq}");
            let state = |s: &str| {
                StateName::parse(s)
                    .ok_or_else(|| StoreError::corrupt(TABLE, &key, format!("unknown state `{s}`")))
            };
            let event: String = row.try_get("event")?;
            let event: EventKind = json(TABLE, &key, "event", &format!("\"{event}\""))?;
            let from: Option<String> = row.try_get("from_state")?;
            let decision: Option<String> = row.try_get("decision_json")?;
            let current: RouteState = json(
                "routes",
                &route_id,
                "route state",
                &row.try_get::<String, _>("state_json")?,
            )?;
            let payload = RouteEventPayload {
                event,
                from: from.as_deref().map(state).transpose()?,
                to: state(&row.try_get::<String, _>("to_state")?)?,
                generation: non_negative(TABLE, &key, "generation", row.try_get::<i64, _>("generation")?)?,
                at: parse_ts(TABLE, &key, &row.try_get::<String, _>("at")?)?,
                decision: decision
                    .as_deref()
                    .map(|d| json::<Decision>(TABLE, &key, "decision", d))
                    .transpose()?,
                snapshot: current.snapshot(),
            };
            last = EventCursor {
                xact_id: parse_xid("xact_id", &xact)?,
                route_id: route_id.clone(),
                seq,
            };
            events.push(LoggedEvent { route_id, payload });
        }
        let horizon =
            horizon.ok_or_else(|| StoreError::corrupt(TABLE, "-", "the read returned no horizon"))?;
        Ok(EventBatch {
            full: events.len() >= usize::try_from(limit).unwrap_or(usize::MAX),
            events,
            cursor: last,
            horizon,
        })
    }
}

fn parse_xid(what: &str, s: &str) -> Result<u64, StoreError> {
    s.parse()
        .map_err(|_| StoreError::corrupt(TABLE, "-", format!("{what} `{s}` is not a transaction id")))
}
