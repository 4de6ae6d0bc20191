//! "Try an error": what a profile's policy would do with one piece of evidence, before anything
//! is saved or sent. The profile editor asks the server to classify the evidence (the server's
//! classifier, its catalogue and its clock: [`EvidenceTrial`]) and then plays the editor's own,
//! unsaved policy against that classification here, in the browser, with the evaluator every
//! route uses ([`crate::evaluator::evaluate`]).
//!
//! The play assumes the worst plausible case: every attempt fails at once, the same way. So a
//! candidate uses its reset wait (once), then its retries, then its `on_exhausted`; a skip moves
//! to the next candidate, which starts from a clean budget; after the last candidate the route
//! stops for a person, as the route machine does when no candidate is left. The timing hint is
//! the evidence's: an absolute `reset_at` stays where it is, and a relative
//! `retry_after_seconds` counts from each repeated failure (as a provider's fresh `Retry-After`
//! would). Steps carry absolute UTC instants, as the route page shows them.

use crate::{
    classification::{Classification, Gate},
    document::ValidatedCandidatePolicy,
    evaluator::{evaluate, CandidateUsage, DecisionKind, DecisionReason, Failure},
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The server's classification of evidence a person pasted or picked, as of `classified_at`.
/// Nothing was stored or sent; the excerpt is redacted as every excerpt is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceTrial {
    pub classification: Classification,
    /// The replay and effect-safety gate for the evidence as given.
    pub gate: Gate,
    /// The gate had the attempt already shown output before it failed (the same evidence with
    /// `effects.assistant_output` set).
    pub gate_after_output: Gate,
    /// The evidence was cut to the classifier's bounds.
    pub truncated: bool,
    /// The instant the classification was made on the server's clock: timing hints are judged
    /// against it, and the preview's first step happens at it.
    pub classified_at: DateTime<Utc>,
}

/// One step of the preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Wait until `deadline` (a trusted reset), then try the same candidate once.
    WaitForReset,
    /// Retry the same candidate at `deadline`.
    Retry,
    /// Leave this candidate for the cycle and start the next one.
    Switch,
    /// The policy says Stop: a person decides.
    Stop,
    /// The evidence cannot authorize automatic recovery (the gate, or no classification).
    Manual,
    /// Every candidate was skipped: a person decides.
    NoCandidateLeft,
}

/// What happens, where and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub kind: StepKind,
    /// The candidate the failure happened on.
    pub candidate: String,
    /// When the failure is decided on.
    pub at: DateTime<Utc>,
    /// For a wait or a retry: when the next attempt starts.
    pub deadline: Option<DateTime<Utc>>,
    /// For a retry: its 1-based ordinal, of `max_retries`.
    pub retry_ordinal: Option<u32>,
    pub max_retries: u32,
    /// The evaluator's reason, for the words the page shows.
    pub reason: DecisionReason,
}

