//! The Agent Client Protocol session of one attempt, protocol version 1. Everything that
//! depends on the protocol version is in this file, so the v2 draft (which moves the end of a
//! turn from the prompt's response into a session update) changes only this file.
//!
//! One attempt: `initialize` (we advertise no file system, no terminal: the agent must not ask
//! us to read, write or run anything), `authenticate` with the configured method when the agent
//! offers it, `session/new` in the work's directory (or `session/load` of the session a
//! resumable retry continues), `session/prompt` with the work's content blocks, then the
//! session's messages in the order the agent sent them until the prompt is answered. Every
//! message goes to the [`Recorder`] as it arrives; nothing here decides what it means.
//!
//! The agent's own requests get the documented conservative answers: a permission request is
//! answered with a reject option (never an allow option; `cancelled` when it offers no reject)
//! and counts as tool activity; anything else (file system, terminal, elicitation: none of
//! them advertised) is `-32601 method not found`.
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
use crate::config::AgentTimeouts;
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
        SessionMessage, SessionSetup,
    },
    Agent, ByteStreams, Client,
};
use serde_json::{json, Value};
use std::{future::Future, path::PathBuf, time::Duration};
use tokio::{
    process::{ChildStdin, ChildStdout},
    sync::watch,
    time::{timeout, timeout_at, Instant},
};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// What to run.
pub(super) struct Plan {
    /// Absolute and resolved (checked under the agent's roots).
    pub(super) cwd: PathBuf,
    /// ACP content blocks, as the route's work carries them.
    pub(super) prompt: Vec<Value>,
    pub(super) auth_method: Option<String>,
    /// Continue this provider-native session (`session/load`) instead of a new one.
    pub(super) load: Option<String>,
    pub(super) timeouts: AgentTimeouts,
}

/// How the session ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum End {
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
pub(super) enum Timeout {
    Step,
    PromptIdle,
    PromptTotal,
}

