//! The replay and effect-safety gate (contract 2): may recovery run on this evidence alone?
//!
//! The gate is decided here, from the envelope and the classification, and no user policy can
//! override it. It fails closed: the first reason that applies, in this order, denies.
//! 1. `stale`: the evidence belongs to an older prompt generation.
//! 2. `unclassified`: nothing trustworthy says what failed (any unclassified reason).
//! 3. `cancel_requested`: a person asked to stop.
//! 4. `tool_activity`: a tool ran (given, derived from ACP tool calls, or phase `tool`).
//! 5. `assistant_output`: real assistant text reached the user.
//! 6. `partial_result`: a utility call returned part of its result.
//! 7. `ambiguous_delivery`: it is unknown whether the prompt reached the provider.
//!
//! `confirmed` and `not_sent` delivery both pass: a confirmed prompt that failed before any
//! output or effect can be replayed, and an unsent one trivially can.
//!
//! The one exception (the spec's "provider-supported resumable retry guarantee"): assistant
//! output does not deny when the envelope carries a [`Resume`] fact for its own generation and
//! the prompt's delivery is confirmed. Only the `acp` dispatcher sets that fact (it cannot come
//! from JSON), for an agent that advertised `loadSession`, when the policy would retry the same
//! candidate; the retry then loads that very session instead of starting a new one, and
//! Recourse never starts the same prompt generation elsewhere while the session holds its
//! output. Nothing else is waived: tool activity, a partial result, ambiguous delivery,
//! staleness, a cancel and unclassified evidence deny with or without it.
//!
//! [`Resume`]: crate::envelope::Resume

use crate::envelope::Envelope;
use policy::classification::{ClassState, Classification, Effects, Gate, GateReason, Phase, PromptDelivery};

pub(crate) fn decide(env: &Envelope, c: &Classification, effects: &Effects) -> Gate {
    let reason = if env.is_stale() {
        Some(GateReason::Stale)
    } else if c.class == ClassState::Unclassified {
        Some(GateReason::Unclassified)
    } else if env.cancel_requested {
        Some(GateReason::CancelRequested)
    } else if effects.tool_activity || env.phase == Some(Phase::Tool) {
        Some(GateReason::ToolActivity)
    } else if effects.assistant_output && !resumable(env, effects) {
        Some(GateReason::AssistantOutput)
    } else if effects.partial_result {
        Some(GateReason::PartialResult)
    } else if effects.prompt_delivery == PromptDelivery::Ambiguous {
        Some(GateReason::AmbiguousDelivery)
    } else {
        None
    };
    reason.map_or(Gate::ALLOW, Gate::deny)
}

