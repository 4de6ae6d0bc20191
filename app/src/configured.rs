//! What the server's configuration file offers a candidate's target, and what the profile forms
//! say about it.
//!
//! Agents (`acp`) and endpoints (`http`) are configured on the server, never through the UI
//! (design contract 5), so the forms offer `simulated` and `external` always and `acp` / `http`
//! only when the configuration lists an agent / an endpoint, and a target of those kinds names
//! one of them as its runner. A target stored earlier may name a kind or a runner the
//! configuration no longer has: the forms show it as it is, marked as not configured, and say
//! what to do; they never change it on their own.
//!
//! The checks here are the server's (`policy::input` requires a runner for `acp` and `http`;
//! the profile service refuses one the configuration does not list), with the server's
//! messages, so a problem reads the same whether the form or the server finds it.

use policy::api::{DispatcherKind, RunnerOption};

/// The agents and endpoints of the server's configuration, as `list_runners` answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Configured {
    runners: Vec<RunnerOption>,
}

/// Why a target's kind or runner cannot be saved as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetProblem {
    /// `acp` or `http` while the configuration lists no agent / no endpoint at all.
    KindNotConfigured(DispatcherKind),
    /// `acp` or `http` without a runner.
    RunnerMissing,
    /// A runner the configuration does not list (for that kind).
    RunnerNotConfigured(DispatcherKind),
}

impl TargetProblem {
    /// What the person reads. The runner messages are the server's own.
    pub fn message(self) -> String {
        match self {
            TargetProblem::KindNotConfigured(kind) => format!(
                "This server's configuration lists no {}, so this candidate is never tried. Choose another \
                 dispatcher, or ask an operator to add one to the configuration file given to \
                 `recourse serve --config`.",
                plural(kind)
            ),
            TargetProblem::RunnerMissing => {
                "Choose the agent or endpoint (from the server's configuration) that runs this candidate.".to_owned()
            }
            TargetProblem::RunnerNotConfigured(kind) => format!(
                "The server's configuration has no {} with this id; choose one it lists, or ask an operator to add it.",
                runner_noun(kind)
            ),
        }
    }

    /// Whether the problem belongs on the runner select (otherwise on the dispatcher select).
    pub fn is_runner(self) -> bool {
        !matches!(self, TargetProblem::KindNotConfigured(_))
    }
}

/// Whether `kind` names a runner from the configuration.
pub const fn needs_runner(kind: DispatcherKind) -> bool {
    matches!(kind, DispatcherKind::Acp | DispatcherKind::Http)
}

/// "agent" or "endpoint".
pub const fn runner_noun(kind: DispatcherKind) -> &'static str {
    match kind {
        DispatcherKind::Http => "endpoint",
        _ => "agent",
    }
}

/// "ACP agents" or "HTTP endpoints".
const fn plural(kind: DispatcherKind) -> &'static str {
    match kind {
        DispatcherKind::Http => "HTTP endpoints",
        _ => "ACP agents",
    }
}

/// Where an operator learns how to configure agents and endpoints.
const WHERE: &str =
    "an operator adds them to the configuration file given to `recourse serve --config` (README, \"Agents and endpoints\")";

/// A runner as its option reads: "Claude Code (claude)", or the id alone.
pub fn runner_text(option: &RunnerOption) -> String {
    match &option.label {
        Some(label) if !label.trim().is_empty() => format!("{} ({})", label.trim(), option.id),
        _ => option.id.clone(),
    }
}

/// A dispatcher kind or runner the configuration does not list, as its option reads.
pub fn not_configured(text: &str) -> String {
    format!("{text} (not configured on this server)")
}

impl Configured {
    pub fn new(runners: Vec<RunnerOption>) -> Configured {
        Configured { runners }
    }

