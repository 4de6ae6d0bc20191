//! The OpenAPI document at `/api/openapi.json`, generated from the code: the DTOs derive
//! `ToSchema` (policy's `openapi` feature), the handlers are listed here with their statuses,
//! and the policy document's schema is built from `policy::limits`, so the published bounds
//! are the ones the backend enforces. The gateway's operations (`/v1/...`), whose errors are
//! the OpenAI and Anthropic shapes, are added last (`crate::gateway::openapi`).

use axum::Json;
use policy::{
    api::{
        ApiError, ApiErrorBody, Caller, CallerKind, CandidateTarget, CircuitState, CircuitView,
        DispatchOutcome, DispatchRecord, DispatchStatus, DispatcherKind, EvidenceOutcome, HistoryEntry,
        ManualActionRequest, Profile, ProfileInput, ProfileSummary, RouteDetail, RouteFilter, RouteSummary,
        SimulatedOutcome, SimulatedStep, StartRouteRequest, SuccessReport,
    },
    limits,
    wire::{Classification, Decision, Gate, RouteEventPayload, RouteSnapshot},
};
use serde_json::Value;
use std::sync::OnceLock;
use utoipa::{
    openapi::{
        schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, SchemaType, Type},
        RefOr,
    },
    OpenApi,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Recourse API",
        description = "Dynamic profiles, routed work, evidence, manual recovery and route events. \
                       Errors: `ApiError` (`{\"error\":{code,message}}`) for 400, 403, 404, 409, 413, 415 and 503; \
                       422 `ValidationErrors` (`{\"errors\":[{path,code,message}]}`); a 409 about a route carries \
                       its current `RouteSnapshot`. Every operation lists the statuses it can answer."
    ),
    paths(
        crate::api::openapi_paths::list_profiles,
        crate::api::openapi_paths::create_profile,
        crate::api::openapi_paths::get_profile,
        crate::api::openapi_paths::update_profile,
        crate::api::openapi_paths::delete_profile,
        crate::api::openapi_paths::list_routes,
        crate::api::openapi_paths::start_route,
        crate::api::openapi_paths::get_route,
        crate::api::openapi_paths::submit_evidence,
        crate::api::openapi_paths::submit_result,
        crate::api::openapi_paths::manual_action,
        crate::api::openapi_paths::submit_work,
        crate::api::openapi_paths::get_result,
        crate::api::openapi_paths::clear_result,
        crate::api::openapi_paths::complete_route,
        crate::api::openapi_paths::abandon_route,
        crate::api::openapi_paths::list_circuits,
        crate::api::openapi_paths::events,
        crate::api::runners::openapi_paths::claim,
        crate::api::runners::openapi_paths::claim_route,
        crate::api::runners::openapi_paths::ack,
        crate::api::runners::openapi_paths::heartbeat,
        crate::api::runners::openapi_paths::report,
        crate::api::notifications::openapi_paths::list_notifications,
        crate::api::notifications::openapi_paths::mark_notifications_read,
        crate::api::notifications::openapi_paths::list_deliveries,
        crate::api::notifications::openapi_paths::list_channels,
    ),
    components(schemas(
        ApiError,
        ApiErrorBody,
        Caller,
        CallerKind,
        CandidateTarget,
        CircuitState,
        CircuitView,
        DispatchOutcome,
        DispatchRecord,
        DispatchStatus,
        DispatcherKind,
        EvidenceOutcome,
        HistoryEntry,
        ManualActionRequest,
        Profile,
        ProfileInput,
        ProfileSummary,
        RouteDetail,
        RouteFilter,
        RouteSummary,
        SimulatedOutcome,
        SimulatedStep,
        StartRouteRequest,
        SuccessReport,
        RouteSnapshot,
        RouteEventPayload,
        Decision,
        Classification,
        Gate,
        policy::route::Hold,
        policy::api::Work,
        policy::api::WorkRequest,
        crate::store::RouteResult,
        crate::api::ExpectedGeneration,
        policy::envelope::EvidenceEnvelope,
        policy::document::ValidationErrors,
        policy::document::ValidationError,
        policy::document::ValidationCode,
        policy::api::ClaimRequest,
        policy::api::LeaseGrant,
        policy::api::LeaseRenewal,
        policy::api::LeaseState,
        policy::api::RunnerReport,
        policy::api::RunnerOutcome,
        policy::notify::NotificationRule,
        policy::notify::NotifyEventType,
        policy::notify::NotificationPage,
        policy::notify::NotificationView,
        policy::notify::MarkRead,
        policy::notify::DeliveryStatus,
        policy::notify::DeliveryView,
        policy::notify::ChannelOption
    ))
)]
struct ApiDoc;

