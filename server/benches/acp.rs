//! What Recourse adds to one ACP agent attempt, and what a running agent session costs it (a
//! plain bench binary: each figure is one timed run, printed).
//!
//! `cargo bench -p server --bench acp` prints:
//! 1. one attempt with the same fake agent (`fake-acp-agent`, the same script) three ways:
//!    spawned directly and driven by hand-written JSON-RPC lines (spawn, `initialize`,
//!    `session/new`, `session/prompt`, the answer, stdin closed, exit reaped), and through
//!    Recourse (route start committed, dispatch started committed, spawn in a process group,
//!    process row recorded, the SDK's handshake, prompt, updates, stop, envelope,
//!    classification, the report's commit), for a success and for a JSON-RPC error before any
//!    output (a `retry_wait` decision). Medians and p90 over the runs, and Recourse's median
//!    minus the direct median;
//! 2. memory per running agent session: the RSS of this process (which is the server: engine,
//!    SQLite, dispatcher) with N agents mid-prompt, minus its RSS idle, over N. The agents' own
//!    RSS is printed apart (it is theirs, not Recourse's).
//!
//! `RECOURSE_BENCH_QUICK=1` for a smaller run.

#![allow(clippy::print_stdout, unreachable_pub)]

#[path = "../tests/common/fake_agent.rs"]
#[allow(dead_code)]
mod fake_agent;

use fake_agent::{FakeAgent, OnEof};
use policy::api::{
    Caller, CallerKind, CandidateTarget, DispatcherKind, ProfileInput, StartRouteRequest, Work,
};
use serde_json::{json, Value};
use server::{
    clock::SystemClock,
    config::{RunnerConfig, Runners},
    engine::Engine,
    store::Store,
};
use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

fn quick() -> bool {
    std::env::var_os("RECOURSE_BENCH_QUICK").is_some()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort_unstable();
    let p = |q: f64| {
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        ms(v[i])
    };
    (p(0.5), p(0.9))
}

/// One attempt driven by hand: the floor any client pays for this agent and this script.
fn direct(agent: &FakeAgent, cwd: &str) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(fake_agent::binary())
        .args(["--script", agent.script.to_str().unwrap()])
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        loop {
            let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            if line["id"] == id {
                return line;
            }
        }
    };
    call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let s = call(2, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    let sid = s["result"]["sessionId"].clone();
    call(
        3,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "Fix the build"}]}),
    );
    drop(stdin);
    child.wait().unwrap();
    t.elapsed()
}

async fn engine(dir: &std::path::Path, agents: &[&FakeAgent]) -> Arc<Engine> {
    let toml: String = agents.iter().map(|a| a.toml("")).collect();
    let config = RunnerConfig::parse(&toml).unwrap();
    let pool = server::db::open(dir.join("bench.db").to_str().unwrap())
        .await
        .unwrap();
    Engine::with_runners(Store::new(pool), Arc::new(SystemClock), Runners::new(config))
}

