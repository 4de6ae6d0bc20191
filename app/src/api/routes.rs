//! Route server functions: list (filtered), read with history, and the manual actions.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::{
    api::{CallerKind, RouteDetail, RouteSummary},
    wire::{ManualAction, RouteSnapshot, StateName},
};
use serde::{Deserialize, Serialize};

/// How many routes the list shows at most (the server's own default page).
pub const LIST_LIMIT: u32 = 100;

/// Which route states a list shows. The default is the open ones: a finished (completed) or
/// abandoned route needs nobody, so the overview hides it unless asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateScope {
    /// Every state but the terminal ones.
    #[default]
    Open,
    /// Every state, finished routes included.
    All,
    /// Exactly one state.
    Only(StateName),
}

impl StateScope {
    /// The address's `state` parameter: absent, empty or `open` is the default; `all`, or a
    /// state's name. Anything else falls back to the default rather than failing the page.
    pub fn from_query(value: Option<&str>) -> StateScope {
        match value.map(str::trim) {
            Some("all") => StateScope::All,
            Some(name) => StateName::parse(name).map_or(StateScope::Open, StateScope::Only),
            None => StateScope::Open,
        }
    }

    /// The value of the address's `state` parameter (and of the filter's `<option>`).
    pub const fn query_value(self) -> &'static str {
        match self {
            StateScope::Open => "open",
            StateScope::All => "all",
            StateScope::Only(state) => state.as_str(),
        }
    }
}

/// What the routes overview asks for: caller filters and the states to show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RouteQuery {
    pub caller_kind: Option<CallerKind>,
    pub caller_reference: Option<String>,
    pub states: StateScope,
}

impl RouteQuery {
    /// The port's filter.
    #[cfg(feature = "ssr")]
    fn filter(&self) -> policy::api::RouteFilter {
        let (state, open_only) = match self.states {
            StateScope::Open => (None, true),
            StateScope::All => (None, false),
            StateScope::Only(state) => (Some(state), false),
        };
        policy::api::RouteFilter {
            caller_kind: self.caller_kind,
            caller_reference: self.caller_reference.clone(),
            state,
            open_only,
            profile_id: None,
            limit: Some(LIST_LIMIT),
        }
    }
}

/// Routes matching `query`, most recently changed first, at most [`LIST_LIMIT`].
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_routes(query: RouteQuery) -> Result<Vec<RouteSummary>, AppError> {
    Ok(crate::backend::backend()?.list_routes(query.filter()).await?)
}

/// One route with its history (each decision with its policy snapshot) and dispatches.
#[server(prefix = "/api/ui", input = Json)]
pub async fn get_route(id: String) -> Result<RouteDetail, AppError> {
    Ok(crate::backend::backend()?.get_route(id).await?)
}

/// What the agents of the route's recent attempts said and did, oldest attempt first, as far
/// as this server keeps it (README, "What the agent is doing").
#[server(prefix = "/api/ui", input = Json)]
pub async fn get_transcripts(id: String) -> Result<Vec<policy::transcript::AttemptTranscript>, AppError> {
    Ok(crate::backend::backend()?.transcripts(id).await?)
}

