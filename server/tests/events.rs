//! Live events across replicas (PostgreSQL): the history table read as the event log, in commit
//! order (`store::events`), by one reader per engine (`engine::events`). Each test needs
//! `RECOURSE_TEST_POSTGRES`; without it, it says so and passes (SQLite has one serving process
//! and sends its events straight after each commit, as the other test files check).
//!
//! The reader polls in real time, so these tests wait on a real clock, each wait bounded.

mod common;

use common::{candidate, class_policy, disabled, hang, sim, t0, Harness};
use serde_json::json;
use server::{
    clock::ManualClock,
    engine::{Engine, RouteStreamEvent},
    store::{
        events::{EventCursor, LoggedEvent},
        Store,
    },
};
use sqlx::{Connection, PgConnection};
use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};
use tokio::sync::broadcast;

/// A profile whose routes start, begin their attempt and then wait (the attempt hangs).
async fn hanging_profile(h: &Harness) -> String {
    h.profile(json!({"name": "hang", "targets": [sim("main", "anthropic", json!([hang()]))],
        "policy": {"version": 1, "candidates": [candidate("main", class_policy(3, 5, 0, "stop"), disabled())]}}))
        .await
}

/// A second engine on the harness's database, as another replica would run it.
async fn replica(h: &Harness) -> Arc<Engine> {
    let pool = server::db::open(&h.database).await.unwrap();
    let engine = Engine::new(Store::new(pool), Arc::new(ManualClock::new(t0())));
    // Its reader has its starting point: whatever commits from now on reaches its subscribers.
    bounded(engine.events_delivered()).await.unwrap();
    engine
}

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("timed out")
}

/// Reads the log after `cursor` until what came back satisfies `done` (or 10 s passed).
async fn read_until(
    store: &Store,
    cursor: &mut EventCursor,
    done: impl Fn(&[LoggedEvent]) -> bool,
) -> Vec<LoggedEvent> {
    let end = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while !done(&got) && Instant::now() < end {
        let batch = store.events_after(cursor, 100).await.unwrap();
        *cursor = batch.cursor;
        got.extend(batch.events);
        if !done(&got) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    got
}

/// A history row inserted by hand (the columns the log reads), in the connection's transaction.
async fn insert_row(conn: &mut PgConnection, route_id: &str, seq: i64) {
    sqlx::query(
        "INSERT INTO route_history (route_id, seq, at, event, from_state, to_state, generation, candidate_id, \
         profile_revision) VALUES ($1, $2, '2026-11-30T08:00:00.000Z', 'retry_now', 'retry_wait', 'active', $2, 'main', 1)",
    )
    .bind(route_id)
    .bind(seq)
    .execute(conn)
    .await
    .unwrap();
}

/// Every event for these routes received so far, as (route, generation, event).
fn drain(rx: &mut broadcast::Receiver<RouteStreamEvent>, routes: &[String]) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if routes.contains(&e.route_id) {
            out.push((
                e.route_id,
                e.payload.generation,
                e.payload.event.as_str().to_owned(),
            ));
        }
    }
    out
}

