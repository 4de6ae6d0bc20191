//! The notification part of the server configuration file: the channels an operator offers
//! (`[[channel]]`) and how deliveries behave (`[notify]`). Parsed with the rest of the file
//! (`crate::config`), every problem named by entry and field, never by value; reloaded with it
//! on SIGHUP.
//!
//! ```toml
//! [notify]
//! public_url = "https://recourse.example.com"  # links in messages; without it, links are paths
//! allow_networks = ["10.20.0.0/16"]             # receivers on these non-public addresses are allowed
//! max_attempts = 12                             # then the delivery is dead
//! backoff_initial_ms = 1000                     # doubling after each failed attempt ...
//! backoff_max_ms = 3600000                      # ... up to this
//! keep_days = 30                                # events settled everywhere are removed after this
//!
//! [[channel]]
//! id = "ops"
//! kind = "webhook"                              # a JSON POST, Standard Webhooks signed
//! url = "https://hooks.example.com/recourse"
//! secret_env = "RECOURSE_OPS_WEBHOOK_SECRET"    # its value: whsec_ and base64
//! format = "standard"                           # or "slack": an incoming-webhook body
//! timeout_seconds = 10
//!
//! [[channel]]
//! id = "oncall"
//! kind = "email"
//! host = "smtp.example.com"
//! port = 587
//! security = "starttls"                         # "tls" (implicit, port 465), or "none" (loopback only)
//! username_env = "SMTP_USER"
//! password_env = "SMTP_PASSWORD"
//! from = "Recourse <recourse@example.com>"
//! to = ["oncall@example.com"]
//! ```
//!
//! A webhook's URL is treated as a secret too (a Slack URL is one): it is never logged or
//! shown, only the channel's id.

use super::networks::AllowList;
use policy::{input::check_identifier, notify::IN_APP_CHANNEL};
use serde::Deserialize;
use std::{collections::HashSet, time::Duration};

/// The channels and delivery settings of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyConfig {
    /// The base of links in messages (`{public_url}/routes/{id}`); `None`: links are paths.
    pub public_url: Option<String>,
    /// Non-public networks receivers may be on.
    pub allow: AllowList,
    pub max_attempts: u32,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    /// How long an event is kept once nothing is left to send of it (every delivery delivered
    /// or dead): then it leaves the in-app list and its deliveries leave the operators' view.
    pub keep_days: u32,
    pub channels: Vec<ChannelConfig>,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            public_url: None,
            allow: AllowList::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff_initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            backoff_max_ms: DEFAULT_BACKOFF_MAX_MS,
            keep_days: DEFAULT_KEEP_DAYS,
            channels: Vec::new(),
        }
    }
}

const DEFAULT_MAX_ATTEMPTS: u32 = 12;
const DEFAULT_BACKOFF_INITIAL_MS: u64 = 1_000;
const DEFAULT_BACKOFF_MAX_MS: u64 = 3_600_000;
const DEFAULT_KEEP_DAYS: u32 = 30;
const MAX_ATTEMPTS: u32 = 100;
/// Ten years: a longer retention is no retention.
const MAX_KEEP_DAYS: u32 = 3_650;
const MAX_BACKOFF_MS: u64 = 86_400_000;
const MAX_CHANNEL_TIMEOUT_SECONDS: u64 = 120;
const MAX_RECIPIENTS: usize = 32;

/// One configured channel.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelConfig {
    pub id: String,
    pub label: Option<String>,
    /// How long one attempt may take, connecting included.
    pub timeout: Duration,
    pub kind: ChannelKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChannelKind {
    Webhook(WebhookConfig),
    Email(EmailConfig),
}

impl ChannelKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelKind::Webhook(_) => "webhook",
            ChannelKind::Email(_) => "email",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    pub url: reqwest::Url,
    /// The NAME of the variable holding the signing secret (`whsec_...`).
    pub secret_env: Option<String>,
    pub format: WebhookFormat,
}

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// The event as JSON (`{"type", "timestamp", "data"}`), signed per Standard Webhooks.
    Standard,
    /// A Slack-compatible incoming-webhook body (`{"text": ...}`); signed too when a secret
    /// is configured.
    Slack,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmailConfig {
    pub host: String,
    pub port: u16,
    pub security: SmtpSecurity,
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    pub from: String,
    pub to: Vec<String>,
}

/// How the SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmtpSecurity {
    /// Plain connection upgraded with STARTTLS (required, never skipped).
    Starttls,
    /// TLS from the first byte (implicit TLS, "SMTPS").
    Tls,
    /// No TLS: only to a relay on this machine (a loopback host).
    None,
}

