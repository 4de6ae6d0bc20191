//! The profile editor's form state, and the conversions between what a person types (a number
//! and a unit) and the policy document (whole seconds).
//!
//! Why a separate draft: the form must hold half-typed text ("1.", "", "9999") while the person
//! types, show the exact message the server would give for it, and still compute a preview
//! whenever the text is valid. The pure functions here do the conversions and are unit tested;
//! [`ClassDraft`] and [`CandidateDraft`] wrap them in signals for the components.
//!
//! Validation is `policy`'s, field by field ([`validate_number_text`],
//! [`validate_candidate_id`]): a duration typed in minutes is converted to seconds first, so
//! "2 minutes" and "120 seconds" get identical answers and identical messages. Cross-field
//! checks (duplicate ids, candidate count) are the server's; their errors come back with a path
//! and land on the field it names.

use crate::configured::{needs_runner, Configured, TargetProblem};
use leptos::prelude::*;
use policy::{
    api::{CandidateTarget, DispatcherKind, SimulatedOutcome, SimulatedStep},
    class::ErrorClass,
    document::{
        validate_candidate_id, validate_number_text, CandidatePolicy, ClassPolicy, FieldError, NumberField,
        OnExhausted, PolicyDocument, RetryPolicy, ValidatedClassPolicy, WaitForResetPolicy,
    },
    input::check_identifier,
    limits::{
        POLICY_DOCUMENT_VERSION, SUGGESTED_INITIAL_INTERVAL_SECONDS, SUGGESTED_MAX_RETRIES,
        SUGGESTED_MAX_WAIT_SECONDS,
    },
};

/// A unit a duration can be typed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    Seconds,
    Minutes,
    Hours,
    Days,
}

impl Unit {
    /// Units offered for the initial interval (at most one hour).
    pub const FOR_INTERVAL: [Unit; 3] = [Unit::Seconds, Unit::Minutes, Unit::Hours];
    /// Units offered for the maximum wait (up to seven days).
    pub const FOR_WAIT: [Unit; 4] = [Unit::Seconds, Unit::Minutes, Unit::Hours, Unit::Days];

    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Seconds => 1,
            Unit::Minutes => 60,
            Unit::Hours => 3_600,
            Unit::Days => 86_400,
        }
    }

    /// The `<option>` value.
    pub const fn key(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Minutes => "minutes",
            Unit::Hours => "hours",
            Unit::Days => "days",
        }
    }

    pub fn parse(key: &str) -> Option<Unit> {
        Unit::FOR_WAIT.into_iter().find(|u| u.key() == key)
    }

    /// The largest of `allowed` that expresses `seconds` as a whole number (seconds for zero).
    pub fn best_for(seconds: u64, allowed: &[Unit]) -> Unit {
        allowed
            .iter()
            .rev()
            .copied()
            .find(|u| seconds != 0 && seconds.is_multiple_of(u.seconds()))
            .unwrap_or(Unit::Seconds)
    }
}

/// `seconds` written in `unit` (exact, because the unit came from [`Unit::best_for`]).
pub fn text_in_unit(seconds: u64, unit: Unit) -> String {
    let whole = seconds / unit.seconds();
    if seconds.is_multiple_of(unit.seconds()) {
        whole.to_string()
    } else {
        // Not reachable through `best_for`; keep the value exact rather than round it.
        format!("{}", seconds as f64 / unit.seconds() as f64)
    }
}

/// What a person typed in `unit`, rewritten as a number of seconds for the policy validator.
/// Text that is not a number, or not finite, passes through unchanged so the validator gives
/// its own message; `1.5` minutes becomes `90`, `0.5` seconds stays a fraction.
pub fn typed_to_seconds_text(text: &str, unit: Unit) -> String {
    let trimmed = text.trim();
    if unit == Unit::Seconds {
        return trimmed.to_owned();
    }
    if let Ok(i) = trimmed.parse::<i128>() {
        return i.saturating_mul(i128::from(unit.seconds())).to_string();
    }
    match trimmed.parse::<f64>() {
        Ok(f) if f.is_finite() => {
            let s = f * unit.seconds() as f64;
            if s.fract() == 0.0 && s.abs() < 1e30 {
                format!("{}", s as i128)
            } else {
                format!("{s}")
            }
        }
        _ => trimmed.to_owned(),
    }
}

