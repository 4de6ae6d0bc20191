//! Accounts, sessions and API tokens through the real router and a real database (either backend): what a
//! person signing in, an attacker guessing, and a script holding a token each get. Time moves
//! on the injected clock; nothing sleeps.

use crate::common;

use axum::{
    body::Body,
    http::{header, HeaderMap, Method, Request, StatusCode},
};
use chrono::TimeDelta;
use common::*;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

/// A request with exactly these headers (no token unless given); the JSON answer and headers.
async fn send(
    h: &Harness,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, HeaderMap, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = match body {
        Some(b) => req
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string()))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    };
    let resp = h.app.clone().oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status, parts.headers, value)
}

/// The `recourse_session=...` pair of a `Set-Cookie`, and the whole header.
fn session_cookie(headers: &HeaderMap) -> (String, String) {
    let set = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|v| v.starts_with("recourse_session="))
        .expect("a session cookie is set");
    (set.split(';').next().unwrap().to_owned(), set)
}

async fn login(h: &Harness, name: &str, password: &str) -> (StatusCode, HeaderMap, Value) {
    send(
        h,
        Method::POST,
        "/api/v1/session",
        &[],
        Some(json!({"name": name, "password": password})),
    )
    .await
}

/// Signs in; returns the `Cookie` header value.
async fn sign_in(h: &Harness, name: &str, password: &str) -> String {
    let (status, headers, body) = login(h, name, password).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    session_cookie(&headers).0
}

async fn whoami(h: &Harness, cookie: &str) -> (StatusCode, Value) {
    let (s, _, v) = send(h, Method::GET, "/api/v1/session", &[("cookie", cookie)], None).await;
    (s, v)
}

