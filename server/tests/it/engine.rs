//! Resource circuits (50 routes: one probe, no herd), restart reconciliation, and the
//! group-commit writer (steps committed together, failures isolated, a burst of timers),
//! against a real database (SQLite, or PostgreSQL in the second pass) with the manual clock.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;
use server::engine::EngineError;

async fn started_dispatches(h: &Harness, attempt: u32) -> i64 {
    server::store::sql::query("SELECT COUNT(*) FROM dispatches WHERE attempt = ? AND status <> 'scheduled'")
        .bind(attempt)
        .scalar(&h.pool)
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
        // Simulated reports are durable timers: the scheduler's pass applies the due ones.
        h.advance(1).await;
        while let Ok(ev) = rx.try_recv() {
            seen.insert(ev.payload.to.as_str().to_owned());
        }
    }
    // PostgreSQL: the event log reader sends them (store::events), shortly after the commits.
    h.events_delivered().await;
    while let Ok(ev) = rx.try_recv() {
        seen.insert(ev.payload.to.as_str().to_owned());
    }
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

// ------------------------------------------------------------------------------------------------
// Group commit
// ------------------------------------------------------------------------------------------------

fn ext_profile() -> serde_json::Value {
    json!({"name": "ext", "policy": {"version": 1, "candidates": [
        candidate("main", class_policy(3, 5, 0, "stop"), disabled())]}})
}

fn manual(action: policy::route::ManualAction, generation: u64) -> server::engine::Input {
    server::engine::Input::Event(policy::route::RouteEvent::Manual {
        action,
        expected_generation: generation,
    })
}

fn stop(generation: u64) -> server::engine::Input {
    manual(policy::route::ManualAction::Stop, generation)
}

async fn history_count(h: &Harness, route_id: &str) -> i64 {
    server::store::sql::query("SELECT COUNT(*) FROM route_history WHERE route_id = ?")
        .bind(route_id)
        .scalar(&h.pool)
        .await
        .unwrap()
}

/// `n` routes started on profile `p` (invocations `inv-0`...), each with its generation.
async fn started_routes(h: &Harness, p: &str, n: usize) -> Vec<(String, u64)> {
    let mut routes = Vec::with_capacity(n);
    for i in 0..n {
        let r = h.start(p, &format!("inv-{i}")).await;
        let g = h.snapshot(&r).await["generation"].as_u64().unwrap();
        routes.push((r, g));
    }
    routes
}

async fn overloaded_for(h: &Harness, route_id: &str, invocation: &str) -> server::engine::Input {
    let mut env: classifier::Envelope = serde_json::from_value(overloaded()).unwrap();
    env.invocation_id = Some(invocation.to_owned().into());
    env.generation = h.snapshot(route_id).await["generation"].as_u64();
    server::engine::Input::evidence(env)
}

