//! `server`: the `recourse` binary's library. It owns every side effect of the product: the
//! SQLite store, the timers, the HTTP surface and the server half of the UI.
//!
//! Map:
//! - [`cli`]: the command line (subcommands and their flags, with env equivalents).
//! - [`telemetry`]: structured logging with `tracing` (JSON lines carry the [`replica`] id).
//! - [`replica`]: this process's name among replicas (`serve --replica-id`).
//! - [`metrics`]: the Prometheus metrics of one server (a recorder of its own, no global one).
//! - [`db`]: opening the SQLite pool with the pragmas the invariants need, and migrations.
//! - [`clock`]: the injected clock (system, or manual for tests and `--test-clock`).
//! - [`store`]: every SQL statement, behind `Store` (reads, profile writes) and the writer's
//!   transaction `Tx` (routes, history, dispatches, timers, circuits), one module per table.
//! - [`engine`]: the one transition owner (the writer task and its group commit), what runs
//!   after each commit, the dispatch gate (resource circuits), the dispatchers behind a
//!   `Dispatcher` port, and restart reconciliation.
//! - [`scheduler`]: the durable timer loop.
//! - [`notify`]: notifications: the outbox written with each transition, the delivery worker,
//!   webhooks (Standard Webhooks signatures), e-mail (SMTP), the address checks, the in-app list.
//! - [`profiles`]: the profile service (input arrives parsed, as `policy::input` types).
//! - [`failure`]: every request failure classified once, rendered as HTTP and as the UI port's
//!   error; [`guard`]: the cross-site request forgery guard on every write.
//! - [`auth`]: accounts, sessions, API tokens, permissions (one rules table applied by one
//!   route layer), login rate limits, the audit log, and the `user`/`token` subcommands.
//! - [`backend`]: `app::backend::Backend` over the engine (pages and server functions).
//! - [`api`]: the REST API under `/api/v1`, the SSE stream; [`openapi`]: its document.
//! - [`gateway`]: Recourse as the base URL SDKs and agents point at (`/v1/chat/completions`,
//!   `/v1/messages`, `/v1/models`): a call is a route, failover before the first byte.
//! - [`demo`]: the demo workspace of `recourse serve --demo`.
//! - [`web`]: the axum router (UI, API, operations) and [`web::run`], which tests call directly;
//!   [`ops`]: `/healthz`, `/readyz` and `/metrics`.
//! - [`assets`]: the built UI embedded in the binary, served with content negotiation and
//!   cache headers; [`headers`]: the security headers (CSP with the page's nonce);
//!   [`revalidate`]: ETag and `no-cache` on pages.
//! - [`serve`]: `recourse serve`, `migrate`, `classify` and `catalogue check` wired together.

// Leptos views from `app` nest deep attribute tuples; the default limit is too small for them.
#![recursion_limit = "512"]

pub mod api;
pub mod assets;
pub mod auth;
pub mod backend;
pub mod cli;
pub mod clock;
pub mod config;
pub mod contract;
pub mod db;
pub mod demo;
pub mod editor;
pub mod engine;
pub mod failure;
pub mod gateway;
pub mod guard;
pub mod headers;
pub mod hex;
pub mod metrics;
pub mod notify;
pub mod openapi;
pub mod ops;
pub mod profiles;
pub mod replica;
pub mod revalidate;
pub mod scheduler;
pub mod serve;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod trial;
pub mod web;
pub mod work;
