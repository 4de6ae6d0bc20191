//! One call to a provider, and what it came to: the result, or the failure as the dispatcher
//! observed it (where it happened, whether the prompt reached the provider, whether part of
//! the result had arrived, the provider's status, headers and body).
//!
//! What decides the effects:
//! - the request could not be sent (no connection): `launch`, `not_sent`;
//! - it was sent, and no answer came (a timeout, a broken connection): `prompt`, `ambiguous`;
//! - the provider answered with a status: `confirmed`. A non-2xx answer is `prompt` with its
//!   body; a 2xx one that breaks off, is too large or is an error object is `prompt`
//!   (non-streaming) or `streaming`;
//! - in a stream, the first content byte makes any later failure a partial result; frames
//!   without content (a role-only first chunk, `message_start`, `ping`) do not.
//!
//! Bodies are read chunk by chunk and bounded: an error body by [`ERROR_BODY_BYTES`], a result
//! by the endpoint's `max_response_bytes` (the raw body without streaming; the content kept,
//! then the assembled message, with it). Nothing here reads the key.

use super::{
    live::Sink,
    sse::{Assembler, Frame, SseReader},
};
use crate::config::ApiStyle;
use policy::classification::{Phase, PromptDelivery};
use reqwest::{header::HeaderMap, Client, Response};
use serde_json::Value;
use std::{collections::BTreeMap, error::Error as _, time::Duration};

/// Most bytes of an error answer kept as evidence (the classifier keeps 16 KiB of it; a bit
/// more lets it record the cut).
pub(super) const ERROR_BODY_BYTES: usize = 64 * 1024;
/// The smallest bound on one server-sent event (an event is bounded by the larger of this
/// and `max_response_bytes`).
const MIN_EVENT_BYTES: usize = 64 * 1024;

/// The call's three timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Timeouts {
    pub(super) connect: Duration,
    /// Without a byte while reading.
    pub(super) read: Duration,
    /// The whole call.
    pub(super) total: Duration,
}

/// A request ready to send.
pub(super) struct CallRequest {
    pub(super) url: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
    pub(super) style: ApiStyle,
    pub(super) stream: bool,
    pub(super) timeouts: Timeouts,
    pub(super) max_response_bytes: usize,
}

/// What a call came to.
#[derive(Debug)]
pub(super) enum Outcome {
    /// The result: the response body, or the assembled message of a stream, as JSON text.
    Succeeded(String),
    Failed(Failure),
}

/// A failed call, as observed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Failure {
    pub(super) phase: Phase,
    pub(super) delivery: PromptDelivery,
    pub(super) partial_result: bool,
    /// The provider's answer, when there was one.
    pub(super) answer: Option<Answer>,
    /// The dispatcher's own account of what happened (a line of evidence).
    pub(super) note: Option<String>,
}

impl Failure {
    /// A failure before anything was sent.
    pub(super) fn before_sending(note: String) -> Failure {
        Failure {
            phase: Phase::Launch,
            delivery: PromptDelivery::NotSent,
            partial_result: false,
            answer: None,
            note: Some(note),
        }
    }
}

/// The provider's answer: status, the headers the classifier reads, body.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: Option<String>,
}

/// Sends the request and reads the answer. With a live listener's `sink`, a stream is passed on
/// to it from its first content event (see [`super::live`]); the outcome is the same.
pub(super) async fn perform(client: &Client, mut req: CallRequest, sink: Option<&mut Sink>) -> Outcome {
    let sent = client
        .post(&req.url)
        .headers(std::mem::take(&mut req.headers))
        .body(std::mem::take(&mut req.body))
        .timeout(req.timeouts.total)
        .send()
        .await;
    let mut response = match sent {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(send_failure(&e, &req.timeouts)),
    };
    let status = response.status().as_u16();
    let headers = kept_headers(response.headers());
    let answer = |body: Option<String>| Answer {
        status,
        headers: headers.clone(),
        body,
    };
    if !response.status().is_success() {
        let (bytes, _) = read_body(&mut response, req.max_response_bytes.min(ERROR_BODY_BYTES)).await;
        return Outcome::Failed(Failure {
            phase: Phase::Prompt,
            delivery: PromptDelivery::Confirmed,
            partial_result: false,
            answer: Some(answer(Some(String::from_utf8_lossy(&bytes).into_owned()))),
            note: None,
        });
    }
    let event_stream = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if req.stream && event_stream {
        stream(&mut response, &req, answer(None), sink).await
    } else {
        whole(&mut response, &req, answer).await
    }
}

