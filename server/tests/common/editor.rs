//! `recourse acp` driven as an editor drives it: the real binary on pipes, spoken to by the
//! `agent-client-protocol` crate's client side (the official Rust SDK), against a real
//! `recourse serve` ([`super::spawn_serve`]) whose profile's agents are the published ones
//! ([`super::agents`]) or the fake one, pointed at the fake provider.
//!
//! A turn ([`turn`]) sends one prompt and reads the session until it is answered, keeping every
//! update and every request of the agent, answering permission requests as the test says and,
//! when the test asks, sending `session/cancel`. Every wait is bounded (a failure, never a
//! pause).

use agent_client_protocol::{
    self as acp,
    v1::{self, schema::CancelNotification, ActiveSession, SessionMessage},
    Agent,
};
use serde_json::{json, Value};
use std::{
    path::{Path, PathBuf},
    time::Duration,
};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The keys the published agents' configurations name, by value: given to `recourse acp`
/// only (never set in this process, whose environment other tests' threads read).
pub const DUMMY_KEYS: [(&str, &str); 3] = [
    ("ANTHROPIC_API_KEY", "sk-ant-fake-0000"),
    ("OPENAI_API_KEY", "sk-fake-0000"),
    ("GEMINI_API_KEY", "fake-gemini-0000"),
];

/// How long a turn may take before the test fails (real agents are slow to start on 2 cores).
pub const TURN_LIMIT: Duration = Duration::from_secs(240);

/// A started `recourse acp`, its pipes, and where its log goes.
pub struct Acp {
    pub child: tokio::process::Child,
    pub log: PathBuf,
}

impl Acp {
    /// `recourse acp --server http://ADDR --profile PROFILE --config CONFIG EXTRA...`, the token
    /// in `RECOURSE_TOKEN`, its log in `dir/acp-N.log`.
    pub fn start(dir: &Path, addr: &str, profile: &str, config: &Path, token: &str, extra: &[&str]) -> Acp {
        Acp::start_binary(
            Path::new(env!("CARGO_BIN_EXE_recourse")),
            dir,
            addr,
            profile,
            config,
            token,
            extra,
            &[],
        )
    }

    /// [`Acp::start`] with the binary at `binary`, and `env` set too.
    #[allow(clippy::too_many_arguments)]
    pub fn start_binary(
        binary: &Path,
        dir: &Path,
        addr: &str,
        profile: &str,
        config: &Path,
        token: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Acp {
        let n = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        let log = dir.join(format!("acp-{n}.log"));
        let child = tokio::process::Command::new(binary)
            .args([
                "acp",
                "--server",
                &format!("http://{addr}"),
                "--profile",
                profile,
                "--config",
            ])
            .arg(config)
            .args(extra)
            .env("RECOURSE_TOKEN", token)
            .envs(env.iter().copied())
            // The keys the agents' configurations name (the fake provider checks none).
            .envs(DUMMY_KEYS)
            .env("RUST_LOG", "info,server::editor=debug")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Acp { child, log }
    }

    /// Its transport, for the client side.
    pub fn transport(
        &mut self,
    ) -> acp::ByteStreams<Compat<tokio::process::ChildStdin>, Compat<tokio::process::ChildStdout>> {
        acp::ByteStreams::new(
            self.child.stdin.take().unwrap().compat_write(),
            self.child.stdout.take().unwrap().compat(),
        )
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id().unwrap()).unwrap()
    }

    /// The program its process runs now (`recourse acp` replaces itself with `recourse-acp`
    /// when that lies beside it).
    pub fn program(&self) -> PathBuf {
        std::fs::read_link(format!("/proc/{}/exe", self.pid())).unwrap()
    }

    /// What it logged.
    pub fn logged(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// How the test editor answers a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Allow,
    Reject,
}

/// What one turn showed the editor.
#[derive(Debug, Default)]
pub struct TurnLog {
    /// Every `session/update`'s `update`, in order.
    pub updates: Vec<Value>,
    /// Every request the agent sent through Recourse: method and params.
    pub requests: Vec<(String, Value)>,
    pub stop_reason: Option<String>,
    pub error: Option<String>,
}

impl TurnLog {
    /// The texts of the message chunks, in order.
    pub fn messages(&self) -> Vec<String> {
        self.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Recourse's own messages.
    pub fn recourse(&self) -> Vec<String> {
        self.messages()
            .into_iter()
            .filter_map(|m| m.trim().strip_prefix("[Recourse] ").map(str::to_owned))
            .collect()
    }
}

/// `initialize` (with file system and terminal, as an editor offers them), then the session.
pub async fn open(
    cx: &v1::ConnectionTo<Agent>,
    cwd: &Path,
) -> Result<ActiveSession<'static, Agent>, acp::Error> {
    let init: Value = cx
        .send_request(acp::UntypedMessage::new(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false}}),
        )?)
        .block_task()
        .await?;
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    let setup = cx.build_session(cwd).block_task().start_session().await?;
    Ok(setup.session)
}

