//! The four APIs, as the providers answer them: which one a path speaks ([`Api::of`]), and a
//! success, each failure and a failure mid-stream in each one's own bodies, headers and event
//! names. The payloads are the providers' documented shapes and what users pasted of real
//! answers (ids and keys replaced); the requests they answer are what the published agents
//! were seen sending (Claude Code: `POST /v1/messages?beta=true`, streamed; Codex: `POST
//! /responses`, streamed; Gemini CLI: `POST /v1beta/models/M:streamGenerateContent?alt=sse`;
//! Qwen Code: `POST /chat/completions`, streamed with `stream_options.include_usage`).

use crate::reply::{raw_json, sse, Fail, FailKind, SseEnd};
use axum::response::Response;
use serde::Serialize;
use serde_json::{json, Value};

/// An API the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST …/v1/messages`
    Anthropic,
    /// `POST …/chat/completions`
    OpenAiChat,
    /// `POST …/responses`
    OpenAiResponses,
    /// `POST …/models/M:generateContent`
    Gemini,
    /// `POST …/models/M:streamGenerateContent`
    GeminiStream,
}

impl Api {
    /// The API a request path (without its query) speaks.
    pub fn of(path: &str) -> Option<Api> {
        if path.ends_with("/v1/messages") {
            Some(Api::Anthropic)
        } else if path.ends_with("/chat/completions") {
            Some(Api::OpenAiChat)
        } else if path.ends_with("/responses") {
            Some(Api::OpenAiResponses)
        } else if path.ends_with(":streamGenerateContent") {
            Some(Api::GeminiStream)
        } else if path.ends_with(":generateContent") {
            Some(Api::Gemini)
        } else {
            None
        }
    }

    fn streams(self, request: &Value) -> bool {
        match self {
            Api::GeminiStream => true,
            Api::Gemini => false,
            _ => request["stream"].as_bool().unwrap_or(false),
        }
    }
}

fn model(request: &Value) -> String {
    request["model"].as_str().unwrap_or("fake-model").to_owned()
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

// ------------------------------------------------------------------------------------------------
// Success
// ------------------------------------------------------------------------------------------------

/// A whole answer with `text`.
pub(crate) fn success(api: Api, request: &Value, text: &str) -> Response {
    let streams = api.streams(request);
    let m = model(request);
    match api {
        Api::Anthropic if streams => {
            let mut frames = anthropic_start(&m);
            frames.push(anthropic_delta(text));
            frames.extend(anthropic_stop());
            sse(frames, SseEnd::Close)
        }
        Api::Anthropic => raw_json(
            200,
            &[("request-id", "req_fake_ok")],
            &json!({"id": "msg_fake1", "type": "message", "role": "assistant", "model": m,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 5}})
            .to_string(),
        ),
        Api::OpenAiChat if streams => {
            let mut frames = chat_start(&m, text);
            let mut last = chat_chunk(&m, &json!({}), &json!("stop"));
            last["usage"] = json!({"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17});
            frames.push(data(&last));
            frames.push("data: [DONE]\n\n".to_owned());
            sse(frames, SseEnd::Close)
        }
        Api::OpenAiChat => raw_json(
            200,
            &[("x-request-id", "req_fake_ok")],
            &json!({"id": "chatcmpl-fake1", "object": "chat.completion", "created": 1764489600, "model": m,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})
            .to_string(),
        ),
        Api::OpenAiResponses => {
            let item = json!({"id": "msg_fake1", "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]});
            let done = responses_object(&m, "completed", json!([item]), Value::Null);
            if streams {
                let mut frames = responses_start(&m, text);
                frames.push(event(
                    "response.output_item.done",
                    &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                ));
                frames.push(event(
                    "response.completed",
                    &json!({"type": "response.completed", "response": done}),
                ));
                sse(frames, SseEnd::Close)
            } else {
                raw_json(200, &[("x-request-id", "req_fake_ok")], &done.to_string())
            }
        }
        Api::Gemini | Api::GeminiStream => {
            let answer = gemini_chunk(text, Some("STOP"));
            if streams {
                sse(vec![data(&answer)], SseEnd::Close)
            } else {
                raw_json(200, &[], &answer.to_string())
            }
        }
    }
}

fn anthropic_start(model: &str) -> Vec<String> {
    vec![
        event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_fake2", "type": "message", "role": "assistant",
                "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", &json!({"type": "ping"})),
    ]
}

fn anthropic_delta(text: &str) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    )
}

fn anthropic_stop() -> Vec<String> {
    vec![
        event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 5}}),
        ),
        event("message_stop", &json!({"type": "message_stop"})),
    ]
}