/// Runs one attempt's session over the agent's stdio. `stop` turns true when the route moved
/// on: before the prompt the session ends at once; during it, `session/cancel` is sent and the
/// `cancelled` answer awaited for `cancel_grace`.
pub(super) async fn run(
    stdin: ChildStdin,
    stdout: ChildStdout,
    plan: Plan,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) -> End {
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let result = Client
        .v1()
        .name("recourse")
        .connect_with(transport, async move |cx: v1::ConnectionTo<Agent>| {
            Ok(Session { cx, plan, rec, stop }.run().await)
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
    plan: Plan,
    rec: Recorder,
    stop: watch::Receiver<bool>,
}

/// One request before the prompt: its answer, or how the session ends.
enum Step<T> {
    Ok(T),
    End(End),
}

/// Our `initialize`: protocol version 1, no file system, no terminal.
fn initialize() -> InitializeRequest {
    InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(
            ClientCapabilities::new()
                .fs(FileSystemCapabilities::new()
                    .read_text_file(false)
                    .write_text_file(false))
                .terminal(false),
        )
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
            let sent = cx.send_request(initialize()).block_task();
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
    async fn run(mut self) -> End {
        self.rec.phase(Phase::SessionInit);
        let sent = self.cx.send_request(initialize()).block_task();
        let init = match self.step(sent).await {
            Step::Ok(r) => r,
            Step::End(e) => return e,
        };
        if init.protocol_version != ProtocolVersion::V1 {
            // "The client should disconnect if it doesn't support this version."
            return End::Local("the agent does not speak ACP protocol version 1".to_owned());
        }
        let load_session = init.agent_capabilities.load_session;
        self.rec.capabilities(load_session);
        self.rec
            .auth_methods(init.auth_methods.iter().map(|a| a.id().0.to_string()).collect());
        if let Some(method) = self.plan.auth_method.clone() {
            let offered = init.auth_methods.iter().any(|a| &*a.id().0 == method.as_str());
            if offered {
                let sent = self
                    .cx
                    .send_request(AuthenticateRequest::new(AuthMethodId::new(method)))
                    .block_task();
                if let Step::End(e) = self.step(sent).await {
                    return e;
                }
            }
        }
        let blocks = match self
            .plan
            .prompt
            .iter()
            .map(|b| serde_json::from_value::<ContentBlock>(b.clone()))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(b) => b,
            Err(_) => return End::Local("the work's prompt is not ACP content".to_owned()),
        };
        let mut session = match self.plan.load.clone() {
            Some(id) if load_session => {
                let cwd = self.plan.cwd.clone();
                let sent = self.cx.load_session(id, cwd).block_task().start_session();
                match self.step(sent).await {
                    Step::Ok(SessionSetup { session, .. }) => session,
                    Step::End(e) => return e,
                }
            }
            Some(_) => return End::CannotLoad,
            None => {
                let cwd = self.plan.cwd.clone();
                let sent = self.cx.build_session(cwd).block_task().start_session();
                match self.step(sent).await {
                    Step::Ok(SessionSetup { session, .. }) => session,
                    Step::End(e) => return e,
                }
            }
        };
        self.rec.session(&session.session_id().0);
        // What `session/load` replayed is already queued, before its answer: history, not
        // effects of this prompt.
        while let Some(message) = futures_util::FutureExt::now_or_never(session.read_update()) {
            match message {
                Ok(SessionMessage::Message(m)) => self.answer(m, true),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        if *self.stop.borrow() {
            return End::Cancelled { acknowledged: false };
        }
        if session.send_prompt_blocks(blocks).is_err() {
            return End::TransportClosed;
        }
        self.rec.prompt_sent();

        let t = self.plan.timeouts;
        let total = Instant::now() + t.prompt_total();
        let mut cancel_by: Option<Instant> = None;
        // The dispatcher keeps the sender while the attempt runs; if it is gone, nobody can
        // ask to stop any more.
        let mut stop_open = true;
        loop {
            let idle = Instant::now() + t.prompt_idle();
            let deadline = cancel_by.unwrap_or(idle).min(total);
            let stopping = cancel_by.is_some();
            let message = tokio::select! {
                m = timeout_at(deadline, session.read_update()) => m,
                changed = self.stop.changed(), if !stopping && stop_open => {
                    stop_open = changed.is_ok();
                    if stop_open && *self.stop.borrow() {
                        let cancel = CancelNotification::new(session.session_id().clone());
                        // A dead connection is noticed by the read below.
                        let _ = session.connection().send_notification(cancel);
                        self.rec.cancel_sent();
                        cancel_by = Some(Instant::now() + t.cancel_grace());
                    }
                    continue;
                }
            };
            match message {
                Err(_) if stopping => return End::Cancelled { acknowledged: false },
                Err(_) if Instant::now() >= total => return End::TimedOut(Timeout::PromptTotal),
                Err(_) => return End::TimedOut(Timeout::PromptIdle),
                Ok(Err(e)) if closed(&e) => return End::TransportClosed,
                Ok(Err(e)) => {
                    return End::Local(format!(
                        "ACP session failed: {}",
                        classifier::redact::redact(&e.message)
                    ))
                }
                Ok(Ok(SessionMessage::Message(m))) => self.answer(m, false),
                Ok(Ok(SessionMessage::PromptResponse(Ok(r)))) => {
                    let result = serde_json::to_value(&r).unwrap_or(Value::Null);
                    let cancelled = result["stopReason"] == "cancelled";
                    self.rec.prompt_result(result);
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
                    self.rec.prompt_error(rpc_error(&e));
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

    /// Awaits one request before the prompt, within the step timeout, unless the route moves
    /// on first. Dropping the pending request on a timeout sends `$/cancel_request`.
    async fn step<T>(&mut self, request: impl Future<Output = Result<T, acp::Error>>) -> Step<T> {
        let step: Duration = self.plan.timeouts.step();
        if *self.stop.borrow() {
            return Step::End(End::Cancelled { acknowledged: false });
        }
        let stop = async {
            loop {
                if self.stop.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                if *self.stop.borrow() {
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
                    self.rec.agent_error(rpc_error(&e));
                    Step::End(End::AgentError)
                }
            },
            () = stop => Step::End(End::Cancelled { acknowledged: false }),
        }
    }

    /// Records one message of the session and answers it if it is a request.
    fn answer(&self, message: v1::Dispatch, replay: bool) {
        match message {
            acp::Dispatch::Notification(n) => {
                if n.method == "session/update" {
                    let update = n.params.get("update").cloned().unwrap_or(Value::Null);
                    if replay {
                        self.rec.replayed();
                    } else {
                        self.rec.update(update);
                    }
                }
            }
            acp::Dispatch::Request(req, responder) => {
                self.rec.agent_request(&req.method, replay);
                let answer = match req.method.as_str() {
                    "session/request_permission" => {
                        responder.respond(permission_answer(&req.params, replay, &self.rec))
                    }
                    _ => responder.respond_with_error(acp::Error::method_not_found()),
                };
                // An answer that cannot be sent means the connection is gone; the read
                // loop sees it.
                let _ = answer;
            }
            acp::Dispatch::Response(..) => {}
        }
    }
}

/// The answer to `session/request_permission`: a reject option (once, else always), or
/// `cancelled` when none is offered. Never an allow option: nothing in the configuration lets
/// an agent act on a person's behalf. The request counts as tool activity.
fn permission_answer(params: &Value, replay: bool, rec: &Recorder) -> Value {
    if !replay {
        rec.tool_requested(params.get("toolCall").cloned().unwrap_or(Value::Null));
    }
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
