//! A real webhook receiver for the tests: an HTTP server of the test's own (axum, on a free
//! loopback port) that verifies every request's Standard Webhooks signature as a receiver
//! would, records what it saw, and answers as the test tells it (accept, fail, hang, redirect).
//!
//! `seen` holds every request that arrived, `accepted` those it answered with a 2xx (a request
//! whose client went away while it was held is seen, never accepted). Tests wait on `arrivals`
//! (a notice per request), never on time.

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::{broadcast, Notify};

/// A signing secret the tests configure (`whsec_` and 32 bytes of base64).
pub const SECRET: &str = "whsec_dGVzdHMtc2lnbmluZy1zZWNyZXQtMzItYnl0ZXMhIQ==";

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Accept,
    /// Answers with this status.
    Status(u16),
    /// Redirects (302) elsewhere.
    Redirect,
    /// Never answers (until the client goes away).
    Hang,
    /// Holds the first request that arrives until the client goes away; accepts the others.
    HoldFirst,
    /// Holds every request until [`Receiver::open_gate`], then accepts it.
    Gated,
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub timestamp: i64,
    pub signature_ok: bool,
    pub body: Value,
    pub raw: String,
    /// When it arrived.
    pub arrived: std::time::Instant,
}

#[derive(Default)]
struct Inner {
    mode: Option<Mode>,
    held: bool,
    seen: Vec<Delivery>,
    accepted: Vec<Delivery>,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    /// A notice per request that arrives (with its `webhook-id`).
    pub arrivals: broadcast::Sender<String>,
    stop: Arc<Notify>,
    gate: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Receiver {
    /// Starts a receiver answering `mode`, on a free loopback port.
    pub async fn start(mode: Mode) -> Receiver {
        Receiver::start_on("127.0.0.1:0".parse().unwrap(), mode).await
    }

    /// Starts a receiver on `addr` (a port a test reuses after a receiver was down).
    pub async fn start_on(addr: SocketAddr, mode: Mode) -> Receiver {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (arrivals, _) = broadcast::channel(1024);
        let receiver = Receiver {
            addr,
            inner: Arc::new(Mutex::new(Inner {
                mode: Some(mode),
                ..Inner::default()
            })),
            arrivals,
            stop: Arc::new(Notify::new()),
            gate: Arc::new(tokio::sync::watch::channel(false).0),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .route("/elsewhere", post(|| async { StatusCode::OK }))
            .with_state(receiver.clone());
        let stop = receiver.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.notified().await })
                .await;
        });
        receiver
    }

    /// The URL channels are configured with.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.inner.lock().unwrap().mode = Some(mode);
    }

    pub fn seen(&self) -> Vec<Delivery> {
        self.inner.lock().unwrap().seen.clone()
    }

    pub fn accepted(&self) -> Vec<Delivery> {
        self.inner.lock().unwrap().accepted.clone()
    }

    /// Lets the requests a [`Mode::Gated`] receiver holds (and every later one) be accepted.
    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    /// Stops listening (new connections are refused).
    pub fn stop(&self) {
        self.stop.notify_one();
    }

    /// Waits until `done` holds for what was accepted, woken by each arrival; panics after
    /// `limit` (a failure, never the synchronisation).
    pub async fn wait_accepted(&self, limit: Duration, done: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
        let mut arrivals = self.arrivals.subscribe();
        let end = tokio::time::Instant::now() + limit;
        loop {
            let accepted = self.accepted();
            if done(&accepted) {
                return accepted;
            }
            // An accepted request is recorded just after its arrival notice: look again soon
            // after each notice, and at least every 50 ms.
            let next = tokio::time::Instant::now() + Duration::from_millis(50);
            match tokio::time::timeout_at(end.min(next), arrivals.recv()).await {
                Err(_) if tokio::time::Instant::now() >= end => {
                    let ids: Vec<&str> = accepted.iter().map(|d| d.id.as_str()).collect();
                    panic!("the receiver never got what the test waited for; accepted: {ids:?}")
                }
                _ => {}
            }
        }
    }
}

/// Verifies a request's signature as a Standard Webhooks receiver does.
pub fn verify(secret: &str, id: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .unwrap();
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    signature
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| s == expected)
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let id = header("webhook-id");
    let timestamp = header("webhook-timestamp");
    let delivery = Delivery {
        signature_ok: verify(SECRET, &id, &timestamp, &body, &header("webhook-signature")),
        id: id.clone(),
        timestamp: timestamp.parse().unwrap_or(0),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw: String::from_utf8_lossy(&body).into_owned(),
        arrived: std::time::Instant::now(),
    };
    let mode = {
        let mut inner = r.inner.lock().unwrap();
        inner.seen.push(delivery.clone());
        match inner.mode {
            Some(Mode::HoldFirst) if !inner.held => {
                inner.held = true;
                Mode::Hang
            }
            Some(Mode::HoldFirst) | None => Mode::Accept,
            Some(m) => m,
        }
    };
    let _ = r.arrivals.send(id);
    match mode {
        Mode::Accept | Mode::HoldFirst => {
            r.inner.lock().unwrap().accepted.push(delivery);
            StatusCode::NO_CONTENT.into_response()
        }
        Mode::Status(s) => StatusCode::from_u16(s).unwrap().into_response(),
        Mode::Redirect => (StatusCode::FOUND, [("location", "/elsewhere")]).into_response(),
        Mode::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        Mode::Gated => {
            let _ = r.gate.subscribe().wait_for(|open| *open).await;
            r.inner.lock().unwrap().accepted.push(delivery);
            StatusCode::NO_CONTENT.into_response()
        }
    }
}
