//! `fake-acp-agent`: a scripted Agent Client Protocol agent (JSON-RPC 2.0, one message per
//! line, over stdio) for Recourse's tests and benchmarks.
//!
//! It is written by hand, with `serde_json` and `std` only, on purpose: the tests need wire and
//! process misbehaviour an SDK would smooth over (exiting mid-prompt, a crash by signal, a hang
//! that ignores `session/cancel` and stdin EOF, updates after a cancel), and an implementation
//! independent of the client under test catches serialization mistakes an SDK-to-SDK test
//! would hide. The payloads the scripts use in the tests are what real agents send
//! (claude-agent-acp, gemini --acp, codex-acp, qwen --acp; the matrix test in
//! `server/tests/it/agents_matrix.rs` runs the real ones).
//!
//! How it differs from the real agents it stands for, in what Recourse can observe:
//! - Stdin EOF: by default it stays (blocked, like Claude Code's and Codex's adapters, which
//!   never exit when their stdin closes) until a signal ends it; `"exit_on_eof": true` makes it
//!   exit 0 at once, as Gemini CLI and Qwen Code do. Tests of a success run both ways.
//! - It calls no provider: every failure is scripted text, so it cannot show an agent's own
//!   retries (Claude's ten, Qwen's silent 45 minutes) or their timing; the real agents do, in
//!   the matrix test, against `fake-provider`.
//! - It answers at once: no start-up time (the real ones take 0.3 to 6 s before `initialize`
//!   is answered), no `available_commands_update` or `usage_update` noise unless scripted, no
//!   session files under `HOME`, and `session/load` replays only what the script says.
//! - Its stderr is what the script writes, nothing else (the real ones print warnings,
//!   `tracing` lines with ANSI colour, or a JS object dump of a failed request).
//! - It never asks for a permission, a file or a terminal unless scripted; it has one session
//!   per process and serves one prompt at a time.
//!
//! Usage: `fake-acp-agent --script FILE [--log FILE]`.
//!
//! - `--log FILE` appends one JSON line per event: `{"pid": P, "event": "start", "env":
//!   [NAMES], "cwd": DIR}` when the process starts (the names of its environment variables,
//!   never their values), `{"pid": P, "recv": MESSAGE}` for every message it reads, `{"pid": P,
//!   "grandchild": PID}` for a process it started. Tests assert on it (that `session/cancel`
//!   arrived, that no second `session/prompt` came).
//! - `--script FILE` is JSON: `{"attempts": [ATTEMPT, ...]}`. Process number `n` (counted by
//!   the `start` lines already in the log; 1 without a log) plays `attempts[n-1]`, the last one
//!   again past the end. An ATTEMPT (every field optional):
//!
//! ```json
//! {
//!   "initialize": {"loadSession": false, "authMethods": [], "protocolVersion": 1, "error": null,
//!                  "silent": false},
//!   "authenticate": {"error": null},
//!   "new_session": {"sessionId": "s-1", "error": null},
//!   "load_session": {"replay": [UPDATE, ...], "error": null},
//!   "prompt": [STEP, ...],
//!   "on_cancel": "cancelled" | "ignore" | {"updates": [UPDATE, ...]},
//!   "exit_on_eof": false
//! }
//! ```
//!
//! `silent` never answers `initialize` (a hang before the session). A STEP is one of: `{"update": UPDATE}` (a `session/update` with that `update` object),
//! `{"message": "text"}` (an `agent_message_chunk`), `{"request": {"method": M, "params": P}}`
//! (a request to the client; the `sessionId` is added and the step waits for the answer),
//! `{"stderr": "line"}`, `{"respond": RESULT}` (the prompt's result, e.g. `{"stopReason":
//! "end_turn"}`), `{"error": {"code": C, "message": M, "data": D}}` (the prompt's JSON-RPC
//! error), `{"exit": CODE}`, `{"abort": true}` (SIGABRT), `{"hang": true}` (never answer),
//! `{"wait_cancel": true}` (block until `session/cancel` arrives, then go on with the next
//! step; `on_cancel` is not applied), `{"wait_file": PATH}` (block until the file exists: the
//! test decides when the agent goes on), `{"grandchild": {"ignore_term": false}}` (start a
//! long-lived `sleep` in the agent's process group, to prove the whole group is stopped).
//! `on_cancel` applies while a prompt runs: `cancelled` (the default) answers the prompt with
//! `{"stopReason": "cancelled"}` at once; `ignore` logs the cancel and does nothing;
//! `{"updates": [...]}` first sends those updates (they belong to the cancelled prompt), then
//! answers `cancelled`. After stdin closes the agent stays until a signal ends it (the log's
//! `{"event": "eof"}`), unless `exit_on_eof`: then it logs `{"event": "exit", "code": 0}` and
//! exits 0, so a test tells an exit of its own from Recourse's SIGTERM (which leaves no
//! `exit` line).

