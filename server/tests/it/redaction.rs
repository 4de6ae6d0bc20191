//! Redaction end to end, against the real `recourse serve` process: every secret shape of the
//! classifier's redaction corpus (`classifier/tests/corpus`) in every evidence position is
//! submitted as evidence over the REST API. Afterwards no stretch of any secret may be found
//! in what the server said or kept:
//!
//! - the API: every evidence response and every route's detail (`GET /api/v1/routes/{id}`);
//! - the event stream (`GET /api/v1/events`, read raw for the whole run);
//! - the log (`--log-format json`, `RUST_LOG=debug`, every line of stderr);
//! - the raw bytes of the SQLite file, its `-wal` and `-shm`, after the server stopped.
//!
//! The server is driven only through its public surfaces; its clock is a test clock that never
//! moves, so no timer fires and nothing waits for real time.

use crate::common;
#[path = "../../../classifier/tests/corpus/mod.rs"]
mod corpus;

use serde_json::{json, Value};
use std::{
    collections::{HashMap, HashSet},
    io::{BufRead, BufReader, Read, Write},
    net::{Shutdown, TcpStream},
    path::Path,
    process::{Command, Stdio},
    sync::{mpsc, Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_recourse");

/// The administrator's API token for the served database (set before the server starts).
static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Blocking HTTP/1.0 request as the administrator: (status, body).
fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let token = TOKEN.get().expect("the token is made first");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).expect("read");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let payload = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, payload)
}

/// The event stream as read so far, shared by the thread that reads it and the test that waits
/// on it: its bytes, the routes it showed stopping for a person, whether it said `lagged`.
#[derive(Default)]
struct Watched {
    seen: Mutex<Seen>,
    changed: Condvar,
}

#[derive(Default)]
struct Seen {
    bytes: Vec<u8>,
    /// Where the next line to look at begins.
    parsed: usize,
    /// Routes an event showed reaching `action_required` (each route's last change here).
    stopped: HashSet<String>,
    lagged: bool,
}

impl Watched {
    /// Keeps what was read, and looks at each whole line once.
    fn took(&self, chunk: &[u8]) {
        let mut seen = self.seen.lock().expect("stream");
        let Seen {
            bytes,
            parsed,
            stopped,
            lagged,
        } = &mut *seen;
        bytes.extend_from_slice(chunk);
        if let Some(end) = bytes[*parsed..]
            .iter()
            .rposition(|b| *b == b'\n')
            .map(|i| *parsed + i)
        {
            for line in bytes[*parsed..end].split(|b| *b == b'\n') {
                if line
                    .strip_prefix(b"event:")
                    .is_some_and(|e| e.trim_ascii() == b"lagged")
                {
                    *lagged = true;
                } else if let Some(data) = line.strip_prefix(b"data:") {
                    if let Some(route) = serde_json::from_slice::<Value>(data)
                        .ok()
                        .filter(|v| v["to"] == "action_required")
                        .and_then(|v| v["route_id"].as_str().map(str::to_owned))
                    {
                        stopped.insert(route);
                    }
                }
            }
            *parsed = end + 1;
        }
        self.changed.notify_all();
    }

    /// Waits until the stream has shown each of `routes` stopping for a person (the change its
    /// evidence made, so every event of theirs has been read), at most `within`; fails at once
    /// when it lagged (it missed events, so it may never show them).
    fn wait_stopped(&self, routes: &[String], within: Duration) {
        let end = Instant::now() + within;
        let mut seen = self.seen.lock().expect("stream");
        loop {
            assert!(!seen.lagged, "the event stream lagged: it missed events");
            let missing = routes.iter().filter(|r| !seen.stopped.contains(*r)).count();
            if missing == 0 {
                return;
            }
            let left = end.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the event stream never showed {missing} of {} route(s) stopping for a person in {} s",
                routes.len(),
                within.as_secs()
            );
            seen = self.changed.wait_timeout(seen, left).expect("stream").0;
        }
    }

    fn bytes(&self) -> Vec<u8> {
        std::mem::take(&mut self.seen.lock().expect("stream").bytes)
    }
}

/// A multiplicative hasher for 8-byte keys: the scan below looks up every window of tens of
/// megabytes, and SipHash in a debug build would dominate the test's time.
#[derive(Default)]
struct WindowHasher(u64);

impl std::hash::Hasher for WindowHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Index = HashMap<u64, &'static str, std::hash::BuildHasherDefault<WindowHasher>>;