/// The steps `candidates` (the profile's order) would take if the evidence classified as
/// `classification` with `gate` happened at `now` and every later attempt failed the same way.
/// Always ends in a step that needs a person ([`StepKind::Stop`], [`StepKind::Manual`] or
/// [`StepKind::NoCandidateLeft`]); empty only when there is no candidate.
pub fn preview(
    classification: &Classification,
    gate: Gate,
    candidates: &[ValidatedCandidatePolicy],
    now: DateTime<Utc>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut at = now;
    let mut failure = classification.clone();
    for candidate in candidates {
        let mut usage = CandidateUsage::default();
        // A reset wait, every retry and the outcome: bounded by the policy's own limits. The
        // bound below only guards against an evaluator that never exhausts.
        for _ in 0..=crate::limits::MAX_MAX_RETRIES + 2 {
            let d = evaluate(
                &Failure {
                    classification: &failure,
                    gate,
                    policy: Some(candidate),
                    usage,
                },
                at,
            );
            let mut step = Step {
                kind: StepKind::Manual,
                candidate: candidate.id().to_owned(),
                at,
                deadline: d.deadline,
                retry_ordinal: d.retry_ordinal,
                max_retries: d.max_retries,
                reason: d.reason,
            };
            let class = classification.error_class();
            match (d.kind, class, d.deadline) {
                (DecisionKind::WaitForReset, Some(class), Some(deadline)) => {
                    step.kind = StepKind::WaitForReset;
                    usage.class_mut(class).reset_wait_used = true;
                    steps.push(step);
                    at = deadline;
                }
                (DecisionKind::Retry, Some(class), Some(deadline)) => {
                    step.kind = StepKind::Retry;
                    usage.class_mut(class).retries_used = d.retry_ordinal.unwrap_or(u32::MAX);
                    steps.push(step);
                    at = deadline;
                }
                (DecisionKind::Skip, _, _) => {
                    step.kind = StepKind::Switch;
                    steps.push(step);
                    break;
                }
                (DecisionKind::Stop, _, _) => {
                    step.kind = StepKind::Stop;
                    steps.push(step);
                    return steps;
                }
                _ => {
                    steps.push(step);
                    return steps;
                }
            }
            // The same failure again: a relative hint counts from this attempt.
            failure.occurred_at = None;
        }
        failure.occurred_at = None;
    }
    if let Some(last) = steps.last() {
        let candidate = last.candidate.clone();
        steps.push(Step {
            kind: StepKind::NoCandidateLeft,
            candidate,
            at,
            deadline: None,
            retry_ordinal: None,
            max_retries: 0,
            reason: DecisionReason::RetryBudgetExhausted,
        });
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        class::SemanticCode,
        classification::{ClassState, Confidence, GateReason},
        document::{ClassPolicy, OnExhausted, RetryPolicy, ValidatedClassPolicy, WaitForResetPolicy},
    };
    use chrono::TimeDelta;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn classified(code: SemanticCode, class: ClassState) -> Classification {
        Classification {
            code: Some(code),
            class,
            reason: None,
            catalogue_version: "test".into(),
            confidence: Confidence::High,
            scope: None,
            classifier_rule: Some("test.rule".into()),
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: None,
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    fn class_policy(
        retries: u32,
        initial: u64,
        wait: u64,
        on_exhausted: OnExhausted,
    ) -> ValidatedClassPolicy {
        ValidatedClassPolicy::new(ClassPolicy {
            retry: RetryPolicy {
                enabled: retries > 0,
                max_retries: retries,
                initial_interval_seconds: if retries > 0 { initial } else { 0 },
            },
            wait_for_reset: WaitForResetPolicy {
                enabled: wait > 0,
                max_wait_seconds: wait,
            },
            on_exhausted,
        })
        .unwrap()
    }

    fn candidate(
        id: &str,
        transient: ValidatedClassPolicy,
        hard: ValidatedClassPolicy,
    ) -> ValidatedCandidatePolicy {
        ValidatedCandidatePolicy::new(id, transient, hard).unwrap()
    }

    fn kinds(steps: &[Step]) -> Vec<(StepKind, &str, Option<i64>)> {
        steps
            .iter()
            .map(|s| {
                (
                    s.kind,
                    s.candidate.as_str(),
                    s.deadline.map(|d| (d - t0()).num_seconds()),
                )
            })
            .collect()
    }

    #[test]
    fn a_capacity_error_retries_five_ten_twenty_then_switches_and_stops_when_none_is_left() {
        let main = candidate(
            "main",
            class_policy(3, 5, 0, OnExhausted::Skip),
            class_policy(0, 0, 0, OnExhausted::Stop),
        );
        let backup = candidate(
            "backup",
            class_policy(0, 0, 0, OnExhausted::Skip),
            class_policy(0, 0, 0, OnExhausted::Stop),
        );
        let c = classified(SemanticCode::ModelCapacity, ClassState::Transient);
        let steps = preview(&c, Gate::ALLOW, &[main, backup], t0());
        assert_eq!(
            kinds(&steps),
            vec![
                (StepKind::Retry, "main", Some(5)),
                (StepKind::Retry, "main", Some(15)),
                (StepKind::Retry, "main", Some(35)),
                (StepKind::Switch, "main", None),
                (StepKind::Switch, "backup", None),
                (StepKind::NoCandidateLeft, "backup", None),
            ]
        );
        assert_eq!(steps[2].retry_ordinal, Some(3));
        assert_eq!(steps[2].max_retries, 3);
        assert_eq!(steps[3].at, t0() + TimeDelta::seconds(35));
    }

    #[test]
    fn a_trusted_reset_within_the_maximum_is_waited_for_once_then_the_policy_goes_on() {
        let main = candidate(
            "main",
            class_policy(0, 0, 0, OnExhausted::Skip),
            class_policy(1, 60, 300, OnExhausted::Stop),
        );
        let mut c = classified(SemanticCode::QuotaLimited, ClassState::Hard);
        c.reset_at = Some(t0() + TimeDelta::seconds(120));
        let steps = preview(&c, Gate::ALLOW, &[main], t0());
        assert_eq!(
            kinds(&steps),
            vec![
                (StepKind::WaitForReset, "main", Some(120)),
                (StepKind::Retry, "main", Some(180)),
                (StepKind::Stop, "main", None),
            ]
        );
    }

    #[test]
    fn after_output_or_without_a_classification_a_person_decides_at_once() {
        let main = candidate(
            "main",
            class_policy(3, 5, 0, OnExhausted::Skip),
            class_policy(3, 5, 0, OnExhausted::Skip),
        );
        let c = classified(SemanticCode::ProviderOverloaded, ClassState::Transient);
        let steps = preview(
            &c,
            Gate::deny(GateReason::AssistantOutput),
            std::slice::from_ref(&main),
            t0(),
        );
        assert_eq!(kinds(&steps), vec![(StepKind::Manual, "main", None)]);
        assert_eq!(steps[0].reason, DecisionReason::EffectUnsafe);

        let mut unknown = classified(SemanticCode::ProviderOverloaded, ClassState::Unclassified);
        unknown.code = None;
        unknown.reason = Some(crate::classification::UnclassifiedReason::NoMatch);
        let steps = preview(&unknown, Gate::deny(GateReason::Unclassified), &[main], t0());
        assert_eq!(kinds(&steps), vec![(StepKind::Manual, "main", None)]);
        assert!(preview(&c, Gate::ALLOW, &[], t0()).is_empty());
    }

    #[test]
    fn the_longest_policy_ends_within_its_limits() {
        let most = class_policy(
            crate::limits::MAX_MAX_RETRIES,
            crate::limits::MAX_INITIAL_INTERVAL_SECONDS,
            0,
            OnExhausted::Skip,
        );
        let many: Vec<_> = (0..3).map(|i| candidate(&format!("c{i}"), most, most)).collect();
        let c = classified(SemanticCode::ModelCapacity, ClassState::Transient);
        let steps = preview(&c, Gate::ALLOW, &many, t0());
        let per = crate::limits::MAX_MAX_RETRIES as usize + 1;
        assert_eq!(steps.len(), 3 * per + 1);
        assert_eq!(steps.last().map(|s| s.kind), Some(StepKind::NoCandidateLeft));
    }
}
