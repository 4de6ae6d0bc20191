//! Notification benchmarks (a plain bench binary: each figure is one timed run, printed).
//!
//! `cargo bench -p server --bench notify` prints:
//! 1. durable transitions per second with three webhook channels configured (every failure
//!    tells all three, the delivery worker sending to three local receivers meanwhile) against
//!    the same work with no channel and no rule, in the same run: rounds alternate between the
//!    two engines (each on a database file of its own, the server's pragmas), 64 routes moving
//!    at once (goal: at least 0.9x). The told round's deliveries still in flight when its
//!    transitions end are sent before the next quiet round starts (so they never slow it); the
//!    rate counting that wait too is printed beside it;
//! 2. delivery delay from the event's transaction to the receiver's answer, p50/p99/max: while
//!    the transitions above run flat out, and paced (events a few milliseconds apart, which is
//!    already far more than routes fail), goal p99 under 1 s.
//!
//! Each cycle of a route is three steps: overloaded evidence (a retry wait: `route.waiting`,
//! told), a person's stop, and a person's retry (its dispatch starts in the same job): four
//! history rows, one event, three deliveries. `RECOURSE_BENCH_QUICK=1` for a smaller run.

#![allow(clippy::print_stdout, unreachable_pub)]

use axum::{body::Bytes, extract::State, http::StatusCode, routing::post, Router};
use policy::{
    api::{Caller, CallerKind, ProfileInput, StartRouteRequest},
    notify::{NotificationRule, NotifyEventType},
    route::{ManualAction, RouteEvent},
};
use serde_json::json;
use server::{
    clock::SystemClock,
    config::{RunnerConfig, Runners},
    engine::{Engine, Input},
    metrics::Metrics,
    store::Store,
};
use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

fn quick() -> bool {
    std::env::var_os("RECOURSE_BENCH_QUICK").is_some()
}

const SECRET: &str = "whsec_dGVzdHMtc2lnbmluZy1zZWNyZXQtMzItYnl0ZXMhIQ==";

/// A local receiver that answers 204 at once and records, per event, how long after its
/// transaction it arrived (ms).
#[derive(Clone, Default)]
struct Receiver {
    delays: Arc<Mutex<Vec<f64>>>,
}

async fn receive(State(r): State<Receiver>, body: Bytes) -> StatusCode {
    let now = chrono::Utc::now();
    if let Some(at) = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["timestamp"].as_str().map(str::to_owned))
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
    {
        let ms = (now - at.with_timezone(&chrono::Utc))
            .num_microseconds()
            .unwrap_or(0) as f64
            / 1000.0;
        r.delays.lock().unwrap().push(ms);
    }
    StatusCode::NO_CONTENT
}

