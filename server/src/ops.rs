//! What an operator's tools call: `/healthz` (liveness: the process answers and the database
//! takes a query), `/readyz` (readiness: that, and every migration this binary embeds is
//! applied) and `/metrics` (Prometheus text, [`crate::metrics`]).
//!
//! `/healthz` and `/readyz` are public (a load balancer or an orchestrator probes them without
//! credentials, and they say nothing but "ok" or which check failed); `/metrics` needs
//! `view_routes` like the routes it counts (`crate::auth::rules`), so a scraper sends an API
//! token. None of them echoes anything of the request.

use crate::{db::MigrationStatus, state::AppState};
use axum::{
    extract::State,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;

/// The Prometheus text exposition format's content type.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Serialize)]
struct Health {
    status: &'static str,
    database: &'static str,
}

/// Liveness: the process answers and the database takes a query.
pub async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    match state.engine.store().ping().await {
        Ok(()) => (
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

/// `/readyz`'s body: each check and, for migrations, how far the database is.
#[derive(Serialize, Debug, PartialEq, Eq)]
struct Readiness {
    /// `ready` or `not_ready`.
    status: &'static str,
    /// `ok` or `unavailable`.
    database: &'static str,
    /// `current`, `pending` (the database is older than the binary), `failed` (a migration
    /// began and failed), `changed` (an applied migration differs from the binary's), or
    /// `unknown` (the database did not answer).
    migrations: &'static str,
    /// Migrations this binary embeds.
    embedded: usize,
    /// Embedded migrations the database lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<usize>,
    /// The first missing, failed or changed migration's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
}

/// Readiness: 200 only when the database answers and its migrations are current; 503 naming
/// the check that failed otherwise.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let store = state.engine.store();
    let embedded = crate::db::migrator(store.dialect())
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .count();
    let mut body = Readiness {
        status: "not_ready",
        database: "unavailable",
        migrations: "unknown",
        embedded,
        missing: None,
        version: None,
    };
    let applied = match store.ping().await {
        Ok(()) => store.applied_migrations().await,
        Err(e) => Err(e),
    };
    match applied {
        Err(err) => tracing::warn!(error = %err, "readiness check: database unavailable"),
        Ok(applied) => {
            body.database = "ok";
            let status = crate::db::migration_status(store.dialect(), &applied);
            match status {
                MigrationStatus::Current { .. } => body.migrations = "current",
                MigrationStatus::Pending { missing, first, .. } => {
                    body.migrations = "pending";
                    body.missing = Some(missing);
                    body.version = Some(first);
                }
                MigrationStatus::Failed { version } => {
                    body.migrations = "failed";
                    body.version = Some(version);
                }
                MigrationStatus::Changed { version } => {
                    body.migrations = "changed";
                    body.version = Some(version);
                }
            }
            if status.is_current() {
                body.status = "ready";
            } else {
                tracing::warn!(
                    ?status,
                    "readiness check: the database's migrations are not current"
                );
            }
        }
    }
    let code = if body.status == "ready" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

/// The metrics, with the due-timer backlog (on the injected clock) and the notification
/// deliveries pending and dead counted now. When a count cannot be read, the last one stays and
/// the rest is still served.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let engine = &state.engine;
    match engine.store().due_timer_count(engine.now()).await {
        Ok(n) => engine.metrics().set_due_timers(n),
        Err(err) => tracing::warn!(error = %err, "metrics: cannot count due timers"),
    }
    match engine.store().delivery_counts().await {
        Ok((pending, dead)) => engine.metrics().set_deliveries(pending, dead),
        Err(err) => tracing::warn!(error = %err, "metrics: cannot count notification deliveries"),
    }
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(METRICS_CONTENT_TYPE),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        engine.metrics().render(),
    )
        .into_response()
}
