//! The gateway's decisions: Recourse as the base URL that SDKs and agents point at, speaking
//! OpenAI chat completions and Anthropic Messages (issue 31). Pure: the server holds the
//! connection, starts the route and reads its snapshots; everything it decides is here.
//!
//! - [`GatewayRequest::parse`]: a client's request body, parsed once under the gateway's limits
//!   (`limits::MAX_GATEWAY_*`) into the profile it names (`model`), whether it streams, and the
//!   route's work (its messages, and every other field as parameters, passed through as the
//!   client sent them: no translation between styles).
//! - [`max_wait`]: the `x-recourse-max-wait` header, bounded.
//! - [`check_candidates`]: whether a profile can serve a style: every candidate an `http`
//!   endpoint of that style.
//! - [`judge`]: what a waiting call does with its route's latest snapshot: hold on, or answer
//!   with an error now (and which).
//! - [`GatewayError`]: an error as the style's own shape (`{"error": {...}}` for OpenAI,
//!   `{"type": "error", "error": {...}}` for Anthropic), with the status an SDK maps to its usual
//!   exception, and the style's mid-stream error event. Messages are Recourse's own; they never
//!   carry a provider's text or the client's input.

use crate::{
    api::Work,
    class::SemanticCode,
    classification::ClassState,
    input::check_line,
    limits::{
        DEFAULT_GATEWAY_WAIT_SECONDS, MAX_GATEWAY_BODY_BYTES, MAX_GATEWAY_MESSAGES, MAX_GATEWAY_WAIT_SECONDS,
        MAX_ID_CHARS,
    },
    route::{DispatchState, StateName},
    wire::RouteSnapshot,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// The API style of a gateway endpoint (and of the `http` endpoints that can serve it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// `POST /v1/chat/completions`.
    Openai,
    /// `POST /v1/messages`.
    Anthropic,
}

impl Style {
    pub const fn as_str(self) -> &'static str {
        match self {
            Style::Openai => "openai",
            Style::Anthropic => "anthropic",
        }
    }

    /// The roles a message may have in this style.
    fn roles(self) -> &'static [&'static str] {
        match self {
            Style::Openai => &["system", "developer", "user", "assistant", "tool", "function"],
            Style::Anthropic => &["user", "assistant"],
        }
    }
}

/// A gateway call's request, parsed: the profile named by `model`, whether the client asked for
/// a stream, and the work the route carries.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayRequest {
    model: String,
    stream: bool,
    stream_options: Option<Value>,
    work: Work,
}

impl GatewayRequest {
    /// Parses a request body of `style`. Refusals are `invalid_request` (or `too_large`) naming
    /// the field, never repeating its value.
    pub fn parse(style: Style, body: &[u8]) -> Result<GatewayRequest, GatewayError> {
        if body.len() > MAX_GATEWAY_BODY_BYTES {
            return Err(GatewayError::too_large());
        }
        let invalid = |m: String| GatewayError::new(ErrorKind::InvalidRequest, m);
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            invalid(format!(
                "The body is not JSON (line {}, column {}).",
                e.line(),
                e.column()
            ))
        })?;
        let Value::Object(mut fields) = value else {
            return Err(invalid("The body is a JSON object.".into()));
        };
        let model = match fields.remove("model") {
            Some(Value::String(m)) if check_line(&m, "", MAX_ID_CHARS).is_ok() => m,
            Some(Value::String(_)) => {
                return Err(invalid(format!(
                    "`model` names a Recourse profile: its id or name, one line of 1 to {MAX_ID_CHARS} characters."
                )))
            }
            _ => return Err(invalid("`model` is required: the id or name of a Recourse profile.".into())),
        };
        let stream = match fields.remove("stream") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(invalid("`stream` is true or false.".into())),
        };
        let stream_options = match fields.remove("stream_options") {
            None | Some(Value::Null) => None,
            Some(o @ Value::Object(_)) if style == Style::Openai => Some(o),
            Some(_) => {
                return Err(invalid(
                    "`stream_options` is an object (OpenAI style only).".into(),
                ))
            }
        };
        let messages = match fields.remove("messages") {
            Some(Value::Array(m)) => m,
            _ => return Err(invalid("`messages` is required: an array of messages.".into())),
        };
        if messages.is_empty() {
            return Err(invalid("`messages` holds at least one message.".into()));
        }
        if messages.len() > MAX_GATEWAY_MESSAGES {
            return Err(invalid(format!(
                "`messages` holds at most {MAX_GATEWAY_MESSAGES} messages."
            )));
        }
        for (i, m) in messages.iter().enumerate() {
            let role = m.get("role").and_then(Value::as_str);
            if !role.is_some_and(|r| style.roles().contains(&r)) {
                return Err(invalid(format!(
                    "`messages[{i}]` is an object whose `role` is one of {}.",
                    style.roles().join(", ")
                )));
            }
        }
        Ok(GatewayRequest {
            model,
            stream,
            stream_options,
            work: Work {
                messages,
                params: fields,
                ..Work::default()
            },
        })
    }

    /// The profile the client named (an id, or a name).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Whether the client asked for a stream.
    pub fn stream(&self) -> bool {
        self.stream
    }

    /// OpenAI's `stream_options` (e.g. `include_usage`), sent along when the call streams.
    pub fn stream_options(&self) -> Option<&Value> {
        self.stream_options.as_ref()
    }

    /// The route's work: the messages, and every other field as a parameter.
    pub fn work(&self) -> &Work {
        &self.work
    }

    /// The route start this call makes: caller `utility`, the given invocation id, the work.
    pub fn into_start(
        self,
        profile_id: &str,
        invocation_id: &str,
        style: Style,
    ) -> crate::input::ValidatedStartRoute {
        let title = match style {
            Style::Openai => "Gateway call (OpenAI chat completions)",
            Style::Anthropic => "Gateway call (Anthropic Messages)",
        };
        crate::input::ValidatedStartRoute::gateway(
            profile_id,
            crate::api::Caller {
                kind: crate::api::CallerKind::Utility,
                reference: format!("gateway:{}", style.as_str()),
                invocation_id: invocation_id.to_owned(),
            },
            title,
            self.work,
        )
    }
}