/// One duration field: the policy's check on the typed value converted to seconds.
pub fn validate_duration(
    field: NumberField,
    enabled: bool,
    text: &str,
    unit: Unit,
) -> Result<u64, FieldError> {
    validate_number_text(field, enabled, &typed_to_seconds_text(text, unit))
}

/// The editable state of one class policy.
#[derive(Debug, Clone, Copy)]
pub struct ClassDraft {
    pub class: ErrorClass,
    pub retry_enabled: RwSignal<bool>,
    pub max_retries: RwSignal<String>,
    pub interval: RwSignal<String>,
    pub interval_unit: RwSignal<Unit>,
    pub wait_enabled: RwSignal<bool>,
    pub max_wait: RwSignal<String>,
    pub wait_unit: RwSignal<Unit>,
    pub on_exhausted: RwSignal<OnExhausted>,
}

impl ClassDraft {
    pub fn new(class: ErrorClass, policy: &ClassPolicy) -> ClassDraft {
        let interval_unit = Unit::best_for(policy.retry.initial_interval_seconds, &Unit::FOR_INTERVAL);
        let wait_unit = Unit::best_for(policy.wait_for_reset.max_wait_seconds, &Unit::FOR_WAIT);
        ClassDraft {
            class,
            retry_enabled: RwSignal::new(policy.retry.enabled),
            max_retries: RwSignal::new(policy.retry.max_retries.to_string()),
            interval: RwSignal::new(text_in_unit(policy.retry.initial_interval_seconds, interval_unit)),
            interval_unit: RwSignal::new(interval_unit),
            wait_enabled: RwSignal::new(policy.wait_for_reset.enabled),
            max_wait: RwSignal::new(text_in_unit(policy.wait_for_reset.max_wait_seconds, wait_unit)),
            wait_unit: RwSignal::new(wait_unit),
            on_exhausted: RwSignal::new(policy.on_exhausted),
        }
    }

    /// Switching retry on pre-fills the suggested values when the fields hold the stored zeros.
    pub fn set_retry_enabled(&self, on: bool) {
        self.retry_enabled.set(on);
        if on {
            if self
                .max_retries
                .with_untracked(|t| t.trim() == "0" || t.trim().is_empty())
            {
                self.max_retries.set(SUGGESTED_MAX_RETRIES.to_string());
            }
            if self
                .interval
                .with_untracked(|t| t.trim() == "0" || t.trim().is_empty())
            {
                let unit = Unit::best_for(SUGGESTED_INITIAL_INTERVAL_SECONDS, &Unit::FOR_INTERVAL);
                self.interval_unit.set(unit);
                self.interval
                    .set(text_in_unit(SUGGESTED_INITIAL_INTERVAL_SECONDS, unit));
            }
        }
    }

    /// Switching reset waiting on pre-fills the suggested maximum when the field holds zero.
    pub fn set_wait_enabled(&self, on: bool) {
        self.wait_enabled.set(on);
        if on
            && self
                .max_wait
                .with_untracked(|t| t.trim() == "0" || t.trim().is_empty())
        {
            let unit = Unit::best_for(SUGGESTED_MAX_WAIT_SECONDS, &Unit::FOR_WAIT);
            self.wait_unit.set(unit);
            self.max_wait.set(text_in_unit(SUGGESTED_MAX_WAIT_SECONDS, unit));
        }
    }

