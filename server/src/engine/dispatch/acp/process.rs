//! The agent's process: spawned in a process group of its own (an `npx`-style agent starts
//! children, and stopping the agent must stop them too), with the environment cleared except
//! the configured names and the configured settings (`set_env`), in a working directory checked again against the agent's roots at
//! spawn (it may have changed since the route started), stderr drained into a bounded ring
//! (the agent would block on a full pipe otherwise), and its end observed as an exit code or a
//! signal.
//!
//! What the process tells the evidence is decided once, when the session ends and before
//! Recourse does anything to it ([`AgentProcess::session_ended`], an [`Ended`]): an agent that
//! ended the session itself (its output closed before the prompt was answered: it exited or
//! crashed) gives its exit and all of its stderr; an agent still running when the session ended
//! (it answered, or Recourse gave up waiting, or the route moved on) gives only the stderr it
//! wrote until then. Closing its stdin, the grace and the signals that follow are Recourse's
//! own doing: neither the exit they cause nor what the agent prints because of them is ever
//! evidence. (Claude Code's and Codex's adapters do not exit when their stdin closes, so every
//! one of their turns ends in Recourse's SIGTERM; Gemini CLI and Qwen Code exit by themselves.)
//!
//! Stopping ([`AgentProcess::stop`], after the session's end closed the agent's stdin): wait
//! `exit_grace` for it to exit, then SIGTERM the group and wait `exit_grace` again, then SIGKILL
//! the group. Once the leader is gone, whatever is left of its group gets the same treatment,
//! so nothing it started outlives the attempt. How it went ([`Stopped`]) is for the log only.
//!
//! Identity across a crash of Recourse: a pid can be reused, so each group is recorded with the
//! start time of its leader from `/proc` and the kernel's boot id ([`StartStamp`]); a recorded
//! group is stopped at boot only while they still match ([`stop_recorded`]).
//!
//! No `unsafe` (the workspace forbids it): `process_group(0)` is std's safe setpgid, signals go
//! through `nix`'s safe wrappers.

use crate::config::{cwd_under, AgentConfig};
use nix::{
    sys::signal::{killpg, Signal},
    unistd::Pid,
};
use std::{
    collections::VecDeque,
    os::unix::process::ExitStatusExt,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::{
    io::AsyncReadExt,
    process::{Child, ChildStderr, ChildStdin, ChildStdout, Command},
    task::JoinHandle,
    time::{sleep, timeout, Instant},
};

/// Most stderr lines kept (the last ones: errors come at the end), as the classifier keeps.
pub(super) const STDERR_LINES: usize = classifier::envelope::MAX_LINES;
/// Longest kept stderr line, in bytes.
pub(super) const STDERR_LINE_BYTES: usize = classifier::envelope::MAX_LINE_BYTES;

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExitInfo {
    pub(super) code: Option<i32>,
    /// `SIGTERM`, `SIGKILL`, ...
    pub(super) signal: Option<String>,
}

/// What the agent's process contributes to the evidence of its attempt, decided when the
/// session ends, before Recourse begins to stop the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The agent ended the session itself: its output closed before the prompt was answered
    /// and it exited within the grace (an exit, a crash, a kill by someone else). Its exit and
    /// everything it wrote on stderr are evidence.
    ByItself { exit: ExitInfo, stderr: Vec<String> },
    /// It was still running when the session ended: only what it wrote on stderr until then is
    /// evidence. Its exit comes from Recourse stopping it and is not.
    Running { stderr: Vec<String> },
}

impl Ended {
    /// The exit, when it is evidence.
    pub(super) fn exit(&self) -> Option<&ExitInfo> {
        match self {
            Ended::ByItself { exit, .. } => Some(exit),
            Ended::Running { .. } => None,
        }
    }

    /// The stderr lines that are evidence.
    pub(super) fn stderr(&self) -> &[String] {
        match self {
            Ended::ByItself { stderr, .. } | Ended::Running { stderr } => stderr,
        }
    }
}

