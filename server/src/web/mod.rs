//! The HTTP surface: the server-rendered UI, its server functions, its static assets
//! ([`crate::assets`], embedded in the binary), the REST API ([`crate::api`]) and the
//! operations endpoints ([`crate::ops`]: `/healthz`, `/readyz`, `/metrics`).
//! Every response passes the layers of [`crate::revalidate`] (pages), compression (pages and
//! JSON; the event stream and precompressed assets pass through as they are) and
//! [`crate::headers`] (security headers).
//!
//! [`router`] builds the whole application from an [`AppState`]; [`run`] serves it on a
//! listener until a shutdown future resolves. Tests call both directly, so they exercise the
//! same code path as `recourse serve`.
//!
//! The backend port reaches Leptos through ONE context closure ([`backend_context`]), given to
//! both the page renderer and the server-function handler: the leptos_axum docs warn that
//! SSR and client calls of a server function go through different handlers.
//!
//! Every routed request (and the fallback) passes the ONE authentication and permission layer
//! ([`enforce::enforce`], applying [`crate::auth::rules`]); static assets are routed
//! after it and are public. Sessions come from tower-sessions on the same SQLite pool.
//!
//! Every request passes the request guard ([`crate::guard`]: writes only from this server's
//! own pages or from non-browser clients, and only as JSON) and a body limit
//! (`policy::limits::MAX_REQUEST_BODY_BYTES`, 413 beyond). [`Shutdown`] tells long-lived
//! responses (the event stream) that the server is stopping, so a graceful stop ends them.

pub mod enforce;

use crate::state::AppState;
use app::{backend::Backend, shell, App};
use axum::{
    body::Body,
    extract::{Request, State},
    http::StatusCode,
    middleware,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use axum::{extract::DefaultBodyLimit, handler::HandlerWithoutStateExt};
use leptos::prelude::provide_context;
use leptos_axum::{
    generate_route_list, handle_server_fns_with_context, render_app_to_stream_with_context, LeptosRoutes,
};
use std::{future::Future, sync::Arc};
use tokio::net::TcpListener;
use tower_http::{compression::CompressionLayer, trace::TraceLayer};

/// The one closure that provides the backend port to pages and server functions, and, to the
/// page renderer, the pieces of a split UI build (see [`lazy_pieces`]).
pub fn backend_context(backend: Arc<dyn Backend>) -> impl Fn() + Clone + Send + Sync + 'static {
    let pieces = lazy_pieces();
    move || {
        provide_context(backend.clone());
        if let Some(pieces) = &pieces {
            provide_context(pieces.clone());
        }
    }
}

/// The embedded UI's lazily loaded pieces, for Leptos's renderer: a page that renders a lazy
/// route gets `<link rel="preload">` for that route's WASM pieces (and its loader script), so
/// the browser fetches them beside the main WASM instead of after it. Leptos would read the
/// manifest from a folder on disk (`site_root`); an installed binary carries it instead, so the
/// server hands it over in the form Leptos's renderer looks for (a public, if undocumented,
/// type of `leptos` 0.8).
fn lazy_pieces() -> Option<leptos::WasmSplitManifest> {
    let ui = crate::assets::Site::embedded().ok()?.ui()?;
    let split = ui.split()?;
    Some(leptos::WasmSplitManifest(leptos::prelude::ArcStoredValue::new((
        format!("/{}", ui.pkg_dir()),
        split.pieces.clone(),
        split.loader.clone(),
    ))))
}

