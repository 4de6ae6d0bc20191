//! SQL for the route engine's tables, and the row <-> wire conversions. Only this module and
//! [`crate::engine`] write SQL; handlers go through the engine or the profile service.
//!
//! Times people read are RFC 3339 UTC text with milliseconds (fixed width, so they also sort);
//! times the engine orders by are integer Unix milliseconds.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use policy::{
    api::{
        Caller, CallerKind, CandidateTarget, DispatchOutcome, DispatchRecord, DispatchStatus, DispatcherKind,
        HistoryEntry, Profile, ProfileSummary, RouteSummary,
    },
    route::{AttemptKind, EventKind, RouteState, StateName},
    wire::PolicyDocument,
};
use serde::de::DeserializeOwned;
use sqlx::{sqlite::SqliteRow, Row, SqliteConnection};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a stored row could not be read back. Storage errors are `sqlx::Error`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("[ST1001] storage: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("[ST1002] corrupt stored {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
}

pub(crate) fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt {
            what: "timestamp",
            detail: format!("{s}: {e}"),
        })
}

pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

pub(crate) fn json<T: DeserializeOwned>(what: &'static str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt {
        what,
        detail: e.to_string(),
    })
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serializing our own wire types to a string cannot fail (no maps with non-string keys).
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

static ID_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new unique id: time, process and a counter (no RNG needed; ids are not secrets).
pub(crate) fn new_id(prefix: &str, now: DateTime<Utc>) -> String {
    let n = ID_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}-{:x}{:04x}{:x}",
        now.timestamp_micros(),
        std::process::id() & 0xffff,
        n
    )
}

// ------------------------------------------------------------------------------------------------
// Writes sent together
// ------------------------------------------------------------------------------------------------

/// A value bound to a `?` of a [`Writes`] batch.
enum Bind {
    Text(Option<String>),
    Int(Option<i64>),
}

/// Several write statements sent to SQLite as ONE multi-statement query. sqlx runs every
/// statement of a connection on that connection's own thread and sends each statement's
/// result back across threads, so the number of statements, not SQLite's work, is most of a
/// step's cost (and on a busy machine each hand-off waits for a core).
///
/// So the writes that only set a row's final value collapse per row before they are sent: a
/// route's row (one insert, or one compare-and-set from the generation this transaction
/// first saw to the last state it wrote), a new dispatch record (inserted with the status its
/// later steps gave it), and a route's timer row (the last upsert or delete). The other
/// statements (history rows, updates of older dispatch records, circuits) run as queued.
/// Order when run: route inserts, compare-and-sets, the queued statements, new dispatch
/// records, timer rows, then the release of held dispatches: each only depends on the routes
/// existing, and the release must see every hold the batch arms. Statements use plain `?`
/// only: sqlx binds them in order across the statements.
#[derive(Default)]
pub(crate) struct Writes {
    sql: String,
    binds: Vec<Bind>,
    /// New routes, in order.
    inserts: Vec<RouteRow>,
    /// Compare-and-sets by route: (id, expected generation, last state, its time).
    cas: Vec<(String, u64, RouteState, DateTime<Utc>)>,
    /// New dispatch records, with the status later steps in this batch gave them.
    dispatches: Vec<NewDispatch>,
    /// Each route's last timer write.
    timers: Vec<(String, TimerWrite)>,
    /// Make every held dispatch due at this time, after everything else (see
    /// [`Writes::release_holds`]).
    release_holds_at: Option<DateTime<Utc>>,
}

/// Makes every held dispatch (`circuit_hold` timer) due at `?`.
pub(crate) const RELEASE_HOLDS_SQL: &str = "UPDATE timers SET due_ms = ? WHERE kind = 'circuit_hold'";