    /// The inline check of one numeric field (tracked). A disabled section is stored as zeros,
    /// so its hidden fields are never in error.
    pub fn check(&self, field: NumberField) -> Result<u64, FieldError> {
        match field {
            NumberField::MaxRetries if self.retry_enabled.get() => {
                self.max_retries.with(|t| validate_number_text(field, true, t))
            }
            NumberField::InitialIntervalSeconds if self.retry_enabled.get() => {
                let unit = self.interval_unit.get();
                self.interval.with(|t| validate_duration(field, true, t, unit))
            }
            NumberField::MaxWaitSeconds if self.wait_enabled.get() => {
                let unit = self.wait_unit.get();
                self.max_wait.with(|t| validate_duration(field, true, t, unit))
            }
            _ => Ok(0),
        }
    }

    /// The wire policy, when every field is valid (tracked).
    pub fn policy(&self) -> Option<ClassPolicy> {
        let max_retries = u32::try_from(self.check(NumberField::MaxRetries).ok()?).ok()?;
        let initial_interval_seconds = self.check(NumberField::InitialIntervalSeconds).ok()?;
        let max_wait_seconds = self.check(NumberField::MaxWaitSeconds).ok()?;
        Some(ClassPolicy {
            retry: RetryPolicy {
                enabled: self.retry_enabled.get(),
                max_retries,
                initial_interval_seconds,
            },
            wait_for_reset: WaitForResetPolicy {
                enabled: self.wait_enabled.get(),
                max_wait_seconds,
            },
            on_exhausted: self.on_exhausted.get(),
        })
    }

    /// The validated policy the preview describes (tracked).
    pub fn validated(&self) -> Option<ValidatedClassPolicy> {
        ValidatedClassPolicy::new(self.policy()?).ok()
    }
}

/// The editable state of one candidate.
#[derive(Debug, Clone, Copy)]
pub struct CandidateDraft {
    /// Row identity for keyed lists and element ids, so a row keeps its open state while it is
    /// renamed or moved. Assigned by the form in creation order (the same on the server and in
    /// the browser, so hydrated ids match); never sent.
    pub key: u64,
    pub id: RwSignal<String>,
    pub transient: ClassDraft,
    pub hard: ClassDraft,
    /// Whether the row's policy area is open.
    pub open: RwSignal<bool>,
}

impl CandidateDraft {
    pub fn new(key: u64, candidate: &CandidatePolicy) -> CandidateDraft {
        CandidateDraft {
            key,
            id: RwSignal::new(candidate.id.clone()),
            transient: ClassDraft::new(ErrorClass::Transient, &candidate.transient),
            hard: ClassDraft::new(ErrorClass::Hard, &candidate.hard),
            open: RwSignal::new(false),
        }
    }

    pub fn class(&self, class: ErrorClass) -> ClassDraft {
        match class {
            ErrorClass::Transient => self.transient,
            ErrorClass::Hard => self.hard,
        }
    }

    /// The inline check of the id (tracked).
    pub fn check_id(&self) -> Result<(), FieldError> {
        self.id.with(|id| validate_candidate_id(id))
    }

    /// The wire candidate, when every field is valid (tracked).
    pub fn candidate(&self) -> Option<CandidatePolicy> {
        self.check_id().ok()?;
        Some(CandidatePolicy {
            id: self.id.get(),
            transient: self.transient.policy()?,
            hard: self.hard.policy()?,
        })
    }
}

/// The whole document, when every candidate is valid (tracked).
pub fn document(candidates: &[CandidateDraft]) -> Option<PolicyDocument> {
    Some(PolicyDocument {
        version: POLICY_DOCUMENT_VERSION,
        candidates: candidates
            .iter()
            .map(CandidateDraft::candidate)
            .collect::<Option<Vec<_>>>()?,
    })
}

/// The optional identifiers of a candidate's target, with their wire field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetField {
    ProviderId,
    ModelId,
}

