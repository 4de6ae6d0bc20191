//! Several replicas on one PostgreSQL database: this process as one of them.
//!
//! - **Membership.** [`Engine::join_replicas`] registers the process under a new instance name
//!   (its replica id and a random suffix) with a lease in database time; [`run`] renews it
//!   every [`Timing::heartbeat`] and retires it at a clean stop.
//! - **Ownership.** Every transition that leaves a route in flight (an attempt pending or
//!   running, or switching) records the committing instance as the route's owner, in the same
//!   compare-and-set. Only the owner launches and watches that attempt.
//! - **Taking up orphans.** Each pass also looks for routes in flight whose owner's lease ran
//!   out and submits [`Input::Orphaned`] to each: with the row locked, an owner still dead means
//!   `Restarted`, exactly as after a restart of a single process (a provably unstarted attempt
//!   is begun again here, a started one goes to `action_required` as ambiguous, never
//!   repeated). Dead owners' probe leases are given back, and the agent processes they left on
//!   this host are stopped.
//! - **A lapsed lease.** A process that was stopped (SIGSTOP) or starved past its lease may
//!   have lost its routes to another replica. When its heartbeat finds the lease lapsed, it
//!   stops everything it was running (their reports would be stale: every report is fenced by
//!   the route's generation anyway) and takes a new lease.

use super::{Engine, EngineError, Input};
use crate::{
    clock::OffsetClock,
    replica::ReplicaId,
    store::{Member, Renewal, Store, StoreError},
};
use std::{future::Future, sync::Arc, time::Duration};

/// How long a lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub lease: Duration,
    pub heartbeat: Duration,
}

impl Timing {
    /// A lease of 10 s renewed every 2 s: a replica that dies is taken over within about 12 s.
    pub const DEFAULT: Timing = Timing {
        lease: Duration::from_secs(10),
        heartbeat: Duration::from_secs(2),
    };

    /// [`Timing::DEFAULT`], or a lease of `RECOURSE_REPLICA_LEASE_MS` milliseconds renewed at a
    /// fifth of it (tests shorten it).
    pub fn from_env() -> Timing {
        match std::env::var("RECOURSE_REPLICA_LEASE_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|ms| *ms >= 100)
        {
            Some(ms) => Timing {
                lease: Duration::from_millis(ms),
                heartbeat: Duration::from_millis(ms / 5),
            },
            None => Timing::DEFAULT,
        }
    }

    fn lease_ms(self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

/// Orphans taken up per pass.
const ORPHANS_PER_PASS: u32 = 512;

impl Engine {
    /// Registers this process as a replica of the database (PostgreSQL): from now on the routes
    /// it leaves in flight are its own.
    pub async fn join_replicas(&self, replica: &ReplicaId, timing: Timing) -> Result<Member, EngineError> {
        let member = Member {
            // The replica id, the time and the process: new at every start.
            instance: crate::store::new_id(replica.as_str(), self.now()),
            replica_id: replica.as_str().to_owned(),
            host: crate::store::this_host(),
        };
        self.store
            .register_replica(
                &member.instance,
                &member.replica_id,
                &member.host,
                timing.lease_ms(),
                self.now(),
            )
            .await?;
        self.store.set_member(member.clone());
        Ok(member)
    }

    /// This replica's instance, once it joined (what `routes.owner` records).
    pub(crate) fn owner(&self) -> Option<String> {
        self.store.member().map(|m| m.instance.clone())
    }

    /// Takes up every orphaned route once; how many were submitted.
    pub async fn take_up_orphans(&self) -> Result<usize, EngineError> {
        let mut total = 0;
        loop {
            let ids = self.store.orphaned_routes(self.now(), ORPHANS_PER_PASS).await?;
            if ids.is_empty() {
                return Ok(total);
            }
            let n = ids.len();
            let inputs = ids.into_iter().map(|id| (id, Input::Orphaned)).collect();
            let mut failed = false;
            for answer in self.submit_all(inputs).await {
                if let Err(e) = answer {
                    tracing::warn!(error = %e, "an orphaned route could not be taken up; next pass");
                    failed = true;
                }
            }
            total += n;
            // Each one taken up is owned now (or no longer in flight); a full pass may have more.
            // One that failed would be found again at once: leave it to the next pass.
            if n < ORPHANS_PER_PASS as usize || failed {
                return Ok(total);
            }
        }
    }
}

/// Measures how far the database's time is from `clock`'s own and sets the offset: the
/// database's `clock_timestamp()` against the midpoint of the round trip.
pub async fn sync_clock_once(store: &Store, clock: &OffsetClock) -> Result<i64, StoreError> {
    let before = clock.base_now();
    let db = store.db_now_ms(before).await?;
    let after = clock.base_now();
    let mid = before.timestamp_millis() + (after.timestamp_millis() - before.timestamp_millis()) / 2;
    let offset = db.saturating_sub(mid);
    let previous = clock.offset_ms();
    clock.set_offset_ms(offset);
    if (offset - previous).abs() > 1_000 {
        tracing::info!(
            offset_ms = offset,
            "this replica runs on the database's time (its own clock is off)"
        );
    }
    Ok(offset)
}

/// Renews this replica's lease and takes up other replicas' orphans until `shutdown`, then
/// retires the replica. With `database_time`, also keeps that clock on the database's time.
pub async fn run(
    engine: Arc<Engine>,
    timing: Timing,
    database_time: Option<Arc<OffsetClock>>,
    shutdown: impl Future<Output = ()>,
) {
    let Some(member) = engine.store.member().cloned() else {
        return;
    };
    tokio::pin!(shutdown);
    let mut every = tokio::time::interval(timing.heartbeat);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            _ = every.tick() => {}
        }
        if let Some(clock) = &database_time {
            if let Err(e) = sync_clock_once(&engine.store, clock).await {
                tracing::warn!(error = %e, "cannot read the database's time");
            }
        }
        match engine
            .store
            .renew_replica(
                &member.instance,
                &member.replica_id,
                &member.host,
                timing.lease_ms(),
                engine.now(),
            )
            .await
        {
            Ok(Renewal::Renewed) => {}
            Ok(Renewal::Lapsed) => {
                tracing::error!(
                    instance = member.instance,
                    "this replica's lease had run out (stopped or starved): other replicas may have taken \
                     its routes up; stopping every attempt it was running"
                );
                engine.metrics().lease_lapsed();
                for dispatcher in engine.dispatchers.all() {
                    dispatcher.cancel_all();
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew this replica's lease");
                continue;
            }
        }
        if let Err(e) = sweep(&engine).await {
            tracing::warn!(error = %e, "cannot take up other replicas' orphaned routes");
        }
    }
    if let Err(e) = engine.store.retire_replica(&member.instance).await {
        tracing::warn!(error = %e, "cannot retire this replica");
    }
}

/// One pass over what dead replicas left.
async fn sweep(engine: &Engine) -> Result<(), EngineError> {
    for dispatcher in engine.dispatchers.all() {
        dispatcher.reconcile().await;
    }
    engine.release_probe_leases(true).await?;
    let taken = engine.take_up_orphans().await?;
    if taken > 0 {
        tracing::warn!(routes = taken, "took up routes whose replica is gone");
        engine.metrics().orphans_taken(taken);
    }
    // Rows of replicas dead for a minute are no longer needed to judge anything.
    engine.store.forget_dead_replicas(60_000, engine.now()).await?;
    engine.wake();
    Ok(())
}
