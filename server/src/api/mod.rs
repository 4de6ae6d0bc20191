//! The REST API under `/api/v1` (design contract 4), its event stream, and the OpenAPI
//! document at `/api/openapi.json`.
//!
//! Handlers are thin: parse the body once into a validated type (`policy::input`), call the
//! profile service or the engine, answer. Every failure is a [`Failure`] (one mapping, shared
//! with the UI's port): 404 not found, 409 stale (with the current snapshot) or conflicting,
//! 422 with field paths, 503 when the store cannot write. The request guard
//! ([`crate::guard`]) has already refused foreign origins (403) and non-JSON writes (415), and
//! the rules layer ([`crate::auth::rules`]) callers without the permission (401/403); what
//! depends on the route or profile (Office-only callers, profile-scoped tokens) is checked
//! here through [`crate::auth::scope`], and changes are audited.

mod auth;
mod extract;
pub(crate) mod notifications;
pub(crate) mod runners;

pub(crate) use auth::extend_openapi;

use crate::{
    api::extract::{json_body, shape_error, Id, JsonBody, RawBody, RouteQuery},
    auth::{
        scope::{self, RouteUse},
        Actor, Principal,
    },
    engine::{EngineError, Input, StartOptions},
    failure::Failure,
    guard::json_only,
    profiles,
    state::AppState,
};
use axum::{
    extract::State,
    http::StatusCode,
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
    routing::{get, post},
    Extension, Json, Router,
};
use chrono::{DateTime, Utc};
use classifier::Envelope;
use futures_util::stream::{Stream, StreamExt};
use policy::{
    api::{
        EvidenceOutcome, ManualActionRequest, ProfileInput, RouteSummary, StartRouteRequest, SuccessReport,
        WorkRequest,
    },
    document::{ValidationCode, ValidationError, ValidationErrors},
    envelope::EvidenceEnvelope,
    input::{ValidatedProfile, ValidatedStartRoute},
    route::RouteEvent,
};
use serde::Deserialize;
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;

/// The `/api/v1` routes (the web layer adds `/api/openapi.json`, which describes them).
pub fn routes(test_clock: bool) -> Router<AppState> {
    let mut r = Router::new()
        .route(
            "/api/v1/profiles",
            json_only(get(list_profiles).post(create_profile)),
        )
        .route(
            "/api/v1/profiles/{id}",
            json_only(get(get_profile).put(update_profile).delete(delete_profile)),
        )
        .route("/api/v1/routes", json_only(get(list_routes).post(start_route)))
        .route("/api/v1/routes/{id}", get(get_route))
        .route("/api/v1/routes/{id}/evidence", json_only(post(submit_evidence)))
        .route("/api/v1/routes/{id}/actions", json_only(post(manual_action)))
        .route("/api/v1/routes/{id}/work", json_only(post(submit_work)))
        .route(
            "/api/v1/routes/{id}/result",
            json_only(get(get_result).delete(clear_result).post(submit_result)),
        )
        .route("/api/v1/routes/{id}/complete", json_only(post(complete_route)))
        .route("/api/v1/routes/{id}/abandon", json_only(post(abandon_route)))
        .route("/api/v1/circuits", get(list_circuits))
        .route("/api/v1/events", get(events))
        .merge(runners::routes())
        .merge(notifications::routes())
        .merge(auth::routes());
    if test_clock {
        r = r.route("/api/v1/test/clock", json_only(post(set_test_clock)));
    }
    r
}

type ApiResult<T> = Result<T, Failure>;

/// A profile body whose shape is wrong still gets field-addressed 422 errors; one that parses
/// is validated once, here.
fn profile_body(body: &[u8]) -> ApiResult<ValidatedProfile> {
    let input: ProfileInput = serde_json::from_slice(body).map_err(|e| {
        Failure::Invalid(ValidationErrors {
            errors: vec![ValidationError {
                path: String::new(),
                code: ValidationCode::WrongType,
                message: format!("The body is not a profile: {}", shape_error(&e)),
            }],
        })
    })?;
    Ok(ValidatedProfile::parse(&input)?)
}

/// The route, if `p` may use it so (the one place REST handlers check a route's reach).
async fn route_for(s: &AppState, p: &Principal, id: &str, intent: RouteUse) -> ApiResult<RouteSummary> {
    let route = s.engine.route_summary(id).await?;
    scope::route(p, &route, intent)?;
    Ok(route)
}

