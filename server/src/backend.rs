//! `app::backend::Backend` over the engine: what the pages and server functions call. The REST
//! handlers in [`crate::api`] call the same services, and errors map through the same
//! [`crate::failure::Failure`], so the two surfaces cannot drift.

use crate::{engine::Engine, failure::backend_error, profiles};
use app::backend::{Backend, BackendError, BackendFuture};
use policy::{
    api::{
        ActionOutcome, ManualActionRequest, Profile, ProfileSummary, RouteDetail, RouteFilter, RouteSummary,
    },
    input::ValidatedProfile,
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

impl Backend for EngineBackend {
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>> {
        Box::pin(async move { profiles::list(&self.engine).await.map_err(backend_error) })
    }

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move { profiles::get(&self.engine, &id).await.map_err(backend_error) })
    }

    fn create_profile(&self, profile: ValidatedProfile) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move {
            profiles::create(&self.engine, profile)
                .await
                .map_err(backend_error)
        })
    }

    fn update_profile(
        &self,
        id: String,
        profile: ValidatedProfile,
    ) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move {
            profiles::update(&self.engine, &id, profile)
                .await
                .map_err(backend_error)
        })
    }

    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        Box::pin(async move { profiles::delete(&self.engine, &id).await.map_err(backend_error) })
    }

    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        Box::pin(async move { self.engine.list_routes(&filter).await.map_err(backend_error) })
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        Box::pin(async move { self.engine.route_detail(&id).await.map_err(backend_error) })
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
                .map_err(backend_error)
        })
    }
}
