//! The one writer task and its group commit.
//!
//! All route writes go through one task that owns one connection ([`crate::store::Writer`]):
//! SQLite serializes writers anyway, and a pool of connections taking turns only adds lock
//! waits. Each step is a [`Job`] on the writer's queue; the writer takes every job queued while
//! its previous transaction ran (up to [`MAX_BATCH`]) and runs them in ONE transaction, each
//! job still with its own compare-and-set and history row, in queue order, seeing the jobs
//! before it. A job the route machine rejects (a stale generation) writes nothing and is
//! answered `Rejected`; the others commit. If any job fails (a storage error, a missing route)
//! or the commit fails, the whole transaction is rolled back and every job of the batch runs
//! again alone, in its own transaction, exactly as a single step would: one job can neither sink
//! nor half-commit another. Answers (and so effects, timer wake-ups and events) go out only
//! after the commit, so "persist, then act" holds for every job of a group.
//!
//! Why: a commit costs about as much as a whole step's statements, and with `synchronous =
//! FULL` (`db.rs`) far more: it waits for an `fsync` of the WAL. Under load (many routes, a
//! burst of due timers) grouping pays that `fsync` once for every job of the group, so a
//! transition costs less than a bare one-row commit; a lone step still pays one commit.
//!
//! Every commit here is synced before its answers go out: each group carries dispatch starts,
//! a person's answered actions or fired timers that launch work, and one `fsync` per group is
//! what makes "persist, then act" hold across a power cut. No job kind is exempt: splitting
//! history-only bookkeeping into unsynced commits would add commits, not remove `fsync`s.
//!
//! Jobs travel in vectors: the jobs of one vector reach the writer together (a scheduler pass's
//! due timers, say) and so share a group commit however the runtime schedules the submitters.

use super::{
    dispatch::Launched,
    pending::Pending,
    tx::{self, Chain, LeaseOp, Started, Stepped},
    Engine, EngineError, Input,
};
use crate::store::{
    audit::AuditActor,
    notify::{Claimed, Settlement},
    DueTimer, Lease, Writer,
};
use chrono::TimeDelta;
use chrono::{DateTime, Utc};
use policy::input::ValidatedStartRoute;
use std::sync::{atomic::Ordering, Weak};
use tokio::sync::{mpsc, oneshot};

/// Most jobs one group commit takes. Large enough to absorb a burst of due timers, small
/// enough that one transaction never holds the write lock for long.
pub(super) const MAX_BATCH: usize = 256;

/// Writer commits between two WAL checkpoints (see [`Engine::committed`]).
const CHECKPOINT_EVERY: u64 = 32;

/// What a job does to one route.
pub(super) enum StepWork {
    /// Apply an input (an event or evidence), then the dispatch it asks to begin.
    Input(Input),
    /// The dispatch gate for the pending attempt at this generation.
    Begin { generation: u64 },
    /// Switching at this generation: evaluate the candidates and pick one.
    Evaluate { generation: u64 },
    /// A due timer.
    Fire(DueTimer),
    /// A dispatcher launched the attempt started at `generation`: record it, apply or arm its
    /// report.
    Launched {
        attempt: u32,
        generation: u64,
        launched: Launched,
    },
}

/// A unit of work for the writer task, with the channel its submitter waits on.
pub(super) enum Job {
    Step {
        route_id: String,
        work: StepWork,
        reply: oneshot::Sender<Result<Stepped, EngineError>>,
    },
    Start {
        request: ValidatedStartRoute,
        /// Who starts it, for the audit row written with it.
        by: Option<AuditActor>,
        reply: oneshot::Sender<Result<(Started, Chain), EngineError>>,
    },
    /// Restart reconciliation's global part: restore missing wait timers and give back the
    /// previous process's probe leases. Answers whether any lease came back.
    Reconcile {
        /// Only what replicas that are gone left (several replicas on one database); `false`:
        /// everything, as the one process on its database restarting.
        orphans_only: bool,
        reply: oneshot::Sender<Result<bool, EngineError>>,
    },
    /// An external runner claims the oldest started `external` attempt nobody holds.
    Claim {
        runner: String,
        seconds: u64,
        /// A claim limited to this route (its caller runs its attempts: `editor`).
        route: Option<String>,
        /// Acknowledged at once (the runner starts the work now).
        acknowledge: bool,
        reply: oneshot::Sender<Result<Option<Lease>, EngineError>>,
    },
    /// An external runner acknowledges or renews its lease on a route's attempt.
    Lease {
        route_id: String,
        op: LeaseOp,
        reply: oneshot::Sender<Result<Option<Lease>, EngineError>>,
    },
    /// The notification worker settles attempts and claims due deliveries (`deliveries.rs`).
    Deliveries {
        settle: Vec<Settlement>,
        claim: Option<DeliveryClaim>,
        reply: oneshot::Sender<Result<DeliveryWrites, EngineError>>,
    },
}

