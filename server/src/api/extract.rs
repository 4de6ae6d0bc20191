//! The parts of a REST request, read once, with every refusal a [`Failure`]: a JSON body in the
//! shared error shape, at a status the OpenAPI document lists for the operation. axum's own
//! extractors answer their rejections in plain text (and quote the input), so the API never
//! uses them directly.
//!
//! - [`JsonBody`]: the body, within the body limit (413 beyond), parsed into a request type
//!   (400 when it is not JSON of that shape; the message names fields, never values).
//! - [`RawBody`]: the body as bytes, for handlers that parse it themselves (profiles answer
//!   shape problems with field-addressed 422s; evidence is read by the classifier).
//! - [`Id`] and [`LeasePath`]: path parameters (400 when unreadable).
//! - [`RouteQuery`]: the route list's query string, every parameter bounded as the document
//!   says (422 at the parameter's name otherwise).
//! - [`AuditQuery`]: the audit log's page (`before`, `limit`), the same way;
//!   [`NotificationQuery`]: the notification list's and the deliveries' (and a `status`).

use crate::failure::Failure;
use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Path, Query, Request},
    http::{request::Parts, StatusCode},
};
use policy::{
    api::{CallerKind, RouteFilter},
    document::{ValidationCode, ValidationError, ValidationErrors},
    input::shape_message,
    limits::{
        DEFAULT_AUDIT_PAGE, DEFAULT_ROUTE_LIST_LIMIT, MAX_AUDIT_PAGE, MAX_CALLER_REFERENCE_CHARS,
        MAX_ID_CHARS, MAX_ROUTE_LIST_LIMIT,
    },
    route::StateName,
};
use serde::de::DeserializeOwned;

/// The request body as bytes (413 past the body limit).
pub(crate) struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Failure> {
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(Failure::TooLarge),
            Err(_) => Err(Failure::BadRequest(
                "The request body could not be read.".to_owned(),
            )),
        }
    }
}

/// A JSON body of type `T` (400 when it is not one).
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &S) -> Result<Self, Failure> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        json_body(&bytes).map(JsonBody)
    }
}

/// Reads a JSON body; a malformed one is 400 (the message names the field, never the value).
pub(crate) fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Failure> {
    serde_json::from_slice(body)
        .map_err(|e| Failure::BadRequest(format!("invalid JSON body: {}", shape_error(&e))))
}

/// What is wrong with a body's shape, with its position, without the input.
pub(crate) fn shape_error(e: &serde_json::Error) -> String {
    format!(
        "{} at line {} column {}",
        shape_message(&e.to_string()),
        e.line(),
        e.column()
    )
}

/// One `{id}` path parameter (a profile or route id).
pub(crate) struct Id(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| Id(id))
            .map_err(|_| Failure::BadRequest("The id in the path could not be read.".to_owned()))
    }
}

/// The `{route_id}/{attempt}` of a leased dispatch. An attempt is a whole number (`3` or
/// `3.0`); a path that cannot name one is 400.
pub(crate) struct LeasePath {
    pub route_id: String,
    pub attempt: u32,
}

impl<S: Send + Sync> FromRequestParts<S> for LeasePath {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Failure> {
        let Path((route_id, attempt)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| Failure::BadRequest("The path could not be read.".to_owned()))?;
        let attempt = policy::whole::parse::<u32>(&attempt)
            .filter(|a| *a >= 1)
            .ok_or_else(|| {
                Failure::BadRequest(format!(
                    "The attempt in the path is a whole number from 1 to {}.",
                    u32::MAX
                ))
            })?;
        Ok(LeasePath { route_id, attempt })
    }
}

/// The route list's filter, from the query string: every parameter as the document bounds it.
/// Unknown parameters are ignored; a known one given twice is refused.
pub(crate) struct RouteQuery(pub RouteFilter);

impl<S: Send + Sync> FromRequestParts<S> for RouteQuery {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failure> {
        parse_route_query(&query_pairs(parts)?)
            .map(RouteQuery)
            .map_err(Failure::Invalid)
    }
}

/// The query string's pairs, percent-decoded (400 when it cannot be read).
fn query_pairs(parts: &Parts) -> Result<Vec<(String, String)>, Failure> {
    Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
        .map(|Query(pairs)| pairs)
        .map_err(|_| Failure::BadRequest("The query string could not be read.".to_owned()))
}

/// One page of the audit log: rows with a `seq` below `before` (every row when absent), newest
/// first, at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    pub before: Option<i64>,
    pub limit: u32,
}

impl<S: Send + Sync> FromRequestParts<S> for AuditQuery {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failure> {
        let (before, limit) =
            parse_page(&query_pairs(parts)?, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE).map_err(Failure::Invalid)?;
        Ok(AuditQuery { before, limit })
    }
}

