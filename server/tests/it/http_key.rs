//! An endpoint's key never leaves the request that carries it, against the real `recourse
//! serve` process (`--config`, JSON logs at `RUST_LOG=debug`, a test clock that never moves):
//! the first endpoint is a careless provider that echoes the key in its 401 body, the second
//! succeeds. Afterwards the key is in no API answer (route detail, list, result, circuits,
//! the event stream read raw for the whole run), no log line and no byte of the SQLite file,
//! its `-wal` or `-shm`; while the fake provider proves it did receive it.

use crate::common;

use common::{provider::*, spawn_serve_env, token_for};
use futures_util::StreamExt;
use serde_json::{json, Value};

const KEY_VAR: &str = "RECOURSE_LEAK_TEST_KEY";
const KEY: &str = "sk-proj-Lk9Wq3Ze7Rt2Yu6Io1Pa5Sd8Fg4Hj0KlMn";

fn contains_key(text: &str) -> bool {
    // The whole key, or any 12-character stretch of its random part.
    let random = &KEY["sk-proj-".len()..];
    text.contains(KEY)
        || random
            .as_bytes()
            .windows(12)
            .any(|w| text.contains(std::str::from_utf8(w).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_reaches_the_database_the_log_or_any_api_answer() {
    requires!(sqlite);
    let fake = FakeProvider::start().await;
    fake.script("leaky", vec![openai_invalid_api_key(KEY)]);
    fake.script("good", vec![anthropic_ok("fine")]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("recourse.toml");
    std::fs::write(
        &config,
        format!(
            "[[endpoint]]\nid = \"leaky\"\nstyle = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4.1-mini\"\napi_key_env = \"{KEY_VAR}\"\nprovider_id = \"openai\"\n\n\
             [[endpoint]]\nid = \"good\"\nstyle = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-haiku-4-5\"\napi_key_env = \"{KEY_VAR}\"\nprovider_id = \"anthropic\"\n",
            fake.base_url("leaky"),
            fake.base_url("good")
        ),
    )
    .unwrap();
    let db = dir.path().join("recourse.db");
    let (mut child, addr, log) = spawn_serve_env(
        &db,
        &[
            "--config",
            config.to_str().unwrap(),
            "--test-clock",
            "2026-11-30T08:00:00Z",
        ],
        true,
        &[(KEY_VAR, KEY), ("RUST_LOG", "debug")],
    );
    let base = format!("http://{addr}");
    // reqwest is built without a default TLS provider (the server installs ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Signed in as the administrator `spawn_serve_env` made for this database.
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {}", token_for(&addr).expect("a token for the server"));
    headers.insert(reqwest::header::AUTHORIZATION, bearer.parse().unwrap());
    let client = reqwest::Client::builder()
        .no_proxy()
        .default_headers(headers)
        .build()
        .unwrap();
    let mut answers = String::new();

    // The event stream, read raw from before the route starts.
    let events = client.get(format!("{base}/api/v1/events")).send().await.unwrap();
    assert!(events.status().is_success());
    let mut events = events.bytes_stream_compat();

    let post = |path: &str, body: Value| {
        let req = client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(body.to_string());
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, profile) = post(
        "/api/v1/profiles",
        json!({"name": "keys", "targets": [
            {"id": "leaky", "dispatcher": "http", "runner": "leaky"},
            {"id": "good", "dispatcher": "http", "runner": "good"}],
          "policy": {"version": 1, "candidates": [
            {"id": "leaky", "transient": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"},
             "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"}},
            {"id": "good", "transient": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
             "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}}),
    )
    .await;
    assert_eq!(status, 201, "{profile}");
    answers.push_str(&profile);
    let profile_id = serde_json::from_str::<Value>(&profile).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, started) = post(
        "/api/v1/routes",
        json!({"profile_id": profile_id, "caller": {"kind": "utility", "reference": "r", "invocation_id": "inv-key"},
               "work": {"messages": [{"role": "user", "content": "hello"}]}}),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    answers.push_str(&started);
    let route_id = serde_json::from_str::<Value>(&started).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Read the stream until the second endpoint's success arrives.
    let mut stream_text = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !stream_text
        .lines()
        .any(|l| l.contains(&route_id) && l.contains("\"event\":\"succeeded\""))
    {
        let chunk = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("no success on the event stream: {stream_text}"))
            .expect("the event stream ended")
            .unwrap();
        stream_text.push_str(&String::from_utf8_lossy(&chunk));
    }
    answers.push_str(&stream_text);

    for path in [
        format!("/api/v1/routes/{route_id}"),
        "/api/v1/routes".to_owned(),
        format!("/api/v1/routes/{route_id}/result"),
        "/api/v1/circuits".to_owned(),
    ] {
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert!(r.status().is_success(), "{path}");
        answers.push_str(&r.text().await.unwrap());
    }
    let detail: Value = serde_json::from_str(
        &client
            .get(format!("{base}/api/v1/routes/{route_id}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let failed = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"] == "failed")
        .expect("the leaky endpoint failed");
    assert_eq!(failed["classification"]["code"], "auth_required", "{detail}");
    // The provider's text that echoed the key did reach the classifier (and its excerpt).
    assert!(
        failed["classification"]["safe_excerpt"]
            .as_str()
            .unwrap_or_default()
            .contains("Incorrect API key provided"),
        "{failed}"
    );

    child.kill().unwrap();
    child.wait().unwrap();
    let log: Vec<String> = log.unwrap().iter().collect();

    // The key was really in play: both endpoints received it.
    let leaky = fake.received("leaky");
    let good = fake.received("good");
    assert_eq!(leaky[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(good[0].headers["x-api-key"], KEY);

    assert!(!contains_key(&answers), "the key reached an API answer");
    for line in &log {
        assert!(!contains_key(line), "the key reached the log: {line}");
    }
    assert!(
        log.iter().any(|l| l.contains("http call failed")),
        "the log says what happened (without the key)"
    );
    for suffix in ["", "-wal", "-shm"] {
        let path = format!("{}{suffix}", db.display());
        if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !contains_key(&String::from_utf8_lossy(&bytes)),
                "the key reached {path}"
            );
        }
    }
}

/// `Response::chunk` as a stream (the client is built without reqwest's `stream` feature).
trait ChunkStream {
    fn bytes_stream_compat(
        self,
    ) -> futures_util::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>;
}

impl ChunkStream for reqwest::Response {
    fn bytes_stream_compat(
        self,
    ) -> futures_util::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>> {
        futures_util::stream::unfold(self, |mut r| async move {
            match r.chunk().await {
                Ok(Some(c)) => Some((Ok(c), r)),
                Ok(None) => None,
                Err(e) => Some((Err(e), r)),
            }
        })
        .boxed()
    }
}