impl NotifyConfig {
    /// The channel with this id.
    pub fn channel(&self, id: &str) -> Option<&ChannelConfig> {
        self.channels.iter().find(|c| c.id == id)
    }

    /// Whether a rule may name `id`: the in-app list, or a configured channel.
    pub fn has_channel(&self, id: &str) -> bool {
        id == IN_APP_CHANNEL || self.channel(id).is_some()
    }

    /// How long an event is kept once every delivery of it is settled.
    pub fn keep(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::days(i64::from(self.keep_days))
    }

    /// The schedule of a failed delivery's next attempts.
    pub fn schedule(&self) -> policy::notify::DeliverySchedule {
        policy::notify::DeliverySchedule {
            initial_ms: self.backoff_initial_ms,
            max_ms: self.backoff_max_ms,
            max_attempts: self.max_attempts,
        }
    }

    /// Checks what only the environment can say: every secret variable a channel names is set
    /// (and a webhook secret has the `whsec_` form). Problems name the entry, never a value.
    pub fn check_environment(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            match &c.kind {
                ChannelKind::Webhook(w) => {
                    if let Some(name) = &w.secret_env {
                        if let Err(why) = super::secret::secret_from_env(name) {
                            problems.push(format!("channel[{i}].secret_env: {why}"));
                        }
                    }
                }
                ChannelKind::Email(e) => {
                    for (field, name) in [
                        ("username_env", &e.username_env),
                        ("password_env", &e.password_env),
                    ] {
                        if let Some(name) = name {
                            if !std::env::var(name).is_ok_and(|v| !v.is_empty()) {
                                problems.push(format!("channel[{i}].{field}: the variable is not set"));
                            }
                        }
                    }
                }
            }
        }
        problems
    }
}

