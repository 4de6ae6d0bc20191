//! A crash of Recourse with an agent mid-prompt: the real `recourse serve --config` is killed
//! with SIGKILL while the fake ACP agent (which ignores stdin EOF, with a helper in its process
//! group that ignores SIGTERM) works on a prompt. The agent outlives the server. The server
//! that starts next on the same database stops that whole process group before it serves, and
//! the route's started dispatch is ambiguous: `action_required`, never dispatched again.
//!
//! On both backends. On PostgreSQL the server that comes back runs under the crashed one's
//! `--replica-id`, as a service manager restarts a replica: it takes the crashed process's
//! place at once, so it stops the agents that process left at boot (a replica under another id
//! would leave them to the crashed one until that one's lease ran out; `replicas` tests that).
//!
//! And a graceful stop (SIGTERM) leaves nothing behind either: neither an agent mid-prompt nor
//! one still being stopped after its success (an agent that stays after stdin EOF, as Claude
//! Code's and Codex's adapters do, with a helper that ignores SIGTERM). Before the fix, the
//! server exited without waiting, the helper lived on, and a real Claude Code kept writing in
//! its HOME after `recourse serve` was gone.

use crate::common;

use common::fake_agent::{running, FakeAgent};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Blocking HTTP/1.0 request, signed in as the server's administrator.
fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    common::http(addr, method, path, body).expect("the server answers")
}

/// Waits (bounded) for something a subprocess does on its own time.
fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server in `dir` running one fake agent playing `prompt` (its helper in its group ignores
/// SIGTERM; it ignores `session/cancel` and stays after stdin EOF), with one route started on
/// it. Returns the agent, the server's arguments, the server, its address and the route's id.
struct Started {
    agent: FakeAgent,
    db: String,
    args: Vec<String>,
    server: std::process::Child,
    addr: String,
    route: String,
}

fn start(dir: &std::path::Path, prompt: Value) -> Started {
    let agent = FakeAgent::new(
        dir,
        "claude",
        "anthropic",
        json!([{"prompt": prompt, "on_cancel": "ignore"}]),
    );
    let config = dir.join("recourse.toml");
    std::fs::write(&config, agent.toml("")).unwrap();
    let db = common::backend::database(dir, "recourse.db");
    let args: Vec<String> = vec![
        "--config".into(),
        config.to_str().unwrap().into(),
        "--test-clock".into(),
        common::t0().to_rfc3339(),
        "--replica-id".into(),
        "crashing".into(),
    ];
    let (server, addr, _) = common::spawn_serve(&db, &args_of(&args), false);
    let (status, p) = request(
        &addr,
        "POST",
        "/api/v1/profiles",
        Some(&json!({"name": "agent", "targets": [agent.target("main")],
            "policy": {"version": 1, "candidates": [common::candidate("main",
                common::class_policy(3, 5, 0, "skip"), common::class_policy(3, 5, 0, "skip"))]}})),
    );
    assert_eq!(status, 201, "{p}");
    let (status, route) = request(
        &addr,
        "POST",
        "/api/v1/routes",
        Some(
            &json!({"profile_id": p["id"], "caller": {"kind": "kanban_task", "reference": "t-1",
            "invocation_id": "inv-1"}, "work": agent.work("Fix the build")}),
        ),
    );
    assert_eq!(status, 201, "{route}");
    let route = route["id"].as_str().unwrap().to_owned();
    Started {
        agent,
        db,
        args,
        server,
        addr,
        route,
    }
}

fn args_of(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Mid-prompt: the agent ignores stdin EOF and works on.
fn mid_prompt() -> Value {
    json!([{"grandchild": {"ignore_term": true}}, {"message": "working on it"}, {"hang": true}])
}

/// Waits until the agent is mid-prompt with its helper; their pids.
fn mid_prompt_with_its_helper(agent: &FakeAgent) -> (i32, i32) {
    until(
        "the agent is mid-prompt with its helper",
        Duration::from_secs(30),
        || agent.received("session/prompt") == 1 && !agent.grandchildren().is_empty(),
    );
    (agent.pids()[0], agent.grandchildren()[0])
}

/// The route's started dispatch is ambiguous after the server came back: a person decides,
/// and the agent was never prompted again nor started at boot.
fn ambiguous_and_never_repeated(addr: &str, id: &str, agent: &FakeAgent) {
    let (status, detail) = request(addr, "GET", &format!("/api/v1/routes/{id}"), None);
    assert_eq!(status, 200);
    let s = &detail["route"]["snapshot"];
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "ambiguous_dispatch");
    assert_eq!(agent.received("session/prompt"), 1, "never prompted again");
    assert_eq!(agent.pids().len(), 1, "no agent started at boot");
}

#[test]
fn a_killed_server_with_an_agent_mid_prompt_comes_back_with_the_dispatch_ambiguous_and_the_agent_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let Started {
        agent,
        db,
        args,
        mut server,
        route: id,
        ..
    } = start(dir.path(), mid_prompt());
    let args = args_of(&args);
    let (pid, helper) = mid_prompt_with_its_helper(&agent);

    server.kill().unwrap(); // SIGKILL: no shutdown code runs.
    server.wait().unwrap();
    assert!(
        running(pid),
        "the agent outlived the server (it ignores stdin EOF)"
    );
    assert!(running(helper));

    // The next server stops what the previous one left before it serves.
    let (mut server, addr, _) = common::spawn_serve(&db, &args, false);
    assert!(!running(pid), "the agent was stopped at boot");
    assert!(
        !running(helper),
        "and the helper in its group that ignores SIGTERM"
    );
    ambiguous_and_never_repeated(&addr, &id, &agent);

    common::sigterm(&server);
    common::exited(&mut server, Duration::from_secs(60));
}

