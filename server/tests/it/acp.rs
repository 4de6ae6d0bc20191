//! The `acp` dispatcher end to end: the spec's scenarios 1, 2, 4, 5 and 7 and the agent's
//! misbehaviours, with the fake ACP agent as a real subprocess over real pipes, a real database
//! (SQLite, or PostgreSQL in the second pass) and the manual clock, driven through the REST API.
//!
//! Time: route time is the manual clock (waits of 5, 10 and 20 s take no time). The only real
//! waiting is on the agent subprocess itself (its answers, its exit), always bounded; the few
//! timeout tests configure one-second timeouts.

use crate::common;

use axum::http::StatusCode;
use chrono::TimeDelta;
use common::{
    fake_agent::{running, until, FakeAgent, OnEof},
    *,
};
use serde_json::{json, Value};
use std::time::Duration;

/// Long enough for a debug-built agent to start and answer on a busy machine.
const LIMIT: Duration = Duration::from_secs(30);

/// Claude Code's overload as claude-code-acp reports it: `result.is_error` becomes a -32603
/// whose message carries the API error (anthropics/claude-code#35768; request id sanitized).
fn overloaded_rpc() -> Value {
    json!({"error": {"code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":\"req_011CVXXXX\"}"}})
}

/// The same failure as claude-code-acp also reports it: a message chunk, then a normal
/// `end_turn` (agentclientprotocol/claude-agent-acp#146).
fn overload_banner() -> Value {
    json!({"message": "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":\"req_011CVXXXX\"}"})
}

/// Anthropic's credit exhaustion, relayed the claude-code-acp way.
fn credits_rpc() -> Value {
    json!({"error": {"code": -32603, "message": "Internal error: API Error: 400 {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"}}"}})
}

fn end_turn() -> Value {
    json!({"respond": {"stopReason": "end_turn"}})
}

/// A successful turn: some real output, then `end_turn`.
fn success() -> Value {
    json!({"prompt": [{"message": "Done: the build is fixed."}, end_turn()]})
}

async fn harness(agents: &[&FakeAgent], timeouts: &str) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let config: String = agents.iter().map(|a| a.toml(timeouts)).collect();
    Harness::with_config(dir, &config).await
}

/// The agents live in their own directory (the harness's is created with it).
fn agents_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn state_is(state: &'static str) -> impl Fn(&Value) -> bool {
    move |s: &Value| s["state"] == state
}

/// Jobs the engine's writer has run so far (a rejected one too).
fn writer_jobs(h: &Harness) -> u64 {
    let s = h.engine.write_stats();
    s.single_jobs + s.grouped_jobs
}

