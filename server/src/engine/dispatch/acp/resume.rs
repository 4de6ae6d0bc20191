//! The replay gate's one exception: a retry after assistant output, allowed only when it
//! resumes the very same provider-native session and prompt generation.
//!
//! How it holds together (the classifier's gate stays the decider):
//! 1. An attempt fails after real output (the classifier's reading of its updates), with no
//!    tool activity, a confirmed delivery and no cancel, on an agent that advertised
//!    `loadSession`, and the candidate's policy would retry this same candidate (a retry or a
//!    reset wait; [`retries_same_candidate`] runs the same evaluator the engine will).
//! 2. The dispatcher records the route's resumable session durably (route, candidate, agent,
//!    session, generation, route cycle, digest of the work), then reports the failure with
//!    the resume fact for its generation ([`Reporter::report_resumable`]). The gate lets the
//!    output through on that fact alone; nothing else is waived.
//! 3. While the record is in force (the same route cycle), every launch on the route is
//!    checked ([`Resumes::standing`]): a retry or post-wait attempt of that candidate, with
//!    that agent and the same work, loads the session (`session/load`) and sends the same
//!    prompt in it; anything else, a switch to another candidate above all, is not started
//!    and stops for a person ([`Guard`] does this for the other dispatchers). A resumed
//!    attempt carries the earlier output as its own effect, so a later failure without new
//!    output cannot open the gate either.
//! 4. The record goes with a success on the route, with a new route cycle (a person's retry or
//!    skip from `action_required`), and with the route.
//!
//! A person's "skip now" during the retry wait stays in the same cycle, so the next candidate
//! is not started on it: the route stops, and a second, explicit decision from
//! `action_required` (which starts a new cycle) moves on.
//!
//! [`Reporter::report_resumable`]: crate::engine::dispatch::Reporter::report_resumable

use crate::{
    engine::dispatch::{DispatchError, DispatchFuture, Dispatcher, LaunchRequest, Launched, Report},
    store::{ResumableRow, Store},
};
use policy::{
    api::Work,
    classification::{Classification, Gate},
    document::ValidatedPolicyDocument,
    evaluator::{evaluate, DecisionKind, Failure},
    route::AttemptKind,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Where a launch stands towards the route's resumable session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Standing {
    /// No session holds the route's output: run as usual.
    Fresh,
    /// Retry in this session.
    Load(ResumableRow),
    /// Starting this attempt would replay the prompt after output elsewhere: do not.
    Blocked,
}

/// The routes' resumable sessions, read from the store at every launch that could meet one.
///
/// Nothing is kept in memory: several processes may run one database's routes (replicas on
/// PostgreSQL, a route taken up after another replica died), and a record another process
/// wrote after this one last looked must still hold here, or a retry would start a new
/// session and replay the prompt. A route's first attempt needs no query: no attempt before it
/// can have left output behind.
pub(crate) struct Resumes {
    store: Store,
}

impl Resumes {
    pub(crate) fn new(store: Store) -> Arc<Resumes> {
        Arc::new(Resumes { store })
    }

    /// Records the route's resumable session (before the failure is reported).
    pub(super) async fn keep(&self, row: &ResumableRow, at: chrono::DateTime<chrono::Utc>) -> bool {
        if let Err(e) = self.store.keep_resumable_session(row, at).await {
            tracing::error!(error = %e, route_id = row.route_id, "cannot record a resumable session");
            return false;
        }
        true
    }

    /// Forgets the route's resumable session (after a success of attempt `attempt`; a first
    /// attempt's route has none).
    pub(super) async fn forget(&self, route_id: &str, attempt: u32) {
        if attempt <= 1 {
            return;
        }
        if let Err(e) = self.store.forget_resumable_session(route_id).await {
            tracing::error!(error = %e, route_id, "cannot forget a resumable session");
        }
    }

