//! One attempt, from spawn to report: resolve the work and the agent (and the session to load,
//! when the engine started this attempt as the retry a session holding the route's output
//! waits for: `LaunchRequest::resume`), start the process and record its group (persist, then act: an agent that
//! cannot be recorded is stopped before it is prompted), run the protocol session, take what
//! the process tells the evidence at the session's end ([`process::Ended`]), report success or
//! the evidence envelope unless the route moved on (a cancelled attempt reports nothing), then
//! stop the process, and forget the group last, so a finished attempt is one with no process
//! row.
//!
//! The report comes before the stop: the outcome is decided by what the agent said before
//! Recourse began to stop it, so nothing the stop does (closing stdin, the grace, SIGTERM) can
//! reach the evidence, and an agent that does not exit on EOF does not hold the route for its
//! `exit_grace`.

use super::{
    evidence::{self, Identity, Phase, PromptDelivery, Recorder, Transcript},
    process::{self, Ended},
    protocol::{self, End, Plan},
};
use crate::{
    config::AgentConfig,
    engine::{dispatch::LaunchRequest, error::EngineError, input::HeldSession},
    store::{AgentProcessRow, Store},
};
use serde_json::Value;
use std::{path::PathBuf, sync::Arc, time::Duration};
use tokio::{sync::watch, time::timeout};

/// Runs one attempt to its end and reports it.
pub(super) async fn attempt(store: Store, r: LaunchRequest, stop: watch::Receiver<bool>) {
    let rec = Recorder::new(Some(Arc::new(r.reporter.clone())));
    rec.phase(Phase::Launch);
    let agent = r
        .target
        .runner
        .as_deref()
        .and_then(|id| r.config.agent(id))
        .cloned();
    let Some(agent) = agent else {
        tracing::warn!(
            route_id = r.route_id,
            attempt = r.attempt,
            "the candidate's agent is not configured"
        );
        let envelope = envelope_of(&r, None, &rec.snapshot(), None);
        return finish(&r, &stop, Reported::failed(envelope), false).await;
    };
    // The route's step decided, when this attempt started, that it is the retry the session
    // holding the route's output waits for.
    let load = r.resume.clone();
    if load.is_some() {
        rec.prior_output();
    }
    let work = r.work.clone().unwrap_or_default();
    let cwd = work
        .cwd
        .as_deref()
        .map(PathBuf::from)
        .or_else(|| agent.default_cwd.clone())
        .unwrap_or_default();
    let spawned = {
        let (agent, cwd) = (agent.clone(), cwd.clone());
        tokio::task::spawn_blocking(move || process::spawn(&agent, &cwd)).await
    };
    let process::Spawned {
        mut process,
        stdin,
        stdout,
        cwd,
    } = match spawned {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(route_id = r.route_id, attempt = r.attempt, agent = agent.id, error = %e, "cannot start the agent");
            let envelope = envelope_of(&r, Some(&agent), &rec.snapshot(), None);
            return finish(&r, &stop, Reported::failed(envelope), false).await;
        }
        Err(_) => return,
    };
    let row = AgentProcessRow {
        pgid: process.pgid,
        start_ticks: process.start.ticks,
        boot_id: process.start.boot_id.clone(),
        route_id: r.route_id.clone(),
        attempt: r.attempt,
        agent_id: agent.id.clone(),
    };
    let grace = agent.timeouts.exit_grace();
    if let Err(e) = store.record_agent_process(&row, r.now).await {
        tracing::error!(route_id = r.route_id, error = %e, "cannot record the agent process; stopping it unprompted");
        drop((stdin, stdout));
        let ended = process.session_ended(false, grace).await;
        process.stop(grace).await;
        let envelope = envelope_of(&r, Some(&agent), &rec.snapshot(), Some(&ended));
        return finish(&r, &stop, Reported::failed(envelope), false).await;
    }
    let plan = Plan {
        cwd,
        prompt: work.prompt.clone(),
        auth_method: agent.auth_method.clone(),
        load,
        timeouts: agent.timeouts,
        watchdog: r.watchdog.clone(),
    };
    let t = agent.timeouts;
    // A safety net over the protocol's own timeouts.
    let ceiling = t.step() * 4 + t.prompt_total() + t.cancel_grace() + Duration::from_secs(5);
    let session = protocol::run(stdin, stdout, plan, rec.clone(), stop.clone());
    let end = timeout(ceiling, session)
        .await
        .unwrap_or(End::TimedOut(protocol::Timeout::PromptTotal));
    // Its stdin is closed now (the session's end dropped it): Recourse has begun to stop it.
    let ended = process.session_ended(end == End::TransportClosed, grace).await;
    let t = rec.snapshot();
    if let (Some(method), Some(offered)) = (&agent.auth_method, &t.auth_methods) {
        if !offered.contains(method) {
            // Configured, not offered: the session ran without `authenticate` (once per attempt).
            tracing::warn!(
                route_id = r.route_id,
                attempt = r.attempt,
                agent = agent.id,
                auth_method = method,
                offered = ?offered,
                "the agent does not offer the configured auth_method; it was not sent (see `recourse agents check`)"
            );
        }
    }
    let envelope = envelope_of(&r, Some(&agent), &t, Some(&ended));
    // The session a retry could load, as far as the agent's side shows; whether the evidence
    // and the policy allow it is the engine's decision.
    let session = held_session(&agent, &t).map(|session_id| HeldSession {
        session_id,
        agent_id: agent.id.clone(),
        candidate_id: r.target.id.clone(),
        work_digest: crate::engine::input::work_digest(&work),
    });
    // A normal end (`end_turn`) is a success unless its evidence carries a failure signal,
    // which the engine's classification decides, once, in the report's transaction.
    let reported = Reported {
        envelope,
        turn_ended: end == End::Answered && t.stop_reason() == Some("end_turn"),
        session,
    };
    finish(&r, &stop, reported, matches!(end, End::TimedOut(_))).await;
    let stopped = process.stop(grace).await;
    tracing::debug!(
        route_id = r.route_id,
        attempt = r.attempt,
        ?end,
        ?ended,
        ?stopped,
        "agent attempt ended"
    );
    if let Err(e) = store.forget_agent_process(row.pgid, row.start_ticks).await {
        tracing::warn!(error = %e, pgid = row.pgid, "cannot forget a stopped agent process");
    }
}