fn chat_chunk(model: &str, delta: &Value, finish: &Value) -> Value {
    json!({"id": "chatcmpl-fake2", "object": "chat.completion.chunk", "created": 1764489600, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn chat_start(model: &str, text: &str) -> Vec<String> {
    vec![
        data(&chat_chunk(
            model,
            &json!({"role": "assistant", "content": ""}),
            &Value::Null,
        )),
        data(&chat_chunk(model, &json!({"content": text}), &Value::Null)),
    ]
}

fn responses_object(model: &str, status: &str, output: Value, error: Value) -> Value {
    let mut r = json!({"id": "resp_fake1", "object": "response", "created_at": 1764489600, "model": model,
        "status": status, "output": output, "error": error});
    if status == "completed" {
        r["usage"] = json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17});
    }
    r
}

fn responses_start(model: &str, text: &str) -> Vec<String> {
    let created = responses_object(model, "in_progress", json!([]), Value::Null);
    vec![
        event(
            "response.created",
            &json!({"type": "response.created", "response": created}),
        ),
        event(
            "response.output_item.added",
            &json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"id": "msg_fake1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}),
        ),
        event(
            "response.output_text.delta",
            &json!({"type": "response.output_text.delta", "item_id": "msg_fake1", "output_index": 0,
                "content_index": 0, "delta": text}),
        ),
    ]
}

fn gemini_chunk(text: &str, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    json!({"candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
        "modelVersion": "gemini-2.5-flash"})
}

// ------------------------------------------------------------------------------------------------
// Failures
// ------------------------------------------------------------------------------------------------

/// `fail` before any output, as `api` answers it.
pub(crate) fn failure(api: Api, fail: &Fail) -> Response {
    let (status, mut headers, body) = match api {
        Api::Anthropic => anthropic_failure(fail),
        Api::OpenAiChat | Api::OpenAiResponses => openai_failure(fail),
        Api::Gemini | Api::GeminiStream => gemini_failure(fail),
    };
    for (k, v) in &fail.headers {
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    raw_json(status, &headers, &body.to_string())
}

type Rendered = (u16, Vec<(String, String)>, Value);

fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CFAKEFAKEFAKE"})
}

/// An RFC 3339 UTC instant `seconds` from now (this machine's clock).
fn rfc3339_in(seconds: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = now.saturating_add(seconds);
    let (days, rest) = (t / 86_400, t % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn anthropic_failure(fail: &Fail) -> Rendered {
    match fail.kind {
        FailKind::Overloaded => (
            529,
            h(&[("request-id", "req_fake_529"), ("x-should-retry", "true")]),
            anthropic_error("overloaded_error", "Overloaded"),
        ),
        FailKind::RateLimited => {
            let secs = fail.reset_seconds.to_string();
            let at = rfc3339_in(fail.reset_seconds);
            (
                429,
                h(&[
                    ("retry-after", &secs),
                    ("anthropic-ratelimit-requests-limit", "50"),
                    ("anthropic-ratelimit-requests-remaining", "0"),
                    ("anthropic-ratelimit-requests-reset", &at),
                    ("request-id", "req_fake_429"),
                ]),
                anthropic_error(
                    "rate_limit_error",
                    "This request would exceed the rate limit for your organization (REDACTED) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase.",
                ),
            )
        }
        FailKind::Quota => (
            400,
            h(&[("request-id", "req_fake_400")]),
            anthropic_error(
                "invalid_request_error",
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
            ),
        ),
        FailKind::InvalidKey => (
            401,
            h(&[("request-id", "req_fake_401")]),
            anthropic_error("authentication_error", "invalid x-api-key"),
        ),
        FailKind::MissingModel => (
            404,
            h(&[("request-id", "req_fake_404")]),
            anthropic_error("not_found_error", "model: claude-fake-model"),
        ),
    }
}

fn openai_error(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn openai_failure(fail: &Fail) -> Rendered {
    match fail.kind {
        FailKind::Overloaded => (
            503,
            h(&[("x-request-id", "req_fake_503")]),
            openai_error(
                "That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists. (Please include the request ID req_fake_503 in your message.)",
                "server_error",
                None,
            ),
        ),
        FailKind::RateLimited => {
            let secs = fail.reset_seconds;
            (
                429,
                h(&[
                    ("retry-after", &secs.to_string()),
                    ("x-ratelimit-limit-requests", "3"),
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-reset-requests", &format!("{secs}s")),
                    ("x-request-id", "req_fake_429"),
                ]),
                openai_error(
                    &format!("Rate limit reached for fake-model in organization org-REDACTED on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in {secs}s. Visit https://platform.openai.com/account/rate-limits to learn more."),
                    "requests",
                    Some("rate_limit_exceeded"),
                ),
            )
        }
        FailKind::Quota => (
            429,
            h(&[("x-request-id", "req_fake_quota")]),
            openai_error(
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "insufficient_quota",
                Some("insufficient_quota"),
            ),
        ),
        FailKind::InvalidKey => (
            401,
            h(&[("x-request-id", "req_fake_401")]),
            openai_error(
                "Incorrect API key provided: sk-fake*****0000. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
        ),
        FailKind::MissingModel => (
            404,
            h(&[("x-request-id", "req_fake_404")]),
            openai_error(
                "The model `fake-model` does not exist or you do not have access to it.",
                "invalid_request_error",
                Some("model_not_found"),
            ),
        ),
    }
}

fn gemini_error(code: u16, status: &str, message: &str, details: Value) -> Value {
    let mut e = json!({"error": {"code": code, "message": message, "status": status}});
    if !details.is_null() {
        e["error"]["details"] = details;
    }
    e
}

fn gemini_quota(quota_id: &str, message: &str, retry: Option<u64>) -> Value {
    let mut details = vec![
        json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
            "quotaValue": "10"}]}),
        json!({"@type": "type.googleapis.com/google.rpc.Help", "links": [{
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]}),
    ];
    if let Some(s) = retry {
        details.push(
            json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{s}s")}),
        );
    }
    gemini_error(429, "RESOURCE_EXHAUSTED", message, Value::Array(details))
}

fn gemini_failure(fail: &Fail) -> Rendered {
    match fail.kind {
        FailKind::Overloaded => (
            503,
            Vec::new(),
            gemini_error(
                503,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
                Value::Null,
            ),
        ),
        FailKind::RateLimited => {
            let secs = fail.reset_seconds;
            (
                429,
                Vec::new(),
                gemini_quota(
                    "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    &format!("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in {secs}.0s."),
                    Some(secs),
                ),
            )
        }
        FailKind::Quota => (
            429,
            Vec::new(),
            gemini_quota(
                "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: gemini-2.5-flash",
                None,
            ),
        ),
        FailKind::InvalidKey => (
            400,
            Vec::new(),
            gemini_error(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]),
            ),
        ),
        FailKind::MissingModel => (
            404,
            Vec::new(),
            gemini_error(
                404,
                "NOT_FOUND",
                "models/gemini-fake-model is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.",
                Value::Null,
            ),
        ),
    }
}