/// [`route_for`] when the answer can depend on the route (a scoped token, or steering without
/// `operate_routes`); nothing to read otherwise, so such requests fail as they always did.
async fn check_route(s: &AppState, p: &Principal, id: &str, intent: RouteUse) -> ApiResult<()> {
    let depends = p.profile_ids.is_some()
        || (intent == RouteUse::Steer && !p.has(policy::auth::Permission::OperateRoutes));
    if depends {
        route_for(s, p, id, intent).await?;
    }
    Ok(())
}

async fn list_profiles(State(s): State<AppState>, Extension(p): Extension<Principal>) -> ApiResult<Response> {
    let mut list = profiles::list(&s.engine).await?;
    scope::retain(&p, &mut list, |x| &x.id);
    Ok(Json(list).into_response())
}

async fn create_profile(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    scope::create_profile(&p)?;
    let created = profiles::create(&s.engine, profile_body(&body)?).await?;
    s.auth
        .audit_profile(&actor, &created.id, None, Some(&created))
        .await;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn get_profile(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
) -> ApiResult<Response> {
    scope::profile(&p, &id)?;
    Ok(Json(profiles::get(&s.engine, &id).await?).into_response())
}

async fn update_profile(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    Id(id): Id,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    scope::profile(&p, &id)?;
    let input = profile_body(&body)?;
    let before = profiles::get(&s.engine, &id).await?;
    let after = profiles::update(&s.engine, &id, input).await?;
    s.auth
        .audit_profile(&actor, &id, Some(&before), Some(&after))
        .await;
    Ok(Json(after).into_response())
}

async fn delete_profile(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    Id(id): Id,
) -> ApiResult<Response> {
    scope::profile(&p, &id)?;
    let before = profiles::get(&s.engine, &id).await?;
    profiles::delete(&s.engine, &id).await?;
    s.auth.audit_profile(&actor, &id, Some(&before), None).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_routes(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    RouteQuery(filter): RouteQuery,
) -> ApiResult<Response> {
    let mut list = s.engine.list_routes(&filter).await?;
    scope::retain(&p, &mut list, |r| &r.profile_id);
    Ok(Json(list).into_response())
}

async fn start_route(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    JsonBody(request): JsonBody<StartRouteRequest>,
) -> ApiResult<Response> {
    let request = ValidatedStartRoute::parse(&request)?;
    scope::start(&p, request.profile_id(), request.caller_kind())?;
    let options = StartOptions {
        by: Some(actor.to_audit()),
        profile: None,
    };
    let summary = s.engine.start(request, options).await?;
    Ok((StatusCode::CREATED, Json(summary)).into_response())
}

async fn get_route(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
) -> ApiResult<Response> {
    let detail = s.engine.route_detail(&id).await?;
    scope::route(&p, &detail.route, RouteUse::Reach)?;
    Ok(Json(detail).into_response())
}

/// Evidence for the route's current invocation: the envelope must name the route's
/// invocation and the prompt generation it belongs to. It must be an `EvidenceEnvelope` as the
/// document publishes it (400 otherwise); the classifier then reads and bounds it.
async fn submit_evidence(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let value: serde_json::Value = json_body(&body)?;
    EvidenceEnvelope::check(&value).map_err(|why| Failure::BadRequest(format!("invalid envelope: {why}")))?;
    let envelope = Envelope::from_value(&value)
        .map(Envelope::into_owned)
        .map_err(|e| Failure::BadRequest(format!("invalid envelope: {}", e.kind())))?;
    if envelope.generation.is_none() {
        return Err(Failure::Invalid(ValidationErrors {
            errors: vec![ValidationError {
                path: "generation".into(),
                code: ValidationCode::Missing,
                message: "Give the invocation generation the evidence belongs to.".into(),
            }],
        }));
    }
    let route = route_for(&s, &p, &id, RouteUse::Reach).await?;
    if envelope
        .invocation_id
        .as_deref()
        .is_some_and(|i| i != route.caller.invocation_id)
    {
        // Never repeat the given id: an adapter may have put anything there.
        return Err(Failure::Conflict(
            "the envelope's invocation_id is not this route's invocation".to_owned(),
        ));
    }
    match s.engine.submit(&id, Input::evidence(envelope)).await {
        Ok(applied) => {
            let verdict = applied.verdict.ok_or(Failure::Internal)?;
            Ok(Json(EvidenceOutcome {
                accepted: true,
                classification: verdict.classification,
                gate: verdict.gate,
                snapshot: applied.snapshot,
            })
            .into_response())
        }
        Err(EngineError::Rejected {
            snapshot,
            verdict: Some(verdict),
            ..
        }) => Ok((
            StatusCode::CONFLICT,
            Json(EvidenceOutcome {
                accepted: false,
                classification: verdict.classification,
                gate: verdict.gate,
                snapshot: *snapshot,
            }),
        )
            .into_response()),
        Err(e) => Err(e.into()),
    }
}

async fn submit_event(s: &AppState, id: &str, event: RouteEvent) -> ApiResult<Response> {
    let applied = s.engine.submit(id, Input::Event(event)).await?;
    Ok(Json(applied.snapshot).into_response())
}

async fn submit_result(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
    JsonBody(r): JsonBody<SuccessReport>,
) -> ApiResult<Response> {
    check_route(&s, &p, &id, RouteUse::Reach).await?;
    submit_event(
        &s,
        &id,
        RouteEvent::Succeeded {
            generation: r.invocation_generation,
        },
    )
    .await
}

/// The body of the fenced lifecycle endpoints (`work`, `complete`, `abandon`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectedGeneration {
    /// The route generation the caller last saw; a stale one gets 409 and the snapshot.
    #[serde(deserialize_with = "policy::whole::u64")]
    expected_generation: u64,
}

/// The next prompt of the route's session: new work (checked as a route start's is) or the
/// stored work again, fenced by `expected_generation`.
async fn submit_work(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
    JsonBody(request): JsonBody<WorkRequest>,
) -> ApiResult<Response> {
    check_route(&s, &p, &id, RouteUse::Steer).await?;
    let applied = s.engine.submit_work(&id, request).await?;
    Ok(Json(applied.snapshot).into_response())
}

/// The result of the route's latest successful attempt that produced one (404 when none).
async fn get_result(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
) -> ApiResult<Response> {
    route_for(&s, &p, &id, RouteUse::Reach).await?;
    let result = s
        .engine
        .store()
        .route_result(&id)
        .await
        .map_err(|e| Failure::from(EngineError::from(e)))?
        .ok_or(Failure::NotFound("result"))?;
    Ok(Json(result).into_response())
}

/// Clears the stored result once the caller has it.
async fn clear_result(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
) -> ApiResult<Response> {
    route_for(&s, &p, &id, RouteUse::Steer).await?;
    let cleared = s
        .engine
        .store()
        .clear_route_result(&id)
        .await
        .map_err(|e| Failure::from(EngineError::from(e)))?;
    if cleared {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(Failure::NotFound("result"))
    }
}

async fn complete_route(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
    JsonBody(e): JsonBody<ExpectedGeneration>,
) -> ApiResult<Response> {
    check_route(&s, &p, &id, RouteUse::Steer).await?;
    let expected_generation = e.expected_generation;
    submit_event(&s, &id, RouteEvent::Complete { expected_generation }).await
}

async fn abandon_route(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(id): Id,
    JsonBody(e): JsonBody<ExpectedGeneration>,
) -> ApiResult<Response> {
    check_route(&s, &p, &id, RouteUse::Steer).await?;
    let expected_generation = e.expected_generation;
    submit_event(&s, &id, RouteEvent::Abandon { expected_generation }).await
}

/// A person's action: 200 with the new snapshot, or 409 with the current one.
async fn manual_action(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Extension(actor): Extension<Actor>,
    Id(id): Id,
    JsonBody(req): JsonBody<ManualActionRequest>,
) -> ApiResult<Response> {
    check_route(&s, &p, &id, RouteUse::Steer).await?;
    let outcome = s.engine.perform_action(&id, req).await?;
    s.auth.audit_action(&actor, &id, &req, &outcome).await;
    match outcome {
        policy::api::ActionOutcome::Applied(snapshot) => Ok(Json(snapshot).into_response()),
        policy::api::ActionOutcome::Conflict(snapshot) => Err(Failure::Stale(Box::new(snapshot))),
    }
}

async fn list_circuits(State(s): State<AppState>) -> ApiResult<Response> {
    Ok(Json(s.engine.circuits().await?).into_response())
}

/// Server-Sent Events: one `route` event per accepted change (`RouteEventPayload` plus
/// `route_id`), and one `update` event per live update of a running attempt (an agent's
/// messages and tool calls as it sends them, every string redacted and token-like ids shown as
/// stable pseudonyms: `route_id`, `attempt`, `generation`, `update`).
/// A slow client that falls behind gets a `lagged` event and should reload. Every stream ends
/// when the server begins to stop, so a graceful stop never waits on a browser tab.
///
/// A token scoped to profiles sees only its profiles' routes (each event's route is looked up).
async fn events(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let routes = scoped(&s, &p, s.engine.subscribe(), |e| e.route_id.clone());
    let updates = scoped(&s, &p, s.engine.subscribe_updates(), |u| u.route_id.clone());
    let stream = futures_util::stream::select(sse_stream(routes, "route"), sse_stream(updates, "update"));
    let stopping = s.shutdown.clone();
    // Counted in `recourse_sse_clients` while the stream lives: the guard belongs to the stream's
    // end condition, dropped with the response body when the client goes away, or at the stop.
    let client = s.engine.metrics().sse_client();
    let end = async move {
        stopping.wait().await;
        drop(client);
    };
    Sse::new(stream.take_until(end)).keep_alive(KeepAlive::default())
}

/// A broadcast receiver as a stream of what it delivers (`Err(n)`: `n` items were missed), keeping
/// only the routes `p` reaches.
fn scoped<T: Clone + Send + 'static>(
    s: &AppState,
    p: &Principal,
    rx: tokio::sync::broadcast::Receiver<T>,
    route_of: fn(&T) -> String,
) -> impl Stream<Item = Result<T, u64>> {
    let received = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Ok(item) => Some((Ok(item), rx)),
            Err(RecvError::Lagged(n)) => Some((Err(n), rx)),
            Err(RecvError::Closed) => None,
        }
    });
    let (engine, principal) = (s.engine.clone(), p.clone());
    received.filter_map(move |item| {
        let (engine, principal) = (engine.clone(), principal.clone());
        async move {
            match &item {
                Ok(x) if principal.profile_ids.is_some() => {
                    let route = engine.route_summary(&route_of(x)).await.ok()?;
                    principal.reaches_profile(&route.profile_id).then_some(item)
                }
                _ => Some(item),
            }
        }
    })
}

