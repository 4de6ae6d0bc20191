//! The classifier's verdict (design contract 2) and the effect-safety gate.
//!
//! These are wire types: the classifier produces them, the route engine persists them in
//! attempt history, and the UI renders them. A classification never carries raw provider
//! text; `safe_excerpt` is bounded and redacted by the classifier before it gets here.

use crate::class::{ErrorClass, SemanticCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Classification state: one of the two classes, or unclassified (never a policy key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ClassState {
    Transient,
    Hard,
    Unclassified,
}

impl From<ErrorClass> for ClassState {
    fn from(c: ErrorClass) -> Self {
        match c {
            ErrorClass::Transient => ClassState::Transient,
            ErrorClass::Hard => ClassState::Hard,
        }
    }
}

/// Why evidence stayed unclassified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum UnclassifiedReason {
    /// No catalogue rule matched.
    NoMatch,
    /// Only a low-confidence rule matched.
    LowConfidence,
    /// The evidence belongs to an older prompt generation.
    Stale,
    /// Two rules of the same tier disagreed.
    Conflicting,
    /// A task, repository, permission, local runtime, cancellation or resume-state error.
    NotProviderError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// What the failure applies to, when known. Circuits key on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Provider,
    Account,
    Model,
    Profile,
    Request,
}

/// The lifecycle phase the evidence was observed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Launch,
    SessionInit,
    Prompt,
    Streaming,
    Tool,
    Shutdown,
}

/// Whether the prompt reached the agent or provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PromptDelivery {
    #[default]
    NotSent,
    Confirmed,
    Ambiguous,
}

/// Observed side effects of the failed attempt (given by the adapter, or derived from ACP
/// updates; the two are combined with OR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct Effects {
    pub assistant_output: bool,
    pub tool_activity: bool,
    pub partial_result: bool,
    pub prompt_delivery: PromptDelivery,
}

/// The classifier's result. Field names and spellings are contract 2 of the design brief.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Classification {
    /// The semantic code; `None` is spelled `"unclassified"` on the wire.
    #[serde(with = "code_or_unclassified")]
    #[cfg_attr(feature = "openapi", schema(schema_with = code_schema))]
    pub code: Option<SemanticCode>,
    pub class: ClassState,
    /// Present exactly when `class` is unclassified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<UnclassifiedReason>,
    pub catalogue_version: String,
    pub confidence: Confidence,
    pub scope: Option<Scope>,
    pub classifier_rule: Option<String>,
    pub provider_id: Option<String>,
    pub model_id: Option<String>,
    pub phase: Option<Phase>,
    pub occurred_at: Option<DateTime<Utc>>,
    pub retry_after_seconds: Option<u64>,
    pub reset_at: Option<DateTime<Utc>>,
    pub safe_excerpt: Option<String>,
}

impl Classification {
    /// Unclassified for `reason` by the catalogue `catalogue_version`: no code, no scope, no
    /// timing, nothing else known.
    pub fn unclassified(reason: UnclassifiedReason, catalogue_version: String) -> Classification {
        Classification {
            code: None,
            class: ClassState::Unclassified,
            reason: Some(reason),
            catalogue_version,
            confidence: Confidence::Low,
            scope: None,
            classifier_rule: None,
            provider_id: None,
            model_id: None,
            phase: None,
            occurred_at: None,
            retry_after_seconds: None,
            reset_at: None,
            safe_excerpt: None,
        }
    }

    /// The configurable class, if any. Unclassified evidence has none.
    pub fn error_class(&self) -> Option<ErrorClass> {
        match self.class {
            ClassState::Transient => Some(ErrorClass::Transient),
            ClassState::Hard => Some(ErrorClass::Hard),
            ClassState::Unclassified => None,
        }
    }
}

/// Why automatic recovery is not allowed on this evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GateReason {
    Stale,
    Unclassified,
    AssistantOutput,
    ToolActivity,
    PartialResult,
    AmbiguousDelivery,
    CancelRequested,
}

/// The replay and effect-safety verdict for one piece of evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Gate {
    pub automatic_recovery: bool,
    /// `None` exactly when `automatic_recovery` is true.
    pub reason: Option<GateReason>,
}

impl Gate {
    pub const ALLOW: Gate = Gate {
        automatic_recovery: true,
        reason: None,
    };

    pub const fn deny(reason: GateReason) -> Gate {
        Gate {
            automatic_recovery: false,
            reason: Some(reason),
        }
    }
}

/// Spells a missing code as `"unclassified"` (contract 2); shared by every wire type that
/// carries a code.
/// The OpenAPI schema of a `code` field: every semantic code, or `"unclassified"`.
#[cfg(feature = "openapi")]
pub(crate) fn code_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let codes = SemanticCode::ALL
        .into_iter()
        .map(SemanticCode::as_str)
        .chain(["unclassified"]);
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .enum_values(Some(codes))
        .description(Some("A stable semantic code, or `unclassified`."))
        .build()
}

pub(crate) mod code_or_unclassified {
    use crate::class::SemanticCode;
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(code: &Option<SemanticCode>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(code.map_or("unclassified", SemanticCode::as_str))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SemanticCode>, D::Error> {
        let s = std::borrow::Cow::<str>::deserialize(d)?;
        if s == "unclassified" {
            return Ok(None);
        }
        SemanticCode::parse(&s)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("unknown semantic code `{s}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unclassified_code_is_spelled_unclassified_on_the_wire() {
        let c = Classification::unclassified(UnclassifiedReason::NoMatch, "test".into());
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["code"], "unclassified");
        assert_eq!(v["class"], "unclassified");
        assert_eq!(v["reason"], "no_match");
        let back: Classification = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
