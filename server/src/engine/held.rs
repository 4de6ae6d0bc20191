//! Held output: the replay gate's one exception, a retry after assistant output, allowed only
//! when it resumes the very same provider-native session and prompt generation. Every part of
//! it is decided in the writer's transaction (the classifier's gate stays the decider):
//! 1. An attempt fails with a confirmed delivery, no cancel and no tool call seen, on an agent
//!    that advertised `loadSession` and whose operator said its session keeps a failed turn's
//!    output (`resume_after_output`). The `acp` dispatcher reports the evidence with the
//!    session it holds (`Evidence::session`); it classifies and evaluates nothing for this.
//! 2. The failure's transaction ([`grant`], called by `transact::failure`) grants the gate's
//!    exception only when the classifier reads real output and no other effect on the current
//!    attempt's evidence and the candidate's policy would retry this same candidate (a retry or a reset wait). The
//!    route's resumable session (route, candidate, agent, session, generation, route cycle,
//!    digest of the work) is written in that same commit, and the gate lets the output
//!    through on that fact alone; nothing else is waived.
//! 3. While the record is in force (the same route cycle), every attempt is checked here as it
//!    starts ([`standing`], below). A resumed attempt carries the earlier output as its own
//!    effect, so a later failure without new output cannot open the gate either.
//! 4. The record goes with a success on the route (in the success's commit), with a new route
//!    cycle (forgotten at the next start), and with the route.
//!
//! A person's "skip now" during the retry wait stays in the same cycle, so the next candidate
//! is not started on it: the route stops, and a second, explicit decision from
//! `action_required` (which starts a new cycle) moves on.
//!
//! Where an attempt about to start stands:
//! A route's first attempt needs no read: no attempt before it can have left output behind.
//! Otherwise, while a session of the route's current cycle holds its prompt's output:
//! - a retry or post-wait attempt of that candidate, on that agent, with the same work,
//!   loads the session ([`Standing::Load`]: the launch carries it to the `acp` dispatcher);
//! - anything else, a switch to another candidate above all, would replay the prompt after
//!   output elsewhere: it is recorded as started and refused in the same transaction
//!   ([`refusal`]), and the route stops for a person. No dispatcher is asked. Live pages are
//!   told both changes, the start first (`TxOutcome::Committed::earlier`).
//!
//! A record of an earlier cycle (a person decided, or the route succeeded since) is
//! forgotten in the same transaction.

use super::{input::HeldSession, pending::Pending, EngineError};
use crate::store::{ResumableRow, RouteRow, Tx, Writes};
use chrono::{DateTime, Utc};
use classifier::{Envelope, Verdict};
use policy::{
    api::{CandidateTarget, DispatcherKind, Profile},
    classification::{Classification, Gate, GateReason, UnclassifiedReason},
    document::ValidatedCandidatePolicy,
    evaluator::{DecisionKind, Failure as EvaluatorFailure},
    route::{AttemptKind, EventKind, FailureReport, RouteEvent, RouteState},
};

/// The gate's resumable exception for a failure reported with the `session` that holds its
/// output (`Evidence::session`), decided in the failure's transaction against the route as it
/// is (`prev`) and its candidate's current `policy`: granted when the evidence is the current
/// attempt's and [`resumes`] holds. Then the envelope carries the resume fact, the verdict's
/// gate is decided again with it (not the classification), and the session is returned, for
/// the step's commit to record.
pub(super) fn grant(
    env: &mut Envelope<'static>,
    verdict: &mut Verdict,
    session: HeldSession,
    prev: &RouteState,
    policy: Option<&ValidatedCandidatePolicy>,
    now: DateTime<Utc>,
) -> Option<HeldSession> {
    if env.generation != Some(prev.generation()) || !resumes(&session, verdict, prev, policy, now) {
        return None;
    }
    env.resume = Some(classifier::envelope::Resume {
        session_id: session.session_id.clone(),
        generation: prev.generation(),
    });
    classifier::regate(env, verdict);
    Some(session)
}