// The group tests deliver their steps as one delivery (`submit_all`, as the scheduler does), so
// the writer sees them together on any runtime, and run on a multi-threaded runtime to prove it.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn steps_delivered_together_commit_as_one_group_and_a_later_step_on_the_same_generation_is_rejected_alone(
) {
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let routes = started_routes(&h, &p, 20).await;
    let before: Vec<i64> =
        futures_util::future::join_all(routes.iter().map(|(r, _)| history_count(&h, r))).await;
    let stats0 = h.engine.write_stats();
    // Every route's stop, plus a retry of route 0 expecting the generation the stop replaces.
    let mut submissions: Vec<_> = routes.iter().map(|(r, g)| (r.clone(), stop(*g))).collect();
    submissions.push((
        routes[0].0.clone(),
        manual(policy::route::ManualAction::RetryNow, routes[0].1),
    ));
    let results = h.engine.submit_all(submissions).await;
    let stats1 = h.engine.write_stats();
    assert_eq!(
        stats1.group_commits - stats0.group_commits,
        1,
        "{stats0:?} {stats1:?}"
    );
    assert_eq!(stats1.grouped_jobs - stats0.grouped_jobs, 21);
    for (i, result) in results.iter().take(20).enumerate() {
        let applied = result.as_ref().unwrap();
        assert!(applied.changed);
        assert_eq!(applied.snapshot.generation, routes[i].1 + 1);
    }
    match &results[20] {
        Err(EngineError::Rejected { snapshot, .. }) => {
            assert_eq!(
                snapshot.generation,
                routes[0].1 + 1,
                "the snapshot the first stop wrote"
            )
        }
        other => panic!("a step on a replaced generation must be rejected: {other:?}"),
    }
    for ((r, _), n) in routes.iter().zip(before) {
        assert_eq!(
            history_count(&h, r).await,
            n + 1,
            "one history row per committed step"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_step_in_a_group_rolls_the_group_back_and_the_others_commit_one_by_one() {
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let routes = started_routes(&h, &p, 10).await;
    let stats0 = h.engine.write_stats();
    let mut submissions: Vec<_> = routes.iter().map(|(r, g)| (r.clone(), stop(*g))).collect();
    submissions.insert(5, ("rt-missing".to_owned(), stop(1)));
    let results = h.engine.submit_all(submissions).await;
    let stats1 = h.engine.write_stats();
    assert_eq!(
        stats1.group_commits, stats0.group_commits,
        "the group did not commit"
    );
    assert_eq!(
        stats1.single_jobs - stats0.single_jobs,
        11,
        "every job ran again alone"
    );
    for (i, result) in results.iter().enumerate() {
        if i == 5 {
            assert!(matches!(result, Err(EngineError::RouteNotFound(_))), "{result:?}");
        } else {
            assert!(result.as_ref().is_ok_and(|a| a.changed), "{result:?}");
        }
    }
    for (r, g) in &routes {
        let s = h.snapshot(r).await;
        assert_eq!(
            s["generation"].as_u64(),
            Some(g + 1),
            "committed exactly once: {s}"
        );
    }
}

#[tokio::test]
async fn when_a_group_cannot_be_written_no_step_commits_no_timer_is_armed_and_every_route_shows_the_error() {
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let mut routes = Vec::new();
    for i in 0..5 {
        routes.push((h.start(&p, &format!("inv-{i}")).await, format!("inv-{i}")));
    }
    let history: i64 = server::store::sql::query("SELECT COUNT(*) FROM route_history")
        .scalar(&h.pool)
        .await
        .unwrap();
    let ro = h.read_only_engine().await;
    let mut inputs = Vec::new();
    for (r, inv) in &routes {
        inputs.push((r.clone(), overloaded_for(&h, r, inv).await));
    }
    let results = futures_util::future::join_all(inputs.into_iter().map(|(r, input)| {
        let ro = ro.clone();
        async move { ro.submit(&r, input).await }
    }))
    .await;
    for result in &results {
        assert!(matches!(result, Err(EngineError::Storage(_))), "{result:?}");
    }
    assert_eq!(ro.write_stats().group_commits, 0);
    for (r, _) in &routes {
        let summary = ro.route_summary(r).await.unwrap();
        assert_eq!(
            summary.snapshot.state.as_str(),
            "active",
            "the route did not move"
        );
        assert!(
            summary
                .durable_error
                .as_deref()
                .is_some_and(|e| e.contains("could not be written")),
            "{summary:?}"
        );
    }
    let timers: i64 = server::store::sql::query("SELECT COUNT(*) FROM timers")
        .scalar(&h.pool)
        .await
        .unwrap();
    assert_eq!(timers, 0, "no timer armed");
    let after: i64 = server::store::sql::query("SELECT COUNT(*) FROM route_history")
        .scalar(&h.pool)
        .await
        .unwrap();
    assert_eq!(after, history, "no history row");
    assert_eq!(h.advance(3600).await, 0, "nothing to fire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_due_timers_fires_in_one_group_commit_each_route_once_with_its_dispatch_start() {
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let mut routes = Vec::new();
    for i in 0..40 {
        let inv = format!("inv-{i}");
        let r = h.start(&p, &inv).await;
        let input = overloaded_for(&h, &r, &inv).await;
        let s = h.engine.submit(&r, input).await.unwrap().snapshot;
        assert_eq!(s.state.as_str(), "retry_wait");
        routes.push(r);
    }
    let stats0 = h.engine.write_stats();
    assert_eq!(h.advance(5).await, 40);
    let stats1 = h.engine.write_stats();
    // One job per route (its deadline, the gate and the dispatch start), all in one commit.
    assert_eq!(
        stats1.grouped_jobs - stats0.grouped_jobs,
        40,
        "{stats0:?} {stats1:?}"
    );
    assert_eq!(
        stats1.group_commits - stats0.group_commits,
        1,
        "{stats0:?} {stats1:?}"
    );
    assert_eq!(stats1.single_jobs, stats0.single_jobs, "{stats0:?} {stats1:?}");
    for r in &routes {
        let detail = h.route(r).await;
        let events = history_events(&detail);
        assert_eq!(
            events
                .iter()
                .filter(|e| e.starts_with("deadline_reached->"))
                .count(),
            1,
            "{events:?}"
        );
        assert_eq!(
            detail["route"]["snapshot"]["attempt"]["dispatch"], "started",
            "{detail}"
        );
        let last: Vec<_> = events.iter().rev().take(2).rev().collect();
        assert!(
            last[0].starts_with("deadline_reached->") && last[1].starts_with("dispatch_started->"),
            "{events:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_in_a_group_sees_the_step_before_it_on_the_same_route() {
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let r = h.start(&p, "inv-same").await;
    let g = h.snapshot(&r).await["generation"].as_u64().unwrap();
    let before = history_count(&h, &r).await;
    let stats0 = h.engine.write_stats();
    // The retry expects the generation the stop writes, in the same transaction.
    let inputs = vec![
        (r.clone(), stop(g)),
        (r.clone(), manual(policy::route::ManualAction::RetryNow, g + 1)),
    ];
    let results = h.engine.submit_all(inputs).await;
    let stats1 = h.engine.write_stats();
    assert_eq!(
        stats1.group_commits - stats0.group_commits,
        1,
        "{stats0:?} {stats1:?}"
    );
    assert_eq!(stats1.grouped_jobs - stats0.grouped_jobs, 2);
    assert_eq!(
        stats1.single_jobs, stats0.single_jobs,
        "nothing fell back to one by one"
    );
    assert_eq!(results[0].as_ref().unwrap().snapshot.generation, g + 1);
    // RetryNow, then the dispatch it begins (gate and `DispatchStarted`) in the same job.
    let retried = results[1].as_ref().unwrap();
    assert!(retried.changed);
    assert_eq!(retried.snapshot.generation, g + 3);
    assert_eq!(h.snapshot(&r).await["generation"].as_u64(), Some(g + 3));
    assert_eq!(
        history_count(&h, &r).await,
        before + 3,
        "stop, retry_now, dispatch_started"
    );
}

#[tokio::test]
async fn two_starts_of_one_invocation_in_a_group_make_one_route() {
    use policy::api::{Caller, CallerKind, StartRouteRequest};
    let h = Harness::new().await;
    let p = h.profile(ext_profile()).await;
    let request = StartRouteRequest {
        profile_id: p.clone(),
        caller: Caller {
            kind: CallerKind::Workflow,
            reference: "wf-1".into(),
            invocation_id: "inv-twice".into(),
        },
        title: None,
        work: None,
        pin: None,
    };
    let results = futures_util::future::join_all(
        [
            request.clone(),
            request,
            StartRouteRequest {
                profile_id: p,
                caller: Caller {
                    kind: CallerKind::Workflow,
                    reference: "wf-1".into(),
                    invocation_id: "inv-other".into(),
                },
                title: None,
                work: None,
                pin: None,
            },
        ]
        .into_iter()
        .map(|r| {
            h.engine
                .start_route(policy::input::ValidatedStartRoute::parse(&r).unwrap())
        }),
    )
    .await;
    // Whichever of the two starts of one invocation reaches the writer first wins; the other
    // is a conflict. The other invocation starts either way.
    let twice = &results[..2];
    assert_eq!(twice.iter().filter(|r| r.is_ok()).count(), 1, "{twice:?}");
    assert_eq!(
        twice
            .iter()
            .filter(|r| matches!(r, Err(EngineError::Conflict(_))))
            .count(),
        1,
        "{twice:?}"
    );
    assert!(results[2].is_ok(), "{:?}", results[2]);
    let routes: i64 =
        server::store::sql::query("SELECT COUNT(*) FROM routes WHERE invocation_id = 'inv-twice'")
            .scalar(&h.pool)
            .await
            .unwrap();
    assert_eq!(routes, 1);
}
