//! Error classes and the registry of semantic codes.
//!
//! The class is the stable policy input; the code is diagnostic detail. Every recoverable code
//! belongs to exactly one class, and that assignment is an exhaustive `match`, so a new code
//! without a class does not compile. Codes arrive as strings from the catalogue and the wire;
//! an unknown string parses to `None` and is treated as unclassified, never guessed.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The two configurable classes. `unclassified` is a classification state, not a class: it
/// never keys a policy (see [`crate::classification::ClassState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The provider, network, transport or model is temporarily unable to serve.
    Transient,
    /// The account, subscription, credentials, configuration or model cannot continue without
    /// a longer reset or a change by a person.
    Hard,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 2] = [ErrorClass::Transient, ErrorClass::Hard];

    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Hard => "hard",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The heading of the class's section in the policy form.
    pub const fn label(self) -> &'static str {
        match self {
            ErrorClass::Transient => "Transient errors",
            ErrorClass::Hard => "Hard errors",
        }
    }

    /// What the class means, in visible text under its heading (the spec's wording).
    pub const fn describe(self) -> &'static str {
        match self {
            ErrorClass::Transient => {
                "The provider, network, transport, or selected model is temporarily unable to serve the \
                 request."
            }
            ErrorClass::Hard => {
                "The selected account, subscription, credentials, provider configuration, or model cannot \
                 continue without a longer reset or a change by you."
            }
        }
    }

    /// The registered codes of this class, in registry order: the concrete examples the form
    /// lists (with [`SemanticCode::describe`]).
    pub fn codes(self) -> impl Iterator<Item = SemanticCode> {
        SemanticCode::ALL.into_iter().filter(move |c| c.class() == self)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable semantic cause of a provider failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SemanticCode {
    NetworkUnavailable,
    ProviderUnavailable,
    ProviderOverloaded,
    ModelCapacity,
    RateLimited,
    AgentTransportLost,
    QuotaLimited,
    SubscriptionRequired,
    AuthRequired,
    MissingCredentials,
    ProviderNotConfigured,
    ModelUnavailable,
}

impl SemanticCode {
    /// Every code, in a stable order (transient first, then hard).
    pub const ALL: [SemanticCode; 12] = [
        SemanticCode::NetworkUnavailable,
        SemanticCode::ProviderUnavailable,
        SemanticCode::ProviderOverloaded,
        SemanticCode::ModelCapacity,
        SemanticCode::RateLimited,
        SemanticCode::AgentTransportLost,
        SemanticCode::QuotaLimited,
        SemanticCode::SubscriptionRequired,
        SemanticCode::AuthRequired,
        SemanticCode::MissingCredentials,
        SemanticCode::ProviderNotConfigured,
        SemanticCode::ModelUnavailable,
    ];

    /// The class this code belongs to. Exhaustive on purpose: the registry.
    pub const fn class(self) -> ErrorClass {
        match self {
            SemanticCode::NetworkUnavailable
            | SemanticCode::ProviderUnavailable
            | SemanticCode::ProviderOverloaded
            | SemanticCode::ModelCapacity
            | SemanticCode::RateLimited
            | SemanticCode::AgentTransportLost => ErrorClass::Transient,
            SemanticCode::QuotaLimited
            | SemanticCode::SubscriptionRequired
            | SemanticCode::AuthRequired
            | SemanticCode::MissingCredentials
            | SemanticCode::ProviderNotConfigured
            | SemanticCode::ModelUnavailable => ErrorClass::Hard,
        }
    }

    /// The persisted and wire spelling. Never rename one without a migration.
    pub const fn as_str(self) -> &'static str {
        match self {
            SemanticCode::NetworkUnavailable => "network_unavailable",
            SemanticCode::ProviderUnavailable => "provider_unavailable",
            SemanticCode::ProviderOverloaded => "provider_overloaded",
            SemanticCode::ModelCapacity => "model_capacity",
            SemanticCode::RateLimited => "rate_limited",
            SemanticCode::AgentTransportLost => "agent_transport_lost",
            SemanticCode::QuotaLimited => "quota_limited",
            SemanticCode::SubscriptionRequired => "subscription_required",
            SemanticCode::AuthRequired => "auth_required",
            SemanticCode::MissingCredentials => "missing_credentials",
            SemanticCode::ProviderNotConfigured => "provider_not_configured",
            SemanticCode::ModelUnavailable => "model_unavailable",
        }
    }

    /// Parses a wire or catalogue spelling; an unknown code is `None` (unclassified).
    pub fn parse(s: &str) -> Option<SemanticCode> {
        SemanticCode::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// How a person would say it; shown in the UI beside the code.
    pub const fn describe(self) -> &'static str {
        match self {
            SemanticCode::NetworkUnavailable => "The network or the provider's host could not be reached",
            SemanticCode::ProviderUnavailable => "The provider is down or returned a server error",
            SemanticCode::ProviderOverloaded => "The provider is overloaded",
            SemanticCode::ModelCapacity => "The selected model is out of capacity for now",
            SemanticCode::RateLimited => "Too many requests for a short while (rate limit)",
            SemanticCode::AgentTransportLost => {
                "The agent process or its connection was lost before it started work"
            }
            SemanticCode::QuotaLimited => "Your plan's usage limit or credits are used up",
            SemanticCode::SubscriptionRequired => "The account needs a subscription or a plan upgrade",
            SemanticCode::AuthRequired => "The credentials were rejected or have expired; sign in again",
            SemanticCode::MissingCredentials => "No API key or login is configured for this provider",
            SemanticCode::ProviderNotConfigured => {
                "The provider or agent is not set up (missing binary or settings)"
            }
            SemanticCode::ModelUnavailable => {
                "The selected model does not exist or is not available to this account"
            }
        }
    }
}

impl fmt::Display for SemanticCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_spelling() {
        for code in SemanticCode::ALL {
            assert_eq!(SemanticCode::parse(code.as_str()), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn spec_initial_codes_have_the_spec_classes() {
        let transient = [
            "network_unavailable",
            "provider_unavailable",
            "provider_overloaded",
            "model_capacity",
            "rate_limited",
            "agent_transport_lost",
        ];
        let hard = [
            "quota_limited",
            "subscription_required",
            "auth_required",
            "missing_credentials",
            "provider_not_configured",
            "model_unavailable",
        ];
        for s in transient {
            assert_eq!(
                SemanticCode::parse(s).map(SemanticCode::class),
                Some(ErrorClass::Transient),
                "{s}"
            );
        }
        for s in hard {
            assert_eq!(
                SemanticCode::parse(s).map(SemanticCode::class),
                Some(ErrorClass::Hard),
                "{s}"
            );
        }
        assert_eq!(SemanticCode::ALL.len(), transient.len() + hard.len());
    }

    #[test]
    fn every_code_is_listed_under_exactly_its_class() {
        let listed: usize = ErrorClass::ALL.iter().map(|c| c.codes().count()).sum();
        assert_eq!(listed, SemanticCode::ALL.len());
        for class in ErrorClass::ALL {
            assert!(class.codes().all(|c| c.class() == class));
            assert!(!class.describe().is_empty() && !class.label().is_empty());
        }
    }

    #[test]
    fn unknown_code_is_not_guessed() {
        assert_eq!(SemanticCode::parse("unclassified"), None);
        assert_eq!(SemanticCode::parse("Rate_Limited"), None);
        assert_eq!(SemanticCode::parse(""), None);
    }
}
