//! The permission matrix: every REST endpoint of the OpenAPI document, every page and form
//! endpoint, and every registered Leptos server function, called through the real router by
//! nobody and by a token of each built-in role (viewer, operator, profile_manager, office,
//! runner, admin). What is let through and what is refused must be exactly README's
//! "Permissions" table; an endpoint or server function without a rule, or without a row in that
//! table, fails this test.
//!
//! "yes" means the rules layer lets the caller in (the handler may still answer 404 or 422 for
//! the made-up ids and empty bodies used here, or 403 for a route-level check: an Office-only
//! caller steers only Office routes). "no" means 401 for nobody (pages and forms: a redirect to
//! `/login`) and 403 `forbidden` naming a permission the caller lacks for everyone else.

use crate::common;

use axum::{
    body::Body,
    http::{header, Method, Request, StatusCode},
};
use common::*;
use http_body_util::BodyExt;
use serde_json::Value;
use server::auth::rules::{self, Access, Surface};
use std::collections::BTreeSet;
use tower::ServiceExt;

/// The callers, as README's table heads them.
const CALLERS: [&str; 7] = [
    "nobody",
    "viewer",
    "operator",
    "profile_manager",
    "office",
    "runner",
    "admin",
];

/// One row: how to call it, and what the rules say it needs.
struct Row {
    label: String,
    method: &'static str,
    path: String,
    surface: Surface,
    access: Access,
}

/// README's table: `label -> [cell per caller]`.
fn readme_table() -> Vec<(String, Vec<String>)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme
        .find("<!-- permissions-matrix: begin -->")
        .expect("README has the permissions matrix");
    let end = readme.find("<!-- permissions-matrix: end -->").unwrap();
    readme[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<String> = l
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            (cells[0].clone(), cells[1..].to_vec())
        })
        .collect()
}

fn concrete(template: &str) -> String {
    template
        .replace("{id}", "nope")
        .replace("{route_id}", "nope")
        .replace("{attempt}", "1")
}

/// Every rule, and every registered server function, as a row to call.
fn rows() -> Vec<Row> {
    let mut out: Vec<Row> = rules::ROUTES
        .iter()
        .map(|(m, t, s, a)| Row {
            label: format!("`{m} {t}`"),
            method: m,
            path: concrete(t),
            surface: *s,
            access: *a,
        })
        .collect();
    let mut paths: Vec<&'static str> = leptos::server_fn::axum::server_fn_paths()
        .map(|(p, _)| p)
        .collect();
    paths.sort_by_key(|p| rules::server_fn_name(p));
    for path in paths {
        let name = rules::server_fn_name(path);
        let access = rules::server_fn(name).unwrap_or_else(|| panic!("server function {name} has no rule"));
        out.push(Row {
            label: format!("`{name}` (server function)"),
            method: "POST",
            path: path.to_owned(),
            surface: Surface::ServerFn,
            access,
        });
    }
    out
}

/// What the router answered: the status, the `Location`, and the JSON body of a refusal.
async fn send(h: &Harness, token: Option<&str>, row: &Row) -> (StatusCode, Option<String>, Value) {
    let mut req = Request::builder()
        .method(Method::from_bytes(row.method.as_bytes()).unwrap())
        .uri(&row.path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = match (row.method, row.surface) {
        ("GET" | "DELETE", _) => Body::empty(),
        (_, Surface::Form) => {
            req = req.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            Body::empty()
        }
        _ => {
            req = req.header(header::CONTENT_TYPE, "application/json");
            Body::from("{}")
        }
    };
    let resp = h.app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
    let status = resp.status();
    let location = resp
        .headers()
        .get(header::LOCATION)
        .map(|l| l.to_str().unwrap().to_owned());
    // Only refusals are read: an allowed event stream never ends. A page refusal is HTML; its
    // text is kept as the message.
    let value = if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            serde_json::json!({"error": {"code": if text.contains("Not for this account") { "forbidden" } else { "?" }, "message": text}})
        })
    } else {
        Value::Null
    };
    (status, location, value)
}

/// A refusal's code: the shared error's `code`, OpenAI's `error.code` (the gateway), or what
/// Anthropic's `error.type` says (the gateway's `/v1/messages`).
fn code(body: &Value) -> &str {
    let error = &body["error"];
    error["code"].as_str().unwrap_or(match error["type"].as_str() {
        Some("authentication_error") => "unauthenticated",
        Some("permission_error") => "forbidden",
        _ => "?",
    })
}

