//! The engine's own stop (`Engine::shutdown`), in process: the one stop `recourse serve` runs
//! after SIGTERM (`acp_crash.rs` and `shutdown.rs` drive that through the real process). A
//! real fake-agent subprocess is mid-prompt when the stop comes; the stop refuses new work,
//! stops the agent, and ends the writer last; an engine opened on the same database afterwards
//! takes the attempt up exactly as after a crash.

use crate::common;

use axum::http::StatusCode;
use common::{
    fake_agent::{running, until, FakeAgent},
    *,
};
use serde_json::json;
use server::engine::{EngineError, Input, Task};
use std::time::Duration;

/// Long enough for a debug-built agent to start and answer on a busy machine.
const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn the_engines_stop_refuses_new_work_stops_the_agent_in_flight_and_a_restart_finds_it_ambiguous() {
    let agents = tempfile::tempdir().unwrap();
    let agent = FakeAgent::new(
        agents.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"message": "working on it"}, {"hang": true}]}]),
    );
    let h = Harness::with_config(tempfile::tempdir().unwrap(), &agent.toml("")).await;
    let engine = h.engine.clone();
    h.engine
        .spawn_task(Task::Work, |stop| server::scheduler::run(engine, stop));
    let p = h
        .profile(json!({"name": "one", "targets": [agent.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", agent.work("Fix the build")).await;
    until("the agent is mid-prompt", LIMIT, || {
        agent.received("session/prompt") == 1
    })
    .await;
    let pid = agent.pids()[0];
    assert!(running(pid));

    tokio::time::timeout(LIMIT, h.engine.shutdown())
        .await
        .expect("the engine stopped within the limit");
    assert!(
        !running(pid),
        "the agent in flight is stopped when the stop returns"
    );
    // Idempotent: a second stop returns at once.
    tokio::time::timeout(Duration::from_secs(5), h.engine.shutdown())
        .await
        .expect("a second stop returns");

    // New work is refused, and says why (REST: 503 `stopping`, to be tried again).
    let (status, body) = h
        .post(
            "/api/v1/routes",
            json!({"profile_id": p, "caller": {"kind": "kanban_task", "reference": "task-2",
                   "invocation_id": "inv-2"}, "work": agent.work("Another")}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "stopping", "{body}");
    // The writer is closed for good: a late report is refused, never starts it again.
    let late = h
        .engine
        .submit(
            &r,
            Input::Event(policy::route::RouteEvent::Succeeded { generation: 1 }),
        )
        .await;
    assert!(matches!(late, Err(EngineError::Stopping)), "{late:?}");
    // Nothing was recorded for the stopped attempt: its dispatch is started, unsettled.
    let route = h.route(&r).await;
    assert_eq!(
        route["route"]["snapshot"]["attempt"]["dispatch"], "started",
        "{route}"
    );

    // The next boot takes it up as after a crash: ambiguous, never repeated.
    let now = h.now();
    let Harness { dir, engine, .. } = h;
    drop(engine);
    let h = Harness::with_dir_config(dir, now, &agent.toml("")).await;
    let report = h.engine.reconcile().await.unwrap();
    assert_eq!(report.ambiguous, 1, "{report:?}");
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "ambiguous_dispatch");
    assert_eq!(agent.received("session/prompt"), 1, "never prompted again");
    assert_eq!(agent.pids().len(), 1, "no agent started at boot");
    h.engine.shutdown().await;
}
