//! One editor session: its route, its turns, and what the person reads.
//!
//! The session's first prompt starts a route of the profile (caller `editor`, reference = the
//! session id, so `session/load` finds it again), with the prompt as its work and the editor's
//! directory as its working directory; each later prompt is the route's next work (a new
//! prompt generation). A turn then follows the route until it needs nothing more from this
//! runner ([`Session::drive`]):
//! - an attempt started: claim it (the claim limited to this route), acknowledge it, run it on
//!   the candidate's agent (`super::agents`), keep the lease while it runs, report it; the
//!   report's answer is the route's next state;
//! - a wait (retry delay or a trusted reset): say so once, with the time and a plan, and wait
//!   for the route to move (the server's timer moves it);
//! - a switch: one short message, then the next agent's work in the same session;
//! - `action_required`: the turn ends with what happened, the class and code, and what the
//!   person can do ("retry", "switch", the route's page);
//! - idle again (a success): the turn ends with the agent's stop reason.
//!
//! The person's `session/cancel` stops the running agent (`session/cancel` to it) or the wait,
//! and the route (`stop`); the turn ends `cancelled`. A later prompt on a stopped route ends it
//! (`abandon`) and starts a new route for the session: a stopped prompt is never repeated
//! unless the person says "retry" (or `/retry`; `/switch` and `/stop` likewise map to the
//! manual actions, each with the route's generation).
//!
//! The server decides everything (classification, policy, timers, circuits); this only reads
//! the route's snapshot, which comes back from every call, and looks again (polling, faster as
//! a deadline nears) while the route waits.

use super::{
    agents::{self, Agents, Editor, Outcome},
    api::{Api, ApiError},
    say, Front,
};
use agent_client_protocol as acp;
use policy::{
    api::{LeaseGrant, Work},
    wire::{DispatchState, ManualAction, RouteSnapshot, StateName},
};
use serde_json::Value;
use std::{path::PathBuf, sync::Arc, time::Duration};
use tokio::sync::{watch, Mutex};

/// What the person typed, when it is one of Recourse's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Retry,
    Switch,
    Stop,
}

impl Command {
    /// `/retry`, `/switch`, `/stop` (always commands), or `retry`, `switch`, `stop` alone
    /// (commands when the route is stopped or waiting). Returns the command and whether it was
    /// the slash form.
    pub(crate) fn parse(prompt: &[Value]) -> Option<(Command, bool)> {
        let [block] = prompt else { return None };
        if block["type"] != "text" {
            return None;
        }
        let text = block["text"].as_str()?.trim().to_ascii_lowercase();
        let (word, slash) = match text.strip_prefix('/') {
            Some(w) => (w.to_owned(), true),
            None => (text, false),
        };
        let command = match word.as_str() {
            "retry" => Command::Retry,
            "switch" => Command::Switch,
            "stop" => Command::Stop,
            _ => return None,
        };
        Some((command, slash))
    }
}

/// The session's route as last seen.
#[derive(Debug, Clone)]
struct RouteAt {
    id: String,
    snapshot: RouteSnapshot,
    /// The candidate this process pinned it to (a loaded session's route counts as unpinned).
    pin: Option<String>,
}

struct Inner {
    route: Option<RouteAt>,
    /// Routes this process started for the session (the next invocation id's number).
    started: u32,
    agents: Agents,
}

/// One editor session.
pub(crate) struct Session {
    pub(crate) id: String,
    cwd: PathBuf,
    front: Arc<Front>,
    editor: Editor,
    /// Bumped by each `session/cancel`.
    cancel: watch::Sender<u64>,
    /// The session's mode: the candidate its next prompts are pinned to (`None`: fail over).
    mode: std::sync::Mutex<Option<String>>,
    /// When its last turn ended (or it opened).
    last_used: std::sync::Mutex<std::time::Instant>,
    inner: Mutex<Inner>,
}

/// How a turn ends, for the editor.
pub(crate) type TurnEnd = Result<&'static str, acp::Error>;