/// Every operation the OpenAPI document describes, as `METHOD /template`.
fn openapi_operations() -> BTreeSet<String> {
    let doc = serde_json::to_value(server::openapi::openapi()).unwrap();
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in [
            "get", "put", "post", "delete", "patch", "head", "options", "trace",
        ] {
            if item.get(method).is_some() {
                out.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    out
}

#[test]
fn every_documented_endpoint_and_every_server_function_has_a_rule() {
    let ops = openapi_operations();
    assert!(ops.len() >= 25, "the document lists the API: {ops:?}");
    for op in &ops {
        let (method, template) = op.split_once(' ').unwrap();
        assert!(
            rules::route(method, template).is_some(),
            "{op} is in the OpenAPI document but has no entry in server/src/auth/rules.rs"
        );
    }
    let fns: Vec<&str> = leptos::server_fn::axum::server_fn_paths()
        .map(|(p, _)| rules::server_fn_name(p))
        .collect();
    assert!(
        fns.contains(&"list_profiles") && fns.contains(&"act_on_route"),
        "{fns:?}"
    );
    for name in fns {
        assert!(
            rules::server_fn(name).is_some(),
            "server function {name} has no rule"
        );
    }
}

#[tokio::test]
async fn every_endpoint_answers_every_caller_as_readmes_table_says() {
    let h = Harness::new().await;
    let mut tokens: Vec<Option<String>> = vec![None];
    for role in &CALLERS[1..] {
        tokens.push(Some(
            account_token(&h.auth, &format!("as-{role}"), role, ADMIN_PASSWORD).await,
        ));
    }
    let roles: Vec<policy::auth::Permissions> = CALLERS[1..]
        .iter()
        .map(|r| policy::auth::BuiltinRole::parse(r).unwrap().permissions())
        .collect();

    let mut actual: Vec<(String, Vec<String>)> = Vec::new();
    let mut problems = Vec::new();
    for row in rows() {
        let mut cells = Vec::new();
        for (i, token) in tokens.iter().enumerate() {
            let (status, location, body) = send(&h, token.as_deref(), &row).await;
            let redirected_to_login =
                status.is_redirection() && location.as_deref().is_some_and(|l| l.starts_with("/login?next="));
            let refused =
                matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) || redirected_to_login;
            // A 403 that comes from a route-level check after the layer let the caller in
            // (none of these made-up requests reach one) would read as a refusal here; the
            // expectation below tells them apart.
            cells.push(if refused { "no" } else { "yes" }.to_owned());
            let expected = match (token, i) {
                (None, _) => row.access == Access::Public,
                (Some(_), i) => match row.access {
                    Access::Public | Access::Authenticated => true,
                    Access::Permission(p) => roles[i - 1].contains(p),
                    Access::AnyOf(list) => roles[i - 1].contains_any(list),
                },
            };
            if expected == refused {
                problems.push(format!(
                    "{} as {}: {status} {location:?} {body} (rules say {})",
                    row.label,
                    CALLERS[i],
                    if expected { "allowed" } else { "refused" }
                ));
            }
            if refused {
                match (token, row.surface) {
                    (None, Surface::Page) => assert!(redirected_to_login, "{}: {status}", row.label),
                    (None, _) => {
                        assert_eq!(
                            status,
                            StatusCode::UNAUTHORIZED,
                            "{} {} {body}",
                            row.label,
                            row.path
                        );
                        assert_eq!(code(&body), "unauthenticated", "{}", row.label);
                    }
                    (Some(_), _) => {
                        assert_eq!(status, StatusCode::FORBIDDEN, "{} as {}", row.label, CALLERS[i]);
                        assert_eq!(code(&body), "forbidden");
                        let message = body["error"]["message"].as_str().unwrap();
                        let named = policy::auth::Permission::ALL
                            .iter()
                            .filter(|p| message.contains(&format!("`{p}`")))
                            .all(|p| !roles[i - 1].contains(*p));
                        assert!(
                            named && message.contains('`'),
                            "{} as {}: names a permission the caller lacks: {message}",
                            row.label,
                            CALLERS[i]
                        );
                    }
                }
            }
        }
        actual.push((row.label.clone(), cells));
    }
    assert!(
        problems.is_empty(),
        "the rules layer disagrees with the rules:\n{}",
        problems.join("\n")
    );

    let readme = readme_table();
    let render = |t: &[(String, Vec<String>)]| {
        t.iter()
            .map(|(l, c)| format!("| {l} | {} |", c.join(" | ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut want = readme.clone();
    let mut got = actual.clone();
    want.sort();
    got.sort();
    assert!(
        want == got,
        "README's permissions matrix differs from what the server does; the server's answers:\n{}",
        render(&actual)
    );
}

#[tokio::test]
async fn nothing_but_health_and_the_login_page_is_reachable_without_credentials() {
    let h = Harness::new().await;
    for path in ["/definitely/not/here", "/api/v1/nope", "/api/openapi.json"] {
        let row = Row {
            label: path.to_owned(),
            method: "GET",
            path: path.to_owned(),
            surface: Surface::Api,
            access: Access::Authenticated,
        };
        let (status, location, _) = send(&h, None, &row).await;
        assert!(
            status == StatusCode::UNAUTHORIZED
                || location.as_deref().is_some_and(|l| l.starts_with("/login?next=")),
            "{path}: {status}"
        );
    }
    let (status, _) = h.call_as(None, Method::GET, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, page) = h.call_as(None, Method::GET, "/login", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("Sign in"));
}
