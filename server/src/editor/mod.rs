//! `recourse acp`: Recourse as an ACP agent for editors (Zed, JetBrains, Neovim), on standard
//! input and output, speaking ACP v1 through the `agent-client-protocol` crate's agent side.
//!
//! It is the runner of its own routes. Each editor session is a route of one profile (caller
//! `editor`); the server decides what happens (classification, policy, timers, circuits) and
//! never starts these routes' agents itself: it leases each attempt to `recourse acp` (a claim
//! limited to the route), which starts the candidate's agent here, where the editor's files
//! are, from the `[[agent]]` entries of its own `--config` (the ids the server's profile
//! names), and reports the outcome or the evidence back. The agents' permission, file system
//! and terminal requests go to the editor, and its answers back to them: Recourse grants
//! nothing itself.
//!
//! Files, by job: [`api`] (the REST calls and the lease protocol, with backoff while the server
//! cannot be reached), [`session`] (one editor session: its route and its turns), [`agents`]
//! (a leased attempt on an agent: the `acp` dispatcher's process, protocol and evidence code,
//! with the editor as the agent's client), [`say`] (what the person reads), [`guard`] (the
//! agent guard: no agent outlives a killed `recourse acp`), [`binary`] (`recourse acp` runs as
//! the small `recourse-acp` binary when it is installed).
//!
//! Start-up fails with a clear message, before any ACP traffic, when the token is missing or
//! refused, the server cannot be reached, the profile is out of the token's reach, or the
//! profile names an agent the configuration does not have. Malformed ACP from the editor is
//! answered with JSON-RPC errors (the SDK answers what is not JSON-RPC; this answers what is
//! not ACP), never a crash.
//!
//! Sessions keep their agents between successful turns, the `LIVE_SESSIONS` most recently
//! used ones only (an editor never closes a session). When the editor goes away, running turns
//! are cancelled as the person's cancel would (their routes stop), then every agent is stopped.

pub(crate) mod agents;
pub(crate) mod api;
pub mod binary;
pub mod guard;
pub(crate) mod say;
pub(crate) mod session;

