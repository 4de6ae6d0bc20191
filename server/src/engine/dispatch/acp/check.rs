//! `recourse agents check`: every configured agent started once, in its default working
//! directory (or its first allowed root), with its configured environment, asked `initialize`
//! and stopped. What each says of itself (name and version, protocol version, authentication
//! methods, `loadSession`), how long it took to answer, and what is wrong: it did not start,
//! did not speak ACP version 1 in time, or does not offer the `auth_method` the configuration
//! names (the dispatcher would go on without `authenticate`, warning in the log once per
//! attempt).

use super::{process, protocol};
use crate::config::{AgentConfig, RunnerConfig};
use std::time::{Duration, Instant};

pub(crate) use protocol::Hello;

/// What one agent answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentCheck {
    pub(crate) id: String,
    /// Its answer to `initialize`, or why there was none.
    pub(crate) hello: Result<Hello, String>,
    /// From the spawn to the answer (or the failure).
    pub(crate) took: Duration,
}

impl AgentCheck {
    /// What is wrong with this agent, if anything: it does not start or speak ACP v1, or it
    /// does not offer the configured `auth_method`.
    pub(crate) fn problem(&self, agent: &AgentConfig) -> Option<String> {
        match &self.hello {
            Err(why) => Some(why.clone()),
            Ok(h) if h.protocol_version != 1 => Some(format!(
                "it speaks ACP protocol version {}, Recourse speaks 1",
                h.protocol_version
            )),
            Ok(h) => match &agent.auth_method {
                Some(m) if !h.auth_methods.contains(m) => Some(format!(
                    "auth_method {m:?} is not one it offers ({})",
                    if h.auth_methods.is_empty() {
                        "it offers none".to_owned()
                    } else {
                        h.auth_methods.join(", ")
                    }
                )),
                _ => None,
            },
        }
    }
}

/// Checks every agent of `config`, one after another.
pub(crate) async fn check(config: &RunnerConfig) -> Vec<AgentCheck> {
    let mut out = Vec::with_capacity(config.agents.len());
    for agent in &config.agents {
        out.push(check_one(agent).await);
    }
    out
}

async fn check_one(agent: &AgentConfig) -> AgentCheck {
    let started = Instant::now();
    let cwd = agent
        .default_cwd
        .clone()
        .or_else(|| agent.allowed_roots.first().cloned())
        .unwrap_or_default();
    let spawned = {
        let agent = agent.clone();
        tokio::task::spawn_blocking(move || process::spawn(&agent, &cwd)).await
    };
    let hello = match spawned {
        Ok(Ok(s)) => {
            let hello = protocol::hello(s.stdin, s.stdout, agent.timeouts.step()).await;
            let took = started.elapsed();
            s.process.stop(agent.timeouts.exit_grace()).await;
            return AgentCheck {
                id: agent.id.clone(),
                hello,
                took,
            };
        }
        Ok(Err(e)) => Err(format!("it does not start: {e}")),
        Err(_) => Err("it does not start".to_owned()),
    };
    AgentCheck {
        id: agent.id.clone(),
        hello,
        took: started.elapsed(),
    }
}
