//! [`Writes`]: the writes of one or many steps, sent to SQLite as ONE multi-statement query.
//!
//! sqlx runs every statement of a connection on that connection's own thread and sends each
//! statement's result back across threads, so the number of statements, not SQLite's work, is
//! most of a step's cost (and on a busy machine each hand-off waits for a core).
//!
//! So the writes that only set a row's final value collapse per row before they are sent: a
//! route's row (one insert, or one compare-and-set from the generation this transaction first
//! saw to the last state it wrote), a new dispatch record (inserted with the status its later
//! steps gave it), and a route's timer row (the last upsert or delete). The other statements
//! (history rows, updates of older dispatch records, lease releases, launch records) run as
//! queued. Order when run: route inserts, compare-and-sets, the queued statements, notification
//! events and their deliveries (`store/notify/`), new dispatch records, timer rows, then the
//! release of held dispatches: each only depends on the routes
//! existing, and the release must see every hold the batch arms. Statements use plain `?`
//! only: sqlx binds them in order across the statements.

use super::{
    gen_i64, ms,
    routes::RouteRow,
    sql::{self, Bind, Dialect, Exec},
    timers::TimerKind,
    to_json, ts,
};
use chrono::{DateTime, Utc};
use policy::{
    api::{DispatchOutcome, DispatcherKind},
    route::{AttemptKind, EventKind, RouteState, StateName},
};

fn text(s: &str) -> Bind {
    Bind::Text(Some(s.to_owned()))
}

fn int(i: i64) -> Bind {
    Bind::Int(Some(i))
}

/// The writes of a transaction not sent yet.
#[derive(Default)]
pub(crate) struct Writes {
    /// The instance the routes this batch leaves in flight belong to (`routes.owner`; `None`:
    /// a process that is not a registered replica).
    owner: Option<String>,
    /// Queued statements with their values, in order.
    statements: Vec<(&'static str, Vec<Bind>)>,
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
    /// Whether a history row is among the statements.
    history: bool,
    /// Notification events with their deliveries, in order (`store/notify/`).
    pub(super) events: Vec<super::notify::NotifyInsert>,
}

/// Makes every held dispatch (`circuit_hold` timer) due at `?`.
pub(super) const RELEASE_HOLDS_SQL: &str = "UPDATE timers SET due_ms = ? WHERE kind = 'circuit_hold'";

/// A route's timer row: upserted with (kind, generation, due, payload), or deleted (`None`).
type TimerWrite = Option<(TimerKind, u64, i64, Option<String>)>;

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

/// The row a won compare-and-set returns, and the one a released probe lease returns.
const CAS_TAG: &str = "#cas";
const LEASE_TAG: &str = "#lease";

/// What the `RETURNING` statements of a batch reported.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Returned {
    /// Compare-and-sets on a route's generation that won.
    pub(crate) cas_won: usize,
    /// Probe leases given back.
    pub(crate) leases_released: usize,
}

/// A new history row.
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

/// A new dispatch record (scheduled).
pub(crate) struct DispatchInsert<'a> {
    pub(crate) route_id: &'a str,
    pub(crate) attempt: u32,
    pub(crate) candidate_id: &'a str,
    pub(crate) kind: AttemptKind,
    pub(crate) dispatcher: DispatcherKind,
    pub(crate) generation: u64,
    pub(crate) at: DateTime<Utc>,
}

/// The owner a route row gets: the committing instance while the route is in flight (an
/// attempt pending or running, or switching), nobody otherwise.
fn owner_of(owner: &Option<String>, state: &RouteState) -> Bind {
    let in_flight = super::replicas::in_flight(state.state_name());
    Bind::Text(owner.clone().filter(|_| in_flight))
}

impl Writes {
    /// An empty batch whose routes in flight will belong to `owner`.
    pub(crate) fn owned_by(owner: Option<String>) -> Writes {
        Writes {
            owner,
            ..Writes::default()
        }
    }

    /// An empty batch for the same owner (after this one is sent).
    pub(crate) fn successor(&self) -> Writes {
        Writes::owned_by(self.owner.clone())
    }

    /// A statement with its values, in the order of its `?`.
    pub(super) fn push_binds(&mut self, sql: &'static str, binds: Vec<Bind>) {
        self.push(sql, binds);
    }