/// Deliveries to lease for the worker.
#[derive(Debug, Clone)]
pub struct DeliveryClaim {
    /// The lease's token (the settlements of these deliveries carry it).
    pub token: String,
    /// How long the lease lasts from the transaction's time.
    pub lease: TimeDelta,
    /// Most deliveries to lease.
    pub limit: u32,
}

/// What one worker job wrote.
#[derive(Debug, Default)]
pub struct DeliveryWrites {
    /// The settlements not written, as (channel, event): their lease was not their token's any
    /// more (another worker has the delivery).
    pub lost: Vec<(String, i64)>,
    /// What the claim leased, oldest first.
    pub claimed: Vec<Claimed>,
}

/// A job's result, before it is sent back.
// (Short-lived and moved once, like `TxOutcome`.)
#[allow(clippy::large_enum_variant)]
enum Done {
    Step(Result<Stepped, EngineError>),
    Start(Result<(Started, Chain), EngineError>),
    Reconcile(Result<bool, EngineError>),
    Lease(Result<Option<Lease>, EngineError>),
    Deliveries(Result<DeliveryWrites, EngineError>),
}

impl Done {
    fn is_ok(&self) -> bool {
        match self {
            Done::Step(r) => r.is_ok(),
            Done::Start(r) => r.is_ok(),
            Done::Reconcile(r) => r.is_ok(),
            Done::Lease(r) => r.is_ok(),
            Done::Deliveries(r) => r.is_ok(),
        }
    }
}

impl Job {
    /// The existing route the job steps (a new route has none yet).
    fn route_id(&self) -> Option<&str> {
        match self {
            Job::Step { route_id, .. } => Some(route_id),
            Job::Lease { route_id, .. } => Some(route_id),
            Job::Start { .. } | Job::Reconcile { .. } | Job::Claim { .. } | Job::Deliveries { .. } => None,
        }
    }

    fn failed(&self, e: EngineError) -> Done {
        match self {
            Job::Step { .. } => Done::Step(Err(e)),
            Job::Start { .. } => Done::Start(Err(e)),
            Job::Reconcile { .. } => Done::Reconcile(Err(e)),
            Job::Claim { .. } | Job::Lease { .. } => Done::Lease(Err(e)),
            Job::Deliveries { .. } => Done::Deliveries(Err(e)),
        }
    }

    fn reply(self, done: Done) {
        // A submitter that went away no longer needs the answer; the work is done either way.
        match (self, done) {
            (Job::Step { reply, .. }, Done::Step(r)) => {
                let _ = reply.send(r);
            }
            (Job::Start { reply, .. }, Done::Start(r)) => {
                let _ = reply.send(r);
            }
            (Job::Reconcile { reply, .. }, Done::Reconcile(r)) => {
                let _ = reply.send(r);
            }
            (Job::Claim { reply, .. } | Job::Lease { reply, .. }, Done::Lease(r)) => {
                let _ = reply.send(r);
            }
            (Job::Deliveries { reply, .. }, Done::Deliveries(r)) => {
                let _ = reply.send(r);
            }
            // `Done` is always built from its own job; a mismatch cannot happen. Dropping the
            // sender makes the submitter see `EngineError::Task`.
            _ => {}
        }
    }
}

/// The writer task: takes every job queued while the previous batch ran and commits them
/// together. Ends when the engine is dropped (its queue closes).
pub(super) async fn write_loop(engine: Weak<Engine>, mut jobs: mpsc::UnboundedReceiver<Vec<Job>>) {
    let mut writer: Option<Writer> = None;
    // PostgreSQL: this engine's own first commit comes after the event log reader's starting
    // point, so its subscribers miss none of this replica's changes.
    if let Some(engine) = engine.upgrade() {
        engine.events_ready().await;
    }
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
            engine.run_batch(&mut writer, batch).await;
            batch = rest;
        }
    }
}