impl Session {
    pub(crate) fn new(
        id: String,
        cwd: PathBuf,
        front: Arc<Front>,
        editor: Editor,
        route: Option<(String, RouteSnapshot)>,
    ) -> Session {
        Session {
            id,
            cwd,
            front,
            editor,
            cancel: watch::Sender::new(0),
            mode: std::sync::Mutex::new(None),
            last_used: std::sync::Mutex::new(std::time::Instant::now()),
            inner: Mutex::new(Inner {
                route: route.map(|(id, snapshot)| RouteAt {
                    id,
                    snapshot,
                    pin: None,
                }),
                started: 0,
                agents: Agents::default(),
            }),
        }
    }

    fn api(&self) -> &Api {
        &self.front.api
    }

    fn say(&self, text: &str) {
        self.editor.update(&say::message(text));
    }

    /// The person's `session/set_mode`: the next prompts run only on `candidate` (`None`: on
    /// the profile's candidates, failing over).
    pub(crate) fn set_mode(&self, candidate: Option<String>) {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = candidate;
    }

    fn mode(&self) -> Option<String> {
        self.mode.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The message of a stopped route: what happened, and what the person can do.
    fn stopped(&self, route: &RouteAt) -> String {
        let s = &route.snapshot;
        let label = self.front.label(&s.candidate_id);
        let next = self.front.next_label(&s.candidate_id);
        let next = match (&route.pin, &next) {
            (Some(_), _) => say::Next::Pinned,
            (None, Some(n)) => say::Next::To(n),
            (None, None) => say::Next::None,
        };
        say::stopped(&label, next, s, &self.api().route_url(&route.id))
    }

    /// The person's `session/cancel`.
    pub(crate) fn cancel(&self) {
        self.cancel.send_modify(|n| *n += 1);
    }

    /// Stops the session's agents (after its running turn, if any).
    pub(crate) async fn close(&self) {
        self.inner.lock().await.agents.stop_all().await;
    }

    /// When its last turn ended.
    pub(crate) fn last_used(&self) -> std::time::Instant {
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the session's agents unless a turn runs now (its next prompt starts them again, in
    /// new sessions of their own).
    pub(crate) fn stop_idle_agents(&self) {
        if let Ok(mut inner) = self.inner.try_lock() {
            inner.agents.dispose_all();
        }
    }

    /// What the person sees of the route when the session is loaded again.
    pub(crate) async fn resumed(&self) {
        let inner = self.inner.lock().await;
        let Some(route) = &inner.route else { return };
        let s = &route.snapshot;
        let label = self.front.label(&s.candidate_id);
        let text = match s.state {
            StateName::ActionRequired => self.stopped(route),
            StateName::WaitingForReset | StateName::RetryWait => say::waiting(&label, s),
            StateName::Completed | StateName::Abandoned => "This session's route has ended; the next prompt starts a new one.".to_owned(),
            _ if s.attempt.is_some() => format!(
                "The last prompt is still in progress on {label}; send /retry, /switch or /stop if it does not move."
            ),
            _ => return,
        };
        self.say(&format!(
            "Resumed this session ({}). {text}",
            self.api().route_url(&route.id)
        ));
    }

    /// One prompt of the editor.
    pub(crate) async fn prompt(&self, prompt: Vec<Value>) -> TurnEnd {
        let Ok(mut inner) = self.inner.try_lock() else {
            return Err(agents::rpc_error(
                acp::Error::invalid_request,
                "a prompt is already running in this session",
            ));
        };
        let mut cancel = self.cancel.subscribe();
        cancel.borrow_and_update();
        let waiting_or_stopped = |s: &RouteSnapshot| {
            matches!(
                s.state,
                StateName::ActionRequired | StateName::WaitingForReset | StateName::RetryWait
            )
        };
        let current = inner.route.clone();
        let snapshot = match (Command::parse(&prompt), &current) {
            (Some((command, _)), Some(r)) if waiting_or_stopped(&r.snapshot) => {
                match self.command(&mut inner, command, r).await? {
                    Some(s) => s,
                    None => return Ok("end_turn"),
                }
            }
            (Some((command, true)), _) => {
                let what = match command {
                    Command::Retry => "retry",
                    Command::Switch => "switch",
                    Command::Stop => "stop",
                };
                self.say(&format!(
                    "Nothing to {what}: no prompt of this session is stopped or waiting."
                ));
                return Ok("end_turn");
            }
            _ => match self.new_work(&mut inner, prompt).await? {
                Some(s) => s,
                None => return Ok("end_turn"),
            },
        };
        let end = self.drive(&mut inner, snapshot, &mut cancel).await;
        *self.last_used.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        end
    }

    /// A command on a stopped or waiting route: the manual action with its generation.
    async fn command(
        &self,
        inner: &mut Inner,
        command: Command,
        r: &RouteAt,
    ) -> Result<Option<RouteSnapshot>, acp::Error> {
        let g = r.snapshot.generation;
        let result = match (command, r.snapshot.state) {
            (Command::Retry, _) => self.api().act(&r.id, ManualAction::RetryNow, g).await,
            (Command::Switch, _) => self.api().act(&r.id, ManualAction::SkipNow, g).await,
            (Command::Stop, StateName::ActionRequired) => {
                let s = self
                    .settled(&r.id, self.api().abandon(&r.id, g).await)
                    .map_err(|e| self.failed(&e))?;
                self.say("Ended this prompt's route; the next prompt starts afresh.");
                inner.route = Some(RouteAt {
                    id: r.id.clone(),
                    snapshot: s,
                    pin: r.pin.clone(),
                });
                return Ok(None);
            }
            (Command::Stop, _) => self.api().act(&r.id, ManualAction::Stop, g).await,
        };
        let s = self.settled(&r.id, result).map_err(|e| self.failed(&e))?;
        inner.route = Some(RouteAt {
            id: r.id.clone(),
            snapshot: s.clone(),
            pin: r.pin.clone(),
        });
        Ok(Some(s))
    }

    /// The prompt as the route's next work: on the route when it is idle, else on a new route
    /// (a stopped one is ended first). `None`: the turn ends here (said why).
    async fn new_work(
        &self,
        inner: &mut Inner,
        prompt: Vec<Value>,
    ) -> Result<Option<RouteSnapshot>, acp::Error> {
        let work = Work {
            prompt,
            cwd: Some(self.cwd.to_string_lossy().into_owned()),
            ..Work::default()
        };
        let mode = self.mode();
        if let Some(r) = inner.route.clone() {
            let s = &r.snapshot;
            match s.state {
                StateName::Active if s.attempt.is_none() && r.pin != mode => {
                    // The person chose another mode: this route is done, a new one follows.
                    if let Err(e) = self.api().complete(&r.id, s.generation).await {
                        if e.status() != Some(reqwest::StatusCode::CONFLICT) {
                            return Err(self.failed(&e));
                        }
                    }
                }
                StateName::Active if s.attempt.is_none() => {
                    match self.api().submit_work(&r.id, s.generation, &work).await {
                        Ok(next) => {
                            inner.route = Some(RouteAt {
                                id: r.id.clone(),
                                snapshot: next.clone(),
                                pin: r.pin.clone(),
                            });
                            return Ok(Some(next));
                        }
                        Err(ApiError::Status {
                            snapshot: Some(now), ..
                        }) => {
                            // Someone moved the route meanwhile: start afresh below if it stopped.
                            inner.route = Some(RouteAt {
                                id: r.id.clone(),
                                snapshot: *now,
                                pin: r.pin.clone(),
                            });
                            return Box::pin(self.new_work(inner, work.prompt)).await;
                        }
                        Err(e) => return Err(self.invalid_or_failed(&e)),
                    }
                }
                StateName::ActionRequired => {
                    // A new prompt after a stop: the stopped one is ended, never repeated.
                    if let Err(e) = self.api().abandon(&r.id, s.generation).await {
                        if e.status() != Some(reqwest::StatusCode::CONFLICT) {
                            return Err(self.failed(&e));
                        }
                    }
                }
                StateName::Completed | StateName::Abandoned => {}
                _ => {
                    self.say(&format!(
                        "The previous prompt is still in progress ({}); send /retry, /switch or /stop first.",
                        self.api().route_url(&r.id)
                    ));
                    return Ok(None);
                }
            }
        }
        inner.started += 1;
        let invocation = format!("{}-{}", self.id, random_suffix());
        let summary = self
            .api()
            .start_route(
                &self.front.profile.id,
                &self.id,
                &invocation,
                &work,
                mode.as_deref(),
            )
            .await
            .map_err(|e| self.invalid_or_failed(&e))?;
        inner.route = Some(RouteAt {
            id: summary.id.clone(),
            snapshot: summary.snapshot.clone(),
            pin: mode,
        });
        Ok(Some(summary.snapshot))
    }

    /// Follows the route until it needs nothing more from this runner.
    async fn drive(
        &self,
        inner: &mut Inner,
        mut s: RouteSnapshot,
        cancel: &mut watch::Receiver<u64>,
    ) -> TurnEnd {
        let route_id = inner.route.as_ref().map(|r| r.id.clone()).unwrap_or_default();
        let pin = inner.route.as_ref().and_then(|r| r.pin.clone());
        let mut stop_reason = "end_turn";
        let mut failed_on: Option<String> = None;
        let mut said_wait: Option<u64> = None;
        loop {
            inner.route = Some(RouteAt {
                id: route_id.clone(),
                snapshot: s.clone(),
                pin: pin.clone(),
            });
            if cancel.has_changed().unwrap_or(false) {
                return self.cancelled(inner, &route_id, &s).await;
            }
            let label = self.front.label(&s.candidate_id);
            // The route moved on to another candidate after a failure: one short message.
            if let Some(from) = failed_on.as_deref() {
                let moving = matches!(
                    s.state,
                    StateName::Active
                        | StateName::Retrying
                        | StateName::WaitingForReset
                        | StateName::RetryWait
                );
                if moving && from != s.candidate_id {
                    self.say(&say::switched(&self.front.label(from), &label, &s));
                    failed_on = None;
                }
            }
            match (s.state, s.attempt) {
                (StateName::Active | StateName::Retrying, Some(a))
                    if a.dispatch == DispatchState::Started =>
                {
                    let claimed = self
                        .api()
                        .claim(&route_id, &self.front.runner_name, self.front.lease_seconds)
                        .await;
                    match claimed {
                        Ok(Some(grant)) => {
                            let candidate = grant.candidate_id.clone();
                            match self.attempt(inner, &grant, cancel).await? {
                                (next, Outcome::Succeeded { stop_reason: r }) => {
                                    stop_reason = stop_reason_of(&r);
                                    s = next;
                                }
                                (next, Outcome::Failed { .. }) => {
                                    failed_on = Some(candidate);
                                    s = next;
                                }
                                (next, Outcome::Stopped) => {
                                    if cancel.has_changed().unwrap_or(false) {
                                        return self.cancelled(inner, &route_id, &next).await;
                                    }
                                    s = next;
                                }
                            }
                        }
                        Ok(None) => match self.wait_change(&route_id, &s, cancel).await? {
                            Some(next) => s = next,
                            None => return self.cancelled(inner, &route_id, &s).await,
                        },
                        Err(e) => return Err(self.failed(&e)),
                    }
                }
                (StateName::Active | StateName::Retrying, Some(_)) => {
                    if let (Some(hold), true) = (&s.hold, said_wait != Some(s.generation)) {
                        self.say(&say::held(&label, hold.until));
                        said_wait = Some(s.generation);
                    }
                    match self.wait_change(&route_id, &s, cancel).await? {
                        Some(next) => s = next,
                        None => return self.cancelled(inner, &route_id, &s).await,
                    }
                }
                (StateName::Active, None) => return Ok(stop_reason),
                (StateName::WaitingForReset | StateName::RetryWait, _) => {
                    if said_wait != Some(s.generation) {
                        self.say(&say::waiting(&label, &s));
                        self.editor.update(&say::waiting_plan(&label, &s));
                        said_wait = Some(s.generation);
                    }
                    match self.wait_change(&route_id, &s, cancel).await? {
                        Some(next) => s = next,
                        None => return self.cancelled(inner, &route_id, &s).await,
                    }
                }
                (StateName::Switching, _) | (StateName::Retrying, None) => {
                    match self.wait_change(&route_id, &s, cancel).await? {
                        Some(next) => s = next,
                        None => return self.cancelled(inner, &route_id, &s).await,
                    }
                }
                (StateName::ActionRequired, _) => {
                    if let Some(route) = &inner.route {
                        self.say(&self.stopped(route));
                    }
                    return Ok("end_turn");
                }
                (StateName::Completed | StateName::Abandoned, _) => {
                    self.say("This session's route has ended; the next prompt starts a new one.");
                    return Ok("end_turn");
                }
            }
        }
    }

    /// One leased attempt: acknowledge, run, keep the lease, report. Returns the route's next
    /// snapshot and what the attempt came to.
    async fn attempt(
        &self,
        inner: &mut Inner,
        grant: &LeaseGrant,
        cancel: &mut watch::Receiver<u64>,
    ) -> Result<(RouteSnapshot, Outcome), acp::Error> {
        // The claim was the acknowledgement: from here on the attempt may have run.
        let api = self.api().clone();
        let seconds = self.front.lease_seconds;
        let Some(agent) = grant
            .runner
            .as_deref()
            .and_then(|id| self.front.config.agent(id))
            .cloned()
        else {
            // The server's candidate names an agent this runner does not have: the attempt
            // cannot start here (no evidence beyond that: it stops for a person).
            let envelope = serde_json::json!({
                "invocation_id": grant.invocation_id, "generation": grant.invocation_generation,
                "phase": "launch", "effects": {"prompt_delivery": "not_sent"}, "items": [],
            });
            self.say(&format!(
                "Candidate {} names an agent that this recourse acp's --config does not have.",
                self.front.label(&grant.candidate_id)
            ));
            let s = self
                .settled(&grant.route_id, api.report(grant, Some(&envelope)).await)
                .map_err(|e| self.failed(&e))?;
            return Ok((s, Outcome::Failed { envelope }));
        };
        let (stop_tx, stop) = watch::channel(false);
        let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The lease's heartbeat, and the person's cancel, both stop the agent.
        let heartbeat = {
            let (api, grant, lost, stop_tx) = (api.clone(), grant.clone(), lost.clone(), stop_tx.clone());
            let every = Duration::from_secs((seconds / 3).max(1));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match api.heartbeat(&grant, seconds).await {
                        Ok(_) => {}
                        Err(e) if e.code() == Some("lease_lost") => {
                            lost.store(true, std::sync::atomic::Ordering::Release);
                            stop_tx.send_replace(true);
                            return;
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot renew the lease; trying again"),
                    }
                }
            })
        };
        let cwd = agents::cwd_of(grant, &self.cwd);
        let run = inner
            .agents
            .attempt(&self.editor, &agent, grant, &cwd, &self.front.guard, stop);
        tokio::pin!(run);
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                changed = cancel.changed() => {
                    if changed.is_ok() {
                        stop_tx.send_replace(true);
                    }
                }
            }
        };
        heartbeat.abort();
        let next = match &outcome {
            Outcome::Succeeded { .. } => api.report(grant, None).await,
            Outcome::Failed { envelope } => api.report(grant, Some(envelope)).await,
            Outcome::Stopped => {
                if lost.load(std::sync::atomic::Ordering::Acquire) {
                    self.reread(&grant.route_id).await
                } else {
                    // The person's cancel: the route stops (the attempt is aborted, unreported).
                    api.act(&grant.route_id, ManualAction::Stop, grant.invocation_generation)
                        .await
                }
            }
        };
        let next = match next {
            Ok(s) => s,
            Err(e) if e.code() == Some("lease_lost") => {
                self.reread(&grant.route_id).await.map_err(|e| self.failed(&e))?
            }
            Err(e) => self
                .settled(&grant.route_id, Err(e))
                .map_err(|e| self.failed(&e))?,
        };
        Ok((next, outcome))
    }

    /// The person cancelled the turn: stop the route if it still runs or waits.
    async fn cancelled(&self, inner: &mut Inner, route_id: &str, s: &RouteSnapshot) -> TurnEnd {
        if s.allowed_actions.contains(&ManualAction::Stop) && s.state != StateName::ActionRequired {
            if let Ok(next) = self.api().act(route_id, ManualAction::Stop, s.generation).await {
                inner.route = Some(RouteAt {
                    id: route_id.to_owned(),
                    snapshot: next,
                    pin: inner.route.as_ref().and_then(|r| r.pin.clone()),
                });
            }
        }
        Ok("cancelled")
    }

    /// Waits until the route moves past `s` (or the person cancels: `None`). Looks every 2 s,
    /// and from a deadline on every 50 ms, backing off.
    async fn wait_change(
        &self,
        route_id: &str,
        s: &RouteSnapshot,
        cancel: &mut watch::Receiver<u64>,
    ) -> Result<Option<RouteSnapshot>, acp::Error> {
        let mut fast = Duration::from_millis(50);
        loop {
            let now = chrono::Utc::now();
            let due = s.deadline.or(s.hold.as_ref().map(|h| h.until));
            let pause = match due {
                Some(d) if d > now => (d - now).to_std().unwrap_or_default().min(Duration::from_secs(2)),
                Some(_) => {
                    let p = fast;
                    fast = (fast * 2).min(Duration::from_secs(2));
                    p
                }
                None => {
                    let p = fast;
                    fast = (fast * 2).min(Duration::from_secs(2));
                    p
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                changed = cancel.changed() => if changed.is_ok() { return Ok(None) },
            }
            let next = self.reread(route_id).await.map_err(|e| self.failed(&e))?;
            if next.generation != s.generation {
                return Ok(Some(next));
            }
        }
    }

    async fn reread(&self, route_id: &str) -> Result<RouteSnapshot, ApiError> {
        Ok(self.api().route(route_id).await?.route.snapshot)
    }

    /// A call's snapshot: its answer, or the current one a 409 carries.
    fn settled(
        &self,
        _route_id: &str,
        result: Result<RouteSnapshot, ApiError>,
    ) -> Result<RouteSnapshot, ApiError> {
        match result {
            Ok(s) => Ok(s),
            Err(ApiError::Status {
                snapshot: Some(s), ..
            }) => Ok(*s),
            Err(e) => Err(e),
        }
    }

    /// A call that failed, for the editor: what went wrong, without anything it sent.
    fn failed(&self, e: &ApiError) -> acp::Error {
        agents::rpc_error(acp::Error::internal_error, &format!("Recourse: {e}"))
    }

    /// A refused prompt (422: its content or directory) is the editor's to fix.
    fn invalid_or_failed(&self, e: &ApiError) -> acp::Error {
        match e {
            ApiError::Status { status, message, .. } if status.as_u16() == 422 => agents::rpc_error(
                acp::Error::invalid_params,
                &format!("Recourse refused the prompt: {message}"),
            ),
            e => self.failed(e),
        }
    }
}

