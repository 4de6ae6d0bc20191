//! The dispatcher of attempts another system runs (`external`): nothing starts here; the
//! runner reports success or an evidence envelope over the API for the attempt's invocation
//! generation. The `acp` kind uses it too until Recourse runs it itself.

use super::{DispatchError, DispatchFuture, Dispatcher, LaunchRequest, Launched};

pub(crate) struct Awaiting;

impl Dispatcher for Awaiting {
    fn launch(&self, request: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>> {
        Box::pin(async move {
            tracing::info!(
                route_id = request.route_id,
                attempt = request.attempt,
                dispatcher = %request.target.dispatcher,
                "dispatched; waiting for a report"
            );
            Ok(None)
        })
    }
}