/// Whether the session's output may be resumed: the evidence shows real output and no tool
/// activity or partial result, the attempt was the route's current candidate's, and its
/// policy would retry that candidate were the gate open.
fn resumes(
    session: &HeldSession,
    verdict: &Verdict,
    prev: &RouteState,
    policy: Option<&ValidatedCandidatePolicy>,
    now: DateTime<Utc>,
) -> bool {
    let e = &verdict.effects;
    if !e.assistant_output || e.tool_activity || e.partial_result || session.session_id.is_empty() {
        return false;
    }
    if prev.candidate().id != session.candidate_id {
        return false;
    }
    let decision = policy::evaluator::evaluate(
        &EvaluatorFailure {
            classification: &verdict.classification,
            gate: Gate::ALLOW,
            policy,
            usage: prev.cycle().usage(&session.candidate_id),
        },
        now,
    );
    matches!(decision.kind, DecisionKind::Retry | DecisionKind::WaitForReset)
}

/// What a committed step does to the route's resumable session: records the one `granted`
/// to it (at the failure's generation and cycle), or forgets the route's record when a later
/// attempt succeeded (a first attempt's route has none).
pub(super) fn record(
    writes: &mut Writes,
    route_id: &str,
    prev: &RouteState,
    kind: EventKind,
    granted: Option<HeldSession>,
    now: DateTime<Utc>,
) {
    if let Some(session) = granted {
        let row = ResumableRow {
            route_id: route_id.to_owned(),
            candidate_id: session.candidate_id,
            agent_id: session.agent_id,
            session_id: session.session_id,
            generation: prev.generation(),
            cycle: prev.cycle().number(),
            work_digest: session.work_digest,
        };
        writes.keep_resumable(&row, now);
    } else if kind == EventKind::Succeeded && prev.attempt().is_some_and(|a| a.number > 1) {
        writes.forget_resumable(route_id);
    }
}

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

/// Where the pending attempt of `route` stands, were it started now on `target` (the
/// candidate's, with the dispatcher that runs it). Reads in the transaction, after flushing
/// what it queued (a failure earlier in it may have recorded the session).
pub(super) async fn standing(
    tx: &mut Tx<'_>,
    pending: &mut Pending,
    route: &RouteRow,
    profile: &Profile,
    now: DateTime<Utc>,
) -> Result<Standing, EngineError> {
    let Some(attempt) = route.state.attempt() else {
        return Ok(Standing::Fresh);
    };
    if attempt.number <= 1 {
        return Ok(Standing::Fresh);
    }
    pending.flush(tx, now).await?;
    let Some(record) = tx.resumable_session(&route.id).await? else {
        return Ok(Standing::Fresh);
    };
    if route.state.cycle().number() != record.cycle {
        pending.writes.forget_resumable(&route.id);
        return Ok(Standing::Fresh);
    }
    let target: Option<CandidateTarget> = profile
        .target(&route.state.candidate().id)
        .cloned()
        .map(|t| super::dispatch::launched_as(route.caller.kind, t));
    // Only an agent Recourse starts can load a session.
    let agent = target
        .as_ref()
        .filter(|t| t.dispatcher == DispatcherKind::Acp)
        .and_then(|t| t.runner.as_deref());
    let retry = matches!(attempt.kind, AttemptKind::Retry | AttemptKind::PostWait);
    let same = retry
        && target.as_ref().is_some_and(|t| t.id == record.candidate_id)
        && agent == Some(record.agent_id.as_str())
        && tx
            .route_work(&route.id)
            .await?
            .is_some_and(|work| HeldSession::digest(&work) == record.work_digest);
    Ok(if same {
        Standing::Load(record)
    } else {
        Standing::Blocked
    })
}

/// The refusal of an attempt that would replay the prompt after output a session holds: the
/// started attempt's failure, as it is (not a provider error; the output is held elsewhere, so
/// nothing may run it again automatically).
pub(super) fn refusal(generation: u64) -> RouteEvent {
    RouteEvent::Failed(Box::new(FailureReport {
        evidence_generation: generation,
        classification: Classification::unclassified(
            UnclassifiedReason::NotProviderError,
            classifier::Catalogue::builtin().version().to_owned(),
        ),
        gate: Gate::deny(GateReason::AssistantOutput),
        policy: None,
    }))
}
