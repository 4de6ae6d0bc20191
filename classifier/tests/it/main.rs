//! The classifier's integration tests, as one test binary (one link instead of one per file;
//! see `server/tests/it/main.rs`). A test's full name is `MODULE::TEST`
//! (`cargo test -p classifier --test it fixtures::`).
//!
//! Adding a test file is one line: put it in this folder and add `mod NAME;` below.

mod bounds;
mod fixtures;
mod properties;
mod redaction;