impl TargetField {
    pub const ALL: [TargetField; 2] = [TargetField::ProviderId, TargetField::ModelId];

    /// The field's name in `targets[i].<name>`.
    pub const fn key(self) -> &'static str {
        match self {
            TargetField::ProviderId => "provider_id",
            TargetField::ModelId => "model_id",
        }
    }
}

impl TargetField {
    /// What the field holds, for messages.
    const fn what(self) -> &'static str {
        match self {
            TargetField::ProviderId => "the provider id",
            TargetField::ModelId => "the model id",
        }
    }
}

/// An optional identifier as typed: blank is "none"; anything else gets the server's check
/// (`policy::input::check_identifier`, the one it runs on `provider_id` and `model_id`).
pub fn optional_identifier(text: &str, field: TargetField) -> Result<Option<String>, FieldError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    check_identifier(trimmed, field.what()).map(|()| Some(trimmed.to_owned()))
}

/// What the person reads for a dispatcher, in the select and in a collapsed row.
pub const fn dispatcher_label(kind: DispatcherKind) -> &'static str {
    match kind {
        DispatcherKind::Simulated => "Simulated: the built-in scripted provider (demo and tests)",
        DispatcherKind::Acp => "ACP agent: Recourse starts an Agent Client Protocol agent process",
        DispatcherKind::Http => "HTTP: a one-shot call to an LLM HTTP API",
        DispatcherKind::External => "External: another system runs the agent and reports back",
    }
}

/// A simulated script in words ("fail at once, then succeed after 5 s"); empty for none.
pub fn describe_script(script: &[SimulatedStep]) -> String {
    script
        .iter()
        .map(|step| {
            let what = match step.outcome {
                SimulatedOutcome::Fail => "fail",
                SimulatedOutcome::Succeed => "succeed",
                SimulatedOutcome::Hang => "never answer",
            };
            match step.after_seconds {
                0 => format!("{what} at once"),
                s => format!("{what} after {s} s"),
            }
        })
        .collect::<Vec<_>>()
        .join(", then ")
}

/// The editable state of how a candidate is reached. The simulated script has no editor (it
/// holds evidence envelopes, set through the API); it is shown and kept as it is.
#[derive(Debug, Clone, Copy)]
pub struct TargetDraft {
    pub dispatcher: RwSignal<DispatcherKind>,
    pub provider_id: RwSignal<String>,
    pub model_id: RwSignal<String>,
    pub label: RwSignal<String>,
    /// The configured agent or endpoint id (`acp` and `http` only).
    pub runner: RwSignal<String>,
    pub script: StoredValue<Vec<SimulatedStep>>,
}

impl TargetDraft {
    pub fn new(target: &CandidateTarget) -> TargetDraft {
        TargetDraft {
            dispatcher: RwSignal::new(target.dispatcher),
            provider_id: RwSignal::new(target.provider_id.clone().unwrap_or_default()),
            model_id: RwSignal::new(target.model_id.clone().unwrap_or_default()),
            label: RwSignal::new(target.label.clone().unwrap_or_default()),
            runner: RwSignal::new(target.runner.clone().unwrap_or_default()),
            script: StoredValue::new(target.script.clone()),
        }
    }

    /// A new candidate's target: `external` (the server's default), shown and changeable.
    pub fn external(id: &str) -> TargetDraft {
        TargetDraft::new(&CandidateTarget::external(id))
    }

    /// The inline check of one identifier (tracked).
    pub fn check(&self, field: TargetField) -> Result<Option<String>, FieldError> {
        match field {
            TargetField::ProviderId => self.provider_id.with(|t| optional_identifier(t, field)),
            TargetField::ModelId => self.model_id.with(|t| optional_identifier(t, field)),
        }
    }

    /// What keeps the kind and runner from being saved against the server's configuration
    /// (tracked).
    pub fn problem(&self, configured: &Configured) -> Option<TargetProblem> {
        let kind = self.dispatcher.get();
        self.runner.with(|r| configured.check(kind, r)).err()
    }

