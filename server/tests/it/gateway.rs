//! The gateway end to end, in process: the real router, engine, SQLite file and http dispatcher,
//! real calls over loopback to the fake provider (`common/provider.rs`, through
//! `common/gateway.rs`), the manual clock. Nothing waits for time: a test waits for the fake's
//! next request or the route's next event, and moves the clock by hand.

use crate::common;

use axum::http::StatusCode;
use chrono::TimeDelta;
use common::{gateway::*, provider::*, *};
use serde_json::{json, Value};

/// The events of an SSE body, as `(event name, data)`.
fn events(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = None;
            let mut data = Vec::new();
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                }
            }
            (name, data.join("\n"))
        })
        .collect()
}

fn route_of(a: &Answer) -> String {
    a.header("x-recourse-route-id")
        .expect("the route's id")
        .to_owned()
}

#[tokio::test]
async fn an_overloaded_first_endpoint_is_absorbed_by_a_switch_and_the_client_gets_the_seconds_answer() {
    let rig = Rig::new(&[("main", "anthropic"), ("backup", "anthropic")]).await;
    rig.fake.script("main", vec![anthropic_overloaded()]);
    let ok = anthropic_ok("green");
    rig.fake.script("backup", vec![ok.clone()]);
    let p = rig.profile("fast", &["main", "backup"]).await;
    let grouped_before = rig.h.engine.write_stats().grouped_jobs;
    let a = rig
        .post(
            "/v1/messages",
            &[("anthropic-beta", "tools-2024-04-04")],
            messages_request("fast", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    let Reply::Json { body, .. } = ok else {
        unreachable!()
    };
    assert_eq!(a.text(), body, "the answer exactly as the provider sent it");
    assert_eq!(a.header("x-recourse-candidate"), Some("backup"));
    assert_eq!(a.header("x-recourse-attempts"), Some("2"));
    let r = route_of(&a);
    // What the providers received: the request as the client sent it, the endpoint's model,
    // the client's beta header, the endpoint's key.
    let sent = &rig.fake.received("backup")[0];
    assert_eq!(sent.body["model"], "claude-haiku-4-5");
    assert_eq!(
        sent.body["system"],
        json!([{"type": "text", "text": "Answer in one word."}])
    );
    assert_eq!(sent.body["max_tokens"], 64);
    assert!(sent.body.get("stream").is_none());
    assert_eq!(sent.headers["anthropic-beta"], "tools-2024-04-04");
    assert_eq!(sent.headers["x-api-key"], KEY);
    assert_eq!(rig.fake.received("main").len(), 1);
    // The route is like any other: a utility call on the profile, completed, no result kept.
    let s = rig.h.wait_state(&r, "completed").await;
    assert_eq!(s["candidate_id"], "backup");
    let route = rig.h.route(&r).await;
    assert_eq!(route["route"]["profile_id"], p);
    assert_eq!(route["route"]["caller"]["kind"], "utility");
    assert_eq!(route["route"]["caller"]["reference"], "gateway:anthropic");
    let events = history_events(&route);
    assert!(events.contains(&"failed->switching".to_owned()), "{events:?}");
    assert!(events.contains(&"complete->completed".to_owned()), "{events:?}");
    // Its success and its completion are one commit (one delivery to the writer, committed as
    // a group; a completion submitted after the success was committed would be a job alone).
    let grouped = rig.h.engine.write_stats().grouped_jobs - grouped_before;
    assert!(
        grouped >= 2,
        "the success and the completion were not committed together ({grouped} grouped)"
    );
    // Audited as every route start is: the token that called, the route, its profile.
    let log = rig.h.get("/api/v1/audit").await;
    let start = log
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["action"] == "route.start" && row["target"] == r.as_str())
        .cloned()
        .expect("the call's route start is in the audit log");
    assert_eq!(start["actor_kind"], "token");
    assert_eq!(start["detail"]["profile_id"], p.as_str());
    assert_eq!(start["detail"]["caller"]["kind"], "utility");
    let (status, _) = rig
        .h
        .call(
            axum::http::Method::GET,
            &format!("/api/v1/routes/{r}/result"),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the client has the answer; nothing is kept"
    );
}

#[tokio::test]
async fn an_openai_stream_starts_on_the_second_endpoint_after_the_first_is_overloaded() {
    let rig = Rig::new(&[("main", "openai"), ("backup", "openai")]).await;
    rig.fake.script("main", vec![openai_503()]);
    rig.fake.script(
        "backup",
        vec![Reply::Sse {
            frames: openai_stream_frames(&["gr", "een"], true),
            end: SseEnd::Close,
        }],
    );
    rig.profile("fast", &["main", "backup"]).await;
    let mut body = chat_request("fast", true);
    body["stream_options"] = json!({"include_usage": true});
    let a = rig.post("/v1/chat/completions", &[], body).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(a.header("content-type"), Some("text/event-stream"));
    assert_eq!(a.header("x-recourse-candidate"), Some("backup"));
    assert_eq!(a.header("x-recourse-attempts"), Some("2"));
    let want = events(&openai_stream_frames(&["gr", "een"], true).concat());
    assert_eq!(
        events(&a.text()),
        want,
        "every event as the provider sent it, in order"
    );
    let sent = &rig.fake.received("backup")[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.headers["accept"], "text/event-stream");
    rig.h.wait_state(&route_of(&a), "completed").await;
}

#[tokio::test]
async fn an_anthropic_stream_holds_back_its_first_events_until_content_so_a_failure_before_it_switches() {
    let rig = Rig::new(&[("main", "anthropic"), ("backup", "anthropic")]).await;
    // The first endpoint opens its stream, then sends an overloaded error before any content.
    let mut broken = anthropic_stream_frames(&[], false);
    broken.push(anthropic_stream_error_frame());
    rig.fake.script(
        "main",
        vec![Reply::Sse {
            frames: broken,
            end: SseEnd::Close,
        }],
    );
    rig.fake.script(
        "backup",
        vec![Reply::Sse {
            frames: anthropic_stream_frames(&["Hel", "lo"], true),
            end: SseEnd::Close,
        }],
    );
    rig.profile("fast", &["main", "backup"]).await;
    let a = rig
        .post("/v1/messages", &[], messages_request("fast", true))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    let got = events(&a.text());
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_deref().unwrap_or("")).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "one message, the second endpoint's: nothing of the first reached the client"
    );
    assert!(got[0].1.contains("msg_fake2"));
    assert_eq!(a.header("x-recourse-candidate"), Some("backup"));
}

