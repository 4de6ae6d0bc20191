//! The evidence envelope (design contract 1) of a failed call: the attempt's identity, the
//! phase and effects the call observed, and its items in the order they happened: the
//! provider's answer as an `http` item (status, the headers the classifier reads, body), then
//! the dispatcher's own account as a `stderr` line, `recourse http: endpoint "<id>": ...`.
//! That line names configuration (the endpoint, the NAME of a key variable, timeouts) and
//! never a key: the key is only ever read into the request's header.

use super::call::Failure;
use chrono::{DateTime, Utc};
use policy::classification::Effects;
use serde_json::{json, Map, Value};

/// Who failed: the attempt and the endpoint.
pub(super) struct Identity<'a> {
    pub(super) invocation_id: &'a str,
    pub(super) generation: u64,
    pub(super) endpoint_id: &'a str,
    pub(super) provider_id: Option<&'a str>,
    pub(super) model_id: Option<&'a str>,
}

/// The prefix of the dispatcher's own evidence lines (the catalogue's `http.*` rules for the
/// dispatcher's observations read it).
pub(super) const NOTE_PREFIX: &str = "recourse http:";

/// The envelope of `failure`, observed at `at`.
pub(super) fn envelope(id: &Identity<'_>, failure: &Failure, at: DateTime<Utc>) -> Value {
    let effects = Effects {
        assistant_output: false,
        tool_activity: false,
        partial_result: failure.partial_result,
        prompt_delivery: failure.delivery,
    };
    let mut items = Vec::new();
    if let Some(answer) = &failure.answer {
        let mut item = json!({"kind": "http", "status": answer.status, "headers": answer.headers});
        if let Some(body) = &answer.body {
            item["body"] = json!(body);
        }
        items.push(item);
    }
    if let Some(note) = &failure.note {
        items.push(json!({"kind": "stderr", "lines": [
            format!("{NOTE_PREFIX} endpoint \"{}\": {note}", id.endpoint_id)
        ]}));
    }
    let mut env = Map::new();
    env.insert("invocation_id".into(), json!(id.invocation_id));
    env.insert("generation".into(), json!(id.generation));
    env.insert("phase".into(), json!(failure.phase));
    env.insert("occurred_at".into(), json!(at));
    if let Some(p) = id.provider_id {
        env.insert("provider_id".into(), json!(p));
    }
    if let Some(m) = id.model_id {
        env.insert("model_id".into(), json!(m));
    }
    env.insert("effects".into(), json!(effects));
    env.insert("items".into(), Value::Array(items));
    Value::Object(env)
}

#[cfg(test)]
mod tests {
    use super::super::call::Answer;
    use super::*;
    use classifier::Envelope;
    use policy::classification::{Phase, PromptDelivery};

    #[test]
    fn the_envelope_parses_as_contract_1_with_identity_effects_and_items_in_order() {
        let at = "2026-11-30T08:00:00Z".parse().unwrap();
        let failure = Failure {
            phase: Phase::Streaming,
            delivery: PromptDelivery::Confirmed,
            partial_result: true,
            answer: Some(Answer {
                status: 200,
                headers: [("request-id".to_owned(), "req_1".to_owned())].into(),
                body: None,
            }),
            note: Some("the stream ended before its end marker (message_stop) after 3 events".into()),
        };
        let id = Identity {
            invocation_id: "inv-1",
            generation: 7,
            endpoint_id: "haiku",
            provider_id: Some("anthropic"),
            model_id: Some("claude-haiku-4-5"),
        };
        let value = envelope(&id, &failure, at);
        let env = Envelope::from_value(&value).unwrap();
        assert_eq!(env.invocation_id.as_deref(), Some("inv-1"));
        assert_eq!(env.generation, Some(7));
        assert_eq!(env.phase, Some(Phase::Streaming));
        assert_eq!(env.occurred_at, Some(at));
        assert_eq!(env.provider_id.as_deref(), Some("anthropic"));
        assert!(env.effects.partial_result);
        assert_eq!(env.effects.prompt_delivery, PromptDelivery::Confirmed);
        assert_eq!(value["items"][0]["kind"], "http");
        assert_eq!(value["items"][0]["status"], 200);
        assert_eq!(
            value["items"][1]["lines"][0],
            "recourse http: endpoint \"haiku\": the stream ended before its end marker (message_stop) after 3 events"
        );
        assert_eq!(env.items.len(), 2);
    }
}
