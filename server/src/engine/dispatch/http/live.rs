//! The live answer of an `http` attempt, for a caller that holds the client's connection (the
//! gateway, `crate::gateway`). This is the one seam between the dispatcher and that caller:
//! the caller only listens; the route decides everything as it always does.
//!
//! A caller registers a listener under the route's invocation id ([`LiveCalls::listen`])
//! before it starts the route. Every attempt of that route this process runs finds it and:
//! - asks the provider the listener's way: streamed or not as the client asked (instead of the
//!   endpoint's `stream`), with the client's pass-through headers (`anthropic-beta`) and
//!   OpenAI's `stream_options`;
//! - hands the answer to the listener instead of keeping it as the route's result: a whole body
//!   once it is complete and checked ([`Live::Whole`]); a stream from its first content event
//!   on ([`Live::Opened`], then each event as the provider sent it, then [`Live::Finished`] after
//!   the end marker, or [`Live::Broken`] when it fails). Events before the first content
//!   byte (a role-only chunk, `message_start`, `ping`) are held back until content comes, so a
//!   failure before it reaches nobody: it is an effect-safe failure the route may retry or
//!   switch, exactly where the dispatcher already draws that line;
//! - reports the attempt to the route as always (a success without a result to keep: the
//!   client has it).
//!
//! A listener is in-process: an attempt another replica runs (a retry its scheduler fired)
//! does not find it. The registration ends when the caller drops it; an attempt that starts
//! later runs as any other `http` attempt.

use super::sse::SseEvent;
use axum::body::Bytes;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};
use tokio::sync::mpsc;

/// How many events may wait for a slow client before the provider's stream is read no further.
const BUFFER: usize = 64;

/// What the listener hears.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Live {
    /// A non-streamed answer, complete and checked: the provider's body.
    Whole {
        attempt: u32,
        candidate: String,
        body: String,
    },
    /// A stream reached its first content: the answer is this candidate's from here on.
    Opened { attempt: u32, candidate: String },
    /// One event of the stream, as text (`event:`/`data:` lines and the blank line).
    Event(Bytes),
    /// The stream ended with its end marker.
    Finished,
    /// The stream failed after it was opened (a partial result: the route stops for a person).
    Broken,
}

/// How the listener wants the provider asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Asking {
    pub(crate) stream: bool,
    /// OpenAI's `stream_options`, sent when streaming.
    pub(crate) stream_options: Option<Value>,
    /// Headers passed through from the client (each value as the client sent it).
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

#[derive(Clone)]
pub(super) struct Listener {
    pub(super) asking: Arc<Asking>,
    tx: mpsc::Sender<Live>,
}

/// The listeners of this process, by invocation id. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct LiveCalls {
    listeners: Arc<Mutex<HashMap<String, Listener>>>,
}

/// A listener's registration; dropping it ends the listening.
pub(crate) struct Registration {
    calls: LiveCalls,
    invocation_id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.invocation_id);
    }
}

impl LiveCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Listener>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Listens to the attempts of the route whose invocation id is `invocation_id`.
    pub(crate) fn listen(&self, invocation_id: &str, asking: Asking) -> (Registration, mpsc::Receiver<Live>) {
        let (tx, rx) = mpsc::channel(BUFFER);
        self.lock().insert(
            invocation_id.to_owned(),
            Listener {
                asking: Arc::new(asking),
                tx,
            },
        );
        let registration = Registration {
            calls: self.clone(),
            invocation_id: invocation_id.to_owned(),
        };
        (registration, rx)
    }

    pub(super) fn listener(&self, invocation_id: &str) -> Option<Listener> {
        self.lock().get(invocation_id).cloned()
    }
}

/// One attempt's side of a listener: holds a stream's events back until its first content.
pub(super) struct Sink {
    listener: Listener,
    attempt: u32,
    candidate: String,
    held: Vec<Bytes>,
    opened: bool,
    /// The listener heard the answer (whole, or the stream opened).
    delivered: bool,
    /// The listener took the whole answer (the body, or the stream's end) while it still
    /// listened; what its call does after that (it ends once it answered) cannot undo it.
    complete: bool,
}

impl Sink {
    pub(super) fn new(listener: Listener, attempt: u32, candidate: &str) -> Sink {
        Sink {
            listener,
            attempt,
            candidate: candidate.to_owned(),
            held: Vec::new(),
            opened: false,
            delivered: false,
            complete: false,
        }
    }

    /// Whether the client has the answer (so the route keeps no result).
    pub(super) fn delivered(&self) -> bool {
        self.delivered
    }

