//! How a route reads to a person: its state, the failure class, the safe cause (stable code and
//! a plain description, never provider text), the retry ordinal and maximum, the deadline, what
//! happens next, and its history with the policy snapshot each decision used.

use crate::components::time::{format_utc, span_text};
use leptos::prelude::*;
use policy::{
    api::{DispatchRecord, DispatcherKind, HistoryEntry},
    class::SemanticCode,
    classification::ClassState,
    document::ValidatedClassPolicy,
    route::EventKind,
    schedule::{describe_outcome, describe_policy},
    wire::{ActionReason, Decision, DecisionKind, ManualAction, RouteSnapshot, StateName},
};

/// The state in words.
pub const fn state_label(state: StateName) -> &'static str {
    match state {
        StateName::Active => "Running",
        StateName::WaitingForReset => "Waiting for a reset",
        StateName::RetryWait => "Waiting to retry",
        StateName::Retrying => "Retrying",
        StateName::Switching => "Switching candidate",
        StateName::ActionRequired => "Needs a person",
        StateName::Completed => "Completed",
        StateName::Abandoned => "Abandoned",
    }
}

/// Badge colours with at least 4.5:1 contrast.
const fn state_class(state: StateName) -> &'static str {
    match state {
        StateName::Active | StateName::Retrying => "bg-sky-100 text-sky-900 border-sky-300",
        StateName::WaitingForReset | StateName::RetryWait | StateName::Switching => {
            "bg-amber-100 text-amber-900 border-amber-300"
        }
        StateName::ActionRequired => "bg-red-100 text-red-900 border-red-300",
        StateName::Completed => "bg-emerald-100 text-emerald-900 border-emerald-300",
        StateName::Abandoned => "bg-slate-200 text-slate-900 border-slate-400",
    }
}

#[component]
pub fn StateBadge(state: StateName) -> impl IntoView {
    view! {
        <span
            class=format!(
                "inline-flex items-center rounded-full border px-2.5 py-0.5 text-xs font-semibold {}",
                state_class(state),
            )
            data-state=state.as_str()
        >
            {state_label(state)}
        </span>
    }
}

pub const fn class_label(class: ClassState) -> &'static str {
    match class {
        ClassState::Transient => "Transient error",
        ClassState::Hard => "Hard error",
        ClassState::Unclassified => "Unclassified (not recognised)",
    }
}

/// The plain description of a stable code; `unclassified` and unknown codes say so.
pub fn describe_code(code: &str) -> &'static str {
    match SemanticCode::parse(code) {
        Some(c) => c.describe(),
        None => "Not recognised: no catalogue rule matched, so nothing is done automatically",
    }
}

pub const fn action_label(action: ManualAction) -> &'static str {
    match action {
        ManualAction::RetryNow => "Retry now",
        ManualAction::SkipNow => "Skip now",
        ManualAction::CancelWait => "Cancel wait",
        ManualAction::Stop => "Stop",
    }
}

pub const fn action_help(action: ManualAction) -> &'static str {
    match action {
        ManualAction::RetryNow => "Try the same candidate again right away.",
        ManualAction::SkipNow => "Leave this candidate for this cycle and move to the next one.",
        ManualAction::CancelWait => "Cancel the pending wait; the route then waits for a person.",
        ManualAction::Stop => "Stop automatic work; the route then waits for a person.",
    }
}

pub const fn reason_text(reason: ActionReason) -> &'static str {
    match reason {
        ActionReason::PolicyStop => "The candidate's policy ends in Stop, and its recovery is used up.",
        ActionReason::StaleEvidence => {
            "The failure report belonged to an older attempt, so it was not trusted."
        }
        ActionReason::Unclassified => "The failure was not recognised, so nothing was done automatically.",
        ActionReason::InconsistentClassification => {
            "The failure's classification contradicted itself, so nothing was done automatically."
        }
        ActionReason::EffectUnsafe => {
            "The attempt had already produced output or used tools, so repeating it could repeat work."
        }
        ActionReason::ConfigurationError => "The candidate has no usable policy; fix the profile.",
        ActionReason::NoEligibleCandidate => "No other candidate was available in this cycle.",
        ActionReason::WaitCancelled => "A person cancelled the pending wait.",
        ActionReason::StoppedByUser => "A person stopped automatic work.",
        ActionReason::AmbiguousDispatch => {
            "After a restart it is unknown whether the last attempt ran, so it is not repeated automatically."
        }
    }
}

const fn decision_text(kind: DecisionKind) -> &'static str {
    match kind {
        DecisionKind::WaitForReset => "wait for the reset time, then try once",
        DecisionKind::Retry => "retry the same candidate",
        DecisionKind::Skip => "skip to the next candidate",
        DecisionKind::Stop => "stop for a person (the policy says Stop)",
        DecisionKind::Manual => "stop for a person (automatic recovery is not allowed)",
    }
}

