//! Several replicas on one PostgreSQL database (a plain bench binary: each figure is one timed
//! run, printed). Needs `RECOURSE_BENCH_POSTGRES`, a server URL (a database of its own is made
//! for each part); run the cluster durably for figures that mean anything:
//!
//! ```sh
//! url=$(RECOURSE_PG_DURABLE=1 scripts/postgres.sh start /tmp/pg-bench)
//! RECOURSE_BENCH_POSTGRES=$url cargo bench -p server --bench replicas
//! scripts/postgres.sh stop /tmp/pg-bench
//! ```
//!
//! Prints:
//! 1. durable transitions per second with 1, 2 and 3 replicas (engines on pools of their own,
//!    joined, 64 routes moving at once spread over them), each against a bare loop of one-row
//!    commits on the same server in the same run, rounds interleaved;
//! 2. timer lateness p50/p99/max with 10,000 routes waiting, their timers moved into one 10 s
//!    window after setting up, fired by 2 replicas' real schedulers (running from the start)
//!    on the database's time; beside it, as the baseline, the latency of bare one-row commits
//!    made every 20 ms on the same server in the same window;
//! 3. the restart of one replica (boot reconciliation) with 100,000 routes in the database
//!    while another replica keeps firing timers: how long until it serves, and how many timers
//!    the other fired meanwhile;
//! 4. how long a change committed on replica A takes to reach a subscriber on replica B (its
//!    event log reader): 1,000 route starts on A, one at a time, each timed from just before
//!    the start to B's `started` event, p50/p90/p99/max; beside it, as the baseline, the
//!    latency of bare one-row commits on the same server in the same run.
//!
//! `RECOURSE_BENCH_QUICK=1` runs smaller numbers.

#![allow(clippy::print_stdout, unreachable_pub)]

use policy::{
    api::{Caller, CallerKind, ProfileInput, StartRouteRequest},
    route::{ManualAction, RouteEvent},
};
use serde_json::json;
use server::{
    clock::{OffsetClock, SystemClock},
    engine::{replicas::Timing, Engine, Input},
    store::{sql, Pool, Store},
};
use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Instant,
};

fn quick() -> bool {
    std::env::var_os("RECOURSE_BENCH_QUICK").is_some()
}

static DB: AtomicU64 = AtomicU64::new(0);

/// A new database on the bench's server; its URL.
async fn database() -> String {
    let server =
        std::env::var("RECOURSE_BENCH_POSTGRES").expect("RECOURSE_BENCH_POSTGRES names a PostgreSQL server");
    let name = format!(
        "bench_{}_{}",
        std::process::id(),
        DB.fetch_add(1, Ordering::Relaxed)
    );
    let pool = server::db::open(&server).await.unwrap();
    sql::query(format!("CREATE DATABASE {name}"))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let authority = server.find("://").map_or(0, |i| i + 3);
    let end = server[authority..]
        .find(['/', '?'])
        .map_or(server.len(), |i| authority + i);
    format!("{}/{name}", &server[..end])
}

/// `n` replicas of `url` on the database's time, joined.
async fn replicas(url: &str, n: usize) -> Vec<Arc<Engine>> {
    let mut engines = Vec::new();
    for i in 0..n {
        let pool = server::db::open(url).await.unwrap();
        let store = Store::new(pool);
        let clock = Arc::new(OffsetClock::new(Arc::new(SystemClock)));
        server::engine::replicas::sync_clock_once(&store, &clock)
            .await
            .unwrap();
        let engine = Engine::new(store, clock);
        engine
            .join_replicas(&format!("bench-{i}").parse().unwrap(), Timing::DEFAULT)
            .await
            .unwrap();
        engines.push(engine);
    }
    engines
}

