//! Which binary serves the editor. `recourse acp` is a process the editor keeps open for hours,
//! one per editor window, so it should weigh what it does, not what the server does. The
//! `recourse-acp` binary (`src/bin/recourse-acp.rs`, built and installed with `recourse`) is the
//! same command line with only `acp` and the agent guard linked in. `recourse acp` replaces
//! itself with it (`execve`: the same process, arguments and environment) when it lies beside
//! `recourse`, and runs the same code in its own process otherwise, so the command works either
//! way and differs only in memory.
//!
//! `recourse acp` serves the editor itself, without the exec, when:
//! - there is no `recourse-acp` beside it, or it cannot be executed (a failed `execve` changes
//!   nothing in the process);
//! - `recourse-acp` was linked with packed relative relocations (`server/build.rs`) and this
//!   machine's C library predates them (glibc 2.36): its loader could not start it;
//! - [`EXEC_MARKER`] is set: this process is already the result of an exec, so no exec loops
//!   (a `recourse-acp` that is a link to `recourse`, or one that handed back, below).
//!
//! The exec sets [`EXEC_MARKER`] to this `recourse`'s version. A `recourse-acp` of another
//! version (one left from an earlier install) hands back: it execs the `recourse` beside it,
//! which then serves the editor itself.

use std::{
    ffi::{CString, OsStr},
    os::unix::ffi::OsStrExt,
    path::Path,
    process::ExitCode,
};

/// The file name of the editor's own binary, beside `recourse`.
pub const OWN_BINARY: &str = "recourse-acp";
/// The file name of the server's binary, beside `recourse-acp`.
const SERVER_BINARY: &str = "recourse";
/// Set by the exec to the version of the `recourse` that made it.
pub const EXEC_MARKER: &str = "RECOURSE_ACP_EXEC";
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Whether `recourse-acp` was linked with packed relative relocations (`DT_RELR`).
const PACKED_RELOCATIONS: bool = option_env!("RECOURSE_ACP_PACKED_RELOCATIONS").is_some();

/// In `recourse acp`: replaces this process with [`OWN_BINARY`] from this program's directory.
/// Returns only when it does not (see the module documentation); the caller then serves the
/// editor itself.
pub fn exec_own_binary() {
    if std::env::var_os(EXEC_MARKER).is_some() {
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    if me.file_name() == Some(OsStr::new(OWN_BINARY)) {
        return;
    }
    let own = me.with_file_name(OWN_BINARY);
    if !own.is_file() {
        return;
    }
    if PACKED_RELOCATIONS && !loader_reads_packed_relocations() {
        tracing::debug!("this C library predates packed relocations: serving the editor from this process");
        return;
    }
    if let Some(e) = exec(&own, VERSION) {
        tracing::debug!(binary = %own.display(), error = %e, "serving the editor from this process");
    }
}

/// In `recourse-acp`: when a `recourse` of another version ran it, hands back to the `recourse`
/// beside it, which then serves the editor itself. Returns when the versions agree, when it was
/// started directly, or when it cannot hand back.
pub fn hand_back_if_another_version() {
    let Some(theirs) = std::env::var_os(EXEC_MARKER) else {
        return;
    };
    if theirs == OsStr::new(VERSION) {
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let server = me.with_file_name(SERVER_BINARY);
    if server.is_file() {
        // The marker stays: that `recourse` serves the editor itself.
        // Logging is not set up yet (the command line may be one this version cannot parse).
        if let Some(e) = exec(&server, &theirs.to_string_lossy()) {
            eprintln!(
                "recourse-acp {VERSION}: cannot hand back to {} ({e}); serving the editor here",
                server.display()
            );
        }
    }
}

/// `execve`s `binary` with this process's arguments and environment, [`EXEC_MARKER`] set to
/// `marker`; returns why not. (Not `std`'s `CommandExt::exec`, which may leave the process's
/// signal handling changed when it fails.)
fn exec(binary: &Path, marker: &str) -> Option<nix::Error> {
    let c = |s: &OsStr| CString::new(s.as_bytes()).ok();
    let path = c(binary.as_os_str())?;
    let mut argv = vec![path.clone()];
    argv.extend(std::env::args_os().skip(1).filter_map(|a| c(&a)));
    let mut env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| k != EXEC_MARKER)
        .filter_map(|(k, v)| {
            let mut pair = k;
            pair.push("=");
            pair.push(v);
            c(&pair)
        })
        .collect();
    env.extend(c(OsStr::new(&format!("{EXEC_MARKER}={marker}"))));
    nix::unistd::execve(&path, &argv, &env).err()
}

/// Whether the C library this process runs with defines `GLIBC_ABI_DT_RELR`, the version that
/// a binary with packed relative relocations needs (glibc 2.36 and later).
fn loader_reads_packed_relocations() -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    let Some(libc) = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| Path::new(p).file_name() == Some(OsStr::new("libc.so.6")))
    else {
        return false;
    };
    std::fs::read(libc).is_ok_and(|bytes| memchr::memmem::find(&bytes, b"GLIBC_ABI_DT_RELR").is_some())
}

/// Serves the editor on this thread (one thread: the agents it starts are children of this
/// thread, see [`super::guard`]) until the editor closes standard input.
pub fn serve(args: crate::cli::AcpArgs) -> anyhow::Result<ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(super::run(args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machines_c_library_is_read_for_packed_relocations() {
        // The build links `recourse-acp` with them only where its C library has them
        // (`server/build.rs`), and these tests run where they were built.
        assert_eq!(loader_reads_packed_relocations(), PACKED_RELOCATIONS);
    }
}
