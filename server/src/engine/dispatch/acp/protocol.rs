//! The Agent Client Protocol session of an agent, protocol version 1. Everything that depends
//! on the protocol version is in this file, so the v2 draft (which moves the end of a turn from
//! the prompt's response into a session update) changes only this file.
//!
//! A session: `initialize` (with the client capabilities of the [`Peer`] that answers the
//! agent's own requests), `authenticate` with the configured method when the agent offers it,
//! `session/new` in the work's directory (or `session/load` of the session a resumable retry
//! continues), then one `session/prompt` per [`Turn`] with its content blocks, and the session's
//! messages in the order the agent sent them until each prompt is answered. Every message of a
//! turn goes to the turn's [`Recorder`] as it arrives; nothing here decides what it means. The
//! `acp` dispatcher runs one turn per agent process ([`run`]); `recourse acp` keeps an agent's
//! session for the next turns of the same editor session ([`open`]).
//!
//! The agent's own requests go to the [`Peer`]. Recourse's own ([`Conservative`], the `acp`
//! dispatcher's) advertises no file system and no terminal and gives the documented
//! conservative answers: a permission request is answered with a reject option (never an allow
//! option; `cancelled` when it offers no reject) and counts as tool activity; anything else
//! (file system, terminal, elicitation: none of them advertised) is `-32601 method not found`.
//! The editor's (`recourse acp`) advertises the editor's capabilities and passes every request
//! through to the editor, whose answer goes back to the agent.
//!
//! Timeouts (the agent's configuration): `step` for each request before the prompt,
//! `prompt_idle` for a prompt with no message at all, `prompt_total` for the whole prompt,
//! `cancel_grace` for the `cancelled` answer after `session/cancel`. A timeout ends the session;
//! the caller stops the process.
//!
//! A connection that dies (the agent exited or closed its output) fails the pending request
//! with an error the SDK produces locally (`is_incoming_transport_closed`,
//! `is_connection_terminated`); it is reported as [`End::TransportClosed`], never as an error
//! of the agent: the process exit and stderr are the evidence.

use super::evidence::{Phase, Recorder, RpcError};
use crate::{clock::WatchdogClock, config::AgentTimeouts};
use agent_client_protocol::{
    self as acp,
    schema::ProtocolVersion,
    v1::{
        self,
        schema::{
            AuthMethodId, AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock,
            FileSystemCapabilities, Implementation, InitializeRequest, RequestPermissionOutcome,
            RequestPermissionResponse, SelectedPermissionOutcome,
        },
        ActiveSession, SessionMessage, SessionSetup,
    },
    Agent, ByteStreams, Client,
};
use serde_json::{json, Value};
use std::{future::Future, path::PathBuf, sync::Arc, time::Duration};
use tokio::{
    process::{ChildStdin, ChildStdout},
    sync::{mpsc, oneshot, watch},
    time::{timeout, Instant},
};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// What to run, once (the `acp` dispatcher's attempt).
pub(crate) struct Plan {
    /// Absolute and resolved (checked under the agent's roots).
    pub(crate) cwd: PathBuf,
    /// ACP content blocks, as the route's work carries them.
    pub(crate) prompt: Vec<Value>,
    pub(crate) auth_method: Option<String>,
    /// Continue this provider-native session (`session/load`) instead of a new one.
    pub(crate) load: Option<String>,
    pub(crate) timeouts: AgentTimeouts,
    /// What the turn's watchdogs count on.
    pub(crate) watchdog: WatchdogClock,
}

/// How the agent's session is set up, before its first prompt.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// Absolute and resolved (checked under the agent's roots).
    pub(crate) cwd: PathBuf,
    pub(crate) auth_method: Option<String>,
    /// Continue this provider-native session (`session/load`) instead of a new one.
    pub(crate) load: Option<String>,
    pub(crate) timeouts: AgentTimeouts,
    /// What the turns' watchdogs (`prompt_idle`, `prompt_total`, `cancel_grace`) count on.
    pub(crate) watchdog: WatchdogClock,
}

