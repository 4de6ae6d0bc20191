//! Live events across replicas (PostgreSQL): the history table read as the event log, in commit
//! order (`store::events`), by one reader per engine (`engine::events`). Each test
//! `requires!(postgres)`: without `RECOURSE_TEST_POSTGRES` it is reported as skipped (SQLite has
//! one serving process and sends its events straight after each commit, as the other test files
//! check).
//!
//! The reader polls in real time, so these tests wait on a real clock, each wait bounded.

use crate::common;

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

/// Waits (10 s at most) until the engine's event log reader has finished a read that began
/// after `since` (a time of the database's clock): a read of the history table
/// (`store::events_after`, the only statement with a lateral join on it) on another connection
/// of this test's database, idle again, that started after `since`.
async fn reader_has_read_since(admin: &mut PgConnection, since: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let reads: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE '%LEFT JOIN LATERAL%' \
             AND query_start > CAST($1 AS timestamptz)",
        )
        .bind(since)
        .fetch_one(&mut *admin)
        .await
        .unwrap();
        if reads > 0 {
            return;
        }
        assert!(
            Instant::now() < end,
            "the event log reader did not read within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
    requires!(postgres);
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
    // And never again: a later commit comes next, alone.
    insert_row(&mut c2, &r, 1003).await;
    let got = read_until(&store, &mut cursor, |got| !ours(got).is_empty()).await;
    assert_eq!(ours(&got), vec![1003], "{got:?}");
    let _ = c1.close().await;
    let _ = c2.close().await;
}

#[tokio::test]
async fn the_engines_reader_sends_out_of_order_commits_once_each_to_subscribers() {
    requires!(postgres);
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
    // The reader reads while only T2 has committed: wait until it has, and check it held T2's
    // row back (nothing of ours was sent).
    let t2_committed: String = sqlx::query_scalar("SELECT CAST(clock_timestamp() AS text)")
        .fetch_one(&mut c2)
        .await
        .unwrap();
    reader_has_read_since(&mut c2, &t2_committed).await;
    assert_eq!(
        drain(&mut rx, std::slice::from_ref(&r)),
        vec![],
        "T2's row was sent before T1's"
    );
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
    requires!(postgres);
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
async fn a_subscriber_on_one_replica_sees_another_replicas_changes_once_each_in_order() {
    requires!(postgres);
    let a = Harness::new().await;
    let p = hanging_profile(&a).await;
    let b = replica(&a).await;
    let mut on_b = b.subscribe();
    let mut on_a = a.engine.subscribe();
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
