//! The route engine: the one transition owner, effect execution, the dispatch gate of the
//! shared resource circuits, the simulated dispatcher, and restart reconciliation.
//!
//! Architecture invariants (each has a test in `server/tests/`):
//! - One transition owner. Every route change goes through [`Engine::submit`]: in ONE
//!   `BEGIN IMMEDIATE` transaction, load the route, `policy::route::step`, then the
//!   compare-and-set `UPDATE routes ... WHERE id = ? AND generation = ?`, the history row, the
//!   dispatch record, the timer row and the circuit rows. A stale generation writes nothing
//!   and answers with the current snapshot; a lost compare-and-set (impossible while the read
//!   and the write share the transaction, but checked) fails the step and rolls it back.
//! - Persist, then act. Effects (`RouteEffect`) run only after the commit. A timer is "armed"
//!   by its row in that same transaction; the effect only wakes the scheduler. If the commit
//!   fails, nothing is armed, launched or repeated, and the error is surfaced on the route.
//! - A dispatch is recorded as started (`DispatchStarted` committed) before `Launch` runs.
//!   After a restart, `Restarted` re-begins provably unstarted attempts and sends started,
//!   unsettled ones to `action_required` (`ambiguous_dispatch`).
//! - Circuits are an eligibility input: an open circuit holds a pending dispatch (a
//!   `circuit_hold` timer) and makes its candidates ineligible for switching; an expired one
//!   lets exactly one route take the probe lease (a compare-and-set on the circuit row).
//!
//! Group commit. All route writes go through one writer task that owns one connection:
//! SQLite serializes writers anyway, and a pool of connections taking turns only adds lock
//! waits. Each step is a job on the writer's queue; the writer takes every job queued while
//! its previous transaction ran (up to `MAX_BATCH`) and runs them in ONE transaction, each
//! job still with its own compare-and-set and history row, in queue order, seeing the jobs
//! before it. A job the route machine rejects (a stale generation) writes nothing and is
//! answered `Rejected`; the others commit. If any job fails (a storage error, a missing
//! route) or the commit fails, the whole transaction is rolled back and every job of the
//! batch runs again alone, in its own transaction, exactly as a single step would: one job
//! can neither sink nor half-commit another. Answers (and so effects, timer wake-ups and events) go out only after
//! the commit, so "persist, then act" holds for every job of a group. Why: a commit costs
//! about as much as a whole step's statements, so under load (many routes, a burst of due
//! timers) grouping makes a transition cheaper than a bare one-row commit; a lone step still
//! pays one commit, as before. The dispatch gate and the `DispatchStarted` it allows are one
//! job (one transaction). A group reads all its routes (with their profiles) in one
//! statement and sends all its writes, compare-and-sets included, in one round trip just
//! before the commit (`Pending`, `store::Writes`), so a burst of due timers costs a handful
//! of round trips to the connection's thread per 256 steps, not several per step.
//!
//! Durability: the database runs in WAL mode with `synchronous = NORMAL` (see `db.rs`): a
//! commit survives a crash of the process (the crash test kills it with SIGKILL), while a
//! power loss may drop the last commits before a checkpoint, never corrupt the file or tear
//! a transaction.
//!
//! Submissions run in spawned tasks and the writer answers through channels, so a dropped
//! HTTP request can never leave a connection inside an open transaction, and effects always
//! complete.

use crate::{
    clock::Clock,
    store::{self, from_ms, ms, ts, RouteRow, StoreError},
};
use chrono::{DateTime, TimeDelta, Utc};
use classifier::{Envelope, Verdict};
use policy::{
    api::{
        ActionOutcome, CandidateTarget, CircuitState, CircuitView, DispatchOutcome, DispatcherKind,
        ManualActionRequest, Profile, RouteDetail, RouteSummary, SimulatedOutcome, StartRouteRequest,
    },
    classification::{ClassState, Confidence, Scope},
    route::{
        start, step, CandidateOption, DispatchState, EventKind, FailureReport, RouteEffect, RouteEvent,
        RouteState, Transition, TransitionError,
    },
    wire::{RouteEventPayload, RouteSnapshot},
};
use serde::{Deserialize, Serialize};
use sqlx::{pool::PoolConnection, Row, Sqlite, SqliteConnection, SqlitePool};
use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex as StdMutex, Weak,
    },
};
use tokio::{
    sync::{broadcast, mpsc, oneshot, Mutex, Notify},
    task::AbortHandle,
};

/// How long routes held behind a probe wait before they look again (a lost probe, e.g. a hung
/// one, cannot block them forever).
pub const PROBE_WAIT: TimeDelta = TimeDelta::seconds(60);
/// Backoff of a circuit opened without a trusted reset: 30 s doubling per failure, capped.
pub const CIRCUIT_BASE_BACKOFF_SECS: i64 = 30;
pub const CIRCUIT_MAX_BACKOFF_SECS: i64 = 3600;

/// One accepted change, as the event stream sends it (`route_id` plus the policy payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStreamEvent {
    pub route_id: String,
    #[serde(flatten)]
    pub payload: RouteEventPayload,
}

/// What can be submitted to a route.
#[derive(Debug, Clone)]
pub enum Input {
    Event(RouteEvent),
    /// An evidence envelope for the route's current invocation; classified inside the
    /// transaction against the route's current generation and the profile's current policy.
    Evidence(Box<Envelope>),
}

/// The result of a submitted input.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The authoritative snapshot after the input and the transitions its effects caused.
    pub snapshot: RouteSnapshot,
    /// Whether the input itself changed the route.
    pub changed: bool,
    pub verdict: Option<Box<Verdict>>,
}

/// Why a submission did not commit, classified by how the caller reacts.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("[EN1001] no route `{0}`")]
    RouteNotFound(String),
    #[error("[EN1002] no profile `{0}`")]
    ProfileNotFound(String),
    /// Stale generation, not allowed now, or a compare-and-set lost to another writer: the
    /// route is untouched; here is where it is.
    #[error("[EN1003] rejected: {reason}")]
    Rejected {
        reason: String,
        error: Option<TransitionError>,
        snapshot: Box<RouteSnapshot>,
        verdict: Option<Box<Verdict>>,
    },
    /// The decision could not be written: nothing was armed, launched or repeated.
    #[error("[EN1004] the decision could not be written durably: {0}")]
    Storage(#[source] sqlx::Error),
    #[error("[EN1005] {0}")]
    Corrupt(String),
    #[error("[EN1006] {0}")]
    Conflict(String),
    #[error("[EN1007] the engine task failed")]
    Task,
}

impl From<sqlx::Error> for EngineError {
    fn from(e: sqlx::Error) -> Self {
        EngineError::Storage(e)
    }
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Sql(e) => EngineError::Storage(e),
            StoreError::Corrupt { .. } => EngineError::Corrupt(e.to_string()),
        }
    }
}

/// What one transaction did. (Short-lived and moved once; boxing `Committed` buys nothing.)
#[allow(clippy::large_enum_variant)]
enum TxOutcome {
    Committed {
        prev: RouteState,
        transition: Transition,
        kind: EventKind,
        verdict: Option<Box<Verdict>>,
        release_holds: bool,
        /// The dispatcher of the route's candidate after the step, as the profile read in the
        /// same transaction says (so `Launch` need not read it again).
        dispatcher: Option<DispatcherKind>,
    },
    Unchanged {
        state: RouteState,
        effects: Vec<RouteEffect>,
        verdict: Option<Box<Verdict>>,
    },
    Rejected {
        state: RouteState,
        error: Option<TransitionError>,
        verdict: Option<Box<Verdict>>,
    },
}

enum GateVerdict {
    Go,
    Held,
    Stale,
}

/// What the dispatch gate and the `DispatchStarted` step it leads to did, in one transaction.
/// (Short-lived and moved once, like `TxOutcome`.)
#[allow(clippy::large_enum_variant)]
enum Begun {
    /// Held behind an open circuit or another route's probe (a `circuit_hold` timer row).
    Held,
    /// The route moved on; nothing to begin.
    Stale,
    /// The gate let it go and `DispatchStarted` was applied (or lost a race).
    Stepped(TxOutcome),
}

/// A new route's row, its profile and its first transition.
type Started = (RouteRow, Profile, Transition);

/// The dispatch a committed step asked to begin (its generation), already begun in the same
/// transaction: a step that makes an attempt pending (a start, a retry, a deadline) and the
/// gate plus `DispatchStarted` that follow it are one job, not two.
type Chain = Option<(u64, Begun)>;

