//! `recourse serve` and `recourse migrate`.

use crate::{
    cli::{DatabaseArgs, ServeArgs},
    db,
    web::{self, AppState},
};
use anyhow::Context;
use leptos::config::{get_configuration, Env, LeptosOptions};
use std::{path::Path, process::ExitCode};
use tokio::net::TcpListener;

/// UI options for the server: the asset folder and address from the command line, production
/// mode (no dev auto-reload), and the output name compiled in by cargo-leptos or
/// `.cargo/config.toml`.
pub fn leptos_options(args: &ServeArgs) -> anyhow::Result<LeptosOptions> {
    let mut options = get_configuration(None)
        .context("reading Leptos settings")?
        .leptos_options;
    options.site_root = args.site_root.to_string_lossy().as_ref().into();
    options.site_addr = args.addr;
    options.env = Env::PROD;
    Ok(options)
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let pool = db::open(&args.db.database).await?;
    let leptos = leptos_options(&args)?;
    warn_if_assets_missing(&args.site_root, &leptos);
    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, database = %args.db.database, "recourse is serving on http://{local}");
    let app = web::router(AppState {
        pool: pool.clone(),
        leptos,
    });
    web::run(listener, app, shutdown_signal())
        .await
        .context("server failed")?;
    pool.close().await;
    tracing::info!("recourse stopped cleanly");
    Ok(ExitCode::SUCCESS)
}

pub async fn migrate(args: DatabaseArgs) -> anyhow::Result<ExitCode> {
    let pool = db::open(&args.database).await?;
    let applied = db::MIGRATOR.iter().count();
    pool.close().await;
    tracing::info!(database = %args.database, migrations = applied, "database is up to date");
    Ok(ExitCode::SUCCESS)
}

/// Without the built WASM and CSS the pages render but never become interactive; say so once
/// at start rather than leaving a person to wonder.
fn warn_if_assets_missing(site_root: &Path, options: &LeptosOptions) {
    let wasm = site_root
        .join(&*options.site_pkg_dir)
        .join(format!("{}.wasm", options.output_name));
    if !wasm.exists() {
        tracing::warn!(
            path = %wasm.display(),
            "UI assets not found: pages will render without interactivity; build them with `cargo leptos build --release` or point --site-root at them"
        );
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received Ctrl-C, shutting down"),
        () = terminate => tracing::info!("received SIGTERM, shutting down"),
    }
}
