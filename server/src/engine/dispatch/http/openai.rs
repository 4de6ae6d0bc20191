//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions` with
//! `Authorization: Bearer <key>`.
//!
//! The body is the work's `params`, then `model` (the endpoint's), `messages` (the work's, as
//! given) and, when streaming, `stream: true`. A streamed answer is `data: {chunk}` events
//! ended by `data: [DONE]`; its chunks are merged back into the `chat.completion` object the
//! non-streaming call returns (content, refusal and reasoning text appended, tool calls merged
//! by index, the last `finish_reason` and `usage`). A mid-stream error is a `data:` event whose
//! object has an `error` (OpenAI, vLLM, SGLang) or is `{"object": "error"}` (vLLM), with no
//! `choices`. Content is a non-empty `content`, `refusal` or `reasoning_content` delta, or any
//! tool call; a role-only first chunk is not content.

use super::{
    sse::SseEvent,
    sse::{Assembler, Frame},
};
use policy::api::Work;
use reqwest::header::{HeaderName, HeaderValue, AUTHORIZATION};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Appended to the endpoint's base URL.
pub(super) const PATH: &str = "/chat/completions";

/// The request body.
pub(super) fn body(model: &str, work: &Work, stream: bool) -> Value {
    let mut body = work.params.clone();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(work.messages.clone()));
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The key's header; `None` when the key cannot be a header value.
pub(super) fn auth(key: &str) -> Option<(HeaderName, HeaderValue)> {
    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).ok()?;
    value.set_sensitive(true);
    Some((AUTHORIZATION, value))
}

/// Whether a 200 answer is an error object (some compatible gateways answer errors with 200).
pub(super) fn is_error_body(body: &Value) -> bool {
    body.get("choices").is_none()
        && (body.get("error").is_some_and(|e| !e.is_null()) || body.get("object") == Some(&json!("error")))
}

/// Merges streamed chunks into a `chat.completion`.
#[derive(Default)]
pub(super) struct Stream {
    head: Map<String, Value>,
    choices: BTreeMap<u64, Choice>,
    usage: Option<Value>,
    content: bool,
    kept: usize,
}

#[derive(Default)]
struct Choice {
    role: Option<Value>,
    /// `content`, `refusal`, `reasoning_content`.
    text: BTreeMap<&'static str, String>,
    tool_calls: BTreeMap<u64, Map<String, Value>>,
    finish_reason: Option<Value>,
    logprobs: Vec<Value>,
}

const TEXT_FIELDS: [&str; 3] = ["content", "refusal", "reasoning_content"];

impl Assembler for Stream {
    fn push(&mut self, event: SseEvent) -> Frame {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Frame::End;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            // Not JSON (a proxy's comment in data form): nothing to merge.
            return Frame::More;
        };
        if is_error_body(&chunk) {
            return Frame::Error(event.data);
        }
        for key in [
            "id",
            "object",
            "created",
            "model",
            "system_fingerprint",
            "service_tier",
        ] {
            if let Some(v) = chunk.get(key).filter(|v| !v.is_null()) {
                self.head.entry(key).or_insert_with(|| v.clone());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        for c in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let choice = self.choices.entry(index).or_default();
            if let Some(r) = c.get("finish_reason").filter(|r| !r.is_null()) {
                choice.finish_reason = Some(r.clone());
            }
            if let Some(lp) = c.get("logprobs").filter(|l| !l.is_null()) {
                choice.logprobs.push(lp.clone());
            }
            let Some(delta) = c.get("delta") else { continue };
            if let Some(role) = delta.get("role").filter(|r| !r.is_null()) {
                choice.role = Some(role.clone());
            }
            for field in TEXT_FIELDS {
                if let Some(text) = delta.get(field).and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    choice.text.entry(field).or_default().push_str(text);
                    self.kept += text.len();
                    self.content = true;
                }
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.content = true;
                let at = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                let merged = choice.tool_calls.entry(at).or_default();
                for key in ["id", "type"] {
                    if let Some(v) = call.get(key).filter(|v| !v.is_null()) {
                        merged.insert(key.into(), v.clone());
                    }
                }
                if let Some(f) = call.get("function") {
                    let function = merged
                        .entry("function")
                        .or_insert_with(|| json!({"name": "", "arguments": ""}));
                    for key in ["name", "arguments"] {
                        if let Some(part) = f.get(key).and_then(Value::as_str) {
                            self.kept += part.len();
                            let slot = &mut function[key];
                            let mut s = slot.as_str().unwrap_or_default().to_owned();
                            s.push_str(part);
                            *slot = json!(s);
                        }
                    }
                }
            }
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
        "[DONE]"
    }

