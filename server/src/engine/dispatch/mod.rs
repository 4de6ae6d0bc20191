//! Dispatchers: how an attempt that is recorded as started actually runs.
//!
//! The engine records a dispatch as started (the `DispatchStarted` commit), then hands the
//! attempt to the dispatcher of its candidate's kind and receives what happened: a report now
//! (success, or an evidence envelope), a report scheduled for later, or nothing yet (the
//! outcome arrives over the API, or never: a hang that a person resolves).
//!
//! A scheduled report is durable: the engine writes it as a `report` timer row in its writer's
//! transaction, the scheduler fires it through the same transition owner as every other timer,
//! and a restart neither loses it nor makes its attempt ambiguous.
//!
//! A dispatcher that runs an attempt itself (an agent process, an HTTP call) reports when it is
//! done through the attempt's [`Reporter`]: the report is a step like any other, fenced by the
//! attempt's generation, so a late one changes nothing. The engine tells it when the route
//! moves on ([`Dispatcher::cancel`]) and, at boot, to clean up what a previous process left
//! ([`Dispatcher::reconcile`]).
//!
//! One file (or folder) per dispatcher: [`acp`] (Agent Client Protocol agents Recourse starts
//! itself), [`http`] (calls to LLM HTTP APIs), [`simulated`] (the scripted provider of the demo
//! and the tests) and [`awaiting`] (`external`: the attempt waits for a runner's report over the
//! API).

pub(crate) mod acp;
pub(crate) mod awaiting;
pub(crate) mod http;
pub(crate) mod simulated;

use chrono::{DateTime, Utc};
use classifier::Envelope;
use policy::{
    api::{CallerKind, CandidateTarget, DispatcherKind, Work},
    route::{DispatchState, RouteEvent},
    wire::RouteSnapshot,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Weak},
};

use super::{
    error::EngineError,
    input::{Applied, AttemptUpdate, Evidence, HeldSession, Input},
};
use crate::{clock::WatchdogClock, config::RunnerConfig, store::Store};

/// A boxed, sendable future.
pub(crate) type DispatchFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One started attempt, as a dispatcher needs it.
#[derive(Clone)]
pub(crate) struct LaunchRequest {
    pub(crate) route_id: String,
    /// The caller's invocation id (evidence must name it).
    pub(crate) invocation_id: String,
    pub(crate) attempt: u32,
    /// The generation this attempt's evidence and results carry.
    pub(crate) invocation_generation: u64,
    pub(crate) target: CandidateTarget,
    /// The route's current work (contract 7), for dispatchers that run it.
    pub(crate) work: Option<Work>,
    /// The configuration as it was when the attempt started (it keeps it for its whole life).
    pub(crate) config: Arc<RunnerConfig>,
    /// The clock the agent's turn watchdogs count on.
    pub(crate) watchdog: WatchdogClock,
    pub(crate) now: DateTime<Utc>,
    /// The way back to the route, for a dispatcher that reports later.
    pub(crate) reporter: Reporter,
    /// The agent session this attempt loads (the retry a session holding the route's output
    /// waits for; the route's step decided it when the attempt started).
    pub(crate) resume: Option<String>,
}

/// The dispatcher that runs an attempt of a route whose caller is `caller` on a candidate whose
/// dispatcher is `target`: the candidate's, unless the caller runs the route's attempts itself
/// (then it is leased: `external`).
pub(crate) fn dispatcher_for(caller: CallerKind, target: DispatcherKind) -> DispatcherKind {
    if caller.runs_attempts() {
        DispatcherKind::External
    } else {
        target
    }
}

/// The target an attempt is launched with: the candidate's, with the dispatcher that runs it.
pub(crate) fn launched_as(caller: CallerKind, mut target: CandidateTarget) -> CandidateTarget {
    target.dispatcher = dispatcher_for(caller, target.dispatcher);
    target
}

/// What an attempt came to, as a dispatcher reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum Report {
    /// It succeeded; an HTTP call's response body is the route's result.
    Succeeded {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// The evidence envelope (contract 1) of the failure, with its invocation identity.
    Failed { envelope: Value },
}

impl Report {
    /// The input this report is for the attempt started at `generation`. An envelope that
    /// does not parse (it was checked when its profile was written) is reported as evidence
    /// with no items, which classifies as unclassified and stops for a person.
    pub(crate) fn into_input(self, generation: u64) -> Input {
        match self {
            Report::Succeeded { result: None } => Input::Event(RouteEvent::Succeeded { generation }),
            Report::Succeeded { result: Some(result) } => Input::Succeeded { generation, result },
            Report::Failed { envelope } => {
                Input::evidence(parsed(&envelope, generation).unwrap_or_else(|| unparsed(generation)))
            }
        }
    }
}

