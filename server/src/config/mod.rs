//! The server configuration file (design contract 5): what may start a process or spend money,
//! configured by the operator on the server and never through the API or the UI.
//!
//! `recourse serve --config recourse.toml` reads it at start (an invalid file stops the start
//! with every problem listed) and again on SIGHUP (an invalid file is refused and the previous
//! configuration stays). It lists:
//! - `[[agent]]`: ACP agents Recourse starts itself: the command (an absolute path, no shell),
//!   its arguments, the roots a route's working directory must lie under, the NAMES of the
//!   environment variables passed to it (their values are read from Recourse's own environment
//!   at launch and never stored, logged or shown; everything else is cleared), and settings
//!   that are not secret given by value (`[agent.set_env]`: a base URL, `HOME`, how long the
//!   agent retries on its own). A value there that reads like a credential, or a name that
//!   names one, is refused: a secret only ever comes by name.
//! - `[[endpoint]]`: LLM HTTP APIs for one-shot utility calls: the API style (`openai` chat
//!   completions or `anthropic` messages), base URL, model, the NAME of the variable holding
//!   the key, and timeouts.
//!
//! - `[[channel]]` and `[notify]`: where notifications may go (webhooks, e-mail) and how their
//!   deliveries are retried (`notify`). Profiles' rules name channels by id.
//!
//! Profiles name an agent or an endpoint by id (`targets[i].runner`); an unknown id is a
//! field-path 422 when the profile is written. The UI offers only what is configured here.
//! A running attempt keeps the configuration it started with (an `Arc` snapshot).

pub mod networks;
pub mod notify;
pub mod secret;

use self::notify::{NotifyConfig, NotifySection};
use crate::clock::WatchdogClock;
use policy::input::check_identifier;
use policy::input::is_env_name;
use serde::Deserialize;
use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};
use tokio::sync::watch;

/// The parsed, validated configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunnerConfig {
    pub agents: Vec<AgentConfig>,
    pub endpoints: Vec<EndpointConfig>,
    /// Notification channels and delivery settings.
    pub notify: NotifyConfig,
}

/// One ACP agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub id: String,
    /// A readable name for the UI.
    #[serde(default)]
    pub label: Option<String>,
    /// Absolute path of the agent's executable (started directly, without a shell).
    pub command: PathBuf,
    #[serde(default)]
    pub args: Vec<String>,
    /// A route's working directory must lie under one of these (after resolving links).
    pub allowed_roots: Vec<PathBuf>,
    /// Used when a route's work names no working directory; must lie under a root.
    #[serde(default)]
    pub default_cwd: Option<PathBuf>,
    /// Names of environment variables copied from Recourse's own environment (values never
    /// stored or shown). Node-based agents need `HOME` and `PATH`.
    #[serde(default)]
    pub env: Vec<String>,
    /// Environment variables set to these values for the agent (after `env`): settings that
    /// are not secret, such as the agent's own retry limits, its provider's base URL or its
    /// `HOME`. Refused when a name or a value looks like a credential.
    #[serde(default)]
    pub set_env: std::collections::BTreeMap<String, String>,
    /// The ACP `authenticate` method to call when the agent advertises it.
    #[serde(default)]
    pub auth_method: Option<String>,
    /// Whether a retry after output may continue the failed turn in its own session
    /// (`session/load`): only for an agent whose loaded session still holds the partial answer
    /// of a turn that failed (tested: Claude Code's adapter). Codex and Qwen Code load the
    /// session without it and Gemini CLI's retry in it never reaches the provider, so a retry
    /// there would answer a prompt whose first half the person saw and the agent forgot; off,
    /// output before a failure stops the route for a person. Advertising `loadSession` is not
    /// enough.
    #[serde(default)]
    pub resume_after_output: bool,
    /// Safe identifiers for evidence and shared circuits.
    #[serde(default)]
    pub provider_id: Option<String>,
    #[serde(default)]
    pub model_id: Option<String>,
    #[serde(default)]
    pub timeouts: AgentTimeouts,
}

/// Seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentTimeouts {
    /// Each of initialize, authenticate and session/new or session/load.
    pub step: u64,
    /// No message at all from the agent for this long during a prompt: it is hung.
    pub prompt_idle: u64,
    /// The whole prompt.
    pub prompt_total: u64,
    /// After `session/cancel`, how long to wait for the cancelled answer.
    pub cancel_grace: u64,
    /// After closing the agent's input, before SIGTERM to its process group; then before
    /// SIGKILL.
    pub exit_grace: u64,
}

impl Default for AgentTimeouts {
    fn default() -> Self {
        AgentTimeouts {
            step: 30,
            prompt_idle: 900,
            prompt_total: 7_200,
            cancel_grace: 15,
            exit_grace: 3,
        }
    }
}

impl AgentTimeouts {
    pub fn step(&self) -> Duration {
        Duration::from_secs(self.step)
    }
    pub fn prompt_idle(&self) -> Duration {
        Duration::from_secs(self.prompt_idle)
    }
    pub fn prompt_total(&self) -> Duration {
        Duration::from_secs(self.prompt_total)
    }
    pub fn cancel_grace(&self) -> Duration {
        Duration::from_secs(self.cancel_grace)
    }
    pub fn exit_grace(&self) -> Duration {
        Duration::from_secs(self.exit_grace)
    }
}

/// The HTTP API an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiStyle {
    /// OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
    Openai,
    /// Anthropic Messages: `POST {base_url}/v1/messages`.
    Anthropic,
}

/// One LLM HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    pub id: String,
    #[serde(default)]
    pub label: Option<String>,
    pub style: ApiStyle,
    /// `http://` or `https://`, no credentials, no query.
    pub base_url: String,
    pub model: String,
    /// The NAME of the environment variable that holds the key (never the key).
    pub api_key_env: String,
    #[serde(default)]
    pub provider_id: Option<String>,
    /// Seconds to connect.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: u64,
    /// Seconds without a byte while reading the answer.
    #[serde(default = "default_read_timeout")]
    pub read_timeout: u64,
    /// Seconds for the whole request.
    #[serde(default = "default_request_timeout")]
    pub request_timeout: u64,
    /// Largest response body kept as the route's result, in bytes.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// Ask for a streamed answer (server-sent events). The route's result is the whole message
    /// either way; streaming keeps a long answer within `read_timeout` and tells a failure
    /// after the first content byte (a partial result) from one before it.
    #[serde(default)]
    pub stream: bool,
}

fn default_connect_timeout() -> u64 {
    10
}
fn default_read_timeout() -> u64 {
    60
}
fn default_request_timeout() -> u64 {
    300
}
fn default_max_response_bytes() -> usize {
    1024 * 1024
}

impl RunnerConfig {
    pub fn agent(&self, id: &str) -> Option<&AgentConfig> {
        self.agents.iter().find(|a| a.id == id)
    }

    pub fn endpoint(&self, id: &str) -> Option<&EndpointConfig> {
        self.endpoints.iter().find(|e| e.id == id)
    }

