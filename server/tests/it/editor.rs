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
//!
//! What needs no published agent is in `editor_fake_agents.rs`. Unlike `agents_matrix`, this
//! module runs in both of `./dev test`'s passes (the server's database is the test's backend):
//! the routes, leases and pins it drives are the backend's.

use crate::common;

use agent_client_protocol::{v1::ConnectionTo, Agent, Client};
use common::{
    agents::{self, Published},
    editor::{self as ed, skip, stop, wait_until, Acp, Answer},
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
        let (serve, addr, _) = spawn_serve(backend::database(dir.path(), "r.db"), &args, false);
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
    // The editor is gone: recourse acp exits, and the failed agent (stopped in the background
    // after the report) does not outlive it.
    tokio::time::timeout(std::time::Duration::from_secs(60), acp.child.wait())
        .await
        .expect("recourse acp exits once the editor is gone")
        .unwrap();
    wait_until(
        "no process left in the project",
        std::time::Duration::from_secs(30),
        || ed::processes_in(&w.work).is_empty(),
    );
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
            // The second prompt hangs at the provider; recourse acp is killed meanwhile, while
            // the editor is still connected (an editor that goes away first is a cancel, which
            // stops the route as the person's: `editor_fake_agents.rs`).
            session.send_prompt("And again").unwrap();
            provider.wait_received(2).await;
            let groups = ed::guarded_groups(acp_pid);
            assert_eq!(groups.len(), 1, "one agent, under its guard: {groups:?}");
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(acp_pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            Ok((session.session_id().0.to_string(), groups))
        })
        .await
        .unwrap();
    let (session_id, groups) = session_id;
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
