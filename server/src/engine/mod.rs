//! The route engine: the one transition owner of every route, and what runs after each commit.
//!
//! Architecture invariants (each has a test in `server/tests/`):
//! - One transition owner. Every route change goes through the writer task ([`writer`]): in
//!   ONE transaction, read the route, `policy::route::step`, then the compare-and-set on its
//!   generation, the history row, the dispatch record, the timer row and the circuit rows
//!   ([`tx`]). A stale generation writes nothing and answers with the current snapshot. No
//!   timer or circuit row is written anywhere else: timers fire through the writer too, and a
//!   timer that no longer applies is removed in the transaction that finds out.
//! - Persist, then act. Effects ([`effects`]) run only after the commit. A timer is "armed" by
//!   its row in that same transaction; the effect only wakes the scheduler. If the commit
//!   fails, nothing is armed, launched or repeated, and the error is shown on the route.
//! - A dispatch is recorded as started (`DispatchStarted` committed) before its dispatcher
//!   ([`dispatch`]) runs it. After a restart ([`reconcile`]), provably unstarted attempts are
//!   begun again and started, unsettled ones go to `action_required` (`ambiguous_dispatch`),
//!   unless their report is already durable (a scheduled report timer).
//! - Circuits are an eligibility input ([`circuits`]; the decisions are `policy::circuit`'s):
//!   an open circuit parks a pending attempt (`dispatch_held`, a `circuit_hold` timer, the
//!   hold in the snapshot) and makes its candidate eligible only later; an expired one lets
//!   exactly one route take the probe lease (a compare-and-set on the circuit row).
//!
//! Submissions run in spawned tasks and the writer answers through channels, so a dropped
//! HTTP request can never leave the connection inside an open transaction, and effects always
//! complete.
//!
//! Durability: the database runs in WAL mode with `synchronous = FULL` (see `db.rs`): a commit
//! is on stable storage before it returns, so "persist, then act" holds against a power cut or
//! a kernel panic, not only a killed process. The crash test kills the process with SIGKILL;
//! the power-loss test (`server/tests/it/power_loss.rs`) also throws away every write that was
//! never fsynced before restarting, and no dispatch allowed to start comes back unstarted.
//! Group commit ([`writer`]) pays one `fsync` for every job of a group. The writer task reads
//! `PRAGMA synchronous` on its own connection when it takes it ([`WriteStats::synchronous`])
//! and warns in the log if its commits would not be synced.

mod circuits;
pub mod deliveries;
pub mod dispatch;
mod effects;
mod error;
mod events;
mod held;
mod input;
mod leases;
mod observe;
pub mod outbox;
mod pending;
mod plan;
mod reconcile;
pub mod replicas;
mod stop;
mod transact;
pub mod transcripts;
mod tx;
mod writer;

pub use error::EngineError;
pub use input::{Applied, AttemptUpdate, Evidence, HeldSession, Input};
pub use reconcile::ReconcileReport;
pub use stop::{StopSignal, Task};

use crate::{
    clock::Clock,
    config::Runners,
    metrics::Metrics,
    replica::ReplicaId,
    store::{audit::AuditActor, Dialect, DueTimer, Store},
};
use chrono::{DateTime, Utc};
use dispatch::Dispatchers;
use policy::{
    api::{
        ActionOutcome, CircuitView, ManualActionRequest, Profile, RouteDetail, RouteFilter, RouteSummary,
        Work, WorkRequest,
    },
    document::ValidationErrors,
    input::ValidatedStartRoute,
    route::{EventKind, RouteEvent},
    wire::{RouteEventPayload, RouteSnapshot},
};
use serde::{Deserialize, Serialize};
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex as StdMutex, Weak,
    },
};
use tokio::sync::{broadcast, mpsc, oneshot, watch, Mutex, Notify};
use tx::Stepped;
use writer::{Job, StepWork};

/// One accepted change, as the event stream sends it (`route_id` plus the policy payload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStreamEvent {
    pub route_id: String,
    #[serde(flatten)]
    pub payload: RouteEventPayload,
}

/// What a route's start carries beside its request.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Who starts it: the start's transaction writes its `route.start` audit row, so the route
    /// and the row commit together (and the row costs no commit of its own).
    pub by: Option<AuditActor>,
    /// The profile as its submitter just read it, for the check that its candidates can run
    /// the work (read again when it is another one). The start's transaction reads its own.
    pub profile: Option<Profile>,
}

