//! `app::backend::Backend` over the engine: what the pages and server functions call. The REST
//! handlers in [`crate::api`] call the same services, so the two surfaces cannot drift.

use crate::{
    engine::{Engine, EngineError},
    profiles::{self, ProfileError},
};
use app::backend::{Backend, BackendError, BackendFuture};
use policy::api::{
    ActionOutcome, ManualActionRequest, Profile, ProfileInput, ProfileSummary, RouteDetail, RouteFilter,
    RouteSummary, StartRouteRequest,
};
use std::sync::Arc;

/// The server's backend.
#[derive(Clone)]
pub struct EngineBackend {
    engine: Arc<Engine>,
}

impl EngineBackend {
    pub fn new(engine: Arc<Engine>) -> EngineBackend {
        EngineBackend { engine }
    }
}

/// Maps an engine error to the port's; the cause is logged here, once.
pub(crate) fn engine_error(e: EngineError) -> BackendError {
    match e {
        EngineError::RouteNotFound(id) => BackendError::NotFound { what: "route", id },
        EngineError::ProfileNotFound(id) => BackendError::NotFound { what: "profile", id },
        EngineError::Conflict(m) => BackendError::Conflict(m),
        EngineError::Rejected { reason, .. } => BackendError::Conflict(reason),
        other => {
            tracing::error!(error = %other, "backend call failed");
            BackendError::Unavailable
        }
    }
}

fn profile_error(e: ProfileError) -> BackendError {
    match e {
        ProfileError::Invalid(errors) => BackendError::Invalid(errors),
        ProfileError::NotFound(id) => BackendError::NotFound { what: "profile", id },
        ProfileError::Conflict(m) => BackendError::Conflict(m),
        ProfileError::Engine(e) => engine_error(e),
    }
}

impl Backend for EngineBackend {
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>> {
        Box::pin(async move { profiles::list(&self.engine).await.map_err(profile_error) })
    }

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move { profiles::get(&self.engine, &id).await.map_err(profile_error) })
    }

    fn create_profile(&self, input: ProfileInput) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move { profiles::create(&self.engine, input).await.map_err(profile_error) })
    }

    fn update_profile(
        &self,
        id: String,
        input: ProfileInput,
    ) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move {
            profiles::update(&self.engine, &id, input)
                .await
                .map_err(profile_error)
        })
    }

    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { profiles::delete(&self.engine, &id).await.map_err(profile_error) })
    }

    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        Box::pin(async move { self.engine.list_routes(&filter).await.map_err(engine_error) })
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        Box::pin(async move { self.engine.route_detail(&id).await.map_err(engine_error) })
    }

    fn start_route(
        &self,
        request: StartRouteRequest,
    ) -> BackendFuture<'_, Result<RouteSummary, BackendError>> {
        Box::pin(async move { self.engine.start_route(request).await.map_err(engine_error) })
    }

    fn perform_action(
        &self,
        route_id: String,
        request: ManualActionRequest,
    ) -> BackendFuture<'_, Result<ActionOutcome, BackendError>> {
        Box::pin(async move {
            self.engine
                .perform_action(&route_id, request)
                .await
                .map_err(engine_error)
        })
    }
}
