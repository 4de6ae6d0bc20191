//! The external-runner protocol under `/api/v1/dispatches` (the `external` dispatcher): claim,
//! acknowledge, heartbeat, report; and `POST /api/v1/routes/{id}/claim`, the claim limited to one
//! route whose caller runs its attempts itself (`editor`: `recourse acp`). The rules live in
//! `crate::engine` (leases); these handlers parse, bound and answer. A lease that is not the
//! runner's any more is `409` with `{"error":{"code":"lease_lost"}}`: the runner must stop and
//! report nothing.

use super::{
    check_route,
    extract::{Id, JsonBody, LeasePath},
    route_for, ApiResult,
};
use crate::{
    auth::{scope::RouteUse, Principal},
    engine::dispatch::Report,
    failure::Failure,
    guard::json_only,
    state::AppState,
    store::Lease,
};
use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::post,
    Extension, Json, Router,
};
use policy::{
    api::{ClaimRequest, LeaseGrant, LeaseRenewal, LeaseState, RunnerOutcome, RunnerReport},
    document::{ValidationCode, ValidationError, ValidationErrors},
    envelope::EvidenceEnvelope,
    input::check_identifier,
    limits::{DEFAULT_LEASE_SECONDS, MAX_ID_CHARS, MAX_LEASE_SECONDS, MIN_LEASE_SECONDS},
};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/dispatches/claim", json_only(post(claim)))
        .route("/api/v1/routes/{id}/claim", json_only(post(claim_route)))
        .route(
            "/api/v1/dispatches/{route_id}/{attempt}/ack",
            json_only(post(ack)),
        )
        .route(
            "/api/v1/dispatches/{route_id}/{attempt}/heartbeat",
            json_only(post(heartbeat)),
        )
        .route(
            "/api/v1/dispatches/{route_id}/{attempt}/report",
            json_only(post(report)),
        )
}

fn invalid(path: &str, code: ValidationCode, message: String) -> Failure {
    Failure::Invalid(ValidationErrors {
        errors: vec![ValidationError {
            path: path.to_owned(),
            code,
            message,
        }],
    })
}

/// A lease duration within the bounds (the default when absent).
fn lease_seconds(given: Option<u64>) -> Result<u64, Failure> {
    let seconds = given.unwrap_or(DEFAULT_LEASE_SECONDS);
    if (MIN_LEASE_SECONDS..=MAX_LEASE_SECONDS).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(invalid(
            "lease_seconds",
            ValidationCode::OutOfRange,
            format!("A lease holds {MIN_LEASE_SECONDS} to {MAX_LEASE_SECONDS} seconds."),
        ))
    }
}

/// A lease id is one the server made (about 30 characters); a longer one is refused.
fn lease_id(id: &str) -> Result<(), Failure> {
    if id.chars().count() > MAX_ID_CHARS {
        return Err(invalid(
            "lease_id",
            ValidationCode::TooLong,
            format!("A lease id has at most {MAX_ID_CHARS} characters."),
        ));
    }
    Ok(())
}

fn lease_lost() -> Failure {
    Failure::Conflict(
        "lease_lost: this lease is not yours any more (it lapsed, ran out, or the route moved on); stop and report nothing"
            .to_owned(),
    )
}