/// The history rows of these routes, as (route, generation, event).
async fn history(h: &Harness, routes: &[String]) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    for r in routes {
        for row in h.route(r).await["history"].as_array().unwrap() {
            out.push((
                r.clone(),
                row["generation"].as_u64().unwrap(),
                row["event"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

#[tokio::test]
async fn a_row_that_commits_after_a_later_one_is_held_back_then_delivered_never_skipped() {
    postgres_only!();
    let h = Harness::new().await;
    let p = hanging_profile(&h).await;
    let r = h.start(&p, "inv-1").await;
    let store = h.engine.store().clone();
    let mut cursor = EventCursor::at_horizon(store.event_horizon().await.unwrap());
    // Only the rows written by hand below count (the route's own start may be above the
    // horizon, if another transaction on the server was running).
    let ours = |events: &[LoggedEvent]| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e.route_id == r && e.payload.generation > 1000)
            .map(|e| e.payload.generation)
            .collect()
    };

    // T1 takes its transaction id first (its insert) and stays open; T2 inserts later, with a
    // higher transaction id, and commits first.
    let mut c1 = PgConnection::connect(&h.database).await.unwrap();
    let mut c2 = PgConnection::connect(&h.database).await.unwrap();
    sqlx::query("BEGIN").execute(&mut c1).await.unwrap();
    insert_row(&mut c1, &r, 1001).await;
    sqlx::query("BEGIN").execute(&mut c2).await.unwrap();
    insert_row(&mut c2, &r, 1002).await;
    sqlx::query("COMMIT").execute(&mut c2).await.unwrap();

    // T2's row is committed and visible, but above the horizon while T1 runs: not delivered.
    let held = store.events_after(&cursor, 100).await.unwrap();
    assert_eq!(ours(&held.events), Vec::<u64>::new(), "{:?}", held.events);
    let t1: String = sqlx::query_scalar("SELECT CAST(pg_current_xact_id() AS text)")
        .fetch_one(&mut c1)
        .await
        .unwrap();
    assert!(
        held.horizon <= t1.parse::<u64>().unwrap(),
        "the horizon passed an open transaction"
    );
    cursor = held.cursor;

    sqlx::query("COMMIT").execute(&mut c1).await.unwrap();
    // Both now, in transaction order (T1's first though it committed last), each once.
    let got = read_until(&store, &mut cursor, |got| ours(got).len() >= 2).await;
    assert_eq!(ours(&got), vec![1001, 1002], "{got:?}");
    let e = got.iter().find(|e| e.payload.generation == 1001).unwrap();
    assert_eq!(e.payload.event.as_str(), "retry_now");
    assert_eq!(e.payload.from.map(|s| s.as_str()), Some("retry_wait"));
    assert_eq!(e.payload.to.as_str(), "active");
    // The snapshot is the route's current row (it never moved to generation 1001).
    assert_eq!(e.payload.snapshot.state.as_str(), "active");
    assert!(e.payload.snapshot.generation < 1001);
    // And nothing again.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let again = store.events_after(&cursor, 100).await.unwrap();
    assert_eq!(ours(&again.events), Vec::<u64>::new(), "{:?}", again.events);
    let _ = c1.close().await;
    let _ = c2.close().await;
}

#[tokio::test]
async fn the_engines_reader_sends_out_of_order_commits_once_each_to_subscribers() {
    postgres_only!();
    let h = Harness::new().await;
    let p = hanging_profile(&h).await;
    let r = h.start(&p, "inv-1").await;
    bounded(h.engine.events_delivered()).await.unwrap();
    let mut rx = h.engine.subscribe();
    let mut c1 = PgConnection::connect(&h.database).await.unwrap();
    let mut c2 = PgConnection::connect(&h.database).await.unwrap();
    sqlx::query("BEGIN").execute(&mut c1).await.unwrap();
    insert_row(&mut c1, &r, 2001).await;
    sqlx::query("BEGIN").execute(&mut c2).await.unwrap();
    insert_row(&mut c2, &r, 2002).await;
    sqlx::query("COMMIT").execute(&mut c2).await.unwrap();
    // The reader reads (polls, at least) while only T2 has committed.
    tokio::time::sleep(Duration::from_millis(250)).await;
    sqlx::query("COMMIT").execute(&mut c1).await.unwrap();
    bounded(h.engine.events_delivered()).await.unwrap();
    let got = drain(&mut rx, std::slice::from_ref(&r));
    assert_eq!(
        got,
        vec![
            (r.clone(), 2001, "retry_now".to_owned()),
            (r.clone(), 2002, "retry_now".to_owned())
        ]
    );
    let _ = c1.close().await;
    let _ = c2.close().await;
}

#[tokio::test]
async fn after_its_connections_are_killed_the_reader_resumes_from_its_cursor_and_repeats_nothing() {
    postgres_only!();
    let h = Harness::new().await;
    let p = hanging_profile(&h).await;
    bounded(h.engine.events_delivered()).await.unwrap();
    let mut rx = h.engine.subscribe();
    let mut admin = PgConnection::connect(&h.database).await.unwrap();
    // The listener's connection (its last statement is its LISTEN) and the pool connections the
    // reader read on (its last statement reads the horizon).
    let kill = "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
                WHERE datname = current_database() AND pid <> pg_backend_pid() \
                AND (query LIKE 'LISTEN%' OR query LIKE '%pg_snapshot_xmin(pg_current_snapshot())%')";
    let mut routes = Vec::new();
    let mut killed_listener = false;
    for i in 0..6 {
        let listening: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        killed_listener |= listening > 0;
        let killed: i64 = sqlx::query_scalar(kill).fetch_one(&mut admin).await.unwrap();
        assert!(killed >= 1 || i > 0, "nothing of the reader's was found to kill");
        // Commits while the reader and its listener are cut off.
        routes.push(h.start(&p, &format!("inv-{i}")).await);
    }
    assert!(killed_listener, "the listener's connection was never seen");
    bounded(h.engine.events_delivered()).await.unwrap();
    let mut got = drain(&mut rx, &routes);
    let mut want = history(&h, &routes).await;
    assert!(want.len() >= routes.len() * 2, "{want:?}");
    got.sort();
    want.sort();
    assert_eq!(got, want, "every committed change exactly once");
    // The listener connected again.
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let listening: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'",
        )
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if listening > 0 {
            break;
        }
        assert!(Instant::now() < end, "the listener never reconnected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = admin.close().await;
}

#[tokio::test]
async fn a_subscriber_on_one_replica_sees_another_replicas_change_within_a_second() {
    postgres_only!();
    let a = Harness::new().await;
    let p = hanging_profile(&a).await;
    let b = replica(&a).await;
    let mut on_b = b.subscribe();
    let mut on_a = a.engine.subscribe();
    let sent = Instant::now();
    let r = a.start(&p, "inv-1").await;
    let started = bounded(async {
        loop {
            let e = on_b.recv().await.unwrap();
            if e.route_id == r && e.payload.event.as_str() == "started" {
                return e;
            }
        }
    })
    .await;
    let delay = sent.elapsed();
    assert!(delay < Duration::from_secs(1), "took {delay:?}");
    assert_eq!(started.payload.to.as_str(), "active");
    assert_eq!(started.payload.generation, 1);
    // Both replicas see the same changes, once each.
    bounded(a.engine.events_delivered()).await.unwrap();
    bounded(b.events_delivered()).await.unwrap();
    let routes = [r];
    let mut seen_b = drain(&mut on_b, &routes);
    seen_b.insert(0, (routes[0].clone(), 1, "started".to_owned()));
    let seen_a = drain(&mut on_a, &routes);
    assert_eq!(seen_a, seen_b);
    assert_eq!(seen_a, history(&a, &routes).await);
}

/// How long a change made on replica A takes to reach a subscriber on replica B: 1,000 route
/// starts on A, one at a time, each timed from just before the request to B's `started` event.
/// `RECOURSE_TEST_POSTGRES=… cargo test -p server --test events cross_replica_event_delay -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; prints the delays"]
async fn cross_replica_event_delay() {
    postgres_only!();
    let a = Harness::new().await;
    let p = hanging_profile(&a).await;
    let b = replica(&a).await;
    let mut on_b = b.subscribe();
    let n = 1_000;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let receiver = tokio::spawn(async move {
        let mut at = HashMap::new();
        while at.len() < n {
            match on_b.recv().await {
                Ok(e) if e.payload.event.as_str() == "started" => {
                    at.insert(e.route_id, Instant::now());
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(k)) => panic!("lagged by {k}"),
                Err(e) => panic!("{e}"),
            }
        }
        at
    });
    let all = Instant::now();
    for i in 0..n {
        let sent = Instant::now();
        let r = a.start(&p, &format!("inv-{i}")).await;
        tx.send((r, sent)).unwrap();
    }
    let elapsed = all.elapsed();
    let received = tokio::time::timeout(Duration::from_secs(30), receiver)
        .await
        .expect("B never received them all")
        .unwrap();
    let mut delays = Vec::with_capacity(n);
    while let Ok((r, sent)) = rx.try_recv() {
        delays.push(received[&r].duration_since(sent));
    }
    delays.sort();
    let q = |f: f64| delays[((delays.len() as f64 * f).ceil() as usize).saturating_sub(1)];
    println!(
        "cross-replica event delay over {n} route starts on A ({:.0}/s), received on B: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        n as f64 / elapsed.as_secs_f64(),
        q(0.50),
        q(0.90),
        q(0.99),
        delays[delays.len() - 1]
    );
    assert!(q(0.99) < Duration::from_secs(1), "p99 {:?}", q(0.99));
}