use serde_json::{json, Value};
use std::{
    fs::OpenOptions,
    io::{BufRead, Write},
    process::{Command, Stdio},
    sync::{
        mpsc::{channel, Receiver, Sender},
        Arc, Mutex,
    },
    thread,
    time::Duration,
};

fn main() {
    let mut script_path = None;
    let mut log_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script_path = args.next(),
            "--log" => log_path = args.next(),
            other => fail(&format!("unknown argument {other}")),
        }
    }
    let script: Value = match script_path {
        Some(p) => std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| fail("cannot read the script")),
        None => json!({"attempts": [{}]}),
    };
    let log = Log::open(log_path.as_deref());
    let number = log.starts_before();
    let env: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let cwd = std::env::current_dir().ok().map(|d| d.display().to_string());
    log.write(json!({"event": "start", "env": env, "cwd": cwd}));
    let attempts = script["attempts"].as_array().cloned().unwrap_or_default();
    let attempt = attempts
        .get(number)
        .or(attempts.last())
        .cloned()
        .unwrap_or_else(|| json!({}));
    Agent::new(attempt, log).run();
}

fn fail(why: &str) -> ! {
    eprintln!("fake-acp-agent: {why}");
    std::process::exit(2)
}

/// The JSON-lines log the tests read.
#[derive(Clone)]
struct Log {
    path: Option<String>,
    pid: u32,
}

impl Log {
    fn open(path: Option<&str>) -> Log {
        Log {
            path: path.map(str::to_owned),
            pid: std::process::id(),
        }
    }

    /// How many agent processes started before this one (by their `start` lines).
    fn starts_before(&self) -> usize {
        let Some(p) = &self.path else { return 0 };
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["event"] == "start"))
            .count()
    }

    fn write(&self, mut entry: Value) {
        let Some(p) = &self.path else { return };
        entry["pid"] = json!(self.pid);
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(p) {
            // One write per line, so concurrent agents never interleave within a line.
            let _ = f.write_all(format!("{entry}\n").as_bytes());
        }
    }
}

/// What the prompt thread can wait for.
enum Event {
    Response(Value),
    Cancel,
}

/// Shared between the reader (main thread) and the prompt thread.
struct Shared {
    /// The id of the `session/prompt` being played, until it is answered.
    prompt_id: Option<Value>,
    /// Where the prompt thread waits for answers to its requests and for a cancel.
    events: Option<Sender<Event>>,
    /// A `wait_cancel` step is waiting: the next cancel is its, not the prompt's end.
    waiting_cancel: bool,
}

struct Agent {
    attempt: Value,
    log: Log,
    out: Arc<Mutex<std::io::Stdout>>,
    shared: Arc<Mutex<Shared>>,
    session_id: String,
}

impl Agent {
    fn new(attempt: Value, log: Log) -> Agent {
        let session_id = attempt["new_session"]["sessionId"]
            .as_str()
            .map_or_else(|| format!("fake-session-{}", std::process::id()), str::to_owned);
        Agent {
            attempt,
            log,
            out: Arc::new(Mutex::new(std::io::stdout())),
            shared: Arc::new(Mutex::new(Shared {
                prompt_id: None,
                events: None,
                waiting_cancel: false,
            })),
            session_id,
        }
    }

