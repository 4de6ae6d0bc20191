//! One attempt, from spawn to report: resolve the work and the agent, start the process and
//! record its group (persist, then act: an agent that cannot be recorded is stopped before it
//! is prompted), run the protocol session, stop the process, report success or the evidence
//! envelope unless the route moved on (a cancelled attempt reports nothing), and forget the
//! group last, so a finished attempt is one with no process row.

use super::{
    evidence::{self, Identity, Phase, Recorder, Transcript},
    process::{self, ExitInfo},
    protocol::{self, End, Plan},
};
use crate::{
    config::AgentConfig,
    engine::{
        dispatch::{LaunchRequest, Report},
        EngineError,
    },
    store::{AgentProcessRow, Store},
};
use classifier::Envelope;
use policy::classification::{ClassState, UnclassifiedReason};
use std::{path::PathBuf, time::Duration};
use tokio::{sync::watch, time::timeout};

/// Runs one attempt to its end and reports it.
pub(super) async fn attempt(store: Store, r: LaunchRequest, stop: watch::Receiver<bool>) {
    let rec = Recorder::new(Some(r.reporter.clone()));
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
        let report = failed(&r, None, &rec.snapshot(), &[], None);
        return finish(&r, &stop, report, false).await;
    };
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
        process,
        stdin,
        stdout,
        cwd,
    } = match spawned {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(route_id = r.route_id, attempt = r.attempt, agent = agent.id, error = %e, "cannot start the agent");
            let report = failed(&r, Some(&agent), &rec.snapshot(), &[], None);
            return finish(&r, &stop, report, false).await;
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
        let (exit, stderr) = process.stop(grace).await;
        let report = failed(&r, Some(&agent), &rec.snapshot(), &stderr, Some(&exit));
        return finish(&r, &stop, report, false).await;
    }
    let plan = Plan {
        cwd,
        prompt: work.prompt,
        auth_method: agent.auth_method.clone(),
        load: None,
        timeouts: agent.timeouts,
    };
    let t = agent.timeouts;
    // A safety net over the protocol's own timeouts.
    let ceiling = t.step() * 4 + t.prompt_total() + t.cancel_grace() + Duration::from_secs(5);
    let session = protocol::run(stdin, stdout, plan, rec.clone(), stop.clone());
    let end = timeout(ceiling, session)
        .await
        .unwrap_or(End::TimedOut(protocol::Timeout::PromptTotal));
    let (exit, stderr) = process.stop(grace).await;
    let t = rec.snapshot();
    tracing::debug!(
        route_id = r.route_id,
        attempt = r.attempt,
        ?end,
        ?exit,
        "agent attempt ended"
    );
    let report = match end {
        End::Answered if t.stop_reason() == Some("end_turn") => {
            let report = failed(&r, Some(&agent), &t, &stderr, Some(&exit));
            if failure_signal(&report, &r) {
                report
            } else {
                Report::Succeeded { result: None }
            }
        }
        _ => failed(&r, Some(&agent), &t, &stderr, Some(&exit)),
    };
    finish(&r, &stop, report, matches!(end, End::TimedOut(_))).await;
    if let Err(e) = store.forget_agent_process(row.pgid, row.start_ticks).await {
        tracing::warn!(error = %e, pgid = row.pgid, "cannot forget a stopped agent process");
    }
}

/// The failure report of this attempt, with its evidence envelope.
fn failed(
    r: &LaunchRequest,
    agent: Option<&AgentConfig>,
    t: &Transcript,
    stderr: &[String],
    exit: Option<&ExitInfo>,
) -> Report {
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
    Report::Failed {
        envelope: evidence::envelope(&id, t, stderr, exit),
    }
}

/// Whether a turn that ended normally carries a failure signal (an agent that reports a
/// provider failure as a message and then ends its turn): the classifier decides, exactly as
/// the engine will. Text no rule recognises, or that is not a provider error, is the agent's
/// answer; a low-confidence match does not turn an answer into a failure.
fn failure_signal(report: &Report, r: &LaunchRequest) -> bool {
    let Report::Failed { envelope } = report else {
        return false;
    };
    let Ok(env) = Envelope::from_value(envelope) else {
        return true;
    };
    let c = classifier::classify(&env, r.now).classification;
    c.class != ClassState::Unclassified || c.reason == Some(UnclassifiedReason::Conflicting)
}

/// Reports, unless the route moved on from the attempt. A report the dispatcher makes on its
/// own initiative (a timeout) is made only while the route still runs the attempt.
async fn finish(r: &LaunchRequest, stop: &watch::Receiver<bool>, report: Report, own_initiative: bool) {
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
    match r.reporter.report(report).await {
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
