//! Running a leased attempt on an agent, on the editor's side: the same process, protocol and
//! evidence code as the `acp` dispatcher (`crate::engine::dispatch::acp`), with the editor as the
//! [`Peer`] (its capabilities offered to the agent, the agent's permission, file system and
//! terminal requests passed through to it, its answers back) and the agent's updates forwarded
//! to the editor as they come.
//!
//! An agent whose turn succeeded is kept, with its ACP session, for the session's next attempt
//! on the same agent (so a conversation keeps its context there); any other end stops it. Each
//! agent runs under the agent guard (`super::guard`) in a process group of its own, so it never
//! outlives `recourse acp`.
//!
//! The outcome is decided as the dispatcher decides it (`acp::run`): a prompt answered
//! `end_turn` in which the classifier finds no failure signal is a success; anything else is a
//! failure with its evidence envelope (contract 1), built before Recourse begins to stop the
//! agent. The server classifies that envelope again and decides what the route does.

use crate::{
    clock::WatchdogClock,
    config::AgentConfig,
    engine::dispatch::acp::{
        evidence::{self, Identity, Live, Phase, Recorder},
        process::{self, AgentProcess, Ended},
        protocol::{self, End, Peer, Setup, Turn},
    },
};
use agent_client_protocol::{
    self as acp,
    v1::{self, schema::ClientCapabilities},
    Client, UntypedMessage,
};
use policy::api::LeaseGrant;
use serde_json::Value;
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};
use tokio::sync::{mpsc, oneshot, watch};

/// The editor, as the agents of one editor session see it.
#[derive(Clone)]
pub(crate) struct Editor {
    pub(crate) cx: v1::ConnectionTo<Client>,
    /// The editor's session id (the agents' own session ids never reach it).
    pub(crate) session_id: String,
    /// What the editor said it can do in `initialize`, offered to the agents as is.
    pub(crate) capabilities: ClientCapabilities,
}

/// Session-level updates about an agent that would contradict Recourse's own (its commands, its
/// modes, its options): not forwarded.
fn recourse_owns(update: &Value) -> bool {
    matches!(
        update["sessionUpdate"].as_str(),
        Some("available_commands_update" | "current_mode_update" | "config_option_update")
    )
}

impl Editor {
    /// Sends one `session/update` to the editor, in this session.
    pub(crate) fn update(&self, update: &Value) {
        let params = serde_json::json!({"sessionId": self.session_id, "update": update});
        if let Ok(n) = UntypedMessage::new("session/update", params) {
            // The editor gone: nothing to tell.
            let _ = self.cx.send_notification(n);
        }
    }
}

impl Live for Editor {
    fn update(&self, update: &Value) {
        if !recourse_owns(update) {
            Editor::update(self, update);
        }
    }
}

impl Peer for Editor {
    fn capabilities(&self) -> ClientCapabilities {
        self.capabilities.clone()
    }

    fn request(
        &self,
        method: &str,
        mut params: Value,
        responder: v1::Responder<Value>,
        _replay: bool,
    ) -> bool {
        if let Some(p) = params.as_object_mut() {
            if p.contains_key("sessionId") {
                p.insert("sessionId".to_owned(), Value::String(self.session_id.clone()));
            }
        }
        let cx = self.cx.clone();
        let method_owned = method.to_owned();
        tokio::spawn(async move {
            let answer = match UntypedMessage::new(&method_owned, params) {
                Ok(m) => cx.send_request(m).block_task().await,
                Err(e) => Err(e),
            };
            // The agent gone: nobody waits for the answer.
            let _ = responder.respond_with_result(answer);
        });
        method == "session/request_permission" || method.starts_with("fs/") || method.starts_with("terminal/")
    }

    fn between_turns(&self, update: &Value) {
        Live::update(self, update);
    }
}

/// A running agent and its ACP session, kept between turns.
struct Running {
    process: AgentProcess,
    turns: mpsc::Sender<Turn>,
    grace: Duration,
}

impl Running {
    /// Stops it in the background (closing its session first, then the group's signals).
    fn dispose(self) {
        let Running {
            process,
            turns,
            grace,
        } = self;
        drop(turns);
        tokio::spawn(async move {
            process.stop(grace).await;
        });
    }
}

/// What an attempt came to.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A success, with the agent's stop reason.
    Succeeded { stop_reason: String },
    /// A failure and its evidence envelope.
    Failed { envelope: Value },
    /// Stopped before it ended (the person cancelled, or the lease was lost): nothing to report.
    Stopped,
}

/// The agents of one editor session, by agent id.
#[derive(Default)]
pub(crate) struct Agents {
    running: HashMap<String, Running>,
}