    fn run(self) {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if line.trim().is_empty() {
                continue;
            }
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                self.log.write(json!({"unparsed": line}));
                continue;
            };
            self.log.write(json!({"recv": msg}));
            self.handle(msg);
        }
        self.log.write(json!({"event": "eof"}));
        if self.attempt["exit_on_eof"].as_bool().unwrap_or(false) {
            self.log.write(json!({"event": "exit", "code": 0}));
            std::process::exit(0);
        }
        // Like Claude Code's and Codex's adapters: stdin closing is no reason to go.
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }

    fn handle(&self, msg: Value) {
        let method = msg["method"].as_str().unwrap_or_default().to_owned();
        let id = msg.get("id").cloned();
        match (method.as_str(), id) {
            // A response to one of our requests.
            ("", Some(_)) => {
                if let Some(tx) = &self.shared.lock().unwrap_or_else(|e| e.into_inner()).events {
                    let _ = tx.send(Event::Response(msg));
                }
            }
            ("initialize", Some(id)) => {
                let i = &self.attempt["initialize"];
                if i["silent"].as_bool().unwrap_or(false) {
                    return;
                }
                if let Some(e) = i.get("error").filter(|e| !e.is_null()) {
                    return self.send(json!({"jsonrpc": "2.0", "id": id, "error": e}));
                }
                let result = json!({
                    "protocolVersion": i.get("protocolVersion").cloned().unwrap_or(json!(1)),
                    "agentCapabilities": {
                        "loadSession": i["loadSession"].as_bool().unwrap_or(false),
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
                    },
                    "authMethods": i.get("authMethods").cloned().unwrap_or(json!([])),
                    "agentInfo": {"name": "fake-acp-agent", "version": env!("CARGO_PKG_VERSION")},
                });
                self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            ("authenticate", Some(id)) => self.answer(id, &self.attempt["authenticate"], json!({})),
            ("session/new", Some(id)) => self.answer(
                id,
                &self.attempt["new_session"],
                json!({"sessionId": self.session_id}),
            ),
            ("session/load", Some(id)) => {
                let l = &self.attempt["load_session"];
                if l.get("error").is_none_or(Value::is_null) {
                    let sid = msg["params"]["sessionId"].clone();
                    for u in l["replay"].as_array().into_iter().flatten() {
                        self.send(update(&sid, u.clone()));
                    }
                }
                self.answer(id, l, json!({}));
            }
            ("session/prompt", Some(id)) => self.prompt(id, &msg),
            ("session/cancel", None) => self.cancel(),
            (_, Some(id)) => self.send(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}})),
            _ => {}
        }
    }

    /// Answers a request with the step's `error` if it has one, otherwise with `ok`.
    fn answer(&self, id: Value, step: &Value, ok: Value) {
        match step.get("error").filter(|e| !e.is_null()) {
            Some(e) => self.send(json!({"jsonrpc": "2.0", "id": id, "error": e})),
            None => self.send(json!({"jsonrpc": "2.0", "id": id, "result": ok})),
        }
    }

    fn send(&self, msg: Value) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{msg}");
        let _ = out.flush();
    }

    fn prompt(&self, id: Value, msg: &Value) {
        let (tx, rx) = channel();
        {
            let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            s.prompt_id = Some(id.clone());
            s.events = Some(tx);
        }
        let player = Player {
            steps: self.attempt["prompt"].as_array().cloned().unwrap_or_default(),
            session_id: msg["params"]["sessionId"].clone(),
            id,
            out: self.out.clone(),
            shared: self.shared.clone(),
            log: self.log.clone(),
            events: rx,
        };
        thread::spawn(move || player.play());
    }

    fn cancel(&self) {
        let on_cancel = &self.attempt["on_cancel"];
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        // A step waiting for the cancel takes it itself.
        if s.waiting_cancel {
            s.waiting_cancel = false;
            if let Some(tx) = &s.events {
                let _ = tx.send(Event::Cancel);
            }
            return;
        }
        if on_cancel == "ignore" {
            return;
        }
        let Some(id) = s.prompt_id.take() else { return };
        let sid = json!(self.session_id);
        for u in on_cancel["updates"].as_array().into_iter().flatten() {
            self.send(update(&sid, u.clone()));
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "cancelled"}}));
    }
}