/// Counters of the group-commit writer, for benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions that carried more than one job and committed.
    pub group_commits: u64,
    /// Jobs committed by those transactions.
    pub grouped_jobs: u64,
    /// Jobs that ran in a transaction of their own (a batch of one, or the fallback after a
    /// batch failed).
    pub single_jobs: u64,
    /// SQLite's `PRAGMA synchronous` on the connection the writer task commits on, as the task
    /// read it through that connection when it took it (2 = FULL: every commit is synced
    /// before anything acts on it); `None` before the writer's first job.
    pub synchronous: Option<i64>,
}

#[derive(Default)]
struct Stats {
    group_commits: AtomicU64,
    grouped_jobs: AtomicU64,
    single_jobs: AtomicU64,
    /// Transactions the writer committed.
    commits: AtomicU64,
    /// The writer connection's `PRAGMA synchronous` plus one (0: not read yet).
    synchronous: AtomicU64,
}

/// The engine. Cheap to share (`Arc`).
pub struct Engine {
    store: Store,
    clock: Arc<dyn Clock>,
    /// The agents and endpoints of the server's configuration file (reloadable).
    runners: Runners,
    dispatchers: Dispatchers,
    /// Wakes the scheduler (a new or earlier timer, released holds).
    wake: Notify,
    /// Wakes the notification delivery worker (a commit queued events in the outbox).
    outbox: Notify,
    /// One writer at a time in this process (SQLite has one anyway; waiting here is cheaper
    /// than SQLite's busy loop): the writer task and profile writes take it.
    write: Mutex<()>,
    /// Route events for live pages: sent after each commit on SQLite, by the event log reader
    /// ([`events`]) on PostgreSQL.
    events: broadcast::Sender<RouteStreamEvent>,
    /// PostgreSQL: the horizon below which the event log reader has sent every row (see
    /// [`Engine::events_delivered`]); 0 until the reader has its starting point.
    delivered: watch::Sender<u64>,
    /// Whether the event log reader was started (it needs the runtime).
    reader: AtomicBool,
    /// Live updates of running attempts.
    updates: broadcast::Sender<AttemptUpdate>,
    /// What agents did in recent attempts, for the route page (in memory, bounded).
    transcripts: transcripts::Transcripts,
    /// Durable-write failures by route, also when they could not be written themselves.
    durable_errors: StdMutex<HashMap<String, String>>,
    /// The writer task's queue, started on first use (inside the runtime), and started again
    /// should the task ever have died.
    jobs: StdMutex<Option<mpsc::UnboundedSender<Vec<Job>>>>,
    stats: Stats,
    checkpointing: AtomicBool,
    /// This server's metrics (a recorder of its own).
    metrics: Metrics,
    /// The engine's own stop: its phase and the tasks it awaits ([`stop`]).
    stop: stop::Stop,
    me: Weak<Engine>,
}

impl Engine {
    /// An engine with no agents or endpoints configured.
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> Arc<Engine> {
        Engine::with_runners(store, clock, Runners::none())
    }

    /// An engine that runs the agents and endpoints of `runners`, its metrics naming this
    /// process's default replica id.
    pub fn with_runners(store: Store, clock: Arc<dyn Clock>, runners: Runners) -> Arc<Engine> {
        let metrics = Metrics::new(&ReplicaId::of_this_process());
        Engine::with_metrics(store, clock, runners, metrics)
    }