use crate::{cli::AcpArgs, config::RunnerConfig};
use agent_client_protocol::{
    self as acp,
    schema::ProtocolVersion,
    v1::{
        self,
        schema::{
            AgentCapabilities, ClientCapabilities, Implementation, InitializeResponse, PromptCapabilities,
        },
    },
    Agent, ByteStreams, Client,
};
use anyhow::{anyhow, Context};
use policy::{
    api::{DispatcherKind, Profile},
    auth::Permission,
};
use serde_json::{json, Value};
use session::Session;
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{Arc, Mutex},
};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The mode that fails over (the profile's candidates in order).
const AUTO: &str = "auto";

/// At most this many sessions keep their agents running between turns.
const LIVE_SESSIONS: usize = 4;

/// What every editor session of this process shares.
pub(crate) struct Front {
    api: api::Api,
    config: RunnerConfig,
    profile: Profile,
    /// The agent guard's executable: this binary.
    guard: PathBuf,
    runner_name: String,
    lease_seconds: u64,
    /// What the editor said it can do, offered to the agents.
    capabilities: Mutex<ClientCapabilities>,
    /// The editor sent `initialize` (nothing else is served before it).
    initialized: std::sync::atomic::AtomicBool,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl Front {
    /// A candidate's name for the person: its label in the profile, its agent's label, or its id.
    pub(crate) fn label(&self, candidate_id: &str) -> String {
        let target = self.profile.targets.iter().find(|t| t.id == candidate_id);
        target
            .and_then(|t| t.label.clone())
            .or_else(|| {
                target
                    .and_then(|t| t.runner.as_deref())
                    .and_then(|id| self.config.agent(id))
                    .and_then(|a| a.label.clone())
            })
            .unwrap_or_else(|| candidate_id.to_owned())
    }

    /// The label of the profile's next candidate after `candidate_id` (wrapping), if the
    /// profile has another.
    pub(crate) fn next_label(&self, candidate_id: &str) -> Option<String> {
        let ids: Vec<&str> = self.profile.targets.iter().map(|t| t.id.as_str()).collect();
        let at = ids.iter().position(|id| *id == candidate_id)?;
        let next = ids
            .get(at + 1)
            .or_else(|| ids.first())
            .filter(|id| **id != candidate_id)?;
        Some(self.label(next))
    }

    fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Whether `cwd` is a folder under a root of every one of the profile's agents (any of them
    /// may take the session's prompts).
    fn allows(&self, cwd: &Path) -> bool {
        self.profile
            .targets
            .iter()
            .filter_map(|t| t.runner.as_deref())
            .filter_map(|id| self.config.agent(id))
            .all(|a| crate::config::cwd_under(cwd, &a.allowed_roots).is_some())
    }

    /// Stops the agents of the sessions beyond the [`LIVE_SESSIONS`] most recently used (an
    /// editor opens a session per conversation and never closes one in ACP v1). `except` is the
    /// session that just ran. A session running a turn now is left alone.
    fn trim(&self, except: &str) {
        let mut sessions: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| s.id != except)
            .cloned()
            .collect();
        sessions.sort_by_key(|s| std::cmp::Reverse(s.last_used()));
        for s in sessions.iter().skip(LIVE_SESSIONS - 1) {
            s.stop_idle_agents();
        }
    }
}

/// `recourse acp`: checks its server, token, profile and agents, then serves the editor until
/// it closes standard input.
pub async fn run(args: AcpArgs) -> anyhow::Result<ExitCode> {
    let token = std::env::var(&args.token_env)
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            anyhow!(
                "set {} to a Recourse API token (never an argument): `recourse token add --account NAME --name editor \
                 --permissions operate_routes,view_routes,run_dispatches --profile {}` on the server",
                args.token_env,
                args.profile
            )
        })?;
    let config = RunnerConfig::load(&args.config)?;
    let api = api::Api::new(&args.server, token).map_err(|e| anyhow!("{e}"))?;
    let me = api.who_am_i().await.map_err(|e| anyhow!("{e}"))?;
    let missing: Vec<&str> = [
        Permission::OperateRoutes,
        Permission::ViewRoutes,
        Permission::RunDispatches,
    ]
    .into_iter()
    .filter(|p| !me.permissions.contains(*p))
    .map(Permission::as_str)
    .collect();
    if !missing.is_empty() {
        return Err(anyhow!(
            "the API token lacks {}: an editor's token needs operate_routes, view_routes and run_dispatches",
            missing.join(", ")
        ));
    }
    let profile = profile_named(&api, &args.profile).await?;
    for t in &profile.targets {
        match (t.dispatcher, t.runner.as_deref()) {
            (DispatcherKind::Acp, Some(id)) if config.agent(id).is_some() => {}
            (DispatcherKind::Acp, Some(id)) => {
                return Err(anyhow!(
                    "profile `{}`: candidate `{}` runs agent `{id}`, which {} does not have",
                    profile.id,
                    t.id,
                    args.config.display()
                ))
            }
            _ => {
                return Err(anyhow!(
                "profile `{}`: candidate `{}` is not an ACP agent; recourse acp runs only `acp` candidates",
                profile.id,
                t.id
            ))
            }
        }
    }
    let guard =
        std::env::current_exe().context("cannot find this program's own path (for the agent guard)")?;
    let front = Arc::new(Front {
        api,
        config,
        profile,
        guard,
        runner_name: format!("recourse-acp-{}", std::process::id()),
        lease_seconds: args.lease_seconds,
        capabilities: Mutex::new(ClientCapabilities::new()),
        initialized: std::sync::atomic::AtomicBool::new(false),
        sessions: Mutex::new(HashMap::new()),
    });
    tracing::info!(
        server = front.api.base(),
        profile = front.profile.id,
        "serving the editor on standard input and output"
    );
    // Standard input and output as files (read and written on the blocking pool).
    let (stdin, stdout) = {
        use std::os::fd::AsFd;
        let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
        let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
        (
            tokio::fs::File::from_std(std::fs::File::from(stdin)),
            tokio::fs::File::from_std(std::fs::File::from(stdout)),
        )
    };
    let transport = ByteStreams::new(stdout.compat_write(), stdin.compat());
    let handler = front.clone();
    let served = Agent
        .v1()
        .name("recourse")
        .on_receive_dispatch(
            async move |message: v1::Dispatch, cx: v1::ConnectionTo<Client>| {
                handler.clone().dispatch(message, cx);
                Ok(())
            },
            acp::on_receive_dispatch!(),
        )
        .connect_to(transport)
        .await;
    // The editor is gone: stop what runs (a cancel, as the person's), then the agents, within a
    // bound (the agent guards end whatever is left when this process exits).
    let sessions: Vec<Arc<Session>> = front
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .map(|(_, s)| s)
        .collect();
    for s in &sessions {
        s.cancel();
    }
    let closing = futures_util::future::join_all(sessions.iter().map(|s| s.close()));
    if tokio::time::timeout(std::time::Duration::from_secs(20), closing)
        .await
        .is_err()
    {
        tracing::warn!("the editor is gone and some agents did not stop in time; their guards end them");
    }
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if acp::is_incoming_transport_closed(&e) || acp::is_connection_terminated(&e) => {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(anyhow!("the editor's connection failed: {}", e.message)),
    }
}

