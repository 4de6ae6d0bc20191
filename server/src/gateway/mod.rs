//! The gateway: Recourse as the base URL SDKs and agents point at (issue 31). OpenAI's
//! `POST /v1/chat/completions` and Anthropic's `POST /v1/messages`, JSON and streamed, and
//! `GET /v1/models`, on the same server as the rest.
//!
//! A call names a profile as its `model`; the profile's candidates must all be `http`
//! endpoints of the call's style (no translation between styles; refused with 400 otherwise).
//! Each call starts a route (caller `utility`, a fresh invocation id, the request as its work)
//! and holds the client's connection while the route works under its policy ([`call`]):
//! - before the first content byte, a failure may retry or switch (the policy decides, the gate
//!   allows); the client sees only the answer that succeeded. From the first byte on the
//!   answer is that candidate's, passed through as it streams; a failure after it ends the
//!   stream with the style's error event, and the route stops for a person (its gate);
//! - a wait that would end later than the client holds (`x-recourse-max-wait`, bounded by
//!   `policy::limits::MAX_GATEWAY_WAIT_SECONDS`) is answered at once with the style's error
//!   (429 for a rate limit or quota, 503 otherwise) and `Retry-After` until the route's deadline;
//!   the route keeps its state;
//! - a client that goes away abandons its route, which cancels the running attempt.
//!
//! The dispatcher hands the answer over through its one seam toward such callers
//! (`engine::dispatch::http::LiveCalls`); what a held call does with each route snapshot is
//! `policy::gateway::judge`. Errors take the style's shape with Recourse's own message
//! ([`reply`]), so SDKs raise their usual exceptions. Every answer of a call that started a
//! route carries `x-recourse-route-id`, `x-recourse-candidate` and `x-recourse-attempts`.
//!
//! Authentication: a Recourse API token (never a browser session) with `operate_routes`, as
//! `Authorization: Bearer` or `x-api-key` (`auth::rules`, surface `Gateway`); a token scoped
//! to profiles reaches only those. Concurrent calls are bounded per token on each server
//! ([`slots`]).

mod call;
pub(crate) mod openapi;
mod reply;
mod slots;

pub(crate) use reply::refusal;

use crate::{
    auth::{Actor, Principal},
    config::{ApiStyle, RunnerConfig},
    engine::{Engine, EngineError},
    state::AppState,
};
use axum::{
    body::Body,
    extract::State,
    http::HeaderMap,
    response::Response,
    routing::{get, post},
    Extension, Router,
};
use policy::{
    api::{DispatcherKind, Profile},
    gateway::{self, ErrorKind, GatewayError, GatewayRequest, Model, Style},
    limits::MAX_GATEWAY_BODY_BYTES,
};
use slots::Slots;

/// The gateway's routes. Each server gets its own [`Slots`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
        .route("/v1/models", get(models))
        .layer(Extension(Slots::default()))
}

/// The style a request to `path` speaks: Anthropic for `/v1/messages`, and for the shared
/// `/v1/models` when the client sends `anthropic-version` (every Anthropic SDK does).
pub(crate) fn style_of(path: &str, headers: &HeaderMap) -> Style {
    if path.starts_with("/v1/messages") || (path == "/v1/models" && headers.contains_key("anthropic-version"))
    {
        Style::Anthropic
    } else {
        Style::Openai
    }
}

fn style_of_endpoint(s: ApiStyle) -> Style {
    match s {
        ApiStyle::Openai => Style::Openai,
        ApiStyle::Anthropic => Style::Anthropic,
    }
}

async fn chat_completions(
    State(s): State<AppState>,
    Extension(slots): Extension<Slots>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(&s, &slots, &p, actor, Style::Openai, &headers, body).await
}

async fn messages(
    State(s): State<AppState>,
    Extension(slots): Extension<Slots>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(&s, &slots, &p, actor, Style::Anthropic, &headers, body).await
}

/// One call: the body read within the gateway's limit and parsed, then held ([`call::hold`]).
async fn serve(
    s: &AppState,
    slots: &Slots,
    p: &Principal,
    actor: Actor,
    style: Style,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    if !crate::guard::is_json(headers) {
        let e = GatewayError::new(
            ErrorKind::UnsupportedMediaType,
            "Send the body as `Content-Type: application/json`.",
        );
        return reply::error(style, &e, None);
    }
    let request = match read_body(body)
        .await
        .and_then(|b| GatewayRequest::parse(style, &b))
    {
        Ok(r) => r,
        Err(e) => return reply::error(style, &e, None),
    };
    call::hold(s, slots, p, actor, style, headers, request).await
}

/// The body, at most `MAX_GATEWAY_BODY_BYTES` (413 beyond, in the style's shape).
async fn read_body(body: Body) -> Result<axum::body::Bytes, GatewayError> {
    axum::body::to_bytes(body, MAX_GATEWAY_BODY_BYTES)
        .await
        .map_err(|e| {
            let too_large =
                std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
                GatewayError::too_large()
            } else {
                GatewayError::new(ErrorKind::InvalidRequest, "The request body could not be read.")
            }
        })
}

/// The profile a call's `model` names: by id, else by name when exactly one profile has it;
/// one the principal may use (a scoped token reaches only its profiles).
async fn profile_named(engine: &Engine, p: &Principal, model: &str) -> Result<Profile, GatewayError> {
    let unavailable = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "gateway: storage failure");
        GatewayError::new(
            ErrorKind::Unavailable,
            "The database could not be read; try again.",
        )
    };
    let mut found = engine.store().profiles_called(model).await.map_err(unavailable)?;
    let by_id = found.first().is_some_and(|p| p.id == model);
    if !by_id && found.len() > 1 {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            "Several profiles have this name: name one by its id (GET /v1/models lists them).",
        ));
    }
    let profile = (!found.is_empty()).then(|| found.swap_remove(0));
    let profile = profile.ok_or_else(GatewayError::unknown_model)?;
    if !p.reaches_profile(&profile.id) {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            "This token reaches only the profiles it is scoped to.",
        ));
    }
    Ok(profile)
}

/// Whether `profile` can serve `style` under `config` (`policy::gateway::check_candidates`).
fn check_profile(style: Style, profile: &Profile, config: &RunnerConfig) -> Result<(), GatewayError> {
    gateway::check_candidates(
        style,
        &profile.name,
        profile.targets.iter().map(|t| {
            let served = (t.dispatcher == DispatcherKind::Http)
                .then(|| t.runner.as_deref().and_then(|r| config.endpoint(r)))
                .flatten()
                .map(|e| style_of_endpoint(e.style));
            (t.id.as_str(), served)
        }),
    )
}

/// `GET /v1/models`: the profiles this token may use in the style it speaks.
async fn models(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
) -> Response {
    let style = style_of("/v1/models", &headers);
    let profiles = match s.engine.store().profiles().await {
        Ok(list) => list,
        Err(e) => return reply::error(style, &reply::engine_error(EngineError::from(e)), None),
    };
    let config = s.engine.runners().current();
    let models: Vec<Model> = profiles
        .into_iter()
        .filter(|profile| p.reaches_profile(&profile.id) && check_profile(style, profile, &config).is_ok())
        .map(|profile| Model {
            id: profile.id,
            name: profile.name,
            created: profile.created_at,
        })
        .collect();
    reply::json(gateway::models_body(style, &models).to_string(), None)
}