/// The stop reason the editor gets for a success: the agent's, when it is one ACP defines.
fn stop_reason_of(reason: &str) -> &'static str {
    match reason {
        "max_tokens" => "max_tokens",
        "max_turn_requests" => "max_turn_requests",
        "refusal" => "refusal",
        "cancelled" => "cancelled",
        _ => "end_turn",
    }
}

/// 8 random hex digits (an invocation id's tail).
fn random_suffix() -> String {
    let mut b = [0_u8; 4];
    let _ = getrandom::fill(&mut b);
    crate::hex::hex(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_lone_command_word_is_a_command() {
        let text = |t: &str| vec![json!({"type": "text", "text": t})];
        assert_eq!(Command::parse(&text("/retry")), Some((Command::Retry, true)));
        assert_eq!(
            Command::parse(&text(" Switch \n")),
            Some((Command::Switch, false))
        );
        assert_eq!(Command::parse(&text("/stop")), Some((Command::Stop, true)));
        assert_eq!(Command::parse(&text("retry the build")), None);
        assert_eq!(
            Command::parse(&[json!({"type": "image", "data": "", "mimeType": "image/png"})]),
            None
        );
        let two = vec![
            json!({"type": "text", "text": "retry"}),
            json!({"type": "text", "text": "x"}),
        ];
        assert_eq!(Command::parse(&two), None);
    }
}