    /// A statement whose `?` are all text.
    pub(super) fn push_text(&mut self, sql: &'static str, values: &[&str]) {
        self.push(sql, values.iter().map(|v| text(v)));
    }

    fn push(&mut self, sql: &'static str, binds: impl IntoIterator<Item = Bind>) {
        self.statements.push((sql, binds.into_iter().collect()));
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.statements.is_empty()
            && self.inserts.is_empty()
            && self.cas.is_empty()
            && self.dispatches.is_empty()
            && self.timers.is_empty()
            && self.release_holds_at.is_none()
            && self.events.is_empty()
    }

    /// Compare-and-sets that will run (each must return its tagged row).
    pub(crate) fn cas_count(&self) -> usize {
        self.cas.len()
    }

    /// A new route's row.
    pub(crate) fn insert_route(&mut self, route: &RouteRow) {
        self.inserts.push(route.clone());
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

    /// Makes the route this batch's owner's without changing it (an orphan taken up that had
    /// nothing to change), if it is still at `generation`.
    pub(crate) fn adopt(&mut self, route_id: &str, generation: u64) {
        let owner = self.owner.clone();
        self.push(
            "UPDATE routes SET owner = ? WHERE id = ? AND generation = ?",
            [Bind::Text(owner), text(route_id), int(gen_i64(generation))],
        );
    }

    /// Makes every held dispatch due now, for a re-check (a circuit opened or closed, or a
    /// probe lease came back). Runs last, so it also releases holds this batch arms.
    pub(crate) fn release_holds(&mut self, now: DateTime<Utc>) {
        self.release_holds_at = Some(now);
    }

    /// Whether a history row is among the writes.
    pub(crate) fn has_history(&self) -> bool {
        self.history
    }

    pub(crate) fn history(&mut self, h: HistoryInsert<'_>) {
        self.history = true;
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
                text(super::dispatches::outcome_str(outcome)),
                Bind::Text(Some(ts(at))),
                text(route_id),
                int(i64::from(attempt)),
            ],
        );
    }

    /// Arms (or re-arms) the route's one timer.
    pub(crate) fn upsert_timer(
        &mut self,
        route_id: &str,
        kind: TimerKind,
        generation: u64,
        due_ms: i64,
        payload: Option<String>,
    ) {
        self.timer(route_id, Some((kind, generation, due_ms, payload)));
    }

    pub(crate) fn delete_timer(&mut self, route_id: &str) {
        self.timer(route_id, None);
    }

    /// Removes the timer that fired for `generation`, unless the route re-armed it since (an
    /// upsert in this batch wins; a row of another generation stays).
    pub(crate) fn delete_fired_timer(&mut self, route_id: &str, kind: TimerKind, generation: u64) {
        if self.timers.iter().any(|t| t.0 == route_id) {
            return;
        }
        self.push(
            "DELETE FROM timers WHERE route_id = ? AND kind = ? AND generation = ?",
            [text(route_id), text(kind.as_str()), int(gen_i64(generation))],
        );
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

    /// What the simulated dispatcher launched (an audit row: tests count duplicates).
    pub(crate) fn simulated_launch(
        &mut self,
        route_id: &str,
        attempt: u32,
        invocation_generation: u64,
        at: DateTime<Utc>,
    ) {
        self.push(
            "INSERT INTO simulated_launches (route_id, attempt, invocation_generation, launched_at) VALUES (?, ?, ?, ?)",
            [
                text(route_id),
                int(i64::from(attempt)),
                int(gen_i64(invocation_generation)),
                Bind::Text(Some(ts(at))),
            ],
        );
    }

    /// Runs them; returns what the statements with `RETURNING` reported. SQLite gets them as
    /// ONE multi-statement query (plain `?` bind in order across the statements); PostgreSQL,
    /// which takes one statement per query with values, one after another.
    pub(super) async fn run(mut self, mut ex: Exec<'_>) -> Result<Returned, sqlx::Error> {
        let mut out = Returned::default();
        if self.is_empty() {
            return Ok(out);
        }
        let mut all = Writes::owned_by(self.owner.take());
        for route in std::mem::take(&mut self.inserts) {
            all.push_insert_route(&route);
        }
        for (id, expected, next, now) in std::mem::take(&mut self.cas) {
            all.push_cas(&id, expected, &next, now);
        }
        all.statements.append(&mut self.statements);
        all.push_events(std::mem::take(&mut self.events), ex.dialect());
        for d in std::mem::take(&mut self.dispatches) {
            all.push_dispatch(&d);
        }
        for (route_id, op) in std::mem::take(&mut self.timers) {
            match op {
                Some((kind, generation, due, payload)) => all.push(
                    "INSERT INTO timers (route_id, kind, generation, due_ms, payload) VALUES (?, ?, ?, ?, ?) \
                     ON CONFLICT(route_id) DO UPDATE SET kind = excluded.kind, generation = excluded.generation, \
                     due_ms = excluded.due_ms, payload = excluded.payload",
                    [
                        text(&route_id),
                        text(kind.as_str()),
                        int(gen_i64(generation)),
                        int(due),
                        Bind::Text(payload),
                    ],
                ),
                None => all.push("DELETE FROM timers WHERE route_id = ?", [text(&route_id)]),
            }
        }
        if let Some(at) = self.release_holds_at {
            all.push(RELEASE_HOLDS_SQL, [int(ms(at))]);
        }
        let mut tally = |tag: String| match tag.as_str() {
            CAS_TAG => out.cas_won += 1,
            LEASE_TAG => out.leases_released += 1,
            _ => {}
        };
        match ex.dialect() {
            Dialect::Sqlite => {
                let mut text = String::new();
                let mut binds = Vec::new();
                for (sql, mut b) in all.statements {
                    text.push_str(sql);
                    text.push_str(";\n");
                    binds.append(&mut b);
                }
                // The text is this batch's alone: it is not kept prepared (see `once`).
                for tag in sql::query(text)
                    .once()
                    .bind_all(binds)
                    .scalars::<String>(ex)
                    .await?
                {
                    tally(tag);
                }
            }
            Dialect::Postgres => {
                for (text, binds) in all.statements {
                    let returns = text.contains(" RETURNING ");
                    let q = sql::query(text).bind_all(binds);
                    if returns {
                        for tag in q.scalars::<String>(ex.by_ref()).await? {
                            tally(tag);
                        }
                    } else {
                        q.execute(ex.by_ref()).await?;
                    }
                }
            }
        }
        Ok(out)
    }

    fn push_insert_route(&mut self, route: &RouteRow) {
        let s = &route.state;
        self.push(
            "INSERT INTO routes (id, profile_id, caller_kind, caller_reference, invocation_id, title, state, \
             generation, candidate_id, deadline_ms, state_json, durable_error, created_at, updated_at, owner) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
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
                owner_of(&self.owner, s),
            ],
        );
    }

    fn push_cas(&mut self, id: &str, expected: u64, next: &RouteState, now: DateTime<Utc>) {
        self.push(
            "UPDATE routes SET state = ?, generation = ?, candidate_id = ?, deadline_ms = ?, state_json = ?, \
             durable_error = NULL, updated_at = ?, owner = ? WHERE id = ? AND generation = ? RETURNING '#cas'",
            [
                text(next.state_name().as_str()),
                int(gen_i64(next.generation())),
                text(&next.candidate().id),
                Bind::Int(next.deadline().map(ms)),
                Bind::Text(Some(to_json(next))),
                Bind::Text(Some(ts(now))),
                owner_of(&self.owner, next),
                text(id),
                int(gen_i64(expected)),
            ],
        );
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
                text(super::dispatches::attempt_kind_str(d.kind)),
                text(d.dispatcher.as_str()),
                int(gen_i64(d.generation)),
                text(status),
                Bind::Text(Some(ts(d.scheduled_at))),
                Bind::Int(d.started.map(|(g, _)| gen_i64(g))),
                Bind::Text(d.started.map(|(_, at)| ts(at))),
                Bind::Text(d.settled.map(|(o, _)| super::dispatches::outcome_str(o).to_owned())),
                Bind::Text(d.settled.map(|(_, at)| ts(at))),
            ],
        );
    }
}