/// What one writer transaction has read and what it has queued to write: the routes (with
/// their profiles) as this transaction sees them, the circuits that are not closed, and the
/// writes not sent yet. A group commit shares one for all its jobs; a job run alone has its
/// own.
///
/// Why: sqlx runs each statement on the connection's own thread, and the two thread hand-offs
/// per statement, not SQLite's work, were most of a step's cost (a profile of the timer
/// benchmark showed a third of all time in the kernel's task switching, and on a busy machine
/// each hand-off waits for a core). So a group reads all its routes with one statement and
/// sends all its writes in one round trip just before it commits; a fired timer no longer
/// costs round trips of its own. Writes are sent early only when a read must see them
/// (before the circuits are read, and before a new route's invocation is checked).
///
/// The cached routes stay true because the writer holds SQLite's write lock for the whole
/// transaction (`BEGIN IMMEDIATE`): nothing else can change them, and each step this
/// transaction queues is applied to the cached row too. The compare-and-sets are still sent:
/// each returns a tagged row when it wins, and a flush that counts fewer wins than it queued
/// fails (the transaction is rolled back), so the generation fence is checked by SQLite, not
/// only assumed.
#[derive(Default)]
struct Pending {
    writes: store::Writes,
    /// A flush gave back a probe lease and released the holds: wake the scheduler after the
    /// commit.
    released: bool,
    /// Routes (and their profiles) read or written in this transaction, by id.
    routes: HashMap<String, (RouteRow, Option<Profile>)>,
    /// The circuits that are not closed (a closed or missing circuit blocks nothing), read at
    /// most once between two circuit writes; `None` until read or after a circuit write.
    circuits: Option<HashMap<String, CircuitRow>>,
}

impl Pending {
    /// Reads the routes of `ids` (and their profiles) with one statement.
    async fn preload(&mut self, conn: &mut SqliteConnection, ids: &[&str]) -> Result<(), EngineError> {
        let ids: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !self.routes.contains_key(*id))
            .collect();
        for (id, loaded) in store::load_routes_and_profiles(conn, &ids).await? {
            self.routes.insert(id, (loaded.0, loaded.1.map(|p| p.profile)));
        }
        Ok(())
    }

    /// A route and its profile as this transaction sees them.
    async fn route(
        &mut self,
        conn: &mut SqliteConnection,
        route_id: &str,
    ) -> Result<Option<(RouteRow, Option<Profile>)>, EngineError> {
        if !self.routes.contains_key(route_id) {
            self.preload(conn, &[route_id]).await?;
        }
        Ok(self.routes.get(route_id).cloned())
    }

    /// Queues the compare-and-set and applies it to the cached row.
    fn cas_route(&mut self, id: &str, expected: u64, next: &RouteState, now: DateTime<Utc>) {
        self.writes.cas_route(id, expected, next, now);
        if let Some((row, _)) = self.routes.get_mut(id) {
            row.state = next.clone();
            row.durable_error = None;
            row.updated_at = now;
        }
    }

    /// Queues a new route's row and caches it.
    fn insert_route(&mut self, route: &RouteRow, profile: &Profile) {
        self.writes.insert_route(route);
        self.routes
            .insert(route.id.clone(), (route.clone(), Some(profile.clone())));
    }

    /// Queues giving back the route's probe leases, unless the circuits read in this
    /// transaction show it holds none.
    fn release_probe_leases(&mut self, route_id: &str, now: DateTime<Utc>) {
        let holds_none = self.circuits.as_ref().is_some_and(|c| {
            c.values()
                .all(|row| row.probe_route_id.as_deref() != Some(route_id))
        });
        if !holds_none {
            self.writes.release_probe_leases(route_id, now);
            self.circuits = None;
        }
    }

    /// The circuit `key` if it is not closed, as this transaction sees it.
    async fn circuit(
        &mut self,
        conn: &mut SqliteConnection,
        key: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<CircuitRow>, EngineError> {
        if self.circuits.is_none() {
            self.flush(conn, now).await?;
            self.circuits = Some(load_open_circuits(conn).await?);
        }
        Ok(self.circuits.as_ref().and_then(|c| c.get(key)).cloned())
    }

    /// Sends the queued writes first, then forgets the circuits: the caller is about to
    /// write one directly.
    async fn before_circuit_write(
        &mut self,
        conn: &mut SqliteConnection,
        now: DateTime<Utc>,
    ) -> Result<(), EngineError> {
        self.flush(conn, now).await?;
        self.circuits = None;
        Ok(())
    }

    /// Sends the queued writes in one round trip and checks every compare-and-set won.
    async fn flush(&mut self, conn: &mut SqliteConnection, now: DateTime<Utc>) -> Result<(), EngineError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut self.writes);
        let expected = writes.cas_count();
        let returned = writes.run(conn).await?;
        if returned.cas_won != expected {
            return Err(EngineError::Conflict(format!(
                "{} of {expected} route compare-and-sets lost to another writer; nothing was written",
                expected - returned.cas_won.min(expected)
            )));
        }
        if returned.leases_released > 0 {
            release_holds(&mut *conn, now).await?;
            self.released = true;
        }
        Ok(())
    }
}

/// Most jobs one group commit takes. Large enough to absorb a burst of due timers, small
/// enough that one transaction never holds the write lock for long.
const MAX_BATCH: usize = 256;

/// Writer commits between two WAL checkpoints (see [`Engine::committed`]).
const CHECKPOINT_EVERY: u64 = 32;

/// A unit of work for the writer task: one route's step (or a new route), with the channel
/// its submitter waits on.
enum Job {
    Apply {
        route_id: String,
        input: Input,
        reply: oneshot::Sender<Result<(TxOutcome, Chain), EngineError>>,
    },
    Begin {
        route_id: String,
        generation: u64,
        candidate_id: String,
        reply: oneshot::Sender<Result<Begun, EngineError>>,
    },
    Start {
        request: StartRouteRequest,
        reply: oneshot::Sender<Result<(Started, Chain), EngineError>>,
    },
}

/// A job's result, before it is sent back.
#[allow(clippy::large_enum_variant)]
enum Done {
    Apply(Result<(TxOutcome, Chain), EngineError>),
    Begin(Result<Begun, EngineError>),
    Start(Result<(Started, Chain), EngineError>),
}

impl Done {
    fn is_ok(&self) -> bool {
        match self {
            Done::Apply(r) => r.is_ok(),
            Done::Begin(r) => r.is_ok(),
            Done::Start(r) => r.is_ok(),
        }
    }
}

impl Job {
    /// The existing route the job steps (a new route has none yet).
    fn route_id(&self) -> Option<&str> {
        match self {
            Job::Apply { route_id, .. } | Job::Begin { route_id, .. } => Some(route_id),
            Job::Start { .. } => None,
        }
    }

    fn failed(&self, e: EngineError) -> Done {
        match self {
            Job::Apply { .. } => Done::Apply(Err(e)),
            Job::Begin { .. } => Done::Begin(Err(e)),
            Job::Start { .. } => Done::Start(Err(e)),
        }
    }

    fn reply(self, done: Done) {
        // A submitter that went away no longer needs the answer; the work is done either way.
        match (self, done) {
            (Job::Apply { reply, .. }, Done::Apply(r)) => {
                let _ = reply.send(r);
            }
            (Job::Begin { reply, .. }, Done::Begin(r)) => {
                let _ = reply.send(r);
            }
            (Job::Start { reply, .. }, Done::Start(r)) => {
                let _ = reply.send(r);
            }
            // `Done` is always built from its own job; a mismatch cannot happen. Dropping the
            // sender makes the submitter see `EngineError::Task`.
            _ => {}
        }
    }
}

/// Counters of the group-commit writer, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions that carried more than one job and committed.
    pub group_commits: u64,
    /// Jobs committed by those transactions.
    pub grouped_jobs: u64,
    /// Jobs that ran in a transaction of their own (a batch of one, or the fallback after a
    /// batch failed).
    pub single_jobs: u64,
}

/// A simulated attempt's report task and when the report is due.
type RunningReport = (AbortHandle, DateTime<Utc>);

/// The engine. Cheap to share (`Arc`).
pub struct Engine {
    pool: SqlitePool,
    clock: Arc<dyn Clock>,
    /// Wakes the scheduler (a new or earlier timer, released holds).
    wake: Notify,
    /// One writer at a time in this process (SQLite has one anyway; waiting here is cheaper
    /// than SQLite's busy loop). The compare-and-set still fences other processes.
    write: Mutex<()>,
    events: broadcast::Sender<RouteStreamEvent>,
    /// Simulated attempts still to report, with when their report is due.
    running: StdMutex<HashMap<(String, u32), RunningReport>>,
    /// Durable-write failures by route, also when they could not be written themselves.
    durable_errors: StdMutex<HashMap<String, String>>,
    /// The writer task's queue, started on first use (inside the runtime), and started
    /// again should the task ever have died.
    /// Jobs travel in vectors: the jobs of one vector reach the writer together (a scheduler
    /// pass's due timers, say) and so share a group commit.
    jobs: StdMutex<Option<mpsc::UnboundedSender<Vec<Job>>>>,
    group_commits: AtomicU64,
    grouped_jobs: AtomicU64,
    single_jobs: AtomicU64,
    /// Transactions the writer committed, and whether a checkpoint is running.
    commits: AtomicU64,
    checkpointing: std::sync::atomic::AtomicBool,
    me: Weak<Engine>,
}