async fn receiver() -> (Receiver, String) {
    let r = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new().route("/hook", post(receive)).with_state(r.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (r, url)
}

/// An engine on a new database file with the server's pragmas, with `config`, and its
/// delivery worker running.
async fn engine(dir: &tempfile::TempDir, name: &str, config: RunnerConfig) -> Arc<Engine> {
    let path = dir.path().join(name);
    let path = path.to_str().unwrap();
    let pool = server::db::open_with(path, server::db::connect_options(path).unwrap())
        .await
        .unwrap();
    let e = Engine::with_metrics(
        Store::new(pool),
        Arc::new(SystemClock),
        Runners::new(config),
        Metrics::new(&"bench".parse().unwrap()),
    );
    tokio::spawn(server::notify::worker::run(e.clone(), std::future::pending()));
    e
}

async fn profile(engine: &Engine, channels: &[&str]) -> String {
    let notifications = if channels.is_empty() {
        Vec::new()
    } else {
        vec![NotificationRule {
            events: vec![NotifyEventType::RouteWaiting],
            channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            min_wait_seconds: 0,
        }]
    };
    let input = ProfileInput {
        name: "bench".into(),
        kind: policy::api::ProfileKind::Dynamic,
        description: None,
        targets: vec![policy::api::CandidateTarget::external("main")],
        policy: json!({"version": 1, "candidates": [{"id": "main",
            "transient": {"retry": {"enabled": true, "max_retries": 10, "initial_interval_seconds": 600},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
            "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                     "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]}),
        expected_revision: None,
        notifications,
    };
    server::profiles::create(engine, policy::input::ValidatedProfile::parse(&input).unwrap())
        .await
        .unwrap()
        .id
}

async fn start(engine: &Engine, profile: &str, i: usize) -> (String, u64) {
    let request = StartRouteRequest {
        profile_id: profile.to_owned(),
        caller: Caller {
            kind: CallerKind::Workflow,
            reference: "bench".into(),
            invocation_id: format!("inv-{i}"),
        },
        title: None,
        work: None,
        pin: None,
    };
    let s = engine
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap();
    (s.id, s.snapshot.generation)
}

fn overloaded(generation: u64) -> Input {
    let env = json!({"generation": generation, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
        "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]});
    Input::evidence(classifier::Envelope::from_value(&env).unwrap().into_owned())
}

/// One cycle of a route: fail (a wait, told), stop, retry (its dispatch starts): four history
/// rows. Returns the generation after it.
async fn cycle(e: &Engine, route: &str, g: u64) -> u64 {
    let failed = e.submit(route, overloaded(g)).await.unwrap().snapshot.generation;
    let stopped = e
        .submit(
            route,
            Input::Event(RouteEvent::Manual {
                action: ManualAction::Stop,
                expected_generation: failed,
            }),
        )
        .await
        .unwrap()
        .snapshot
        .generation;
    e.submit(
        route,
        Input::Event(RouteEvent::Manual {
            action: ManualAction::RetryNow,
            expected_generation: stopped,
        }),
    )
    .await
    .unwrap()
    .snapshot
    .generation
}

/// `cycles` cycles of every route, `routes.len()` moving at once; returns seconds.
async fn run(e: &Arc<Engine>, routes: &mut [(String, u64)], cycles: usize) -> f64 {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for (r, g) in routes.iter().cloned() {
        let e = e.clone();
        tasks.push(tokio::spawn(async move {
            let mut g = g;
            for _ in 0..cycles {
                g = cycle(&e, &r, g).await;
            }
            (r, g)
        }));
    }
    for (slot, task) in routes.iter_mut().zip(tasks) {
        *slot = task.await.unwrap();
    }
    t.elapsed().as_secs_f64()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn delays(receivers: &[Receiver]) -> Vec<f64> {
    let mut all: Vec<f64> = receivers
        .iter()
        .flat_map(|r| std::mem::take(&mut *r.delays.lock().unwrap()))
        .collect();
    all.sort_by(f64::total_cmp);
    all
}

/// Waits until the receivers hold `n` deliveries in all (bounded: a stuck worker is reported).
async fn drain(receivers: &[Receiver], n: usize) {
    let end = Instant::now() + std::time::Duration::from_secs(120);
    while receivers
        .iter()
        .map(|r| r.delays.lock().unwrap().len())
        .sum::<usize>()
        < n
    {
        assert!(Instant::now() < end, "the deliveries did not all arrive");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn bench() {
    std::env::set_var("RECOURSE_BENCH_WEBHOOK_SECRET", SECRET);
    let dir = tempfile::tempdir().unwrap();
    let mut receivers = Vec::new();
    let mut channels = String::from(
        "[notify]\nallow_networks = [\"127.0.0.0/8\"]\nbackoff_initial_ms = 100\nbackoff_max_ms = 1000\n",
    );
    for i in 0..3 {
        let (r, url) = receiver().await;
        receivers.push(r);
        channels.push_str(&format!(
            "[[channel]]\nid = \"hook{i}\"\nkind = \"webhook\"\nurl = \"{url}\"\nsecret_env = \"RECOURSE_BENCH_WEBHOOK_SECRET\"\n"
        ));
    }
    let told = engine(&dir, "told.db", RunnerConfig::parse(&channels).unwrap()).await;
    let quiet = engine(&dir, "quiet.db", RunnerConfig::default()).await;
    let told_p = profile(&told, &["hook0", "hook1", "hook2"]).await;
    let quiet_p = profile(&quiet, &[]).await;
    let width = 64;
    let (rounds, cycles) = if quick() { (3, 3) } else { (5, 10) };
    let mut told_routes = Vec::new();
    let mut quiet_routes = Vec::new();
    for i in 0..width {
        told_routes.push(start(&told, &told_p, i).await);
        quiet_routes.push(start(&quiet, &quiet_p, i).await);
    }
    // Warm both once.
    run(&told, &mut told_routes, 1).await;
    run(&quiet, &mut quiet_routes, 1).await;
    drain(&receivers, 3 * width).await;
    let _ = delays(&receivers);
    let (mut told_secs, mut quiet_secs, mut drained_secs) = (0.0, 0.0, 0.0);
    let mut ratios = Vec::new();
    let mut loaded = Vec::new();
    for _ in 0..rounds {
        let q = run(&quiet, &mut quiet_routes, cycles).await;
        let t = run(&told, &mut told_routes, cycles).await;
        // The told round's deliveries still in flight are sent before the next quiet round
        // begins, so they never run inside it; the wait is counted apart.
        let drain_start = Instant::now();
        drain(&receivers, 3 * cycles * width).await;
        drained_secs += drain_start.elapsed().as_secs_f64();
        loaded.extend(delays(&receivers));
        ratios.push(q / t);
        quiet_secs += q;
        told_secs += t;
    }
    let rows = (rounds * cycles * width * 4) as f64;
    let told_rate = rows / told_secs;
    let quiet_rate = rows / quiet_secs;
    let settled_rate = rows / (told_secs + drained_secs);
    ratios.sort_by(f64::total_cmp);
    println!(
        "durable transitions, 64 routes at a time: three channels {told_rate:.0}/s, none {quiet_rate:.0}/s | ratio {:.2} \
         (per round: {}; {} events told, each to three receivers)",
        told_rate / quiet_rate,
        ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" "),
        rounds * cycles * width
    );
    println!(
        "  counting the wait for each told round's last deliveries too: {settled_rate:.0}/s | ratio {:.2}",
        settled_rate / quiet_rate
    );
    for (name, e) in [("three channels", &told), ("none", &quiet)] {
        let w = e.write_stats();
        println!(
            "  writer, {name}: {} group commits of {} jobs, {} jobs alone",
            w.group_commits, w.grouped_jobs, w.single_jobs
        );
    }
    loaded.sort_by(f64::total_cmp);
    println!(
        "delivery delay while transitions run flat out: {} deliveries, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        loaded.len(),
        percentile(&loaded, 0.5),
        percentile(&loaded, 0.99),
        loaded.last().copied().unwrap_or(f64::NAN)
    );
    // Paced: one failure every few milliseconds, spread over the routes.
    let paced = if quick() { 200 } else { 1000 };
    for i in 0..paced {
        let (r, g) = told_routes[i % width].clone();
        let g = cycle(&told, &r, g).await;
        told_routes[i % width] = (r, g);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    drain(&receivers, 3 * paced).await;
    let d = delays(&receivers);
    println!(
        "delivery delay, paced ({paced} events, each to three receivers): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&d, 0.5),
        percentile(&d, 0.99),
        d.last().copied().unwrap_or(f64::NAN)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench());
}
