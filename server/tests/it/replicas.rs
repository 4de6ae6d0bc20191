//! Several replicas on one PostgreSQL database. Each test `requires!(postgres)`: it runs in
//! `./dev test`'s PostgreSQL pass (`RECOURSE_TEST_POSTGRES`), and without one it is reported as
//! skipped (a failure with `RECOURSE_REQUIRE_POSTGRES=1`), since SQLite has one process and
//! nothing here to check.
//!
//! In-process replicas are engines on pools of their own (their own connections, as separate
//! processes would have), joined to the database's replicas, on one manual clock; the
//! multi-process tests run the real `recourse serve` on real time.

use crate::common;

use chrono::TimeDelta;
use common::backend;
use policy::{
    api::{Caller, CallerKind, ProfileInput, StartRouteRequest},
    route::{ManualAction, RouteEvent},
};
use serde_json::json;
use server::{
    clock::ManualClock,
    engine::{replicas::Timing, Engine, EngineError, Input},
    replica::ReplicaId,
    store::{sql, Pool, Store},
};
use sqlx::{Connection, PgConnection};
use std::sync::Arc;

/// `n` replicas (engines on pools of their own) of one new database, joined, on one manual
/// clock; the first pool for the test's own reads, and the database's URL. Replica `i`'s
/// connections carry the `application_name` `replica-i`, so the test can tell them apart in
/// `pg_stat_activity`.
async fn replicas(dir: &tempfile::TempDir, n: usize) -> (Vec<Arc<Engine>>, Pool, ManualClock, String) {
    let url = backend::database(dir.path(), "replicas.db");
    let clock = ManualClock::new(common::t0());
    let mut engines = Vec::new();
    let mut first = None;
    for i in 0..n {
        let pool = server::db::open(&format!("{url}?application_name=replica-{i}"))
            .await
            .unwrap();
        first.get_or_insert_with(|| pool.clone());
        let engine = Engine::new(Store::new(pool), Arc::new(clock.clone()));
        let id: ReplicaId = format!("replica-{i}").parse().unwrap();
        engine.join_replicas(&id, Timing::DEFAULT).await.unwrap();
        engines.push(engine);
    }
    (engines, first.unwrap(), clock, url)
}

/// A transaction of the test's own that keeps every replica's firing transaction from finishing:
/// it holds `route_history` in SHARE mode, which lets reads through but no insert, so a
/// replica that fires timers claims them (its first statement), locks their routes, steps them
/// and then waits to write their history rows, holding its claims, until the barrier goes.
///
/// It watches the replicas on a second connection, outside that transaction: PostgreSQL reads
/// `pg_stat_activity` once per transaction, so polling it inside the barrier's would never see
/// a connection a replica opened after the first look (its writer's, taken when it first
/// fires).
struct Barrier {
    hold: PgConnection,
    watch: PgConnection,
}

impl Barrier {
    /// Raised once every write in progress has committed.
    async fn raise(url: &str) -> Barrier {
        let mut hold = PgConnection::connect(url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut hold).await.unwrap();
        sqlx::query("LOCK TABLE route_history IN SHARE MODE")
            .execute(&mut hold)
            .await
            .unwrap();
        let watch = PgConnection::connect(url).await.unwrap();
        Barrier { hold, watch }
    }

