//! What the person reads in the editor when Recourse acts on their prompt: one short message per
//! thing Recourse did (a switch to the next agent, a retry, a wait for a reset, a stop), built
//! from the route's snapshot and the profile's labels only. Codes, classes, labels, deadlines
//! and the route's page: never what a provider or an agent said, so nothing secret reaches the
//! editor through these.

use chrono::{DateTime, Utc};
use policy::{
    classification::{ClassState, GateReason},
    wire::{ActionReason, DecisionKind, RouteSnapshot},
};

/// What a semantic code says of an agent, in a few words.
fn what(code: &str) -> &'static str {
    match code {
        "network_unavailable" => "cannot reach its provider",
        "provider_unavailable" => "has a provider outage",
        "provider_overloaded" => "is overloaded",
        "model_capacity" => "has no capacity for its model",
        "rate_limited" => "is rate-limited",
        "agent_transport_lost" => "lost its connection",
        "quota_limited" => "is out of quota",
        "subscription_required" => "needs a subscription",
        "auth_required" => "needs to sign in again",
        "missing_credentials" => "has no credentials",
        "provider_not_configured" => "has no provider configured",
        "model_unavailable" => "cannot use its model",
        _ => "failed",
    }
}

/// An instant as the messages show it.
pub(crate) fn at(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The failure a snapshot's latest decision is about: `"Claude Code is overloaded
/// (provider_overloaded)"`.
fn failure(label: &str, s: &RouteSnapshot) -> String {
    match s.code.as_deref() {
        Some("unclassified") | None => {
            format!("{label} failed with an error Recourse does not recognise (unclassified)")
        }
        Some(code) => format!("{label} {} ({code})", what(code)),
    }
}

/// The route moved from a failed attempt on `from` to a new attempt on another candidate.
pub(crate) fn switched(from: &str, to: &str, s: &RouteSnapshot) -> String {
    format!("{}; continuing on {to}", failure(from, s))
}

/// The route waits before it tries again (a retry delay, or a trusted reset), on `label`.
pub(crate) fn waiting(label: &str, s: &RouteSnapshot) -> String {
    let when = s.deadline.map_or_else(|| "later".to_owned(), at);
    match s.pending_outcome {
        Some(DecisionKind::WaitForReset) => format!(
            "{}; waiting until {when}, when its limit resets, to continue on {label}. Cancel to stop waiting.",
            failure(label, s)
        ),
        _ => {
            let ordinal = match (s.retry_ordinal, s.max_retries) {
                (Some(k), Some(max)) if max > 0 => format!(" (retry {k} of {max})"),
                _ => String::new(),
            };
            format!(
                "{}; retrying at {when}{ordinal}. Cancel to stop.",
                failure(label, s)
            )
        }
    }
}

/// The plan shown while the route waits: the wait, then the attempt after it.
pub(crate) fn waiting_plan(label: &str, s: &RouteSnapshot) -> serde_json::Value {
    let when = s.deadline.map_or_else(|| "later".to_owned(), at);
    let wait = match s.pending_outcome {
        Some(DecisionKind::WaitForReset) => format!("Wait until {when} for {label}'s limit to reset"),
        _ => format!("Wait until {when} before retrying {label}"),
    };
    serde_json::json!({
        "sessionUpdate": "plan",
        "entries": [
            {"content": wait, "priority": "high", "status": "in_progress"},
            {"content": format!("Run the prompt again on {label}"), "priority": "high", "status": "pending"},
        ],
    })
}

/// The pending attempt is parked behind an open circuit until `until`.
pub(crate) fn held(label: &str, until: DateTime<Utc>) -> String {
    format!(
        "{label} is paused after recent failures of its provider; Recourse tries it again at {}.",
        at(until)
    )
}

/// Why automatic recovery stopped, in a sentence, from the snapshot of a route in
/// `action_required` (`pinned`: the session's mode runs it on `label` only).
fn why_stopped(label: &str, pinned: bool, s: &RouteSnapshot) -> String {
    let class = match s.class {
        Some(ClassState::Transient) => ", transient",
        Some(ClassState::Hard) => ", hard",
        _ => "",
    };
    let failed = match s.code.as_deref() {
        Some("unclassified") | None => {
            format!("{label} failed with an error Recourse does not recognise (unclassified)")
        }
        Some(code) => format!("{label} {} ({code}{class})", what(code)),
    };
    let gate = s.decision.as_ref().and_then(|d| d.gate_reason);
    match s.action_reason {
        Some(ActionReason::EffectUnsafe) => {
            let after = match gate {
                Some(GateReason::ToolActivity) => "after it had already used a tool",
                Some(GateReason::AssistantOutput | GateReason::PartialResult) => {
                    "after it had already answered in part"
                }
                Some(GateReason::AmbiguousDelivery) => "and it is not certain whether the prompt reached it",
                Some(GateReason::CancelRequested) => "while it was being cancelled",
                _ => "when repeating the prompt was not safe",
            };
            format!("{failed} {after}, so Recourse did not repeat the prompt")
        }
        Some(ActionReason::PolicyStop) => format!("{failed}, and its policy says to stop there"),
        Some(ActionReason::NoEligibleCandidate) if pinned => {
            format!("{failed}, and this session's mode runs it on {label} only")
        }
        Some(ActionReason::NoEligibleCandidate) => {
            format!("{failed}, and no other agent of the profile can take the prompt")
        }
        Some(ActionReason::AmbiguousDispatch) => format!(
            "The last attempt on {label} may have run, but it was not reported before its runner or the server stopped (ambiguous_dispatch), so Recourse did not repeat it"
        ),
        Some(ActionReason::StoppedByUser) => "Stopped".to_owned(),
        Some(ActionReason::WaitCancelled) => "The wait was cancelled".to_owned(),
        Some(ActionReason::Unclassified) => format!("{failed}, so Recourse did not act on it"),
        Some(
            ActionReason::StaleEvidence
            | ActionReason::InconsistentClassification
            | ActionReason::ConfigurationError,
        )
        | None => format!("{failed}, and Recourse could not decide what to do automatically"),
    }
}

/// The end of a turn whose route stopped for a person: what happened, and what they can do.
pub(crate) fn stopped(label: &str, next: Next<'_>, s: &RouteSnapshot, route_url: &str) -> String {
    let switch = match next {
        Next::To(n) => format!(", \"switch\" to continue on {n}"),
        Next::Pinned => " (or choose the fail-over mode to let it switch)".to_owned(),
        Next::None => String::new(),
    };
    format!(
        "{}. Send \"retry\" to run the prompt again on {label}{switch}, or open {route_url}.",
        why_stopped(label, next == Next::Pinned, s)
    )
}

/// Where the person could move a stopped prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next<'a> {
    /// To this candidate (`switch`).
    To(&'a str),
    /// Nowhere: the session is pinned to the stopped candidate.
    Pinned,
    /// Nowhere: the profile has no other candidate.
    None,
}

/// The commands the editor offers (`available_commands_update`).
pub(crate) fn commands() -> serde_json::Value {
    serde_json::json!({
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": "retry", "description": "Run the stopped or waiting prompt again now, on the same agent"},
            {"name": "switch", "description": "Move the stopped or waiting prompt to the next agent of the profile"},
            {"name": "stop", "description": "Stop the waiting prompt; a stopped one is ended, and the next prompt starts afresh"},
        ],
    })
}