/// A request that got no answer.
fn send_failure(e: &reqwest::Error, t: &Timeouts) -> Failure {
    let chain = error_chain(e);
    if e.is_connect() || e.is_builder() {
        let note = if e.is_timeout() {
            format!(
                "could not connect within connect_timeout ({} s): {chain}",
                t.connect.as_secs()
            )
        } else {
            format!("could not connect: {chain}")
        };
        return Failure::before_sending(note);
    }
    let note = if e.is_timeout() {
        format!(
            "no answer within the timeouts (read_timeout {} s, request_timeout {} s); the request may have reached the provider: {chain}",
            t.read.as_secs(),
            t.total.as_secs()
        )
    } else {
        format!("the request failed after it may have reached the provider: {chain}")
    };
    Failure {
        phase: Phase::Prompt,
        delivery: PromptDelivery::Ambiguous,
        partial_result: false,
        answer: None,
        note: Some(note),
    }
}

/// How reading a body ended.
enum BodyEnd {
    Complete,
    TooLarge,
    Broken(reqwest::Error),
}

/// Reads up to `limit` bytes of the body (one more says it is larger).
async fn read_body(response: &mut Response, limit: usize) -> (Vec<u8>, BodyEnd) {
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > limit {
                    let room = limit - bytes.len();
                    bytes.extend_from_slice(&chunk[..room]);
                    return (bytes, BodyEnd::TooLarge);
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => return (bytes, BodyEnd::Complete),
            Err(e) => return (bytes, BodyEnd::Broken(e)),
        }
    }
}

/// A non-streamed 2xx answer.
async fn whole(
    response: &mut Response,
    req: &CallRequest,
    answer: impl Fn(Option<String>) -> Answer,
) -> Outcome {
    let (bytes, end) = read_body(response, req.max_response_bytes).await;
    let failed = |partial_result: bool, body: Option<String>, note: Option<String>| {
        Outcome::Failed(Failure {
            phase: Phase::Prompt,
            delivery: PromptDelivery::Confirmed,
            partial_result,
            answer: Some(answer(body)),
            note,
        })
    };
    match end {
        BodyEnd::TooLarge => failed(true, None, Some(too_large(req.max_response_bytes))),
        BodyEnd::Broken(e) => failed(
            !bytes.is_empty(),
            None,
            Some(format!(
                "the answer ended before it was complete, after {} bytes{}: {}",
                bytes.len(),
                timed_out(&e, &req.timeouts),
                error_chain(&e)
            )),
        ),
        BodyEnd::Complete => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if is_error_body(req.style, &v) => {
                failed(false, Some(String::from_utf8_lossy(&bytes).into_owned()), None)
            }
            // JSON is UTF-8, so the text is exactly what the provider sent.
            Ok(_) => Outcome::Succeeded(String::from_utf8_lossy(&bytes).into_owned()),
            Err(_) => failed(
                false,
                Some(String::from_utf8_lossy(&bytes[..bytes.len().min(ERROR_BODY_BYTES)]).into_owned()),
                Some("the answer is not JSON".to_owned()),
            ),
        },
    }
}

/// A streamed 2xx answer.
async fn stream(
    response: &mut Response,
    req: &CallRequest,
    answer: Answer,
    mut sink: Option<&mut Sink>,
) -> Outcome {
    let mut assembler: Box<dyn Assembler> = match req.style {
        ApiStyle::Openai => Box::<super::openai::Stream>::default(),
        ApiStyle::Anthropic => Box::<super::anthropic::Stream>::default(),
    };
    let mut reader = SseReader::new(req.max_response_bytes.max(MIN_EVENT_BYTES));
    let mut events = Vec::new();
    let mut seen = 0usize;
    let failed = |partial_result: bool, body: Option<String>, note: Option<String>| {
        let mut answer = answer.clone();
        answer.body = body;
        Outcome::Failed(Failure {
            phase: Phase::Streaming,
            delivery: PromptDelivery::Confirmed,
            partial_result,
            answer: Some(answer),
            note,
        })
    };
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            end => {
                let how = match &end {
                    Err(e) => format!("{}: {}", timed_out(e, &req.timeouts), error_chain(e)),
                    _ => ": the body ended".to_owned(),
                };
                let note = format!(
                    "the stream ended before its end marker ({}) after {seen} events{}{how}",
                    assembler.end_marker(),
                    if reader.has_unfinished_event() {
                        " and part of another"
                    } else {
                        ""
                    },
                );
                return failed(assembler.has_content(), None, Some(note));
            }
        };
        if reader.feed(&chunk, &mut events).is_err() {
            return failed(
                assembler.has_content(),
                None,
                Some(too_large(req.max_response_bytes)),
            );
        }
        for event in events.drain(..) {
            seen += 1;
            // The listener gets the event as the provider sent it, after the assembler said
            // whether content has come.
            let passed = sink.is_some().then(|| event.clone());
            match assembler.push(event) {
                Frame::More => {
                    if let (Some(sink), Some(event)) = (sink.as_deref_mut(), &passed) {
                        sink.event(event, assembler.has_content()).await;
                    }
                }
                Frame::Error(data) => return failed(assembler.has_content(), Some(data), None),
                Frame::End => {
                    let message = assembler.finish().to_string();
                    if message.len() > req.max_response_bytes {
                        return failed(true, None, Some(too_large(req.max_response_bytes)));
                    }
                    if let (Some(sink), Some(event)) = (sink.as_deref_mut(), &passed) {
                        sink.event(event, true).await;
                        sink.finished().await;
                    }
                    return Outcome::Succeeded(message);
                }
            }
            if assembler.kept_bytes() > req.max_response_bytes {
                return failed(true, None, Some(too_large(req.max_response_bytes)));
            }
        }
    }
}

