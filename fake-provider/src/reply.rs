//! What a script says to answer: API-neutral replies (a success, a failure, a failure in the
//! middle of a stream, a hang), rendered in the request's API by `api.rs`, and raw replies for
//! exact payloads.
//!
//! In a script file each reply is JSON: `{"text": "pong"}`, `{"fail": {"kind": "rate_limited",
//! "reset_seconds": 20, "headers": {"retry-after": "0"}}}`, `{"mid_stream": "Let me "}`,
//! `"hang"`, `{"after_file": {"path": "/tmp/go", "reply": {"text": "pong"}}}`, `{"json": {"status": 500, "headers": [["x-a", "b"]], "body": "..."}}`, `{"sse": {"frames":
//! ["data: ...\n\n"], "end": "drop"}}`.

use crate::api::{self, Api};
use axum::{
    body::{Body, Bytes},
    http::StatusCode,
    response::Response,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// A successful answer with this text: JSON, or a stream when the request asks for one.
    Text(String),
    /// A provider failure before any output, in the request's API's words.
    Fail(Fail),
    /// A stream that starts the answer with this text and then fails (the API's error event:
    /// an overload), or a plain overload when the request did not ask for a stream.
    MidStream(String),
    /// Never answers (the connection stays open until the client goes away).
    Hang,
    /// Holds the answer until the file `path` exists (the test decides when), then plays
    /// `reply`.
    AfterFile {
        path: std::path::PathBuf,
        reply: Box<Reply>,
    },
    /// Exactly this status, headers and body (`content-type: application/json`).
    Json {
        status: u16,
        #[serde(default)]
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `200 text/event-stream` with these frames (each a whole SSE event, blank line included).
    Sse { frames: Vec<String>, end: SseEnd },
}

/// How a raw stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SseEnd {
    /// The body ends after the frames (whatever they say).
    Close,
    /// The connection breaks after the frames (no end marker, no final chunk).
    Drop,
}

/// A provider failure, as each API words it (`api.rs` has the bodies and headers).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Fail {
    pub kind: FailKind,
    /// For `rate_limited`: when the limit resets, in seconds from the answer (headers and prose).
    #[serde(default = "default_reset")]
    pub reset_seconds: u64,
    /// Headers added to (or replacing) the API's own, e.g. `retry-after: 0` to make an agent's
    /// own retries immediate.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn default_reset() -> u64 {
    20
}

/// The failures the fake can play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// Anthropic 529 `overloaded_error`; OpenAI 503 `server_error`; Gemini 503 `UNAVAILABLE`.
    Overloaded,
    /// A per-minute rate limit that resets in `reset_seconds`: Anthropic 429 `rate_limit_error`
    /// with `anthropic-ratelimit-*-reset` and `retry-after`; OpenAI 429 `rate_limit_exceeded`
    /// with `x-ratelimit-reset-requests` and "Please try again in Ns."; Gemini 429
    /// `RESOURCE_EXHAUSTED` with a per-minute quota, "Please retry in N.0s." and `RetryInfo`.
    RateLimited,
    /// Money or an allowance is gone: Anthropic 400 "credit balance is too low"; OpenAI 429
    /// `insufficient_quota`; Gemini 429 `RESOURCE_EXHAUSTED` on a per-day quota.
    Quota,
    /// Anthropic 401 `authentication_error`; OpenAI 401 `invalid_api_key`; Gemini 400
    /// `API_KEY_INVALID`.
    InvalidKey,
    /// Anthropic 404 `not_found_error`; OpenAI 404 `model_not_found`; Gemini 404 `NOT_FOUND`.
    MissingModel,
}

impl Fail {
    pub fn new(kind: FailKind) -> Fail {
        Fail {
            kind,
            reset_seconds: default_reset(),
            headers: BTreeMap::new(),
        }
    }

    /// The same failure with this header too.
    pub fn header(mut self, name: &str, value: &str) -> Fail {
        self.headers.insert(name.to_ascii_lowercase(), value.to_owned());
        self
    }

    /// A rate limit resetting in `seconds`.
    pub fn reset_in(mut self, seconds: u64) -> Fail {
        self.reset_seconds = seconds;
        self
    }
}

impl Reply {
    /// The HTTP answer to a request in `api` (or an unknown path) whose body was `request`.
    pub(crate) fn render(self, api: Option<Api>, request: &Value) -> Response {
        match self {
            Reply::Json {
                status,
                headers,
                body,
            } => {
                let headers: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                raw_json(status, &headers, &body)
            }
            Reply::Sse { frames, end } => sse(frames, end),
            Reply::Hang | Reply::AfterFile { .. } => raw_json(500, &[], "{}"),
            Reply::Text(text) => match api {
                Some(api) => api::success(api, request, &text),
                None => unknown_path(),
            },
            Reply::Fail(fail) => match api {
                Some(api) => api::failure(api, &fail),
                None => unknown_path(),
            },
            Reply::MidStream(text) => match api {
                Some(api) => api::mid_stream(api, request, &text),
                None => unknown_path(),
            },
        }
    }
}

fn unknown_path() -> Response {
    raw_json(
        404,
        &[],
        r#"{"error":{"message":"the fake provider does not serve this path","type":"not_found"}}"#,
    )
}

/// A JSON answer with exactly this status, headers and body.
pub(crate) fn raw_json(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Body::from(body.to_owned()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// `200 text/event-stream` with these frames, then the end.
pub(crate) fn sse(frames: Vec<String>, end: SseEnd) -> Response {
    use futures_util::stream::{self, StreamExt};
    let frames = stream::iter(
        frames
            .into_iter()
            .map(|f| Ok::<_, std::io::Error>(Bytes::from(f))),
    );
    let body = match end {
        SseEnd::Close => Body::from_stream(frames),
        // The frames are flushed first (hyper flushes while the body is pending), then the
        // body fails and hyper closes the connection without the final chunk.
        SseEnd::Drop => Body::from_stream(frames.chain(stream::once(async {
            tokio::task::yield_now().await;
            Err(std::io::Error::other("the fake provider breaks the stream"))
        }))),
    };
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("request-id", "req_fake_stream")
        .body(body)
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_file_reads_every_kind_of_reply() {
        let replies: Vec<Reply> = serde_json::from_str(
            r#"[{"text": "pong"}, {"fail": {"kind": "rate_limited", "reset_seconds": 5, "headers": {"retry-after": "0"}}},
                {"mid_stream": "Let me "}, "hang", {"json": {"status": 500, "body": "{}"}},
                {"sse": {"frames": ["data: {}\n\n"], "end": "drop"}}]"#,
        )
        .unwrap();
        assert_eq!(replies[0], Reply::Text("pong".into()));
        assert_eq!(
            replies[1],
            Reply::Fail(
                Fail::new(FailKind::RateLimited)
                    .reset_in(5)
                    .header("retry-after", "0")
            )
        );
        assert_eq!(replies[3], Reply::Hang);
        assert!(matches!(
            replies[5],
            Reply::Sse {
                end: SseEnd::Drop,
                ..
            }
        ));
    }
}
