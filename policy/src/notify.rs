//! Notifications: which route changes are worth telling a person, the rules a profile keeps
//! for who is told what, and how often a delivery is tried. Pure, like the rest of the crate:
//! the server decides nothing about notifications that is not decided here.
//!
//! - [`NotifyEventType`]: the six events, with their stable type names (`route.needs_person`,
//!   `route.switched`, `route.waiting`, `circuit.opened`, `circuit.closed`, `route.finished`).
//! - [`notable`]: what one committed route transition is worth telling, read from the
//!   transition itself (the effects the route machine returned and the states on both sides);
//!   circuit events come from the circuit rows the same transaction changed
//!   ([`Notable::circuit_opened`], [`Notable::circuit_closed`]).
//! - [`NotificationRule`]: a profile's rules (which events, which channels, the shortest wait
//!   `route.waiting` is sent for), parsed with every problem at its path ([`check_rules`]) and
//!   matched against an event ([`channels_for`]).
//! - [`DeliverySchedule`]: exponential backoff with a cap and a last attempt, for a delivery
//!   that failed: `None` means the delivery is dead.
//!
//! Why the events are derived from the transition and not from the history afterwards: the
//! outbox row must be written in the same transaction as the change that caused it, so that a
//! change is never committed without its notification, nor a notification without its change.
//!
//! Nothing here carries evidence text: a notable holds codes, classes, candidate ids, reasons
//! and instants only.

use crate::{
    classification::ClassState,
    document::{ValidationCode, ValidationError},
    evaluator::DecisionKind,
    input::check_identifier,
    limits::{MAX_MAX_WAIT_SECONDS, MAX_NOTIFICATION_RULES, MAX_RULE_CHANNELS},
    route::{ActionReason, RouteEffect, RouteState, StateName, Transition},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The channel every server has: the notification list in the UI (and, from there, the
/// browser's own notifications). Configured channels may not take this id.
pub const IN_APP_CHANNEL: &str = "in_app";

// ------------------------------------------------------------------------------------------------
// Event types
// ------------------------------------------------------------------------------------------------

/// What a notification is about. The spelling is the contract (webhook `type`, stored rows,
/// rules): never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum NotifyEventType {
    /// The route stopped for a person (`action_required`), with the reason.
    #[serde(rename = "route.needs_person")]
    RouteNeedsPerson,
    /// The route moved to another candidate: from which, to which, and why.
    #[serde(rename = "route.switched")]
    RouteSwitched,
    /// The route waits (for a trusted reset, or before a retry) at least a rule's minimum wait,
    /// with the instant it resumes.
    #[serde(rename = "route.waiting")]
    RouteWaiting,
    /// A provider, account or model is down: its circuit opened.
    #[serde(rename = "circuit.opened")]
    CircuitOpened,
    /// It is back: its circuit closed after a success ("primary recovered").
    #[serde(rename = "circuit.closed")]
    CircuitClosed,
    /// The route ended: completed or abandoned.
    #[serde(rename = "route.finished")]
    RouteFinished,
}

impl NotifyEventType {
    pub const ALL: [NotifyEventType; 6] = [
        NotifyEventType::RouteNeedsPerson,
        NotifyEventType::RouteSwitched,
        NotifyEventType::RouteWaiting,
        NotifyEventType::CircuitOpened,
        NotifyEventType::CircuitClosed,
        NotifyEventType::RouteFinished,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            NotifyEventType::RouteNeedsPerson => "route.needs_person",
            NotifyEventType::RouteSwitched => "route.switched",
            NotifyEventType::RouteWaiting => "route.waiting",
            NotifyEventType::CircuitOpened => "circuit.opened",
            NotifyEventType::CircuitClosed => "circuit.closed",
            NotifyEventType::RouteFinished => "route.finished",
        }
    }

    pub fn parse(s: &str) -> Option<NotifyEventType> {
        NotifyEventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// What the UI calls it.
    pub const fn label(self) -> &'static str {
        match self {
            NotifyEventType::RouteNeedsPerson => "A route needs a person",
            NotifyEventType::RouteSwitched => "A route switched to another candidate",
            NotifyEventType::RouteWaiting => "A route waits a long time",
            NotifyEventType::CircuitOpened => "A provider, account or model is down",
            NotifyEventType::CircuitClosed => "It is back (circuit closed)",
            NotifyEventType::RouteFinished => "A route finished",
        }
    }
}

impl fmt::Display for NotifyEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ------------------------------------------------------------------------------------------------
// What a transition is worth telling
// ------------------------------------------------------------------------------------------------

