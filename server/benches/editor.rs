//! What `recourse acp` adds to a turn in the editor, and what it costs in memory (a plain bench
//! binary: it prints its figures).
//!
//! The same published agent (Claude Code's adapter by default; `RECOURSE_BENCH_AGENT=codex` for
//! Codex's), pointed at the fake provider (which answers at once), is driven by the same ACP
//! client (the `agent-client-protocol` crate's client side) two ways in the same run, turn by
//! turn, alternating: started directly by the client, and behind `recourse acp` with a real
//! `recourse serve` on SQLite (route start or next work, the claim limited to the route, the
//! acknowledgement, the report: each a durable commit). A turn's latency is from the prompt sent
//! to the first `agent_message_chunk` the client reads. The first turn of each is printed apart
//! (behind `recourse acp` it includes the agent's start, which the direct client paid at
//! `session/new`); then `RECOURSE_BENCH_TURNS` turns each (default 20): median, p90, min and the
//! median difference. Then the RSS of `recourse acp` (VmRSS and its peak, VmHWM) with its session
//! open and its agent running, split into anonymous memory (heap, stacks) and the pages of the
//! binary and other files, with its PSS (shared pages divided among the processes mapping them:
//! `recourse serve` runs the same binary here).
//!
//! Needs the published agents (`RECOURSE_AGENTS_DIR`, as `./dev test` sets it); without them it
//! says so and exits. `cargo bench -p server --bench editor` (release), or
//! `cargo test -p server --bench editor --profile dev` to run it unoptimized.

#![allow(clippy::print_stdout, clippy::print_stderr, unreachable_pub)]

use agent_client_protocol::{
    self as acp,
    v1::{ConnectionTo, SessionMessage},
    Agent, Client,
};
use fake_provider::{FakeProvider, Reply};
use serde_json::{json, Value};
use std::{
    io::{BufRead, Read, Write},
    path::{Path, PathBuf},
    process::Stdio,
    time::{Duration, Instant},
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

const KEYS: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "sk-ant-fake-0000"),
    ("OPENAI_API_KEY", "sk-fake-0000"),
];

/// The agent's command, arguments and settings (its own environment), pointed at `base_url`.
fn agent(
    agents: &Path,
    which: &str,
    base_url: &str,
    home: &Path,
) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
    std::fs::create_dir_all(home).unwrap();
    let bin = agents.join("node_modules/.bin");
    let mut env = vec![("HOME".to_owned(), home.to_str().unwrap().to_owned())];
    match which {
        "codex" => {
            let dot = home.join(".codex");
            std::fs::create_dir_all(&dot).unwrap();
            std::fs::write(
                dot.join("config.toml"),
                format!(
                    "model = \"gpt-5.4-mini\"\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\
                     [model_providers.fake]\nname = \"fake\"\nbase_url = \"{base_url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
                     wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n[analytics]\nenabled = false\n"
                ),
            )
            .unwrap();
            (bin.join("codex-acp"), vec![], env)
        }
        _ => {
            for (k, v) in [
                ("ANTHROPIC_BASE_URL", base_url),
                ("ANTHROPIC_MODEL", "claude-sonnet-4-6"),
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ] {
                env.push((k.to_owned(), v.to_owned()));
            }
            (bin.join("claude-agent-acp"), vec![], env)
        }
    }
}

/// A blocking HTTP/1.0 JSON request with the token.
fn http(addr: &str, token: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    (
        status,
        serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap_or(Value::Null),
    )
}

/// One client session driven turn by turn: each request on `turns` is one prompt; the answer is
/// the time to its first message chunk.
async fn drive(
    transport: acp::ByteStreams<Compat<tokio::process::ChildStdin>, Compat<tokio::process::ChildStdout>>,
    cwd: PathBuf,
    mut turns: mpsc::Receiver<oneshot::Sender<Duration>>,
) {
    let result = Client
        .v1()
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let _: Value = cx
                .send_request(acp::UntypedMessage::new(
                    "initialize",
                    json!({"protocolVersion": 1, "clientCapabilities": {}}),
                )?)
                .block_task()
                .await?;
            let mut session = cx.build_session(cwd).block_task().start_session().await?.session;
            while let Some(reply) = turns.recv().await {
                let sent = Instant::now();
                session.send_prompt("ping")?;
                let mut first = None;
                loop {
                    match session.read_update().await? {
                        SessionMessage::Message(acp::Dispatch::Notification(n))
                            if n.params["update"]["sessionUpdate"] == "agent_message_chunk" =>
                        {
                            first.get_or_insert_with(|| sent.elapsed());
                        }
                        SessionMessage::Message(acp::Dispatch::Request(_, responder)) => {
                            responder.respond(json!({"outcome": {"outcome": "cancelled"}}))?;
                        }
                        SessionMessage::PromptResponse(r) => {
                            r?;
                            break;
                        }
                        _ => {}
                    }
                }
                let _ = reply.send(first.unwrap_or(Duration::MAX));
            }
            Ok(())
        })
        .await;
    if let Err(e) = result {
        eprintln!("client session failed: {}", e.message);
    }
}