/// One page of the in-app notification list (`before`, `limit`), the audit log's way, or of
/// the deliveries, which may also name a `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotificationQuery {
    pub before: Option<i64>,
    pub limit: u32,
    pub status: Option<policy::notify::DeliveryStatus>,
}

impl<S: Send + Sync> FromRequestParts<S> for NotificationQuery {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Failure> {
        use policy::{
            limits::{DEFAULT_NOTIFICATION_PAGE, MAX_NOTIFICATION_PAGE},
            notify::DeliveryStatus,
        };
        let pairs = query_pairs(parts)?;
        let mut errors = Vec::new();
        let mut status = None;
        let statuses: Vec<&String> = pairs
            .iter()
            .filter(|(k, _)| k == "status")
            .map(|(_, v)| v)
            .collect();
        match statuses.as_slice() {
            [] => {}
            [one] => match DeliveryStatus::parse(one) {
                Some(s) => status = Some(s),
                None => errors.push(ValidationError {
                    path: "status".to_owned(),
                    code: ValidationCode::UnknownField,
                    message: "status is pending, delivered or dead.".to_owned(),
                }),
            },
            _ => errors.push(ValidationError {
                path: "status".to_owned(),
                code: ValidationCode::Duplicate,
                message: "Give `status` once.".to_owned(),
            }),
        }
        let page = parse_page(&pairs, DEFAULT_NOTIFICATION_PAGE, MAX_NOTIFICATION_PAGE);
        match page {
            Ok((before, limit)) if errors.is_empty() => Ok(NotificationQuery {
                before,
                limit,
                status,
            }),
            Ok(_) => Err(Failure::Invalid(ValidationErrors { errors })),
            Err(e) => {
                errors.extend(e.errors);
                Err(Failure::Invalid(ValidationErrors { errors }))
            }
        }
    }
}

/// `before` (a whole number) and `limit` (1 to `max`, `default` when absent) from a query.
fn parse_page(
    pairs: &[(String, String)],
    default: u32,
    max: u32,
) -> Result<(Option<i64>, u32), ValidationErrors> {
    let mut errors = Vec::new();
    let (mut before, mut limit) = (None, default);
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in pairs {
        let key = key.as_str();
        if !["before", "limit"].contains(&key) {
            continue;
        }
        let problem = if seen.contains(&key) {
            Some((ValidationCode::Duplicate, format!("Give `{key}` once.")))
        } else if key == "before" {
            match policy::whole::parse::<i64>(value) {
                Some(seq) => {
                    before = Some(seq);
                    None
                }
                None => Some((
                    ValidationCode::WrongType,
                    "before is a whole number (a row's seq).".to_owned(),
                )),
            }
        } else {
            match policy::whole::parse::<u32>(value) {
                Some(n) if (1..=max).contains(&n) => {
                    limit = n;
                    None
                }
                _ => Some((
                    ValidationCode::OutOfRange,
                    format!("limit is a whole number from 1 to {max}."),
                )),
            }
        };
        seen.push(key);
        if let Some((code, message)) = problem {
            errors.push(ValidationError {
                path: key.to_owned(),
                code,
                message,
            });
        }
    }
    if errors.is_empty() {
        Ok((before, limit))
    } else {
        Err(ValidationErrors { errors })
    }
}

