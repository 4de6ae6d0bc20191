//! Structured logging. `RUST_LOG` filters (default `info`); `--log-format json` gives one
//! JSON object per line.

use crate::cli::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::{fmt, EnvFilter};

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true);
    // `try_init` so a second call (tests) is harmless.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
