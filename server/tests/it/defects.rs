//! Regression tests for the defects an outside attack on the running server found (each failed
//! before its fix): bad input that panicked the engine or was stored unbounded, writes a foreign
//! web page could make, answers that echoed credentials, stale requests on finished routes
//! answered 200, and a route sent to a person when it only had to wait for a circuit.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::{json, Value};

fn paths(body: &Value) -> Vec<String> {
    body["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| e["path"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_simulated_delay_past_any_deadline_is_refused_at_the_profile_not_panicking_the_engine() {
    let h = Harness::new().await;
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "overflow", "targets": [
                {"id": "a", "dispatcher": "simulated", "script": [{"outcome": "succeed", "after_seconds": 10_000_000_000_000u64}]}],
              "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(paths(&body), ["targets[0].script[0].after_seconds"]);
    // The largest accepted delay is scheduled, and a clock far in the future fires it: no
    // arithmetic on it overflows.
    let p = h
        .profile(json!({"name": "week", "targets": [
                {"id": "a", "dispatcher": "simulated", "script": [{"outcome": "succeed", "after_seconds": 604_800}]}],
              "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-week").await;
    assert_eq!(h.snapshot(&r).await["attempt"]["dispatch"], "started");
    // A test clock set past anything storable stops at the last storable instant.
    h.clock.set(chrono::DateTime::<chrono::Utc>::MAX_UTC);
    assert_eq!(h.now(), policy::time::latest());
    h.advance(0).await;
    // Read from the engine: at the end of time every API token has expired.
    let detail = h.engine.route_detail(&r).await.unwrap();
    assert!(
        detail.route.snapshot.attempt.is_none(),
        "the report came: the attempt succeeded"
    );
}

#[tokio::test]
async fn every_string_a_profile_or_route_start_carries_is_bounded_with_a_field_path() {
    let h = Harness::new().await;
    let mega = "x".repeat(1_000_000);
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "big", "targets": [
                {"id": "a", "dispatcher": "simulated", "label": mega,
                 "script": [{"outcome": "fail", "envelope": {"items": [{"kind": "stderr", "lines": [mega]}]}}]}],
              "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}}),
        )
        .await;
    // (The body is over 1 MB: the body limit answers first.)
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let big = "y".repeat(20_000);
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "big", "targets": [
                {"id": "a", "dispatcher": "simulated", "label": big,
                 "script": [{"outcome": "fail", "envelope": {"items": [{"kind": "stderr", "lines": [big]}]}}]}],
              "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        paths(&body),
        ["targets[0].label", "targets[0].script[0].envelope"]
    );
    assert!(!body.to_string().contains("yyyy"), "the value is not echoed");

    let p = h.profile(json!({"name": "ok", "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}})).await;
    let (status, body) = h
        .post(
            "/api/v1/routes",
            json!({"profile_id": p, "title": big, "caller": {"kind": "workflow", "reference": big, "invocation_id": big}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(
        paths(&body),
        ["caller.reference", "caller.invocation_id", "title"]
    );
    assert!(!body.to_string().contains("yyyy"), "the value is not echoed");
    let routes = h.get("/api/v1/routes?open_only=true").await;
    assert_eq!(routes, json!([]), "nothing was stored");
}

#[tokio::test]
async fn writes_from_a_foreign_page_or_in_a_form_encoding_are_refused_and_change_nothing() {
    let h = Harness::new().await;
    let body = json!({"name": "csrf", "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}})
        .to_string();
    let host = ("host", "127.0.0.1:3000");
    for (headers, want) in [
        (
            vec![host, ("content-type", "text/plain")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            vec![host, ("content-type", "application/x-www-form-urlencoded")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (vec![host], StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (
            vec![
                host,
                ("content-type", "application/json"),
                ("origin", "http://evil.example"),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                host,
                ("content-type", "text/plain"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            StatusCode::FORBIDDEN,
        ),
        (
            vec![
                host,
                ("content-type", "application/json"),
                ("sec-fetch-site", "cross-site"),
            ],
            StatusCode::FORBIDDEN,
        ),
    ] {
        let (status, out) = h
            .call_raw(Method::POST, "/api/v1/profiles", &headers, body.clone())
            .await;
        assert_eq!(status, want, "{headers:?}: {out}");
    }
    // The UI's server functions are guarded the same way.
    let (status, _) = h
        .call_raw(
            Method::POST,
            "/api/ui/list_profiles",
            &[
                host,
                ("content-type", "application/json"),
                ("origin", "http://evil.example"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(h.get("/api/v1/profiles").await, json!([]), "nothing was created");
    // The app's own page and a script may write.
    let (status, out) = h
        .call_raw(
            Method::POST,
            "/api/v1/profiles",
            &[
                host,
                ("content-type", "application/json"),
                ("origin", "http://127.0.0.1:3000"),
            ],
            body.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    let (status, out) = h
        .call_raw(
            Method::POST,
            "/api/v1/profiles",
            &[("content-type", "application/json")],
            body,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
}

#[tokio::test]
async fn evidence_for_another_invocation_is_refused_without_echoing_its_id() {
    let h = Harness::new().await;
    let p = h.profile(json!({"name": "ext", "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}})).await;
    let r = h.start(&p, "inv-mine").await;
    let mut env = overloaded();
    env["invocation_id"] = json!("sk-live-4f9a8b7c6d5e4f3a2b1c");
    env["generation"] = h.snapshot(&r).await["generation"].clone();
    let (status, body) = h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(!body.to_string().contains("sk-live"), "{body}");
}

#[tokio::test]
async fn a_stale_generation_on_a_finished_route_is_a_conflict_but_a_repeat_of_its_finishing_request_is_not() {
    let h = Harness::new().await;
    let p = h.profile(json!({"name": "ext", "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}})).await;
    let r = h.start(&p, "inv-done").await;
    let g = h.snapshot(&r).await["generation"].as_u64().unwrap();
    let (status, s) = h
        .post(
            &format!("/api/v1/routes/{r}/abandon"),
            json!({"expected_generation": g}),
        )
        .await;
    assert_eq!((status, s["state"].as_str()), (StatusCode::OK, Some("abandoned")));
    // The same abandon again (a retried request): done, no change.
    let (status, s) = h
        .post(
            &format!("/api/v1/routes/{r}/abandon"),
            json!({"expected_generation": g}),
        )
        .await;
    assert_eq!((status, s["generation"].as_u64()), (StatusCode::OK, Some(g + 1)));
    // Anything else for an old generation: 409 with the route as it is.
    for (path, body) in [
        ("actions", json!({"action": "stop", "expected_generation": g - 1})),
        (
            "actions",
            json!({"action": "retry_now", "expected_generation": g}),
        ),
        ("work", json!({"expected_generation": g})),
        ("complete", json!({"expected_generation": g})),
        ("abandon", json!({"expected_generation": g - 1})),
    ] {
        let (status, s) = h.post(&format!("/api/v1/routes/{r}/{path}"), body.clone()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path} {body}: {s}");
        assert_eq!(s["state"], "abandoned", "{s}");
    }
}

#[tokio::test]
async fn a_route_whose_only_candidate_is_behind_an_open_circuit_waits_for_it_visibly_and_across_a_restart() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "one provider", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    // A first route's trusted, provider-wide failure opens the circuit (it stops: no retry).
    let first = h.start(&p, "inv-1").await;
    let mut env = overloaded();
    env["invocation_id"] = json!("inv-1");
    env["generation"] = h.snapshot(&first).await["generation"].clone();
    let (status, out) = h.post(&format!("/api/v1/routes/{first}/evidence"), env).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let circuits = h.get("/api/v1/circuits").await;
    let until = circuits[0]["open_until"].as_str().unwrap().to_owned();
    assert_eq!(circuits[0]["state"], "open", "{circuits}");

    // A new route on the same provider waits, with the circuit and the instant in its snapshot.
    let second = h.start(&p, "inv-2").await;
    let s = h.snapshot(&second).await;
    assert_eq!(s["state"], "active", "not sent to a person: {s}");
    assert_eq!(s["attempt"]["dispatch"], "pending", "{s}");
    assert_eq!(s["hold"]["circuit"], "provider:anthropic", "{s}");
    assert_eq!(s["hold"]["until"].as_str(), Some(until.as_str()), "{s}");

    // Restart: the hold is still shown, and still durable.
    let now = h.now();
    let Harness { dir, engine, .. } = h;
    drop(engine);
    let h = Harness::open(dir, now).await;
    h.engine.reconcile().await.unwrap();
    let s = h.snapshot(&second).await;
    assert_eq!(s["hold"]["circuit"], "provider:anthropic", "{s}");
    assert_eq!(s["attempt"]["dispatch"], "pending", "{s}");

    // When the circuit's time is up, the held attempt is the probe and goes.
    h.advance(3600).await;
    let s = h.snapshot(&second).await;
    assert_eq!(s["attempt"]["dispatch"], "started", "{s}");
    assert_eq!(s["hold"], Value::Null, "{s}");
}

#[tokio::test]
async fn a_route_needs_a_person_only_when_no_candidate_can_ever_be_tried() {
    let h = Harness::new().await;
    // Two candidates on one provider; the first fails and is skipped, the circuit opens, and
    // the second waits for it instead of stopping.
    let p = h
        .profile(json!({"name": "two on one provider", "targets": [
            {"id": "a", "dispatcher": "external", "provider_id": "anthropic"},
            {"id": "b", "dispatcher": "external", "provider_id": "anthropic", "model_id": "other"}],
          "policy": {"version": 1, "candidates": [
            candidate("a", disabled(), disabled()), candidate("b", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let mut env = overloaded();
    env["invocation_id"] = json!("inv-1");
    env["generation"] = h.snapshot(&r).await["generation"].clone();
    h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    let s = h.snapshot(&r).await;
    assert_eq!(
        (s["state"].as_str(), s["candidate_id"].as_str()),
        (Some("active"), Some("b")),
        "{s}"
    );
    assert_eq!(s["hold"]["circuit"], "provider:anthropic", "{s}");
    // b fails too: both are excluded for this cycle, nothing can ever be tried: a person.
    h.advance(3600).await;
    let mut env = overloaded();
    env["invocation_id"] = json!("inv-1");
    env["generation"] = h.snapshot(&r).await["generation"].clone();
    h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["action_reason"], "no_eligible_candidate", "{s}");
}

#[tokio::test]
async fn the_published_schema_carries_the_bounds_the_server_enforces() {
    let h = Harness::new().await;
    let doc = h.get("/api/openapi.json").await;
    let s = &doc["components"]["schemas"];
    let limits = [
        (
            &s["ProfileInput"]["properties"]["name"]["maxLength"],
            policy::limits::MAX_PROFILE_NAME_CHARS as u64,
        ),
        (
            &s["CandidateTarget"]["properties"]["label"]["maxLength"],
            policy::limits::MAX_LABEL_CHARS as u64,
        ),
        (
            &s["CandidateTarget"]["properties"]["model_id"]["maxLength"],
            policy::limits::MAX_IDENTIFIER_CHARS as u64,
        ),
        (
            &s["CandidateTarget"]["properties"]["script"]["maxItems"],
            policy::limits::MAX_SCRIPT_STEPS as u64,
        ),
        (
            &s["SimulatedStep"]["properties"]["after_seconds"]["maximum"],
            policy::limits::MAX_SIMULATED_DELAY_SECONDS,
        ),
        (
            &s["StartRouteRequest"]["properties"]["title"]["maxLength"],
            policy::limits::MAX_TITLE_CHARS as u64,
        ),
        (
            &s["Caller"]["properties"]["reference"]["maxLength"],
            policy::limits::MAX_CALLER_REFERENCE_CHARS as u64,
        ),
        (
            &s["Caller"]["properties"]["invocation_id"]["maxLength"],
            policy::limits::MAX_INVOCATION_ID_CHARS as u64,
        ),
    ];
    for (i, (published, enforced)) in limits.iter().enumerate() {
        assert_eq!(published.as_u64(), Some(*enforced), "bound {i}: {s}");
    }
    assert_eq!(
        s["CandidateTarget"]["properties"]["provider_id"]["pattern"],
        policy::limits::IDENTIFIER_PATTERN
    );
    assert!(
        s["RouteSnapshot"]["properties"]["hold"].is_object(),
        "the hold is documented"
    );
}

#[tokio::test]
async fn a_stored_tag_that_does_not_decode_is_corruption_naming_the_row_not_a_default() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "one provider", "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic"}],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-1").await;
    let mut env = overloaded();
    env["invocation_id"] = json!("inv-1");
    env["generation"] = h.snapshot(&r).await["generation"].clone();
    h.post(&format!("/api/v1/routes/{r}/evidence"), env).await;
    // Once these read as `external` and `closed`.
    server::store::sql::query("UPDATE dispatches SET dispatcher = 'carrier_pigeon' WHERE route_id = ?")
        .bind(&r)
        .execute(&h.pool)
        .await
        .unwrap();
    server::store::sql::query("UPDATE circuits SET state = 'half_open'")
        .execute(&h.pool)
        .await
        .unwrap();
    match h.engine.route_detail(&r).await {
        Err(server::engine::EngineError::Corrupt(m)) => {
            assert!(
                m.contains("dispatches") && m.contains(&format!("{r}#1")) && m.contains("carrier_pigeon"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    match h.engine.circuits().await {
        Err(server::engine::EngineError::Corrupt(m)) => {
            assert!(m.contains("circuits") && m.contains("provider:anthropic"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // Over HTTP: a plain 500, no internals.
    let (status, body) = h.call(Method::GET, &format!("/api/v1/routes/{r}"), None).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!body.to_string().contains("carrier_pigeon"), "{body}");
}

#[test]
fn concurrent_profile_writes_never_fail_on_a_locked_database() {
    // Found by Schemathesis against the real server: a profile write's deferred transaction
    // could meet another's write lock and answer 503 "database is locked" at once instead of
    // waiting its turn (about 1 in 150 writes; this test caught it in one run of three before
    // the fix, and never since).
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, _) = spawn_serve(backend::database(dir.path(), "race.db"), &[], false);
    let body = json!({"name": "race", "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}});
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (addr, body) = (addr.clone(), body.clone());
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                for i in 0..100 {
                    let (status, out) = if (t + i) % 2 == 0 {
                        http(
                            &addr,
                            "DELETE",
                            &format!("/api/v1/profiles/missing-{t}-{i}"),
                            None,
                        )
                        .unwrap()
                    } else {
                        let (s, p) = http(&addr, "POST", "/api/v1/profiles", Some(&body)).unwrap();
                        if s == 201 && i % 3 == 0 {
                            let id = p["id"].as_str().unwrap();
                            http(&addr, "DELETE", &format!("/api/v1/profiles/{id}"), None).unwrap()
                        } else {
                            (s, p)
                        }
                    };
                    if !matches!(status, 201 | 204 | 404) {
                        bad.push(format!("{status} {out}"));
                    }
                }
                bad
            })
        })
        .collect();
    let bad: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        bad.is_empty(),
        "{} profile writes failed: {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}

/// The path a server function is registered under (Leptos appends a hash to its name).
fn server_fn_path(name: &str) -> String {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .find(|path| server::auth::rules::server_fn_name(path) == name)
        .unwrap_or_else(|| panic!("no server function {name}"))
        .to_owned()
}

#[tokio::test]
async fn a_server_function_refuses_with_the_status_the_api_uses_never_a_500() {
    let h = Harness::new().await;
    let json = [("content-type", "application/json")];
    let call = |name: &'static str, body: &'static str| {
        let h = &h;
        async move { h.call_raw(Method::POST, &server_fn_path(name), &json, body).await }
    };
    // Arguments that are not the function's, sent by hand: 422, without echoing them.
    let (status, body) = call("create_profile", r#"{"input": "sk-live-4f9a8b7c6d5e4f3a2b1c"}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["kind"], "invalid");
    assert!(!body.to_string().contains("sk-live"), "{body}");
    // A profile the policy refuses: 422 with its field paths.
    let (status, body) = call(
        "create_profile",
        r#"{"input": {"name": "", "kind": "dynamic", "targets": [], "policy": {"version": 1, "candidates": []}}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["errors"].as_array().is_some_and(|e| !e.is_empty()), "{body}");
    // Nothing there: 404. A name taken: 409.
    let (status, body) = call("get_profile", r#"{"id": "no-such-profile"}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["kind"], "not_found");
    let account = r#"{"input": {"name": "twice", "role": "viewer", "password": "a long enough passphrase"}}"#;
    assert_eq!(call("create_account", account).await.0, StatusCode::OK);
    let (status, body) = call("create_account", account).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["kind"], "conflict");
    // What succeeds is still 200.
    assert_eq!(call("list_profiles", "{}").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_server_function_takes_only_json() {
    let h = Harness::new().await;
    let path = server_fn_path("create_profile");
    let body = json!({"input": {"name": "plain", "kind": "dynamic", "targets": [],
        "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}})
    .to_string();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type.map(|c| ("content-type", c)).into_iter().collect();
        let (status, out) = h.call_raw(Method::POST, &path, &headers, body.clone()).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}: {out}"
        );
        assert_eq!(out["error"]["code"], "unsupported_media_type", "{out}");
        // An unregistered name too (that route had the rule already).
        let (status, _) = h
            .call_raw(Method::POST, "/api/ui/no_such_function", &headers, body.clone())
            .await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{content_type:?}");
    }
    assert_eq!(h.get("/api/v1/profiles").await, json!([]), "nothing was created");
    // JSON still reaches it.
    let (status, out) = h
        .call_raw(
            Method::POST,
            &server_fn_path("list_profiles"),
            &[("content-type", "application/json")],
            "{}",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
}

#[tokio::test]
async fn an_unknown_api_path_is_a_json_404_that_does_not_repeat_it() {
    let h = Harness::new().await;
    for (method, path) in [
        (Method::GET, "/api/v1/rct_PROBEsecret"),
        (Method::POST, "/api/v1/rct_PROBEsecret"),
        (Method::GET, "/api/ui/no_such_functionPROBE"),
        (Method::POST, "/api/ui/no_such_functionPROBE"),
        (Method::GET, "/api/PROBE/deeper/still"),
    ] {
        let (status, out) = h
            .call_raw(
                method.clone(),
                path,
                &[("content-type", "application/json")],
                "{}",
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {out}");
        assert_eq!(out["error"]["code"], "not_found", "{method} {path}: {out}");
        assert!(!out.to_string().contains("PROBE"), "{method} {path}: {out}");
    }
    // Without credentials, still nothing learned: 401.
    let (status, out) = h
        .call_as(None, Method::GET, "/api/v1/rct_PROBEsecret", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{out}");
    assert!(!out.to_string().contains("PROBE"), "{out}");
}