    /// Whether the client's call took the whole answer. Not when the client went away before
    /// (its call was dropped, which abandons the route). A call that has the whole answer
    /// ends soon after, so whether it still listens when the attempt reports says nothing.
    pub(super) fn answered(&self) -> bool {
        self.complete
    }

    /// Whether the listener took it. One that went away: its call abandons the route, which
    /// cancels this attempt.
    async fn send(&self, live: Live) -> bool {
        self.listener.tx.send(live).await.is_ok()
    }

    /// A whole answer, complete and checked.
    pub(super) async fn whole(&mut self, body: &str) {
        self.delivered = true;
        self.complete = self
            .send(Live::Whole {
                attempt: self.attempt,
                candidate: self.candidate.clone(),
                body: body.to_owned(),
            })
            .await;
    }

    /// One stream event, after the assembler took it; `content` says whether result content
    /// has arrived (with this event or before).
    pub(super) async fn event(&mut self, event: &SseEvent, content: bool) {
        let text = Bytes::from(event.encode());
        if self.opened {
            self.send(Live::Event(text)).await;
            return;
        }
        self.held.push(text);
        if content {
            self.open().await;
        }
    }

    /// The answer is this attempt's from here on: the listener hears so, then every event held.
    async fn open(&mut self) {
        self.opened = true;
        self.delivered = true;
        self.send(Live::Opened {
            attempt: self.attempt,
            candidate: self.candidate.clone(),
        })
        .await;
        for held in std::mem::take(&mut self.held) {
            self.send(Live::Event(held)).await;
        }
    }

    /// The stream ended with its end marker (already sent as an event). A stream that ends
    /// without content opens now: the answer is complete.
    pub(super) async fn finished(&mut self) {
        if !self.opened {
            self.open().await;
        }
        self.complete = self.send(Live::Finished).await;
    }

    /// The stream failed: the listener hears it only if it was opened (before that, the
    /// failure is the route's to recover from).
    pub(super) async fn failed(&mut self) {
        if self.opened {
            self.send(Live::Broken).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_stream_is_held_back_until_its_first_content_then_passed_on_in_order() {
        let calls = LiveCalls::default();
        let (registration, mut rx) = calls.listen("inv-1", Asking::default());
        let mut sink = Sink::new(calls.listener("inv-1").unwrap(), 2, "backup");
        sink.event(&ev("role"), false).await;
        assert!(rx.try_recv().is_err(), "nothing before content");
        sink.event(&ev("hello"), true).await;
        sink.event(&ev("more"), true).await;
        sink.finished().await;
        assert_eq!(
            rx.recv().await,
            Some(Live::Opened {
                attempt: 2,
                candidate: "backup".into()
            })
        );
        for want in ["data: role\n\n", "data: hello\n\n", "data: more\n\n"] {
            assert_eq!(rx.recv().await, Some(Live::Event(Bytes::from(want))));
        }
        assert_eq!(rx.recv().await, Some(Live::Finished));
        assert!(sink.delivered());
        drop(registration);
        assert!(
            calls.listener("inv-1").is_none(),
            "dropping the registration ends it"
        );
        // The call took the whole answer, then ended (its stream closed): still answered.
        drop(rx);
        assert!(sink.answered());
    }

    #[tokio::test]
    async fn a_client_gone_before_the_end_of_its_answer_is_not_answered() {
        let calls = LiveCalls::default();
        let (registration, rx) = calls.listen("inv-1", Asking::default());
        let mut sink = Sink::new(calls.listener("inv-1").unwrap(), 1, "main");
        sink.event(&ev("hello"), true).await;
        assert!(sink.delivered());
        drop(registration);
        drop(rx);
        sink.event(&ev("more"), true).await;
        sink.finished().await;
        assert!(!sink.answered(), "the end never reached the call");
        // A whole answer to a call that is gone: not answered either.
        let mut whole = Sink::new(
            Listener {
                asking: Arc::new(Asking::default()),
                tx: mpsc::channel(1).0,
            },
            1,
            "main",
        );
        whole.whole("{}").await;
        assert!(whole.delivered() && !whole.answered());
    }

    #[tokio::test]
    async fn a_failure_before_content_reaches_nobody() {
        let calls = LiveCalls::default();
        let (_registration, mut rx) = calls.listen("inv-1", Asking::default());
        let mut sink = Sink::new(calls.listener("inv-1").unwrap(), 1, "main");
        sink.event(&ev("role"), false).await;
        sink.failed().await;
        assert!(!sink.delivered());
        drop(sink);
        assert!(rx.try_recv().is_err());
    }
}