async fn profile(engine: &Engine, agent: &str) -> String {
    let input = ProfileInput {
        name: format!("bench-{agent}"),
        kind: Default::default(),
        description: None,
        targets: vec![CandidateTarget {
            id: "main".into(),
            dispatcher: DispatcherKind::Acp,
            provider_id: None,
            model_id: None,
            label: None,
            runner: Some(agent.into()),
            script: vec![],
        }],
        policy: json!({"version": 1, "candidates": [{"id": "main",
            "transient": {"retry": {"enabled": true, "max_retries": 10, "initial_interval_seconds": 3600},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
            "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                     "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}),
        expected_revision: None,
        notifications: Vec::new(),
    };
    server::profiles::create(engine, policy::input::ValidatedProfile::parse(&input).unwrap())
        .await
        .unwrap()
        .id
}

async fn start(engine: &Engine, profile: &str, i: usize, cwd: &str) -> String {
    let request = StartRouteRequest {
        profile_id: profile.to_owned(),
        caller: Caller {
            kind: CallerKind::Workflow,
            reference: "bench".into(),
            invocation_id: format!("inv-{i}"),
        },
        title: None,
        work: Some(Work {
            prompt: vec![json!({"type": "text", "text": "Fix the build"})],
            cwd: Some(cwd.to_owned()),
            ..Work::default()
        }),
        pin: None,
    };
    engine
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap()
        .id
}

/// One attempt through Recourse: from the route's start to the commit of its outcome (`to`).
async fn through(engine: &Arc<Engine>, profile: &str, i: usize, cwd: &str, to: &str) -> Duration {
    let mut events = engine.subscribe();
    let t = Instant::now();
    let id = start(engine, profile, i, cwd).await;
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("the attempt ended")
            .unwrap();
        if e.route_id == id && std::env::var_os("RECOURSE_BENCH_TRACE").is_some() {
            eprintln!(
                "{} -> {} attempt {:?}",
                e.route_id,
                e.payload.to.as_str(),
                e.payload.snapshot.attempt
            );
        }
        if e.route_id == id && e.payload.to.as_str() == to && e.payload.snapshot.attempt.is_none() {
            return t.elapsed();
        }
    }
}

async fn attempts(dir: &std::path::Path) {
    let runs = if quick() { 10 } else { 40 };
    // The ok agent and each failing one report different providers: a failure opens its
    // provider's circuit (as it should), which would hold the next attempt on that provider.
    // They exit on stdin EOF (as Gemini CLI and Qwen Code do), so the direct run, which waits
    // for the exit, ends; through Recourse the report comes before the stop either way.
    let ok = FakeAgent::on_eof(
        dir,
        "ok",
        "bench-ok",
        json!([{"prompt": [{"message": "Done."}, {"respond": {"stopReason": "end_turn"}}]}]),
        OnEof::Exits,
    );
    let overloaded = json!([{"prompt": [{"error": {"code": -32603, "message": "Internal error: API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}}]}]);
    let errs: Vec<FakeAgent> = (0..runs)
        .map(|i| {
            FakeAgent::on_eof(
                dir,
                &format!("err{i}"),
                &format!("bench-err-{i}"),
                overloaded.clone(),
                OnEof::Exits,
            )
        })
        .collect();
    let cwd = ok.root.to_str().unwrap().to_owned();
    let mut agents: Vec<&FakeAgent> = vec![&ok];
    agents.extend(errs.iter());
    let e = engine(dir, &agents).await;
    let p_ok = profile(&e, "ok").await;
    let mut p_errs = Vec::new();
    for a in &errs {
        p_errs.push(profile(&e, &a.id).await);
    }
    // Warm up both paths (page cache, SQLite, code).
    for i in 0..3 {
        direct(&ok, &cwd);
        through(&e, &p_ok, 1_000_000 + i, &cwd, "active").await;
    }
    let (mut d_ok, mut d_err, mut r_ok, mut r_err) = (vec![], vec![], vec![], vec![]);
    for i in 0..runs {
        // Interleaved, so a busy machine slows both alike.
        d_ok.push(direct(&ok, &cwd));
        r_ok.push(through(&e, &p_ok, i, &cwd, "active").await);
        d_err.push(direct(&errs[i], &cwd));
        r_err.push(through(&e, &p_errs[i], 10_000 + i, &cwd, "retry_wait").await);
    }
    for (name, d, r) in [
        ("success", d_ok, r_ok),
        ("JSON-RPC error before output", d_err, r_err),
    ] {
        let (d50, d90) = stats(d);
        let (r50, r90) = stats(r);
        println!(
            "attempt, {name} ({runs} runs): direct p50 {d50:.2} ms p90 {d90:.2} ms; through Recourse p50 {r50:.2} ms p90 {r90:.2} ms; Recourse adds {:.2} ms (p50)",
            r50 - d50
        );
    }
}

async fn memory(dir: &std::path::Path) {
    let n = if quick() { 10 } else { 50 };
    let hang = FakeAgent::new(
        dir,
        "hang",
        "anthropic",
        json!([{"prompt": [{"message": "working"}, {"hang": true}]}]),
    );
    let ok = FakeAgent::new(
        dir,
        "warm",
        "anthropic",
        json!([{"prompt": [{"message": "Done."}, {"respond": {"stopReason": "end_turn"}}]}]),
    );
    let cwd = hang.root.to_str().unwrap().to_owned();
    let e = engine(dir, &[&hang, &ok]).await;
    let (p_hang, p_ok) = (profile(&e, "hang").await, profile(&e, "warm").await);
    for i in 0..3 {
        through(&e, &p_ok, 2_000_000 + i, &cwd, "active").await;
    }
    // Let the warm-up attempts' bookkeeping finish before the idle figure.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let me = std::process::id();
    let idle = rss_kib(me);
    let mut routes = Vec::new();
    for i in 0..n {
        routes.push(start(&e, &p_hang, 3_000_000 + i, &cwd).await);
    }
    let t = Instant::now();
    while hang.received("session/prompt") < n {
        assert!(t.elapsed() < Duration::from_secs(60), "agents did not all start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let every session's first update arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let busy = rss_kib(me);
    let agents: u64 = hang
        .pids()
        .iter()
        .map(|p| rss_kib(u32::try_from(*p).unwrap()))
        .sum();
    println!(
        "memory: server RSS idle {idle} KiB, with {n} agents mid-prompt {busy} KiB: {:.0} KiB per running agent session (the agents themselves: {:.0} KiB each, in their own processes)",
        (busy.saturating_sub(idle)) as f64 / n as f64,
        agents as f64 / n as f64
    );
    // Stop them all (abandon: the dispatcher cancels and stops each group).
    for id in routes {
        let g = e.route_summary(&id).await.unwrap().snapshot.generation;
        let _ = e
            .perform_action(
                &id,
                policy::api::ManualActionRequest {
                    action: policy::route::ManualAction::Stop,
                    expected_generation: g,
                },
            )
            .await;
    }
    let t = Instant::now();
    while hang.pids().iter().any(|p| fake_agent::running(*p)) {
        assert!(t.elapsed() < Duration::from_secs(60), "agents left running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let a = dir.path().join("attempts");
        let m = dir.path().join("memory");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&m).unwrap();
        attempts(&a).await;
        memory(&m).await;
    });
}