    /// Reads and validates a configuration file, and checks that every secret variable a
    /// notification channel names is set in this process's environment.
    pub fn load(path: &Path) -> Result<RunnerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_owned(),
            problems: vec![format!("cannot read the file: {e}")],
        })?;
        let config = RunnerConfig::parse(&text).map_err(|problems| ConfigError {
            file: path.to_owned(),
            problems,
        })?;
        let problems = config.notify.check_environment();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError {
                file: path.to_owned(),
                problems,
            })
        }
    }

    /// Parses and validates configuration text; every problem at once, each naming its entry
    /// and field (`agent[1].command`), never a value an operator may have pasted by mistake.
    pub fn parse(text: &str) -> Result<RunnerConfig, Vec<String>> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            agent: Vec<AgentConfig>,
            #[serde(default)]
            endpoint: Vec<EndpointConfig>,
            #[serde(default)]
            notify: Option<NotifySection>,
            #[serde(default)]
            channel: Vec<toml::Value>,
        }
        let file: File =
            toml::from_str(text).map_err(|e| vec![format!("not a valid configuration: {}", e.message())])?;
        let mut problems = Vec::new();
        let mut agents = Vec::with_capacity(file.agent.len());
        let mut ids = HashSet::new();
        for (i, mut a) in file.agent.into_iter().enumerate() {
            let at = |field: &str| format!("agent[{i}].{field}");
            check_id(&a.id, &at("id"), &mut ids, &mut problems);
            if !a.command.is_absolute() {
                problems.push(format!(
                    "{}: give the absolute path of the agent's executable",
                    at("command")
                ));
            }
            if a.allowed_roots.is_empty() {
                problems.push(format!(
                    "{}: list at least one root a route's working directory may lie under",
                    at("allowed_roots")
                ));
            }
            let mut roots = Vec::with_capacity(a.allowed_roots.len());
            for (r, root) in a.allowed_roots.iter().enumerate() {
                match root.canonicalize() {
                    Ok(c) if root.is_absolute() && c.is_dir() => roots.push(c),
                    _ => problems.push(format!(
                        "{}: must be an absolute path of an existing folder",
                        at(&format!("allowed_roots[{r}]"))
                    )),
                }
            }
            a.allowed_roots = roots;
            if let Some(cwd) = &a.default_cwd {
                if cwd_under(cwd, &a.allowed_roots).is_none() {
                    problems.push(format!(
                        "{}: must be an existing folder under one of allowed_roots",
                        at("default_cwd")
                    ));
                }
            }
            for (e, name) in a.env.iter().enumerate() {
                if !is_env_name(name) {
                    problems.push(format!(
                        "{}: not an environment variable name",
                        at(&format!("env[{e}]"))
                    ));
                }
            }
            for (name, value) in &a.set_env {
                let at = at(&format!("set_env.{name}"));
                if !is_env_name(name) {
                    problems.push(format!("{at}: not an environment variable name"));
                } else if a.env.contains(name) {
                    problems.push(format!("{at}: also listed in env; give a variable one source"));
                } else if secret_name(name) {
                    problems.push(format!(
                        "{at}: names a credential; list its name in env instead, so its value \
                         comes from Recourse's environment and is never written here"
                    ));
                } else if value.len() > MAX_SET_ENV_BYTES
                    || value.contains('\0')
                    || reads_as_credential(value)
                {
                    problems.push(format!(
                        "{at}: not a setting Recourse passes by value (at most \
                         {MAX_SET_ENV_BYTES} bytes, and nothing that reads like a credential: \
                         a secret comes by name, through env)"
                    ));
                }
            }
            for (field, value) in [("provider_id", &a.provider_id), ("model_id", &a.model_id)] {
                if let Some(v) = value {
                    if let Err(e) = check_identifier(v, field) {
                        problems.push(format!("{}: {}", at(field), e.message));
                    }
                }
            }
            let t = a.timeouts;
            for (field, secs) in [
                ("step", t.step),
                ("prompt_idle", t.prompt_idle),
                ("prompt_total", t.prompt_total),
                ("cancel_grace", t.cancel_grace),
                ("exit_grace", t.exit_grace),
            ] {
                if !(1..=MAX_TIMEOUT_SECONDS).contains(&secs) {
                    problems.push(format!(
                        "{}: between 1 and {MAX_TIMEOUT_SECONDS} seconds",
                        at(&format!("timeouts.{field}"))
                    ));
                }
            }
            agents.push(a);
        }
        let mut endpoints = Vec::with_capacity(file.endpoint.len());
        let mut ids = HashSet::new();
        for (i, e) in file.endpoint.into_iter().enumerate() {
            let at = |field: &str| format!("endpoint[{i}].{field}");
            check_id(&e.id, &at("id"), &mut ids, &mut problems);
            if !base_url_ok(&e.base_url) {
                problems.push(format!(
                    "{}: an http:// or https:// address without credentials, query or fragment",
                    at("base_url")
                ));
            }
            if e.model.trim().is_empty() || e.model.len() > policy::limits::MAX_IDENTIFIER_CHARS {
                problems.push(format!("{}: give the model name", at("model")));
            }
            if !is_env_name(&e.api_key_env) {
                problems.push(format!("{}: not an environment variable name", at("api_key_env")));
            }
            if let Some(p) = &e.provider_id {
                if let Err(err) = check_identifier(p, "provider_id") {
                    problems.push(format!("{}: {}", at("provider_id"), err.message));
                }
            }
            for (field, secs) in [
                ("connect_timeout", e.connect_timeout),
                ("read_timeout", e.read_timeout),
                ("request_timeout", e.request_timeout),
            ] {
                if !(1..=MAX_TIMEOUT_SECONDS).contains(&secs) {
                    problems.push(format!(
                        "{}: between 1 and {MAX_TIMEOUT_SECONDS} seconds",
                        at(field)
                    ));
                }
            }
            if !(1..=MAX_RESPONSE_BYTES).contains(&e.max_response_bytes) {
                problems.push(format!(
                    "{}: between 1 and {MAX_RESPONSE_BYTES} bytes",
                    at("max_response_bytes")
                ));
            }
            endpoints.push(e);
        }
        let notify = self::notify::parse(file.notify, file.channel, &mut problems);
        if problems.is_empty() {
            Ok(RunnerConfig {
                agents,
                endpoints,
                notify,
            })
        } else {
            Err(problems)
        }
    }
}

