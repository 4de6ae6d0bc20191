//! `recourse acp` as an editor uses it: the real binary, driven over its standard input and
//! output by the `agent-client-protocol` crate's client side, against a real `recourse serve`,
//! with the published agents beneath (`RECOURSE_AGENTS_DIR`; skipped without it) pointed at the
//! fake provider:
//! - a failure before output switches, and the editor sees one continuous session;
//! - a permission request reaches the editor, and its answer reaches the agent;
//! - a wait for a reset is cancelled by `session/cancel`, and the route stops;
//! - a failure after a tool call ends the turn with the explanation, and nothing is prompted
//!   again;
//! - `session/load` resumes the session after `recourse acp` is killed mid-turn (its agent's
//!   process group dies with it; the lease runs out and the attempt stops as ambiguous).
//! And with the fake agent (always run): malformed ACP gets JSON-RPC errors and the process
//! goes on; a refused token, an unreachable server and a profile out of reach stop it at start
//! with a clear message.

use crate::common;

use agent_client_protocol::{v1::ConnectionTo, Agent, Client};
use common::{
    agents::{self, Published},
    editor::{self as ed, Acp, Answer},
    *,
};
use fake_provider::{Fail, FailKind, Reply};
use serde_json::{json, Value};
use std::path::PathBuf;

/// A served Recourse with the published agents `which` configured, pointed at a fake provider.
struct World {
    dir: tempfile::TempDir,
    provider: fake_provider::FakeProvider,
    serve: std::process::Child,
    addr: String,
    config: PathBuf,
    work: PathBuf,
}