/// One thing worth telling, with only what a message may say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notable {
    NeedsPerson {
        reason: ActionReason,
    },
    Switched {
        from_candidate: String,
        to_candidate: String,
        /// The latest decision on the route when it left the candidate: the policy's `skip`
        /// after a classified failure, or whatever stood when a person skipped.
        cause: Option<SwitchCause>,
    },
    Waiting {
        wait: WaitKind,
        until: DateTime<Utc>,
        /// Whole seconds from the transition to `until`, rounded up.
        seconds: u64,
    },
    Finished {
        state: StateName,
    },
    CircuitOpened {
        key: String,
        code: Option<String>,
        until: Option<DateTime<Utc>>,
    },
    CircuitClosed {
        key: String,
    },
}

/// Why a route left a candidate, as far as its latest decision says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchCause {
    /// `skip` when the policy switched; anything else means a person skipped.
    pub decision: DecisionKind,
    pub code: Option<String>,
    pub class: ClassState,
}

/// Which wait a `route.waiting` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// `waiting_for_reset`: a trusted reset time.
    Reset,
    /// `retry_wait`: the policy's retry delay.
    Retry,
}

impl WaitKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            WaitKind::Reset => "reset",
            WaitKind::Retry => "retry",
        }
    }
}

impl Notable {
    pub fn event_type(&self) -> NotifyEventType {
        match self {
            Notable::NeedsPerson { .. } => NotifyEventType::RouteNeedsPerson,
            Notable::Switched { .. } => NotifyEventType::RouteSwitched,
            Notable::Waiting { .. } => NotifyEventType::RouteWaiting,
            Notable::Finished { .. } => NotifyEventType::RouteFinished,
            Notable::CircuitOpened { .. } => NotifyEventType::CircuitOpened,
            Notable::CircuitClosed { .. } => NotifyEventType::CircuitClosed,
        }
    }

    /// A circuit this transaction opened (it was closed, or had no row).
    pub fn circuit_opened(key: &str, code: Option<&str>, until: Option<DateTime<Utc>>) -> Notable {
        Notable::CircuitOpened {
            key: key.to_owned(),
            code: code.map(str::to_owned),
            until,
        }
    }

    /// A circuit this transaction closed (it was open or probing).
    pub fn circuit_closed(key: &str) -> Notable {
        Notable::CircuitClosed { key: key.to_owned() }
    }
}

/// What the route transition from `prev` (`None`: the route's start) through `transition`, at
/// `now`, is worth telling, in the order a reader would want them. An unchanged transition
/// tells nothing.
///
/// - `route.needs_person`: the machine asked to notify a person (`NotifyPerson`: a policy
///   stop, unsafe or unclassified evidence, an ambiguous dispatch, no eligible candidate).
///   A person's own stop or cancel does not ask for anyone.
/// - `route.switched`: switching chose another candidate.
/// - `route.waiting`: the route entered a wait (its length decides which rules it reaches).
/// - `route.finished`: the route became completed or abandoned.
pub fn notable(prev: Option<&RouteState>, transition: &Transition, now: DateTime<Utc>) -> Vec<Notable> {
    if !transition.changed {
        return Vec::new();
    }
    let next = &transition.next;
    let mut out = Vec::new();
    for effect in &transition.effects {
        if let RouteEffect::NotifyPerson { reason } = effect {
            out.push(Notable::NeedsPerson { reason: *reason });
        }
    }
    if let Some(prev) = prev {
        let switched = prev.state_name() == StateName::Switching
            && next.state_name() == StateName::Active
            && prev.candidate().id != next.candidate().id;
        if switched {
            out.push(Notable::Switched {
                from_candidate: prev.candidate().id.clone(),
                to_candidate: next.candidate().id.clone(),
                cause: prev.decision().map(|d| SwitchCause {
                    decision: d.kind,
                    code: d.code.map(|c| c.as_str().to_owned()),
                    class: d.class,
                }),
            });
        }
    }
    let entered = prev.is_none_or(|p| p.state_name() != next.state_name() || p.deadline() != next.deadline());
    if let (Some(until), true) = (next.deadline(), entered) {
        let wait = match next.state_name() {
            StateName::WaitingForReset => WaitKind::Reset,
            _ => WaitKind::Retry,
        };
        out.push(Notable::Waiting {
            wait,
            until,
            seconds: seconds_until(now, until),
        });
    }
    let finished = next.is_terminal() && prev.is_none_or(|p| !p.is_terminal());
    if finished {
        out.push(Notable::Finished {
            state: next.state_name(),
        });
    }
    out
}