/// The `[notify]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NotifySection {
    #[serde(default)]
    public_url: Option<String>,
    #[serde(default)]
    allow_networks: Vec<String>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    backoff_initial_ms: Option<u64>,
    #[serde(default)]
    backoff_max_ms: Option<u64>,
    #[serde(default)]
    keep_days: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookEntry {
    id: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    label: Option<String>,
    url: String,
    #[serde(default)]
    secret_env: Option<String>,
    #[serde(default = "default_format")]
    format: WebhookFormat,
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailEntry {
    id: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    label: Option<String>,
    host: String,
    #[serde(default)]
    port: Option<u16>,
    security: SmtpSecurity,
    #[serde(default)]
    username_env: Option<String>,
    #[serde(default)]
    password_env: Option<String>,
    from: String,
    to: Vec<String>,
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
}

fn default_format() -> WebhookFormat {
    WebhookFormat::Standard
}

fn default_timeout() -> u64 {
    10
}

/// Parses `[notify]` and the `[[channel]]` entries; every problem is pushed to `problems`.
pub(crate) fn parse(
    section: Option<NotifySection>,
    channels: Vec<toml::Value>,
    problems: &mut Vec<String>,
) -> NotifyConfig {
    let section = section.unwrap_or_default();
    let mut config = NotifyConfig::default();
    if let Some(url) = section.public_url {
        match reqwest::Url::parse(&url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() && u.username().is_empty() => {
                config.public_url = Some(url.trim_end_matches('/').to_owned());
            }
            _ => problems.push("notify.public_url: an http:// or https:// address of this server".to_owned()),
        }
    }
    config.allow = AllowList::parse(&section.allow_networks, problems);
    if let Some(n) = section.max_attempts {
        if (1..=MAX_ATTEMPTS).contains(&n) {
            config.max_attempts = n;
        } else {
            problems.push(format!("notify.max_attempts: between 1 and {MAX_ATTEMPTS}"));
        }
    }
    if let Some(ms) = section.backoff_initial_ms {
        if (1..=MAX_BACKOFF_MS).contains(&ms) {
            config.backoff_initial_ms = ms;
        } else {
            problems.push(format!(
                "notify.backoff_initial_ms: between 1 and {MAX_BACKOFF_MS}"
            ));
        }
    }
    if let Some(ms) = section.backoff_max_ms {
        if (1..=MAX_BACKOFF_MS).contains(&ms) {
            config.backoff_max_ms = ms;
        } else {
            problems.push(format!("notify.backoff_max_ms: between 1 and {MAX_BACKOFF_MS}"));
        }
    }
    if let Some(days) = section.keep_days {
        if (1..=MAX_KEEP_DAYS).contains(&days) {
            config.keep_days = days;
        } else {
            problems.push(format!("notify.keep_days: between 1 and {MAX_KEEP_DAYS}"));
        }
    }
    if config.backoff_max_ms < config.backoff_initial_ms {
        problems.push("notify.backoff_max_ms: at least backoff_initial_ms".to_owned());
    }
    let mut ids = HashSet::new();
    for (i, entry) in channels.into_iter().enumerate() {
        let at = |field: &str| format!("channel[{i}].{field}");
        let kind = entry.get("kind").and_then(toml::Value::as_str).map(str::to_owned);
        let parsed = match kind.as_deref() {
            Some("webhook") => entry
                .try_into::<WebhookEntry>()
                .map_err(|e| shape(&e))
                .map(|w| webhook(w, &at, problems)),
            Some("email") => entry
                .try_into::<EmailEntry>()
                .map_err(|e| shape(&e))
                .map(|m| email(m, &at, problems)),
            Some(_) => Err("unknown channel kind; use \"webhook\" or \"email\"".to_owned()),
            None => Err("missing `kind` (\"webhook\" or \"email\")".to_owned()),
        };
        match parsed {
            Ok(channel) => {
                if channel.id == IN_APP_CHANNEL {
                    problems.push(format!(
                        "{}: `{IN_APP_CHANNEL}` is the built-in in-app channel; choose another id",
                        at("id")
                    ));
                } else if let Err(e) = check_identifier(&channel.id, "the id") {
                    problems.push(format!("{}: {}", at("id"), e.message));
                } else if !ids.insert(channel.id.clone()) {
                    problems.push(format!("{}: another channel already has this id", at("id")));
                }
                if let Some(label) = &channel.label {
                    if label.trim().is_empty() || label.chars().count() > policy::limits::MAX_LABEL_CHARS {
                        problems.push(format!(
                            "{}: 1 to {} characters",
                            at("label"),
                            policy::limits::MAX_LABEL_CHARS
                        ));
                    }
                }
                config.channels.push(channel);
            }
            Err(why) => problems.push(format!("channel[{i}]: {why}")),
        }
    }
    config
}

/// What is wrong with an entry's shape, without the values it holds.
fn shape(e: &toml::de::Error) -> String {
    policy::input::shape_message(e.message())
}

fn timeout(seconds: u64, at: &dyn Fn(&str) -> String, problems: &mut Vec<String>) -> Duration {
    if !(1..=MAX_CHANNEL_TIMEOUT_SECONDS).contains(&seconds) {
        problems.push(format!(
            "{}: between 1 and {MAX_CHANNEL_TIMEOUT_SECONDS} seconds",
            at("timeout_seconds")
        ));
    }
    Duration::from_secs(seconds.clamp(1, MAX_CHANNEL_TIMEOUT_SECONDS))
}

fn env_name(name: &Option<String>, field: &str, at: &dyn Fn(&str) -> String, problems: &mut Vec<String>) {
    if let Some(n) = name {
        if !policy::input::is_env_name(n) {
            problems.push(format!("{}: not an environment variable name", at(field)));
        }
    }
}

fn webhook(w: WebhookEntry, at: &dyn Fn(&str) -> String, problems: &mut Vec<String>) -> ChannelConfig {
    let url = match reqwest::Url::parse(&w.url) {
        Ok(u)
            if matches!(u.scheme(), "http" | "https")
                && u.host_str().is_some_and(|h| !h.is_empty())
                && u.username().is_empty()
                && u.password().is_none()
                && u.fragment().is_none() =>
        {
            Some(u)
        }
        _ => {
            problems.push(format!(
                "{}: an http:// or https:// address with a host, without credentials or fragment",
                at("url")
            ));
            None
        }
    };
    env_name(&w.secret_env, "secret_env", at, problems);
    if w.format == WebhookFormat::Standard && w.secret_env.is_none() {
        problems.push(format!(
            "{}: a standard webhook is signed; name the variable that holds its secret (whsec_...)",
            at("secret_env")
        ));
    }
    ChannelConfig {
        id: w.id,
        label: w.label,
        timeout: timeout(w.timeout_seconds, at, problems),
        kind: ChannelKind::Webhook(WebhookConfig {
            // A placeholder only when the entry was refused (the configuration is then too).
            url: url.unwrap_or_else(|| reqwest::Url::parse("http://invalid.invalid/").expect("a valid URL")),
            secret_env: w.secret_env,
            format: w.format,
        }),
    }
}

fn email(m: EmailEntry, at: &dyn Fn(&str) -> String, problems: &mut Vec<String>) -> ChannelConfig {
    let host_ok = !m.host.is_empty()
        && m.host.len() <= 253
        && m.host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !host_ok {
        problems.push(format!("{}: a host name or an IP address", at("host")));
    }
    if m.security == SmtpSecurity::None && !super::networks::is_loopback_host(&m.host) {
        problems.push(format!(
            "{}: \"none\" (no TLS) only for a relay on this machine (localhost or a loopback address); use \"starttls\" or \"tls\"",
            at("security")
        ));
    }
    env_name(&m.username_env, "username_env", at, problems);
    env_name(&m.password_env, "password_env", at, problems);
    if m.username_env.is_some() != m.password_env.is_some() {
        problems.push(format!(
            "{}: give both username_env and password_env, or neither",
            at("password_env")
        ));
    }
    if m.from.parse::<lettre::message::Mailbox>().is_err() {
        problems.push(format!(
            "{}: an e-mail address (optionally with a name)",
            at("from")
        ));
    }
    if m.to.is_empty() || m.to.len() > MAX_RECIPIENTS {
        problems.push(format!("{}: 1 to {MAX_RECIPIENTS} addresses", at("to")));
    }
    for (r, to) in m.to.iter().enumerate() {
        if to.parse::<lettre::message::Mailbox>().is_err() {
            problems.push(format!("{}: an e-mail address", at(&format!("to[{r}]"))));
        }
    }
    let port = m.port.unwrap_or(match m.security {
        SmtpSecurity::Starttls => 587,
        SmtpSecurity::Tls => 465,
        SmtpSecurity::None => 25,
    });
    ChannelConfig {
        id: m.id,
        label: m.label,
        timeout: timeout(m.timeout_seconds, at, problems),
        kind: ChannelKind::Email(EmailConfig {
            host: m.host,
            port,
            security: m.security,
            username_env: m.username_env,
            password_env: m.password_env,
            from: m.from,
            to: m.to,
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::RunnerConfig;

    #[test]
    fn channels_parse_with_their_defaults() {
        let c = RunnerConfig::parse(
            r#"
            [notify]
            public_url = "https://recourse.example.com/"
            allow_networks = ["10.0.0.0/8"]

            [[channel]]
            id = "ops"
            kind = "webhook"
            url = "https://hooks.example.com/x?token=abc"
            secret_env = "OPS_SECRET"

            [[channel]]
            id = "chat"
            kind = "webhook"
            url = "https://hooks.slack.com/services/T/B/X"
            format = "slack"

            [[channel]]
            id = "mail"
            kind = "email"
            host = "smtp.example.com"
            security = "starttls"
            from = "Recourse <recourse@example.com>"
            to = ["oncall@example.com"]
            "#,
        )
        .unwrap();
        let n = &c.notify;
        assert_eq!(n.public_url.as_deref(), Some("https://recourse.example.com"));
        assert_eq!(n.channels.len(), 3);
        assert_eq!(n.channel("mail").map(|m| m.kind.as_str()), Some("email"));
        assert!(n.has_channel("in_app") && n.has_channel("ops") && !n.has_channel("pager"));
        assert_eq!(n.keep_days, 30, "the default retention");
        match &n.channel("mail").unwrap().kind {
            super::ChannelKind::Email(e) => assert_eq!(e.port, 587),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_channels_are_named_by_entry_and_field_without_their_values() {
        let problems = RunnerConfig::parse(
            r#"
            [notify]
            allow_networks = ["not-a-network"]
            backoff_initial_ms = 5000
            backoff_max_ms = 10
            keep_days = 0

            [[channel]]
            id = "pager"
            kind = "pagerduty"

            [[channel]]
            id = "in_app"
            kind = "webhook"
            url = "ftp://user:sk-live-secretvalue@example.com"
            secret_env = "sk-live-secretvalue"

            [[channel]]
            id = "mail"
            kind = "email"
            host = "smtp.example.com"
            security = "none"
            from = "nobody"
            to = []

            [[channel]]
            id = "x"
            kind = "webhook"
            url = "https://example.com"
            colour = "sk-live-secretvalue"
            "#,
        )
        .unwrap_err();
        let joined = problems.join("\n");
        for field in [
            "notify.allow_networks[0]",
            "notify.backoff_max_ms",
            "notify.keep_days: between 1 and 3650",
            "channel[0]: unknown channel kind",
            "channel[1].id",
            "channel[1].url",
            "channel[1].secret_env",
            "channel[2].security",
            "channel[2].from",
            "channel[2].to",
            "channel[3]: unknown field `colour`",
        ] {
            assert!(joined.contains(field), "{field} missing from:\n{joined}");
        }
        assert!(!joined.contains("secretvalue"), "{joined}");
    }
}
