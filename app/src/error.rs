//! [`AppError`]: the one error type that crosses the wire between the server functions and the
//! browser. It is organised by how the page must react (put messages on fields, show the fresh
//! route, say "not found", say "try again"), carries stable codes and safe messages only, and
//! never internal detail: the server logs causes once at its edge before mapping them here.

use leptos::server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
    ServerFnError,
};
use policy::{route::StateName, wire::ValidationError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What went wrong, as the page needs to know it.
///
/// Written as `{"kind": "...", ...fields}`, and read back through [`Wire`], the same JSON as one
/// flat struct (see there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", try_from = "Wire")]
pub enum AppError {
    /// The input was rejected; each error names the field (`candidates[1].hard.retry.max_retries`).
    Invalid { errors: Vec<ValidationError> },
    /// The profile or route does not exist (any more).
    NotFound,
    /// The write was based on an outdated revision, or conflicts with current data; the
    /// message is safe to show.
    Conflict { message: String },
    /// A manual action lost: the route changed first (stale `expected_generation`) or the
    /// action no longer applies. Nothing was done; `state` and `generation` are the route's
    /// now. (Its state and generation, not its whole snapshot: the page reads the route again
    /// after any action, and this type is decoded by every page, so the main WASM would carry
    /// the decoding of a whole snapshot for it.)
    RouteChanged { state: StateName, generation: u64 },
    /// The server failed internally; the cause is in its log, not here.
    Unavailable,
    /// The signed-in person may not do this; the message says what is needed.
    Forbidden { message: String },
    /// The request did not complete: the server is down or the network failed.
    Unreachable,
}

impl AppError {
    /// A stable, machine-readable code.
    pub const fn code(&self) -> &'static str {
        match self {
            AppError::Invalid { .. } => "invalid",
            AppError::NotFound => "not_found",
            AppError::Conflict { .. } => "conflict",
            AppError::RouteChanged { .. } => "route_changed",
            AppError::Unavailable => "unavailable",
            AppError::Forbidden { .. } => "forbidden",
            AppError::Unreachable => "unreachable",
        }
    }

    /// The HTTP status a server function answers with this error: what the REST API answers
    /// for the same refusal (a refusal is never a 500).
    pub const fn status(&self) -> u16 {
        match self {
            AppError::Invalid { .. } => 422,
            AppError::NotFound => 404,
            AppError::Conflict { .. } | AppError::RouteChanged { .. } => 409,
            AppError::Forbidden { .. } => 403,
            AppError::Unavailable | AppError::Unreachable => 500,
        }
    }

    /// The errors addressed to `path`, if this is a validation failure.
    pub fn at<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a ValidationError> + 'a {
        let errors: &[ValidationError] = match self {
            AppError::Invalid { errors } => errors,
            _ => &[],
        };
        errors.iter().filter(move |e| e.path == path)
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Invalid { errors } if errors.len() == 1 => {
                f.write_str("The server rejected one value; it is marked below.")
            }
            AppError::Invalid { errors } => write!(
                f,
                "The server rejected {} values; they are marked below.",
                errors.len()
            ),
            AppError::NotFound => f.write_str("It does not exist, or it was deleted."),
            AppError::Conflict { message } | AppError::Forbidden { message } => f.write_str(message),
            AppError::RouteChanged { .. } => f.write_str(
                "The route changed before your action arrived (its timer fired, the provider answered, or \
                 someone else acted), so nothing was done. This is its current state; act again if still needed.",
            ),
            AppError::Unavailable => {
                f.write_str("The server could not complete the request. Nothing was changed; try again.")
            }
            AppError::Unreachable => f.write_str(
                "The server could not be reached. Check that Recourse is running, then try again.",
            ),
        }
    }
}

impl std::error::Error for AppError {}

/// [`AppError`] as it is read: its kind and every variant's fields, flat. Serde reads an
/// internally tagged enum through a buffered copy of the whole value (its `Content` path), and
/// every page reads this type, so that path would be in the main WASM for it alone; a plain
/// struct is read in one pass.
#[derive(Deserialize)]
struct Wire {
    kind: Kind,
    errors: Option<Vec<ValidationError>>,
    message: Option<String>,
    state: Option<StateName>,
    generation: Option<u64>,
}