/// Waits until every agent process of `agent` has exited and its attempt is finished (its
/// process row gone: the dispatcher removes it after it reported).
async fn settled(h: &Harness, agent: &FakeAgent) {
    for pid in agent.pids() {
        until(&format!("agent {pid} exits"), LIMIT, || !running(pid)).await;
    }
    let mut rows = 1_i64;
    let end = tokio::time::Instant::now() + LIMIT;
    while rows > 0 {
        rows = server::store::sql::query("SELECT COUNT(*) FROM agent_processes")
            .scalar(&h.pool)
            .await
            .unwrap();
        assert!(tokio::time::Instant::now() < end, "agent process rows stay");
        if rows > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn s1_capacity_errors_before_output_wait_5_10_and_20_seconds_then_skip_to_the_next_agent() {
    for eof in OnEof::BOTH {
        s1_capacity_errors_before_output_wait_5_10_and_20_seconds_then_skip_to_the_next_agent_case(eof).await;
    }
}

async fn s1_capacity_errors_before_output_wait_5_10_and_20_seconds_then_skip_to_the_next_agent_case(
    eof: OnEof,
) {
    let d = agents_dir();
    let main = FakeAgent::on_eof(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [overloaded_rpc()]}]),
        eof,
    );
    let backup = FakeAgent::on_eof(d.path(), "gemini", "google", json!([success()]), eof);
    let h = harness(&[&main, &backup], "").await;
    let p = h
        .profile(
            json!({"name": "capacity", "targets": [main.target("main"), backup.target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let mut waits = Vec::new();
    for ordinal in 1..=3 {
        let s = h
            .wait_route(&r, LIMIT, |s| {
                s["state"] == "retry_wait" && s["retry_ordinal"] == ordinal
            })
            .await;
        assert_eq!(s["code"], "provider_overloaded", "{s}");
        assert_eq!(s["class"], "transient");
        let d: chrono::DateTime<chrono::Utc> = serde_json::from_value(s["deadline"].clone()).unwrap();
        let wait = (d - h.now()).num_seconds();
        waits.push(wait);
        h.advance(wait - 1).await;
        assert_eq!(h.snapshot(&r).await["state"], "retry_wait");
        h.advance(1).await;
    }
    assert_eq!(waits, vec![5, 10, 20]);
    h.wait_route(&r, LIMIT, |s| {
        s["candidate_id"] == "backup" && s["state"] == "active" && s["attempt"].is_null()
    })
    .await;
    assert!(
        history_events(&h.route(&r).await).contains(&"failed->switching".to_owned()),
        "exhausted, then skipped"
    );
    settled(&h, &main).await;
    settled(&h, &backup).await;
    assert_eq!(main.pids().len(), 4, "one attempt and three retries on main");
    assert_eq!(main.received("session/prompt"), 4);
    assert_eq!(backup.received("session/prompt"), 1);
    // Each retry was a new session of its own.
    assert_eq!(main.received("session/new"), 4);
    assert_eq!(main.received("session/load"), 0);
}

#[tokio::test]
async fn s2_a_usage_limit_with_a_trusted_reset_waits_for_it_durably_then_retries_once() {
    for eof in OnEof::BOTH {
        s2_a_usage_limit_with_a_trusted_reset_waits_for_it_durably_then_retries_once_case(eof).await;
    }
}

async fn s2_a_usage_limit_with_a_trusted_reset_waits_for_it_durably_then_retries_once_case(eof: OnEof) {
    let d = agents_dir();
    let reset = common::t0() + TimeDelta::seconds(60);
    // Claude Code's machine-readable usage limit (anthropics/claude-code#11429), relayed the
    // way claude-code-acp relays any `is_error` result: -32603 with the text.
    let main = FakeAgent::on_eof(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"error": {"code": -32603,
                    "message": format!("Internal error: Claude AI usage limit reached|{}", reset.timestamp())}}]},
               success()]),
        eof,
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "quota", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 300, "stop"))]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("waiting_for_reset")).await;
    assert_eq!(s["code"], "quota_limited", "{s}");
    assert_eq!(s["class"], "hard");
    let d: chrono::DateTime<chrono::Utc> = serde_json::from_value(s["deadline"].clone()).unwrap();
    assert_eq!(d, reset);
    // The wait is a timer row committed with the decision.
    let timers: i64 =
        server::store::sql::query("SELECT COUNT(*) FROM timers WHERE route_id = ? AND kind = 'deadline'")
            .bind(&r)
            .scalar(&h.pool)
            .await
            .unwrap();
    assert_eq!(timers, 1);
    settled(&h, &main).await;
    h.advance(59).await;
    assert_eq!(h.snapshot(&r).await["state"], "waiting_for_reset");
    assert_eq!(main.pids().len(), 1, "nothing runs before the reset");
    h.advance(1).await;
    let s = h
        .wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    assert_eq!(s["candidate_id"], "main");
    let route = h.route(&r).await;
    let kinds: Vec<&str> = route["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["initial", "post_wait"]);
    settled(&h, &main).await;
    assert_eq!(main.received("session/prompt"), 2);
}

#[tokio::test]
async fn a_usage_limit_banner_on_stderr_then_exit_1_is_classified_but_delivery_is_ambiguous() {
    let d = agents_dir();
    let reset = common::t0() + TimeDelta::seconds(60);
    // The banner on stderr and an exit, nothing over ACP: the process exit and the stderr
    // ring are the evidence. Nothing came back for the prompt, so whether it reached the
    // provider is unknown, and the gate stops for a person even though the limit and its
    // reset are recognised.
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"stderr": format!("Claude AI usage limit reached|{}", reset.timestamp())}, {"exit": 1}]}]),
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "quota", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 300, "stop"))]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    assert_eq!(s["code"], "quota_limited", "{s}");
    assert_eq!(s["decision"]["classifier_rule"], "claude-code.usage-limit-epoch");
    assert_eq!(s["decision"]["gate_reason"], "ambiguous_delivery");
    settled(&h, &main).await;
}

