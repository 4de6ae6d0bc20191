//! Resource circuits (50 routes: one probe, no herd) and restart reconciliation, against a
//! real SQLite file with the manual clock.

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

async fn started_dispatches(h: &Harness, attempt: u32) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM dispatches WHERE attempt = ? AND status <> 'scheduled'")
        .bind(attempt)
        .fetch_one(h.engine.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn fifty_routes_behind_one_open_circuit_send_exactly_one_probe_and_no_herd() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "shared provider", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(5, 5, 0, "stop"), disabled())]}}))
        .await;
    let mut routes = Vec::new();
    for i in 0..50 {
        routes.push((h.start(&p, &format!("inv-{i}")).await, format!("inv-{i}")));
    }
    // All 50 attempts are in flight when the provider starts failing.
    for (r, inv) in &routes {
        let mut env = overloaded();
        env["invocation_id"] = json!(inv);
        env["generation"] = h.snapshot(r).await["generation"].clone();
        let (status, out) = h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
        assert_eq!(status, StatusCode::OK, "{out}");
        assert_eq!(out["snapshot"]["state"], "retry_wait");
    }
    let circuits = h.get("/api/v1/circuits").await;
    let open: Vec<_> = circuits
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["state"] != "closed")
        .collect();
    assert_eq!(open.len(), 1, "{circuits}");
    assert_eq!(open[0]["key"], "provider:anthropic");
    let prober = open[0]["probe_route_id"].as_str().unwrap().to_owned();
    assert_eq!(prober, routes[0].0, "the route that opened it probes");

    // Every route's own retry comes due at once: one probe, 49 held.
    h.advance(5).await;
    assert_eq!(started_dispatches(&h, 2).await, 1, "exactly one probe");
    let mut held = 0;
    for (r, _) in &routes {
        let s = h.snapshot(r).await;
        assert_eq!(s["state"], "retrying", "{s}");
        held += i32::from(s["attempt"]["dispatch"] == "pending");
    }
    assert_eq!(held, 49);
    // The circuit's backoff passes while the probe is still out: still no herd.
    h.advance(120).await;
    assert_eq!(
        started_dispatches(&h, 2).await,
        1,
        "no herd while the probe is out"
    );

    // The probe succeeds: the circuit closes and the others go.
    let g = h.snapshot(&prober).await["generation"].clone();
    let (status, s) = h
        .post(
            &format!("/api/v1/routes/{prober}/result"),
            json!({"invocation_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    h.advance(0).await;
    assert_eq!(started_dispatches(&h, 2).await, 50);
    let circuits = h.get("/api/v1/circuits").await;
    assert_eq!(circuits[0]["state"], "closed", "{circuits}");
}

#[tokio::test]
async fn a_failed_probe_reopens_the_circuit_and_the_others_keep_waiting() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "shared provider", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(5, 5, 0, "stop"), disabled())]}}))
        .await;
    let mut routes = Vec::new();
    for i in 0..3 {
        routes.push((h.start(&p, &format!("inv-{i}")).await, format!("inv-{i}")));
    }
    for (r, inv) in &routes {
        let mut env = overloaded();
        env["invocation_id"] = json!(inv);
        env["generation"] = h.snapshot(r).await["generation"].clone();
        h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    }
    h.advance(5).await;
    let (prober, inv) = &routes[0];
    let mut env = overloaded();
    env["invocation_id"] = json!(inv);
    env["generation"] = h.snapshot(prober).await["generation"].clone();
    let (status, _) = h.post(&format!("/api/v1/routes/{prober}/evidence"), env).await;
    assert_eq!(status, StatusCode::OK);
    let circuits = h.get("/api/v1/circuits").await;
    assert_eq!(circuits[0]["state"], "probing");
    assert_eq!(circuits[0]["failures"], 2, "{circuits}");
    assert_eq!(started_dispatches(&h, 2).await, 1);
    for (r, _) in &routes[1..] {
        assert_eq!(h.snapshot(r).await["attempt"]["dispatch"], "pending");
    }
}

#[tokio::test]
async fn a_restart_rearms_waits_and_sends_ambiguous_dispatches_to_manual_recovery_without_repeating_them() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "mixed", "targets": [
            sim("hangs", "p1", json!([hang()])),
            sim("fails", "p2", json!([fail(overloaded()), succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("hangs", disabled(), disabled()),
            candidate("fails", class_policy(2, 30, 0, "stop"), disabled())]}}))
        .await;
    let p2 = h
        .profile(json!({"name": "second", "targets": [
            sim("fails", "p2", json!([fail(overloaded()), succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("fails", class_policy(2, 30, 0, "stop"), disabled())]}}))
        .await;
    let in_flight = h.start(&p, "inv-a").await;
    let waiting = h.start(&p2, "inv-b").await;
    assert_eq!(h.snapshot(&in_flight).await["attempt"]["dispatch"], "started");
    assert_eq!(h.snapshot(&waiting).await["state"], "retry_wait");
    let launches_before = h.launches(&in_flight).await;

    // "Crash": drop the engine without any shutdown, reopen the same file, reconcile.
    let now = h.now();
    let Harness { dir, engine, .. } = h;
    drop(engine);
    let h = Harness::open(dir, now).await;
    let report = h.engine.reconcile().await.unwrap();
    assert_eq!(report.ambiguous, 1, "{report:?}");
    assert_eq!(report.rearmed, 1, "{report:?}");

    let route = h.route(&in_flight).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(s["state"], "action_required", "{route}");
    assert_eq!(s["action_reason"], "ambiguous_dispatch");
    assert_eq!(route["dispatches"][0]["outcome"], "ambiguous");
    assert_eq!(h.launches(&in_flight).await, launches_before, "never repeated");

    // The wait survived: it fires at its deadline on the new engine.
    h.advance(29).await;
    assert_eq!(h.snapshot(&waiting).await["state"], "retry_wait");
    h.advance(1).await;
    assert_eq!(h.snapshot(&waiting).await["state"], "active");
}

#[tokio::test]
async fn the_demo_workspace_waits_retries_switches_and_stops_within_a_minute() {
    let h = Harness::new().await;
    let started = server::demo::seed(&h.engine).await.unwrap();
    assert_eq!(started, 5);
    let mut seen = std::collections::BTreeSet::new();
    let mut rx = h.engine.subscribe();
    for _ in 0..60 {
        h.advance(1).await;
        // Simulated reports with a delay run on their own tasks: let them land.
        tokio::task::yield_now().await;
        while let Ok(ev) = rx.try_recv() {
            seen.insert(ev.payload.to.as_str().to_owned());
        }
    }
    let _ = &mut rx;
    let routes = h.get("/api/v1/routes").await;
    let states: Vec<String> = routes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r["title"].as_str().unwrap(),
                r["snapshot"]["state"].as_str().unwrap()
            )
        })
        .collect();
    for s in [
        "retry_wait",
        "waiting_for_reset",
        "switching",
        "action_required",
        "retrying",
    ] {
        assert!(seen.contains(s), "never saw {s}: {seen:?} / {states:?}");
    }
}