/// Whole seconds from `now` to `until`, rounded up; 0 when it is not later.
fn seconds_until(now: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
    let ms = (until - now).num_milliseconds();
    u64::try_from(ms).map_or(0, |ms| ms.div_ceil(1000))
}

// ------------------------------------------------------------------------------------------------
// Rules
// ------------------------------------------------------------------------------------------------

/// One rule of a profile: these events go to these channels. Part of the profile (and so of
/// every profile revision and its audited diff).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NotificationRule {
    /// Which events (at least one, each once).
    pub events: Vec<NotifyEventType>,
    /// Which channels, by id: `in_app`, or a channel of the server's configuration file.
    pub channels: Vec<String>,
    /// For `route.waiting`: only waits at least this long, in seconds (0: every wait; at most
    /// 7 days). Stored as 0 when the rule does not include `route.waiting`.
    #[serde(default, deserialize_with = "crate::whole::u64")]
    pub min_wait_seconds: u64,
}

/// Checks a profile's rules, every problem at its path under `notifications`
/// (`notifications[0].channels[1]`); returns them normalized (`min_wait_seconds` is 0 unless
/// the rule includes `route.waiting`). Whether each channel exists is the server's to say: it
/// knows its configuration.
pub fn check_rules(rules: &[NotificationRule]) -> (Vec<NotificationRule>, Vec<ValidationError>) {
    let mut problems = Vec::new();
    let mut push = |path: String, code: ValidationCode, message: String| {
        problems.push(ValidationError { path, code, message });
    };
    if rules.len() > MAX_NOTIFICATION_RULES {
        push(
            "notifications".to_owned(),
            ValidationCode::TooMany,
            format!("A profile has at most {MAX_NOTIFICATION_RULES} notification rules."),
        );
    }
    let mut out = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate().take(MAX_NOTIFICATION_RULES) {
        let at = |field: &str| format!("notifications[{i}].{field}");
        if rule.events.is_empty() {
            push(
                at("events"),
                ValidationCode::Empty,
                "Choose at least one event.".to_owned(),
            );
        }
        for (e, event) in rule.events.iter().enumerate() {
            if rule.events[..e].contains(event) {
                push(
                    at(&format!("events[{e}]")),
                    ValidationCode::Duplicate,
                    "This event is listed twice.".to_owned(),
                );
            }
        }
        if rule.channels.is_empty() {
            push(
                at("channels"),
                ValidationCode::Empty,
                "Choose at least one channel.".to_owned(),
            );
        }
        if rule.channels.len() > MAX_RULE_CHANNELS {
            push(
                at("channels"),
                ValidationCode::TooMany,
                format!("A rule names at most {MAX_RULE_CHANNELS} channels."),
            );
        }
        for (c, channel) in rule.channels.iter().enumerate().take(MAX_RULE_CHANNELS) {
            let path = at(&format!("channels[{c}]"));
            if let Err(e) = check_identifier(channel, "the channel id") {
                push(path, e.code, e.message);
            } else if rule.channels[..c].contains(channel) {
                push(
                    path,
                    ValidationCode::Duplicate,
                    "This channel is listed twice.".to_owned(),
                );
            }
        }
        let waits = rule.events.contains(&NotifyEventType::RouteWaiting);
        if rule.min_wait_seconds > MAX_MAX_WAIT_SECONDS {
            push(
                at("min_wait_seconds"),
                ValidationCode::OutOfRange,
                format!("Between 0 and {MAX_MAX_WAIT_SECONDS} seconds (7 days)."),
            );
        }
        out.push(NotificationRule {
            events: rule.events.clone(),
            channels: rule.channels.clone(),
            min_wait_seconds: if waits { rule.min_wait_seconds } else { 0 },
        });
    }
    (out, problems)
}

