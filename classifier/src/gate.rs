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
    } else if effects.assistant_output {
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