impl Agents {
    /// Runs the leased attempt `grant` on `agent` (started now unless one is running from an
    /// earlier success), until it ends or `stop` turns true. `guard`: the agent guard's
    /// executable; `cwd`: the route's working directory.
    pub(crate) async fn attempt(
        &mut self,
        editor: &Editor,
        agent: &AgentConfig,
        grant: &LeaseGrant,
        cwd: &Path,
        guard: &Path,
        stop: watch::Receiver<bool>,
    ) -> Outcome {
        let rec = Recorder::new(Some(Arc::new(editor.clone())));
        rec.phase(Phase::Launch);
        let identity = |t: &evidence::Transcript, ended: Option<&Ended>| {
            evidence::envelope(
                &Identity {
                    invocation_id: &grant.invocation_id,
                    generation: grant.invocation_generation,
                    provider_id: grant.provider_id.as_deref().or(agent.provider_id.as_deref()),
                    model_id: grant.model_id.as_deref().or(agent.model_id.as_deref()),
                    agent: &agent.id,
                },
                t,
                ended,
            )
        };
        let mut running = match self.running.remove(&agent.id) {
            Some(r) if !r.turns.is_closed() => {
                let mut r = r;
                r.process.mark_turn();
                r
            }
            other => {
                if let Some(r) = other {
                    r.dispose();
                }
                // Started from this task, on the runtime's one thread (the guard's parent).
                match process::spawn_with(agent, cwd, Some(guard)) {
                    Ok(s) => {
                        let setup = Setup {
                            cwd: s.cwd.clone(),
                            auth_method: agent.auth_method.clone(),
                            load: None,
                            timeouts: agent.timeouts,
                            watchdog: WatchdogClock::default(),
                        };
                        let peer: Arc<dyn Peer> = Arc::new(editor.clone());
                        Running {
                            turns: protocol::open(s.stdin, s.stdout, setup, peer),
                            process: s.process,
                            grace: agent.timeouts.exit_grace(),
                        }
                    }
                    Err(e) => {
                        tracing::warn!(agent = agent.id, error = %e, "cannot start the agent");
                        return Outcome::Failed {
                            envelope: identity(&rec.snapshot(), None),
                        };
                    }
                }
            }
        };
        let prompt = grant.work.as_ref().map(|w| w.prompt.clone()).unwrap_or_default();
        let (done, ended) = oneshot::channel();
        let turn = Turn {
            prompt,
            rec: rec.clone(),
            stop: stop.clone(),
            done,
        };
        let t = agent.timeouts;
        let ceiling = t.step() * 4 + t.prompt_total() + t.cancel_grace() + Duration::from_secs(5);
        let end = if running.turns.send(turn).await.is_err() {
            End::TransportClosed
        } else {
            match tokio::time::timeout(ceiling, ended).await {
                Ok(Ok(end)) => end,
                Ok(Err(_)) => End::TransportClosed,
                Err(_) => End::TimedOut(protocol::Timeout::PromptTotal),
            }
        };
        let ended = running
            .process
            .session_ended(end == End::TransportClosed, running.grace)
            .await;
        let transcript = rec.snapshot();
        if let End::Cancelled { acknowledged } = end {
            if acknowledged {
                self.running.insert(agent.id.clone(), running);
            } else {
                running.dispose();
            }
            return Outcome::Stopped;
        }
        let envelope = identity(&transcript, Some(&ended));
        let now = chrono::Utc::now();
        let verdict = classifier::Envelope::from_value(&envelope)
            .ok()
            .map(|env| classifier::classify(&env, now));
        let stop_reason = transcript.stop_reason().map(str::to_owned);
        if end == End::Answered
            && stop_reason.as_deref() == Some("end_turn")
            && !verdict.is_none_or(|v| v.signals_failure())
        {
            self.running.insert(agent.id.clone(), running);
            return Outcome::Succeeded {
                stop_reason: stop_reason.unwrap_or_default(),
            };
        }
        // Reported first, stopped after: the caller reports, and the agent goes meanwhile.
        running.dispose();
        Outcome::Failed { envelope }
    }

    /// Stops every agent in the background.
    pub(crate) fn dispose_all(&mut self) {
        for (_, r) in self.running.drain() {
            r.dispose();
        }
    }

    /// Stops every agent (the editor is gone, or `recourse acp` stops).
    pub(crate) async fn stop_all(&mut self) {
        let stops: Vec<_> = self
            .running
            .drain()
            .map(|(_, r)| {
                drop(r.turns);
                r.process.stop(r.grace)
            })
            .collect();
        futures_util::future::join_all(stops).await;
    }
}

/// The working directory of a leased attempt: the route's (it is this session's), else the
/// session's own.
pub(crate) fn cwd_of(grant: &LeaseGrant, session_cwd: &Path) -> PathBuf {
    grant
        .work
        .as_ref()
        .and_then(|w| w.cwd.as_deref())
        .map_or_else(|| session_cwd.to_owned(), PathBuf::from)
}

/// An error for the editor, from a message (no input of the editor's is repeated in it).
pub(crate) fn rpc_error(code: fn() -> acp::Error, message: &str) -> acp::Error {
    code().data(Value::String(message.to_owned()))
}