    /// Picks `kind`, and for `acp` / `http` a runner of it the configuration lists (the one
    /// already named, if it does). A runner is kept in the draft while another kind is picked,
    /// so picking its kind again brings it back; only `acp` and `http` send it.
    pub fn pick(&self, kind: DispatcherKind, configured: &Configured) {
        self.dispatcher.set(kind);
        let runner = self.runner.with_untracked(|r| configured.runner_for(kind, r));
        if self.runner.with_untracked(|r| *r != runner) {
            self.runner.set(runner);
        }
    }

    /// The wire target for candidate `id`, when every field is well formed (tracked). Whether
    /// its runner is configured is [`TargetDraft::problem`]'s question.
    pub fn target(&self, id: &str) -> Option<CandidateTarget> {
        let label = self.label.with(|l| l.trim().to_owned());
        let dispatcher = self.dispatcher.get();
        Some(CandidateTarget {
            id: id.to_owned(),
            dispatcher,
            provider_id: self.check(TargetField::ProviderId).ok()?,
            model_id: self.check(TargetField::ModelId).ok()?,
            label: (!label.is_empty()).then_some(label),
            runner: self
                .runner
                .with(|r| (needs_runner(dispatcher) && !r.trim().is_empty()).then(|| r.trim().to_owned())),
            script: self.script.get_value(),
        })
    }
}