#[tokio::test]
async fn s4_a_capacity_banner_before_end_turn_with_skip_advances_the_same_route_to_the_next_agent() {
    for eof in OnEof::BOTH {
        s4_a_capacity_banner_before_end_turn_with_skip_advances_the_same_route_to_the_next_agent_case(eof)
            .await;
    }
}

async fn s4_a_capacity_banner_before_end_turn_with_skip_advances_the_same_route_to_the_next_agent_case(
    eof: OnEof,
) {
    let d = agents_dir();
    let main = FakeAgent::on_eof(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [overload_banner(), end_turn()]}]),
        eof,
    );
    let backup = FakeAgent::on_eof(d.path(), "gemini", "google", json!([success()]), eof);
    let h = harness(&[&main, &backup], "").await;
    let p = h
        .profile(
            json!({"name": "skip", "targets": [main.target("main"), backup.target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), disabled()),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let mut updates = h.engine.subscribe_updates();
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h
        .wait_route(&r, LIMIT, |s| {
            s["candidate_id"] == "backup" && s["state"] == "active" && s["attempt"].is_null()
        })
        .await;
    assert_eq!(
        s["cycle"], 2,
        "the success on the backup started a new cycle: {s}"
    );
    let route = h.route(&r).await;
    assert_eq!(route["route"]["id"], r.as_str(), "same logical route");
    let events = history_events(&route);
    assert!(events.contains(&"failed->switching".to_owned()), "{events:?}");
    assert!(events.contains(&"succeeded->active".to_owned()), "{events:?}");
    let failed = route["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap()
        .clone();
    assert_eq!(
        failed["classification"]["code"], "provider_overloaded",
        "{failed}"
    );
    // The backup got the same prompt on a new session of its own.
    let prompt = &backup.messages("session/prompt")[0]["params"]["prompt"];
    assert_eq!(prompt, &json!([{"type": "text", "text": "Fix the build"}]));
    // Every update reached the live stream, in order, tagged with its attempt.
    let mut seen = Vec::new();
    while let Ok(u) = updates.try_recv() {
        if u.route_id == r {
            seen.push((
                u.attempt,
                u.update["sessionUpdate"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    assert_eq!(
        seen,
        vec![
            (1, "agent_message_chunk".to_owned()),
            (2, "agent_message_chunk".to_owned())
        ]
    );
    settled(&h, &main).await;
    settled(&h, &backup).await;
}

#[tokio::test]
async fn an_agents_live_output_reaches_the_event_stream_with_its_secrets_redacted() {
    for eof in OnEof::BOTH {
        an_agents_live_output_reaches_the_event_stream_with_its_secrets_redacted_case(eof).await;
    }
}

async fn an_agents_live_output_reaches_the_event_stream_with_its_secrets_redacted_case(eof: OnEof) {
    let d = agents_dir();
    let key = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH";
    let main = FakeAgent::on_eof(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"message": format!("Found ANTHROPIC_API_KEY={key} in .env; using it.")},
                           {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_1",
                                       "title": format!("curl -H 'x-api-key: {key}' https://api.anthropic.com"),
                                       "status": "completed"}},
                           // Ids as Claude Code's agent sends them look like tokens.
                           {"update": {"sessionUpdate": "tool_call", "toolCallId": "toolu_01A09q90qw90lq917835lq9F",
                                       "title": "Read .env", "status": "in_progress"}},
                           {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_01A09q90qw90lq917835lq9F",
                                       "status": "completed"}},
                           end_turn()]}]),
        eof,
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "live", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let mut updates = h.engine.subscribe_updates();
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    let mut seen = Vec::new();
    while let Ok(u) = updates.try_recv() {
        if u.route_id == r {
            seen.push(u.update);
        }
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    let text = serde_json::to_string(&seen).unwrap();
    assert!(!text.contains("Zq8vN2xYpL4mK7rT"), "{text}");
    assert!(!text.contains("lq917835"), "{text}");
    // The token-like id is replaced by one pseudonym, the same in both of its updates.
    let id = seen[2]["toolCallId"].as_str().unwrap();
    assert!(id.starts_with("id-"), "{text}");
    assert_eq!(seen[3]["toolCallId"], id, "{text}");
    assert!(
        seen[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{text}"
    );
    assert!(
        seen[1]["title"].as_str().unwrap().contains("[redacted]"),
        "{text}"
    );
    assert_eq!(seen[1]["toolCallId"], "call_1");
    settled(&h, &main).await;
}

#[tokio::test]
async fn s5_exhausted_credits_with_a_stop_policy_go_to_manual_recovery_without_the_other_agent() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [credits_rpc()]}]),
    );
    let backup = FakeAgent::new(d.path(), "gemini", "google", json!([success()]));
    let h = harness(&[&main, &backup], "").await;
    let p = h
        .profile(
            json!({"name": "stop", "targets": [main.target("main"), backup.target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 0, "stop")),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    assert_eq!(s["action_reason"], "policy_stop", "{s}");
    assert_eq!(s["code"], "quota_limited");
    assert_eq!(s["candidate_id"], "main");
    settled(&h, &main).await;
    assert!(backup.pids().is_empty(), "the other agent was never started");
    let route = h.route(&r).await;
    assert_eq!(route["dispatches"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn s7_a_failure_after_a_tool_call_stops_for_a_person_and_the_agent_is_never_prompted_again() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Edit src/main.rs",
                        "kind": "edit", "status": "pending"}},
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "completed"}},
            overloaded_rpc()]}]),
    );
    let backup = FakeAgent::new(d.path(), "gemini", "google", json!([success()]));
    let h = harness(&[&main, &backup], "").await;
    let p = h
        .profile(
            json!({"name": "unsafe", "targets": [main.target("main"), backup.target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    assert_eq!(s["action_reason"], "effect_unsafe", "{s}");
    assert_eq!(s["decision"]["gate_reason"], "tool_activity");
    assert_eq!(
        s["code"], "provider_overloaded",
        "classified, and still not retried"
    );
    settled(&h, &main).await;
    // Time passes; nothing is retried automatically.
    h.advance(3600).await;
    assert_eq!(h.snapshot(&r).await["state"], "action_required");
    assert_eq!(main.received("session/prompt"), 1, "never prompted again");
    assert_eq!(main.pids().len(), 1);
    assert!(backup.pids().is_empty(), "no other agent either");
}

#[tokio::test]
async fn a_permission_request_is_rejected_counts_as_tool_activity_and_fs_requests_are_refused() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [
            {"request": {"method": "fs/read_text_file", "params": {"path": "/etc/passwd"}}},
            {"request": {"method": "session/request_permission", "params": {
                "toolCall": {"toolCallId": "call_1", "title": "rm -rf build", "kind": "execute", "status": "pending"},
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}}},
            overloaded_rpc()]}]),
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "perm", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Clean up")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    assert_eq!(s["decision"]["gate_reason"], "tool_activity", "{s}");
    settled(&h, &main).await;
    let answers: Vec<Value> = main
        .log()
        .into_iter()
        .filter(|l| l["recv"].get("method").is_none() && l["recv"].get("id").is_some())
        .map(|l| l["recv"].clone())
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32601, "no file system for agents");
    assert_eq!(
        answers[1]["result"]["outcome"],
        json!({"outcome": "selected", "optionId": "reject"}),
        "a reject option, never an allow option"
    );
    // We advertised neither file system nor terminal.
    let init = &main.messages("initialize")[0]["params"]["clientCapabilities"];
    assert_eq!(init["fs"]["readTextFile"], false, "{init}");
    assert_eq!(init["fs"]["writeTextFile"], false);
    assert_eq!(init["terminal"], false);
}