impl Engine {
    pub fn new(pool: SqlitePool, clock: Arc<dyn Clock>) -> Arc<Engine> {
        let (events, _) = broadcast::channel(1024);
        Arc::new_cyclic(|me| Engine {
            pool,
            clock,
            wake: Notify::new(),
            write: Mutex::new(()),
            events,
            running: StdMutex::new(HashMap::new()),
            durable_errors: StdMutex::new(HashMap::new()),
            jobs: StdMutex::new(None),
            group_commits: AtomicU64::new(0),
            grouped_jobs: AtomicU64::new(0),
            single_jobs: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            checkpointing: std::sync::atomic::AtomicBool::new(false),
            me: me.clone(),
        })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Wakes the scheduler (after a clock change, a new timer or released holds).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The in-process writer lock: profile writes take it too, so SQLite never sees two
    /// writers from this process.
    pub(crate) async fn writer(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write.lock().await
    }

    pub(crate) fn wake_handle(&self) -> &Notify {
        &self.wake
    }

    pub fn subscribe(&self) -> broadcast::Receiver<RouteStreamEvent> {
        self.events.subscribe()
    }

    fn arc(&self) -> Arc<Engine> {
        // `self` is only reachable through the Arc built in `new`.
        self.me
            .upgrade()
            .unwrap_or_else(|| unreachable!("engine used after drop"))
    }

    // --------------------------------------------------------------------------------------------
    // Submitting
    // --------------------------------------------------------------------------------------------

    /// Submits one input to a route through the transition owner, then performs the effects.
    /// Runs in its own task: a caller that goes away cannot interrupt a transaction.
    pub async fn submit(&self, route_id: &str, input: Input) -> Result<Applied, EngineError> {
        let engine = self.arc();
        let route_id = route_id.to_owned();
        tokio::spawn(async move { engine.submit_here(&route_id, input).await })
            .await
            .map_err(|_| EngineError::Task)?
    }

    /// Submits inputs to many routes as one delivery to the writer, so they share group
    /// commits however the runtime schedules things (the scheduler fires a pass of due timers
    /// this way); then performs each one's effects. One answer per input, in order.
    pub async fn submit_all(&self, inputs: Vec<(String, Input)>) -> Vec<Result<Applied, EngineError>> {
        let engine = self.arc();
        let n = inputs.len();
        let all = tokio::spawn(async move {
            let mut jobs = Vec::with_capacity(inputs.len());
            let mut answers = Vec::with_capacity(inputs.len());
            for (route_id, input) in inputs {
                let (reply, answer) = oneshot::channel();
                jobs.push(Job::Apply {
                    route_id: route_id.clone(),
                    input,
                    reply,
                });
                answers.push((route_id, answer));
            }
            // If the writer is gone, every answer below reports it.
            let _ = engine.enqueue_all(jobs);
            futures_util::future::join_all(answers.into_iter().map(|(route_id, answer)| {
                let engine = engine.clone();
                async move {
                    let applied = answer.await.unwrap_or(Err(EngineError::Task));
                    engine.settle(&route_id, applied).await
                }
            }))
            .await
        })
        .await;
        all.unwrap_or_else(|_| (0..n).map(|_| Err(EngineError::Task)).collect())
    }

    async fn submit_here(&self, route_id: &str, input: Input) -> Result<Applied, EngineError> {
        let applied = self.apply_once(route_id, input).await;
        self.settle(route_id, applied).await
    }

    /// What follows a step's commit (or its failure): the event, then the effects.
    async fn settle(
        &self,
        route_id: &str,
        applied: Result<(TxOutcome, Chain), EngineError>,
    ) -> Result<Applied, EngineError> {
        let (outcome, chain) = match applied {
            Ok(o) => o,
            Err(e) => {
                if let EngineError::Storage(err) = &e {
                    self.record_durable_error(route_id, err).await;
                }
                return Err(e);
            }
        };
        match outcome {
            TxOutcome::Committed {
                prev,
                transition,
                kind,
                verdict,
                release_holds,
                ..
            } => {
                self.after_commit(route_id, &prev, &transition, kind, release_holds);
                let latest = self
                    .run_effects(
                        route_id,
                        transition.effects.clone(),
                        transition.next.clone(),
                        chain,
                    )
                    .await;
                Ok(Applied {
                    snapshot: latest.snapshot(),
                    changed: true,
                    verdict,
                })
            }
            TxOutcome::Unchanged {
                state,
                effects,
                verdict,
            } => {
                let latest = self.run_effects(route_id, effects, state, None).await;
                Ok(Applied {
                    snapshot: latest.snapshot(),
                    changed: false,
                    verdict,
                })
            }
            TxOutcome::Rejected {
                state,
                error,
                verdict,
            } => Err(EngineError::Rejected {
                reason: error.as_ref().map_or_else(
                    || "another writer changed the route first".to_owned(),
                    ToString::to_string,
                ),
                error,
                snapshot: Box::new(state.snapshot()),
                verdict,
            }),
        }
    }

    /// `submit_here` behind a box: the simulated dispatcher's task calls back into the
    /// engine, and the box breaks the otherwise infinite future type.
    fn submit_boxed(
        self: Arc<Self>,
        route_id: String,
        input: Input,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Applied, EngineError>> + Send>> {
        Box::pin(async move { self.submit_here(&route_id, input).await })
    }

    async fn record_durable_error(&self, route_id: &str, err: &sqlx::Error) {
        let message = format!("the decision could not be written: {err}");
        tracing::error!(route_id, error = %err, "durable write failed; nothing was armed or launched");
        self.durable_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(route_id.to_owned(), message.clone());
        // Best effort: on a read-only or full disk this fails too, and the map above keeps it.
        let _ = sqlx::query("UPDATE routes SET durable_error = ? WHERE id = ?")
            .bind(&message)
            .bind(route_id)
            .execute(&self.pool)
            .await;
    }

    fn durable_error(&self, route_id: &str) -> Option<String> {
        self.durable_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(route_id)
            .cloned()
    }

    fn after_commit(
        &self,
        route_id: &str,
        prev: &RouteState,
        transition: &Transition,
        kind: EventKind,
        release_holds: bool,
    ) {
        self.durable_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(route_id);
        if release_holds {
            self.wake();
        }
        if self.events.receiver_count() == 0 {
            return;
        }
        let payload = RouteEventPayload::new(kind, Some(prev), transition, self.now());
        let _ = self.events.send(RouteStreamEvent {
            route_id: route_id.to_owned(),
            payload,
        });
    }

    /// One step through the writer task (committed in a group with whatever else is queued).
    async fn apply_once(&self, route_id: &str, input: Input) -> Result<(TxOutcome, Chain), EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(Job::Apply {
            route_id: route_id.to_owned(),
            input,
            reply,
        })?;
        answer.await.map_err(|_| EngineError::Task)?
    }

    // --------------------------------------------------------------------------------------------
    // The writer: group commit
    // --------------------------------------------------------------------------------------------

    fn enqueue(&self, job: Job) -> Result<(), EngineError> {
        self.enqueue_all(vec![job])
    }

    /// Queues jobs as one delivery: the writer sees all of them at once.
    fn enqueue_all(&self, batch: Vec<Job>) -> Result<(), EngineError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let tx = match jobs.as_ref() {
            Some(tx) if !tx.is_closed() => tx,
            _ => {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(write_loop(self.me.clone(), rx));
                jobs.insert(tx)
            }
        };
        tx.send(batch).map_err(|_| EngineError::Task)
    }

    /// What the group-commit writer has done so far.
    pub fn write_stats(&self) -> WriteStats {
        WriteStats {
            group_commits: self.group_commits.load(Ordering::Relaxed),
            grouped_jobs: self.grouped_jobs.load(Ordering::Relaxed),
            single_jobs: self.single_jobs.load(Ordering::Relaxed),
        }
    }

    /// Runs one batch: all jobs in one transaction if every one of them succeeds, otherwise
    /// (or if the commit fails) rolled back and each job run again in its own transaction, so
    /// one failing job can neither sink nor half-commit another. A lost compare-and-set is
    /// not a failure: it writes nothing and is answered `Rejected` while the others commit.
    async fn run_batch(&self, slot: &mut Option<PoolConnection<Sqlite>>, batch: Vec<Job>) {
        let _writer = self.write.lock().await;
        if slot.is_none() {
            *slot = self.pool.acquire().await.ok();
        }
        let Some(conn) = slot.as_mut() else {
            for job in batch {
                let done = match self.pool.acquire().await {
                    Ok(mut conn) => self.run_alone(&mut conn, &job).await,
                    Err(e) => job.failed(EngineError::Storage(e)),
                };
                job.reply(done);
            }
            return;
        };
        if batch.len() > 1 {
            if let Some(done) = self.run_group(conn, &batch).await {
                self.committed();
                self.group_commits.fetch_add(1, Ordering::Relaxed);
                self.grouped_jobs
                    .fetch_add(u64::try_from(batch.len()).unwrap_or(0), Ordering::Relaxed);
                for (job, done) in batch.into_iter().zip(done) {
                    job.reply(done);
                }
                return;
            }
        }
        for job in batch {
            let done = self.run_alone(conn, &job).await;
            job.reply(done);
        }
    }

    /// All jobs in one transaction; `None` (rolled back) if any job failed or the commit did.
    /// The group reads all its routes with one statement and sends all its writes with one
    /// more (see [`Pending`]).
    async fn run_group(&self, conn: &mut SqliteConnection, batch: &[Job]) -> Option<Vec<Done>> {
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await.ok()?;
        let now = self.now();
        let mut pending = Pending::default();
        let ids: Vec<&str> = batch.iter().filter_map(Job::route_id).collect();
        let mut out = Vec::with_capacity(batch.len());
        let mut ok = pending.preload(conn, &ids).await.is_ok();
        for job in batch {
            if !ok {
                break;
            }
            let done = self.run_job(conn, &mut pending, job, now).await;
            ok = done.is_ok();
            out.push(done);
        }
        ok = ok && pending.flush(conn, now).await.is_ok();
        if !ok || sqlx::query("COMMIT").execute(&mut *conn).await.is_err() {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return None;
        }
        if pending.released {
            self.wake();
        }
        Some(out)
    }

