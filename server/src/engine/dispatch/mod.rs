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
//! One file per dispatcher: [`simulated`] (the scripted provider of the demo and the tests) and
//! [`awaiting`] (`external`, and the `acp` and `http` kinds until their runners exist: the
//! attempt waits for a report over the API).

pub(crate) mod awaiting;
pub(crate) mod simulated;

use chrono::{DateTime, Utc};
use classifier::Envelope;
use policy::{
    api::{CandidateTarget, DispatcherKind},
    route::RouteEvent,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc};

use super::Input;
use crate::store::Store;

/// A boxed, sendable future.
pub(crate) type DispatchFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One started attempt, as a dispatcher needs it.
#[derive(Debug, Clone)]
pub(crate) struct LaunchRequest {
    pub(crate) route_id: String,
    /// The caller's invocation id (evidence must name it).
    pub(crate) invocation_id: String,
    pub(crate) attempt: u32,
    /// The generation this attempt's evidence and results carry.
    pub(crate) invocation_generation: u64,
    pub(crate) target: CandidateTarget,
    pub(crate) now: DateTime<Utc>,
}

/// What an attempt came to, as a dispatcher reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum Report {
    Succeeded,
    /// The evidence envelope (contract 1) of the failure, with its invocation identity.
    Failed {
        envelope: Value,
    },
}

impl Report {
    /// The input this report is for the attempt started at `generation`. An envelope that
    /// does not parse (it was checked when its profile was written) is reported as evidence
    /// with no items, which classifies as unclassified and stops for a person.
    pub(crate) fn into_input(self, generation: u64) -> Input {
        match self {
            Report::Succeeded => Input::Event(RouteEvent::Succeeded { generation }),
            Report::Failed { envelope } => {
                let mut env = Envelope::from_value(&envelope).unwrap_or_default();
                env.generation = Some(generation);
                Input::Evidence(Box::new(env))
            }
        }
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
    /// Starts the attempt. `Ok(None)`: nothing to record; the outcome comes over the API.
    fn launch(&self, request: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>>;
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
}

impl Dispatchers {
    /// The built-in dispatchers.
    pub(crate) fn new(store: Store) -> Dispatchers {
        let awaiting: Arc<dyn Dispatcher> = Arc::new(awaiting::Awaiting);
        let mut by_kind: HashMap<DispatcherKind, Arc<dyn Dispatcher>> = HashMap::new();
        by_kind.insert(
            DispatcherKind::Simulated,
            Arc::new(simulated::Simulated::new(store)),
        );
        for kind in [
            DispatcherKind::External,
            DispatcherKind::Acp,
            DispatcherKind::Http,
        ] {
            by_kind.insert(kind, awaiting.clone());
        }
        Dispatchers { by_kind }
    }

    pub(crate) fn get(&self, kind: DispatcherKind) -> Option<&Arc<dyn Dispatcher>> {
        self.by_kind.get(&kind)
    }
}
