//! The `http` dispatcher end to end: a real database (either backend), the manual clock, the real engine and
//! router, and real calls over loopback sockets to the fake provider
//! (`common/provider.rs`), which answers with the providers' real error shapes and streams.
//! Nothing waits for time: the clock moves by hand, and a test waits for the engine's next
//! event (or the fake's next request) when a call reports from its own task.

use crate::common;

use axum::http::StatusCode;
use chrono::TimeDelta;
use common::{provider::*, *};
use serde_json::{json, Value};
use std::collections::HashSet;

const KEY_VAR: &str = "RECOURSE_TEST_HTTP_KEY";
/// The key every configured endpoint reads (a fake; its shape is a real key's).
const KEY: &str = "sk-proj-Fk7Qm2Vb9Lk4Rt8Zp3Wn6Yc1Fd5Gs0JaXy";

fn set_key() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // Edition 2021: `set_var` is safe; std's environment lock orders it with every read.
    ONCE.call_once(|| std::env::set_var(KEY_VAR, KEY));
}

/// One endpoint of the test configuration: (name = id = the fake's path, style, provider).
struct Ep<'a> {
    name: &'a str,
    style: &'a str,
    provider: &'a str,
    stream: bool,
    key_var: &'a str,
}

fn ep<'a>(name: &'a str, style: &'a str, provider: &'a str) -> Ep<'a> {
    Ep {
        name,
        style,
        provider,
        stream: false,
        key_var: KEY_VAR,
    }
}

