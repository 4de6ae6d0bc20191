//! The crash test: the real `recourse serve` process, on a test clock, killed with SIGKILL at
//! randomized moments (while requests that start routes and move time are in flight) at least
//! 50 times. Afterwards: no dispatch ran twice, no pending schedule was lost, and every
//! ambiguous dispatch is in `action_required`.
//!
//! Time never passes for real: the clock moves only through `POST /api/v1/test/clock`, which
//! also fires what is due before it answers. The seed is printed; `RECOURSE_CRASH_SEED` replays
//! it.

use crate::common;

use chrono::{DateTime, TimeDelta, Utc};
use common::t0;
use serde_json::{json, Value};
use std::{
    process::Child,
    sync::{
        atomic::{AtomicI64, Ordering},
        mpsc, Arc,
    },
};

const KILLS: usize = 55;

fn spawn(db: &str, now: DateTime<Utc>) -> (Child, String) {
    // One replica id for every restart: on PostgreSQL a restarted replica takes its own place at
    // once (another id would wait for the killed one's lease to run out).
    let (child, addr, _) = common::spawn_serve(
        db,
        &["--test-clock", &now.to_rfc3339(), "--replica-id", "crash-test"],
        false,
    );
    (child, addr)
}

fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    common::http(addr, method, path, body)
}

