//! Server functions: the browser's and the page renderer's way to the backend port.
//!
//! Each body is thin: decode (done by the macro) -> validate again with `policy` (the browser
//! already did, but a server function is a public endpoint) -> one call on the port from
//! context -> map the port's error to the wire [`AppError`](crate::error::AppError). No SQL,
//! no logic beyond that.

pub mod access;
pub mod evidence;
pub mod notifications;
pub mod profiles;
pub mod routes;
pub mod runners;

#[cfg(feature = "ssr")]
mod ssr {
    use crate::{backend::BackendError, error::AppError};

    impl From<BackendError> for AppError {
        fn from(err: BackendError) -> Self {
            match err {
                BackendError::NotFound { .. } => AppError::NotFound,
                BackendError::Invalid(errors) => AppError::Invalid {
                    errors: errors.errors,
                },
                BackendError::Conflict(message) => AppError::Conflict { message },
                BackendError::RouteChanged(snapshot) => AppError::RouteChanged {
                    state: snapshot.state,
                    generation: snapshot.generation,
                },
                BackendError::Unavailable => AppError::Unavailable,
                BackendError::Forbidden(message) => AppError::Forbidden { message },
            }
        }
    }
}

#[cfg(all(test, feature = "ssr"))]
pub(crate) mod fake;
