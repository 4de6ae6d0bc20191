//! An in-memory [`Backend`] for the server-function tests. It decides nothing: it records
//! every call with exactly what the server function sent ([`Call`]), and answers with what the
//! test scripted (a success value per operation, or one port error for every call). So a test
//! asserts what the function under test sends to the port, what it returns, and how it maps
//! the port's errors, never the fake's own logic.

use crate::backend::{Backend, BackendError, BackendFuture};
use leptos::prelude::{provide_context, Owner};
use policy::{
    api::{
        ActionOutcome, Caller, CallerKind, DispatcherKind, ManualActionRequest, Profile, ProfileSummary,
        RouteDetail, RouteFilter, RouteSummary, RunnerOption,
    },
    auth::{
        AccountCreate, AccountPatch, AccountView, Permission, Permissions, RoleView, TokenCreate,
        TokenCreated, TokenView,
    },
    document::PolicyDocument,
    input::ValidatedProfile,
    notify::{
        ChannelOption, DeliveryStatus, DeliveryView, NotificationPage, NotificationView, NotifyEventType,
    },
    route::{start, CandidateOption},
    wire::{RouteSnapshot, StateName},
};
use std::{
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
};

/// One call on the port, with its arguments as the server function passed them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    ListProfiles,
    GetProfile(String),
    CreateProfile(ValidatedProfile),
    UpdateProfile(String, ValidatedProfile),
    DeleteProfile(String),
    ListRunners,
    ListRoutes(RouteFilter),
    GetRoute(String),
    PerformAction(String, ManualActionRequest),
    AuditPage(Option<i64>),
    Notifications(Option<i64>),
    MarkNotificationsRead(u64),
    Deliveries(Option<DeliveryStatus>),
    ListChannels,
    Tokens,
    /// The token's name and permissions.
    CreateToken(String, Vec<String>),
    RevokeToken(String),
    Accounts,
    Roles,
    /// The account's name and role (never its password).
    CreateAccount(String, String),
    /// The id, and the patch as its `Debug` shows it (never a password).
    UpdateAccount(String, String),
    TryEvidence(serde_json::Value),
    Transcripts(String),
    Fixtures,
    Fixture(String),
}

/// What the fake answers. Each success value is returned as is, whatever the arguments.
#[derive(Clone)]
struct Script {
    /// When set, every call fails with this error.
    failure: Option<BackendError>,
    profiles: Vec<ProfileSummary>,
    profile: Profile,
    routes: Vec<RouteSummary>,
    detail: RouteDetail,
    action: ActionOutcome,
    runners: Vec<RunnerOption>,
    audit: Vec<policy::auth::AuditEntry>,
    notifications: NotificationPage,
    deliveries: Vec<DeliveryView>,
    channels: Vec<ChannelOption>,
    tokens: Vec<TokenView>,
    accounts: Vec<AccountView>,
    roles: Vec<RoleView>,
}

#[derive(Clone)]
pub(crate) struct FakeBackend {
    calls: Arc<Mutex<Vec<Call>>>,
    script: Arc<Mutex<Script>>,
}

impl Default for FakeBackend {
    /// A fake that answers every call successfully with the values of [`FakeBackend::profile`],
    /// [`FakeBackend::routes`], [`FakeBackend::detail`] and an applied action.
    fn default() -> FakeBackend {
        FakeBackend {
            calls: Arc::default(),
            script: Arc::new(Mutex::new(Script {
                failure: None,
                profiles: vec![profile_summary()],
                profile: FakeBackend::profile(),
                routes: FakeBackend::routes(),
                detail: FakeBackend::detail(),
                action: ActionOutcome::Applied(snapshot(StateName::ActionRequired, 4)),
                runners: FakeBackend::runners(),
                audit: Vec::new(),
                notifications: FakeBackend::notifications(),
                deliveries: Vec::new(),
                channels: vec![ChannelOption {
                    id: "in_app".into(),
                    kind: "in_app".into(),
                    label: None,
                }],
                tokens: vec![FakeBackend::token()],
                accounts: vec![FakeBackend::account()],
                roles: vec![RoleView {
                    name: "viewer".into(),
                    permissions: Permissions::of(&[Permission::ViewRoutes]),
                    builtin: true,
                }],
            })),
        }
    }
}

