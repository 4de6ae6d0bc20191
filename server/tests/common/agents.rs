//! The published ACP agents as the tests run them: Claude Code's adapter
//! (`@zed-industries/claude-agent-acp`), Codex's (`@zed-industries/codex-acp`), Gemini CLI
//! (`gemini --acp`) and Qwen Code (`qwen --acp`), installed by `./dev` from npm at pinned
//! versions (`scripts/agents.sh`) into the folder `RECOURSE_AGENTS_DIR` names.
//!
//! A test that needs them calls [`dir`] first: without `RECOURSE_AGENTS_DIR` the test is
//! reported skipped and counted like every other skip (`requires.rs`) and returns; with
//! `RECOURSE_REQUIRE_AGENTS=1` (what `./dev test`, and so CI, sets) that is a failure instead,
//! inside the test itself.
//!
//! Each agent is pointed at the fake provider through its own variables or config file, as an
//! operator would (README, "ACP agents"): a `HOME` of its own in a temp dir holding its settings
//! (telemetry, usage statistics and auto-update off; Codex's custom provider with
//! `wire_api = "responses"`; Gemini's and Qwen's auth type), the provider's base URL, an
//! explicit model, and the agent's own retries shortened to what README recommends
//! ([`Published::retry_settings`]). Keys come by name only (`env`), from dummy values this
//! process sets once ([`set_dummy_keys`]); loopback only.

use super::provider::FakeProvider;
use serde_json::json;
use std::{
    path::{Path, PathBuf},
    sync::Once,
};

/// The folder whose `node_modules/.bin/` holds the four agents, or `None` when the run has
/// none: the test is then recorded as skipped (`requires.rs`, need `agents`), and fails instead
/// under `RECOURSE_REQUIRE_AGENTS=1`.
pub fn dir(_test: &str) -> Option<PathBuf> {
    if !super::requires::check(super::requires::Need::Agents) {
        return None;
    }
    let d = PathBuf::from(std::env::var_os("RECOURSE_AGENTS_DIR")?);
    for b in Published::ALL {
        let bin = d.join("node_modules/.bin").join(b.bin());
        assert!(
            bin.exists(),
            "RECOURSE_AGENTS_DIR has no {} (run scripts/agents.sh install)",
            bin.display()
        );
    }
    Some(d)
}

/// The dummy keys the agents' configurations name (`env`), set once in this process before
/// any agent starts. The fake provider checks no key.
pub fn set_dummy_keys() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (name, value) in [
            ("ANTHROPIC_API_KEY", "sk-ant-fake-0000"),
            ("OPENAI_API_KEY", "sk-fake-0000"),
            ("GEMINI_API_KEY", "fake-gemini-0000"),
        ] {
            // Edition 2021: safe to call; done once, before any agent process is spawned.
            std::env::set_var(name, value);
        }
    });
}

/// One of the published agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    Claude,
    Codex,
    Gemini,
    Qwen,
}

impl Published {
    pub const ALL: [Published; 4] = [
        Published::Claude,
        Published::Codex,
        Published::Gemini,
        Published::Qwen,
    ];