/// `Some((kind, generation, due_ms))` upserts the route's timer row, `None` deletes it.
type TimerWrite = Option<(&'static str, u64, i64)>;

/// A dispatch record inserted by this batch.
struct NewDispatch {
    route_id: String,
    attempt: u32,
    candidate_id: String,
    kind: AttemptKind,
    dispatcher: DispatcherKind,
    generation: u64,
    scheduled_at: DateTime<Utc>,
    /// `(invocation generation, when)` once started.
    started: Option<(u64, DateTime<Utc>)>,
    /// `(outcome, when)` once settled.
    settled: Option<(DispatchOutcome, DateTime<Utc>)>,
}

impl Writes {
    fn push(&mut self, sql: &str, binds: impl IntoIterator<Item = Bind>) {
        self.sql.push_str(sql);
        self.sql.push_str(";\n");
        self.binds.extend(binds);
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.sql.is_empty()
            && self.inserts.is_empty()
            && self.cas.is_empty()
            && self.dispatches.is_empty()
            && self.timers.is_empty()
            && self.release_holds_at.is_none()
    }

    /// Compare-and-sets that will run (each must return its tagged row).
    pub(crate) fn cas_count(&self) -> usize {
        self.cas.len()
    }

    /// Runs them; returns what the statements with `RETURNING` reported.
    pub(crate) async fn run(mut self, conn: &mut SqliteConnection) -> Result<Returned, sqlx::Error> {
        let mut out = Returned::default();
        if self.is_empty() {
            return Ok(out);
        }
        let mut all = Writes::default();
        for route in std::mem::take(&mut self.inserts) {
            all.push_insert_route(&route);
        }
        for (id, expected, next, now) in std::mem::take(&mut self.cas) {
            all.push_cas(&id, expected, &next, now);
        }
        all.sql.push_str(&self.sql);
        all.binds.append(&mut self.binds);
        for d in std::mem::take(&mut self.dispatches) {
            all.push_dispatch(&d);
        }
        for (route_id, op) in std::mem::take(&mut self.timers) {
            match op {
                Some((kind, generation, due)) => all.push(
                    "INSERT INTO timers (route_id, kind, generation, due_ms) VALUES (?, ?, ?, ?) \
                     ON CONFLICT(route_id) DO UPDATE SET kind = excluded.kind, generation = excluded.generation, \
                     due_ms = excluded.due_ms",
                    [text(&route_id), text(kind), int(gen_i64(generation)), int(due)],
                ),
                None => all.push("DELETE FROM timers WHERE route_id = ?", [text(&route_id)]),
            }
        }
        if let Some(at) = self.release_holds_at {
            all.push(RELEASE_HOLDS_SQL, [int(ms(at))]);
        }
        let mut q = sqlx::query(&all.sql);
        for b in all.binds {
            q = match b {
                Bind::Text(t) => q.bind(t),
                Bind::Int(i) => q.bind(i),
            };
        }
        for row in q.fetch_all(&mut *conn).await? {
            match row.try_get::<&str, _>(0)? {
                CAS_TAG => out.cas_won += 1,
                LEASE_TAG => out.leases_released += 1,
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The row a won compare-and-set returns, and the one a released probe lease returns.
const CAS_TAG: &str = "#cas";
const LEASE_TAG: &str = "#lease";

/// What the `RETURNING` statements of a [`Writes`] batch reported.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Returned {
    /// Compare-and-sets on a route's generation that won.
    pub(crate) cas_won: usize,
    /// Probe leases given back.
    pub(crate) leases_released: usize,
}

fn text(s: &str) -> Bind {
    Bind::Text(Some(s.to_owned()))
}

fn int(i: i64) -> Bind {
    Bind::Int(Some(i))
}

// ------------------------------------------------------------------------------------------------
// Routes
// ------------------------------------------------------------------------------------------------

/// A route row as the engine needs it.
#[derive(Debug, Clone)]
pub(crate) struct RouteRow {
    pub(crate) id: String,
    pub(crate) profile_id: String,
    pub(crate) caller: Caller,
    pub(crate) title: Option<String>,
    pub(crate) state: RouteState,
    pub(crate) durable_error: Option<String>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

const ROUTE_COLUMNS: &str =
    "r.id, r.profile_id, r.caller_kind, r.caller_reference, r.invocation_id, r.title, \
     r.state_json, r.durable_error, r.created_at, r.updated_at";

fn route_row(row: &SqliteRow) -> Result<RouteRow, StoreError> {
    let kind: String = row.try_get("caller_kind")?;
    let kind = CallerKind::parse(&kind).ok_or_else(|| StoreError::Corrupt {
        what: "caller kind",
        detail: kind.clone(),
    })?;
    Ok(RouteRow {
        id: row.try_get("id")?,
        profile_id: row.try_get("profile_id")?,
        caller: Caller {
            kind,
            reference: row.try_get("caller_reference")?,
            invocation_id: row.try_get("invocation_id")?,
        },
        title: row.try_get("title")?,
        state: json("route state", row.try_get::<&str, _>("state_json")?)?,
        durable_error: row.try_get("durable_error")?,
        created_at: parse_ts(row.try_get::<&str, _>("created_at")?)?,
        updated_at: parse_ts(row.try_get::<&str, _>("updated_at")?)?,
    })
}

pub(crate) async fn load_route(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<Option<RouteRow>, StoreError> {
    let sql = format!("SELECT {ROUTE_COLUMNS} FROM routes r WHERE r.id = ?");
    let row = sqlx::query(&sql).bind(id).fetch_optional(&mut *conn).await?;
    row.as_ref().map(route_row).transpose()
}

/// Routes and their profiles, by route id, with one statement: the writer reads every
/// route of a group commit at once (each step needs its route and its profile). Missing ids
/// are simply absent.
pub(crate) async fn load_routes_and_profiles(
    conn: &mut SqliteConnection,
    ids: &[&str],
) -> Result<Vec<(String, (RouteRow, Option<ProfileRow>))>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!(
        "SELECT {ROUTE_COLUMNS}, p.id AS p_id, p.name AS p_name, \
         p.description AS p_description, p.revision AS p_revision, p.candidates_json AS p_candidates_json, \
         p.policy_json AS p_policy_json, p.normalized_from_legacy AS p_normalized_from_legacy, \
         p.created_at AS p_created_at, p.updated_at AS p_updated_at \
         FROM routes r LEFT JOIN profiles p ON p.id = r.profile_id WHERE r.id IN ({marks})"
    );
    let mut q = sqlx::query(&sql);
    for id in ids {
        q = q.bind(*id);
    }
    let rows = q.fetch_all(&mut *conn).await?;
    // One profile is shared by many routes: decode each (id, revision) once.
    let mut profiles: std::collections::HashMap<(String, i64), ProfileRow> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let route = route_row(row)?;
        let profile = match row.try_get::<Option<String>, _>("p_id")? {
            Some(pid) => {
                let key = (pid, row.try_get::<i64, _>("p_revision")?);
                if let Some(p) = profiles.get(&key) {
                    Some(p.clone())
                } else {
                    let p = profile_row(row, &JOINED_PROFILE)?;
                    profiles.insert(key, p.clone());
                    Some(p)
                }
            }
            None => None,
        };
        out.push((route.id.clone(), (route, profile)));
    }
    Ok(out)
}

impl Writes {
    /// A new route's row.
    pub(crate) fn insert_route(&mut self, route: &RouteRow) {
        self.inserts.push(route.clone());
    }

    fn push_insert_route(&mut self, route: &RouteRow) {
        let s = &route.state;
        self.push(
            "INSERT INTO routes (id, profile_id, caller_kind, caller_reference, invocation_id, title, state, \
             generation, candidate_id, deadline_ms, state_json, durable_error, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
            [
                text(&route.id),
                text(&route.profile_id),
                text(route.caller.kind.as_str()),
                text(&route.caller.reference),
                text(&route.caller.invocation_id),
                Bind::Text(route.title.clone()),
                text(s.state_name().as_str()),
                int(gen_i64(s.generation())),
                text(&s.candidate().id),
                Bind::Int(s.deadline().map(ms)),
                Bind::Text(Some(to_json(s))),
                Bind::Text(Some(ts(route.created_at))),
                Bind::Text(Some(ts(route.updated_at))),
            ],
        );
    }

    /// The compare-and-set: writes `next` only if the stored generation is still `expected`.
    /// A later one on the same route in this batch (expecting the generation this one writes)
    /// only replaces the state written, so one statement fences the lot; on a route this
    /// batch inserts, the insert writes the last state. A win returns one tagged row
    /// ([`Returned::cas_won`]); the caller counts them against [`Writes::cas_count`].
    pub(crate) fn cas_route(&mut self, id: &str, expected: u64, next: &RouteState, now: DateTime<Utc>) {
        if let Some(route) = self.inserts.iter_mut().find(|r| r.id == id) {
            if route.state.generation() == expected {
                route.state = next.clone();
                route.updated_at = now;
                return;
            }
        }
        if let Some(cas) = self.cas.iter_mut().find(|c| c.0 == id) {
            if cas.2.generation() == expected {
                cas.2 = next.clone();
                cas.3 = now;
                return;
            }
        }
        self.cas.push((id.to_owned(), expected, next.clone(), now));
    }

    fn push_cas(&mut self, id: &str, expected: u64, next: &RouteState, now: DateTime<Utc>) {
        self.push(
            "UPDATE routes SET state = ?, generation = ?, candidate_id = ?, deadline_ms = ?, state_json = ?, \
             durable_error = NULL, updated_at = ? WHERE id = ? AND generation = ? RETURNING '#cas'",
            [
                text(next.state_name().as_str()),
                int(gen_i64(next.generation())),
                text(&next.candidate().id),
                Bind::Int(next.deadline().map(ms)),
                Bind::Text(Some(to_json(next))),
                Bind::Text(Some(ts(now))),
                text(id),
                int(gen_i64(expected)),
            ],
        );
    }

    /// Makes every held dispatch due now, for a re-check (a circuit opened or closed, or a
    /// probe lease came back).
    /// Runs last, so it also releases holds this batch arms.
    pub(crate) fn release_holds(&mut self, now: DateTime<Utc>) {
        self.release_holds_at = Some(now);
    }
}

pub(crate) fn gen_i64(g: u64) -> i64 {
    i64::try_from(g).unwrap_or(i64::MAX)
}

pub(crate) struct HistoryInsert<'a> {
    pub(crate) route_id: &'a str,
    pub(crate) at: DateTime<Utc>,
    pub(crate) event: EventKind,
    pub(crate) from: Option<StateName>,
    pub(crate) next: &'a RouteState,
    pub(crate) profile_revision: u64,
    pub(crate) decision_json: Option<String>,
    pub(crate) classification_json: Option<String>,
}

impl Writes {
    pub(crate) fn history(&mut self, h: HistoryInsert<'_>) {
        self.push(
            "INSERT INTO route_history (route_id, seq, at, event, from_state, to_state, generation, candidate_id, \
             attempt, profile_revision, decision_json, classification_json) \
             VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM route_history WHERE route_id = ?), \
             ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                text(h.route_id),
                text(h.route_id),
                Bind::Text(Some(ts(h.at))),
                text(h.event.as_str()),
                Bind::Text(h.from.map(|f| f.as_str().to_owned())),
                text(h.next.state_name().as_str()),
                int(gen_i64(h.next.generation())),
                text(&h.next.candidate().id),
                Bind::Int(h.next.attempt().map(|a| i64::from(a.number))),
                int(gen_i64(h.profile_revision)),
                Bind::Text(h.decision_json),
                Bind::Text(h.classification_json),
            ],
        );
    }

    pub(crate) fn insert_dispatch(&mut self, d: DispatchInsert<'_>) {
        self.dispatches.push(NewDispatch {
            route_id: d.route_id.to_owned(),
            attempt: d.attempt,
            candidate_id: d.candidate_id.to_owned(),
            kind: d.kind,
            dispatcher: d.dispatcher,
            generation: d.generation,
            scheduled_at: d.at,
            started: None,
            settled: None,
        });
    }

    fn new_dispatch(&mut self, route_id: &str, attempt: u32) -> Option<&mut NewDispatch> {
        self.dispatches
            .iter_mut()
            .find(|d| d.route_id == route_id && d.attempt == attempt)
    }

    fn push_dispatch(&mut self, d: &NewDispatch) {
        let status = match (d.started, d.settled) {
            (_, Some(_)) => "settled",
            (Some(_), None) => "started",
            (None, None) => "scheduled",
        };
        self.push(
            "INSERT INTO dispatches (route_id, attempt, candidate_id, kind, dispatcher, scheduled_generation, \
             status, scheduled_at, invocation_generation, started_at, outcome, settled_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                text(&d.route_id),
                int(i64::from(d.attempt)),
                text(&d.candidate_id),
                text(attempt_kind_str(d.kind)),
                text(d.dispatcher.as_str()),
                int(gen_i64(d.generation)),
                text(status),
                Bind::Text(Some(ts(d.scheduled_at))),
                Bind::Int(d.started.map(|(g, _)| gen_i64(g))),
                Bind::Text(d.started.map(|(_, at)| ts(at))),
                Bind::Text(d.settled.map(|(o, _)| outcome_str(o).to_owned())),
                Bind::Text(d.settled.map(|(_, at)| ts(at))),
            ],
        );
    }

    pub(crate) fn mark_dispatch_started(
        &mut self,
        route_id: &str,
        attempt: u32,
        invocation_generation: u64,
        at: DateTime<Utc>,
    ) {
        if let Some(d) = self.new_dispatch(route_id, attempt) {
            if d.started.is_none() && d.settled.is_none() {
                d.started = Some((invocation_generation, at));
            }
            return;
        }
        self.push(
            "UPDATE dispatches SET status = 'started', invocation_generation = ?, started_at = ? \
             WHERE route_id = ? AND attempt = ? AND status = 'scheduled'",
            [
                int(gen_i64(invocation_generation)),
                Bind::Text(Some(ts(at))),
                text(route_id),
                int(i64::from(attempt)),
            ],
        );
    }

    pub(crate) fn settle_dispatch(
        &mut self,
        route_id: &str,
        attempt: u32,
        outcome: DispatchOutcome,
        at: DateTime<Utc>,
    ) {
        if let Some(d) = self.new_dispatch(route_id, attempt) {
            if d.settled.is_none() {
                d.settled = Some((outcome, at));
            }
            return;
        }
        self.push(
            "UPDATE dispatches SET status = 'settled', outcome = ?, settled_at = ? \
             WHERE route_id = ? AND attempt = ? AND status <> 'settled'",
            [
                text(outcome_str(outcome)),
                Bind::Text(Some(ts(at))),
                text(route_id),
                int(i64::from(attempt)),
            ],
        );
    }

    /// Arms (or re-arms) the route's one timer.
    pub(crate) fn upsert_timer(&mut self, route_id: &str, kind: &'static str, generation: u64, due_ms: i64) {
        self.timer(route_id, Some((kind, generation, due_ms)));
    }

    pub(crate) fn delete_timer(&mut self, route_id: &str) {
        self.timer(route_id, None);
    }

    /// The route's last timer write wins.
    fn timer(&mut self, route_id: &str, op: TimerWrite) {
        match self.timers.iter_mut().find(|t| t.0 == route_id) {
            Some(t) => t.1 = op,
            None => self.timers.push((route_id.to_owned(), op)),
        }
    }

    /// Gives back every probe lease the route holds; each one given back returns a tagged row
    /// ([`Returned::leases_released`]).
    pub(crate) fn release_probe_leases(&mut self, route_id: &str, now: DateTime<Utc>) {
        self.push(
            "UPDATE circuits SET state = 'open', probe_route_id = NULL, updated_at = ? \
             WHERE probe_route_id = ? AND state = 'probing' RETURNING '#lease'",
            [Bind::Text(Some(ts(now))), text(route_id)],
        );
    }
}

pub(crate) async fn load_history(
    conn: &mut SqliteConnection,
    route_id: &str,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, at, event, from_state, to_state, generation, candidate_id, attempt, profile_revision, \
         decision_json, classification_json FROM route_history WHERE route_id = ? ORDER BY seq",
    )
    .bind(route_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let from: Option<String> = row.try_get("from_state")?;
            let decision: Option<String> = row.try_get("decision_json")?;
            let classification: Option<String> = row.try_get("classification_json")?;
            Ok(HistoryEntry {
                seq: u64::try_from(row.try_get::<i64, _>("seq")?).unwrap_or(0),
                at: parse_ts(row.try_get::<&str, _>("at")?)?,
                event: json("event", &format!("\"{}\"", row.try_get::<&str, _>("event")?))?,
                from: from.as_deref().map(state_name).transpose()?,
                to: state_name(row.try_get::<&str, _>("to_state")?)?,
                generation: u64::try_from(row.try_get::<i64, _>("generation")?).unwrap_or(0),
                candidate_id: row.try_get("candidate_id")?,
                attempt: row
                    .try_get::<Option<i64>, _>("attempt")?
                    .and_then(|a| u32::try_from(a).ok()),
                profile_revision: u64::try_from(row.try_get::<i64, _>("profile_revision")?).unwrap_or(0),
                decision: decision.as_deref().map(|d| json("decision", d)).transpose()?,
                classification: classification
                    .as_deref()
                    .map(|c| json("classification", c))
                    .transpose()?,
            })
        })
        .collect()
}

