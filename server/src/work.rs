//! Whether a route's work (design contract 7) can be run by its profile's candidates, checked
//! against the server's configuration when the work arrives (a route start, or the next prompt
//! through `work`): every agent candidate needs a prompt and a working directory under a root
//! its agent allows (or the agent's default one); every endpoint candidate needs messages.
//! Problems are field-path 422s (`work.cwd`, `work.prompt`, `work.messages`). The shape and
//! size of the work are `policy::input::check_work`'s, already checked at the boundary.
//!
//! The directory is resolved (links and `..`) here and again when an agent is started, because
//! it can change in between.
//!
//! A route whose caller runs its attempts itself ([`Runs::Caller`]: `recourse acp`, where the
//! editor's files are) needs the prompt and an absolute working directory, but the directory is
//! the caller's, on its machine: the caller checks it against its own agents' roots when it
//! starts one, and the server does not look for it on its own disk.

use crate::config::{cwd_under, RunnerConfig};
use policy::{
    api::{DispatcherKind, Profile, Work},
    document::{ValidationCode, ValidationError, ValidationErrors},
};
use std::path::Path;

/// Who runs a route's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// Recourse, on this machine.
    Server,
    /// The route's caller (`editor`), on its own machine.
    Caller,
}

/// Checks `work` against every candidate of `profile` that Recourse (or, for [`Runs::Caller`],
/// the caller) runs. Blocking (it resolves paths): call it off the async threads.
pub fn check_fits(
    profile: &Profile,
    work: Option<&Work>,
    config: &RunnerConfig,
    runs: Runs,
) -> Result<(), ValidationErrors> {
    let mut errors = Vec::new();
    let mut push = |path: &str, code: ValidationCode, message: String| {
        if !errors.iter().any(|e: &ValidationError| e.path == path) {
            errors.push(ValidationError {
                path: path.to_owned(),
                code,
                message,
            });
        }
    };
    for t in &profile.targets {
        let runner = t.runner.as_deref().unwrap_or_default();
        match t.dispatcher {
            DispatcherKind::Acp => {
                let Some(agent) = config.agent(runner) else {
                    continue;
                };
                if work.is_none_or(|w| w.prompt.is_empty()) {
                    push(
                        "work.prompt",
                        ValidationCode::Missing,
                        format!(
                            "Candidate `{}` is an agent: give the prompt (ACP content blocks).",
                            t.id
                        ),
                    );
                }
                match work.and_then(|w| w.cwd.as_deref()) {
                    Some(cwd) if runs == Runs::Caller && !Path::new(cwd).is_absolute() => push(
                        "work.cwd",
                        ValidationCode::OutOfRange,
                        "The working directory must be an absolute path.".to_owned(),
                    ),
                    None if runs == Runs::Caller => push(
                        "work.cwd",
                        ValidationCode::Missing,
                        "A route whose caller runs it needs the caller's working directory.".to_owned(),
                    ),
                    Some(_) if runs == Runs::Caller => {}
                    Some(cwd) if cwd_under(Path::new(cwd), &agent.allowed_roots).is_none() => push(
                        "work.cwd",
                        ValidationCode::OutOfRange,
                        format!(
                            "The working directory must be an existing folder under a root agent `{}` allows.",
                            agent.id
                        ),
                    ),
                    None if agent.default_cwd.is_none() => push(
                        "work.cwd",
                        ValidationCode::Missing,
                        format!("Agent `{}` has no default working directory: give one.", agent.id),
                    ),
                    _ => {}
                }
            }
            DispatcherKind::Http => {
                if config.endpoint(runner).is_some() && work.is_none_or(|w| w.messages.is_empty()) {
                    push(
                        "work.messages",
                        ValidationCode::Missing,
                        format!("Candidate `{}` is an HTTP endpoint: give the messages.", t.id),
                    );
                }
            }
            DispatcherKind::Simulated | DispatcherKind::External => {}
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors { errors })
    }
}