/// How Recourse stopped a process that was still running when its session ended (the log's,
/// never the evidence's): it exited within the grace after its stdin closed, or needed the
/// signal named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stopped {
    pub(super) exit: ExitInfo,
    /// `SIGTERM` or `SIGKILL`, when Recourse had to send it to the leader.
    pub(super) signalled: Option<&'static str>,
}

/// A process's start, as the kernel tells it: survives pid reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StartStamp {
    pub(super) ticks: u64,
    pub(super) boot_id: String,
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("the working directory is not an existing folder under a root the agent allows")]
    Cwd,
    #[error("cannot start the agent's command: {0}")]
    Io(#[from] std::io::Error),
    #[error("the agent exited before it could be recorded")]
    Gone,
}

/// A running agent and its pipes.
pub(crate) struct Spawned {
    pub(crate) process: AgentProcess,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    /// The working directory, resolved.
    pub(crate) cwd: PathBuf,
}

pub(crate) struct AgentProcess {
    child: Child,
    /// The leader's pid, which is also the group id.
    pub(crate) pgid: i32,
    pub(super) start: StartStamp,
    stderr: Arc<Mutex<StderrRing>>,
    /// Stderr lines pushed before the current turn began.
    mark: u64,
    /// Reads stderr until every writer of the pipe is gone.
    drain: Option<JoinHandle<()>>,
    /// Whether the leader is `recourse acp`'s agent guard (see its `Drop`).
    guarded: bool,
}

/// Dropped before it was stopped (a stop cut short, `recourse acp` ending): an unguarded agent
/// gets SIGKILL (tokio's `kill_on_drop`); a guarded one's guard gets SIGTERM instead, and ends
/// the whole group itself. SIGKILL to the guard would end the guard alone and leave the agent
/// running (Claude Code's and Codex's adapters do not exit when their stdin closes).
impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.guarded && matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(Pid::from_raw(self.pgid), Signal::SIGTERM);
        }
    }
}

/// Starts the agent in `cwd` (checked under its roots again, resolved).
pub(super) fn spawn(agent: &AgentConfig, cwd: &Path) -> Result<Spawned, SpawnError> {
    spawn_with(agent, cwd, None)
}

/// The hidden subcommand of `recourse` that runs an agent under its guard (`crate::editor::guard`,
/// `cli.rs` names it too).
pub(crate) const GUARD_ARG: &str = "__agent-guard";

/// Starts the agent in `cwd` (checked under its roots again, resolved), through `guard` when
/// given: a program that leads the group, takes the agent's place in it and stops the whole
/// group when its own parent dies (`recourse acp`'s agent guard, `crate::editor::guard`), so an
/// agent never outlives a runner that was killed.
pub(crate) fn spawn_with(
    agent: &AgentConfig,
    cwd: &Path,
    guard: Option<&Path>,
) -> Result<Spawned, SpawnError> {
    let cwd = cwd_under(cwd, &agent.allowed_roots).ok_or(SpawnError::Cwd)?;
    let mut command = match guard {
        Some(guard) => {
            let mut c = Command::new(guard);
            c.arg(GUARD_ARG).arg(&agent.command).args(&agent.args);
            c
        }
        None => {
            let mut c = Command::new(&agent.command);
            c.args(&agent.args);
            c
        }
    };
    let mut child = command
        .current_dir(&cwd)
        .env_clear()
        .envs(
            agent
                .env
                .iter()
                .filter_map(|name| std::env::var_os(name).map(|v| (name, v))),
        )
        .envs(&agent.set_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A safety net only: every path below stops the group itself (a guarded agent's net is
        // `AgentProcess`'s `Drop`).
        .kill_on_drop(guard.is_none())
        .spawn()?;
    let pid = child.id().ok_or(SpawnError::Gone)?;
    let pgid = i32::try_from(pid).map_err(|_| SpawnError::Gone)?;
    let Some(start) = start_stamp(pgid) else {
        // It exited at once (a zombie has no start time to read here if it was reaped).
        let _ = child.start_kill();
        return Err(SpawnError::Gone);
    };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SpawnError::Gone);
    };
    let ring = Arc::new(Mutex::new(StderrRing::default()));
    let drain = tokio::spawn(drain_stderr(stderr, ring.clone()));
    Ok(Spawned {
        process: AgentProcess {
            child,
            pgid,
            start,
            stderr: ring,
            mark: 0,
            drain: Some(drain),
            guarded: guard.is_some(),
        },
        stdin,
        stdout,
        cwd,
    })
}