pub(crate) fn state_name(s: &str) -> Result<StateName, StoreError> {
    StateName::parse(s).ok_or_else(|| StoreError::Corrupt {
        what: "state name",
        detail: s.to_owned(),
    })
}

pub(crate) fn summary_of(route: &RouteRow, profile_name: String) -> RouteSummary {
    RouteSummary {
        id: route.id.clone(),
        profile_id: route.profile_id.clone(),
        profile_name,
        caller: route.caller.clone(),
        title: route.title.clone(),
        snapshot: route.state.snapshot(),
        durable_error: route.durable_error.clone(),
        created_at: route.created_at,
        updated_at: route.updated_at,
    }
}

pub(crate) async fn list_routes(
    conn: &mut SqliteConnection,
    filter: &policy::api::RouteFilter,
) -> Result<Vec<RouteSummary>, StoreError> {
    let mut sql = format!(
        "SELECT {ROUTE_COLUMNS}, p.name AS profile_name FROM routes r JOIN profiles p ON p.id = r.profile_id \
         WHERE 1 = 1"
    );
    if filter.caller_kind.is_some() {
        sql.push_str(" AND r.caller_kind = ?");
    }
    if filter.caller_reference.is_some() {
        sql.push_str(" AND r.caller_reference = ?");
    }
    if filter.state.is_some() {
        sql.push_str(" AND r.state = ?");
    }
    if filter.open_only {
        let finished: Vec<String> = StateName::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        sql.push_str(&format!(" AND r.state NOT IN ({})", finished.join(", ")));
    }
    if filter.profile_id.is_some() {
        sql.push_str(" AND r.profile_id = ?");
    }
    sql.push_str(" ORDER BY r.updated_at DESC, r.id LIMIT ?");
    let mut q = sqlx::query(&sql);
    if let Some(k) = filter.caller_kind {
        q = q.bind(k.as_str());
    }
    if let Some(r) = &filter.caller_reference {
        q = q.bind(r);
    }
    if let Some(s) = filter.state {
        q = q.bind(s.as_str());
    }
    if let Some(p) = &filter.profile_id {
        q = q.bind(p);
    }
    let limit = filter.limit.unwrap_or(100).clamp(1, 1000);
    let rows = q.bind(i64::from(limit)).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|row| {
            let route = route_row(row)?;
            Ok(summary_of(&route, row.try_get("profile_name")?))
        })
        .collect()
}

