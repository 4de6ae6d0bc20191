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

#[test]
fn a_killed_server_with_an_agent_mid_prompt_comes_back_with_the_dispatch_ambiguous_and_the_agent_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new(
        dir.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"grandchild": {"ignore_term": true}}, {"message": "working on it"}, {"hang": true}],
                "on_cancel": "ignore"}]),
    );
    let config = dir.path().join("recourse.toml");
    std::fs::write(&config, agent.toml("")).unwrap();
    let db = common::backend::database(dir.path(), "recourse.db");
    let clock = common::t0().to_rfc3339();
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--test-clock",
        &clock,
        "--replica-id",
        "crashing",
    ];

    let (mut server, addr, _) = common::spawn_serve(&db, &args, false);
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
    let id = route["id"].as_str().unwrap().to_owned();
    until(
        "the agent is mid-prompt with its helper",
        Duration::from_secs(30),
        || agent.received("session/prompt") == 1 && !agent.grandchildren().is_empty(),
    );
    let (pid, helper) = (agent.pids()[0], agent.grandchildren()[0]);

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
    let (status, detail) = request(&addr, "GET", &format!("/api/v1/routes/{id}"), None);
    assert_eq!(status, 200);
    let s = &detail["route"]["snapshot"];
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "ambiguous_dispatch");
    assert_eq!(agent.received("session/prompt"), 1, "never prompted again");
    assert_eq!(agent.pids().len(), 1, "no agent started at boot");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    server.wait().unwrap();
}
