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
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    net::{Shutdown, TcpStream},
    path::Path,
    process::{Command, Stdio},
    sync::{mpsc, Arc, Mutex},
    time::Duration,
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

    // The event stream, read raw for the whole run.
    let mut sse = TcpStream::connect(&addr).expect("connect events");
    write!(
        sse,
        "GET /api/v1/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
        TOKEN.get().expect("token")
    )
    .expect("subscribe");
    let sse_reader = sse.try_clone().expect("clone");
    let (sse_tx, sse_rx) = mpsc::channel::<Vec<u8>>();
    let sse_thread = std::thread::spawn(move || {
        let mut r = sse_reader;
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 || sse_tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });

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
    // each client taking every `CLIENTS`th (secret, position) pair.
    const CLIENTS: usize = 4;
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
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let mine: Vec<_> = pairs.iter().copied().skip(k).step_by(CLIENTS).collect();
                let submit = &submit;
                scope.spawn(move || mine.into_iter().map(submit).collect::<Vec<_>>())
            })
            .collect();
        for client in clients {
            for (route, s, a) in client.join().expect("a client panicked") {
                routes.insert(route);
                sent.push_str(&s);
                api.push_str(&a);
            }
        }
    });
    assert_eq!(routes.len(), n, "one route per envelope");

    // Every change reached the stream before it is closed: read it until every route has been
    // named in it (each `data:` line is one event's JSON, holding its route's id).
    let mut events: Vec<u8> = Vec::new();
    let mut unseen = routes.clone();
    let mut parsed = 0;
    while !unseen.is_empty() {
        let chunk = sse_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the event stream never reported {} route(s)", unseen.len()));
        events.extend_from_slice(&chunk);
        // Only whole lines, each looked at once.
        let Some(end) = events.iter().rposition(|b| *b == b'\n') else {
            continue;
        };
        for line in events[parsed..end].split(|b| *b == b'\n') {
            if let Some(data) = line.strip_prefix(b"data:") {
                let text = String::from_utf8_lossy(data);
                for word in text.split('"') {
                    unseen.remove(word);
                }
            }
        }
        parsed = end;
    }
    sse.shutdown(Shutdown::Both).expect("close events");
    let _ = sse_thread.join();
    events.extend(sse_rx.try_iter().flatten());

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "exit status after SIGTERM: {exit}");
    log_thread.join().expect("log thread");
    let log = log.lock().expect("log").clone();

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
