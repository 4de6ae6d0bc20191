//! The evidence envelope (design contract 1) as the API takes it: its typed wire shape.
//!
//! Evidence reaches Recourse over the API three ways: `POST /api/v1/routes/{id}/evidence`, an
//! external runner's failure report, and a simulated candidate's script in a profile. Each is
//! read into [`EvidenceEnvelope`] before anything else looks at it, and the OpenAPI document's
//! `EvidenceEnvelope` schema is derived from this very type, so the API refuses exactly what the
//! published schema excludes (an unknown item `kind`, a status sent as text, a fraction where a
//! generation belongs) and accepts what it allows. Fields this type does not name are ignored,
//! so a newer adapter's additions do not break an older server.
//!
//! The classifier then reads the same JSON with its own reader (`classifier::Envelope`), which
//! bounds every text and list and records each cut (`truncated`), as contract 1 says: text here
//! is deliberately unbounded, and the request body limit bounds the whole. That reader is also
//! what `recourse classify` uses on whatever an adapter wrote, and it is lenient on purpose (a
//! status sent as `"429"` is read there; the API refuses it here).

use crate::classification::{Effects, Phase};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One failure observation: invocation identity, observed effects and the evidence items.
/// Every field but `items` is optional; the route engine needs `generation` (and checks
/// `invocation_id` when given) before evidence may authorize recovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceEnvelope {
    /// The routed invocation the evidence belongs to (the route's `caller.invocation_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// The prompt generation the evidence belongs to (the attempt's invocation generation).
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub generation: Option<u64>,
    /// The route's current generation as the adapter knew it; when both are given and differ,
    /// the evidence is stale.
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u64",
        skip_serializing_if = "Option::is_none"
    )]
    pub active_generation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// When the failure was observed (RFC 3339).
    #[serde(
        default,
        deserialize_with = "rfc3339",
        skip_serializing_if = "Option::is_none"
    )]
    pub occurred_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default)]
    pub cancel_requested: bool,
    /// Effects the adapter observed; effects the classifier derives from ACP updates are added.
    #[serde(default)]
    pub effects: Effects,
    pub items: Vec<EvidenceItem>,
}

/// One piece of evidence, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EvidenceItem {
    /// An HTTP response: status, headers (names are case-insensitive) and body.
    Http(HttpEvidence),
    /// A JSON-RPC error an ACP agent answered with.
    AcpError(AcpErrorEvidence),
    /// The ordered ACP `session/update` payloads of the prompt, with its result or error.
    AcpUpdates(AcpUpdatesEvidence),
    /// Lines the process wrote to stderr.
    Stderr(StderrEvidence),
    /// How the agent process ended.
    ProcessExit(ProcessExitEvidence),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HttpEvidence {
    #[serde(
        default,
        deserialize_with = "crate::whole::option_u16",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The body: text, or a JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub body: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcpErrorEvidence {
    /// The JSON-RPC error code (e.g. -32603).
    #[serde(
        default,
        deserialize_with = "crate::whole::option_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub data: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcpUpdatesEvidence {
    /// The updates as the agent sent them (each a `session/update` payload, or its `params`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub updates: Vec<Map<String, Value>>,
    /// The prompt's final result (`{"stopReason": ...}`), if it ended normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub prompt_result: Option<Map<String, Value>>,
    /// The prompt's JSON-RPC error, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_error: Option<AcpErrorEvidence>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StderrEvidence {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProcessExitEvidence {
    #[serde(
        default,
        deserialize_with = "crate::whole::option_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<Signal>,
}

/// A signal, by name (`SIGTERM`, `TERM`) or number (15).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum Signal {
    Number(#[serde(deserialize_with = "crate::whole::i64")] i64),
    Name(String),
}

/// An optional RFC 3339 instant with its offset, as `chrono` reads one; the published schema
/// says the same with [`crate::limits::RFC3339_PATTERN`].
fn rfc3339<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    DateTime::parse_from_rfc3339(&text)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| serde::de::Error::custom("expected an RFC 3339 date-time"))
}

impl EvidenceEnvelope {
    /// Reads an envelope from JSON that arrived over the API; `Err` says what is wrong without
    /// repeating any of the input.
    pub fn check(value: &Value) -> Result<EvidenceEnvelope, String> {
        EvidenceEnvelope::deserialize(value).map_err(|e| crate::input::shape_message(&e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_contract_example_reads_and_whole_floats_are_integers() {
        let e = EvidenceEnvelope::check(&json!({
            "invocation_id": "inv-7f3a", "generation": 3.0, "active_generation": 3, "phase": "prompt",
            "occurred_at": "2026-11-30T08:00:00Z", "provider_id": "anthropic",
            "model_id": "claude-sonnet-4-5", "agent": "claude-code", "cancel_requested": false,
            "effects": {"assistant_output": false, "tool_activity": false, "partial_result": false,
                        "prompt_delivery": "confirmed"},
            "items": [
                {"kind": "http", "status": 429.0, "headers": {"retry-after": "20"}, "body": "{...}"},
                {"kind": "acp_error", "code": -32603, "message": "...", "data": {}},
                {"kind": "acp_updates", "updates": [{"sessionUpdate": "tool_call"}],
                 "prompt_result": {"stopReason": "end_turn"}, "prompt_error": null},
                {"kind": "stderr", "lines": ["..."]},
                {"kind": "process_exit", "code": 1, "signal": null},
                {"kind": "process_exit", "signal": 15.0},
                {"kind": "process_exit", "signal": "SIGTERM"}
            ],
            "from_a_newer_adapter": true
        }))
        .unwrap();
        assert_eq!((e.generation, e.items.len()), (Some(3), 7));
        assert!(matches!(&e.items[0], EvidenceItem::Http(h) if h.status == Some(429)));
        assert!(matches!(&e.items[5], EvidenceItem::ProcessExit(p) if p.signal == Some(Signal::Number(15))));
    }

    #[test]
    fn what_the_schema_excludes_is_refused_without_repeating_it() {
        for bad in [
            json!({}),
            json!({"items": [{"kind": "carrier_pigeon"}]}),
            json!({"items": [{"kind": "http", "status": "429"}]}),
            json!({"items": [{"kind": "http", "headers": {"x": 1}}]}),
            json!({"items": [], "generation": 2.5}),
            json!({"items": [], "generation": -1}),
            json!({"items": [], "phase": "lunch"}),
            json!({"items": [], "occurred_at": "2026-11-30 08:00:00"}),
            json!({"items": [], "effects": {"prompt_delivery": "maybe"}}),
            json!({"items": [{"kind": "stderr", "lines": "secret-token-1234"}]}),
            json!([]),
        ] {
            let e = EvidenceEnvelope::check(&bad).expect_err(&bad.to_string());
            assert!(!e.contains("secret-token"), "{e}");
        }
    }
}
