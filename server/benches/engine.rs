//! Route engine benchmarks (a plain bench binary: each figure is one timed run, printed).
//!
//! `cargo bench -p server --bench engine` prints:
//! 1. durable transitions per second through the transition owner, and in the same run a bare
//!    loop of one-row SQLite commits with the same pragmas (goal: at least half the bare rate).
//!    Transitions run with 64 routes moving at once (their steps share group commits) in five
//!    rounds alternating with equal runs of bare commits, so a busy machine slows both alike;
//!    the one-route-at-a-time rate (nothing to group) is printed too;
//! 2. timer lateness p50/p99 with 10,000 routes waiting (system clock, real scheduler, real
//!    sleeps); sixteen callers set them up at once so the deadlines bunch up (the busiest
//!    second is printed);
//! 3. restart reconciliation of 100,000 routes (90% waiting, 10% with an ambiguous dispatch);
//! 4. memory per waiting route (process RSS delta) and database bytes per route;
//! 5. firing capacity: 10,000 timers due at the same instant of a manual clock, fired by one
//!    `scheduler::tick`, as fires per second.
//!
//! Set `RECOURSE_BENCH_QUICK=1` for a smaller, faster run, `RECOURSE_BENCH_ONLY=transitions`
//! (or `restart`, `timers`, `capacity`) for one part.
//!
//! Every database (the engine's and the bare loop's) uses the server's own pragmas
//! (`server::db::connect_options`: WAL, `synchronous = FULL`, every commit fsynced).
//! `RECOURSE_BENCH_SYNC=normal` runs the whole bench with `synchronous = NORMAL` instead (the
//! setting before power-loss durability, commits fsynced only at checkpoints), to compare: run
//! both, interleaved, on the same machine. The timers part also prints a bare one-row commit
//! rate on its own database after the lateness run, with the same setting.

#![allow(clippy::print_stdout, unreachable_pub)]

use chrono::{DateTime, Utc};
use policy::{
    api::{Caller, CallerKind, ProfileInput, StartRouteRequest},
    route::{ManualAction, RouteEvent},
};
use serde_json::json;
use server::{
    clock::SystemClock,
    engine::{Engine, Input},
    store::Store,
};
use std::{collections::HashMap, sync::Arc, time::Instant};