/// The whole document: what the annotations say, the policy document's schema, and the
/// statuses, bounds and links of [`crate::contract`]. Built once.
pub fn openapi() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = ApiDoc::openapi();
        crate::api::extend_openapi(&mut doc);
        if let Some(components) = doc.components.as_mut() {
            components
                .schemas
                .insert("PolicyDocument".to_owned(), RefOr::T(policy_document_schema()));
            components
                .schemas
                .insert("ClassPolicy".to_owned(), RefOr::T(class_policy_schema()));
        }
        let mut doc = serde_json::to_value(doc).expect("the OpenAPI document is JSON");
        crate::contract::apply(&mut doc);
        crate::gateway::openapi::extend(&mut doc);
        doc
    })
}

pub(crate) async fn document() -> Json<&'static Value> {
    Json(openapi())
}

fn integer(min: u64, max: u64, description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::Integer))
        .minimum(Some(min as f64))
        .maximum(Some(max as f64))
        .description(Some(description))
        .into()
}

fn boolean(description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::Boolean))
        .description(Some(description))
        .into()
}

/// One class policy (transient or hard) with the backend's limits. Disabled sections store
/// zeros, so each number's range includes 0.
fn class_policy_schema() -> Schema {
    let retry = ObjectBuilder::new()
        .property(
            "enabled",
            boolean("Retry the same candidate before the exhausted outcome."),
        )
        .property(
            "max_retries",
            integer(
                0,
                u64::from(limits::MAX_MAX_RETRIES),
                "Additional attempts after the failed one (1-10 when enabled, 0 when disabled).",
            ),
        )
        .property(
            "initial_interval_seconds",
            integer(
                0,
                limits::MAX_INITIAL_INTERVAL_SECONDS,
                "Delay before the first retry; later delays double, each capped at 24 h (0 when disabled).",
            ),
        )
        .required("enabled")
        .required("max_retries")
        .required("initial_interval_seconds")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)));
    let wait = ObjectBuilder::new()
        .property(
            "enabled",
            boolean("Wait for a trusted future reset instead of the next retry delay."),
        )
        .property(
            "max_wait_seconds",
            integer(
                0,
                limits::MAX_MAX_WAIT_SECONDS,
                "Longest reset this policy waits for (1 s to 7 days when enabled, 0 when disabled).",
            ),
        )
        .required("enabled")
        .required("max_wait_seconds")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)));
    let on_exhausted = ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .enum_values(Some(["skip", "stop"]))
        .description(Some(
            "skip: exclude the candidate for this route cycle; stop: manual recovery.",
        ));
    ObjectBuilder::new()
        .property("retry", retry)
        .property("wait_for_reset", wait)
        .property("on_exhausted", on_exhausted)
        .required("retry")
        .required("wait_for_reset")
        .required("on_exhausted")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
        .into()
}

/// The version-1 policy document (what profile reads return; writes also accept legacy
/// shapes, which are normalized).
fn policy_document_schema() -> Schema {
    let candidate = ObjectBuilder::new()
        .property(
            "id",
            ObjectBuilder::new()
                .schema_type(SchemaType::Type(Type::String))
                .min_length(Some(1))
                .max_length(Some(limits::MAX_CANDIDATE_ID_CHARS)),
        )
        .property("transient", utoipa::openapi::Ref::from_schema_name("ClassPolicy"))
        .property("hard", utoipa::openapi::Ref::from_schema_name("ClassPolicy"))
        .required("id")
        .required("transient")
        .required("hard")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)));
    ObjectBuilder::new()
        .property(
            "version",
            integer(
                limits::POLICY_DOCUMENT_VERSION,
                limits::POLICY_DOCUMENT_VERSION,
                "Always 1.",
            ),
        )
        .property(
            "candidates",
            ArrayBuilder::new()
                .items(candidate)
                .min_items(Some(limits::MIN_CANDIDATES))
                .max_items(Some(limits::MAX_CANDIDATES)),
        )
        .required("version")
        .required("candidates")
        .additional_properties(Some(AdditionalProperties::<Schema>::FreeForm(false)))
        .description(Some(
            "A dynamic profile's versioned per-class policy document (version 1).",
        ))
        .into()
}