#[tokio::test]
async fn a_failure_after_the_first_streamed_chunk_ends_with_the_styles_error_and_stops_for_a_person() {
    let rig = Rig::new(&[("main", "anthropic"), ("backup", "anthropic")]).await;
    rig.fake.script(
        "main",
        vec![Reply::Sse {
            frames: anthropic_stream_frames(&["Hel"], false),
            end: SseEnd::Drop,
        }],
    );
    rig.fake.script("backup", vec![anthropic_ok("never")]);
    rig.profile("fast", &["main", "backup"]).await;
    let a = rig
        .post("/v1/messages", &[], messages_request("fast", true))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let got = events(&a.text());
    let (last_name, last_data) = got.last().unwrap();
    assert_eq!(last_name.as_deref(), Some("error"), "{got:?}");
    let error: Value = serde_json::from_str(last_data).unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "api_error");
    assert!(
        got.iter().any(|(_, d)| d.contains("\"Hel\"")),
        "the content before it came through"
    );
    let s = rig.h.wait_state(&route_of(&a), "action_required").await;
    assert_eq!(s["action_reason"], "effect_unsafe", "{s}");
    assert_eq!(rig.fake.received("main").len(), 1);
    assert!(
        rig.fake.received("backup").is_empty(),
        "no second request after the first byte"
    );

    // The OpenAI style ends such a stream with a `data:` error object and no `[DONE]`.
    let rig = Rig::new(&[("o-main", "openai")]).await;
    rig.fake.script(
        "o-main",
        vec![Reply::Sse {
            frames: openai_stream_frames(&["gr"], false),
            end: SseEnd::Drop,
        }],
    );
    rig.profile("o", &["o-main"]).await;
    let a = rig
        .post("/v1/chat/completions", &[], chat_request("o", true))
        .await;
    let got = events(&a.text());
    let last: Value = serde_json::from_str(&got.last().unwrap().1).unwrap();
    assert_eq!(last["error"]["type"], "server_error", "{got:?}");
    assert!(!a.text().contains("[DONE]"));
    rig.h.wait_state(&route_of(&a), "action_required").await;
}

