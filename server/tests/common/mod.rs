//! Shared test harness: a real database in a temp dir (a SQLite file, or a PostgreSQL database of
//! its own when `RECOURSE_TEST_POSTGRES` names a server: `backend`), the real router, a manual
//! clock, and the scheduler driven in line (`tick`), so every test is deterministic and never
//! sleeps. A test that needs one backend, or something else a run may lack, says so with
//! `requires!` (`requires`), which reports and counts it when it cannot run.
//!
//! Every request is authenticated as a real caller would be: the harness creates an
//! administrator account (`tester`) and an API token for it, through the same services as
//! `recourse user add` and `recourse token add`, and sends `Authorization: Bearer` on each call
//! ([`Harness::call`]); [`Harness::call_as`] sends other credentials or none. Served processes
//! ([`spawn_serve`]) get theirs from the real subcommands, and [`http`] sends it.

#![allow(dead_code, unreachable_pub)]

#[macro_use]
pub mod requires;
pub mod agents;
pub mod backend;
pub mod editor;
pub mod fake_agent;
pub mod gateway;
pub mod logs;
pub mod power;
pub mod provider;
pub mod receiver;

use axum::{
    body::Body,
    http::{Method, Request, StatusCode},
    Router,
};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use http_body_util::BodyExt;
use leptos::config::LeptosOptions;
use serde_json::{json, Value};
use server::{
    auth::{Actor, Auth},
    clock::{Clock, ManualClock},
    engine::Engine,
    state::AppState,
    web::router,
};
use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex},
};
use tower::ServiceExt;

pub struct Harness {
    pub engine: Arc<Engine>,
    /// The same database, for tests that inspect rows directly.
    pub pool: server::store::Pool,
    /// The `--database` value of that database (a SQLite path or a PostgreSQL URL).
    pub database: String,
    pub clock: ManualClock,
    pub app: Router,
    pub dir: tempfile::TempDir,
    /// The authentication service the router uses.
    pub auth: Auth,
    /// An API token of the administrator `tester`, sent by [`Harness::call`].
    pub token: String,
}

/// The administrator every harness signs in as, and its password.
pub const ADMIN: &str = "tester";
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";

/// An account `name` with `role` (created if missing) and a new API token carrying every
/// permission of that role.
pub async fn account_token(auth: &Auth, name: &str, role: &str, password: &str) -> String {
    let account = match auth.store().account_by_name(name).await.unwrap() {
        Some(a) => a,
        None => {
            let input = policy::auth::AccountCreate {
                name: name.to_owned(),
                role: role.to_owned(),
                password: password.to_owned(),
            };
            auth.create_account(&Actor::cli(), &input, false).await.unwrap()
        }
    };
    let permissions = auth.role_permissions(&account.role).await.unwrap();
    let input = policy::auth::TokenCreate {
        name: "tests".to_owned(),
        permissions,
        profile_ids: None,
        expires_in_days: 365,
    };
    auth.issue_token(&Actor::cli(), &account, &input)
        .await
        .unwrap()
        .secret
}

/// The API token of each served database's administrator, by database path (a restarted server
/// keeps its database, so the token still holds), and by served address.
static SERVED_TOKENS: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Mutex::default);

/// An administrator and an API token for the database at `database`, made with the real
/// `recourse user add` (password on standard input) and `recourse token add`, once per file.
pub fn served_token(database: impl AsRef<std::ffi::OsStr>) -> String {
    use std::io::Write;
    let database = database.as_ref();
    let key = database.to_string_lossy().into_owned();
    if let Some(t) = SERVED_TOKENS.lock().unwrap().get(&key) {
        return t.clone();
    }
    let bin = env!("CARGO_BIN_EXE_recourse");
    let mut add = std::process::Command::new(bin)
        .args(["user", "add", ADMIN, "--role", "admin", "--database"])
        .arg(database)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(add.stdin.take().unwrap(), "{ADMIN_PASSWORD}").unwrap();
    let added = add.wait_with_output().unwrap();
    assert!(
        added.status.success(),
        "user add: {}",
        String::from_utf8_lossy(&added.stderr)
    );
    let out = std::process::Command::new(bin)
        .args([
            "token",
            "add",
            "--account",
            ADMIN,
            "--name",
            "tests",
            "--permissions",
            "all",
            "--database",
        ])
        .arg(database)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "token add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    SERVED_TOKENS.lock().unwrap().insert(key, token.clone());
    token
}

/// The token [`spawn_serve`] made for the server at `addr`.
pub fn token_for(addr: &str) -> Option<String> {
    SERVED_TOKENS.lock().unwrap().get(addr).cloned()
}

