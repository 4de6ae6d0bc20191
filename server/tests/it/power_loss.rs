//! Durable against power loss: every commit the server acts on is on stable storage first.
//!
//! - The writer task's own connection reports `synchronous = FULL` (read through that
//!   connection by the task itself), and every other connection of the pool does too.
//! - The power cut: the real `recourse serve`, with the `faultfs` shim preloaded (it journals
//!   how to undo every write under the database's folder that was never fsynced), lets
//!   external runners start dispatches (answered acknowledgements) and answers people's stop
//!   actions; then, in the middle of the next commit (right after its first write, by the shim
//!   itself), it is SIGKILLed, every unsynced write is undone (what a power cut loses), and a
//!   new server on the same files must still hold every one of them: no route gone, no started
//!   dispatch offered again (not even after every lease ran out), every acknowledged lease
//!   still held, every stop still in force. With the old `synchronous = NORMAL` this fails (the
//!   commits since the last checkpoint are lost: an acknowledged attempt is offered to a
//!   second runner, a stopped route is gone); see the module docs of `server/src/db.rs`.
//!
//! Time never passes for real: the server runs on a test clock.

use crate::common;

use common::{power, t0};
use serde_json::{json, Value};

/// Routes started before the cut (one in four is stopped by a person, the others are claimed
/// and acknowledged by a runner).
const ROUTES: usize = 24;

fn ext_profile() -> Value {
    json!({"name": "external", "targets": [
        {"id": "main", "dispatcher": "external", "provider_id": "anthropic", "model_id": "opus"}],
      "policy": {"version": 1, "candidates": [common::candidate("main",
        common::class_policy(2, 5, 0, "stop"), common::disabled())]}})
}

#[tokio::test]
async fn the_writer_commits_on_a_connection_that_syncs_every_commit() {
    requires!(sqlite);
    let h = common::Harness::new().await;
    assert_eq!(
        h.engine.write_stats().synchronous,
        None,
        "no writer connection yet"
    );
    let p = h.profile(ext_profile()).await;
    h.start(&p, "inv-1").await;
    assert_eq!(
        h.engine.write_stats().synchronous,
        Some(2),
        "the writer's connection must be synchronous = FULL (2)"
    );
    // Every other connection of the pool (profile writes, bookkeeping) as well: take all the
    // ones the writer does not hold at once, so each is a different connection.
    let mut conns = Vec::new();
    for _ in 0..7 {
        let server::store::Pool::Sqlite(pool) = &h.pool else {
            unreachable!("the harness opens SQLite unless RECOURSE_TEST_POSTGRES is set, and this test requires SQLite")
        };
        conns.push(pool.acquire().await.unwrap());
    }
    for conn in &mut conns {
        let level: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut **conn)
            .await
            .unwrap();
        assert_eq!(level, 2);
    }
}

#[tokio::test]
async fn an_engine_on_a_pool_that_does_not_sync_shows_it() {
    requires!(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("normal.db");
    let path = path.to_str().unwrap();
    let opts = server::db::connect_options(path)
        .unwrap()
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
    let pool = server::db::open_with(path, opts).await.unwrap();
    let clock = server::clock::ManualClock::new(t0());
    let engine = server::engine::Engine::new(server::store::Store::new(pool), std::sync::Arc::new(clock));
    let input = policy::api::ProfileInput {
        name: "x".into(),
        kind: policy::api::ProfileKind::Dynamic,
        description: None,
        targets: vec![policy::api::CandidateTarget::external("main")],
        policy: ext_profile()["policy"].clone(),
        expected_revision: None,
        notifications: Vec::new(),
    };
    let profile = server::profiles::create(&engine, policy::input::ValidatedProfile::parse(&input).unwrap())
        .await
        .unwrap();
    let request = policy::api::StartRouteRequest {
        profile_id: profile.id,
        caller: policy::api::Caller {
            kind: policy::api::CallerKind::Workflow,
            reference: "t".into(),
            invocation_id: "inv-1".into(),
        },
        title: None,
        work: None,
        pin: None,
    };
    engine
        .start_route(policy::input::ValidatedStartRoute::parse(&request).unwrap())
        .await
        .unwrap();
    assert_eq!(engine.write_stats().synchronous, Some(1));
}

fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    common::http(addr, method, path, body).unwrap_or_else(|| panic!("{method} {path}: the server is gone"))
}

/// What the test saw the server allow before the cut.
enum Allowed {
    /// A runner's acknowledgement was answered: the dispatch started.
    Started {
        route: String,
        attempt: u64,
        lease_id: String,
    },
    /// A person's stop was answered.
    Stopped { route: String },
}

impl Allowed {
    fn route(&self) -> &str {
        match self {
            Allowed::Started { route, .. } | Allowed::Stopped { route } => route,
        }
    }
}