/// The profile `wanted` names: its id, or else its name (one profile of that name within the
/// token's reach).
async fn profile_named(api: &api::Api, wanted: &str) -> anyhow::Result<Profile> {
    let missing = || anyhow!("no profile `{wanted}` within this token's reach");
    match api.profile(wanted).await {
        Ok(p) => return Ok(p),
        Err(e) if !matches!(e.status().map(|s| s.as_u16()), Some(404 | 403 | 400)) => {
            return Err(anyhow!("{e}"))
        }
        Err(_) => {}
    }
    let list = api.profiles().await.map_err(|e| anyhow!("{e}"))?;
    let named: Vec<&str> = list
        .iter()
        .filter(|p| p["name"] == wanted)
        .filter_map(|p| p["id"].as_str())
        .collect();
    match named.as_slice() {
        [id] => api.profile(id).await.map_err(|e| anyhow!("{e}")),
        [] => Err(missing()),
        _ => Err(anyhow!("several profiles are named `{wanted}`: give its id")),
    }
}

impl Front {
    /// One message of the editor. Runs in the connection's dispatch loop: anything that waits
    /// goes to a task of its own.
    fn dispatch(self: Arc<Self>, message: v1::Dispatch, cx: v1::ConnectionTo<Client>) {
        match message {
            acp::Dispatch::Request(request, responder) => {
                let (method, params) = (request.method, request.params);
                match method.as_str() {
                    "initialize" => {
                        let _ = responder.respond_with_result(self.initialize(&params));
                    }
                    "session/new" | "session/load" | "session/prompt" | "session/set_mode"
                        if !self.initialized.load(std::sync::atomic::Ordering::Acquire) =>
                    {
                        let _ = responder.respond_with_error(agents::rpc_error(
                            acp::Error::invalid_request,
                            "send initialize first",
                        ));
                    }
                    "session/set_mode" => {
                        let _ = responder.respond_with_result(self.set_mode(&params));
                    }
                    "session/new" | "session/load" | "session/prompt" => {
                        tokio::spawn(async move {
                            let (answer, editor) = match method.as_str() {
                                "session/new" => opened(self.new_session(params, cx).await),
                                "session/load" => opened(self.load_session(params, cx).await),
                                _ => (self.prompt(params).await, None),
                            };
                            let _ = responder.respond_with_result(answer);
                            // After the answer that names the session: its commands.
                            if let Some(editor) = editor {
                                editor.update(&say::commands());
                            }
                        });
                    }
                    _ => {
                        let _ = responder.respond_with_error(acp::Error::method_not_found());
                    }
                }
            }
            acp::Dispatch::Notification(n) => {
                if n.method == "session/cancel" {
                    if let Some(s) = n.params["sessionId"].as_str().and_then(|id| self.session(id)) {
                        s.cancel();
                    }
                }
            }
            acp::Dispatch::Response(result, router) => {
                let _ = router.route_with_result(result);
            }
        }
    }

