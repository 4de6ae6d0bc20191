//! Which database a test runs on. SQLite files in the test's temporary directory by default;
//! PostgreSQL when `RECOURSE_TEST_POSTGRES` names a server (a URL such as
//! `postgres://postgres@127.0.0.1:55432/postgres`, as `./dev test` starts one): then each test
//! directory gets a database of its own on that server, made on first use and found again by a
//! marker file in the directory, so a simulated restart reopens the same database.

use std::{
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

/// The PostgreSQL server the tests run on, if one is named.
pub fn postgres_server() -> Option<String> {
    std::env::var("RECOURSE_TEST_POSTGRES")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// Whether these tests run on PostgreSQL.
pub fn on_postgres() -> bool {
    postgres_server().is_some()
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The database of test directory `dir` under `name`: a SQLite file `dir/name`, or on
/// PostgreSQL a database of its own (made on first use), as the `--database` value to pass.
pub fn database(dir: &Path, name: &str) -> String {
    let Some(server) = postgres_server() else {
        return dir
            .join(name)
            .to_str()
            .expect("a UTF-8 temporary path")
            .to_owned();
    };
    let marker = dir.join(format!("{name}.postgres"));
    if let Ok(url) = std::fs::read_to_string(&marker) {
        return url;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let db = format!(
        "t{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos % 1_000_000_000_000
    );
    create_database(&server, &db);
    let url = with_database(&server, &db);
    std::fs::write(&marker, &url).unwrap();
    url
}

/// `server` with its database replaced by `db`.
fn with_database(server: &str, db: &str) -> String {
    let authority = server.find("://").map_or(0, |i| i + 3);
    let end = server[authority..]
        .find(['/', '?'])
        .map_or(server.len(), |i| authority + i);
    format!("{}/{db}", &server[..end])
}

/// `CREATE DATABASE` on a connection of its own (on a thread of its own, so it can be called
/// from sync and async tests alike).
fn create_database(server: &str, db: &str) {
    let server = server.to_owned();
    let db = db.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&server)
                    .await
                    .unwrap_or_else(|e| panic!("RECOURSE_TEST_POSTGRES does not answer: {e}"));
                sqlx::query(&format!("CREATE DATABASE {db}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                let _ = conn.close().await;
            });
    })
    .join()
    .unwrap();
}
