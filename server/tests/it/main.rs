//! The server's integration tests, as one test binary. Each file here is a module named after
//! its subject; a test's full name is `MODULE::TEST`, so one file or one test runs with
//! `cargo test -p server --test it acp::` or `... --test it acp::the_test_name`.
//!
//! One binary, not one per file: each test binary links the whole server (Leptos, axum, sqlx,
//! both database drivers), and with one per file `cargo test` spent most of its time linking
//! the same code two dozen times over.
//!
//! Adding a test file is one line: put it in this folder (`server/tests/it/NAME.rs`, using the
//! harness with `use crate::common;`) and add `mod NAME;` to the list below. A file here that
//! the list misses would never compile, and a `.rs` file directly in `server/tests/` would be a
//! binary of its own that the PostgreSQL pass does not run, so
//! `every_test_file_is_a_module_of_this_binary` (below) fails on either.
//!
//! Every test here runs on both backends (`./dev test` runs this binary a second time against
//! PostgreSQL) except those that start with `requires!(postgres)` or `requires!(sqlite)`
//! (`common/requires.rs`): they run on that backend only and are counted as skipped on the
//! other.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod acp;
mod acp_crash;
mod acp_resume;
mod agents_check;
mod agents_matrix;
mod auth;
mod classify;
mod concrete;
mod contract;
mod crash;
mod defects;
mod delivery;
mod editor;
mod editor_fake_agents;
mod editor_leases;
mod engine;
mod engine_stop;
mod events;
mod gateway;
mod gateway_agent;
mod gateway_sdks;
mod http;
mod http_dispatch;
mod http_key;
mod leases;
mod notify;
mod notify_serve;
mod ops;
mod permissions;
mod postgres;
mod power_loss;
mod process;
mod redaction;
mod replicas;
mod routes;
mod scenarios;
mod shutdown;
mod try_evidence;

/// Every `.rs` file in this folder is a module of the list above, and no test file sits directly
/// in `server/tests/` (see the module docs).
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let rust_files = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let main = std::fs::read_to_string(tests.join("it").join("main.rs")).unwrap();
    let missing: Vec<String> = rust_files(&tests.join("it"))
        .into_iter()
        .filter(|name| name != "main" && !main.lines().any(|l| l == format!("mod {name};")))
        .collect();
    assert!(
        missing.is_empty(),
        "server/tests/it/ has files that are not modules of main.rs (add `mod NAME;`): {missing:?}"
    );
    let loose = rust_files(&tests);
    assert!(
        loose.is_empty(),
        "move these into server/tests/it/ (`use crate::common;` instead of `mod common;`) and add \
         `mod NAME;` to server/tests/it/main.rs: {loose:?}"
    );
}