/// The resumable retry guarantee holds: a resume fact for this very generation, on a prompt
/// the agent is known to have received.
fn resumable(env: &Envelope, effects: &Effects) -> bool {
    env.resume
        .as_ref()
        .is_some_and(|r| env.generation == Some(r.generation) && !r.session_id.is_empty())
        && effects.prompt_delivery == PromptDelivery::Confirmed
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{
        class::SemanticCode,
        classification::{ClassState, Confidence},
    };

    fn classified() -> Classification {
        Classification {
            code: Some(SemanticCode::ProviderOverloaded),
            class: ClassState::Transient,
            reason: None,
            catalogue_version: "cat-test".into(),
            confidence: Confidence::High,
            scope: None,
            classifier_rule: Some("t.rule".into()),
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: None,
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    fn unclassified() -> Classification {
        Classification {
            code: None,
            class: ClassState::Unclassified,
            reason: Some(policy::classification::UnclassifiedReason::NoMatch),
            ..classified()
        }
    }

    #[test]
    fn classified_pre_result_evidence_allows_recovery() {
        let env = Envelope::default();
        let confirmed = Effects {
            prompt_delivery: PromptDelivery::Confirmed,
            ..Effects::default()
        };
        assert_eq!(decide(&env, &classified(), &confirmed), Gate::ALLOW);
        assert_eq!(decide(&env, &classified(), &Effects::default()), Gate::ALLOW);
    }

    #[test]
    fn each_unsafe_condition_denies_with_its_reason() {
        let env = Envelope::default();
        let c = classified();
        let with = |f: fn(&mut Effects)| {
            let mut e = Effects::default();
            f(&mut e);
            decide(&env, &c, &e)
        };
        assert_eq!(
            with(|e| e.tool_activity = true),
            Gate::deny(GateReason::ToolActivity)
        );
        assert_eq!(
            with(|e| e.assistant_output = true),
            Gate::deny(GateReason::AssistantOutput)
        );
        assert_eq!(
            with(|e| e.partial_result = true),
            Gate::deny(GateReason::PartialResult)
        );
        assert_eq!(
            with(|e| e.prompt_delivery = PromptDelivery::Ambiguous),
            Gate::deny(GateReason::AmbiguousDelivery)
        );
        assert_eq!(
            decide(&env, &unclassified(), &Effects::default()),
            Gate::deny(GateReason::Unclassified)
        );
        let cancelled = Envelope {
            cancel_requested: true,
            ..Envelope::default()
        };
        assert_eq!(
            decide(&cancelled, &c, &Effects::default()),
            Gate::deny(GateReason::CancelRequested)
        );
        let tool_phase = Envelope {
            phase: Some(Phase::Tool),
            ..Envelope::default()
        };
        assert_eq!(
            decide(&tool_phase, &c, &Effects::default()),
            Gate::deny(GateReason::ToolActivity)
        );
    }

    fn resumable_at(generation: u64) -> Envelope<'static> {
        Envelope {
            generation: Some(3),
            resume: Some(crate::envelope::Resume {
                session_id: "sess-1".into(),
                generation,
            }),
            ..Envelope::default()
        }
    }

    #[test]
    fn a_resume_fact_lets_recovery_through_after_assistant_output_only() {
        let c = classified();
        let output = Effects {
            assistant_output: true,
            prompt_delivery: PromptDelivery::Confirmed,
            ..Effects::default()
        };
        assert_eq!(decide(&resumable_at(3), &c, &output), Gate::ALLOW);
        // Without it, or for another generation, output denies.
        assert_eq!(
            decide(&Envelope::default(), &c, &output),
            Gate::deny(GateReason::AssistantOutput)
        );
        assert_eq!(
            decide(&resumable_at(2), &c, &output),
            Gate::deny(GateReason::AssistantOutput)
        );
        // Nothing else is waived.
        let with = |f: fn(&mut Effects)| {
            let mut e = output;
            f(&mut e);
            decide(&resumable_at(3), &c, &e)
        };
        assert_eq!(
            with(|e| e.tool_activity = true),
            Gate::deny(GateReason::ToolActivity)
        );
        assert_eq!(
            with(|e| e.partial_result = true),
            Gate::deny(GateReason::PartialResult)
        );
        assert_eq!(
            with(|e| e.prompt_delivery = PromptDelivery::Ambiguous),
            Gate::deny(GateReason::AssistantOutput),
            "the guarantee needs a confirmed delivery"
        );
        assert_eq!(
            decide(&resumable_at(3), &unclassified(), &output),
            Gate::deny(GateReason::Unclassified)
        );
        let cancelled = Envelope {
            cancel_requested: true,
            ..resumable_at(3)
        };
        assert_eq!(
            decide(&cancelled, &c, &output),
            Gate::deny(GateReason::CancelRequested)
        );
        let stale = Envelope {
            active_generation: Some(4),
            ..resumable_at(3)
        };
        assert_eq!(decide(&stale, &c, &output), Gate::deny(GateReason::Stale));
    }

    #[test]
    fn staleness_is_reported_before_anything_else() {
        let stale = Envelope {
            generation: Some(1),
            active_generation: Some(2),
            cancel_requested: true,
            ..Envelope::default()
        };
        let all_bad = Effects {
            assistant_output: true,
            tool_activity: true,
            partial_result: true,
            prompt_delivery: PromptDelivery::Ambiguous,
        };
        assert_eq!(
            decide(&stale, &unclassified(), &all_bad),
            Gate::deny(GateReason::Stale)
        );
    }
}