    /// One job in its own transaction.
    async fn run_alone(&self, conn: &mut SqliteConnection, job: &Job) -> Done {
        self.single_jobs.fetch_add(1, Ordering::Relaxed);
        let now = self.now();
        if let Err(e) = sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await {
            return job.failed(EngineError::Storage(e));
        }
        let mut pending = Pending::default();
        let mut done = self.run_job(conn, &mut pending, job, now).await;
        if done.is_ok() {
            if let Err(e) = pending.flush(conn, now).await {
                done = job.failed(e);
            }
        }
        match finish(conn, done.is_ok()).await {
            Ok(()) => {
                if done.is_ok() {
                    self.committed();
                    if pending.released {
                        self.wake();
                    }
                }
                done
            }
            Err(e) => job.failed(e),
        }
    }

    /// Counts a writer commit and, every `CHECKPOINT_EVERY` of them, copies the WAL back into
    /// the database file on another connection (a passive checkpoint never blocks the writer).
    ///
    /// Why: with `synchronous = NORMAL` a checkpoint is the only `fsync`, and SQLite runs it
    /// inside whichever commit crosses 1,000 WAL pages, so every job of that group (a burst of
    /// due timers, say) waits for the disk. That automatic checkpoint stays (it completes
    /// while nothing else writes, so the next commit starts the WAL over and it stays small),
    /// but with the bulk already copied and synced beside it, it has little left to do.
    fn committed(&self) {
        let n = self.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_multiple_of(CHECKPOINT_EVERY) || self.checkpointing.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = self.pool.clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&pool).await {
                tracing::warn!(error = %e, "WAL checkpoint failed; the next one retries");
            }
            if let Some(engine) = me.upgrade() {
                engine.checkpointing.store(false, Ordering::Release);
            }
        });
    }

    /// A job's body, inside an open transaction: its reads go through `pending` and its
    /// writes are queued there. The caller flushes them before the commit; a job that returns
    /// an error fails the whole transaction.
    async fn run_job(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        job: &Job,
        now: DateTime<Utc>,
    ) -> Done {
        match job {
            Job::Apply { route_id, input, .. } => Done::Apply(
                async {
                    let (route, profile) = route_and_profile(conn, pending, route_id).await?;
                    let mut row = route.clone();
                    let outcome = self
                        .transact_loaded(conn, pending, route, &profile, input.clone(), now)
                        .await?;
                    let chain = match &outcome {
                        TxOutcome::Committed { transition, .. } => {
                            // The row as this transaction writes it: no need to read it.
                            row.state = transition.next.clone();
                            self.chain_begin(conn, pending, row, &profile, &transition.effects, now)
                                .await?
                        }
                        _ => None,
                    };
                    Ok((outcome, chain))
                }
                .await,
            ),
            Job::Begin {
                route_id,
                generation,
                candidate_id,
                ..
            } => Done::Begin(
                self.begin_tx(conn, pending, route_id, *generation, candidate_id, now)
                    .await,
            ),
            Job::Start { request, .. } => Done::Start(
                async {
                    let started = self.start_tx(conn, pending, request, now).await?;
                    let chain = self
                        .chain_begin(
                            conn,
                            pending,
                            started.0.clone(),
                            &started.1,
                            &started.2.effects,
                            now,
                        )
                        .await?;
                    Ok((started, chain))
                }
                .await,
            ),
        }
    }

    /// Begins, in the open transaction, the dispatch `effects` ask for, if nothing with its
    /// own writes or reads comes before it (timer wake-ups, notices and aborting an old
    /// attempt are in memory only). The commit then covers the step, the gate and the
    /// `DispatchStarted`; `Launch` still runs only after it.
    async fn chain_begin(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        route: RouteRow,
        profile: &Profile,
        effects: &[RouteEffect],
        now: DateTime<Utc>,
    ) -> Result<Chain, EngineError> {
        for effect in effects {
            match effect {
                RouteEffect::ArmTimer { .. }
                | RouteEffect::CancelTimer
                | RouteEffect::NotifyPerson { .. }
                | RouteEffect::AbortDispatch { .. } => {}
                RouteEffect::BeginDispatch {
                    generation,
                    candidate_id,
                    ..
                } => {
                    let begun = self
                        .begin_loaded(
                            conn,
                            pending,
                            route,
                            Some(profile),
                            *generation,
                            candidate_id,
                            now,
                        )
                        .await?;
                    return Ok(Some((*generation, begun)));
                }
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The dispatch gate and, if it lets the attempt go, `DispatchStarted`, in one
    /// transaction: the start is committed before `Launch` runs, as before, one commit sooner.
    async fn begin_tx(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        route_id: &str,
        generation: u64,
        candidate_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Begun, EngineError> {
        let Some((route, profile)) = pending.route(conn, route_id).await? else {
            return Ok(Begun::Stale);
        };
        self.begin_loaded(
            conn,
            pending,
            route,
            profile.as_ref(),
            generation,
            candidate_id,
            now,
        )
        .await
    }

    /// [`Engine::begin_tx`] with the route and profile already read (or just written) in this
    /// transaction.
    #[allow(clippy::too_many_arguments)]
    async fn begin_loaded(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        route: RouteRow,
        profile: Option<&Profile>,
        generation: u64,
        candidate_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Begun, EngineError> {
        match gate_tx(conn, pending, &route, profile, generation, candidate_id, now).await? {
            GateVerdict::Held => Ok(Begun::Held),
            GateVerdict::Stale => Ok(Begun::Stale),
            GateVerdict::Go => {
                let profile =
                    profile.ok_or_else(|| EngineError::ProfileNotFound(route.profile_id.clone()))?;
                let event = Input::Event(RouteEvent::DispatchStarted { generation });
                Ok(Begun::Stepped(
                    self.transact_loaded(conn, pending, route, profile, event, now)
                        .await?,
                ))
            }
        }
    }

    /// The transition owner's body, inside an open transaction.
    async fn transact(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        route_id: &str,
        input: Input,
        now: DateTime<Utc>,
    ) -> Result<TxOutcome, EngineError> {
        let (route, profile) = route_and_profile(conn, pending, route_id).await?;
        self.transact_loaded(conn, pending, route, &profile, input, now)
            .await
    }

    /// [`Engine::transact`] with the route and profile already read in this transaction.
    async fn transact_loaded(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        route: RouteRow,
        profile: &Profile,
        input: Input,
        now: DateTime<Utc>,
    ) -> Result<TxOutcome, EngineError> {
        let route_id = route.id.as_str();
        let prev = route.state;
        let (event, verdict) = match input {
            Input::Event(e) => (e, None),
            Input::Evidence(env) => {
                let mut env = *env;
                env.active_generation = Some(prev.generation());
                let verdict = classifier::classify(&env, now);
                let policy = policy::document::ValidatedPolicyDocument::try_from(profile.policy.clone())
                    .ok()
                    .and_then(|doc| doc.candidate(&prev.candidate().id).cloned());
                let report = FailureReport {
                    evidence_generation: env.generation.unwrap_or(0),
                    classification: verdict.classification.clone(),
                    gate: verdict.gate,
                    policy,
                };
                (RouteEvent::Failed(Box::new(report)), Some(Box::new(verdict)))
            }
        };
        let kind = event.kind();
        let transition = match step(&prev, event, now) {
            Ok(t) => t,
            Err(error) => {
                return Ok(TxOutcome::Rejected {
                    state: prev,
                    error: Some(error),
                    verdict,
                })
            }
        };
        if !transition.changed {
            return Ok(TxOutcome::Unchanged {
                state: prev,
                effects: transition.effects,
                verdict,
            });
        }
        pending.cas_route(route_id, prev.generation(), &transition.next, now);
        // Circuits (rare: a success closes, a scoped failure opens; these read, so they flush
        // first), then the rest of the step's writes, queued for the job's one round trip.
        let circuits = maintain_circuits(
            conn,
            pending,
            route_id,
            &prev,
            &transition.next,
            kind,
            verdict.as_deref(),
            profile,
            now,
        )
        .await?;
        if !circuits.keeps_probing {
            // A lease given back releases the holds when the writes are flushed.
            pending.release_probe_leases(route_id, now);
        }
        let writes = &mut pending.writes;
        writes.history(store::HistoryInsert {
            route_id,
            at: now,
            event: kind,
            from: Some(prev.state_name()),
            next: &transition.next,
            profile_revision: profile.revision,
            decision_json: transition.decision.as_ref().map(store::to_json),
            classification_json: verdict.as_ref().map(|v| store::to_json(&v.classification)),
        });
        maintain_dispatches(writes, route_id, &prev, &transition.next, kind, profile, now);
        maintain_timer(writes, route_id, &prev, &transition.next);
        if circuits.release {
            writes.release_holds(now);
        }
        let release_holds = circuits.release;
        let dispatcher = target_of(profile, &transition.next.candidate().id).map(|t| t.dispatcher);
        Ok(TxOutcome::Committed {
            prev,
            transition,
            kind,
            verdict,
            release_holds,
            dispatcher,
        })
    }

    /// Performs effects in order; follow-up events go through the owner again. Returns the
    /// latest state this chain committed.
    async fn run_effects(
        &self,
        route_id: &str,
        effects: Vec<RouteEffect>,
        mut latest: RouteState,
        mut chain: Chain,
    ) -> RouteState {
        let mut queue: VecDeque<RouteEffect> = effects.into();
        // The candidate and dispatcher the last step of this chain committed with.
        let mut known: Option<(String, DispatcherKind)> = None;
        while let Some(effect) = queue.pop_front() {
            let follow: Option<Result<(TxOutcome, Chain), EngineError>> = match effect {
                RouteEffect::ArmTimer { .. } => {
                    self.wake();
                    None
                }
                RouteEffect::CancelTimer | RouteEffect::NotifyPerson { .. } => None,
                RouteEffect::BeginDispatch {
                    generation,
                    candidate_id,
                    ..
                } => match match chain.take_if(|(g, _)| *g == generation) {
                    Some((_, begun)) => Ok(begun),
                    None => self.begin(route_id, generation, &candidate_id).await,
                } {
                    Ok(Begun::Stepped(outcome)) => Some(Ok((outcome, None))),
                    Ok(Begun::Held) => {
                        self.wake();
                        None
                    }
                    Ok(Begun::Stale) => None,
                    Err(e) => {
                        if let EngineError::Storage(err) = &e {
                            self.record_durable_error(route_id, err).await;
                        }
                        tracing::warn!(route_id, error = %e, "dispatch gate failed");
                        None
                    }
                },
                // Only the simulated dispatcher runs in process; the others wait for a report
                // (the acp and http adapters are not built yet), so there is nothing to read.
                RouteEffect::Launch {
                    candidate_id,
                    attempt,
                    ..
                } if known
                    .as_ref()
                    .is_some_and(|(c, d)| *c == candidate_id && *d != DispatcherKind::Simulated) =>
                {
                    let dispatcher = known.as_ref().map(|(_, d)| *d);
                    tracing::info!(route_id, attempt, ?dispatcher, "dispatched; waiting for a report");
                    None
                }
                RouteEffect::Launch {
                    candidate_id,
                    attempt,
                    invocation_generation,
                    ..
                } => match self
                    .launch(route_id, &candidate_id, attempt, invocation_generation)
                    .await
                {
                    // An immediate simulated outcome is reported in this same chain, so tests
                    // and the test clock see whole chains complete deterministically.
                    Ok(Some(immediate)) => Some(self.apply_once(route_id, immediate).await),
                    Ok(None) => None,
                    Err(e) => {
                        tracing::warn!(route_id, error = %e, "launch failed");
                        None
                    }
                },
                RouteEffect::AbortDispatch { attempt } => {
                    self.abort(route_id, attempt);
                    None
                }
                RouteEffect::EvaluateCandidates { generation, .. } => {
                    match self.candidate_options(route_id).await {
                        Ok(candidates) => {
                            let event = RouteEvent::CandidatesEvaluated {
                                expected_generation: generation,
                                candidates,
                            };
                            Some(self.apply_once(route_id, Input::Event(event)).await)
                        }
                        Err(e) => {
                            tracing::warn!(route_id, error = %e, "cannot evaluate candidates");
                            None
                        }
                    }
                }
                RouteEffect::RouteClosed { .. } => {
                    if let Err(e) = self.release_leases(route_id).await {
                        tracing::warn!(route_id, error = %e, "cannot release probe leases");
                    }
                    None
                }
            };
            let Some(outcome) = follow else { continue };
            match outcome {
                Ok((
                    TxOutcome::Committed {
                        prev,
                        transition,
                        kind,
                        release_holds,
                        dispatcher,
                        ..
                    },
                    next_chain,
                )) => {
                    self.after_commit(route_id, &prev, &transition, kind, release_holds);
                    chain = next_chain;
                    known = dispatcher.map(|d| (transition.next.candidate().id.clone(), d));
                    latest = transition.next.clone();
                    queue.extend(transition.effects);
                }
                Ok((TxOutcome::Unchanged { effects, .. }, _)) => queue.extend(effects),
                Ok((TxOutcome::Rejected { state, error, .. }, _)) => {
                    tracing::debug!(route_id, ?error, "follow-up event lost a race");
                    latest = state;
                }
                Err(e) => {
                    if let EngineError::Storage(err) = &e {
                        self.record_durable_error(route_id, err).await;
                    }
                    tracing::warn!(route_id, error = %e, "follow-up event failed; effects stop here");
                    break;
                }
            }
        }
        latest
    }

    // --------------------------------------------------------------------------------------------
    // Routes
    // --------------------------------------------------------------------------------------------

    /// Starts routed work on a profile for a caller.
    pub async fn start_route(&self, request: StartRouteRequest) -> Result<RouteSummary, EngineError> {
        let engine = self.arc();
        tokio::spawn(async move { engine.start_here(request).await })
            .await
            .map_err(|_| EngineError::Task)?
    }

    async fn start_here(&self, request: StartRouteRequest) -> Result<RouteSummary, EngineError> {
        let now = self.now();
        let ((route, profile, transition), chain) = {
            let (reply, answer) = oneshot::channel();
            self.enqueue(Job::Start { request, reply })?;
            answer.await.map_err(|_| EngineError::Task)??
        };
        let payload = RouteEventPayload::new(EventKind::Started, None, &transition, now);
        let _ = self.events.send(RouteStreamEvent {
            route_id: route.id.clone(),
            payload,
        });
        let latest = self
            .run_effects(
                &route.id,
                transition.effects.clone(),
                transition.next.clone(),
                chain,
            )
            .await;
        let mut summary = store::summary_of(&route, profile.name);
        summary.snapshot = latest.snapshot();
        Ok(summary)
    }

    async fn start_tx(
        &self,
        conn: &mut SqliteConnection,
        pending: &mut Pending,
        request: &StartRouteRequest,
        now: DateTime<Utc>,
    ) -> Result<Started, EngineError> {
        let profile = store::load_profile(conn, &request.profile_id)
            .await?
            .ok_or_else(|| EngineError::ProfileNotFound(request.profile_id.clone()))?
            .profile;
        // An earlier job of this transaction may have started this invocation.
        pending.flush(conn, now).await?;
        let exists: Option<String> =
            sqlx::query_scalar("SELECT id FROM routes WHERE caller_kind = ? AND invocation_id = ?")
                .bind(request.caller.kind.as_str())
                .bind(&request.caller.invocation_id)
                .fetch_optional(&mut *conn)
                .await?;
        if let Some(id) = exists {
            return Err(EngineError::Conflict(format!(
                "invocation `{}` of this caller kind already has route `{id}`",
                request.caller.invocation_id
            )));
        }
        let id = store::new_id("rt", now);
        let options = options_for(conn, pending, &profile, &id, now).await?;
        let transition = start(&options).map_err(|e| EngineError::Conflict(e.to_string()))?;
        let route = RouteRow {
            id: id.clone(),
            profile_id: profile.id.clone(),
            caller: request.caller.clone(),
            title: request.title.clone(),
            state: transition.next.clone(),
            durable_error: None,
            created_at: now,
            updated_at: now,
        };
        pending.insert_route(&route, &profile);
        let writes = &mut pending.writes;
        writes.history(store::HistoryInsert {
            route_id: &id,
            at: now,
            event: EventKind::Started,
            from: None,
            next: &transition.next,
            profile_revision: profile.revision,
            decision_json: None,
            classification_json: None,
        });
        if let Some(a) = transition.next.attempt() {
            let dispatcher = target_of(&profile, &transition.next.candidate().id)
                .map_or(DispatcherKind::External, |t| t.dispatcher);
            writes.insert_dispatch(store::DispatchInsert {
                route_id: &id,
                attempt: a.number,
                candidate_id: &transition.next.candidate().id,
                kind: a.kind,
                dispatcher,
                generation: transition.next.generation(),
                at: now,
            });
        }
        Ok((route, profile, transition))
    }

    /// A route in a list.
    pub async fn route_summary(&self, id: &str) -> Result<RouteSummary, EngineError> {
        let mut conn = self.pool.acquire().await?;
        let route = store::load_route(&mut conn, id)
            .await?
            .ok_or_else(|| EngineError::RouteNotFound(id.to_owned()))?;
        let name: String = sqlx::query_scalar("SELECT name FROM profiles WHERE id = ?")
            .bind(&route.profile_id)
            .fetch_optional(&mut *conn)
            .await?
            .unwrap_or_default();
        let mut summary = store::summary_of(&route, name);
        if summary.durable_error.is_none() {
            summary.durable_error = self.durable_error(id);
        }
        Ok(summary)
    }

    pub async fn route_detail(&self, id: &str) -> Result<RouteDetail, EngineError> {
        let route = self.route_summary(id).await?;
        let mut conn = self.pool.acquire().await?;
        Ok(RouteDetail {
            route,
            history: store::load_history(&mut conn, id).await?,
            dispatches: store::load_dispatches(&mut conn, id).await?,
        })
    }

    pub async fn list_routes(
        &self,
        filter: &policy::api::RouteFilter,
    ) -> Result<Vec<RouteSummary>, EngineError> {
        let mut conn = self.pool.acquire().await?;
        let mut routes = store::list_routes(&mut conn, filter).await?;
        for r in &mut routes {
            if r.durable_error.is_none() {
                r.durable_error = self.durable_error(&r.id);
            }
        }
        Ok(routes)
    }

    /// A person's action, fenced by `expected_generation`. A stale or disallowed one is a
    /// `Conflict` with the current snapshot; a repeated cancel is `Applied` (idempotent).
    pub async fn perform_action(
        &self,
        route_id: &str,
        request: ManualActionRequest,
    ) -> Result<ActionOutcome, EngineError> {
        let event = RouteEvent::Manual {
            action: request.action,
            expected_generation: request.expected_generation,
        };
        match self.submit(route_id, Input::Event(event)).await {
            Ok(applied) => Ok(ActionOutcome::Applied(applied.snapshot)),
            Err(EngineError::Rejected { snapshot, .. }) => Ok(ActionOutcome::Conflict(*snapshot)),
            Err(e) => Err(e),
        }
    }

    // --------------------------------------------------------------------------------------------
    // Dispatch
    // --------------------------------------------------------------------------------------------

    /// Decides whether the pending attempt at `generation` may start now (holding it behind an
    /// open circuit or another route's probe)
    /// and, if it may, recording it as started, in one step through the writer task.
    async fn begin(&self, route_id: &str, generation: u64, candidate_id: &str) -> Result<Begun, EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(Job::Begin {
            route_id: route_id.to_owned(),
            generation,
            candidate_id: candidate_id.to_owned(),
            reply,
        })?;
        answer.await.map_err(|_| EngineError::Task)?
    }

    /// Re-runs the dispatch gate for a held attempt (the scheduler calls this).
    pub(crate) async fn recheck_hold(&self, route_id: &str, generation: u64) -> Result<(), EngineError> {
        let mut conn = self.pool.acquire().await?;
        let route = store::load_route(&mut conn, route_id).await?;
        drop(conn);
        let Some(route) = route else { return Ok(()) };
        let pending = route
            .state
            .attempt()
            .filter(|a| a.dispatch == DispatchState::Pending && route.state.generation() == generation);
        if let Some(a) = pending {
            let effect = RouteEffect::BeginDispatch {
                candidate_id: route.state.candidate().id.clone(),
                candidate_index: route.state.candidate().index,
                attempt: a.number,
                kind: a.kind,
                generation,
            };
            self.run_effects(route_id, vec![effect], route.state, None).await;
        } else {
            sqlx::query("DELETE FROM timers WHERE route_id = ? AND kind = 'circuit_hold' AND generation = ?")
                .bind(route_id)
                .bind(store::gen_i64(generation))
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }

    async fn candidate_options(&self, route_id: &str) -> Result<Vec<CandidateOption>, EngineError> {
        let now = self.now();
        let mut conn = self.pool.acquire().await?;
        let mut reads = Pending::default();
        let (_, profile) = route_and_profile(&mut conn, &mut reads, route_id).await?;
        options_for(&mut conn, &mut reads, &profile, route_id, now).await
    }

    async fn release_leases(&self, route_id: &str) -> Result<(), EngineError> {
        let _writer = self.write.lock().await;
        let now = self.now();
        let done = sqlx::query(
            "UPDATE circuits SET state = 'open', probe_route_id = NULL, updated_at = ? \
             WHERE probe_route_id = ? AND state = 'probing'",
        )
        .bind(ts(now))
        .bind(route_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() > 0 {
            release_holds(&self.pool, now).await?;
            self.wake();
        }
        Ok(())
    }

    fn abort(&self, route_id: &str, attempt: u32) {
        if let Some((h, _)) = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(route_id.to_owned(), attempt))
        {
            h.abort();
        }
    }

    /// Waits until every simulated report that is due by the engine's clock has been applied
    /// (its task has finished), yielding meanwhile. A report travels through several tasks
    /// (its own, the writer's), so after moving a manual clock a test calls this instead of
    /// guessing how many yields that takes.
    pub async fn settle_simulated(&self) {
        // Bounded, so a report stuck on a broken store cannot hang a caller forever.
        for _ in 0..1_000_000 {
            let now = self.now();
            let due = self
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .any(|(_, at)| *at <= now);
            if !due {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Performs a recorded-as-started attempt with the candidate's dispatcher.
    async fn launch(
        &self,
        route_id: &str,
        candidate_id: &str,
        attempt: u32,
        invocation_generation: u64,
    ) -> Result<Option<Input>, EngineError> {
        let mut conn = self.pool.acquire().await?;
        let (route, profile) = route_and_profile(&mut conn, &mut Pending::default(), route_id).await?;
        let Some(target) = profile.targets.iter().find(|t| t.id == candidate_id).cloned() else {
            tracing::warn!(
                route_id,
                candidate_id,
                "candidate has no target; waiting for a report"
            );
            return Ok(None);
        };
        match target.dispatcher {
            DispatcherKind::Simulated => {}
            other => {
                // acp and http adapters are not built yet; like `external`, the attempt waits
                // for evidence or a result over the API.
                tracing::info!(route_id, attempt, dispatcher = %other, "dispatched; waiting for a report");
                return Ok(None);
            }
        }
        let ordinal: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM dispatches WHERE route_id = ? AND candidate_id = ? AND attempt <= ?",
        )
        .bind(route_id)
        .bind(candidate_id)
        .bind(attempt)
        .fetch_one(&mut *conn)
        .await?;
        let now = self.now();
        sqlx::query(
            "INSERT INTO simulated_launches (route_id, attempt, invocation_generation, launched_at) VALUES (?, ?, ?, ?)",
        )
        .bind(route_id)
        .bind(attempt)
        .bind(store::gen_i64(invocation_generation))
        .bind(ts(now))
        .execute(&mut *conn)
        .await?;
        drop(conn);
        let index = usize::try_from(ordinal.max(1) - 1).unwrap_or(0);
        let Some(script_step) = target.script.get(index).or(target.script.last()).cloned() else {
            return Ok(None); // no script: hang
        };
        let report = {
            let target = target.clone();
            let invocation_id = route.caller.invocation_id.clone();
            move |at: DateTime<Utc>| -> Option<Input> {
                match script_step.outcome {
                    SimulatedOutcome::Hang => None,
                    SimulatedOutcome::Succeed => Some(Input::Event(RouteEvent::Succeeded {
                        generation: invocation_generation,
                    })),
                    SimulatedOutcome::Fail => {
                        let mut env = script_step
                            .envelope
                            .as_ref()
                            .and_then(|v| Envelope::from_value(v).ok())
                            .unwrap_or_default();
                        env.invocation_id = Some(invocation_id);
                        env.generation = Some(invocation_generation);
                        env.occurred_at = Some(at);
                        if env.provider_id.is_none() {
                            env.provider_id.clone_from(&target.provider_id);
                        }
                        if env.model_id.is_none() {
                            env.model_id.clone_from(&target.model_id);
                        }
                        Some(Input::Evidence(Box::new(env)))
                    }
                }
            }
        };
        if script_step.after_seconds == 0 {
            return Ok(report(now));
        }
        let engine = self.arc();
        let key = (route_id.to_owned(), attempt);
        let route_id = route_id.to_owned();
        let due =
            now + TimeDelta::seconds(i64::try_from(script_step.after_seconds).unwrap_or(i64::MAX / 1000));
        let handle = tokio::spawn(async move {
            engine.clock.sleep_until(due).await;
            if let Some(input) = report(engine.now()) {
                if let Err(e) = engine.clone().submit_boxed(route_id.clone(), input).await {
                    tracing::debug!(route_id, error = %e, "simulated report not applied");
                }
            }
            engine
                .running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(route_id, attempt));
        });
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (handle.abort_handle(), due));
        Ok(None)
    }

    // --------------------------------------------------------------------------------------------
    // Restart reconciliation
    // --------------------------------------------------------------------------------------------

    /// Applies `Restarted` to every open route, once, at boot: re-arms waits, re-begins
    /// provably unstarted attempts, re-evaluates switching routes, and sends started,
    /// unsettled attempts to `action_required` (`ambiguous_dispatch`). Probe leases of the
    /// previous process are released (their probes are ambiguous).
    pub async fn reconcile(&self) -> Result<ReconcileReport, EngineError> {
        let now = self.now();
        {
            let _writer = self.write.lock().await;
            let mut conn = self.pool.acquire().await?;
            sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
            let r: Result<(), sqlx::Error> = async {
                sqlx::query(
                    "UPDATE circuits SET state = 'open', probe_route_id = NULL, updated_at = ? WHERE state = 'probing'",
                )
                .bind(ts(now))
                .execute(&mut *conn)
                .await?;
                sqlx::query("DELETE FROM timers WHERE kind = 'circuit_hold'")
                    .execute(&mut *conn)
                    .await?;
                // Waits are re-armed by their rows; restore any that is missing.
                sqlx::query(
                    "INSERT OR IGNORE INTO timers (route_id, kind, generation, due_ms) \
                     SELECT id, 'deadline', generation, deadline_ms FROM routes \
                     WHERE state IN ('waiting_for_reset', 'retry_wait') AND deadline_ms IS NOT NULL",
                )
                .execute(&mut *conn)
                .await?;
                Ok(())
            }
            .await;
            finish(&mut conn, r.is_ok()).await?;
            r?;
        }
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM routes WHERE state IN ('waiting_for_reset', 'retry_wait')",
        )
        .fetch_one(&self.pool)
        .await?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM routes WHERE state IN ('active', 'retrying', 'switching') ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut report = ReconcileReport {
            rearmed: u64::try_from(waiting).unwrap_or(0),
            ..ReconcileReport::default()
        };
        // In batches: one transaction per batch keeps 100,000 routes within seconds.
        for chunk in ids.chunks(256) {
            let outcomes = self.restart_batch(chunk).await?;
            for (id, outcome) in outcomes {
                match outcome {
                    TxOutcome::Committed {
                        prev,
                        transition,
                        kind,
                        release_holds,
                        ..
                    } => {
                        report.ambiguous += u64::from(prev.has_started_dispatch());
                        self.after_commit(&id, &prev, &transition, kind, release_holds);
                        self.run_effects(&id, transition.effects, transition.next, None)
                            .await;
                    }
                    TxOutcome::Unchanged { state, effects, .. } => {
                        report.redispatched += u64::from(!effects.is_empty());
                        self.run_effects(&id, effects, state, None).await;
                    }
                    TxOutcome::Rejected { .. } => {}
                }
            }
        }
        self.wake();
        Ok(report)
    }

    async fn restart_batch(&self, ids: &[String]) -> Result<Vec<(String, TxOutcome)>, EngineError> {
        let _writer = self.write.lock().await;
        let now = self.now();
        let mut conn = self.pool.acquire().await?;
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        let mut pending = Pending::default();
        let r: Result<Vec<(String, TxOutcome)>, EngineError> = async {
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            pending.preload(&mut conn, &refs).await?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let o = self
                    .transact(
                        &mut conn,
                        &mut pending,
                        id,
                        Input::Event(RouteEvent::Restarted),
                        now,
                    )
                    .await?;
                out.push((id.clone(), o));
            }
            pending.flush(&mut conn, now).await?;
            Ok(out)
        }
        .await;
        finish(&mut conn, r.is_ok()).await?;
        if r.is_ok() && pending.released {
            self.wake();
        }
        r
    }

    /// Circuits, for the API and the UI.
    pub async fn circuits(&self) -> Result<Vec<CircuitView>, EngineError> {
        let rows = sqlx::query(
            "SELECT key, state, open_until_ms, failures, code, probe_route_id FROM circuits ORDER BY key",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let state: String = row.try_get("state")?;
                Ok(CircuitView {
                    key: row.try_get("key")?,
                    state: match state.as_str() {
                        "open" => CircuitState::Open,
                        "probing" => CircuitState::Probing,
                        _ => CircuitState::Closed,
                    },
                    open_until: row.try_get::<Option<i64>, _>("open_until_ms")?.map(from_ms),
                    failures: u32::try_from(row.try_get::<i64, _>("failures")?).unwrap_or(0),
                    code: row.try_get("code")?,
                    probe_route_id: row.try_get("probe_route_id")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(EngineError::from)
    }
}

/// What [`Engine::reconcile`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Waits whose timers are armed.
    pub rearmed: u64,
    /// Routes whose unstarted attempt was begun again, or whose switching was re-evaluated.
    pub redispatched: u64,
    /// Started, unsettled attempts sent to `action_required`.
    pub ambiguous: u64,
}

/// The writer task: takes every job queued while the previous batch ran and commits them
/// together. Ends when the engine is dropped (its queue closes).
async fn write_loop(engine: Weak<Engine>, mut jobs: mpsc::UnboundedReceiver<Vec<Job>>) {
    let mut conn: Option<PoolConnection<Sqlite>> = None;
    while let Some(mut batch) = jobs.recv().await {
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(more) => batch.extend(more),
                Err(_) => break,
            }
        }
        let Some(engine) = engine.upgrade() else { return };
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(MAX_BATCH));
            engine.run_batch(&mut conn, batch).await;
            batch = rest;
        }
    }
}

