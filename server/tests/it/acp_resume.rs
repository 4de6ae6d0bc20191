//! The replay gate's one exception, end to end with the fake ACP agent: after real assistant
//! output, an automatic retry is allowed only when it loads the very session that holds that
//! output (an agent that advertises `loadSession`, a policy that retries the same candidate);
//! everything else after output stops for a person, and no other candidate is started on the
//! same prompt generation.

use crate::common;

use axum::http::StatusCode;
use common::{
    fake_agent::{until, FakeAgent},
    *,
};
use serde_json::{json, Value};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn overloaded_rpc() -> Value {
    json!({"error": {"code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":\"req_011CVXXXX\"}"}})
}

/// Real output, then the provider fails.
fn output_then_overload(load_session: bool) -> Value {
    json!({"initialize": {"loadSession": load_session},
           "prompt": [{"message": "Here is the first half of the plan:\n1. Split the parser.\n"}, overloaded_rpc()]})
}

/// A retry that loads the session (which replays its history) and finishes the answer.
fn resumed_success() -> Value {
    json!({"initialize": {"loadSession": true},
           "load_session": {"replay": [
               {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Plan the refactoring"}},
               {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Here is the first half of the plan:\n1. Split the parser.\n"}}]},
           "prompt": [{"message": "2. Move the checks."}, {"respond": {"stopReason": "end_turn"}}]})
}

/// The agents' tables, each saying its loaded session keeps a failed turn's output (as the
/// fake agent's does) when `resume` is true.
fn config(agents: &[&FakeAgent], resume: bool) -> String {
    agents
        .iter()
        .map(|a| {
            let t = a.toml("");
            match resume {
                true => t.replacen(
                    "[agent.timeouts]",
                    "resume_after_output = true\n[agent.timeouts]",
                    1,
                ),
                false => t,
            }
        })
        .collect()
}

async fn harness(agents: &[&FakeAgent]) -> Harness {
    Harness::with_config(tempfile::tempdir().unwrap(), &config(agents, true)).await
}

/// How many routes hold output in an agent session (the route state's `held`).
async fn held_routes(h: &Harness) -> usize {
    let states: Vec<String> = server::store::sql::query("SELECT state_json FROM routes")
        .scalars(&h.pool)
        .await
        .unwrap();
    states
        .iter()
        .map(|s| serde_json::from_str::<policy::route::RouteState>(s).unwrap())
        .filter(|s| s.held().is_some())
        .count()
}

/// Waits until no agent process of the harness is recorded (every attempt finished).
async fn settled(h: &Harness) {
    let end = tokio::time::Instant::now() + LIMIT;
    loop {
        let rows: i64 = server::store::sql::query("SELECT COUNT(*) FROM agent_processes")
            .scalar(&h.pool)
            .await
            .unwrap();
        if rows == 0 {
            return;
        }
        assert!(tokio::time::Instant::now() < end, "attempts never finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The resuming agent (real output, then overloaded; a retry that loads its session and
/// finishes) and a backup that must never run.
fn resuming_agents(dir: &std::path::Path) -> (FakeAgent, FakeAgent) {
    let main = FakeAgent::new(
        dir,
        "claude",
        "anthropic",
        json!([output_then_overload(true), resumed_success()]),
    );
    (main, FakeAgent::new(dir, "gemini", "google", json!([{}])))
}

/// A profile that retries `main` on a transient error (twice, 5 s apart), then skips to
/// `backup`.
fn retry_then_backup(main: &FakeAgent, backup: &FakeAgent) -> Value {
    json!({"name": "resume", "targets": [main.target("main"), backup.target("backup")],
      "policy": {"version": 1, "candidates": [
        candidate("main", class_policy(2, 5, 0, "skip"), disabled()),
        candidate("backup", disabled(), disabled())]}})
}

/// The retry loaded the first attempt's session and prompted in it again: no second session
/// replayed the prompt, no other agent got it, and the success ended the record.
async fn resumed_in_the_same_session(h: &Harness, main: &FakeAgent, backup: &FakeAgent) {
    let first = main.messages("session/prompt")[0]["params"]["sessionId"].clone();
    let loads = main.messages("session/load");
    assert_eq!(
        loads.len(),
        1,
        "the retry loaded the session that holds the output"
    );
    assert_eq!(loads[0]["params"]["sessionId"], first);
    assert_eq!(
        main.received("session/new"),
        1,
        "no second session replayed the prompt"
    );
    let prompts = main.messages("session/prompt");
    assert_eq!(prompts.len(), 2);
    assert_eq!(prompts[1]["params"]["sessionId"], first);
    assert_eq!(prompts[1]["params"]["prompt"], prompts[0]["params"]["prompt"]);
    assert!(backup.pids().is_empty(), "no other agent got the prompt");
    assert_eq!(held_routes(h).await, 0, "a success ends the guarantee");
}

fn decision(s: &Value) -> (Value, Value) {
    (
        s["decision"]["kind"].clone(),
        s["decision"]["gate_reason"].clone(),
    )
}

#[tokio::test]
async fn output_then_a_capacity_error_retries_in_the_very_session_that_holds_the_output() {
    let d = tempfile::tempdir().unwrap();
    let (main, backup) = resuming_agents(d.path());
    let h = harness(&[&main, &backup]).await;
    let p = h.profile(retry_then_backup(&main, &backup)).await;
    let mut updates = h.engine.subscribe_updates();
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "retry_wait").await;
    assert_eq!(s["code"], "provider_overloaded", "{s}");
    assert_eq!(s["retry_ordinal"], 1);
    settled(&h).await;
    assert_eq!(
        held_routes(&h).await,
        1,
        "the session is recorded before the report"
    );
    h.advance(5).await;
    let s = h
        .wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    assert_eq!(s["candidate_id"], "main", "{s}");
    settled(&h).await;
    resumed_in_the_same_session(&h, &main, &backup).await;
    // The history the load replayed is not new output: only the new chunk went live.
    let mut live = Vec::new();
    while let Ok(u) = updates.try_recv() {
        live.push((
            u.attempt,
            u.update["content"]["text"].as_str().unwrap_or("").to_owned(),
        ));
    }
    assert_eq!(
        live,
        vec![
            (
                1,
                "Here is the first half of the plan:\n1. Split the parser.\n".to_owned()
            ),
            (2, "2. Move the checks.".to_owned())
        ]
    );
}

#[tokio::test]
async fn output_then_a_capacity_error_stops_for_a_person_when_the_agent_cannot_load_its_session() {
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([output_then_overload(false)]),
    );
    let h = harness(&[&main]).await;
    let p = h
        .profile(json!({"name": "no-load", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(decision(&s), (json!("manual"), json!("assistant_output")), "{s}");
    settled(&h).await;
    assert_eq!(held_routes(&h).await, 0);
    h.advance(3600).await;
    assert_eq!(main.received("session/prompt"), 1, "never prompted again");
}

#[tokio::test]
async fn output_stops_for_a_person_when_the_operator_never_said_the_agents_session_keeps_it() {
    // The agent advertises `loadSession` and the policy would retry it, but its entry does not
    // say `resume_after_output` (Codex and Qwen Code load a session without a failed turn's
    // output): a retry would answer a prompt the agent half forgot.
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "codex",
        "openai",
        json!([output_then_overload(true), resumed_success()]),
    );
    let h = Harness::with_config(tempfile::tempdir().unwrap(), &config(&[&main], false)).await;
    let p = h
        .profile(json!({"name": "no-resume", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(decision(&s), (json!("manual"), json!("assistant_output")), "{s}");
    settled(&h).await;
    assert_eq!(held_routes(&h).await, 0);
    h.advance(3600).await;
    assert_eq!(main.received("session/prompt"), 1, "never prompted again");
    assert_eq!(main.received("session/load"), 0);
}

#[tokio::test]
async fn output_is_never_resumed_when_the_policy_would_switch_and_the_other_agent_never_runs() {
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([output_then_overload(true)]),
    );
    let backup = FakeAgent::new(d.path(), "gemini", "google", json!([{}]));
    let h = harness(&[&main, &backup]).await;
    let p = h
        .profile(
            json!({"name": "switch", "targets": [main.target("main"), backup.target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), disabled()),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(decision(&s), (json!("manual"), json!("assistant_output")), "{s}");
    settled(&h).await;
    assert!(backup.pids().is_empty());
    assert_eq!(held_routes(&h).await, 0);
}

#[tokio::test]
async fn tool_activity_is_never_resumable_even_on_an_agent_that_can_load_its_session() {
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([{"initialize": {"loadSession": true}, "prompt": [
            {"message": "Editing the parser."},
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "Edit parser.rs", "kind": "edit", "status": "completed"}},
            overloaded_rpc()]}]),
    );
    let h = harness(&[&main]).await;
    let p = h
        .profile(json!({"name": "tool", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Refactor")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(decision(&s), (json!("manual"), json!("tool_activity")), "{s}");
    settled(&h).await;
    assert_eq!(held_routes(&h).await, 0);
    assert_eq!(main.received("session/prompt"), 1);
}

#[tokio::test]
async fn a_resumed_retry_whose_agent_no_longer_offers_its_session_is_not_run_in_a_new_one() {
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([output_then_overload(true), {"initialize": {"loadSession": false}}]),
    );
    let h = harness(&[&main]).await;
    let p = h
        .profile(json!({"name": "lost", "targets": [main.target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "retry_wait").await;
    settled(&h).await;
    h.advance(5).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(s["decision"]["kind"], "manual", "{s}");
    settled(&h).await;
    assert_eq!(main.pids().len(), 2);
    assert_eq!(main.received("session/new"), 1, "no new session for the retry");
    assert_eq!(main.received("session/prompt"), 1, "the retry was never prompted");
}

#[tokio::test]
async fn a_persons_skip_during_the_resumable_wait_starts_no_other_candidate_until_a_second_decision() {
    let d = tempfile::tempdir().unwrap();
    let main = FakeAgent::new(
        d.path(),
        "claude",
        "anthropic",
        json!([output_then_overload(true)]),
    );
    let h = harness(&[&main]).await;
    let mut live = h.engine.subscribe();
    let p = h
        .profile(json!({"name": "skip", "targets": [main.target("main"), sim("backup", "openai", json!([succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(2, 60, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "retry_wait").await;
    settled(&h).await;
    // Skip now, during the wait: the same route cycle, so the backup would get the prompt
    // after the main agent's output. It is not started.
    let (status, out) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "skip_now", "expected_generation": s["generation"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let s = h.wait_route(&r, LIMIT, |s| s["state"] == "action_required").await;
    assert_eq!(s["candidate_id"], "backup", "{s}");
    assert_eq!(h.launches(&r).await, 0, "the backup never ran");
    // Live pages were told every change, the refused start too (it committed with its
    // refusal, in one transaction).
    h.engine.events_delivered().await.unwrap();
    let mut told = Vec::new();
    while let Ok(e) = live.try_recv() {
        if e.route_id == r {
            told.push((e.payload.generation, e.payload.event.as_str().to_owned()));
        }
    }
    let history: Vec<(u64, String)> = h.route(&r).await["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["generation"].as_u64().unwrap(),
                row["event"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(told, history, "every committed change, once, in order");
    // A second, explicit decision from manual recovery starts a new cycle: it runs.
    let (status, out) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "retry_now", "expected_generation": s["generation"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let s = h
        .wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    assert_eq!(s["candidate_id"], "backup", "{s}");
    assert_eq!(h.launches(&r).await, 1);
    assert_eq!(held_routes(&h).await, 0, "the new cycle dropped the old session");
    until("nothing else ran on the main agent", LIMIT, || {
        main.pids().len() == 1
    })
    .await;
}

/// Waits (polling the database, which any engine may have written) until `engine`'s view of the
/// route satisfies `done`.
async fn poll_route(
    engine: &server::engine::Engine,
    id: &str,
    done: impl Fn(&policy::wire::RouteSnapshot) -> bool,
) -> policy::wire::RouteSnapshot {
    let end = tokio::time::Instant::now() + LIMIT;
    loop {
        let s = engine.route_summary(id).await.unwrap().snapshot;
        if done(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "route {id} never got there: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn another_engine_on_the_database_resumes_a_session_recorded_after_it_first_launched() {
    // Two engines on one database: replicas on PostgreSQL, or a route taken up by another
    // process. The second one launches an agent before the first records a resumable session,
    // then runs the retry: it must load that session, not start a new one and replay the prompt.
    let d = tempfile::tempdir().unwrap();
    let (main, backup) = resuming_agents(d.path());
    let warm = FakeAgent::new(d.path(), "codex", "openai", json!([{}]));
    let agents = config(&[&main, &backup, &warm], true);
    let h = Harness::with_config(tempfile::tempdir().unwrap(), &agents).await;
    let p = h.profile(retry_then_backup(&main, &backup)).await;
    let w = h
        .profile(json!({"name": "warm", "targets": [warm.target("w")],
          "policy": {"version": 1, "candidates": [candidate("w", disabled(), disabled())]}}))
        .await;
    let other = server::engine::Engine::with_runners(
        server::store::Store::new(h.pool.clone()),
        std::sync::Arc::new(h.clock.clone()),
        server::config::Runners::new(server::config::RunnerConfig::parse(&agents).unwrap()),
    );
    let request = policy::api::StartRouteRequest {
        profile_id: w,
        caller: policy::api::Caller {
            kind: policy::api::CallerKind::Workflow,
            reference: "warm".into(),
            invocation_id: "inv-warm".into(),
        },
        title: None,
        work: Some(serde_json::from_value(warm.work("Say hello")).unwrap()),
        pin: None,
    };
    let started = other
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap();
    poll_route(&other, &started.id, |s| s.attempt.is_none()).await;
    settled(&h).await;

    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "retry_wait").await;
    settled(&h).await;
    assert_eq!(held_routes(&h).await, 1);
    // The retry wait ends on the other engine's scheduler: it runs the retry.
    h.clock.advance(chrono::TimeDelta::seconds(5));
    server::scheduler::tick(&other).await.unwrap();
    let s = poll_route(&other, &r, |s| {
        s.state == policy::route::StateName::Active && s.attempt.is_none()
    })
    .await;
    assert_eq!(s.candidate_id, "main");
    settled(&h).await;
    resumed_in_the_same_session(&h, &main, &backup).await;
}

/// The migration that moved held output from its own table into the route's state, on a
/// database as the previous release left it: a route in its retry wait whose session was a
/// `resumable_sessions` row. After the upgrade the route holds the output, and its retry
/// loads that session.
#[tokio::test]
async fn a_session_recorded_before_the_upgrade_is_the_routes_held_output_after_it() {
    const MIGRATION: i64 = 20261205090000;
    let d = tempfile::tempdir().unwrap();
    let (main, backup) = resuming_agents(d.path());
    let h = harness(&[&main, &backup]).await;
    let p = h.profile(retry_then_backup(&main, &backup)).await;
    let r = h.start_work(&p, "inv-1", main.work("Plan the refactoring")).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "retry_wait").await;
    settled(&h).await;
    let state_json: String = server::store::sql::query("SELECT state_json FROM routes WHERE id = ?")
        .bind(r.as_str())
        .scalar(&h.pool)
        .await
        .unwrap();
    let state: policy::route::RouteState = serde_json::from_str(&state_json).unwrap();
    let held = state.held().cloned().expect("the failure granted the session");
    // The database as the previous release left it: the session in its own table (one row of
    // the route's current cycle), the state without it, the migration not run.
    let mut old = serde_json::from_str::<Value>(&state_json).unwrap();
    old.as_object_mut().unwrap().remove("held");
    server::store::sql::query("UPDATE routes SET state_json = ? WHERE id = ?")
        .bind(old.to_string())
        .bind(r.as_str())
        .execute(&h.pool)
        .await
        .unwrap();
    server::store::sql::batch(
        "CREATE TABLE resumable_sessions (route_id TEXT PRIMARY KEY NOT NULL REFERENCES routes(id) \
         ON DELETE CASCADE, candidate_id TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, \
         generation BIGINT NOT NULL, cycle BIGINT NOT NULL, work_digest TEXT NOT NULL, recorded_at TEXT NOT NULL)",
        &h.pool,
    )
    .await
    .unwrap();
    server::store::sql::query(
        "INSERT INTO resumable_sessions (route_id, candidate_id, agent_id, session_id, generation, cycle, \
         work_digest, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(r.as_str())
    .bind(held.session.candidate_id.as_str())
    .bind(held.session.agent_id.as_str())
    .bind(held.session.session_id.as_str())
    .bind(i64::try_from(held.generation).unwrap())
    .bind(i64::from(state.cycle().number()))
    .bind(held.session.work_digest.as_str())
    .bind("2026-11-30T08:00:00Z")
    .execute(&h.pool)
    .await
    .unwrap();
    server::store::sql::query("DELETE FROM _sqlx_migrations WHERE version = ?")
        .bind(MIGRATION)
        .execute(&h.pool)
        .await
        .unwrap();
    assert_eq!(held_routes(&h).await, 0);

    server::db::open(&h.database).await.expect("the upgrade migrates");
    let upgraded: String = server::store::sql::query("SELECT state_json FROM routes WHERE id = ?")
        .bind(r.as_str())
        .scalar(&h.pool)
        .await
        .unwrap();
    let upgraded: policy::route::RouteState = serde_json::from_str(&upgraded).unwrap();
    assert_eq!(upgraded, state, "the row became the state's held output");
    assert!(
        server::store::sql::query("SELECT COUNT(*) FROM resumable_sessions")
            .scalar::<i64>(&h.pool)
            .await
            .is_err(),
        "the table is gone"
    );
    h.advance(5).await;
    h.wait_route(&r, LIMIT, |s| s["state"] == "active" && s["attempt"].is_null())
        .await;
    settled(&h).await;
    resumed_in_the_same_session(&h, &main, &backup).await;
}