/// One prompt of `text`, read to its answer. `cancel_when` sees each update and says when to
/// send `session/cancel`.
pub async fn turn(
    session: &mut ActiveSession<'static, Agent>,
    text: &str,
    answer: Answer,
    mut cancel_when: impl FnMut(&Value) -> bool,
) -> TurnLog {
    let mut log = TurnLog::default();
    session.send_prompt(text).unwrap();
    let mut cancelled = false;
    let read = async {
        loop {
            match session.read_update().await {
                Ok(SessionMessage::Message(acp::Dispatch::Notification(n)))
                    if n.method == "session/update" =>
                {
                    let update = n.params["update"].clone();
                    assert_eq!(
                        n.params["sessionId"].as_str(),
                        Some(&*session.session_id().0),
                        "one session: {}",
                        n.params
                    );
                    if !cancelled && cancel_when(&update) {
                        cancelled = true;
                        let cancel = CancelNotification::new(session.session_id().clone());
                        session.connection().send_notification(cancel).unwrap();
                    }
                    log.updates.push(update);
                }
                Ok(SessionMessage::Message(acp::Dispatch::Request(req, responder))) => {
                    log.requests.push((req.method.clone(), req.params.clone()));
                    if req.method == "session/request_permission" {
                        let kind = match answer {
                            Answer::Allow => "allow_once",
                            Answer::Reject => "reject_once",
                        };
                        let option = req.params["options"]
                            .as_array()
                            .and_then(|o| o.iter().find(|o| o["kind"] == kind))
                            .map(|o| o["optionId"].clone())
                            .expect("the agent offers allow_once and reject_once");
                        responder
                            .respond(json!({"outcome": {"outcome": "selected", "optionId": option}}))
                            .unwrap();
                    } else if req.method == "fs/read_text_file" {
                        responder.respond(json!({"content": "from the editor"})).unwrap();
                    } else {
                        responder
                            .respond_with_error(acp::Error::method_not_found())
                            .unwrap();
                    }
                }
                Ok(SessionMessage::PromptResponse(Ok(r))) => {
                    log.stop_reason = serde_json::to_value(&r).unwrap()["stopReason"]
                        .as_str()
                        .map(str::to_owned);
                    return;
                }
                Ok(SessionMessage::PromptResponse(Err(e))) => {
                    log.error = Some(format!("{}: {:?}", e.message, e.data));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    log.error = Some(format!("session failed: {}", e.message));
                    return;
                }
            }
        }
    };
    tokio::time::timeout(TURN_LIMIT, read)
        .await
        .unwrap_or_else(|_| panic!("the turn did not end within {TURN_LIMIT:?}"));
    log
}

/// The editor session's route (by its caller reference, the session id), through the API.
pub fn route_of(addr: &str, session_id: &str) -> Value {
    let (status, list) = super::http(
        addr,
        "GET",
        &format!("/api/v1/routes?caller_kind=editor&caller_reference={session_id}&limit=1"),
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "{list}");
    list[0].clone()
}

/// A profile of these candidates (id, label, transient policy, hard policy), each run by the
/// agent of the same id; returns its id.
pub fn profile(addr: &str, name: &str, candidates: &[(&str, &str, Value, Value)]) -> String {
    let targets: Vec<Value> = candidates
        .iter()
        .map(|(id, label, _, _)| json!({"id": id, "dispatcher": "acp", "runner": id, "label": label}))
        .collect();
    let policies: Vec<Value> = candidates
        .iter()
        .map(|(id, _, t, h)| super::candidate(id, t.clone(), h.clone()))
        .collect();
    let (status, p) = super::http(
        addr,
        "POST",
        "/api/v1/profiles",
        Some(&json!({"name": name, "targets": targets, "policy": {"version": 1, "candidates": policies}})),
    )
    .unwrap();
    assert_eq!(status, 201, "{p}");
    p["id"].as_str().unwrap().to_owned()
}

/// The process groups whose leader is an agent guard started by `parent`.
pub fn guarded_groups(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
        let ppid: i32 = fields[1].parse().unwrap();
        if ppid == parent && String::from_utf8_lossy(&cmdline).contains("__agent-guard") {
            out.push(pid);
        }
    }
    out
}

/// Whether any live (not zombie) process is in group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
        fields[0] != "Z" && fields[2].parse::<i32>().ok() == Some(pgid)
    })
}

/// The Anthropic stream of a `Write` tool call (Claude Code asks permission to run it).
pub fn anthropic_write_tool_call(path: &Path, content: &str) -> fake_provider::Reply {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let input = json!({"file_path": path, "content": content}).to_string();
    fake_provider::Reply::Sse {
        frames: vec![
            ev(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_tool1", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-6", "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ),
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_01WriteHello", "name": "Write", "input": {}}}),
            ),
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": input}}),
            ),
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            ev(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 30}}),
            ),
            ev("message_stop", json!({"type": "message_stop"})),
        ],
        end: fake_provider::SseEnd::Close,
    }
}

/// `Published`'s `[[agent]]` tables for these agents, pointed at `provider`, working under
/// `work`, written to `dir/recourse.toml`.
pub fn agents_config(
    dir: &Path,
    agents: &Path,
    provider: &fake_provider::FakeProvider,
    which: &[super::agents::Published],
    work: &Path,
) -> PathBuf {
    let timeouts = "step = 120\nprompt_idle = 300\nprompt_total = 600\ncancel_grace = 10\nexit_grace = 3\n";
    let config: String = which
        .iter()
        .map(|a| {
            let home = dir.join("homes").join(a.name());
            a.toml(
                agents,
                a.name(),
                &provider.base_url(a.name()),
                &home,
                work,
                timeouts,
                None,
            ) + "\n"
        })
        .collect();
    let path = dir.join("recourse.toml");
    std::fs::write(&path, config).unwrap();
    path
}

/// A candidate's class policy that switches at once (skip; on the next call, retry).
pub fn skip() -> Value {
    super::class_policy(0, 0, 0, "skip")
}

/// A candidate's class policy that stops for a person at once.
pub fn stop() -> Value {
    super::class_policy(0, 0, 0, "stop")
}

/// Waits (bounded, checking every 50 ms, blocking the thread) until `done` holds: for what a
/// subprocess does on its own time, outside the ACP connection's tasks.
pub fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let end = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes whose working directory is `dir` (an agent started for the project, or
/// anything it left behind).
pub fn processes_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
                && super::fake_agent::running(*pid)
        })
        .collect()
}
