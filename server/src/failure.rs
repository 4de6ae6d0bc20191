//! Every way a request can fail, classified once by how the client must react ([`Failure`]),
//! and its two renderings: the REST response and the UI port's `BackendError`. The REST API
//! and the server functions therefore always agree (a stale generation is a conflict with the
//! current snapshot on both, never a 200 on one and a message on the other).
//!
//! Internal causes (storage, corruption, a failed task) are logged here, once, and never sent:
//! the client learns only that it may try again. Messages never repeat request input.

use crate::engine::EngineError;
use app::backend::BackendError;
use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use policy::{
    api::{ApiError, ApiErrorBody},
    document::ValidationErrors,
    wire::RouteSnapshot,
};

/// Why a request did not do what it asked, by how the client reacts.
#[derive(Debug)]
pub enum Failure {
    /// No principal, or credentials that do not hold; the message says what to send (401,
    /// `WWW-Authenticate: Bearer`).
    Unauthenticated(&'static str),
    /// A login that failed: one answer whatever the reason (401).
    LoginFailed,
    /// Too many login attempts (429, `Retry-After`).
    RateLimited { retry_after_secs: u64 },
    /// No such route or profile (404).
    NotFound(&'static str),
    /// The input was rejected; every problem with its field path (422).
    Invalid(ValidationErrors),
    /// The body is not JSON of the expected shape, or a path or query part is unreadable (400).
    BadRequest(String),
    /// The body is larger than `policy::limits::MAX_REQUEST_BODY_BYTES` (413).
    TooLarge,
    /// The caller is signed in but may not do this here; the message says what is needed (403).
    Forbidden(String),
    /// The request conflicts with what exists; the message is safe to show (409).
    Conflict(String),
    /// The route changed first or the request does not apply to it now (409, with the route's
    /// current snapshot as the body).
    Stale(Box<RouteSnapshot>),
    /// The decision could not be written durably; nothing ran (503).
    Unavailable,
    /// The credentials could not be checked (the database or the session store failed); the
    /// request was not let through (503).
    CannotCheck,
    /// The server is stopping and takes no new work; nothing changed (503, `Retry-After`).
    Stopping,
    /// Something failed inside the server (500).
    Internal,
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::RouteNotFound(_) => Failure::NotFound("route"),
            EngineError::ProfileNotFound(_) => Failure::NotFound("profile"),
            EngineError::Invalid(errors) => Failure::Invalid(errors),
            EngineError::Rejected { snapshot, .. } => Failure::Stale(snapshot),
            EngineError::Conflict(m) => Failure::Conflict(m),
            EngineError::ClaimedElsewhere => Failure::Conflict("another replica is firing this timer".into()),
            EngineError::Stopping => Failure::Stopping,
            EngineError::Storage(err) => {
                tracing::error!(error = %err, "storage failure");
                Failure::Unavailable
            }
            other @ (EngineError::Corrupt(_) | EngineError::Task) => {
                tracing::error!(error = %other, "request failed");
                Failure::Internal
            }
        }
    }
}

/// A failed login's one answer, whatever the reason.
const LOGIN_FAILED: &str = "The name or the password is wrong.";

fn rate_limited(retry_after_secs: u64) -> String {
    format!("Too many sign-in attempts; try again in {retry_after_secs} s.")
}

impl From<ValidationErrors> for Failure {
    fn from(errors: ValidationErrors) -> Self {
        Failure::Invalid(errors)
    }
}

