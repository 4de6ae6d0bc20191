//! An in-memory [`Backend`] for the server-function tests: answers by id, records every call.

use crate::backend::{Backend, BackendError, BackendFuture};
use leptos::prelude::{provide_context, Owner};
use policy::{
    api::{
        ActionOutcome, ManualActionRequest, Profile, ProfileInput, ProfileSummary, RouteDetail, RouteFilter,
        RouteSummary, StartRouteRequest,
    },
    document::{ValidationCode, ValidationError, ValidationErrors},
    route::{start, CandidateOption},
    wire::RouteSnapshot,
};
use std::{
    future::Future,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
};

#[derive(Default, Clone)]
pub(crate) struct FakeBackend {
    calls: Arc<Mutex<Vec<String>>>,
}

impl FakeBackend {
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
        let t = start(&[CandidateOption {
            id: "a".into(),
            eligible: true,
        }])
        .expect("one eligible candidate");
        let mut s = t.next.snapshot();
        s.generation = generation;
        s.state = policy::wire::StateName::RetryWait;
        s
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
        ready(Err(BackendError::NotFound { what: "profile", id }))
    }

    fn create_profile(&self, _input: ProfileInput) -> BackendFuture<'_, Result<Profile, BackendError>> {
        self.record("create_profile".into());
        ready(Err(BackendError::Unavailable))
    }

    fn update_profile(
        &self,
        id: String,
        _input: ProfileInput,
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
        ready(Ok(()))
    }

    fn list_routes(
        &self,
        _filter: RouteFilter,
    ) -> BackendFuture<'_, Result<Vec<RouteSummary>, BackendError>> {
        self.record("list_routes".into());
        ready(Ok(vec![]))
    }

    fn get_route(&self, id: String) -> BackendFuture<'_, Result<RouteDetail, BackendError>> {
        self.record(format!("get_route {id}"));
        ready(Err(BackendError::Unavailable))
    }

    fn start_route(
        &self,
        _request: StartRouteRequest,
    ) -> BackendFuture<'_, Result<RouteSummary, BackendError>> {
        self.record("start_route".into());
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
