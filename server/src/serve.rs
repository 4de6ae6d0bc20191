//! `recourse serve`, `migrate`, `classify`, `catalogue check` and `agents check`.

use crate::{
    assets::{self, Site},
    cli::{ClassifyArgs, DatabaseArgs, ServeArgs},
    clock::{Clock, ManualClock, SystemClock},
    config::{RunnerConfig, Runners},
    db,
    engine::{Engine, Task},
    metrics::Metrics,
    replica::ReplicaId,
    state::{AppState, Shutdown},
    store::Store,
    web,
};
use anyhow::Context;
use leptos::config::{get_configuration, Env, LeptosOptions};
use std::{
    io::{BufReader, Write as _},
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};
use tokio::net::TcpListener;

/// UI options for the server: the address from the command line, production mode (no dev
/// auto-reload), and the output name compiled in by cargo-leptos or `.cargo/config.toml`.
/// `serve` replaces the output name and the package folder with those of the embedded UI
/// (its build's own folder, named by a hash of the build); file hashing is the server's own (see [`crate::assets`]), never Leptos's `hash.txt` next to the
/// binary, which an installed binary would not have.
pub fn leptos_options(args: &ServeArgs) -> anyhow::Result<LeptosOptions> {
    let mut options = get_configuration(None)
        .context("reading Leptos settings")?
        .leptos_options;
    options.site_addr = args.addr;
    options.env = Env::PROD;
    options.hash_files = false;
    Ok(options)
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let site = Site::embedded().context("the web UI embedded in this binary cannot be served")?;
    let mut leptos = leptos_options(&args)?;
    match site.ui() {
        Some(ui) => {
            // Release builds carry it, and debug builds with `embed-ui`; other debug builds
            // read the clone's target/site.
            tracing::info!(
                folder = ui.pkg_dir(),
                name = ui.output_name(),
                split = ui.split().is_some(),
                embedded = cfg!(any(not(debug_assertions), feature = "embed-ui")),
                "serving the web UI"
            );
            leptos.output_name = ui.output_name().into();
            leptos.site_pkg_dir = ui.pkg_dir().into();
        }
        None => tracing::warn!(
            "this binary was built without its web UI: pages answer 503 with how to build it; the \
             REST API and /healthz work. Build the UI with `cargo leptos build --release --precompress --split` \
             (or `./dev run`), then build the server again"
        ),
    }
    // SQLite: one serving process per file (PostgreSQL takes several replicas).
    let _serving = db::hold_serving_lock(&args.db.database)?;
    let pool = db::open(&args.db.database).await?;
    let test_clock = args.test_clock.map(ManualClock::new);
    // This process's own clock (a manual one under `--test-clock`). On PostgreSQL, unless the
    // test clock is in charge, the server runs on the database's time: the own clock moved by
    // the measured offset, kept up to date (`engine::replicas::sync_clock`).
    let own: Arc<dyn Clock> = match (&test_clock, args.test_clock_skew_seconds) {
        (Some(c), _) => Arc::new(c.clone()),
        (None, Some(skew)) => Arc::new(crate::clock::SkewedClock {
            skew: chrono::TimeDelta::seconds(skew.clamp(-86_400 * 365, 86_400 * 365)),
        }),
        (None, None) => Arc::new(SystemClock),
    };
    let database_time = match (&pool, &test_clock) {
        (crate::store::Pool::Postgres(_), None) => {
            Some(Arc::new(crate::clock::OffsetClock::new(own.clone())))
        }
        _ => None,
    };
    let clock: Arc<dyn Clock> = match &database_time {
        Some(c) => c.clone(),
        None => own,
    };
    let runners = match &args.config {
        Some(path) => {
            let config = RunnerConfig::load(path)?;
            tracing::info!(
                config = %path.display(),
                agents = config.agents.len(),
                endpoints = config.endpoints.len(),
                "configuration loaded"
            );
            Runners::new(config)
        }
        None => Runners::none(),
    };
    if let Some(path) = args.config.clone() {
        reload_on_sighup(runners.clone(), path)?;
    }
    let store = Store::new(pool);
    if let Some(clock) = &database_time {
        crate::engine::replicas::sync_clock_once(&store, clock)
            .await
            .context("cannot read the database's time")?;
    }
    // `main` resolved it before the first log line; a caller of its own gets the default.
    let replica = args.replica_id.clone().unwrap_or_else(ReplicaId::of_this_process);
    let metrics = Metrics::new(&replica);
    let engine = Engine::with_metrics(store.clone(), clock, runners, metrics);
    // PostgreSQL: this process is one of the replicas of its database; the routes it leaves in
    // flight are its own, and restart reconciliation takes up only those of replicas that are
    // gone.
    let timing = crate::engine::replicas::Timing::from_env();
    if let crate::store::Pool::Postgres(_) = store.pool() {
        let member = engine
            .join_replicas(&replica, timing)
            .await
            .context("cannot register this replica")?;
        tracing::info!(instance = member.instance, "joined the replicas of this database");
    }
    let report = engine
        .reconcile()
        .await
        .context("restart reconciliation failed")?;
    tracing::info!(
        rearmed = report.rearmed,
        redispatched = report.redispatched,
        ambiguous = report.ambiguous,
        "routes reconciled"
    );
    // The engine's own tasks; its stop ends each in its turn (`Engine::shutdown`).
    engine.spawn_task(Task::Work, |stop| crate::scheduler::run(engine.clone(), stop));
    engine.spawn_task(Task::Work, |stop| {
        crate::notify::worker::run(engine.clone(), stop)
    });
    engine.spawn_task(Task::Membership, |stop| {
        crate::engine::replicas::run(engine.clone(), timing, database_time.clone(), stop)
    });
    if args.demo {
        let started = crate::demo::seed(&engine)
            .await
            .context("seeding the demo workspace")?;
        tracing::info!(
            routes = started,
            "demo workspace seeded: open /routes to watch them"
        );
    }
    let signal = shutdown_signal();
    let listener = TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, database = %db::display_database(&args.db.database), replica_id = %replica, "recourse is serving on http://{local}");
    let state = AppState::new(engine.clone(), leptos, test_clock).with_auth(crate::auth::AuthSettings {
        demo: args.demo,
        trusted_proxies: args.trusted_proxies.clone(),
        allowed_hosts: (local.ip().is_loopback() || !args.allowed_hosts.is_empty())
            .then(|| args.allowed_hosts.clone()),
        ..Default::default()
    });
    if args.demo {
        state
            .auth
            .ensure_demo_account()
            .await
            .context("creating the demo account")?;
        tracing::warn!(
            "demo mode: every visitor of the UI is signed in as the demo account (profile_manager)"
        );
    } else if !state.auth.accounts_exist().await? {
        tracing::warn!(
            "no account exists yet: create the first administrator with `recourse user add NAME --role admin` \
             (add --database if the server uses another file), then sign in at /login"
        );
    }
    crate::auth::password::warm_up();
    let housekeeping = tokio::spawn(auth_housekeeping(state.auth.clone(), state.shutdown.clone()));
    let upkeep = tokio::spawn(metrics_upkeep(engine.clone(), state.shutdown.clone()));
    let stopping = state.shutdown.clone();
    let mut app = web::router(state);
    if site.ui().is_none() {
        app = app.layer(axum::middleware::from_fn(assets::ui_missing));
    }
    // On the signal, tell long-lived responses (the event stream) to end, so the graceful stop
    // does not wait on an open browser tab.
    let shutdown = async move {
        signal.await;
        stopping.trigger();
    };
    web::run(listener, app, shutdown).await.context("server failed")?;
    tracing::debug!("stopping: no request is served any longer");
    housekeeping.abort();
    upkeep.abort();
    // The engine stops: no new work, its tasks end, the agents in flight are stopped (their
    // dispatches are ambiguous at the next boot, as after a crash), this replica retires (its
    // routes are the others' to take up at once), and the writer ends last.
    engine.shutdown().await;
    // Every connection is back in the pool by now. Should one not be (a task that outlived the
    // stop holds it), the stop does not wait for it forever: what was committed is durable.
    if tokio::time::timeout(CLOSE_TIMEOUT, store.close()).await.is_ok() {
        tracing::info!("recourse stopped cleanly");
    } else {
        tracing::warn!(
            "a database connection was still in use {} s into the stop; recourse stopped without closing it",
            CLOSE_TIMEOUT.as_secs()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How long the stop waits for the database's connections to be closed.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every ten minutes: deletes abandoned session rows and forgets login-limit keys that have
/// refilled, until the server stops.
async fn auth_housekeeping(auth: crate::auth::Auth, stopping: Shutdown) {
    use tower_sessions::ExpiredDeletion;
    let store = auth.store().session_store();
    let mut every = tokio::time::interval(std::time::Duration::from_secs(600));
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopping.wait() => return,
        }
        if let Err(e) = store.delete_expired().await {
            tracing::warn!(error = %e, "expired sessions could not be deleted");
        }
        auth.limiter().tidy();
    }
}