#[test]
fn a_power_cut_never_brings_back_a_started_dispatch_or_an_answered_stop() {
    requires!(sqlite);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let db = data.join("recourse.db");
    let journal = dir.path().join("undo.journal");
    let kill = dir.path().join("kill");
    let clock = t0().to_rfc3339();
    let env = power::env(&data, &journal, &kill);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (mut child, addr, _) = common::spawn_serve_env(&db, &["--test-clock", &clock], false, &env);

    let (status, p) = request(&addr, "POST", "/api/v1/profiles", Some(&ext_profile()));
    assert_eq!(status, 201, "{p}");
    let mut allowed = Vec::new();
    for i in 0..ROUTES {
        let body = json!({"profile_id": p["id"], "caller": {"kind": "workflow", "reference": "power",
            "invocation_id": format!("inv-{i}")}});
        let (status, r) = request(&addr, "POST", "/api/v1/routes", Some(&body));
        assert_eq!(status, 201, "{r}");
        let route = r["id"].as_str().unwrap().to_owned();
        if i % 4 == 3 {
            let (_, detail) = request(&addr, "GET", &format!("/api/v1/routes/{route}"), None);
            let g = &detail["route"]["snapshot"]["generation"];
            let (status, v) = request(
                &addr,
                "POST",
                &format!("/api/v1/routes/{route}/actions"),
                Some(&json!({"action": "stop", "expected_generation": g})),
            );
            assert_eq!(status, 200, "{v}");
            allowed.push(Allowed::Stopped { route });
            continue;
        }
        let (status, grant) = request(
            &addr,
            "POST",
            "/api/v1/dispatches/claim",
            Some(&json!({"runner": "ci-runner", "lease_seconds": 600})),
        );
        assert_eq!(
            (status, grant["route_id"].as_str()),
            (200, Some(route.as_str())),
            "{grant}"
        );
        let attempt = grant["attempt"].as_u64().unwrap();
        let lease_id = grant["lease_id"].as_str().unwrap().to_owned();
        let (status, v) = request(
            &addr,
            "POST",
            &format!("/api/v1/dispatches/{route}/{attempt}/ack"),
            Some(&json!({"lease_id": lease_id, "lease_seconds": 600})),
        );
        assert_eq!(status, 200, "{v}");
        allowed.push(Allowed::Started {
            route,
            attempt,
            lease_id,
        });
    }

    // The cut lands inside a commit: the shim kills the server right after the first write
    // to its files once `kill` exists, here the first WAL write of a route start nobody will
    // ever see answered.
    std::fs::write(&kill, "").unwrap();
    let body = json!({"profile_id": p["id"], "caller": {"kind": "workflow", "reference": "power",
        "invocation_id": "in-flight"}});
    assert_eq!(
        common::http(&addr, "POST", "/api/v1/routes", Some(&body)),
        None,
        "answered after the cut"
    );
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "the shim's SIGKILL"
    );
    let cut = power::cut(&journal);
    eprintln!("power cut: {cut:?}");
    // SQLite rebuilds its wal-index from the WAL when the first connection opens; the shim does
    // not see its mmap writes, so it goes (its content after a real power cut is undefined).
    let _ = std::fs::remove_file(data.join("recourse.db-shm"));

    let (mut child, addr, _) = common::spawn_serve(&db, &["--test-clock", &clock], false);
    // Every way the cut could have undone what the server allowed, all of them listed.
    let mut lost = Vec::new();
    for a in &allowed {
        match a {
            Allowed::Started {
                route,
                attempt,
                lease_id,
            } => {
                let (status, detail) = request(&addr, "GET", &format!("/api/v1/routes/{route}"), None);
                if status != 200 {
                    lost.push(format!(
                        "route {route} (its attempt {attempt} was started) is gone: {status}"
                    ));
                    continue;
                }
                let s = &detail["route"]["snapshot"];
                if (s["attempt"]["number"].as_u64(), s["attempt"]["dispatch"].as_str())
                    != (Some(*attempt), Some("started"))
                {
                    lost.push(format!("route {route}: attempt {attempt} was started, now: {s}"));
                }
                let (status, v) = request(
                    &addr,
                    "POST",
                    &format!("/api/v1/dispatches/{route}/{attempt}/heartbeat"),
                    Some(&json!({"lease_id": lease_id, "lease_seconds": 600})),
                );
                if status != 200 {
                    lost.push(format!(
                        "route {route}: the runner's acknowledged lease is gone: {status} {v}"
                    ));
                }
            }
            Allowed::Stopped { route } => {
                let (status, detail) = request(&addr, "GET", &format!("/api/v1/routes/{route}"), None);
                if status != 200 {
                    lost.push(format!("route {route} (stopped by a person) is gone: {status}"));
                    continue;
                }
                let s = &detail["route"]["snapshot"];
                if (s["state"].as_str(), s["action_reason"].as_str())
                    != (Some("action_required"), Some("stopped_by_user"))
                {
                    lost.push(format!(
                        "route {route}: a person's answered stop is undone, now: {s}"
                    ));
                }
            }
        }
    }
    // Nothing that was started or stopped is offered to a runner again (each offer would be
    // the same work run a second time), not even once every lease has run out: an
    // acknowledged one then makes its attempt ambiguous, never offered again.
    let later = t0() + chrono::TimeDelta::hours(1);
    let (status, v) = request(&addr, "POST", "/api/v1/test/clock", Some(&json!({"now": later})));
    assert_eq!(status, 200, "{v}");
    for _ in 0..=ROUTES {
        let (status, v) = request(
            &addr,
            "POST",
            "/api/v1/dispatches/claim",
            Some(&json!({"runner": "second-runner", "lease_seconds": 600})),
        );
        if status == 204 {
            break;
        }
        assert_eq!(status, 200, "{v}");
        let route = v["route_id"].as_str().unwrap();
        if allowed.iter().any(|a| a.route() == route) {
            lost.push(format!(
                "route {route} attempt {} is offered to a runner again",
                v["attempt"]
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "after the power cut ({} answered requests before it):\n{}",
        allowed.len(),
        lost.join("\n")
    );
    child.kill().unwrap();
    child.wait().unwrap();

    // The cut was real: it undid the in-flight commit's write to the WAL. And the WAL was
    // synced at least once per answered request (every commit is synced before its answer).
    assert!(
        cut.undone.get("recourse.db-wal").copied().unwrap_or(0) > 0,
        "the cut undid no WAL write: {cut:?}"
    );
    let wal_syncs = cut.syncs.get("recourse.db-wal").copied().unwrap_or(0);
    assert!(
        wal_syncs >= allowed.len(),
        "{wal_syncs} WAL syncs for {} answered requests: {cut:?}",
        allowed.len()
    );
}