    /// Its executable under `node_modules/.bin/`.
    pub fn bin(self) -> &'static str {
        match self {
            Published::Claude => "claude-agent-acp",
            Published::Codex => "codex-acp",
            Published::Gemini => "gemini",
            Published::Qwen => "qwen",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Published::Claude => "claude",
            Published::Codex => "codex",
            Published::Gemini => "gemini",
            Published::Qwen => "qwen",
        }
    }

    /// The provider id evidence and circuits use for it.
    pub fn provider_id(self) -> &'static str {
        match self {
            Published::Claude => "anthropic",
            Published::Codex => "openai",
            Published::Gemini => "google",
            Published::Qwen => "qwen",
        }
    }

    /// The model it is told to use (one its own catalogue knows: Codex announces an unknown
    /// one in an `agent_message_chunk`, which reads as output).
    pub fn model(self) -> &'static str {
        match self {
            Published::Claude => "claude-sonnet-4-6",
            Published::Codex => "gpt-5.4-mini",
            Published::Gemini => "gemini-2.5-flash",
            Published::Qwen => "qwen3-coder-plus",
        }
    }

    /// README's recommended settings for its own retries (so its retries do not stack under
    /// Recourse's policy): Claude's `CLAUDE_CODE_MAX_RETRIES`, Codex's provider
    /// `request_max_retries` and `stream_max_retries`, Gemini's `general.maxAttempts`, Qwen's
    /// `model.generationConfig.maxRetries`.
    /// Whether its loaded session still holds a failed turn's partial answer, so a retry may
    /// continue there (`resume_after_output`): Claude Code's adapter, as the matrix's mid-stream
    /// cell shows (the retry's request carries the partial answer). Codex and Qwen Code load
    /// the session without it, and Gemini CLI's retry in it never reaches the provider.
    pub fn resumes_after_output(self) -> bool {
        self == Published::Claude
    }

    pub fn retry_settings(self) -> &'static str {
        match self {
            Published::Claude => "CLAUDE_CODE_MAX_RETRIES=0",
            Published::Codex => "request_max_retries = 0, stream_max_retries = 0",
            Published::Gemini => "general.maxAttempts = 1",
            Published::Qwen => "model.generationConfig.maxRetries = 0",
        }
    }

    /// Writes its settings into `home` (a fresh folder) and returns its `[[agent]]` table:
    /// `id`, pointed at `base_url` (the fake provider's prefix for it), working under `root`,
    /// with these `[agent.timeouts]` lines; with `timer_scale`, the agent's own timers of a
    /// second or more fire that many times sooner (a Node agent: `scaled-timers.cjs`, loaded
    /// through NODE_OPTIONS), for the cells where its own retry waits are all that takes time.
    #[allow(clippy::too_many_arguments)]
    pub fn toml(
        self,
        agents: &Path,
        id: &str,
        base_url: &str,
        home: &Path,
        root: &Path,
        timeouts: &str,
        timer_scale: Option<u32>,
    ) -> String {
        std::fs::create_dir_all(home).unwrap();
        let bin = agents.join("node_modules/.bin").join(self.bin());
        // Its temporary files too (Gemini CLI writes an error report there at every failed
        // request): in its own folder, removed with the test's, never the machine's /tmp.
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut set_env = vec![
            ("HOME", home.to_str().unwrap().to_owned()),
            ("TMPDIR", tmp.to_str().unwrap().to_owned()),
        ];
        if let Some(scale) = timer_scale {
            assert!(self != Published::Codex, "Codex's adapter is not a Node program");
            let preload = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/scaled-timers.cjs");
            set_env.push(("NODE_OPTIONS", format!("--require \"{preload}\"")));
            set_env.push(("RECOURSE_TIMER_SCALE", scale.to_string()));
        }
        let (args, env, auth): (&[&str], &[&str], Option<&str>) = match self {
            Published::Claude => {
                for (k, v) in [
                    ("ANTHROPIC_BASE_URL", base_url),
                    ("ANTHROPIC_MODEL", self.model()),
                    ("CLAUDE_CODE_MAX_RETRIES", "0"),
                    ("DISABLE_TELEMETRY", "1"),
                    ("DISABLE_AUTOUPDATER", "1"),
                    ("DISABLE_ERROR_REPORTING", "1"),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ] {
                    set_env.push((k, v.to_owned()));
                }
                (&[], &["PATH", "ANTHROPIC_API_KEY"], None)
            }
            Published::Codex => {
                let codex = home.join(".codex");
                std::fs::create_dir_all(&codex).unwrap();
                std::fs::write(
                    codex.join("config.toml"),
                    format!(
                        "model = {model:?}\nmodel_provider = \"fake\"\ncheck_for_update_on_startup = false\n\
                         [model_providers.fake]\nname = \"fake\"\nbase_url = \"{base_url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
                         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\
                         [analytics]\nenabled = false\n",
                        model = self.model()
                    ),
                )
                .unwrap();
                (&[], &["PATH", "OPENAI_API_KEY"], None)
            }
            Published::Gemini => {
                let dot = home.join(".gemini");
                std::fs::create_dir_all(&dot).unwrap();
                let settings = json!({
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true, "maxAttempts": 1},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "security": {"auth": {"selectedType": "gemini-api-key"}}});
                std::fs::write(dot.join("settings.json"), settings.to_string()).unwrap();
                set_env.push(("GOOGLE_GEMINI_BASE_URL", base_url.to_owned()));
                set_env.push(("GEMINI_MODEL", self.model().to_owned()));
                (&["--acp"], &["PATH", "GEMINI_API_KEY"], Some("gemini-api-key"))
            }
            Published::Qwen => {
                let dot = home.join(".qwen");
                std::fs::create_dir_all(&dot).unwrap();
                let settings = json!({
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "security": {"auth": {"selectedType": "openai"}},
                    "model": {"generationConfig": {"maxRetries": 0}}});
                std::fs::write(dot.join("settings.json"), settings.to_string()).unwrap();
                set_env.push(("OPENAI_BASE_URL", format!("{base_url}/v1")));
                set_env.push(("OPENAI_MODEL", self.model().to_owned()));
                (&["--acp"], &["PATH", "OPENAI_API_KEY"], None)
            }
        };
        let list = |items: &[&str]| {
            items
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut t = format!(
            "[[agent]]\nid = {id:?}\ncommand = {bin:?}\nargs = [{args}]\nallowed_roots = [{root:?}]\n\
             env = [{env}]\nprovider_id = {provider:?}\nmodel_id = {model:?}\n",
            bin = bin.to_str().unwrap(),
            args = list(args),
            root = root.to_str().unwrap(),
            env = list(env),
            provider = self.provider_id(),
            model = self.model(),
        );
        if let Some(a) = auth {
            t.push_str(&format!("auth_method = {a:?}\n"));
        }
        if self.resumes_after_output() {
            t.push_str("resume_after_output = true\n");
        }
        t.push_str("[agent.set_env]\n");
        for (k, v) in set_env {
            t.push_str(&format!("{k} = {v:?}\n"));
        }
        t.push_str("[agent.timeouts]\n");
        t.push_str(timeouts);
        t
    }
}

/// A fake provider for the agents, started on this runtime.
pub async fn provider() -> FakeProvider {
    FakeProvider::start().await
}