impl World {
    async fn new(agents: &std::path::Path, which: &[Published], extra: &[&str]) -> World {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        let provider = agents::provider().await;
        let config = ed::agents_config(dir.path(), agents, &provider, which, &work);
        let mut args = vec!["--config", config.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (serve, addr, _) = spawn_serve(dir.path().join("r.db"), &args, false);
        World {
            dir,
            provider,
            serve,
            addr,
            config,
            work,
        }
    }

    fn token(&self) -> String {
        token_for(&self.addr).unwrap()
    }

    fn acp(&self, profile: &str, extra: &[&str]) -> Acp {
        Acp::start(
            self.dir.path(),
            &self.addr,
            profile,
            &self.config,
            &self.token(),
            extra,
        )
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// Skip (or, on the next call, retry) a published agent's own policy: switch at once.
fn skip() -> Value {
    class_policy(0, 0, 0, "skip")
}

fn stop() -> Value {
    class_policy(0, 0, 0, "stop")
}

/// Reset waits of up to an hour, then stop.
fn wait_then_stop() -> Value {
    json!({"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
           "wait_for_reset": {"enabled": true, "max_wait_seconds": 3600}, "on_exhausted": "stop"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_before_output_switches_and_the_editor_sees_one_session() {
    let Some(agents) = agents::dir("editor::a_failure_before_output_switches") else {
        return;
    };
    let w = World::new(&agents, &[Published::Claude, Published::Codex], &[]).await;
    w.provider
        .script("claude", vec![Reply::Fail(Fail::new(FailKind::Overloaded))]);
    w.provider
        .script("codex", vec![Reply::Text("Hello from Codex".into())]);
    let p = ed::profile(
        &w.addr,
        "coding",
        &[
            ("claude", "Claude Code", skip(), skip()),
            ("codex", "Codex", stop(), stop()),
        ],
    );
    let mut acp = w.acp(&p, &[]);
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &w.work).await?;
            let log = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            Ok((log, session.session_id().0.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        acp.logged()
    );
    let messages = log.messages();
    let switch = messages
        .iter()
        .position(|m| {
            m.contains("[Recourse] Claude Code is overloaded (provider_overloaded); continuing on Codex")
        })
        .unwrap_or_else(|| panic!("no switch message: {messages:?}"));
    let answer = messages
        .iter()
        .position(|m| m == "Hello from Codex")
        .expect("Codex's answer");
    assert!(
        switch < answer,
        "the switch is said before the new agent's work: {messages:?}"
    );
    assert_eq!(log.recourse().len(), 1, "one short message: {messages:?}");
    assert_eq!(w.provider.calls("claude").len(), 1);
    assert_eq!(w.provider.calls("codex").len(), 1);
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["state"], "active", "{route}");
    assert_eq!(route["snapshot"]["candidate_id"], "codex");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_reaches_the_editor_and_its_answer_reaches_the_agent() {
    let Some(agents) = agents::dir("editor::a_permission_request_reaches_the_editor") else {
        return;
    };
    let w = World::new(&agents, &[Published::Claude], &[]).await;
    let file = w.work.join("hello.txt");
    w.provider.script(
        "claude",
        vec![
            ed::anthropic_write_tool_call(&file, "hello from the agent\n"),
            Reply::Text("Done: wrote hello.txt".into()),
        ],
    );
    let p = ed::profile(&w.addr, "one", &[("claude", "Claude Code", stop(), stop())]);
    let mut acp = w.acp(&p, &[]);
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &w.work).await?;
            let log = ed::turn(&mut session, "Write hello.txt", Answer::Allow, |_| false).await;
            Ok((log, session.session_id().0.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        acp.logged()
    );
    let (method, params) = log
        .requests
        .iter()
        .find(|(m, _)| m == "session/request_permission")
        .unwrap_or_else(|| panic!("no permission request reached the editor: {log:?}"));
    assert_eq!(method, "session/request_permission");
    assert_eq!(
        params["sessionId"],
        session_id.as_str(),
        "in the editor's session"
    );
    assert_eq!(params["toolCall"]["toolCallId"], "toolu_01WriteHello", "{params}");
    // The editor's "allow" reached the agent: it wrote the file and told its provider so.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello from the agent\n");
    let calls = w.provider.calls("claude");
    assert_eq!(calls.len(), 2, "the tool's result, then nothing more");
    assert!(
        calls[1].body.to_string().contains("toolu_01WriteHello"),
        "{}",
        calls[1].body
    );
    assert!(
        log.messages().contains(&"Done: wrote hello.txt".to_owned()),
        "{log:?}"
    );
    assert!(log.recourse().is_empty(), "nothing to say: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cancel_cancels_a_wait_for_a_reset_and_the_route_stops() {
    let Some(agents) = agents::dir("editor::session_cancel_cancels_a_wait_for_a_reset") else {
        return;
    };
    let w = World::new(&agents, &[Published::Claude, Published::Codex], &[]).await;
    // Claude Code's subscription banner, as it prints it: the limit resets in ten minutes.
    let reset = chrono::Utc::now().timestamp() + 600;
    w.provider.script(
        "claude",
        vec![Reply::Text(format!("Claude AI usage limit reached|{reset}"))],
    );
    w.provider.script("codex", vec![Reply::Text("never".into())]);
    let p = ed::profile(
        &w.addr,
        "waits",
        &[
            ("claude", "Claude Code", wait_then_stop(), wait_then_stop()),
            ("codex", "Codex", stop(), stop()),
        ],
    );
    let mut acp = w.acp(&p, &[]);
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &w.work).await?;
            let log = ed::turn(&mut session, "Fix the build", Answer::Reject, |u| {
                u["sessionUpdate"] == "plan"
            })
            .await;
            Ok((log, session.session_id().0.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("cancelled"),
        "{log:?}\n{}",
        acp.logged()
    );
    let said = log.recourse();
    assert!(
        said.iter()
            .any(|m| m.starts_with("Claude Code is out of quota (quota_limited); waiting until ")),
        "{said:?}"
    );
    let plan = log.updates.iter().find(|u| u["sessionUpdate"] == "plan").unwrap();
    assert_eq!(plan["entries"][0]["status"], "in_progress", "{plan}");
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["state"], "action_required", "{route}");
    assert_eq!(route["snapshot"]["action_reason"], "stopped_by_user", "{route}");
    assert_eq!(w.provider.calls("claude").len(), 1, "the wait was not run out");
    assert!(w.provider.calls("codex").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_after_a_tool_call_ends_the_turn_with_the_explanation_and_no_second_prompt() {
    let Some(agents) = agents::dir("editor::a_failure_after_a_tool_call") else {
        return;
    };
    let w = World::new(&agents, &[Published::Claude, Published::Codex], &[]).await;
    let file = w.work.join("hello.txt");
    w.provider.script(
        "claude",
        vec![
            ed::anthropic_write_tool_call(&file, "hello\n"),
            Reply::Fail(Fail::new(FailKind::Overloaded)),
        ],
    );
    w.provider.script("codex", vec![Reply::Text("never".into())]);
    let p = ed::profile(
        &w.addr,
        "coding",
        &[
            ("claude", "Claude Code", skip(), skip()),
            ("codex", "Codex", stop(), stop()),
        ],
    );
    let mut acp = w.acp(&p, &[]);
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &w.work).await?;
            let log = ed::turn(&mut session, "Write hello.txt", Answer::Allow, |_| false).await;
            Ok((log, session.session_id().0.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        acp.logged()
    );
    let said = log.recourse();
    let last = said.last().unwrap_or_else(|| panic!("no explanation: {log:?}"));
    for part in [
        "Claude Code is overloaded (provider_overloaded, transient)",
        "after it had already used a tool",
        "did not repeat the prompt",
        "Send \"retry\"",
        "\"switch\" to continue on Codex",
        &format!("http://{}/routes/rt-", w.addr),
    ] {
        assert!(last.contains(part), "{part:?} missing in {last:?}");
    }
    assert_eq!(
        w.provider.calls("claude").len(),
        2,
        "the prompt and the tool's result: never again"
    );
    assert!(w.provider.calls("codex").is_empty(), "no switch after a tool");
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["action_reason"], "effect_unsafe", "{route}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_load_resumes_after_recourse_acp_is_killed_mid_turn() {
    let Some(agents) = agents::dir("editor::session_load_resumes_after_recourse_acp_is_killed") else {
        return;
    };
    let w = World::new(
        &agents,
        &[Published::Claude],
        &["--test-clock", "2026-12-03T08:00:00Z"],
    )
    .await;
    w.provider.script(
        "claude",
        vec![
            Reply::Text("Hello from Claude".into()),
            Reply::Hang,
            Reply::Text("Hello again from Claude".into()),
        ],
    );
    let p = ed::profile(&w.addr, "one", &[("claude", "Claude Code", stop(), stop())]);
    let mut first = w.acp(&p, &["--lease-seconds", "5"]);
    let acp_pid = first.pid();
    let provider = &w.provider;
    let session_id = Client
        .v1()
        .connect_with(first.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &w.work).await?;
            let log = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            assert_eq!(log.stop_reason.as_deref(), Some("end_turn"), "{log:?}");
            // The second prompt hangs at the provider; the editor dies with it meanwhile.
            session.send_prompt("And again").unwrap();
            provider.wait_received(2).await;
            Ok(session.session_id().0.to_string())
        })
        .await
        .unwrap();
    let groups = ed::guarded_groups(acp_pid);
    assert_eq!(groups.len(), 1, "one agent, under its guard: {groups:?}");
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    wait_until(
        "the agent's process group to die with recourse acp",
        std::time::Duration::from_secs(30),
        || !ed::group_alive(groups[0]),
    );
    // The lease runs out (the server's clock moves past it): the attempt is ambiguous.
    let (status, _) = http(
        &w.addr,
        "POST",
        "/api/v1/test/clock",
        Some(&json!({"now": "2026-12-03T08:00:10Z"})),
    )
    .unwrap();
    assert_eq!(status, 200);
    let route = wait_for_route(&w.addr, &session_id, |r| {
        r["snapshot"]["state"] == "action_required"
    });
    assert_eq!(
        route["snapshot"]["action_reason"], "ambiguous_dispatch",
        "{route}"
    );
    // A new recourse acp loads the session from the route, and the person's "retry" runs it.
    let mut second = w.acp(&p, &["--lease-seconds", "5"]);
    let (resumed, log) = Client
        .v1()
        .connect_with(second.transport(), async |cx: ConnectionTo<Agent>| {
            let init: Value = cx
                .send_request(agent_client_protocol::UntypedMessage::new(
                    "initialize",
                    json!({"protocolVersion": 1}),
                )?)
                .block_task()
                .await?;
            assert_eq!(init["agentCapabilities"]["loadSession"], true);
            let setup = cx
                .load_session(session_id.clone(), w.work.clone())
                .block_task()
                .start_session()
                .await?;
            let mut session = setup.session;
            let mut resumed = Vec::new();
            while let Some(Ok(agent_client_protocol::v1::SessionMessage::Message(
                agent_client_protocol::Dispatch::Notification(n),
            ))) = futures_util::FutureExt::now_or_never(session.read_update())
            {
                resumed.push(n.params["update"].clone());
            }
            let log = ed::turn(&mut session, "retry", Answer::Reject, |_| false).await;
            Ok((resumed, log))
        })
        .await
        .unwrap();
    let resumed: Vec<String> = resumed
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(
        resumed
            .iter()
            .any(|m| m.contains("Resumed this session") && m.contains("ambiguous_dispatch")),
        "{resumed:?}\n{}",
        second.logged()
    );
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        second.logged()
    );
    assert!(
        log.messages().contains(&"Hello again from Claude".to_owned()),
        "{log:?}"
    );
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["state"], "active", "{route}");
}

/// Waits (bounded, checking every 50 ms) until the session's route satisfies `done`.
fn wait_for_route(addr: &str, session_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let route = ed::route_of(addr, session_id);
        if done(&route) {
            return route;
        }
        assert!(
            std::time::Instant::now() < end,
            "the route never got there: {route}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits (bounded, checking every 50 ms) until `done` holds.
fn wait_until(what: &str, limit: std::time::Duration, done: impl Fn() -> bool) {
    let end = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A served Recourse with fake agents configured (no published agent needed).
struct FakeWorld {
    dir: tempfile::TempDir,
    serve: std::process::Child,
    addr: String,
    config: PathBuf,
    agents: Vec<common::fake_agent::FakeAgent>,
}

impl FakeWorld {
    /// Each agent of its own provider (so one's circuit never holds another).
    fn new(agents: &[(&str, Value)]) -> FakeWorld {
        let dir = tempfile::tempdir().unwrap();
        let agents: Vec<_> = agents
            .iter()
            .map(|(id, attempts)| {
                common::fake_agent::FakeAgent::new(
                    dir.path(),
                    id,
                    &format!("provider-{id}"),
                    attempts.clone(),
                )
            })
            .collect();
        let config = dir.path().join("recourse.toml");
        std::fs::write(
            &config,
            agents.iter().map(|a| a.toml("") + "\n").collect::<String>(),
        )
        .unwrap();
        let (serve, addr, _) = spawn_serve(
            dir.path().join("r.db"),
            &["--config", config.to_str().unwrap()],
            false,
        );
        FakeWorld {
            dir,
            serve,
            addr,
            config,
            agents,
        }
    }

    fn acp(&self, profile: &str) -> Acp {
        Acp::start(
            self.dir.path(),
            &self.addr,
            profile,
            &self.config,
            &token_for(&self.addr).unwrap(),
            &[],
        )
    }
}

impl Drop for FakeWorld {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fake_agents_a_switch_is_said_and_the_agents_requests_reach_the_editor() {
    let overloaded = json!([{"prompt": [{"error": {"code": -32603,
        "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}}]}]);
    let asks = json!([{"prompt": [
        {"request": {"method": "session/request_permission", "params": {"toolCall": {"toolCallId": "t1", "title": "Write"},
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}, {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
        {"request": {"method": "fs/read_text_file", "params": {"path": "/etc/hostname"}}},
        {"message": "hello from b"},
        {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", overloaded), ("b", asks)]);
    let p = ed::profile(
        &w.addr,
        "fakes",
        &[("a", "Agent A", skip(), skip()), ("b", "Agent B", stop(), stop())],
    );
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let (first, second) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            let first = ed::turn(&mut session, "Say hello", Answer::Allow, |_| false).await;
            let second = ed::turn(&mut session, "Once more", Answer::Allow, |_| false).await;
            Ok((first, second))
        })
        .await
        .unwrap();
    assert_eq!(
        first.stop_reason.as_deref(),
        Some("end_turn"),
        "{first:?}\n{}",
        acp.logged()
    );
    assert_eq!(
        first.recourse(),
        ["Agent A is overloaded (provider_overloaded); continuing on Agent B"],
        "{first:?}"
    );
    assert!(first.messages().contains(&"hello from b".to_owned()), "{first:?}");
    let methods: Vec<&str> = first.requests.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        ["session/request_permission", "fs/read_text_file"],
        "{first:?}"
    );
    // The editor's answers reached the agent.
    let answers: Vec<Value> = w.agents[1]
        .log()
        .into_iter()
        .filter(|l| l["recv"]["result"].is_object())
        .map(|l| l["recv"]["result"].clone())
        .collect();
    assert!(
        answers.iter().any(|r| r["outcome"]["optionId"] == "yes"),
        "{answers:?}"
    );
    assert!(
        answers.iter().any(|r| r["content"] == "from the editor"),
        "{answers:?}"
    );
    // The next prompt runs on the same agent process and session, not a new one.
    assert_eq!(second.stop_reason.as_deref(), Some("end_turn"), "{second:?}");
    assert!(second.recourse().is_empty(), "{second:?}");
    assert_eq!(
        w.agents[1].received("initialize"),
        1,
        "one process for both turns"
    );
    assert_eq!(w.agents[1].received("session/prompt"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_pins_the_session_to_one_agent_and_the_fail_over_mode_lets_it_switch() {
    let overloaded = json!([{"prompt": [{"error": {"code": -32603,
        "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}}]}]);
    let answers = json!([{"prompt": [{"message": "hello from b"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let w = FakeWorld::new(&[("a", overloaded), ("b", answers)]);
    let p = ed::profile(
        &w.addr,
        "fakes",
        &[("a", "Agent A", skip(), skip()), ("b", "Agent B", stop(), stop())],
    );
    let mut acp = w.acp(&p);
    let root = w.agents[0].root.clone();
    let (pinned, auto, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let session = ed::open(&cx, &root).await?;
            let id = session.session_id().0.to_string();
            // The modes came with the session; pin it to Agent A.
            let set = |mode: &str| {
                agent_client_protocol::UntypedMessage::new(
                    "session/set_mode",
                    json!({"sessionId": id, "modeId": mode}),
                )
                .unwrap()
            };
            let bad: Result<Value, _> = cx.send_request(set("nope")).block_task().await;
            assert!(bad.is_err(), "an unknown mode is refused");
            let _: Value = cx.send_request(set("a")).block_task().await?;
            let mut session = session;
            let pinned = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            let _: Value = cx.send_request(set("auto")).block_task().await?;
            let auto = ed::turn(&mut session, "Say hello", Answer::Reject, |_| false).await;
            Ok((pinned, auto, id))
        })
        .await
        .unwrap();
    assert_eq!(
        pinned.stop_reason.as_deref(),
        Some("end_turn"),
        "{pinned:?}\n{}",
        acp.logged()
    );
    let said = pinned.recourse();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("Agent A is overloaded (provider_overloaded, transient), and this session's mode runs it on Agent A only"), "{said:?}");
    assert!(
        said[0].contains("fail-over mode") && !said[0].contains("\"switch\""),
        "{said:?}"
    );
    assert_eq!(
        w.agents[1].received("session/prompt"),
        1,
        "pinned, Agent B never ran: only the fail-over turn did"
    );
    // Back to failing over: the stopped prompt's route ends, and a new one runs on Agent B
    // (Agent A's provider is behind the circuit its overload opened).
    assert_eq!(auto.stop_reason.as_deref(), Some("end_turn"), "{auto:?}");
    assert!(auto.messages().contains(&"hello from b".to_owned()), "{auto:?}");
    assert_eq!(
        w.agents[0].received("session/prompt"),
        1,
        "Agent A was not prompted again"
    );
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(route["snapshot"]["candidate_id"], "b", "{route}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editor_session_survives_a_server_restart_while_its_agent_runs() {
    let go = tempfile::tempdir().unwrap();
    let go = go.path().join("go");
    let slow = json!([{"prompt": [{"wait_file": go}, {"message": "done after the restart"}, {"respond": {"stopReason": "end_turn"}}]}]);
    let mut w = FakeWorld::new(&[("a", slow)]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let acp_log = acp.log.clone();
    let root = w.agents[0].root.clone();
    let database = w.dir.path().join("r.db");
    let (log, session_id) = Client
        .v1()
        .connect_with(acp.transport(), async |cx: ConnectionTo<Agent>| {
            let mut session = ed::open(&cx, &root).await?;
            let id = session.session_id().0.to_string();
            session.send_prompt("Take your time").unwrap();
            // The agent runs (it waits for the file); the server goes down and comes back on
            // the same address and database.
            let agent = &w.agents[0];
            let prompted = async {
                while agent.received("session/prompt") == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), prompted)
                .await
                .expect("the agent is prompted");
            w.serve.kill().unwrap();
            w.serve.wait().unwrap();
            // The agent finishes while the server is down: the report waits for it, retrying.
            std::fs::write(&go, "").unwrap();
            let retrying = async {
                while !acp_log.exists()
                    || !std::fs::read_to_string(&acp_log)
                        .unwrap_or_default()
                        .contains("trying again")
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(60), retrying)
                .await
                .expect("recourse acp retries");
            w.serve = tokio::task::block_in_place(|| restart_serve(&database, &w.addr, &w.config));
            let mut log = ed::TurnLog::default();
            loop {
                match tokio::time::timeout(ed::TURN_LIMIT, session.read_update())
                    .await
                    .expect("the turn ends")
                {
                    Ok(agent_client_protocol::v1::SessionMessage::Message(
                        agent_client_protocol::Dispatch::Notification(n),
                    )) => log.updates.push(n.params["update"].clone()),
                    Ok(agent_client_protocol::v1::SessionMessage::PromptResponse(r)) => {
                        log.stop_reason = r.ok().and_then(|r| {
                            serde_json::to_value(&r).unwrap()["stopReason"]
                                .as_str()
                                .map(str::to_owned)
                        });
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => panic!("{e:?}"),
                }
            }
            Ok((log, id))
        })
        .await
        .unwrap();
    assert_eq!(
        log.stop_reason.as_deref(),
        Some("end_turn"),
        "{log:?}\n{}",
        acp.logged()
    );
    assert!(
        log.messages().contains(&"done after the restart".to_owned()),
        "{log:?}"
    );
    let route = ed::route_of(&w.addr, &session_id);
    assert_eq!(
        route["snapshot"]["state"], "active",
        "the success was recorded: {route}"
    );
    assert!(route["snapshot"]["attempt"].is_null(), "{route}");
}

/// `recourse serve` again on `addr` (a restart: same database, same configuration).
fn restart_serve(database: &std::path::Path, addr: &str, config: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args(["serve", "--addr", addr, "--config"])
        .arg(config)
        .arg("--database")
        .arg(database)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "the restarted server to answer",
        std::time::Duration::from_secs(60),
        || http(addr, "GET", "/healthz", None).is_some_and(|(s, _)| s == 200),
    );
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_acp_gets_json_rpc_errors_and_the_process_goes_on() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let w = FakeWorld::new(&[("a", json!([{}]))]);
    let p = ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]);
    let mut acp = w.acp(&p);
    let mut stdin = acp.child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(acp.child.stdout.take().unwrap()).lines();
    let root = w.agents[0].root.to_str().unwrap().to_owned();
    let secret_looking = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH";
    let cases: Vec<(String, Option<i64>)> = vec![
        ("this is not json".to_owned(), Some(-32700)),
        (json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": root}}).to_string(), Some(-32600)),
        (json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "one"}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}).to_string(), None),
        (json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": secret_looking}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": "/"}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 6, "method": "session/prompt", "params": {"sessionId": "es-nope", "prompt": []}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "session/load", "params": {"sessionId": "../../etc", "cwd": root}}).to_string(), Some(-32602)),
        (json!({"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}}).to_string(), Some(-32601)),
        (json!({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": root}}).to_string(), None),
    ];
    for (line, expected) in cases {
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        let answer = loop {
            let text = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
                .await
                .expect("an answer")
                .unwrap()
                .unwrap_or_else(|| panic!("recourse acp ended on {line}:\n{}", acp.logged()));
            let v: Value = serde_json::from_str(&text).unwrap();
            // Notifications (the session's commands) are not answers.
            if v.get("id").is_some() {
                break v;
            }
        };
        match expected {
            Some(code) => {
                assert_eq!(answer["error"]["code"], code, "{line} -> {answer}");
                assert!(
                    !answer.to_string().contains("Zq8vN2xYpL4mK7rT"),
                    "echoed: {answer}"
                );
            }
            None => assert!(answer["result"].is_object(), "{line} -> {answer}"),
        }
    }
    assert!(acp.child.try_wait().unwrap().is_none(), "still running");
}

#[test]
fn a_refused_token_an_unreachable_server_or_a_profile_out_of_reach_stops_it_at_start_with_a_clear_message() {
    let w = FakeWorld::new(&[("a", json!([{}]))]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let p = runtime.block_on(async { ed::profile(&w.addr, "fakes", &[("a", "Agent A", stop(), stop())]) });
    let run = |server: &str, profile: &str, token: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"));
        c.args(["acp", "--server", server, "--profile", profile, "--config"])
            .arg(&w.config)
            .env_remove("RECOURSE_TOKEN")
            .stdin(std::process::Stdio::null());
        if let Some(t) = token {
            c.env("RECOURSE_TOKEN", t);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty(), "no ACP traffic");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let server = format!("http://{}", w.addr);
    let token = token_for(&w.addr).unwrap();
    let err = run(&server, &p, None);
    assert!(err.contains("set RECOURSE_TOKEN"), "{err}");
    let err = run(&server, &p, Some("rct_not-a-real-token"));
    assert!(err.contains("refused the API token"), "{err}");
    assert!(
        !err.contains("rct_not-a-real-token"),
        "the token is never shown: {err}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = run(&format!("http://{closed}"), &p, Some(&token));
    assert!(err.contains("cannot reach the Recourse server"), "{err}");
    let err = run(&server, "pf-nope", Some(&token));
    assert!(err.contains("no profile `pf-nope`"), "{err}");
}
