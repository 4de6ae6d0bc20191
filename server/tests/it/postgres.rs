//! What only the PostgreSQL backend has. Each test `requires!(postgres)`: it runs in `./dev
//! test`'s PostgreSQL pass (`RECOURSE_TEST_POSTGRES`), and without one it is reported as skipped
//! (a failure with `RECOURSE_REQUIRE_POSTGRES=1`), since SQLite has nothing here to check.

use crate::common;

use common::backend;

#[test]
fn a_password_in_the_database_url_never_reaches_the_log_or_an_error() {
    requires!(postgres);
    let dir = tempfile::tempdir().unwrap();
    let url = backend::database(dir.path(), "secret.db");
    // The test cluster trusts loopback, so any password is accepted and must still be hidden.
    let with_password = url.replacen("postgres@", "postgres:Sup3rS3cretPassw0rd@", 1);
    let (mut child, addr, log) = common::spawn_serve(&with_password, &[], true);
    assert_eq!(
        common::http(&addr, "GET", "/readyz", None).map(|r| r.0),
        Some(200)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let lines: Vec<String> = log.unwrap().try_iter().collect();
    assert!(
        lines.iter().all(|l| !l.contains("Sup3rS3cretPassw0rd")),
        "{lines:?}"
    );

    // The same URL on a port nobody listens on.
    let port = with_password
        .rsplit_once(':')
        .unwrap()
        .1
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let bad = with_password.replacen(&format!(":{port}/"), ":1/", 1);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_recourse"))
        .args(["migrate", "--database", &bad])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("[redacted]") && !err.contains("Sup3rS3cretPassw0rd"),
        "{err}"
    );
}

#[tokio::test]
async fn the_engine_takes_a_new_connection_when_the_database_drops_its_own() {
    requires!(postgres);
    let h = common::Harness::new().await;
    let p = h
        .profile(serde_json::json!({"name": "p", "targets": [{"id": "main", "dispatcher": "external"}],
            "policy": {"version": 1, "candidates": [common::candidate("main", common::disabled(), common::disabled())]}}))
        .await;
    h.start(&p, "inv-1").await;
    // The database ends every other session of this database (a restart or failover does).
    let killed: i64 = server::store::sql::query(
        "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()) AS killed",
    )
    .scalar(&h.pool)
    .await
    .unwrap();
    assert!(killed >= 1, "the writer's connection was among them");
    // The first start may find the writer's connection dead; it is given up, and work goes on.
    let mut started = 0;
    for i in 0..3 {
        let (status, _) = h
            .post(
                "/api/v1/routes",
                serde_json::json!({"profile_id": p, "caller": {"kind": "kanban_task", "reference": "t",
                    "invocation_id": format!("inv-after-{i}")}}),
            )
            .await;
        if status == axum::http::StatusCode::CREATED {
            started += 1;
        }
    }
    assert!(
        started >= 2,
        "only {started} of 3 starts after the connections were dropped"
    );
}