/// Commits (or rolls back) the open transaction.
async fn finish(conn: &mut SqliteConnection, commit: bool) -> Result<(), EngineError> {
    if commit {
        if let Err(e) = sqlx::query("COMMIT").execute(&mut *conn).await {
            let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
            return Err(EngineError::Storage(e));
        }
    } else {
        let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
    }
    Ok(())
}

/// The target of a candidate in a profile.
fn target_of<'a>(profile: &'a Profile, candidate_id: &str) -> Option<&'a CandidateTarget> {
    profile.targets.iter().find(|t| t.id == candidate_id)
}

/// The circuit keys a target's health is tracked under.
pub(crate) fn circuit_keys(target: &CandidateTarget) -> Vec<String> {
    let Some(p) = target.provider_id.as_deref() else {
        return Vec::new();
    };
    let mut keys = vec![format!("provider:{p}"), format!("account:{p}")];
    if let Some(m) = target.model_id.as_deref() {
        keys.push(format!("model:{p}/{m}"));
    }
    keys
}

/// The key a scoped failure opens.
fn scoped_key(target: &CandidateTarget, scope: Scope, verdict: &Verdict) -> Option<String> {
    let provider = target
        .provider_id
        .as_deref()
        .or(verdict.classification.provider_id.as_deref())?;
    match scope {
        Scope::Provider => Some(format!("provider:{provider}")),
        Scope::Account => Some(format!("account:{provider}")),
        Scope::Model => {
            let model = target
                .model_id
                .as_deref()
                .or(verdict.classification.model_id.as_deref())?;
            Some(format!("model:{provider}/{model}"))
        }
        Scope::Profile | Scope::Request => None,
    }
}