fn update(session_id: &Value, update: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": session_id, "update": update}})
}

/// Plays one prompt's steps on its own thread, so the reader stays free for `session/cancel`
/// and for the answers to the agent's own requests.
struct Player {
    steps: Vec<Value>,
    session_id: Value,
    id: Value,
    out: Arc<Mutex<std::io::Stdout>>,
    shared: Arc<Mutex<Shared>>,
    log: Log,
    events: Receiver<Event>,
}

impl Player {
    /// Writes a message unless the prompt was already answered (a honoured cancel).
    fn send(&self, msg: Value) -> bool {
        let s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if s.prompt_id.as_ref() != Some(&self.id) {
            return false;
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{msg}");
        let _ = out.flush();
        true
    }

    /// Answers the prompt (once).
    fn finish(&self, body: Value) {
        let mut s = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if s.prompt_id.as_ref() != Some(&self.id) {
            return;
        }
        s.prompt_id = None;
        let mut msg = json!({"jsonrpc": "2.0", "id": self.id});
        for (k, v) in body.as_object().into_iter().flatten() {
            msg[k] = v.clone();
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{msg}");
        let _ = out.flush();
    }

    fn play(self) {
        let mut next_request = 1_000_u64;
        for step in &self.steps {
            let Some((kind, arg)) = step.as_object().and_then(|o| o.iter().next()) else {
                continue;
            };
            match kind.as_str() {
                "update" => {
                    if !self.send(update(&self.session_id, arg.clone())) {
                        return;
                    }
                }
                "message" => {
                    let u = json!({"sessionUpdate": "agent_message_chunk",
                                   "content": {"type": "text", "text": arg}});
                    if !self.send(update(&self.session_id, u)) {
                        return;
                    }
                }
                "request" => {
                    next_request += 1;
                    let mut params = arg["params"].clone();
                    params["sessionId"] = self.session_id.clone();
                    let req = json!({"jsonrpc": "2.0", "id": next_request,
                                     "method": arg["method"], "params": params});
                    if !self.send(req) {
                        return;
                    }
                    // Wait for the answer (the reader logs it); a cancel meanwhile is the
                    // reader's to answer.
                    loop {
                        match self.events.recv() {
                            Ok(Event::Response(r)) if r["id"] == json!(next_request) => break,
                            Ok(_) => {}
                            Err(_) => return,
                        }
                    }
                }
                "stderr" => {
                    let mut err = std::io::stderr();
                    let _ = writeln!(err, "{}", arg.as_str().unwrap_or_default());
                    let _ = err.flush();
                }
                "respond" => return self.finish(json!({"result": arg})),
                "error" => return self.finish(json!({"error": arg})),
                "exit" => {
                    let _ = std::io::stderr().flush();
                    std::process::exit(arg.as_i64().and_then(|c| i32::try_from(c).ok()).unwrap_or(1));
                }
                "abort" => std::process::abort(),
                "hang" => loop {
                    thread::sleep(Duration::from_secs(3600));
                },
                "wait_cancel" => {
                    self.shared
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .waiting_cancel = true;
                    loop {
                        match self.events.recv() {
                            Ok(Event::Cancel) => break,
                            Ok(_) => {}
                            Err(_) => return,
                        }
                    }
                }
                "wait_file" => {
                    // The test says when: it creates the file.
                    let path = arg.as_str().unwrap_or_default();
                    while !std::path::Path::new(path).exists() {
                        thread::sleep(Duration::from_millis(10));
                    }
                }
                "grandchild" => {
                    let cmd = if arg["ignore_term"].as_bool().unwrap_or(false) {
                        "trap '' TERM; while :; do sleep 1; done"
                    } else {
                        "exec sleep 3600"
                    };
                    match Command::new("/bin/sh")
                        .args(["-c", cmd])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                    {
                        Ok(child) => self.log.write(json!({"grandchild": child.id()})),
                        Err(e) => self.log.write(json!({"grandchild_error": e.to_string()})),
                    }
                }
                other => self.log.write(json!({"unknown_step": other})),
            }
        }
        // Out of steps: the turn ends normally.
        self.finish(json!({"result": {"stopReason": "end_turn"}}));
    }
}
