//! The fake ACP agent (`fake-agent/`, binary `fake-acp-agent`) as the tests use it: built once
//! per test process, configured as a real agent of the server's configuration, scripted per
//! test, and read back through its log.
//!
//! Cargo builds a package's own binaries before its integration tests, not the binaries of
//! other workspace members, so the helper builds `fake-acp-agent` itself, into a target
//! directory of its own (`target/fake-agent`: the outer `cargo test` holds the lock of the
//! main one while tests run). A no-op build takes a fraction of a second.

use serde_json::{json, Value};
use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
    time::Duration,
};

/// The fake agent's executable (built on first use; panics with the build's output if that
/// fails).
pub fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let target = workspace.join("target").join("fake-agent");
        let out = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "--offline",
                "-p",
                "fake-agent",
                "--bin",
                "fake-acp-agent",
            ])
            .arg("--target-dir")
            .arg(&target)
            .current_dir(workspace)
            .output()
            .expect("cannot run cargo to build the fake ACP agent");
        assert!(
            out.status.success(),
            "building the fake ACP agent (`cargo build -p fake-agent`) failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = target.join("debug").join("fake-acp-agent");
        assert!(bin.exists(), "no fake agent at {}", bin.display());
        bin
    })
    .clone()
}

/// What a fake agent does when its stdin closes (Recourse closes it once the session is over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnEof {
    /// Stays until a signal ends it, as Claude Code's and Codex's adapters do: the default.
    Stays,
    /// Exits 0 at once, as Gemini CLI and Qwen Code do.
    Exits,
}

impl OnEof {
    /// Both, for the tests of a success: an outcome must not depend on it.
    pub const BOTH: [OnEof; 2] = [OnEof::Stays, OnEof::Exits];
}

/// One scripted agent: its script, its log, its working directory.
pub struct FakeAgent {
    pub id: String,
    pub provider: String,
    pub script: PathBuf,
    pub log: PathBuf,
    /// The allowed root and working directory of its routes (`DIR/work`, shared by the agents
    /// of one directory, so one route's work fits all its candidates).
    pub root: PathBuf,
}

impl FakeAgent {
    /// An agent `id` in `dir` whose process number n plays `attempts[n-1]` (the last one again
    /// past the end), staying after stdin EOF unless an attempt says `exit_on_eof`.
    /// (The fake agent stays unless told otherwise: an attempt's own `exit_on_eof` is kept.)
    pub fn new(dir: &Path, id: &str, provider: &str, attempts: Value) -> FakeAgent {
        FakeAgent::scripted(dir, id, provider, attempts)
    }

    /// [`FakeAgent::new`] whose every attempt does `eof` when its stdin closes.
    pub fn on_eof(dir: &Path, id: &str, provider: &str, mut attempts: Value, eof: OnEof) -> FakeAgent {
        for a in attempts.as_array_mut().into_iter().flatten() {
            a["exit_on_eof"] = json!(eof == OnEof::Exits);
        }
        FakeAgent::scripted(dir, id, provider, attempts)
    }

    fn scripted(dir: &Path, id: &str, provider: &str, attempts: Value) -> FakeAgent {
        let root = dir.join("work");
        std::fs::create_dir_all(&root).unwrap();
        let script = dir.join(format!("{id}-script.json"));
        std::fs::write(&script, json!({ "attempts": attempts }).to_string()).unwrap();
        FakeAgent {
            id: id.to_owned(),
            provider: provider.to_owned(),
            script,
            log: dir.join(format!("{id}-log.jsonl")),
            root: root.canonicalize().unwrap(),
        }
    }

    /// Its `[[agent]]` table, with short timeouts; `timeouts` overrides some, one `name = value`
    /// per line (e.g. `prompt_idle = 1`).
    pub fn toml(&self, timeouts: &str) -> String {
        let mut t: Vec<(String, String)> = [
            ("step", "10"),
            ("prompt_idle", "30"),
            ("prompt_total", "60"),
            ("cancel_grace", "5"),
            ("exit_grace", "2"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for line in timeouts.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line.split_once('=').expect("name = value");
            let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
            match t.iter_mut().find(|(name, _)| *name == k) {
                Some(entry) => entry.1 = v,
                None => t.push((k, v)),
            }
        }
        let timeouts: String = t.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        format!(
            "[[agent]]\nid = {id:?}\ncommand = {cmd:?}\nargs = [\"--script\", {script:?}, \"--log\", {log:?}]\n\
             allowed_roots = [{root:?}]\nprovider_id = {provider:?}\n[agent.timeouts]\n{timeouts}",
            id = self.id,
            cmd = binary().to_str().unwrap(),
            script = self.script.to_str().unwrap(),
            log = self.log.to_str().unwrap(),
            root = self.root.to_str().unwrap(),
            provider = self.provider,
        )
    }

    /// The candidate target naming this agent.
    pub fn target(&self, candidate: &str) -> Value {
        json!({"id": candidate, "dispatcher": "acp", "runner": self.id})
    }

    /// The work of a route on this agent.
    pub fn work(&self, text: &str) -> Value {
        json!({"prompt": [{"type": "text", "text": text}], "cwd": self.root.to_str().unwrap()})
    }

    /// Every line of its log.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// How many messages with this method it received.
    pub fn received(&self, method: &str) -> usize {
        self.log()
            .iter()
            .filter(|l| l["recv"]["method"] == method)
            .count()
    }

    /// The messages with this method it received.
    pub fn messages(&self, method: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|l| l["recv"]["method"] == method)
            .map(|l| l["recv"].clone())
            .collect()
    }

    /// How many of its processes exited by themselves on stdin EOF (the fake logs that just
    /// before it exits; one that Recourse's SIGTERM ended logs nothing).
    pub fn exits_on_eof(&self) -> usize {
        self.log().iter().filter(|l| l["event"] == "exit").count()
    }

    /// How many of its processes saw their stdin close.
    pub fn eofs(&self) -> usize {
        self.log().iter().filter(|l| l["event"] == "eof").count()
    }

    /// The pids of the agent processes started so far.
    pub fn pids(&self) -> Vec<i32> {
        self.log()
            .iter()
            .filter(|l| l["event"] == "start")
            .filter_map(|l| l["pid"].as_i64())
            .map(|p| i32::try_from(p).unwrap())
            .collect()
    }

    /// The pids of the processes the agents started themselves.
    pub fn grandchildren(&self) -> Vec<i32> {
        self.log()
            .iter()
            .filter_map(|l| l["grandchild"].as_i64())
            .map(|p| i32::try_from(p).unwrap())
            .collect()
    }
}

/// Whether a process is running: it exists and is not a zombie (a zombie is dead; only its
/// parent can remove it).
pub fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("Z");
    state != "Z" && state != "X"
}

/// Waits (bounded) until `done` holds, checking every 20 ms: for things a subprocess does on
/// its own time (exiting, writing its log). Panics with `what` after `limit`.
pub async fn until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(tokio::time::Instant::now() < end, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
