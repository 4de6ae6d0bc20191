//! The outbox: the ONE call through which a route transition's notifications are written, in
//! the writer's transaction, beside the transition's own rows ([`queue`]). What a transition is
//! worth telling and who gets it are `policy::notify`'s decisions; this builds each event's body
//! once and queues its rows: one `notify_events` row (shown in the in-app list when a rule sends
//! it there) and one `notify_deliveries` row per configured channel. The delivery worker
//! (`worker.rs`) takes them from there, after the commit.
//!
//! Why in the same transaction: a change committed without its notification, or a notification
//! of a change that rolled back, would both be lies. The cost when a profile has no rules is a
//! check of an empty list; otherwise, on SQLite, two statements for all the events of the
//! commit (their rows as JSON), sent with the transaction's other writes in its one round trip;
//! on PostgreSQL two statements per event (`store/notify/`).
//!
//! The body is the event as every channel builds on it (Standard Webhooks' shape):
//! `{"type": "route.needs_person", "timestamp": "...", "data": {...}}`, with ids, link,
//! profile, caller, candidate, class, code, deadline and generation; never evidence text, an
//! excerpt or a secret. It is stored as sent, so each retry of a webhook carries the same bytes.

use crate::config::notify::NotifyConfig;
use crate::store::{new_id, Writes};
use chrono::{DateTime, SecondsFormat, Utc};
use policy::{
    api::{Caller, Profile},
    classification::ClassState,
    evaluator::DecisionKind,
    notify::{channels_for, notable, Notable, NotifyEventType, WaitKind, IN_APP_CHANNEL},
    route::{ActionReason, RouteState, StateName, Transition},
};
use serde::{Deserialize, Serialize};

/// A committed route transition, as the outbox needs it.
pub(crate) struct Change<'a> {
    pub(crate) route_id: &'a str,
    pub(crate) caller: &'a Caller,
    pub(crate) title: Option<&'a str>,
    pub(crate) profile: &'a Profile,
    /// `None`: the route's start.
    pub(crate) prev: Option<&'a RouteState>,
    pub(crate) transition: &'a Transition,
    /// Circuits this transaction opened or closed (`Notable::CircuitOpened`/`CircuitClosed`).
    pub(crate) circuits: &'a [Notable],
    pub(crate) now: DateTime<Utc>,
}

/// Which circuit events any rule of `profile` asks for: only then does the transaction note
/// the circuits it moves.
pub(crate) fn wants_circuits(profile: &Profile) -> bool {
    profile.notifications.iter().any(|r| {
        r.events.contains(&NotifyEventType::CircuitOpened)
            || r.events.contains(&NotifyEventType::CircuitClosed)
    })
}

/// Queues the notifications `change` causes under its profile's rules: the events and their
/// deliveries, in `writes`, inside the writer's transaction. Returns how many events it queued
/// (the worker is woken after the commit when any were).
pub(crate) fn queue(writes: &mut Writes, config: &NotifyConfig, change: &Change<'_>) -> usize {
    let rules = &change.profile.notifications;
    if rules.is_empty() {
        return 0;
    }
    let mut notables = notable(change.prev, change.transition, change.now);
    notables.extend(change.circuits.iter().cloned());
    let mut queued = 0;
    for n in &notables {
        let channels: Vec<&str> = channels_for(rules, n)
            .into_iter()
            .filter(|c| config.has_channel(c))
            .collect();
        if channels.is_empty() {
            continue;
        }
        let id = new_id("msg", change.now);
        let body = Body::of(&id, n, change, config.public_url.as_deref());
        writes.notify_event(crate::store::NotifyInsert {
            event: n.event_type(),
            route_id: change.route_id.to_owned(),
            profile_id: change.profile.id.clone(),
            at: change.now,
            payload: crate::store::to_json(&body),
            in_app: channels.contains(&IN_APP_CHANNEL),
            channels: channels
                .iter()
                .filter(|c| **c != IN_APP_CHANNEL)
                .map(|c| (*c).to_owned())
                .collect(),
            id,
        });
        queued += 1;
    }
    queued
}

/// An event as every channel receives it (Standard Webhooks' payload shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Body {
    #[serde(rename = "type")]
    pub event: NotifyEventType,
    /// When it happened (RFC 3339, UTC).
    pub timestamp: String,
    pub data: EventData,
}

/// What an event says. Codes, states, ids and instants only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventData {
    /// The event's id, also its `webhook-id`.
    pub id: String,
    pub route_id: String,
    /// `{public_url}/routes/{id}`, or the path alone without `[notify] public_url`.
    pub link: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub profile_id: String,
    pub profile_name: String,
    pub caller: Caller,
    pub candidate_id: String,
    pub generation: u64,
    pub state: StateName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ClassState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// `route.needs_person`: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ActionReason>,
    /// `route.switched`: from which candidate to which, and the decision that stood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_candidate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_candidate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionKind>,
    /// `route.waiting`: which wait, until when, and for how many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
    /// `circuit.*`: the circuit's key and, when opened, until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_until: Option<DateTime<Utc>>,
}

impl Body {
    fn of(id: &str, n: &Notable, change: &Change<'_>, public_url: Option<&str>) -> Body {
        let next = &change.transition.next;
        let decision = next.decision();
        let path = format!("/routes/{}", change.route_id);
        let mut data = EventData {
            id: id.to_owned(),
            route_id: change.route_id.to_owned(),
            link: public_url.map_or_else(|| path.clone(), |base| format!("{base}{path}")),
            title: change.title.map(str::to_owned),
            profile_id: change.profile.id.clone(),
            profile_name: change.profile.name.clone(),
            caller: change.caller.clone(),
            candidate_id: next.candidate().id.clone(),
            generation: next.generation(),
            state: next.state_name(),
            class: decision.map(|d| d.class),
            code: decision.map(|d| d.code.map_or("unclassified", |c| c.as_str()).to_owned()),
            deadline: next.deadline(),
            reason: None,
            from_candidate: None,
            to_candidate: None,
            decision: None,
            wait: None,
            resume_at: None,
            wait_seconds: None,
            circuit: None,
            open_until: None,
        };
        match n {
            Notable::NeedsPerson { reason } => data.reason = Some(*reason),
            Notable::Switched {
                from_candidate,
                to_candidate,
                cause,
            } => {
                data.from_candidate = Some(from_candidate.clone());
                data.to_candidate = Some(to_candidate.clone());
                if let Some(cause) = cause {
                    data.decision = Some(cause.decision);
                    data.code.clone_from(&cause.code);
                    data.class = Some(cause.class);
                }
            }
            Notable::Waiting { wait, until, seconds } => {
                data.wait = Some(*wait);
                data.resume_at = Some(*until);
                data.wait_seconds = Some(*seconds);
            }
            Notable::Finished { .. } => {}
            Notable::CircuitOpened { key, code, until } => {
                data.circuit = Some(key.clone());
                data.open_until = *until;
                if code.is_some() {
                    data.code.clone_from(code);
                }
            }
            Notable::CircuitClosed { key } => data.circuit = Some(key.clone()),
        }
        Body {
            event: n.event_type(),
            timestamp: change.now.to_rfc3339_opts(SecondsFormat::Millis, true),
            data,
        }
    }
}
