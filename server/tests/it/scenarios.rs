//! The spec's scenarios 1-8, end to end through the HTTP API, against a real database (either backend),
//! with the simulated dispatcher and the manual clock.

use crate::common;

use axum::http::StatusCode;
use chrono::TimeDelta;
use common::*;
use serde_json::{json, Value};

fn deadline_secs(h: &Harness, snapshot: &Value) -> i64 {
    let d: chrono::DateTime<chrono::Utc> = serde_json::from_value(snapshot["deadline"].clone()).unwrap();
    (d - h.now()).num_seconds()
}

#[tokio::test]
async fn s1_capacity_errors_wait_5_10_and_20_seconds_then_apply_the_exhausted_outcome() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "capacity", "targets": [
            sim("main", "anthropic", json!([fail(overloaded())])),
            sim("backup", "openai", json!([hang()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let mut waits = Vec::new();
    for ordinal in 1..=3 {
        let s = h.snapshot(&r).await;
        assert_eq!(s["state"], "retry_wait", "{s}");
        assert_eq!(s["retry_ordinal"], ordinal);
        assert_eq!(s["max_retries"], 3);
        assert_eq!(s["code"], "provider_overloaded");
        assert_eq!(s["class"], "transient");
        let wait = deadline_secs(&h, &s);
        waits.push(wait);
        // One second early nothing happens; at the deadline the retry runs (and fails again).
        h.advance(wait - 1).await;
        assert_eq!(h.snapshot(&r).await["state"], "retry_wait");
        h.advance(1).await;
    }
    assert_eq!(waits, vec![5, 10, 20]);
    let s = h.snapshot(&r).await;
    assert_eq!(s["candidate_id"], "backup", "{s}");
    assert_eq!(s["excluded_candidates"], json!(["main"]));
    assert_eq!(h.launches(&r).await, 5, "4 attempts on main, 1 on backup");
}

#[tokio::test]
async fn s2_a_trusted_reset_one_minute_away_is_waited_for_durably_then_retried_once() {
    let h = Harness::new().await;
    let reset = h.now() + TimeDelta::seconds(60);
    let p = h
        .profile(json!({"name": "quota", "targets": [
            sim("main", "anthropic", json!([fail(usage_limit(reset)), succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 300, "stop"))]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "waiting_for_reset", "{s}");
    assert_eq!(s["code"], "quota_limited");
    assert_eq!(s["class"], "hard");
    assert_eq!(s["pending_outcome"], "wait_for_reset");
    assert_eq!(deadline_secs(&h, &s), 60);
    // The wait is a timer row committed with the decision.
    let timers: i64 =
        server::store::sql::query("SELECT COUNT(*) FROM timers WHERE route_id = ? AND kind = 'deadline'")
            .bind(&r)
            .scalar(&h.pool)
            .await
            .unwrap();
    assert_eq!(timers, 1);
    h.advance(59).await;
    assert_eq!(h.snapshot(&r).await["state"], "waiting_for_reset");
    h.advance(1).await;
    let route = h.route(&r).await;
    assert_eq!(route["route"]["snapshot"]["state"], "active", "{route}");
    assert_eq!(route["route"]["snapshot"]["candidate_id"], "main");
    let kinds: Vec<&str> = route["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["initial", "post_wait"]);
}

#[tokio::test]
async fn s3_a_reset_six_hours_away_beyond_the_maximum_is_not_shortened_and_the_retry_applies() {
    let h = Harness::new().await;
    let reset = h.now() + TimeDelta::hours(6);
    let p = h
        .profile(json!({"name": "quota", "targets": [
            sim("main", "anthropic", json!([fail(usage_limit(reset))]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(1, 30, 300, "stop"))]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "retry_wait", "{s}");
    assert_eq!(deadline_secs(&h, &s), 30);
    assert_eq!(s["decision"]["wait_skipped"], "hint_beyond_maximum");
    h.advance(30).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "policy_stop");
}

#[tokio::test]
async fn s4_an_exhausted_transient_budget_with_skip_advances_the_same_route_to_the_next_candidate() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "skip", "targets": [
            sim("main", "anthropic", json!([fail(overloaded())])),
            sim("backup", "openai", json!([succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), disabled()),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let route = h.route(&r).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(s["state"], "active", "{route}");
    assert_eq!(s["candidate_id"], "backup");
    assert_eq!(route["route"]["id"], r.as_str(), "same logical route");
    let events = history_events(&route);
    assert!(events.contains(&"failed->switching".to_owned()), "{events:?}");
    assert!(
        events.contains(&"candidates_evaluated->active".to_owned()),
        "{events:?}"
    );
    assert!(events.contains(&"succeeded->active".to_owned()), "{events:?}");
}

#[tokio::test]
async fn s5_exhausted_credits_with_a_stop_policy_go_to_manual_recovery_without_another_provider() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "stop", "targets": [
            sim("main", "anthropic", json!([fail(credits_exhausted())])),
            sim("backup", "openai", json!([succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 0, "stop")),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let route = h.route(&r).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(s["state"], "action_required", "{route}");
    assert_eq!(s["action_reason"], "policy_stop");
    assert_eq!(s["code"], "quota_limited");
    assert_eq!(s["candidate_id"], "main");
    assert_eq!(
        route["dispatches"].as_array().unwrap().len(),
        1,
        "backup never tried"
    );
}

#[tokio::test]
async fn s6_an_unknown_error_stops_automatic_recovery_and_keeps_only_a_bounded_redacted_excerpt() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "unknown", "targets": [
            sim("main", "anthropic", json!([fail(unknown_error())])),
            sim("backup", "openai", json!([succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip")),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let route = h.route(&r).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(s["state"], "action_required", "{route}");
    assert_eq!(s["action_reason"], "unclassified");
    assert_eq!(s["code"], "unclassified");
    let failed = route["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    let excerpt = failed["classification"]["safe_excerpt"].as_str().unwrap_or("");
    assert!(excerpt.len() <= 1024, "{excerpt}");
    let stored = route.to_string();
    assert!(
        !stored.contains("sk-ant-abcdefghijklmnop"),
        "a secret reached the API: {stored}"
    );
}

#[tokio::test]
async fn s7_a_failure_after_tool_activity_stops_for_manual_recovery_whatever_the_policy_says() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "unsafe", "targets": [
            sim("main", "anthropic", json!([fail(overloaded_after_tool_activity())])),
            sim("backup", "openai", json!([succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "effect_unsafe");
    assert_eq!(s["candidate_id"], "main");
}

#[tokio::test]
async fn s8_kanban_and_office_on_the_same_profile_apply_the_same_policy_and_transition() {
    let h = Harness::new().await;
    // External candidates: the callers' adapters report the evidence over the API.
    let p = h
        .profile(json!({"name": "shared", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(2, 7, 0, "stop"), disabled())]}}))
        .await;
    let kanban = h.start_for(&p, "kanban_task", "task-9").await;
    let office = h.start_for(&p, "office", "assignment-9").await;
    for (route, invocation) in [(&kanban, "task-9"), (&office, "assignment-9")] {
        let mut env = overloaded();
        env["invocation_id"] = json!(invocation);
        env["generation"] = h.snapshot(route).await["generation"].clone();
        let (status, out) = h.post(&format!("/api/v1/routes/{route}/evidence"), env).await;
        assert_eq!(status, StatusCode::OK, "{out}");
    }
    let a = h.snapshot(&kanban).await;
    let b = h.snapshot(&office).await;
    for key in [
        "state",
        "code",
        "class",
        "retry_ordinal",
        "max_retries",
        "deadline",
        "pending_outcome",
        "on_exhausted",
    ] {
        assert_eq!(a[key], b[key], "{key}: {a} vs {b}");
    }
    assert_eq!(a["decision"]["policy"], b["decision"]["policy"]);
    assert_eq!(a["state"], "retry_wait");
    let listed = h.get("/api/v1/routes?caller_kind=office").await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["caller"]["kind"], "office");
}

#[tokio::test]
async fn evidence_submitted_over_the_api_drives_an_external_candidate() {
    let h = Harness::new().await;
    let p = h
        .profile(
            json!({"name": "external", "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(1, 5, 0, "stop"), disabled())]}}),
        )
        .await;
    let r = h.start_for(&p, "utility", "util-1").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "active");
    let generation = s["generation"].as_u64().unwrap();
    let mut env = overloaded();
    env["invocation_id"] = json!("util-1");
    env["generation"] = json!(generation);
    let (status, out) = h.post(&format!("/api/v1/routes/{r}/evidence"), env.clone()).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["accepted"], true);
    assert_eq!(out["classification"]["code"], "provider_overloaded");
    assert_eq!(out["snapshot"]["state"], "retry_wait");
    // The same evidence again is stale: 409, not accepted, the route untouched.
    let (status, out) = h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    assert_eq!(status, StatusCode::CONFLICT, "{out}");
    assert_eq!(out["accepted"], false);
    assert_eq!(out["snapshot"]["state"], "retry_wait");
    h.advance(5).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "retrying");
    let (status, out) = h
        .post(
            &format!("/api/v1/routes/{r}/result"),
            json!({"invocation_generation": s["generation"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["state"], "active");
}