/// Items as named SSE events (`lagged` when the client fell behind).
fn sse_stream<T: serde::Serialize>(
    items: impl Stream<Item = Result<T, u64>>,
    name: &'static str,
) -> impl Stream<Item = Result<Event, Infallible>> {
    items.map(move |item| {
        Ok(match item {
            Ok(ev) => Event::default()
                .event(name)
                .json_data(&ev)
                .unwrap_or_else(|_| Event::default().event("error")),
            Err(n) => Event::default().event("lagged").data(n.to_string()),
        })
    })
}

#[derive(Deserialize)]
struct ClockSet {
    now: DateTime<Utc>,
}

/// Test only (`recourse serve --test-clock`): moves the injected clock and wakes the
/// scheduler, so a process test never waits for real time.
async fn set_test_clock(State(s): State<AppState>, JsonBody(c): JsonBody<ClockSet>) -> ApiResult<Response> {
    let clock = s.test_clock.as_ref().ok_or(Failure::NotFound("test clock"))?;
    clock.set(c.now);
    // Fire what is due now, in line, so the caller sees the result in its next request.
    crate::scheduler::tick(&s.engine)
        .await
        .map_err(|e| Failure::from(EngineError::from(e)))?;
    s.engine.wake();
    Ok(Json(serde_json::json!({"now": clock_now(clock)})).into_response())
}