/// Starts a route on `main` (its one candidate retries transient failures) and waits until the
/// agent is prompted: the route, the agent's process and the route's generation then.
async fn prompted(h: &Harness, main: &FakeAgent) -> (String, i32, u64) {
    let p = h
        .profile(json!({"name": "stop", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    until("the agent is prompted", LIMIT, || {
        main.received("session/prompt") == 1
    })
    .await;
    let pid = main.pids()[0];
    let g = h.snapshot(&r).await["generation"].as_u64().unwrap();
    (r, pid, g)
}

#[tokio::test]
async fn a_persons_stop_sends_session_cancel_and_the_agent_process_is_gone_and_nothing_is_reported() {
    let d = agents_dir();
    // The agent works, then waits for the cancel, then still sends a failure banner that
    // belongs to the cancelled prompt, then answers `cancelled`.
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"message": "Looking at the build..."}, {"wait_cancel": true}, overload_banner(),
                           {"respond": {"stopReason": "cancelled"}}]}]),
    );
    let h = harness(&[&main], "").await;
    let (r, pid, g) = prompted(&h, &main).await;
    assert!(running(pid));
    let (status, out) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "stop", "expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let stopped = h.route(&r).await;
    assert_eq!(stopped["route"]["snapshot"]["state"], "action_required");
    assert_eq!(stopped["route"]["snapshot"]["action_reason"], "stopped_by_user");
    let jobs = writer_jobs(&h);
    settled(&h, &main).await;
    assert!(!running(pid), "the agent process is gone");
    assert_eq!(main.received("session/cancel"), 1);
    let cancel = &main.messages("session/cancel")[0];
    let prompt = &main.messages("session/prompt")[0];
    assert_eq!(cancel["params"]["sessionId"], prompt["params"]["sessionId"]);
    // The cancelled attempt reported nothing (no job reached the writer; a report would have
    // been rejected by the generation fence anyway), and the route is as the stop left it.
    assert_eq!(writer_jobs(&h), jobs, "nothing was submitted after the stop");
    let after = h.route(&r).await;
    assert_eq!(after["route"]["snapshot"], stopped["route"]["snapshot"]);
    assert_eq!(after["history"], stopped["history"]);
}