/// One prompt of a session, and where its end goes. The first turn's recorder also sees the
/// set-up (an error there is that turn's evidence).
pub(crate) struct Turn {
    /// ACP content blocks.
    pub(crate) prompt: Vec<Value>,
    pub(crate) rec: Recorder,
    /// Turns true when the turn must stop: before the prompt it ends at once; during it,
    /// `session/cancel` is sent and the `cancelled` answer awaited for `cancel_grace`.
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) done: oneshot::Sender<End>,
}

/// Who answers the agent's own requests (permission, file system, terminal, ...), and what we
/// tell the agent we can do.
pub(crate) trait Peer: Send + Sync + 'static {
    /// The client capabilities sent in `initialize`.
    fn capabilities(&self) -> ClientCapabilities;

    /// Answers one request of the agent, through `responder`, now or later (the session does
    /// not wait for it). Returns whether it counts as tool activity of the turn (the agent is
    /// acting, or asking to). `replay`: it came with a loaded session's history.
    fn request(&self, method: &str, params: Value, responder: v1::Responder<Value>, replay: bool) -> bool;

    /// One update the agent sent outside any prompt (between turns, or a loaded session's
    /// history): not evidence; dropped unless the peer shows it.
    fn between_turns(&self, _update: &Value) {}
}

/// Recourse's own answers (the `acp` dispatcher): no file system, no terminal, a permission
/// request rejected (and counted as tool activity), anything else `-32601`.
pub(crate) struct Conservative;

impl Peer for Conservative {
    fn capabilities(&self) -> ClientCapabilities {
        ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(false)
                .write_text_file(false))
            .terminal(false)
    }

    fn request(&self, method: &str, params: Value, responder: v1::Responder<Value>, _replay: bool) -> bool {
        // An answer that cannot be sent means the connection is gone; the read loop sees it.
        if method == "session/request_permission" {
            let _ = responder.respond(permission_answer(&params));
            true
        } else {
            let _ = responder.respond_with_error(acp::Error::method_not_found());
            false
        }
    }
}

/// How a turn (or the session) ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum End {
    /// The prompt was answered with a result (recorded).
    Answered,
    /// The agent answered a request with a JSON-RPC error (recorded).
    AgentError,
    /// The connection died: the agent exited or closed its output.
    TransportClosed,
    /// No answer in time.
    TimedOut(Timeout),
    /// We sent `session/cancel` (or stopped before prompting); whether the agent answered
    /// `cancelled` within the grace.
    Cancelled { acknowledged: bool },
    /// A resumable retry could not load its session (the agent no longer offers it).
    CannotLoad,
    /// Our side could not go on (a prompt block that is not ACP content, an SDK failure); an
    /// SDK error's message is redacted (it is logged, and may quote what the agent sent).
    Local(String),
}

/// Which timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timeout {
    Step,
    PromptIdle,
    PromptTotal,
}

/// Runs one attempt's session over the agent's stdio: set-up, one prompt, answered by
/// Recourse's own [`Conservative`] peer. `stop` turns true when the route moved on: before the
/// prompt the session ends at once; during it, `session/cancel` is sent and the `cancelled`
/// answer awaited for `cancel_grace`.
pub(crate) async fn run(
    stdin: ChildStdin,
    stdout: ChildStdout,
    plan: Plan,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) -> End {
    let setup = Setup {
        cwd: plan.cwd,
        auth_method: plan.auth_method,
        load: plan.load,
        timeouts: plan.timeouts,
        watchdog: plan.watchdog,
    };
    let (turns, queue) = mpsc::channel(1);
    let (done, ended) = oneshot::channel();
    let turn = Turn {
        prompt: plan.prompt,
        rec,
        stop,
        done,
    };
    if turns.try_send(turn).is_err() {
        return End::Local("the turn could not be queued".to_owned());
    }
    drop(turns);
    let connection = connect(stdin, stdout, setup, Arc::new(Conservative), queue).await;
    ended.await.unwrap_or(connection)
}