// ------------------------------------------------------------------------------------------------
// Dispatch records
// ------------------------------------------------------------------------------------------------

pub(crate) struct DispatchInsert<'a> {
    pub(crate) route_id: &'a str,
    pub(crate) attempt: u32,
    pub(crate) candidate_id: &'a str,
    pub(crate) kind: AttemptKind,
    pub(crate) dispatcher: DispatcherKind,
    pub(crate) generation: u64,
    pub(crate) at: DateTime<Utc>,
}

fn attempt_kind_str(k: AttemptKind) -> &'static str {
    match k {
        AttemptKind::Initial => "initial",
        AttemptKind::Retry => "retry",
        AttemptKind::PostWait => "post_wait",
        AttemptKind::Switch => "switch",
        AttemptKind::Manual => "manual",
    }
}

fn outcome_str(o: DispatchOutcome) -> &'static str {
    match o {
        DispatchOutcome::Succeeded => "succeeded",
        DispatchOutcome::Failed => "failed",
        DispatchOutcome::Aborted => "aborted",
        DispatchOutcome::Superseded => "superseded",
        DispatchOutcome::Ambiguous => "ambiguous",
    }
}

pub(crate) async fn load_dispatches(
    conn: &mut SqliteConnection,
    route_id: &str,
) -> Result<Vec<DispatchRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT attempt, candidate_id, kind, dispatcher, scheduled_generation, invocation_generation, status, \
         outcome, scheduled_at, started_at, settled_at FROM dispatches WHERE route_id = ? ORDER BY attempt",
    )
    .bind(route_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let word = |col: &str| -> Result<String, StoreError> { Ok(row.try_get::<String, _>(col)?) };
            let opt_ts = |col: &str| -> Result<Option<DateTime<Utc>>, StoreError> {
                row.try_get::<Option<String>, _>(col)?
                    .as_deref()
                    .map(parse_ts)
                    .transpose()
            };
            let outcome: Option<String> = row.try_get("outcome")?;
            Ok(DispatchRecord {
                attempt: u32::try_from(row.try_get::<i64, _>("attempt")?).unwrap_or(0),
                candidate_id: word("candidate_id")?,
                kind: json("attempt kind", &format!("\"{}\"", word("kind")?))?,
                dispatcher: DispatcherKind::parse(&word("dispatcher")?).unwrap_or(DispatcherKind::External),
                scheduled_generation: u64::try_from(row.try_get::<i64, _>("scheduled_generation")?)
                    .unwrap_or(0),
                invocation_generation: row
                    .try_get::<Option<i64>, _>("invocation_generation")?
                    .and_then(|g| u64::try_from(g).ok()),
                status: json::<DispatchStatus>("dispatch status", &format!("\"{}\"", word("status")?))?,
                outcome: outcome
                    .map(|o| json::<DispatchOutcome>("dispatch outcome", &format!("\"{o}\"")))
                    .transpose()?,
                scheduled_at: parse_ts(&word("scheduled_at")?)?,
                started_at: opt_ts("started_at")?,
                settled_at: opt_ts("settled_at")?,
            })
        })
        .collect()
}

