//! Structured logging. `RUST_LOG` filters (default `info`); `--log-format json` gives one
//! JSON object per line.
//!
//! `recourse serve` names its replica ([`ReplicaId`]): every JSON line then starts with
//! `"replica_id"`, whichever task logs it. A span would not do: spawned tasks (the writer, the
//! dispatchers) do not inherit the span of the code that spawned them, and a line without the
//! field is a line a collector cannot attribute. Lines about a route transition carry
//! `route_id` and `generation` as fields of their own (see `engine/observe.rs`).

use crate::{cli::LogFormat, replica::ReplicaId};
use std::{fmt, io::IsTerminal};
use tracing::{Event, Subscriber};
use tracing_subscriber::{
    fmt::{
        format::{self, FormatEvent, FormatFields, Writer},
        FmtContext,
    },
    registry::LookupSpan,
    EnvFilter,
};

/// Installs the process's subscriber. `replica` is `Some` for `serve`.
pub fn init(format: LogFormat, replica: Option<&ReplicaId>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true);
    // `try_init` so a second call (tests) is harmless.
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .event_format(WithReplica::new(
                format::format().json().flatten_event(true).with_target(true),
                replica,
            ))
            .try_init(),
    };
}

/// The process's exit: the command's code, or its fatal error reported (the one place that
/// reports one, with its whole chain of causes) and a failure.
pub fn exit(result: anyhow::Result<std::process::ExitCode>) -> std::process::ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "recourse failed");
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A JSON event format with `"replica_id"` first on every line.
pub struct WithReplica<F> {
    inner: F,
    /// `{"replica_id":"…",` (empty without a replica id: the line is left as it is).
    prefix: String,
}

impl<F> WithReplica<F> {
    pub fn new(inner: F, replica: Option<&ReplicaId>) -> WithReplica<F> {
        let prefix = replica.map_or_else(String::new, |r| {
            // The id is plain ASCII (parsed once); serde_json quotes it all the same.
            format!("{{\"replica_id\":{},", serde_json::Value::from(r.as_str()))
        });
        WithReplica { inner, prefix }
    }
}

impl<S, N, F> FormatEvent<S, N> for WithReplica<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if self.prefix.is_empty() {
            return self.inner.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.inner.format_event(ctx, Writer::new(&mut line), event)?;
        // The JSON format always writes an object with at least a timestamp and a level.
        match line.strip_prefix('{') {
            Some(rest) if !rest.starts_with('}') => {
                writer.write_str(&self.prefix)?;
                writer.write_str(rest)
            }
            _ => writer.write_str(&line),
        }
    }
}