/// The UI's routes, generated once per process. Generating them renders the app with resource
/// loading suppressed through a process-wide flag (`leptos_server`'s `SuppressResourceLoad`), and
/// a resource first polled while that flag is up never loads: a page rendering then on another
/// thread hung forever. A process that builds several routers (the test binary; any embedder)
/// must therefore not generate them again while pages render; the list is the same every time.
fn route_list() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let routes = route_list();
    let leptos = state.leptos.clone();
    let not_found = state.leptos.clone();
    let pages = crate::headers::with_page_csp(backend_context(state.backend.clone()));
    let enforce = middleware::from_fn_with_state(state.clone(), enforce::enforce);
    // The fallback (unknown paths: the not-found page) is enforced too: `route_layer` covers
    // routes only.
    let fallback =
        tower::ServiceBuilder::new()
            .layer(enforce.clone())
            .service(HandlerWithoutStateExt::into_service(
                render_app_to_stream_with_context(pages.clone(), move || shell(not_found.clone())),
            ));
    let sessions = enforce::session_layer(&state.auth);
    Router::new()
        .route("/healthz", get(crate::ops::healthz))
        .route("/readyz", get(crate::ops::readyz))
        .route("/metrics", get(crate::ops::metrics))
        .merge(crate::api::routes(state.test_clock.is_some()))
        .route("/api/openapi.json", get(crate::openapi::document))
        .merge(crate::gateway::routes())
        .route(
            "/api/{*fn_name}",
            crate::guard::json_only(get(server_fn).post(server_fn)),
        )
        .leptos_routes_with_context(&state, routes, pages.clone(), move || shell(leptos.clone()))
        .merge(enforce::form_routes())
        .route_layer(enforce)
        .route_layer(axum::middleware::from_fn(server_fn_status))
        .merge(crate::assets::routes())
        .fallback_service(fallback)
        .layer(DefaultBodyLimit::max(policy::limits::MAX_REQUEST_BODY_BYTES))
        .layer(sessions)
        .layer(middleware::from_fn(enforce::secure_cookie))
        .layer(middleware::from_fn(crate::guard::writes))
        // Outside the sessions: a foreign `Host` never reaches a session or a demo sign-in.
        .layer(middleware::from_fn_with_state(state.clone(), crate::guard::hosts))
        .layer(middleware::from_fn(crate::revalidate::html))
        .layer(CompressionLayer::new()) // pages and JSON; not SSE, not precompressed assets
        .layer(middleware::from_fn(crate::headers::security))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets in-flight requests end
/// (long-lived ones end when their [`Shutdown`] fires; give the router's state that signal in
/// `shutdown`). A request still open [`DRAIN_TIMEOUT`] later does not hold the stop any
/// longer.
pub async fn run(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = async move {
        shutdown.await;
        let _ = stopping_tx.send(());
    };
    // The peer's address reaches handlers (the audit log, the login rate limits).
    let serve = std::future::IntoFuture::into_future(
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .with_graceful_shutdown(signal),
    );
    tokio::pin!(serve);
    tokio::select! {
        done = &mut serve => done,
        () = async {
            let _ = stopping_rx.await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        } => {
            tracing::warn!("requests still open {} s after the stop began; stopping anyway", DRAIN_TIMEOUT.as_secs());
            Ok(())
        }
    }
}

/// How long a graceful stop waits for in-flight requests.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Leptos server functions, with the same backend context as the pages (a name nobody
/// registered; Leptos routes the registered ones itself, see [`server_fn_status`]). Any other
/// path under `/api/` is the API's JSON 404, never Leptos's text answer, which repeats the
/// path (and a path may carry a secret pasted in the wrong place).
async fn server_fn(State(state): State<AppState>, req: Request<Body>) -> Response {
    if crate::auth::rules::registered_server_fn(req.uri().path()).is_none() {
        return crate::failure::error_body(
            StatusCode::NOT_FOUND,
            "not_found",
            "Nothing is served at this path: see /api/openapi.json.".to_owned(),
        );
    }
    handle_server_fns_with_context(backend_context(state.backend.clone()), req)
        .await
        .into_response()
}

/// Leptos answers every server function error with 500; a refusal gets the status the REST
/// API gives it instead ([`app::error::AppError::status`]): 422, 404, 409, 403. Only the
/// error bodies of `/api/ui/` are read (a few hundred bytes).
async fn server_fn_status(request: Request<Body>, next: axum::middleware::Next) -> Response {
    let ui = request.uri().path().starts_with("/api/ui/");
    let response = next.run(request).await;
    if !ui || response.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Ok(error) = serde_json::from_slice::<app::error::AppError>(&bytes) {
        parts.status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, Body::from(bytes))
}
