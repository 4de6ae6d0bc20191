//! `recourse acp`'s side of the REST API: the calls an editor session makes to its Recourse
//! server (start a route, send the next prompt, act on it, read it) and the lease protocol of
//! the route's attempts (claim limited to the route, acknowledge, heartbeat, report), with the
//! API token from the environment on every call.
//!
//! A call that cannot reach the server (it restarts, the network blips) is tried again with
//! backoff, from 100 ms doubling to 5 s, for as long as [`Api::patience`]: long enough to ride
//! out a restart, after which the caller tells the person. Every call the server may have
//! applied before the connection broke is one whose repeat is harmless: fenced by the route's
//! generation (work, actions), by the lease (heartbeat, report), or refused as a repeat (a
//! route start names its invocation, which has at most one route). A claim (acknowledged at
//! once) whose answer was lost is the one exception: its repeat finds the attempt held, nobody
//! runs it, and its lease runs out into an ambiguous attempt that stops for the person.

use policy::{
    api::{LeaseGrant, LeaseState, Profile, RouteDetail, RouteSummary, Work},
    auth::WhoAmI,
    wire::{ManualAction, RouteSnapshot},
};
use reqwest::{Client, Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::time::Duration;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("cannot reach the Recourse server at {0}")]
    Unreachable(String),
    #[error("the Recourse server refused the API token (401): set a valid token")]
    Unauthorized,
    #[error("{status}: {message}")]
    Status {
        status: StatusCode,
        code: String,
        message: String,
        /// A 409 about a route carries its current snapshot.
        snapshot: Option<Box<RouteSnapshot>>,
    },
    #[error("the Recourse server answered something that is not what it documents: {0}")]
    Unexpected(String),
}

impl ApiError {
    /// The error's stable code (`lease_lost`, `not_found`, ...), when it has one.
    pub(crate) fn code(&self) -> Option<&str> {
        match self {
            ApiError::Status { code, .. } => Some(code),
            _ => None,
        }
    }

