//! `app::backend::Backend` over the engine: what the pages and server functions call. The REST
//! handlers in [`crate::api`] call the same services, and errors map through the same
//! [`crate::failure::Failure`], so the two surfaces cannot drift.
//!
//! Who is asking: the rules layer ([`crate::web::enforce::enforce`]) already let the page or
//! server function in, and put the request's [`Principal`] and [`Actor`] on it; Leptos hands
//! the request to its server functions and pages as context, and writes read them from there
//! for the checks that depend on the route ([`crate::auth::scope`]) and for the audit log. A
//! write with no principal in its context is refused.

use crate::{
    auth::{
        accounts::ManageError,
        scope::{self, RouteUse},
        Actor, Auth, Principal,
    },
    engine::Engine,
    failure::{backend_error, Failure},
    notify, profiles,
};
use app::backend::{Backend, BackendError, BackendFuture};
use policy::{
    api::{
        ActionOutcome, DispatcherKind, ManualActionRequest, Profile, ProfileSummary, RouteDetail,
        RouteFilter, RouteSummary, RunnerOption,
    },
    auth::{
        AccountCreate, AccountPatch, AccountView, AuditEntry, RoleView, TokenCreate, TokenCreated, TokenView,
    },
    input::ValidatedProfile,
    notify::{ChannelOption, DeliveryStatus, DeliveryView, NotificationPage},
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

/// The person (and a token's profiles) whose notifications these are.
fn reader(p: &Principal) -> notify::Reader<'_> {
    notify::Reader {
        account_id: &p.account_id,
        within: p.profile_ids.as_deref(),
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

    fn list_runners(&self) -> BackendFuture<'_, Result<Vec<RunnerOption>, BackendError>> {
        let config = self.engine.runners().current();
        let agents = config.agents.iter().map(|a| RunnerOption {
            kind: DispatcherKind::Acp,
            id: a.id.clone(),
            label: a.label.clone(),
            provider_id: a.provider_id.clone(),
            model_id: a.model_id.clone(),
        });
        let endpoints = config.endpoints.iter().map(|e| RunnerOption {
            kind: DispatcherKind::Http,
            id: e.id.clone(),
            label: e.label.clone(),
            provider_id: e.provider_id.clone(),
            model_id: Some(e.model.clone()),
        });
        Box::pin(std::future::ready(Ok(agents.chain(endpoints).collect())))
    }

    fn notifications(
        &self,
        before: Option<i64>,
    ) -> BackendFuture<'_, Result<NotificationPage, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, _) = caller?;
            notify::list(&self.engine, &reader(&principal), before, None)
                .await
                .map_err(backend_error)
        })
    }

    fn mark_notifications_read(&self, through_seq: u64) -> BackendFuture<'_, Result<u64, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, _) = caller?;
            notify::mark_read(&self.engine, &reader(&principal), through_seq)
                .await
                .map_err(backend_error)
        })
    }

    fn deliveries(
        &self,
        status: Option<DeliveryStatus>,
    ) -> BackendFuture<'_, Result<Vec<DeliveryView>, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, _) = caller?;
            notify::deliveries(&self.engine, &reader(&principal), status, None, None)
                .await
                .map_err(backend_error)
        })
    }

    fn list_channels(&self) -> BackendFuture<'_, Result<Vec<ChannelOption>, BackendError>> {
        Box::pin(std::future::ready(Ok(notify::channels(&self.engine))))
    }

    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        Box::pin(async move { self.engine.list_routes(&filter).await.map_err(backend_error) })
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        Box::pin(async move { self.engine.route_detail(&id).await.map_err(backend_error) })
    }

    fn transcripts(
        &self,
        id: String,
    ) -> BackendFuture<'_, Result<Vec<policy::transcript::AttemptTranscript>, BackendError>> {
        Box::pin(async move { self.engine.transcripts(&id).await.map_err(backend_error) })
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
            if !principal.administers() {
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

    fn tokens(&self) -> BackendFuture<'_, Result<Vec<TokenView>, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, _) = caller?;
            let rows = self.auth.visible_tokens(&principal).await?;
            Ok(rows.iter().map(|t| t.view()).collect())
        })
    }

    fn create_token(&self, input: TokenCreate) -> BackendFuture<'_, Result<TokenCreated, BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            Ok(self.auth.create_token(&actor, &principal, &input).await?)
        })
    }

    fn revoke_token(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        let caller = caller();
        Box::pin(async move {
            let (principal, actor) = caller?;
            Ok(self.auth.revoke_token(&actor, &principal, &id).await?)
        })
    }

    fn accounts(&self) -> BackendFuture<'_, Result<Vec<AccountView>, BackendError>> {
        let caller = admin();
        Box::pin(async move {
            caller?;
            let rows = self.auth.store().accounts().await.map_err(ManageError::from)?;
            Ok(rows.iter().map(|a| a.view()).collect())
        })
    }

    fn roles(&self) -> BackendFuture<'_, Result<Vec<RoleView>, BackendError>> {
        let caller = admin();
        Box::pin(async move {
            caller?;
            Ok(self.auth.roles().await?)
        })
    }

    fn create_account(&self, input: AccountCreate) -> BackendFuture<'_, Result<AccountView, BackendError>> {
        let caller = admin();
        Box::pin(async move {
            let actor = caller?;
            Ok(self.auth.create_account(&actor, &input, false).await?.view())
        })
    }

    fn update_account(
        &self,
        id: String,
        patch: AccountPatch,
    ) -> BackendFuture<'_, Result<AccountView, BackendError>> {
        let caller = admin();
        Box::pin(async move {
            let actor = caller?;
            Ok(self.auth.update_account(&actor, &id, &patch).await?.view())
        })
    }

    fn try_evidence(
        &self,
        envelope: serde_json::Value,
    ) -> BackendFuture<'_, Result<policy::trial::EvidenceTrial, BackendError>> {
        let now = self.engine.clock().now();
        Box::pin(async move { crate::trial::try_evidence(&envelope, now).map_err(refused) })
    }

    fn fixtures(&self) -> BackendFuture<'_, Result<Vec<String>, BackendError>> {
        Box::pin(async move { Ok(crate::trial::fixture_names()) })
    }

    fn fixture(&self, name: String) -> BackendFuture<'_, Result<serde_json::Value, BackendError>> {
        Box::pin(async move { crate::trial::fixture(&name).map_err(refused) })
    }
}

