//! What the gateway adds to a call, against calling the provider directly (a plain bench binary:
//! each figure is one timed run, printed). Everything runs in this process on loopback: the fake
//! provider (`tests/common/provider.rs`, through the gateway's test rig), a real Recourse router
//! on a real socket (SQLite file with its durable settings, `synchronous = FULL`), and one HTTP
//! client with keep-alive.
//!
//! `cargo bench -p server --bench gateway` prints, with the direct calls as the baseline in the
//! same run (calls interleaved, one of each in turn):
//! 1. the median (and p90) of N non-streamed calls, OpenAI style, direct and through
//!    `/v1/chat/completions`, and the difference of the medians (goal: at most 2 ms);
//! 2. the median time to the first streamed byte of N streamed calls, direct and through the
//!    gateway, and the difference (goal: at most 5 ms);
//! 3. sustained calls per second with C clients for a fixed number of calls, direct and through
//!    the gateway, and their ratio (goal: at least 0.5); with the CPU time the whole process
//!    (client, provider and server) spent per call in each, which bounds the rate on this
//!    machine's cores.
//!
//! Each gateway call is a route: its start committed before the provider is called, its success
//! and its completion committed after the answer (in the background). N is 200 and C 16;
//! `RECOURSE_BENCH_QUICK=1` for a smaller run. `RECOURSE_BENCH_STATEMENTS=1` first counts the
//! SQL statements one call costs (sqlx's statement log, every call of 20 settled before the
//! next) and prints one call's statements.

#![allow(clippy::print_stdout, unreachable_pub)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::{gateway::*, provider::*};
use std::time::{Duration, Instant};