/// The channels `notable` goes to under `rules`, each once, in the order the rules name them:
/// every rule that lists its event (for `route.waiting`, whose minimum wait it reaches).
pub fn channels_for<'r>(rules: &'r [NotificationRule], notable: &Notable) -> Vec<&'r str> {
    let event = notable.event_type();
    let mut out: Vec<&str> = Vec::new();
    for rule in rules {
        let applies = rule.events.contains(&event)
            && match notable {
                Notable::Waiting { seconds, .. } => *seconds >= rule.min_wait_seconds,
                _ => true,
            };
        if !applies {
            continue;
        }
        for channel in &rule.channels {
            if !out.contains(&channel.as_str()) {
                out.push(channel);
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------------
// Delivery attempts
// ------------------------------------------------------------------------------------------------

/// When a failed delivery is tried again: the first retry after `initial_ms`, each later one
/// after twice the previous delay, never more than `max_ms`, and no attempt after the
/// `max_attempts`-th. Saturating: no input overflows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliverySchedule {
    pub initial_ms: u64,
    pub max_ms: u64,
    pub max_attempts: u32,
}

impl DeliverySchedule {
    /// The delay before the next attempt after `failed` attempts have failed (1 after the
    /// first), or `None` when that was the last one: the delivery is dead.
    pub fn next_delay_ms(&self, failed: u32) -> Option<u64> {
        if failed == 0 || failed >= self.max_attempts {
            return None;
        }
        let doublings = failed - 1;
        let factor = if doublings >= 64 {
            u64::MAX
        } else {
            1u64 << doublings
        };
        Some(self.initial_ms.saturating_mul(factor).min(self.max_ms))
    }
}

// ------------------------------------------------------------------------------------------------
// Wire types: the in-app list, deliveries, channels
// ------------------------------------------------------------------------------------------------

/// One notification of the in-app list, for the signed-in person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotificationView {
    /// Position in the list (newer is larger); what [`MarkRead::through_seq`] names.
    pub seq: u64,
    /// The event's id: the same `webhook-id` every channel received.
    pub id: String,
    #[serde(rename = "type")]
    pub event: NotifyEventType,
    pub at: DateTime<Utc>,
    /// The route it is about (for circuit events, the route whose change moved the circuit).
    pub route_id: String,
    /// One readable sentence: codes, states and ids only, never evidence text.
    pub summary: String,
    /// Whether this person marked it read.
    pub read: bool,
}

/// `GET /api/v1/notifications`: the newest first, and how many are unread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotificationPage {
    pub items: Vec<NotificationView>,
    /// In-app notifications this person has not marked read.
    pub unread: u64,
}

/// `POST /api/v1/notifications/read`: everything up to and including `through_seq` is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MarkRead {
    /// At most [`crate::limits::MAX_NOTIFICATION_SEQ`]; a larger one is refused.
    #[serde(deserialize_with = "through_seq")]
    pub through_seq: u64,
}

/// A whole number up to [`crate::limits::MAX_NOTIFICATION_SEQ`].
fn through_seq<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = crate::whole::u64(d)?;
    if n > crate::limits::MAX_NOTIFICATION_SEQ {
        return Err(serde::de::Error::custom(format_args!(
            "through_seq is at most {}",
            crate::limits::MAX_NOTIFICATION_SEQ
        )));
    }
    Ok(n)
}

/// Where a delivery to a configured channel stands. Stable spellings (stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Not delivered yet: due now, or waiting for its next attempt.
    Pending,
    /// The receiver took it (a 2xx answer, or the mail server accepted the message).
    Delivered,
    /// Every attempt failed; nothing more is tried.
    Dead,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Dead,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        DeliveryStatus::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// One delivery of an event to a configured channel, as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryView {
    /// The event's id (its `webhook-id`).
    pub event_id: String,
    #[serde(rename = "type")]
    pub event: NotifyEventType,
    pub channel_id: String,
    pub route_id: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// What went wrong with the latest attempt, in Recourse's words (a status code, a timeout,
    /// a refused address); never the receiver's answer.
    pub last_error: Option<String>,
    /// When the event happened.
    pub at: DateTime<Utc>,
}