/// An API error body (`policy::api::ApiError`) with `status`.
pub(crate) fn error_body(status: StatusCode, code: &str, message: String) -> Response {
    (
        status,
        Json(ApiError {
            error: ApiErrorBody {
                code: code.to_owned(),
                message,
            },
        }),
    )
        .into_response()
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        match self {
            Failure::Unauthenticated(message) => {
                let mut r = error_body(StatusCode::UNAUTHORIZED, "unauthenticated", message.to_owned());
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
            Failure::LoginFailed => {
                error_body(StatusCode::UNAUTHORIZED, "login_failed", LOGIN_FAILED.to_owned())
            }
            Failure::RateLimited { retry_after_secs } => {
                let mut r = error_body(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    rate_limited(retry_after_secs),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
                r
            }
            Failure::NotFound(what) => {
                error_body(StatusCode::NOT_FOUND, "not_found", format!("No such {what}."))
            }
            Failure::Invalid(errors) => (StatusCode::UNPROCESSABLE_ENTITY, Json(errors)).into_response(),
            Failure::BadRequest(m) => error_body(StatusCode::BAD_REQUEST, "bad_request", m),
            Failure::TooLarge => error_body(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "The body is larger than {} bytes.",
                    policy::limits::MAX_REQUEST_BODY_BYTES
                ),
            ),
            Failure::Forbidden(m) => error_body(StatusCode::FORBIDDEN, "forbidden", m),
            Failure::Conflict(m) => error_body(StatusCode::CONFLICT, "conflict", m),
            Failure::Stale(snapshot) => (StatusCode::CONFLICT, Json(*snapshot)).into_response(),
            Failure::Unavailable => error_body(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "The decision could not be written durably; nothing was scheduled or launched. Try again."
                    .to_owned(),
            ),
            Failure::CannotCheck => error_body(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "The server could not check the credentials; try again.".to_owned(),
            ),
            Failure::Stopping => {
                let mut r = error_body(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "stopping",
                    "The server is stopping; nothing changed. Try again in a moment.".to_owned(),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1u32));
                r
            }
            Failure::Internal => error_body(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Something went wrong on the server.".to_owned(),
            ),
        }
    }
}

impl From<Failure> for BackendError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::NotFound(what) => BackendError::NotFound { what },
            Failure::Invalid(errors) => BackendError::Invalid(errors),
            Failure::Conflict(m) | Failure::BadRequest(m) => BackendError::Conflict(m),
            Failure::TooLarge => BackendError::Conflict("The request is too large.".to_owned()),
            Failure::Forbidden(m) => BackendError::Forbidden(m),
            Failure::Unauthenticated(m) => BackendError::Forbidden(m.to_owned()),
            Failure::LoginFailed => BackendError::Forbidden(LOGIN_FAILED.to_owned()),
            Failure::RateLimited { retry_after_secs } => {
                BackendError::Forbidden(rate_limited(retry_after_secs))
            }
            Failure::Stale(snapshot) => BackendError::RouteChanged(snapshot),
            Failure::Unavailable | Failure::CannotCheck | Failure::Stopping | Failure::Internal => {
                BackendError::Unavailable
            }
        }
    }
}

