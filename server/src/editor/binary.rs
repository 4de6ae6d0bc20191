//! Which binary serves the editor. `recourse acp` is a process the editor keeps open for hours,
//! one per editor window, so it should weigh what it does, not what the server does. The
//! `recourse-acp` binary (`src/bin/recourse-acp.rs`, built and installed with `recourse`) is the
//! same command line with only `acp` and the agent guard linked in. `recourse acp` replaces
//! itself with it (`exec`, same process, same arguments and environment) when it lies beside
//! `recourse`, and runs the same code in its own process when it does not (a `recourse` copied
//! alone), so the command works either way and differs only in memory.

use std::{ffi::OsStr, path::Path, process::ExitCode};

/// The file name of the editor's own binary, beside `recourse`.
pub const OWN_BINARY: &str = "recourse-acp";

/// Replaces this process with [`OWN_BINARY`] from this program's directory, given this
/// process's arguments. Returns only when that binary is not there or cannot be run; the
/// caller then serves the editor itself.
pub fn exec_own_binary() {
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    if me.file_name() == Some(OsStr::new(OWN_BINARY)) {
        return;
    }
    let own = me.with_file_name(OWN_BINARY);
    if let Some(e) = exec(&own) {
        tracing::debug!(binary = %own.display(), error = %e, "serving the editor from this process");
    }
}

/// `exec`s `binary` with this process's arguments; returns why not.
fn exec(binary: &Path) -> Option<std::io::Error> {
    use std::os::unix::process::CommandExt;
    if !binary.is_file() {
        return None;
    }
    Some(
        std::process::Command::new(binary)
            .args(std::env::args_os().skip(1))
            .exec(),
    )
}

/// Serves the editor on this thread (one thread: the agents it starts are children of this
/// thread, see [`super::guard`]) until the editor closes standard input.
pub fn serve(args: crate::cli::AcpArgs) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(super::run(args))
}