/// Every five seconds: folds the metrics' recorded histogram samples into their buckets, so
/// their memory stays flat however rarely Prometheus scrapes.
async fn metrics_upkeep(engine: Arc<Engine>, stopping: Shutdown) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = every.tick() => engine.metrics().upkeep(),
            () = stopping.wait() => return,
        }
    }
}

pub async fn migrate(args: DatabaseArgs) -> anyhow::Result<ExitCode> {
    let pool = db::open(&args.database).await?;
    let applied = db::migrator(pool.dialect()).iter().count();
    pool.close().await;
    tracing::info!(
        database = %db::display_database(&args.database),
        migrations = applied,
        "database is up to date"
    );
    Ok(ExitCode::SUCCESS)
}

/// `recourse classify [--now RFC3339] [FILE|-]`: exit 0 whenever the input could be read.
pub fn classify(args: &ClassifyArgs) -> anyhow::Result<ExitCode> {
    let now = args.now.unwrap_or_else(chrono::Utc::now);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.input.as_os_str() == "-" {
        let stdin = std::io::stdin();
        classifier::cli::classify_stream(stdin.lock(), &mut out, now).context("reading standard input")?;
    } else {
        let file = std::fs::File::open(&args.input)
            .with_context(|| format!("cannot read `{}`", args.input.display()))?;
        classifier::cli::classify_stream(BufReader::new(file), &mut out, now)
            .with_context(|| format!("cannot read `{}`", args.input.display()))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `recourse catalogue check`: prints the report; exit 1 when it is not clean.
pub fn catalogue_check(fixtures: &Path) -> anyhow::Result<ExitCode> {
    let dir = fixtures.join("classifier");
    let mut files = Vec::new();
    collect_json(&dir, &mut files)
        .with_context(|| format!("cannot read fixtures under `{}`", dir.display()))?;
    let mut pairs = Vec::with_capacity(files.len());
    for path in files {
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read `{}`", path.display()))?;
        pairs.push((path.display().to_string(), text));
    }
    let report = classifier::check::check_catalogue(&pairs);
    print!("{report}");
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_json(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    Ok(())
}

/// Reloads the configuration file on SIGHUP, for the life of the process. An invalid file is
/// refused (logged, with every problem) and the previous configuration stays. The handler is
/// installed now, before serving, so a SIGHUP never kills the process.
fn reload_on_sighup(runners: Runners, path: PathBuf) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                let (runners, path) = (runners.clone(), path.clone());
                match tokio::task::spawn_blocking(move || runners.reload(&path)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, "configuration reload refused; the previous one stays")
                    }
                    Err(e) => tracing::error!(error = %e, "configuration reload failed"),
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (runners, path);
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this is called,
/// not when the future is first polled: the server polls it only once it is serving, and a
/// SIGTERM in between (a supervisor stopping a process that has just answered `/healthz`)
/// would otherwise kill the process without a graceful stop.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            let (mut interrupt, mut terminate) = match (interrupt, terminate) {
                (Ok(i), Ok(t)) => (i, t),
                (Err(err), _) | (_, Err(err)) => {
                    tracing::error!(error = %err, "cannot listen for SIGINT or SIGTERM");
                    return std::future::pending().await;
                }
            };
            tokio::select! {
                _ = interrupt.recv() => tracing::info!("received Ctrl-C, shutting down"),
                _ = terminate.recv() => tracing::info!("received SIGTERM, shutting down"),
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("received Ctrl-C, shutting down");
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// `recourse agents check`: every agent of the configuration file started once and asked
/// `initialize`; a table on standard output, each problem on standard error, and a non-zero
/// exit when any agent has one.
pub async fn agents_check(config: &Path) -> anyhow::Result<ExitCode> {
    let config = RunnerConfig::load(config)?;
    if config.agents.is_empty() {
        println!("no [[agent]] in the configuration");
        return Ok(ExitCode::SUCCESS);
    }
    let checks = crate::engine::dispatch::acp::check::check(&config).await;
    let mut rows = vec![[
        "agent".to_owned(),
        "version".to_owned(),
        "protocol".to_owned(),
        "auth methods".to_owned(),
        "loadSession".to_owned(),
        "start".to_owned(),
    ]];
    let mut problems = Vec::new();
    for (agent, c) in config.agents.iter().zip(&checks) {
        let took = format!("{:.1} s", c.took.as_secs_f64());
        rows.push(match &c.hello {
            Ok(h) => [
                c.id.clone(),
                match (&h.name, &h.version) {
                    (Some(n), Some(v)) => format!("{n} {v}"),
                    (None, Some(v)) => v.clone(),
                    _ => "-".to_owned(),
                },
                h.protocol_version.to_string(),
                if h.auth_methods.is_empty() {
                    "-".to_owned()
                } else {
                    h.auth_methods.join(", ")
                },
                if h.load_session { "yes" } else { "no" }.to_owned(),
                took,
            ],
            Err(_) => [
                c.id.clone(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                took,
            ],
        });
        if let Some(p) = c.problem(agent) {
            problems.push(format!("{}: {p}", c.id));
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = std::io::stdout().lock();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    drop(out);
    for p in &problems {
        eprintln!("error: {p}");
    }
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