async fn turn(driver: &mpsc::Sender<oneshot::Sender<Duration>>) -> Duration {
    let (tx, rx) = oneshot::channel();
    driver.send(tx).await.unwrap();
    tokio::time::timeout(Duration::from_secs(300), rx)
        .await
        .expect("a turn within 5 minutes")
        .unwrap()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9), v[0])
}

fn status_kib(pid: u32, field: &str) -> u64 {
    proc_kib(&format!("/proc/{pid}/status"), field)
}

/// A field of `/proc/PID/smaps_rollup` (the process's mappings summed), in KiB.
fn rollup_kib(pid: u32, field: &str) -> u64 {
    proc_kib(&format!("/proc/{pid}/smaps_rollup"), field)
}

/// The process's mappings from `/proc/PID/smaps`, summed by what they map (a file, or the
/// kind of anonymous memory): RSS and anonymous KiB, largest RSS first.
fn mappings(pid: u32) -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut sums: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, perms, offset, device, inode, then the path if any.
            let perms = words.next().unwrap_or_default().to_owned();
            current = format!("{} ({perms})", words.nth(3).unwrap_or("[anonymous]"));
        } else if first == "Rss:" || first == "Anonymous:" {
            let kib: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            let entry = sums.entry(current.clone()).or_default();
            if first == "Rss:" {
                entry.0 += kib;
            } else {
                entry.1 += kib;
            }
        }
    }
    let mut v: Vec<(u64, u64, String)> = sums.into_iter().map(|(k, (r, a))| (r, a, k)).collect();
    v.sort_by_key(|m| std::cmp::Reverse(m.0));
    v
}