async fn profile(engine: &Engine, interval: u64) -> String {
    let input = ProfileInput {
        name: "bench".into(),
        kind: policy::api::ProfileKind::Dynamic,
        description: None,
        targets: vec![policy::api::CandidateTarget::external("main")],
        policy: json!({"version": 1, "candidates": [{"id": "main",
            "transient": {"retry": {"enabled": true, "max_retries": 10, "initial_interval_seconds": interval},
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
    let started = engine
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap();
    let g = engine
        .route_summary(&started.id)
        .await
        .unwrap()
        .snapshot
        .generation;
    (started.id, g)
}

fn overloaded(generation: u64) -> Input {
    let env = json!({"generation": generation, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
        "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]});
    Input::evidence(classifier::Envelope::from_value(&env).unwrap().into_owned())
}

async fn count(pool: &Pool, q: &str) -> i64 {
    sql::query(q.to_owned()).scalar(pool).await.unwrap()
}

/// Stop then RetryNow on each route, 64 at once spread over the replicas; history rows and
/// seconds.
async fn run_transitions(engines: &[Arc<Engine>], pool: &Pool, routes: &mut [(String, u64)]) -> (i64, f64) {
    let before = count(pool, "SELECT COUNT(*) FROM route_history").await;
    let t = Instant::now();
    let per = routes.len().div_ceil(64);
    let mut tasks = Vec::new();
    for (w, chunk) in routes.chunks(per).enumerate() {
        let e = engines[w % engines.len()].clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for (r, g) in chunk {
                let stopped = e
                    .submit(
                        &r,
                        Input::Event(RouteEvent::Manual {
                            action: ManualAction::Stop,
                            expected_generation: g,
                        }),
                    )
                    .await
                    .unwrap();
                let again = e
                    .submit(
                        &r,
                        Input::Event(RouteEvent::Manual {
                            action: ManualAction::RetryNow,
                            expected_generation: stopped.snapshot.generation,
                        }),
                    )
                    .await
                    .unwrap();
                out.push((r, again.snapshot.generation));
            }
            out
        }));
    }
    let mut next = Vec::new();
    for t in tasks {
        next.extend(t.await.unwrap());
    }
    let secs = t.elapsed().as_secs_f64();
    // The routes' generations moved on; the next round starts from them.
    let by_id: std::collections::HashMap<String, u64> = next.into_iter().collect();
    for r in routes.iter_mut() {
        r.1 = by_id[&r.0];
    }
    (
        count(pool, "SELECT COUNT(*) FROM route_history").await - before,
        secs,
    )
}

/// One-row commits on one connection of the same server: the yardstick.
async fn bare_commits(pool: &Pool, m: i64) -> f64 {
    let Pool::Postgres(pg) = pool else { unreachable!() };
    let mut conn = pg.acquire().await.unwrap();
    let t = Instant::now();
    for i in 0..m {
        sqlx::query("BEGIN").execute(&mut *conn).await.unwrap();
        sqlx::query("INSERT INTO bare (v) VALUES ($1)")
            .bind(format!("row {i}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
    }
    t.elapsed().as_secs_f64()
}

async fn transitions_per_second() {
    let url = database().await;
    let pool = server::db::open(&url).await.unwrap();
    sql::query("CREATE TABLE bare (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let durable: String = sql::query("SELECT current_setting('fsync')")
        .scalar(&pool)
        .await
        .unwrap();
    let all = replicas(&url, 3).await;
    let p = profile(&all[0], 5).await;
    let n = if quick() { 128 } else { 640 };
    let mut routes = Vec::new();
    for i in 0..n {
        routes.push(start(&all[0], &p, i).await);
    }
    for k in [1usize, 2, 3] {
        let mut rates = Vec::new();
        let mut bare = Vec::new();
        for _ in 0..3 {
            let (rows, secs) = run_transitions(&all[..k], &pool, &mut routes).await;
            rates.push(rows as f64 / secs);
            let m = 500;
            bare.push(m as f64 / bare_commits(&pool, m).await);
        }
        rates.sort_by(f64::total_cmp);
        bare.sort_by(f64::total_cmp);
        println!(
            "transitions, {k} replica(s), 64 routes at once: median {:.0}/s (runs {:?}); bare one-row commits median {:.0}/s (runs {:?}); ratio {:.2}x [fsync={durable}]",
            rates[1],
            rates.iter().map(|r| r.round()).collect::<Vec<_>>(),
            bare[1],
            bare.iter().map(|r| r.round()).collect::<Vec<_>>(),
            rates[1] / bare[1]
        );
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn timer_lateness() {
    let url = database().await;
    let pool = server::db::open(&url).await.unwrap();
    let engines = replicas(&url, 2).await;
    let n = if quick() { 1_000 } else { 10_000 };
    let p = profile(&engines[0], 45).await;
    // Both replicas' schedulers run from the start, as they would in production.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let schedulers: Vec<_> = engines
        .iter()
        .map(|e| {
            let mut rx = stop_rx.clone();
            tokio::spawn(server::scheduler::run(e.clone(), async move {
                let _ = rx.wait_for(|s| *s).await;
            }))
        })
        .collect();
    // Set up n waiting routes: each fails once and waits 45 s (longer than setting up takes, so
    // none fires before the window below).
    let t = Instant::now();
    let mut setups = Vec::new();
    for w in 0..16 {
        let e = engines[w % 2].clone();
        let p = p.clone();
        setups.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let (r, g) = start(&e, &p, i).await;
                e.submit(&r, overloaded(g)).await.unwrap();
            }
        }));
    }
    for s in setups {
        s.await.unwrap();
    }
    let set_up = t.elapsed().as_secs_f64();
    // Setting up takes longer than 10 s, so the deadlines it armed spread wider: move every
    // timer later, into one 10 s window starting 3 s after the last deadline (never before its
    // route's own deadline, so none is early), evenly spaced, and measure against that.
    let window_ms = if quick() { 2_000 } else { 10_000 };
    sql::query(format!(
        "CREATE TABLE bench_due AS SELECT route_id, (SELECT MAX(due_ms) FROM timers) + 3000 \
         + (ROW_NUMBER() OVER (ORDER BY route_id) - 1) * {window_ms} / {n} AS due_ms \
         FROM timers WHERE kind = 'deadline'"
    ))
    .execute(&pool)
    .await
    .unwrap();
    sql::query(
        "UPDATE timers SET due_ms = b.due_ms FROM bench_due b \
         WHERE timers.route_id = b.route_id AND timers.kind = 'deadline'"
            .to_owned(),
    )
    .execute(&pool)
    .await
    .unwrap();
    let spread = count(
        &pool,
        "SELECT MAX(due_ms) - MIN(due_ms) FROM timers WHERE kind = 'deadline'",
    )
    .await;
    println!(
        "timer lateness: {n} routes waiting, set up in {set_up:.1} s, deadlines spread over {:.1} s",
        spread as f64 / 1000.0
    );
    // The baseline in the same run: a bare one-row commit every 20 ms on a connection of its
    // own, from now until every timer fired. A commit that waits long here waited on the
    // server or its disk, not on the replicas' code.
    sql::query("CREATE TABLE bench_probe (i BIGINT)".to_owned())
        .execute(&pool)
        .await
        .unwrap();
    let (probe_stop, mut probe_rx) = tokio::sync::watch::channel(false);
    let probe = {
        let probe_pool = server::db::open(&url).await.unwrap();
        let clock = engines[0].clone();
        tokio::spawn(async move {
            let mut commits = Vec::new();
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(20));
            for i in 0_i64.. {
                tokio::select! {
                    _ = probe_rx.wait_for(|s| *s) => break,
                    _ = tick.tick() => {}
                }
                let (at, t) = (clock.now().timestamp_millis(), Instant::now());
                sql::query(format!("INSERT INTO bench_probe VALUES ({i})"))
                    .execute(&probe_pool)
                    .await
                    .unwrap();
                commits.push((at, t.elapsed().as_secs_f64() * 1000.0));
            }
            commits
        })
    };
    let end = Instant::now() + std::time::Duration::from_secs(60);
    while count(&pool, "SELECT COUNT(*) FROM timers WHERE kind = 'deadline'").await > 0
        && Instant::now() < end
    {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let _ = stop_tx.send(true);
    let _ = probe_stop.send(true);
    // The probe's commits that began while timers were due (the window and a second after).
    let (first, last) = (
        count(&pool, "SELECT MIN(due_ms) FROM bench_due").await,
        count(&pool, "SELECT MAX(due_ms) FROM bench_due").await,
    );
    let mut commits: Vec<f64> = probe
        .await
        .unwrap()
        .into_iter()
        .filter(|(at, _)| (first..=last + 1000).contains(at))
        .map(|(_, ms)| ms)
        .collect();
    commits.sort_by(f64::total_cmp);
    for s in schedulers {
        let _ = s.await;
    }
    // Lateness from the history: the time the deadline step ran against its timer's due time.
    let rows = sql::query(
        "SELECT b.due_ms AS due, d.at AS fired FROM route_history d JOIN bench_due b \
         ON b.route_id = d.route_id WHERE d.event = 'deadline_reached'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut late: Vec<f64> = rows
        .iter()
        .filter_map(|r| {
            let due = chrono::DateTime::from_timestamp_millis(r.try_get::<i64, _>("due").ok()?)?;
            let fired: chrono::DateTime<chrono::Utc> = r.try_get::<String, _>("fired").ok()?.parse().ok()?;
            Some((fired - due).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    late.sort_by(f64::total_cmp);
    let fired_by: Vec<String> = engines
        .iter()
        .map(|e| {
            e.metrics()
                .render()
                .lines()
                .find(|l| l.starts_with("recourse_timer_claims_lost_total"))
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    println!(
        "timer lateness, 2 replicas: {} fired, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (history `at` is milliseconds); claims lost: {fired_by:?}",
        late.len(),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  late over 100 ms: {} timers; baseline, a bare one-row commit every 20 ms in the window: {} commits, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} over 100 ms",
        late.iter().filter(|l| **l > 100.0).count(),
        commits.len(),
        percentile(&commits, 0.5),
        percentile(&commits, 0.99),
        commits.last().copied().unwrap_or(f64::NAN),
        commits.iter().filter(|c| **c > 100.0).count()
    );
}

async fn restart_with_100k_routes() {
    let url = database().await;
    let pool = server::db::open(&url).await.unwrap();
    let n = if quick() { 10_000 } else { 100_000 };
    // Routes straight into the table (their engine path is measured above), copies of two made
    // through the engine: 90% waiting an hour for a retry (their timer rows are restored at
    // boot), 10% in flight on a replica that is gone (a started attempt: ambiguous).
    let engines = replicas(&url, 1).await;
    let p = profile(&engines[0], 3600).await;
    let (waiting, g) = start(&engines[0], &p, usize::MAX).await;
    engines[0].submit(&waiting, overloaded(g)).await.unwrap();
    let (in_flight, _) = start(&engines[0], &p, usize::MAX - 1).await;
    let t = Instant::now();
    let copy = |template: &str, from: usize, to: usize, owner: &str| {
        format!(
            "INSERT INTO routes (id, profile_id, caller_kind, caller_reference, invocation_id, title, state, generation, \
             candidate_id, deadline_ms, state_json, durable_error, created_at, updated_at, owner) \
             SELECT 'bulk-' || g, profile_id, caller_kind, caller_reference, 'bulk-' || g, title, state, generation, \
             candidate_id, deadline_ms, state_json, NULL, created_at, updated_at, {owner} \
             FROM routes, generate_series({from}, {to}) AS g WHERE id = '{template}'"
        )
    };
    sql::query(copy(&waiting, 1, n * 9 / 10, "NULL"))
        .execute(&pool)
        .await
        .unwrap();
    sql::query(copy(&in_flight, n * 9 / 10 + 1, n, "'gone#1'"))
        .execute(&pool)
        .await
        .unwrap();
    println!(
        "restart: {n} route rows written in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Another replica keeps firing timers meanwhile: 2,000 routes waiting 2 s.
    let other = &engines[0];
    let q = profile(other, 2).await;
    for i in 0..2_000 {
        let (r, g) = start(other, &q, i).await;
        other.submit(&r, overloaded(g)).await.unwrap();
    }
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let sched = tokio::spawn(server::scheduler::run(other.clone(), async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let before = count(
        &pool,
        "SELECT COUNT(*) FROM route_history WHERE event = 'deadline_reached'",
    )
    .await;
    let t = Instant::now();
    let restarted = replicas(&url, 1).await.pop().unwrap();
    let report = restarted.reconcile().await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    let after = count(
        &pool,
        "SELECT COUNT(*) FROM route_history WHERE event = 'deadline_reached'",
    )
    .await;
    let _ = stop_tx.send(true);
    let _ = sched.await;
    println!(
        "restart of one replica with {} routes: ready to serve after {secs:.2} s ({report:?}); the other fired {} timers meanwhile",
        n + 2_001,
        after - before
    );
}

/// Part 4: route starts on A, received by a subscriber on B, each timed; then as many bare
/// one-row commits, each timed.
async fn cross_replica_event_delay() {
    let url = database().await;
    let pool = server::db::open(&url).await.unwrap();
    sql::query("CREATE TABLE bare (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let engines = replicas(&url, 2).await;
    let (a, b) = (engines[0].clone(), engines[1].clone());
    let p = profile(&a, 60).await;
    // B's reader has its starting point: whatever commits from now on reaches its subscribers.
    b.events_delivered().await.unwrap();
    let mut on_b = b.subscribe();
    let n = if quick() { 200 } else { 1_000 };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let receiver = tokio::spawn(async move {
        let mut at = std::collections::HashMap::new();
        while at.len() < n {
            match on_b.recv().await {
                Ok(e) if e.payload.event.as_str() == "started" => {
                    at.insert(e.route_id, Instant::now());
                }
                Ok(_) => {}
                Err(e) => panic!("B's subscriber: {e}"),
            }
        }
        at
    });
    let all = Instant::now();
    for i in 0..n {
        let sent = Instant::now();
        let (r, _) = start(&a, &p, i).await;
        tx.send((r, sent)).unwrap();
    }
    let rate = n as f64 / all.elapsed().as_secs_f64();
    let received = receiver.await.unwrap();
    let mut delays = Vec::with_capacity(n);
    while let Ok((r, sent)) = rx.try_recv() {
        delays.push(received[&r].duration_since(sent).as_secs_f64() * 1000.0);
    }
    delays.sort_by(f64::total_cmp);
    let Pool::Postgres(pg) = &pool else { unreachable!() };
    let mut conn = pg.acquire().await.unwrap();
    let mut bare = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        sqlx::query("INSERT INTO bare (v) VALUES ($1)")
            .bind(format!("row {i}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        bare.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    bare.sort_by(f64::total_cmp);
    let q = |v: &[f64]| {
        format!(
            "p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            percentile(v, 0.50),
            percentile(v, 0.90),
            percentile(v, 0.99),
            v[v.len() - 1]
        )
    };
    println!(
        "cross-replica event delay, {n} route starts on A ({rate:.0}/s), each until B's subscriber has it: {}; bare one-row commits: {}",
        q(&delays),
        q(&bare)
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if std::env::var_os("RECOURSE_BENCH_POSTGRES").is_none() {
        println!("skipped: set RECOURSE_BENCH_POSTGRES to a PostgreSQL server URL (see the file's docs)");
        return;
    }
    let only = std::env::var("RECOURSE_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "transitions" {
        transitions_per_second().await;
    }
    if only.is_empty() || only == "timers" {
        timer_lateness().await;
    }
    if only.is_empty() || only == "restart" {
        restart_with_100k_routes().await;
    }
    if only.is_empty() || only == "events" {
        cross_replica_event_delay().await;
    }
}
