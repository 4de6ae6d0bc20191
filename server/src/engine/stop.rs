//! The engine's own stop, in mini-redis's `Shutdown` shape: the tasks that work for the engine
//! (the scheduler, the notification worker, this replica's heartbeat) are started through it
//! ([`Engine::spawn_task`]), each with the signal of its stage, and [`Engine::shutdown`] is the
//! one way an engine stops. `recourse serve` calls it after SIGTERM; tests call it too.
//!
//! The order, and why:
//! 1. **New work is refused** ([`EngineError::Stopping`]): route starts, a caller's next prompt,
//!    a person's actions, runner claims. What running attempts report is still taken, so an
//!    attempt that ends now is recorded as it ended.
//! 2. **The [`Task::Work`] tasks end**, and are awaited: the scheduler fires no more timers; the
//!    notification worker settles what it was sending, through the writer, which still runs.
//! 3. **Attempts in flight are stopped** by their dispatchers (the agents' process groups are
//!    gone when this returns). Their dispatches stay recorded as started and unsettled, so the
//!    next boot, or another replica once this one retired, takes them up exactly as after a
//!    crash: ambiguous, unless their report is already durable. An external runner's lease is
//!    left to run out, as across a restart.
//! 4. **The [`Task::Membership`] tasks end**: this replica retires, and the others take up its
//!    routes at once (PostgreSQL).
//! 5. **The writer ends last**, once every job queued before it closed has committed. Nothing
//!    reaches it afterwards: a late submission is refused, never starts a writer again.

use super::{Engine, EngineError};
use std::{future::Future, pin::Pin, sync::Mutex as StdMutex};
use tokio::{sync::watch, task::JoinHandle};

/// How far the stop has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Running,
    /// New work is refused; the work tasks are ending, then the attempts in flight.
    Stopping,
    /// Attempts are stopped: the membership tasks end.
    Retiring,
    /// The writer is closed (or ended): nothing more is written.
    Closed,
}

/// When a task started through [`Engine::spawn_task`] is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// As soon as the stop begins (the scheduler, the notification worker).
    Work,
    /// Once the attempts in flight are stopped (the replica's heartbeat, whose end retires it).
    Membership,
}

impl Task {
    fn phase(self) -> Phase {
        match self {
            Task::Work => Phase::Stopping,
            Task::Membership => Phase::Retiring,
        }
    }
}

/// Resolves when the engine tells its task to stop.
pub type StopSignal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The engine's stop state: its phase, its tasks, its writer task.
pub(super) struct Stop {
    phase: watch::Sender<Phase>,
    tasks: StdMutex<Vec<(Task, JoinHandle<()>)>>,
    writer: StdMutex<Option<JoinHandle<()>>>,
}

impl Default for Stop {
    fn default() -> Self {
        Stop {
            phase: watch::Sender::new(Phase::Running),
            tasks: StdMutex::new(Vec::new()),
            writer: StdMutex::new(None),
        }
    }
}

impl Stop {
    fn signal(&self, task: Task) -> StopSignal {
        let mut phase = self.phase.subscribe();
        Box::pin(async move {
            let _ = phase.wait_for(|p| *p >= task.phase()).await;
        })
    }

    async fn join(&self, kind: Task) {
        let handles: Vec<JoinHandle<()>> = {
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            let (these, rest) = std::mem::take(&mut *tasks)
                .into_iter()
                .partition(|(k, _)| *k == kind);
            *tasks = rest;
            these.into_iter().map(|(_, h)| h).collect()
        };
        for handle in handles {
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "an engine task failed while stopping");
            }
        }
    }
}

impl Engine {
    /// Runs `task` for the engine until its stop tells it to end (`Task` says when), and
    /// awaits it in [`Engine::shutdown`]. `task` receives the signal to watch.
    pub fn spawn_task<F, Fut>(&self, kind: Task, task: F)
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(task(self.stop.signal(kind)));
        self.stop
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((kind, handle));
    }

    /// Whether the engine still takes new work: `Err(Stopping)` once its stop began.
    pub(crate) fn accepting(&self) -> Result<(), EngineError> {
        match *self.stop.phase.borrow() {
            Phase::Running => Ok(()),
            _ => Err(EngineError::Stopping),
        }
    }

    /// Whether the writer is closed for good (then nothing may start it again).
    pub(super) fn writer_closed(&self) -> bool {
        *self.stop.phase.borrow() == Phase::Closed
    }

    /// Keeps the writer task's handle, for the stop to await.
    pub(super) fn writer_started(&self, handle: JoinHandle<()>) {
        *self.stop.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }

    /// Stops the engine, in the order of this module's documentation: refuse new work, end the
    /// work tasks, stop the attempts in flight, retire, and end the writer last. Returns when
    /// all of it is done. Idempotent: a second call waits for the first one's end.
    pub async fn shutdown(&self) {
        let first = self.stop.phase.send_if_modified(|phase| {
            let running = *phase == Phase::Running;
            if running {
                *phase = Phase::Stopping;
            }
            running
        });
        if !first {
            // Another call is stopping the engine (or has): wait for its end.
            let mut phase = self.stop.phase.subscribe();
            let _ = phase.wait_for(|p| *p == Phase::Closed).await;
            return;
        }
        self.stop.join(Task::Work).await;
        tracing::debug!("stopping: the scheduler and the notification worker ended");
        self.stop_attempts().await;
        tracing::debug!("stopping: the attempts in flight are stopped");
        self.stop.phase.send_replace(Phase::Retiring);
        self.stop.join(Task::Membership).await;
        tracing::debug!("stopping: this replica retired");
        // The writer last: closed under the queue's lock, so no submission can slip in after.
        let handle = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            self.stop.phase.send_replace(Phase::Closed);
            jobs.take();
            self.stop.writer.lock().unwrap_or_else(|e| e.into_inner()).take()
        };
        if let Some(handle) = handle {
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "the writer task failed while stopping");
            }
        }
        tracing::debug!("stopping: the writer ended");
    }
}