fn is_error_body(style: ApiStyle, body: &Value) -> bool {
    match style {
        ApiStyle::Openai => super::openai::is_error_body(body),
        ApiStyle::Anthropic => super::anthropic::is_error_body(body),
    }
}

fn too_large(max: usize) -> String {
    format!("the answer is larger than max_response_bytes ({max} bytes) and was not kept")
}

fn timed_out(e: &reqwest::Error, t: &Timeouts) -> String {
    if e.is_timeout() {
        format!(
            " (timed out: read_timeout {} s, request_timeout {} s)",
            t.read.as_secs(),
            t.total.as_secs()
        )
    } else {
        String::new()
    }
}

/// The error and its causes, on one line. reqwest names the URL (the configured base URL,
/// which holds no credentials) and never a header.
fn error_chain(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The headers the classifier reads (timing hints, request ids), lower-cased; a repeated
/// header's values joined with `, `.
fn kept_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str();
        let wanted = matches!(
            name,
            "retry-after"
                | "retry-after-ms"
                | "x-should-retry"
                | "x-request-id"
                | "request-id"
                | "content-type"
        ) || ["x-ratelimit-", "anthropic-ratelimit-", "ratelimit"]
            .iter()
            .any(|p| name.starts_with(p));
        if !wanted {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes());
        kept.entry(name.to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    kept
}

#[cfg(test)]
mod tests {
    //! Against a raw loopback socket that answers exactly the bytes a test gives (or nothing),
    //! on paused time: a timeout fires as soon as everything else waits, without waiting.

    use super::*;
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    /// Serves one connection: reads the request, writes `answer`, then keeps the connection
    /// open forever (`hang`) or closes it.
    async fn raw_server(answer: Vec<u8>, hang: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length: usize = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            socket.write_all(&answer).await.unwrap();
            socket.flush().await.unwrap();
            if hang {
                std::future::pending::<()>().await;
            }
        });
        format!("http://{addr}")
    }

    fn request(base: &str, style: ApiStyle, stream: bool, max: usize) -> (Client, CallRequest) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeouts = Timeouts {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(60),
            total: Duration::from_secs(300),
        };
        let client = Client::builder()
            .connect_timeout(timeouts.connect)
            .read_timeout(timeouts.read)
            .retry(reqwest::retry::never())
            .no_proxy()
            .build()
            .unwrap();
        let req = CallRequest {
            url: format!("{base}/chat/completions"),
            headers: HeaderMap::new(),
            body: b"{}".to_vec(),
            style,
            stream,
            timeouts,
            max_response_bytes: max,
        };
        (client, req)
    }

    fn http(status: &str, content_type: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nx-request-id: req_1\r\nset-cookie: session=abc\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn failed(o: Outcome) -> Failure {
        match o {
            Outcome::Failed(f) => f,
            Outcome::Succeeded(s) => panic!("succeeded: {s}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_nobody_answers_times_out_as_ambiguous_delivery() {
        let base = raw_server(Vec::new(), true).await;
        let (client, req) = request(&base, ApiStyle::Openai, false, 1024);
        let f = failed(perform(&client, req, None).await);
        assert_eq!(f.phase, Phase::Prompt);
        assert_eq!(f.delivery, PromptDelivery::Ambiguous);
        assert!(!f.partial_result);
        assert!(f.answer.is_none());
        let note = f.note.unwrap();
        assert!(
            note.starts_with("no answer within the timeouts (read_timeout 60 s, request_timeout 300 s)"),
            "{note}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_stops_sending_times_out_as_streaming_with_its_partial_result() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        let answer = format!("{head}{:x}\r\n{event}\r\n", event.len());
        let base = raw_server(answer.into_bytes(), true).await;
        let (client, req) = request(&base, ApiStyle::Openai, true, 1024);
        let f = failed(perform(&client, req, None).await);
        assert_eq!(f.phase, Phase::Streaming);
        assert_eq!(f.delivery, PromptDelivery::Confirmed);
        assert!(f.partial_result, "content came before the stall");
        assert_eq!(f.answer.as_ref().map(|a| a.status), Some(200));
        let note = f.note.unwrap();
        assert!(
            note.starts_with("the stream ended before its end marker ([DONE]) after 1 events (timed out"),
            "{note}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_cut_short_is_confirmed_and_a_partial_result() {
        let mut answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n".to_vec();
        answer.extend_from_slice(b"{\"id\":\"chatcmpl-1\",");
        let base = raw_server(answer, false).await;
        let (client, req) = request(&base, ApiStyle::Openai, false, 1024);
        let f = failed(perform(&client, req, None).await);
        assert_eq!((f.phase, f.delivery), (Phase::Prompt, PromptDelivery::Confirmed));
        assert!(f.partial_result);
        let note = f.note.unwrap();
        assert!(
            note.starts_with("the answer ended before it was complete, after 19 bytes: "),
            "{note}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_over_the_bound_is_not_kept_and_counts_as_a_partial_result() {
        let body = format!("{{\"text\":\"{}\"}}", "x".repeat(2000));
        let base = raw_server(http("200 OK", "application/json", &body), false).await;
        let (client, req) = request(&base, ApiStyle::Openai, false, 1000);
        let f = failed(perform(&client, req, None).await);
        assert!(f.partial_result);
        assert_eq!(f.answer.unwrap().body, None, "nothing of it is kept");
        assert!(f
            .note
            .unwrap()
            .contains("larger than max_response_bytes (1000 bytes)"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_streamed_message_over_the_bound_is_not_kept() {
        let event = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
            "x".repeat(600)
        );
        let base = raw_server(http("200 OK", "text/event-stream", &event.repeat(3)), false).await;
        let (client, req) = request(&base, ApiStyle::Openai, true, 1000);
        let f = failed(perform(&client, req, None).await);
        assert_eq!(f.phase, Phase::Streaming);
        assert!(f.partial_result);
        assert!(f.note.unwrap().contains("larger than max_response_bytes"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_answer_keeps_its_status_classifier_headers_and_a_bounded_body() {
        let body = format!("{{\"error\":{{\"message\":\"{}\"}}}}", "y".repeat(100_000));
        let mut answer = http("500 Internal Server Error", "application/json", &body);
        let after_status_line = answer.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        answer.splice(
            after_status_line..after_status_line,
            b"retry-after: 20\r\nx-ratelimit-reset-requests: 6m0s\r\nanthropic-ratelimit-tokens-reset: 2026-11-30T08:01:00Z\r\n"
                .iter()
                .copied(),
        );
        let base = raw_server(answer, false).await;
        let (client, req) = request(&base, ApiStyle::Openai, false, 1 << 20);
        let f = failed(perform(&client, req, None).await);
        assert_eq!((f.phase, f.delivery), (Phase::Prompt, PromptDelivery::Confirmed));
        let a = f.answer.unwrap();
        assert_eq!(a.status, 500);
        assert_eq!(
            a.headers.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "anthropic-ratelimit-tokens-reset",
                "content-type",
                "retry-after",
                "x-ratelimit-reset-requests",
                "x-request-id"
            ],
            "no cookie, no length"
        );
        assert_eq!(a.body.unwrap().len(), ERROR_BODY_BYTES);
    }

    #[tokio::test(start_paused = true)]
    async fn a_200_that_is_not_json_or_is_an_error_object_is_a_failure_with_its_body() {
        let base = raw_server(
            http("200 OK", "text/html", "<html>Just a moment...</html>"),
            false,
        )
        .await;
        let (client, req) = request(&base, ApiStyle::Openai, false, 1024);
        let f = failed(perform(&client, req, None).await);
        assert_eq!(f.note.as_deref(), Some("the answer is not JSON"));
        assert_eq!(
            f.answer.unwrap().body.as_deref(),
            Some("<html>Just a moment...</html>")
        );
        assert!(!f.partial_result);

        let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let base = raw_server(http("200 OK", "application/json", error), false).await;
        let (client, req) = request(&base, ApiStyle::Anthropic, false, 1024);
        let f = failed(perform(&client, req, None).await);
        assert_eq!(f.answer.unwrap().body.as_deref(), Some(error));
        assert_eq!(f.note, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_json_answer_to_a_streaming_request_is_taken_whole() {
        let ok = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
        let base = raw_server(http("200 OK", "application/json", ok), false).await;
        let (client, req) = request(&base, ApiStyle::Openai, true, 1024);
        match perform(&client, req, None).await {
            Outcome::Succeeded(body) => assert_eq!(body, ok),
            Outcome::Failed(f) => panic!("{f:?}"),
        }
    }
}
