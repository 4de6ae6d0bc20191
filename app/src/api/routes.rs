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

/// Retry now, skip now, cancel wait or stop, fenced by `expected_generation`. Answers with the
/// new snapshot, or [`AppError::RouteChanged`] with the current one when the route moved first.
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
            snapshot: Box::new(snapshot),
        }),
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::fake::{with_backend, FakeBackend};
    use policy::wire::StateName;

    #[test]
    fn a_stale_generation_answers_with_the_fresh_snapshot() {
        let fake = FakeBackend::default();
        let ok = with_backend(&fake, act_on_route("r1".into(), ManualAction::CancelWait, 3)).unwrap();
        assert_eq!(ok.generation, 4);
        let err = with_backend(&fake, act_on_route("r1".into(), ManualAction::CancelWait, 2)).unwrap_err();
        match err {
            AppError::RouteChanged { snapshot } => {
                assert_eq!(snapshot.generation, 3);
                assert_eq!(snapshot.state, StateName::RetryWait);
            }
            other => panic!("expected RouteChanged, got {other:?}"),
        }
        assert_eq!(
            fake.calls(),
            vec![
                "perform_action r1 cancel_wait 3",
                "perform_action r1 cancel_wait 2"
            ]
        );
    }

    fn ids(list: Vec<RouteSummary>) -> Vec<String> {
        list.into_iter().map(|r| r.id).collect()
    }

    #[test]
    fn the_default_list_shows_every_open_route_most_recent_first_and_no_finished_one() {
        let fake = FakeBackend::with_routes(&[
            ("done", StateName::Completed, 50),
            ("waiting", StateName::RetryWait, 40),
            ("healthy", StateName::Active, 30),
            ("gone", StateName::Abandoned, 60),
            ("stopped", StateName::ActionRequired, 45),
        ]);
        let open = with_backend(&fake, list_routes(RouteQuery::default())).unwrap();
        assert_eq!(ids(open), ["stopped", "waiting", "healthy"]);
        // One read, for the open routes, with the list's limit.
        assert_eq!(fake.calls(), [format!("list_routes open limit {LIST_LIMIT}")]);
    }

    #[test]
    fn the_state_filter_can_still_show_all_routes_or_exactly_one_state() {
        let fake = FakeBackend::with_routes(&[
            ("done", StateName::Completed, 50),
            ("waiting", StateName::RetryWait, 40),
        ]);
        let all = RouteQuery {
            states: StateScope::All,
            ..RouteQuery::default()
        };
        assert_eq!(
            ids(with_backend(&fake, list_routes(all)).unwrap()),
            ["done", "waiting"]
        );
        let finished = RouteQuery {
            states: StateScope::Only(StateName::Completed),
            ..RouteQuery::default()
        };
        assert_eq!(ids(with_backend(&fake, list_routes(finished)).unwrap()), ["done"]);
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

    #[test]
    fn an_unavailable_store_is_reported_without_detail() {
        let fake = FakeBackend::default();
        let err = with_backend(&fake, get_route("broken".into())).unwrap_err();
        assert_eq!(err, AppError::Unavailable);
    }
}