    /// [`Engine::with_runners`] recording into `metrics` (`serve` names its replica there).
    pub fn with_metrics(
        store: Store,
        clock: Arc<dyn Clock>,
        runners: Runners,
        metrics: Metrics,
    ) -> Arc<Engine> {
        let (events, _) = broadcast::channel(1024);
        let (updates, _) = broadcast::channel(1024);
        let engine = Arc::new_cyclic(|me| Engine {
            updates,
            transcripts: Default::default(),
            dispatchers: Dispatchers::new(store.clone()),
            store,
            clock,
            runners,
            wake: Notify::new(),
            outbox: Notify::new(),
            write: Mutex::new(()),
            events,
            delivered: watch::Sender::new(0),
            reader: AtomicBool::new(false),
            durable_errors: StdMutex::new(HashMap::new()),
            jobs: StdMutex::new(None),
            stats: Stats::default(),
            checkpointing: AtomicBool::new(false),
            metrics,
            stop: Default::default(),
            me: me.clone(),
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            engine.start_reader();
        }
        engine
    }

    /// Starts the event log reader once (PostgreSQL; nothing on SQLite), with the engine or,
    /// for an engine built outside the runtime, on its first subscriber.
    fn start_reader(&self) {
        if self.store.dialect() == Dialect::Postgres && !self.reader.swap(true, Ordering::AcqRel) {
            events::start(&self.arc());
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// This server's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The server configuration's agents and endpoints.
    pub fn runners(&self) -> &Runners {
        &self.runners
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Wakes the scheduler (after a clock change, a new timer or released holds).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub(crate) fn wake_handle(&self) -> &Notify {
        &self.wake
    }

    /// What wakes the notification delivery worker (`crate::notify::worker`): notified after
    /// every commit that queued events in the outbox.
    pub fn outbox_signal(&self) -> &Notify {
        &self.outbox
    }

    /// The in-process writer lock: profile writes take it too, so SQLite never sees two writers
    /// from this process.
    pub(crate) async fn writer(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write.lock().await
    }

    /// Every accepted change, of this replica and (on PostgreSQL) every other one on the same
    /// database, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<RouteStreamEvent> {
        self.start_reader();
        self.events.subscribe()
    }

    /// PostgreSQL: waits (a few seconds at most) until the event log reader has its starting
    /// point, so that nothing this engine commits afterwards can be before it.
    async fn events_ready(&self) {
        if self.store.dialect() != Dialect::Postgres {
            return;
        }
        self.start_reader();
        let mut delivered = self.delivered.subscribe();
        let ready = delivered.wait_for(|horizon| *horizon > 0);
        if tokio::time::timeout(events::READY_WAIT, ready).await.is_err() {
            tracing::warn!(
                "the event log reader has not started; live pages may miss this replica's first changes"
            );
        }
    }

    /// Waits until every change committed before the call, by any replica, has been sent to
    /// this engine's subscribers. SQLite: at once (each is sent right after its commit).
    /// PostgreSQL: until the event log reader has read past every transaction that had
    /// finished when it was called; that needs the database (and no transaction on the server
    /// that stays open for long), so callers bound the wait.
    pub async fn events_delivered(&self) -> Result<(), EngineError> {
        if self.store.dialect() != Dialect::Postgres {
            return Ok(());
        }
        self.start_reader();
        let next = self.store.next_xact_id().await?;
        let mut delivered = self.delivered.subscribe();
        delivered
            .wait_for(|horizon| *horizon >= next)
            .await
            .map_err(|_| EngineError::Task)?;
        Ok(())
    }

    /// Where a gateway call listens to its route's `http` attempts (the dispatcher's one seam
    /// toward a caller holding a client's connection: `dispatch::http::LiveCalls`).
    pub(crate) fn live_calls(&self) -> &dispatch::http::LiveCalls {
        self.dispatchers.live()
    }

    /// Every attempt in flight is stopped and its agent's process group is gone when this
    /// returns (bounded; see `Dispatcher::shut_down`). The engine's stop calls it after the
    /// scheduler ended and before the replica retires, so no other replica takes up a route
    /// whose agent still runs here.
    async fn stop_attempts(&self) {
        for dispatcher in self.dispatchers.all() {
            dispatcher.shut_down().await;
        }
    }

    /// Live updates of running attempts.
    pub fn subscribe_updates(&self) -> broadcast::Receiver<AttemptUpdate> {
        self.updates.subscribe()
    }

    /// Sends a running attempt's update to whoever listens, and folds it into the attempt's
    /// transcript (kept in memory, bounded: [`transcripts`]).
    pub(crate) fn forward_update(&self, update: AttemptUpdate) {
        self.transcripts.record(
            &update.route_id,
            update.attempt,
            update.generation,
            &update.update,
        );
        if self.updates.receiver_count() > 0 {
            let _ = self.updates.send(update);
        }
    }

    /// What the group-commit writer has done so far.
    pub fn write_stats(&self) -> WriteStats {
        WriteStats {
            group_commits: self.stats.group_commits.load(Ordering::Relaxed),
            grouped_jobs: self.stats.grouped_jobs.load(Ordering::Relaxed),
            single_jobs: self.stats.single_jobs.load(Ordering::Relaxed),
            synchronous: match self.stats.synchronous.load(Ordering::Relaxed) {
                0 => None,
                n => i64::try_from(n - 1).ok(),
            },
        }
    }

    /// The dispatchers' way back to this engine (see [`dispatch::Port`]).
    fn port(&self) -> Weak<dyn dispatch::Port> {
        self.me.clone()
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
        tokio::spawn(async move {
            let stepped = engine.step(&route_id, StepWork::Input(input)).await;
            engine.settle(&route_id, stepped).await
        })
        .await
        .map_err(|_| EngineError::Task)?
    }

    /// Fires due timers as one delivery to the writer, so they share group commits however the
    /// runtime schedules things; then performs each one's effects. One answer per timer, in
    /// order.
    pub async fn fire_all(&self, timers: Vec<DueTimer>) -> Vec<Result<Applied, EngineError>> {
        let work = timers
            .into_iter()
            .map(|t| (t.route_id.clone(), StepWork::Fire(t)))
            .collect();
        self.deliver(work).await
    }

    /// Submits inputs to many routes as one delivery (one answer per input, in order).
    pub async fn submit_all(&self, inputs: Vec<(String, Input)>) -> Vec<Result<Applied, EngineError>> {
        let work = inputs
            .into_iter()
            .map(|(id, input)| (id, StepWork::Input(input)))
            .collect();
        self.deliver(work).await
    }

    async fn deliver(&self, work: Vec<(String, StepWork)>) -> Vec<Result<Applied, EngineError>> {
        let engine = self.arc();
        let n = work.len();
        let all = tokio::spawn(async move {
            let mut jobs = Vec::with_capacity(work.len());
            let mut answers = Vec::with_capacity(work.len());
            for (route_id, work) in work {
                let (reply, answer) = oneshot::channel();
                jobs.push(Job::Step {
                    route_id: route_id.clone(),
                    work,
                    reply,
                });
                answers.push((route_id, answer));
            }
            // If the writer is gone, every answer below reports it.
            let _ = engine.enqueue(jobs);
            futures_util::future::join_all(answers.into_iter().map(|(route_id, answer)| {
                let engine = engine.clone();
                async move {
                    let stepped = answer.await.unwrap_or(Err(EngineError::Task));
                    engine.settle(&route_id, stepped).await
                }
            }))
            .await
        })
        .await;
        all.unwrap_or_else(|_| (0..n).map(|_| Err(EngineError::Task)).collect())
    }

    /// One step through the writer task (committed in a group with whatever else is queued).
    async fn step(&self, route_id: &str, work: StepWork) -> Result<Stepped, EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Step {
            route_id: route_id.to_owned(),
            work,
            reply,
        }])?;
        answer.await.map_err(|_| EngineError::Task)?
    }