#[derive(Debug, Clone)]
struct CircuitRow {
    state: String,
    open_until_ms: Option<i64>,
    failures: i64,
    probe_route_id: Option<String>,
}

/// The circuits that are not closed (the only ones that hold or block anything), by key.
async fn load_open_circuits(conn: &mut SqliteConnection) -> Result<HashMap<String, CircuitRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT key, state, open_until_ms, failures, probe_route_id FROM circuits WHERE state <> 'closed'",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("key")?,
                CircuitRow {
                    state: r.try_get("state")?,
                    open_until_ms: r.try_get("open_until_ms")?,
                    failures: r.try_get("failures")?,
                    probe_route_id: r.try_get("probe_route_id")?,
                },
            ))
        })
        .collect()
}

/// Candidate eligibility for `route_id`: a candidate behind an open circuit, or behind
/// another route's probe, is ineligible.
async fn options_for(
    conn: &mut SqliteConnection,
    pending: &mut Pending,
    profile: &Profile,
    route_id: &str,
    now: DateTime<Utc>,
) -> Result<Vec<CandidateOption>, EngineError> {
    let mut out = Vec::with_capacity(profile.policy.candidates.len());
    for c in &profile.policy.candidates {
        let mut eligible = true;
        if let Some(target) = target_of(profile, &c.id) {
            for key in circuit_keys(target) {
                if let Some(row) = pending.circuit(conn, &key, now).await? {
                    let blocked = match row.state.as_str() {
                        "open" => row.open_until_ms.is_none_or(|u| u > ms(now)),
                        "probing" => row.probe_route_id.as_deref() != Some(route_id),
                        _ => false,
                    };
                    eligible &= !blocked;
                }
            }
        }
        out.push(CandidateOption {
            id: c.id.clone(),
            eligible,
        });
    }
    Ok(out)
}