impl AgentProcess {
    /// What the process tells the evidence, now that the session is over (before anything is
    /// done to the process). `agent_left`: the session ended because the agent's side closed
    /// (its output ended); then its own exit is awaited for `grace` (the exit usually follows
    /// the closed pipe by a moment). Otherwise, or when it does not exit in that time, it is
    /// still running and only the stderr read so far counts.
    pub(crate) async fn session_ended(&mut self, agent_left: bool, grace: Duration) -> Ended {
        if agent_left {
            if let Ok(Ok(status)) = timeout(grace, self.child.wait()).await {
                // Everything it wrote: the pipe ends when its last writer is gone (a child it
                // left behind may keep it open; the grace bounds that wait).
                self.finish_drain(grace).await;
                return Ended::ByItself {
                    exit: exit_info(status),
                    stderr: self.stderr_lines(),
                };
            }
        }
        // Let the drain take what is already in the pipe before the cut.
        tokio::task::yield_now().await;
        Ended::Running {
            stderr: self.stderr_lines(),
        }
    }

    /// Stops the agent and everything in its group. Its stdin must be closed already (the
    /// session's end closes it): an agent that exits on EOF goes within `grace`; one that does
    /// not (Claude Code's and Codex's adapters) gets SIGTERM, then SIGKILL.
    pub(crate) async fn stop(mut self, grace: Duration) -> Stopped {
        let mut signalled = None;
        let status = match timeout(grace, self.child.wait()).await {
            Ok(s) => s.ok(),
            Err(_) => {
                signal_group(self.pgid, Signal::SIGTERM);
                signalled = Some("SIGTERM");
                match timeout(grace, self.child.wait()).await {
                    Ok(s) => s.ok(),
                    Err(_) => {
                        signal_group(self.pgid, Signal::SIGKILL);
                        signalled = Some("SIGKILL");
                        self.child.wait().await.ok()
                    }
                }
            }
        };
        // The leader is gone; what it started in its group goes too.
        stop_group(self.pgid, grace).await;
        self.finish_drain(grace).await;
        Stopped {
            exit: status.map_or(
                ExitInfo {
                    code: None,
                    signal: None,
                },
                exit_info,
            ),
            signalled,
        }
    }

    /// Lets the stderr reader finish (the pipe ends when its last writer is gone), for at
    /// most `grace`; then stops it, keeping what it read.
    async fn finish_drain(&mut self, grace: Duration) {
        if let Some(mut drain) = self.drain.take() {
            if timeout(grace, &mut drain).await.is_err() {
                drain.abort();
            }
        }
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .since(self.mark)
    }