/// What happens next, in one or two sentences.
pub fn next_outcome(s: &RouteSnapshot) -> String {
    let then = s
        .on_exhausted
        .map(|o| {
            format!(
                " When recovery on this candidate is used up: {}.",
                describe_outcome(o)
            )
        })
        .unwrap_or_default();
    if let Some(hold) = &s.hold {
        return format!(
            "Waiting: the shared circuit {} is open after failures on that resource, so the attempt on {} \
             starts when it reopens (no later than {}), or sooner if another route's try succeeds.{then}",
            hold.circuit,
            s.candidate_id,
            format_utc(hold.until)
        );
    }
    match s.state {
        StateName::RetryWait => format!(
            "At the deadline, retry {} of {} on {}.{then}",
            s.retry_ordinal.unwrap_or(0),
            s.max_retries.unwrap_or(0),
            s.candidate_id
        ),
        StateName::WaitingForReset => {
            format!("At the reset time, one more attempt on {}.{then}", s.candidate_id)
        }
        StateName::Retrying => format!("A retry is running on {}.{then}", s.candidate_id),
        StateName::Active => format!("Work is running on {}.", s.candidate_id),
        StateName::Switching => "Choosing the next eligible candidate.".to_owned(),
        StateName::ActionRequired => format!(
            "Nothing happens until a person acts. {}",
            s.action_reason.map(reason_text).unwrap_or_default()
        ),
        StateName::Completed => "Nothing: the work completed.".to_owned(),
        StateName::Abandoned => "Nothing: the route was abandoned.".to_owned(),
    }
}

/// The policy a decision used, in one sentence.
pub fn snapshot_text(d: &Decision) -> String {
    match d.policy.map(ValidatedClassPolicy::new) {
        Some(Ok(p)) => describe_policy(&p),
        Some(Err(_)) => "The stored policy snapshot is not valid under the current limits.".to_owned(),
        None => "No class policy applied.".to_owned(),
    }
}

/// A decision in words: outcome, reason, cause, ordinal, deadline, policy snapshot.
#[component]
pub fn DecisionView(decision: Decision) -> impl IntoView {
    let code = decision.code.map_or("unclassified", |c| c.as_str());
    let retry = decision
        .retry_ordinal
        .map(|k| format!("retry {k} of {}", decision.max_retries));
    view! {
        <dl class="grid grid-cols-1 gap-x-3 gap-y-0.5 text-sm sm:grid-cols-[auto_1fr]">
            <dt class="font-medium text-slate-900">"Decision"</dt>
            <dd class="text-slate-800">
                {decision_text(decision.kind)}
                {retry.map(|r| format!(" ({r})"))}
            </dd>
            <dt class="font-medium text-slate-900">"Cause"</dt>
            <dd class="text-slate-800">
                {describe_code(code)} " "
                <code class="break-all rounded bg-slate-100 px-1 text-xs">{code}</code>
                {format!(" · {}", class_label(decision.class))}
            </dd>
            {decision
                .deadline
                .map(|d| {
                    view! {
                        <dt class="font-medium text-slate-900">"Deadline"</dt>
                        <dd class="text-slate-800">{format_utc(d)}</dd>
                    }
                })}
            <dt class="font-medium text-slate-900">"Policy used"</dt>
            <dd class="text-slate-800">{snapshot_text(&decision)}</dd>
        </dl>
    }
}

/// From how long an agent takes to report a provider's error on, its own retries are the
/// likely reason (the shortest of them, Codex's, take about 25 s against a local provider).
pub const AGENT_OWN_RETRY_NOTICE_SECS: i64 = 60;