    /// Waits (bounded) until every one of `names` (`application_name`s) has a connection that
    /// is in the middle of firing timers: it holds the lock its claims took on `timers` and
    /// waits for a lock (this barrier's).
    async fn wait_for_claims_held_by(&mut self, names: &[String], limit: std::time::Duration) {
        let end = std::time::Instant::now() + limit;
        loop {
            let holding: Vec<String> = sqlx::query_scalar(
                "SELECT DISTINCT a.application_name FROM pg_stat_activity a \
                 WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' \
                 AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted \
                   AND l.relation = CAST('timers' AS regclass) AND l.mode = 'RowShareLock')",
            )
            .fetch_all(&mut self.watch)
            .await
            .unwrap();
            if names.iter().all(|n| holding.contains(n)) {
                return;
            }
            if std::time::Instant::now() >= end {
                let activity: Vec<String> = sqlx::query_scalar(
                    "SELECT concat_ws(' | ', application_name, state, wait_event_type, wait_event, \
                     left(query, 100)) FROM pg_stat_activity WHERE datname = current_database() \
                     AND pid <> pg_backend_pid() ORDER BY application_name",
                )
                .fetch_all(&mut self.watch)
                .await
                .unwrap();
                panic!(
                    "not every replica got to hold claims: {holding:?} of {names:?}; connections:\n{}",
                    activity.join("\n")
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    async fn lower(mut self) {
        sqlx::query("ROLLBACK").execute(&mut self.hold).await.unwrap();
        let _ = self.hold.close().await;
        let _ = self.watch.close().await;
    }
}

async fn profile(engine: &Engine, interval: u64) -> String {
    profile_on(engine, interval, policy::api::CandidateTarget::external("main")).await
}

/// A profile whose one candidate `main` runs on `target`.
async fn profile_on(engine: &Engine, interval: u64, target: policy::api::CandidateTarget) -> String {
    let input = ProfileInput {
        name: "replicas".into(),
        kind: policy::api::ProfileKind::Dynamic,
        description: None,
        targets: vec![target],
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

/// Starts route number `i` on `profile`: its id and generation.
async fn started(engine: &Engine, profile: &str, i: usize) -> (String, u64) {
    let request = StartRouteRequest {
        profile_id: profile.to_owned(),
        caller: Caller {
            kind: CallerKind::Workflow,
            reference: "replicas".into(),
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

async fn start(engine: &Engine, profile: &str, i: usize) -> String {
    started(engine, profile, i).await.0
}

fn overloaded(generation: u64) -> Input {
    let env = json!({"generation": generation, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
        "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]});
    Input::evidence(classifier::Envelope::from_value(&env).unwrap().into_owned())
}

/// `n` routes waiting for a retry `interval` seconds from the clock's now, all due at once.
/// They are set up through every replica at once, eight tasks on each: an engine's writer on
/// PostgreSQL sends a transaction's statements one at a time, and one replica alone took about
/// 70 s for 10,000 routes (a start, then a failure each), most of the test's time.
async fn waiting_routes(engines: &[Arc<Engine>], n: usize, interval: u64) -> Vec<String> {
    let p = profile(&engines[0], interval).await;
    let tasks = 8 * engines.len();
    let mut setups = Vec::new();
    for w in 0..tasks {
        let e = engines[w % engines.len()].clone();
        let p = p.clone();
        setups.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in (w..n).step_by(tasks) {
                let (r, g) = started(&e, &p, i).await;
                e.submit(&r, overloaded(g)).await.unwrap();
                ids.push(r);
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for s in setups {
        ids.extend(s.await.unwrap());
    }
    ids
}

async fn count(pool: &Pool, q: &str) -> i64 {
    sql::query(q.to_owned()).scalar(pool).await.unwrap()
}

/// Every replica fires what is due, all at once; how many each fired.
async fn fire_everywhere(engines: &[Arc<Engine>]) -> Vec<usize> {
    let passes: Vec<_> = engines
        .iter()
        .map(|e| {
            let e = e.clone();
            tokio::spawn(async move { server::scheduler::tick(&e).await.unwrap() })
        })
        .collect();
    let mut fired = Vec::new();
    for p in passes {
        fired.push(p.await.unwrap());
    }
    fired
}

/// `n` timers due at once, fired by every replica at the same time: each fires once, and every
/// replica fires some. The replicas are made to overlap, not left to chance: a [`Barrier`] keeps
/// each one's first firing transaction open, holding its claims, until all of them hold some.
async fn timers_fire_exactly_once(replicas_n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (engines, pool, clock, url) = replicas(&dir, replicas_n).await;
    let n = 10_000;
    let set_up = std::time::Instant::now();
    waiting_routes(&engines, n, 60).await;
    eprintln!(
        "{n} waiting routes set up in {:.1} s",
        set_up.elapsed().as_secs_f64()
    );
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM timers WHERE kind = 'deadline'").await,
        n as i64
    );
    clock.advance(TimeDelta::seconds(61));
    let mut barrier = Barrier::raise(&url).await;
    let firing = tokio::spawn({
        let engines = engines.clone();
        async move { fire_everywhere(&engines).await }
    });
    let names: Vec<String> = (0..replicas_n).map(|i| format!("replica-{i}")).collect();
    barrier
        .wait_for_claims_held_by(&names, std::time::Duration::from_secs(180))
        .await;
    barrier.lower().await;
    firing.await.unwrap();
    // Who fired what: a fired route is in flight (its retry's attempt), owned by the replica
    // whose transaction fired it.
    let by_owner: Vec<i64> = sql::query(
        "SELECT COUNT(*) FROM routes WHERE owner IS NOT NULL GROUP BY owner ORDER BY owner".to_owned(),
    )
    .scalars(&pool)
    .await
    .unwrap();
    eprintln!("{replicas_n} replicas fired {by_owner:?} of {n} timers due in the same second");
    assert_eq!(
        by_owner.len(),
        replicas_n,
        "every replica fired some: {by_owner:?}"
    );
    assert_eq!(by_owner.iter().sum::<i64>(), n as i64, "{by_owner:?}");
    let deadline_steps = count(
        &pool,
        "SELECT COUNT(*) FROM route_history WHERE event = 'deadline_reached'",
    )
    .await;
    assert_eq!(deadline_steps, n as i64, "every timer fired");
    let twice = count(
        &pool,
        "SELECT COUNT(*) FROM (SELECT route_id FROM route_history WHERE event = 'deadline_reached' \
         GROUP BY route_id HAVING COUNT(*) > 1) AS twice",
    )
    .await;
    assert_eq!(twice, 0, "no timer fired twice");
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM timers WHERE kind = 'deadline'").await,
        0,
        "none is left"
    );
    let launched_twice = count(
        &pool,
        "SELECT COUNT(*) FROM (SELECT route_id, attempt FROM dispatches WHERE status = 'started' \
         GROUP BY route_id, attempt HAVING COUNT(*) > 1) AS twice",
    )
    .await;
    assert_eq!(launched_twice, 0);
    let lost: u64 = engines
        .iter()
        .map(|e| {
            let text = e.metrics().render();
            text.lines()
                .find(|l| l.starts_with("recourse_timer_claims_lost_total"))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as u64
        })
        .sum();
    eprintln!("claims lost to other replicas: {lost}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_timers_due_at_once_fire_exactly_once_and_on_both_of_two_replicas() {
    requires!(postgres);
    timers_fire_exactly_once(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_timers_due_at_once_fire_exactly_once_and_on_each_of_three_replicas() {
    requires!(postgres);
    timers_fire_exactly_once(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_acting_on_one_route_at_once_commit_exactly_one_change() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let (engines, pool, _clock, _url) = replicas(&dir, 2).await;
    let p = profile(&engines[0], 60).await;
    for i in 0..50 {
        let r = start(&engines[0], &p, i).await;
        let g = engines[0].route_summary(&r).await.unwrap().snapshot.generation;
        // The same decision, from both replicas at once: one person's stop on each.
        let stop = || {
            Input::Event(RouteEvent::Manual {
                action: ManualAction::Stop,
                expected_generation: g,
            })
        };
        let (a, b) = tokio::join!(engines[0].submit(&r, stop()), engines[1].submit(&r, stop()));
        let won = [&a, &b]
            .iter()
            .filter(|x| matches!(x, Ok(applied) if applied.changed))
            .count();
        // The other sees the route already stopped: unchanged, or refused as stale.
        let other = [&a, &b]
            .iter()
            .filter(|x| {
                matches!(x, Ok(applied) if !applied.changed) || matches!(x, Err(EngineError::Rejected { .. }))
            })
            .count();
        assert_eq!((won, other), (1, 1), "{a:?} {b:?}");
    }
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM route_history WHERE event = 'stop'").await,
        50,
        "one committed stop per route"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_route_whose_replica_is_gone_is_taken_up_by_another_and_never_by_two() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let url = backend::database(dir.path(), "orphans.db");
    let clock = ManualClock::new(common::t0());
    let short = Timing {
        lease: std::time::Duration::from_millis(300),
        heartbeat: std::time::Duration::from_millis(60),
    };
    let engine = |name: &'static str| {
        let url = url.clone();
        let clock = clock.clone();
        async move {
            let pool = server::db::open(&url).await.unwrap();
            let e = Engine::new(Store::new(pool), Arc::new(clock));
            e.join_replicas(&name.parse().unwrap(), short).await.unwrap();
            e
        }
    };
    let dead = engine("dead").await;
    // Attempts the dead replica runs itself (simulated, never reporting).
    let target = serde_json::from_value(common::sim("main", "p", json!([common::hang()]))).unwrap();
    let p = profile_on(&dead, 60, target).await;
    for i in 0..20 {
        start(&dead, &p, i).await;
    }
    let pool = server::db::open(&url).await.unwrap();
    let owned = count(&pool, "SELECT COUNT(*) FROM routes WHERE owner IS NOT NULL").await;
    assert_eq!(owned, 20, "every route in flight is its committing replica's");
    drop(dead);
    // Its lease runs out (300 ms of database time).
    let lapsed = "SELECT COUNT(*) FROM replicas WHERE replica_id = 'dead' \
                  AND lease_until_ms < CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count(&pool, lapsed).await == 0 {
        assert!(
            std::time::Instant::now() < end,
            "the dead replica's lease never ran out"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (a, b) = tokio::join!(engine("a"), engine("b"));
    // Both sweep at once: each route is taken up once (the row locked, the owner read again).
    let (ta, tb) = tokio::join!(a.take_up_orphans(), b.take_up_orphans());
    eprintln!("taken up: {ta:?} {tb:?}");
    // Both may have found all 20 orphaned; the locked re-read lets only one take each up.
    assert!(ta.unwrap() <= 20 && tb.unwrap() <= 20);
    let restarted = count(
        &pool,
        "SELECT COUNT(*) FROM route_history WHERE event = 'restarted'",
    )
    .await;
    assert_eq!(restarted, 20, "each route taken up exactly once");
    // Their started attempts may have run: ambiguous, for a person, never run again.
    let ambiguous = count(
        &pool,
        "SELECT COUNT(*) FROM dispatches WHERE outcome = 'ambiguous'",
    )
    .await;
    assert_eq!(ambiguous, 20);
    assert_eq!(
        count(
            &pool,
            "SELECT COUNT(*) FROM routes WHERE state = 'action_required'"
        )
        .await,
        20
    );
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM simulated_launches").await,
        20,
        "launched once each, by the replica that is gone"
    );
    // Nothing is left to take up.
    assert_eq!(a.take_up_orphans().await.unwrap(), 0);
}

// ------------------------------------------------------------------------------------------------
// Real processes on real time
// ------------------------------------------------------------------------------------------------

/// Leases of a second, renewed every 200 ms, for the processes below.
const LEASE: (&str, &str) = ("RECOURSE_REPLICA_LEASE_MS", "1000");

fn serve(db: &str, extra: &[&str]) -> (std::process::Child, String) {
    let (child, addr, _) = common::spawn_serve_env(db, extra, false, &[LEASE]);
    (child, addr)
}

/// [`serve`], its database connections named `name` (`application_name`, through libpq's
/// `PGAPPNAME`, which sqlx reads), so the test can find them in `pg_stat_activity`.
fn serve_named(db: &str, name: &str) -> (std::process::Child, String) {
    let (child, addr, _) = common::spawn_serve_env(db, &[], false, &[LEASE, ("PGAPPNAME", name)]);
    (child, addr)
}

fn call(addr: &str, method: &str, path: &str, body: Option<&serde_json::Value>) -> (u16, serde_json::Value) {
    common::http(addr, method, path, body).expect("the server answers")
}

/// Waits (bounded) for something the servers do on their own time.
fn until(what: &str, limit: std::time::Duration, mut done: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + limit;
    while !done() {
        assert!(std::time::Instant::now() < end, "timed out waiting: {what}");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

fn stop(mut child: std::process::Child) {
    common::terminate(&mut child, std::time::Duration::from_secs(60));
}

fn profile_body(target: serde_json::Value, interval: u64) -> serde_json::Value {
    json!({"name": "replicas", "targets": [target],
        "policy": {"version": 1, "candidates": [common::candidate("main",
            common::class_policy(5, interval, 0, "stop"), common::disabled())]}})
}

fn start_route(addr: &str, profile: &serde_json::Value, invocation: &str) -> String {
    let (status, route) = call(
        addr,
        "POST",
        "/api/v1/routes",
        Some(
            &json!({"profile_id": profile["id"], "caller": {"kind": "workflow", "reference": "replicas",
            "invocation_id": invocation}}),
        ),
    );
    assert_eq!(status, 201, "{route}");
    route["id"].as_str().unwrap().to_owned()
}

fn snapshot(addr: &str, route: &str) -> serde_json::Value {
    call(addr, "GET", &format!("/api/v1/routes/{route}"), None).1["route"]["snapshot"].clone()
}

fn history(addr: &str, route: &str) -> Vec<serde_json::Value> {
    call(addr, "GET", &format!("/api/v1/routes/{route}"), None).1["history"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn fail_overloaded(addr: &str, route: &str) {
    let generation = snapshot(addr, route)["generation"].as_u64().unwrap();
    let (status, v) = call(
        addr,
        "POST",
        &format!("/api/v1/routes/{route}/evidence"),
        Some(
            &json!({"generation": generation, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
            "items": [{"kind": "http", "status": 529,
            "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]}),
        ),
    );
    assert_eq!(status, 200, "{v}");
}

#[test]
fn a_replica_whose_clock_is_ten_minutes_off_fires_no_timer_early_or_late() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "skew.db");
    let (a, a_addr) = serve(&db, &[]);
    let (ahead, ahead_addr) = serve(&db, &["--test-clock-skew-seconds", "600"]);
    let (behind, behind_addr) = serve(&db, &["--test-clock-skew-seconds", "-600"]);
    let (status, p) = call(
        &a_addr,
        "POST",
        "/api/v1/profiles",
        Some(&profile_body(json!({"id": "main", "dispatcher": "external"}), 2)),
    );
    assert_eq!(status, 201, "{p}");
    // Each replica decides a 2 s retry wait: it decides at the database's now (which is this
    // machine's: the database runs here) and the deadline is 2 s after that, on all three,
    // whatever their own clocks say. The margins are the skew's scale (10 minutes), not a
    // latency: a loaded machine may take seconds to answer, and that proves nothing either way.
    let margin = TimeDelta::seconds(60);
    let time_of = |v: &serde_json::Value| -> chrono::DateTime<chrono::Utc> {
        v.as_str()
            .unwrap_or_else(|| panic!("a time: {v}"))
            .parse()
            .unwrap()
    };
    let mut routes = Vec::new();
    for (i, addr) in [&a_addr, &ahead_addr, &behind_addr].into_iter().enumerate() {
        let r = start_route(addr, &p, &format!("inv-{i}"));
        let before = chrono::Utc::now();
        fail_overloaded(addr, &r);
        let after = chrono::Utc::now();
        let failed = history(addr, &r)
            .into_iter()
            .find(|h| h["event"] == "failed")
            .expect("the failure's transition");
        let decision = &failed["decision"];
        assert_eq!(decision["kind"], "retry", "{failed}");
        let (decided, deadline) = (time_of(&decision["decided_at"]), time_of(&decision["deadline"]));
        assert!(
            decided > before - margin && decided < after + margin,
            "replica {i} decided at {decided}, on a clock of its own (the request ran from {before} to {after})"
        );
        assert_eq!(deadline - decided, TimeDelta::seconds(2), "{decision}");
        routes.push((r, deadline));
    }
    for (r, deadline) in &routes {
        until("the retry to fire", std::time::Duration::from_secs(60), || {
            history(&a_addr, r)
                .iter()
                .any(|h| h["event"] == "deadline_reached")
        });
        let fired = history(&a_addr, r)
            .into_iter()
            .find(|h| h["event"] == "deadline_reached")
            .expect("the deadline fired");
        let at: chrono::DateTime<chrono::Utc> = fired["at"].as_str().unwrap().parse().unwrap();
        assert!(
            at >= *deadline - TimeDelta::milliseconds(5),
            "fired early: {at} before {deadline}"
        );
        assert!(at <= *deadline + margin, "fired late: {at}, due {deadline}");
    }
    for c in [a, ahead, behind] {
        stop(c);
    }
}

/// A killed in the middle of firing: its transaction holds claims on due timers when it dies.
/// A [`Barrier`] makes that moment certain instead of likely: raised once every route waits for
/// its retry, it keeps each replica's first firing transaction open (claims taken, history not
/// yet written); A is killed once it is seen so, then the barrier goes. PostgreSQL rolls A's
/// transaction back, and B must fire those timers as well as its own, each once.
#[test]
fn a_replica_killed_during_a_burst_leaves_nothing_unfired_and_nothing_fired_twice() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "burst.db");
    let (a, a_addr) = serve_named(&db, "burst-a");
    let (b, b_addr) = serve_named(&db, "burst-b");
    let (status, p) = call(
        &a_addr,
        "POST",
        "/api/v1/profiles",
        Some(&profile_body(json!({"id": "main", "dispatcher": "external"}), 8)),
    );
    assert_eq!(status, 201, "{p}");
    let n = 300;
    let routes: Vec<String> = (0..n)
        .map(|i| {
            let addr = if i % 2 == 0 { &a_addr } else { &b_addr };
            let r = start_route(addr, &p, &format!("inv-{i}"));
            fail_overloaded(addr, &r);
            r
        })
        .collect();
    assert_eq!(routes.len(), n);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The retries come due over the next 8 s (the last one's 8 s from now); whatever fired
    // before the barrier stands, and A holds claims on some of the rest when it is killed.
    let barrier = rt.block_on(async {
        let mut barrier = Barrier::raise(&db).await;
        barrier
            .wait_for_claims_held_by(&["burst-a".to_owned()], std::time::Duration::from_secs(30))
            .await;
        barrier
    });
    let mut a = a;
    a.kill().unwrap();
    a.wait().unwrap();
    rt.block_on(barrier.lower());
    // B fires the rest, A's rolled-back claims too, within the poll bound once they are due.
    until("every retry to fire", std::time::Duration::from_secs(20), || {
        let (_, list) = call(&b_addr, "GET", "/api/v1/routes?state=retry_wait&limit=1000", None);
        list.as_array().is_some_and(Vec::is_empty)
    });
    rt.block_on(async {
        let pool = server::db::open(&db).await.unwrap();
        assert_eq!(
            count(
                &pool,
                "SELECT COUNT(*) FROM route_history WHERE event = 'deadline_reached'"
            )
            .await,
            n as i64
        );
        let twice = count(
            &pool,
            "SELECT COUNT(*) FROM (SELECT route_id FROM route_history WHERE event = 'deadline_reached' \
             GROUP BY route_id HAVING COUNT(*) > 1) AS twice",
        )
        .await;
        assert_eq!(twice, 0, "a timer fired twice");
        assert_eq!(
            count(&pool, "SELECT COUNT(*) FROM timers WHERE kind = 'deadline'").await,
            0
        );
    });
    stop(b);
}

#[test]
fn a_replica_stopped_past_its_lease_loses_its_attempt_to_action_required_and_its_late_report_is_refused() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let db = backend::database(dir.path(), "stopped.db");
    let (a, a_addr) = serve(&db, &[]);
    let (b, b_addr) = serve(&db, &[]);
    // An attempt A runs itself, and that never reports (simulated, hanging).
    let (status, p) = call(
        &a_addr,
        "POST",
        "/api/v1/profiles",
        Some(&profile_body(
            common::sim("main", "p", json!([common::hang()])),
            3,
        )),
    );
    assert_eq!(status, 201, "{p}");
    let r = start_route(&a_addr, &p, "inv-1");
    until(
        "the attempt to start on A",
        std::time::Duration::from_secs(5),
        || snapshot(&a_addr, &r)["attempt"]["dispatch"] == "started",
    );
    let started = snapshot(&a_addr, &r)["generation"].as_u64().unwrap();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(a.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // A's lease (1 s) runs out; B takes the route up: its attempt may have run, so a person
    // decides (ambiguous), and it is never run again.
    until(
        "B to take the route up",
        std::time::Duration::from_secs(10),
        || snapshot(&b_addr, &r)["state"] == "action_required",
    );
    let s = snapshot(&b_addr, &r);
    assert_eq!(s["action_reason"], "ambiguous_dispatch", "{s}");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    // A comes back: its late report (evidence for the attempt it started) is stale.
    let (status, v) = call(
        &a_addr,
        "POST",
        &format!("/api/v1/routes/{r}/evidence"),
        Some(
            &json!({"generation": started, "phase": "prompt", "effects": {"prompt_delivery": "confirmed"},
            "items": [{"kind": "http", "status": 529, "body": "overloaded"}]}),
        ),
    );
    assert_eq!(status, 409, "{v}");
    // A finds out (its next heartbeat) that its lease ran out, and stops what it ran; the route
    // stays with the person, taken up once. (Bounded generously: once, in CI, beside the
    // ten-thousand-timer tests, 10 s was not enough for a process just woken from SIGSTOP.)
    until(
        "A to notice its lease ran out",
        std::time::Duration::from_secs(30),
        || {
            common::http_text(&a_addr, "GET", "/metrics", None).is_some_and(|(_, text)| {
                text.lines().any(|l| {
                    l.starts_with("recourse_replica_lease_lapsed_total")
                        && l.split_whitespace().last().and_then(|v| v.parse::<f64>().ok()) >= Some(1.0)
                })
            })
        },
    );
    let s = snapshot(&a_addr, &r);
    assert_eq!(s["state"], "action_required", "{s}");
    let restarted = history(&a_addr, &r)
        .into_iter()
        .filter(|h| h["event"] == "restarted")
        .count();
    assert_eq!(restarted, 1);
    stop(a);
    stop(b);
}