/// Longest timeout an operator may configure (a day).
const MAX_TIMEOUT_SECONDS: u64 = 86_400;
/// Largest response an endpoint may keep (16 MiB).
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

fn check_id(id: &str, at: &str, seen: &mut HashSet<String>, problems: &mut Vec<String>) {
    if let Err(e) = check_identifier(id, "the id") {
        problems.push(format!("{at}: {}", e.message));
    } else if !seen.insert(id.to_owned()) {
        problems.push(format!("{at}: another entry of this kind already has this id"));
    }
}

/// Whether a `set_env` value reads as a credential, as the evidence redactor judges text. An
/// absolute path is a path (a temp folder's random name is not a key), judged no further.
fn reads_as_credential(value: &str) -> bool {
    !value.starts_with('/') && classifier::redact::redact(value) != value
}

/// Longest value of an agent's `set_env` entry.
const MAX_SET_ENV_BYTES: usize = 4096;

/// Whether a variable's name says it holds a credential (`ANTHROPIC_API_KEY`, `GH_TOKEN`,
/// `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`, `GOOGLE_APPLICATION_CREDENTIALS`, ...).
fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("KEY")
        || upper.contains("_KEY_")
        || [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "COOKIE",
            "AUTH",
        ]
        .iter()
        .any(|w| upper.contains(w))
}

fn base_url_ok(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https")
        && !rest.is_empty()
        && !rest.contains(['@', '?', '#', ' '])
        && rest.split('/').next().is_some_and(|host| !host.is_empty())
}

/// `cwd`, resolved, if it is an existing folder under one of `roots` (already resolved).
pub fn cwd_under(cwd: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let resolved = cwd.canonicalize().ok().filter(|c| c.is_dir())?;
    roots.iter().any(|r| resolved.starts_with(r)).then_some(resolved)
}

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
#[error("[CF1001] configuration `{}` refused: {}", file.display(), problems.join("; "))]
pub struct ConfigError {
    pub file: PathBuf,
    pub problems: Vec<String>,
}

/// The current configuration, shared: a reload replaces it for the next launch; an attempt
/// already running keeps the snapshot it took. With it, the clock the runners' watchdogs count
/// on.
#[derive(Debug, Clone)]
pub struct Runners {
    rx: watch::Receiver<Arc<RunnerConfig>>,
    tx: Arc<watch::Sender<Arc<RunnerConfig>>>,
    watchdog: WatchdogClock,
}

impl Runners {
    pub fn new(config: RunnerConfig) -> Runners {
        let (tx, rx) = watch::channel(Arc::new(config));
        Runners {
            rx,
            tx: Arc::new(tx),
            watchdog: WatchdogClock::default(),
        }
    }

    /// The clock of the agents' turn watchdogs (`prompt_idle`, `prompt_total`, `cancel_grace`).
    pub fn watchdog(&self) -> WatchdogClock {
        self.watchdog.clone()
    }

    /// No agents and no endpoints (no `--config`).
    pub fn none() -> Runners {
        Runners::new(RunnerConfig::default())
    }

    /// The configuration now.
    pub fn current(&self) -> Arc<RunnerConfig> {
        self.rx.borrow().clone()
    }

