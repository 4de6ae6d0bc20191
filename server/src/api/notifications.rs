//! Notifications over the API: the caller's in-app list and marking it read, the deliveries to
//! configured channels (dead ones above all), and the channels a profile's rules may name.
//! What each needs is in `crate::auth::rules`; the work is `crate::notify`'s.

use super::{extract::NotificationQuery, ApiResult};
use crate::{
    api::extract::JsonBody,
    auth::Principal,
    guard::json_only,
    notify::{self, Reader},
    state::AppState,
};
use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
    Extension, Json, Router,
};
use policy::notify::MarkRead;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/notifications", get(list))
        .route("/api/v1/notifications/read", json_only(post(mark_read)))
        .route("/api/v1/notifications/deliveries", get(deliveries))
        .route("/api/v1/notifications/channels", get(channels))
}

fn reader(p: &Principal) -> Reader<'_> {
    Reader {
        account_id: &p.account_id,
        within: p.profile_ids.as_deref(),
    }
}

async fn list(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    q: NotificationQuery,
) -> ApiResult<Response> {
    let page = notify::list(&s.engine, &reader(&p), q.before, Some(q.limit)).await?;
    Ok(Json(page).into_response())
}

async fn mark_read(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    JsonBody(body): JsonBody<MarkRead>,
) -> ApiResult<Response> {
    notify::mark_read(&s.engine, &reader(&p), body.through_seq).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn deliveries(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    q: NotificationQuery,
) -> ApiResult<Response> {
    let rows = notify::deliveries(&s.engine, &reader(&p), q.status, q.before, Some(q.limit)).await?;
    Ok(Json(rows).into_response())
}

async fn channels(State(s): State<AppState>) -> Response {
    Json(notify::channels(&s.engine)).into_response()
}

/// The OpenAPI description of these endpoints.
pub(crate) mod openapi_paths {
    #![allow(dead_code)]
    use policy::notify::{ChannelOption, DeliveryView, MarkRead, NotificationPage};

    #[utoipa::path(get, path = "/api/v1/notifications", params(
        ("before" = Option<i64>, Query, description = "Only notifications before this `seq`"),
        ("limit" = Option<u32>, Query, description = "How many, 1 to 200 (default 50)")),
        responses((status = 200, body = NotificationPage,
            description = "The caller's in-app notifications, newest first, and how many are unread"),
        (status = 422, description = "`before` not a whole number, or `limit` not one from 1 to 200, at the parameter's name")))]
    pub(crate) fn list_notifications() {}

    #[utoipa::path(post, path = "/api/v1/notifications/read", request_body = MarkRead, responses(
        (status = 204, description = "Every notification up to `through_seq` is read for the caller's account")))]
    pub(crate) fn mark_notifications_read() {}

    #[utoipa::path(get, path = "/api/v1/notifications/deliveries", params(
        ("status" = Option<policy::notify::DeliveryStatus>, Query, description = "Only deliveries in this status"),
        ("before" = Option<i64>, Query, description = "Only deliveries of events before this `seq`"),
        ("limit" = Option<u32>, Query, description = "How many, 1 to 200 (default 50)")),
        responses((status = 200, body = [DeliveryView],
            description = "Deliveries to configured channels (webhooks, e-mail), newest event first"),
        (status = 422, description = "An unknown `status`, `before` not a whole number, or `limit` out of range, at the parameter's name")))]
    pub(crate) fn list_deliveries() {}

    #[utoipa::path(get, path = "/api/v1/notifications/channels", responses(
        (status = 200, body = [ChannelOption],
         description = "The channels a profile's notification rules may name now: `in_app`, then the configuration's")))]
    pub(crate) fn list_channels() {}
}