    /// A new turn of the same process begins: what it wrote on stderr until now is not that
    /// turn's evidence.
    pub(crate) fn mark_turn(&mut self) {
        self.mark = self.stderr.lock().unwrap_or_else(|e| e.into_inner()).pushed;
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    ExitInfo {
        code: status.code(),
        signal: status
            .signal()
            .map(|n| Signal::try_from(n).map_or_else(|_| format!("SIG{n}"), |s| s.as_str().to_owned())),
    }
}

fn signal_group(pgid: i32, signal: Signal) -> bool {
    killpg(Pid::from_raw(pgid), signal).is_ok()
}

/// Whether any process is left in the group (zombies count until their parent reaps them).
fn group_alive(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// SIGTERM to what is left of a group whose leader is gone, `grace` to go, then SIGKILL.
async fn stop_group(pgid: i32, grace: Duration) {
    if !live_members(pgid) {
        return;
    }
    signal_group(pgid, Signal::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if !live_members(pgid) {
            return;
        }
        sleep(Duration::from_millis(20)).await;
    }
    signal_group(pgid, Signal::SIGKILL);
}

/// Whether the group has a member that is not a zombie (a zombie is dead; only its parent can
/// remove it).
fn live_members(pgid: i32) -> bool {
    if !group_alive(pgid) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .any(|s| s.pgrp == pgid && s.state != 'Z')
}

/// The fields of `/proc/<pid>/stat` we read.
pub(super) struct Stat {
    pub(super) state: char,
    pub(super) pgrp: i32,
    pub(super) start_ticks: u64,
}

/// Reads `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses, so
/// the fields are counted from the last `)`.
pub(super) fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); field 5 is the group; field 22 the start time.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The start stamp of a running process.
pub(super) fn start_stamp(pid: i32) -> Option<StartStamp> {
    Some(StartStamp {
        ticks: stat(pid)?.start_ticks,
        boot_id: boot_id(),
    })
}

/// Stops a group a previous Recourse process recorded, if it is still that group: its leader
/// alive with the recorded start time, or (the leader gone) members that started no earlier,
/// on the same boot. Returns whether it found and signalled one.
pub(super) async fn stop_recorded(pgid: i32, start: &StartStamp, grace: Duration) -> bool {
    if start.boot_id != boot_id() || pgid <= 1 {
        return false;
    }
    let ours = match stat(pgid) {
        Some(leader) => leader.start_ticks == start.ticks,
        None => std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(stat)
            .any(|s| s.pgrp == pgid && s.start_ticks >= start.ticks && s.state != 'Z'),
    };
    if !ours || !live_members(pgid) {
        return false;
    }
    signal_group(pgid, Signal::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if !live_members(pgid) {
            return true;
        }
        sleep(Duration::from_millis(20)).await;
    }
    signal_group(pgid, Signal::SIGKILL);
    true
}

/// The last [`STDERR_LINES`] lines, each at most [`STDERR_LINE_BYTES`].
#[derive(Debug, Default)]
struct StderrRing {
    lines: VecDeque<String>,
    /// Every line pushed so far (a turn's lines are those pushed after its mark).
    pushed: u64,
}

impl StderrRing {
    fn push(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        if self.lines.len() == STDERR_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line.to_owned());
        self.pushed += 1;
    }

    /// The kept lines pushed after `mark`.
    fn since(&self, mark: u64) -> Vec<String> {
        let new = usize::try_from(self.pushed.saturating_sub(mark)).unwrap_or(usize::MAX);
        let skip = self.lines.len().saturating_sub(new);
        self.lines.iter().skip(skip).cloned().collect()
    }
}

/// Reads stderr to its end, keeping the ring; a line longer than the bound keeps its start.
async fn drain_stderr(mut stderr: ChildStderr, ring: Arc<Mutex<StderrRing>>) {
    let mut buf = [0_u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                ring.lock().unwrap_or_else(|e| e.into_inner()).push(&line);
                line.clear();
            } else if line.len() < STDERR_LINE_BYTES {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        ring.lock().unwrap_or_else(|e| e.into_inner()).push(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_reads_our_own_process() {
        let me = i32::try_from(std::process::id()).unwrap();
        let s = stat(me).unwrap();
        assert!(s.start_ticks > 0);
        assert_ne!(s.state, 'Z');
    }

    #[test]
    fn the_ring_keeps_the_last_lines() {
        let mut r = StderrRing::default();
        for i in 0..STDERR_LINES + 3 {
            r.push(format!("line {i}\r").as_bytes());
        }
        assert_eq!(r.lines.len(), STDERR_LINES);
        assert_eq!(
            r.lines.back().map(String::as_str),
            Some(&*format!("line {}", STDERR_LINES + 2))
        );
        let mark = r.pushed;
        assert!(r.since(mark).is_empty());
        r.push(b"after");
        assert_eq!(r.since(mark), ["after"]);
        assert_eq!(r.since(0).len(), STDERR_LINES, "at most what is kept");
    }
}
