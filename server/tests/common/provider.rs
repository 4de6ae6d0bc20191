//! The fake LLM provider (the `fake-provider` crate, in process) as the `http` dispatcher's
//! tests use it, and the exact payloads those tests script: a real axum server on
//! `127.0.0.1:0`, a script per path prefix (`base_url(name)` = `http://127.0.0.1:PORT/<name>`),
//! request `n` playing reply `n`, every request recorded. The crate's own module doc says how
//! it differs from the real providers.
//!
//! The payloads below are the providers' real ones (runners research memo, section 4: OpenAI
//! and Anthropic error bodies and headers as users pasted them; ids and keys replaced).

#![allow(dead_code, unused_imports)]

pub use fake_provider::{FakeProvider, Received, Reply, SseEnd};
use serde_json::{json, Value};

// ------------------------------------------------------------------------------------------------
// Real payloads
// ------------------------------------------------------------------------------------------------

fn headers(h: &[(&str, &str)]) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// An OpenAI chat completion.
pub fn openai_ok(text: &str) -> Reply {
    Reply::Json {
        status: 200,
        headers: headers(&[("x-request-id", "req_fake_ok")]),
        body: json!({"id": "chatcmpl-fake1", "object": "chat.completion", "created": 1764489600, "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})
        .to_string(),
    }
}

/// An Anthropic message.
pub fn anthropic_ok(text: &str) -> Reply {
    Reply::Json {
        status: 200,
        headers: headers(&[("request-id", "req_fake_ok")]),
        body: json!({"id": "msg_fake1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 5}})
        .to_string(),
    }
}

fn openai_error(status: u16, h: &[(&str, &str)], message: &str, kind: &str, code: Option<&str>) -> Reply {
    Reply::Json {
        status,
        headers: headers(h),
        body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string(),
    }
}

fn anthropic_error(status: u16, h: &[(&str, &str)], kind: &str, message: &str) -> Reply {
    Reply::Json {
        status,
        headers: headers(h),
        body: json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CFAKEFAKEFAKE"})
            .to_string(),
    }
}

/// OpenAI 429: requests per minute exhausted; the reset headers are Go durations.
pub fn openai_rate_limited() -> Reply {
    openai_error(
        429,
        &[
            ("x-ratelimit-limit-requests", "3"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-tokens", "29000"),
            ("x-ratelimit-reset-tokens", "2s"),
            ("x-request-id", "req_fake_429"),
        ],
        "Rate limit reached for gpt-4.1-mini in organization org-REDACTED on requests per min (RPM): Limit 3, Used 3, Requested 1. Visit https://platform.openai.com/account/rate-limits to learn more.",
        "requests",
        Some("rate_limit_exceeded"),
    )
}

/// OpenAI 429 `insufficient_quota`: no useful reset.
pub fn openai_insufficient_quota() -> Reply {
    openai_error(
        429,
        &[("x-request-id", "req_fake_quota")],
        "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "insufficient_quota",
        Some("insufficient_quota"),
    )
}

/// OpenAI 401 `invalid_api_key`; a careless provider (or proxy) echoes the key it got.
pub fn openai_invalid_api_key(echoed_key: &str) -> Reply {
    openai_error(
        401,
        &[("x-request-id", "req_fake_401")],
        &format!("Incorrect API key provided: {echoed_key}. You can find your API key at https://platform.openai.com/account/api-keys."),
        "invalid_request_error",
        Some("invalid_api_key"),
    )
}

/// OpenAI 404 `model_not_found`.
pub fn openai_model_not_found() -> Reply {
    openai_error(
        404,
        &[("x-request-id", "req_fake_404")],
        "The model `gpt-4.1-mini` does not exist or you do not have access to it.",
        "invalid_request_error",
        Some("model_not_found"),
    )
}

/// OpenAI 503: the model is overloaded.
pub fn openai_503() -> Reply {
    openai_error(
        503,
        &[("x-request-id", "req_fake_503")],
        "That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists. (Please include the request ID req_fake_503 in your message.)",
        "server_error",
        None,
    )
}

/// OpenAI-compatible gateway (OpenRouter) 429: a daily free-model cap, reset in epoch ms.
pub fn openrouter_per_day(reset: chrono::DateTime<chrono::Utc>) -> Reply {
    let ms = reset.timestamp_millis().to_string();
    Reply::Json {
        status: 429,
        headers: headers(&[
            ("x-ratelimit-limit", "50"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &ms),
        ]),
        body: json!({"error": {"message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day",
            "code": 429, "metadata": {"headers": {"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": ms}}}})
        .to_string(),
    }
}

/// Anthropic 529 `overloaded_error`.
pub fn anthropic_overloaded() -> Reply {
    anthropic_error(
        529,
        &[("request-id", "req_fake_529"), ("x-should-retry", "true")],
        "overloaded_error",
        "Overloaded",
    )
}

/// Anthropic 429 `rate_limit_error` with the `anthropic-ratelimit-*` headers (RFC 3339
/// resets); the exhausted limit resets at `reset`.
pub fn anthropic_rate_limited(reset: chrono::DateTime<chrono::Utc>) -> Reply {
    let at = reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    anthropic_error(
        429,
        &[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2026-11-30T08:00:01Z"),
            ("anthropic-ratelimit-input-tokens-limit", "20000"),
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            ("anthropic-ratelimit-input-tokens-reset", &at),
            ("request-id", "req_fake_429"),
        ],
        "rate_limit_error",
        "This request would exceed the rate limit for your organization (REDACTED) of 20,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
    )
}

/// Anthropic 401 `authentication_error`.
pub fn anthropic_unauthorized() -> Reply {
    anthropic_error(
        401,
        &[("request-id", "req_fake_401")],
        "authentication_error",
        "invalid x-api-key",
    )
}

/// An OpenAI stream: a role-only chunk, then the text in `parts`, then `finish_reason`, then
/// `[DONE]` (only when `done`).
pub fn openai_stream_frames(parts: &[&str], done: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-fake2", "object": "chat.completion.chunk", "created": 1764489600,
                "model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut frames = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    for p in parts {
        frames.push(chunk(json!({"content": p}), Value::Null));
    }
    if done {
        frames.push(chunk(json!({}), json!("stop")));
        frames.push("data: [DONE]\n\n".to_owned());
    }
    frames
}

/// OpenAI's mid-stream error (a `data:` object with `error` and no `choices`).
pub fn openai_stream_error_frame() -> String {
    "data: {\"error\":{\"message\":\"The server had an error while processing your request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n".to_owned()
}

/// An Anthropic stream: `message_start`, a ping, a text block with `parts`, then (only when
/// `done`) its stop, `message_delta` and `message_stop`.
pub fn anthropic_stream_frames(parts: &[&str], done: bool) -> Vec<String> {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut frames = vec![
        ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_fake2", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        ev("ping", json!({"type": "ping"})),
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for p in parts {
        frames.push(ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    if done {
        frames.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        frames.push(ev(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ));
        frames.push(ev("message_stop", json!({"type": "message_stop"})));
    }
    frames
}

/// Anthropic's mid-stream `event: error` (overloaded).
pub fn anthropic_stream_error_frame() -> String {
    "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
        .to_owned()
}