/// Opens a session over the agent's stdio in a task of its own, answered by `peer`: the first
/// turn sent to the returned queue sets it up, and each turn is one prompt, in order. Between
/// turns the agent's messages still go to the peer (not evidence). The session ends when the
/// queue is dropped (after the turn running then) or when a turn ends it (a dead connection, a
/// timeout, a cancel: then the caller stops the process); a turn queued after that gets
/// nothing (its `done` is dropped).
pub(crate) fn open(
    stdin: ChildStdin,
    stdout: ChildStdout,
    setup: Setup,
    peer: Arc<dyn Peer>,
) -> mpsc::Sender<Turn> {
    let (turns, queue) = mpsc::channel(1);
    tokio::spawn(connect(stdin, stdout, setup, peer, queue));
    turns
}

/// The connection's life: each turn's end goes to it; the connection's own end is returned
/// (for a turn whose end could not be given, the one-shot's).
async fn connect(
    stdin: ChildStdin,
    stdout: ChildStdout,
    setup: Setup,
    peer: Arc<dyn Peer>,
    queue: mpsc::Receiver<Turn>,
) -> End {
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let result = Client
        .v1()
        .name("recourse")
        .connect_with(transport, async move |cx: v1::ConnectionTo<Agent>| {
            Ok(Session {
                cx,
                setup,
                peer,
                queue,
            }
            .run()
            .await)
        })
        .await;
    match result {
        Ok(end) => end,
        Err(e) if closed(&e) => End::TransportClosed,
        Err(e) => End::Local(format!(
            "ACP connection failed: {}",
            classifier::redact::redact(&e.message)
        )),
    }
}

/// Whether an error is the SDK's own report of a dead connection (a peer cannot forge it).
fn closed(e: &acp::Error) -> bool {
    acp::is_incoming_transport_closed(e) || acp::is_connection_terminated(e)
}

struct Session {
    cx: v1::ConnectionTo<Agent>,
    setup: Setup,
    peer: Arc<dyn Peer>,
    queue: mpsc::Receiver<Turn>,
}

/// One request before the prompt: its answer, or how the session ends.
enum Step<T> {
    Ok(T),
    End(End),
}

/// Our `initialize`: protocol version 1, with these client capabilities.
fn initialize(capabilities: ClientCapabilities) -> InitializeRequest {
    InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(capabilities)
        .client_info(Implementation::new("recourse", env!("CARGO_PKG_VERSION")))
}

/// What an agent says of itself in answer to `initialize` (`recourse agents check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    /// `agentInfo.name` and `.version`, when it sends them.
    pub(crate) name: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) protocol_version: u64,
    /// The ids of the authentication methods it offers.
    pub(crate) auth_methods: Vec<String>,
    pub(crate) load_session: bool,
}

/// Runs `initialize` alone over the agent's stdio, within `step`: what the agent says of
/// itself, or why it did not answer as an ACP agent.
pub(super) async fn hello(stdin: ChildStdin, stdout: ChildStdout, step: Duration) -> Result<Hello, String> {
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let result = Client
        .v1()
        .name("recourse")
        .connect_with(transport, async move |cx: v1::ConnectionTo<Agent>| {
            let sent = cx
                .send_request(initialize(Conservative.capabilities()))
                .block_task();
            Ok(match timeout(step, sent).await {
                Err(_) => Err(format!("no answer to initialize within {} s", step.as_secs())),
                Ok(Err(e)) if closed(&e) => {
                    Err("it exited or closed its output before answering initialize".to_owned())
                }
                Ok(Err(e)) => Err(format!(
                    "initialize failed: {}",
                    classifier::redact::redact(&e.message)
                )),
                Ok(Ok(init)) => Ok(Hello {
                    name: init.agent_info.as_ref().map(|i| i.name.clone()),
                    version: init.agent_info.as_ref().map(|i| i.version.clone()),
                    protocol_version: serde_json::to_value(init.protocol_version)
                        .ok()
                        .and_then(|v| v.as_u64())
                        .unwrap_or(0),
                    auth_methods: init.auth_methods.iter().map(|a| a.id().0.to_string()).collect(),
                    load_session: init.agent_capabilities.load_session,
                }),
            })
        })
        .await;
    match result {
        Ok(hello) => hello,
        Err(e) if closed(&e) => Err("it exited or closed its output before answering initialize".to_owned()),
        Err(e) => Err(format!(
            "no ACP connection: {}",
            classifier::redact::redact(&e.message)
        )),
    }
}

