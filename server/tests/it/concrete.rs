//! Concrete (single-agent) profiles: the same classification and timing hints as a dynamic
//! profile, with interactive defaults (retry transient errors a few times, wait for a trusted
//! reset up to an hour, then stop for the person at hand).

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_concrete_profile_without_a_policy_retries_with_the_interactive_defaults_then_stops() {
    let h = Harness::new().await;
    let (status, p) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "my agent", "kind": "concrete", "targets": [
                sim("solo", "anthropic", json!([fail(overloaded())]))]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    assert_eq!(p["kind"], "concrete");
    assert_eq!(
        p["policy"]["candidates"][0]["transient"]["retry"]["max_retries"],
        policy::limits::CONCRETE_TRANSIENT_MAX_RETRIES
    );
    let r = h.start(p["id"].as_str().unwrap(), "inv-1").await;
    // 5, 10, 20 s, then the person decides: no switch, no skip.
    let mut states = Vec::new();
    for wait in [5, 10, 20] {
        states.push(h.snapshot(&r).await["state"].as_str().unwrap().to_owned());
        h.advance(wait).await;
    }
    let s = h.snapshot(&r).await;
    assert_eq!(states, ["retry_wait", "retry_wait", "retry_wait"]);
    assert_eq!(
        (s["state"].as_str(), s["action_reason"].as_str()),
        (Some("action_required"), Some("policy_stop")),
        "{s}"
    );
}

#[tokio::test]
async fn a_concrete_profile_has_exactly_one_candidate() {
    let h = Harness::new().await;
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            json!({"name": "two", "kind": "concrete", "policy": {"version": 1, "candidates": [
                candidate("a", disabled(), disabled()), candidate("b", disabled(), disabled())]}}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "candidates");
}