    /// Where a launch stands. `agent` is the agent that would run it (`None` for a dispatcher
    /// that runs no agent session). Fails closed: a record or a route that cannot be read
    /// blocks the launch.
    pub(super) async fn standing(&self, r: &LaunchRequest, agent: Option<&str>) -> Standing {
        if r.attempt <= 1 {
            return Standing::Fresh;
        }
        let record = match self.store.resumable_session(&r.route_id).await {
            Ok(None) => return Standing::Fresh,
            Ok(Some(record)) => record,
            Err(e) => {
                tracing::error!(error = %e, route_id = r.route_id, "cannot read the resumable session");
                return Standing::Blocked;
            }
        };
        let route = match self.store.route_and_profile(&r.route_id).await {
            Ok(Some((route, _))) => route,
            Ok(None) => return Standing::Fresh,
            Err(_) => return Standing::Blocked,
        };
        if route.state.cycle().number() != record.cycle {
            // A new cycle: a person decided, or the route succeeded since.
            self.forget(&r.route_id, r.attempt).await;
            return Standing::Fresh;
        }
        let retry = route
            .state
            .attempt()
            .is_some_and(|a| matches!(a.kind, AttemptKind::Retry | AttemptKind::PostWait));
        let same = record.candidate_id == r.target.id
            && Some(record.agent_id.as_str()) == agent
            && r.work.as_ref().map(digest) == Some(record.work_digest.clone());
        if retry && same {
            Standing::Load(record)
        } else {
            Standing::Blocked
        }
    }
}

/// The digest of a route's work: the prompt generation a session answered.
pub(super) fn digest(work: &Work) -> String {
    let bytes = serde_json::to_vec(work).unwrap_or_default();
    crate::hex::hex(&Sha256::digest(&bytes))
}

/// Whether the candidate's current policy would retry this same candidate (a retry or a
/// reset wait) for this classification, were the gate open: the evaluator the engine runs.
/// Anything else (skip, stop, manual, a route or policy that cannot be read) is `false`, and
/// no resume fact is given.
pub(super) async fn retries_same_candidate(
    store: &Store,
    r: &LaunchRequest,
    classification: &Classification,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let Ok(Some((route, Some(profile)))) = store.route_and_profile(&r.route_id).await else {
        return false;
    };
    if route.state.candidate().id != r.target.id {
        return false;
    }
    let policy = ValidatedPolicyDocument::try_from(profile.policy.clone())
        .ok()
        .and_then(|doc| doc.candidate(&r.target.id).cloned());
    let decision = evaluate(
        &Failure {
            classification,
            gate: Gate::ALLOW,
            policy: policy.as_ref(),
            usage: route.state.cycle().usage(&r.target.id),
        },
        now,
    );
    matches!(decision.kind, DecisionKind::Retry | DecisionKind::WaitForReset)
}

/// The report of an attempt that was not started because a session holds the route's output.
pub(super) fn blocked(r: &LaunchRequest) -> Report {
    tracing::warn!(
        route_id = r.route_id,
        attempt = r.attempt,
        candidate = r.target.id,
        "not started: an agent session holds this prompt's output; starting it elsewhere would replay it"
    );
    Report::Failed {
        envelope: json!({
            "invocation_id": r.invocation_id,
            "generation": r.invocation_generation,
            "phase": "launch",
            "effects": {"assistant_output": true, "prompt_delivery": "not_sent"},
            "items": [],
        }),
    }
}

/// Any other dispatcher, checked against the route's resumable session before it launches:
/// while a session holds the prompt's output, nothing else runs that prompt.
pub(crate) struct Guard {
    inner: Arc<dyn Dispatcher>,
    resumes: Arc<Resumes>,
}

impl Guard {
    pub(crate) fn wrap(inner: Arc<dyn Dispatcher>, resumes: &Arc<Resumes>) -> Arc<dyn Dispatcher> {
        Arc::new(Guard {
            inner,
            resumes: resumes.clone(),
        })
    }
}

impl Dispatcher for Guard {
    fn launch(&self, request: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>> {
        Box::pin(async move {
            if self.resumes.standing(&request, None).await == Standing::Fresh {
                return self.inner.launch(request).await;
            }
            Ok(Some(Launched {
                audit: false,
                report: Some((request.now, blocked(&request))),
            }))
        })
    }

    fn wants_work(&self) -> bool {
        // Another dispatcher never continues an agent session: a record in force blocks it
        // whatever its work.
        self.inner.wants_work()
    }

    fn cancel(&self, route_id: &str, attempt: u32) {
        self.inner.cancel(route_id, attempt);
    }

    fn cancel_started_before(&self, route_id: &str, generation: u64) {
        self.inner.cancel_started_before(route_id, generation);
    }

    fn cancel_all(&self) {
        self.inner.cancel_all();
    }

    fn shut_down(&self) -> DispatchFuture<'_, ()> {
        self.inner.shut_down()
    }

    fn reconcile(&self) -> DispatchFuture<'_, ()> {
        self.inner.reconcile()
    }
}
