//! What a test needs that a run may not have, in one place, so that a test that cannot run here
//! is reported as skipped and counted instead of passing as if it had checked something.
//!
//! A test that needs one backend (or, later, the published agents from npm) starts with
//! [`requires!`]`(postgres)` (`sqlite`, `agents`, `sdks`, `smtp`). When the run has what it needs, the test
//! goes on. Otherwise it returns at once, and says so where it cannot be missed:
//!
//! - a line on the process's real standard error (`skipped: NAME: WHY`), written past libtest's
//!   output capture, so `cargo test` shows it even for a test reported `ok`;
//! - a line in the ledger file that `RECOURSE_TEST_LEDGER` names, if it is set: `ran` or
//!   `skipped`, the need, and the test's name, tab-separated. `./dev test` gives each of its
//!   two passes (SQLite, then PostgreSQL) a ledger of its own, prints how many backend-specific
//!   tests ran and were skipped in each, and checks that every test skipped for want of
//!   PostgreSQL in the first pass ran in the second.
//!
//! A skip becomes a failure, inside the test itself, when the run says the need must be met:
//! `RECOURSE_REQUIRE_POSTGRES=1` for PostgreSQL, `RECOURSE_REQUIRE_AGENTS=1` for the published
//! agents, `RECOURSE_REQUIRE_SDKS=1` for the SDKs, `RECOURSE_REQUIRE_SMTP=1` for the SMTP sink. A SQLite-only test is never a failure on PostgreSQL: its subject is SQLite's own file
//! (its locking, its fsync, its raw bytes), so it has nothing to check there, and it ran in the
//! SQLite pass.
//!
//! The test's name is its thread's: libtest runs every test on a thread named after it (also
//! with `--test-threads=1`), and `#[tokio::test]` polls the test's body on that thread.

use std::io::Write;

/// Something a test needs that a run may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A PostgreSQL server to run on (`RECOURSE_TEST_POSTGRES`): tests of what only the
    /// PostgreSQL backend has (several replicas, the event log).
    Postgres,
    /// Running on SQLite (no `RECOURSE_TEST_POSTGRES`): tests of SQLite's own file.
    Sqlite,
    /// The published ACP agents installed from npm (`RECOURSE_AGENTS_DIR` names where).
    Agents,
    /// The official OpenAI and Anthropic Python SDKs (`RECOURSE_SDK_PYTHON` names their
    /// interpreter).
    Sdks,
    /// The `aiosmtpd` SMTP sink from PyPI (`RECOURSE_AIOSMTPD` names its interpreter).
    Smtp,
}

impl Need {
    /// Its name in the ledger and in `requires!`.
    pub fn name(self) -> &'static str {
        match self {
            Need::Postgres => "postgres",
            Need::Sqlite => "sqlite",
            Need::Agents => "agents",
            Need::Sdks => "sdks",
            Need::Smtp => "smtp",
        }
    }

    /// Whether this run has it.
    pub fn met(self) -> bool {
        match self {
            Need::Postgres => super::backend::on_postgres(),
            Need::Sqlite => !super::backend::on_postgres(),
            Need::Agents => std::env::var_os("RECOURSE_AGENTS_DIR").is_some_and(|d| !d.is_empty()),
            Need::Sdks => std::env::var_os("RECOURSE_SDK_PYTHON").is_some_and(|d| !d.is_empty()),
            Need::Smtp => std::env::var_os("RECOURSE_AIOSMTPD").is_some_and(|d| !d.is_empty()),
        }
    }

    /// Why a test that needs it is skipped in this run.
    fn why_not(self) -> &'static str {
        match self {
            Need::Postgres => {
                "needs PostgreSQL and RECOURSE_TEST_POSTGRES is not set (`./dev test` runs it in its PostgreSQL pass)"
            }
            Need::Sqlite => "about SQLite's own file, and this run is on PostgreSQL (it runs in the SQLite pass)",
            Need::Agents => "needs the published agents and RECOURSE_AGENTS_DIR is not set",
            Need::Sdks => "needs the OpenAI and Anthropic SDKs and RECOURSE_SDK_PYTHON is not set",
            Need::Smtp => "needs the aiosmtpd SMTP sink and RECOURSE_AIOSMTPD is not set",
        }
    }

    /// The variable that turns a skip into a failure, if any.
    fn required_by(self) -> Option<&'static str> {
        match self {
            Need::Postgres => Some("RECOURSE_REQUIRE_POSTGRES"),
            Need::Sqlite => None,
            Need::Agents => Some("RECOURSE_REQUIRE_AGENTS"),
            Need::Sdks => Some("RECOURSE_REQUIRE_SDKS"),
            Need::Smtp => Some("RECOURSE_REQUIRE_SMTP"),
        }
    }
}

/// Whether the calling test may go on: records it as run, or as skipped (and says so), or
/// panics when the skip is not allowed. Called by [`requires!`] at the start of a test.
pub fn check(need: Need) -> bool {
    let current = std::thread::current();
    let test = current.name().unwrap_or("(a test on an unnamed thread)");
    if need.met() {
        record("ran", need, test);
        return true;
    }
    if let Some(var) = need.required_by() {
        if std::env::var(var).is_ok_and(|v| v == "1") {
            panic!("{test} {} and {var}=1: a skip is a failure", need.why_not());
        }
    }
    record("skipped", need, test);
    // Past libtest's capture (which only takes `print!` and `eprint!`), so it is always seen.
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {}", need.why_not());
    false
}

/// Appends one line to the ledger, if this run keeps one.
fn record(outcome: &str, need: Need, test: &str) {
    let Some(path) = std::env::var_os("RECOURSE_TEST_LEDGER").filter(|p| !p.is_empty()) else {
        return;
    };
    // One `write` of a short line to a file opened for appending: lines of parallel tests (and
    // of several test processes) never interleave.
    let line = format!("{outcome}\t{}\t{test}\n", need.name());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .unwrap_or_else(|e| panic!("cannot write the test ledger {}: {e}", path.to_string_lossy()));
}

/// Starts a test that needs `postgres`, `sqlite` or `agents` (see the module docs): returns from
/// the test, reported as skipped, when the run does not have it.
#[macro_export]
macro_rules! requires {
    (postgres) => {
        $crate::requires!(@ Postgres)
    };
    (sqlite) => {
        $crate::requires!(@ Sqlite)
    };
    (agents) => {
        $crate::requires!(@ Agents)
    };
    (sdks) => {
        $crate::requires!(@ Sdks)
    };
    (smtp) => {
        $crate::requires!(@ Smtp)
    };
    (@ $need:ident) => {
        if !$crate::common::requires::check($crate::common::requires::Need::$need) {
            return;
        }
    };
}