impl Engine {
    /// Runs one batch: all jobs in one transaction if every one of them succeeds, otherwise (or
    /// if the commit fails) rolled back and each job run again in its own transaction.
    async fn run_batch(&self, slot: &mut Option<Writer>, batch: Vec<Job>) {
        let _writer = self.write.lock().await;
        if slot.is_none() {
            *slot = self.store.writer().await.ok();
            if let Some(writer) = slot.as_mut() {
                self.check_synchronous(writer).await;
            }
        }
        let Some(writer) = slot.as_mut() else {
            for job in batch {
                let done = match self.store.writer().await {
                    Ok(mut w) => self.run_alone(&mut w, &job).await,
                    Err(e) => job.failed(e.into()),
                };
                job.reply(done);
            }
            return;
        };
        if batch.len() > 1 {
            if let Some(done) = self.run_group(writer, &batch).await {
                self.committed();
                self.stats.group_commits.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .grouped_jobs
                    .fetch_add(u64::try_from(batch.len()).unwrap_or(0), Ordering::Relaxed);
                for (job, done) in batch.into_iter().zip(done) {
                    job.reply(done);
                }
                return;
            }
        }
        let mut failed = false;
        for job in batch {
            let done = self.run_alone(writer, &job).await;
            failed |= !done.is_ok();
            job.reply(done);
        }
        // A connection the database dropped (a restart, a failover, a killed backend) is given
        // up, so the next batch takes a new one instead of failing on it for ever.
        if failed && writer.ping().await.is_err() {
            tracing::warn!("the writer's database connection is gone; taking a new one");
            *slot = None;
        }
    }

    /// Reads `PRAGMA synchronous` on the writer's own connection (what [`super::WriteStats`]
    /// reports) and says in the log when its commits would not be on stable storage before
    /// the engine acts on them (a pool opened with other options than `db::connect_options`).
    async fn check_synchronous(&self, writer: &mut Writer) {
        match writer.synchronous().await {
            Ok(level) => {
                self.stats
                    .synchronous
                    .store(u64::try_from(level).unwrap_or(0) + 1, Ordering::Relaxed);
                if level < 2 {
                    tracing::warn!(
                        synchronous = level,
                        "the engine commits without fsync (synchronous below FULL): a power cut may lose \
                         answered actions and started dispatches"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the writer connection's synchronous setting"),
        }
    }

    /// All jobs in one transaction; `None` (rolled back) if any job failed or the commit did.
    async fn run_group(&self, writer: &mut Writer, batch: &[Job]) -> Option<Vec<Done>> {
        let mut tx = writer.begin().await.ok()?;
        let now = self.now();
        let mut pending = Pending::new(self.runners.current(), self.owner());
        let Ok(lost) = self.claim_timers(&mut tx, batch).await else {
            tx.rollback().await;
            return None;
        };
        let ids: Vec<&str> = batch
            .iter()
            .filter(|job| !lost.contains(job))
            .filter_map(Job::route_id)
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        let mut ok = pending.preload(&mut tx, &ids).await.is_ok();
        for job in batch {
            if !ok {
                break;
            }
            if lost.contains(job) {
                out.push(Done::Step(Err(EngineError::ClaimedElsewhere)));
                continue;
            }
            let done = run_job(&mut tx, &mut pending, job, now).await;
            ok = done.is_ok();
            out.push(done);
        }
        ok = ok && pending.flush(&mut tx, now).await.is_ok();
        if !ok {
            tx.rollback().await;
            return None;
        }
        tx.commit().await.ok()?;
        self.observe(&pending.observed);
        if pending.released {
            self.wake();
        }
        Some(out)
    }

    /// Claims the timers the batch fires (PostgreSQL: their rows locked, skipping those another
    /// replica's transaction holds); the timer jobs it could not claim. SQLite's write
    /// transaction holds every row already.
    async fn claim_timers<'j>(
        &self,
        tx: &mut crate::store::Tx<'_>,
        batch: &'j [Job],
    ) -> Result<Lost<'j>, EngineError> {
        let fires: Vec<&str> = batch
            .iter()
            .filter_map(|job| match job {
                Job::Step {
                    route_id,
                    work: StepWork::Fire(_),
                    ..
                } => Some(route_id.as_str()),
                _ => None,
            })
            .collect();
        if fires.is_empty() || tx.dialect() == crate::store::Dialect::Sqlite {
            return Ok(Lost(Vec::new()));
        }
        let claimed = tx.claim_timers(&fires).await?;
        let lost: Vec<&'j Job> = batch
            .iter()
            .filter(|job| match job {
                Job::Step {
                    route_id,
                    work: StepWork::Fire(_),
                    ..
                } => !claimed.contains(route_id),
                _ => false,
            })
            .collect();
        if !lost.is_empty() {
            self.metrics().claims_lost(lost.len());
        }
        Ok(Lost(lost))
    }

    /// One job in its own transaction.
    async fn run_alone(&self, writer: &mut Writer, job: &Job) -> Done {
        self.stats.single_jobs.fetch_add(1, Ordering::Relaxed);
        let now = self.now();
        let mut tx = match writer.begin().await {
            Ok(tx) => tx,
            Err(e) => return job.failed(e.into()),
        };
        let mut pending = Pending::new(self.runners.current(), self.owner());
        match self.claim_timers(&mut tx, std::slice::from_ref(job)).await {
            Ok(lost) if lost.contains(job) => {
                tx.rollback().await;
                return Done::Step(Err(EngineError::ClaimedElsewhere));
            }
            Ok(_) => {}
            Err(e) => {
                tx.rollback().await;
                return job.failed(e);
            }
        }
        let mut done = run_job(&mut tx, &mut pending, job, now).await;
        if done.is_ok() {
            if let Err(e) = pending.flush(&mut tx, now).await {
                done = job.failed(e);
            }
        }
        if !done.is_ok() {
            tx.rollback().await;
            return done;
        }
        match tx.commit().await {
            Ok(()) => {
                self.committed();
                self.observe(&pending.observed);
                if pending.released {
                    self.wake();
                }
                done
            }
            Err(e) => job.failed(e.into()),
        }
    }

    /// Counts a writer commit and, every `CHECKPOINT_EVERY` of them, copies the WAL back into
    /// the database file on another connection (a passive checkpoint never blocks the writer).
    ///
    /// Why: SQLite runs an automatic checkpoint inside whichever commit crosses 1,000 WAL
    /// pages, copying pages back and syncing the database file, so every job of that group (a
    /// burst of due timers, say) waits for that on top of the commit's own WAL `fsync`. That
    /// automatic checkpoint stays (it completes while nothing else writes, so the next commit
    /// starts the WAL over and it stays small), but with the bulk already copied and synced
    /// beside it, it has little left to do.
    fn committed(&self) {
        let n = self.stats.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if !n.is_multiple_of(CHECKPOINT_EVERY) || self.checkpointing.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = self.store.clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            if let Err(e) = store.checkpoint().await {
                tracing::warn!(error = %e, "WAL checkpoint failed; the next one retries");
            }
            if let Some(engine) = me.upgrade() {
                engine.checkpointing.store(false, Ordering::Release);
            }
        });
    }
}