// ------------------------------------------------------------------------------------------------
// Profiles
// ------------------------------------------------------------------------------------------------

/// A profile as the engine reads it.
#[derive(Debug, Clone)]
pub(crate) struct ProfileRow {
    pub(crate) profile: Profile,
}

/// Column names of a profile in a result row (plain, or prefixed when joined to a route).
struct ProfileColumns {
    id: &'static str,
    name: &'static str,
    description: &'static str,
    revision: &'static str,
    candidates_json: &'static str,
    policy_json: &'static str,
    normalized_from_legacy: &'static str,
    created_at: &'static str,
    updated_at: &'static str,
}

const PLAIN_PROFILE: ProfileColumns = ProfileColumns {
    id: "id",
    name: "name",
    description: "description",
    revision: "revision",
    candidates_json: "candidates_json",
    policy_json: "policy_json",
    normalized_from_legacy: "normalized_from_legacy",
    created_at: "created_at",
    updated_at: "updated_at",
};

const JOINED_PROFILE: ProfileColumns = ProfileColumns {
    id: "p_id",
    name: "p_name",
    description: "p_description",
    revision: "p_revision",
    candidates_json: "p_candidates_json",
    policy_json: "p_policy_json",
    normalized_from_legacy: "p_normalized_from_legacy",
    created_at: "p_created_at",
    updated_at: "p_updated_at",
};