#[tokio::test]
async fn a_stop_committed_through_another_replica_stops_the_agent_this_replica_runs() {
    requires!(postgres);
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"message": "Looking at the build..."}, {"wait_cancel": true},
                           {"respond": {"stopReason": "cancelled"}}]}]),
    );
    let h = harness(&[&main], "").await;
    // Replica B: an engine of its own on the same database, as another process would be.
    let b = server::engine::Engine::new(
        server::store::Store::new(server::db::open(&h.database).await.unwrap()),
        std::sync::Arc::new(h.clock.clone()),
    );
    let (r, pid, g) = prompted(&h, &main).await;
    let applied = b
        .submit(
            &r,
            server::engine::Input::Event(policy::route::RouteEvent::Manual {
                action: policy::route::ManualAction::Stop,
                expected_generation: g,
            }),
        )
        .await
        .unwrap();
    assert!(applied.changed);
    // A learns of it from the event log and stops its agent as its own stop would have.
    settled(&h, &main).await;
    assert!(!running(pid), "the agent process is gone");
    assert_eq!(main.received("session/cancel"), 1);
    let after = h.route(&r).await;
    assert_eq!(after["route"]["snapshot"]["state"], "action_required");
    assert_eq!(after["route"]["snapshot"]["action_reason"], "stopped_by_user");
    assert_eq!(
        after["route"]["snapshot"]["generation"],
        g + 1,
        "nothing was applied after the stop"
    );
}

#[tokio::test]
async fn an_agent_that_ignores_cancel_and_stdin_eof_is_killed_with_its_whole_process_group() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"grandchild": {"ignore_term": true}}, {"message": "working"}, {"hang": true}],
                "on_cancel": "ignore"}]),
    );
    let h = harness(&[&main], "cancel_grace = 1\nexit_grace = 1").await;
    let p = h
        .profile(json!({"name": "stubborn", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    until("the agent starts its helper", LIMIT, || {
        !main.grandchildren().is_empty() && main.received("session/prompt") == 1
    })
    .await;
    let (pid, helper) = (main.pids()[0], main.grandchildren()[0]);
    assert!(running(pid) && running(helper));
    let g = h.snapshot(&r).await["generation"].as_u64().unwrap();
    let (status, _) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "stop", "expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    settled(&h, &main).await;
    until("the helper that ignores SIGTERM is killed", LIMIT, || {
        !running(helper)
    })
    .await;
    assert!(!running(pid));
    assert_eq!(main.received("session/cancel"), 1);
}

#[tokio::test]
async fn a_hung_agent_is_given_up_after_prompt_idle_and_stops_for_a_person() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"hang": true}]}]),
    );
    let h = harness(&[&main], "prompt_idle = 1\nexit_grace = 1").await;
    let p = h
        .profile(json!({"name": "hang", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip"))]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    // Silence is not a provider error: nothing to classify, and the prompt may have been
    // delivered; a person decides.
    assert_eq!(s["code"], "unclassified", "{s}");
    assert_eq!(s["action_reason"], "unclassified");
    settled(&h, &main).await;
    assert_eq!(main.received("session/prompt"), 1);
}

#[tokio::test]
async fn an_agent_that_never_answers_initialize_is_given_up_after_the_step_timeout_unprompted() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"initialize": {"silent": true}}]),
    );
    let h = harness(&[&main], "step = 1\nexit_grace = 1").await;
    let p = h
        .profile(json!({"name": "mute", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip"))]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    assert_eq!(s["code"], "unclassified", "{s}");
    settled(&h, &main).await;
    assert_eq!(main.received("initialize"), 1);
    assert_eq!(main.received("session/prompt"), 0);
    let failed = h.route(&r).await["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap()
        .clone();
    assert_eq!(failed["classification"]["phase"], "session_init", "{failed}");
}

#[tokio::test]
async fn a_crash_by_signal_mid_prompt_is_evidence_of_the_exit_never_a_made_up_agent_error() {
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"stderr": "fatal: something broke"}, {"abort": true}]}]),
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "crash", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip"))]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    let s = h.wait_route(&r, LIMIT, state_is("action_required")).await;
    let route = h.route(&r).await;
    let failed = route["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap()
        .clone();
    let c = &failed["classification"];
    // An unrequested SIGABRT: the process rule, low confidence, so a person decides. Had the
    // SDK's own "-32603 transport closed" been reported as the agent's error, a rule for
    // internal errors could have matched instead.
    assert_eq!(c["classifier_rule"], "process.killed-unexpectedly", "{failed}");
    assert_eq!(s["decision"]["gate_reason"], "unclassified", "{s}");
    settled(&h, &main).await;
}

