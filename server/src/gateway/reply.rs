//! Gateway answers: the style's JSON and event streams, errors in the style's shape (from
//! `policy::gateway::GatewayError`), and the `x-recourse-*` headers of a call's route. Every
//! refusal of a gateway request, from the authentication layer too, is rendered here once.

use crate::{auth::AuthError, engine::EngineError};
use axum::{
    body::{Body, Bytes},
    http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use futures_util::Stream;
use policy::gateway::{ErrorKind, GatewayError, Style};

/// The route a call started, as its answers name it.
#[derive(Debug, Clone, Default)]
pub(super) struct RouteHeaders {
    pub(super) route_id: String,
    /// The candidate that answered, or the route's current one.
    pub(super) candidate: String,
    /// The number of the route's latest attempt (attempts are numbered 1, 2, ... per route).
    pub(super) attempts: u32,
}

const ROUTE_ID: HeaderName = HeaderName::from_static("x-recourse-route-id");
const CANDIDATE: HeaderName = HeaderName::from_static("x-recourse-candidate");
const ATTEMPTS: HeaderName = HeaderName::from_static("x-recourse-attempts");

fn add_route(response: &mut Response, route: Option<&RouteHeaders>) {
    let Some(r) = route else { return };
    let headers = response.headers_mut();
    // Ids are identifiers the server made or the profile validated: valid header values.
    if let Ok(v) = HeaderValue::from_str(&r.route_id) {
        headers.insert(ROUTE_ID, v);
    }
    if let Ok(v) = HeaderValue::from_str(&r.candidate) {
        headers.insert(CANDIDATE, v);
    }
    headers.insert(ATTEMPTS, HeaderValue::from(r.attempts));
}

/// An error in `style`'s shape, with `Retry-After` when it has one.
pub(super) fn error(style: Style, e: &GatewayError, route: Option<&RouteHeaders>) -> Response {
    let status = StatusCode::from_u16(e.status(style)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        e.body(style).to_string(),
    )
        .into_response();
    if let Some(secs) = e.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if e.kind == ErrorKind::Unauthenticated {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    add_route(&mut response, route);
    response
}

/// A JSON answer (a provider's body as it sent it, or a list).
pub(super) fn json(body: String, route: Option<&RouteHeaders>) -> Response {
    let mut response = (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    add_route(&mut response, route);
    response
}

/// A streamed answer: the events as the provider sent them (never buffered or compressed).
pub(super) fn stream(
    events: impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
    route: &RouteHeaders,
) -> Response {
    let mut response = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-accel-buffering", "no")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    add_route(&mut response, Some(route));
    response
}

/// The authentication layer's refusal of a gateway request, in the style it speaks.
pub(crate) fn refusal(path: &str, headers: &HeaderMap, e: AuthError) -> Response {
    let style = super::style_of(path, headers);
    let error = match e {
        AuthError::Unauthenticated { .. } => GatewayError::new(
            ErrorKind::Unauthenticated,
            "Send a Recourse API token (`rct_...`) as `Authorization: Bearer` or `x-api-key`; this one \
             is missing, unknown, expired or revoked.",
        ),
        AuthError::Forbidden(message) => GatewayError::new(ErrorKind::Forbidden, message),
        AuthError::LoginFailed | AuthError::RateLimited { .. } => GatewayError::new(
            ErrorKind::Unauthenticated,
            "Send a Recourse API token as `Authorization: Bearer` or `x-api-key`.",
        ),
        AuthError::Store(err) => {
            tracing::error!(error = %err, "gateway authentication: storage failure");
            GatewayError::new(
                ErrorKind::Unavailable,
                "The server could not check the token; try again.",
            )
        }
        AuthError::Internal(err) => {
            tracing::error!(error = %err, "gateway authentication: internal failure");
            GatewayError::new(
                ErrorKind::Unavailable,
                "The server could not check the token; try again.",
            )
        }
    };
    self::error(style, &error, None)
}

/// An engine error as a gateway call answers it (its internal cause is logged, never sent).
pub(super) fn engine_error(e: EngineError) -> GatewayError {
    match e {
        EngineError::Invalid(errors) => GatewayError::new(
            ErrorKind::InvalidRequest,
            errors.errors.first().map_or_else(
                || "The profile cannot run this request.".to_owned(),
                |e| format!("The profile cannot run this request: {}", e.message),
            ),
        ),
        EngineError::ProfileNotFound(_) => GatewayError::unknown_model(),
        EngineError::RouteNotFound(_) => {
            GatewayError::new(ErrorKind::Unavailable, "The call's route is gone.")
        }
        EngineError::Storage(err) => {
            tracing::error!(error = %err, "gateway: storage failure");
            GatewayError::new(
                ErrorKind::Unavailable,
                "The call could not be recorded durably; nothing was sent. Try again.",
            )
        }
        EngineError::Stopping => {
            let mut error = GatewayError::new(
                ErrorKind::Unavailable,
                "Recourse is stopping; nothing was sent. Try again in a moment.",
            );
            error.retry_after = Some(1);
            error
        }
        other => {
            tracing::error!(error = %other, "gateway: request failed");
            GatewayError::new(ErrorKind::Internal, "Something went wrong in Recourse.")
        }
    }
}