/// The seconds a client is held while its route waits: the `x-recourse-max-wait` header (a whole
/// number from 0 to `MAX_GATEWAY_WAIT_SECONDS`), or the default without it.
pub fn max_wait(header: Option<&[u8]>) -> Result<u64, GatewayError> {
    let Some(raw) = header else {
        return Ok(DEFAULT_GATEWAY_WAIT_SECONDS);
    };
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| crate::whole::parse::<u64>(s.trim()))
        .filter(|s| *s <= MAX_GATEWAY_WAIT_SECONDS)
        .ok_or_else(|| {
            GatewayError::new(
                ErrorKind::InvalidRequest,
                format!("`x-recourse-max-wait` is a whole number of seconds from 0 to {MAX_GATEWAY_WAIT_SECONDS}."),
            )
        })
}

/// Whether a profile's candidates can serve `style`: each candidate's id with the style of the
/// `http` endpoint it names, or `None` when it is not an `http` candidate of a configured
/// endpoint. No translation between styles: any other candidate refuses the call.
pub fn check_candidates<'a>(
    style: Style,
    profile: &str,
    candidates: impl IntoIterator<Item = (&'a str, Option<Style>)>,
) -> Result<(), GatewayError> {
    for (id, served) in candidates {
        if served != Some(style) {
            let why = match served {
                Some(other) => format!("an endpoint of the {} style", other.as_str()),
                None => "not an HTTP endpoint of the server's configuration".to_owned(),
            };
            return Err(GatewayError::new(
                ErrorKind::InvalidRequest,
                format!(
                    "Profile `{profile}` cannot serve the {} style: its candidate `{id}` is {why} \
                     (no translation between styles).",
                    style.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// What a held call does with its route's latest snapshot.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Keep holding: an attempt is scheduled or running, or a wait ends before the client gives
    /// up.
    Hold,
    /// Answer the client with this error now; the route keeps its state.
    Answer(GatewayError),
}

/// Judges `s` at `now` for a client that holds until `give_up_at`.
///
/// - An attempt scheduled or running, or a switch under way: hold.
/// - A wait (retry, reset, or a pending attempt parked behind a circuit) that ends at or before
///   `give_up_at`: hold; one that ends later: answer now, `rate_limited` (429) for a rate limit
///   or a quota, `unavailable` (503) otherwise, with `Retry-After` until its deadline.
/// - `action_required`: the route stopped for a person: `rate_limited` for a rate limit or a
///   quota, `overloaded` for an overloaded provider or model, `unavailable` otherwise.
/// - A finished route, or an idle one (its answer went elsewhere): `unavailable`.
pub fn judge(s: &RouteSnapshot, now: DateTime<Utc>, give_up_at: DateTime<Utc>) -> Next {
    let code = s.code.as_deref().and_then(SemanticCode::parse);
    let wait_error = |until: DateTime<Utc>, what: &str| {
        let kind = if is_quota(code) {
            ErrorKind::RateLimited
        } else {
            ErrorKind::Unavailable
        };
        let mut e = GatewayError::new(
            kind,
            format!(
                "{} is {what} until {}, beyond x-recourse-max-wait; it keeps its state and goes \
                 on by itself (or try again later).",
                s_id(s),
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
        e.retry_after = Some(seconds_until(now, until));
        e
    };
    match s.state {
        StateName::Active | StateName::Retrying => match (&s.attempt, &s.hold) {
            (Some(a), Some(hold)) if a.dispatch == DispatchState::Pending && hold.until > give_up_at => {
                Next::Answer(wait_error(hold.until, "held behind an open circuit"))
            }
            (Some(_), _) => Next::Hold,
            (None, _) => Next::Answer(GatewayError::new(
                ErrorKind::Unavailable,
                format!("{} has no attempt running for this call.", s_id(s)),
            )),
        },
        StateName::Switching => Next::Hold,
        StateName::RetryWait | StateName::WaitingForReset => match s.deadline {
            Some(d) if d > give_up_at => Next::Answer(wait_error(
                d,
                if s.state == StateName::RetryWait {
                    "waiting to retry"
                } else {
                    "waiting for a reset"
                },
            )),
            _ => Next::Hold,
        },
        StateName::ActionRequired => {
            let kind = if is_quota(code) {
                ErrorKind::RateLimited
            } else if matches!(
                code,
                Some(SemanticCode::ProviderOverloaded | SemanticCode::ModelCapacity)
            ) {
                ErrorKind::Overloaded
            } else {
                ErrorKind::Unavailable
            };
            let cause = code.map_or_else(
                || match s.class {
                    Some(ClassState::Unclassified) => "an error Recourse could not classify".to_owned(),
                    _ => "a failure".to_owned(),
                },
                |c| format!("`{}`", c.as_str()),
            );
            Next::Answer(GatewayError::new(
                kind,
                format!(
                    "{} stopped for a person after {cause} ({}); no other attempt runs for this call.",
                    s_id(s),
                    s.action_reason.map_or("stopped", |r| r.as_str())
                ),
            ))
        }
        StateName::Completed | StateName::Abandoned => Next::Answer(GatewayError::new(
            ErrorKind::Unavailable,
            format!("{} ended before it answered this call.", s_id(s)),
        )),
    }
}

/// The route, as a message names it (its id is in the `x-recourse-route-id` header).
fn s_id(s: &RouteSnapshot) -> String {
    format!("The route (candidate `{}`)", s.candidate_id)
}

fn is_quota(code: Option<SemanticCode>) -> bool {
    matches!(code, Some(SemanticCode::RateLimited | SemanticCode::QuotaLimited))
}

/// Whole seconds from `now` until `until`, at least 1 (a `Retry-After` value).
pub fn seconds_until(now: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
    let ms = u64::try_from((until - now).num_milliseconds()).unwrap_or(0);
    ms.div_ceil(1000).max(1)
}

/// How the client must react to a gateway error: what SDKs map to their exception types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400: the request is not one this gateway takes.
    InvalidRequest,
    /// 401: no token, or one that does not hold.
    Unauthenticated,
    /// 403: the token may not do this.
    Forbidden,
    /// 404: no profile by that name.
    NotFound,
    /// 413: the body is larger than the gateway takes.
    TooLarge,
    /// 415: the body is not sent as JSON.
    UnsupportedMediaType,
    /// 429: a rate limit or quota (the route's), or too many calls open for this token.
    RateLimited,
    /// 529 (Anthropic) or 503 (OpenAI): the provider or model is overloaded.
    Overloaded,
    /// 503: no answer now (a wait beyond the client's, a route stopped for a person, storage).
    Unavailable,
    /// 500: something failed inside Recourse.
    Internal,
}

impl ErrorKind {
    /// The HTTP status in `style`.
    pub const fn status(self, style: Style) -> u16 {
        match self {
            ErrorKind::InvalidRequest => 400,
            ErrorKind::Unauthenticated => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::TooLarge => 413,
            ErrorKind::UnsupportedMediaType => 415,
            ErrorKind::RateLimited => 429,
            ErrorKind::Overloaded => match style {
                Style::Anthropic => 529,
                Style::Openai => 503,
            },
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// The error's `type` in `style`.
    pub const fn type_name(self, style: Style) -> &'static str {
        match (style, self) {
            (_, ErrorKind::InvalidRequest | ErrorKind::UnsupportedMediaType) => "invalid_request_error",
            (_, ErrorKind::Unauthenticated) => "authentication_error",
            (_, ErrorKind::Forbidden) => "permission_error",
            (Style::Anthropic, ErrorKind::NotFound) => "not_found_error",
            (Style::Openai, ErrorKind::NotFound) => "invalid_request_error",
            (Style::Anthropic, ErrorKind::TooLarge) => "request_too_large",
            (Style::Openai, ErrorKind::TooLarge) => "invalid_request_error",
            (_, ErrorKind::RateLimited) => "rate_limit_error",
            (Style::Anthropic, ErrorKind::Overloaded) => "overloaded_error",
            (Style::Openai, ErrorKind::Overloaded) => "server_error",
            (Style::Anthropic, ErrorKind::Unavailable | ErrorKind::Internal) => "api_error",
            (Style::Openai, ErrorKind::Unavailable | ErrorKind::Internal) => "server_error",
        }
    }

    /// A stable code (OpenAI's `error.code`).
    pub const fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::NotFound => "model_not_found",
            ErrorKind::TooLarge => "request_too_large",
            ErrorKind::UnsupportedMediaType => "unsupported_media_type",
            ErrorKind::RateLimited => "rate_limit_exceeded",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }
}

/// An error a gateway call answers with, in its style's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayError {
    pub kind: ErrorKind,
    /// Written by Recourse: never a provider's text or the client's input.
    pub message: String,
    /// Seconds for `Retry-After`.
    pub retry_after: Option<u64>,
}

impl GatewayError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> GatewayError {
        GatewayError {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The body is larger than the gateway takes.
    pub fn too_large() -> GatewayError {
        GatewayError::new(
            ErrorKind::TooLarge,
            format!("The request body is larger than {MAX_GATEWAY_BODY_BYTES} bytes."),
        )
    }

    /// No profile by the name the client gave.
    pub fn unknown_model() -> GatewayError {
        GatewayError::new(
            ErrorKind::NotFound,
            "No Recourse profile has this id or name (GET /v1/models lists those this token may use).",
        )
    }

    pub fn status(&self, style: Style) -> u16 {
        self.kind.status(style)
    }

    /// The error body in `style`.
    pub fn body(&self, style: Style) -> Value {
        match style {
            Style::Openai => json!({"error": {
                "message": self.message,
                "type": self.kind.type_name(style),
                "param": null,
                "code": self.kind.code(),
            }}),
            Style::Anthropic => json!({"type": "error", "error": {
                "type": self.kind.type_name(style),
                "message": self.message,
            }}),
        }
    }

    /// The error as the style's mid-stream event: an OpenAI `data:` object with `error` (then
    /// the stream ends without `[DONE]`), or Anthropic's `event: error`.
    pub fn stream_event(&self, style: Style) -> String {
        match style {
            Style::Openai => format!("data: {}\n\n", self.body(style)),
            Style::Anthropic => format!("event: error\ndata: {}\n\n", self.body(style)),
        }
    }
}

/// One profile as `GET /v1/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The profile's id: what `model` names.
    pub id: String,
    /// The profile's name.
    pub name: String,
    pub created: DateTime<Utc>,
}

/// The model list in `style`: OpenAI's `{"object": "list", "data": [...]}`, or Anthropic's page
/// (`data`, `has_more`, `first_id`, `last_id`).
pub fn models_body(style: Style, models: &[Model]) -> Value {
    match style {
        Style::Openai => {
            let data: Vec<Value> = models
                .iter()
                .map(|m| json!({"id": m.id, "object": "model", "created": m.created.timestamp(), "owned_by": "recourse"}))
                .collect();
            json!({"object": "list", "data": data})
        }
        Style::Anthropic => {
            let data: Vec<Value> = models
                .iter()
                .map(|m| {
                    json!({"type": "model", "id": m.id, "display_name": m.name,
                           "created_at": m.created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)})
                })
                .collect();
            let mut page = Map::new();
            page.insert("first_id".into(), json!(models.first().map(|m| &m.id)));
            page.insert("last_id".into(), json!(models.last().map(|m| &m.id)));
            page.insert("has_more".into(), json!(false));
            page.insert("data".into(), Value::Array(data));
            Value::Object(page)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{start, CandidateOption};
    use chrono::{TimeDelta, TimeZone};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
    }

    fn parse(style: Style, v: Value) -> Result<GatewayRequest, GatewayError> {
        GatewayRequest::parse(style, v.to_string().as_bytes())
    }

    #[test]
    fn a_request_keeps_every_field_but_model_stream_and_messages_as_parameters() {
        let r = parse(
            Style::Anthropic,
            json!({"model": "fast", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief."}],
                   "messages": [{"role": "user", "content": "hi"}], "stream": true, "tools": []}),
        )
        .unwrap();
        assert_eq!(r.model(), "fast");
        assert!(r.stream());
        assert_eq!(r.work().messages, vec![json!({"role": "user", "content": "hi"})]);
        // The map's order depends on serde_json's `preserve_order`, which other
        // crates of the workspace may switch on: compare as a set.
        let mut keys: Vec<&str> = r.work().params.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["max_tokens", "system", "tools"]);
        let o = parse(
            Style::Openai,
            json!({"model": "fast", "messages": [{"role": "developer", "content": "x"}, {"role": "tool", "content": "y", "tool_call_id": "c"}],
                   "stream_options": {"include_usage": true}}),
        )
        .unwrap();
        assert!(!o.stream());
        assert_eq!(o.stream_options(), Some(&json!({"include_usage": true})));
        assert!(o.work().params.is_empty());
    }

    #[test]
    fn a_request_is_refused_by_field_without_repeating_it() {
        let cases = [
            (json!([1]), "a JSON object"),
            (
                json!({"messages": [{"role": "user", "content": "x"}]}),
                "`model` is required",
            ),
            (json!({"model": "", "messages": []}), "`model` names"),
            (json!({"model": "a\u{7}b", "messages": []}), "`model` names"),
            (
                json!({"model": "m".repeat(MAX_ID_CHARS + 1), "messages": []}),
                "`model` names",
            ),
            (json!({"model": "m", "messages": []}), "at least one"),
            (json!({"model": "m"}), "`messages` is required"),
            (
                json!({"model": "m", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}),
                "`stream`",
            ),
            (
                json!({"model": "m", "messages": [{"role": "system", "content": "secret-ish"}]}),
                "`messages[0]`",
            ),
            (
                json!({"model": "m", "stream_options": {}, "messages": [{"role": "user", "content": "x"}]}),
                "`stream_options`",
            ),
        ];
        for (body, says) in cases {
            let e = parse(Style::Anthropic, body.clone()).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidRequest, "{body}");
            assert!(e.message.contains(says), "{body}: {}", e.message);
            assert!(!e.message.contains("secret-ish"));
        }
        let many: Vec<Value> = (0..=MAX_GATEWAY_MESSAGES)
            .map(|_| json!({"role": "user", "content": "x"}))
            .collect();
        let e = parse(Style::Openai, json!({"model": "m", "messages": many})).unwrap_err();
        assert!(e.message.contains(&format!("at most {MAX_GATEWAY_MESSAGES}")));
        let big = vec![b' '; MAX_GATEWAY_BODY_BYTES + 1];
        assert_eq!(
            GatewayRequest::parse(Style::Openai, &big).unwrap_err().kind,
            ErrorKind::TooLarge
        );
        assert!(GatewayRequest::parse(Style::Openai, b"{")
            .unwrap_err()
            .message
            .contains("not JSON"));
    }

    #[test]
    fn the_max_wait_header_is_bounded() {
        assert_eq!(max_wait(None), Ok(DEFAULT_GATEWAY_WAIT_SECONDS));
        assert_eq!(max_wait(Some(b" 0 ")), Ok(0));
        assert_eq!(max_wait(Some(b"600")), Ok(MAX_GATEWAY_WAIT_SECONDS));
        assert_eq!(
            max_wait(Some(b"5.0")),
            Ok(5),
            "a whole number, as everywhere in the API"
        );
        for bad in [&b"601"[..], b"-1", b"1.5", b"", b"\xff"] {
            assert_eq!(max_wait(Some(bad)).unwrap_err().kind, ErrorKind::InvalidRequest);
        }
    }

    #[test]
    fn only_endpoints_of_the_calls_style_serve_it() {
        assert!(check_candidates(Style::Openai, "p", [("a", Some(Style::Openai))]).is_ok());
        let e = check_candidates(
            Style::Openai,
            "p",
            [("a", Some(Style::Openai)), ("b", Some(Style::Anthropic))],
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("candidate `b` is an endpoint of the anthropic style"),
            "{}",
            e.message
        );
        let e = check_candidates(Style::Anthropic, "p", [("a", None)]).unwrap_err();
        assert!(e.message.contains("not an HTTP endpoint"));
    }

    fn snapshot() -> RouteSnapshot {
        start(&[CandidateOption::now("main")]).unwrap().next.snapshot()
    }

    #[test]
    fn a_call_holds_while_an_attempt_runs_and_for_a_wait_it_can_outlast() {
        let s = snapshot();
        assert_eq!(judge(&s, now(), now()), Next::Hold, "an attempt is pending");
        let mut w = s.clone();
        w.state = StateName::RetryWait;
        w.attempt = None;
        w.code = Some("provider_overloaded".into());
        w.deadline = Some(now() + TimeDelta::seconds(5));
        assert_eq!(judge(&w, now(), now() + TimeDelta::seconds(5)), Next::Hold);
        let Next::Answer(e) = judge(&w, now(), now() + TimeDelta::seconds(4)) else {
            panic!("a wait past the client's")
        };
        assert_eq!((e.kind, e.retry_after), (ErrorKind::Unavailable, Some(5)));
        w.state = StateName::WaitingForReset;
        w.code = Some("quota_limited".into());
        w.deadline = Some(now() + TimeDelta::milliseconds(600_001));
        let Next::Answer(e) = judge(&w, now(), now() + TimeDelta::seconds(1)) else {
            panic!("a reset past the client's wait")
        };
        assert_eq!((e.kind, e.retry_after), (ErrorKind::RateLimited, Some(601)));
        assert_eq!(e.status(Style::Anthropic), 429);
        let mut sw = s.clone();
        sw.state = StateName::Switching;
        assert_eq!(judge(&sw, now(), now()), Next::Hold);
    }

    #[test]
    fn a_route_that_stops_for_a_person_answers_by_its_cause() {
        let mut s = snapshot();
        s.state = StateName::ActionRequired;
        s.attempt = None;
        for (code, kind, anthropic, openai) in [
            (Some("provider_overloaded"), ErrorKind::Overloaded, 529, 503),
            (Some("quota_limited"), ErrorKind::RateLimited, 429, 429),
            (Some("auth_required"), ErrorKind::Unavailable, 503, 503),
            (None, ErrorKind::Unavailable, 503, 503),
        ] {
            s.code = code.map(str::to_owned);
            let Next::Answer(e) = judge(&s, now(), now()) else {
                panic!("stopped")
            };
            assert_eq!(e.kind, kind, "{code:?}");
            assert_eq!(
                (e.status(Style::Anthropic), e.status(Style::Openai)),
                (anthropic, openai)
            );
            assert!(e.message.contains("stopped for a person"), "{}", e.message);
        }
        s.state = StateName::Abandoned;
        assert!(matches!(judge(&s, now(), now()), Next::Answer(e) if e.kind == ErrorKind::Unavailable));
    }

    #[test]
    fn errors_take_each_styles_shape() {
        let e = GatewayError::new(ErrorKind::Overloaded, "busy");
        assert_eq!(
            e.body(Style::Anthropic),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        );
        assert_eq!(
            e.body(Style::Openai),
            json!({"error": {"message": "busy", "type": "server_error", "param": null, "code": "overloaded"}})
        );
        assert!(e
            .stream_event(Style::Anthropic)
            .starts_with("event: error\ndata: {"));
        assert!(e.stream_event(Style::Openai).starts_with("data: {\"error\""));
        assert!(e.stream_event(Style::Openai).ends_with("\n\n"));
    }

    #[test]
    fn models_list_in_each_styles_shape() {
        let m = [Model {
            id: "pf-1".into(),
            name: "Fast".into(),
            created: now(),
        }];
        assert_eq!(models_body(Style::Openai, &m)["data"][0]["object"], "model");
        let a = models_body(Style::Anthropic, &m);
        assert_eq!(a["data"][0]["display_name"], "Fast");
        assert_eq!(
            (a["first_id"].clone(), a["has_more"].clone()),
            (json!("pf-1"), json!(false))
        );
        assert_eq!(models_body(Style::Anthropic, &[])["first_id"], Value::Null);
    }

    #[test]
    fn retry_after_rounds_up_and_is_at_least_one_second() {
        assert_eq!(seconds_until(now(), now()), 1);
        assert_eq!(seconds_until(now(), now() - TimeDelta::seconds(3)), 1);
        assert_eq!(seconds_until(now(), now() + TimeDelta::milliseconds(1500)), 2);
    }
}