/// The timer jobs of a batch another replica is firing.
struct Lost<'j>(Vec<&'j Job>);

impl Lost<'_> {
    fn contains(&self, job: &Job) -> bool {
        self.0.iter().any(|j| std::ptr::eq(*j, job))
    }
}

/// A job's body, inside an open transaction: its reads go through `pending` and its writes are
/// queued there. The caller flushes them before the commit; a job that returns an error fails
/// the whole transaction.
async fn run_job(
    tx: &mut crate::store::Tx<'_>,
    pending: &mut Pending,
    job: &Job,
    now: DateTime<Utc>,
) -> Done {
    match job {
        Job::Step { route_id, work, .. } => Done::Step(match work {
            StepWork::Input(input) => tx::apply(tx, pending, route_id, input.clone(), now).await,
            StepWork::Begin { generation } => tx::begin(tx, pending, route_id, *generation, now)
                .await
                .map(|outcome| (outcome, None)),
            StepWork::Evaluate { generation } => tx::evaluate(tx, pending, route_id, *generation, now).await,
            StepWork::Fire(timer) => tx::fire(tx, pending, timer, now).await,
            StepWork::Launched {
                attempt,
                generation,
                launched,
            } => {
                tx::launched(
                    tx,
                    pending,
                    route_id,
                    *attempt,
                    *generation,
                    launched.clone(),
                    now,
                )
                .await
            }
        }),
        Job::Start { request, by, .. } => {
            Done::Start(tx::start_route(tx, pending, request, by.as_ref(), now).await)
        }
        Job::Claim {
            runner,
            seconds,
            route,
            acknowledge,
            ..
        } => Done::Lease(tx::claim(tx, pending, runner, route.as_deref(), *seconds, *acknowledge, now).await),
        Job::Lease { route_id, op, .. } => Done::Lease(tx::lease(tx, pending, route_id, op, now).await),
        Job::Deliveries { settle, claim, .. } => Done::Deliveries(
            async {
                let lost = tx.settle_deliveries(settle).await?;
                let claimed = match claim {
                    Some(c) => {
                        tx.claim_deliveries(&c.token, now, policy::time::after(now, c.lease), c.limit)
                            .await?
                    }
                    None => Vec::new(),
                };
                Ok(DeliveryWrites { lost, claimed })
            }
            .await,
        ),
        Job::Reconcile { orphans_only, .. } => Done::Reconcile(
            async {
                pending.flush(tx, now).await?;
                tx.restore_wait_timers().await?;
                Ok(if *orphans_only {
                    tx.release_orphaned_probe_leases(now).await?
                } else {
                    tx.release_all_probe_leases(now).await?
                })
            }
            .await,
        ),
    }
}
