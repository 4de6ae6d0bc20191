//! `server`: the `recourse` binary's library. It owns every side effect of the product: the
//! SQLite store, the timers, the HTTP surface and the server half of the UI.
//!
//! Map:
//! - [`cli`]: the command line (subcommands and their flags, with env equivalents).
//! - [`telemetry`]: structured logging with `tracing`.
//! - [`db`]: opening the SQLite pool with the pragmas the invariants need, and migrations.
//! - [`clock`]: the injected clock (system, or manual for tests and `--test-clock`).
//! - [`store`]: SQL for the route engine's tables (profiles, routes, history, dispatches,
//!   timers, circuits) and row conversions.
//! - [`engine`]: the one transition owner, effects, the dispatch gate (resource circuits),
//!   the simulated dispatcher and restart reconciliation.
//! - [`scheduler`]: the durable timer loop.
//! - [`profiles`]: profile validation and CRUD.
//! - [`backend`]: `app::backend::Backend` over the engine (pages and server functions).
//! - [`api`]: the REST API under `/api/v1`, the SSE stream; [`openapi`]: its document.
//! - [`demo`]: the demo workspace of `recourse serve --demo`.
//! - [`web`]: the axum router (UI, API, `/healthz`) and [`web::run`], which tests call directly.
//! - [`assets`]: the built UI embedded in the binary, served with content negotiation and
//!   cache headers; [`headers`]: the security headers (CSP with the page's nonce);
//!   [`revalidate`]: ETag and `no-cache` on pages.
//! - [`serve`]: `recourse serve`, `migrate`, `classify` and `catalogue check` wired together.

// Leptos views from `app` nest deep attribute tuples; the default limit is too small for them.
#![recursion_limit = "512"]

pub mod api;
pub mod assets;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod db;
pub mod demo;
pub mod engine;
pub mod headers;
pub mod openapi;
pub mod profiles;
pub mod revalidate;
pub mod scheduler;
pub mod serve;
pub mod store;
pub mod telemetry;
pub mod web;