pub fn leptos_options() -> LeptosOptions {
    let args = server::cli::ServeArgs {
        addr: "127.0.0.1:0".parse().unwrap(),
        db: server::cli::DatabaseArgs {
            database: String::new(),
        },
        demo: false,
        trusted_proxies: Vec::new(),
        allowed_hosts: Vec::new(),
        test_clock: None,
        test_clock_skew_seconds: None,
        config: None,
        replica_id: None,
    };
    server::serve::leptos_options(&args).unwrap()
}

/// Starts the real `recourse serve` (JSON logs, a free loopback port) on `database` with
/// `extra` arguments; returns the process and the address it logged (an administrator's token
/// for it is registered for [`http`] and [`token_for`]). With `keep_log`, the
/// lines it logs after that are returned through the receiver; otherwise they are drained so
/// the server never blocks on a full pipe.
pub fn spawn_serve(
    database: impl AsRef<std::ffi::OsStr>,
    extra: &[&str],
    keep_log: bool,
) -> (
    std::process::Child,
    String,
    Option<std::sync::mpsc::Receiver<String>>,
) {
    spawn_serve_env(database, extra, keep_log, &[])
}

/// [`spawn_serve`] with these environment variables added to the server's environment.
pub fn spawn_serve_env(
    database: impl AsRef<std::ffi::OsStr>,
    extra: &[&str],
    keep_log: bool,
    env: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    Option<std::sync::mpsc::Receiver<String>>,
) {
    use std::io::BufRead;
    let database = database.as_ref();
    let token = served_token(database);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args(["--log-format", "json", "serve", "--addr", "127.0.0.1:0"])
        .args(extra)
        .envs(env.iter().copied())
        .arg("--database")
        .arg(database)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("server exited before listening:\n{}", seen.join("\n")))
            .unwrap();
        if let Some(rest) = line.split("\"addr\":\"").nth(1) {
            break rest.split('"').next().unwrap().to_owned();
        }
        seen.push(line);
    };
    SERVED_TOKENS.lock().unwrap().insert(addr.clone(), token);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if keep_log {
                let _ = tx.send(line);
            }
        }
    });
    (child, addr, keep_log.then_some(rx))
}

/// Sends SIGTERM to a served process (what an operator's stop sends).
pub fn sigterm(child: &std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
}

/// Sends SIGTERM to a served process and waits for it to exit (see [`exited`]).
pub fn terminate(child: &mut std::process::Child, within: std::time::Duration) -> std::process::ExitStatus {
    sigterm(child);
    exited(child, within)
}

/// Waits for a process that was told to stop to exit, at most `within`: one still running then
/// is killed and the test fails (it never hangs the suite). Returns its exit status.
pub fn exited(child: &mut std::process::Child, within: std::time::Duration) -> std::process::ExitStatus {
    exit_within(child, within).unwrap_or_else(|| {
        panic!(
            "the process was still running {} s after it was told to stop",
            within.as_secs()
        )
    })
}

/// Waits for a process to exit, at most `within`; one still running then is killed (`None`).
pub fn exit_within(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let end = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A blocking HTTP/1.0 request to a served process (JSON in, JSON out), with the token
/// [`spawn_serve`] made for it; `None` when the server is gone.
pub fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    let (status, payload) = http_text(addr, method, path, body)?;
    Some((status, serde_json::from_str(&payload).unwrap_or(Value::Null)))
}

/// [`http`], with the answer's body as text (`/metrics`, say).
pub fn http_text(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .ok()?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token_for(addr).map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    let status: u16 = out.split(' ').nth(1)?.parse().ok()?;
    let payload = out.split_once("\r\n\r\n").map_or("", |(_, p)| p);
    Some((status, payload.to_owned()))
}

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 8, 0, 0).unwrap()
}

