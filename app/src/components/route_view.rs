//! How a route reads to a person: its state, the failure class, the safe cause (stable code and
//! a plain description, never provider text), the retry ordinal and maximum, the deadline, what
//! happens next, and its history with the policy snapshot each decision used.

use crate::components::time::format_utc;
use leptos::prelude::*;
use policy::{
    class::SemanticCode,
    classification::ClassState,
    document::ValidatedClassPolicy,
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

#[cfg(test)]
mod tests {
    use super::*;

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