    /// Queues jobs as one delivery: the writer sees all of them at once.
    fn enqueue(&self, batch: Vec<Job>) -> Result<(), EngineError> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if self.writer_closed() {
            return Err(EngineError::Stopping);
        }
        let tx = match jobs.as_ref() {
            Some(tx) if !tx.is_closed() => tx,
            _ => {
                let (tx, rx) = mpsc::unbounded_channel();
                self.writer_started(tokio::spawn(writer::write_loop(self.me.clone(), rx)));
                jobs.insert(tx)
            }
        };
        tx.send(batch).map_err(|_| EngineError::Task)
    }

    // --------------------------------------------------------------------------------------------
    // Routes
    // --------------------------------------------------------------------------------------------

    /// Starts routed work on a profile for a caller.
    pub async fn start_route(&self, request: ValidatedStartRoute) -> Result<RouteSummary, EngineError> {
        self.start(request, StartOptions::default()).await
    }

    /// Starts routed work as [`Engine::start_route`] does, with the start's audit row and the
    /// profile its submitter read already (see [`StartOptions`]).
    pub async fn start(
        &self,
        request: ValidatedStartRoute,
        options: StartOptions,
    ) -> Result<RouteSummary, EngineError> {
        self.accepting()?;
        let engine = self.arc();
        tokio::spawn(async move { engine.start_here(request, options).await })
            .await
            .map_err(|_| EngineError::Task)?
    }

    async fn start_here(
        &self,
        request: ValidatedStartRoute,
        options: StartOptions,
    ) -> Result<RouteSummary, EngineError> {
        let profile = match options.profile.filter(|p| p.id == request.profile_id()) {
            Some(profile) => profile,
            None => self
                .store
                .profile(request.profile_id())
                .await?
                .ok_or_else(|| EngineError::ProfileNotFound(request.profile_id().to_owned()))?,
        };
        let runs = runs(request.caller_kind());
        self.check_work(profile, request.work().cloned(), runs).await?;
        let ((route, profile, transition, plan), chain) = {
            let (reply, answer) = oneshot::channel();
            self.enqueue(vec![Job::Start {
                request,
                by: options.by,
                reply,
            }])?;
            answer.await.map_err(|_| EngineError::Task)??
        };
        self.after_commit(&route.id, None, &transition, EventKind::Started, false);
        let latest = self
            .run_effects(&route.id, plan.acts, transition.next.clone(), chain, None)
            .await;
        let mut summary = route.summary(profile.name);
        summary.snapshot = latest.snapshot();
        Ok(summary)
    }

    /// The next prompt of the route's logical session (a new prompt generation), with new work
    /// or the stored one again, fenced by `expected_generation`.
    pub async fn submit_work(&self, route_id: &str, request: WorkRequest) -> Result<Applied, EngineError> {
        self.accepting()?;
        if let Some(work) = &request.work {
            let problems = policy::input::check_work(work, "work");
            if !problems.is_empty() {
                return Err(EngineError::Invalid(ValidationErrors { errors: problems }));
            }
            let (route, profile) = self
                .store
                .route_and_profile(route_id)
                .await?
                .ok_or_else(|| EngineError::RouteNotFound(route_id.to_owned()))?;
            let profile = profile.ok_or_else(|| EngineError::ProfileNotFound(String::new()))?;
            self.check_work(profile, Some(work.clone()), runs(route.caller.kind))
                .await?;
        }
        self.submit(
            route_id,
            Input::Work {
                expected_generation: request.expected_generation,
                work: request.work.map(Box::new),
            },
        )
        .await
    }

    /// Whether the profile's candidates can run `work` (paths are resolved off the async
    /// threads; not for a route whose caller runs its attempts on its own machine).
    async fn check_work(
        &self,
        profile: Profile,
        work: Option<Work>,
        runs: crate::work::Runs,
    ) -> Result<(), EngineError> {
        let config = self.runners.current();
        tokio::task::spawn_blocking(move || crate::work::check_fits(&profile, work.as_ref(), &config, runs))
            .await
            .map_err(|_| EngineError::Task)?
            .map_err(EngineError::Invalid)
    }

    /// A route in a list.
    pub async fn route_summary(&self, id: &str) -> Result<RouteSummary, EngineError> {
        let mut summary = self
            .store
            .route_summary(id)
            .await?
            .ok_or_else(|| EngineError::RouteNotFound(id.to_owned()))?;
        self.add_durable_error(&mut summary);
        Ok(summary)
    }

    /// A route with its history and dispatch records.
    /// What the agents of `id`'s recent attempts did, oldest attempt first (this process's
    /// memory: see [`transcripts`]).
    pub async fn transcripts(
        &self,
        id: &str,
    ) -> Result<Vec<policy::transcript::AttemptTranscript>, EngineError> {
        // Read the route first, so an unknown id answers as one.
        self.route_summary(id).await?;
        Ok(self.transcripts.of(id))
    }

    pub async fn route_detail(&self, id: &str) -> Result<RouteDetail, EngineError> {
        let mut detail = self
            .store
            .route_detail(id)
            .await?
            .ok_or_else(|| EngineError::RouteNotFound(id.to_owned()))?;
        self.add_durable_error(&mut detail.route);
        Ok(detail)
    }

    pub async fn list_routes(&self, filter: &RouteFilter) -> Result<Vec<RouteSummary>, EngineError> {
        let mut routes = self.store.list_routes(filter).await?;
        for r in &mut routes {
            self.add_durable_error(r);
        }
        Ok(routes)
    }

    fn add_durable_error(&self, summary: &mut RouteSummary) {
        if summary.durable_error.is_none() {
            summary.durable_error = self
                .durable_errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&summary.id)
                .cloned();
        }
    }

    /// A person's action, fenced by `expected_generation`. A stale or disallowed one is a
    /// `Conflict` with the current snapshot; a repeat of the action that is already in force
    /// is `Applied` (idempotent).
    pub async fn perform_action(
        &self,
        route_id: &str,
        request: ManualActionRequest,
    ) -> Result<ActionOutcome, EngineError> {
        self.accepting()?;
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

    /// Circuits, for the API and the UI.
    pub async fn circuits(&self) -> Result<Vec<CircuitView>, EngineError> {
        Ok(self.store.circuits().await?)
    }
}

impl dispatch::Port for Engine {
    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn submit_all(
        &self,
        inputs: Vec<(String, Input)>,
    ) -> dispatch::DispatchFuture<'_, Vec<Result<Applied, EngineError>>> {
        Box::pin(Engine::submit_all(self, inputs))
    }

    fn update(&self, update: AttemptUpdate) {
        self.forward_update(update);
    }

    fn snapshot<'a>(
        &'a self,
        route_id: &'a str,
    ) -> dispatch::DispatchFuture<'a, Result<RouteSnapshot, EngineError>> {
        Box::pin(async move { Ok(self.route_summary(route_id).await?.snapshot) })
    }
}

/// Who runs the attempts of a route whose caller is `caller`.
fn runs(caller: policy::api::CallerKind) -> crate::work::Runs {
    if caller.runs_attempts() {
        crate::work::Runs::Caller
    } else {
        crate::work::Runs::Server
    }
}
