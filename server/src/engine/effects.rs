//! What runs after a commit: the event for live pages (SQLite; on PostgreSQL the event log
//! reader sends it), then the acts of the transition's plan (its effects, read once by
//! [`super::plan`]) in order.
//! Follow-up steps (the gate's outcome, a launch's report, switching) go through the writer
//! again, so every one of them is its own fenced, durable transition.
//!
//! Nothing here writes a row directly. Timers and circuit rows were written in the step's own
//! transaction; the effects only wake the scheduler, start dispatchers and queue follow-ups.

use super::{
    dispatch::{LaunchRequest, Reporter},
    plan::Act,
    transact::{LaunchContext, Told, TxOutcome},
    tx::{Chain, Stepped},
    writer::StepWork,
    Applied, Engine, EngineError, RouteStreamEvent,
};
use crate::store::Dialect;
use policy::{
    route::{EventKind, RouteState, Transition},
    wire::RouteEventPayload,
};
use std::collections::VecDeque;

impl Engine {
    /// What follows a step's commit (or its failure): the event, then the effects.
    pub(super) async fn settle(
        &self,
        route_id: &str,
        stepped: Result<Stepped, EngineError>,
    ) -> Result<Applied, EngineError> {
        let (outcome, chain) = match stepped {
            Ok(o) => o,
            Err(e) => {
                self.note_failure(route_id, &e).await;
                return Err(e);
            }
        };
        match outcome {
            TxOutcome::Committed {
                prev,
                transition,
                kind,
                verdict,
                plan,
                release_holds,
                launch,
                earlier,
            } => {
                self.told_first(route_id, earlier);
                self.after_commit(route_id, Some(&prev), &transition, kind, release_holds);
                let latest = self
                    .run_effects(route_id, plan.acts, transition.next, chain, launch)
                    .await;
                Ok(Applied {
                    snapshot: latest.snapshot(),
                    changed: true,
                    verdict,
                })
            }
            TxOutcome::Unchanged { state, plan, verdict } => {
                let latest = self.run_effects(route_id, plan.acts, state, None, None).await;
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

    /// A committed change: clear a durable-error note, wake the scheduler if holds were
    /// released, and tell live pages (only if anyone listens; SQLite only: on PostgreSQL the
    /// event log reader tells them, see [`super::events`]).
    pub(super) fn after_commit(
        &self,
        route_id: &str,
        prev: Option<&RouteState>,
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
        // PostgreSQL: the event log reader sends it, as it sends every replica's (`events`).
        if self.events.receiver_count() == 0 || self.store.dialect() == Dialect::Postgres {
            return;
        }
        let payload = RouteEventPayload::new(kind, prev, transition, self.now());
        let _ = self.events.send(RouteStreamEvent {
            route_id: route_id.to_owned(),
            payload,
        });
    }

    /// A change committed before the outcome's own in the same transaction (a refused start):
    /// told first, its effects not run.
    fn told_first(&self, route_id: &str, earlier: Option<Box<Told>>) {
        if let Some(t) = earlier {
            self.after_commit(route_id, Some(&t.prev), &t.transition, t.kind, t.release_holds);
        }
    }

    /// A step that could not be written: say so on the route (storage) and in the log.
    async fn note_failure(&self, route_id: &str, e: &EngineError) {
        if let EngineError::Storage(err) = e {
            let message = format!("the decision could not be written: {err}");
            tracing::error!(route_id, error = %err, "durable write failed; nothing was armed or launched");
            self.durable_errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(route_id.to_owned(), message.clone());
            // Best effort: on a read-only or full disk this fails too, and the map above keeps it.
            let _ = self.store.note_durable_error(route_id, &message).await;
        }
    }

    /// Performs a plan's acts in order; follow-up steps go through the writer again, and their
    /// own acts join the queue. Returns the latest state this chain committed.
    pub(super) async fn run_effects(
        &self,
        route_id: &str,
        acts: Vec<Act>,
        mut latest: RouteState,
        mut chain: Chain,
        mut launch: Option<Box<LaunchContext>>,
    ) -> RouteState {
        let mut queue: VecDeque<Act> = acts.into();
        while let Some(act) = queue.pop_front() {
            let follow: Option<Result<Stepped, EngineError>> = match act {
                Act::Wake => {
                    self.wake();
                    None
                }
                // The step removed any scheduled report; a dispatcher running the attempt
                // itself stops it.
                Act::Abort { attempt } => {
                    for dispatcher in self.dispatchers.all() {
                        dispatcher.cancel(route_id, attempt);
                    }
                    None
                }
                Act::Begin { generation } => match chain.take_if(|(g, _)| *g == generation) {
                    Some((_, outcome)) => Some(Ok((outcome, None))),
                    None => Some(self.step(route_id, StepWork::Begin { generation }).await),
                },
                Act::Launch {
                    attempt,
                    generation,
                    resume,
                } => {
                    self.launch(route_id, (attempt, generation), resume, launch.take())
                        .await
                }
                Act::Evaluate { generation } => {
                    Some(self.step(route_id, StepWork::Evaluate { generation }).await)
                }
            };
            let Some(outcome) = follow else { continue };
            match outcome {
                Ok((
                    TxOutcome::Committed {
                        prev,
                        transition,
                        kind,
                        plan,
                        release_holds,
                        launch: next_launch,
                        earlier,
                        ..
                    },
                    next_chain,
                )) => {
                    self.told_first(route_id, earlier);
                    self.after_commit(route_id, Some(&prev), &transition, kind, release_holds);
                    chain = next_chain;
                    launch = next_launch;
                    latest = transition.next;
                    queue.extend(plan.acts);
                }
                Ok((TxOutcome::Unchanged { plan, .. }, _)) => queue.extend(plan.acts),
                Ok((TxOutcome::Rejected { state, error, .. }, _)) => {
                    tracing::debug!(route_id, ?error, "follow-up step lost a race");
                    latest = state;
                }
                Err(e) => {
                    self.note_failure(route_id, &e).await;
                    tracing::warn!(route_id, error = %e, "follow-up step failed; effects stop here");
                    break;
                }
            }
        }
        latest
    }

    /// Hands the attempt recorded as started (its number and generation) to its dispatcher,
    /// with the agent session it loads when it is the retry held output waits for (`resume`),
    /// then records what it did.
    async fn launch(
        &self,
        route_id: &str,
        (attempt, generation): (u32, u64),
        resume: Option<String>,
        context: Option<Box<LaunchContext>>,
    ) -> Option<Result<Stepped, EngineError>> {
        let context = match context {
            Some(c) => *c,
            None => match self.launch_context(route_id).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(route_id, error = %e, "cannot read the attempt to launch");
                    return None;
                }
            },
        };
        let Some(target) = context.target else {
            tracing::warn!(
                route_id,
                attempt,
                "the candidate has no target; waiting for a report"
            );
            return None;
        };
        let dispatcher = self.dispatchers.get(target.dispatcher)?.clone();
        let work = if !dispatcher.wants_work() {
            None
        } else if let Some(work) = context.work {
            Some(work)
        } else {
            match self.store.route_work(route_id).await {
                Ok(work) => work,
                Err(e) => {
                    tracing::warn!(route_id, error = %e, "cannot read the route's work");
                    None
                }
            }
        };
        let request = LaunchRequest {
            route_id: route_id.to_owned(),
            invocation_id: context.invocation_id,
            attempt,
            invocation_generation: generation,
            target,
            work,
            config: self.runners.current(),
            watchdog: self.runners.watchdog(),
            now: self.now(),
            resume,
            reporter: Reporter::new(self.port(), route_id, attempt, generation),
        };
        match dispatcher.launch(request).await {
            Ok(Some(launched)) => Some(
                self.step(
                    route_id,
                    StepWork::Launched {
                        attempt,
                        generation,
                        launched,
                    },
                )
                .await,
            ),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(route_id, attempt, error = %e, "launch failed; the attempt stays started for a person");
                None
            }
        }
    }

    async fn launch_context(&self, route_id: &str) -> Result<LaunchContext, EngineError> {
        let (route, profile) = self
            .store
            .route_and_profile(route_id)
            .await?
            .ok_or_else(|| EngineError::RouteNotFound(route_id.to_owned()))?;
        Ok(LaunchContext {
            target: profile
                .and_then(|p| p.target(&route.state.candidate().id).cloned())
                .map(|t| super::dispatch::launched_as(route.caller.kind, t)),
            invocation_id: route.caller.invocation_id,
            work: None,
        })
    }
}
