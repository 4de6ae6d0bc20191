//! Anthropic Messages: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`.
//!
//! The body is the work's `params`, then `model` (the endpoint's), the work's messages without
//! its `system` ones, `system` (the system messages' content: one text, or their blocks when a
//! system message gives blocks), `max_tokens` ([`DEFAULT_MAX_TOKENS`] when the params give
//! none; the API requires it) and, when streaming, `stream: true`.
//!
//! A streamed answer is named events: `message_start` (the message without content),
//! `content_block_start` / `content_block_delta` / `content_block_stop` (text, tool-use input
//! as partial JSON, thinking), `message_delta` (stop reason, usage), `message_stop` (the end
//! marker); `ping` keeps the connection alive and `error` is a mid-stream failure (its data is
//! the same error object a failed request's body holds). The events are assembled back into
//! the message the non-streaming call returns. Content is a non-empty delta or a tool-use
//! block; `message_start` and `ping` are not.

use super::{
    sse::SseEvent,
    sse::{Assembler, Frame},
};
use policy::api::Work;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Appended to the endpoint's base URL.
pub(super) const PATH: &str = "/v1/messages";
/// The API version sent with every request.
pub(super) const VERSION: &str = "2023-06-01";
/// `max_tokens` when the work's params give none.
pub(super) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The request body.
pub(super) fn body(model: &str, work: &Work, stream: bool) -> Value {
    let mut body = work.params.clone();
    let (system, messages): (Vec<&Value>, Vec<&Value>) = work
        .messages
        .iter()
        .partition(|m| m.get("role").and_then(Value::as_str) == Some("system"));
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), json!(messages));
    if let Some(system) = system_field(&system) {
        body.insert("system".into(), system);
    }
    body.entry("max_tokens").or_insert(json!(DEFAULT_MAX_TOKENS));
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The system messages as the `system` field: their texts joined by a blank line, or, when
/// any gives content blocks, all of them as text blocks.
fn system_field(system: &[&Value]) -> Option<Value> {
    let contents: Vec<&Value> = system.iter().filter_map(|m| m.get("content")).collect();
    if contents.is_empty() {
        return None;
    }
    if let Some(texts) = contents.iter().map(|c| c.as_str()).collect::<Option<Vec<&str>>>() {
        return Some(json!(texts.join("\n\n")));
    }
    let blocks: Vec<Value> = contents
        .into_iter()
        .flat_map(|c| match c {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(blocks) => blocks.clone(),
            other => vec![other.clone()],
        })
        .collect();
    Some(Value::Array(blocks))
}

/// The key's header and the version header; `None` when the key cannot be a header value.
pub(super) fn auth(key: &str) -> Option<[(HeaderName, HeaderValue); 2]> {
    let mut value = HeaderValue::from_str(key).ok()?;
    value.set_sensitive(true);
    Some([
        (HeaderName::from_static("x-api-key"), value),
        (
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(VERSION),
        ),
    ])
}

/// Whether a 200 answer is an error object.
pub(super) fn is_error_body(body: &Value) -> bool {
    body.get("type") == Some(&json!("error"))
}

/// Assembles the streamed events into a message.
#[derive(Default)]
pub(super) struct Stream {
    message: Map<String, Value>,
    blocks: BTreeMap<u64, Value>,
    /// Tool-use input as it arrives (partial JSON), by block index.
    partial_json: BTreeMap<u64, String>,
    content: bool,
    kept: usize,
}

impl Stream {
    fn append(&mut self, index: u64, field: &str, part: &str) {
        let block = self.blocks.entry(index).or_insert_with(|| json!({}));
        let mut s = block[field].as_str().unwrap_or_default().to_owned();
        s.push_str(part);
        block[field] = json!(s);
    }
}

