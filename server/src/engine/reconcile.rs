//! Restart reconciliation: once, at boot, before the scheduler runs and the server serves.
//!
//! - Each dispatcher cleans up what the previous process left (an agent process still running
//!   is stopped: its attempt is ambiguous and must not go on acting).
//! - Waits are re-armed by their timer rows (written with their state); any row that is
//!   missing is restored.
//! - Probe leases of the previous process are given back (their probes are ambiguous), which
//!   makes every held attempt look again.
//! - Every route with an attempt pending or in flight, or switching, gets `Restarted`: a
//!   provably unstarted attempt is begun again (through the gate), switching is evaluated
//!   again, and a started, unsettled attempt goes to `action_required`
//!   (`ambiguous_dispatch`), never repeated. An attempt whose report is already durable (a
//!   scheduled `report` timer) is left to its timer.
//!
//! The routes go to the writer in deliveries of one group commit each, so 100,000 routes take
//! about a second.

use super::{
    writer::{Job, MAX_BATCH},
    Applied, Engine, EngineError, Input,
};
use policy::route::RouteEvent;
use tokio::sync::oneshot;

/// What [`Engine::reconcile`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Waits whose timers are armed.
    pub rearmed: u64,
    /// Routes taken up again without a change of their own: an unstarted attempt begun again,
    /// switching evaluated again (or nothing was left to do).
    pub redispatched: u64,
    /// Started, unsettled attempts sent to `action_required`.
    pub ambiguous: u64,
}

impl Engine {
    /// Applies `Restarted` to every route that needs it, once, at boot. A process that joined
    /// the replicas of its database ([`Engine::join_replicas`]) takes up only what replicas that
    /// are gone left ([`Input::Orphaned`]); the others' routes are theirs.
    pub async fn reconcile(&self) -> Result<ReconcileReport, EngineError> {
        for dispatcher in self.dispatchers.all() {
            dispatcher.reconcile().await;
        }
        let orphans_only = self.store.member().is_some();
        self.release_probe_leases(orphans_only).await?;
        let mut report = ReconcileReport {
            rearmed: self.store.waiting_routes().await?,
            ..ReconcileReport::default()
        };
        let ids = if orphans_only {
            self.store.orphaned_routes(self.now(), u32::MAX).await?
        } else {
            self.store.routes_to_reconcile().await?
        };
        for chunk in ids.chunks(MAX_BATCH) {
            let inputs = chunk
                .iter()
                .map(|id| {
                    let input = if orphans_only {
                        Input::Orphaned
                    } else {
                        Input::Event(RouteEvent::Restarted)
                    };
                    (id.clone(), input)
                })
                .collect();
            for answer in self.submit_all(inputs).await {
                match answer {
                    Ok(Applied {
                        changed: true,
                        snapshot,
                        ..
                    }) => {
                        report.ambiguous += u64::from(
                            snapshot.action_reason == Some(policy::route::ActionReason::AmbiguousDispatch),
                        );
                    }
                    Ok(Applied { changed: false, .. }) => report.redispatched += 1,
                    Err(e) => return Err(e),
                }
            }
        }
        self.wake();
        Ok(report)
    }

    /// Restores missing wait timers and gives back probe leases (only those of routes whose
    /// owner is gone, with `orphans_only`); whether any came back.
    pub(crate) async fn release_probe_leases(&self, orphans_only: bool) -> Result<bool, EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Reconcile { orphans_only, reply }])?;
        answer.await.map_err(|_| EngineError::Task)?
    }
}
