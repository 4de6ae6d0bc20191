//! The HTTP surface: the server-rendered UI, its static assets and `/healthz`.
//!
//! [`router`] builds the whole application from an [`AppState`]; [`run`] serves it on a
//! listener until a shutdown future resolves. Tests call both directly, so they exercise the
//! same code path as `recourse serve`.

use app::{shell, App};
use axum::{
    extract::{FromRef, State},
    http::StatusCode,
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use leptos::config::LeptosOptions;
use leptos_axum::{generate_route_list, LeptosRoutes};
use serde::Serialize;
use sqlx::SqlitePool;
use std::future::Future;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

/// Everything a request handler may need. Cheap to clone: the pool and options are shared.
#[derive(Clone)]
pub struct AppState {
    pub pool: SqlitePool,
    pub leptos: LeptosOptions,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let routes = generate_route_list(App);
    let leptos = state.leptos.clone();
    Router::new()
        .route("/healthz", get(healthz))
        .leptos_routes(&state, routes, move || shell(leptos.clone()))
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets in-flight requests end.
pub async fn run(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    database: &'static str,
}

/// Liveness and readiness: the process answers and the database takes a query.
async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    match sqlx::query_scalar::<_, i64>("SELECT 1")
        .fetch_one(&state.pool)
        .await
    {
        Ok(_) => (
            StatusCode::OK,
            Json(Health {
                status: "ok",
                database: "ok",
            }),
        ),
        Err(err) => {
            tracing::warn!(error = %err, "health check: database unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    status: "degraded",
                    database: "unavailable",
                }),
            )
        }
    }
}