/// Moves the element at `from` to `to` (both clamped), keeping the others in order.
pub fn move_item<T>(items: &mut Vec<T>, from: usize, to: usize) {
    if from >= items.len() {
        return;
    }
    let to = to.min(items.len() - 1);
    let item = items.remove(from);
    items.insert(to, item);
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::document::ValidationCode;

    #[test]
    fn best_unit_is_the_largest_that_divides_evenly() {
        assert_eq!(Unit::best_for(0, &Unit::FOR_WAIT), Unit::Seconds);
        assert_eq!(Unit::best_for(45, &Unit::FOR_WAIT), Unit::Seconds);
        assert_eq!(Unit::best_for(120, &Unit::FOR_WAIT), Unit::Minutes);
        assert_eq!(Unit::best_for(7_200, &Unit::FOR_WAIT), Unit::Hours);
        assert_eq!(Unit::best_for(604_800, &Unit::FOR_WAIT), Unit::Days);
        assert_eq!(Unit::best_for(172_800, &Unit::FOR_INTERVAL), Unit::Hours);
    }

    #[test]
    fn typed_minutes_become_seconds_for_the_validator() {
        assert_eq!(typed_to_seconds_text("2", Unit::Minutes), "120");
        assert_eq!(typed_to_seconds_text(" 1.5 ", Unit::Minutes), "90");
        assert_eq!(typed_to_seconds_text("0.5", Unit::Seconds), "0.5");
        assert_eq!(typed_to_seconds_text("abc", Unit::Hours), "abc");
        assert_eq!(typed_to_seconds_text("-1", Unit::Days), "-86400");
    }

    #[test]
    fn durations_in_any_unit_get_the_servers_messages() {
        let f = NumberField::MaxWaitSeconds;
        assert_eq!(validate_duration(f, true, "7", Unit::Days), Ok(604_800));
        let err = validate_duration(f, true, "8", Unit::Days).unwrap_err();
        assert_eq!(err.code, ValidationCode::OutOfRange);
        assert_eq!(err, validate_number_text(f, true, "691200").unwrap_err());
        let err =
            validate_duration(NumberField::InitialIntervalSeconds, true, "", Unit::Minutes).unwrap_err();
        assert_eq!(err.code, ValidationCode::Missing);
        let err = validate_duration(NumberField::InitialIntervalSeconds, true, "0.25", Unit::Minutes);
        assert_eq!(err, Ok(15));
        let err =
            validate_duration(NumberField::InitialIntervalSeconds, true, "0.3", Unit::Seconds).unwrap_err();
        assert_eq!(err.code, ValidationCode::NotInteger);
    }

    #[test]
    fn a_stored_policy_round_trips_through_the_draft() {
        let owner = Owner::new();
        owner.with(|| {
            let policy = ClassPolicy {
                retry: RetryPolicy {
                    enabled: true,
                    max_retries: 3,
                    initial_interval_seconds: 120,
                },
                wait_for_reset: WaitForResetPolicy {
                    enabled: true,
                    max_wait_seconds: 86_400 * 2,
                },
                on_exhausted: OnExhausted::Stop,
            };
            let draft = ClassDraft::new(ErrorClass::Hard, &policy);
            assert_eq!(draft.interval.get_untracked(), "2");
            assert_eq!(draft.interval_unit.get_untracked(), Unit::Minutes);
            assert_eq!(draft.wait_unit.get_untracked(), Unit::Days);
            assert_eq!(draft.policy(), Some(policy));
        });
    }

    #[test]
    fn disabled_sections_store_zeros_and_enabling_suggests_values() {
        let owner = Owner::new();
        owner.with(|| {
            let draft = ClassDraft::new(ErrorClass::Transient, &ClassPolicy::default());
            assert_eq!(draft.policy(), Some(ClassPolicy::default()));
            draft.max_retries.set("99".into());
            assert_eq!(
                draft.policy(),
                Some(ClassPolicy::default()),
                "hidden fields are ignored"
            );
            draft.max_retries.set("0".into());
            draft.set_retry_enabled(true);
            assert_eq!(draft.max_retries.get_untracked(), "3");
            assert_eq!(draft.interval.get_untracked(), "5");
            draft.max_retries.set("11".into());
            assert_eq!(
                draft.check(NumberField::MaxRetries).unwrap_err().code,
                ValidationCode::OutOfRange
            );
            assert_eq!(draft.policy(), None);
        });
    }

    #[test]
    fn moving_an_item_keeps_the_others_in_order() {
        let mut v = vec!['a', 'b', 'c', 'd'];
        move_item(&mut v, 0, 2);
        assert_eq!(v, vec!['b', 'c', 'a', 'd']);
        move_item(&mut v, 3, 0);
        assert_eq!(v, vec!['d', 'b', 'c', 'a']);
        move_item(&mut v, 1, 99);
        assert_eq!(v, vec!['d', 'c', 'a', 'b']);
        move_item(&mut v, 9, 0);
        assert_eq!(v, vec!['d', 'c', 'a', 'b']);
    }

    #[test]
    fn an_identifier_gets_the_servers_check_and_blank_is_none() {
        assert_eq!(optional_identifier("  ", TargetField::ModelId), Ok(None));
        assert_eq!(
            optional_identifier(" claude-sonnet-4-5 ", TargetField::ModelId),
            Ok(Some("claude-sonnet-4-5".into()))
        );
        let e = optional_identifier("x y", TargetField::ModelId).unwrap_err();
        assert_eq!(e.code, ValidationCode::InvalidCharacters);
        // The server parses the same targets to the same code at the same path.
        let mut bad = CandidateTarget::external("b");
        bad.model_id = Some("x y".into());
        let input = policy::api::ProfileInput {
            name: "p".into(),
            kind: policy::api::ProfileKind::Dynamic,
            description: None,
            targets: vec![CandidateTarget::external("a"), bad],
            policy: serde_json::json!({"on_error": "try_next", "candidates": [{"id": "a"}, {"id": "b"}]}),
            expected_revision: None,
            notifications: Vec::new(),
        };
        let errors = policy::input::ValidatedProfile::parse(&input).unwrap_err();
        let at: Vec<_> = errors.at("targets[1].model_id").map(|e| e.code).collect();
        assert_eq!(at, [ValidationCode::InvalidCharacters]);
    }

    #[test]
    fn a_stored_target_round_trips_through_the_draft_and_keeps_its_script() {
        let owner = Owner::new();
        owner.with(|| {
            let stored = CandidateTarget {
                id: "sim".into(),
                dispatcher: DispatcherKind::Simulated,
                provider_id: Some("anthropic".into()),
                model_id: None,
                label: Some("Demo".into()),
                runner: None,
                script: vec![SimulatedStep {
                    outcome: SimulatedOutcome::Fail,
                    after_seconds: 0,
                    envelope: Some(serde_json::json!({"items": []})),
                }],
            };
            let draft = TargetDraft::new(&stored);
            assert_eq!(draft.target("sim"), Some(stored.clone()));
            draft.dispatcher.set(DispatcherKind::Http);
            draft.model_id.set(" claude-sonnet-4-5 ".into());
            draft.label.set("   ".into());
            let edited = draft.target("sim").expect("valid");
            assert_eq!(edited.dispatcher, DispatcherKind::Http);
            assert_eq!(edited.model_id.as_deref(), Some("claude-sonnet-4-5"));
            assert_eq!(edited.label, None);
            assert_eq!(edited.script, stored.script);
            draft.provider_id.set("a\u{0}".into());
            assert_eq!(draft.target("sim"), None);
        });
    }

    #[test]
    fn a_runner_is_sent_only_for_acp_and_http_and_kept_while_another_kind_is_picked() {
        let owner = Owner::new();
        owner.with(|| {
            let configured = Configured::new(vec![
                policy::api::RunnerOption {
                    kind: DispatcherKind::Http,
                    id: "mini".into(),
                    label: None,
                    provider_id: None,
                    model_id: Some("gpt-4.1-mini".into()),
                },
                policy::api::RunnerOption {
                    kind: DispatcherKind::Acp,
                    id: "claude".into(),
                    label: Some("Claude Code".into()),
                    provider_id: None,
                    model_id: None,
                },
            ]);
            let mut stored = CandidateTarget::external("a");
            stored.dispatcher = DispatcherKind::Acp;
            stored.runner = Some("claude".into());
            let draft = TargetDraft::new(&stored);
            assert_eq!(draft.target("a"), Some(stored.clone()));
            assert_eq!(draft.problem(&configured), None);
            // Another kind: no runner on the wire, but the draft remembers it.
            draft.pick(DispatcherKind::External, &configured);
            assert_eq!(draft.target("a").and_then(|t| t.runner), None);
            draft.pick(DispatcherKind::Acp, &configured);
            assert_eq!(draft.target("a"), Some(stored.clone()));
            // HTTP picks a configured endpoint in view.
            draft.pick(DispatcherKind::Http, &configured);
            assert_eq!(draft.target("a").and_then(|t| t.runner).as_deref(), Some("mini"));
            // A stored runner that left the configuration stays as it is, with its problem.
            let mut gone = stored.clone();
            gone.runner = Some("gone".into());
            let draft = TargetDraft::new(&gone);
            assert_eq!(draft.target("a"), Some(gone));
            assert_eq!(
                draft.problem(&configured),
                Some(TargetProblem::RunnerNotConfigured(DispatcherKind::Acp))
            );
            assert_eq!(
                draft.problem(&Configured::default()),
                Some(TargetProblem::KindNotConfigured(DispatcherKind::Acp))
            );
        });
    }

    #[test]
    fn a_script_reads_as_steps_in_words() {
        let step = |outcome, after_seconds| SimulatedStep {
            outcome,
            after_seconds,
            envelope: None,
        };
        assert_eq!(
            describe_script(&[
                step(SimulatedOutcome::Fail, 0),
                step(SimulatedOutcome::Succeed, 5)
            ]),
            "fail at once, then succeed after 5 s"
        );
        assert_eq!(describe_script(&[]), "");
    }
}