/// The actor of the request being served, when its principal holds `admin` (the rules layer
/// said so already; the port checks again). Call it before the first `.await`.
fn admin() -> Result<Actor, BackendError> {
    let (principal, actor) = caller()?;
    if !principal.administers() {
        return Err(BackendError::Forbidden(
            "This needs the `admin` permission.".to_owned(),
        ));
    }
    Ok(actor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        clock::ManualClock,
        config::{RunnerConfig, Runners},
        store::Store,
    };
    use policy::{
        api::{CandidateTarget, DispatcherKind, ProfileInput},
        document::ValidationCode,
    };

    /// An agent and an endpoint whose command, arguments, folder, variable names and URL must
    /// never reach the UI.
    fn config(root: &std::path::Path) -> RunnerConfig {
        RunnerConfig::parse(&format!(
            r#"
            [[agent]]
            id = "claude"
            label = "Claude Code"
            command = "/opt/secret-agents/claude-agent-acp"
            args = ["--secret-flag"]
            allowed_roots = ["{root}"]
            env = ["SECRET_AGENT_KEY"]
            provider_id = "anthropic"

            [[endpoint]]
            id = "mini"
            style = "openai"
            base_url = "https://secret-host.example/v1"
            model = "gpt-4.1-mini"
            api_key_env = "SECRET_ENDPOINT_KEY"
            provider_id = "openai"
            "#,
            root = root.display()
        ))
        .unwrap()
    }

    async fn backend(dir: &std::path::Path, runners: Runners) -> EngineBackend {
        let pool = crate::db::open(dir.join("recourse.db").to_str().unwrap())
            .await
            .unwrap();
        let clock = Arc::new(ManualClock::new(
            chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
        ));
        let store = Store::new(pool);
        let auth = Auth::new(store.clone(), clock.clone(), Default::default());
        EngineBackend::new(Engine::with_runners(store, clock, runners), auth)
    }

    /// Calls `call` as a server function of an administrator's request would: with the
    /// request's principal and actor in Leptos's context (the backend reads them before its
    /// first `.await`).
    fn as_admin<T>(call: impl FnOnce() -> T) -> T {
        let principal = Principal {
            account_id: "a-1".into(),
            account: "admin".into(),
            role: "admin".into(),
            via: crate::auth::Via::Session,
            permissions: policy::auth::Permissions::ALL,
            profile_ids: None,
            demo: false,
        };
        let mut parts = axum::http::Request::new(()).into_parts().0;
        parts.extensions.insert(Actor::of(Some(&principal), None));
        parts.extensions.insert(principal);
        leptos::prelude::Owner::new().with(|| {
            leptos::prelude::provide_context(parts);
            call()
        })
    }

    fn acp_profile(runner: &str, expected_revision: Option<u64>) -> ValidatedProfile {
        let mut target = CandidateTarget::external("a");
        target.dispatcher = DispatcherKind::Acp;
        target.runner = Some(runner.to_owned());
        ValidatedProfile::parse(&ProfileInput {
            name: "Agents".into(),
            kind: Default::default(),
            description: None,
            targets: vec![target],
            policy: serde_json::json!({"on_error": "try_next", "candidates": [{"id": "a"}]}),
            expected_revision,
            notifications: Vec::new(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn the_ui_sees_the_configured_runners_by_id_and_label_only_and_follows_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let runners = Runners::new(config(dir.path()));
        let backend = backend(dir.path(), runners.clone()).await;
        let listed = backend.list_runners().await.unwrap();
        assert_eq!(
            listed,
            vec![
                RunnerOption {
                    kind: DispatcherKind::Acp,
                    id: "claude".into(),
                    label: Some("Claude Code".into()),
                    provider_id: Some("anthropic".into()),
                    model_id: None,
                },
                RunnerOption {
                    kind: DispatcherKind::Http,
                    id: "mini".into(),
                    label: None,
                    provider_id: Some("openai".into()),
                    model_id: Some("gpt-4.1-mini".into()),
                },
            ]
        );
        let wire = serde_json::to_string(&listed).unwrap();
        for secret in [
            "/opt/secret-agents",
            "--secret-flag",
            "SECRET_",
            "secret-host",
            "https://",
        ] {
            assert!(!wire.contains(secret), "{secret} reached the UI: {wire}");
        }
        let root = dir.path().display().to_string();
        assert!(!wire.contains(&root), "a folder reached the UI");

        runners.replace(RunnerConfig::default());
        assert_eq!(backend.list_runners().await.unwrap(), vec![]);
    }

    #[tokio::test]
    async fn an_edit_naming_an_agent_the_configuration_no_longer_has_is_refused_on_its_runner() {
        let dir = tempfile::tempdir().unwrap();
        let runners = Runners::new(config(dir.path()));
        let backend = backend(dir.path(), runners.clone()).await;
        let created = as_admin(|| backend.create_profile(acp_profile("claude", None)))
            .await
            .unwrap();
        assert_eq!(created.targets[0].provider_id.as_deref(), Some("anthropic"));

        // Saved again while configured: accepted, the provider filled from the agent.
        let saved = as_admin(|| backend.update_profile(created.id.clone(), acp_profile("claude", Some(1))))
            .await
            .unwrap();
        assert_eq!(saved.revision, 2);
        assert_eq!(saved.targets[0].provider_id.as_deref(), Some("anthropic"));

        runners.replace(RunnerConfig::default());
        let err = as_admin(|| backend.update_profile(created.id.clone(), acp_profile("claude", Some(2))))
            .await
            .unwrap_err();
        let BackendError::Invalid(errors) = err else {
            panic!("expected a validation error, got {err:?}");
        };
        let at: Vec<_> = errors.at("targets[0].runner").map(|e| e.code).collect();
        assert_eq!(at, [ValidationCode::UnknownField]);
        // Nothing was written.
        assert_eq!(backend.get_profile(created.id).await.unwrap().revision, 2);
    }
}