/// Neither the agent nor the helper in its group (which ignores SIGTERM) outlived the server.
fn gone_with_the_server(pid: i32, helper: i32) {
    assert!(!running(pid), "the agent outlived the server");
    assert!(
        !running(helper),
        "the helper in its group (it ignores SIGTERM) outlived the server"
    );
}

/// Waits (bounded) for the server to exit after SIGTERM; it must exit cleanly.
fn stopped(mut server: std::process::Child) {
    let status = common::exited(&mut server, Duration::from_secs(60));
    assert!(status.success(), "exit status after SIGTERM: {status}");
}

#[test]
fn a_stopped_server_stops_the_agent_it_had_mid_prompt_and_comes_back_with_the_dispatch_ambiguous() {
    let dir = tempfile::tempdir().unwrap();
    let Started {
        agent,
        db,
        args,
        server,
        route: id,
        ..
    } = start(dir.path(), mid_prompt());
    let (pid, helper) = mid_prompt_with_its_helper(&agent);

    common::sigterm(&server);
    stopped(server);
    gone_with_the_server(pid, helper);

    // The dispatch is ambiguous, as after a crash: a person decides.
    let (server, addr, _) = common::spawn_serve(&db, &args_of(&args), false);
    ambiguous_and_never_repeated(&addr, &id, &agent);
    common::sigterm(&server);
    stopped(server);
}

#[test]
fn a_server_stopped_right_after_a_success_leaves_no_agent_behind() {
    let dir = tempfile::tempdir().unwrap();
    let Started {
        agent,
        server,
        addr,
        route: id,
        ..
    } = start(
        dir.path(),
        json!([{"grandchild": {"ignore_term": true}}, {"message": "Done: the build is fixed."},
               {"respond": {"stopReason": "end_turn"}}]),
    );
    // The success is recorded before the agent is stopped (it stays after stdin EOF: the stop
    // takes its `exit_grace`, then SIGTERM): the server is told to stop in between.
    until("the success is recorded", Duration::from_secs(30), || {
        let (_, detail) = request(&addr, "GET", &format!("/api/v1/routes/{id}"), None);
        detail["history"]
            .as_array()
            .is_some_and(|h| h.iter().any(|e| e["event"] == "succeeded"))
    });
    let (pid, helper) = (agent.pids()[0], agent.grandchildren()[0]);
    assert!(running(helper), "the helper is still there when the stop begins");

    common::sigterm(&server);
    stopped(server);
    gone_with_the_server(pid, helper);
}
