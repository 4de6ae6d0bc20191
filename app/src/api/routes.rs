//! Route server functions: list (filtered), read with history, and the manual actions.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::{
    api::{RouteDetail, RouteFilter, RouteSummary},
    wire::{ManualAction, RouteSnapshot},
};

/// Routes matching `filter`, most recently changed first.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_routes(filter: RouteFilter) -> Result<Vec<RouteSummary>, AppError> {
    Ok(crate::backend::backend()?.list_routes(filter).await?)
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

    #[test]
    fn an_unavailable_store_is_reported_without_detail() {
        let fake = FakeBackend::default();
        let err = with_backend(&fake, get_route("broken".into())).unwrap_err();
        assert_eq!(err, AppError::Unavailable);
    }
}
