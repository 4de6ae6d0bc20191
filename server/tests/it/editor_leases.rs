//! Routes whose caller runs their attempts itself (`editor`: `recourse acp`), through the REST
//! API on a real SQLite file with the manual clock: the server starts nothing for them (an
//! `acp` candidate's agent is never spawned), their attempts are leased only through the claim
//! limited to the route, never the general claim; starting one needs `run_dispatches` besides
//! `operate_routes`; the working directory is the caller's, not looked for on the server; and
//! a runner that goes away leaves an ambiguous attempt that is never repeated.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{fake_agent::FakeAgent, *};
use serde_json::{json, Value};

/// A harness with two fake agents configured (they must never run) and a profile of both.
async fn setup() -> (Harness, FakeAgent, FakeAgent, String) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeAgent::new(dir.path(), "claude", "anthropic", json!([{"answer": "never"}]));
    let b = FakeAgent::new(dir.path(), "codex", "openai", json!([{"answer": "never"}]));
    let config = format!("{}\n{}", a.toml(""), b.toml(""));
    let h = Harness::with_config(dir, &config).await;
    let p = h
        .profile(
            json!({"name": "editor", "targets": [a.target("first"), b.target("second")],
          "policy": {"version": 1, "candidates": [
            candidate("first", class_policy(0, 0, 0, "skip"), class_policy(0, 0, 0, "skip")),
            candidate("second", disabled(), disabled())]}}),
        )
        .await;
    (h, a, b, p)
}

fn editor_start(profile: &str, session: &str, cwd: &str) -> Value {
    json!({"profile_id": profile, "caller": {"kind": "editor", "reference": session, "invocation_id": format!("{session}-1")},
           "work": {"prompt": [{"type": "text", "text": "Fix the build"}], "cwd": cwd}})
}