fn quick() -> bool {
    std::env::var_os("RECOURSE_BENCH_QUICK").is_some()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn policy_doc(interval: u64) -> serde_json::Value {
    json!({"version": 1, "candidates": [{"id": "main",
        "transient": {"retry": {"enabled": true, "max_retries": 10, "initial_interval_seconds": interval},
                      "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
        "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                 "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"}}]})
}

/// The `synchronous` setting of this run (`RECOURSE_BENCH_SYNC`, default the server's own).
fn synchronous() -> sqlx::sqlite::SqliteSynchronous {
    use sqlx::sqlite::SqliteSynchronous;
    match std::env::var("RECOURSE_BENCH_SYNC").unwrap_or_default().as_str() {
        "" => server::db::SYNCHRONOUS,
        "normal" => SqliteSynchronous::Normal,
        "full" => SqliteSynchronous::Full,
        "extra" => SqliteSynchronous::Extra,
        other => panic!("RECOURSE_BENCH_SYNC={other}: expected normal, full or extra"),
    }
}

/// A new database file with the server's pragmas and this run's `synchronous`.
async fn open_db(dir: &tempfile::TempDir, name: &str) -> sqlx::SqlitePool {
    let path = dir.path().join(name);
    let path = path.to_str().unwrap();
    let opts = server::db::connect_options(path)
        .unwrap()
        .synchronous(synchronous());
    server::db::open_with(path, opts).await.unwrap()
}

/// An engine on a new database file, and a pool on the same file for the bench's own counting.
async fn engine(dir: &tempfile::TempDir, name: &str) -> (Arc<Engine>, sqlx::SqlitePool) {
    let pool = open_db(dir, name).await;
    (Engine::new(Store::new(pool.clone()), Arc::new(SystemClock)), pool)
}

async fn profile(engine: &Engine, interval: u64) -> String {
    let input = ProfileInput {
        name: "bench".into(),
        kind: policy::api::ProfileKind::Dynamic,
        description: None,
        targets: vec![policy::api::CandidateTarget::external("main")],
        policy: policy_doc(interval),
        expected_revision: None,
        notifications: Vec::new(),
    };
    server::profiles::create(engine, policy::input::ValidatedProfile::parse(&input).unwrap())
        .await
        .unwrap()
        .id
}

async fn start(engine: &Engine, profile: &str, i: usize) -> String {
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
    engine
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap()
        .id
}

fn overloaded(generation: u64) -> Input {
    let env = json!({"generation": generation, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
        "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]});
    Input::evidence(classifier::Envelope::from_value(&env).unwrap().into_owned())
}

async fn history_rows(pool: &sqlx::SqlitePool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM route_history")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Stop then RetryNow on each route (3 history rows: Stop, RetryNow, DispatchStarted),
/// with `workers` routes moving at the same time. Returns (history rows, seconds).
async fn run_transitions(
    e: &Arc<Engine>,
    pool: &sqlx::SqlitePool,
    routes: Vec<(String, u64)>,
    workers: usize,
) -> (i64, f64) {
    let before = history_rows(pool).await;
    let per = routes.len().div_ceil(workers.max(1));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for chunk in routes.chunks(per.max(1)) {
        let e = e.clone();
        let chunk = chunk.to_vec();
        tasks.push(tokio::spawn(async move {
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
                e.submit(
                    &r,
                    Input::Event(RouteEvent::Manual {
                        action: ManualAction::RetryNow,
                        expected_generation: stopped.snapshot.generation,
                    }),
                )
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    (history_rows(pool).await - before, secs)
}

/// One-row commits with the same pragmas on the same kind of file: the yardstick.
async fn bare_commits(conn: &mut sqlx::SqliteConnection, m: i64, from: i64) -> f64 {
    let t = Instant::now();
    for i in from..from + m {
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await.unwrap();
        sqlx::query("INSERT INTO bare (v) VALUES (?)")
            .bind(format!("row {i}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
    }
    t.elapsed().as_secs_f64()
}

/// The bare loop's database: one table of one-row commits, same pragmas as the engine's.
async fn bare_db(dir: &tempfile::TempDir) -> sqlx::SqlitePool {
    let pool = open_db(dir, "bare.db").await;
    sqlx::query("CREATE TABLE bare (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

async fn transitions_per_second() {
    let dir = tempfile::tempdir().unwrap();
    let (e, epool) = engine(&dir, "tps.db").await;
    let p = profile(&e, 5).await;
    let rounds = 5;
    let per_round = if quick() { 150 } else { 800 };
    let n = rounds * per_round + per_round;
    let mut routes = Vec::with_capacity(n);
    for i in 0..n {
        let r = start(&e, &p, i).await;
        let g = e.route_summary(&r).await.unwrap().snapshot.generation;
        routes.push((r, g));
    }
    let pool = bare_db(&dir).await;
    let mut conn = pool.acquire().await.unwrap();
    let warm = 3000;
    let alone = warm as f64 / bare_commits(&mut conn, warm, 0).await;
    // Rounds that alternate the two, so a busy machine slows both alike.
    let stats0 = e.write_stats();
    let (mut rows, mut secs, mut bare_rows, mut bare_secs) = (0i64, 0.0, warm, 0.0);
    let mut ratios = Vec::new();
    for _ in 0..rounds {
        let batch: Vec<_> = routes.drain(..per_round).collect();
        // Many routes moving at once (a busy server): their steps share group commits.
        let (r, s) = run_transitions(&e, &epool, batch, 64).await;
        let b = bare_commits(&mut conn, r, bare_rows).await;
        ratios.push((r as f64 / s) / (r as f64 / b));
        rows += r;
        secs += s;
        bare_rows += r;
        bare_secs += b;
    }
    let bare_rows = bare_rows - warm;
    let stats1 = e.write_stats();
    let rate = rows as f64 / secs;
    let bare = bare_rows as f64 / bare_secs;
    // One route at a time (a single caller waiting for each answer): nothing to group.
    let (seq_rows, seq_secs) = run_transitions(&e, &epool, routes, 1).await;
    let seq_rate = seq_rows as f64 / seq_secs;
    let seq_bare = seq_rows as f64 / bare_commits(&mut conn, seq_rows, bare_rows + warm).await;
    ratios.sort_by(f64::total_cmp);
    let groups = stats1.group_commits - stats0.group_commits;
    let grouped = stats1.grouped_jobs - stats0.grouped_jobs;
    println!(
        "durable transitions, 64 routes at a time: {rows} in {secs:.2} s = {rate:.0}/s (history rows; each also writes \
         route, dispatch, timer rows; {groups} group commits of {:.1} jobs on average) | bare one-row commits: \
         {bare:.0}/s | ratio {:.2} (per round: {})",
        grouped as f64 / groups.max(1) as f64,
        rate / bare,
        ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" ")
    );
    println!("bare one-row commits before any engine work: {alone:.0}/s");
    println!(
        "durable transitions, one route at a time: {seq_rows} in {seq_secs:.2} s = {seq_rate:.0}/s | bare right after: \
         {seq_bare:.0}/s | ratio {:.2} (each step waits for its own commit)",
        seq_rate / seq_bare
    );
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn timer_lateness() {
    let dir = tempfile::tempdir().unwrap();
    let (e, epool) = engine(&dir, "timers.db").await;
    let n = if quick() { 1000 } else { 10_000 };
    let interval = if quick() { 15 } else { 60 };
    let p = profile(&e, interval).await;
    // Record every fire as it happens (a consumer that never lags behind the setup).
    let mut rx = e.subscribe();
    let fires = tokio::spawn(async move {
        let mut fired: Vec<(String, DateTime<Utc>)> = Vec::with_capacity(n);
        let mut lagged = 0;
        while fired.len() < n {
            match rx.recv().await {
                Ok(ev) if ev.payload.event.as_str() == "deadline_reached" => {
                    fired.push((ev.route_id, ev.payload.at))
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(k)) => lagged += k,
                Err(_) => break,
            }
        }
        (fired, lagged)
    });
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let sched = tokio::spawn(server::scheduler::run(e.clone(), async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let rss0 = rss_kib();
    let t = Instant::now();
    // Sixteen callers at once, so the deadlines (start + interval) bunch up: thousands fall
    // due within each second once the first one does.
    let mut setups = Vec::new();
    for w in 0..16 {
        let e = e.clone();
        let p = p.clone();
        setups.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in (w..n).step_by(16) {
                let r = start(&e, &p, i).await;
                let g = e.route_summary(&r).await.unwrap().snapshot.generation;
                let s = e.submit(&r, overloaded(g)).await.unwrap().snapshot;
                out.push((r, s.deadline.unwrap()));
            }
            out
        }));
    }
    let mut deadlines: HashMap<String, DateTime<Utc>> = HashMap::with_capacity(n);
    for s in setups {
        deadlines.extend(s.await.unwrap());
    }
    let setup = t.elapsed().as_secs_f64();
    let mut due: Vec<DateTime<Utc>> = deadlines.values().copied().collect();
    due.sort();
    let busiest = due
        .iter()
        .enumerate()
        .map(|(i, d)| due[i..].partition_point(|x| *x < *d + chrono::TimeDelta::seconds(1)))
        .max()
        .unwrap_or(0);
    println!(
        "deadlines: {n} spread over {:.1} s; busiest second has {busiest} due",
        (due[due.len() - 1] - due[0]).num_milliseconds() as f64 / 1000.0
    );
    let waiting: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM timers")
        .fetch_one(&epool)
        .await
        .unwrap();
    let rss1 = rss_kib();
    let file = std::fs::metadata(dir.path().join("timers.db"))
        .map(|m| m.len())
        .unwrap_or(0)
        + std::fs::metadata(dir.path().join("timers.db-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
    println!(
        "memory: {waiting} routes waiting after {setup:.1} s of setup; process RSS +{} KiB = {:.2} KiB per waiting route \
         (timers live in SQLite, none in memory); database {:.0} bytes per route",
        rss1.saturating_sub(rss0),
        rss1.saturating_sub(rss0) as f64 / n as f64,
        file as f64 / n as f64
    );
    let (fired, lagged) = fires.await.unwrap();
    if lagged > 0 {
        println!("(event stream lagged by {lagged}; those fires are not measured)");
    }
    let mut late: Vec<f64> = fired
        .iter()
        .filter_map(|(r, at)| {
            deadlines
                .get(r)
                .map(|d| (*at - *d).num_microseconds().unwrap_or(0) as f64 / 1000.0)
        })
        .collect();
    let _ = stop_tx.send(true);
    let _ = sched.await;
    // The yardstick, same setting, same run, right after.
    let bare_pool = bare_db(&dir).await;
    let mut conn = bare_pool.acquire().await.unwrap();
    let m = if quick() { 500 } else { 3000 };
    let bare = m as f64 / bare_commits(&mut conn, m, 0).await;
    // `RECOURSE_BENCH_DUMP=<file>`: every fire as "deadline_ms lateness_ms", to see whether
    // lateness builds up over a burst (capacity) or comes in spikes (stalls).
    if let Some(path) = std::env::var_os("RECOURSE_BENCH_DUMP") {
        let lines: String = fired
            .iter()
            .filter_map(|(r, at)| {
                deadlines.get(r).map(|d| {
                    format!(
                        "{} {:.3}\n",
                        d.timestamp_millis(),
                        (*at - *d).num_microseconds().unwrap_or(0) as f64 / 1000.0
                    )
                })
            })
            .collect();
        std::fs::write(path, lines).unwrap();
    }
    late.sort_by(f64::total_cmp);
    println!(
        "timer lateness with {n} routes waiting: {} fired, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        late.len(),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(f64::NAN)
    );
    println!("bare one-row commits right after the timers: {bare:.0}/s");
}

/// Firing capacity: `n` routes waiting with the same deadline on a manual clock; the clock
/// jumps past it and one `scheduler::tick` fires them all (passes of up to 512, each pass's
/// steps sharing group commits). Unlike the lateness run this does not depend on how the
/// setup happened to bunch the deadlines: it is how many due timers per second the writer
/// turns into committed steps (each a deadline step plus its `DispatchStarted`).
async fn firing_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open_db(&dir, "burst.db").await;
    let t0 = chrono::Utc::now();
    let clock = Arc::new(server::clock::ManualClock::new(t0));
    let e = Engine::new(Store::new(pool.clone()), clock.clone());
    let n = if quick() { 1000 } else { 10_000 };
    let p = profile(&e, 60).await;
    let mut setups = Vec::new();
    for w in 0..16 {
        let e = e.clone();
        let p = p.clone();
        setups.push(tokio::spawn(async move {
            for i in (w..n).step_by(16) {
                let r = start(&e, &p, i).await;
                let g = e.route_summary(&r).await.unwrap().snapshot.generation;
                e.submit(&r, overloaded(g)).await.unwrap();
            }
        }));
    }
    for s in setups {
        s.await.unwrap();
    }
    clock.advance(chrono::TimeDelta::seconds(61));
    let t = Instant::now();
    let fired = server::scheduler::tick(&e).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    let states: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, COUNT(*) FROM routes GROUP BY state ORDER BY state")
            .fetch_all(&pool)
            .await
            .unwrap();
    let retrying = format!("{states:?}");
    println!(
        "firing capacity: {fired} timers due at once fired in {secs:.2} s = {:.0} fires/s (routes by state after: {retrying})",
        fired as f64 / secs
    );
}

async fn restart_reconciliation() {
    let dir = tempfile::tempdir().unwrap();
    let (e, epool) = engine(&dir, "restart.db").await;
    let p = profile(&e, 3600).await;
    let n: i64 = if quick() { 10_000 } else { 100_000 };
    // One template route of each kind, then cloned in bulk (the engine's own rows, copied).
    let waiting = start(&e, &p, 0).await;
    let g = e.route_summary(&waiting).await.unwrap().snapshot.generation;
    e.submit(&waiting, overloaded(g)).await.unwrap();
    let in_flight = start(&e, &p, 1).await;
    let pool = &epool;
    for (template, count, prefix) in [(&waiting, n * 9 / 10 - 1, "w"), (&in_flight, n / 10 - 1, "f")] {
        sqlx::query(
            "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) \
             INSERT INTO routes (id, profile_id, caller_kind, caller_reference, invocation_id, title, state, generation, \
             candidate_id, deadline_ms, state_json, durable_error, created_at, updated_at) \
             SELECT ? || i, profile_id, caller_kind, caller_reference, ? || i, title, state, generation, candidate_id, \
             deadline_ms, state_json, NULL, created_at, updated_at FROM routes, k WHERE id = ?",
        )
        .bind(count)
        .bind(prefix)
        .bind(format!("inv-{prefix}"))
        .bind(template)
        .execute(pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO dispatches (route_id, attempt, candidate_id, kind, dispatcher, scheduled_generation, \
             invocation_generation, status, outcome, scheduled_at, started_at, settled_at) \
             SELECT r.id, d.attempt, d.candidate_id, d.kind, d.dispatcher, d.scheduled_generation, d.invocation_generation, \
             d.status, d.outcome, d.scheduled_at, d.started_at, d.settled_at FROM dispatches d, routes r \
             WHERE d.route_id = ? AND r.id LIKE ? || '%' AND r.id GLOB ? || '[0-9]*'",
        )
        .bind(template)
        .bind(prefix)
        .bind(prefix)
        .execute(pool)
        .await
        .unwrap();
    }
    drop(e);
    let total: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM routes")
        .fetch_one(pool)
        .await
        .unwrap();
    // "Restart": a new engine over the same file, then reconcile.
    let e2 = Engine::new(Store::new(pool.clone()), Arc::new(SystemClock));
    let t = Instant::now();
    let report = e2.reconcile().await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "restart reconciliation of {total} routes: {secs:.2} s ({} waits re-armed, {} ambiguous dispatches to action_required)",
        report.rearmed, report.ambiguous
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // `RECOURSE_BENCH_ONLY=transitions|restart|timers|capacity` runs one part (for profiling).
    let only = std::env::var("RECOURSE_BENCH_ONLY").unwrap_or_default();
    let run = |part: &str| only.is_empty() || only == part;
    println!("synchronous = {:?}", synchronous());
    rt.block_on(async {
        if run("transitions") {
            transitions_per_second().await;
        }
        if run("restart") {
            restart_reconciliation().await;
        }
        if run("timers") {
            timer_lateness().await;
        }
        if run("capacity") {
            firing_capacity().await;
        }
    });
}