impl FakeBackend {
    /// A fake whose every call fails with `error`.
    pub(crate) fn failing(error: BackendError) -> FakeBackend {
        let fake = FakeBackend::default();
        fake.script().failure = Some(error);
        fake
    }

    /// A fake whose manual actions answer `outcome`.
    pub(crate) fn answering_action(outcome: ActionOutcome) -> FakeBackend {
        let fake = FakeBackend::default();
        fake.script().action = outcome;
        fake
    }

    /// A fake whose configuration lists `runners`.
    pub(crate) fn answering_runners(runners: Vec<RunnerOption>) -> FakeBackend {
        let fake = FakeBackend::default();
        fake.script().runners = runners;
        fake
    }

    /// The token `tokens` lists and `create_token` answers (with the secret `rct_stored`).
    pub(crate) fn token() -> TokenView {
        TokenView {
            id: "tok-stored".into(),
            name: "stored".into(),
            account: "ada".into(),
            permissions: Permissions::of(&[Permission::ViewRoutes]),
            profile_ids: None,
            created_at: at(10),
            expires_at: at(10 + 86_400),
            last_used_at: None,
            revoked_at: None,
        }
    }

    /// The page `notifications` answers: one unread notification.
    pub(crate) fn notifications() -> NotificationPage {
        NotificationPage {
            items: vec![NotificationView {
                seq: 3,
                id: "msg-stored".into(),
                event: NotifyEventType::RouteNeedsPerson,
                at: at(30),
                route_id: "r1".into(),
                summary: "Route r1 needs a person on candidate a: policy_stop".into(),
                read: false,
            }],
            unread: 1,
        }
    }

    /// The trial `try_evidence` answers: a capacity error, whatever was sent.
    pub(crate) fn trial() -> policy::trial::EvidenceTrial {
        use policy::{
            class::SemanticCode,
            classification::{ClassState, Classification, Confidence, Gate, GateReason},
        };
        policy::trial::EvidenceTrial {
            classification: Classification {
                code: Some(SemanticCode::ModelCapacity),
                class: ClassState::Transient,
                reason: None,
                catalogue_version: "fake".into(),
                confidence: Confidence::High,
                scope: None,
                classifier_rule: Some("fake.capacity".into()),
                provider_id: None,
                model_id: None,
                phase: None,
                occurred_at: None,
                retry_after_seconds: None,
                reset_at: None,
                safe_excerpt: Some("capacity".into()),
            },
            gate: Gate::ALLOW,
            gate_after_output: Gate::deny(GateReason::AssistantOutput),
            truncated: false,
            classified_at: at(30),
        }
    }

