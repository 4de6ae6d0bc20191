//! `app::backend::Backend` over the engine: what the pages and server functions call. The REST
//! handlers in [`crate::api`] call the same services, and errors map through the same
//! [`crate::failure::Failure`], so the two surfaces cannot drift.
//!
//! Who is asking: the rules layer ([`crate::auth::layer::enforce`]) already let the page or
//! server function in, and put the request's [`Principal`] and [`Actor`] on it; Leptos hands
//! the request to its server functions and pages as context, and writes read them from there
//! for the checks that depend on the route ([`crate::auth::scope`]) and for the audit log. A
//! write with no principal in its context is refused.

use crate::{
    auth::{
        scope::{self, RouteUse},
        Actor, Auth, Principal,
    },
    engine::Engine,
    failure::{backend_error, Failure},
    profiles,
};
use app::backend::{Backend, BackendError, BackendFuture};
use policy::{
    api::{
        ActionOutcome, ManualActionRequest, Profile, ProfileSummary, RouteDetail, RouteFilter, RouteSummary,
    },
    auth::{AuditEntry, Permission},
    input::ValidatedProfile,
};
use std::sync::Arc;

/// The server's backend.
#[derive(Clone)]
pub struct EngineBackend {
    engine: Arc<Engine>,
    auth: Auth,
}

impl EngineBackend {
    pub fn new(engine: Arc<Engine>, auth: Auth) -> EngineBackend {
        EngineBackend { engine, auth }
    }
}

/// The principal and actor of the request being served (from Leptos's request context).
/// Call it before the first `.await`: the context belongs to the request's reactive owner.
fn caller() -> Result<(Principal, Actor), BackendError> {
    let parts = leptos::prelude::use_context::<axum::http::request::Parts>();
    let principal = parts
        .as_ref()
        .and_then(|p| p.extensions.get::<Principal>().cloned());
    let actor = parts.as_ref().and_then(|p| p.extensions.get::<Actor>().cloned());
    match (principal, actor) {
        (Some(p), Some(a)) => Ok((p, a)),
        _ => Err(BackendError::Forbidden("Sign in first.".to_owned())),
    }
}

fn refused(f: Failure) -> BackendError {
    f.into()
}

impl Backend for EngineBackend {
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>> {
        Box::pin(async move { profiles::list(&self.engine).await.map_err(backend_error) })
    }

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>> {
        Box::pin(async move { profiles::get(&self.engine, &id).await.map_err(backend_error) })
    }

    fn create_profile(&self, profile: ValidatedProfile) -> BackendFuture<'_, Result<Profile, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            scope::create_profile(&principal).map_err(refused)?;
            let created = profiles::create(&self.engine, profile)
                .await
                .map_err(backend_error)?;
            self.auth
                .audit_profile(&actor, &created.id, None, Some(&created))
                .await;
            Ok(created)
        })
    }

    fn update_profile(
        &self,
        id: String,
        profile: ValidatedProfile,
    ) -> BackendFuture<'_, Result<Profile, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            scope::profile(&principal, &id).map_err(refused)?;
            let before = profiles::get(&self.engine, &id).await.map_err(backend_error)?;
            let after = profiles::update(&self.engine, &id, profile)
                .await
                .map_err(backend_error)?;
            self.auth
                .audit_profile(&actor, &id, Some(&before), Some(&after))
                .await;
            Ok(after)
        })
    }

    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            scope::profile(&principal, &id).map_err(refused)?;
            let before = profiles::get(&self.engine, &id).await.map_err(backend_error)?;
            profiles::delete(&self.engine, &id).await.map_err(backend_error)?;
            self.auth.audit_profile(&actor, &id, Some(&before), None).await;
            Ok(())
        })
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
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            let route = self
                .engine
                .route_summary(&route_id)
                .await
                .map_err(backend_error)?;
            scope::route(&principal, &route, RouteUse::Steer).map_err(refused)?;
            let outcome = self
                .engine
                .perform_action(&route_id, request)
                .await
                .map_err(backend_error)?;
            self.auth
                .audit_action(&actor, &route_id, &request, &outcome)
                .await;
            Ok(outcome)
        })
    }

    fn audit_page(&self, before: Option<i64>) -> BackendFuture<'_, Result<Vec<AuditEntry>, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, _) = caller?;
            if !principal.has(Permission::Admin) {
                return Err(BackendError::Forbidden(
                    "This needs the `admin` permission.".to_owned(),
                ));
            }
            self.auth
                .store()
                .audit_page(before, policy::limits::DEFAULT_AUDIT_PAGE)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "the audit log could not be read");
                    BackendError::Unavailable
                })
        })
    }
}
