//! The shared evaluator: one classified failure, one candidate's policy, one decision.
//!
//! Kanban, workflows, utility calls and Office all call this (through the route machine), so a
//! dynamic profile means the same thing everywhere. The order is the spec's, and it is the
//! order of the code below:
//!
//! 1. Stale, unclassified, inconsistent or effect-unsafe evidence, or an unusable policy:
//!    manual recovery. User configuration cannot override this step.
//! 2. Reset waiting, when enabled, unused for this candidate and class in this route cycle, and
//!    the validated hint is in the future and no later than `max_wait_seconds`: wait until the
//!    hint exactly (never shortened). A hint at or before `now` is ignored; one beyond the
//!    maximum is not waited for.
//! 3. Otherwise a retry of the same candidate while budget remains, after
//!    [`crate::schedule::retry_delay_seconds`] for the next ordinal.
//! 4. Otherwise `on_exhausted`: skip or stop.
//!
//! Waiting and its one post-wait attempt do not consume the retry budget: [`ClassUsage`]
//! counts them separately, and the route machine only bumps `retries_used` on a retry.
//!
//! The timing hint: `reset_at` is absolute; `retry_after_seconds` counts from `occurred_at`
//! (or from `now` when absent or in the future, so an adapter's clock cannot stretch a wait).
//! When both are given, the later deadline is the one that must pass. Only the classifier
//! (validated structured hints and catalogue extractors) sets these fields.
//!
//! Why [`Decision`] is flat rather than an enum with data: it is a wire type that the UI, the
//! history rows and the API all read, and flat optional fields are what their JSON readers
//! handle best. The route machine reads `kind` and `deadline` together and fails closed when
//! they disagree.

use crate::{
    class::{ErrorClass, SemanticCode},
    classification::{ClassState, Classification, Confidence, Gate, GateReason, UnclassifiedReason},
    document::{ClassPolicy, OnExhausted, ValidatedCandidatePolicy, ValidatedClassPolicy},
    schedule::retry_delay_seconds,
};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::{fmt, num::NonZeroU32};

/// What one class of one candidate has used in the current route cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassUsage {
    /// Retries scheduled so far (the last retry ordinal).
    pub retries_used: u32,
    /// Whether reset waiting was used (at most once per cycle).
    pub reset_wait_used: bool,
}

/// Both classes of one candidate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateUsage {
    pub transient: ClassUsage,
    pub hard: ClassUsage,
}

impl CandidateUsage {
    pub fn class(&self, class: ErrorClass) -> ClassUsage {
        match class {
            ErrorClass::Transient => self.transient,
            ErrorClass::Hard => self.hard,
        }
    }

    pub fn class_mut(&mut self, class: ErrorClass) -> &mut ClassUsage {
        match class {
            ErrorClass::Transient => &mut self.transient,
            ErrorClass::Hard => &mut self.hard,
        }
    }
}

/// Everything the evaluator looks at. `policy` is `None` when the candidate's stored policy
/// could not be loaded (invalid legacy data, candidate missing from the profile): that can
/// never authorize work.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a> {
    pub classification: &'a Classification,
    pub gate: Gate,
    pub policy: Option<&'a ValidatedCandidatePolicy>,
    pub usage: CandidateUsage,
}

/// What the route does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Wait durably until the trusted reset, then try the same candidate once.
    WaitForReset,
    /// Retry the same candidate after the computed delay.
    Retry,
    /// `on_exhausted = skip`: exclude this candidate for the cycle and evaluate the next.
    Skip,
    /// `on_exhausted = stop`: the configured end of automatic recovery.
    Stop,
    /// The evidence or the configuration does not allow automatic recovery at all.
    Manual,
}

impl DecisionKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionKind::WaitForReset => "wait_for_reset",
            DecisionKind::Retry => "retry",
            DecisionKind::Skip => "skip",
            DecisionKind::Stop => "stop",
            DecisionKind::Manual => "manual",
        }
    }
}

/// Why, machine-readable. Stable spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DecisionReason {
    /// The classifier or the gate says the evidence belongs to an older generation.
    StaleEvidence,
    /// No deterministic rule classified the evidence (see `unclassified_reason`).
    Unclassified,
    /// Class, code and confidence disagree (a class without a code, a code of the other
    /// class, a class at low confidence): fail closed rather than guess.
    InconsistentClassification,
    /// The replay and effect-safety gate denied automatic recovery (see `gate_reason`).
    EffectUnsafe,
    /// The candidate has no usable policy (invalid stored or legacy data).
    ConfigurationError,
    /// A trusted reset within the maximum: wait for it.
    ResetWait,
    /// Retry budget remains.
    RetryBudgetRemaining,
    /// Retry is enabled and every retry of this cycle was used.
    RetryBudgetExhausted,
    /// Retry is disabled and no reset wait applied: `on_exhausted` right away.
    RetryDisabled,
}