fn proc_kib(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(agents) = std::env::var_os("RECOURSE_AGENTS_DIR").map(PathBuf::from) else {
        println!("editor bench: SKIPPED (no RECOURSE_AGENTS_DIR; scripts/agents.sh install prints it)");
        return;
    };
    let which = std::env::var("RECOURSE_BENCH_AGENT").unwrap_or_else(|_| "claude".to_owned());
    let turns: usize = std::env::var("RECOURSE_BENCH_TURNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let bin = env!("CARGO_BIN_EXE_recourse");
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let work = work.canonicalize().unwrap();
    let provider = FakeProvider::start().await;
    for prefix in ["direct", "recourse"] {
        provider.script(prefix, vec![Reply::Text("pong".into())]);
    }
    // The server: an administrator's token, the agent in its configuration, a profile of it.
    let db = dir.path().join("r.db");
    let mut add = std::process::Command::new(bin)
        .args(["user", "add", "bench", "--role", "admin", "--database"])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(add.stdin.take().unwrap(), "correct horse battery staple").unwrap();
    assert!(add.wait().unwrap().success());
    let token = std::process::Command::new(bin)
        .args([
            "token",
            "add",
            "--account",
            "bench",
            "--name",
            "bench",
            "--permissions",
            "all",
            "--database",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
    let (command, args, set_env) = agent(
        &agents,
        &which,
        &provider.base_url("recourse"),
        &dir.path().join("home-recourse"),
    );
    let names: Vec<&str> = KEYS.iter().map(|(k, _)| *k).chain(["PATH"]).collect();
    let mut config = format!(
        "[[agent]]\nid = \"{which}\"\ncommand = {command:?}\nargs = {args:?}\nallowed_roots = [{work:?}]\nenv = {names:?}\n[agent.set_env]\n"
    );
    for (k, v) in &set_env {
        config.push_str(&format!("{k} = {v:?}\n"));
    }
    let config_path = dir.path().join("recourse.toml");
    std::fs::write(&config_path, config).unwrap();
    let mut serve = std::process::Command::new(bin)
        .args([
            "--log-format",
            "json",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&config_path)
        .arg("--database")
        .arg(&db)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(serve.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("the server listens").unwrap();
        if let Some(rest) = line.split("\"addr\":\"").nth(1) {
            break rest.split('"').next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let (status, profile) = http(
        &addr,
        &token,
        "POST",
        "/api/v1/profiles",
        Some(
            &json!({"name": "bench", "targets": [{"id": which, "dispatcher": "acp", "runner": which}],
            "policy": {"version": 1, "candidates": [{"id": which,
                "transient": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0}, "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
                "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0}, "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}}),
        ),
    );
    assert_eq!(status, 201, "{profile}");
    let profile = profile["id"].as_str().unwrap().to_owned();

    // The same agent, started directly by the client.
    let (command, args, set_env) = agent(
        &agents,
        &which,
        &provider.base_url("direct"),
        &dir.path().join("home-direct"),
    );
    let mut direct = tokio::process::Command::new(&command)
        .args(&args)
        .current_dir(&work)
        .env_clear()
        .envs(KEYS)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(set_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (direct_turns, rx) = mpsc::channel(1);
    let transport = acp::ByteStreams::new(
        direct.stdin.take().unwrap().compat_write(),
        direct.stdout.take().unwrap().compat(),
    );
    tokio::spawn(drive(transport, work.clone(), rx));

    // The same agent behind `recourse acp`.
    let mut editor = tokio::process::Command::new(bin)
        .args([
            "acp",
            "--server",
            &format!("http://{addr}"),
            "--profile",
            &profile,
            "--config",
        ])
        .arg(&config_path)
        .env("RECOURSE_TOKEN", &token)
        .envs(KEYS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let editor_pid = editor.id().unwrap();
    let (recourse_turns, rx) = mpsc::channel(1);
    let transport = acp::ByteStreams::new(
        editor.stdin.take().unwrap().compat_write(),
        editor.stdout.take().unwrap().compat(),
    );
    tokio::spawn(drive(transport, work.clone(), rx));

    let first_direct = turn(&direct_turns).await;
    let first_recourse = turn(&recourse_turns).await;
    println!("agent: {which}; first turn (recourse acp starts the agent now, the direct client did at session/new):");
    println!(
        "  direct {:.1} ms, through recourse acp {:.1} ms",
        ms(first_direct),
        ms(first_recourse)
    );
    let (mut d, mut r) = (Vec::new(), Vec::new());
    for i in 0..turns {
        // Alternate which goes first, so neither always runs on a machine the other just woke.
        if i % 2 == 0 {
            d.push(ms(turn(&direct_turns).await));
            r.push(ms(turn(&recourse_turns).await));
        } else {
            r.push(ms(turn(&recourse_turns).await));
            d.push(ms(turn(&direct_turns).await));
        }
    }
    let (dm, d90, dmin) = stats(d);
    let (rm, r90, rmin) = stats(r);
    println!("first update of a turn, {turns} turns each, alternating (median / p90 / min):");
    println!("  direct:               {dm:8.1} / {d90:8.1} / {dmin:8.1} ms");
    println!("  through recourse acp: {rm:8.1} / {r90:8.1} / {rmin:8.1} ms");
    println!("  added (median):       {:8.1} ms", rm - dm);
    let mib = |field| status_kib(editor_pid, field) as f64 / 1024.0;
    let rollup = |field| rollup_kib(editor_pid, field) as f64 / 1024.0;
    println!(
        "recourse acp, one session open and its agent running: RSS {:.1} MiB (peak {:.1} MiB): \
         heap and stacks {:.1}, the binary's pages and other files {:.1} (clean pages shared with \
         other processes {:.1}); PSS {:.1} MiB; {} threads",
        mib("VmRSS:"),
        mib("VmHWM:"),
        mib("RssAnon:"),
        mib("RssFile:") + mib("RssShmem:"),
        rollup("Shared_Clean:"),
        rollup("Pss:"),
        status_kib(editor_pid, "Threads:")
    );
    println!("  its largest mappings (RSS KiB, anonymous KiB, what):");
    for (rss, anon, what) in mappings(editor_pid).into_iter().take(8) {
        println!("  {rss:8} {anon:8}  {what}");
    }
    drop((direct_turns, recourse_turns));
    let _ = editor.start_kill();
    let _ = direct.start_kill();
    let _ = serve.kill();
    let _ = serve.wait();
}