/// Every `corpus::WINDOW`-byte stretch of every secret part, mapped to the secret's name.
/// (Every part is at least `WINDOW` bytes long; the corpus test asserts it.)
fn windows(secrets: &[corpus::Secret]) -> Index {
    assert_eq!(corpus::WINDOW, 8, "stretches are packed into a u64");
    let mut index = Index::default();
    let mut parts = std::collections::HashMap::new();
    for s in secrets {
        for part in &s.parts {
            // A part two secrets share would be found under one name only.
            if let Some(other) = parts.insert(part.as_str(), s.name) {
                assert_eq!(other, s.name, "{other} and {} share a part", s.name);
            }
            assert!(
                part.len() >= corpus::WINDOW,
                "{}: a part shorter than a stretch",
                s.name
            );
            for w in part.as_bytes().windows(corpus::WINDOW) {
                index.insert(pack(w), s.name);
            }
        }
    }
    index
}

fn pack(w: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(w);
    u64::from_le_bytes(a)
}

/// The secrets whose stretches occur in `blob` (one pass over it).
fn leaks_in(blob: &[u8], index: &Index) -> Vec<String> {
    let mut found: Vec<String> = blob
        .windows(corpus::WINDOW)
        .filter_map(|w| {
            index
                .get(&pack(w))
                .map(|name| format!("{name}: {:?}", String::from_utf8_lossy(w)))
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn no_secret_reaches_the_api_the_event_stream_the_log_or_the_database_file() {
    requires!(sqlite);
    let secrets = corpus::secrets();
    let positions = corpus::positions();
    assert!(secrets.len() >= 100 && positions.len() >= 15);

    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("redaction.db");
    let _ = TOKEN.set(common::served_token(&db));
    let mut child = Command::new(BIN)
        .args([
            "--log-format",
            "json",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--test-clock",
            "2026-11-30T08:00:00Z",
            "--database",
        ])
        .arg(&db)
        .env("RUST_LOG", "debug")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn recourse serve");

    // Every stderr line is kept; the address it binds is reported as soon as it is logged.
    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let (addr_tx, addr_rx) = mpsc::channel();
    let stderr = child.stderr.take().expect("stderr");
    let log_writer = Arc::clone(&log);
    let log_thread = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("\"addr\":\"").nth(1) {
                let _ = addr_tx.send(rest.split('"').next().unwrap_or_default().to_owned());
            }
            let mut l = log_writer.lock().expect("log");
            l.extend_from_slice(line.as_bytes());
            l.push(b'\n');
        }
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server logs its address");

    // The event stream, read raw for the whole run by a thread of its own, which notes the
    // routes it shows stopping for a person and whether it ever said `lagged`.
    let mut sse = TcpStream::connect(&addr).expect("connect events");
    write!(
        sse,
        "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
        TOKEN.get().expect("token")
    )
    .expect("subscribe");
    let stream = Arc::new(Watched::default());
    let sse_thread = {
        let stream = Arc::clone(&stream);
        let mut r = sse.try_clone().expect("clone");
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                stream.took(&buf[..n]);
            }
        })
    };

    // One external candidate that stops for a person on any failure: each route takes one
    // piece of evidence and no timer is ever armed.
    let stop = json!({"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                      "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"});
    let (status, profile) = request(
        &addr,
        "POST",
        "/api/v1/profiles",
        Some(
            &json!({"name": "redaction", "policy": {"version": 1, "candidates": [
            {"id": "main", "transient": stop, "hard": stop}]}}),
        ),
    );
    assert_eq!(status, 201, "{profile}");
    let profile_id = serde_json::from_str::<Value>(&profile).expect("profile")["id"]
        .as_str()
        .expect("id")
        .to_owned();

    // The envelopes go in from a few clients at once (the server's work is what takes time),
    // each client taking every `CLIENTS`th (secret, position) pair, `ROUND` pairs at a time:
    // a round ends when the event stream has shown each of its routes stopping for a person
    // (the last change of each), so every event is read and the stream is never more than a
    // round's events behind. Unpaced, a stream starved of CPU on a busy machine
    // can fall more than the server's event channel (1,024 events) behind and miss events
    // (`lagged`), which is the server's documented answer to a slow client, not a leak.
    const CLIENTS: usize = 4;
    const ROUND: usize = 64;
    let pairs: Vec<(usize, &corpus::Secret, &corpus::Position)> = secrets
        .iter()
        .flat_map(|secret| positions.iter().map(move |position| (secret, position)))
        .enumerate()
        .map(|(i, (secret, position))| (i + 1, secret, position))
        .collect();
    let n = pairs.len();
    let submit = |(n, secret, position): (usize, &corpus::Secret, &corpus::Position)| {
        let invocation = format!("inv-{n}");
        let (status, started) = request(
            &addr,
            "POST",
            "/api/v1/routes",
            Some(
                &json!({"profile_id": profile_id, "caller": {"kind": "kanban_task", "reference": "task", "invocation_id": invocation}}),
            ),
        );
        assert_eq!(status, 201, "{started}");
        let started: Value = serde_json::from_str(&started).expect("route");
        let route = started["id"].as_str().expect("route id").to_owned();
        let mut envelope = (position.build)(&secret.text);
        envelope["invocation_id"] = json!(invocation);
        envelope["generation"] = started["snapshot"]["generation"].clone();
        let sent = envelope.to_string();
        let (status, outcome) = request(
            &addr,
            "POST",
            &format!("/api/v1/routes/{route}/evidence"),
            Some(&envelope),
        );
        assert_eq!(status, 200, "{} in {}: {outcome}", secret.name, position.name);
        let (status, detail) = request(&addr, "GET", &format!("/api/v1/routes/{route}"), None);
        assert_eq!(status, 200, "{detail}");
        (route, sent, outcome + &detail)
    };
    let mut api = String::new();
    let mut sent = String::new();
    let mut routes = std::collections::HashSet::new();
    for round in pairs.chunks(ROUND) {
        let mut these = Vec::with_capacity(round.len());
        std::thread::scope(|scope| {
            let clients: Vec<_> = (0..CLIENTS)
                .map(|k| {
                    let mine: Vec<_> = round.iter().copied().skip(k).step_by(CLIENTS).collect();
                    let submit = &submit;
                    scope.spawn(move || mine.into_iter().map(submit).collect::<Vec<_>>())
                })
                .collect();
            for client in clients {
                for (route, s, a) in client.join().expect("a client panicked") {
                    these.push(route);
                    sent.push_str(&s);
                    api.push_str(&a);
                }
            }
        });
        stream.wait_stopped(&these, Duration::from_secs(120));
        routes.extend(these);
    }
    assert_eq!(routes.len(), n, "one route per envelope");
    sse.shutdown(Shutdown::Both).expect("close events");
    let _ = sse_thread.join();
    let events = stream.bytes();

    common::sigterm(&child);
    let exit = common::exit_within(&mut child, Duration::from_secs(60));
    log_thread.join().expect("log thread");
    let log = log.lock().expect("log").clone();
    // Where a stop that hung had come to (the server logs each stage of its stop).
    let tail = || {
        let text = String::from_utf8_lossy(&log);
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    let exit = exit.unwrap_or_else(|| {
        panic!(
            "the server was still running 60 s after SIGTERM; its log ends:\n{}",
            tail()
        )
    });
    assert!(
        exit.success(),
        "exit status after SIGTERM: {exit}; its log ends:\n{}",
        tail()
    );

    let mut files = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let p = format!("{}{suffix}", db.display());
        if Path::new(&p).exists() {
            files.push((p.clone(), std::fs::read(&p).expect("read database file")));
        }
    }

    // The surfaces are not empty: a clean result means something.
    let events_text = String::from_utf8_lossy(&events);
    assert!(events_text.contains("event: route"), "no route events");
    assert!(
        !events_text.contains("event: lagged"),
        "the event stream lagged: some events were not seen"
    );
    assert!(
        log.len() > 1000 && String::from_utf8_lossy(&log).contains("DEBUG"),
        "the log is too quiet"
    );
    let db_bytes: Vec<u8> = files.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    assert!(
        String::from_utf8_lossy(&db_bytes).contains("safe_excerpt"),
        "the database holds no classification"
    );

    let index = windows(&secrets);
    // The detector finds every secret in what was sent (JSON-encoded as the API received it),
    // so finding none in what came back means none came back.
    let in_sent: std::collections::BTreeSet<String> = leaks_in(sent.as_bytes(), &index)
        .into_iter()
        .filter_map(|l| l.split(':').next().map(str::to_owned))
        .collect();
    let unseen: Vec<&str> = secrets
        .iter()
        .map(|s| s.name)
        .filter(|n| !in_sent.contains(*n))
        .collect();
    assert!(
        unseen.is_empty(),
        "the detector misses secrets in the input itself: {unseen:?}"
    );
    let mut leaks = Vec::new();
    for (surface, blob) in [
        ("API", api.as_bytes()),
        ("event stream", &events[..]),
        ("log", &log[..]),
    ] {
        leaks.extend(
            leaks_in(blob, &index)
                .into_iter()
                .map(|l| format!("{surface}: {l}")),
        );
    }
    for (path, bytes) in &files {
        leaks.extend(
            leaks_in(bytes, &index)
                .into_iter()
                .map(|l| format!("{path}: {l}")),
        );
    }
    println!(
        "redaction end to end: {} shapes x {} positions = {n} envelopes; {} API bytes, {} event bytes, {} log bytes, {} database bytes; {} leak(s)",
        secrets.len(),
        positions.len(),
        api.len(),
        events.len(),
        log.len(),
        db_bytes.len(),
        leaks.len()
    );
    assert!(leaks.is_empty(), "{} leak(s):\n{}", leaks.len(), leaks.join("\n"));
}
