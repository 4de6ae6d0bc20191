//! The policy crate's integration tests, as one test binary (one link instead of one per file;
//! see `server/tests/it/main.rs`). A test's full name is `MODULE::TEST`
//! (`cargo test -p policy --test it route_table::`).
//!
//! Adding a test file is one line: put it in this folder (using the shared helpers with
//! `use crate::common;`) and add `mod NAME;` below.

#[path = "../common/mod.rs"]
mod common;

mod held;
mod properties;
mod route_table;
mod scenarios;