    fn finish(self: Box<Self>) -> Value {
        let mut out = self.head;
        out.insert("object".into(), json!("chat.completion"));
        let choices: Vec<Value> = self
            .choices
            .into_iter()
            .map(|(index, c)| {
                let mut message = Map::new();
                message.insert("role".into(), c.role.unwrap_or_else(|| json!("assistant")));
                message.insert(
                    "content".into(),
                    c.text.get("content").map_or(Value::Null, |t| json!(t)),
                );
                for field in ["refusal", "reasoning_content"] {
                    if let Some(t) = c.text.get(field) {
                        message.insert(field.into(), json!(t));
                    }
                }
                if !c.tool_calls.is_empty() {
                    let calls: Vec<Value> = c.tool_calls.into_values().map(Value::Object).collect();
                    message.insert("tool_calls".into(), Value::Array(calls));
                }
                let mut choice = json!({"index": index, "message": message,
                    "finish_reason": c.finish_reason.unwrap_or(Value::Null)});
                if !c.logprobs.is_empty() {
                    choice["logprobs"] = Value::Array(c.logprobs);
                }
                choice
            })
            .collect();
        out.insert("choices".into(), Value::Array(choices));
        if let Some(u) = self.usage {
            out.insert("usage".into(), u);
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(d: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: d.to_owned(),
        }
    }

    #[test]
    fn the_body_keeps_params_and_the_endpoint_owns_model_and_stream() {
        let work = Work {
            messages: vec![json!({"role": "user", "content": "hi"})],
            params: serde_json::from_value(json!({"temperature": 0.2, "max_tokens": 50})).unwrap(),
            ..Work::default()
        };
        assert_eq!(
            body("gpt-4.1-mini", &work, true),
            json!({"temperature": 0.2, "max_tokens": 50, "model": "gpt-4.1-mini",
                   "messages": [{"role": "user", "content": "hi"}], "stream": true})
        );
        assert!(body("m", &work, false).get("stream").is_none());
    }

    #[test]
    fn chunks_merge_into_the_completion_and_a_role_only_chunk_is_not_content() {
        let mut s = Stream::default();
        let frames = [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        ];
        assert!(matches!(s.push(data(frames[0])), Frame::More));
        assert!(!s.has_content(), "role-only");
        for d in [
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\""}}]}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
        ] {
            assert!(matches!(s.push(data(d)), Frame::More));
        }
        assert!(s.has_content());
        assert!(matches!(s.push(data("[DONE]")), Frame::End));
        let v = Box::new(s).finish();
        assert_eq!(
            v,
            json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1-mini",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Hello",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get", "arguments": "{\"a\":1}"}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
        );
    }

    #[test]
    fn an_error_object_in_the_stream_is_an_error_frame() {
        let mut s = Stream::default();
        let e = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#;
        assert!(matches!(s.push(data(e)), Frame::Error(b) if b == e));
        let vllm = r#"{"object":"error","message":"overloaded","type":"ServiceUnavailable","code":503}"#;
        assert!(matches!(s.push(data(vllm)), Frame::Error(_)));
        assert!(!s.has_content());
    }
}