    /// The configured runners of `kind`, in the configuration's order.
    pub fn of(&self, kind: DispatcherKind) -> impl Iterator<Item = &RunnerOption> + '_ {
        self.runners.iter().filter(move |r| r.kind == kind)
    }

    /// The configured runner `id` of `kind`.
    pub fn find(&self, kind: DispatcherKind, id: &str) -> Option<&RunnerOption> {
        self.of(kind).find(|r| r.id == id)
    }

    /// Whether the server can run `kind` now: always for `simulated` and `external`; for `acp`
    /// and `http` when at least one agent / endpoint is configured.
    pub fn runs(&self, kind: DispatcherKind) -> bool {
        !needs_runner(kind) || self.of(kind).next().is_some()
    }

    /// The kinds a select offers, in the usual order: those the server runs, plus `current`
    /// (a stored kind it no longer runs stays visible, marked, instead of being replaced).
    pub fn offered(&self, current: DispatcherKind) -> Vec<DispatcherKind> {
        DispatcherKind::ALL
            .into_iter()
            .filter(|&k| self.runs(k) || k == current)
            .collect()
    }

    /// The runner a target of `kind` should name when the person picks that kind: `runner` if
    /// it is configured for `kind`, else the first configured one, else `runner` unchanged.
    pub fn runner_for(&self, kind: DispatcherKind, runner: &str) -> String {
        if !needs_runner(kind) || self.find(kind, runner.trim()).is_some() {
            return runner.to_owned();
        }
        self.of(kind)
            .next()
            .map_or_else(|| runner.to_owned(), |r| r.id.clone())
    }

    /// The server's checks on a target's kind and runner (blank runner: none).
    pub fn check(&self, kind: DispatcherKind, runner: &str) -> Result<(), TargetProblem> {
        if !needs_runner(kind) {
            return Ok(());
        }
        if !self.runs(kind) {
            return Err(TargetProblem::KindNotConfigured(kind));
        }
        let runner = runner.trim();
        if runner.is_empty() {
            return Err(TargetProblem::RunnerMissing);
        }
        match self.find(kind, runner) {
            Some(_) => Ok(()),
            None => Err(TargetProblem::RunnerNotConfigured(kind)),
        }
    }

    /// What a form says where the dispatcher is chosen when the server runs neither `acp` nor
    /// `http` (or only one of them); `None` when both are configured.
    pub fn missing_note(&self) -> Option<String> {
        match (self.runs(DispatcherKind::Acp), self.runs(DispatcherKind::Http)) {
            (false, false) => Some(format!(
                "No ACP agents or HTTP endpoints are configured on this server; {WHERE}."
            )),
            (false, true) => Some(format!(
                "No ACP agents are configured on this server, so acp is not offered; {WHERE}."
            )),
            (true, false) => Some(format!(
                "No HTTP endpoints are configured on this server, so http is not offered; {WHERE}."
            )),
            (true, true) => None,
        }
    }

    /// What a runner select's hint says about the runner chosen.
    pub fn runner_hint(&self, kind: DispatcherKind, runner: &str) -> String {
        match self.find(kind, runner.trim()) {
            Some(r) => {
                let parts: Vec<String> = [("provider", &r.provider_id), ("model", &r.model_id)]
                    .into_iter()
                    .filter_map(|(what, id)| id.as_ref().map(|id| format!("{what} {id}")))
                    .collect();
                if parts.is_empty() {
                    format!("From the server's configuration: {}.", runner_text(r))
                } else {
                    format!("From the server's configuration: {}.", parts.join(" · "))
                }
            }
            None if runner.trim().is_empty() => format!(
                "The {} of the server's configuration that runs this candidate.",
                runner_noun(kind)
            ),
            None => format!(
                "`{}` is not in this server's configuration now: this candidate is never tried until you choose \
                 a configured {} or an operator adds it back.",
                runner.trim(),
                runner_noun(kind)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::{
        api::{CandidateTarget, ProfileInput},
        document::ValidationCode,
        input::ValidatedProfile,
    };

    fn option(kind: DispatcherKind, id: &str, label: Option<&str>) -> RunnerOption {
        RunnerOption {
            kind,
            id: id.into(),
            label: label.map(Into::into),
            provider_id: Some("anthropic".into()),
            model_id: None,
        }
    }

    fn agents_only() -> Configured {
        Configured::new(vec![
            option(DispatcherKind::Acp, "claude", Some("Claude Code")),
            option(DispatcherKind::Acp, "gemini", None),
        ])
    }

    #[test]
    fn only_the_kinds_the_server_runs_are_offered_plus_a_stored_one() {
        use DispatcherKind::*;
        let none = Configured::default();
        assert_eq!(none.offered(External), [Simulated, External]);
        assert_eq!(
            none.offered(Acp),
            [Simulated, Acp, External],
            "a stored kind stays"
        );
        assert_eq!(agents_only().offered(Simulated), [Simulated, Acp, External]);
        let both = Configured::new(vec![option(Http, "mini", None), option(Acp, "claude", None)]);
        assert_eq!(both.offered(External), DispatcherKind::ALL);
    }

    #[test]
    fn the_page_says_what_is_not_configured_and_where_it_is_configured() {
        let none = Configured::default().missing_note().unwrap();
        assert!(none.starts_with("No ACP agents or HTTP endpoints are configured on this server;"));
        assert!(none.contains("`recourse serve --config`"));
        let no_http = agents_only().missing_note().unwrap();
        assert!(
            no_http.starts_with("No HTTP endpoints are configured on this server, so http is not offered;")
        );
        let both = Configured::new(vec![
            option(DispatcherKind::Http, "mini", None),
            option(DispatcherKind::Acp, "claude", None),
        ]);
        assert_eq!(both.missing_note(), None);
    }

    #[test]
    fn a_kind_or_runner_the_configuration_lacks_is_a_problem_on_its_select() {
        use DispatcherKind::*;
        let c = agents_only();
        assert_eq!(c.check(External, ""), Ok(()));
        assert_eq!(
            c.check(Simulated, "stale"),
            Ok(()),
            "only acp and http name a runner"
        );
        assert_eq!(c.check(Acp, " claude "), Ok(()));
        assert_eq!(c.check(Acp, ""), Err(TargetProblem::RunnerMissing));
        assert_eq!(c.check(Acp, "gone"), Err(TargetProblem::RunnerNotConfigured(Acp)));
        assert_eq!(
            c.check(Http, "claude"),
            Err(TargetProblem::KindNotConfigured(Http))
        );
        assert!(!TargetProblem::KindNotConfigured(Http).is_runner());
        assert!(TargetProblem::RunnerNotConfigured(Acp).is_runner());
        assert_eq!(
            TargetProblem::RunnerNotConfigured(Acp).message(),
            "The server's configuration has no agent with this id; choose one it lists, or ask an operator to add it."
        );
    }

    #[test]
    fn a_missing_runner_reads_as_the_server_says_it() {
        let mut target = CandidateTarget::external("a");
        target.dispatcher = DispatcherKind::Acp;
        let input = ProfileInput {
            name: "p".into(),
            kind: Default::default(),
            description: None,
            targets: vec![target],
            policy: serde_json::json!({"on_error": "try_next", "candidates": [{"id": "a"}]}),
            expected_revision: None,
            notifications: Vec::new(),
        };
        let errors = ValidatedProfile::parse(&input).unwrap_err();
        let at: Vec<_> = errors.at("targets[0].runner").collect();
        assert_eq!(at.len(), 1);
        assert_eq!(at[0].code, ValidationCode::Missing);
        assert_eq!(at[0].message, TargetProblem::RunnerMissing.message());
    }

    #[test]
    fn picking_a_kind_picks_a_configured_runner_of_it_and_keeps_a_good_one() {
        use DispatcherKind::*;
        let c = agents_only();
        assert_eq!(c.runner_for(Acp, ""), "claude");
        assert_eq!(c.runner_for(Acp, "gemini"), "gemini");
        assert_eq!(c.runner_for(Acp, "gone"), "claude");
        assert_eq!(
            c.runner_for(Http, "claude"),
            "claude",
            "nothing to pick: unchanged"
        );
        assert_eq!(c.runner_for(External, "x"), "x");
    }

    #[test]
    fn runners_read_by_label_and_id_and_an_unconfigured_one_says_so() {
        let c = agents_only();
        assert_eq!(
            runner_text(c.find(DispatcherKind::Acp, "claude").unwrap()),
            "Claude Code (claude)"
        );
        assert_eq!(
            runner_text(c.find(DispatcherKind::Acp, "gemini").unwrap()),
            "gemini"
        );
        assert_eq!(not_configured("gone"), "gone (not configured on this server)");
        assert_eq!(
            c.runner_hint(DispatcherKind::Acp, "claude"),
            "From the server's configuration: provider anthropic."
        );
        assert!(c
            .runner_hint(DispatcherKind::Acp, "gone")
            .starts_with("`gone` is not in this server's configuration now: this candidate is never tried"));
    }
}