/// An account made by the administrator through the API; returns its id.
async fn add_account(h: &Harness, name: &str, role: &str) -> String {
    let (status, v) = h
        .post(
            "/api/v1/accounts",
            json!({"name": name, "role": role, "password": ADMIN_PASSWORD}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    v["id"].as_str().unwrap().to_owned()
}

/// The id of the account named `name` in an account list.
fn id_of(accounts: &Value, name: &str) -> String {
    accounts
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {accounts}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn profile_body(name: &str) -> Value {
    json!({"name": name, "policy": {"version": 1, "candidates": [candidate("main", disabled(), disabled())]}})
}

#[tokio::test]
async fn signing_in_sets_a_hardened_cookie_under_a_new_id_and_signing_out_ends_the_session() {
    let h = Harness::new().await;
    let (status, headers, _) = login(&h, ADMIN, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (first, set) = session_cookie(&headers);
    assert!(set.contains("HttpOnly"), "{set}");
    assert!(set.contains("SameSite=Lax"), "{set}");
    assert!(set.contains("Path=/"), "{set}");
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let (status, me) = whoami(&h, &first).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["name"], ADMIN);
    assert_eq!(me["kind"], "session");
    assert_eq!(me["role"], "admin");

    // Fixation: a login that arrives with a session id gets a different one, and the old id
    // is gone from the store.
    let (status, headers, _) = send(
        &h,
        Method::POST,
        "/api/v1/session",
        &[("cookie", &first)],
        Some(json!({"name": ADMIN, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (second, _) = session_cookie(&headers);
    assert_ne!(first, second);
    assert_eq!(whoami(&h, &first).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(whoami(&h, &second).await.0, StatusCode::OK);

    // Logout ends it at once, server-side.
    let (status, _, _) = send(
        &h,
        Method::DELETE,
        "/api/v1/session",
        &[("cookie", &second)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = whoami(&h, &second).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthenticated");
}

#[tokio::test]
async fn over_tls_the_session_cookie_is_secure() {
    let h = Harness::new().await;
    let (status, headers, _) = send(
        &h,
        Method::POST,
        "/api/v1/session",
        &[("x-forwarded-proto", "https")],
        Some(json!({"name": ADMIN, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, set) = session_cookie(&headers);
    assert!(set.contains("; Secure"), "{set}");
}

#[tokio::test]
async fn a_session_ends_after_eight_idle_hours_and_seven_days_after_its_login() {
    let h = Harness::new().await;
    let cookie = sign_in(&h, ADMIN, ADMIN_PASSWORD).await;
    h.clock.advance(TimeDelta::hours(7) + TimeDelta::minutes(59));
    assert_eq!(whoami(&h, &cookie).await.0, StatusCode::OK, "used within 8 hours");
    h.clock.advance(TimeDelta::hours(8) + TimeDelta::minutes(1));
    assert_eq!(
        whoami(&h, &cookie).await.0,
        StatusCode::UNAUTHORIZED,
        "idle too long"
    );

    // Busy all week: every 7 hours, until 7 days after the login.
    let cookie = sign_in(&h, ADMIN, ADMIN_PASSWORD).await;
    for step in 1..=24 {
        h.clock.advance(TimeDelta::hours(7));
        assert_eq!(
            whoami(&h, &cookie).await.0,
            StatusCode::OK,
            "after {} h",
            step * 7
        );
    }
    h.clock.advance(TimeDelta::hours(7));
    assert_eq!(
        whoami(&h, &cookie).await.0,
        StatusCode::UNAUTHORIZED,
        "past 7 days"
    );
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_name_get_the_same_answer_after_the_same_work() {
    let h = Harness::new().await;
    let disabled = add_account(&h, "gone", "viewer").await;
    let (status, _) = h
        .call(
            Method::PATCH,
            &format!("/api/v1/accounts/{disabled}"),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut answers = Vec::new();
    for (name, password) in [
        (ADMIN, "not the password at all"),
        ("nobody-has-this-name", "not the password at all"),
        ("gone", ADMIN_PASSWORD),
        ("", ""),
    ] {
        let before = h.auth.verifications();
        let (status, headers, body) = login(&h, name, password).await;
        assert_eq!(
            h.auth.verifications(),
            before + 1,
            "{name:?}: one argon2 verification"
        );
        assert!(headers.get(header::SET_COOKIE).is_none(), "{name:?}");
        answers.push((status, body));
    }
    assert_eq!(answers[0].0, StatusCode::UNAUTHORIZED);
    assert_eq!(answers[0].1["error"]["code"], "login_failed");
    for a in &answers[1..] {
        assert_eq!(a, &answers[0]);
    }
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_name_even_for_names_nobody_has() {
    let h = Harness::new().await;
    for name in [ADMIN, "nobody-has-this-name"] {
        for _ in 0..5 {
            assert_eq!(
                login(&h, name, "wrong password!!").await.0,
                StatusCode::UNAUTHORIZED
            );
        }
        let (status, headers, body) = login(&h, name, ADMIN_PASSWORD).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{name}: {body}");
        assert_eq!(body["error"]["code"], "rate_limited");
        let wait: u64 = headers[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
        assert!((1..=12).contains(&wait), "{wait}");
    }
    // Another name is not held up by them.
    add_account(&h, "grace", "viewer").await;
    assert_eq!(login(&h, "grace", ADMIN_PASSWORD).await.0, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn one_address_trying_many_names_is_limited() {
    let h = Harness::new().await;
    for i in 0..30 {
        let (status, _, _) = login(&h, &format!("guess{i}"), "wrong password!!").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    assert_eq!(
        login(&h, ADMIN, ADMIN_PASSWORD).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn disabling_an_account_or_changing_its_password_ends_its_sessions_and_tokens_at_once() {
    let h = Harness::new().await;
    let id = add_account(&h, "op", "operator").await;
    let cookie = sign_in(&h, "op", ADMIN_PASSWORD).await;
    let (status, _, created) = send(
        &h,
        Method::POST,
        "/api/v1/tokens",
        &[("cookie", &cookie)],
        Some(json!({"name": "script", "permissions": ["view_routes"], "expires_in_days": 30})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        h.call_as(Some(&token), Method::GET, "/api/v1/routes", None)
            .await
            .0,
        StatusCode::OK
    );

    // A new password: sessions that began before it end; tokens stay.
    let (status, _) = h
        .call(
            Method::PATCH,
            &format!("/api/v1/accounts/{id}"),
            Some(json!({"password": "another long passphrase"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(whoami(&h, &cookie).await.0, StatusCode::UNAUTHORIZED);
    let cookie = sign_in(&h, "op", "another long passphrase").await;
    assert_eq!(whoami(&h, &cookie).await.0, StatusCode::OK);

    let (status, _) = h
        .call(
            Method::PATCH,
            &format!("/api/v1/accounts/{id}"),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(whoami(&h, &cookie).await.0, StatusCode::UNAUTHORIZED);
    let (status, body) = h.call_as(Some(&token), Method::GET, "/api/v1/routes", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[tokio::test]
async fn a_token_carries_only_its_permissions_expires_and_is_revoked() {
    let h = Harness::new().await;
    let (status, created) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "reader", "permissions": ["view_routes"], "expires_in_days": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["secret"].as_str().unwrap().to_owned();
    assert!(token.starts_with("rct_"));
    let id = created["token"]["id"].as_str().unwrap().to_owned();

    // Listed without the secret; last use recorded.
    assert_eq!(
        h.call_as(Some(&token), Method::GET, "/api/v1/profiles", None)
            .await
            .0,
        StatusCode::OK
    );
    let list = h.get("/api/v1/tokens").await;
    let listed = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id.as_str())
        .unwrap();
    assert!(!list.to_string().contains(&token[4..]), "no secret in lists");
    assert!(listed["last_used_at"].is_string(), "{listed}");
    assert_eq!(listed["permissions"], json!(["view_routes"]));

    // Only its permissions.
    let (status, body) = h
        .call_as(
            Some(&token),
            Method::POST,
            "/api/v1/profiles",
            Some(profile_body("p")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`manage_profiles`"),
        "{body}"
    );

    // Never from a query string.
    let (status, _) = h
        .call_as(
            None,
            Method::GET,
            &format!("/api/v1/session?access_token={token}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A malformed header is refused, not ignored.
    let (status, _) = h
        .call_raw(
            Method::GET,
            "/api/v1/session",
            &[("authorization", "Basic YWRhOnB3")],
            Body::empty(),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Expiry.
    h.clock.advance(TimeDelta::days(1) + TimeDelta::seconds(1));
    let (status, body) = h
        .call_as(Some(&token), Method::GET, "/api/v1/profiles", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    // Revocation.
    let (_, created) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "short", "permissions": ["view_routes"], "expires_in_days": 30}),
        )
        .await;
    let token = created["secret"].as_str().unwrap().to_owned();
    let id = created["token"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        h.call_as(Some(&token), Method::GET, "/api/v1/routes", None)
            .await
            .0,
        StatusCode::OK
    );
    let (status, _) = h
        .call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        h.call_as(Some(&token), Method::GET, "/api/v1/routes", None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn nobody_makes_a_token_stronger_than_themselves() {
    let h = Harness::new().await;
    add_account(&h, "vera", "viewer").await;
    let cookie = sign_in(&h, "vera", ADMIN_PASSWORD).await;
    let (status, _, body) = send(
        &h,
        Method::POST,
        "/api/v1/tokens",
        &[("cookie", &cookie)],
        Some(json!({"name": "x", "permissions": ["view_routes", "manage_profiles"], "expires_in_days": 30})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`manage_profiles`"));
    // And a token's permissions shrink with its account's role.
    let token = account_token(&h.auth, "mgr", "profile_manager", ADMIN_PASSWORD).await;
    let id = h.auth.store().account_by_name("mgr").await.unwrap().unwrap().id;
    assert_eq!(
        h.call_as(
            Some(&token),
            Method::POST,
            "/api/v1/profiles",
            Some(profile_body("a"))
        )
        .await
        .0,
        StatusCode::CREATED
    );
    h.call(
        Method::PATCH,
        &format!("/api/v1/accounts/{id}"),
        Some(json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(
        h.call_as(
            Some(&token),
            Method::POST,
            "/api/v1/profiles",
            Some(profile_body("b"))
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn a_token_limited_to_profiles_reaches_only_them_and_their_routes() {
    let h = Harness::new().await;
    let a = h.profile(profile_body("a")).await;
    let b = h.profile(profile_body("b")).await;
    let ra = h.start(&a, "inv-a").await;
    let rb = h.start(&b, "inv-b").await;
    let (status, created) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "a only", "permissions": ["view_routes", "manage_profiles", "operate_routes"],
                   "profile_ids": [a], "expires_in_days": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let t = created["secret"].as_str().unwrap().to_owned();
    let get = |uri: String| {
        let t = t.clone();
        let h = &h;
        async move { h.call_as(Some(&t), Method::GET, &uri, None).await }
    };
    assert_eq!(get(format!("/api/v1/profiles/{a}")).await.0, StatusCode::OK);
    assert_eq!(
        get(format!("/api/v1/profiles/{b}")).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(get(format!("/api/v1/routes/{ra}")).await.0, StatusCode::OK);
    assert_eq!(get(format!("/api/v1/routes/{rb}")).await.0, StatusCode::FORBIDDEN);
    let (_, list) = get("/api/v1/profiles".to_owned()).await;
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str()]);
    let (_, routes) = get("/api/v1/routes".to_owned()).await;
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["profile_id"] == a.as_str()),
        "{routes}"
    );
    let (status, _) = h
        .call_as(
            Some(&t),
            Method::PUT,
            &format!("/api/v1/profiles/{b}"),
            Some(profile_body("b2")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = h
        .call_as(
            Some(&t),
            Method::POST,
            "/api/v1/profiles",
            Some(profile_body("c")),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a new profile is outside the scope"
    );
    assert_eq!(get("/".to_owned()).await.0, StatusCode::FORBIDDEN, "no pages");
}

#[tokio::test]
async fn office_assignment_steers_office_routes_and_never_edits_policies() {
    let h = Harness::new().await;
    let p = h.profile(profile_body("office work")).await;
    let kanban = h.start(&p, "inv-k").await;
    let office = account_token(&h.auth, "olive", "office", ADMIN_PASSWORD).await;
    let start = |kind: &str, inv: &str| json!({"profile_id": p, "caller": {"kind": kind, "reference": "t", "invocation_id": inv}});
    let (status, body) = h
        .call_as(
            Some(&office),
            Method::POST,
            "/api/v1/routes",
            Some(start("kanban_task", "inv-1")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`operate_routes`"));
    let (status, body) = h
        .call_as(
            Some(&office),
            Method::POST,
            "/api/v1/routes",
            Some(start("office", "inv-2")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let generation = h.snapshot(&kanban).await["generation"].clone();
    let (status, _) = h
        .call_as(
            Some(&office),
            Method::POST,
            &format!("/api/v1/routes/{kanban}/actions"),
            Some(json!({"action": "stop", "expected_generation": generation})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "not an Office route");
    let (status, body) = h
        .call_as(
            Some(&office),
            Method::PUT,
            &format!("/api/v1/profiles/{p}"),
            Some(profile_body("x")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`manage_profiles`"));
}

#[tokio::test]
async fn logins_tokens_and_policy_edits_are_in_the_append_only_audit_log() {
    let h = Harness::new().await;
    let p = h.profile(profile_body("audited")).await;
    let mut edited = profile_body("audited");
    edited["policy"]["candidates"][0]["transient"] = class_policy(3, 5, 0, "skip");
    let (status, body) = h
        .call(Method::PUT, &format!("/api/v1/profiles/{p}"), Some(edited))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    login(&h, ADMIN, "wrong password!!").await;
    sign_in(&h, ADMIN, ADMIN_PASSWORD).await;
    let route = h.start(&p, "audited-start").await;

    let log = h.get("/api/v1/audit").await;
    let rows = log.as_array().unwrap();
    let actions: Vec<&str> = rows.iter().map(|r| r["action"].as_str().unwrap()).collect();
    for want in [
        "account.create",
        "token.create",
        "profile.create",
        "profile.update",
        "session.login_failed",
        "session.login",
        "route.start",
    ] {
        assert!(actions.contains(&want), "{want} in {actions:?}");
    }
    // A route's start: written in the start's own transaction, with who and what.
    let start = rows.iter().find(|r| r["action"] == "route.start").unwrap();
    assert_eq!(start["actor_kind"], "token");
    assert_eq!(start["actor"], format!("{ADMIN}/tests"));
    assert_eq!(start["target"], route.as_str());
    assert_eq!(start["detail"]["profile_id"], p.as_str());
    assert_eq!(start["detail"]["caller"]["invocation_id"], "audited-start");
    let update = rows.iter().find(|r| r["action"] == "profile.update").unwrap();
    assert_eq!(update["actor_kind"], "token");
    assert_eq!(update["actor"], format!("{ADMIN}/tests"));
    assert_eq!(update["target"], p.as_str());
    let changes = update["detail"]["changes"].as_array().unwrap();
    assert!(
        changes
            .iter()
            .any(|c| c["path"] == "policy.candidates[0].transient.retry.max_retries" && c["after"] == 3),
        "{changes:?}"
    );
    assert!(
        !log.to_string().contains(ADMIN_PASSWORD),
        "no password in the log"
    );
    // Append-only.
    for sql in ["UPDATE audit_log SET action = 'x'", "DELETE FROM audit_log"] {
        assert!(
            server::store::sql::query(sql).execute(&h.pool).await.is_err(),
            "{sql}"
        );
    }
}

#[tokio::test]
async fn a_foreign_page_cannot_sign_in_or_write_with_the_cookie() {
    let h = Harness::new().await;
    let cookie = sign_in(&h, ADMIN, ADMIN_PASSWORD).await;
    let (status, _, body) = send(
        &h,
        Method::POST,
        "/api/v1/profiles",
        &[
            ("cookie", &cookie),
            ("origin", "http://127.0.0.1:9999"),
            ("host", "127.0.0.1:3000"),
        ],
        Some(profile_body("csrf")),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "foreign_origin");
    let (status, _, _) = send(
        &h,
        Method::POST,
        "/api/v1/session",
        &[("origin", "http://evil.example"), ("host", "127.0.0.1:3000")],
        Some(json!({"name": ADMIN, "password": ADMIN_PASSWORD})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_custom_role_is_changed_and_deleted_and_its_accounts_feel_it_at_once() {
    let h = Harness::new().await;
    let (status, v) = h
        .post(
            "/api/v1/roles",
            json!({"name": "triage", "permissions": ["view_routes"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = add_account(&h, "tri", "triage").await;
    let cookie = sign_in(&h, "tri", ADMIN_PASSWORD).await;
    assert_eq!(whoami(&h, &cookie).await.1["permissions"], json!(["view_routes"]));

    // New permissions reach the signed-in session on its next request (names ignore case).
    let (status, v) = h
        .call(
            Method::PUT,
            "/api/v1/roles/TRIAGE",
            Some(json!({"permissions": ["view_routes", "manage_profiles"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["name"], "triage");
    assert_eq!(v["builtin"], false);
    let (_, me) = whoami(&h, &cookie).await;
    assert_eq!(
        me["permissions"],
        json!(["manage_profiles", "view_routes"]),
        "{me}"
    );
    let (status, _, v) = send(
        &h,
        Method::POST,
        "/api/v1/profiles",
        &[("cookie", &cookie)],
        Some(profile_body("made by triage")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");

    // Refusals change nothing.
    let (status, v) = h
        .call(
            Method::PUT,
            "/api/v1/roles/triage",
            Some(json!({"permissions": []})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["errors"][0]["path"], "permissions", "{v}");
    for builtin in ["admin", "Viewer"] {
        let (status, v) = h
            .call(
                Method::PUT,
                &format!("/api/v1/roles/{builtin}"),
                Some(json!({"permissions": ["view_routes"]})),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{builtin}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Built-in roles are fixed"),
            "{v}"
        );
        let (status, _) = h
            .call(Method::DELETE, &format!("/api/v1/roles/{builtin}"), None)
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{builtin}");
    }
    let (status, _) = h
        .call(
            Method::PUT,
            "/api/v1/roles/nobody",
            Some(json!({"permissions": ["view_routes"]})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A role someone holds stays; once nobody does, it goes.
    let (status, v) = h.call(Method::DELETE, "/api/v1/roles/triage", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("1 account holds"),
        "{v}"
    );
    assert_eq!(whoami(&h, &cookie).await.0, StatusCode::OK);
    let (status, _) = h
        .call(
            Method::PATCH,
            &format!("/api/v1/accounts/{id}"),
            Some(json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = h.call(Method::DELETE, "/api/v1/roles/triage", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let roles = h.get("/api/v1/roles").await;
    assert!(
        !roles.as_array().unwrap().iter().any(|r| r["name"] == "triage"),
        "{roles}"
    );
    let (status, _) = h.call(Method::DELETE, "/api/v1/roles/triage", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Both changes are in the audit log: who, and what the permissions were.
    let log = h.get("/api/v1/audit").await;
    let entry = |action: &str| {
        log.as_array()
            .unwrap()
            .iter()
            .find(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("{action} in {log}"))
            .clone()
    };
    let update = entry("role.update");
    assert_eq!(update["target"], "triage", "{update}");
    assert_eq!(
        update["detail"]["permissions"],
        json!({"before": ["view_routes"], "after": ["manage_profiles", "view_routes"]}),
        "{update}"
    );
    assert_eq!(entry("role.delete")["target"], "triage");
}

#[tokio::test]
async fn nothing_leaves_the_installation_without_an_enabled_administrator() {
    let h = Harness::new().await;
    let accounts = h.get("/api/v1/accounts").await;
    let me = id_of(&accounts, ADMIN);
    let me_uri = format!("/api/v1/accounts/{me}");
    for change in [json!({"role": "viewer"}), json!({"disabled": true})] {
        let (status, v) = h.call(Method::PATCH, &me_uri, Some(change.clone())).await;
        assert_eq!(status, StatusCode::CONFLICT, "{change}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no enabled administrator"),
            "{v}"
        );
    }
    assert_eq!(h.get("/api/v1/accounts").await, accounts, "nothing changed");

    // A second administrator, through a custom role that grants `admin`: now the first may go.
    let (status, _) = h
        .post(
            "/api/v1/roles",
            json!({"name": "superuser", "permissions": ["admin", "view_routes"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    add_account(&h, "root2", "superuser").await;
    let (status, v) = h
        .call(Method::PATCH, &me_uri, Some(json!({"role": "viewer"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");

    // Taking `admin` from the only role that still grants it is refused, as is disabling its
    // only holder; the role and the account are as they were.
    let root2 = sign_in(&h, "root2", ADMIN_PASSWORD).await;
    let (status, _, v) = send(
        &h,
        Method::PUT,
        "/api/v1/roles/superuser",
        &[("cookie", &root2)],
        Some(json!({"permissions": ["view_routes"]})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let (_, me2) = whoami(&h, &root2).await;
    assert_eq!(me2["permissions"], json!(["view_routes", "admin"]), "{me2}");
    let accounts = {
        let (_, _, v) = send(&h, Method::GET, "/api/v1/accounts", &[("cookie", &root2)], None).await;
        v
    };
    let root2_id = id_of(&accounts, "root2");
    let (status, _, v) = send(
        &h,
        Method::PATCH,
        &format!("/api/v1/accounts/{root2_id}"),
        &[("cookie", &root2)],
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    assert_eq!(whoami(&h, &root2).await.0, StatusCode::OK);

    // With the first back as admin, the custom role may lose `admin`.
    let (status, _, v) = send(
        &h,
        Method::PATCH,
        &me_uri,
        &[("cookie", &root2)],
        Some(json!({"role": "admin"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, _, v) = send(
        &h,
        Method::PUT,
        "/api/v1/roles/superuser",
        &[("cookie", &root2)],
        Some(json!({"permissions": ["view_routes"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn two_administrators_demoting_each_other_at_once_leave_one() {
    let h = Harness::new().await;
    let other = add_account(&h, "second", "admin").await;
    let me = id_of(&h.get("/api/v1/accounts").await, ADMIN);
    let second = sign_in(&h, "second", ADMIN_PASSWORD).await;
    let (me_uri, other_uri) = (
        format!("/api/v1/accounts/{me}"),
        format!("/api/v1/accounts/{other}"),
    );
    let cookie = [("cookie", second.as_str())];
    let demote_me = h.call(Method::PATCH, &me_uri, Some(json!({"role": "viewer"})));
    let demote_other = send(
        &h,
        Method::PATCH,
        &other_uri,
        &cookie,
        Some(json!({"disabled": true})),
    );
    let ((a, _), (b, _, _)) = tokio::join!(demote_me, demote_other);
    let mut statuses = [a, b];
    statuses.sort();
    assert_eq!(statuses, [StatusCode::OK, StatusCode::CONFLICT]);
    // Whoever is still an administrator reads the accounts: exactly one enabled admin.
    let (status, mine) = h.call(Method::GET, "/api/v1/accounts", None).await;
    let accounts = if status == StatusCode::OK {
        mine
    } else {
        send(&h, Method::GET, "/api/v1/accounts", &[("cookie", &second)], None)
            .await
            .2
    };
    let admins = accounts
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["role"] == "admin" && a["disabled"] == false)
        .count();
    assert_eq!(admins, 1, "{accounts}");
}

/// A token scoped to profiles with `admin`, stored as it could be before such tokens were
/// refused (straight into the table, past every check of `issue_token`).
async fn stored_scoped_admin_token(h: &Harness, profile_id: &str) -> String {
    let account = h.auth.store().account_by_name(ADMIN).await.unwrap().unwrap();
    let secret = server::auth::token::generate().unwrap();
    let scope = vec![profile_id.to_owned()];
    h.auth
        .store()
        .insert_token(
            server::store::tokens::NewToken {
                id: "tok_scoped_admin",
                account_id: &account.id,
                name: "scoped admin",
                secret_hash: &server::auth::token::digest(&secret),
                permissions: policy::auth::Permissions::ALL,
                profile_ids: Some(&scope),
                expires: h.now() + TimeDelta::days(30),
            },
            h.now(),
        )
        .await
        .unwrap();
    secret
}

#[tokio::test]
async fn a_token_scoped_to_profiles_cannot_carry_admin() {
    let h = Harness::new().await;
    let a = h.profile(profile_body("a")).await;
    let (status, v) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "scoped admin", "permissions": ["admin", "view_routes"],
                   "profile_ids": [a], "expires_in_days": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v}");
    assert_eq!(errors[0]["path"], "profile_ids", "{v}");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(message.contains("admin"), "{message}");
    assert!(!message.contains(&a), "echoes nothing: {message}");
    // Without the scope, or without `admin`, the same request is fine.
    let (status, v) = h
        .post(
            "/api/v1/tokens",
            json!({"name": "scoped", "permissions": ["view_routes"], "profile_ids": [a],
                   "expires_in_days": 30}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
}

#[test]
fn the_command_line_refuses_a_scoped_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "cli.db");
    let _ = served_token(&db); // the administrator `tester`
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args([
            "token",
            "add",
            "--account",
            ADMIN,
            "--name",
            "x",
            "--permissions",
            "all",
        ])
        .args(["--profile", "pA", "--database"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "no secret printed");
    assert!(
        stderr.contains("profile_ids") && stderr.contains("admin"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_stored_scoped_admin_token_administers_nothing() {
    let h = Harness::new().await;
    let a = h.profile(profile_body("a")).await;
    let t = stored_scoped_admin_token(&h, &a).await;
    // Its profile is still in reach.
    assert_eq!(
        h.call_as(Some(&t), Method::GET, &format!("/api/v1/profiles/{a}"), None)
            .await
            .0,
        StatusCode::OK
    );
    let account = json!({"name": "escapee", "role": "admin", "password": ADMIN_PASSWORD});
    let role = json!({"name": "custom", "permissions": ["view_routes"]});
    for (method, uri, body) in [
        (Method::POST, "/api/v1/accounts", Some(account)),
        (Method::GET, "/api/v1/accounts", None),
        (Method::GET, "/api/v1/roles", None),
        (Method::POST, "/api/v1/roles", Some(role)),
        (Method::GET, "/api/v1/audit", None),
    ] {
        let (status, v) = h.call_as(Some(&t), method.clone(), uri, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {v}");
        assert_eq!(v["error"]["code"], "forbidden", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("profile scope"),
            "{v}"
        );
    }
    // The token list holds only its own account's tokens, not every account's.
    account_token(&h.auth, "other", "viewer", ADMIN_PASSWORD).await;
    let (status, list) = h.call_as(Some(&t), Method::GET, "/api/v1/tokens", None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert!(
        list.as_array().unwrap().iter().all(|t| t["account"] == ADMIN),
        "{list}"
    );
    // The unscoped administrator still sees every token.
    let all = h.get("/api/v1/tokens").await;
    assert!(
        all.as_array().unwrap().iter().any(|t| t["account"] == "other"),
        "{all}"
    );
}

/// The router of a second server on the harness's database, started with `--demo`.
async fn demo_server(h: &Harness) -> axum::Router {
    let state = server::state::AppState::new(h.engine.clone(), leptos_options(), None).with_auth(
        server::auth::AuthSettings {
            demo: true,
            ..Default::default()
        },
    );
    state.auth.ensure_demo_account().await.unwrap();
    server::web::router(state)
}

async fn send_to(app: &axum::Router, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap) {
    let mut req = Request::builder().uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    (resp.status(), resp.headers().clone())
}

#[tokio::test]
async fn the_demo_accounts_sessions_and_tokens_end_with_demo_mode() {
    let h = Harness::new().await;
    let demo = demo_server(&h).await;
    // A visitor of the demo server is signed in; the demo account makes a token.
    let (status, headers) = send_to(&demo, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let cookie = session_cookie(&headers).0;
    let token = account_token(&h.auth, "demo", "profile_manager", ADMIN_PASSWORD).await;
    let bearer = format!("Bearer {token}");
    for credentials in [("cookie", cookie.as_str()), ("authorization", bearer.as_str())] {
        let (status, _) = send_to(&demo, "/api/v1/session", &[credentials]).await;
        assert_eq!(status, StatusCode::OK, "{} on the demo server", credentials.0);
        // The same database, served without --demo (the harness's server): nobody.
        let (status, _) = send_to(&h.app, "/api/v1/session", &[credentials]).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{} without --demo",
            credentials.0
        );
        let (status, _) = send_to(&h.app, "/api/v1/profiles", &[credentials]).await;
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{} without --demo",
            credentials.0
        );
    }
    // Other accounts' tokens are unaffected.
    assert_eq!(
        h.call(Method::GET, "/api/v1/session", None).await.0,
        StatusCode::OK
    );
}

/// A router on the harness's database that answers only loopback names and `allowed` (what
/// `serve` sets up on a loopback address), with or without `--demo`.
async fn host_checked(h: &Harness, demo: bool, allowed: &[&str]) -> axum::Router {
    let state = server::state::AppState::new(h.engine.clone(), leptos_options(), None).with_auth(
        server::auth::AuthSettings {
            demo,
            allowed_hosts: Some(allowed.iter().map(|a| a.to_string()).collect()),
            ..Default::default()
        },
    );
    if demo {
        state.auth.ensure_demo_account().await.unwrap();
    }
    server::web::router(state)
}

async fn post_to(
    app: &axum::Router,
    uri: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (StatusCode, HeaderMap) {
    let mut req = Request::builder().method(Method::POST).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    (resp.status(), resp.headers().clone())
}

const REBIND: &str = "rebind.attacker.example:3000";
const REBIND_ORIGIN: &str = "http://rebind.attacker.example:3000";

#[tokio::test]
async fn a_rebinding_host_is_refused_before_any_session_or_demo_sign_in() {
    let h = Harness::new().await;
    for demo in [false, true] {
        let app = host_checked(&h, demo, &[]).await;
        // The page: no demo sign-in, no cookie.
        let (status, headers) = send_to(&app, "/", &[("host", REBIND)]).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "demo {demo}");
        assert!(headers.get(header::SET_COOKIE).is_none(), "demo {demo}");
        // A same-origin write from the rebinding page, with a cookie the server gave out.
        let (status, headers) = send_to(&app, "/", &[("host", "127.0.0.1:3000")]).await;
        let cookie = if demo {
            assert_eq!(status, StatusCode::OK);
            session_cookie(&headers).0
        } else {
            sign_in(&h, ADMIN, ADMIN_PASSWORD).await
        };
        let write = [
            ("host", REBIND),
            ("origin", REBIND_ORIGIN),
            ("sec-fetch-site", "same-origin"),
            ("cookie", cookie.as_str()),
        ];
        let (status, _) = post_to(&app, "/api/v1/profiles", &write, profile_body("rebound")).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "demo {demo}");
        // A token does not help either.
        let bearer = format!("Bearer {}", h.token);
        let (status, _) = send_to(
            &app,
            "/api/v1/session",
            &[("host", REBIND), ("authorization", &bearer)],
        )
        .await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "demo {demo}");
    }
    let profiles = h.get("/api/v1/profiles").await;
    assert_eq!(profiles.as_array().unwrap().len(), 0, "{profiles}");
}

#[tokio::test]
async fn loopback_names_and_allowed_hosts_are_answered() {
    let h = Harness::new().await;
    let app = host_checked(&h, false, &["recourse.internal"]).await;
    let bearer = format!("Bearer {}", h.token);
    for host in [
        "localhost",
        "localhost:3000",
        "ui.localhost:8080",
        "127.0.0.1",
        "127.0.0.1:3000",
        "[::1]",
        "[::1]:3000",
        "recourse.internal",
        "recourse.internal:443",
    ] {
        let (status, _) = send_to(
            &app,
            "/api/v1/session",
            &[("host", host), ("authorization", &bearer)],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{host}");
    }
    let (status, _) = send_to(
        &app,
        "/api/v1/session",
        &[("host", "other.internal"), ("authorization", &bearer)],
    )
    .await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    // A same-origin write from an allowed name passes the guard.
    let write = [
        ("host", "recourse.internal:8443"),
        ("origin", "https://recourse.internal:8443"),
        ("authorization", &bearer),
    ];
    let (status, _) = post_to(&app, "/api/v1/profiles", &write, profile_body("proxied")).await;
    assert_eq!(status, StatusCode::CREATED);
}

/// A raw HTTP/1.1 request to a served process with this `Host`; the status.
fn status_for_host(addr: &str, host: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn recourse_serve_on_loopback_answers_only_loopback_names_and_allowed_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "hosts.db");
    let (mut child, addr, _) = spawn_serve(&db, &["--demo", "--allowed-host", "recourse.internal"], false);
    let port = addr.rsplit(':').next().unwrap().to_owned();
    assert_eq!(
        status_for_host(
            &addr,
            &format!("rebind.attacker.example:{port}"),
            "/api/v1/profiles"
        ),
        421
    );
    assert_eq!(
        status_for_host(&addr, &format!("localhost:{port}"), "/healthz"),
        200
    );
    assert_eq!(status_for_host(&addr, &addr, "/healthz"), 200);
    assert_eq!(status_for_host(&addr, "recourse.internal", "/healthz"), 200);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn api_answers_are_never_stored_by_a_cache_and_pages_still_revalidate() {
    let h = Harness::new().await;
    let bearer = format!("Bearer {}", h.token);
    let auth = [("authorization", bearer.as_str())];
    let (status, headers, created) = send(
        &h,
        Method::POST,
        "/api/v1/tokens",
        &auth,
        Some(json!({"name": "cached?", "permissions": ["view_routes"], "expires_in_days": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store", "the secret's answer");
    for uri in [
        "/api/v1/profiles",
        "/api/v1/tokens",
        "/api/v1/session",
        "/api/openapi.json",
        "/api/v1/no-such-thing",
    ] {
        let (_, headers, _) = send(&h, Method::GET, uri, &auth, None).await;
        assert_eq!(headers[header::CACHE_CONTROL], "no-store", "{uri}");
    }
    let (_, headers, _) = send(&h, Method::GET, "/api/v1/profiles", &[], None).await;
    assert_eq!(headers[header::CACHE_CONTROL], "no-store", "a 401 too");
    let (status, headers, _) = send(
        &h,
        Method::GET,
        "/",
        &[("cookie", &sign_in(&h, ADMIN, ADMIN_PASSWORD).await)],
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache", "pages revalidate");
}