/// What a failure's history entry says about the agent's own retries: a failed `acp` attempt
/// whose agent took [`AGENT_OWN_RETRY_NOTICE_SECS`] or more from its start to report a
/// provider's error (a classified one; not its process ending, nor a hang nobody recognised).
/// The agents retry such an error by themselves first and name neither the count nor the time
/// (README, "Agents that retry on their own"), so the time from the attempt's start is the
/// evidence. `None` otherwise.
pub fn agent_own_retry_note(entry: &HistoryEntry, dispatches: &[DispatchRecord]) -> Option<String> {
    if entry.event != EventKind::Failed {
        return None;
    }
    let code = entry.classification.as_ref()?.code?;
    if code == SemanticCode::AgentTransportLost {
        return None;
    }
    let attempt = entry.attempt?;
    let d = dispatches
        .iter()
        .find(|d| d.attempt == attempt && d.dispatcher == DispatcherKind::Acp)?;
    let took = (d.settled_at.unwrap_or(entry.at) - d.started_at?).num_seconds();
    (took >= AGENT_OWN_RETRY_NOTICE_SECS).then(|| {
        format!(
            "The agent took {} to report this error. Agents retry a provider's error by themselves \
             before they report it, without saying how often, so most of that time was likely its own \
             retrying, before this policy's. README (\"Agents that retry on their own\") gives each \
             agent's setting that turns it off.",
            span_text(took)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: Option<SemanticCode>, attempt: u32, at: i64) -> HistoryEntry {
        HistoryEntry {
            seq: 3,
            at: chrono::DateTime::from_timestamp(at, 0).unwrap(),
            event: EventKind::Failed,
            from: Some(StateName::Active),
            to: StateName::RetryWait,
            generation: 3,
            candidate_id: "claude".into(),
            attempt: Some(attempt),
            profile_revision: 1,
            decision: None,
            classification: Some(policy::classification::Classification {
                code,
                class: ClassState::Transient,
                reason: None,
                catalogue_version: "1".into(),
                confidence: policy::classification::Confidence::High,
                scope: None,
                classifier_rule: None,
                provider_id: None,
                model_id: None,
                phase: None,
                occurred_at: None,
                retry_after_seconds: None,
                reset_at: None,
                safe_excerpt: None,
            }),
        }
    }

    fn dispatch(
        attempt: u32,
        dispatcher: DispatcherKind,
        started: i64,
        settled: Option<i64>,
    ) -> DispatchRecord {
        let t = |s: i64| chrono::DateTime::from_timestamp(s, 0).unwrap();
        DispatchRecord {
            attempt,
            candidate_id: "claude".into(),
            kind: policy::route::AttemptKind::Retry,
            dispatcher,
            scheduled_generation: 1,
            invocation_generation: Some(1),
            status: policy::api::DispatchStatus::Settled,
            outcome: Some(policy::api::DispatchOutcome::Failed),
            scheduled_at: t(started),
            started_at: Some(t(started)),
            settled_at: settled.map(t),
        }
    }

    #[test]
    fn an_agent_that_took_minutes_to_report_a_provider_error_is_said_to_have_retried_on_its_own() {
        let t0 = 1_800_000_000;
        let overloaded = Some(SemanticCode::ProviderOverloaded);
        let acp = [dispatch(1, DispatcherKind::Acp, t0, Some(t0 + 190))];
        let note = agent_own_retry_note(&failure(overloaded, 1, t0 + 190), &acp).unwrap();
        assert!(
            note.starts_with("The agent took 3 min 10 s to report this error."),
            "{note}"
        );
        assert!(note.contains("Agents that retry on their own"), "{note}");
        // Under a minute, it says nothing.
        let quick = [dispatch(1, DispatcherKind::Acp, t0, Some(t0 + 59))];
        assert_eq!(
            agent_own_retry_note(&failure(overloaded, 1, t0 + 59), &quick),
            None
        );
        // Not an agent Recourse ran, not this attempt, not a provider's error: nothing.
        let http = [dispatch(1, DispatcherKind::Http, t0, Some(t0 + 190))];
        assert_eq!(
            agent_own_retry_note(&failure(overloaded, 1, t0 + 190), &http),
            None
        );
        assert_eq!(
            agent_own_retry_note(&failure(overloaded, 2, t0 + 190), &acp),
            None
        );
        let died = Some(SemanticCode::AgentTransportLost);
        assert_eq!(agent_own_retry_note(&failure(died, 1, t0 + 190), &acp), None);
        assert_eq!(agent_own_retry_note(&failure(None, 1, t0 + 190), &acp), None);
        // A success is no failure to explain.
        let mut ok = failure(overloaded, 1, t0 + 190);
        ok.event = EventKind::Succeeded;
        assert_eq!(agent_own_retry_note(&ok, &acp), None);
    }

    #[test]
    fn a_held_attempt_says_what_it_waits_for_and_until_when() {
        let mut s = policy::route::start(&[policy::route::CandidateOption::now("main")])
            .unwrap()
            .next
            .snapshot();
        let until = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        s.hold = Some(policy::route::Hold {
            circuit: "provider:anthropic".into(),
            until,
        });
        let text = next_outcome(&s);
        assert!(text.contains("provider:anthropic"), "{text}");
        assert!(text.contains(&format_utc(until)), "{text}");
    }

    #[test]
    fn codes_are_described_in_plain_words_and_unknown_ones_say_so() {
        assert_eq!(describe_code("provider_overloaded"), "The provider is overloaded");
        assert!(describe_code("unclassified").starts_with("Not recognised"));
        assert!(describe_code("some_raw_provider_text").starts_with("Not recognised"));
    }
}
