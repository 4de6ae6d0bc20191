//! The operations endpoints through the real router: `/metrics` after a route that failed,
//! waited, retried on the manual clock and succeeded (counts compared with the route's own
//! history), who may scrape it, and `/readyz` on a fresh database, one whose migrations are
//! behind or failed, and one that no longer answers.

use crate::common;

use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use common::*;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

/// A GET with this token (or none): status, content type, body text.
async fn get_text(h: &Harness, token: Option<&str>, path: &str) -> (StatusCode, String, String) {
    let mut req = Request::get(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = h
        .app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The value of the sample `series` (name and labels exactly as exposed), if exposed.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_count_a_retried_routes_transitions_its_timer_lateness_and_its_dispatch_outcomes() {
    let h = Harness::new().await;
    let p = h
        .profile(json!({"name": "retry once", "targets": [
            sim("main", "anthropic", json!([fail(overloaded()), succeed()]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(1, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = h.start(&p, "inv-metrics").await;
    assert_eq!(h.snapshot(&r).await["state"], "retry_wait");
    let (_, _, before) = get_text(&h, Some(&h.token), "/metrics").await;
    assert_eq!(
        sample(&before, "recourse_timer_lateness_seconds_count"),
        Some(0.0),
        "{before}"
    );
    assert_eq!(sample(&before, "recourse_due_timers"), Some(0.0));
    // The retry is due 5 s after the failure; the scheduler runs 7 s after it: 2 s late.
    h.clock.advance(chrono::TimeDelta::seconds(7));
    let (_, _, due) = get_text(&h, Some(&h.token), "/metrics").await;
    assert_eq!(
        sample(&due, "recourse_due_timers"),
        Some(1.0),
        "one timer due, not fired"
    );
    assert_eq!(server::scheduler::tick(&h.engine).await.unwrap(), 1);
    let route = h.route(&r).await;
    assert_eq!(route["route"]["snapshot"]["state"], "active", "{route}");
    let outcomes: Vec<&str> = route["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["outcome"].as_str().unwrap_or("open"))
        .collect();
    assert_eq!(outcomes, ["failed", "succeeded"], "{route}");

    let (status, content_type, text) = get_text(&h, Some(&h.token), "/metrics").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    // Every committed transition, by the state it entered, is the route's history.
    let history = route["history"].as_array().unwrap();
    assert!(history.len() >= 5, "{route}");
    for state in policy::route::StateName::ALL {
        let entered = history.iter().filter(|e| e["to"] == state.as_str()).count();
        let series = format!("recourse_transitions_total{{state=\"{}\"}}", state.as_str());
        #[allow(clippy::cast_precision_loss)]
        let want = entered as f64;
        assert_eq!(sample(&text, &series), Some(want), "{series} in:\n{text}");
    }
    assert_eq!(
        sample(&text, "recourse_timer_lateness_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "recourse_timer_lateness_seconds_sum"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "recourse_timer_lateness_seconds_bucket{le=\"1\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "recourse_timer_lateness_seconds_bucket{le=\"2.5\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "recourse_dispatch_outcomes_total{outcome=\"failed\",class=\"transient\",code=\"provider_overloaded\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "recourse_dispatch_outcomes_total{outcome=\"succeeded\",class=\"none\",code=\"none\"}"
        ),
        Some(1.0)
    );
    assert_eq!(sample(&text, "recourse_due_timers"), Some(0.0), "fired");
    assert_eq!(sample(&text, "recourse_leases_expired_total"), Some(0.0));
    assert_eq!(sample(&text, "recourse_sse_clients"), Some(0.0));
    assert!(
        text.lines()
            .any(|l| l.starts_with("recourse_replica_info{replica_id=\"") && l.ends_with("\"} 1")),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_need_a_principal_holding_view_routes() {
    let h = Harness::new().await;
    let (status, _, body) = get_text(&h, None, "/metrics").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "unauthenticated");
    let runner = account_token(&h.auth, "a-runner", "runner", ADMIN_PASSWORD).await;
    let (status, _, body) = get_text(&h, Some(&runner), "/metrics").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("`view_routes`"), "{body}");
    let viewer = account_token(&h.auth, "a-viewer", "viewer", ADMIN_PASSWORD).await;
    let (status, _, body) = get_text(&h, Some(&viewer), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("# TYPE recourse_transitions_total counter"),
        "{body}"
    );
}

#[tokio::test]
async fn an_open_event_stream_is_counted_until_it_is_dropped() {
    let h = Harness::new().await;
    let resp = h
        .app
        .clone()
        .oneshot(
            Request::get("/api/v1/events")
                .header(header::AUTHORIZATION, format!("Bearer {}", h.token))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (_, _, text) = get_text(&h, Some(&h.token), "/metrics").await;
    assert_eq!(sample(&text, "recourse_sse_clients"), Some(1.0), "{text}");
    drop(resp);
    let (_, _, text) = get_text(&h, Some(&h.token), "/metrics").await;
    assert_eq!(sample(&text, "recourse_sse_clients"), Some(0.0), "{text}");
}

async fn readyz(h: &Harness) -> (StatusCode, Value) {
    h.call_as(None, axum::http::Method::GET, "/readyz", None).await
}

fn embedded() -> usize {
    server::db::MIGRATOR.iter().count()
}

#[tokio::test]
async fn readyz_is_ready_without_credentials_on_a_freshly_migrated_database() {
    let h = Harness::new().await;
    let (status, body) = readyz(&h).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"status": "ready", "database": "ok", "migrations": "current", "embedded": embedded()})
    );
}

#[tokio::test]
async fn readyz_is_503_naming_the_migration_a_database_lacks_or_failed() {
    let h = Harness::new().await;
    let last: i64 = server::store::sql::query("SELECT MAX(version) FROM _sqlx_migrations")
        .scalar(&h.pool)
        .await
        .unwrap();
    server::store::sql::query("UPDATE _sqlx_migrations SET success = FALSE WHERE version = ?")
        .bind(last)
        .execute(&h.pool)
        .await
        .unwrap();
    let (status, body) = readyz(&h).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        body,
        json!({"status": "not_ready", "database": "ok", "migrations": "failed", "embedded": embedded(),
               "version": last})
    );
    // An older database: the last migration never ran.
    server::store::sql::query("DELETE FROM _sqlx_migrations WHERE version = ?")
        .bind(last)
        .execute(&h.pool)
        .await
        .unwrap();
    let (status, body) = readyz(&h).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        body,
        json!({"status": "not_ready", "database": "ok", "migrations": "pending", "embedded": embedded(),
               "missing": 1, "version": last})
    );
    // Liveness is another question: the process and its database answer.
    let (status, body) = h.call_as(None, axum::http::Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn readyz_is_503_when_the_database_does_not_answer() {
    let h = Harness::new().await;
    h.pool.close().await;
    let (status, body) = readyz(&h).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(
        body,
        json!({"status": "not_ready", "database": "unavailable", "migrations": "unknown",
               "embedded": embedded()})
    );
}

/// Log lines of a served process until `enough` holds of those read so far (the bound only
/// turns a line that never comes into a failure).
fn read_log(log: &std::sync::mpsc::Receiver<String>, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut lines = Vec::new();
    while !enough(&lines) {
        let line = log
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the log ended or stalled; so far: {lines:?}"));
        lines.push(serde_json::from_str(&line).unwrap_or_else(|_| panic!("not a JSON line: {line}")));
    }
    lines
}

/// Starts a route on the served process; its id.
fn start_route(addr: &str, invocation: &str) -> String {
    let (status, profile) = http(
        addr,
        "POST",
        "/api/v1/profiles",
        Some(&json!({"name": format!("logs {invocation}"), "targets": [
            sim("main", "anthropic", json!([fail(overloaded())]))],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(1, 5, 0, "stop"), disabled())]}})),
    )
    .unwrap();
    assert_eq!(status, 201, "{profile}");
    let (status, route) = http(
        addr,
        "POST",
        "/api/v1/routes",
        Some(
            &json!({"profile_id": profile["id"], "caller": {"kind": "kanban_task", "reference": "t",
                     "invocation_id": invocation}}),
        ),
    )
    .unwrap();
    assert_eq!(status, 201, "{route}");
    route["id"].as_str().unwrap().to_owned()
}

fn transitions_of<'a>(lines: &'a [Value], route_id: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["message"] == "route transition" && l["route_id"] == route_id)
        .collect()
}

#[test]
fn every_json_log_line_carries_the_replica_id_and_a_transitions_line_its_route_and_generation() {
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "logs.db");
    let clock = t0().to_rfc3339();
    let (mut child, addr, log) = spawn_serve_env(
        &db,
        &["--test-clock", &clock],
        true,
        &[("RECOURSE_REPLICA_ID", "replica-under-test")],
    );
    let log = log.unwrap();
    let route_id = start_route(&addr, "inv-logs-1");
    // Started, dispatch started, failed into retry_wait: generations 1, 2, 3.
    let lines = read_log(&log, |lines| transitions_of(lines, &route_id).len() >= 3);
    child.kill().unwrap();
    child.wait().unwrap();
    for line in &lines {
        assert_eq!(line["replica_id"], "replica-under-test", "{line}");
    }
    let seen: Vec<(u64, &str, &str)> = transitions_of(&lines, &route_id)
        .iter()
        .map(|l| {
            (
                l["generation"].as_u64().unwrap(),
                l["event"].as_str().unwrap(),
                l["to"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, "started", "active"),
            (2, "dispatch_started", "active"),
            (3, "failed", "retry_wait")
        ],
        "{lines:?}"
    );

    // Without a replica id the server names itself after its host and process.
    let (mut child, addr, log) = spawn_serve(&db, &["--test-clock", &clock], true);
    let log = log.unwrap();
    let route_id = start_route(&addr, "inv-logs-2");
    let lines = read_log(&log, |lines| !transitions_of(lines, &route_id).is_empty());
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    for line in &lines {
        let id = line["replica_id"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(id.ends_with(&format!("-{pid}")), "{line}");
    }
}

/// sqlx's line per statement is at TRACE (`db::STATEMENT_LOG`): `RUST_LOG=debug` shows what
/// Recourse itself says, and `sqlx=trace` brings the statements back.
#[test]
fn sql_statements_are_logged_at_trace_not_at_debug() {
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "statements.db");
    let logged = |filter: &str| -> Vec<String> {
        let (mut child, addr, log) = spawn_serve_env(&db, &[], true, &[("RUST_LOG", filter)]);
        let log = log.unwrap();
        let (status, body) = http(&addr, "GET", "/api/v1/routes", None).unwrap();
        assert_eq!(status, 200, "{body}");
        let exit = terminate(&mut child, std::time::Duration::from_secs(60));
        assert!(exit.success(), "exit status after SIGTERM: {exit}");
        // Every line it logged: the reader ends at the stopped process's end of output.
        log.iter().collect()
    };
    let statement = |line: &String| line.contains(r#""target":"sqlx::query""#);

    let debug = logged("debug");
    assert!(
        debug.iter().any(|l| l.contains(r#""level":"DEBUG""#)),
        "no debug line at RUST_LOG=debug: {debug:?}"
    );
    assert!(
        !debug.iter().any(statement),
        "a statement at RUST_LOG=debug: {debug:?}"
    );

    let trace = logged("debug,sqlx=trace");
    assert!(
        trace.iter().any(statement),
        "no statement at sqlx=trace: {trace:?}"
    );
}
