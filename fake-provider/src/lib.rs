//! A scripted LLM provider on a loopback port, for tests: the published agents (Claude Code,
//! Codex, Gemini CLI, Qwen Code) and Recourse's own `http` dispatcher talk to it as they would
//! to the real APIs, and it answers what each test scripts, logging every request.
//!
//! It speaks, by the path after a test's prefix ([`Api`]): Anthropic Messages
//! (`POST {base}/v1/messages`, query strings such as `?beta=true` allowed, and `HEAD` on the
//! base, which Claude Code sends first), OpenAI chat completions (`POST {base}/chat/completions`,
//! what Qwen Code sends), OpenAI Responses (`POST {base}/responses`, the only API Codex speaks),
//! and the Gemini API (`POST {base}/v1beta/models/M:generateContent` and
//! `:streamGenerateContent?alt=sse`). Each in JSON and as a server-sent event stream, as the
//! request asks.
//!
//! Scripts: every base URL carries a prefix of the test's choosing, `base_url(name)` =
//! `http://127.0.0.1:PORT/<name>`, so one fake serves several agents or endpoints. Request `n`
//! to a prefix plays reply `n` of its script; requests past the end repeat the last reply. A
//! [`Reply`] is API-neutral where it can be (a success with a text, a failure [`Fail`], a failure
//! in the middle of a stream, a hang), rendered in the shape of the API the request used
//! (`api.rs`: bodies and headers as the providers send them); or raw (a status, headers and
//! body; SSE frames) for tests that need an exact payload.
//!
//! How it differs from the real providers, in what an agent can observe: it answers at once
//! (no latency, no token-by-token pacing beyond one frame per event); it ignores the request's
//! content, tools and parameters (a success is always the scripted text, never a tool call);
//! it checks no key (an invalid key is a scripted reply, not a judgement); its rate-limit
//! headers and reset times are the script's, computed from this machine's clock; it speaks
//! HTTP/1.1 without TLS, so an agent must be pointed at it by a base URL variable or setting.
//!
//! Used in process by the Rust tests ([`FakeProvider::start`]) and as a process
//! (`fake-provider --script FILE --log FILE`, `main.rs`) by the browser tests and scripts.

mod api;
mod reply;

pub use api::Api;
pub use reply::{Fail, FailKind, Reply, SseEnd};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri},
    response::Response,
    Router,
};
use serde::Serialize;
use serde_json::Value;
use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};
use tokio::sync::watch;

/// How long a test waits for the fake to see something before it fails (a bound on a failure,
/// never a pause: the waits return as soon as the thing happens).
const PATIENCE: Duration = Duration::from_secs(60);

/// One request as the fake received it.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    /// The prefix (the first path segment), which names the script.
    pub prefix: String,
    pub method: String,
    /// The whole path, with its query.
    pub path: String,
    /// The API the path speaks, when it is one the fake knows.
    pub api: Option<Api>,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
    /// Milliseconds since the fake started.
    pub at_ms: u64,
    /// Which reply of the script it played (1-based); `None` for a request that plays none
    /// (`HEAD`, an unknown path).
    pub reply: Option<usize>,
}

/// Where the scripts come from.
enum Scripts {
    /// Set by the test through [`FakeProvider::script`].
    InMemory(HashMap<String, Vec<Reply>>),
    /// A JSON file `{"prefix": [REPLY, ...]}`, read again at every request (a test changes the
    /// file to change the script).
    File(PathBuf),
}

struct Shared {
    scripts: Mutex<Scripts>,
    received: Mutex<Vec<Received>>,
    /// Each received request as a JSON line, appended (the process's `--log`).
    log: Option<PathBuf>,
    started: Instant,
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    received: Arc<watch::Sender<usize>>,
    dropped: Arc<watch::Sender<usize>>,
}

/// The fake, serving on a loopback port on the runtime that started it.
pub struct FakeProvider {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    received_count: watch::Receiver<usize>,
    dropped_count: watch::Receiver<usize>,
}

impl FakeProvider {
    /// Starts the fake on a free loopback port (on the caller's runtime), scripted in memory.
    pub async fn start() -> FakeProvider {
        FakeProvider::serve("127.0.0.1:0", Scripts::InMemory(HashMap::new()), None)
            .await
            .expect("a free loopback port")
    }

    /// Starts the fake on `addr`, its scripts read from `script` at every request, every
    /// request appended to `log` (the binary's way).
    pub async fn start_with_files(
        addr: &str,
        script: PathBuf,
        log: Option<PathBuf>,
    ) -> std::io::Result<FakeProvider> {
        FakeProvider::serve(addr, Scripts::File(script), log).await
    }