/// A channel a rule may name, as the profile editor offers it: ids, kinds and labels only
/// (addresses and secrets stay on the server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelOption {
    pub id: String,
    /// `in_app`, `webhook` or `email`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        class::SemanticCode,
        classification::{Classification, Confidence, Gate},
        legacy::normalize,
        route::{start, step, CandidateOption, FailureReport, ManualAction, RouteEvent},
    };
    use chrono::{TimeDelta, TimeZone};
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
    }

    fn overloaded() -> Classification {
        Classification {
            code: Some(SemanticCode::ProviderOverloaded),
            class: ClassState::Transient,
            reason: None,
            catalogue_version: "test".into(),
            confidence: Confidence::High,
            scope: None,
            classifier_rule: Some("test.overloaded".into()),
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: None,
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    /// Two candidates; the transient policy retries once after `interval` s, then `then`.
    fn doc(interval: u64, then: &str) -> crate::document::ValidatedPolicyDocument {
        let class = json!({"retry": {"enabled": true, "max_retries": 1, "initial_interval_seconds": interval},
                           "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": then});
        normalize(&json!({"version": 1, "candidates": [
            {"id": "a", "transient": class, "hard": class},
            {"id": "b", "transient": class, "hard": class}]}))
        .unwrap()
        .document
    }

    fn failed(state: &RouteState, doc: &crate::document::ValidatedPolicyDocument, gate: Gate) -> RouteEvent {
        RouteEvent::Failed(Box::new(FailureReport {
            evidence_generation: state.generation(),
            classification: overloaded(),
            gate,
            policy: doc.candidate(&state.candidate().id).cloned(),
            resume: None,
        }))
    }

    /// Steps `event` at `now()`; returns the next state and what it is worth telling.
    fn told(state: &RouteState, event: RouteEvent) -> (RouteState, Vec<Notable>) {
        told_at(state, event, now())
    }

    fn told_at(state: &RouteState, event: RouteEvent, at: DateTime<Utc>) -> (RouteState, Vec<Notable>) {
        let t = step(state, event, at).unwrap();
        let n = notable(Some(state), &t, at);
        (t.next, n)
    }

    fn running(doc: &crate::document::ValidatedPolicyDocument) -> RouteState {
        let _ = doc;
        let t = start(&[CandidateOption::now("a"), CandidateOption::now("b")]).unwrap();
        assert!(notable(None, &t, now()).is_empty(), "a start tells nothing");
        step(
            &t.next,
            RouteEvent::DispatchStarted {
                generation: 1,
                launch: None,
            },
            now(),
        )
        .unwrap()
        .next
    }

    #[test]
    fn a_retry_wait_tells_its_length_and_resume_time() {
        let d = doc(90, "skip");
        let s = running(&d);
        let (_, n) = told(&s, failed(&s, &d, Gate::ALLOW));
        assert_eq!(
            n,
            [Notable::Waiting {
                wait: WaitKind::Retry,
                until: now() + TimeDelta::seconds(90),
                seconds: 90
            }]
        );
    }

    #[test]
    fn exhausted_skip_then_switch_tells_from_which_to_which_and_why() {
        let d = doc(5, "skip");
        let s = running(&d);
        let (s, _) = told(&s, failed(&s, &d, Gate::ALLOW));
        let g = s.generation();
        let (s, n) = told_at(
            &s,
            RouteEvent::DeadlineReached { generation: g },
            now() + TimeDelta::seconds(5),
        );
        assert!(n.is_empty(), "the retry itself tells nothing: {n:?}");
        let g = s.generation();
        let (s, _) = told(
            &s,
            RouteEvent::DispatchStarted {
                generation: g,
                launch: None,
            },
        );
        let (s, n) = told(&s, failed(&s, &d, Gate::ALLOW));
        assert_eq!(s.state_name(), StateName::Switching);
        assert!(n.is_empty(), "switching has not chosen yet: {n:?}");
        let g = s.generation();
        let (s, n) = told(
            &s,
            RouteEvent::CandidatesEvaluated {
                expected_generation: g,
                candidates: vec![CandidateOption::now("a"), CandidateOption::now("b")],
            },
        );
        assert_eq!(s.candidate().id, "b");
        assert_eq!(
            n,
            [Notable::Switched {
                from_candidate: "a".into(),
                to_candidate: "b".into(),
                cause: Some(SwitchCause {
                    decision: DecisionKind::Skip,
                    code: Some("provider_overloaded".into()),
                    class: ClassState::Transient,
                }),
            }]
        );
    }

    #[test]
    fn an_unsafe_failure_tells_that_a_person_is_needed_and_why() {
        let d = doc(5, "skip");
        let s = running(&d);
        let (s, n) = told(
            &s,
            failed(
                &s,
                &d,
                Gate::deny(crate::classification::GateReason::ToolActivity),
            ),
        );
        assert_eq!(s.state_name(), StateName::ActionRequired);
        assert_eq!(
            n,
            [Notable::NeedsPerson {
                reason: ActionReason::EffectUnsafe
            }]
        );
    }

    #[test]
    fn a_persons_own_stop_tells_nobody_but_abandoning_tells_that_it_finished() {
        let d = doc(5, "skip");
        let s = running(&d);
        let g = s.generation();
        let (s, n) = told(
            &s,
            RouteEvent::Manual {
                action: ManualAction::Stop,
                expected_generation: g,
            },
        );
        assert!(n.is_empty(), "{n:?}");
        let g = s.generation();
        let (s, n) = told(
            &s,
            RouteEvent::Abandon {
                expected_generation: g,
            },
        );
        assert_eq!(
            n,
            [Notable::Finished {
                state: StateName::Abandoned
            }]
        );
        // A repeat of the abandon is unchanged: nothing more to tell.
        let t = step(
            &s,
            RouteEvent::Abandon {
                expected_generation: g,
            },
            now(),
        )
        .unwrap();
        assert!(notable(Some(&s), &t, now()).is_empty());
    }

    fn rule(events: &[NotifyEventType], channels: &[&str], min_wait: u64) -> NotificationRule {
        NotificationRule {
            events: events.to_vec(),
            channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            min_wait_seconds: min_wait,
        }
    }

    #[test]
    fn channels_are_the_union_of_the_matching_rules_each_once() {
        use NotifyEventType as E;
        let rules = [
            rule(&[E::RouteNeedsPerson, E::RouteWaiting], &["ops", "in_app"], 600),
            rule(&[E::RouteNeedsPerson], &["mail", "ops"], 0),
            rule(&[E::RouteWaiting], &["mail"], 60),
        ];
        let needs = Notable::NeedsPerson {
            reason: ActionReason::PolicyStop,
        };
        assert_eq!(channels_for(&rules, &needs), ["ops", "in_app", "mail"]);
        let wait = |seconds| Notable::Waiting {
            wait: WaitKind::Reset,
            until: now(),
            seconds,
        };
        assert_eq!(channels_for(&rules, &wait(59)), Vec::<&str>::new());
        assert_eq!(channels_for(&rules, &wait(60)), ["mail"]);
        assert_eq!(channels_for(&rules, &wait(600)), ["ops", "in_app", "mail"]);
        assert!(channels_for(&rules, &Notable::circuit_closed("provider:x")).is_empty());
    }

    #[test]
    fn every_problem_of_a_rule_is_reported_at_its_path_and_min_wait_is_normalized() {
        use NotifyEventType as E;
        let rules = [
            rule(&[], &[], 0),
            rule(
                &[E::RouteFinished, E::RouteFinished],
                &["ops", "ops", "bad id"],
                30,
            ),
            rule(&[E::RouteWaiting], &["ops"], MAX_MAX_WAIT_SECONDS + 1),
        ];
        let (normalized, problems) = check_rules(&rules);
        let paths: Vec<_> = problems.iter().map(|p| (p.path.as_str(), p.code)).collect();
        assert_eq!(
            paths,
            [
                ("notifications[0].events", ValidationCode::Empty),
                ("notifications[0].channels", ValidationCode::Empty),
                ("notifications[1].events[1]", ValidationCode::Duplicate),
                ("notifications[1].channels[1]", ValidationCode::Duplicate),
                ("notifications[1].channels[2]", ValidationCode::InvalidCharacters),
                ("notifications[2].min_wait_seconds", ValidationCode::OutOfRange),
            ]
        );
        assert_eq!(normalized[1].min_wait_seconds, 0, "no route.waiting: no minimum");
        let too_many = vec![rule(&[E::RouteFinished], &["ops"], 0); MAX_NOTIFICATION_RULES + 1];
        assert_eq!(check_rules(&too_many).1[0].path, "notifications");
    }

    #[test]
    fn event_type_names_are_stable_and_round_trip() {
        for t in NotifyEventType::ALL {
            assert_eq!(NotifyEventType::parse(t.as_str()), Some(t));
            assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
        }
        assert_eq!(NotifyEventType::RouteNeedsPerson.as_str(), "route.needs_person");
    }

    #[test]
    fn delivery_delays_double_up_to_the_cap_and_stop_after_the_last_attempt() {
        let s = DeliverySchedule {
            initial_ms: 1_000,
            max_ms: 5_000,
            max_attempts: 6,
        };
        let delays: Vec<_> = (1..=6).map(|n| s.next_delay_ms(n)).collect();
        assert_eq!(
            delays,
            [
                Some(1_000),
                Some(2_000),
                Some(4_000),
                Some(5_000),
                Some(5_000),
                None
            ]
        );
        let huge = DeliverySchedule {
            initial_ms: u64::MAX,
            max_ms: u64::MAX,
            max_attempts: u32::MAX,
        };
        assert_eq!(huge.next_delay_ms(u32::MAX - 1), Some(u64::MAX));
        assert_eq!(huge.next_delay_ms(0), None);
    }
}