fn streaming(e: Ep<'_>) -> Ep<'_> {
    Ep { stream: true, ..e }
}

fn config_text(base: &dyn Fn(&str) -> String, endpoints: &[Ep<'_>]) -> String {
    endpoints
        .iter()
        .map(|e| {
            format!(
                "[[endpoint]]\nid = \"{}\"\nstyle = \"{}\"\nbase_url = \"{}\"\nmodel = \"{}\"\napi_key_env = \"{}\"\nprovider_id = \"{}\"\nstream = {}\n\n",
                e.name,
                e.style,
                base(e.name),
                if e.style == "openai" { "gpt-4.1-mini" } else { "claude-haiku-4-5" },
                e.key_var,
                e.provider,
                e.stream
            )
        })
        .collect()
}

async fn harness(fake: &FakeProvider, endpoints: &[Ep<'_>]) -> Harness {
    set_key();
    let text = config_text(&|name| fake.base_url(name), endpoints);
    Harness::with_config(tempfile::tempdir().unwrap(), &text).await
}

fn target(id: &str) -> Value {
    json!({"id": id, "dispatcher": "http", "runner": id})
}

fn work() -> Value {
    json!({"messages": [{"role": "system", "content": "Answer in one word."},
                        {"role": "user", "content": "Is the build green?"}],
           "params": {"temperature": 0}})
}

/// Starts a utility call with the work; returns the route id.
async fn start(h: &Harness, profile: &str, invocation: &str) -> String {
    let (status, v) = h
        .post(
            "/api/v1/routes",
            json!({"profile_id": profile, "caller": {"kind": "utility", "reference": "summary", "invocation_id": invocation},
                   "work": work()}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// Waits until the route's latest event is a success. (The detail's snapshot, history and
/// dispatches are read by separate statements, so the check is on history and snapshot
/// together: the latest history row is the success and the snapshot is at its generation.)
async fn wait_succeeded(h: &Harness, id: &str) -> Value {
    h.wait_for(id, "a success", |r| {
        r["history"].as_array().and_then(|e| e.last()).is_some_and(|e| {
            e["event"] == "succeeded" && e["generation"] == r["route"]["snapshot"]["generation"]
        })
    })
    .await
}

fn deadline_secs(h: &Harness, snapshot: &Value) -> i64 {
    let d: chrono::DateTime<chrono::Utc> = serde_json::from_value(snapshot["deadline"].clone()).unwrap();
    (d - h.now()).num_seconds()
}

fn request_ids(received: &[Received]) -> Vec<String> {
    received
        .iter()
        .map(|r| r.headers["x-client-request-id"].clone())
        .collect()
}

/// The last failure's classification in the route's history.
fn last_classification(route: &Value) -> Value {
    route["history"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["event"] == "failed")
        .map(|e| e["classification"].clone())
        .unwrap_or(Value::Null)
}

/// Spec scenario 1 through the dispatcher: Anthropic answers 529 `overloaded_error` to every
/// call; the transient policy waits 5, 10 and 20 seconds, then skips to the OpenAI endpoint,
/// whose answer becomes the route's result.
#[tokio::test]
async fn s1_capacity_errors_from_a_provider_wait_5_10_and_20_seconds_then_skip_to_the_next_endpoint() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![anthropic_overloaded()]);
    fake.script("backup", vec![openai_ok("green")]);
    let h = harness(
        &fake,
        &[
            ep("main", "anthropic", "anthropic"),
            ep("backup", "openai", "openai"),
        ],
    )
    .await;
    let p = h
        .profile(
            json!({"name": "capacity", "targets": [target("main"), target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), disabled()),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = start(&h, &p, "inv-1").await;
    let mut waits = Vec::new();
    for ordinal in 1..=3 {
        let s = h
            .wait_for(&r, &format!("retry {ordinal}"), |r| {
                let s = &r["route"]["snapshot"];
                s["state"] == "retry_wait" && s["retry_ordinal"] == ordinal
            })
            .await["route"]["snapshot"]
            .clone();
        assert_eq!(s["code"], "provider_overloaded", "{s}");
        assert_eq!(s["class"], "transient");
        assert_eq!(s["max_retries"], 3);
        let wait = deadline_secs(&h, &s);
        waits.push(wait);
        h.advance(wait - 1).await;
        assert_eq!(h.snapshot(&r).await["state"], "retry_wait");
        h.advance(1).await;
    }
    assert_eq!(waits, vec![5, 10, 20]);
    let route = wait_succeeded(&h, &r).await;
    let s = &route["route"]["snapshot"];
    assert_eq!(s["state"], "active", "{route}");
    assert_eq!(s["candidate_id"], "backup");
    let events = history_events(&route);
    assert!(events.contains(&"failed->switching".to_owned()), "{events:?}");
    assert!(events.contains(&"succeeded->active".to_owned()), "{events:?}");
    let main = fake.received("main");
    let backup = fake.received("backup");
    assert_eq!((main.len(), backup.len()), (4, 1), "4 calls to main, 1 to backup");
    // What Anthropic received: its path, version, key header, model, system field, max_tokens.
    for m in &main {
        assert_eq!(m.path, "/main/v1/messages");
        assert_eq!(m.headers["anthropic-version"], "2023-06-01");
        assert_eq!(m.headers["x-api-key"], KEY);
        assert_eq!(m.body["model"], "claude-haiku-4-5");
        assert_eq!(m.body["system"], "Answer in one word.");
        assert_eq!(
            m.body["messages"],
            json!([{"role": "user", "content": "Is the build green?"}])
        );
        assert_eq!(m.body["max_tokens"], 4096);
        assert!(m.body.get("stream").is_none());
    }
    assert_eq!(backup[0].path, "/backup/chat/completions");
    assert_eq!(backup[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(backup[0].body["model"], "gpt-4.1-mini");
    assert_eq!(backup[0].body["messages"], work()["messages"]);
    assert_eq!(backup[0].body["temperature"], 0);
    let result = h.get(&format!("/api/v1/routes/{r}/result")).await;
    let body: Value = serde_json::from_str(result["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "green");
}

/// Spec scenario 2 through the dispatcher: an OpenAI-compatible gateway's daily cap (429
/// `free-models-per-day`) whose trusted `X-RateLimit-Reset` header is a minute away: the hard
/// policy waits for it durably, then retries the same endpoint once.
#[tokio::test]
async fn s2_a_quota_reset_one_minute_away_in_a_trusted_header_is_waited_for_then_retried_once() {
    let fake = FakeProvider::start().await;
    let h = harness(&fake, &[ep("router", "openai", "openrouter")]).await;
    fake.script(
        "router",
        vec![
            openrouter_per_day(h.now() + TimeDelta::seconds(60)),
            openai_ok("later"),
        ],
    );
    let p = h
        .profile(json!({"name": "quota", "targets": [target("router")],
          "policy": {"version": 1, "candidates": [
            candidate("router", disabled(), class_policy(0, 0, 300, "stop"))]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "waiting_for_reset").await;
    assert_eq!(s["code"], "quota_limited", "{s}");
    assert_eq!(s["class"], "hard");
    assert_eq!(s["pending_outcome"], "wait_for_reset");
    assert_eq!(deadline_secs(&h, &s), 60);
    let timers: i64 =
        server::store::sql::query("SELECT COUNT(*) FROM timers WHERE route_id = ? AND kind = 'deadline'")
            .bind(&r)
            .scalar(&h.pool)
            .await
            .unwrap();
    assert_eq!(timers, 1, "the wait is a durable timer row");
    h.advance(59).await;
    assert_eq!(h.snapshot(&r).await["state"], "waiting_for_reset");
    assert_eq!(fake.received("router").len(), 1);
    h.advance(1).await;
    let route = wait_succeeded(&h, &r).await;
    assert_eq!(route["route"]["snapshot"]["state"], "active", "{route}");
    assert_eq!(route["route"]["snapshot"]["candidate_id"], "router");
    let kinds: Vec<&str> = route["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["initial", "post_wait"]);
    assert_eq!(fake.received("router").len(), 2, "retried exactly once");
}

#[tokio::test]
async fn the_routing_invocation_id_header_is_unique_per_attempt_and_names_route_attempt_and_invocation() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_503(), openai_503(), openai_ok("ok")]);
    let h = harness(&fake, &[ep("main", "openai", "openai")]).await;
    let p = h
        .profile(json!({"name": "ids", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 1, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "task-42").await;
    for ordinal in 1..=2 {
        let s = h
            .wait_for(&r, &format!("retry {ordinal}"), |r| {
                r["route"]["snapshot"]["retry_ordinal"] == ordinal
                    && r["route"]["snapshot"]["state"] == "retry_wait"
            })
            .await["route"]["snapshot"]
            .clone();
        assert_eq!(s["code"], "model_capacity", "{s}");
        let wait = deadline_secs(&h, &s);
        h.advance(wait).await;
    }
    let route = wait_succeeded(&h, &r).await;
    let ids = request_ids(&fake.received("main"));
    assert_eq!(ids.len(), 3);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        3,
        "one id per attempt: {ids:?}"
    );
    let attempts: Vec<u64> = route["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["attempt"].as_u64().unwrap())
        .collect();
    let want: Vec<String> = attempts.iter().map(|a| format!("{r}/{a}/task-42")).collect();
    assert_eq!(ids, want);
}

#[tokio::test]
async fn a_success_stores_the_response_body_as_the_result_until_the_caller_clears_it() {
    let fake = FakeProvider::start().await;
    let ok = anthropic_ok("Yes.");
    fake.script("main", vec![ok.clone()]);
    let h = harness(&fake, &[ep("main", "anthropic", "anthropic")]).await;
    let p = h
        .profile(json!({"name": "ok", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let route = wait_succeeded(&h, &r).await;
    assert_eq!(route["route"]["snapshot"]["state"], "active");
    let result = h.get(&format!("/api/v1/routes/{r}/result")).await;
    let Reply::Json { body, .. } = ok else {
        unreachable!()
    };
    assert_eq!(result["body"], body, "the body exactly as the provider sent it");
    assert_eq!(
        result["generation"],
        route["dispatches"][0]["invocation_generation"]
    );
    let (status, _) = h
        .call(
            axum::http::Method::DELETE,
            &format!("/api/v1/routes/{r}/result"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = h
        .call(
            axum::http::Method::GET,
            &format!("/api/v1/routes/{r}/result"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

// ------------------------------------------------------------------------------------------------
// Each error shape, classified and acted on
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn openai_429_with_go_duration_reset_headers_waits_for_the_exhausted_limit_then_succeeds() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_rate_limited(), openai_ok("ok")]);
    let h = harness(&fake, &[ep("main", "openai", "openai")]).await;
    let p = h
        .profile(json!({"name": "rpm", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(1, 5, 600, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "waiting_for_reset").await;
    assert_eq!(s["code"], "rate_limited", "{s}");
    assert_eq!(s["class"], "transient");
    // x-ratelimit-reset-requests: 6m0s (requests exhausted), not the tokens' 2s.
    assert_eq!(deadline_secs(&h, &s), 360);
    let route = h.route(&r).await;
    assert_eq!(
        last_classification(&route)["classifier_rule"],
        "openai.rate-limit-exceeded"
    );
    h.advance(360).await;
    wait_succeeded(&h, &r).await;
    assert_eq!(fake.received("main").len(), 2);
}

#[tokio::test]
async fn anthropic_429_whose_exhausted_limit_resets_in_two_hours_is_a_quota_wait_from_the_header() {
    let fake = FakeProvider::start().await;
    let h = harness(&fake, &[ep("main", "anthropic", "anthropic")]).await;
    fake.script(
        "main",
        vec![
            anthropic_rate_limited(h.now() + TimeDelta::hours(2)),
            anthropic_ok("ok"),
        ],
    );
    let p = h
        .profile(json!({"name": "itpm", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(1, 5, 0, "stop"), class_policy(0, 0, 10_800, "stop"))]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "waiting_for_reset").await;
    // A rate limit whose trusted reset is more than an hour away is a quota (hard).
    assert_eq!(s["code"], "quota_limited", "{s}");
    assert_eq!(s["class"], "hard");
    assert_eq!(deadline_secs(&h, &s), 7_200);
    h.advance(7_200).await;
    wait_succeeded(&h, &r).await;
    assert_eq!(fake.received("main").len(), 2);
}

#[tokio::test]
async fn anthropic_401_authentication_error_is_hard_and_skips_to_the_next_endpoint() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![anthropic_unauthorized()]);
    fake.script("backup", vec![openai_ok("ok")]);
    let h = harness(
        &fake,
        &[
            ep("main", "anthropic", "anthropic"),
            ep("backup", "openai", "openai"),
        ],
    )
    .await;
    let p = h
        .profile(
            json!({"name": "auth", "targets": [target("main"), target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "stop"), class_policy(0, 0, 0, "skip")),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = start(&h, &p, "inv-1").await;
    let route = wait_succeeded(&h, &r).await;
    assert_eq!(route["route"]["snapshot"]["candidate_id"], "backup", "{route}");
    let c = last_classification(&route);
    assert_eq!(c["code"], "auth_required");
    assert_eq!(c["class"], "hard");
    assert_eq!(c["classifier_rule"], "anthropic.authentication-error");
    assert_eq!(fake.received("main").len(), 1, "a hard error is not retried");
}

#[tokio::test]
async fn openai_insufficient_quota_is_hard_and_stops_for_a_person_without_another_provider() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_insufficient_quota()]);
    fake.script("backup", vec![anthropic_ok("ok")]);
    let h = harness(
        &fake,
        &[
            ep("main", "openai", "openai"),
            ep("backup", "anthropic", "anthropic"),
        ],
    )
    .await;
    let p = h
        .profile(
            json!({"name": "quota", "targets": [target("main"), target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), class_policy(0, 0, 600, "stop")),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "action_required").await;
    assert_eq!(s["action_reason"], "policy_stop", "{s}");
    assert_eq!(s["code"], "quota_limited");
    assert_eq!(s["class"], "hard");
    assert!(
        s["deadline"].is_null(),
        "no reset to wait for: insufficient_quota has none"
    );
    assert!(fake.received("backup").is_empty());
}

#[tokio::test]
async fn openai_model_not_found_is_hard_and_skips_to_the_next_endpoint() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_model_not_found()]);
    fake.script("backup", vec![anthropic_ok("ok")]);
    let h = harness(
        &fake,
        &[
            ep("main", "openai", "openai"),
            ep("backup", "anthropic", "anthropic"),
        ],
    )
    .await;
    let p = h
        .profile(
            json!({"name": "model", "targets": [target("main"), target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", disabled(), class_policy(0, 0, 0, "skip")),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = start(&h, &p, "inv-1").await;
    let route = wait_succeeded(&h, &r).await;
    assert_eq!(route["route"]["snapshot"]["candidate_id"], "backup");
    let c = last_classification(&route);
    assert_eq!(c["code"], "model_unavailable", "{route}");
    assert_eq!(c["classifier_rule"], "openai.model-not-found");
}

#[tokio::test]
async fn openai_503_overloaded_model_is_transient_and_retried_on_the_same_endpoint() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_503(), openai_ok("ok")]);
    let h = harness(&fake, &[ep("main", "openai", "openai")]).await;
    let p = h
        .profile(json!({"name": "503", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(2, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "retry_wait").await;
    assert_eq!(s["code"], "model_capacity", "{s}");
    assert_eq!(s["class"], "transient");
    assert_eq!(deadline_secs(&h, &s), 5);
    h.advance(5).await;
    wait_succeeded(&h, &r).await;
    assert_eq!(fake.received("main").len(), 2);
}

#[tokio::test]
async fn a_missing_key_variable_is_missing_credentials_sends_nothing_and_names_only_the_variable() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![openai_ok("never")]);
    let h = harness(
        &fake,
        &[Ep {
            key_var: "RECOURSE_TEST_HTTP_UNSET_KEY",
            ..ep("main", "openai", "openai")
        }],
    )
    .await;
    let p = h
        .profile(json!({"name": "nokey", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "skip"), class_policy(0, 0, 0, "stop"))]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    // Found before anything is sent: reported with the launch itself.
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "action_required", "{s}");
    assert_eq!(s["action_reason"], "policy_stop");
    assert_eq!(s["code"], "missing_credentials");
    assert_eq!(s["class"], "hard");
    let c = last_classification(&h.route(&r).await);
    assert_eq!(c["classifier_rule"], "http.key-variable-unset");
    assert_eq!(c["phase"], "launch");
    assert!(fake.received("main").is_empty(), "nothing was sent without a key");
}

#[tokio::test]
async fn a_refused_connection_is_not_sent_and_a_loopback_endpoint_is_a_configuration_problem() {
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    set_key();
    let text = config_text(
        &|name| format!("http://{addr}/{name}"),
        &[ep("main", "openai", "openai")],
    );
    let h = Harness::with_config(tempfile::tempdir().unwrap(), &text).await;
    let p = h
        .profile(json!({"name": "down", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "stop"), class_policy(0, 0, 0, "stop"))]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "action_required").await;
    assert_eq!(s["code"], "provider_not_configured", "{s}");
    let c = last_classification(&h.route(&r).await);
    assert_eq!(c["classifier_rule"], "network.local-endpoint-unreachable");
    assert_eq!(c["phase"], "launch");
}

// ------------------------------------------------------------------------------------------------
// Streams
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_stream_that_breaks_before_any_content_is_retried_and_a_whole_stream_is_assembled_into_the_result()
{
    let fake = FakeProvider::start().await;
    fake.script(
        "main",
        vec![
            Reply::Sse {
                frames: openai_stream_frames(&[], false),
                end: SseEnd::Drop,
            },
            Reply::Sse {
                frames: openai_stream_frames(&["gre", "en"], true),
                end: SseEnd::Close,
            },
        ],
    );
    let h = harness(&fake, &[streaming(ep("main", "openai", "openai"))]).await;
    let p = h
        .profile(json!({"name": "stream", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(1, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "retry_wait").await;
    assert_eq!(s["code"], "agent_transport_lost", "{s}");
    let route = h.route(&r).await;
    let c = last_classification(&route);
    assert_eq!(c["classifier_rule"], "http.stream-ended-early");
    assert_eq!(c["phase"], "streaming");
    h.advance(5).await;
    wait_succeeded(&h, &r).await;
    let received = fake.received("main");
    assert_eq!(received[0].body["stream"], true);
    assert_eq!(received[0].headers["accept"], "text/event-stream");
    let result = h.get(&format!("/api/v1/routes/{r}/result")).await;
    let message: Value = serde_json::from_str(result["body"].as_str().unwrap()).unwrap();
    assert_eq!(message["object"], "chat.completion");
    assert_eq!(message["choices"][0]["message"]["content"], "green");
    assert_eq!(message["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn a_stream_that_breaks_after_the_first_content_byte_stops_for_a_person() {
    let fake = FakeProvider::start().await;
    fake.script(
        "main",
        vec![Reply::Sse {
            frames: anthropic_stream_frames(&["Ye"], false),
            end: SseEnd::Drop,
        }],
    );
    fake.script("backup", vec![openai_ok("ok")]);
    let h = harness(
        &fake,
        &[
            streaming(ep("main", "anthropic", "anthropic")),
            ep("backup", "openai", "openai"),
        ],
    )
    .await;
    let p = h
        .profile(
            json!({"name": "partial", "targets": [target("main"), target("backup")],
          "policy": {"version": 1, "candidates": [
            candidate("main", class_policy(3, 5, 0, "skip"), class_policy(3, 5, 0, "skip")),
            candidate("backup", disabled(), disabled())]}}),
        )
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "action_required").await;
    assert_eq!(s["action_reason"], "effect_unsafe", "{s}");
    assert_eq!(s["candidate_id"], "main");
    let route = h.route(&r).await;
    let failed = route["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .unwrap();
    assert_eq!(failed["classification"]["code"], "agent_transport_lost");
    assert_eq!(failed["classification"]["phase"], "streaming", "{failed}");
    assert_eq!(fake.received("main").len(), 1, "never sent again");
    assert!(fake.received("backup").is_empty(), "nor moved on");
}

#[tokio::test]
async fn an_anthropic_error_event_before_content_is_classified_from_its_data_and_retried() {
    let fake = FakeProvider::start().await;
    let mut frames = anthropic_stream_frames(&[], false);
    frames.push(anthropic_stream_error_frame());
    fake.script(
        "main",
        vec![
            Reply::Sse {
                frames,
                end: SseEnd::Close,
            },
            Reply::Sse {
                frames: anthropic_stream_frames(&["Yes", "."], true),
                end: SseEnd::Close,
            },
        ],
    );
    let h = harness(&fake, &[streaming(ep("main", "anthropic", "anthropic"))]).await;
    let p = h
        .profile(json!({"name": "sse-error", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(1, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "retry_wait").await;
    assert_eq!(s["code"], "provider_overloaded", "{s}");
    assert_eq!(
        last_classification(&h.route(&r).await)["classifier_rule"],
        "anthropic.overloaded-error"
    );
    h.advance(5).await;
    wait_succeeded(&h, &r).await;
    let result = h.get(&format!("/api/v1/routes/{r}/result")).await;
    let message: Value = serde_json::from_str(result["body"].as_str().unwrap()).unwrap();
    assert_eq!(message["content"], json!([{"type": "text", "text": "Yes."}]));
    assert_eq!(message["stop_reason"], "end_turn");
}

#[tokio::test]
async fn an_openai_error_object_after_content_stops_for_a_person() {
    let fake = FakeProvider::start().await;
    let mut frames = openai_stream_frames(&["Gr"], false);
    frames.push(openai_stream_error_frame());
    fake.script(
        "main",
        vec![Reply::Sse {
            frames,
            end: SseEnd::Close,
        }],
    );
    let h = harness(&fake, &[streaming(ep("main", "openai", "openai"))]).await;
    let p = h
        .profile(json!({"name": "late-error", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    let s = h.wait_state(&r, "action_required").await;
    assert_eq!(s["action_reason"], "effect_unsafe", "{s}");
    let c = last_classification(&h.route(&r).await);
    assert_eq!(c["code"], "provider_unavailable");
    assert_eq!(c["classifier_rule"], "openai.server-error");
}

#[tokio::test]
async fn a_person_stopping_the_route_drops_the_call_in_flight() {
    let fake = FakeProvider::start().await;
    fake.script("main", vec![Reply::Hang]);
    let h = harness(&fake, &[ep("main", "openai", "openai")]).await;
    let p = h
        .profile(json!({"name": "hang", "targets": [target("main")],
          "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "stop"), disabled())]}}))
        .await;
    let r = start(&h, &p, "inv-1").await;
    fake.wait_received(1).await;
    let s = h.snapshot(&r).await;
    assert_eq!(s["state"], "active");
    let (status, out) = h
        .post(
            &format!("/api/v1/routes/{r}/actions"),
            json!({"action": "stop", "expected_generation": s["generation"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    // The fake sees its client go away: the request was dropped, not left running.
    fake.wait_dropped(1).await;
    let route = h.route(&r).await;
    assert_eq!(route["route"]["snapshot"]["state"], "action_required", "{route}");
    assert_eq!(route["dispatches"][0]["outcome"], "aborted");
}
