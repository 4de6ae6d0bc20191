//! What a person reads: one sentence per event (the in-app list, a Slack message, an e-mail's
//! subject) and an e-mail's body. Built from the event's data only (ids, states, codes,
//! instants), so no evidence text or secret can reach a message.

use crate::engine::outbox::Body;
use policy::notify::{NotifyEventType, WaitKind};

/// The route as messages name it: its title, if the caller gave one, and its id.
fn route_name(body: &Body) -> String {
    match &body.data.title {
        Some(t) if !t.trim().is_empty() => format!("\"{}\" ({})", t.trim(), body.data.route_id),
        _ => body.data.route_id.clone(),
    }
}

/// `code`, `class` when known, e.g. `quota_limited, hard`.
fn cause(body: &Body) -> Option<String> {
    let d = &body.data;
    match (&d.code, d.class) {
        (Some(code), Some(class)) => Some(format!("{code}, {}", class_str(class))),
        (Some(code), None) => Some(code.clone()),
        _ => None,
    }
}

fn class_str(class: policy::classification::ClassState) -> &'static str {
    match class {
        policy::classification::ClassState::Transient => "transient",
        policy::classification::ClassState::Hard => "hard",
        policy::classification::ClassState::Unclassified => "unclassified",
    }
}

/// One sentence saying what happened.
pub fn summary(body: &Body) -> String {
    let d = &body.data;
    let route = route_name(body);
    let with_cause = |s: String| match cause(body) {
        Some(c) => format!("{s} ({c})"),
        None => s,
    };
    match body.event {
        NotifyEventType::RouteNeedsPerson => {
            let reason = d.reason.map_or("stopped", |r| r.as_str());
            with_cause(format!(
                "Route {route} needs a person on candidate {}: {reason}",
                d.candidate_id
            ))
        }
        NotifyEventType::RouteSwitched => with_cause(format!(
            "Route {route} switched from {} to {}",
            d.from_candidate.as_deref().unwrap_or("?"),
            d.to_candidate.as_deref().unwrap_or(&d.candidate_id)
        )),
        NotifyEventType::RouteWaiting => {
            let what = match d.wait {
                Some(WaitKind::Reset) => "waits for a reset",
                _ => "waits to retry",
            };
            let until = d.resume_at.map_or_else(String::new, |t| {
                format!(" until {}", t.format("%Y-%m-%d %H:%M:%S UTC"))
            });
            with_cause(format!(
                "Route {route} {what} on candidate {}{until}",
                d.candidate_id
            ))
        }
        NotifyEventType::CircuitOpened => {
            let until = d.open_until.map_or_else(String::new, |t| {
                format!(" until {}", t.format("%Y-%m-%d %H:%M:%S UTC"))
            });
            let code = d.code.as_deref().map_or_else(String::new, |c| format!(" ({c})"));
            format!(
                "{} is down{code}: candidates on it wait{until}",
                d.circuit.as_deref().unwrap_or("a provider")
            )
        }
        NotifyEventType::CircuitClosed => format!(
            "{} is back: route {route} succeeded on it",
            d.circuit.as_deref().unwrap_or("a provider")
        ),
        NotifyEventType::RouteFinished => format!("Route {route} {}", d.state.as_str()),
    }
}

/// An e-mail's subject.
pub fn subject(body: &Body) -> String {
    let mut s = format!("[Recourse] {}", summary(body));
    if s.chars().count() > 200 {
        s = s.chars().take(199).collect::<String>() + "…";
    }
    s
}

/// An e-mail's plain-text body: what happened, the route's link, and the facts as fields.
pub fn email_text(body: &Body) -> String {
    let d = &body.data;
    let mut lines = vec![
        summary(body),
        String::new(),
        format!("Open the route: {}", d.link),
        String::new(),
        format!("Event:      {} ({})", body.event.as_str(), d.id),
        format!("At:         {}", body.timestamp),
        format!("Route:      {}", d.route_id),
        format!("Profile:    {} ({})", d.profile_name, d.profile_id),
        format!(
            "Caller:     {} {} (invocation {})",
            d.caller.kind.as_str(),
            d.caller.reference,
            d.caller.invocation_id
        ),
        format!("Candidate:  {}", d.candidate_id),
        format!("State:      {} (generation {})", d.state.as_str(), d.generation),
    ];
    if let Some(c) = cause(body) {
        lines.push(format!("Cause:      {c}"));
    }
    if let Some(deadline) = d.deadline {
        lines.push(format!("Deadline:   {}", deadline.to_rfc3339()));
    }
    lines.push(String::new());
    lines.push("Recourse sends codes and states only; the evidence stays on the server.".to_owned());
    lines.join("\r\n")
}

/// A Slack incoming-webhook body's text (Slack's link syntax, `<url|label>`, for an absolute
/// link).
pub fn slack_text(body: &Body) -> String {
    let link = &body.data.link;
    // Slack reads `&`, `<` and `>` as markup: a title must not become a link or a mention.
    let text = summary(body)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if link.starts_with("http://") || link.starts_with("https://") {
        format!("{text} <{link}|Open the route>")
    } else {
        format!("{text} ({link})")
    }
}