/// [`AppError`]'s variants, by the names [`Wire::kind`] carries.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Invalid,
    NotFound,
    Conflict,
    RouteChanged,
    Unavailable,
    Forbidden,
    Unreachable,
}

impl TryFrom<Wire> for AppError {
    type Error = &'static str;

    fn try_from(w: Wire) -> Result<Self, &'static str> {
        Ok(match w.kind {
            Kind::Invalid => AppError::Invalid {
                errors: w.errors.ok_or("a refused input without its errors")?,
            },
            Kind::NotFound => AppError::NotFound,
            Kind::Conflict => AppError::Conflict {
                message: w.message.ok_or("a conflict without its message")?,
            },
            Kind::RouteChanged => AppError::RouteChanged {
                state: w.state.ok_or("a route change without the route's state")?,
                generation: w
                    .generation
                    .ok_or("a route change without the route's generation")?,
            },
            Kind::Unavailable => AppError::Unavailable,
            Kind::Forbidden => AppError::Forbidden {
                message: w.message.ok_or("a refusal without its message")?,
            },
            Kind::Unreachable => AppError::Unreachable,
        })
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::Request(_) | ServerFnErrorErr::UnsupportedRequestMethod(_) => {
                AppError::Unreachable
            }
            // The arguments sent do not read as the function's (a hand-made request): the
            // sender's mistake, said without echoing what was sent.
            ServerFnErrorErr::Args(_)
            | ServerFnErrorErr::MissingArg(_)
            | ServerFnErrorErr::Deserialization(_) => AppError::Invalid {
                errors: vec![ValidationError {
                    path: String::new(),
                    code: policy::wire::ValidationCode::WrongType,
                    message: "The request's arguments are not this function's (names and JSON types)."
                        .to_owned(),
                }],
            },
            _ => AppError::Unavailable,
        }
    }
}

impl From<ServerFnError> for AppError {
    fn from(_: ServerFnError) -> Self {
        AppError::Unavailable
    }
}

impl From<policy::wire::ValidationErrors> for AppError {
    fn from(errors: policy::wire::ValidationErrors) -> Self {
        AppError::Invalid {
            errors: errors.errors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::wire::ValidationCode;

    #[test]
    fn validation_errors_are_found_by_their_path() {
        let err = AppError::Invalid {
            errors: vec![ValidationError {
                path: "candidates[1].id".into(),
                code: ValidationCode::Duplicate,
                message: "Candidate id `a` is already used by candidates[0].".into(),
            }],
        };
        assert_eq!(err.at("candidates[1].id").count(), 1);
        assert_eq!(err.at("candidates[0].id").count(), 0);
        assert_eq!(AppError::NotFound.at("candidates[1].id").count(), 0);
    }

    #[test]
    fn the_wire_form_round_trips_and_names_its_kind() {
        let err = AppError::Unreachable;
        let bytes = err.ser();
        assert_eq!(&bytes[..], br#"{"kind":"unreachable"}"#);
        assert_eq!(AppError::de(bytes), err);
        let every = [
            AppError::Invalid {
                errors: vec![ValidationError {
                    path: "name".into(),
                    code: ValidationCode::Missing,
                    message: "A name is needed.".into(),
                }],
            },
            AppError::Invalid { errors: vec![] },
            AppError::NotFound,
            AppError::Conflict {
                message: "taken".into(),
            },
            AppError::RouteChanged {
                state: StateName::Retrying,
                generation: 7,
            },
            AppError::Unavailable,
            AppError::Forbidden {
                message: "not yours".into(),
            },
            AppError::Unreachable,
        ];
        for err in every {
            let text = serde_json::to_string(&err).unwrap();
            assert!(
                text.starts_with(&format!("{{\"kind\":\"{}\"", err.code())),
                "{text}"
            );
            assert_eq!(serde_json::from_str::<AppError>(&text).unwrap(), err, "{text}");
        }
        // A kind's fields are required as before; an unknown kind is refused.
        for bad in [
            r#"{"kind":"conflict"}"#,
            r#"{"kind":"invalid"}"#,
            r#"{"kind":"route_changed","state":"retrying"}"#,
            r#"{"kind":"no_such_kind"}"#,
            r#"{"message":"no kind"}"#,
        ] {
            assert!(serde_json::from_str::<AppError>(bad).is_err(), "{bad}");
        }
    }
}