    /// The account `accounts`, `create_account` and `update_account` answer.
    pub(crate) fn account() -> AccountView {
        AccountView {
            id: "acct-stored".into(),
            name: "stored".into(),
            role: "viewer".into(),
            disabled: false,
            demo: false,
            created_at: at(10),
            updated_at: at(20),
        }
    }

    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The profile `get_profile`, `create_profile` and `update_profile` answer: stored and
    /// normalized, so it differs from any input a test sends (a function that echoed its
    /// input instead of the port's answer would show).
    pub(crate) fn profile() -> Profile {
        let policy: PolicyDocument = serde_json::from_value(serde_json::json!({"version": 1, "candidates": [{"id": "stored",
            "transient": {"retry": {"enabled": true, "max_retries": 2, "initial_interval_seconds": 5},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
            "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                     "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}))
        .expect("a version-1 document");
        Profile {
            id: "stored-id".into(),
            name: "Stored".into(),
            kind: policy::api::ProfileKind::Dynamic,
            description: Some("as the store has it".into()),
            revision: 7,
            targets: vec![],
            policy,
            normalized_from_legacy: true,
            notifications: Vec::new(),
            created_at: at(10),
            updated_at: at(20),
        }
    }

    /// The list `list_routes` answers: in the port's order (not by time, and with a finished
    /// route in it), so a function that re-sorted or re-filtered the port's answer would show.
    pub(crate) fn routes() -> Vec<RouteSummary> {
        vec![
            route_summary("older", StateName::RetryWait, 10),
            route_summary("finished", StateName::Completed, 30),
            route_summary("newer", StateName::Active, 20),
        ]
    }

    /// The configuration `list_runners` answers: an endpoint before an agent (not the port's
    /// documented order), so a function that re-sorted the port's answer would show.
    pub(crate) fn runners() -> Vec<RunnerOption> {
        vec![
            RunnerOption {
                kind: DispatcherKind::Http,
                id: "mini".into(),
                label: None,
                provider_id: Some("openai".into()),
                model_id: Some("gpt-4.1-mini".into()),
            },
            RunnerOption {
                kind: DispatcherKind::Acp,
                id: "claude".into(),
                label: Some("Claude Code".into()),
                provider_id: Some("anthropic".into()),
                model_id: None,
            },
        ]
    }

    /// The route `get_route` answers.
    pub(crate) fn detail() -> RouteDetail {
        RouteDetail {
            route: route_summary("detailed", StateName::RetryWait, 40),
            history: vec![],
            dispatches: vec![],
        }
    }

    fn script(&self) -> MutexGuard<'_, Script> {
        self.script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `call`, then answers the scripted failure or `ok` applied to the script.
    fn answer<'a, T: Send + 'a>(
        &self,
        call: Call,
        ok: impl FnOnce(&Script) -> T,
    ) -> BackendFuture<'a, Result<T, BackendError>> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(call);
        }
        let script = self.script();
        let result = match &script.failure {
            Some(error) => Err(error.clone()),
            None => Ok(ok(&script)),
        };
        Box::pin(std::future::ready(result))
    }
}

/// A route snapshot in `state` at `generation`.
pub(crate) fn snapshot(state: StateName, generation: u64) -> RouteSnapshot {
    let t = start(&[CandidateOption::now("a")]).expect("one eligible candidate");
    let mut s = t.next.snapshot();
    s.generation = generation;
    s.state = state;
    s
}

fn at(second: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(second, 0).unwrap_or_default()
}

fn profile_summary() -> ProfileSummary {
    ProfileSummary {
        id: "stored-id".into(),
        name: "Stored".into(),
        description: None,
        revision: 7,
        candidate_ids: vec!["stored".into()],
        open_routes: 1,
        routes: 2,
        updated_at: at(20),
    }
}

/// A route `id` in `state`, last changed `second` seconds after the epoch.
fn route_summary(id: &str, state: StateName, second: i64) -> RouteSummary {
    RouteSummary {
        id: id.to_owned(),
        profile_id: "p1".into(),
        profile_name: "Main".into(),
        caller: Caller {
            kind: CallerKind::Office,
            reference: format!("ref-{id}"),
            invocation_id: format!("inv-{id}"),
        },
        title: None,
        snapshot: snapshot(state, 1),
        durable_error: None,
        created_at: at(second),
        updated_at: at(second),
    }
}

impl Backend for FakeBackend {
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>> {
        self.answer(Call::ListProfiles, |s| s.profiles.clone())
    }

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.answer(Call::GetProfile(id), |s| s.profile.clone())
    }

