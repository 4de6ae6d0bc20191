//! Manual actions, profile edits, profile validation, durable-write failure, the race test,
//! resource circuits and restart reconciliation, through the API and the engine.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use policy::{
    api::{ManualActionRequest, StartRouteRequest},
    route::{ManualAction, RouteEvent},
};
use serde_json::{json, Value};
use server::engine::{EngineError, Input};

async fn waiting_route(h: &Harness) -> (String, String) {
    let p = h
        .profile(json!({"name": "wait", "targets": [
            sim("main", "anthropic", json!([fail(overloaded())])),
            sim("backup", "openai", json!([hang()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    assert_eq!(h.snapshot(&r).await["state"], "retry_wait");
    (p, r)
}

async fn act(h: &Harness, r: &str, action: &str, generation: &Value) -> (StatusCode, Value) {
    h.post(
        &format!("/api/v1/routes/{r}/actions"),
        json!({"action": action, "expected_generation": generation}),
    )
    .await
}

#[tokio::test]
async fn a_stale_manual_action_gets_409_with_the_current_snapshot() {
    let h = Harness::new().await;
    let (_, r) = waiting_route(&h).await;
    let s = h.snapshot(&r).await;
    let stale = json!(s["generation"].as_u64().unwrap() - 1);
    let (status, body) = act(&h, &r, "retry_now", &stale).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body, s, "the body is the current snapshot");
    assert_eq!(h.snapshot(&r).await, s, "nothing changed");
}

#[tokio::test]
async fn cancel_is_idempotent_and_cancelling_a_wait_disarms_its_timer() {
    let h = Harness::new().await;
    let (_, r) = waiting_route(&h).await;
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, first) = act(&h, &r, "cancel_wait", &g).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["state"], "action_required");
    assert_eq!(first["action_reason"], "wait_cancelled");
    let (status, again) = act(&h, &r, "cancel_wait", &first["generation"]).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, first, "a second cancel changes nothing");
    // The old deadline passes: nothing fires.
    h.advance(3600).await;
    assert_eq!(h.snapshot(&r).await, first);
}

#[tokio::test]
async fn retry_now_runs_the_attempt_at_once_and_skip_now_switches() {
    let h = Harness::new().await;
    let (_, r) = waiting_route(&h).await;
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, s) = act(&h, &r, "retry_now", &g).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    // The retry ran at once (the script fails again): a new wait with the next ordinal.
    assert_eq!(s["state"], "retry_wait", "{s}");
    let (status, s) = act(&h, &r, "skip_now", &s["generation"]).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["candidate_id"], "backup");
    assert_eq!(s["state"], "active");
}

#[tokio::test]
async fn a_profile_edit_changes_the_next_decision_only() {
    let h = Harness::new().await;
    let (p, r) = waiting_route(&h).await;
    let before = h.route(&r).await;
    let deadline = before["route"]["snapshot"]["deadline"].clone();
    // Edit: retries now start at 60 s and stop when exhausted.
    let (status, body) = h
        .call(
            Method::PUT,
            &format!("/api/v1/profiles/{p}"),
            Some(json!({"name": "wait", "expected_revision": 1, "targets": [
                sim("main", "anthropic", json!([fail(overloaded())])),
                sim("backup", "openai", json!([hang()]))],
              "policy": {"version": 1, "candidates": [
                candidate("main", class_policy(3, 60, 0, "stop"), disabled()),
                candidate("backup", disabled(), disabled())]}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["revision"], 2);
    let after_edit = h.route(&r).await;
    assert_eq!(
        after_edit["route"]["snapshot"]["deadline"], deadline,
        "the pending timer is untouched"
    );
    assert_eq!(after_edit["history"], before["history"], "history is untouched");
    // The pending retry fires at its old deadline; the next decision uses the new policy.
    h.advance(5).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "retry_wait");
    assert_eq!(
        s["decision"]["policy"]["retry"]["initial_interval_seconds"], 60,
        "{s}"
    );
    let history = h.route(&r).await["history"].clone();
    let revisions: Vec<u64> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["profile_revision"].as_u64().unwrap())
        .collect();
    assert!(
        revisions.starts_with(&[1, 1]) && revisions.ends_with(&[2]),
        "{revisions:?}"
    );
    // A stale edit is a conflict.
    let (status, _) = h
        .call(
            Method::PUT,
            &format!("/api/v1/profiles/{p}"),
            Some(
                json!({"name": "x", "expected_revision": 1, "policy": {"version": 1, "candidates": [
                candidate("main", disabled(), disabled()), candidate("backup", disabled(), disabled())]}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn an_invalid_profile_gets_422_with_every_field_path() {
    let h = Harness::new().await;
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "", "targets": [sim("other", "anthropic", json!([]))],
              "policy": {"version": 1, "candidates": [
                candidate("main", disabled(), class_policy(11, 5, 0, "stop"))]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let paths: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"name"), "{paths:?}");
    assert!(
        paths.contains(&"candidates[0].hard.retry.max_retries"),
        "{paths:?}"
    );
    let e = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "candidates[0].hard.retry.max_retries")
        .unwrap();
    assert_eq!(e["code"], "out_of_range");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
    // Targets are checked once the document is valid.
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "n", "targets": [sim("other", "anthropic", json!([]))],
              "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "targets[0].id");
}

#[tokio::test]
async fn a_legacy_profile_is_accepted_and_returned_normalized() {
    let h = Harness::new().await;
    let (status, body) = h
        .post("/api/v1/profiles", json!({"name": "legacy", "policy": {"candidates": [{"id": "a", "on_error": "retry_same"}, {"id": "b", "on_error": "try_next"}]}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["normalized_from_legacy"], true);
    assert_eq!(body["policy"]["version"], 1);
    assert_eq!(
        body["policy"]["candidates"][0]["transient"]["retry"]["max_retries"],
        1
    );
    assert_eq!(
        body["policy"]["candidates"][0]["transient"]["on_exhausted"],
        "stop"
    );
    assert_eq!(body["targets"][1]["dispatcher"], "external");
    let id = body["id"].as_str().unwrap();
    let listed = h.get("/api/v1/profiles").await;
    assert_eq!(listed[0]["candidate_ids"], json!(["a", "b"]));
    let (status, _) = h
        .call(Method::DELETE, &format!("/api/v1/profiles/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = h.call(Method::GET, &format!("/api/v1/profiles/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test]
async fn the_openapi_document_describes_the_api_and_the_policy_document() {
    let h = Harness::new().await;
    let doc = h.get("/api/openapi.json").await;
    assert!(
        doc["paths"]["/api/v1/routes/{id}/actions"]["post"].is_object(),
        "{doc}"
    );
    assert!(doc["paths"]["/api/v1/profiles"]["post"].is_object());
    let class = &doc["components"]["schemas"]["ClassPolicy"];
    assert_eq!(
        class["properties"]["retry"]["properties"]["max_retries"]["maximum"],
        10.0
    );
    assert!(doc["components"]["schemas"]["PolicyDocument"].is_object());
    assert!(doc["components"]["schemas"]["ProfileInput"].is_object());
}

#[tokio::test]
async fn the_event_stream_carries_every_accepted_change_with_its_route() {
    let h = Harness::new().await;
    let mut rx = h.engine.subscribe();
    let (_, r) = waiting_route(&h).await;
    // PostgreSQL: the event log reader sends them (store::events), shortly after the commits.
    h.events_delivered().await;
    let mut seen = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        assert_eq!(ev.route_id, r);
        seen.push(ev.payload.event.as_str().to_owned());
    }
    assert_eq!(seen, vec!["started", "dispatch_started", "failed"]);
    // Over HTTP the same stream is `text/event-stream` (only the headers are read here: the
    // body never ends).
    let req = axum::http::Request::get("/api/v1/events")
        .header("authorization", format!("Bearer {}", h.token))
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = tower::ServiceExt::oneshot(h.app.clone(), req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
}

// ------------------------------------------------------------------------------------------------
// Durable-write failure
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn when_the_decision_cannot_be_written_nothing_is_armed_or_dispatched_and_the_error_surfaces() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "ext", "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "active");
    let ro = h.read_only_engine().await;
    let mut env: classifier::Envelope = serde_json::from_value(overloaded()).unwrap();
    env.invocation_id = Some("inv-1".into());
    env.generation = s["generation"].as_u64();
    let err = ro.submit(&r, Input::evidence(env)).await.unwrap_err();
    assert!(matches!(err, EngineError::Storage(_)), "{err}");
    // The error surfaces on the route.
    let summary = ro.route_summary(&r).await.unwrap();
    assert!(
        summary
            .durable_error
            .as_deref()
            .is_some_and(|e| e.contains("could not be written")),
        "{summary:?}"
    );
    assert_eq!(
        summary.snapshot.state.as_str(),
        "active",
        "the route did not move"
    );
    // No timer, no new dispatch.
    let timers: i64 = server::store::sql::query("SELECT COUNT(*) FROM timers")
        .scalar(&h.pool)
        .await
        .unwrap();
    assert_eq!(timers, 0);
    let dispatches: i64 = server::store::sql::query("SELECT COUNT(*) FROM dispatches")
        .scalar(&h.pool)
        .await
        .unwrap();
    assert_eq!(dispatches, 1);
    // And the API says so with 503.
    let ro_app = server::web::router(server::state::AppState::new(ro.clone(), leptos_options(), None));
    let g = s["generation"].clone();
    let req = axum::http::Request::builder()
        .method(Method::POST)
        .uri(format!("/api/v1/routes/{r}/actions"))
        .header("authorization", format!("Bearer {}", h.token))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            json!({"action": "stop", "expected_generation": g}).to_string(),
        ))
        .unwrap();
    let resp = tower::ServiceExt::oneshot(ro_app, req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
}

// ------------------------------------------------------------------------------------------------
// Races
// ------------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timer_a_manual_action_and_evidence_racing_for_one_generation_commit_exactly_one_outcome() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "race", "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(10, 5, 0, "stop"), disabled())]}}))
        .await;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let races = 1000;
    for i in 0..races {
        let req = StartRouteRequest {
            profile_id: p.clone(),
            caller: policy::api::Caller {
                kind: policy::api::CallerKind::Workflow,
                reference: "race".into(),
                invocation_id: format!("race-{i}"),
            },
            title: None,
            work: None,
            pin: None,
        };
        let req = policy::input::ValidatedStartRoute::parse(&req).unwrap();
        let r = h.engine.start_route(req).await.unwrap().id;
        let g = h.engine.route_summary(&r).await.unwrap().snapshot.generation;
        let deadline = RouteEvent::DeadlineReached { generation: g };
        let action = [
            ManualAction::Stop,
            ManualAction::CancelWait,
            ManualAction::RetryNow,
            ManualAction::SkipNow,
        ][usize::try_from(next() % 4).unwrap()];
        let manual = RouteEvent::Manual {
            action,
            expected_generation: g,
        };
        let mut env: classifier::Envelope = serde_json::from_value(overloaded()).unwrap();
        env.invocation_id = Some(format!("race-{i}").into());
        env.generation = Some(g);
        let mut inputs = vec![Input::Event(deadline), Input::Event(manual), Input::evidence(env)];
        // Randomize the submission order too.
        let k = usize::try_from(next() % 3).unwrap();
        inputs.rotate_left(k);
        if next().is_multiple_of(2) {
            inputs.swap(0, 1);
        }
        // The route is active with a started attempt at `g`: make it a waiting one first so the
        // timer is meaningful for half the races.
        if next().is_multiple_of(2) {
            let mut env: classifier::Envelope = serde_json::from_value(overloaded()).unwrap();
            env.invocation_id = Some(format!("race-{i}").into());
            env.generation = Some(g);
            h.engine.submit(&r, Input::evidence(env)).await.unwrap();
            h.clock.advance(chrono::TimeDelta::seconds(5));
        }
        let g = h.engine.route_summary(&r).await.unwrap().snapshot.generation;
        let inputs: Vec<Input> = inputs
            .into_iter()
            .map(|inp| match inp {
                Input::Event(RouteEvent::DeadlineReached { .. }) => {
                    Input::Event(RouteEvent::DeadlineReached { generation: g })
                }
                Input::Event(RouteEvent::Manual { action, .. }) => Input::Event(RouteEvent::Manual {
                    action,
                    expected_generation: g,
                }),
                Input::Evidence(mut e) => {
                    e.envelope.generation = Some(g);
                    Input::Evidence(e)
                }
                other => other,
            })
            .collect();
        let engine = h.engine.clone();
        let handles: Vec<_> = inputs
            .into_iter()
            .map(|inp| {
                let engine = engine.clone();
                let r = r.clone();
                tokio::spawn(async move { engine.submit(&r, inp).await })
            })
            .collect();
        let mut committed = 0;
        for hnd in handles {
            match hnd.await.unwrap() {
                Ok(a) if a.changed => committed += 1,
                Ok(_) => {}
                Err(EngineError::Rejected { .. }) => {}
                Err(e) => panic!("race {i}: unexpected error {e}"),
            }
        }
        assert_eq!(committed, 1, "race {i}: exactly one outcome commits");
        // History agrees: exactly one row moved the route off generation g.
        let rows: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM route_history WHERE route_id = ? AND generation = ?",
        )
        .bind(&r)
        .bind(i64::try_from(g + 1).unwrap())
        .scalar(&h.pool)
        .await
        .unwrap();
        assert_eq!(rows, 1, "race {i}");
    }
}

// ------------------------------------------------------------------------------------------------
// Manual action through the backend port
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_backend_port_answers_conflict_with_the_current_snapshot() {
    use app::backend::Backend;
    let h = Harness::new().await;
    let (_, r) = waiting_route(&h).await;
    let backend = server::backend::EngineBackend::new(h.engine.clone(), h.auth.clone());
    let s = backend.get_route(r.clone()).await.unwrap().route.snapshot;
    // Outside a request the rules layer let through, a write has no principal: refused.
    let refused = backend
        .perform_action(
            r.clone(),
            ManualActionRequest {
                action: ManualAction::Stop,
                expected_generation: s.generation,
            },
        )
        .await;
    assert!(
        matches!(refused, Err(app::backend::BackendError::Forbidden(_))),
        "{refused:?}"
    );
    // As the request context of a signed-in administrator (what the rules layer provides).
    let owner = leptos::prelude::Owner::new();
    owner.set();
    let account = h
        .auth
        .store()
        .account_by_name(common::ADMIN)
        .await
        .unwrap()
        .unwrap();
    let principal = h.auth.session_principal(account).await.unwrap();
    let (mut parts, ()) = axum::http::Request::new(()).into_parts();
    parts
        .extensions
        .insert(server::auth::Actor::of(Some(&principal), None));
    parts.extensions.insert(principal);
    leptos::prelude::provide_context(parts);
    let out = backend
        .perform_action(
            r.clone(),
            ManualActionRequest {
                action: ManualAction::Stop,
                expected_generation: s.generation + 5,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(out, policy::api::ActionOutcome::Conflict(ref c) if *c == s),
        "{out:?}"
    );
    let out = backend
        .perform_action(
            r,
            ManualActionRequest {
                action: ManualAction::Stop,
                expected_generation: s.generation,
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(out, policy::api::ActionOutcome::Applied(ref c) if c.state.as_str() == "action_required")
    );
}

/// A route whose first attempt succeeded: active, idle, waiting for the caller.
async fn idle_route(h: &Harness) -> String {
    let p = h
        .profile(
            json!({"name": "idle", "targets": [sim("main", "anthropic", json!([succeed(), succeed()]))],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start(&p, "inv-idle").await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "active", "{s}");
    assert!(s["attempt"].is_null(), "the first attempt settled: {s}");
    r
}

async fn lifecycle(h: &Harness, r: &str, endpoint: &str, generation: &Value) -> (StatusCode, Value) {
    h.post(
        &format!("/api/v1/routes/{r}/{endpoint}"),
        json!({"expected_generation": generation}),
    )
    .await
}

#[tokio::test]
async fn work_on_an_idle_route_launches_the_next_attempt_on_the_same_candidate() {
    let h = Harness::new().await;
    let r = idle_route(&h).await;
    assert_eq!(h.launches(&r).await, 1);
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, s) = lifecycle(&h, &r, "work", &g).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert!(s["generation"].as_u64() > g.as_u64(), "{s}");
    assert_eq!(s["candidate_id"], "main");
    assert_eq!(h.launches(&r).await, 2, "the new work was dispatched once");
    let events = history_events(&h.route(&r).await);
    assert!(
        events.contains(&"work_submitted->active".to_owned()),
        "{events:?}"
    );
}

#[tokio::test]
async fn complete_closes_an_idle_route_and_a_repeated_complete_changes_nothing() {
    let h = Harness::new().await;
    let r = idle_route(&h).await;
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, done) = lifecycle(&h, &r, "complete", &g).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["state"], "completed");
    assert_eq!(
        done["allowed_actions"],
        json!([]),
        "a finished route offers no actions"
    );
    let history = h.route(&r).await["history"].as_array().unwrap().len();
    // A terminal route absorbs a repeated (e.g. retried-by-the-client) complete.
    let (status, again) = lifecycle(&h, &r, "complete", &done["generation"]).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, done, "the same snapshot; nothing changed");
    assert_eq!(
        h.route(&r).await["history"].as_array().unwrap().len(),
        history,
        "no history row"
    );
    assert_eq!(h.launches(&r).await, 1);
}

#[tokio::test]
async fn abandon_ends_a_waiting_route_and_its_timer_never_fires() {
    let h = Harness::new().await;
    let (_, r) = waiting_route(&h).await;
    let before = h.launches(&r).await;
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, s) = lifecycle(&h, &r, "abandon", &g).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["state"], "abandoned");
    assert!(s["deadline"].is_null(), "{s}");
    h.advance(3600).await;
    assert_eq!(h.launches(&r).await, before, "the cancelled retry never ran");
    assert_eq!(h.snapshot(&r).await["state"], "abandoned");
}

#[tokio::test]
async fn the_lifecycle_endpoints_fence_on_the_generation_and_reject_bad_bodies() {
    let h = Harness::new().await;
    let r = idle_route(&h).await;
    let current = h.snapshot(&r).await;
    let stale = json!(current["generation"].as_u64().unwrap() - 1);
    for endpoint in ["work", "complete", "abandon"] {
        let (status, body) = lifecycle(&h, &r, endpoint, &stale).await;
        assert_eq!(status, StatusCode::CONFLICT, "{endpoint}: {body}");
        assert_eq!(body, current, "{endpoint}: the 409 body is the current snapshot");

        let (status, body) = h.post(&format!("/api/v1/routes/{r}/{endpoint}"), json!({})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{endpoint}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("expected_generation"),
            "{endpoint}: the error names the missing field: {body}"
        );
        let (status, body) = h
            .post(
                &format!("/api/v1/routes/{r}/{endpoint}"),
                json!({"expected_generation": current["generation"], "generation": 1}),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{endpoint}: unknown fields are refused: {body}"
        );

        let (status, body) = lifecycle(&h, "no-such-route", endpoint, &current["generation"]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{endpoint}: {body}");
    }
    assert_eq!(h.snapshot(&r).await, current, "no refused call changed the route");
}

#[tokio::test]
async fn the_openapi_document_types_every_route_response_and_the_lifecycle_endpoints() {
    let h = Harness::new().await;
    let doc = h.get("/api/openapi.json").await;
    let schemas = &doc["components"]["schemas"];
    for endpoint in ["work", "complete", "abandon", "actions", "result"] {
        let post = &doc["paths"][format!("/api/v1/routes/{{id}}/{endpoint}")]["post"];
        let body = |status: &str| post["responses"][status]["content"]["application/json"]["schema"].clone();
        assert_eq!(
            body("200")["$ref"],
            "#/components/schemas/RouteSnapshot",
            "{endpoint}: {post}"
        );
        // A 409 is the route's current snapshot, or the shared error when another writer won.
        assert_eq!(
            body("409")["oneOf"],
            json!([{"$ref": "#/components/schemas/RouteSnapshot"}, {"$ref": "#/components/schemas/ApiError"}]),
            "{endpoint}: {post}"
        );
    }
    let snapshot = &schemas["RouteSnapshot"]["properties"];
    for field in [
        "generation",
        "state",
        "deadline",
        "decision",
        "allowed_actions",
        "pending_outcome",
    ] {
        assert!(snapshot[field].is_object(), "RouteSnapshot.{field}: {snapshot}");
    }
    let states = schemas["StateName"]["enum"]
        .as_array()
        .expect("StateName is a string enum");
    assert!(states.contains(&json!("retry_wait")) && states.contains(&json!("action_required")));
    let codes = &schemas["Classification"]["properties"]["code"]["enum"];
    assert!(
        codes
            .as_array()
            .is_some_and(|c| c.contains(&json!("rate_limited")) && c.contains(&json!("unclassified"))),
        "the code field lists the semantic codes: {codes}"
    );
    assert_eq!(
        schemas["Decision"]["properties"]["policy"]["oneOf"][1]["$ref"], "#/components/schemas/ClassPolicy",
        "a decision's policy snapshot is the limited ClassPolicy: {}",
        schemas["Decision"]
    );
    assert_eq!(
        schemas["Profile"]["properties"]["policy"]["$ref"],
        "#/components/schemas/PolicyDocument"
    );
}

#[tokio::test]
async fn open_only_lists_unfinished_routes_and_profiles_count_open_and_all_routes() {
    let h = Harness::new().await;
    let (p, waiting) = waiting_route(&h).await;
    let done = h.start(&p, "inv-2").await;
    let g = h.snapshot(&done).await["generation"].clone();
    let (status, s) = lifecycle(&h, &done, "abandon", &g).await;
    assert_eq!(status, StatusCode::OK, "{s}");

    let ids = |list: Value| -> Vec<String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(h.get("/api/v1/routes?open_only=true").await),
        vec![waiting.as_str()]
    );
    let mut all = ids(h.get("/api/v1/routes").await);
    all.sort();
    let mut expected = vec![waiting.clone(), done.clone()];
    expected.sort();
    assert_eq!(all, expected, "without open_only finished routes are listed too");
    assert_eq!(
        ids(h.get("/api/v1/routes?open_only=true&state=abandoned").await),
        Vec::<String>::new(),
        "every filter narrows"
    );

    let profiles = h.get("/api/v1/profiles").await;
    let summary = profiles
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == p)
        .unwrap()
        .clone();
    assert_eq!(
        (summary["open_routes"].clone(), summary["routes"].clone()),
        (json!(1), json!(2))
    );
    let (status, body) = h
        .call(Method::DELETE, &format!("/api/v1/profiles/{p}"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"]["message"],
        "the profile has 2 routes; it is kept so their history stays readable"
    );
}
