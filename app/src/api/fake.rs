//! An in-memory [`Backend`] for the server-function tests: answers by id, records every call.

use crate::backend::{Backend, BackendError, BackendFuture};
use leptos::prelude::{provide_context, Owner};
use policy::{
    api::{
        ActionOutcome, Caller, CallerKind, ManualActionRequest, Profile, ProfileSummary, RouteDetail,
        RouteFilter, RouteSummary,
    },
    document::{ValidationCode, ValidationError, ValidationErrors},
    input::ValidatedProfile,
    route::{start, CandidateOption},
    wire::{RouteSnapshot, StateName},
};
use std::{
    future::Future,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
};

#[derive(Default, Clone)]
pub(crate) struct FakeBackend {
    calls: Arc<Mutex<Vec<String>>>,
    /// What `list_routes` answers from, filtered by state like the store.
    routes: Arc<Mutex<Vec<RouteSummary>>>,
    /// Profile ids whose deletion is refused as a conflict (they have open routes).
    busy_profiles: Arc<Mutex<Vec<String>>>,
}

impl FakeBackend {
    /// A fake whose stored routes are `(id, state, updated second)`.
    pub(crate) fn with_routes(routes: &[(&str, StateName, i64)]) -> FakeBackend {
        let fake = FakeBackend::default();
        if let Ok(mut stored) = fake.routes.lock() {
            stored.extend(
                routes
                    .iter()
                    .map(|&(id, state, second)| route_summary(id, state, second)),
            );
        }
        fake
    }

    /// Refuses to delete `profile_id`, as the server does for a profile with open routes.
    pub(crate) fn refusing_to_delete(self, profile_id: &str) -> FakeBackend {
        if let Ok(mut busy) = self.busy_profiles.lock() {
            busy.push(profile_id.to_owned());
        }
        self
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn record(&self, call: String) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(call);
        }
    }

    /// A route in `retry_wait` at generation 3.
    fn snapshot(generation: u64) -> RouteSnapshot {
        let t = start(&[CandidateOption::now("a")]).expect("one eligible candidate");
        let mut s = t.next.snapshot();
        s.generation = generation;
        s.state = policy::wire::StateName::RetryWait;
        s
    }
}

/// A route `id` in `state`, last changed `second` seconds after the epoch.
fn route_summary(id: &str, state: StateName, second: i64) -> RouteSummary {
    let mut snapshot = FakeBackend::snapshot(1);
    snapshot.state = state;
    let at = chrono::DateTime::from_timestamp(second, 0).unwrap_or_default();
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
        snapshot,
        durable_error: None,
        created_at: at,
        updated_at: at,
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BackendFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Backend for FakeBackend {
    fn list_profiles(&self) -> BackendFuture<'_, Result<Vec<ProfileSummary>, BackendError>> {
        self.record("list_profiles".into());
        ready(Ok(vec![]))
    }

    fn get_profile(&self, id: String) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.record(format!("get_profile {id}"));
        ready(Err(BackendError::NotFound { what: "profile" }))
    }

    fn create_profile(&self, _profile: ValidatedProfile) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.record("create_profile".into());
        ready(Err(BackendError::Unavailable))
    }

    fn update_profile(
        &self,
        id: String,
        _profile: ValidatedProfile,
    ) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.record(format!("update_profile {id}"));
        ready(Err(BackendError::Invalid(ValidationErrors {
            errors: vec![ValidationError {
                path: "candidates[1].id".into(),
                code: ValidationCode::Duplicate,
                message: "Candidate id `a` is already used by candidates[0].".into(),
            }],
        })))
    }

    fn delete_profile(&self, id: String) -> BackendFuture<'_, Result<(), BackendError>> {
        self.record(format!("delete_profile {id}"));
        let busy = self.busy_profiles.lock().is_ok_and(|b| b.contains(&id));
        ready(if busy {
            Err(BackendError::Conflict(
                "the profile has 2 routes; it is kept so their history stays readable".into(),
            ))
        } else {
            Ok(())
        })
    }

    fn list_routes(&self, filter: RouteFilter) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        self.record(format!(
            "list_routes {} limit {}",
            match (filter.state, filter.open_only) {
                (Some(s), _) => s.as_str(),
                (None, true) => "open",
                (None, false) => "any",
            },
            filter.limit.unwrap_or(0)
        ));
        let mut found: Vec<RouteSummary> = self
            .routes
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|r| filter.state.is_none_or(|s| r.snapshot.state == s))
            .filter(|r| !filter.open_only || !r.snapshot.state.is_terminal())
            .collect();
        found.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.id.cmp(&b.id)));
        ready(Ok(found))
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        self.record(format!("get_route {id}"));
        ready(Err(BackendError::Unavailable))
    }

    fn perform_action(
        &self,
        route_id: String,
        request: ManualActionRequest,
    ) -> BackendFuture<'_, Result<ActionOutcome, BackendError>> {
        self.record(format!(
            "perform_action {route_id} {} {}",
            request.action.as_str(),
            request.expected_generation
        ));
        // The route is at generation 3: only that generation wins.
        ready(Ok(if request.expected_generation == 3 {
            ActionOutcome::Applied(FakeBackend::snapshot(4))
        } else {
            ActionOutcome::Conflict(FakeBackend::snapshot(3))
        }))
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
