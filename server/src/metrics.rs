//! The Prometheus metrics of one server, rendered by `GET /metrics` ([`crate::ops`]).
//!
//! Each engine builds its own [`PrometheusRecorder`] and registers its handles through the
//! `metrics::Recorder` trait; nothing is installed as the process's global recorder, so the
//! tests' many servers in one process never share a count. Recording is an atomic add on a
//! handle registered up front (a transition, a fired timer, a settled dispatch), so the writer
//! pays no lookup or allocation for it; the one exception is a dispatch outcome outside the
//! registered label sets, which cannot happen by construction but would be registered rather
//! than lost.
//!
//! What is counted, and where it is observed:
//! - [`TRANSITIONS`] `{state}`: route transitions committed, by the state entered (the writer,
//!   after the commit, `engine/observe.rs`).
//! - [`TIMER_LATENESS`]: seconds from a timer's due time to the transaction that fired it, on
//!   the injected clock (a histogram with [`LATENESS_BUCKETS`]).
//! - [`DUE_TIMERS`]: timers due and not yet fired, sampled when `/metrics` is scraped.
//! - [`LEASES_EXPIRED`]: external runners' acknowledged leases that ran out (the attempt became
//!   ambiguous).
//! - [`DISPATCH_OUTCOMES`] `{outcome, class, code}`: settled dispatch records; a failure carries
//!   its classification's class and semantic code (the catalogue's bounded set, `unclassified`
//!   when there is none), every other outcome `none`.
//! - [`SSE_CLIENTS`]: event streams open now.
//! - [`REPLICA_INFO`] `{replica_id}`: always 1.
//! - [`ORPHANS_TAKEN`]: routes in flight this replica took up because their replica's lease ran
//!   out (PostgreSQL with several replicas, `engine/replicas.rs`).
//! - [`CLAIMS_LOST`]: due timers this replica found another replica firing (their rows locked
//!   by its transaction: `SKIP LOCKED`), and left to it.
//! - [`LEASE_LAPSED`]: times this replica found its own lease run out (it was stopped or
//!   starved) and stopped what it was running.
//! - [`NOTIFICATIONS`] `{outcome}`: notification delivery attempts by this replica:
//!   `delivered`, `failed` (tried again later) or `dead` (the last attempt failed).
//! - [`NOTIFICATION_DELAY`]: seconds from an event's commit to its receiver's acceptance
//!   (buckets [`LATENESS_BUCKETS`]).
//! - [`NOTIFICATION_DELIVERIES`] `{status}`: deliveries `pending` and `dead`, counted when
//!   `/metrics` is scraped.
//! - [`NOTIFICATION_EVENTS_REMOVED`]: notification events this replica removed, with their
//!   deliveries, once past `[notify] keep_days` with nothing left to send.

use crate::replica::ReplicaId;
use ::metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Level, Metadata, Recorder, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use policy::{api::DispatchOutcome, class::SemanticCode, classification::ClassState, route::StateName};

pub const TRANSITIONS: &str = "recourse_transitions_total";
pub const TIMER_LATENESS: &str = "recourse_timer_lateness_seconds";
pub const DUE_TIMERS: &str = "recourse_due_timers";
pub const LEASES_EXPIRED: &str = "recourse_leases_expired_total";
pub const DISPATCH_OUTCOMES: &str = "recourse_dispatch_outcomes_total";
pub const SSE_CLIENTS: &str = "recourse_sse_clients";
pub const REPLICA_INFO: &str = "recourse_replica_info";
pub const ORPHANS_TAKEN: &str = "recourse_orphans_taken_total";
pub const LEASE_LAPSED: &str = "recourse_replica_lease_lapsed_total";
pub const CLAIMS_LOST: &str = "recourse_timer_claims_lost_total";
pub const NOTIFICATIONS: &str = "recourse_notifications_total";
pub const NOTIFICATION_DELAY: &str = "recourse_notification_delay_seconds";
pub const NOTIFICATION_DELIVERIES: &str = "recourse_notification_deliveries";
pub const NOTIFICATION_EVENTS_REMOVED: &str = "recourse_notification_events_removed_total";

/// Upper bounds of the lateness histogram's buckets, in seconds: a healthy scheduler fires in
/// milliseconds; seconds mean a busy writer; minutes, a stalled one.
pub const LATENESS_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The label values of a settled dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct OutcomeLabels {
    outcome: &'static str,
    class: &'static str,
    code: &'static str,
}

/// The classification a failed dispatch was settled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureCause {
    pub class: ClassState,
    pub code: Option<SemanticCode>,
}