    /// Replaces the configuration (a reload).
    pub fn replace(&self, config: RunnerConfig) {
        self.tx.send_replace(Arc::new(config));
    }

    /// Reloads from `path`: the new configuration if it is valid, otherwise the error and the
    /// previous configuration stays. Logs which ids came and went, never values.
    pub fn reload(&self, path: &Path) -> Result<(), ConfigError> {
        let next = RunnerConfig::load(path)?;
        let before = self.current();
        let ids = |c: &RunnerConfig| -> Vec<String> {
            c.agents
                .iter()
                .map(|a| format!("agent:{}", a.id))
                .chain(c.endpoints.iter().map(|e| format!("endpoint:{}", e.id)))
                .chain(c.notify.channels.iter().map(|ch| format!("channel:{}", ch.id)))
                .collect()
        };
        let (old, new) = (ids(&before), ids(&next));
        let added: Vec<&String> = new.iter().filter(|i| !old.contains(i)).collect();
        let removed: Vec<&String> = old.iter().filter(|i| !new.contains(i)).collect();
        self.replace(next);
        tracing::info!(?added, ?removed, "configuration reloaded");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(root: &Path) -> String {
        format!(
            r#"
            [[agent]]
            id = "claude"
            command = "/usr/local/bin/claude-agent-acp"
            allowed_roots = ["{root}"]
            env = ["HOME", "PATH", "ANTHROPIC_API_KEY"]
            provider_id = "anthropic"

            [[endpoint]]
            id = "mini"
            style = "openai"
            base_url = "https://api.openai.com/v1"
            model = "gpt-4.1-mini"
            api_key_env = "OPENAI_API_KEY"
            "#,
            root = root.display()
        )
    }

    #[test]
    fn a_valid_file_lists_its_agents_and_endpoints_with_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let c = RunnerConfig::parse(&valid(dir.path())).unwrap();
        assert_eq!(c.agents[0].id, "claude");
        assert_eq!(c.agents[0].timeouts, AgentTimeouts::default());
        assert_eq!(c.agents[0].allowed_roots, [dir.path().canonicalize().unwrap()]);
        assert_eq!(c.endpoints[0].style, ApiStyle::Openai);
        assert_eq!(c.endpoints[0].read_timeout, 60);
        assert!(c.agent("claude").is_some() && c.endpoint("claude").is_none());
    }

    #[test]
    fn every_problem_is_named_by_entry_and_field_without_repeating_values() {
        let text = r#"
            [[agent]]
            id = "a b"
            command = "relative/path"
            allowed_roots = ["/no/such/folder"]
            env = ["sk-live-secretvalue=1"]
            [agent.timeouts]
            step = 0

            [[endpoint]]
            id = "e"
            style = "openai"
            base_url = "https://user:sk-live-secretvalue@example.com/v1?key=sk-live-secretvalue"
            model = "m"
            api_key_env = "sk-live-secretvalue"

            [[endpoint]]
            id = "e"
            style = "anthropic"
            base_url = "ftp://x"
            model = "m"
            api_key_env = "K"
        "#;
        let problems = RunnerConfig::parse(text).unwrap_err();
        let joined = problems.join("\n");
        for field in [
            "agent[0].id",
            "agent[0].command",
            "agent[0].allowed_roots[0]",
            "agent[0].env[0]",
            "agent[0].timeouts.step",
            "endpoint[0].base_url",
            "endpoint[0].api_key_env",
            "endpoint[1].id",
            "endpoint[1].base_url",
        ] {
            assert!(joined.contains(field), "{field} missing from:\n{joined}");
        }
        assert!(!joined.contains("secretvalue"), "{joined}");
    }