/// The session a retry could load to continue this prompt generation, as far as the agent's
/// side shows: the operator said the agent's loaded session keeps a failed turn's output
/// (`resume_after_output`), the agent advertised `loadSession`, the prompt was delivered, no
/// tool call was seen and nobody asked to stop. Whether the evidence allows it (real output,
/// no other effect) and the policy wants it is the engine's decision.
fn held_session(agent: &AgentConfig, t: &Transcript) -> Option<String> {
    let eligible = agent.resume_after_output
        && t.load_session
        && t.delivery() == PromptDelivery::Confirmed
        && !t.cancel_requested
        && !t.tool_activity
        && t.final_phase() != Phase::Tool;
    eligible.then(|| t.session_id.clone()).flatten()
}

/// What this attempt reports: its evidence envelope and the facts beside it (see
/// `engine::Evidence`).
struct Reported {
    envelope: Value,
    turn_ended: bool,
    session: Option<HeldSession>,
}

impl Reported {
    /// A failure's evidence, with nothing beside it.
    fn failed(envelope: Value) -> Reported {
        Reported {
            envelope,
            turn_ended: false,
            session: None,
        }
    }
}

/// The evidence envelope of this attempt.
fn envelope_of(
    r: &LaunchRequest,
    agent: Option<&AgentConfig>,
    t: &Transcript,
    ended: Option<&Ended>,
) -> Value {
    let id = Identity {
        invocation_id: &r.invocation_id,
        generation: r.invocation_generation,
        provider_id: r
            .target
            .provider_id
            .as_deref()
            .or(agent.and_then(|a| a.provider_id.as_deref())),
        model_id: r
            .target
            .model_id
            .as_deref()
            .or(agent.and_then(|a| a.model_id.as_deref())),
        agent: agent.map_or("", |a| a.id.as_str()),
    };
    evidence::envelope(&id, t, ended)
}

/// Reports, unless the route moved on from the attempt. A report the dispatcher makes on its
/// own initiative (a timeout) is made only while the route still runs the attempt.
async fn finish(r: &LaunchRequest, stop: &watch::Receiver<bool>, reported: Reported, own_initiative: bool) {
    if *stop.borrow() {
        tracing::debug!(
            route_id = r.route_id,
            attempt = r.attempt,
            "attempt cancelled; nothing reported"
        );
        return;
    }
    if own_initiative && !r.reporter.is_current().await {
        return;
    }
    let Reported {
        envelope,
        turn_ended,
        session,
    } = reported;
    logged(
        r,
        r.reporter.report_evidence(&envelope, turn_ended, session).await,
    );
}

/// A report's outcome in the log: a late one the engine rejected is routine (the route moved
/// on), anything else is worth a warning.
fn logged<T>(r: &LaunchRequest, result: Result<T, EngineError>) {
    match result {
        Ok(_) => {}
        Err(EngineError::Rejected { reason, .. }) => {
            tracing::debug!(
                route_id = r.route_id,
                attempt = r.attempt,
                reason,
                "late report rejected"
            );
        }
        Err(e) => {
            tracing::warn!(route_id = r.route_id, attempt = r.attempt, error = %e, "cannot report the attempt")
        }
    }
}
