//! External runners (the `external` dispatcher): another system runs the agent and leases the
//! attempt from Recourse.
//!
//! The protocol: a runner claims the oldest started `external` attempt nobody holds and gets a
//! lease with the attempt's work; it acknowledges the lease when it starts the work (from then
//! on the attempt may have run), heartbeats to keep it, and reports success or an evidence
//! envelope with its lease. A claim that is never acknowledged lapses and the attempt is offered
//! again (nothing ran). An acknowledged lease that runs out without a report makes the attempt
//! ambiguous: `action_required`, never dispatched again automatically. A runner whose lease is
//! gone (lapsed, ran out, or the route moved on) is told so on every call and must stop.
//!
//! Across a restart of Recourse: an attempt nobody claimed is simply offered again; an
//! acknowledged one keeps its lease (the runner may still report) until it runs out.
//!
//! A route whose caller runs its attempts itself (`editor`: `recourse acp`, where the editor's
//! files are) is leased whatever its candidates' dispatchers: its attempts are recorded as
//! `external`, the server starts nothing for them, and only a claim limited to that route
//! ([`Engine::claim_route`]) takes them, never the general claim. The lease then works as
//! above: an acknowledged attempt whose runner is gone (killed with the editor) runs out and
//! stops for a person as ambiguous.

use super::{dispatch::Report, tx::LeaseOp, writer::Job, Applied, Engine, EngineError};
use crate::store::Lease;
use tokio::sync::oneshot;

impl Engine {
    /// Claims the oldest started `external` attempt nobody holds for `runner`, for `seconds`.
    /// `acknowledge`: the runner starts the work at once (the claim is its acknowledgement).
    pub(crate) async fn claim(
        &self,
        runner: &str,
        seconds: u64,
        acknowledge: bool,
    ) -> Result<Option<Lease>, EngineError> {
        self.accepting()?;
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Claim {
            runner: runner.to_owned(),
            seconds,
            route: None,
            acknowledge,
            reply,
        }])?;
        let lease = answer.await.map_err(|_| EngineError::Task)??;
        if acknowledge && lease.is_some() {
            // A lease timer was armed.
            self.wake();
        }
        Ok(lease)
    }

    /// Claims the started attempt of `route_id` for `runner`, for `seconds`, when the route's
    /// caller runs its attempts itself and nobody holds it (`None` otherwise).
    pub(crate) async fn claim_route(
        &self,
        route_id: &str,
        runner: &str,
        seconds: u64,
        acknowledge: bool,
    ) -> Result<Option<Lease>, EngineError> {
        self.accepting()?;
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Claim {
            runner: runner.to_owned(),
            seconds,
            route: Some(route_id.to_owned()),
            acknowledge,
            reply,
        }])?;
        let lease = answer.await.map_err(|_| EngineError::Task)??;
        if acknowledge && lease.is_some() {
            self.wake();
        }
        Ok(lease)
    }

    /// Acknowledges (`ack`) or renews a lease for `seconds` more; `None` when it is not the
    /// runner's any more.
    pub(crate) async fn renew_lease(
        &self,
        route_id: &str,
        attempt: u32,
        lease_id: &str,
        seconds: u64,
        ack: bool,
    ) -> Result<Option<Lease>, EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Lease {
            route_id: route_id.to_owned(),
            op: LeaseOp {
                attempt,
                lease_id: lease_id.to_owned(),
                seconds,
                ack,
            },
            reply,
        }])?;
        let renewed = answer.await.map_err(|_| EngineError::Task)??;
        if renewed.is_some() {
            // The lease timer moved: the scheduler may need to look later, or sooner.
            self.wake();
        }
        Ok(renewed)
    }

    /// A runner's report for the attempt it holds: checked against its lease (`None` when the
    /// lease is not the runner's any more), then applied like any report, fenced by the
    /// attempt's generation.
    pub(crate) async fn report_leased(
        &self,
        route_id: &str,
        attempt: u32,
        lease_id: &str,
        report: Report,
    ) -> Result<Option<Applied>, EngineError> {
        let lease = self.store.lease(route_id).await?;
        let Some(lease) = lease.filter(|l| l.lease_id == lease_id && l.attempt == attempt && l.acked) else {
            return Ok(None);
        };
        if lease.expires <= self.now() {
            return Ok(None);
        }
        self.submit(route_id, report.into_input(lease.generation))
            .await
            .map(Some)
    }
}
