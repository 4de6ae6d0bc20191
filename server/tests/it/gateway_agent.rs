//! A real agent uses Recourse as its provider endpoint: Claude Code (`claude-agent-acp`, the
//! published ACP adapter, pinned) is pointed at a Recourse gateway by its Anthropic base URL
//! (`ANTHROPIC_BASE_URL`, the API key a Recourse token, the model a profile of two Anthropic
//! endpoints on the fake provider). The first endpoint answers 529 overloaded to every call;
//! each of Claude Code's calls is a gateway route that switches to the second, and Claude
//! Code's own turn succeeds.
//!
//! The test is Claude Code's ACP client itself (`initialize`, `session/new`, `session/prompt`
//! as JSON-RPC lines, the updates read until the prompt's answer), so what it checks is the
//! agent's own verdict on its turn, nothing of Recourse's `acp` dispatcher.
//!
//! The agent comes from `$RECOURSE_AGENTS_DIR/node_modules/.bin/claude-agent-acp` (what `./dev`
//! installs). Without the variable the test is reported skipped and counted (`requires.rs`),
//! unless `RECOURSE_REQUIRE_AGENTS=1`, which makes that a failure. It runs with `HOME` in a temporary
//! folder, only the variables below in its environment, and telemetry, error reporting and
//! auto-update off.

use crate::common;

use common::{gateway::*, provider::*};
use serde_json::{json, Value};
use std::{process::Stdio, time::Duration};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long Claude Code may take to start and finish its turn on a busy machine (a bound on a
/// failure, never a wait: the test goes on as soon as the agent answers).
const PATIENCE: Duration = Duration::from_secs(240);

fn agent() -> Option<std::path::PathBuf> {
    let dir = common::agents::dir("gateway_agent")?;
    let bin = dir.join("node_modules/.bin/claude-agent-acp");
    assert!(bin.exists(), "{} is missing", bin.display());
    Some(bin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_529_on_the_first_endpoint_is_absorbed_by_a_switch_and_its_turn_succeeds() {
    let Some(bin) = agent() else { return };
    let rig = Rig::new(&[("main", "anthropic"), ("backup", "anthropic")]).await;
    rig.fake.script("main", vec![anthropic_overloaded()]);
    rig.fake.script(
        "backup",
        vec![Reply::Sse {
            frames: anthropic_stream_frames(&["Hello from ", "the second endpoint."], true),
            end: SseEnd::Close,
        }],
    );
    let model = rig.profile("claude-through-recourse", &["main", "backup"]).await;
    let base = rig.serve().await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut agent = tokio::process::Command::new(bin)
        .current_dir(work.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", &rig.h.token)
        .envs(
            [
                "ANTHROPIC_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_DEFAULT_SONNET_MODEL",
                "ANTHROPIC_DEFAULT_OPUS_MODEL",
            ]
            .map(|name| (name, model.as_str())),
        )
        .envs(
            [
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "DISABLE_AUTOUPDATER",
            ]
            .map(|name| (name, "1")),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("claude-agent-acp starts");
    let mut stdin = agent.stdin.take().unwrap();
    let mut lines = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut said = String::new();
    // Sends a request and reads until its answer; the agent's notifications and requests on the
    // way are read (its text kept) or answered (nothing is granted).
    let mut call = async |id: u64, method: &str, params: Value| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stdin.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
        loop {
            let line = tokio::time::timeout(PATIENCE, lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("claude-agent-acp said nothing for {PATIENCE:?} during {method}"))
                .unwrap()
                .unwrap_or_else(|| panic!("claude-agent-acp exited during {method}"));
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg["id"] == id && msg.get("method").is_none() {
                return msg;
            }
            let update = &msg["params"]["update"];
            if msg["method"] == "session/update" && update["sessionUpdate"] == "agent_message_chunk" {
                said.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
            if let (Some(req), Some(m)) = (msg.get("id"), msg["method"].as_str()) {
                let answer = if m == "session/request_permission" {
                    json!({"jsonrpc": "2.0", "id": req, "result": {"outcome": {"outcome": "cancelled"}}})
                } else {
                    json!({"jsonrpc": "2.0", "id": req, "error": {"code": -32601, "message": "method not found"}})
                };
                stdin.write_all(format!("{answer}\n").as_bytes()).await.unwrap();
            }
        }
    };
    let init = call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let cwd = work.path().canonicalize().unwrap();
    let session = call(2, "session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    let sid = session["result"]["sessionId"].clone();
    assert!(sid.is_string(), "{session}");
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "Say hello."}]});
    let answer = call(3, "session/prompt", prompt).await;
    assert_eq!(
        answer["result"]["stopReason"], "end_turn",
        "Claude Code's turn: {answer}"
    );
    assert!(said.contains("Hello from the second endpoint."), "{said:?}");
    agent.kill().await.unwrap();

    // Each of Claude Code's calls was a gateway route that switched past the 529.
    let calls = rig.h.get("/api/v1/routes?caller_kind=utility").await;
    let calls = calls.as_array().unwrap();
    assert!(!calls.is_empty(), "Claude Code called the gateway");
    for c in calls {
        let id = c["id"].as_str().unwrap();
        let s = rig.h.wait_state(id, "completed").await;
        assert_eq!(s["candidate_id"], "backup", "{s}");
    }
    let main = rig.fake.received("main");
    let backup = rig.fake.received("backup");
    assert_eq!(
        main.len(),
        1,
        "the first call's 529 opened the provider's circuit"
    );
    assert_eq!(backup.len(), calls.len(), "one answer per call");
    // The calls were Claude Code's: its system prompt and tools, passed through.
    let first: &Value = &backup[0].body;
    assert_eq!(
        first["model"], "claude-haiku-4-5",
        "the endpoint's model, not the profile"
    );
    assert_eq!(first["stream"], true);
    assert!(
        first.get("system").is_some() && first.get("tools").is_some(),
        "{first}"
    );
}