/// One server's metrics. Shared by the engine and the HTTP handlers.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// By [`StateName::ALL`]'s order.
    transitions: [Counter; StateName::ALL.len()],
    lateness: Histogram,
    due_timers: Gauge,
    leases_expired: Counter,
    outcomes: Vec<(OutcomeLabels, Counter)>,
    sse_clients: Gauge,
    orphans_taken: Counter,
    lease_lapsed: Counter,
    claims_lost: Counter,
    /// Delivered, failed, dead.
    notifications: [Counter; 3],
    notification_delay: Histogram,
    /// Pending, dead.
    deliveries: [Gauge; 2],
    events_removed: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

const METADATA: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

impl Metrics {
    /// Every metric registered (at zero) on a recorder of its own; `replica` names the process.
    pub fn new(replica: &ReplicaId) -> Metrics {
        // The buckets are a non-empty constant, so this cannot fail; were it to, the lateness
        // would still be exported (as a summary).
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(TIMER_LATENESS.to_owned()), &LATENESS_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(NOTIFICATION_DELAY.to_owned()), &LATENESS_BUCKETS)
            })
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .build_recorder();
        describe(&recorder);
        let counter = |name: &'static str, labels: Vec<Label>| {
            recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
        };
        let transitions = StateName::ALL.map(|s| counter(TRANSITIONS, vec![Label::new("state", s.as_str())]));
        let mut outcomes = Vec::new();
        for labels in outcome_label_sets() {
            let c = counter(DISPATCH_OUTCOMES, labels.to_vec());
            outcomes.push((labels, c));
        }
        let info = recorder.register_gauge(
            &Key::from_parts(
                REPLICA_INFO,
                vec![Label::new("replica_id", replica.as_str().to_owned())],
            ),
            &METADATA,
        );
        info.set(1.0);
        let metrics = Metrics {
            transitions,
            lateness: recorder.register_histogram(&Key::from_static_name(TIMER_LATENESS), &METADATA),
            due_timers: recorder.register_gauge(&Key::from_static_name(DUE_TIMERS), &METADATA),
            leases_expired: counter(LEASES_EXPIRED, Vec::new()),
            outcomes,
            sse_clients: recorder.register_gauge(&Key::from_static_name(SSE_CLIENTS), &METADATA),
            orphans_taken: counter(ORPHANS_TAKEN, Vec::new()),
            lease_lapsed: counter(LEASE_LAPSED, Vec::new()),
            claims_lost: counter(CLAIMS_LOST, Vec::new()),
            notifications: ["delivered", "failed", "dead"]
                .map(|outcome| counter(NOTIFICATIONS, vec![Label::new("outcome", outcome)])),
            notification_delay: recorder
                .register_histogram(&Key::from_static_name(NOTIFICATION_DELAY), &METADATA),
            deliveries: ["pending", "dead"].map(|status| {
                recorder.register_gauge(
                    &Key::from_parts(NOTIFICATION_DELIVERIES, vec![Label::new("status", status)]),
                    &METADATA,
                )
            }),
            events_removed: counter(NOTIFICATION_EVENTS_REMOVED, Vec::new()),
            handle: recorder.handle(),
            recorder,
        };
        metrics.due_timers.set(0.0);
        metrics.sse_clients.set(0.0);
        for g in &metrics.deliveries {
            g.set(0.0);
        }
        metrics
    }

    /// A committed transition into `entered`.
    pub fn transition(&self, entered: StateName) {
        if let Some(i) = StateName::ALL.iter().position(|s| *s == entered) {
            self.transitions[i].increment(1);
        }
    }

    /// A timer fired `seconds` after it was due.
    pub fn timer_fired(&self, seconds: f64) {
        self.lateness.record(seconds.max(0.0));
    }

    /// An acknowledged lease ran out.
    pub fn lease_expired(&self) {
        self.leases_expired.increment(1);
    }

    /// `n` routes of dead replicas taken up.
    pub fn orphans_taken(&self, n: usize) {
        self.orphans_taken.increment(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// `n` due timers left to the replica that was firing them.
    pub fn claims_lost(&self, n: usize) {
        self.claims_lost.increment(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// This replica's own lease was found run out.
    pub fn lease_lapsed(&self) {
        self.lease_lapsed.increment(1);
    }

    /// A dispatch record settled with `outcome` (a failure with its classification).
    pub fn dispatch_settled(&self, outcome: DispatchOutcome, cause: Option<FailureCause>) {
        let labels = outcome_labels(outcome, cause);
        match self.outcomes.iter().find(|(l, _)| *l == labels) {
            Some((_, c)) => c.increment(1),
            None => self
                .recorder
                .register_counter(&Key::from_parts(DISPATCH_OUTCOMES, labels.to_vec()), &METADATA)
                .increment(1),
        }
    }

    /// A notification reached its receiver `seconds` after its event was committed.
    pub fn notification_delivered(&self, seconds: f64) {
        self.notifications[0].increment(1);
        self.notification_delay.record(seconds.max(0.0));
    }

    /// A notification attempt failed; it is tried again later.
    pub fn notification_failed(&self) {
        self.notifications[1].increment(1);
    }

    /// A notification's last attempt failed: the delivery is dead.
    pub fn notification_dead(&self) {
        self.notifications[2].increment(1);
    }

    /// `n` notification events were removed past their retention, with their deliveries.
    pub fn notification_events_removed(&self, n: u64) {
        self.events_removed.increment(n);
    }

    /// Notification deliveries pending and dead, as just counted.
    pub fn set_deliveries(&self, pending: u64, dead: u64) {
        // Exact up to 2^53 deliveries.
        #[allow(clippy::cast_precision_loss)]
        {
            self.deliveries[0].set(pending as f64);
            self.deliveries[1].set(dead as f64);
        }
    }

    /// Timers due and not yet fired, as just counted.
    pub fn set_due_timers(&self, count: u64) {
        // Exact up to 2^53 timers.
        #[allow(clippy::cast_precision_loss)]
        self.due_timers.set(count as f64);
    }

    /// One more open event stream, until the guard is dropped.
    pub fn sse_client(&self) -> SseClient {
        self.sse_clients.increment(1.0);
        SseClient {
            gauge: self.sse_clients.clone(),
        }
    }

    /// The Prometheus text exposition of everything above.
    pub fn render(&self) -> String {
        self.handle.render()
    }

    /// Folds recorded histogram samples into their buckets, so memory stays flat between
    /// scrapes (a scrape does it too). `serve` calls it every few seconds.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }
}

/// An open event stream, counted in [`SSE_CLIENTS`] while it lives.
#[derive(Debug)]
pub struct SseClient {
    gauge: Gauge,
}

impl Drop for SseClient {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

impl OutcomeLabels {
    fn to_vec(self) -> Vec<Label> {
        vec![
            Label::new("outcome", self.outcome),
            Label::new("class", self.class),
            Label::new("code", self.code),
        ]
    }
}

fn outcome_labels(outcome: DispatchOutcome, cause: Option<FailureCause>) -> OutcomeLabels {
    let (class, code) = match (outcome, cause) {
        (DispatchOutcome::Failed, Some(c)) => (
            class_str(c.class),
            c.code.map_or("unclassified", SemanticCode::as_str),
        ),
        (DispatchOutcome::Failed, None) => ("unclassified", "unclassified"),
        _ => ("none", "none"),
    };
    OutcomeLabels {
        outcome: crate::store::outcome_str(outcome),
        class,
        code,
    }
}

/// Every label set a dispatch can settle with: each code with its class, unclassified, and
/// the outcomes that carry no classification.
fn outcome_label_sets() -> Vec<OutcomeLabels> {
    let mut out: Vec<OutcomeLabels> = SemanticCode::ALL
        .into_iter()
        .map(|code| {
            let cause = FailureCause {
                class: code.class().into(),
                code: Some(code),
            };
            outcome_labels(DispatchOutcome::Failed, Some(cause))
        })
        .collect();
    out.push(outcome_labels(DispatchOutcome::Failed, None));
    for outcome in [
        DispatchOutcome::Succeeded,
        DispatchOutcome::Aborted,
        DispatchOutcome::Superseded,
        DispatchOutcome::Ambiguous,
    ] {
        out.push(outcome_labels(outcome, None));
    }
    out
}

const fn class_str(class: ClassState) -> &'static str {
    match class {
        ClassState::Transient => "transient",
        ClassState::Hard => "hard",
        ClassState::Unclassified => "unclassified",
    }
}

fn describe(recorder: &PrometheusRecorder) {
    let name = KeyName::from_const_str;
    recorder.describe_counter(
        name(TRANSITIONS),
        None,
        "Route transitions committed, by the state entered.".into(),
    );
    recorder.describe_histogram(
        name(TIMER_LATENESS),
        Some(Unit::Seconds),
        "Seconds from a timer's due time to the transaction that fired it.".into(),
    );
    recorder.describe_gauge(
        name(DUE_TIMERS),
        None,
        "Timers due and not yet fired, when scraped.".into(),
    );
    recorder.describe_counter(
        name(LEASES_EXPIRED),
        None,
        "External runners' acknowledged leases that ran out (the attempt became ambiguous).".into(),
    );
    recorder.describe_counter(
        name(DISPATCH_OUTCOMES),
        None,
        "Settled dispatches by outcome; failures by their classification's class and code.".into(),
    );
    recorder.describe_gauge(name(SSE_CLIENTS), None, "Event streams open now.".into());
    recorder.describe_counter(
        name(ORPHANS_TAKEN),
        None,
        "Routes in flight taken up because their replica's lease ran out.".into(),
    );
    recorder.describe_counter(
        name(CLAIMS_LOST),
        None,
        "Due timers left to another replica that was firing them.".into(),
    );
    recorder.describe_counter(
        name(LEASE_LAPSED),
        None,
        "Times this replica found its own lease run out and stopped what it ran.".into(),
    );
    recorder.describe_counter(
        name(NOTIFICATIONS),
        None,
        "Notification delivery attempts: delivered, failed (tried again later), dead (the last one failed)."
            .into(),
    );
    recorder.describe_histogram(
        name(NOTIFICATION_DELAY),
        Some(Unit::Seconds),
        "Seconds from a notification event's commit to its receiver's acceptance.".into(),
    );
    recorder.describe_gauge(
        name(NOTIFICATION_DELIVERIES),
        None,
        "Notification deliveries pending and dead, when scraped.".into(),
    );
    recorder.describe_counter(
        name(NOTIFICATION_EVENTS_REMOVED),
        None,
        "Notification events removed with their deliveries, past the retention with nothing left to send."
            .into(),
    );
    recorder.describe_gauge(
        name(REPLICA_INFO),
        None,
        "This process's replica id (always 1).".into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Metrics {
        Metrics::new(&"test-1".parse().unwrap())
    }

    #[test]
    fn every_metric_is_exported_at_zero_before_anything_happens() {
        let text = metrics().render();
        for line in [
            "recourse_transitions_total{state=\"retry_wait\"} 0",
            "recourse_due_timers 0",
            "recourse_leases_expired_total 0",
            "recourse_dispatch_outcomes_total{outcome=\"failed\",class=\"transient\",code=\"rate_limited\"} 0",
            "recourse_dispatch_outcomes_total{outcome=\"succeeded\",class=\"none\",code=\"none\"} 0",
            "recourse_sse_clients 0",
            "recourse_replica_info{replica_id=\"test-1\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
        assert!(
            text.contains("# TYPE recourse_transitions_total counter"),
            "{text}"
        );
    }

    #[test]
    fn lateness_is_a_histogram_with_buckets_and_negative_lateness_counts_as_none() {
        let m = metrics();
        m.timer_fired(2.0);
        m.timer_fired(-1.0);
        let text = m.render();
        assert!(
            text.contains("# TYPE recourse_timer_lateness_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("recourse_timer_lateness_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("recourse_timer_lateness_seconds_bucket{le=\"2.5\"} 2"),
            "{text}"
        );
        assert!(text.contains("recourse_timer_lateness_seconds_sum 2"), "{text}");
        assert!(text.contains("recourse_timer_lateness_seconds_count 2"), "{text}");
    }

    #[test]
    fn a_failure_counts_under_its_class_and_code_and_an_open_stream_while_it_lives() {
        let m = metrics();
        let cause = FailureCause {
            class: ClassState::Hard,
            code: Some(SemanticCode::QuotaLimited),
        };
        m.dispatch_settled(DispatchOutcome::Failed, Some(cause));
        m.dispatch_settled(DispatchOutcome::Failed, Some(cause));
        m.dispatch_settled(DispatchOutcome::Succeeded, None);
        m.transition(StateName::Completed);
        let stream = m.sse_client();
        let text = m.render();
        assert!(text.contains(
            "recourse_dispatch_outcomes_total{outcome=\"failed\",class=\"hard\",code=\"quota_limited\"} 2"
        ));
        assert!(text.contains(
            "recourse_dispatch_outcomes_total{outcome=\"succeeded\",class=\"none\",code=\"none\"} 1"
        ));
        assert!(text.contains("recourse_transitions_total{state=\"completed\"} 1"));
        assert!(text.contains("recourse_sse_clients 1"), "{text}");
        drop(stream);
        assert!(m.render().contains("recourse_sse_clients 0"));
    }

    #[test]
    fn two_servers_in_one_process_count_apart() {
        let (a, b) = (metrics(), metrics());
        a.lease_expired();
        assert!(a.render().contains("recourse_leases_expired_total 1"));
        assert!(b.render().contains("recourse_leases_expired_total 0"));
    }
}