    async fn serve(addr: &str, scripts: Scripts, log: Option<PathBuf>) -> std::io::Result<FakeProvider> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            scripts: Mutex::new(scripts),
            received: Mutex::default(),
            log,
            started: Instant::now(),
        });
        let (received, received_count) = watch::channel(0);
        let (dropped, dropped_count) = watch::channel(0);
        let state = AppState {
            shared: shared.clone(),
            received: Arc::new(received),
            dropped: Arc::new(dropped),
        };
        let app = Router::new().fallback(handle).with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(FakeProvider {
            addr,
            shared,
            received_count,
            dropped_count,
        })
    }

    /// The base URL of prefix `name`.
    pub fn base_url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }

    /// Scripts prefix `name` (in-memory scripts only; a file script is the file's).
    pub fn script(&self, name: &str, replies: Vec<Reply>) {
        if let Scripts::InMemory(m) = &mut *lock(&self.shared.scripts) {
            m.insert(name.to_owned(), replies);
        }
    }

    /// What prefix `name` received, in order (every method).
    pub fn received(&self, name: &str) -> Vec<Received> {
        lock(&self.shared.received)
            .iter()
            .filter(|r| r.prefix == name)
            .cloned()
            .collect()
    }

    /// The requests to prefix `name` that played a reply (the API calls, not `HEAD`).
    pub fn calls(&self, name: &str) -> Vec<Received> {
        self.received(name)
            .into_iter()
            .filter(|r| r.reply.is_some())
            .collect()
    }

    /// Every request, in order.
    pub fn all_received(&self) -> Vec<Received> {
        lock(&self.shared.received).clone()
    }

    /// Waits until the fake has played `n` replies in all.
    pub async fn wait_received(&self, n: usize) {
        let mut rx = self.received_count.clone();
        tokio::time::timeout(PATIENCE, rx.wait_for(|c| *c >= n))
            .await
            .unwrap_or_else(|_| panic!("the fake provider never received {n} requests"))
            .expect("the fake provider is gone");
    }

    /// Waits until `n` hanging answers were dropped because their client went away.
    pub async fn wait_dropped(&self, n: usize) {
        let mut rx = self.dropped_count.clone();
        tokio::time::timeout(PATIENCE, rx.wait_for(|c| *c >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} hanging calls were never dropped by the client"))
            .expect("the fake provider is gone");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a hanging answer's drop.
struct DropSignal(Arc<watch::Sender<usize>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.send_modify(|c| *c += 1);
    }
}

/// The reply `n` (1-based) of prefix `name`'s script: the last one past its end.
fn reply_of(shared: &Shared, name: &str, n: usize) -> Option<Reply> {
    let pick = |script: &[Reply]| script.get(n - 1).or(script.last()).cloned();
    match &*lock(&shared.scripts) {
        Scripts::InMemory(m) => m.get(name).and_then(|s| pick(s)),
        Scripts::File(path) => {
            let text = std::fs::read_to_string(path).ok()?;
            let mut all: HashMap<String, Vec<Reply>> = serde_json::from_str(&text).ok()?;
            all.remove(name).and_then(|s| pick(&s))
        }
    }
}

async fn handle(
    State(s): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str()).to_owned();
    let name = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let api = Api::of(uri.path());
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let plays = method == Method::POST;
    let mut received = Received {
        prefix: name.clone(),
        method: method.as_str().to_owned(),
        path,
        api,
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.clone(),
        at_ms: u64::try_from(s.shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        reply: None,
    };
    let n = {
        let mut all = lock(&s.shared.received);
        let n = all
            .iter()
            .filter(|r| r.prefix == name && r.reply.is_some())
            .count()
            + 1;
        if plays {
            received.reply = Some(n);
        }
        all.push(received.clone());
        n
    };
    if let Some(log) = &s.shared.log {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            // One write per line, so concurrent requests never interleave within a line.
            let line = serde_json::to_string(&received).unwrap_or_default();
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
    if method == Method::HEAD {
        // Claude Code checks that its base URL answers before it sends anything.
        return status_only(StatusCode::OK);
    }
    if !plays {
        return status_only(StatusCode::NOT_FOUND);
    }
    let reply = reply_of(&s.shared, &name, n);
    s.received.send_modify(|c| *c += 1);
    let Some(reply) = reply else {
        return reply::raw_json(
            404,
            &[],
            &serde_json::json!({"error": {"message": "no script for this prefix", "type": "fake_provider"}})
                .to_string(),
        );
    };
    let mut reply = reply;
    while let Reply::AfterFile { path, reply: then } = reply {
        // The test says when: it creates the file.
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        reply = *then;
    }
    if let Reply::Hang = reply {
        let _signal = DropSignal(s.dropped.clone());
        std::future::pending::<()>().await;
    }
    reply.render(api, &body)
}

fn status_only(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}
