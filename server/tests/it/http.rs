//! The HTTP surface through the real router, without a socket, as the administrator's API token
//! (the harness's `tester`), except where a test says it has no credentials.

use crate::common;

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use server::{
    cli::{DatabaseArgs, ServeArgs},
    clock::SystemClock,
    db,
    engine::Engine,
    serve,
    state::AppState,
    web::router,
};
use std::sync::Arc;
use tower::ServiceExt;

async fn app(dir: &tempfile::TempDir) -> (axum::Router, String) {
    let (state, token) = state(dir).await;
    (router(state), token)
}

/// The application's state on a database in `dir`, and the administrator's API token.
async fn state(dir: &tempfile::TempDir) -> (AppState, String) {
    let database = common::backend::database(dir.path(), "http.db");
    let args = ServeArgs {
        addr: "127.0.0.1:0".parse().unwrap(),
        db: DatabaseArgs {
            database: database.clone(),
        },
        demo: false,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
        test_clock: None,
        test_clock_skew_seconds: None,
        config: None,
        replica_id: None,
    };
    let pool = db::open(&database).await.unwrap();
    let engine = Engine::new(server::store::Store::new(pool), Arc::new(SystemClock));
    let state = AppState::new(engine, serve::leptos_options(&args).unwrap(), None);
    let token = common::account_token(&state.auth, common::ADMIN, "admin", common::ADMIN_PASSWORD).await;
    (state, token)
}

async fn get((app, token): (axum::Router, String), path: &str) -> (u16, String) {
    let res = app
        .oneshot(
            Request::get(path)
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn healthz_reports_ok_when_the_database_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (status, body) = get(app(&dir).await, "/healthz").await;
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"status":"ok","database":"ok"}"#);
}

#[tokio::test]
async fn home_page_is_server_rendered_with_navigation_and_an_empty_state() {
    let dir = tempfile::tempdir().unwrap();
    let (status, body) = get(app(&dir).await, "/").await;
    assert_eq!(status, 200);
    assert!(body.starts_with("<!DOCTYPE html>"), "{body}");
    assert!(
        body.contains(r#"<nav aria-label="Main""#),
        "navigation is rendered"
    );
    assert!(body.contains("No open routes"), "empty state is rendered");
    assert!(
        body.contains("/pkg/recourse.js"),
        "hydration script is referenced"
    );
}

/// Pages render while other routers are being built. Building one used to generate the UI's
/// route list, which renders the app with resource loading suppressed by a process-wide flag;
/// a page's resource first polled meanwhile never loaded, and its render hung forever (the
/// PostgreSQL pass of `./dev test` hung on `home_page_is_server_rendered…`). Four threads, each
/// on a runtime of its own, build a router and render the home page with it, over and over;
/// every render must finish.
#[test]
fn pages_render_while_other_routers_are_built() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 40;
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let dir = tempfile::tempdir().unwrap();
                    let (state, token) = state(&dir).await;
                    for round in 0..ROUNDS {
                        let app = router(state.clone());
                        let render = get((app, token.clone()), "/");
                        let Ok((status, body)) =
                            tokio::time::timeout(std::time::Duration::from_secs(20), render).await
                        else {
                            panic!("round {round}: the home page never finished rendering");
                        };
                        assert_eq!(status, 200);
                        assert!(body.contains("No open routes"), "round {round}: {body}");
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[tokio::test]
async fn unknown_paths_render_the_not_found_page_with_404() {
    let dir = tempfile::tempdir().unwrap();
    let (status, body) = get(app(&dir).await, "/definitely/not/here").await;
    assert_eq!(status, 404);
    assert!(body.contains("Page not found"));
}