impl Assembler for Stream {
    fn push(&mut self, event: SseEvent) -> Frame {
        let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
        let name = event
            .event
            .as_deref()
            .or_else(|| data.get("type").and_then(Value::as_str))
            .unwrap_or_default();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match name {
            "message_stop" => return Frame::End,
            "error" => return Frame::Error(event.data),
            "message_start" => {
                if let Some(m) = data.get("message").and_then(Value::as_object) {
                    self.message = m.clone();
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or_else(|| json!({}));
                let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
                let text = block.get("text").and_then(Value::as_str).unwrap_or_default();
                if kind.ends_with("tool_use") || !text.is_empty() {
                    self.content = true;
                }
                self.kept += text.len();
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let kind = delta.get("type").and_then(Value::as_str).unwrap_or_default();
                let (field, part) = match kind {
                    "text_delta" => ("text", delta.get("text")),
                    "thinking_delta" => ("thinking", delta.get("thinking")),
                    "input_json_delta" => ("", delta.get("partial_json")),
                    "signature_delta" => {
                        if let Some(sig) = delta.get("signature") {
                            self.blocks.entry(index).or_insert_with(|| json!({}))["signature"] = sig.clone();
                        }
                        return Frame::More;
                    }
                    _ => return Frame::More,
                };
                let part = part.and_then(Value::as_str).unwrap_or_default();
                if part.is_empty() {
                    return Frame::More;
                }
                self.content = true;
                self.kept += part.len();
                if field.is_empty() {
                    self.partial_json.entry(index).or_default().push_str(part);
                } else {
                    self.append(index, field, part);
                }
            }
            "content_block_stop" => {
                if let Some(raw) = self.partial_json.remove(&index) {
                    let input = serde_json::from_str(&raw).unwrap_or(Value::String(raw));
                    self.blocks.entry(index).or_insert_with(|| json!({}))["input"] = input;
                }
            }
            "message_delta" => {
                if let Some(delta) = data.get("delta").and_then(Value::as_object) {
                    for (k, v) in delta {
                        self.message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(usage) = data.get("usage").and_then(Value::as_object) {
                    let merged = self.message.entry("usage").or_insert_with(|| json!({}));
                    for (k, v) in usage {
                        merged[k] = v.clone();
                    }
                }
            }
            // `ping`, and events a later API version adds.
            _ => {}
        }
        Frame::More
    }

    fn has_content(&self) -> bool {
        self.content
    }

    fn kept_bytes(&self) -> usize {
        self.kept
    }

    fn end_marker(&self) -> &'static str {
        "message_stop"
    }

    fn finish(mut self: Box<Self>) -> Value {
        // A block whose stop never came still gets its input.
        for (index, raw) in std::mem::take(&mut self.partial_json) {
            let input = serde_json::from_str(&raw).unwrap_or(Value::String(raw));
            self.blocks.entry(index).or_insert_with(|| json!({}))["input"] = input;
        }
        let mut message = self.message;
        message.insert(
            "content".into(),
            Value::Array(self.blocks.into_values().collect()),
        );
        Value::Object(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, data: Value) -> SseEvent {
        SseEvent {
            event: Some(name.to_owned()),
            data: data.to_string(),
        }
    }

    #[test]
    fn system_messages_become_the_system_field_and_max_tokens_is_defaulted() {
        let work = Work {
            messages: vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": "hi"}),
                json!({"role": "system", "content": "Answer in French."}),
            ],
            params: serde_json::from_value(json!({"temperature": 0})).unwrap(),
            ..Work::default()
        };
        assert_eq!(
            body("claude-haiku-4-5", &work, true),
            json!({"temperature": 0, "model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}],
                   "system": "Be brief.\n\nAnswer in French.", "max_tokens": DEFAULT_MAX_TOKENS, "stream": true})
        );
        let given = Work {
            messages: vec![
                json!({"role": "system", "content": [{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}]}),
                json!({"role": "system", "content": "B"}),
                json!({"role": "user", "content": "hi"}),
            ],
            params: serde_json::from_value(json!({"max_tokens": 10})).unwrap(),
            ..Work::default()
        };
        let b = body("m", &given, false);
        assert_eq!(b["max_tokens"], 10);
        assert_eq!(
            b["system"],
            json!([{"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "B"}])
        );
        assert!(b.get("stream").is_none());
        let no_system = Work {
            messages: vec![json!({"role": "user", "content": "hi"})],
            ..Work::default()
        };
        assert!(body("m", &no_system, false).get("system").is_none());
    }

    #[test]
    fn events_assemble_into_the_message_and_ping_or_start_are_not_content() {
        let mut s = Stream::default();
        let before = [
            ev(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "model": "claude-haiku-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            ),
            ev("ping", json!({"type": "ping"})),
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        for e in before {
            assert!(matches!(s.push(e), Frame::More));
        }
        assert!(!s.has_content());
        for e in [
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            ),
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}}}),
            ),
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
            ),
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            ),
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            ev(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 15}}),
            ),
        ] {
            assert!(matches!(s.push(e), Frame::More));
        }
        assert!(s.has_content());
        assert!(matches!(
            s.push(ev("message_stop", json!({"type": "message_stop"}))),
            Frame::End
        ));
        assert_eq!(
            Box::new(s).finish(),
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                "content": [{"type": "text", "text": "Hi"}, {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"a": 1}}],
                "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 15}})
        );
    }

    #[test]
    fn an_error_event_is_an_error_frame_with_its_data() {
        let mut s = Stream::default();
        let data = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let sent = data.to_string();
        assert!(matches!(s.push(ev("error", data)), Frame::Error(d) if d == sent));
    }
}