#[tokio::test]
async fn a_quota_that_outlasts_the_clients_wait_is_a_429_with_retry_after_and_the_route_keeps_waiting() {
    let rig = Rig::new(&[("router", "openai")]).await;
    rig.fake.script(
        "router",
        vec![openrouter_per_day(rig.h.now() + TimeDelta::seconds(600))],
    );
    rig.profile("daily", &["router"]).await;
    let a = rig
        .post(
            "/v1/chat/completions",
            &[("x-recourse-max-wait", "30")],
            chat_request("daily", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS, "{}", a.text());
    assert_eq!(a.header("retry-after"), Some("600"));
    let e = a.json();
    assert_eq!(e["error"]["type"], "rate_limit_error");
    assert!(
        !a.text().contains("free-models-per-day"),
        "never the provider's text"
    );
    assert_eq!(a.header("x-recourse-candidate"), Some("router"));
    assert_eq!(a.header("x-recourse-attempts"), Some("1"));
    let s = rig.h.snapshot(&route_of(&a)).await;
    assert_eq!(s["state"], "waiting_for_reset", "the route keeps its state: {s}");
    assert_eq!(s["code"], "quota_limited");

    // Anthropic: a rate limit whose reset is 10 minutes away, and no wait allowed.
    let rig = Rig::new(&[("main", "anthropic")]).await;
    rig.fake.script(
        "main",
        vec![anthropic_rate_limited(rig.h.now() + TimeDelta::seconds(600))],
    );
    rig.profile("fast", &["main"]).await;
    let a = rig
        .post(
            "/v1/messages",
            &[("x-recourse-max-wait", "0")],
            messages_request("fast", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS, "{}", a.text());
    assert_eq!(a.json()["error"]["type"], "rate_limit_error");
    assert_eq!(a.header("retry-after"), Some("600"));
}

#[tokio::test]
async fn a_wait_within_the_clients_wait_is_held_and_the_retry_answers() {
    let rig = Rig::new(&[("main", "openai")]).await;
    rig.fake.script(
        "main",
        vec![
            openrouter_per_day(rig.h.now() + TimeDelta::seconds(20)),
            openai_ok("later"),
        ],
    );
    rig.profile("daily", &["main"]).await;
    let call = tokio::spawn({
        let req = rig.request(
            "POST",
            "/v1/chat/completions",
            &[("x-recourse-max-wait", "30")],
            Some(&chat_request("daily", false)),
        );
        let app = rig.h.app.clone();
        async move {
            use tower::ServiceExt;
            let resp = app.oneshot(req).await.unwrap();
            let status = resp.status();
            let headers = resp.headers().clone();
            let body = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .unwrap()
                .to_bytes();
            (status, headers, body)
        }
    });
    rig.fake.wait_received(1).await;
    let routes = rig.h.get("/api/v1/routes?caller_kind=utility").await;
    let r = routes[0]["id"].as_str().unwrap().to_owned();
    rig.h.wait_state(&r, "waiting_for_reset").await;
    rig.h.advance(20).await;
    let (status, headers, body) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "later");
    assert_eq!(headers["x-recourse-attempts"], "2");
    assert_eq!(rig.fake.received("main").len(), 2);
}

#[tokio::test]
async fn a_client_that_goes_away_abandons_its_route_and_the_running_call_is_dropped() {
    let rig = Rig::new(&[("main", "anthropic")]).await;
    rig.fake.script("main", vec![Reply::Hang]);
    rig.profile("slow", &["main"]).await;
    let req = rig.request(
        "POST",
        "/v1/messages",
        &[],
        Some(&messages_request("slow", false)),
    );
    let app = rig.h.app.clone();
    let call = tokio::spawn(async move {
        use tower::ServiceExt;
        let _ = app.oneshot(req).await;
    });
    rig.fake.wait_received(1).await;
    let routes = rig.h.get("/api/v1/routes?caller_kind=utility").await;
    let r = routes[0]["id"].as_str().unwrap().to_owned();
    call.abort();
    let s = rig.h.wait_state(&r, "abandoned").await;
    assert_eq!(s["candidate_id"], "main");
    rig.fake.wait_dropped(1).await;
}

#[tokio::test]
async fn a_call_needs_a_token_with_operate_routes_as_bearer_or_x_api_key_and_refusals_take_the_styles_shape()
{
    let rig = Rig::new(&[("main", "anthropic"), ("o", "openai")]).await;
    rig.fake.script("main", vec![anthropic_ok("hi")]);
    rig.profile("fast", &["main"]).await;
    let token = rig.h.token.clone();
    let a = rig
        .post(
            "/v1/messages",
            &[("x-api-key", token.as_str())],
            messages_request("fast", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "x-api-key: {}", a.text());
    for (headers, style) in [
        (vec![("x-api-key", "")], "anthropic"),
        (vec![("x-api-key", "rct_unknownunknownunknown")], "anthropic"),
        (vec![("authorization", "Bearer sk-ant-whatever")], "anthropic"),
        (vec![("authorization", "")], "openai"),
    ] {
        let path = if style == "anthropic" {
            "/v1/messages"
        } else {
            "/v1/chat/completions"
        };
        let a = rig.post(path, &headers, messages_request("fast", false)).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{headers:?}");
        assert_eq!(a.header("www-authenticate"), Some("Bearer"));
        let e = a.json();
        if style == "anthropic" {
            assert_eq!(e["type"], "error");
            assert_eq!(e["error"]["type"], "authentication_error");
        } else {
            assert_eq!(e["error"]["type"], "authentication_error");
            assert_eq!(e["error"]["code"], "unauthenticated");
        }
        assert!(!a.text().contains("sk-ant-whatever"), "never the credentials");
    }
    let viewer = account_token(&rig.h.auth, "watcher", "viewer", ADMIN_PASSWORD).await;
    let a = rig
        .post(
            "/v1/messages",
            &[("x-api-key", viewer.as_str())],
            messages_request("fast", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(a.json()["error"]["type"], "permission_error");
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`operate_routes`"));
    assert_eq!(rig.fake.received("main").len(), 1);
}

#[tokio::test]
async fn a_model_is_a_profile_by_id_or_name_of_the_calls_style_and_anything_else_is_refused_in_its_shape() {
    let rig = Rig::new(&[("main", "anthropic"), ("o", "openai")]).await;
    rig.fake.script("main", vec![anthropic_ok("hi")]);
    let p = rig.profile("fast", &["main"]).await;
    rig.profile("mixed", &["main", "o"]).await;
    let sim = rig
        .h
        .profile(
            json!({"name": "sim", "targets": [sim("s", "sim", json!([succeed()]))],
                        "policy": {"version": 1, "candidates": [candidate("s", disabled(), disabled())]}}),
        )
        .await;
    assert_eq!(
        rig.post("/v1/messages", &[], messages_request(&p, false))
            .await
            .status,
        StatusCode::OK
    );
    // A name several profiles have is refused; each is still reached by its id.
    let twin = rig.profile("twin", &["main"]).await;
    rig.profile("twin", &["main"]).await;
    let a = rig
        .post("/v1/messages", &[], messages_request("twin", false))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(
        a.text().contains("Several profiles have this name"),
        "{}",
        a.text()
    );
    let a = rig
        .post("/v1/messages", &[], messages_request(&twin, false))
        .await;
    assert_eq!(a.status, StatusCode::OK, "by id: {}", a.text());
    let a = rig
        .post("/v1/messages", &[], messages_request("nope", false))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.json()["error"]["type"], "not_found_error");
    assert!(a.header("x-recourse-route-id").is_none(), "no route was started");
    let a = rig
        .post("/v1/chat/completions", &[], chat_request("nope", false))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.json()["error"]["code"], "model_not_found");
    for (path, body, says) in [
        (
            "/v1/chat/completions",
            chat_request("fast", false),
            "candidate `main` is an endpoint of the anthropic style",
        ),
        (
            "/v1/messages",
            messages_request("mixed", false),
            "candidate `o` is an endpoint of the openai style",
        ),
        (
            "/v1/messages",
            messages_request(&sim, false),
            "not an HTTP endpoint",
        ),
    ] {
        let a = rig.post(path, &[], body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(a.text().contains(says), "{}", a.text());
    }
    assert_eq!(rig.fake.received("main").len(), 2);
    let routes = rig.h.get("/api/v1/routes?caller_kind=utility").await;
    assert_eq!(
        routes.as_array().unwrap().len(),
        2,
        "a refused call starts no route"
    );
}

#[tokio::test]
async fn requests_past_the_gateways_limits_are_refused_in_the_styles_shape() {
    let rig = Rig::new(&[("main", "anthropic")]).await;
    rig.fake.script("main", vec![anthropic_ok("hi")]);
    rig.profile("fast", &["main"]).await;
    let big = json!({"model": "fast", "max_tokens": 1, "messages": [{"role": "user",
        "content": "x".repeat(policy::limits::MAX_GATEWAY_BODY_BYTES)}]});
    let a = rig.post("/v1/messages", &[], big).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(a.json()["error"]["type"], "request_too_large");
    let many: Vec<Value> = (0..=policy::limits::MAX_GATEWAY_MESSAGES)
        .map(|_| json!({"role": "user", "content": "x"}))
        .collect();
    let a = rig
        .post(
            "/v1/messages",
            &[],
            json!({"model": "fast", "max_tokens": 1, "messages": many}),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.json()["error"]["type"], "invalid_request_error");
    let a = rig
        .post(
            "/v1/messages",
            &[("x-recourse-max-wait", "601")],
            messages_request("fast", false),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.text().contains("x-recourse-max-wait"));
    let mut req = rig.request(
        "POST",
        "/v1/messages",
        &[],
        Some(&messages_request("fast", false)),
    );
    req.headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    let a = rig.send(req).await;
    assert_eq!(a.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(a.json()["type"], "error");
    assert!(rig.fake.received("main").is_empty());
}

#[tokio::test]
async fn a_token_has_at_most_its_share_of_open_calls() {
    let rig = Rig::new(&[("main", "openai")]).await;
    rig.fake.script("main", vec![Reply::Hang]);
    rig.profile("slow", &["main"]).await;
    let max = policy::limits::MAX_GATEWAY_CALLS_PER_TOKEN;
    let mut calls = Vec::new();
    for _ in 0..max {
        let req = rig.request(
            "POST",
            "/v1/chat/completions",
            &[],
            Some(&chat_request("slow", false)),
        );
        let app = rig.h.app.clone();
        calls.push(tokio::spawn(async move {
            use tower::ServiceExt;
            let _ = app.oneshot(req).await;
        }));
    }
    rig.fake.wait_received(max).await;
    let a = rig
        .post("/v1/chat/completions", &[], chat_request("slow", false))
        .await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.header("retry-after"), Some("1"));
    assert_eq!(
        rig.fake.received("main").len(),
        max,
        "the call past the limit sent nothing"
    );
    for c in &calls {
        c.abort();
    }
    rig.fake.wait_dropped(max).await;
    // Their places are free again.
    rig.fake.script("main", vec![openai_ok("ok")]);
    // (requests past the script's end repeat its last reply)
    let a = rig
        .post("/v1/chat/completions", &[], chat_request("slow", false))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
}

#[tokio::test]
async fn models_lists_the_profiles_the_token_may_name_in_the_style_it_speaks() {
    let rig = Rig::new(&[("a", "anthropic"), ("o", "openai")]).await;
    let anthropic = rig.profile("claude-like", &["a"]).await;
    let openai = rig.profile("gpt-like", &["o"]).await;
    rig.profile("mixed", &["a", "o"]).await;
    let a = rig.send(rig.request("GET", "/v1/models", &[], None)).await;
    assert_eq!(a.status, StatusCode::OK);
    let v = a.json();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [openai.as_str()]);
    let a = rig
        .send(rig.request("GET", "/v1/models", &[("anthropic-version", "2023-06-01")], None))
        .await;
    let v = a.json();
    assert_eq!(v["data"][0]["id"], anthropic);
    assert_eq!(v["data"][0]["display_name"], "claude-like");
    assert_eq!(v["has_more"], false);
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
}