fn quick() -> bool {
    std::env::var_os("RECOURSE_BENCH_QUICK").is_some()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(name: &str, mut v: Vec<Duration>) -> Duration {
    v.sort();
    let median = percentile(&v, 0.5);
    println!(
        "  {name:<10} median {:>7.3} ms   p90 {:>7.3} ms   ({} calls)",
        ms(median),
        ms(percentile(&v, 0.9)),
        v.len()
    );
    median
}

/// One call; the time until the first body chunk and until the end.
async fn call(client: &reqwest::Client, url: &str, token: Option<&str>, body: &str) -> (Duration, Duration) {
    let start = Instant::now();
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let mut resp = req.send().await.expect("the call is answered");
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let mut first = None;
    while let Some(chunk) = resp.chunk().await.expect("the body is read") {
        if first.is_none() && !chunk.is_empty() {
            first = Some(start.elapsed());
        }
    }
    (first.unwrap_or_else(|| start.elapsed()), start.elapsed())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let statements = std::env::var_os("RECOURSE_BENCH_STATEMENTS").map(|_| {
        let log = common::logs::Logs::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .json()
            .with_env_filter("sqlx::query=trace") // db::STATEMENT_LOG
            .with_writer(move || writer.clone())
            .init();
        log
    });
    let n = if quick() { 40 } else { 200 };
    let clients = if quick() { 4 } else { 16 };
    let sustained = if quick() { 200 } else { 2_000 };
    let rig = Rig::new(&[("whole", "openai"), ("streamed", "openai")]).await;
    rig.fake.script("whole", vec![openai_ok("green")]);
    rig.fake.script(
        "streamed",
        vec![Reply::Sse {
            frames: openai_stream_frames(&["gr", "een"], true),
            end: SseEnd::Close,
        }],
    );
    rig.profile("whole", &["whole"]).await;
    rig.profile("streamed", &["streamed"]).await;
    let recourse = rig.serve().await;
    let token = rig.h.token.clone();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let direct_whole = format!("{}/chat/completions", rig.fake.base_url("whole"));
    let direct_streamed = format!("{}/chat/completions", rig.fake.base_url("streamed"));
    let gateway = format!("{recourse}/v1/chat/completions");
    let whole = chat_request("whole", false).to_string();
    let streamed = chat_request("streamed", true).to_string();

    // Warm both paths (connections, the SQLite pages, the writer task).
    for _ in 0..10 {
        call(&client, &direct_whole, None, &whole).await;
        call(&client, &gateway, Some(&token), &whole).await;
    }
    if let Some(log) = statements.as_ref() {
        count_statements(log, &client, &gateway, &token, &whole).await;
    }

    println!("1. non-streamed calls, OpenAI style ({n} each, interleaved)");
    let (mut d, mut g) = (Vec::new(), Vec::new());
    for _ in 0..n {
        d.push(call(&client, &direct_whole, None, &whole).await.1);
        g.push(call(&client, &gateway, Some(&token), &whole).await.1);
    }
    let (dm, gm) = (summary("direct", d), summary("gateway", g));
    println!(
        "  added      {:>7.3} ms (goal <= 2 ms)",
        ms(gm.saturating_sub(dm))
    );

    println!("2. time to the first streamed byte ({n} each, interleaved)");
    let (mut d, mut g) = (Vec::new(), Vec::new());
    for _ in 0..n {
        d.push(call(&client, &direct_streamed, None, &streamed).await.0);
        g.push(call(&client, &gateway, Some(&token), &streamed).await.0);
    }
    let (dm, gm) = (summary("direct", d), summary("gateway", g));
    println!(
        "  added      {:>7.3} ms (goal <= 5 ms)",
        ms(gm.saturating_sub(dm))
    );

    println!("3. sustained calls per second, {clients} clients, {sustained} non-streamed calls");
    let mut rates = Vec::new();
    for (name, url, token) in [
        ("direct", direct_whole.clone(), None),
        ("gateway", gateway.clone(), Some(token.clone())),
    ] {
        let start = Instant::now();
        let cpu = cpu_time();
        let per_client = sustained / clients;
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (client, url, token, body) = (client.clone(), url.clone(), token.clone(), whole.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..per_client {
                    call(&client, &url, token.as_deref(), &body).await;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let calls = (per_client * clients) as f64;
        let rate = calls / start.elapsed().as_secs_f64();
        let cpu_per_call = (cpu_time() - cpu).as_secs_f64() * 1e6 / calls;
        println!("  {name:<10} {rate:>9.0} calls/s   CPU {cpu_per_call:>6.0} us per call (client, provider and server together)");
        rates.push(rate);
    }
    println!("  ratio      {:>9.2} (goal >= 0.5)", rates[1] / rates[0]);
    let stats = rig.h.engine.write_stats();
    println!(
        "  (writer: {} group commits of {} steps, {} single; the durable setting: PRAGMA synchronous = {:?})",
        stats.group_commits, stats.grouped_jobs, stats.single_jobs, stats.synchronous
    );
}

/// The statements of 20 calls, each settled (its success, completion and audit row written)
/// before the next: their mean, and the statements of the last call.
async fn count_statements(
    log: &common::logs::Logs,
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &str,
) {
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    settle().await;
    let mut counts = Vec::new();
    let mut last = Vec::new();
    for _ in 0..20 {
        let before = log.lines().len();
        call(client, url, Some(token), body).await;
        settle().await;
        let lines = log.lines();
        counts.push(lines.len() - before);
        last = lines[before..].to_vec();
    }
    let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    println!(
        "0. SQL statements per non-streamed call: mean {mean:.1} of 20 (min {}, max {}); the last call's:",
        counts.iter().min().unwrap(),
        counts.iter().max().unwrap()
    );
    for line in last {
        let field = |name: &str| line["fields"][name].as_str().unwrap_or("").to_owned();
        let statement: String = field("db.statement")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let summary = if statement.is_empty() {
            field("summary")
        } else {
            statement
        };
        println!("   {}", summary.chars().take(150).collect::<String>());
    }
}

/// CPU time of every thread of this process so far (`/proc/self/task/*/schedstat`, first field:
/// nanoseconds on a CPU); zero where it cannot be read. Threads that ended are not counted.
fn cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(ns)
}