async fn gate_tx(
    conn: &mut SqliteConnection,
    pending: &mut Pending,
    route: &RouteRow,
    profile: Option<&Profile>,
    generation: u64,
    candidate_id: &str,
    now: DateTime<Utc>,
) -> Result<GateVerdict, EngineError> {
    let route_id = route.id.as_str();
    let attempt_pending = route
        .state
        .attempt()
        .is_some_and(|a| a.dispatch == DispatchState::Pending);
    if route.state.generation() != generation || !attempt_pending {
        return Ok(GateVerdict::Stale);
    }
    let Some(profile) = profile else {
        return Ok(GateVerdict::Go);
    };
    let Some(target) = target_of(profile, candidate_id) else {
        return Ok(GateVerdict::Go);
    };
    let keys = circuit_keys(target);
    let mut hold_until: Option<i64> = None;
    let mut to_probe = Vec::new();
    for key in &keys {
        let Some(row) = pending.circuit(conn, key, now).await? else {
            continue;
        };
        match row.state.as_str() {
            "open" => match row.open_until_ms {
                Some(u) if u > ms(now) => hold_until = Some(hold_until.map_or(u, |h| h.max(u))),
                _ => to_probe.push(key.clone()),
            },
            "probing" if row.probe_route_id.as_deref() != Some(route_id) => {
                let u = row
                    .open_until_ms
                    .map_or(ms(now + PROBE_WAIT), |o| o.max(ms(now + PROBE_WAIT)));
                hold_until = Some(hold_until.map_or(u, |h| h.max(u)));
            }
            _ => {}
        }
    }
    if hold_until.is_none() {
        for key in &to_probe {
            pending.before_circuit_write(conn, now).await?;
            // The compare-and-set on the circuit row: exactly one route takes the lease.
            let won = sqlx::query(
                "UPDATE circuits SET state = 'probing', probe_route_id = ?, updated_at = ? WHERE key = ? AND state = 'open'",
            )
            .bind(route_id)
            .bind(ts(now))
            .bind(key)
            .execute(&mut *conn)
            .await?
            .rows_affected()
                == 1;
            if !won {
                hold_until = Some(ms(now + PROBE_WAIT));
                break;
            }
        }
    }
    match hold_until {
        None => Ok(GateVerdict::Go),
        Some(due) => {
            pending
                .writes
                .upsert_timer(route_id, "circuit_hold", generation, due);
            Ok(GateVerdict::Held)
        }
    }
}