impl DecisionReason {
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionReason::StaleEvidence => "stale_evidence",
            DecisionReason::Unclassified => "unclassified",
            DecisionReason::InconsistentClassification => "inconsistent_classification",
            DecisionReason::EffectUnsafe => "effect_unsafe",
            DecisionReason::ConfigurationError => "configuration_error",
            DecisionReason::ResetWait => "reset_wait",
            DecisionReason::RetryBudgetRemaining => "retry_budget_remaining",
            DecisionReason::RetryBudgetExhausted => "retry_budget_exhausted",
            DecisionReason::RetryDisabled => "retry_disabled",
        }
    }
}

impl fmt::Display for DecisionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why reset waiting did not apply, when the evaluation got that far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitSkipReason {
    /// Reset waiting is disabled in this class policy.
    Disabled,
    /// This candidate and class already waited once in this route cycle.
    AlreadyUsed,
    /// The evidence carries no validated timing hint.
    NoHint,
    /// The hint is at or before now.
    HintNotInFuture,
    /// The hint is later than `max_wait_seconds` (it is not shortened).
    HintBeyondMaximum,
}

/// One decision of the evaluator, with the policy snapshot it used. Persisted with the route
/// and in attempt history; later profile or catalogue edits never rewrite it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Decision {
    /// The pending outcome.
    pub kind: DecisionKind,
    pub reason: DecisionReason,
    pub decided_at: DateTime<Utc>,
    /// Absolute UTC deadline of a wait or retry.
    pub deadline: Option<DateTime<Utc>>,
    /// Seconds from `decided_at` to `deadline`, rounded up.
    pub delay_seconds: Option<u64>,
    /// 1-based retry ordinal, for a retry.
    pub retry_ordinal: Option<u32>,
    /// The retry budget of the policy used (0 when retry is disabled or no policy applied).
    pub max_retries: u32,
    /// What happens once recovery on this candidate is used up.
    pub on_exhausted: Option<OnExhausted>,
    pub wait_skipped: Option<WaitSkipReason>,
    pub gate_reason: Option<GateReason>,
    pub unclassified_reason: Option<UnclassifiedReason>,
    #[serde(with = "crate::classification::code_or_unclassified")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::classification::code_schema))]
    pub code: Option<SemanticCode>,
    pub class: ClassState,
    pub catalogue_version: String,
    pub classifier_rule: Option<String>,
    /// The class policy as it was when deciding (absent when the class is unknown or the
    /// candidate had no usable policy).
    pub policy: Option<ClassPolicy>,
}

impl Decision {
    /// The configurable class this decision was about, if any.
    pub fn error_class(&self) -> Option<ErrorClass> {
        match self.class {
            ClassState::Transient => Some(ErrorClass::Transient),
            ClassState::Hard => Some(ErrorClass::Hard),
            ClassState::Unclassified => None,
        }
    }
}