/// A dispatcher's evidence envelope, typed (its one parse), for the attempt started at
/// `generation`; `None` when it does not parse.
fn parsed(envelope: &Value, generation: u64) -> Option<Envelope<'static>> {
    let mut env = Envelope::from_value(envelope).ok()?.into_owned();
    env.generation = Some(generation);
    Some(env)
}

/// What stands for evidence that does not parse: no items, for the attempt started at
/// `generation` (it classifies as unclassified and stops for a person).
fn unparsed(generation: u64) -> Envelope<'static> {
    let mut env = Envelope::default();
    env.generation = Some(generation);
    env
}

/// A dispatcher's way back to the route, for one started attempt: its report (once) goes
/// through the writer like any other step, fenced by the attempt's generation, so a late or
/// stale one changes nothing; live updates go to the route's event stream.
/// The dispatchers' one way back to the route engine, which implements it: submit what an
/// attempt came to, forward its live updates, read the route's snapshot. A dispatcher never
/// holds the engine: its [`Reporter`] holds this port, weakly (a report after the engine is
/// gone is dropped).
pub(crate) trait Port: Send + Sync + 'static {
    /// The engine's clock now (the injected clock).
    fn now(&self) -> DateTime<Utc>;

    /// Submits inputs to routes as one delivery to the writer (they commit together); one
    /// answer per input, in order.
    fn submit_all(
        &self,
        inputs: Vec<(String, Input)>,
    ) -> DispatchFuture<'_, Vec<Result<Applied, EngineError>>>;

    /// Sends a running attempt's live update to the route's listeners and transcript.
    fn update(&self, update: AttemptUpdate);

    /// The route's current snapshot.
    fn snapshot<'a>(&'a self, route_id: &'a str) -> DispatchFuture<'a, Result<RouteSnapshot, EngineError>>;
}

#[derive(Clone)]
pub(crate) struct Reporter {
    port: Weak<dyn Port>,
    route_id: String,
    attempt: u32,
    generation: u64,
}

impl Reporter {
    pub(crate) fn new(port: Weak<dyn Port>, route_id: &str, attempt: u32, generation: u64) -> Reporter {
        Reporter {
            port,
            route_id: route_id.to_owned(),
            attempt,
            generation,
        }
    }

    /// The engine's clock now (the injected clock), to date evidence; `None` once the engine
    /// is gone.
    pub(crate) fn now(&self) -> Option<DateTime<Utc>> {
        self.port.upgrade().map(|p| p.now())
    }

    /// Submits this attempt's inputs as one delivery; the first one's answer.
    async fn submit(&self, inputs: Vec<Input>) -> Result<Applied, EngineError> {
        let port = self.port.upgrade().ok_or(EngineError::Task)?;
        let inputs = inputs
            .into_iter()
            .map(|input| (self.route_id.clone(), input))
            .collect();
        let results = port.submit_all(inputs).await;
        results.into_iter().next().unwrap_or(Err(EngineError::Task))
    }

    /// Reports the attempt's outcome.
    pub(crate) async fn report(&self, report: Report) -> Result<Applied, EngineError> {
        self.submit(vec![report.into_input(self.generation)]).await
    }

    /// Reports a success whose answer the caller already has, with the route's completion (a
    /// one-prompt caller: [`Input::Finish`]) in the same delivery, so one commit holds both.
    /// The success's own result is returned.
    pub(crate) async fn report_finished(&self, report: Report) -> Result<Applied, EngineError> {
        self.submit(vec![
            report.into_input(self.generation),
            Input::Finish {
                after: self.generation,
            },
        ])
        .await
    }

    /// Reports this attempt's evidence envelope with the facts only this dispatcher knows:
    /// whether the agent ended its turn normally (ACP `end_turn`) and the session that still
    /// holds the attempt's output, when the agent can load it again (see [`Evidence`]). The
    /// engine classifies it once, in the report's transaction. Evidence that does not parse is
    /// a failure with no items and no facts (it stops for a person).
    pub(crate) async fn report_evidence(
        &self,
        envelope: &Value,
        turn_ended: bool,
        session: Option<HeldSession>,
    ) -> Result<Applied, EngineError> {
        let evidence = match parsed(envelope, self.generation) {
            Some(envelope) => Evidence {
                envelope,
                turn_ended,
                session,
            },
            None => Evidence::of(unparsed(self.generation)),
        };
        self.submit(vec![Input::Evidence(Box::new(evidence))]).await
    }

    /// Forwards one live update of the attempt (an ACP `session/update`, bounded) to the
    /// route's event stream.
    pub(crate) fn update(&self, update: Value) {
        if let Some(port) = self.port.upgrade() {
            port.update(AttemptUpdate {
                route_id: self.route_id.clone(),
                attempt: self.attempt,
                generation: self.generation,
                update,
            });
        }
    }