/// 200 with a lease on the oldest started `external` attempt nobody holds, or 204 when there
/// is none. A claim takes any profile's attempt, so a token scoped to profiles cannot claim.
async fn claim(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    JsonBody(request): JsonBody<ClaimRequest>,
) -> ApiResult<Response> {
    if p.profile_ids.is_some() {
        return Err(Failure::Forbidden(
            "A claim may take any profile's attempt; use a runner token that is not scoped to profiles."
                .to_owned(),
        ));
    }
    check_identifier(&request.runner, "the runner name").map_err(|e| invalid("runner", e.code, e.message))?;
    let seconds = lease_seconds(request.lease_seconds)?;
    match s
        .engine
        .claim(&request.runner, seconds, request.acknowledge)
        .await?
    {
        Some(lease) => Ok(Json(grant(&s, lease).await?).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// 200 with a lease on the route's started attempt, or 204 when it has none nobody holds. Only
/// a route whose caller runs its attempts itself (`editor`) is claimed so; its attempts are
/// never offered to the general claim. A token scoped to the route's profile may claim it.
async fn claim_route(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    Id(route_id): Id,
    JsonBody(request): JsonBody<ClaimRequest>,
) -> ApiResult<Response> {
    check_identifier(&request.runner, "the runner name").map_err(|e| invalid("runner", e.code, e.message))?;
    let seconds = lease_seconds(request.lease_seconds)?;
    let route = route_for(&s, &p, &route_id, RouteUse::Reach).await?;
    if !route.caller.kind.runs_attempts() {
        return Err(Failure::Conflict(format!(
            "not_leased: this route's attempts are run by Recourse (its caller is `{}`); only an `editor` route is claimed by route",
            route.caller.kind
        )));
    }
    match s
        .engine
        .claim_route(&route_id, &request.runner, seconds, request.acknowledge)
        .await?
    {
        Some(lease) => Ok(Json(grant(&s, lease).await?).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// What a lease gives its runner: the attempt, its candidate and the route's work.
async fn grant(s: &AppState, lease: Lease) -> ApiResult<LeaseGrant> {
    let route = s.engine.route_summary(&lease.route_id).await?;
    let (_, profile) = s
        .engine
        .store()
        .route_and_profile(&lease.route_id)
        .await
        .map_err(|e| Failure::from(crate::engine::EngineError::from(e)))?
        .ok_or(Failure::NotFound("route"))?;
    let target = profile.and_then(|p| {
        p.targets
            .into_iter()
            .find(|t| t.id == route.snapshot.candidate_id)
    });
    let work = s
        .engine
        .store()
        .route_work(&lease.route_id)
        .await
        .map_err(|e| Failure::from(crate::engine::EngineError::from(e)))?;
    Ok(LeaseGrant {
        attempt: lease.attempt,
        invocation_id: route.caller.invocation_id,
        invocation_generation: lease.generation,
        candidate_id: route.snapshot.candidate_id,
        dispatcher: target.as_ref().map(|t| t.dispatcher),
        runner: target.as_ref().and_then(|t| t.runner.clone()),
        provider_id: target.as_ref().and_then(|t| t.provider_id.clone()),
        model_id: target.and_then(|t| t.model_id),
        work,
        lease_id: lease.lease_id,
        lease_expires_at: lease.expires,
        route_id: lease.route_id,
    })
}

async fn renew(s: &AppState, path: LeasePath, request: LeaseRenewal, ack: bool) -> ApiResult<Response> {
    lease_id(&request.lease_id)?;
    let seconds = lease_seconds(request.lease_seconds)?;
    match s
        .engine
        .renew_lease(&path.route_id, path.attempt, &request.lease_id, seconds, ack)
        .await?
    {
        Some(lease) => Ok(Json(LeaseState {
            lease_id: lease.lease_id,
            lease_expires_at: lease.expires,
        })
        .into_response()),
        None => Err(lease_lost()),
    }
}

/// The runner starts the work now: from here on the attempt may have run.
async fn ack(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    path: LeasePath,
    JsonBody(request): JsonBody<LeaseRenewal>,
) -> ApiResult<Response> {
    check_route(&s, &p, &path.route_id, RouteUse::Reach).await?;
    renew(&s, path, request, true).await
}

/// The runner is still at it: the acknowledged lease holds `lease_seconds` more.
async fn heartbeat(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    path: LeasePath,
    JsonBody(request): JsonBody<LeaseRenewal>,
) -> ApiResult<Response> {
    check_route(&s, &p, &path.route_id, RouteUse::Reach).await?;
    renew(&s, path, request, false).await
}

/// The leased attempt's outcome: 200 with the route's snapshot, 409 `lease_lost`, or 409 with
/// the snapshot when the route had already moved on.
async fn report(
    State(s): State<AppState>,
    Extension(p): Extension<Principal>,
    LeasePath { route_id, attempt }: LeasePath,
    JsonBody(request): JsonBody<RunnerReport>,
) -> ApiResult<Response> {
    lease_id(&request.lease_id)?;
    check_route(&s, &p, &route_id, RouteUse::Reach).await?;
    let report = match (request.outcome, request.envelope, request.result) {
        (RunnerOutcome::Succeeded, None, result) => Report::Succeeded { result },
        (RunnerOutcome::Failed, Some(envelope), None) => {
            EvidenceEnvelope::check(&envelope).map_err(|why| {
                invalid(
                    "envelope",
                    ValidationCode::WrongType,
                    format!("Not an evidence envelope (contract 1): {why}."),
                )
            })?;
            Report::Failed { envelope }
        }
        (RunnerOutcome::Succeeded, Some(_), _) => {
            return Err(invalid(
                "envelope",
                ValidationCode::UnknownField,
                "A success carries no envelope.".to_owned(),
            ))
        }
        (RunnerOutcome::Failed, None, _) => {
            return Err(invalid(
                "envelope",
                ValidationCode::Missing,
                "A failure carries its evidence envelope.".to_owned(),
            ))
        }
        (RunnerOutcome::Failed, Some(_), Some(_)) => {
            return Err(invalid(
                "result",
                ValidationCode::UnknownField,
                "A failure carries no result.".to_owned(),
            ))
        }
    };
    match s
        .engine
        .report_leased(&route_id, attempt, &request.lease_id, report)
        .await?
    {
        Some(applied) => Ok(Json(applied.snapshot).into_response()),
        None => Err(lease_lost()),
    }
}

/// The OpenAPI operations of the lease protocol (statuses past the success ones are added by
/// [`crate::contract`]). The stubs carry only the annotations.
#[allow(dead_code)]
pub(crate) mod openapi_paths {
    use policy::{
        api::{ClaimRequest, LeaseGrant, LeaseRenewal, LeaseState, RunnerReport},
        wire::RouteSnapshot,
    };

    #[utoipa::path(post, path = "/api/v1/dispatches/claim", operation_id = "claim_dispatch",
        request_body = ClaimRequest, responses(
        (status = 200, body = LeaseGrant, description = "A lease on the oldest started `external` attempt nobody holds"),
        (status = 204, description = "No attempt is waiting for a runner")))]
    pub(crate) fn claim() {}

    #[utoipa::path(post, path = "/api/v1/routes/{id}/claim", operation_id = "claim_route",
        params(("id" = String, Path)),
        request_body = ClaimRequest, responses(
        (status = 200, body = LeaseGrant, description = "A lease on the route's started attempt: its caller runs its attempts itself (`editor`)"),
        (status = 204, description = "The route has no started attempt nobody holds"),
        (status = 409, description = "`not_leased`: Recourse runs this route's attempts itself; only an `editor` route is claimed by route")))]
    pub(crate) fn claim_route() {}

    #[utoipa::path(post, path = "/api/v1/dispatches/{route_id}/{attempt}/ack", operation_id = "ack_dispatch",
        params(("route_id" = String, Path), ("attempt" = u32, Path, minimum = 1)),
        request_body = LeaseRenewal, responses(
        (status = 200, body = LeaseState, description = "The runner starts the work now; the lease holds `lease_seconds` more"),
        (status = 409, description = "`lease_lost`: the lease is not the runner's any more; stop and report nothing")))]
    pub(crate) fn ack() {}

    #[utoipa::path(post, path = "/api/v1/dispatches/{route_id}/{attempt}/heartbeat", operation_id = "heartbeat_dispatch",
        params(("route_id" = String, Path), ("attempt" = u32, Path, minimum = 1)),
        request_body = LeaseRenewal, responses(
        (status = 200, body = LeaseState, description = "The acknowledged lease holds `lease_seconds` more"),
        (status = 409, description = "`lease_lost`: the lease is not the runner's any more; stop and report nothing")))]
    pub(crate) fn heartbeat() {}

    #[utoipa::path(post, path = "/api/v1/dispatches/{route_id}/{attempt}/report", operation_id = "report_dispatch",
        params(("route_id" = String, Path), ("attempt" = u32, Path, minimum = 1)),
        request_body = RunnerReport, responses(
        (status = 200, body = RouteSnapshot, description = "The outcome is recorded: the route's snapshot"),
        (status = 409, body = RouteSnapshot,
         description = "The route had already moved on (its current snapshot), or `lease_lost` (the shared error)")))]
    pub(crate) fn report() {}
}
