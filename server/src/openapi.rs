//! The OpenAPI document at `/api/openapi.json`, generated from the code: the DTOs derive
//! `ToSchema` (policy's `openapi` feature), the handlers are listed here with their statuses,
//! and the policy document's schema is built from `policy::limits`, so the published bounds
//! are the ones the backend enforces.

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
                       Errors: 422 `{\"errors\":[{path,code,message}]}`, 409 with the current route snapshot."
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
        crate::api::ExpectedGeneration
    ))
)]
struct ApiDoc;

/// The whole document.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    crate::api::extend_openapi(&mut doc);
    if let Some(components) = doc.components.as_mut() {
        components
            .schemas
            .insert("PolicyDocument".to_owned(), RefOr::T(policy_document_schema()));
        components
            .schemas
            .insert("ClassPolicy".to_owned(), RefOr::T(class_policy_schema()));
        bound_inputs(&mut components.schemas);
    }
    doc
}

/// A bound the server enforces on one property of a request schema.
enum Bound {
    /// A string of at most this many characters (at least `min`).
    Text { min: usize, max: usize },
    /// A provider or model identifier.
    Identifier,
    /// An integer in `0..=max`.
    Integer { max: u64 },
    /// A list of at most this many items.
    Items { max: usize },
}

/// Puts the limits `policy::input` enforces on the request schemas' properties, from the same
/// constants, so a client generated from the document knows them.
fn bound_inputs(schemas: &mut std::collections::BTreeMap<String, RefOr<Schema>>) {
    use Bound::*;
    let bounds: [(&str, &str, Bound); 13] = [
        (
            "ProfileInput",
            "name",
            Text {
                min: 1,
                max: limits::MAX_PROFILE_NAME_CHARS,
            },
        ),
        (
            "ProfileInput",
            "description",
            Text {
                min: 0,
                max: limits::MAX_PROFILE_DESCRIPTION_CHARS,
            },
        ),
        (
            "ProfileInput",
            "targets",
            Items {
                max: limits::MAX_CANDIDATES,
            },
        ),
        (
            "CandidateTarget",
            "id",
            Text {
                min: 1,
                max: limits::MAX_CANDIDATE_ID_CHARS,
            },
        ),
        ("CandidateTarget", "provider_id", Identifier),
        ("CandidateTarget", "model_id", Identifier),
        (
            "CandidateTarget",
            "label",
            Text {
                min: 0,
                max: limits::MAX_LABEL_CHARS,
            },
        ),
        (
            "CandidateTarget",
            "script",
            Items {
                max: limits::MAX_SCRIPT_STEPS,
            },
        ),
        (
            "SimulatedStep",
            "after_seconds",
            Integer {
                max: limits::MAX_SIMULATED_DELAY_SECONDS,
            },
        ),
        (
            "StartRouteRequest",
            "profile_id",
            Text {
                min: 1,
                max: limits::MAX_ID_CHARS,
            },
        ),
        (
            "StartRouteRequest",
            "title",
            Text {
                min: 0,
                max: limits::MAX_TITLE_CHARS,
            },
        ),
        (
            "Caller",
            "reference",
            Text {
                min: 1,
                max: limits::MAX_CALLER_REFERENCE_CHARS,
            },
        ),
        (
            "Caller",
            "invocation_id",
            Text {
                min: 1,
                max: limits::MAX_INVOCATION_ID_CHARS,
            },
        ),
    ];
    for (schema, property, bound) in bounds {
        let Some(RefOr::T(Schema::Object(object))) = schemas.get_mut(schema) else {
            continue;
        };
        match (object.properties.get_mut(property), bound) {
            (Some(RefOr::T(Schema::Object(field))), Text { min, max }) => {
                field.min_length = Some(min);
                field.max_length = Some(max);
            }
            (Some(RefOr::T(Schema::Object(field))), Identifier) => {
                field.min_length = Some(1);
                field.max_length = Some(limits::MAX_IDENTIFIER_CHARS);
                field.pattern = Some(limits::IDENTIFIER_PATTERN.to_owned());
            }
            (Some(RefOr::T(Schema::Object(field))), Integer { max }) => {
                field.minimum = Some(0.into());
                field.maximum = Some(max.into());
            }
            (Some(RefOr::T(Schema::Array(field))), Items { max }) => field.max_items = Some(max),
            _ => {}
        }
    }
}

pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
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