/// Evaluates one failure. Total: every input yields a decision.
pub fn evaluate(failure: &Failure<'_>, now: DateTime<Utc>) -> Decision {
    let c = failure.classification;
    let class = consistent_class(c);
    let policy = match (class, failure.policy) {
        (Ok(class), Some(p)) => Some(*p.policy(class)),
        _ => None,
    };
    let mut d = Decision {
        kind: DecisionKind::Manual,
        reason: DecisionReason::Unclassified,
        decided_at: now,
        deadline: None,
        delay_seconds: None,
        retry_ordinal: None,
        max_retries: policy.map_or(0, |p| p.max_retries()),
        on_exhausted: policy.map(|p| p.on_exhausted()),
        wait_skipped: None,
        gate_reason: failure.gate.reason,
        unclassified_reason: c.reason,
        code: c.code,
        class: c.class,
        catalogue_version: c.catalogue_version.clone(),
        classifier_rule: c.classifier_rule.clone(),
        policy: policy.map(|p| p.to_wire()),
    };

    // 1. Evidence that cannot authorize recovery, whatever the policy says.
    let gate_denies = !failure.gate.automatic_recovery || failure.gate.reason.is_some();
    if failure.gate.reason == Some(GateReason::Stale) || c.reason == Some(UnclassifiedReason::Stale) {
        d.reason = DecisionReason::StaleEvidence;
        return d;
    }
    let class = match class {
        Ok(class) => class,
        Err(reason) => {
            d.reason = reason;
            return d;
        }
    };
    if gate_denies {
        d.reason = DecisionReason::EffectUnsafe;
        return d;
    }
    let Some(policy) = policy else {
        d.reason = DecisionReason::ConfigurationError;
        return d;
    };
    let usage = failure.usage.class(class);

    // 2. Reset waiting.
    match reset_deadline(&policy, usage, c, now) {
        Ok(deadline) => {
            d.kind = DecisionKind::WaitForReset;
            d.reason = DecisionReason::ResetWait;
            d.deadline = Some(deadline);
            d.delay_seconds = Some(seconds_until(now, deadline));
            return d;
        }
        Err(skip) => d.wait_skipped = Some(skip),
    }

    // 3. Retry while budget remains.
    if let Some(retry) = policy.retry() {
        if usage.retries_used < retry.max_retries() {
            let ordinal = usage.retries_used.saturating_add(1);
            let delay = NonZeroU32::new(ordinal)
                .map_or(0, |k| retry_delay_seconds(retry.initial_interval_seconds(), k));
            d.kind = DecisionKind::Retry;
            d.reason = DecisionReason::RetryBudgetRemaining;
            d.retry_ordinal = Some(ordinal);
            d.delay_seconds = Some(delay);
            d.deadline = Some(crate::time::after_seconds(now, delay));
            return d;
        }
        d.reason = DecisionReason::RetryBudgetExhausted;
    } else {
        d.reason = DecisionReason::RetryDisabled;
    }

    // 4. The configured exhausted outcome.
    d.kind = match policy.on_exhausted() {
        OnExhausted::Skip => DecisionKind::Skip,
        OnExhausted::Stop => DecisionKind::Stop,
    };
    d
}

/// The configurable class, or why there is none to act on.
fn consistent_class(c: &Classification) -> Result<ErrorClass, DecisionReason> {
    let class = match c.class {
        ClassState::Unclassified => return Err(DecisionReason::Unclassified),
        ClassState::Transient => ErrorClass::Transient,
        ClassState::Hard => ErrorClass::Hard,
    };
    match c.code {
        Some(code) if code.class() == class && c.confidence != Confidence::Low && c.reason.is_none() => {
            Ok(class)
        }
        _ => Err(DecisionReason::InconsistentClassification),
    }
}

