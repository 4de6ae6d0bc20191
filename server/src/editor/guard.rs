//! The agent guard: how an agent `recourse acp` started never outlives it, even when the editor
//! kills `recourse acp` with SIGKILL (Claude Code's and Codex's adapters do not exit when their
//! stdin closes, so nothing else would end them).
//!
//! `recourse acp` starts each agent as `recourse __agent-guard COMMAND ARGS...` in a process
//! group of its own. The guard asks the kernel for SIGTERM when its parent dies
//! (`PR_SET_PDEATHSIG`; the parent is the thread that started it, so `recourse acp` starts agents
//! only from its one runtime thread, which lives as long as the process), starts the agent in
//! the same group with the same standard streams, environment and directory, and then either
//! - the agent exits: the guard exits the same way (its code, or the same signal), so the exit
//!   Recourse observes is the agent's; or
//! - SIGTERM arrives (its parent died, Recourse is stopping the group, or the agent's
//!   `AgentProcess` was dropped before it was stopped): the guard sends
//!   SIGTERM to the whole group, waits [`GRACE`] for the agent, then SIGKILLs the group.
//!
//! One difference from the agent alone: an agent that ends by SIGTERM sent to it alone (not to
//! its group) is reported as exit code 143, because the guard itself handles SIGTERM.

use nix::{
    sys::signal::{killpg, raise, Signal},
    unistd::{getpgrp, getppid, Pid},
};
use std::{
    ffi::OsString, os::unix::process::ExitStatusExt, path::PathBuf, process::ExitCode, time::Duration,
};

/// How long the agent gets between the group's SIGTERM and its SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// Runs the guard: `command` with `args`, until it exits or the guard's parent dies.
pub fn run(command: PathBuf, args: Vec<OsString>) -> ExitCode {
    let parent = getppid();
    if nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).is_err()
        || getppid() != parent
        || parent == Pid::from_raw(1)
    {
        // No guard without the kernel's help, or the parent is already gone.
        return ExitCode::from(125);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(_) => return ExitCode::from(125),
    };
    runtime.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut terminate) = signal(SignalKind::terminate()) else {
            return ExitCode::from(125);
        };
        let mut child = match tokio::process::Command::new(&command).args(&args).spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("recourse agent guard: cannot start {}: {e}", command.display());
                return ExitCode::from(127);
            }
        };
        tokio::select! {
            status = child.wait() => match status {
                Ok(status) => same_end(status),
                Err(_) => ExitCode::from(125),
            },
            _ = terminate.recv() => {
                let group = getpgrp();
                let _ = killpg(group, Signal::SIGTERM);
                if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
                    let _ = killpg(group, Signal::SIGKILL);
                }
                let _ = killpg(group, Signal::SIGKILL);
                ExitCode::from(143)
            }
        }
    })
}

/// Ends the guard as the agent ended: its exit code, or the signal that killed it (SIGTERM, which
/// the guard handles, as 143).
fn same_end(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Some(signal) = status.signal().and_then(|n| Signal::try_from(n).ok()) {
        if signal != Signal::SIGTERM {
            let _ = raise(signal);
        }
        return ExitCode::from(u8::try_from(128 + signal as i32).unwrap_or(1));
    }
    ExitCode::from(1)
}
