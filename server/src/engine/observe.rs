//! What a writer transaction tells the operator once it has committed: one log line per route
//! transition (with `route_id` and `generation`, and the states and event) and the metrics
//! (`crate::metrics`: transitions by the state entered, settled dispatches by outcome and
//! classification, expired leases, timer lateness), and the notification delivery worker is
//! woken when the transaction queued events in the outbox.
//!
//! The steps note what they did in [`Observed`], part of the transaction's [`super::pending::Pending`];
//! the writer hands it to [`Engine::observe`] only after the commit succeeded and before any
//! answer goes out. A rolled-back group observes nothing (its jobs run again alone and are
//! observed then), so every count and every line is a committed fact, and a caller that has
//! its answer finds it already counted.

use super::Engine;
use crate::metrics::FailureCause;
use chrono::{DateTime, Utc};
use policy::{
    api::DispatchOutcome,
    route::{EventKind, RouteState, StateName},
};

/// What one transaction did, for the log and the metrics.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    transitions: Vec<Seen>,
    /// Seconds each fired timer was late.
    lateness: Vec<f64>,
    /// Notification events queued in the outbox (the delivery worker is woken for them).
    notifications: usize,
}

/// One route transition.
#[derive(Debug)]
struct Seen {
    route_id: String,
    generation: u64,
    from: Option<StateName>,
    to: StateName,
    event: EventKind,
    /// The dispatch record the step settled, with the failure's classification.
    settled: Option<(DispatchOutcome, Option<FailureCause>)>,
}

impl Observed {
    /// A transition from `prev` (`None`: the route's start) to `next`.
    pub(crate) fn transition(
        &mut self,
        route_id: &str,
        prev: Option<&RouteState>,
        next: &RouteState,
        event: EventKind,
        settled: Option<(DispatchOutcome, Option<FailureCause>)>,
    ) {
        self.transitions.push(Seen {
            route_id: route_id.to_owned(),
            generation: next.generation(),
            from: prev.map(RouteState::state_name),
            to: next.state_name(),
            event,
            settled,
        });
    }

    /// `n` notification events queued in the outbox.
    pub(crate) fn notified(&mut self, n: usize) {
        self.notifications += n;
    }

    /// A timer due at `due` fired in a transaction at `now`.
    pub(crate) fn timer_fired(&mut self, due: DateTime<Utc>, now: DateTime<Utc>) {
        // Milliseconds are what the timers table keeps.
        #[allow(clippy::cast_precision_loss)]
        let seconds = (now - due).num_milliseconds() as f64 / 1000.0;
        self.lateness.push(seconds);
    }
}

impl Engine {
    /// Logs and counts what a committed transaction did.
    pub(super) fn observe(&self, observed: &Observed) {
        let metrics = &self.metrics;
        for t in &observed.transitions {
            tracing::info!(
                route_id = %t.route_id,
                generation = t.generation,
                from = t.from.map(StateName::as_str),
                to = t.to.as_str(),
                event = t.event.as_str(),
                "route transition"
            );
            metrics.transition(t.to);
            if t.event == EventKind::LeaseExpired {
                metrics.lease_expired();
            }
            if let Some((outcome, cause)) = t.settled {
                metrics.dispatch_settled(outcome, cause);
            }
        }
        for seconds in &observed.lateness {
            metrics.timer_fired(*seconds);
        }
        if observed.notifications > 0 {
            self.outbox_signal().notify_one();
        }
    }
}