fn reset_deadline(
    policy: &ValidatedClassPolicy,
    usage: ClassUsage,
    c: &Classification,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, WaitSkipReason> {
    let max_wait = policy.max_wait_seconds().ok_or(WaitSkipReason::Disabled)?;
    if usage.reset_wait_used {
        return Err(WaitSkipReason::AlreadyUsed);
    }
    let base = c.occurred_at.map_or(now, |t| t.min(now));
    let mut hints: Vec<Option<DateTime<Utc>>> = Vec::with_capacity(2);
    if let Some(after) = c.retry_after_seconds {
        hints.push(add_seconds(base, after));
    }
    if let Some(reset_at) = c.reset_at {
        hints.push(Some(reset_at));
    }
    if hints.is_empty() {
        return Err(WaitSkipReason::NoHint);
    }
    // A hint too far to represent is beyond every maximum.
    let deadline = hints
        .into_iter()
        .try_fold(DateTime::<Utc>::MIN_UTC, |acc, h| h.map(|h| acc.max(h)))
        .ok_or(WaitSkipReason::HintBeyondMaximum)?;
    if deadline <= now {
        return Err(WaitSkipReason::HintNotInFuture);
    }
    let limit = crate::time::after_seconds(now, max_wait);
    if deadline > limit {
        return Err(WaitSkipReason::HintBeyondMaximum);
    }
    Ok(deadline)
}

pub(crate) fn add_seconds(t: DateTime<Utc>, seconds: u64) -> Option<DateTime<Utc>> {
    let seconds = i64::try_from(seconds).ok()?;
    t.checked_add_signed(TimeDelta::try_seconds(seconds)?)
}

/// Whole seconds from `from` to `to`, rounded up; 0 when `to` is not later.
fn seconds_until(from: DateTime<Utc>, to: DateTime<Utc>) -> u64 {
    let delta = to.signed_duration_since(from);
    let whole = u64::try_from(delta.num_seconds()).unwrap_or(0);
    if delta.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{CandidatePolicy, RetryPolicy, WaitForResetPolicy};
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
    }

    fn classified(code: SemanticCode) -> Classification {
        Classification {
            code: Some(code),
            class: code.class().into(),
            reason: None,
            catalogue_version: "cat-1".into(),
            confidence: Confidence::High,
            scope: None,
            classifier_rule: Some("rule.test".into()),
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: Some(now()),
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    fn candidate(retry: Option<(u32, u64)>, wait: Option<u64>, on: OnExhausted) -> ValidatedCandidatePolicy {
        let p = ClassPolicy {
            retry: retry.map_or(ClassPolicy::default().retry, |(m, i)| RetryPolicy {
                enabled: true,
                max_retries: m,
                initial_interval_seconds: i,
            }),
            wait_for_reset: wait.map_or(ClassPolicy::default().wait_for_reset, |w| WaitForResetPolicy {
                enabled: true,
                max_wait_seconds: w,
            }),
            on_exhausted: on,
        };
        ValidatedCandidatePolicy::try_from(CandidatePolicy {
            id: "a".into(),
            transient: p,
            hard: p,
        })
        .unwrap()
    }

    fn eval(
        c: &Classification,
        gate: Gate,
        p: Option<&ValidatedCandidatePolicy>,
        usage: CandidateUsage,
    ) -> Decision {
        evaluate(
            &Failure {
                classification: c,
                gate,
                policy: p,
                usage,
            },
            now(),
        )
    }

    fn used(retries_used: u32, reset_wait_used: bool) -> CandidateUsage {
        let u = ClassUsage {
            retries_used,
            reset_wait_used,
        };
        CandidateUsage {
            transient: u,
            hard: u,
        }
    }

    #[test]
    fn retry_ordinals_follow_the_doubling_schedule() {
        let p = candidate(Some((3, 5)), None, OnExhausted::Skip);
        let c = classified(SemanticCode::ModelCapacity);
        for (n, delay) in [(0, 5), (1, 10), (2, 20)] {
            let d = eval(&c, Gate::ALLOW, Some(&p), used(n, false));
            assert_eq!(d.kind, DecisionKind::Retry);
            assert_eq!(d.retry_ordinal, Some(n + 1));
            assert_eq!(d.delay_seconds, Some(delay));
            assert_eq!(d.deadline, Some(now() + TimeDelta::seconds(delay as i64)));
            assert_eq!(d.max_retries, 3);
        }
        let d = eval(&c, Gate::ALLOW, Some(&p), used(3, false));
        assert_eq!(
            (d.kind, d.reason),
            (DecisionKind::Skip, DecisionReason::RetryBudgetExhausted)
        );
    }

    #[test]
    fn disabled_recovery_applies_on_exhausted_immediately() {
        let p = candidate(None, None, OnExhausted::Stop);
        let d = eval(
            &classified(SemanticCode::QuotaLimited),
            Gate::ALLOW,
            Some(&p),
            used(0, false),
        );
        assert_eq!(
            (d.kind, d.reason),
            (DecisionKind::Stop, DecisionReason::RetryDisabled)
        );
        assert_eq!(d.wait_skipped, Some(WaitSkipReason::Disabled));
    }

    #[test]
    fn reset_wait_uses_the_hint_exactly_and_only_once() {
        let p = candidate(Some((2, 5)), Some(300), OnExhausted::Skip);
        let mut c = classified(SemanticCode::QuotaLimited);
        c.reset_at = Some(now() + TimeDelta::seconds(60));
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
        assert_eq!((d.kind, d.deadline), (DecisionKind::WaitForReset, c.reset_at));
        assert_eq!(d.retry_ordinal, None);
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, true));
        assert_eq!(
            (d.kind, d.wait_skipped),
            (DecisionKind::Retry, Some(WaitSkipReason::AlreadyUsed))
        );
    }

    #[test]
    fn reset_hints_in_the_past_or_beyond_the_maximum_are_not_waited_for() {
        let p = candidate(None, Some(300), OnExhausted::Skip);
        let mut c = classified(SemanticCode::RateLimited);
        for (reset, why) in [
            (now(), WaitSkipReason::HintNotInFuture),
            (now() - TimeDelta::seconds(1), WaitSkipReason::HintNotInFuture),
            (now() + TimeDelta::seconds(301), WaitSkipReason::HintBeyondMaximum),
            (now() + TimeDelta::hours(6), WaitSkipReason::HintBeyondMaximum),
        ] {
            c.reset_at = Some(reset);
            let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
            assert_eq!(
                (d.kind, d.wait_skipped),
                (DecisionKind::Skip, Some(why)),
                "{reset}"
            );
        }
        c.reset_at = Some(now() + TimeDelta::seconds(300));
        assert_eq!(
            eval(&c, Gate::ALLOW, Some(&p), used(0, false)).kind,
            DecisionKind::WaitForReset
        );
    }

    #[test]
    fn retry_after_counts_from_the_observation_and_the_later_hint_wins() {
        let p = candidate(None, Some(300), OnExhausted::Skip);
        let mut c = classified(SemanticCode::RateLimited);
        c.occurred_at = Some(now() - TimeDelta::seconds(10));
        c.retry_after_seconds = Some(30);
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
        assert_eq!(d.deadline, Some(now() + TimeDelta::seconds(20)));
        c.reset_at = Some(now() + TimeDelta::seconds(100));
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
        assert_eq!(d.deadline, c.reset_at);
        // A future observation time cannot stretch the wait.
        c.reset_at = None;
        c.occurred_at = Some(now() + TimeDelta::days(1));
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
        assert_eq!(d.deadline, Some(now() + TimeDelta::seconds(30)));
        // An absurd hint is beyond every maximum, not an overflow.
        c.retry_after_seconds = Some(u64::MAX);
        let d = eval(&c, Gate::ALLOW, Some(&p), used(0, false));
        assert_eq!(d.wait_skipped, Some(WaitSkipReason::HintBeyondMaximum));
    }

    #[test]
    fn unsafe_stale_unclassified_and_inconsistent_evidence_goes_to_a_person() {
        let p = candidate(Some((3, 5)), Some(300), OnExhausted::Skip);
        let good = classified(SemanticCode::ProviderOverloaded);
        let d = eval(
            &good,
            Gate::deny(GateReason::ToolActivity),
            Some(&p),
            used(0, false),
        );
        assert_eq!(
            (d.kind, d.reason, d.gate_reason),
            (
                DecisionKind::Manual,
                DecisionReason::EffectUnsafe,
                Some(GateReason::ToolActivity)
            )
        );
        assert!(d.policy.is_some(), "the overridden policy is still recorded");

        let d = eval(&good, Gate::deny(GateReason::Stale), Some(&p), used(0, false));
        assert_eq!(d.reason, DecisionReason::StaleEvidence);

        let mut unknown = good.clone();
        unknown.code = None;
        unknown.class = ClassState::Unclassified;
        unknown.reason = Some(UnclassifiedReason::NoMatch);
        let d = eval(
            &unknown,
            Gate::deny(GateReason::Unclassified),
            Some(&p),
            used(0, false),
        );
        assert_eq!(
            (d.kind, d.reason),
            (DecisionKind::Manual, DecisionReason::Unclassified)
        );
        assert_eq!(d.policy, None);

        let mut wrong = good.clone();
        wrong.class = ClassState::Hard;
        assert_eq!(
            eval(&wrong, Gate::ALLOW, Some(&p), used(0, false)).reason,
            DecisionReason::InconsistentClassification
        );
        let mut low = good.clone();
        low.confidence = Confidence::Low;
        assert_eq!(
            eval(&low, Gate::ALLOW, Some(&p), used(0, false)).reason,
            DecisionReason::InconsistentClassification
        );

        let half_open = Gate {
            automatic_recovery: false,
            reason: None,
        };
        assert_eq!(
            eval(&good, half_open, Some(&p), used(0, false)).reason,
            DecisionReason::EffectUnsafe
        );
    }

    #[test]
    fn a_missing_policy_never_authorizes_work() {
        let d = eval(
            &classified(SemanticCode::NetworkUnavailable),
            Gate::ALLOW,
            None,
            used(0, false),
        );
        assert_eq!(
            (d.kind, d.reason),
            (DecisionKind::Manual, DecisionReason::ConfigurationError)
        );
    }

    #[test]
    fn decisions_serialize_with_stable_spellings() {
        let mut unknown = classified(SemanticCode::NetworkUnavailable);
        unknown.code = None;
        unknown.class = ClassState::Unclassified;
        unknown.reason = Some(UnclassifiedReason::NoMatch);
        let d = eval(
            &unknown,
            Gate::deny(GateReason::Unclassified),
            None,
            used(0, false),
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["kind"], "manual");
        assert_eq!(v["reason"], "unclassified");
        assert_eq!(v["code"], "unclassified");
        assert_eq!(v["gate_reason"], "unclassified");
        let back: Decision = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }
}