/// Releases every held dispatch for a re-check now (a circuit closed or its probe ended).
async fn release_holds<'e, E: sqlx::Executor<'e, Database = sqlx::Sqlite>>(
    conn: E,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(store::RELEASE_HOLDS_SQL)
        .bind(ms(now))
        .execute(conn)
        .await?;
    Ok(())
}

/// Deadline in whole milliseconds, rounded up (a timer never fires before its deadline).
pub(crate) fn due_ms(deadline: DateTime<Utc>) -> i64 {
    let m = deadline.timestamp_millis();
    if deadline.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        m
    } else {
        m.saturating_add(1)
    }
}

/// Keeps the route's timer row in step with `next`. A route has a row only while it waits (a
/// deadline) or while its pending attempt may be held by a circuit (`circuit_hold`), so a
/// step from any other state has nothing to delete and skips the statement.
fn maintain_timer(writes: &mut store::Writes, route_id: &str, prev: &RouteState, next: &RouteState) {
    match next.deadline() {
        Some(d) => writes.upsert_timer(route_id, "deadline", next.generation(), due_ms(d)),
        None if prev.deadline().is_none()
            && !prev
                .attempt()
                .is_some_and(|a| a.dispatch == DispatchState::Pending) => {}
        None => writes.delete_timer(route_id),
    }
}

fn maintain_dispatches(
    writes: &mut store::Writes,
    route_id: &str,
    prev: &RouteState,
    next: &RouteState,
    kind: EventKind,
    profile: &Profile,
    now: DateTime<Utc>,
) {
    let p = prev.attempt();
    let n = next.attempt();
    if let Some(p) = p {
        if n.map(|n| n.number) != Some(p.number) {
            let outcome = match (p.dispatch, kind) {
                (_, EventKind::Succeeded) => DispatchOutcome::Succeeded,
                (DispatchState::Started, EventKind::Failed) => DispatchOutcome::Failed,
                (DispatchState::Started, EventKind::Restarted) => DispatchOutcome::Ambiguous,
                (DispatchState::Pending, _) => DispatchOutcome::Superseded,
                (DispatchState::Started, _) => DispatchOutcome::Aborted,
            };
            writes.settle_dispatch(route_id, p.number, outcome, now);
        }
    }
    if let Some(n) = n {
        let is_new = p.map(|p| p.number) != Some(n.number);
        if is_new {
            let dispatcher =
                target_of(profile, &next.candidate().id).map_or(DispatcherKind::External, |t| t.dispatcher);
            writes.insert_dispatch(store::DispatchInsert {
                route_id,
                attempt: n.number,
                candidate_id: &next.candidate().id,
                kind: n.kind,
                dispatcher,
                generation: next.generation(),
                at: now,
            });
        }
        let started_now = n.dispatch == DispatchState::Started
            && (is_new || p.is_some_and(|p| p.dispatch == DispatchState::Pending));
        if started_now {
            writes.mark_dispatch_started(route_id, n.number, next.generation(), now);
        }
    }
}

/// What [`maintain_circuits`] did and leaves to the step's batched writes.
struct CircuitChanges {
    /// The route keeps any probe lease it holds; otherwise the batched writes give its
    /// leases back.
    keeps_probing: bool,
    /// A circuit opened or closed: held dispatches must look again.
    release: bool,
}

/// Opens or closes circuits as this transition says. Giving back the route's probe leases
/// (and re-checking held dispatches) is left to the caller, which batches it with the step's
/// other writes.
///
/// The route whose scoped failure opens a circuit holds its probe lease for as long as it
/// stays on that candidate with recovery pending (its own policy's retry or reset wait is
/// the probe); every other route is held or sees the candidate as ineligible. The lease goes
/// back when the holder leaves the candidate, stops or ends; any success closes the circuit.
#[allow(clippy::too_many_arguments)]
async fn maintain_circuits(
    conn: &mut SqliteConnection,
    pending: &mut Pending,
    route_id: &str,
    prev: &RouteState,
    next: &RouteState,
    kind: EventKind,
    verdict: Option<&Verdict>,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Result<CircuitChanges, EngineError> {
    use policy::route::StateName as N;
    let target = target_of(profile, &prev.candidate().id);
    let keeps_probing = next.candidate().id == prev.candidate().id
        && matches!(next.state_name(), N::RetryWait | N::WaitingForReset | N::Retrying);
    let mut release = false;
    if kind == EventKind::Succeeded {
        if let Some(t) = target {
            for key in circuit_keys(t) {
                pending.before_circuit_write(conn, now).await?;
                let done = sqlx::query(
                    "UPDATE circuits SET state = 'closed', open_until_ms = NULL, failures = 0, code = NULL, \
                     probe_route_id = NULL, updated_at = ? WHERE key = ? AND state <> 'closed'",
                )
                .bind(ts(now))
                .bind(&key)
                .execute(&mut *conn)
                .await?;
                release |= done.rows_affected() > 0;
            }
        }
    }
    if let (EventKind::Failed, Some(v), Some(t)) = (kind, verdict, target) {
        let c = &v.classification;
        let trusted = c.class != ClassState::Unclassified && c.confidence == Confidence::High;
        if let (true, Some(scope)) = (trusted, c.scope) {
            if let Some(key) = scoped_key(t, scope, v) {
                let current = pending.circuit(conn, &key, now).await?;
                pending.before_circuit_write(conn, now).await?;
                open_circuit(conn, current, &key, route_id, v, keeps_probing, now).await?;
                release = true;
            }
        }
    }
    Ok(CircuitChanges {
        keeps_probing,
        release,
    })
}

#[allow(clippy::too_many_arguments)]
async fn open_circuit(
    conn: &mut SqliteConnection,
    current: Option<CircuitRow>,
    key: &str,
    route_id: &str,
    verdict: &Verdict,
    holder: bool,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let c = &verdict.classification;
    // A new episode (closed, or this route's probe failed) counts; failures of attempts that
    // were already in flight when it opened do not escalate the backoff.
    let (failures, already_open_until) = match &current {
        None => (1, None),
        Some(row) if row.state == "closed" => (1, None),
        Some(row) if row.state == "probing" && row.probe_route_id.as_deref() == Some(route_id) => {
            (row.failures.saturating_add(1), None)
        }
        Some(row) => (row.failures.max(1), row.open_until_ms),
    };
    let hinted = c
        .reset_at
        .filter(|r| *r > now)
        .or_else(|| {
            c.retry_after_seconds
                .and_then(|s| i64::try_from(s).ok())
                .map(|s| c.occurred_at.unwrap_or(now).min(now) + TimeDelta::seconds(s))
        })
        .filter(|r| *r > now);
    let until = hinted.unwrap_or_else(|| {
        let shift = u32::try_from(failures.saturating_sub(1).clamp(0, 7)).unwrap_or(7);
        let secs = (CIRCUIT_BASE_BACKOFF_SECS << shift).min(CIRCUIT_MAX_BACKOFF_SECS);
        now + TimeDelta::seconds(secs)
    });
    let until_ms = already_open_until.map_or(ms(until), |u| u.max(ms(until)));
    let other_holder = current
        .as_ref()
        .filter(|r| r.state == "probing" && r.probe_route_id.as_deref() != Some(route_id))
        .and_then(|r| r.probe_route_id.clone());
    let probe_keeps = other_holder.or_else(|| holder.then(|| route_id.to_owned()));
    let state = if probe_keeps.is_some() { "probing" } else { "open" };
    sqlx::query(
        "INSERT INTO circuits (key, state, open_until_ms, failures, code, probe_route_id, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET state = excluded.state, \
         open_until_ms = excluded.open_until_ms, failures = excluded.failures, code = excluded.code, \
         probe_route_id = excluded.probe_route_id, updated_at = excluded.updated_at",
    )
    .bind(key)
    .bind(state)
    .bind(until_ms)
    .bind(failures)
    .bind(c.code.map(|c| c.as_str()))
    .bind(probe_keeps)
    .bind(ts(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A route and its profile as the transaction sees them ([`Pending::route`]).
async fn route_and_profile(
    conn: &mut SqliteConnection,
    pending: &mut Pending,
    route_id: &str,
) -> Result<(RouteRow, Profile), EngineError> {
    let (route, profile) = pending
        .route(conn, route_id)
        .await?
        .ok_or_else(|| EngineError::RouteNotFound(route_id.to_owned()))?;
    let profile = profile.ok_or_else(|| EngineError::ProfileNotFound(route.profile_id.clone()))?;
    Ok((route, profile))
}