    fn create_profile(&self, input: ValidatedProfile) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.answer(Call::CreateProfile(input), |s| s.profile.clone())
    }

    fn update_profile(
        &self,
        id: String,
        input: ValidatedProfile,
    ) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.answer(Call::UpdateProfile(id, input), |s| s.profile.clone())
    }

    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        self.answer(Call::DeleteProfile(id), |_| ())
    }

    fn list_runners(&self) -> BackendFuture<'_, Result<Vec<RunnerOption>, BackendError>> {
        self.answer(Call::ListRunners, |s| s.runners.clone())
    }

    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        self.answer(Call::ListRoutes(filter), |s| s.routes.clone())
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        self.answer(Call::GetRoute(id), |s| s.detail.clone())
    }

    fn transcripts(
        &self,
        id: String,
    ) -> BackendFuture<'_, Result<Vec<policy::transcript::AttemptTranscript>, BackendError>> {
        self.answer(Call::Transcripts(id), |_| Vec::new())
    }

    fn perform_action(
        &self,
        route_id: String,
        request: ManualActionRequest,
    ) -> BackendFuture<'_, Result<ActionOutcome, BackendError>> {
        self.answer(Call::PerformAction(route_id, request), |s| s.action.clone())
    }

    fn audit_page(
        &self,
        before: Option<i64>,
    ) -> BackendFuture<'_, Result<Vec<policy::auth::AuditEntry>, BackendError>> {
        self.answer(Call::AuditPage(before), |s| s.audit.clone())
    }

    fn notifications(
        &self,
        before: Option<i64>,
    ) -> BackendFuture<'_, Result<NotificationPage, BackendError>> {
        self.answer(Call::Notifications(before), |s| s.notifications.clone())
    }

    fn mark_notifications_read(&self, through_seq: u64) -> BackendFuture<'_, Result<u64, BackendError>> {
        self.answer(Call::MarkNotificationsRead(through_seq), |_| 0)
    }

    fn deliveries(
        &self,
        status: Option<DeliveryStatus>,
    ) -> BackendFuture<'_, Result<Vec<DeliveryView>, BackendError>> {
        self.answer(Call::Deliveries(status), |s| s.deliveries.clone())
    }

    fn list_channels(&self) -> BackendFuture<'_, Result<Vec<ChannelOption>, BackendError>> {
        self.answer(Call::ListChannels, |s| s.channels.clone())
    }

    fn tokens(&self) -> BackendFuture<'_, Result<Vec<TokenView>, BackendError>> {
        self.answer(Call::Tokens, |s| s.tokens.clone())
    }

    fn create_token(&self, input: TokenCreate) -> BackendFuture<'_, Result<TokenCreated, BackendError>> {
        let permissions = input.permissions.iter().map(|p| p.to_string()).collect();
        self.answer(Call::CreateToken(input.name, permissions), |s| TokenCreated {
            secret: "rct_stored".into(),
            token: s.tokens[0].clone(),
        })
    }

    fn revoke_token(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        self.answer(Call::RevokeToken(id), |_| ())
    }

    fn accounts(&self) -> BackendFuture<'_, Result<Vec<AccountView>, BackendError>> {
        self.answer(Call::Accounts, |s| s.accounts.clone())
    }

    fn roles(&self) -> BackendFuture<'_, Result<Vec<RoleView>, BackendError>> {
        self.answer(Call::Roles, |s| s.roles.clone())
    }

    fn create_account(&self, input: AccountCreate) -> BackendFuture<'_, Result<AccountView, BackendError>> {
        self.answer(Call::CreateAccount(input.name, input.role), |s| {
            s.accounts[0].clone()
        })
    }

    fn update_account(
        &self,
        id: String,
        patch: AccountPatch,
    ) -> BackendFuture<'_, Result<AccountView, BackendError>> {
        self.answer(Call::UpdateAccount(id, format!("{patch:?}")), |s| {
            s.accounts[0].clone()
        })
    }

    fn try_evidence(
        &self,
        envelope: serde_json::Value,
    ) -> BackendFuture<'_, Result<policy::trial::EvidenceTrial, BackendError>> {
        self.answer(Call::TryEvidence(envelope), |_| FakeBackend::trial())
    }

    fn fixtures(&self) -> BackendFuture<'_, Result<Vec<String>, BackendError>> {
        self.answer(Call::Fixtures, |_| vec!["fake/capacity".to_owned()])
    }

    fn fixture(&self, name: String) -> BackendFuture<'_, Result<serde_json::Value, BackendError>> {
        self.answer(Call::Fixture(name), |_| serde_json::json!({"items": []}))
    }
}

/// Runs `f` (which must not wait on anything: the fake answers at once) with `fake` as the
/// backend in Leptos context.
pub(crate) fn with_backend<F: Future>(fake: &FakeBackend, f: F) -> F::Output {
    let owner = Owner::new();
    owner.with(|| {
        provide_context::<Arc<dyn Backend>>(Arc::new(fake.clone()));
        block_on(f)
    })
}

/// Polls a future that is ready without waiting.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the fake backend never waits"),
    }
}
