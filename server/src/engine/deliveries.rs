//! The notification delivery worker's writes (`crate::notify::worker`): its settlements and its
//! next claim, as one job of the writer task.
//!
//! Why through the writer: every commit pays an `fsync` (`db.rs`), and a worker committing
//! each claim and each settlement on its own added several commits per event to the one
//! writer SQLite has, so a profile telling three channels moved its routes at half the speed
//! of one telling none. As a writer job, the worker's statements join the group commit of the
//! route steps queued beside them: what it settles and claims while routes move costs a few
//! statements, not commits. Alone (nothing else queued) it is one transaction, as before.

pub use super::writer::{DeliveryClaim, DeliveryWrites};
use super::{writer::Job, Engine, EngineError};
use crate::store::notify::Settlement;
use tokio::sync::oneshot;

impl Engine {
    /// Writes `settle` (in order), then leases what `claim` asks for, in one transaction (the
    /// claim sees the settlements: a route's next event for a channel is claimable as soon as
    /// the one before it is settled).
    pub async fn write_deliveries(
        &self,
        settle: Vec<Settlement>,
        claim: Option<DeliveryClaim>,
    ) -> Result<DeliveryWrites, EngineError> {
        let (reply, answer) = oneshot::channel();
        self.enqueue(vec![Job::Deliveries { settle, claim, reply }])?;
        answer.await.map_err(|_| EngineError::Task)?
    }
}
