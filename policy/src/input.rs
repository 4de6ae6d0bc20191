//! Untrusted API input, parsed once into validated types: a profile write
//! ([`ValidatedProfile`]) and a route start ([`ValidatedStartRoute`]).
//!
//! Why here and not in the server: the REST API, the server functions and the profile editor in
//! the browser all accept the same shapes, and this crate is the one all three compile. Parsing
//! reports every problem at once, each at its field path (`name`, `targets[1].script[0].after_seconds`,
//! `caller.invocation_id`, or the policy document's own paths), with the stable codes of
//! [`ValidationCode`]. Every string and number is bounded by a constant of [`crate::limits`];
//! a value past a bound is rejected, never truncated, and messages never repeat the value (it
//! may be a credential pasted into the wrong box).
//!
//! The validated types have private fields and no setters: holding one is proof the input was
//! checked.

use crate::{
    api::{
        Caller, CallerKind, CandidateTarget, DispatcherKind, Profile, ProfileInput, ProfileKind,
        StartRouteRequest, Work,
    },
    document::{FieldError, ValidatedPolicyDocument, ValidationCode, ValidationError, ValidationErrors},
    legacy::{normalize, DocumentOrigin},
    limits::{
        MAX_CALLER_REFERENCE_CHARS, MAX_IDENTIFIER_CHARS, MAX_ID_CHARS, MAX_INVOCATION_ID_CHARS,
        MAX_LABEL_CHARS, MAX_MESSAGES, MAX_PATH_CHARS, MAX_PROFILE_DESCRIPTION_CHARS, MAX_PROFILE_NAME_CHARS,
        MAX_PROMPT_BLOCKS, MAX_SCRIPT_ENVELOPE_BYTES, MAX_SCRIPT_STEPS, MAX_SIMULATED_DELAY_SECONDS,
        MAX_TITLE_CHARS, MAX_WORK_BYTES,
    },
    notify::{check_rules, NotificationRule},
};
use chrono::{DateTime, Utc};

// ------------------------------------------------------------------------------------------------
// Text checks shared by every field
// ------------------------------------------------------------------------------------------------

/// A required line of text: not blank, at most `max` characters, no control characters
/// ([`crate::limits::LINE_PATTERN`]). Bounds apply to the text as sent, before any trimming, as
/// the published `maxLength` does.
pub fn check_line(text: &str, what: &str, max: usize) -> Result<(), FieldError> {
    if text.trim().is_empty() {
        return Err(FieldError::new(ValidationCode::Empty, format!("Give {what}.")));
    }
    check_optional_line(text, what, max)
}

/// An optional line of text (may be empty): at most `max` characters, no control characters
/// ([`crate::limits::TEXT_PATTERN`]).
pub fn check_optional_line(text: &str, what: &str, max: usize) -> Result<(), FieldError> {
    if text.chars().count() > max {
        return Err(FieldError::new(
            ValidationCode::TooLong,
            format!("Use at most {max} characters for {what}."),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(FieldError::new(
            ValidationCode::InvalidCharacters,
            format!(
                "{} cannot contain control characters (line breaks, tabs).",
                capitalized(what)
            ),
        ));
    }
    Ok(())
}

/// Whether `name` is an environment variable's name as the server's configuration names one (a
/// letter or `_`, then letters, digits and `_`; at most [`crate::limits::MAX_ENV_NAME_CHARS`]).
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= crate::limits::MAX_ENV_NAME_CHARS
}

/// A provider or model identifier: at most [`MAX_IDENTIFIER_CHARS`] characters of
/// [`crate::limits::IDENTIFIER_PATTERN`] (it becomes part of a circuit key and is shown in the UI).
pub fn check_identifier(text: &str, what: &str) -> Result<(), FieldError> {
    if text.is_empty() {
        return Err(FieldError::new(
            ValidationCode::Empty,
            format!("Give {what}, or leave it out."),
        ));
    }
    if text.chars().count() > MAX_IDENTIFIER_CHARS {
        return Err(FieldError::new(
            ValidationCode::TooLong,
            format!("Use at most {MAX_IDENTIFIER_CHARS} characters for {what}."),
        ));
    }
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c)) {
        return Err(FieldError::new(
            ValidationCode::InvalidCharacters,
            format!(
                "{} may hold only letters, digits and . _ : / @ + - (starting with a letter or digit).",
                capitalized(what)
            ),
        ));
    }
    Ok(())
}

