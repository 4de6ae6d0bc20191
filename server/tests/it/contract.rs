//! The published API contract (`/api/openapi.json`): every operation lists the statuses it can
//! answer with their bodies, the request schemas carry the limits and patterns of
//! `policy::limits`, the operations that create ids link to those that take them, and the server
//! agrees with the schema at its edges (a bound met is accepted, a bound passed is refused, an
//! integer written as `1.0` is an integer, an undeclared method is 405). Schemathesis checks the
//! same against a running server in `./dev test`; this is the fast check that can fail in
//! `cargo test`.

use crate::common;

use axum::http::{Method, StatusCode};
use common::*;
use policy::{input::check_line, limits};
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn doc() -> &'static Value {
    server::openapi::openapi()
}

fn schema(name: &str) -> &'static Value {
    &doc()["components"]["schemas"][name]
}

/// The statuses each operation can answer, as the handlers, extractors and guard produce them.
const OPERATIONS: &[(&str, &str, &[&str])] = &[
    ("get", "/api/v1/accounts", &["200", "401", "403", "503"]),
    (
        "post",
        "/api/v1/accounts",
        &["201", "400", "401", "403", "409", "413", "415", "422", "503"],
    ),
    (
        "patch",
        "/api/v1/accounts/{id}",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "get",
        "/api/v1/audit",
        &["200", "400", "401", "403", "422", "503"],
    ),
    ("get", "/api/v1/circuits", &["200", "401", "403", "503"]),
    (
        "post",
        "/api/v1/dispatches/claim",
        &["200", "204", "400", "401", "403", "413", "415", "422", "503"],
    ),
    (
        "post",
        "/api/v1/dispatches/{route_id}/{attempt}/ack",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "post",
        "/api/v1/dispatches/{route_id}/{attempt}/heartbeat",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "post",
        "/api/v1/dispatches/{route_id}/{attempt}/report",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    ("get", "/api/v1/events", &["200", "401", "403"]),
    (
        "get",
        "/api/v1/notifications",
        &["200", "400", "401", "403", "422", "503"],
    ),
    (
        "get",
        "/api/v1/notifications/channels",
        &["200", "401", "403", "503"],
    ),
    (
        "get",
        "/api/v1/notifications/deliveries",
        &["200", "400", "401", "403", "422", "503"],
    ),
    (
        "post",
        "/api/v1/notifications/read",
        &["204", "400", "401", "403", "413", "415", "503"],
    ),
    ("get", "/api/v1/profiles", &["200", "401", "403", "503"]),
    (
        "post",
        "/api/v1/profiles",
        &["201", "400", "401", "403", "413", "415", "422", "503"],
    ),
    (
        "get",
        "/api/v1/profiles/{id}",
        &["200", "400", "401", "403", "404", "503"],
    ),
    (
        "put",
        "/api/v1/profiles/{id}",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "delete",
        "/api/v1/profiles/{id}",
        &["204", "400", "401", "403", "404", "409", "503"],
    ),
    ("get", "/api/v1/roles", &["200", "401", "403", "503"]),
    (
        "post",
        "/api/v1/roles",
        &["201", "400", "401", "403", "409", "413", "415", "422", "503"],
    ),
    (
        "put",
        "/api/v1/roles/{name}",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "delete",
        "/api/v1/roles/{name}",
        &["204", "400", "401", "403", "404", "409", "503"],
    ),
    (
        "get",
        "/api/v1/routes",
        &["200", "400", "401", "403", "422", "503"],
    ),
    (
        "post",
        "/api/v1/routes",
        &[
            "201", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "get",
        "/api/v1/routes/{id}",
        &["200", "400", "401", "403", "404", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/abandon",
        &["200", "400", "401", "403", "404", "409", "413", "415", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/actions",
        &["200", "400", "401", "403", "404", "409", "413", "415", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/complete",
        &["200", "400", "401", "403", "404", "409", "413", "415", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/evidence",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "get",
        "/api/v1/routes/{id}/result",
        &["200", "400", "401", "403", "404", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/result",
        &["200", "400", "401", "403", "404", "409", "413", "415", "503"],
    ),
    (
        "delete",
        "/api/v1/routes/{id}/result",
        &["204", "400", "401", "403", "404", "503"],
    ),
    (
        "post",
        "/api/v1/routes/{id}/claim",
        &[
            "200", "204", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    (
        "post",
        "/api/v1/routes/{id}/work",
        &[
            "200", "400", "401", "403", "404", "409", "413", "415", "422", "503",
        ],
    ),
    ("get", "/api/v1/session", &["200", "401", "503"]),
    (
        "post",
        "/api/v1/session",
        &["204", "400", "401", "403", "413", "415", "429", "503"],
    ),
    ("delete", "/api/v1/session", &["204", "401", "403", "503"]),
    ("get", "/api/v1/tokens", &["200", "401", "503"]),
    (
        "post",
        "/api/v1/tokens",
        &["201", "400", "401", "403", "413", "415", "422", "503"],
    ),
    (
        "delete",
        "/api/v1/tokens/{id}",
        &["204", "400", "401", "403", "404", "503"],
    ),
    // The gateway: errors in the OpenAI and Anthropic shapes, not `ApiError`.
    (
        "post",
        "/v1/chat/completions",
        &[
            "200", "400", "401", "403", "404", "413", "415", "429", "500", "503",
        ],
    ),
    (
        "post",
        "/v1/messages",
        &[
            "200", "400", "401", "403", "404", "413", "415", "429", "500", "503", "529",
        ],
    ),
    ("get", "/v1/models", &["200", "401", "403", "503"]),
];

/// The error schema of a gateway operation's answers.
fn gateway_error(path: &str) -> Value {
    let name = match path {
        "/v1/chat/completions" => "OpenAiError",
        "/v1/messages" => "AnthropicError",
        _ => "GatewayError",
    };
    json!({"$ref": format!("#/components/schemas/{name}")})
}

#[test]
fn every_operation_lists_every_status_it_can_answer_with_its_body() {
    let paths = doc()["paths"].as_object().unwrap();
    let listed: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(
        listed,
        OPERATIONS.len(),
        "an operation was added or removed: list its statuses here"
    );
    for (method, path, statuses) in OPERATIONS {
        let responses = doc()["paths"][path][method]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} is documented"));
        let got: BTreeSet<&str> = responses.keys().map(String::as_str).collect();
        let want: BTreeSet<&str> = statuses.iter().copied().collect();
        assert_eq!(got, want, "{method} {path}");
        for (status, response) in responses {
            let body = &response["content"]["application/json"]["schema"];
            let error = if path.starts_with("/v1/") {
                gateway_error(path)
            } else {
                json!({"$ref": "#/components/schemas/ApiError"})
            };
            match status.as_str() {
                "422" => assert_eq!(
                    body["$ref"], "#/components/schemas/ValidationErrors",
                    "{method} {path} 422"
                ),
                "409" => assert!(
                    *body == error || body["oneOf"].as_array().is_some_and(|arms| arms.contains(&error)),
                    "{method} {path} 409 may be the shared error: {body}"
                ),
                s if s.starts_with('4') || s.starts_with('5') => {
                    assert_eq!(*body, error, "{method} {path} {s}")
                }
                _ => {}
            }
        }
    }
    for name in [
        "ApiError",
        "ValidationErrors",
        "EvidenceEnvelope",
        "PolicyDocument",
    ] {
        assert!(schema(name).is_object(), "{name} is a component schema");
    }
}

#[test]
fn created_profiles_and_routes_link_to_the_operations_that_take_their_id() {
    let operation_ids: BTreeSet<&str> = doc()["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    for (path, targets) in [
        (
            "/api/v1/profiles",
            &["get_profile", "update_profile", "delete_profile"][..],
        ),
        (
            "/api/v1/routes",
            &[
                "get_route",
                "submit_evidence",
                "manual_action",
                "submit_work",
                "complete_route",
                "abandon_route",
                "submit_result",
                "get_result",
                "clear_result",
            ][..],
        ),
    ] {
        for (method, status, item) in [("post", "201", ""), ("get", "200", "/0")] {
            let links = &doc()["paths"][path][method]["responses"][status]["links"];
            for target in targets {
                assert!(operation_ids.contains(target), "{target} is an operation");
                assert_eq!(
                    links[target]["operationId"], *target,
                    "{method} {path} -> {target}: {links}"
                );
                assert_eq!(
                    links[target]["parameters"]["id"],
                    format!("$response.body#{item}/id")
                );
            }
        }
    }
    // A created profile's id starts a route; a route's generation fences the next request.
    let profile_links = &doc()["paths"]["/api/v1/profiles"]["post"]["responses"]["201"]["links"];
    assert_eq!(
        profile_links["start_route"]["requestBody"],
        json!({"profile_id": "$response.body#/id"})
    );
    let lease_links = &doc()["paths"]["/api/v1/dispatches/claim"]["post"]["responses"]["200"]["links"];
    let route_lease_links = &doc()["paths"]["/api/v1/routes/{id}/claim"]["post"]["responses"]["200"]["links"];
    assert_eq!(
        lease_links, route_lease_links,
        "a route's lease is held the same way"
    );
    for target in ["ack_dispatch", "heartbeat_dispatch", "report_dispatch"] {
        assert!(operation_ids.contains(target), "{target} is an operation");
        assert_eq!(
            lease_links[target]["parameters"]["attempt"],
            "$response.body#/attempt"
        );
        assert_eq!(
            lease_links[target]["requestBody"]["lease_id"],
            "$response.body#/lease_id"
        );
    }
    // A made account's id and a made role's name are what their changes take.
    for (path, key, targets) in [
        ("/api/v1/accounts", "id", &["update_account"][..]),
        ("/api/v1/roles", "name", &["update_role", "delete_role"][..]),
    ] {
        let links = &doc()["paths"][path]["post"]["responses"]["201"]["links"];
        for target in targets {
            assert!(operation_ids.contains(target), "{target} is an operation");
            assert_eq!(
                links[target]["parameters"][key],
                format!("$response.body#/{key}"),
                "{path} -> {target}: {links}"
            );
        }
    }
    let route_links = &doc()["paths"]["/api/v1/routes"]["post"]["responses"]["201"]["links"];
    for fenced in ["manual_action", "submit_work", "complete_route", "abandon_route"] {
        assert_eq!(
            route_links[fenced]["requestBody"]["expected_generation"],
            "$response.body#/snapshot/generation"
        );
    }
}

#[test]
fn request_schemas_carry_the_limits_the_server_enforces() {
    let prop = |s: &str, p: &str| &schema(s)["properties"][p];
    let name = prop("ProfileInput", "name");
    assert_eq!(name["maxLength"], limits::MAX_PROFILE_NAME_CHARS);
    assert_eq!(name["minLength"], 1);
    assert_eq!(name["pattern"], limits::LINE_PATTERN);
    assert_eq!(
        prop("ProfileInput", "description")["maxLength"],
        limits::MAX_PROFILE_DESCRIPTION_CHARS
    );
    assert_eq!(
        prop("ProfileInput", "targets")["maxItems"],
        limits::MAX_CANDIDATES
    );
    for p in ["provider_id", "model_id", "runner"] {
        assert_eq!(
            prop("CandidateTarget", p)["pattern"],
            limits::IDENTIFIER_PATTERN,
            "{p}"
        );
        assert_eq!(
            prop("CandidateTarget", p)["maxLength"],
            limits::MAX_IDENTIFIER_CHARS,
            "{p}"
        );
    }
    assert_eq!(prop("CandidateTarget", "label")["pattern"], limits::TEXT_PATTERN);
    assert_eq!(
        prop("CandidateTarget", "script")["maxItems"],
        limits::MAX_SCRIPT_STEPS
    );
    assert_eq!(
        prop("SimulatedStep", "after_seconds")["maximum"],
        limits::MAX_SIMULATED_DELAY_SECONDS
    );
    assert_eq!(
        prop("StartRouteRequest", "profile_id")["maxLength"],
        limits::MAX_ID_CHARS
    );
    assert_eq!(
        prop("StartRouteRequest", "title")["maxLength"],
        limits::MAX_TITLE_CHARS
    );
    assert_eq!(
        prop("Caller", "reference")["maxLength"],
        limits::MAX_CALLER_REFERENCE_CHARS
    );
    assert_eq!(prop("Caller", "invocation_id")["pattern"], limits::LINE_PATTERN);
    assert_eq!(prop("Work", "prompt")["maxItems"], limits::MAX_PROMPT_BLOCKS);
    assert_eq!(prop("Work", "messages")["maxItems"], limits::MAX_MESSAGES);
    assert_eq!(prop("Work", "cwd")["pattern"], limits::PATH_PATTERN);
    assert_eq!(
        prop("EvidenceEnvelope", "occurred_at")["pattern"],
        limits::RFC3339_PATTERN
    );
    assert_eq!(prop("HttpEvidence", "status")["maximum"], u16::MAX);
    let scope = prop("TokenCreate", "profile_ids");
    assert_eq!(scope["minItems"], 1);
    assert_eq!(scope["maxItems"], limits::MAX_TOKEN_PROFILES);
    assert_eq!(scope["uniqueItems"], true);
    assert_eq!(
        scope["items"],
        json!({"type": "string", "minLength": 1, "maxLength": limits::MAX_ID_CHARS, "pattern": limits::TEXT_PATTERN})
    );
    // Whole numbers stay within the type the server reads them into.
    assert_eq!(
        prop("ExpectedGeneration", "expected_generation")["maximum"],
        u64::MAX
    );
    assert_eq!(
        prop("MarkRead", "through_seq")["maximum"],
        limits::MAX_NOTIFICATION_SEQ
    );
    let limit = doc()["paths"]["/api/v1/routes"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(limit["schema"]["maximum"], limits::MAX_ROUTE_LIST_LIMIT);
    assert_eq!(
        prop("ClaimRequest", "runner")["pattern"],
        limits::IDENTIFIER_PATTERN
    );
    let retry = prop("ClassPolicy", "retry");
    assert_eq!(retry["if"]["properties"]["enabled"]["const"], true);
    assert_eq!(
        retry["then"]["properties"]["max_retries"],
        json!({"minimum": limits::MIN_MAX_RETRIES, "maximum": limits::MAX_MAX_RETRIES})
    );
    assert_eq!(
        retry["else"]["properties"]["initial_interval_seconds"]["const"],
        0
    );
    assert_eq!(
        prop("ClassPolicy", "wait_for_reset")["then"]["properties"]["max_wait_seconds"]["maximum"],
        limits::MAX_MAX_WAIT_SECONDS
    );
    for s in ["ClaimRequest", "LeaseRenewal"] {
        assert_eq!(
            prop(s, "lease_seconds")["minimum"],
            limits::MIN_LEASE_SECONDS,
            "{s}"
        );
        assert_eq!(
            prop(s, "lease_seconds")["maximum"],
            limits::MAX_LEASE_SECONDS,
            "{s}"
        );
    }
    assert_eq!(limit["schema"]["minimum"], 1);
    let evidence = &doc()["paths"]["/api/v1/routes/{id}/evidence"]["post"]["requestBody"]["content"]
        ["application/json"]["schema"];
    assert_eq!(evidence["$ref"], "#/components/schemas/RouteEvidence");
    assert_eq!(
        schema("RouteEvidence")["required"],
        json!(["items", "generation"])
    );
    assert_eq!(
        schema("RouteEvidence")["properties"]["items"],
        schema("EvidenceEnvelope")["properties"]["items"],
        "the same envelope otherwise"
    );
}

#[test]
fn the_text_patterns_accept_exactly_what_the_server_accepts() {
    let line = regex::Regex::new(limits::LINE_PATTERN).unwrap();
    let text = regex::Regex::new(limits::TEXT_PATTERN).unwrap();
    for sample in [
        "a",
        " a ",
        "Fix the build",
        "ünïcødé ✓",
        "",
        " ",
        "\u{3000}",
        "\u{a0}x",
        "a\nb",
        "a\tb",
        "\u{7f}",
        "\u{85}",
        "\u{9f}z",
        "x\u{1f}",
        "\u{2028}",
    ] {
        assert_eq!(
            line.is_match(sample),
            check_line(sample, "it", 1_000).is_ok(),
            "LINE_PATTERN and check_line disagree on {sample:?}"
        );
        assert_eq!(
            text.is_match(sample),
            policy::input::check_optional_line(sample, "it", 1_000).is_ok(),
            "TEXT_PATTERN and check_optional_line disagree on {sample:?}"
        );
    }
    let name = regex::Regex::new(limits::ACCOUNT_NAME_PATTERN).unwrap();
    for sample in [
        "a",
        "A9",
        "bob.smith",
        "x_y",
        "me@host",
        "a-b",
        "9",
        "",
        "-a",
        ".a",
        "_a",
        "@a",
        "a b",
        "a/b",
        "a+b",
        "ünï",
        "a\nb",
        "a:b",
    ] {
        assert_eq!(
            name.is_match(sample),
            policy::auth::check_name(sample, "it").is_ok(),
            "ACCOUNT_NAME_PATTERN and check_name disagree on {sample:?}"
        );
    }
}

#[tokio::test]
async fn the_server_agrees_with_the_schema_at_its_edges() {
    let h = Harness::new().await;
    let served = h.get("/api/openapi.json").await;
    assert_eq!(&served, doc(), "the served document is the checked one");

    // A name at its limit is accepted; one past it is refused at its path.
    let profile = |name: String| {
        json!({"name": name, "policy": {"version": 1, "candidates": [{"id": "main",
        "transient": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                      "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
        "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                 "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}})
    };
    let id = h
        .profile(profile("n".repeat(limits::MAX_PROFILE_NAME_CHARS)))
        .await;
    let (status, body) = h
        .post(
            "/api/v1/profiles",
            profile("n".repeat(limits::MAX_PROFILE_NAME_CHARS + 1)),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "name");

    // An integer written as `1.0` is the integer 1 (JSON Schema's `integer` includes it).
    let r = h.start(&id, "inv-1").await;
    let generation = h.snapshot(&r).await["generation"].as_u64().unwrap();
    let (status, body) = h
        .post(
            &format!("/api/v1/routes/{r}/abandon"),
            json!({"expected_generation": generation as f64}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "abandoned");
    let (status, body) = h
        .post(
            &format!("/api/v1/routes/{r}/complete"),
            json!({"expected_generation": 1.5}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a fraction is no integer: {body}"
    );
    let (status, body) = h.call(Method::GET, "/api/v1/routes?limit=2.0", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = h
        .call(
            Method::GET,
            &format!("/api/v1/routes?limit={}", limits::MAX_ROUTE_LIST_LIMIT + 1),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "limit");

    // A method a path does not serve is 405, whatever its body; a served one without JSON is 415.
    let (status, _) = h
        .call_raw(
            Method::PUT,
            "/api/v1/circuits",
            &[("content-type", "text/plain")],
            "x",
        )
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, body) = h
        .call_raw(
            Method::POST,
            "/api/v1/routes",
            &[("content-type", "text/plain")],
            "x",
        )
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(body["error"]["code"], "unsupported_media_type");
}

/// Whether `value` meets the bounds `schema` puts on it: lengths, pattern, list sizes and
/// uniqueness, each item, ranges (the keywords the token request's schema uses).
fn allows(schema: &Value, value: &Value) -> bool {
    let bound = |k: &str| schema[k].as_f64();
    let within =
        |n: f64, min: &str, max: &str| bound(min).is_none_or(|m| n >= m) && bound(max).is_none_or(|m| n <= m);
    match value {
        Value::String(s) => {
            within(s.chars().count() as f64, "minLength", "maxLength")
                && schema["pattern"]
                    .as_str()
                    .is_none_or(|p| regex::Regex::new(p).unwrap().is_match(s))
        }
        Value::Array(items) => {
            let unique = items.iter().enumerate().all(|(i, v)| !items[..i].contains(v));
            within(items.len() as f64, "minItems", "maxItems")
                && (schema["uniqueItems"] != true || unique)
                && items.iter().all(|v| allows(&schema["items"], v))
        }
        Value::Number(n) => within(n.as_f64().unwrap(), "minimum", "maximum"),
        _ => true,
    }
}

/// A token request (found by Schemathesis): what the server refuses at a field's path, the
/// published schema excludes, and what it allows is created, a whole number of days written
/// `30.0` among them.
#[tokio::test]
async fn a_token_request_is_refused_only_for_what_its_schema_excludes() {
    let h = Harness::new().await;
    let id = h
        .profile(json!({"name": "scoped", "policy": {"version": 1,
            "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let request = |field: &str, value: &Value| {
        let mut t = json!({"name": "ci", "permissions": ["view_routes"], "expires_in_days": 1});
        t[field] = value.clone();
        t
    };
    let property = |field: &str| &schema("TokenCreate")["properties"][field];
    let accepted = [
        ("name", json!("n".repeat(limits::MAX_TOKEN_NAME_CHARS))),
        ("name", json!(" a ")),
        ("expires_in_days", json!(limits::MAX_TOKEN_DAYS)),
        ("expires_in_days", json!(30.0)),
        ("profile_ids", json!([&id])),
    ];
    for (field, value) in &accepted {
        assert!(
            allows(property(field), value),
            "the schema excludes {field}: {value}"
        );
        let (status, body) = h.post("/api/v1/tokens", request(field, value)).await;
        assert_eq!(status, StatusCode::CREATED, "{field}: {value}: {body}");
    }
    let refused = [
        ("name", json!(""), "name"),
        ("name", json!(" \u{3000}"), "name"),
        ("name", json!("a\u{1}b"), "name"),
        (
            "name",
            json!("n".repeat(limits::MAX_TOKEN_NAME_CHARS + 1)),
            "name",
        ),
        ("permissions", json!([]), "permissions"),
        ("expires_in_days", json!(0), "expires_in_days"),
        (
            "expires_in_days",
            json!(limits::MAX_TOKEN_DAYS + 1),
            "expires_in_days",
        ),
        ("profile_ids", json!([]), "profile_ids"),
        ("profile_ids", json!([""]), "profile_ids[0]"),
        (
            "profile_ids",
            json!([&id, "p".repeat(limits::MAX_ID_CHARS + 1)]),
            "profile_ids[1]",
        ),
        ("profile_ids", json!([&id, "a\u{1}b"]), "profile_ids[1]"),
        ("profile_ids", json!([&id, &id]), "profile_ids[1]"),
    ];
    for (field, value, path) in &refused {
        assert!(
            !allows(property(field), value),
            "the schema allows {field}: {value}"
        );
        let (status, body) = h.post("/api/v1/tokens", request(field, value)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {value}: {body}"
        );
        assert_eq!(body["errors"][0]["path"], *path, "{field}: {value}: {body}");
    }
    // A profile scope excludes `admin` (the schema's `if`/`then`); no scope, or a null one, does not.
    let scoped = &schema("TokenCreate");
    assert_eq!(scoped["if"]["required"], json!(["profile_ids"]));
    assert_eq!(
        scoped["then"]["properties"]["permissions"]["not"]["contains"]["const"],
        "admin"
    );
    let admin = |profiles: Value| json!({"name": "ci", "permissions": ["admin"], "profile_ids": profiles, "expires_in_days": 1});
    let (status, body) = h.post("/api/v1/tokens", admin(json!([&id]))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "profile_ids", "{body}");
    let (status, body) = h.post("/api/v1/tokens", admin(Value::Null)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // A fraction is no integer (the schema's `integer` excludes it): a malformed body.
    let (status, body) = h
        .post("/api/v1/tokens", request("expires_in_days", &json!(1.5)))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

/// Accounts and roles (found by hand: their schemas published none of the server's rules): what
/// the server refuses at a field's path the published schema excludes, and what it allows is
/// made. A name another account or role holds, a built-in role's among them, is 409.
#[tokio::test]
async fn an_account_or_role_request_is_refused_only_for_what_its_schema_excludes() {
    let h = Harness::new().await;
    let max_name = "a".repeat(limits::MAX_ACCOUNT_NAME_CHARS);
    let max_password = "p".repeat(limits::MAX_PASSWORD_CHARS);
    let min_password = "p".repeat(limits::MIN_PASSWORD_CHARS);
    let property = |name: &str, field: &str| &schema(name)["properties"][field];
    let accepted = [
        ("name", json!(max_name)),
        ("name", json!("b.o_b@x-1")),
        ("password", json!(max_password)),
        ("password", json!(min_password)),
        ("role", json!("VIEWER")),
    ];
    for (i, (field, value)) in accepted.iter().enumerate() {
        assert!(
            allows(property("AccountCreate", field), value),
            "the schema excludes {field}: {value}"
        );
        let mut body = json!({"name": format!("user{i}"), "role": "viewer", "password": min_password});
        body[field] = value.clone();
        let (status, answer) = h.post("/api/v1/accounts", body).await;
        assert_eq!(status, StatusCode::CREATED, "{field}: {value}: {answer}");
    }
    let refused = [
        ("name", json!("")),
        ("name", json!("-lead")),
        ("name", json!("has space")),
        ("name", json!(format!("{max_name}a"))),
        ("role", json!("no/such")),
        ("password", json!("p".repeat(limits::MIN_PASSWORD_CHARS - 1))),
        ("password", json!(format!("{max_password}p"))),
    ];
    for (field, value) in &refused {
        assert!(
            !allows(property("AccountCreate", field), value),
            "the schema allows {field}: {value}"
        );
        let mut body = json!({"name": "fresh", "role": "viewer", "password": min_password});
        body[field] = value.clone();
        let (status, answer) = h.post("/api/v1/accounts", body).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}: {value}: {answer}"
        );
        assert_eq!(answer["errors"][0]["path"], *field, "{field}: {value}: {answer}");
    }
    // A patch: the same rules for its role and password, and it changes something.
    let (_, made) = h
        .post(
            "/api/v1/accounts",
            json!({"name": "patched", "role": "viewer",
        "password": min_password}),
        )
        .await;
    let patch = format!("/api/v1/accounts/{}", made["id"].as_str().unwrap());
    assert_eq!(schema("AccountPatch")["minProperties"], 1);
    let (status, answer) = h.call(Method::PATCH, &patch, Some(json!({}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    for (field, value) in [("role", json!("bad name")), ("password", json!("short"))] {
        assert!(
            !allows(property("AccountPatch", field), &value),
            "{field}: {value}"
        );
        let (status, answer) = h.call(Method::PATCH, &patch, Some(json!({field: value}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {answer}");
        assert_eq!(answer["errors"][0]["path"], field, "{answer}");
    }
    let (status, answer) = h
        .call(
            Method::PATCH,
            &patch,
            Some(json!({"role": "operator", "password": max_password})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // Roles: a name by the same rules; a taken one, custom or built-in, is a conflict.
    assert!(allows(property("RoleCreate", "name"), &json!(max_name)));
    assert!(!allows(property("RoleCreate", "name"), &json!("a b")));
    let role = |name: &str| json!({"name": name, "permissions": ["view_routes"]});
    assert_eq!(
        h.post("/api/v1/roles", role(&max_name)).await.0,
        StatusCode::CREATED
    );
    let (status, answer) = h.post("/api/v1/roles", role("a b")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert_eq!(answer["errors"][0]["path"], "name");
    for taken in [max_name.to_uppercase(), "Admin".to_owned(), "runner".to_owned()] {
        let (status, answer) = h.post("/api/v1/roles", role(&taken)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{taken}: {answer}");
    }
}

/// The audit log's page (found by hand: `limit=5.0`, `limit=x` and `before=1.5` were a
/// plain-text 400, and `limit` was published with no maximum): whole numbers as the schema
/// says, the rest 422 at the parameter's name in the shared error shape.
#[tokio::test]
async fn the_audit_query_takes_what_its_schema_allows_and_names_what_it_refuses() {
    let h = Harness::new().await;
    let params = doc()["paths"]["/api/v1/audit"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let param = |name: &str| &params.iter().find(|p| p["name"] == name).unwrap()["schema"];
    assert_eq!(param("limit")["minimum"], 1);
    assert_eq!(param("limit")["maximum"], limits::MAX_AUDIT_PAGE);
    assert_eq!(param("before")["type"], "integer");
    for ok in [
        "limit=5.0",
        "limit=1",
        "limit=500",
        "before=3",
        "before=-1&limit=2e0",
        "",
    ] {
        let (status, body) = h.call(Method::GET, &format!("/api/v1/audit?{ok}"), None).await;
        assert_eq!(status, StatusCode::OK, "{ok}: {body}");
        assert!(body.is_array(), "{ok}: {body}");
    }
    for (bad, at) in [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=x", "limit"),
        ("before=1.5", "before"),
        ("before=x", "before"),
    ] {
        let (status, body) = h.call(Method::GET, &format!("/api/v1/audit?{bad}"), None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert_eq!(body["errors"][0]["path"], at, "{bad}: {body}");
    }
}

/// A route's pin (found by Schemathesis: the schema published none of its rules): only an
/// `editor` caller pins, to a candidate id of 1-128 characters on one line, as the schema's
/// bounds and its `if`/`else` state; a pin the profile has no candidate for is 422 at `pin`
/// (whether a candidate exists no schema can state).
#[tokio::test]
async fn a_route_pin_is_refused_only_for_what_its_schema_excludes() {
    let h = Harness::new().await;
    let id = h
        .profile(json!({"name": "pinned", "policy": {"version": 1,
            "candidates": [candidate("main", disabled(), disabled())]}}))
        .await;
    let start = |kind: &str, n: u32, pin: Value| {
        json!({"profile_id": &id, "caller": {"kind": kind, "reference": "r", "invocation_id": format!("inv-{n}")},
               "pin": pin})
    };
    let schema = schema("StartRouteRequest");
    let pin = &schema["properties"]["pin"];
    assert_eq!(
        schema["if"]["properties"]["caller"]["properties"]["kind"]["const"],
        "editor"
    );
    assert_eq!(schema["else"]["properties"]["pin"]["type"], "null");
    // Allowed: an editor's pin on one of the profile's candidates; no pin, or null, for anyone.
    for (n, (kind, value)) in [
        ("editor", json!("main")),
        ("kanban_task", Value::Null),
        ("editor", Value::Null),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(
            value.is_null() || allows(pin, &value),
            "the schema excludes {value}"
        );
        let (status, body) = h
            .post("/api/v1/routes", start(kind, n as u32, value.clone()))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{kind}: {value}: {body}");
    }
    // Refused at `pin`, each excluded by the schema: empty, too long, two lines, and any pin
    // from a caller that does not run its attempts.
    for (n, (kind, value)) in [
        ("editor", json!("")),
        ("editor", json!("p".repeat(limits::MAX_ID_CHARS + 1))),
        ("editor", json!("a\nb")),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(!allows(pin, &value), "the schema allows {value}");
        let (status, body) = h
            .post("/api/v1/routes", start(kind, 10 + n as u32, value.clone()))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{value}: {body}");
        assert_eq!(body["errors"][0]["path"], "pin", "{value}: {body}");
    }
    let (status, body) = h
        .post("/api/v1/routes", start("kanban_task", 20, json!("main")))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "pin", "{body}");
    // A pin naming no candidate of the profile: the schema allows it, the profile decides.
    assert!(allows(pin, &json!("ghost")));
    let (status, body) = h
        .post("/api/v1/routes", start("editor", 21, json!("ghost")))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["path"], "pin", "{body}");
}