/// Retry now, skip now, cancel wait or stop, fenced by `expected_generation`. Answers with the
/// new snapshot, or [`AppError::RouteChanged`] with its current state and generation when the
/// route moved first.
#[server(prefix = "/api/ui", input = Json)]
pub async fn act_on_route(
    route_id: String,
    action: ManualAction,
    expected_generation: u64,
) -> Result<RouteSnapshot, AppError> {
    use policy::api::{ActionOutcome, ManualActionRequest};
    let request = ManualActionRequest {
        action,
        expected_generation,
    };
    match crate::backend::backend()?
        .perform_action(route_id, request)
        .await?
    {
        ActionOutcome::Applied(snapshot) => Ok(snapshot),
        ActionOutcome::Conflict(snapshot) => Err(AppError::RouteChanged {
            state: snapshot.state,
            generation: snapshot.generation,
        }),
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{
        fake::{snapshot, with_backend, Call, FakeBackend},
        profiles::tests::port_errors,
    };
    use policy::api::{ActionOutcome, ManualActionRequest, RouteFilter};

    /// The filter the list sends for `query`, as the port receives it.
    fn sent_filter(query: RouteQuery) -> RouteFilter {
        let fake = FakeBackend::default();
        let listed = with_backend(&fake, list_routes(query));
        // Whatever the filter, the port's answer is shown as the port gave it: in its order,
        // nothing dropped or re-sorted here.
        assert_eq!(listed, Ok(FakeBackend::routes()));
        match fake.calls().as_slice() {
            [Call::ListRoutes(filter)] => filter.clone(),
            other => panic!("expected one list_routes call, got {other:?}"),
        }
    }

    #[test]
    fn the_default_list_asks_the_port_for_open_routes_only_within_the_list_limit() {
        assert_eq!(
            sent_filter(RouteQuery::default()),
            RouteFilter {
                open_only: true,
                limit: Some(LIST_LIMIT),
                ..RouteFilter::default()
            }
        );
    }

    #[test]
    fn the_state_filter_asks_for_every_route_or_exactly_one_state() {
        let all = sent_filter(RouteQuery {
            states: StateScope::All,
            ..RouteQuery::default()
        });
        assert_eq!(
            all,
            RouteFilter {
                limit: Some(LIST_LIMIT),
                ..RouteFilter::default()
            }
        );
        // A finished state is shown when asked for by name: not narrowed to open routes.
        let finished = sent_filter(RouteQuery {
            states: StateScope::Only(StateName::Completed),
            ..RouteQuery::default()
        });
        assert_eq!(
            finished,
            RouteFilter {
                state: Some(StateName::Completed),
                limit: Some(LIST_LIMIT),
                ..RouteFilter::default()
            }
        );
    }

    #[test]
    fn the_caller_filters_reach_the_port_unchanged() {
        let filter = sent_filter(RouteQuery {
            caller_kind: Some(CallerKind::Workflow),
            caller_reference: Some("build-42".into()),
            states: StateScope::Only(StateName::RetryWait),
        });
        assert_eq!(
            filter,
            RouteFilter {
                caller_kind: Some(CallerKind::Workflow),
                caller_reference: Some("build-42".into()),
                state: Some(StateName::RetryWait),
                open_only: false,
                profile_id: None,
                limit: Some(LIST_LIMIT),
            }
        );
    }

    #[test]
    fn a_route_is_read_by_its_id() {
        let fake = FakeBackend::default();
        assert_eq!(
            with_backend(&fake, get_route("r9".into())),
            Ok(FakeBackend::detail())
        );
        assert_eq!(fake.calls(), vec![Call::GetRoute("r9".into())]);
    }

    #[test]
    fn an_action_is_sent_with_the_generation_the_person_saw_and_answers_the_new_snapshot() {
        let applied = snapshot(StateName::ActionRequired, 4);
        let fake = FakeBackend::answering_action(ActionOutcome::Applied(applied.clone()));
        let ok = with_backend(&fake, act_on_route("r1".into(), ManualAction::CancelWait, 3));
        assert_eq!(ok, Ok(applied));
        assert_eq!(
            fake.calls(),
            vec![Call::PerformAction(
                "r1".into(),
                ManualActionRequest {
                    action: ManualAction::CancelWait,
                    expected_generation: 3
                }
            )]
        );
    }

    #[test]
    fn a_stale_generation_answers_with_the_routes_current_state_and_generation() {
        let current = snapshot(StateName::Retrying, 5);
        let fake = FakeBackend::answering_action(ActionOutcome::Conflict(current));
        let err = with_backend(&fake, act_on_route("r1".into(), ManualAction::SkipNow, 2));
        assert_eq!(
            err,
            Err(AppError::RouteChanged {
                state: StateName::Retrying,
                generation: 5
            })
        );
        assert_eq!(
            fake.calls(),
            vec![Call::PerformAction(
                "r1".into(),
                ManualActionRequest {
                    action: ManualAction::SkipNow,
                    expected_generation: 2
                }
            )]
        );
    }

    #[test]
    fn every_port_error_reaches_the_page_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            let each = [
                (
                    "list",
                    with_backend(&fake, list_routes(RouteQuery::default())).map(drop),
                ),
                ("get", with_backend(&fake, get_route("r1".into())).map(drop)),
                (
                    "act",
                    with_backend(&fake, act_on_route("r1".into(), ManualAction::RetryNow, 1)).map(drop),
                ),
            ];
            for (function, result) in each {
                assert_eq!(result, Err(wire.clone()), "{function} after {port:?}");
            }
            assert_eq!(fake.calls().len(), 3, "each function asked the port once");
        }
    }

    #[test]
    fn the_address_keeps_the_state_scope_and_unknown_values_fall_back_to_open() {
        let mut scopes = vec![StateScope::Open, StateScope::All];
        scopes.extend(StateName::ALL.map(StateScope::Only));
        for scope in scopes {
            assert_eq!(StateScope::from_query(Some(scope.query_value())), scope);
        }
        assert_eq!(StateScope::from_query(None), StateScope::Open);
        assert_eq!(StateScope::from_query(Some("")), StateScope::Open);
        assert_eq!(StateScope::from_query(Some("finished-ish")), StateScope::Open);
    }
}
