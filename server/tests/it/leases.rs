//! The external-runner protocol, through the REST API on a real database (either backend) with the
//! manual clock: claim, acknowledge, heartbeat and report; a claim never acknowledged lapses and is
//! offered again; an acknowledged lease that runs out makes the attempt ambiguous and never
//! repeats it; a restart offers unclaimed attempts again and keeps acknowledged ones to their
//! lease.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::{json, Value};

async fn ext_route(h: &Harness, invocation: &str) -> String {
    let p = h
        .profile(json!({"name": format!("ext {invocation}"), "targets": [
            {"id": "main", "dispatcher": "external", "provider_id": "anthropic", "model_id": "opus"}],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "stop"), disabled())]}}))
        .await;
    h.start(&p, invocation).await
}

async fn claim(h: &Harness, seconds: u64) -> (StatusCode, Value) {
    h.post(
        "/api/v1/dispatches/claim",
        json!({"runner": "ci-runner", "lease_seconds": seconds}),
    )
    .await
}

fn at(grant: &Value, verb: &str) -> String {
    format!(
        "/api/v1/dispatches/{}/{}/{verb}",
        grant["route_id"].as_str().unwrap(),
        grant["attempt"]
    )
}

#[tokio::test]
async fn a_runner_claims_acknowledges_heartbeats_and_reports_success_with_its_result() {
    let h = Harness::new().await;
    let r = ext_route(&h, "inv-1").await;
    let (status, grant) = claim(&h, 30).await;
    assert_eq!(status, StatusCode::OK, "{grant}");
    assert_eq!(grant["route_id"], r.as_str());
    assert_eq!(grant["invocation_id"], "inv-1");
    assert_eq!(grant["provider_id"], "anthropic");
    assert_eq!(grant["invocation_generation"], h.snapshot(&r).await["generation"]);
    // Nothing else to claim while it is held.
    assert_eq!(claim(&h, 30).await.0, StatusCode::NO_CONTENT);
    let lease = json!({"lease_id": grant["lease_id"], "lease_seconds": 60});
    let (status, acked) = h.post(&at(&grant, "ack"), lease.clone()).await;
    assert_eq!(status, StatusCode::OK, "{acked}");
    h.advance(50).await;
    let (status, beat) = h.post(&at(&grant, "heartbeat"), lease.clone()).await;
    assert_eq!(status, StatusCode::OK, "{beat}");
    // Past the first expiry, but renewed: still running.
    h.advance(30).await;
    assert_eq!(h.snapshot(&r).await["attempt"]["dispatch"], "started");
    let (status, s) = h
        .post(
            &at(&grant, "report"),
            json!({"lease_id": grant["lease_id"], "outcome": "succeeded", "result": "{\"answer\": 42}"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(
        (s["state"].as_str(), &s["attempt"]),
        (Some("active"), &Value::Null)
    );
    let result = h.get(&format!("/api/v1/routes/{r}/result")).await;
    assert_eq!(result["body"], "{\"answer\": 42}");
    // The lease ended with the attempt: a late report is refused.
    let (status, _) = h
        .post(
            &at(&grant, "report"),
            json!({"lease_id": grant["lease_id"], "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn a_claim_never_acknowledged_lapses_and_the_attempt_is_offered_again_not_ambiguous() {
    let h = Harness::new().await;
    let r = ext_route(&h, "inv-1").await;
    let (_, first) = claim(&h, 10).await;
    h.advance(11).await;
    let (status, second) = claim(&h, 10).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["route_id"], r.as_str());
    assert_ne!(second["lease_id"], first["lease_id"]);
    // The first runner's lease is gone: it may not start.
    let (status, body) = h
        .post(&at(&first, "ack"), json!({"lease_id": first["lease_id"]}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("lease_lost"), "{body}");
    assert_eq!(h.snapshot(&r).await["state"], "active");
    let metrics = h.engine.metrics().render();
    assert!(
        metrics.contains("recourse_leases_expired_total 0"),
        "a lapsed claim is not an expired lease:\n{metrics}"
    );
}

#[tokio::test]
async fn an_acknowledged_lease_that_runs_out_is_ambiguous_and_never_repeated() {
    let h = Harness::new().await;
    let r = ext_route(&h, "inv-1").await;
    let (_, grant) = claim(&h, 30).await;
    h.post(
        &at(&grant, "ack"),
        json!({"lease_id": grant["lease_id"], "lease_seconds": 30}),
    )
    .await;
    h.advance(29).await;
    assert_eq!(h.snapshot(&r).await["state"], "active");
    h.advance(1).await;
    let route = h.route(&r).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(
        (s["state"].as_str(), s["action_reason"].as_str()),
        (Some("action_required"), Some("ambiguous_dispatch")),
        "{route}"
    );
    assert_eq!(route["dispatches"][0]["outcome"], "ambiguous");
    assert!(history_events(&route)
        .iter()
        .any(|e| e == "lease_expired->action_required"));
    let metrics = h.engine.metrics().render();
    for line in [
        "recourse_leases_expired_total 1",
        "recourse_dispatch_outcomes_total{outcome=\"ambiguous\",class=\"none\",code=\"none\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
    // The late runner is told to stop; nothing else claims the attempt.
    let (status, _) = h
        .post(
            &at(&grant, "report"),
            json!({"lease_id": grant["lease_id"], "outcome": "succeeded"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(claim(&h, 30).await.0, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn a_stop_by_a_person_ends_the_lease_and_the_runner_is_told_on_its_next_heartbeat() {
    let h = Harness::new().await;
    let r = ext_route(&h, "inv-1").await;
    let (_, grant) = claim(&h, 30).await;
    h.post(&at(&grant, "ack"), json!({"lease_id": grant["lease_id"]}))
        .await;
    let g = h.snapshot(&r).await["generation"].clone();
    let (status, _) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "stop", "expected_generation": g}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = h
        .post(&at(&grant, "heartbeat"), json!({"lease_id": grant["lease_id"]}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // No lease timer is left to fire later.
    h.advance(3600).await;
    assert_eq!(h.snapshot(&r).await["action_reason"], "stopped_by_user");
}

#[tokio::test]
async fn a_restart_offers_an_unclaimed_attempt_again_and_keeps_an_acknowledged_one_to_its_lease() {
    let h = Harness::new().await;
    let unclaimed = ext_route(&h, "inv-1").await;
    let held = ext_route(&h, "inv-2").await;
    // The oldest is claimed first: take both, acknowledge the second, give the first up.
    let (_, a) = claim(&h, 10).await;
    let (_, b) = claim(&h, 10).await;
    let (grant_unclaimed, grant_held) = if a["route_id"] == unclaimed.as_str() {
        (a, b)
    } else {
        (b, a)
    };
    h.post(
        &at(&grant_held, "ack"),
        json!({"lease_id": grant_held["lease_id"], "lease_seconds": 120}),
    )
    .await;
    let _ = grant_unclaimed;
    h.advance(11).await;

    let now = h.now();
    let Harness { dir, engine, .. } = h;
    drop(engine);
    let h = Harness::open(dir, now).await;
    let report = h.engine.reconcile().await.unwrap();
    assert_eq!(report.ambiguous, 0, "{report:?}");
    for r in [&unclaimed, &held] {
        assert_eq!(h.snapshot(r).await["attempt"]["dispatch"], "started", "{r}");
    }
    // The unclaimed attempt is offered again; the acknowledged runner may still report.
    let (status, again) = claim(&h, 10).await;
    assert_eq!(
        (status, again["route_id"].as_str()),
        (StatusCode::OK, Some(unclaimed.as_str()))
    );
    let (status, s) = h
        .post(&at(&grant_held, "report"), json!({"lease_id": grant_held["lease_id"], "outcome": "failed",
            "envelope": {"invocation_id": "inv-2", "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
                         "items": overloaded()["items"].clone()}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["state"], "retry_wait", "{s}");
}

#[tokio::test]
async fn bad_runner_requests_are_field_addressed_422s() {
    let h = Harness::new().await;
    ext_route(&h, "inv-1").await;
    let (status, body) = h
        .post(
            "/api/v1/dispatches/claim",
            json!({"runner": "ci runner", "lease_seconds": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "runner");
    let (status, body) = claim(&h, 86_400).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "lease_seconds");
    let (_, grant) = claim(&h, 30).await;
    let (status, body) = h
        .post(
            &at(&grant, "report"),
            json!({"lease_id": grant["lease_id"], "outcome": "failed"}),
        )
        .await;
    assert_eq!(
        (status, body["errors"][0]["path"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("envelope"))
    );
}