fn overloaded() -> Value {
    json!({"phase": "prompt", "effects": {"prompt_delivery": "confirmed"}, "items": [{"kind": "http", "status": 529,
        "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]})
}

fn retry(n: u32, secs: u64, on_exhausted: &str) -> Value {
    json!({"retry": {"enabled": true, "max_retries": n, "initial_interval_seconds": secs},
           "wait_for_reset": {"enabled": true, "max_wait_seconds": 600}, "on_exhausted": on_exhausted})
}

fn seed(addr: &str) -> Vec<String> {
    let reset = t0() + TimeDelta::seconds(90);
    let usage = json!({"agent": "claude-code", "items": [{"kind": "acp_updates", "updates": [{"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("Claude AI usage limit reached|{}", reset.timestamp())}}],
        "prompt_result": {"stopReason": "end_turn"}}]});
    let profiles = [
        json!({"name": "retry then switch", "targets": [
            {"id": "a", "dispatcher": "simulated", "provider_id": "pa", "script": [
                {"outcome": "fail", "envelope": overloaded()}, {"outcome": "fail", "envelope": overloaded()},
                {"outcome": "fail", "envelope": overloaded()}]},
            {"id": "b", "dispatcher": "simulated", "provider_id": "pb", "script": [
                {"outcome": "fail", "envelope": overloaded()}, {"outcome": "succeed"}]}],
          "policy": {"version": 1, "candidates": [
            {"id": "a", "transient": retry(2, 5, "skip"), "hard": retry(1, 5, "skip")},
            {"id": "b", "transient": retry(2, 3, "stop"), "hard": retry(1, 5, "stop")}]}}),
        json!({"name": "reset wait", "targets": [
            {"id": "q", "dispatcher": "simulated", "provider_id": "pq", "script": [
                {"outcome": "fail", "envelope": usage}, {"outcome": "succeed"}]}],
          "policy": {"version": 1, "candidates": [
            {"id": "q", "transient": retry(1, 5, "stop"), "hard": retry(1, 5, "stop")}]}}),
    ];
    profiles
        .iter()
        .map(|p| {
            let (status, v) = request(addr, "POST", "/api/v1/profiles", Some(p)).unwrap();
            assert_eq!(status, 201, "{v}");
            v["id"].as_str().unwrap().to_owned()
        })
        .collect()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn sigkill_at_random_moments_never_repeats_a_dispatch_nor_loses_a_schedule() {
    // `RECOURSE_CRASH_SEED=<n>` replays a run's choices (which requests, how many before each
    // kill, how far the clock moves); where a kill lands inside a request still depends on the
    // machine's timing, so a replay retraces the run rather than repeating it bit for bit.
    let seed_value = std::env::var("RECOURSE_CRASH_SEED")
        .ok()
        .map(|s| s.trim().parse::<u64>().expect("RECOURSE_CRASH_SEED is a number"))
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
        | 1;
    eprintln!("crash test seed: {seed_value} (replay with RECOURSE_CRASH_SEED={seed_value})");
    let mut rng = Rng(seed_value);
    let dir = tempfile::tempdir().unwrap();
    // A SQLite file, or a PostgreSQL database of its own when RECOURSE_TEST_POSTGRES is set.
    let db = common::backend::database(dir.path(), "crash.db");
    // Seconds after t0 the test clock has been set to (monotonic across restarts).
    let offset = Arc::new(AtomicI64::new(0));
    let now = |o: &AtomicI64| t0() + TimeDelta::seconds(o.load(Ordering::SeqCst));

    let (mut child, addr) = spawn(&db, t0());
    let profiles = seed(&addr);
    let mut invocation = 0u64;
    for kill in 0..KILLS {
        if kill > 0 {
            let (c, a) = spawn(&db, now(&offset));
            child = c;
            let addr = a;
            let (tx, rx) = mpsc::channel::<()>();
            let profiles = profiles.clone();
            let offset2 = offset.clone();
            let mut local = Rng(rng.next() | 1);
            let base = invocation;
            let client = std::thread::spawn(move || {
                let mut n = base;
                loop {
                    let ok = if local.next().is_multiple_of(3) {
                        let by = i64::try_from(local.next() % 12 + 1).unwrap();
                        let to = t0() + TimeDelta::seconds(offset2.fetch_add(by, Ordering::SeqCst) + by);
                        if tx.send(()).is_err() {
                            return n;
                        }
                        request(&addr, "POST", "/api/v1/test/clock", Some(&json!({"now": to}))).is_some()
                    } else {
                        n += 1;
                        let p = &profiles[usize::try_from(local.next() % 2).unwrap()];
                        let body = json!({"profile_id": p, "caller": {"kind": "workflow", "reference": "crash",
                            "invocation_id": format!("inv-{n}")}});
                        if tx.send(()).is_err() {
                            return n;
                        }
                        request(&addr, "POST", "/api/v1/routes", Some(&body)).is_some()
                    };
                    if !ok {
                        return n;
                    }
                }
            });
            // Kill right after the k-th request went out: mid-request, at a random point.
            let k = rng.next() % 6 + 1;
            for _ in 0..k {
                if rx.recv().is_err() {
                    break;
                }
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            drop(rx);
            invocation = client.join().unwrap();
        } else {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    // A last run: let every schedule come due, then stop cleanly and inspect the database.
    let (mut child, addr) = spawn(&db, now(&offset));
    for _ in 0..4 {
        offset.fetch_add(3600, Ordering::SeqCst);
        let (status, v) = request(
            &addr,
            "POST",
            "/api/v1/test/clock",
            Some(&json!({"now": now(&offset)})),
        )
        .unwrap();
        assert_eq!(status, 200, "{v}");
    }
    common::terminate(&mut child, std::time::Duration::from_secs(60));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pool = server::db::open(&db).await.unwrap();
        let routes: i64 = server::store::sql::query("SELECT COUNT(*) FROM routes").scalar(&pool).await.unwrap();
        assert!(routes >= 20, "only {routes} routes were started; the test did not exercise much");
        let twice: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM (SELECT route_id, attempt FROM simulated_launches GROUP BY route_id, attempt HAVING COUNT(*) > 1) AS twice",
        )
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(twice, 0, "a dispatch ran twice (seed {seed_value})");
        let ambiguous_elsewhere: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM dispatches d JOIN routes r ON r.id = d.route_id \
             WHERE d.outcome = 'ambiguous' AND r.state <> 'action_required'",
        )
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(ambiguous_elsewhere, 0, "an ambiguous dispatch is not in action_required (seed {seed_value})");
        let ambiguous_reason: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM dispatches d JOIN routes r ON r.id = d.route_id \
             WHERE d.outcome = 'ambiguous' AND r.state_json NOT LIKE '%ambiguous_dispatch%'",
        )
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(ambiguous_reason, 0, "(seed {seed_value})");
        let started_without_record: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM simulated_launches l LEFT JOIN dispatches d \
             ON d.route_id = l.route_id AND d.attempt = l.attempt WHERE d.started_at IS NULL",
        )
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(started_without_record, 0, "a launch without a started record (seed {seed_value})");
        let now_ms = now(&offset).timestamp_millis();
        let lost_waits: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM routes WHERE state IN ('waiting_for_reset', 'retry_wait') AND deadline_ms <= ?",
        )
        .bind(now_ms)
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(lost_waits, 0, "a wait was never fired (seed {seed_value})");
        let lost_pending: i64 = server::store::sql::query(
            "SELECT COUNT(*) FROM dispatches d WHERE d.status = 'scheduled' \
             AND NOT EXISTS (SELECT 1 FROM timers t WHERE t.route_id = d.route_id)",
        )
        .scalar(&pool)
        .await
        .unwrap();
        assert_eq!(lost_pending, 0, "a scheduled dispatch was lost (seed {seed_value})");
        let ambiguous: i64 = server::store::sql::query("SELECT COUNT(*) FROM dispatches WHERE outcome = 'ambiguous'")
            .scalar(&pool)
            .await
            .unwrap();
        eprintln!("crash test: {routes} routes, {ambiguous} ambiguous dispatches after {KILLS} kills");
    });
}