    #[test]
    fn settings_by_value_are_taken_and_secrets_by_value_are_refused_without_repeating_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display();
        let text = format!(
            r#"
            [[agent]]
            id = "claude"
            command = "/usr/local/bin/claude-agent-acp"
            allowed_roots = ["{root}"]
            env = ["PATH", "ANTHROPIC_API_KEY"]
            [agent.set_env]
            CLAUDE_CODE_MAX_RETRIES = "2"
            ANTHROPIC_BASE_URL = "http://127.0.0.1:8080/claude"
            HOME = "/srv/recourse/claude-home"
            "#
        );
        let c = RunnerConfig::parse(&text).unwrap();
        assert_eq!(c.agents[0].set_env["CLAUDE_CODE_MAX_RETRIES"], "2");
        let bad = format!(
            r#"
            [[agent]]
            id = "claude"
            command = "/usr/local/bin/claude-agent-acp"
            allowed_roots = ["{root}"]
            env = ["HOME"]
            [agent.set_env]
            ANTHROPIC_API_KEY = "not-even-a-real-one"
            HOME = "/srv/home"
            TMPDIR = "/tmp/.tmpZq8vN2xYpL4mK7rT1wB9cD3f"
            NOTE = "sk-ant-api03-Zq8vN2xYpL4mK7rT1wB9cD3fG6hJ0sA5eU8iO2qW4zX7yV1nM3bR6tC9kP2lF5gH"
            "1BAD" = "x"
            "#
        );
        let joined = RunnerConfig::parse(&bad).unwrap_err().join("\n");
        for field in [
            "agent[0].set_env.ANTHROPIC_API_KEY: names a credential",
            "agent[0].set_env.HOME: also listed in env",
            "agent[0].set_env.NOTE: not a setting",
            "agent[0].set_env.1BAD: not an environment variable name",
        ] {
            assert!(joined.contains(field), "{field} missing from:\n{joined}");
        }
        assert!(
            !joined.contains("not-even") && !joined.contains("Zq8vN2"),
            "{joined}"
        );
        assert!(!joined.contains("TMPDIR"), "a path is a path: {joined}");
    }

    #[test]
    fn unknown_fields_and_styles_are_refused() {
        assert!(RunnerConfig::parse("[[agent]]\nid = \"a\"\nshell = \"bash -c\"\n").is_err());
        assert!(RunnerConfig::parse(
            "[[endpoint]]\nid=\"e\"\nstyle=\"gemini\"\nbase_url=\"https://x\"\nmodel=\"m\"\napi_key_env=\"K\"\n"
        )
        .is_err());
    }

    #[test]
    fn a_working_directory_must_resolve_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("repo")).unwrap();
        let roots = [root.canonicalize().unwrap()];
        assert!(cwd_under(&root.join("repo"), &roots).is_some());
        assert!(
            cwd_under(&root.join("repo/../.."), &roots).is_none(),
            "no escape through .."
        );
        assert!(cwd_under(dir.path(), &roots).is_none());
        assert!(cwd_under(&root.join("missing"), &roots).is_none());
    }

    #[test]
    fn a_reload_with_an_invalid_file_keeps_the_previous_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recourse.toml");
        std::fs::write(&path, valid(dir.path())).unwrap();
        let runners = Runners::new(RunnerConfig::load(&path).unwrap());
        std::fs::write(&path, "[[agent]]\nid = 1\n").unwrap();
        assert!(runners.reload(&path).is_err());
        assert_eq!(runners.current().agents.len(), 1);
        std::fs::write(&path, "").unwrap();
        runners.reload(&path).unwrap();
        assert!(runners.current().agents.is_empty());
    }
}

#[cfg(test)]
mod example {
    use super::*;

    /// The example README points people at parses (its roots swapped for one that exists).
    #[test]
    fn the_shipped_example_is_a_valid_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let text =
            include_str!("../../../recourse.example.toml").replace("/srv/work", dir.path().to_str().unwrap());
        let c = RunnerConfig::parse(&text).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(
            (c.agents.len(), c.endpoints.len()),
            (4, 2),
            "the example lists the four published agents and two endpoints"
        );
        let ids: Vec<&str> = c.agents.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["claude", "codex", "gemini", "qwen"]);
        // Their own retries are off, by value; their keys come by name.
        assert_eq!(c.agent("claude").unwrap().set_env["CLAUDE_CODE_MAX_RETRIES"], "0");
        assert!(c
            .agents
            .iter()
            .all(|a| a.env.iter().any(|e| e.ends_with("_API_KEY"))));
        assert_eq!(c.endpoint("haiku").map(|e| e.style), Some(ApiStyle::Anthropic));
    }
}