// ------------------------------------------------------------------------------------------------
// A failure in the middle of a stream
// ------------------------------------------------------------------------------------------------

/// A stream that starts the answer with `text`, then fails with an overload in the API's own
/// error event and ends; without a stream, the overload itself.
pub(crate) fn mid_stream(api: Api, request: &Value, text: &str) -> Response {
    if !api.streams(request) {
        return failure(api, &Fail::new(FailKind::Overloaded));
    }
    let m = model(request);
    let frames = match api {
        Api::Anthropic => {
            let mut f = anthropic_start(&m);
            f.push(anthropic_delta(text));
            f.push(event(
                "error",
                &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ));
            f
        }
        Api::OpenAiChat => {
            let mut f = chat_start(&m, text);
            f.push(data(&openai_error(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
            )));
            f
        }
        Api::OpenAiResponses => {
            let mut f = responses_start(&m, text);
            let failed = responses_object(
                &m,
                "failed",
                json!([]),
                json!({"code": "server_error", "message": "The server had an error while processing your request. Sorry about that!"}),
            );
            f.push(event(
                "response.failed",
                &json!({"type": "response.failed", "response": failed}),
            ));
            f
        }
        Api::Gemini | Api::GeminiStream => vec![
            data(&gemini_chunk(text, None)),
            data(&gemini_error(
                503,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
                Value::Null,
            )),
        ],
    };
    sse(frames, SseEnd::Close)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_api() {
        assert_eq!(Api::of("/claude/v1/messages"), Some(Api::Anthropic));
        assert_eq!(Api::of("/qwen/v1/chat/completions"), Some(Api::OpenAiChat));
        assert_eq!(Api::of("/codex/v1/responses"), Some(Api::OpenAiResponses));
        assert_eq!(
            Api::of("/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent"),
            Some(Api::GeminiStream)
        );
        assert_eq!(
            Api::of("/gemini/v1beta/models/gemini-2.5-flash:generateContent"),
            Some(Api::Gemini)
        );
        assert_eq!(Api::of("/x/models"), None);
    }

    #[test]
    fn civil_dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