/// A text message from Recourse, as an `agent_message_chunk` (on a line of its own).
pub(crate) fn message(text: &str) -> serde_json::Value {
    serde_json::json!({
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("\n[Recourse] {text}\n")},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::route::{start, CandidateOption, Eligibility};

    fn snapshot(edit: impl FnOnce(&mut RouteSnapshot)) -> RouteSnapshot {
        let options = [CandidateOption {
            id: "claude".to_owned(),
            eligibility: Eligibility::Now,
        }];
        let mut s = start(&options).unwrap().next.snapshot();
        edit(&mut s);
        s
    }

    #[test]
    fn a_switch_before_output_names_both_agents_and_the_code() {
        let s = snapshot(|s| s.code = Some("provider_overloaded".to_owned()));
        assert_eq!(
            switched("Claude Code", "Codex", &s),
            "Claude Code is overloaded (provider_overloaded); continuing on Codex"
        );
    }

    #[test]
    fn a_wait_for_a_reset_says_until_when() {
        let deadline = "2026-12-03T14:05:00Z".parse().unwrap();
        let s = snapshot(|s| {
            s.code = Some("rate_limited".to_owned());
            s.pending_outcome = Some(DecisionKind::WaitForReset);
            s.deadline = Some(deadline);
        });
        let text = waiting("Claude Code", &s);
        assert!(
            text.starts_with(
                "Claude Code is rate-limited (rate_limited); waiting until 2026-12-03 14:05:00 UTC"
            ),
            "{text}"
        );
        let plan = waiting_plan("Claude Code", &s);
        assert_eq!(plan["entries"][0]["status"], "in_progress");
    }

    #[test]
    fn a_stop_after_a_tool_says_what_happened_its_class_and_what_to_do() {
        let s = snapshot(|s| {
            s.code = Some("provider_overloaded".to_owned());
            s.class = Some(ClassState::Transient);
            s.action_reason = Some(ActionReason::EffectUnsafe);
        });
        let text = stopped(
            "Claude Code",
            Next::To("Codex"),
            &s,
            "http://127.0.0.1:3000/routes/rt-1",
        );
        assert_eq!(
            text,
            "Claude Code is overloaded (provider_overloaded, transient) when repeating the prompt was not safe, so Recourse \
             did not repeat the prompt. Send \"retry\" to run the prompt again on Claude Code, \"switch\" to continue on \
             Codex, or open http://127.0.0.1:3000/routes/rt-1."
        );
        let alone = stopped("Claude Code", Next::None, &s, "u");
        assert!(!alone.contains("switch"), "{alone}");
        let pinned = stopped("Claude Code", Next::Pinned, &s, "u");
        assert!(pinned.contains("fail-over mode"), "{pinned}");
    }

    #[test]
    fn an_unknown_code_is_named_unclassified() {
        let s = snapshot(|s| s.code = Some("unclassified".to_owned()));
        assert!(switched("A", "B", &s).contains("(unclassified)"));
        assert_eq!(what("something_new"), "failed");
    }
}