fn clock_now(clock: &crate::clock::ManualClock) -> DateTime<Utc> {
    use crate::clock::Clock;
    clock.now()
}

/// Path descriptions for the OpenAPI document. The stubs carry only the annotations, so the
/// real handlers above keep their plain signatures.
#[allow(dead_code)]
pub(crate) mod openapi_paths {
    use super::ExpectedGeneration;
    use policy::{
        api::{
            ApiError, CircuitView, EvidenceOutcome, ManualActionRequest, Profile, ProfileInput,
            ProfileSummary, RouteDetail, RouteSummary, StartRouteRequest, SuccessReport, WorkRequest,
        },
        wire::RouteSnapshot,
    };

    #[utoipa::path(get, path = "/api/v1/profiles", responses((status = 200, body = [ProfileSummary])))]
    pub(crate) fn list_profiles() {}

    #[utoipa::path(post, path = "/api/v1/profiles", request_body = ProfileInput, responses(
        (status = 201, body = Profile, description = "Created; the policy is the normalized version-1 document"),
        (status = 422, description = "`{\"errors\":[{path,code,message}]}`, every problem with its field path")))]
    pub(crate) fn create_profile() {}

    #[utoipa::path(get, path = "/api/v1/profiles/{id}", params(("id" = String, Path)), responses(
        (status = 200, body = Profile), (status = 404, body = ApiError)))]
    pub(crate) fn get_profile() {}

    #[utoipa::path(put, path = "/api/v1/profiles/{id}", params(("id" = String, Path)), request_body = ProfileInput,
        responses((status = 200, body = Profile), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "expected_revision is not current"),
        (status = 422, description = "Validation errors with field paths")))]
    pub(crate) fn update_profile() {}

    #[utoipa::path(delete, path = "/api/v1/profiles/{id}", params(("id" = String, Path)), responses(
        (status = 204), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
    pub(crate) fn delete_profile() {}

    #[utoipa::path(get, path = "/api/v1/routes", params(
        ("caller_kind" = Option<String>, Query), ("caller_reference" = Option<String>, Query),
        ("state" = Option<String>, Query),
        ("open_only" = Option<bool>, Query, description = "Only routes that are neither completed nor abandoned"),
        ("profile_id" = Option<String>, Query), ("limit" = Option<u32>, Query)),
        responses((status = 200, body = [RouteSummary])))]
    pub(crate) fn list_routes() {}

    #[utoipa::path(post, path = "/api/v1/routes", request_body = StartRouteRequest, responses(
        (status = 201, body = RouteSummary), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "The invocation already has a route")))]
    pub(crate) fn start_route() {}

    #[utoipa::path(get, path = "/api/v1/routes/{id}", params(("id" = String, Path)), responses(
        (status = 200, body = RouteDetail), (status = 404, body = ApiError)))]
    pub(crate) fn get_route() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/evidence", params(("id" = String, Path)),
        request_body(content = policy::envelope::EvidenceEnvelope, description = "An evidence envelope (contract 1) with `generation`"),
        responses((status = 200, body = EvidenceOutcome),
        (status = 409, body = EvidenceOutcome, description = "Stale: not for the current invocation"),
        (status = 503, body = ApiError, description = "The decision could not be written; nothing ran")))]
    pub(crate) fn submit_evidence() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/result", params(("id" = String, Path)),
        request_body = SuccessReport, responses((status = 200, body = RouteSnapshot, description = "The route snapshot"),
        (status = 409, body = RouteSnapshot, description = "Stale generation: the current route snapshot")))]
    pub(crate) fn submit_result() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/actions", params(("id" = String, Path)),
        request_body = ManualActionRequest, responses(
        (status = 200, body = RouteSnapshot, description = "The authoritative route snapshot after the action"),
        (status = 409, body = RouteSnapshot,
         description = "expected_generation is stale or the action is not allowed: the current snapshot")))]
    pub(crate) fn manual_action() {}

    #[utoipa::path(get, path = "/api/v1/routes/{id}/result", params(("id" = String, Path)), responses(
        (status = 200, body = crate::store::RouteResult, description = "The latest successful attempt's result (an HTTP call's response body)"),
        (status = 404, body = ApiError, description = "No such route, or no result stored")))]
    pub(crate) fn get_result() {}

    #[utoipa::path(delete, path = "/api/v1/routes/{id}/result", params(("id" = String, Path)), responses(
        (status = 204, description = "The result is cleared"), (status = 404, body = ApiError)))]
    pub(crate) fn clear_result() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/work", params(("id" = String, Path)),
        request_body = WorkRequest, responses(
        (status = 200, body = RouteSnapshot, description = "More work for the current candidate (e.g. the next prompt); allowed while the route is active and idle"),
        (status = 409, body = RouteSnapshot, description = "Stale generation or not allowed now: the current snapshot")))]
    pub(crate) fn submit_work() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/complete", params(("id" = String, Path)),
        request_body = ExpectedGeneration, responses(
        (status = 200, body = RouteSnapshot, description = "The caller's work is finished (route active and idle): the route completes"),
        (status = 409, body = RouteSnapshot, description = "Stale generation or not allowed now: the current snapshot")))]
    pub(crate) fn complete_route() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/abandon", params(("id" = String, Path)),
        request_body = ExpectedGeneration, responses(
        (status = 200, body = RouteSnapshot, description = "Ends the route unfinished from any non-terminal state; a pending timer is cancelled"),
        (status = 409, body = RouteSnapshot, description = "Stale generation or not allowed now: the current snapshot")))]
    pub(crate) fn abandon_route() {}

    #[utoipa::path(get, path = "/api/v1/circuits", responses((status = 200, body = [CircuitView])))]
    pub(crate) fn list_circuits() {}

    #[utoipa::path(get, path = "/api/v1/events", responses((status = 200, content_type = "text/event-stream",
        description = "`route` events: a RouteEventPayload plus `route_id`, one per accepted change")))]
    pub(crate) fn events() {}
}