impl Harness {
    pub async fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        Harness::open(dir, t0()).await
    }

    /// Opens (or reopens, after a simulated restart) the database in `dir`.
    pub async fn open(dir: tempfile::TempDir, now: DateTime<Utc>) -> Harness {
        Harness::open_with_runners(dir, now, server::config::Runners::none()).await
    }

    /// [`Harness::open`] with the agents and endpoints of `runners`.
    pub async fn open_with_runners(
        dir: tempfile::TempDir,
        now: DateTime<Utc>,
        runners: server::config::Runners,
    ) -> Harness {
        let database = backend::database(dir.path(), "recourse.db");
        let pool = server::db::open(&database).await.unwrap();
        let clock = ManualClock::new(now);
        let engine = Engine::with_runners(
            server::store::Store::new(pool.clone()),
            Arc::new(clock.clone()),
            runners,
        );
        let state = AppState::new(engine.clone(), leptos_options(), Some(clock.clone()));
        let auth = state.auth.clone();
        let token = account_token(&auth, ADMIN, "admin", ADMIN_PASSWORD).await;
        let app = router(state);
        Harness {
            engine,
            pool,
            database,
            clock,
            app,
            dir,
            auth,
            token,
        }
    }

    /// A harness whose engine runs the agents and endpoints of `config` (TOML, the format of
    /// `recourse serve --config`), on a fresh database.
    pub async fn with_config(dir: tempfile::TempDir, config: &str) -> Harness {
        Harness::with_dir_config(dir, t0(), config).await
    }

    /// [`Harness::with_config`] on the database already in `dir` (a restart), at `now`.
    pub async fn with_dir_config(dir: tempfile::TempDir, now: DateTime<Utc>, config: &str) -> Harness {
        let config = server::config::RunnerConfig::parse(config).expect("a valid configuration");
        Harness::open_with_runners(dir, now, server::config::Runners::new(config)).await
    }

    /// Starts a route carrying `work`; returns its id.
    pub async fn start_work(&self, profile_id: &str, invocation: &str, work: Value) -> String {
        let (status, v) = self
            .post(
                "/api/v1/routes",
                json!({"profile_id": profile_id, "caller": {"kind": "kanban_task", "reference": "task-1",
                       "invocation_id": invocation}, "work": work}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    /// Waits until the route's snapshot satisfies `done`, woken by the engine's events (a
    /// dispatcher reports on its own time); panics after `limit` with the last snapshot.
    pub async fn wait_route(
        &self,
        id: &str,
        limit: std::time::Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut events = self.engine.subscribe();
        let end = tokio::time::Instant::now() + limit;
        loop {
            let s = self.snapshot(id).await;
            if done(&s) {
                return s;
            }
            match tokio::time::timeout_at(end, events.recv()).await {
                Err(_) => panic!("timed out waiting for route {id}; last snapshot: {s}"),
                Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => {
                    panic!("the engine's events closed")
                }
                Ok(_) => {}
            }
        }
    }

    /// Waits (10 s at most) until every change committed so far has gone to the engine's
    /// subscribers: at once on SQLite; on PostgreSQL the event log reader sends them shortly
    /// after their commits.
    pub async fn events_delivered(&self) {
        tokio::time::timeout(std::time::Duration::from_secs(10), self.engine.events_delivered())
            .await
            .expect("the engine's events were not delivered within 10 s")
            .unwrap();
    }

    pub fn db_path(&self) -> std::path::PathBuf {
        self.dir.path().join("recourse.db")
    }

    /// A request as the administrator's token.
    pub async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let token = self.token.clone();
        self.call_as(Some(&token), method, uri, body).await
    }

    /// A request with this API token, or with no credentials at all.
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = match body {
            Some(b) => req
                .header("content-type", "application/json")
                .body(Body::from(b.to_string()))
                .unwrap(),
            None => req.body(Body::empty()).unwrap(),
        };
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        (status, value)
    }

    /// A request with these headers and this raw body (for the guard and limits), as the
    /// administrator's token unless the headers carry an `authorization` of their own.
    pub async fn call_raw(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(uri);
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            req = req.header("authorization", format!("Bearer {}", self.token));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(body.into()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, value)
    }

    pub async fn get(&self, uri: &str) -> Value {
        let (status, v) = self.call(Method::GET, uri, None).await;
        assert_eq!(status, StatusCode::OK, "GET {uri}: {v}");
        v
    }

    pub async fn post(&self, uri: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, uri, Some(body)).await
    }

    /// Creates a profile; returns its id.
    pub async fn profile(&self, body: Value) -> String {
        let (status, v) = self.post("/api/v1/profiles", body).await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    /// Starts a route for a Kanban task; returns its id.
    pub async fn start(&self, profile_id: &str, invocation: &str) -> String {
        self.start_for(profile_id, "kanban_task", invocation).await
    }

    pub async fn start_for(&self, profile_id: &str, kind: &str, invocation: &str) -> String {
        let (status, v) = self
            .post(
                "/api/v1/routes",
                json!({"profile_id": profile_id, "caller": {"kind": kind, "reference": "task-1", "invocation_id": invocation}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    pub async fn route(&self, id: &str) -> Value {
        self.get(&format!("/api/v1/routes/{id}")).await
    }

    pub async fn snapshot(&self, id: &str) -> Value {
        self.route(id).await["route"]["snapshot"].clone()
    }

    /// Moves the clock and runs the scheduler in line.
    pub async fn advance(&self, secs: i64) -> usize {
        self.clock.advance(TimeDelta::seconds(secs));
        server::scheduler::tick(&self.engine).await.unwrap()
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Waits until the route (its `GET /api/v1/routes/{id}` detail) satisfies `done`, for
    /// dispatchers that report from a task of their own: checks, then waits for the engine's
    /// next event, never for time. The bound only turns a route that never gets there into a
    /// failure.
    pub async fn wait_for(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut events = self.engine.subscribe();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let route = self.route(id).await;
            if done(&route) {
                return route;
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => panic!("event stream ended while waiting for {what}: {e}"),
                Err(_) => panic!("route {id} never reached {what}: {route}"),
            }
        }
    }

    /// Waits until the route is in `state`; returns its snapshot.
    pub async fn wait_state(&self, id: &str, state: &str) -> Value {
        self.wait_for(id, state, |r| r["route"]["snapshot"]["state"] == state)
            .await["route"]["snapshot"]
            .clone()
    }

    /// A second engine on the same database opened read-only, on the same clock: a real
    /// SQLite read-only database, or PostgreSQL sessions whose every transaction is read-only
    /// (`default_transaction_read_only`): every write fails.
    pub async fn read_only_engine(&self) -> std::sync::Arc<server::engine::Engine> {
        let pool: server::store::Pool = if backend::on_postgres() {
            use std::str::FromStr;
            let opts = sqlx::postgres::PgConnectOptions::from_str(&self.database)
                .unwrap()
                .options([("default_transaction_read_only", "on")]);
            sqlx::postgres::PgPoolOptions::new()
                .connect_with(opts)
                .await
                .unwrap()
                .into()
        } else {
            let opts = server::db::connect_options(self.db_path().to_str().unwrap())
                .unwrap()
                .read_only(true);
            sqlx::sqlite::SqlitePoolOptions::new()
                .connect_with(opts)
                .await
                .unwrap()
                .into()
        };
        server::engine::Engine::new(
            server::store::Store::new(pool),
            std::sync::Arc::new(self.clock.clone()),
        )
    }

    pub async fn launches(&self, route_id: &str) -> i64 {
        server::store::sql::query("SELECT COUNT(*) FROM simulated_launches WHERE route_id = ?")
            .bind(route_id)
            .scalar(&self.pool)
            .await
            .unwrap()
    }
}

// ------------------------------------------------------------------------------------------------
// Building blocks
// ------------------------------------------------------------------------------------------------

pub fn disabled() -> Value {
    json!({"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
           "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"})
}

pub fn class_policy(retries: u32, interval: u64, wait: u64, on_exhausted: &str) -> Value {
    json!({
        "retry": if retries > 0 { json!({"enabled": true, "max_retries": retries, "initial_interval_seconds": interval}) }
                 else { json!({"enabled": false, "max_retries": 0, "initial_interval_seconds": 0}) },
        "wait_for_reset": if wait > 0 { json!({"enabled": true, "max_wait_seconds": wait}) }
                          else { json!({"enabled": false, "max_wait_seconds": 0}) },
        "on_exhausted": on_exhausted,
    })
}

pub fn candidate(id: &str, transient: Value, hard: Value) -> Value {
    json!({"id": id, "transient": transient, "hard": hard})
}

pub fn sim(id: &str, provider: &str, script: Value) -> Value {
    json!({"id": id, "dispatcher": "simulated", "provider_id": provider, "script": script})
}

pub fn fail(envelope: Value) -> Value {
    json!({"outcome": "fail", "envelope": envelope})
}

pub fn succeed() -> Value {
    json!({"outcome": "succeed"})
}

pub fn hang() -> Value {
    json!({"outcome": "hang"})
}

/// Anthropic 529 overloaded before any output: transient, high confidence, gate open.
pub fn overloaded() -> Value {
    json!({"phase": "prompt", "effects": {"prompt_delivery": "confirmed"}, "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]})
}

/// Claude Code's usage limit with a machine-readable reset: hard (quota), trusted reset.
pub fn usage_limit(reset: DateTime<Utc>) -> Value {
    json!({"agent": "claude-code", "items": [{"kind": "acp_updates", "updates": [{"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("Claude AI usage limit reached|{}", reset.timestamp())}}],
        "prompt_result": {"stopReason": "end_turn"}}]})
}

/// Anthropic: credit balance too low (hard, quota).
pub fn credits_exhausted() -> Value {
    json!({"items": [{"kind": "http", "status": 400, "body": "{\"type\": \"error\", \"error\": {\"type\": \"invalid_request_error\", \"message\": \"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.\"}}"}]})
}

pub fn unknown_error() -> Value {
    json!({"phase": "prompt", "items": [{"kind": "stderr", "lines": ["frobnicator jammed at stage 7: token=sk-ant-abcdefghijklmnop"]}]})
}

pub fn overloaded_after_tool_activity() -> Value {
    let mut e = overloaded();
    e["phase"] = json!("tool");
    e["effects"]["tool_activity"] = json!(true);
    e
}

pub fn history_events(route: &Value) -> Vec<String> {
    route["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}->{}", h["event"].as_str().unwrap(), h["to"].as_str().unwrap()))
        .collect()
}