    pub(crate) fn status(&self) -> Option<StatusCode> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The server, as one token reaches it.
#[derive(Clone)]
pub(crate) struct Api {
    client: Client,
    base: String,
    token: String,
    /// How long a call keeps trying to reach a server that does not answer.
    pub(crate) patience: Duration,
}

impl Api {
    pub(crate) fn new(base: &str, token: String) -> Result<Api, ApiError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| ApiError::Unexpected(e.to_string()))?;
        Ok(Api {
            client,
            base: base.trim_end_matches('/').to_owned(),
            token,
            patience: Duration::from_secs(120),
        })
    }

    /// The server's base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The route's page, for a person.
    pub(crate) fn route_url(&self, route_id: &str) -> String {
        format!("{}/routes/{route_id}", self.base)
    }

    /// One call, tried again while the server cannot be reached (within `patience`).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ApiError> {
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.once(method.clone(), path, body).await {
                Err(ApiError::Unreachable(_)) if started.elapsed() + backoff < self.patience => {
                    if backoff == Duration::from_millis(100) {
                        tracing::warn!(
                            server = self.base,
                            path,
                            "cannot reach the Recourse server; trying again"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// One call, once.
    async fn once(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ApiError> {
        let started = std::time::Instant::now();
        let answer = self.once_untimed(method, path, body).await;
        tracing::debug!(
            path,
            ms = started.elapsed().as_secs_f64() * 1000.0,
            ok = answer.is_ok(),
            "server call"
        );
        answer
    }

    async fn once_untimed(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ApiError> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|_| ApiError::Unreachable(self.base.clone()))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|_| ApiError::Unreachable(self.base.clone()))?;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| ApiError::Unexpected(format!("{path}: {e}")))?
        };
        if status == StatusCode::UNAUTHORIZED {
            return Err(ApiError::Unauthorized);
        }
        if status.is_success() {
            return Ok((status, value));
        }
        // A 409 about a route is its snapshot; anything else the shared error shape.
        let snapshot = serde_json::from_value::<RouteSnapshot>(value.clone())
            .ok()
            .map(Box::new);
        let (code, message) = match &value["error"] {
            Value::Object(e) => (
                e.get("code")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                e.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ if value["errors"].is_array() => ("invalid".to_owned(), value["errors"].to_string()),
            _ => (String::new(), String::new()),
        };
        // `lease_lost: ...` carries its code in the message's first word.
        let code = if code == "conflict" {
            message.split(':').next().unwrap_or("conflict").to_owned()
        } else {
            code
        };
        Err(ApiError::Status {
            status,
            code,
            message,
            snapshot,
        })
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let (_, v) = self.call(Method::GET, path, None).await?;
        decode(path, v)
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<Option<T>, ApiError> {
        let (status, v) = self.call(Method::POST, path, Some(body)).await?;
        if status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        decode(path, v).map(Some)
    }

    /// Who the token is, tried once (the start-up check: an unreachable server is an error at
    /// once, not after `patience`).
    pub(crate) async fn who_am_i(&self) -> Result<WhoAmI, ApiError> {
        let (_, v) = self.once(Method::GET, "/api/v1/session", None).await?;
        decode("/api/v1/session", v)
    }

    pub(crate) async fn profile(&self, id: &str) -> Result<Profile, ApiError> {
        self.get(&format!("/api/v1/profiles/{}", seg(id))).await
    }

    /// The profiles the token reaches (their summaries: id and name).
    pub(crate) async fn profiles(&self) -> Result<Vec<Value>, ApiError> {
        self.get("/api/v1/profiles").await
    }

    pub(crate) async fn route(&self, id: &str) -> Result<RouteDetail, ApiError> {
        self.get(&format!("/api/v1/routes/{}", seg(id))).await
    }

    /// The editor session's most recently changed route, if it has one.
    pub(crate) async fn route_of_session(&self, session_id: &str) -> Result<Option<RouteSummary>, ApiError> {
        let list: Vec<RouteSummary> = self
            .get(&format!(
                "/api/v1/routes?caller_kind=editor&caller_reference={}&limit=1",
                seg(session_id)
            ))
            .await?;
        Ok(list.into_iter().next())
    }

    /// Starts the session's route: a new one answers 201 with its summary; a repeat of the same
    /// invocation (an answer lost to a broken connection) finds the one that was made.
    pub(crate) async fn start_route(
        &self,
        profile_id: &str,
        session_id: &str,
        invocation_id: &str,
        work: &Work,
        pin: Option<&str>,
    ) -> Result<RouteSummary, ApiError> {
        let mut body = json!({
            "profile_id": profile_id,
            "caller": {"kind": "editor", "reference": session_id, "invocation_id": invocation_id},
            "title": "Editor session",
            "work": work,
        });
        if let Some(pin) = pin {
            body["pin"] = json!(pin);
        }
        match self.post::<RouteSummary>("/api/v1/routes", &body).await {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(ApiError::Unexpected("a route start answered 204".to_owned())),
            Err(e) if e.status() == Some(StatusCode::CONFLICT) => {
                match self.route_of_session(session_id).await? {
                    Some(r) if r.caller.invocation_id == invocation_id => Ok(r),
                    _ => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The session's next prompt on its route (a new prompt generation).
    pub(crate) async fn submit_work(
        &self,
        route_id: &str,
        generation: u64,
        work: &Work,
    ) -> Result<RouteSnapshot, ApiError> {
        let body = json!({"expected_generation": generation, "work": work});
        self.post(&format!("/api/v1/routes/{}/work", seg(route_id)), &body)
            .await?
            .ok_or_else(|| ApiError::Unexpected("work answered 204".to_owned()))
    }

    /// A manual action with the generation it expects.
    pub(crate) async fn act(
        &self,
        route_id: &str,
        action: ManualAction,
        generation: u64,
    ) -> Result<RouteSnapshot, ApiError> {
        let body = json!({"action": action, "expected_generation": generation});
        self.post(&format!("/api/v1/routes/{}/actions", seg(route_id)), &body)
            .await?
            .ok_or_else(|| ApiError::Unexpected("an action answered 204".to_owned()))
    }

    /// Finishes the (idle) route.
    pub(crate) async fn complete(&self, route_id: &str, generation: u64) -> Result<RouteSnapshot, ApiError> {
        let body = json!({"expected_generation": generation});
        self.post(&format!("/api/v1/routes/{}/complete", seg(route_id)), &body)
            .await?
            .ok_or_else(|| ApiError::Unexpected("complete answered 204".to_owned()))
    }

    /// Ends the route without finishing it.
    pub(crate) async fn abandon(&self, route_id: &str, generation: u64) -> Result<RouteSnapshot, ApiError> {
        let body = json!({"expected_generation": generation});
        self.post(&format!("/api/v1/routes/{}/abandon", seg(route_id)), &body)
            .await?
            .ok_or_else(|| ApiError::Unexpected("abandon answered 204".to_owned()))
    }

    /// Claims the route's started attempt, acknowledged at once: the runner starts it as soon
    /// as the answer comes (`None`: the route has no attempt nobody holds).
    pub(crate) async fn claim(
        &self,
        route_id: &str,
        runner: &str,
        lease_seconds: u64,
    ) -> Result<Option<LeaseGrant>, ApiError> {
        let body = json!({"runner": runner, "lease_seconds": lease_seconds, "acknowledge": true});
        self.post(&format!("/api/v1/routes/{}/claim", seg(route_id)), &body)
            .await
    }

    /// Renews the lease for `lease_seconds` more (a heartbeat).
    pub(crate) async fn heartbeat(
        &self,
        grant: &LeaseGrant,
        lease_seconds: u64,
    ) -> Result<LeaseState, ApiError> {
        let body = json!({"lease_id": grant.lease_id, "lease_seconds": lease_seconds});
        self.post(
            &format!(
                "/api/v1/dispatches/{}/{}/heartbeat",
                seg(&grant.route_id),
                grant.attempt
            ),
            &body,
        )
        .await?
        .ok_or_else(|| ApiError::Unexpected("a heartbeat answered 204".to_owned()))
    }

    /// Reports the leased attempt: success, or the failure's evidence envelope.
    pub(crate) async fn report(
        &self,
        grant: &LeaseGrant,
        envelope: Option<&Value>,
    ) -> Result<RouteSnapshot, ApiError> {
        let body = match envelope {
            None => json!({"lease_id": grant.lease_id, "outcome": "succeeded"}),
            Some(e) => json!({"lease_id": grant.lease_id, "outcome": "failed", "envelope": e}),
        };
        self.post(
            &format!(
                "/api/v1/dispatches/{}/{}/report",
                seg(&grant.route_id),
                grant.attempt
            ),
            &body,
        )
        .await?
        .ok_or_else(|| ApiError::Unexpected("a report answered 204".to_owned()))
    }
}

fn decode<T: DeserializeOwned>(path: &str, v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::Unexpected(format!("{path}: {e}")))
}

/// A path segment or query value, percent-encoded (ids are plain, but a session id comes from
/// the editor).
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