impl Session {
    /// Sets the session up with the first turn, then runs turns until the queue closes or a
    /// turn ends the session. Returns the session's last end.
    async fn run(mut self) -> End {
        let Some(first) = self.queue.recv().await else {
            return End::Cancelled { acknowledged: false };
        };
        let mut session = match self.open(&first.rec, first.stop.clone()).await {
            Ok(session) => session,
            Err(end) => {
                let _ = first.done.send(end.clone());
                return end;
            }
        };
        let mut next = Some(first);
        loop {
            let turn = match next.take() {
                Some(t) => t,
                None => match self.between_turns(&mut session).await {
                    Ok(Some(t)) => t,
                    Ok(None) => return End::Answered,
                    Err(end) => return end,
                },
            };
            let Turn {
                prompt,
                rec,
                mut stop,
                done,
            } = turn;
            let end = self.prompt(&mut session, prompt, &rec, &mut stop).await;
            let _ = done.send(end.clone());
            if !matches!(end, End::Answered | End::Cancelled { acknowledged: true }) {
                // The agent's state after anything but an answer (or a cancel it acknowledged)
                // is unknown: the session ends.
                return end;
            }
        }
    }

    /// `initialize`, `authenticate`, `session/new` or `session/load`, recorded on `rec`.
    async fn open(
        &mut self,
        rec: &Recorder,
        mut stop: watch::Receiver<bool>,
    ) -> Result<ActiveSession<'static, Agent>, End> {
        rec.phase(Phase::SessionInit);
        let sent = self
            .cx
            .send_request(initialize(self.peer.capabilities()))
            .block_task();
        let init = match self.step(sent, rec, &mut stop).await {
            Step::Ok(r) => r,
            Step::End(e) => return Err(e),
        };
        if init.protocol_version != ProtocolVersion::V1 {
            // "The client should disconnect if it doesn't support this version."
            return Err(End::Local(
                "the agent does not speak ACP protocol version 1".to_owned(),
            ));
        }
        let load_session = init.agent_capabilities.load_session;
        rec.capabilities(load_session);
        rec.auth_methods(init.auth_methods.iter().map(|a| a.id().0.to_string()).collect());
        if let Some(method) = self.setup.auth_method.clone() {
            let offered = init.auth_methods.iter().any(|a| &*a.id().0 == method.as_str());
            if offered {
                let sent = self
                    .cx
                    .send_request(AuthenticateRequest::new(AuthMethodId::new(method)))
                    .block_task();
                if let Step::End(e) = self.step(sent, rec, &mut stop).await {
                    return Err(e);
                }
            }
        }
        let cwd = self.setup.cwd.clone();
        let session = match self.setup.load.clone() {
            Some(id) if load_session => {
                let sent = self.cx.load_session(id, cwd).block_task().start_session();
                match self.step(sent, rec, &mut stop).await {
                    Step::Ok(SessionSetup { session, .. }) => session,
                    Step::End(e) => return Err(e),
                }
            }
            Some(_) => return Err(End::CannotLoad),
            None => {
                let sent = self.cx.build_session(cwd).block_task().start_session();
                match self.step(sent, rec, &mut stop).await {
                    Step::Ok(SessionSetup { session, .. }) => session,
                    Step::End(e) => return Err(e),
                }
            }
        };
        rec.session(&session.session_id().0);
        Ok(session)
    }

    /// Between turns: the next turn, `None` when the queue closed, or the session's end (the
    /// agent went away). What the agent sends meanwhile is not evidence; its requests are
    /// still answered.
    async fn between_turns(
        &mut self,
        session: &mut ActiveSession<'static, Agent>,
    ) -> Result<Option<Turn>, End> {
        loop {
            tokio::select! {
                turn = self.queue.recv() => return Ok(turn),
                message = session.read_update() => match message {
                    Ok(SessionMessage::Message(m)) => self.between(m),
                    Ok(_) => {}
                    Err(e) if closed(&e) => return Err(End::TransportClosed),
                    Err(e) => {
                        return Err(End::Local(format!(
                            "ACP session failed: {}",
                            classifier::redact::redact(&e.message)
                        )))
                    }
                },
            }
        }
    }

    /// One message outside a prompt: an update goes to the peer, a request is answered.
    fn between(&self, message: v1::Dispatch) {
        match message {
            acp::Dispatch::Notification(n) if n.method == "session/update" => {
                self.peer
                    .between_turns(n.params.get("update").unwrap_or(&Value::Null));
            }
            acp::Dispatch::Request(req, responder) => {
                self.peer.request(&req.method, req.params, responder, true);
            }
            _ => {}
        }
    }

    /// One prompt, recorded on `rec`, until it is answered, times out or is cancelled.
    async fn prompt(
        &mut self,
        session: &mut ActiveSession<'static, Agent>,
        prompt: Vec<Value>,
        rec: &Recorder,
        stop: &mut watch::Receiver<bool>,
    ) -> End {
        let blocks = match prompt
            .iter()
            .map(|b| serde_json::from_value::<ContentBlock>(b.clone()))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(b) => b,
            Err(_) => return End::Local("the work's prompt is not ACP content".to_owned()),
        };
        // What `session/load` replayed, or what came between turns, is already queued: history,
        // not effects of this prompt.
        while let Some(message) = futures_util::FutureExt::now_or_never(session.read_update()) {
            match message {
                Ok(SessionMessage::Message(m)) => self.answer(m, true, rec),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if *stop.borrow() {
            return End::Cancelled { acknowledged: false };
        }
        if session.send_prompt_blocks(blocks).is_err() {
            return End::TransportClosed;
        }
        rec.prompt_sent();

        let t = self.setup.timeouts;
        let clock = self.setup.watchdog.clone();
        let total = clock.now() + t.prompt_total();
        let mut cancel_by: Option<Instant> = None;
        // The caller keeps the sender while the turn runs; if it is gone, nobody can ask to
        // stop any more.
        let mut stop_open = true;
        loop {
            let idle = clock.now() + t.prompt_idle();
            let deadline = cancel_by.unwrap_or(idle).min(total);
            let stopping = cancel_by.is_some();
            let message = tokio::select! {
                m = clock.timeout_at(deadline, session.read_update()) => m,
                changed = stop.changed(), if !stopping && stop_open => {
                    stop_open = changed.is_ok();
                    if stop_open && *stop.borrow() {
                        let cancel = CancelNotification::new(session.session_id().clone());
                        // A dead connection is noticed by the read below.
                        let _ = session.connection().send_notification(cancel);
                        rec.cancel_sent();
                        cancel_by = Some(clock.now() + t.cancel_grace());
                    }
                    continue;
                }
            };
            match message {
                Err(_) if stopping => return End::Cancelled { acknowledged: false },
                Err(_) if clock.now() >= total => return End::TimedOut(Timeout::PromptTotal),
                Err(_) => return End::TimedOut(Timeout::PromptIdle),
                Ok(Err(e)) if closed(&e) => return End::TransportClosed,
                Ok(Err(e)) => {
                    return End::Local(format!(
                        "ACP session failed: {}",
                        classifier::redact::redact(&e.message)
                    ))
                }
                Ok(Ok(SessionMessage::Message(m))) => self.answer(m, false, rec),
                Ok(Ok(SessionMessage::PromptResponse(Ok(r)))) => {
                    let result = serde_json::to_value(&r).unwrap_or(Value::Null);
                    let cancelled = result["stopReason"] == "cancelled";
                    rec.prompt_result(result);
                    return if stopping {
                        End::Cancelled {
                            acknowledged: cancelled,
                        }
                    } else {
                        End::Answered
                    };
                }
                Ok(Ok(SessionMessage::PromptResponse(Err(e)))) if closed(&e) => {
                    return End::TransportClosed;
                }
                Ok(Ok(SessionMessage::PromptResponse(Err(e)))) => {
                    rec.prompt_error(rpc_error(&e));
                    return if stopping {
                        End::Cancelled { acknowledged: false }
                    } else {
                        End::AgentError
                    };
                }
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Awaits one request before the prompt, within the step timeout, unless the turn is
    /// stopped first. Dropping the pending request on a timeout sends `$/cancel_request`.
    async fn step<T>(
        &self,
        request: impl Future<Output = Result<T, acp::Error>>,
        rec: &Recorder,
        stop: &mut watch::Receiver<bool>,
    ) -> Step<T> {
        let step: Duration = self.setup.timeouts.step();
        if *stop.borrow() {
            return Step::End(End::Cancelled { acknowledged: false });
        }
        let stopped = async {
            loop {
                if stop.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                if *stop.borrow() {
                    return;
                }
            }
        };
        tokio::select! {
            answer = timeout(step, request) => match answer {
                Err(_) => Step::End(End::TimedOut(Timeout::Step)),
                Ok(Ok(value)) => Step::Ok(value),
                Ok(Err(e)) if closed(&e) => Step::End(End::TransportClosed),
                Ok(Err(e)) => {
                    rec.agent_error(rpc_error(&e));
                    Step::End(End::AgentError)
                }
            },
            () = stopped => Step::End(End::Cancelled { acknowledged: false }),
        }
    }

    /// Records one message of a turn and has the peer answer it if it is a request.
    fn answer(&self, message: v1::Dispatch, replay: bool, rec: &Recorder) {
        match message {
            acp::Dispatch::Notification(n) => {
                if n.method == "session/update" {
                    let update = n.params.get("update").cloned().unwrap_or(Value::Null);
                    if replay {
                        rec.replayed();
                        self.peer.between_turns(&update);
                    } else {
                        rec.update(update);
                    }
                }
            }
            acp::Dispatch::Request(req, responder) => {
                rec.agent_request(&req.method, replay);
                let tool_call = req.params.get("toolCall").cloned();
                let acts = self.peer.request(&req.method, req.params, responder, replay);
                if acts && !replay {
                    rec.tool_requested(tool_call.unwrap_or(Value::Null));
                }
            }
            acp::Dispatch::Response(..) => {}
        }
    }
}

/// The answer to `session/request_permission`: a reject option (once, else always), or
/// `cancelled` when none is offered. Never an allow option: nothing in the configuration lets
/// an agent act on a person's behalf.
fn permission_answer(params: &Value) -> Value {
    let options = params["options"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let pick = ["reject_once", "reject_always"].iter().find_map(|kind| {
        options
            .iter()
            .find(|o| o["kind"] == *kind)
            .and_then(|o| o["optionId"].as_str())
    });
    let outcome = match pick {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.to_owned())),
        None => RequestPermissionOutcome::Cancelled,
    };
    serde_json::to_value(RequestPermissionResponse::new(outcome))
        .unwrap_or_else(|_| json!({"outcome": {"outcome": "cancelled"}}))
}

fn rpc_error(e: &acp::Error) -> RpcError {
    RpcError {
        code: i64::from(i32::from(e.code)),
        message: e.message.clone(),
        data: e.data.clone(),
    }
}