#[tokio::test]
async fn late_evidence_from_an_earlier_generation_is_stale_and_changes_nothing() {
    let d = agents_dir();
    let go = d.path().join("go");
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"wait_file": go.to_str().unwrap()}, overloaded_rpc()]}]),
    );
    let h = harness(&[&main], "").await;
    let p = h
        .profile(json!({"name": "late", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 60, 0, "stop"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Fix the build")).await;
    until("the agent is prompted", LIMIT, || {
        main.received("session/prompt") == 1
    })
    .await;
    // Meanwhile the route moves on without the agent: an outside report for the current
    // generation (the route's evidence endpoint).
    let g = h.snapshot(&r).await["generation"].clone();
    let mut env = overloaded();
    env["invocation_id"] = json!("inv-1");
    env["generation"] = g;
    let (status, out) = h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let before = h.route(&r).await;
    assert_eq!(before["route"]["snapshot"]["state"], "retry_wait");
    // Now the agent's own failure of the earlier generation arrives, late: it is submitted
    // (one job reaches the writer) and the generation fence rejects it.
    let jobs = writer_jobs(&h);
    std::fs::write(&go, "").unwrap();
    settled(&h, &main).await;
    assert_eq!(writer_jobs(&h), jobs + 1, "the late report was submitted");
    let after = h.route(&r).await;
    assert_eq!(
        after["route"]["snapshot"], before["route"]["snapshot"],
        "nothing changed"
    );
    assert_eq!(after["history"], before["history"]);
}

#[tokio::test]
async fn a_successful_turn_settles_the_attempt_in_the_works_directory_with_only_the_configured_environment() {
    for eof in OnEof::BOTH {
        a_successful_turn_settles_the_attempt_in_the_works_directory_with_only_the_configured_environment_case(eof).await;
    }
}

async fn a_successful_turn_settles_the_attempt_in_the_works_directory_with_only_the_configured_environment_case(
    eof: OnEof,
) {
    let d = agents_dir();
    let main = FakeAgent::on_eof(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "thinking"}}},
                           {"message": "All done."}, end_turn()],
                "initialize": {"authMethods": [{"id": "claude-login", "name": "Log in"}, {"id": "api-key", "name": "API key"}]}}]),
        eof,
    );
    let toml = main.toml("").replace(
        "provider_id =",
        "env = [\"PATH\", \"HOME\", \"RECOURSE_TEST_UNSET_VARIABLE\"]\nauth_method = \"api-key\"\nprovider_id =",
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::with_config(dir, &toml).await;
    let p = h
        .profile(json!({"name": "ok", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let sub = main.root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let work = json!({"prompt": [{"type": "text", "text": "Fix the build"}], "cwd": sub.to_str().unwrap()});
    let r = h.start_work(&p, "inv-1", work).await;
    let s = h
        .wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    assert_eq!(s["cycle"], 2, "a success starts a new cycle: {s}");
    settled(&h, &main).await;
    let start = main.log().into_iter().find(|l| l["event"] == "start").unwrap();
    assert_eq!(start["cwd"], sub.canonicalize().unwrap().to_str().unwrap());
    let mut env: Vec<&str> = start["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    env.sort_unstable();
    let mut expected: Vec<&str> = ["PATH", "HOME"]
        .into_iter()
        .filter(|n| std::env::var_os(n).is_some())
        .collect();
    expected.sort_unstable();
    assert_eq!(
        env, expected,
        "only the configured names, and only those that are set"
    );
    assert_eq!(main.received("authenticate"), 1);
    assert_eq!(main.messages("authenticate")[0]["params"]["methodId"], "api-key");
    assert_eq!(
        main.messages("session/new")[0]["params"]["cwd"],
        sub.canonicalize().unwrap().to_str().unwrap()
    );
    // The agent saw its stdin close; it exited by itself only if it does that (Gemini CLI,
    // Qwen Code); otherwise Recourse's SIGTERM ended it (no `exit` line), and the turn is a
    // success all the same.
    assert_eq!(main.eofs(), 1);
    match eof {
        OnEof::Exits => assert_eq!(main.exits_on_eof(), 1, "a clean exit of its own"),
        OnEof::Stays => assert_eq!(main.exits_on_eof(), 0, "stopped by Recourse's SIGTERM"),
    }
}

#[tokio::test]
async fn a_refusal_and_an_error_at_session_new_are_failures_with_their_evidence() {
    let d = agents_dir();
    let refusing = FakeAgent::new(
        d.path(),
        "refuser",
        "anthropic",
        json!([{"prompt": [{"respond": {"stopReason": "refusal"}}]}]),
    );
    let unauth = FakeAgent::new(
        d.path(),
        "unauth",
        "openai",
        json!([{"new_session": {"error": {"code": -32000, "message": "Authentication required"}}}]),
    );
    let h = harness(&[&refusing, &unauth], "").await;
    for (agent, name) in [(&refusing, "a"), (&unauth, "b")] {
        let p = h
            .profile(json!({"name": name, "targets": [agent.target("main")],
              "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip"))]}}))
            .await;
        let r = h
            .start_work(&p, &format!("inv-{name}"), agent.work("Fix the build"))
            .await;
        let s = h
            .wait_route(&r, LIMIT, |s| s["state"] != "active" || s["attempt"].is_null())
            .await;
        assert_ne!(s["state"], "active", "{} is not a success: {s}", agent.id);
        settled(&h, agent).await;
    }
    assert_eq!(unauth.received("session/prompt"), 0, "never prompted");
}