fn parse_route_query(pairs: &[(String, String)]) -> Result<RouteFilter, ValidationErrors> {
    let mut errors = Vec::new();
    let mut problem = |path: &str, code: ValidationCode, message: String| {
        errors.push(ValidationError {
            path: path.to_owned(),
            code,
            message,
        })
    };
    let mut filter = RouteFilter {
        limit: Some(DEFAULT_ROUTE_LIST_LIMIT),
        ..RouteFilter::default()
    };
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in pairs {
        let key = key.as_str();
        let known = [
            "caller_kind",
            "caller_reference",
            "state",
            "open_only",
            "profile_id",
            "limit",
        ];
        if !known.contains(&key) {
            continue;
        }
        if seen.contains(&key) {
            problem(key, ValidationCode::Duplicate, format!("Give `{key}` once."));
            continue;
        }
        seen.push(key);
        let too_long = |max: usize| value.chars().count() > max;
        match key {
            "caller_kind" => match CallerKind::parse(value) {
                Some(k) => filter.caller_kind = Some(k),
                None => problem(
                    key,
                    ValidationCode::WrongType,
                    "A caller kind is kanban_task, workflow, utility or office.".to_owned(),
                ),
            },
            "state" => match StateName::parse(value) {
                Some(s) => filter.state = Some(s),
                None => problem(
                    key,
                    ValidationCode::WrongType,
                    "Not a route state (see the StateName schema).".to_owned(),
                ),
            },
            "open_only" => match value.as_str() {
                "true" => filter.open_only = true,
                "false" => filter.open_only = false,
                _ => problem(
                    key,
                    ValidationCode::WrongType,
                    "open_only is true or false.".to_owned(),
                ),
            },
            "limit" => match policy::whole::parse::<u32>(value) {
                Some(n) if (1..=MAX_ROUTE_LIST_LIMIT).contains(&n) => filter.limit = Some(n),
                _ => problem(
                    key,
                    ValidationCode::OutOfRange,
                    format!("limit is a whole number from 1 to {MAX_ROUTE_LIST_LIMIT}."),
                ),
            },
            "caller_reference" if too_long(MAX_CALLER_REFERENCE_CHARS) => problem(
                key,
                ValidationCode::TooLong,
                format!("Use at most {MAX_CALLER_REFERENCE_CHARS} characters."),
            ),
            "caller_reference" => filter.caller_reference = Some(value.clone()),
            "profile_id" if too_long(MAX_ID_CHARS) => problem(
                key,
                ValidationCode::TooLong,
                format!("Use at most {MAX_ID_CHARS} characters."),
            ),
            _ => filter.profile_id = Some(value.clone()),
        }
    }
    if errors.is_empty() {
        Ok(filter)
    } else {
        Err(ValidationErrors { errors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(q: &str) -> Result<RouteFilter, ValidationErrors> {
        let uri: axum::http::Uri = format!("/api/v1/routes?{q}").parse().unwrap();
        parse_route_query(&Query::<Vec<(String, String)>>::try_from_uri(&uri).unwrap().0)
    }

    fn audit(q: &str) -> Result<AuditQuery, ValidationErrors> {
        let uri: axum::http::Uri = format!("/api/v1/audit?{q}").parse().unwrap();
        parse_page(
            &Query::<Vec<(String, String)>>::try_from_uri(&uri).unwrap().0,
            DEFAULT_AUDIT_PAGE,
            MAX_AUDIT_PAGE,
        )
        .map(|(before, limit)| AuditQuery { before, limit })
    }

    fn paths(e: ValidationErrors) -> Vec<String> {
        e.errors.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn the_route_query_takes_what_the_document_allows() {
        let f = query("caller_kind=office&state=retry_wait&open_only=true&limit=5.0&caller_reference=&x=1")
            .unwrap();
        assert_eq!(f.caller_kind, Some(CallerKind::Office));
        assert_eq!(f.state, Some(StateName::RetryWait));
        assert!(f.open_only);
        assert_eq!(f.limit, Some(5));
        assert_eq!(f.caller_reference.as_deref(), Some(""));
        assert_eq!(query("").unwrap().limit, Some(DEFAULT_ROUTE_LIST_LIMIT));
        assert_eq!(query("limit=1000").unwrap().limit, Some(MAX_ROUTE_LIST_LIMIT));
    }

    #[test]
    fn the_route_query_refuses_what_the_document_excludes_by_name() {
        let long = "r".repeat(MAX_CALLER_REFERENCE_CHARS + 1);
        let e = query(&format!(
            "caller_kind=&state=lunch&open_only=1&limit=0&caller_reference={long}&profile_id={}",
            "p".repeat(MAX_ID_CHARS + 1)
        ))
        .unwrap_err();
        assert_eq!(
            paths(e),
            [
                "caller_kind",
                "state",
                "open_only",
                "limit",
                "caller_reference",
                "profile_id"
            ]
        );
        for bad in ["limit=1001", "limit=2.5", "limit=-1", "limit=1&limit=2"] {
            assert_eq!(paths(query(bad).unwrap_err()), ["limit"], "{bad}");
        }
    }

    #[test]
    fn the_audit_query_reads_whole_numbers_in_range_and_names_the_parameter_it_refuses() {
        assert_eq!(
            audit("").unwrap(),
            AuditQuery {
                before: None,
                limit: DEFAULT_AUDIT_PAGE
            }
        );
        assert_eq!(
            audit("before=1.5e1&limit=5.0&x=y").unwrap(),
            AuditQuery {
                before: Some(15),
                limit: 5
            }
        );
        assert_eq!(audit("before=-3").unwrap().before, Some(-3));
        assert_eq!(audit("limit=500").unwrap().limit, MAX_AUDIT_PAGE);
        for bad in ["limit=0", "limit=501", "limit=x", "limit=2.5", "limit=1&limit=2"] {
            assert_eq!(paths(audit(bad).unwrap_err()), ["limit"], "{bad}");
        }
        for bad in ["before=1.5", "before=x", "before=", "before=99999999999999999999"] {
            assert_eq!(paths(audit(bad).unwrap_err()), ["before"], "{bad}");
        }
    }
}
