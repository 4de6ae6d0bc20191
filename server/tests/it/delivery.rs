//! How responses leave the server (issue 18), through the real router: security headers on
//! everything, the page's CSP nonce, compression of pages and JSON but never of the event
//! stream, and pages revalidated with their ETag. Also the page a binary built without its UI
//! answers with (issue 15).

use crate::common;

use axum::{
    body::Body,
    http::{HeaderMap, Request, StatusCode},
    middleware, Router,
};
use common::{candidate, disabled, sim, succeed, Harness};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

/// A GET as the harness's administrator token.
async fn send(
    app: &Router,
    token: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = Request::get(path).header("authorization", format!("Bearer {token}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).map(|v| v.to_str().unwrap())
}

/// This file's tests, one at a time. Each `#[tokio::test]` has a runtime of its
/// own; a page rendered while another test rendered a page or held the event stream open hung
/// now and then in this binary (about 1 run in 5 on 2 cores), never with one test at a time.
/// The server runs one runtime and the browser tests load pages and streams together without
/// it, but the cause is not understood yet; until it is, these tests take turns.
static PAGES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn nonce_in_page(page: &str) -> String {
    let at = page
        .find("<script type=\"module\" nonce=\"")
        .expect("the hydration script carries a nonce")
        + "<script type=\"module\" nonce=\"".len();
    page[at..at + page[at..].find('"').unwrap()].to_string()
}

#[tokio::test]
async fn a_page_carries_a_policy_with_the_nonce_of_its_hydration_script() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let (status, headers, body) = send(&h.app, &h.token, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let page = String::from_utf8(body).unwrap();
    let nonce = nonce_in_page(&page);
    let policy = header(&headers, "content-security-policy").unwrap();
    assert!(
        policy.contains(&format!("script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'")),
        "{policy}"
    );
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    assert_eq!(header(&headers, "referrer-policy"), Some("same-origin"));
    assert_eq!(header(&headers, "x-frame-options"), Some("DENY"));
    assert_eq!(
        header(&headers, "strict-transport-security"),
        None,
        "not over TLS"
    );

    let (_, again, body) = send(&h.app, &h.token, "/", &[]).await;
    let other = nonce_in_page(&String::from_utf8(body).unwrap());
    assert_ne!(nonce, other, "every page gets a fresh nonce");
    assert!(header(&again, "content-security-policy")
        .unwrap()
        .contains(&other));
}

#[tokio::test]
async fn json_gets_the_policy_without_a_nonce_and_is_compressed_when_the_client_accepts_it() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let (status, headers, _) = send(
        &h.app,
        &h.token,
        "/api/openapi.json",
        &[("accept-encoding", "br, gzip")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "content-encoding"), Some("br"));
    let policy = header(&headers, "content-security-policy").unwrap();
    assert!(
        policy.contains("frame-ancestors 'none'") && !policy.contains("nonce"),
        "{policy}"
    );
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    let (_, plain, _) = send(&h.app, &h.token, "/api/openapi.json", &[]).await;
    assert_eq!(header(&plain, "content-encoding"), None);
}

#[tokio::test]
async fn pages_are_compressed_when_the_client_accepts_it() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let (_, headers, body) = send(&h.app, &h.token, "/profiles", &[("accept-encoding", "gzip")]).await;
    assert_eq!(header(&headers, "content-encoding"), Some("gzip"));
    assert_eq!(&body[..2], &[0x1f, 0x8b], "a gzip stream");
}

#[tokio::test]
async fn the_event_stream_is_never_compressed_or_buffered() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let req = Request::get("/api/v1/events")
        .header("authorization", format!("Bearer {}", h.token))
        .header("accept-encoding", "br, gzip")
        .body(Body::empty())
        .unwrap();
    // The stream never ends: the response (headers) must arrive without waiting for a body.
    let res = h.app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(res.headers(), "content-type"), Some("text/event-stream"));
    assert_eq!(header(res.headers(), "content-encoding"), None);
    assert_eq!(header(res.headers(), "x-content-type-options"), Some("nosniff"));
}

#[tokio::test]
async fn a_page_is_revalidated_with_its_etag_and_a_current_copy_gets_a_bare_304() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let (status, headers, _) = send(&h.app, &h.token, "/profiles", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "cache-control"), Some("no-cache"));
    let etag = header(&headers, "etag").unwrap().to_string();
    assert!(etag.starts_with("W/\""), "{etag}");
    // The next render has another nonce but the same content: the same ETag.
    let (_, again, _) = send(&h.app, &h.token, "/profiles", &[]).await;
    assert_eq!(header(&again, "etag"), Some(etag.as_str()));

    let (status, headers, body) = send(&h.app, &h.token, "/profiles", &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());
    assert_eq!(header(&headers, "etag"), Some(etag.as_str()));
    // The browser keeps the policy it stored with the page, whose nonce matches that page.
    assert_eq!(header(&headers, "content-security-policy"), None);
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));

    // A change to the page's content changes the ETag.
    h.profile(
        json!({"name": "etag", "targets": [sim("a", "anthropic", json!([succeed()]))],
        "policy": {"version": 1, "candidates": [candidate("a", disabled(), disabled())]}}),
    )
    .await;
    let (status, _, _) = send(&h.app, &h.token, "/profiles", &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn hsts_is_sent_only_when_a_proxy_reports_that_the_request_came_over_tls() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let (_, headers, _) = send(&h.app, &h.token, "/healthz", &[("x-forwarded-proto", "https")]).await;
    assert_eq!(
        header(&headers, "strict-transport-security"),
        Some("max-age=31536000")
    );
    let (_, headers, _) = send(&h.app, &h.token, "/healthz", &[("x-forwarded-proto", "http")]).await;
    assert_eq!(header(&headers, "strict-transport-security"), None);
}

#[tokio::test]
async fn a_binary_without_its_ui_answers_pages_with_how_to_build_it_and_the_api_as_usual() {
    let _turn = PAGES.lock().await;
    let h = Harness::new().await;
    let app = h
        .app
        .clone()
        .layer(middleware::from_fn(server::assets::ui_missing));
    let (status, headers, body) = send(&app, &h.token, "/", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let page = String::from_utf8(body).unwrap();
    assert!(page.contains("built without its web UI"), "{page}");
    assert!(
        page.contains("cargo leptos build --release --precompress"),
        "{page}"
    );
    assert!(header(&headers, "content-type").unwrap().starts_with("text/html"));
    assert!(header(&headers, "content-security-policy").is_some());
    assert_eq!(header(&headers, "x-frame-options"), Some("DENY"));
    let (status, _, _) = send(&app, &h.token, "/healthz", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = send(&app, &h.token, "/api/v1/profiles", &[]).await;
    assert_eq!(status, StatusCode::OK);
}