/// A token of an account whose role holds exactly `permissions`.
async fn token_with(h: &Harness, name: &str, permissions: &[&str]) -> String {
    let (status, body) = h
        .post(
            "/api/v1/roles",
            json!({"name": format!("{name}-role"), "permissions": permissions}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    account_token(
        &h.auth,
        name,
        &format!("{name}-role"),
        "correct horse battery staple",
    )
    .await
}

#[tokio::test]
async fn an_editor_route_is_leased_by_route_and_the_server_starts_nothing_for_it() {
    let (h, a, b, p) = setup().await;
    // The editor's directory is its own: the server does not look for it on its disk.
    let (status, route) = h
        .post("/api/v1/routes", editor_start(&p, "es-1", "/home/ada/project"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{route}");
    let r = route["id"].as_str().unwrap().to_owned();
    assert_eq!(route["snapshot"]["attempt"]["dispatch"], "started", "{route}");
    // Not the general claim's.
    let (status, _) = h
        .post(
            "/api/v1/dispatches/claim",
            json!({"runner": "ci", "lease_seconds": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, grant) = h
        .post(
            &format!("/api/v1/routes/{r}/claim"),
            json!({"runner": "zed", "lease_seconds": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{grant}");
    assert_eq!(grant["candidate_id"], "first");
    assert_eq!(grant["dispatcher"], "acp");
    assert_eq!(grant["runner"], "claude", "the agent the runner starts, by id");
    assert_eq!(grant["work"]["cwd"], "/home/ada/project");
    // Held: nothing more to claim.
    let (status, _) = h
        .post(&format!("/api/v1/routes/{r}/claim"), json!({"runner": "zed"}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let lease = json!({"lease_id": grant["lease_id"], "lease_seconds": 30});
    let ack = format!("/api/v1/dispatches/{r}/{}/ack", grant["attempt"]);
    assert_eq!(h.post(&ack, lease).await.0, StatusCode::OK);
    // A failure before output: the route switches, and the next attempt is leased too.
    let envelope = json!({"invocation_id": grant["invocation_id"], "generation": grant["invocation_generation"],
        "phase": "prompt", "agent": "claude",
        "effects": {"assistant_output": false, "tool_activity": false, "partial_result": false, "prompt_delivery": "confirmed"},
        "items": [{"kind": "acp_error", "code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}]});
    let report = format!("/api/v1/dispatches/{r}/{}/report", grant["attempt"]);
    let (status, s) = h
        .post(
            &report,
            json!({"lease_id": grant["lease_id"], "outcome": "failed", "envelope": envelope}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["candidate_id"], "second", "{s}");
    assert_eq!(s["attempt"]["dispatch"], "started", "{s}");
    let (status, second) = h
        .post(&format!("/api/v1/routes/{r}/claim"), json!({"runner": "zed"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["runner"], "codex");
    // Neither agent was ever started by the server.
    assert!(
        a.log().is_empty() && b.log().is_empty(),
        "the server ran an editor's agent"
    );
    let detail = h.route(&r).await;
    let kinds: Vec<&str> = detail["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dispatcher"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["external", "external"], "{detail}");
}

#[tokio::test]
async fn a_route_of_another_caller_is_not_claimed_by_route() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::open(dir, t0()).await;
    let p = h
        .profile(
            json!({"name": "ext", "targets": [{"id": "main", "dispatcher": "external"}],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}),
        )
        .await;
    let r = h.start(&p, "inv-1").await;
    let (status, body) = h
        .post(&format!("/api/v1/routes/{r}/claim"), json!({"runner": "zed"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("not_leased"), "{body}");
    // It is still the general claim's.
    let (status, _) = h.post("/api/v1/dispatches/claim", json!({"runner": "ci"})).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn starting_an_editor_route_needs_run_dispatches_as_well_and_its_claim_is_scoped() {
    let (h, _a, _b, p) = setup().await;
    let operator = token_with(&h, "op", &["operate_routes", "view_routes"]).await;
    let (status, body) = h
        .call_as(
            Some(&operator),
            Method::POST,
            "/api/v1/routes",
            Some(editor_start(&p, "es-2", "/tmp")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.to_string().contains("run_dispatches"), "{body}");
    // A token for the editor, scoped to the profile: starts its route and claims it.
    let (status, made) = h
        .post(
            "/api/v1/roles",
            json!({"name": "editor", "permissions": ["operate_routes", "view_routes", "run_dispatches"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (status, token) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "zed", "permissions": ["operate_routes", "view_routes", "run_dispatches"], "profile_ids": [p], "expires_in_days": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{token}");
    let scoped = token["secret"].as_str().unwrap();
    let (status, route) = h
        .call_as(
            Some(scoped),
            Method::POST,
            "/api/v1/routes",
            Some(editor_start(&p, "es-3", "/tmp")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{route}");
    let r = route["id"].as_str().unwrap();
    let (status, grant) = h
        .call_as(
            Some(scoped),
            Method::POST,
            &format!("/api/v1/routes/{r}/claim"),
            Some(json!({"runner": "zed"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{grant}");
    // The general claim stays closed to a scoped token.
    let (status, _) = h
        .call_as(
            Some(scoped),
            Method::POST,
            "/api/v1/dispatches/claim",
            Some(json!({"runner": "zed"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A relative directory is refused at the field.
    let mut bad = editor_start(&p, "es-4", "project");
    bad["caller"]["invocation_id"] = json!("es-4-1");
    let (status, body) = h.post("/api/v1/routes", bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "work.cwd", "{body}");
}

#[tokio::test]
async fn a_runner_that_goes_away_leaves_an_ambiguous_attempt_never_repeated() {
    let (h, a, _b, p) = setup().await;
    let (_, route) = h.post("/api/v1/routes", editor_start(&p, "es-5", "/tmp")).await;
    let r = route["id"].as_str().unwrap().to_owned();
    // Claimed and acknowledged in one call (the runner starts at once): it must heartbeat.
    let (status, grant) = h
        .post(
            &format!("/api/v1/routes/{r}/claim"),
            json!({"runner": "zed", "lease_seconds": 30, "acknowledge": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{grant}");
    let beat = format!("/api/v1/dispatches/{r}/{}/heartbeat", grant["attempt"]);
    h.advance(20).await;
    let (status, _) = h
        .post(&beat, json!({"lease_id": grant["lease_id"], "lease_seconds": 30}))
        .await;
    assert_eq!(status, StatusCode::OK, "an acknowledged lease is renewed");
    h.advance(29).await;
    assert_eq!(h.snapshot(&r).await["state"], "active");
    h.advance(2).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "ambiguous_dispatch", "{s}");
    let (status, _) = h
        .post(&format!("/api/v1/routes/{r}/claim"), json!({"runner": "zed"}))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "nothing is offered again");
    assert!(a.log().is_empty());
}

#[tokio::test]
async fn a_pinned_editor_route_never_switches_and_only_an_editor_route_is_pinned() {
    let (h, _a, _b, p) = setup().await;
    let mut bad = json!({"profile_id": p, "caller": {"kind": "workflow", "reference": "w", "invocation_id": "w-1"}, "pin": "first"});
    let (status, body) = h.post("/api/v1/routes", bad.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "pin", "{body}");
    bad = editor_start(&p, "es-6", "/tmp");
    bad["pin"] = json!("third");
    let (status, body) = h.post("/api/v1/routes", bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "pin", "{body}");
    // Pinned to the second candidate: it starts there, even though the first is eligible.
    let mut start = editor_start(&p, "es-7", "/tmp");
    start["pin"] = json!("second");
    let (status, route) = h.post("/api/v1/routes", start).await;
    assert_eq!(status, StatusCode::CREATED, "{route}");
    assert_eq!(route["snapshot"]["candidate_id"], "second", "{route}");
    // Pinned to the first: its failure (policy: skip) finds no other candidate.
    let mut start = editor_start(&p, "es-8", "/tmp");
    start["pin"] = json!("first");
    let (_, route) = h.post("/api/v1/routes", start).await;
    let r = route["id"].as_str().unwrap().to_owned();
    let (_, grant) = h
        .post(
            &format!("/api/v1/routes/{r}/claim"),
            json!({"runner": "zed", "lease_seconds": 30}),
        )
        .await;
    let ack = format!("/api/v1/dispatches/{r}/{}/ack", grant["attempt"]);
    h.post(&ack, json!({"lease_id": grant["lease_id"]})).await;
    let envelope = json!({"invocation_id": grant["invocation_id"], "generation": grant["invocation_generation"],
        "phase": "prompt", "agent": "claude",
        "effects": {"assistant_output": false, "tool_activity": false, "partial_result": false, "prompt_delivery": "confirmed"},
        "items": [{"kind": "acp_error", "code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}]});
    let report = format!("/api/v1/dispatches/{r}/{}/report", grant["attempt"]);
    let (status, s) = h
        .post(
            &report,
            json!({"lease_id": grant["lease_id"], "outcome": "failed", "envelope": envelope}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "no_eligible_candidate", "{s}");
}
