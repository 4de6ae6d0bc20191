//! The gateway's test rig, the one place the gateway's tests, its SDK and agent tests and its
//! benchmark use the fake provider (`provider.rs`): a harness whose configuration lists
//! endpoints on the fake, profiles over them, and calls to `/v1/...` through the real router
//! (in process) or over a real socket ([`Rig::serve`]).

#![allow(dead_code)]

use super::{provider::FakeProvider, Harness};
use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, Request, StatusCode},
};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

/// The variable every configured endpoint reads its key from, and the fake key in it.
pub const KEY_VAR: &str = "RECOURSE_TEST_GATEWAY_KEY";
pub const KEY: &str = "sk-ant-api03-Fk7Qm2Vb9Lk4Rt8Zp3Wn6Yc1Fd5Gs0JaXyQ";

/// A candidate policy: transient errors skip to the next candidate at once; hard errors (and
/// rate limits with a trusted reset) wait for the reset up to an hour, then stop.
pub fn failover() -> Value {
    json!({"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
           "wait_for_reset": {"enabled": true, "max_wait_seconds": 3600}, "on_exhausted": "skip"})
}

pub struct Rig {
    pub fake: FakeProvider,
    pub h: Harness,
}

/// One answer of the gateway, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Rig {
    /// A harness whose configuration lists `endpoints` (`(id, style)`, each served by the fake
    /// under its id), with their key set.
    pub async fn new(endpoints: &[(&str, &str)]) -> Rig {
        Rig::with_config(endpoints, "").await
    }

    /// [`Rig::new`] with more configuration (`[[agent]]` tables) after the endpoints.
    pub async fn with_config(endpoints: &[(&str, &str)], more: &str) -> Rig {
        // Edition 2021: `set_var` is safe; std's environment lock orders it with every read.
        std::env::set_var(KEY_VAR, KEY);
        let fake = FakeProvider::start().await;
        let config: String = endpoints
            .iter()
            .map(|(id, style)| {
                format!(
                    "[[endpoint]]\nid = \"{id}\"\nstyle = \"{style}\"\nbase_url = \"{}\"\nmodel = \"{}\"\napi_key_env = \"{KEY_VAR}\"\nprovider_id = \"{id}\"\n\n",
                    fake.base_url(id),
                    if *style == "openai" { "gpt-4.1-mini" } else { "claude-haiku-4-5" },
                )
            })
            .collect();
        let h = Harness::with_config(tempfile::tempdir().unwrap(), &format!("{config}{more}")).await;
        Rig { fake, h }
    }

    /// A profile named `name` whose candidates are these endpoints, in order, each with the
    /// [`failover`] policy; returns its id.
    pub async fn profile(&self, name: &str, endpoints: &[&str]) -> String {
        let targets: Vec<Value> = endpoints
            .iter()
            .map(|e| json!({"id": e, "dispatcher": "http", "runner": e}))
            .collect();
        let candidates: Vec<Value> = endpoints
            .iter()
            .map(|e| json!({"id": e, "transient": failover(), "hard": failover()}))
            .collect();
        self.h
            .profile(json!({"name": name, "targets": targets,
                            "policy": {"version": 1, "candidates": candidates}}))
            .await
    }

    /// A request to the gateway through the router, with the administrator's token as
    /// `Authorization: Bearer` (unless `headers` name credentials of their own).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Request<Body> {
        let mut req = Request::builder().method(method).uri(path);
        let own = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization") || k.eq_ignore_ascii_case("x-api-key"));
        if !own {
            req = req.header("authorization", format!("Bearer {}", self.h.token));
        }
        for (k, v) in headers {
            if !v.is_empty() {
                req = req.header(*k, *v);
            }
        }
        match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b.to_string()))
                .unwrap(),
            None => req.body(Body::empty()).unwrap(),
        }
    }

    /// Sends `req` and reads the whole answer (a stream to its end).
    pub async fn send(&self, req: Request<Body>) -> Answer {
        let resp = self.h.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            body,
        }
    }

    /// `POST path` with `body` and `headers`.
    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: Value) -> Answer {
        self.send(self.request("POST", path, headers, Some(&body))).await
    }

    /// Serves the router on a free loopback port; returns its base URL (`http://127.0.0.1:P`).
    pub async fn serve(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = self.h.app.clone();
        tokio::spawn(server::web::run(listener, app, std::future::pending()));
        format!("http://{addr}")
    }
}

/// An Anthropic Messages request on profile `model`.
pub fn messages_request(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream,
           "system": [{"type": "text", "text": "Answer in one word."}],
           "messages": [{"role": "user", "content": "Is the build green?"}]})
}

/// An OpenAI chat completion request on profile `model`.
pub fn chat_request(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "temperature": 0,
           "messages": [{"role": "system", "content": "Answer in one word."},
                        {"role": "user", "content": "Is the build green?"}]})
}