#[tokio::test]
async fn an_auth_method_the_agent_does_not_offer_is_not_sent_and_said_once_per_attempt_in_the_log() {
    let (logs, _log) = common::logs::warnings();
    let d = agents_dir();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"prompt": [{"message": "All done."}, end_turn()],
                "initialize": {"authMethods": [{"id": "claude-login", "name": "Log in"}]}}]),
    );
    let toml = main
        .toml("")
        .replace("provider_id =", "auth_method = \"api-key\"\nprovider_id =");
    let h = Harness::with_config(tempfile::tempdir().unwrap(), &toml).await;
    let p = h
        .profile(json!({"name": "ok", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let work =
        json!({"prompt": [{"type": "text", "text": "Fix the build"}], "cwd": main.root.to_str().unwrap()});
    let r = h.start_work(&p, "inv-1", work).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    settled(&h, &main).await;
    // The session ran without `authenticate`: the agent never offered the configured method.
    assert_eq!(main.received("authenticate"), 0);
    assert_eq!(main.received("session/prompt"), 1);
    let said: Vec<Value> = logs
        .lines()
        .into_iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("does not offer the configured auth_method"))
        })
        .collect();
    assert_eq!(said.len(), 1, "once for the one attempt: {said:#?}");
    let f = &said[0]["fields"];
    assert_eq!(f["route_id"], r.as_str());
    assert_eq!(f["auth_method"], "api-key");
    assert_eq!(f["agent"], "claude");
    assert!(f["offered"].as_str().unwrap().contains("claude-login"), "{f}");
}
