//! `server`: the `recourse` binary's library. It owns every side effect of the product: the
//! SQLite store, the timers, the HTTP surface and the server half of the UI.
//!
//! Map:
//! - [`cli`]: the command line (subcommands and their flags, with env equivalents).
//! - [`telemetry`]: structured logging with `tracing`.
//! - [`db`]: opening the SQLite pool with the pragmas the invariants need, and migrations.
//! - [`web`]: the axum router (UI, `/healthz`) and [`web::run`], which tests call directly.
//! - [`serve`]: `recourse serve` and `recourse migrate` wired together.

pub mod cli;
pub mod db;
pub mod serve;
pub mod telemetry;
pub mod web;