    /// Whether the route is still running this attempt (a dispatcher checks before it acts on
    /// its own, e.g. before it reports a timeout).
    pub(crate) async fn is_current(&self) -> bool {
        let Some(port) = self.port.upgrade() else {
            return false;
        };
        port.snapshot(&self.route_id).await.is_ok_and(|snapshot| {
            snapshot.generation == self.generation
                && snapshot
                    .attempt
                    .is_some_and(|a| a.number == self.attempt && a.dispatch == DispatchState::Started)
        })
    }
}

/// What a dispatcher did with a started attempt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Launched {
    /// Record the launch in the simulated dispatcher's audit table.
    pub(crate) audit: bool,
    /// The report and when it is due (at or before now: apply it at once).
    pub(crate) report: Option<(DateTime<Utc>, Report)>,
}

/// Runs started attempts of one dispatcher kind.
pub(crate) trait Dispatcher: Send + Sync + 'static {
    /// Starts the attempt. `Ok(None)`: nothing to record now; the outcome comes later through
    /// the request's [`Reporter`], or over the API.
    fn launch(&self, request: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>>;

    /// Whether it needs the route's work (the engine reads it only for those that do).
    fn wants_work(&self) -> bool {
        false
    }

    /// The route moved on from the attempt (a person stopped it, the route ended): stop it,
    /// and leave nothing running. Its late report will be stale.
    fn cancel(&self, _route_id: &str, _attempt: u32) {}

    /// Another replica committed a change that aborts the route's started attempt (a person's
    /// stop, the route abandoned; `EventKind::aborts_started_attempt`) and produced
    /// `generation`: stop every attempt of the route this dispatcher runs that began before
    /// it (its invocation generation is lower). An attempt begun after it (a person retried
    /// meanwhile) is left alone.
    fn cancel_started_before(&self, _route_id: &str, _generation: u64) {}

    /// Stop every attempt this dispatcher runs (this replica lost its lease: its routes may be
    /// another replica's now).
    fn cancel_all(&self) {}

    /// The server is stopping: stop every attempt as [`Dispatcher::cancel_all`] does, and wait
    /// until each has stopped everything it started, so no agent outlives the server. The
    /// attempts report nothing; the next boot finds their dispatches ambiguous, as after a
    /// crash.
    fn shut_down(&self) -> DispatchFuture<'_, ()> {
        self.cancel_all();
        Box::pin(async {})
    }

    /// At boot, before anything runs: clean up what a previous process left (its attempts are
    /// ambiguous or being recovered by the route engine).
    fn reconcile(&self) -> DispatchFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// Why a dispatcher could not start an attempt (the attempt stays recorded as started, so a
/// person decides; it is never repeated automatically).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DispatchError {
    #[error("[DP1001] {0}")]
    Store(#[from] crate::store::StoreError),
}

/// The dispatcher of every kind.
pub(crate) struct Dispatchers {
    by_kind: HashMap<DispatcherKind, Arc<dyn Dispatcher>>,
    /// Gateway calls listening to their routes' `http` attempts ([`http::LiveCalls`]).
    live: http::LiveCalls,
}

impl Dispatchers {
    /// The built-in dispatchers.
    pub(crate) fn new(store: Store) -> Dispatchers {
        let mut by_kind: HashMap<DispatcherKind, Arc<dyn Dispatcher>> = HashMap::new();
        by_kind.insert(DispatcherKind::Acp, Arc::new(acp::Acp::new(store.clone())));
        by_kind.insert(
            DispatcherKind::Simulated,
            Arc::new(simulated::Simulated::new(store)),
        );
        let live = http::LiveCalls::default();
        by_kind.insert(DispatcherKind::Http, Arc::new(http::Http::new(live.clone())));
        by_kind.insert(DispatcherKind::External, Arc::new(awaiting::Awaiting));
        Dispatchers { by_kind, live }
    }

    /// Where a gateway call listens to its route's `http` attempts.
    pub(crate) fn live(&self) -> &http::LiveCalls {
        &self.live
    }

    pub(crate) fn get(&self, kind: DispatcherKind) -> Option<&Arc<dyn Dispatcher>> {
        self.by_kind.get(&kind)
    }

    /// Every dispatcher once.
    pub(crate) fn all(&self) -> Vec<&Arc<dyn Dispatcher>> {
        let mut seen: Vec<&Arc<dyn Dispatcher>> = Vec::new();
        for d in self.by_kind.values() {
            if !seen.iter().any(|s| Arc::ptr_eq(s, d)) {
                seen.push(d);
            }
        }
        seen
    }
}