/// The UI port's error for an engine error: through [`Failure`], so it is the REST API's.
pub fn backend_error(e: EngineError) -> BackendError {
    Failure::from(e).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::route::{start, CandidateOption};

    fn snapshot() -> Box<RouteSnapshot> {
        Box::new(start(&[CandidateOption::now("a")]).unwrap().next.snapshot())
    }

    /// An engine error, the status REST answers it with, and what the UI's port must say.
    type Case = (EngineError, StatusCode, fn(&BackendError) -> bool);

    /// Each engine error, as REST answers it and as the UI's port reports it: the same verdict.
    #[test]
    fn rest_and_the_ui_classify_every_engine_error_alike() {
        let invalid = ValidationErrors { errors: vec![] };
        let cases: Vec<Case> = vec![
            (
                EngineError::RouteNotFound("r".into()),
                StatusCode::NOT_FOUND,
                |b| matches!(b, BackendError::NotFound { what: "route" }),
            ),
            (
                EngineError::ProfileNotFound("p".into()),
                StatusCode::NOT_FOUND,
                |b| matches!(b, BackendError::NotFound { what: "profile" }),
            ),
            (
                EngineError::Invalid(invalid),
                StatusCode::UNPROCESSABLE_ENTITY,
                |b| matches!(b, BackendError::Invalid(_)),
            ),
            (
                EngineError::Rejected {
                    reason: "stale".into(),
                    error: None,
                    snapshot: snapshot(),
                    verdict: None,
                },
                StatusCode::CONFLICT,
                |b| matches!(b, BackendError::RouteChanged(_)),
            ),
            (EngineError::Conflict("dup".into()), StatusCode::CONFLICT, |b| {
                matches!(b, BackendError::Conflict(_))
            }),
            (
                EngineError::Storage(crate::store::StoreError::Sql(sqlx::Error::PoolClosed)),
                StatusCode::SERVICE_UNAVAILABLE,
                |b| matches!(b, BackendError::Unavailable),
            ),
            (EngineError::Stopping, StatusCode::SERVICE_UNAVAILABLE, |b| {
                matches!(b, BackendError::Unavailable)
            }),
            (
                EngineError::Corrupt("x".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                |b| matches!(b, BackendError::Unavailable),
            ),
        ];
        for (error, status, ui) in cases {
            let shown = format!("{error:?}");
            let failure = Failure::from(error);
            let as_ui = BackendError::from(Failure::from(clone_kind(&failure)));
            assert_eq!(failure.into_response().status(), status, "{shown}");
            assert!(ui(&as_ui), "{shown} -> {as_ui:?}");
        }
    }

    /// The authentication refusals (auth renders through `Failure`): status, code and the
    /// headers a client acts on.
    #[tokio::test]
    async fn authentication_refusals_have_their_status_code_and_headers() {
        let cases = [
            (
                Failure::Unauthenticated("Sign in."),
                401,
                "unauthenticated",
                Some((header::WWW_AUTHENTICATE, "Bearer")),
            ),
            (Failure::LoginFailed, 401, "login_failed", None),
            (
                Failure::RateLimited { retry_after_secs: 7 },
                429,
                "rate_limited",
                Some((header::RETRY_AFTER, "7")),
            ),
            (Failure::CannotCheck, 503, "storage_unavailable", None),
            (
                Failure::Stopping,
                503,
                "stopping",
                Some((header::RETRY_AFTER, "1")),
            ),
        ];
        for (failure, status, code, header) in cases {
            let shown = format!("{failure:?}");
            let r = failure.into_response();
            assert_eq!(r.status().as_u16(), status, "{shown}");
            if let Some((name, value)) = header {
                assert_eq!(r.headers()[&name], value, "{shown}");
            }
            let body = axum::body::to_bytes(r.into_body(), 4096).await.unwrap();
            let body: ApiError = serde_json::from_slice(&body).unwrap();
            assert_eq!(body.error.code, code, "{shown}");
        }
    }

    /// The same failure again (responses consume it).
    fn clone_kind(f: &Failure) -> EngineError {
        match f {
            Failure::NotFound("route") => EngineError::RouteNotFound(String::new()),
            Failure::NotFound(_) => EngineError::ProfileNotFound(String::new()),
            Failure::Invalid(e) => EngineError::Invalid(e.clone()),
            Failure::Stale(s) => EngineError::Rejected {
                reason: String::new(),
                error: None,
                snapshot: s.clone(),
                verdict: None,
            },
            Failure::Conflict(m) | Failure::BadRequest(m) | Failure::Forbidden(m) => {
                EngineError::Conflict(m.clone())
            }
            Failure::TooLarge => EngineError::Conflict(String::new()),
            Failure::Unavailable => {
                EngineError::Storage(crate::store::StoreError::Sql(sqlx::Error::PoolClosed))
            }
            Failure::Stopping => EngineError::Stopping,
            Failure::Internal => EngineError::Task,
            Failure::Unauthenticated(_)
            | Failure::LoginFailed
            | Failure::RateLimited { .. }
            | Failure::CannotCheck => unreachable!("not an engine error: {f:?}"),
        }
    }
}
