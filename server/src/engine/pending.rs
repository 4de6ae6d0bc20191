//! What one writer transaction has read and what it has queued to write: the read/write cache
//! a transaction shares among its jobs.
//!
//! Why a cache: sqlx runs each statement on the connection's own thread, and the two thread
//! hand-offs per statement, not SQLite's work, were most of a step's cost. So a group reads all
//! its routes with one statement and sends all its writes in one round trip just before it
//! commits; writes are sent early only when a read must see them (before the circuits are read,
//! and before a new route's invocation is checked).
//!
//! The cached routes stay true because the writer holds SQLite's write lock for the whole
//! transaction: nothing else can change them, and each step this transaction queues is applied
//! to the cached row too. The compare-and-sets are still sent: each returns a tagged row when
//! it wins, and a flush that counts fewer wins than it queued fails (the transaction is rolled
//! back), so the generation fence is checked by SQLite, not only assumed.

use super::EngineError;
use crate::config::RunnerConfig;
use crate::store::{RouteRow, Tx, Writes};
use chrono::{DateTime, Utc};
use policy::{
    api::{CircuitView, Profile},
    route::RouteState,
};
use std::{collections::HashMap, sync::Arc};

/// What one writer transaction has read and what it has queued to write. A group commit shares
/// one for all its jobs; a job run alone has its own.
#[derive(Default)]
pub(crate) struct Pending {
    /// The server configuration as this transaction sees it (which runners exist).
    pub(crate) config: Arc<RunnerConfig>,
    pub(crate) writes: Writes,
    /// A flush gave back a probe lease and released the holds: wake the scheduler after the
    /// commit.
    pub(crate) released: bool,
    /// What the jobs did, for the log and the metrics once the transaction commits.
    pub(crate) observed: super::observe::Observed,
    /// Routes (and their profiles) read or written in this transaction, by id.
    routes: HashMap<String, (RouteRow, Option<Profile>)>,
    /// The circuits that are not closed, read at most once between two circuit writes; `None`
    /// until read or after a circuit write.
    circuits: Option<HashMap<String, CircuitView>>,
}

impl Pending {
    /// A transaction whose routes in flight will belong to `owner` (this replica's instance).
    pub(crate) fn new(config: Arc<RunnerConfig>, owner: Option<String>) -> Pending {
        Pending {
            config,
            writes: Writes::owned_by(owner),
            ..Pending::default()
        }
    }

    /// Reads the routes of `ids` (and their profiles) with one statement.
    pub(crate) async fn preload(&mut self, tx: &mut Tx<'_>, ids: &[&str]) -> Result<(), EngineError> {
        let ids: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !self.routes.contains_key(*id))
            .collect();
        for (route, profile) in tx.routes_and_profiles(&ids).await? {
            self.routes.insert(route.id.clone(), (route, profile));
        }
        Ok(())
    }

    /// A route and its profile as this transaction sees them.
    pub(super) async fn route(
        &mut self,
        tx: &mut Tx<'_>,
        route_id: &str,
    ) -> Result<Option<(RouteRow, Option<Profile>)>, EngineError> {
        if !self.routes.contains_key(route_id) {
            self.preload(tx, &[route_id]).await?;
        }
        Ok(self.routes.get(route_id).cloned())
    }

    /// A route and its profile; a missing one of either is an error.
    pub(crate) async fn route_and_profile(
        &mut self,
        tx: &mut Tx<'_>,
        route_id: &str,
    ) -> Result<(RouteRow, Profile), EngineError> {
        let (route, profile) = self
            .route(tx, route_id)
            .await?
            .ok_or_else(|| EngineError::RouteNotFound(route_id.to_owned()))?;
        let profile = profile.ok_or_else(|| EngineError::ProfileNotFound(route.profile_id.clone()))?;
        Ok((route, profile))
    }

    /// The outbox's one entry: queues, beside the transition's own writes, the notifications
    /// `change` causes under its profile's rules (`crate::engine::outbox::queue`), and notes
    /// them so the delivery worker is woken once the transaction commits.
    pub(crate) fn tell(&mut self, change: &crate::engine::outbox::Change<'_>) {
        let told = crate::engine::outbox::queue(&mut self.writes, &self.config.notify, change);
        self.observed.notified(told);
    }

    /// Queues the compare-and-set and applies it to the cached row.
    pub(super) fn cas_route(&mut self, id: &str, expected: u64, next: &RouteState, now: DateTime<Utc>) {
        self.writes.cas_route(id, expected, next, now);
        if let Some((row, _)) = self.routes.get_mut(id) {
            row.state = next.clone();
            row.durable_error = None;
            row.updated_at = now;
        }
    }

    /// Queues a new route's row and caches it.
    pub(super) fn insert_route(&mut self, route: &RouteRow, profile: &Profile) {
        self.writes.insert_route(route);
        self.routes
            .insert(route.id.clone(), (route.clone(), Some(profile.clone())));
    }

    /// Queues giving back the route's probe leases, unless the circuits read in this
    /// transaction show it holds none.
    pub(super) fn release_probe_leases(&mut self, route_id: &str, now: DateTime<Utc>) {
        let holds_none = self.circuits.as_ref().is_some_and(|c| {
            c.values()
                .all(|row| row.probe_route_id.as_deref() != Some(route_id))
        });
        if !holds_none {
            self.writes.release_probe_leases(route_id, now);
            self.circuits = None;
        }
    }

    /// The circuits of `keys` that are not closed, as this transaction sees them.
    pub(crate) async fn circuits(
        &mut self,
        tx: &mut Tx<'_>,
        keys: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<CircuitView>, EngineError> {
        if self.circuits.is_none() {
            self.flush(tx, now).await?;
            self.circuits = Some(tx.open_circuits().await?);
        }
        let open = self.circuits.as_ref();
        Ok(keys
            .iter()
            .filter_map(|k| open.and_then(|c| c.get(k)).cloned())
            .collect())
    }

    /// Sends the queued writes first, then forgets the circuits: the caller is about to write
    /// one directly.
    pub(crate) async fn before_circuit_write(
        &mut self,
        tx: &mut Tx<'_>,
        now: DateTime<Utc>,
    ) -> Result<(), EngineError> {
        self.flush(tx, now).await?;
        self.circuits = None;
        Ok(())
    }

    /// Sends the queued writes in one round trip and checks every compare-and-set won.
    pub(crate) async fn flush(&mut self, tx: &mut Tx<'_>, now: DateTime<Utc>) -> Result<(), EngineError> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let next = self.writes.successor();
        let writes = std::mem::replace(&mut self.writes, next);
        let expected = writes.cas_count();
        let returned = tx.run(writes).await?;
        if returned.cas_won != expected {
            return Err(EngineError::Conflict(format!(
                "{} of {expected} route compare-and-sets lost to another writer; nothing was written",
                expected - returned.cas_won.min(expected)
            )));
        }
        if returned.leases_released > 0 {
            tx.release_holds(now).await?;
            self.released = true;
        }
        Ok(())
    }
}