/// What is wrong with a value's shape, from a serde message, without the input: serde quotes
/// the offending value (which may be anything a client pasted, a credential included), so
/// quoted parts are dropped, except names that look like this API's own field names (lower-case
/// words joined by `_`), which say where the problem is. A trailing ` at line L column C` is
/// dropped too (the caller adds it when it knows the position).
pub fn shape_message(serde_message: &str) -> String {
    let text = serde_message
        .rsplit_once(" at line ")
        .map_or(serde_message, |(head, _)| head);
    let mut out = String::with_capacity(text.len());
    let mut quoted: Option<(char, String)> = None;
    for c in text.chars() {
        match &mut quoted {
            None if c == '`' || c == '"' => quoted = Some((c, String::new())),
            None => out.push(c),
            Some((q, inner)) if c == *q => {
                let name_like = inner.len() <= 40
                    && !inner.is_empty()
                    && inner.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                if name_like {
                    out.push('`');
                    out.push_str(inner);
                    out.push('`');
                } else {
                    out.push('…');
                }
                quoted = None;
            }
            Some((_, inner)) => inner.push(c),
        }
    }
    if quoted.is_some() {
        out.push('…');
    }
    out
}

fn capitalized(what: &str) -> String {
    let mut c = what.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Collects problems with their paths.
#[derive(Default)]
struct Problems(Vec<ValidationError>);

impl Problems {
    fn check(&mut self, path: &str, result: Result<(), FieldError>) {
        if let Err(e) = result {
            self.0.push(e.at(path));
        }
    }

    fn push(&mut self, path: impl Into<String>, code: ValidationCode, message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path.into(),
            code,
            message: message.into(),
        });
    }

    fn finish<T>(self, value: Option<T>) -> Result<T, ValidationErrors> {
        match value {
            Some(v) if self.0.is_empty() => Ok(v),
            _ => Err(ValidationErrors { errors: self.0 }),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Profiles
// ------------------------------------------------------------------------------------------------

/// A profile write that passed every check: a trimmed name, a bounded description, one valid
/// target per policy candidate (same ids, same order) and a valid version-1 document (legacy
/// shapes normalized).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedProfile {
    name: String,
    kind: ProfileKind,
    description: Option<String>,
    targets: Vec<CandidateTarget>,
    document: ValidatedPolicyDocument,
    normalized_from_legacy: bool,
    expected_revision: Option<u64>,
    notifications: Vec<NotificationRule>,
}

impl ValidatedProfile {
    /// Parses a profile write, reporting every problem: the policy document's at its own paths,
    /// the rest at `name`, `description` and `targets[i].<field>`.
    pub fn parse(input: &ProfileInput) -> Result<ValidatedProfile, ValidationErrors> {
        let mut problems = Problems::default();
        problems.check(
            "name",
            check_line(&input.name, "the profile a name", MAX_PROFILE_NAME_CHARS),
        );
        let name = input.name.trim();
        if input
            .description
            .as_deref()
            .is_some_and(|d| d.chars().count() > MAX_PROFILE_DESCRIPTION_CHARS)
        {
            problems.push(
                "description",
                ValidationCode::TooLong,
                format!("Use at most {MAX_PROFILE_DESCRIPTION_CHARS} characters."),
            );
        }
        let description = input
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty());
        let concrete = input.kind == ProfileKind::Concrete;
        let policy = if concrete && input.policy.is_null() {
            match input.targets.as_slice() {
                [only] => concrete_defaults(&only.id),
                _ => {
                    problems.push(
                        "targets",
                        ValidationCode::Missing,
                        "A concrete profile without a policy names its one candidate in `targets`.",
                    );
                    serde_json::Value::Null
                }
            }
        } else {
            input.policy.clone()
        };
        let normalized = match normalize(&policy) {
            Ok(n) => Some(n),
            Err(e) => {
                problems.0.extend(e.errors);
                None
            }
        };
        if let Some(n) = &normalized {
            if concrete && n.document.candidates().len() != 1 {
                problems.push(
                    "candidates",
                    ValidationCode::TooMany,
                    "A concrete profile has exactly one candidate (use a dynamic profile for several).",
                );
            }
        }
        let targets = match &normalized {
            Some(n) => {
                let ids: Vec<&str> = n.document.candidates().iter().map(|c| c.id()).collect();
                Some(check_targets(&input.targets, &ids, &mut problems))
            }
            None => {
                // Still check what can be checked without the document, so one round trip
                // reports every problem.
                for (i, t) in input.targets.iter().enumerate() {
                    check_target_fields(t, i, &mut problems);
                }
                None
            }
        };
        let (notifications, rule_problems) = check_rules(&input.notifications);
        problems.0.extend(rule_problems);
        let value = match (normalized, targets) {
            (Some(n), Some(targets)) => Some(ValidatedProfile {
                name: name.to_owned(),
                kind: input.kind,
                description: description.map(str::to_owned),
                targets,
                normalized_from_legacy: n.origin == DocumentOrigin::Legacy,
                document: n.document,
                expected_revision: input.expected_revision,
                notifications,
            }),
            _ => None,
        };
        problems.finish(value)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> ProfileKind {
        self.kind
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    pub fn targets(&self) -> &[CandidateTarget] {
        &self.targets
    }

    pub fn document(&self) -> &ValidatedPolicyDocument {
        &self.document
    }

    pub fn normalized_from_legacy(&self) -> bool {
        self.normalized_from_legacy
    }

    /// For updates: the revision the edit was based on (`None` overwrites).
    pub fn expected_revision(&self) -> Option<u64> {
        self.expected_revision
    }

    /// Who is told what (normalized). Whether each channel exists is the server's to check
    /// against its configuration.
    pub fn notifications(&self) -> &[NotificationRule] {
        &self.notifications
    }

    /// The stored profile this write becomes.
    pub fn into_profile(
        self,
        id: String,
        revision: u64,
        created_at: DateTime<Utc>,
        updated_at: DateTime<Utc>,
    ) -> Profile {
        Profile {
            id,
            name: self.name,
            kind: self.kind,
            description: self.description,
            revision,
            targets: self.targets,
            policy: self.document.to_wire(),
            normalized_from_legacy: self.normalized_from_legacy,
            notifications: self.notifications,
            created_at,
            updated_at,
        }
    }
}

/// A concrete profile's interactive defaults for its one candidate `id`: transient errors
/// retry (`CONCRETE_TRANSIENT_*`), hard errors wait for a trusted reset up to an hour
/// (`CONCRETE_HARD_MAX_WAIT_SECONDS`), and both then stop for the person at hand.
pub fn concrete_defaults(id: &str) -> serde_json::Value {
    use crate::limits::{
        CONCRETE_HARD_MAX_WAIT_SECONDS, CONCRETE_TRANSIENT_INITIAL_INTERVAL_SECONDS,
        CONCRETE_TRANSIENT_MAX_RETRIES,
    };
    serde_json::json!({"version": crate::limits::POLICY_DOCUMENT_VERSION, "candidates": [{"id": id,
        "transient": {"retry": {"enabled": true, "max_retries": CONCRETE_TRANSIENT_MAX_RETRIES,
                                "initial_interval_seconds": CONCRETE_TRANSIENT_INITIAL_INTERVAL_SECONDS},
                      "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"},
        "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
                 "wait_for_reset": {"enabled": true, "max_wait_seconds": CONCRETE_HARD_MAX_WAIT_SECONDS},
                 "on_exhausted": "stop"}}]})
}

/// Targets for the document's candidates `ids`: given ones are checked against them; none
/// given means an `external` target per candidate.
fn check_targets(given: &[CandidateTarget], ids: &[&str], problems: &mut Problems) -> Vec<CandidateTarget> {
    if given.is_empty() {
        return ids.iter().map(|id| CandidateTarget::external(id)).collect();
    }
    for (i, t) in given.iter().enumerate() {
        match ids.get(i) {
            Some(id) if *id == t.id => {}
            Some(id) => problems.push(
                format!("targets[{i}].id"),
                ValidationCode::Missing,
                format!(
                    "The policy's candidate {} is `{id}`; list targets with the same ids in the same order.",
                    i + 1
                ),
            ),
            None => problems.push(
                format!("targets[{i}].id"),
                ValidationCode::UnknownField,
                "The policy has no candidate with this id; add it or remove this target.",
            ),
        }
        check_target_fields(t, i, problems);
    }
    for (i, id) in ids.iter().enumerate().skip(given.len()) {
        problems.push(
            format!("targets[{i}]"),
            ValidationCode::Missing,
            format!("Candidate `{id}` needs a target (how to reach it)."),
        );
    }
    given.to_vec()
}

/// The fields of one target that do not depend on the document.
fn check_target_fields(t: &CandidateTarget, i: usize, problems: &mut Problems) {
    if let Some(p) = &t.provider_id {
        problems.check(
            &format!("targets[{i}].provider_id"),
            check_identifier(p, "the provider id"),
        );
    }
    if let Some(m) = &t.model_id {
        problems.check(
            &format!("targets[{i}].model_id"),
            check_identifier(m, "the model id"),
        );
    }
    let needs_runner = matches!(t.dispatcher, DispatcherKind::Acp | DispatcherKind::Http);
    match (&t.runner, needs_runner) {
        (Some(r), true) => problems.check(
            &format!("targets[{i}].runner"),
            check_identifier(r, "the runner id"),
        ),
        (None, true) => problems.push(
            format!("targets[{i}].runner"),
            ValidationCode::Missing,
            "Choose the agent or endpoint (from the server's configuration) that runs this candidate.",
        ),
        (Some(_), false) => problems.push(
            format!("targets[{i}].runner"),
            ValidationCode::UnknownField,
            "Only ACP and HTTP candidates name an agent or an endpoint.",
        ),
        (None, false) => {}
    }
    if let Some(l) = &t.label {
        problems.check(
            &format!("targets[{i}].label"),
            check_optional_line(l, "the label", MAX_LABEL_CHARS),
        );
    }
    if t.script.len() > MAX_SCRIPT_STEPS {
        problems.push(
            format!("targets[{i}].script"),
            ValidationCode::TooMany,
            format!("A script has at most {MAX_SCRIPT_STEPS} steps."),
        );
    }
    for (s, step) in t.script.iter().enumerate().take(MAX_SCRIPT_STEPS) {
        let path = format!("targets[{i}].script[{s}]");
        if step.after_seconds > MAX_SIMULATED_DELAY_SECONDS {
            problems.push(
                format!("{path}.after_seconds"),
                ValidationCode::OutOfRange,
                format!(
                    "A simulated step reports within 0 to {MAX_SIMULATED_DELAY_SECONDS} seconds (7 days)."
                ),
            );
        }
        if let Some(envelope) = &step.envelope {
            if !envelope.is_object() {
                problems.push(
                    format!("{path}.envelope"),
                    ValidationCode::WrongType,
                    "The envelope is a JSON object (an evidence envelope).",
                );
            } else if !envelope.get("items").is_some_and(serde_json::Value::is_array) {
                problems.push(
                    format!("{path}.envelope.items"),
                    ValidationCode::Missing,
                    "An evidence envelope lists its evidence in `items` (an array).",
                );
            } else if let Err(why) = crate::envelope::EvidenceEnvelope::check(envelope) {
                problems.push(
                    format!("{path}.envelope"),
                    ValidationCode::WrongType,
                    format!("Not an evidence envelope (contract 1): {why}."),
                );
            } else if serde_json::to_string(envelope).map_or(usize::MAX, |s| s.len())
                > MAX_SCRIPT_ENVELOPE_BYTES
            {
                problems.push(
                    format!("{path}.envelope"),
                    ValidationCode::TooLong,
                    format!("A simulated envelope is at most {MAX_SCRIPT_ENVELOPE_BYTES} bytes of JSON."),
                );
            }
        }
    }
}

impl CandidateTarget {
    /// The target of a candidate that another system runs (reported over the API).
    pub fn external(id: &str) -> CandidateTarget {
        CandidateTarget {
            id: id.to_owned(),
            dispatcher: DispatcherKind::External,
            provider_id: None,
            model_id: None,
            label: None,
            runner: None,
            script: Vec::new(),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Route starts
// ------------------------------------------------------------------------------------------------

// ------------------------------------------------------------------------------------------------
// Work
// ------------------------------------------------------------------------------------------------

/// Request parameters an `http` candidate's endpoint configuration owns: a caller may not set
/// them.
pub const RESERVED_PARAMS: [&str; 6] = [
    "model",
    "stream",
    "messages",
    "system",
    "api_key",
    "stream_options",
];

/// Checks a route's work (contract 7) at `path` (`work`): bounded in size and count, prompt
/// blocks and messages of the right shape, an absolute working directory, no parameter the
/// endpoint owns. Whether each candidate of the profile can run it (an agent's roots, a
/// prompt for agents, messages for endpoints) is the server's check, which knows the
/// configuration.
pub fn check_work(work: &Work, path: &str) -> Vec<ValidationError> {
    let mut problems = Problems::default();
    if serde_json::to_string(work).map_or(usize::MAX, |s| s.len()) > MAX_WORK_BYTES {
        problems.push(
            path,
            ValidationCode::TooLong,
            format!("The work is at most {MAX_WORK_BYTES} bytes of JSON."),
        );
        return problems.0;
    }
    if work.prompt.len() > MAX_PROMPT_BLOCKS {
        problems.push(
            format!("{path}.prompt"),
            ValidationCode::TooMany,
            format!("A prompt has at most {MAX_PROMPT_BLOCKS} content blocks."),
        );
    }
    for (i, block) in work.prompt.iter().enumerate().take(MAX_PROMPT_BLOCKS) {
        if !block.get("type").is_some_and(serde_json::Value::is_string) {
            problems.push(
                format!("{path}.prompt[{i}]"),
                ValidationCode::WrongType,
                "An ACP content block is an object with a `type` (e.g. `{\"type\": \"text\", \"text\": ...}`).",
            );
        }
    }
    if work.messages.len() > MAX_MESSAGES {
        problems.push(
            format!("{path}.messages"),
            ValidationCode::TooMany,
            format!("A call has at most {MAX_MESSAGES} messages."),
        );
    }
    for (i, m) in work.messages.iter().enumerate().take(MAX_MESSAGES) {
        let role_ok = m
            .get("role")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|r| matches!(r, "system" | "user" | "assistant"));
        if !role_ok || m.get("content").is_none() {
            problems.push(
                format!("{path}.messages[{i}]"),
                ValidationCode::WrongType,
                "A message is an object with a `role` (system, user or assistant) and its `content`.",
            );
        }
    }
    for key in work.params.keys() {
        if RESERVED_PARAMS.contains(&key.as_str()) {
            problems.push(
                format!("{path}.params.{key}"),
                ValidationCode::UnknownField,
                "The endpoint's configuration owns this parameter.",
            );
        }
    }
    if let Some(cwd) = &work.cwd {
        if cwd.chars().count() > MAX_PATH_CHARS || !cwd.starts_with('/') || cwd.contains('\0') {
            problems.push(
                format!("{path}.cwd"),
                ValidationCode::InvalidCharacters,
                format!("Give an absolute path of at most {MAX_PATH_CHARS} characters."),
            );
        }
    }
    problems.0
}

/// A route start that passed every check: a bounded profile id, a caller with a non-blank,
/// bounded reference and invocation id, and an optional bounded title (no prompt text).
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedStartRoute {
    profile_id: String,
    caller: Caller,
    title: Option<String>,
    work: Option<Work>,
    pin: Option<String>,
}

impl ValidatedStartRoute {
    /// Parses a route start, reporting every problem at `profile_id`, `caller.reference`,
    /// `caller.invocation_id` or `title`.
    pub fn parse(request: &StartRouteRequest) -> Result<ValidatedStartRoute, ValidationErrors> {
        let mut problems = Problems::default();
        problems.check(
            "profile_id",
            check_line(&request.profile_id, "the profile id", MAX_ID_CHARS),
        );
        problems.check(
            "caller.reference",
            check_line(
                &request.caller.reference,
                "the caller's reference (task, step or assignment)",
                MAX_CALLER_REFERENCE_CHARS,
            ),
        );
        problems.check(
            "caller.invocation_id",
            check_line(
                &request.caller.invocation_id,
                "the invocation id",
                MAX_INVOCATION_ID_CHARS,
            ),
        );
        if let Some(t) = &request.title {
            problems.check("title", check_optional_line(t, "the title", MAX_TITLE_CHARS));
        }
        let title = request.title.as_deref().map(str::trim).filter(|t| !t.is_empty());
        if let Some(work) = &request.work {
            problems.0.extend(check_work(work, "work"));
        }
        if let Some(pin) = &request.pin {
            problems.check("pin", check_line(pin, "the candidate to pin", MAX_ID_CHARS));
            if !request.caller.kind.runs_attempts() {
                problems.push(
                    "pin",
                    ValidationCode::UnknownField,
                    "Only a route whose caller runs its attempts (`editor`) is pinned to a candidate.",
                );
            }
        }
        let value = ValidatedStartRoute {
            profile_id: request.profile_id.clone(),
            caller: request.caller.clone(),
            title: title.map(str::to_owned),
            work: request.work.clone(),
            pin: request.pin.clone(),
        };
        problems.finish(Some(value))
    }

    /// A gateway call's route start (`crate::gateway`): its request was parsed by
    /// [`crate::gateway::GatewayRequest::parse`] under the gateway's own limits (a whole agent
    /// turn, passed through as the client sent it, is larger than [`check_work`] allows a REST
    /// caller's work to be); the profile id and invocation id are the server's.
    pub(crate) fn gateway(profile_id: &str, caller: Caller, title: &str, work: Work) -> ValidatedStartRoute {
        ValidatedStartRoute {
            profile_id: profile_id.to_owned(),
            caller,
            title: Some(title.to_owned()),
            work: Some(work),
            pin: None,
        }
    }

    pub fn profile_id(&self) -> &str {
        &self.profile_id
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn caller_kind(&self) -> CallerKind {
        self.caller.kind
    }

    /// The candidate the route is pinned to, if any (checked against the profile when it is
    /// read).
    pub fn pin(&self) -> Option<&str> {
        self.pin.as_deref()
    }

    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The work the route carries, if the caller sent it.
    pub fn work(&self) -> Option<&Work> {
        self.work.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{SimulatedOutcome, SimulatedStep};
    use serde_json::json;

    fn doc(ids: &[&str]) -> serde_json::Value {
        let c: Vec<_> = ids
            .iter()
            .map(|id| crate::document::CandidatePolicy::with_defaults(id))
            .collect();
        serde_json::to_value(crate::document::PolicyDocument {
            version: 1,
            candidates: c,
        })
        .unwrap()
    }

    fn input(targets: Vec<CandidateTarget>) -> ProfileInput {
        ProfileInput {
            name: "  Main  ".into(),
            kind: ProfileKind::Dynamic,
            description: None,
            targets,
            policy: doc(&["a", "b"]),
            expected_revision: None,
            notifications: Vec::new(),
        }
    }

    fn simulated(id: &str, script: Vec<SimulatedStep>) -> CandidateTarget {
        CandidateTarget {
            dispatcher: DispatcherKind::Simulated,
            script,
            ..CandidateTarget::external(id)
        }
    }

    fn paths(e: &ValidationErrors) -> Vec<&str> {
        e.errors.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn a_profile_without_targets_gets_an_external_target_per_candidate_and_a_trimmed_name() {
        let p = ValidatedProfile::parse(&input(vec![])).unwrap();
        assert_eq!(p.name(), "Main");
        let ids: Vec<_> = p
            .targets()
            .iter()
            .map(|t| (t.id.as_str(), t.dispatcher))
            .collect();
        assert_eq!(
            ids,
            [("a", DispatcherKind::External), ("b", DispatcherKind::External)]
        );
    }

    #[test]
    fn an_overlong_simulated_delay_is_rejected_at_its_step() {
        // 10^13 seconds once overflowed the server's deadline arithmetic and panicked it.
        let step = SimulatedStep {
            outcome: SimulatedOutcome::Succeed,
            after_seconds: 10_000_000_000_000,
            envelope: None,
        };
        let e = ValidatedProfile::parse(&input(vec![
            simulated("a", vec![step]),
            CandidateTarget::external("b"),
        ]))
        .unwrap_err();
        assert_eq!(paths(&e), ["targets[0].script[0].after_seconds"]);
        assert_eq!(e.errors[0].code, ValidationCode::OutOfRange);
        let at_limit = SimulatedStep {
            outcome: SimulatedOutcome::Succeed,
            after_seconds: MAX_SIMULATED_DELAY_SECONDS,
            envelope: None,
        };
        ValidatedProfile::parse(&input(vec![
            simulated("a", vec![at_limit]),
            CandidateTarget::external("b"),
        ]))
        .unwrap();
    }

    #[test]
    fn every_unbounded_string_and_list_of_a_target_is_bounded() {
        let big = "x".repeat(1_000_000);
        let mut t = simulated(
            "a",
            vec![
                SimulatedStep {
                    outcome: SimulatedOutcome::Fail,
                    after_seconds: 0,
                    envelope: Some(json!({"items": [{"kind": "stderr", "lines": [big.clone()]}]})),
                };
                MAX_SCRIPT_STEPS + 1
            ],
        );
        t.label = Some(big.clone());
        t.provider_id = Some(big.clone());
        t.model_id = Some("has space".into());
        let mut i = input(vec![t, CandidateTarget::external("b")]);
        i.name = big.clone();
        i.description = Some(big);
        let e = ValidatedProfile::parse(&i).unwrap_err();
        let p = paths(&e);
        for want in [
            "name",
            "description",
            "targets[0].provider_id",
            "targets[0].model_id",
            "targets[0].label",
            "targets[0].script",
            "targets[0].script[0].envelope",
        ] {
            assert!(p.contains(&want), "{want} missing from {p:?}");
        }
        // Messages never repeat the value.
        assert!(e.errors.iter().all(|e| e.message.len() < 200), "{e:?}");
    }

    #[test]
    fn identifiers_allow_real_model_names_and_nothing_else() {
        for ok in [
            "claude-sonnet-4-5",
            "anthropic/claude-3.5-sonnet",
            "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
            "gpt-4o@2024-08-06",
            "models/gemini-2.5-pro",
        ] {
            check_identifier(ok, "the model id").unwrap();
        }
        for bad in ["", "-x", "a b", "a\nb", "ключ", "a\"b", "a=b"] {
            assert!(check_identifier(bad, "the model id").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn targets_must_follow_the_documents_candidates() {
        let e = ValidatedProfile::parse(&input(vec![CandidateTarget::external("b")])).unwrap_err();
        assert_eq!(paths(&e), ["targets[0].id", "targets[1]"]);
    }

    #[test]
    fn work_is_bounded_and_shaped_and_leaves_the_endpoints_parameters_alone() {
        let ok = Work {
            prompt: vec![json!({"type": "text", "text": "Fix the build"})],
            cwd: Some("/srv/work/repo".into()),
            messages: vec![json!({"role": "user", "content": "Summarize"})],
            params: serde_json::Map::from_iter([("max_tokens".to_owned(), json!(512))]),
        };
        assert_eq!(check_work(&ok, "work"), vec![]);
        let bad = Work {
            prompt: vec![json!("just text")],
            cwd: Some("relative/dir".into()),
            messages: vec![json!({"role": "robot", "content": "x"})],
            params: serde_json::Map::from_iter([("model".to_owned(), json!("gpt-5"))]),
        };
        let paths: Vec<String> = check_work(&bad, "work").into_iter().map(|e| e.path).collect();
        assert_eq!(
            paths,
            [
                "work.prompt[0]",
                "work.messages[0]",
                "work.params.model",
                "work.cwd"
            ]
        );
        let huge = Work {
            prompt: vec![json!({"type": "text", "text": "x".repeat(MAX_WORK_BYTES)})],
            ..Work::default()
        };
        assert_eq!(check_work(&huge, "work")[0].code, ValidationCode::TooLong);
    }

    #[test]
    fn a_concrete_profile_has_one_candidate_and_gets_interactive_defaults_when_it_names_no_policy() {
        let mut i = input(vec![simulated("solo", vec![])]);
        i.kind = ProfileKind::Concrete;
        i.policy = serde_json::Value::Null;
        let p = ValidatedProfile::parse(&i).unwrap();
        let c = p.document().candidate("solo").unwrap();
        assert_eq!(
            c.transient().max_retries(),
            crate::limits::CONCRETE_TRANSIENT_MAX_RETRIES
        );
        assert_eq!(
            c.hard().max_wait_seconds(),
            Some(crate::limits::CONCRETE_HARD_MAX_WAIT_SECONDS)
        );
        assert_eq!(c.hard().on_exhausted(), crate::document::OnExhausted::Stop);
        assert_eq!(
            p.into_profile("p".into(), 1, now(), now()).kind,
            ProfileKind::Concrete
        );
        // Two candidates are a dynamic profile's business.
        let mut two = input(vec![]);
        two.kind = ProfileKind::Concrete;
        let e = ValidatedProfile::parse(&two).unwrap_err();
        assert_eq!(paths(&e), ["candidates"]);
        // No policy and no target: say which one is meant.
        let mut none = input(vec![]);
        none.kind = ProfileKind::Concrete;
        none.policy = serde_json::Value::Null;
        assert!(paths(&ValidatedProfile::parse(&none).unwrap_err()).contains(&"targets"));
    }

    fn now() -> DateTime<Utc> {
        chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 12, 1, 8, 0, 0).unwrap()
    }

    #[test]
    fn a_route_start_needs_a_bounded_caller_and_title() {
        let ok = StartRouteRequest {
            profile_id: "pf-1".into(),
            caller: Caller {
                kind: CallerKind::KanbanTask,
                reference: "task-1".into(),
                invocation_id: "inv-1".into(),
            },
            title: Some("  Fix the build ".into()),
            work: None,
            pin: None,
        };
        let v = ValidatedStartRoute::parse(&ok).unwrap();
        assert_eq!(v.title(), Some("Fix the build"));
        let big = "y".repeat(MAX_TITLE_CHARS + 1);
        let bad = StartRouteRequest {
            profile_id: String::new(),
            caller: Caller {
                kind: CallerKind::Utility,
                reference: " ".into(),
                invocation_id: "z".repeat(MAX_INVOCATION_ID_CHARS + 1),
            },
            title: Some(big),
            work: None,
            pin: None,
        };
        let e = ValidatedStartRoute::parse(&bad).unwrap_err();
        assert_eq!(
            paths(&e),
            ["profile_id", "caller.reference", "caller.invocation_id", "title"]
        );
        assert!(e.errors.iter().all(|e| !e.message.contains("zzzz")));
    }
}