    /// `initialize`: protocol version 1 (what the editor asked for otherwise: the client then
    /// decides), `loadSession`, text and embedded context in prompts.
    fn initialize(&self, params: &Value) -> Result<Value, acp::Error> {
        if !params["protocolVersion"].is_u64() {
            return Err(agents::rpc_error(
                acp::Error::invalid_params,
                "initialize.protocolVersion must be an integer",
            ));
        }
        let capabilities = params
            .get("clientCapabilities")
            .cloned()
            .map(serde_json::from_value::<ClientCapabilities>)
            .transpose()
            .map_err(|_| {
                agents::rpc_error(
                    acp::Error::invalid_params,
                    "initialize.clientCapabilities is not ACP's",
                )
            })?
            .unwrap_or_default();
        *self.capabilities.lock().unwrap_or_else(|e| e.into_inner()) = capabilities;
        self.initialized.store(true, std::sync::atomic::Ordering::Release);
        let response = InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(PromptCapabilities::new().embedded_context(true)),
            )
            .agent_info(Implementation::new("recourse", env!("CARGO_PKG_VERSION")).title("Recourse"));
        serde_json::to_value(response).map_err(|_| acp::Error::internal_error())
    }

    /// The session's working directory: absolute, existing, under a root of the profile's
    /// agents.
    fn cwd(&self, params: &Value) -> Result<PathBuf, acp::Error> {
        let cwd = params["cwd"]
            .as_str()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .ok_or_else(|| agents::rpc_error(acp::Error::invalid_params, "cwd must be an absolute path"))?;
        if !self.allows(&cwd) {
            return Err(agents::rpc_error(
                acp::Error::invalid_params,
                "cwd is not a folder under a root (allowed_roots) of every agent of the profile",
            ));
        }
        Ok(cwd)
    }

    fn editor(&self, cx: v1::ConnectionTo<Client>, session_id: &str) -> agents::Editor {
        agents::Editor {
            cx,
            session_id: session_id.to_owned(),
            capabilities: self
                .capabilities
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// `session/new`: the answer, and the session's editor (told its commands after it).
    async fn new_session(
        self: Arc<Self>,
        params: Value,
        cx: v1::ConnectionTo<Client>,
    ) -> Result<(Value, agents::Editor), acp::Error> {
        let cwd = self.cwd(&params)?;
        let mut b = [0_u8; 12];
        getrandom::fill(&mut b).map_err(|_| acp::Error::internal_error())?;
        let id = format!("es-{}", crate::hex::hex(&b));
        let editor = self.editor(cx, &id);
        let session = Arc::new(Session::new(id.clone(), cwd, self.clone(), editor.clone(), None));
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), session);
        Ok((json!({"sessionId": id, "modes": self.modes()}), editor))
    }

    /// The session's modes: `auto` (the profile's candidates, failing over), or one candidate
    /// alone (the route is pinned to it: it never switches).
    fn modes(&self) -> Value {
        let mut available = vec![json!({"id": AUTO, "name": "Fail over",
            "description": "Run on the profile's agents in order, switching when one fails before any output"})];
        for t in &self.profile.targets {
            let label = self.label(&t.id);
            available.push(json!({"id": t.id, "name": format!("{label} only"),
                "description": format!("Run only on {label}: never switch to another agent")}));
        }
        json!({"currentModeId": AUTO, "availableModes": available})
    }

    /// `session/set_mode`: pins the session's next prompts to a candidate, or back to `auto`.
    fn set_mode(&self, params: &Value) -> Result<Value, acp::Error> {
        let session = params["sessionId"]
            .as_str()
            .and_then(|id| self.session(id))
            .ok_or_else(|| agents::rpc_error(acp::Error::invalid_params, "no such session"))?;
        let mode = params["modeId"].as_str().unwrap_or_default();
        if mode == AUTO {
            session.set_mode(None);
        } else if self.profile.targets.iter().any(|t| t.id == mode) {
            session.set_mode(Some(mode.to_owned()));
        } else {
            return Err(agents::rpc_error(
                acp::Error::invalid_params,
                "modeId is not one of the session's modes",
            ));
        }
        Ok(json!({}))
    }

    /// `session/load`: the answer, and the session's editor (told its commands after it).
    async fn load_session(
        self: Arc<Self>,
        params: Value,
        cx: v1::ConnectionTo<Client>,
    ) -> Result<(Value, agents::Editor), acp::Error> {
        let id = params["sessionId"]
            .as_str()
            .filter(|id| {
                id.starts_with("es-")
                    && id.len() <= 64
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
            .ok_or_else(|| agents::rpc_error(acp::Error::invalid_params, "not a session of recourse acp"))?
            .to_owned();
        let cwd = self.cwd(&params)?;
        let route = self
            .api
            .route_of_session(&id)
            .await
            .map_err(|e| agents::rpc_error(acp::Error::internal_error, &format!("Recourse: {e}")))?;
        let editor = self.editor(cx, &id);
        let session = Arc::new(Session::new(
            id.clone(),
            cwd,
            self.clone(),
            editor.clone(),
            route.map(|r| (r.id, r.snapshot)),
        ));
        let old = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, session.clone());
        if let Some(old) = old {
            old.close().await;
        }
        // The durable part of the conversation, before the answer: where its route stands.
        session.resumed().await;
        Ok((json!({"modes": self.modes()}), editor))
    }

    async fn prompt(self: Arc<Self>, params: Value) -> Result<Value, acp::Error> {
        let session = params["sessionId"]
            .as_str()
            .and_then(|id| self.session(id))
            .ok_or_else(|| agents::rpc_error(acp::Error::invalid_params, "no such session"))?;
        let prompt = params["prompt"]
            .as_array()
            .filter(|p| !p.is_empty())
            .cloned()
            .ok_or_else(|| {
                agents::rpc_error(
                    acp::Error::invalid_params,
                    "prompt must be a non-empty array of content blocks",
                )
            })?;
        let stop_reason = session.prompt(prompt).await?;
        self.trim(&session.id);
        Ok(json!({"stopReason": stop_reason}))
    }
}

/// A session's answer, and its editor when it opened (to be told its commands after the answer).
fn opened(
    result: Result<(Value, agents::Editor), acp::Error>,
) -> (Result<Value, acp::Error>, Option<agents::Editor>) {
    match result {
        Ok((answer, editor)) => (Ok(answer), Some(editor)),
        Err(e) => (Err(e), None),
    }
}
