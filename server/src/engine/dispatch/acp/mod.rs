//! The `acp` dispatcher: Recourse starts an Agent Client Protocol agent (claude-code-acp,
//! `gemini --acp`, codex-acp, ...) for each attempt, runs the route's prompt on it, and reports
//! success or the evidence of the failure.
//!
//! One attempt is one agent process, one session and one prompt ([`run`]). The files, by job:
//! [`protocol`] (the ACP session, all protocol-version-specific handling), [`process`] (the
//! agent's process group, its environment and working directory, the stderr ring, the exit,
//! stopping it), [`evidence`] (what was observed, in order, and the evidence envelope), [`run`]
//! (one attempt from spawn to report: a failure whose output the agent's session still holds is
//! reported with that session, and a retry the engine found that session waits for loads it:
//! the replay gate's one exception, decided in the writer, `engine::held`), [`check`] (`recourse agents check`: each configured agent started once and asked
//! `initialize`). `recourse acp` (`crate::editor`) runs agents with the same process, protocol
//! and evidence code, on the editor's side of the lease protocol.
//!
//! What it reports: a prompt answered `end_turn` in which the classifier finds no failure
//! signal is a success; anything else (a JSON-RPC error, a failure banner before `end_turn`,
//! another stop reason such as `refusal`, a crash, a hang) is a failure with all its evidence.
//! The dispatcher never decides what text means; the classifier does, in the engine.
//!
//! Stopping: when the route moves on ([`Dispatcher::cancel`]: a person stopped it, or it was
//! abandoned) the attempt sends `session/cancel`, waits `cancel_grace` for the `cancelled`
//! answer (updates that arrive meanwhile belong to the cancelled generation), then stops the
//! process group. A cancelled attempt reports nothing: the route has moved on, and the
//! engine's generation fence would reject the report anyway.
//!
//! No orphans: each agent's process group is recorded (with its start time, so a reused pid is
//! never mistaken for it) before it is prompted, and forgotten once it is gone. At boot
//! ([`Dispatcher::reconcile`], before anything runs) every recorded group that is still alive
//! is stopped: its attempt is ambiguous (the engine sends it to `action_required`) and must
//! not go on acting. When the server stops ([`Dispatcher::shut_down`]) every attempt is
//! cancelled and the stop waits until each agent's group is gone: nothing it started outlives
//! it (an attempt left mid-prompt is ambiguous at the next boot, as after a crash).

pub(crate) mod check;
pub(crate) mod evidence;
pub(crate) mod process;
pub(crate) mod protocol;
pub(crate) mod run;

use super::{DispatchError, DispatchFuture, Dispatcher, LaunchRequest, Launched};
use crate::store::Store;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

/// How long a group a previous Recourse process left gets between SIGTERM and SIGKILL.
const RECONCILE_GRACE: Duration = Duration::from_secs(3);

/// How long a stopping server waits for its attempts to stop their agents (each is bounded by
/// its agent's `cancel_grace` and `exit_grace`; this only keeps a wedged one from holding the
/// stop forever: the next boot stops what is left).
const SHUTDOWN_CEILING: Duration = Duration::from_secs(60);

/// The attempts running now, by route and attempt: the generation it began at, and the way to
/// tell it to stop.
type Running = Arc<Mutex<HashMap<(String, u32), (u64, watch::Sender<bool>)>>>;

pub(crate) struct Acp {
    store: Store,
    running: Running,
    /// Every attempt's task, which ends only once its agent's process group is gone.
    tasks: TaskTracker,
}

impl Acp {
    pub(crate) fn new(store: Store) -> Acp {
        Acp {
            store,
            running: Arc::default(),
            tasks: TaskTracker::new(),
        }
    }
}

impl Dispatcher for Acp {
    fn launch(&self, request: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>> {
        Box::pin(async move {
            let (stop_tx, stop) = watch::channel(false);
            let key = (request.route_id.clone(), request.attempt);
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), (request.invocation_generation, stop_tx));
            let store = self.store.clone();
            let running = self.running.clone();
            self.tasks.spawn(async move {
                run::attempt(store, request, stop).await;
                running.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
            });
            Ok(None)
        })
    }

    fn wants_work(&self) -> bool {
        true
    }

    fn cancel(&self, route_id: &str, attempt: u32) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, stop)) = running.get(&(route_id.to_owned(), attempt)) {
            stop.send_replace(true);
        }
    }

    fn cancel_started_before(&self, route_id: &str, generation: u64) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for ((route, attempt), (began, stop)) in running.iter() {
            if route == route_id && *began < generation {
                tracing::info!(
                    route_id,
                    attempt,
                    "the route moved on through another replica; stopping its agent"
                );
                stop.send_replace(true);
            }
        }
    }

    fn cancel_all(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        for (_, stop) in running.values() {
            stop.send_replace(true);
        }
    }

    fn shut_down(&self) -> DispatchFuture<'_, ()> {
        Box::pin(async move {
            self.cancel_all();
            self.tasks.close();
            let left = self.tasks.len();
            if left > 0 {
                tracing::info!(attempts = left, "stopping the agents of the attempts in flight");
            }
            if tokio::time::timeout(SHUTDOWN_CEILING, self.tasks.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    attempts = self.tasks.len(),
                    "agents still stopping when the server stopped; the next boot stops what is left"
                );
            }
        })
    }

    fn reconcile(&self) -> DispatchFuture<'_, ()> {
        Box::pin(async move {
            let rows = match self.store.orphaned_agent_processes(chrono::Utc::now()).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the agent processes a previous run left");
                    return;
                }
            };
            for row in rows {
                let start = process::StartStamp {
                    ticks: row.start_ticks,
                    boot_id: row.boot_id.clone(),
                };
                if process::stop_recorded(row.pgid, &start, RECONCILE_GRACE).await {
                    tracing::warn!(
                        route_id = row.route_id,
                        attempt = row.attempt,
                        agent = row.agent_id,
                        pgid = row.pgid,
                        "stopped an agent a previous run left running; its attempt is ambiguous"
                    );
                }
                if let Err(e) = self.store.forget_agent_process(row.pgid, row.start_ticks).await {
                    tracing::error!(error = %e, pgid = row.pgid, "cannot forget a stopped agent process");
                }
            }
        })
    }
}
