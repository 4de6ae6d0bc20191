//! The command line. Every flag of `serve` has an environment variable so the same binary
//! runs from a terminal, a service manager or a test harness.

use crate::replica::ReplicaId;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

/// Recourse keeps AI coding-agent work alive when providers fail.
#[derive(Debug, Parser)]
#[command(name = "recourse", version, propagate_version = true)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Pretty, env = "RECOURSE_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the web UI, the REST API and the route timers: alone on a SQLite file, or as one of
    /// several replicas on a PostgreSQL database.
    Serve(ServeArgs),
    /// Create the database if needed and apply pending migrations, then exit.
    Migrate(DatabaseArgs),
    /// Classify evidence envelopes: one envelope or JSON Lines in, one classification JSON line
    /// (with its `gate`) out per envelope.
    Classify(ClassifyArgs),
    /// The classifier catalogue.
    Catalogue {
        #[command(subcommand)]
        command: CatalogueCommand,
    },
    /// Accounts: people who sign in to the UI and the API.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// API tokens for scripts, adapters and external runners.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// The ACP agents of the configuration file.
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Recourse as an ACP agent for your editor, on standard input and output: each editor
    /// session is a route of `--profile` on the server at `--server`, whose agents this process
    /// starts (from `--config`) where the editor's files are. The API token comes from the
    /// environment variable `--token-env` names, never from an argument.
    Acp(AcpArgs),
    /// Runs an agent for `recourse acp` and stops its whole process group when `recourse acp`
    /// goes (internal).
    #[command(name = "__agent-guard", hide = true)]
    AgentGuard {
        command: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    /// The Recourse server, e.g. `http://127.0.0.1:3000`.
    #[arg(long, env = "RECOURSE_SERVER", default_value = "http://127.0.0.1:3000")]
    pub server: String,
    /// The profile whose candidates run the editor's prompts: its id, or its name.
    #[arg(long, env = "RECOURSE_PROFILE")]
    pub profile: String,
    /// The configuration file whose `[[agent]]` entries this process starts (the same ids as
    /// the server's configuration names).
    #[arg(long, env = "RECOURSE_CONFIG")]
    pub config: PathBuf,
    /// The environment variable that holds the API token (operate_routes, view_routes and
    /// run_dispatches, best scoped to the profile).
    #[arg(long, default_value = "RECOURSE_TOKEN", value_name = "NAME")]
    pub token_env: String,
    /// How long a lease on an attempt holds without a heartbeat, in seconds: how soon a killed
    /// `recourse acp`'s attempt stops for a person as ambiguous.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(5..=600))]
    pub lease_seconds: u64,
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Start every configured agent once, ask it `initialize`, and print what it says of itself
    /// (version, protocol version, authentication methods, `loadSession`, start time); exit
    /// non-zero naming each agent that does not start, does not speak ACP, or does not offer
    /// its configured `auth_method`.
    Check {
        /// The configuration file (`recourse serve --config`).
        #[arg(long, env = "RECOURSE_CONFIG")]
        config: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create an account (the first administrator: `recourse user add NAME --role admin`). The
    /// password is asked for on a terminal, else read from the first line of standard input;
    /// never give it as an argument.
    Add(UserAddArgs),
    /// List accounts: name, role, state.
    List(DatabaseArgs),
}

#[derive(Debug, Clone, Args)]
pub struct UserAddArgs {
    /// The account's name (letters, digits, `. _ @ -`).
    pub name: String,
    /// Its role: admin, profile_manager, operator, viewer, office, runner, or a custom role.
    #[arg(long)]
    pub role: String,
    #[command(flatten)]
    pub db: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an API token for an account and print its secret (shown once).
    Add(TokenAddArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TokenAddArgs {
    /// The account the token acts for; it never exceeds that account's permissions.
    #[arg(long)]
    pub account: String,
    /// What the token is for.
    #[arg(long)]
    pub name: String,
    /// Comma-separated permissions (manage_profiles, operate_routes, view_routes,
    /// assign_office, run_dispatches, admin), or `all` for everything the account's role grants.
    #[arg(long, value_delimiter = ',', required = true)]
    pub permissions: Vec<String>,
    /// Scope the token to this profile (repeat for several); without it, every profile.
    #[arg(long = "profile")]
    pub profiles: Vec<String>,
    /// Days until the token expires (1 to 365).
    #[arg(long, default_value_t = 30)]
    pub expires_in_days: u32,
    #[command(flatten)]
    pub db: DatabaseArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ClassifyArgs {
    /// A file of envelopes, or `-` for standard input.
    #[arg(default_value = "-")]
    pub input: PathBuf,
    /// Classify as of this instant (RFC 3339, e.g. `2026-11-30T08:00:00Z`) instead of now, so
    /// stored evidence re-classifies reproducibly: its timing hints are validated against
    /// this time, not the wall clock.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, Subcommand)]
pub enum CatalogueCommand {
    /// Validate the rules and every fixture under `<fixtures>/classifier/`; non-zero exit when
    /// anything is wrong.
    Check {
        /// The fixtures folder.
        #[arg(long, default_value = "fixtures")]
        fixtures: PathBuf,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// The database: a SQLite file path or `sqlite:` URL (created if missing), or a PostgreSQL
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` URL (the database must exist).
    #[arg(long, env = "RECOURSE_DATABASE", default_value = "recourse.db")]
    pub database: String,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "RECOURSE_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The server configuration file: the ACP agents and HTTP endpoints Recourse may run
    /// (README, "Agents and endpoints"). Reloaded on SIGHUP. Without it, only the simulated and
    /// external dispatchers are available.
    #[arg(long, env = "RECOURSE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Seed a demo workspace (simulated candidates and a few routes that wait, retry, switch
    /// and stop within a minute), and sign every visitor of the UI into the demo account
    /// (role profile_manager; a banner says so). Never on a server others can reach.
    #[arg(long, env = "RECOURSE_DEMO")]
    pub demo: bool,
    /// A reverse proxy whose `X-Forwarded-For` names the client (for the audit log and the
    /// login rate limits); repeat or comma-separate for several.
    #[arg(
        long = "trusted-proxy",
        env = "RECOURSE_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<IpAddr>,
    /// Another name (`HOST` or `HOST:PORT`) this server answers for, besides `localhost`,
    /// `*.localhost` and loopback addresses: the name a proxy reaches a loopback-bound server
    /// by. Repeat or comma-separate for several. On a loopback address, requests for any other
    /// `Host` get 421 (the DNS rebinding defence); on another address, the check applies only
    /// when this is given.
    #[arg(
        long = "allowed-host",
        env = "RECOURSE_ALLOWED_HOSTS",
        value_delimiter = ',',
        value_name = "HOST"
    )]
    pub allowed_hosts: Vec<String>,
    /// This process's name in logs and metrics (`replica_id` on every JSON log line, the
    /// `recourse_replica_info` metric): 1 to 64 ASCII letters, digits, `.`, `_`, `-`. Default:
    /// the host name and the process id (`HOSTNAME-PID`).
    #[arg(long, env = "RECOURSE_REPLICA_ID", value_name = "ID")]
    pub replica_id: Option<ReplicaId>,
    /// Test only: run on a manual clock starting at this UTC time, moved by
    /// `POST /api/v1/test/clock`.
    #[arg(long, hide = true)]
    pub test_clock: Option<DateTime<Utc>>,
    /// Test only: this process's own clock is off by this many seconds (a replica with a wrong
    /// clock; on PostgreSQL the server runs on the database's time anyway).
    #[arg(long, hide = true, allow_hyphen_values = true)]
    pub test_clock_skew_seconds: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_defaults_to_loopback_port_3000_and_a_local_database_file() {
        let cli = Cli::try_parse_from(["recourse", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(args.addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(args.db.database, "recourse.db");
        assert!(args.allowed_hosts.is_empty());
    }

    #[test]
    fn allowed_hosts_repeat_and_comma_separate() {
        let cli = Cli::try_parse_from([
            "recourse",
            "serve",
            "--allowed-host",
            "recourse.internal",
            "--allowed-host",
            "a.example,b.example:8443",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(
            args.allowed_hosts,
            ["recourse.internal", "a.example", "b.example:8443"]
        );
    }

    #[test]
    fn classify_takes_an_instant_to_classify_at() {
        let cli = Cli::try_parse_from([
            "recourse",
            "classify",
            "--now",
            "2026-11-30T08:00:00Z",
            "in.jsonl",
        ])
        .unwrap();
        let Command::Classify(args) = cli.command else {
            panic!("expected classify")
        };
        assert_eq!(args.now, Some("2026-11-30T08:00:00Z".parse().unwrap()));
        assert_eq!(args.input, PathBuf::from("in.jsonl"));
        let cli = Cli::try_parse_from(["recourse", "classify"]).unwrap();
        let Command::Classify(args) = cli.command else {
            panic!("expected classify")
        };
        assert_eq!(args.now, None);
    }

    #[test]
    fn a_bad_classify_instant_is_rejected_with_the_flag_named() {
        let err = Cli::try_parse_from(["recourse", "classify", "--now", "yesterday"]).unwrap_err();
        assert!(err.to_string().contains("--now"), "{err}");
    }

    #[test]
    fn serve_takes_a_replica_id_and_refuses_one_that_is_not_plain() {
        let cli = Cli::try_parse_from(["recourse", "serve", "--replica-id", "eu-1"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(args.replica_id.map(|r| r.to_string()), Some("eu-1".to_owned()));
        let err = Cli::try_parse_from(["recourse", "serve", "--replica-id", "a b"]).unwrap_err();
        assert!(err.to_string().contains("--replica-id"), "{err}");
        let cli = Cli::try_parse_from(["recourse", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("expected serve")
        };
        assert_eq!(args.replica_id, None, "resolved at start: host name and pid");
    }

    #[test]
    fn acp_takes_its_server_profile_and_config_and_never_a_token() {
        let cli = Cli::try_parse_from([
            "recourse",
            "acp",
            "--server",
            "http://127.0.0.1:3000",
            "--profile",
            "coding",
            "--config",
            "/etc/recourse.toml",
        ])
        .unwrap();
        let Command::Acp(args) = cli.command else {
            panic!("expected acp")
        };
        assert_eq!(args.profile, "coding");
        assert_eq!(args.token_env, "RECOURSE_TOKEN");
        assert_eq!(args.lease_seconds, 30);
        assert!(Cli::try_parse_from([
            "recourse",
            "acp",
            "--profile",
            "p",
            "--config",
            "c",
            "--token",
            "rct_x"
        ])
        .is_err());
    }

    /// README's editor snippets (Zed, JetBrains, CodeCompanion, avante) start a command line
    /// `recourse acp` accepts.
    #[test]
    fn the_readme_editor_snippets_are_command_lines_acp_accepts() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("## Use Recourse from your editor")
            .expect("the section");
        let section = &readme[start..];
        let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
        let mut found = 0;
        for line in section[..end].lines() {
            let line = line.trim();
            // `"args": ["acp", ...]` (JSON), `args = { "acp", ... }` and
            // `default = { "recourse", "acp", ... }` (Lua).
            let Some(list) = line
                .strip_prefix("\"args\": [")
                .or_else(|| line.strip_prefix("args = {"))
                .or_else(|| line.strip_prefix("default = { \"recourse\","))
            else {
                continue;
            };
            let words = list.split('"').skip(1).step_by(2);
            let cli = Cli::try_parse_from(std::iter::once("recourse").chain(words))
                .unwrap_or_else(|e| panic!("{line}: {e}"));
            let Command::Acp(args) = cli.command else {
                panic!("{line} is not `recourse acp`")
            };
            assert_eq!(args.profile, "coding", "{line}");
            found += 1;
        }
        assert_eq!(found, 4, "Zed, JetBrains, CodeCompanion, avante");
    }

    #[test]
    fn a_bad_address_is_rejected_with_the_flag_named() {
        let err = Cli::try_parse_from(["recourse", "serve", "--addr", "nowhere"]).unwrap_err();
        assert!(err.to_string().contains("--addr"), "{err}");
    }
}