fn profile_row(row: &SqliteRow, c: &ProfileColumns) -> Result<ProfileRow, StoreError> {
    let policy: PolicyDocument = json("policy document", row.try_get::<&str, _>(c.policy_json)?)?;
    let targets: Vec<CandidateTarget> =
        json("candidate targets", row.try_get::<&str, _>(c.candidates_json)?)?;
    Ok(ProfileRow {
        profile: Profile {
            id: row.try_get(c.id)?,
            name: row.try_get(c.name)?,
            description: row.try_get(c.description)?,
            revision: u64::try_from(row.try_get::<i64, _>(c.revision)?).unwrap_or(0),
            targets,
            policy,
            normalized_from_legacy: row.try_get::<i64, _>(c.normalized_from_legacy)? != 0,
            created_at: parse_ts(row.try_get::<&str, _>(c.created_at)?)?,
            updated_at: parse_ts(row.try_get::<&str, _>(c.updated_at)?)?,
        },
    })
}

pub(crate) async fn load_profile(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<Option<ProfileRow>, StoreError> {
    let row = sqlx::query(
        "SELECT id, name, description, revision, candidates_json, policy_json, normalized_from_legacy, \
         created_at, updated_at FROM profiles WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(|r| profile_row(r, &PLAIN_PROFILE)).transpose()
}

pub(crate) async fn list_profiles(conn: &mut SqliteConnection) -> Result<Vec<ProfileSummary>, StoreError> {
    let rows = sqlx::query(
        "SELECT p.id, p.name, p.description, p.revision, p.candidates_json, p.updated_at, \
         (SELECT COUNT(*) FROM routes r WHERE r.profile_id = p.id AND r.state NOT IN ('completed', 'abandoned')) \
         AS open_routes, (SELECT COUNT(*) FROM routes r WHERE r.profile_id = p.id) AS routes \
         FROM profiles p ORDER BY p.name, p.id",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let targets: Vec<CandidateTarget> =
                json("candidate targets", row.try_get::<&str, _>("candidates_json")?)?;
            Ok(ProfileSummary {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                description: row.try_get("description")?,
                revision: u64::try_from(row.try_get::<i64, _>("revision")?).unwrap_or(0),
                candidate_ids: targets.into_iter().map(|t| t.id).collect(),
                open_routes: u64::try_from(row.try_get::<i64, _>("open_routes")?).unwrap_or(0),
                routes: u64::try_from(row.try_get::<i64, _>("routes")?).unwrap_or(0),
                updated_at: parse_ts(row.try_get::<&str, _>("updated_at")?)?,
            })
        })
        .collect()
}

pub(crate) async fn upsert_profile(conn: &mut SqliteConnection, p: &Profile) -> Result<(), sqlx::Error> {
    let targets = to_json(&p.targets);
    let policy = to_json(&p.policy);
    sqlx::query(
        "INSERT INTO profiles (id, name, description, revision, candidates_json, policy_json, \
         normalized_from_legacy, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, description = excluded.description, \
         revision = excluded.revision, candidates_json = excluded.candidates_json, \
         policy_json = excluded.policy_json, normalized_from_legacy = excluded.normalized_from_legacy, \
         updated_at = excluded.updated_at",
    )
    .bind(&p.id)
    .bind(&p.name)
    .bind(&p.description)
    .bind(gen_i64(p.revision))
    .bind(&targets)
    .bind(&policy)
    .bind(i64::from(p.normalized_from_legacy))
    .bind(ts(p.created_at))
    .bind(ts(p.updated_at))
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO profile_revisions (profile_id, revision, candidates_json, policy_json, created_at) \
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&p.id)
    .bind(gen_i64(p.revision))
    .bind(&targets)
    .bind(&policy)
    .bind(ts(p.updated_at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
