//! The versioned policy document (version 1) and its validation from untrusted JSON.
//!
//! Shape, one entry per dynamic candidate, in preference order:
//!
//! ```json
//! {"version": 1,
//!  "candidates": [
//!    {"id": "claude-main",
//!     "transient": {"retry": {"enabled": true, "max_retries": 3, "initial_interval_seconds": 5},
//!                   "wait_for_reset": {"enabled": false, "max_wait_seconds": 0},
//!                   "on_exhausted": "skip"},
//!     "hard":      {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0},
//!                   "wait_for_reset": {"enabled": true, "max_wait_seconds": 300},
//!                   "on_exhausted": "stop"}}]}
//! ```
//!
//! Why validation walks a `serde_json::Value` instead of deserializing: serde stops at the first
//! problem, and a person fixing a form needs every problem at once, each addressed by a path
//! (`candidates[1].hard.retry.max_retries`), a stable code and a readable message. The walker
//! never panics and never allocates more than a bounded amount per input node.
//!
//! Why the same checks are exported per field ([`validate_number_text`], [`validate_number_value`],
//! [`validate_candidate_id`]): the UI validates while a person types, and its messages must be
//! exactly the ones the server would return. Both go through one function per field.
//!
//! The wire types ([`PolicyDocument`], [`ClassPolicy`], ...) have public fields and carry no
//! guarantee. The `Validated*` types have private fields and can only be built by validation,
//! so holding one proves the limits of [`crate::limits`] hold; only they reach the evaluator.

use crate::{
    class::ErrorClass,
    limits::{
        MAX_CANDIDATES, MAX_CANDIDATE_ID_CHARS, MAX_INITIAL_INTERVAL_SECONDS, MAX_MAX_RETRIES,
        MAX_MAX_WAIT_SECONDS, MIN_CANDIDATES, MIN_INITIAL_INTERVAL_SECONDS, MIN_MAX_RETRIES,
        MIN_MAX_WAIT_SECONDS, POLICY_DOCUMENT_VERSION,
    },
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

// ------------------------------------------------------------------------------------------------
// Wire types
// ------------------------------------------------------------------------------------------------

/// The policy document as it travels (API, storage). No guarantees: validate it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicyDocument {
    pub version: u64,
    pub candidates: Vec<CandidatePolicy>,
}

/// The two class policies of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CandidatePolicy {
    pub id: String,
    pub transient: ClassPolicy,
    pub hard: ClassPolicy,
}

impl CandidatePolicy {
    /// A candidate with the default policy for both classes (immediate skip).
    pub fn with_defaults(id: &str) -> CandidatePolicy {
        CandidatePolicy {
            id: id.to_owned(),
            transient: ClassPolicy::default(),
            hard: ClassPolicy::default(),
        }
    }
}

/// What one candidate does about one class of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClassPolicy {
    pub retry: RetryPolicy,
    pub wait_for_reset: WaitForResetPolicy,
    pub on_exhausted: OnExhausted,
}

impl Default for ClassPolicy {
    /// Retry and reset waiting disabled (zeros), then skip: the spec's default for new and
    /// legacy candidates.
    fn default() -> Self {
        ClassPolicy {
            retry: RetryPolicy {
                enabled: crate::limits::DEFAULT_RETRY_ENABLED,
                max_retries: 0,
                initial_interval_seconds: 0,
            },
            wait_for_reset: WaitForResetPolicy {
                enabled: crate::limits::DEFAULT_WAIT_FOR_RESET_ENABLED,
                max_wait_seconds: 0,
            },
            on_exhausted: crate::limits::DEFAULT_ON_EXHAUSTED,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    pub enabled: bool,
    /// Additional attempts after the failed one.
    pub max_retries: u32,
    /// Delay before the first retry; later delays double.
    pub initial_interval_seconds: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WaitForResetPolicy {
    pub enabled: bool,
    /// Longest future reset this policy waits for.
    pub max_wait_seconds: u64,
}

/// What happens when retry and reset waiting are used up, or do not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnExhausted {
    /// Exclude this candidate for the rest of the route cycle and evaluate the next one.
    Skip,
    /// Stop automatic recovery and ask a person.
    Stop,
}

impl OnExhausted {
    pub const ALL: [OnExhausted; 2] = [OnExhausted::Skip, OnExhausted::Stop];

    pub const fn as_str(self) -> &'static str {
        match self {
            OnExhausted::Skip => "skip",
            OnExhausted::Stop => "stop",
        }
    }

    pub fn parse(s: &str) -> Option<OnExhausted> {
        OnExhausted::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl fmt::Display for OnExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ------------------------------------------------------------------------------------------------
// Validation errors (wire)
// ------------------------------------------------------------------------------------------------

/// Stable, machine-readable validation codes. The spelling is the contract; never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ValidationCode {
    /// A required field is absent (or an input box is empty).
    Missing,
    /// The value has the wrong JSON type (a string where a number belongs, ...).
    WrongType,
    /// A field this version does not know.
    UnknownField,
    /// `version` is a number other than the supported one.
    UnsupportedVersion,
    /// A key in a candidate names a class other than `transient` and `hard`.
    UnknownClass,
    /// `on_exhausted` is neither `skip` nor `stop`.
    UnknownOutcome,
    /// A number with a fractional part.
    NotInteger,
    /// NaN or an infinity (reachable from typed text; JSON cannot carry them).
    NotFinite,
    /// A count or duration below zero.
    Negative,
    /// Outside the backend-owned limits of [`crate::limits`].
    OutOfRange,
    /// A disabled section stores zeros.
    MustBeZeroWhenDisabled,
    /// An empty candidate list or a blank id.
    Empty,
    /// More candidates than [`MAX_CANDIDATES`].
    TooMany,
    /// A candidate id longer than [`MAX_CANDIDATE_ID_CHARS`].
    TooLong,
    /// A candidate id with control characters.
    InvalidCharacters,
    /// Two candidates with the same id.
    Duplicate,
    /// Legacy: an action other than `try_next`, `stop` or `retry_same`.
    UnknownAction,
    /// Legacy: a per-code rule for a code the registry does not know.
    UnknownCode,
    /// Legacy: per-code rules of one class ask for different actions.
    ConflictingRules,
}

impl ValidationCode {
    pub const fn as_str(self) -> &'static str {
        match self {
            ValidationCode::Missing => "missing",
            ValidationCode::WrongType => "wrong_type",
            ValidationCode::UnknownField => "unknown_field",
            ValidationCode::UnsupportedVersion => "unsupported_version",
            ValidationCode::UnknownClass => "unknown_class",
            ValidationCode::UnknownOutcome => "unknown_outcome",
            ValidationCode::NotInteger => "not_integer",
            ValidationCode::NotFinite => "not_finite",
            ValidationCode::Negative => "negative",
            ValidationCode::OutOfRange => "out_of_range",
            ValidationCode::MustBeZeroWhenDisabled => "must_be_zero_when_disabled",
            ValidationCode::Empty => "empty",
            ValidationCode::TooMany => "too_many",
            ValidationCode::TooLong => "too_long",
            ValidationCode::InvalidCharacters => "invalid_characters",
            ValidationCode::Duplicate => "duplicate",
            ValidationCode::UnknownAction => "unknown_action",
            ValidationCode::UnknownCode => "unknown_code",
            ValidationCode::ConflictingRules => "conflicting_rules",
        }
    }
}

impl fmt::Display for ValidationCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem with a field: what the UI shows next to the control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub code: ValidationCode,
    pub message: String,
}

impl FieldError {
    pub fn new(code: ValidationCode, message: impl Into<String>) -> FieldError {
        FieldError {
            code,
            message: message.into(),
        }
    }

    /// Addresses this problem at `path`.
    pub fn at(self, path: &str) -> ValidationError {
        ValidationError {
            path: path.to_owned(),
            code: self.code,
            message: self.message,
        }
    }
}

/// One problem in a document, addressed by a field path such as
/// `candidates[1].hard.retry.max_retries` (the empty path is the document itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ValidationError {
    pub path: String,
    pub code: ValidationCode,
    pub message: String,
}

/// Every problem found, in document order: the API's 422 body `{"errors":[...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[error("[PL1001] invalid policy document: {}", summary(.errors))]
pub struct ValidationErrors {
    pub errors: Vec<ValidationError>,
}

fn summary(errors: &[ValidationError]) -> String {
    let mut out = String::new();
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        if e.path.is_empty() {
            out.push_str(&e.message);
        } else {
            out.push_str(&format!("{}: {}", e.path, e.message));
        }
    }
    out
}

impl ValidationErrors {
    /// The errors addressed exactly at `path` (what the UI puts next to one control).
    pub fn at<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a ValidationError> + 'a {
        self.errors.iter().filter(move |e| e.path == path)
    }

    /// Whether any error has this code.
    pub fn has(&self, code: ValidationCode) -> bool {
        self.errors.iter().any(|e| e.code == code)
    }

    pub(crate) fn single(path: &str, error: FieldError) -> ValidationErrors {
        ValidationErrors {
            errors: vec![error.at(path)],
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Validated types
// ------------------------------------------------------------------------------------------------

/// Enabled retry settings. Invariant: `max_retries` in `MIN_MAX_RETRIES..=MAX_MAX_RETRIES`,
/// `initial_interval_seconds` in `MIN_INITIAL_INTERVAL_SECONDS..=MAX_INITIAL_INTERVAL_SECONDS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetrySettings {
    max_retries: u32,
    initial_interval_seconds: u64,
}

impl RetrySettings {
    pub fn max_retries(self) -> u32 {
        self.max_retries
    }

    pub fn initial_interval_seconds(self) -> u64 {
        self.initial_interval_seconds
    }
}

/// A class policy within the limits. Invariants: enabled retry has its settings in range
/// ([`RetrySettings`]); enabled reset waiting has `max_wait_seconds` in
/// `MIN_MAX_WAIT_SECONDS..=MAX_MAX_WAIT_SECONDS`; disabled sections are absent here and are
/// written back as zeros. Serializes as (and deserializes only from a valid) [`ClassPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ClassPolicy", into = "ClassPolicy")]
pub struct ValidatedClassPolicy {
    retry: Option<RetrySettings>,
    max_wait_seconds: Option<u64>,
    on_exhausted: OnExhausted,
}

impl Default for ValidatedClassPolicy {
    fn default() -> Self {
        ValidatedClassPolicy::immediately(crate::limits::DEFAULT_ON_EXHAUSTED)
    }
}

impl ValidatedClassPolicy {
    /// Validates a typed policy; error paths are relative (`retry.max_retries`).
    pub fn new(policy: ClassPolicy) -> Result<ValidatedClassPolicy, ValidationErrors> {
        validate_class_policy(&class_policy_json(&policy), "")
    }

    /// No retry, no reset waiting: apply `on_exhausted` at once.
    pub const fn immediately(on_exhausted: OnExhausted) -> ValidatedClassPolicy {
        ValidatedClassPolicy {
            retry: None,
            max_wait_seconds: None,
            on_exhausted,
        }
    }

    /// The retry settings, when retry is enabled.
    pub fn retry(&self) -> Option<RetrySettings> {
        self.retry
    }

    /// The retry budget: 0 when retry is disabled.
    pub fn max_retries(&self) -> u32 {
        self.retry.map_or(0, RetrySettings::max_retries)
    }

    /// The longest reset this policy waits for, when reset waiting is enabled.
    pub fn max_wait_seconds(&self) -> Option<u64> {
        self.max_wait_seconds
    }

    pub fn on_exhausted(&self) -> OnExhausted {
        self.on_exhausted
    }

    /// The wire form, with zeros in disabled sections.
    pub fn to_wire(&self) -> ClassPolicy {
        ClassPolicy {
            retry: match self.retry {
                Some(r) => RetryPolicy {
                    enabled: true,
                    max_retries: r.max_retries,
                    initial_interval_seconds: r.initial_interval_seconds,
                },
                None => RetryPolicy {
                    enabled: false,
                    max_retries: 0,
                    initial_interval_seconds: 0,
                },
            },
            wait_for_reset: match self.max_wait_seconds {
                Some(w) => WaitForResetPolicy {
                    enabled: true,
                    max_wait_seconds: w,
                },
                None => WaitForResetPolicy {
                    enabled: false,
                    max_wait_seconds: 0,
                },
            },
            on_exhausted: self.on_exhausted,
        }
    }

    pub(crate) const fn retry_then(
        max_retries: u32,
        initial_interval_seconds: u64,
        on_exhausted: OnExhausted,
    ) -> ValidatedClassPolicy {
        // Callers pass constants inside the limits (checked by the legacy tests).
        ValidatedClassPolicy {
            retry: Some(RetrySettings {
                max_retries,
                initial_interval_seconds,
            }),
            max_wait_seconds: None,
            on_exhausted,
        }
    }
}

impl TryFrom<ClassPolicy> for ValidatedClassPolicy {
    type Error = ValidationErrors;

    fn try_from(policy: ClassPolicy) -> Result<Self, Self::Error> {
        ValidatedClassPolicy::new(policy)
    }
}

impl From<ValidatedClassPolicy> for ClassPolicy {
    fn from(p: ValidatedClassPolicy) -> Self {
        p.to_wire()
    }
}

/// One candidate's validated policies. Invariant: the id passes [`validate_candidate_id`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "CandidatePolicy", into = "CandidatePolicy")]
pub struct ValidatedCandidatePolicy {
    id: String,
    transient: ValidatedClassPolicy,
    hard: ValidatedClassPolicy,
}

impl ValidatedCandidatePolicy {
    /// Builds a candidate from validated class policies; only the id can be wrong.
    pub fn new(
        id: &str,
        transient: ValidatedClassPolicy,
        hard: ValidatedClassPolicy,
    ) -> Result<ValidatedCandidatePolicy, ValidationErrors> {
        validate_candidate_id(id).map_err(|e| ValidationErrors::single("id", e))?;
        Ok(ValidatedCandidatePolicy {
            id: id.to_owned(),
            transient,
            hard,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The policy for one class.
    pub fn policy(&self, class: ErrorClass) -> &ValidatedClassPolicy {
        match class {
            ErrorClass::Transient => &self.transient,
            ErrorClass::Hard => &self.hard,
        }
    }

    pub fn transient(&self) -> &ValidatedClassPolicy {
        &self.transient
    }

    pub fn hard(&self) -> &ValidatedClassPolicy {
        &self.hard
    }

    pub fn to_wire(&self) -> CandidatePolicy {
        CandidatePolicy {
            id: self.id.clone(),
            transient: self.transient.to_wire(),
            hard: self.hard.to_wire(),
        }
    }
}

impl TryFrom<CandidatePolicy> for ValidatedCandidatePolicy {
    type Error = ValidationErrors;

    fn try_from(c: CandidatePolicy) -> Result<Self, Self::Error> {
        let mut errs = Errors::default();
        let value = candidate_json(&c);
        let out = walk_candidate(&value, &Path::root(), &mut errs);
        errs.finish(out)
    }
}

impl From<ValidatedCandidatePolicy> for CandidatePolicy {
    fn from(c: ValidatedCandidatePolicy) -> Self {
        c.to_wire()
    }
}

/// A whole validated document. Invariants: `MIN_CANDIDATES..=MAX_CANDIDATES` candidates, each
/// valid, with distinct ids, in preference order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "PolicyDocument", into = "PolicyDocument")]
pub struct ValidatedPolicyDocument {
    candidates: Vec<ValidatedCandidatePolicy>,
}

impl ValidatedPolicyDocument {
    /// Assembles a document from validated candidates; checks the count and id uniqueness.
    pub fn new(
        candidates: Vec<ValidatedCandidatePolicy>,
    ) -> Result<ValidatedPolicyDocument, ValidationErrors> {
        let mut errs = Errors::default();
        check_candidate_count(candidates.len(), &Path::root().key("candidates"), &mut errs);
        let ids: Vec<Option<&str>> = candidates.iter().map(|c| Some(c.id())).collect();
        check_duplicate_ids(&ids, &mut errs);
        errs.finish(Some(ValidatedPolicyDocument { candidates }))
    }

    /// One candidate with the default policy (immediate skip for both classes).
    pub fn with_defaults(ids: &[&str]) -> Result<ValidatedPolicyDocument, ValidationErrors> {
        let doc = PolicyDocument {
            version: POLICY_DOCUMENT_VERSION,
            candidates: ids.iter().map(|id| CandidatePolicy::with_defaults(id)).collect(),
        };
        ValidatedPolicyDocument::try_from(doc)
    }

    pub fn candidates(&self) -> &[ValidatedCandidatePolicy] {
        &self.candidates
    }

    /// The candidate with this id, if the document has it.
    pub fn candidate(&self, id: &str) -> Option<&ValidatedCandidatePolicy> {
        self.candidates.iter().find(|c| c.id == id)
    }

    pub fn to_wire(&self) -> PolicyDocument {
        PolicyDocument {
            version: POLICY_DOCUMENT_VERSION,
            candidates: self
                .candidates
                .iter()
                .map(ValidatedCandidatePolicy::to_wire)
                .collect(),
        }
    }

    /// The normalized JSON form the backend stores and returns.
    pub fn to_json(&self) -> Value {
        document_json(&self.to_wire())
    }
}

impl TryFrom<PolicyDocument> for ValidatedPolicyDocument {
    type Error = ValidationErrors;

    fn try_from(doc: PolicyDocument) -> Result<Self, Self::Error> {
        validate_document(&document_json(&doc))
    }
}

impl From<ValidatedPolicyDocument> for PolicyDocument {
    fn from(d: ValidatedPolicyDocument) -> Self {
        d.to_wire()
    }
}

// The typed forms go through the JSON walker so that there is exactly one set of checks.
// These builders cannot fail (unlike `serde_json::to_value`, whose error case is unreachable
// for these types but would still need handling).
fn class_policy_json(p: &ClassPolicy) -> Value {
    serde_json::json!({
        "retry": {
            "enabled": p.retry.enabled,
            "max_retries": p.retry.max_retries,
            "initial_interval_seconds": p.retry.initial_interval_seconds,
        },
        "wait_for_reset": {
            "enabled": p.wait_for_reset.enabled,
            "max_wait_seconds": p.wait_for_reset.max_wait_seconds,
        },
        "on_exhausted": p.on_exhausted.as_str(),
    })
}

fn candidate_json(c: &CandidatePolicy) -> Value {
    serde_json::json!({
        "id": c.id,
        "transient": class_policy_json(&c.transient),
        "hard": class_policy_json(&c.hard),
    })
}

fn document_json(d: &PolicyDocument) -> Value {
    serde_json::json!({
        "version": d.version,
        "candidates": d.candidates.iter().map(candidate_json).collect::<Vec<_>>(),
    })
}

// ------------------------------------------------------------------------------------------------
// Per-field validators (shared by the walker and the UI)
// ------------------------------------------------------------------------------------------------

/// The numeric fields of a class policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumberField {
    /// `retry.max_retries`
    MaxRetries,
    /// `retry.initial_interval_seconds`
    InitialIntervalSeconds,
    /// `wait_for_reset.max_wait_seconds`
    MaxWaitSeconds,
}

impl NumberField {
    pub const ALL: [NumberField; 3] = [
        NumberField::MaxRetries,
        NumberField::InitialIntervalSeconds,
        NumberField::MaxWaitSeconds,
    ];

    /// The JSON key.
    pub const fn key(self) -> &'static str {
        match self {
            NumberField::MaxRetries => "max_retries",
            NumberField::InitialIntervalSeconds => "initial_interval_seconds",
            NumberField::MaxWaitSeconds => "max_wait_seconds",
        }
    }

    /// The key of the section that holds it (`retry` or `wait_for_reset`).
    pub const fn section_key(self) -> &'static str {
        match self {
            NumberField::MaxRetries | NumberField::InitialIntervalSeconds => "retry",
            NumberField::MaxWaitSeconds => "wait_for_reset",
        }
    }

    /// The path inside a class policy (`retry.max_retries`).
    pub fn relative_path(self) -> String {
        format!("{}.{}", self.section_key(), self.key())
    }

    /// The control's label, as messages spell it.
    pub const fn label(self) -> &'static str {
        match self {
            NumberField::MaxRetries => "Maximum retries",
            NumberField::InitialIntervalSeconds => "Initial interval",
            NumberField::MaxWaitSeconds => "Maximum wait",
        }
    }

    /// Smallest value accepted while the section is enabled.
    pub const fn min(self) -> u64 {
        match self {
            NumberField::MaxRetries => MIN_MAX_RETRIES as u64,
            NumberField::InitialIntervalSeconds => MIN_INITIAL_INTERVAL_SECONDS,
            NumberField::MaxWaitSeconds => MIN_MAX_WAIT_SECONDS,
        }
    }

    /// Largest value accepted while the section is enabled.
    pub const fn max(self) -> u64 {
        match self {
            NumberField::MaxRetries => MAX_MAX_RETRIES as u64,
            NumberField::InitialIntervalSeconds => MAX_INITIAL_INTERVAL_SECONDS,
            NumberField::MaxWaitSeconds => MAX_MAX_WAIT_SECONDS,
        }
    }

    const fn section_name(self) -> &'static str {
        match self {
            NumberField::MaxRetries | NumberField::InitialIntervalSeconds => "retry",
            NumberField::MaxWaitSeconds => "reset waiting",
        }
    }

    fn range_text(self) -> String {
        match self {
            NumberField::MaxRetries => format!("between {} and {}", self.min(), self.max()),
            NumberField::InitialIntervalSeconds | NumberField::MaxWaitSeconds => format!(
                "between {} and {} ({} seconds)",
                crate::schedule::format_duration(self.min()),
                crate::schedule::format_duration(self.max()),
                self.max()
            ),
        }
    }

    fn error(self, code: ValidationCode) -> FieldError {
        let label = self.label();
        let message = match code {
            ValidationCode::Missing => format!("{label} is required."),
            ValidationCode::NotFinite => format!("{label} must be a finite number."),
            ValidationCode::NotInteger => format!("{label} must be a whole number."),
            ValidationCode::Negative => format!("{label} cannot be negative."),
            ValidationCode::OutOfRange => format!("{label} must be {}.", self.range_text()),
            ValidationCode::MustBeZeroWhenDisabled => {
                format!("{label} must be 0 while {} is off.", self.section_name())
            }
            _ => format!("{label} must be a number."),
        };
        FieldError::new(code, message)
    }
}

/// A number as it arrived, before any check.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

fn num_from_value(value: &Value) -> Option<Num> {
    let n = value.as_number()?;
    Some(if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    })
}

/// The integer a number stands for, when it is one (`3.0` is 3; `2.5` and NaN are none).
fn integral(num: Num) -> Option<i128> {
    match num {
        Num::Int(i) => Some(i),
        // `as` saturates, which only matters far outside every limit.
        Num::Float(f) if f.is_finite() && f.fract() == 0.0 => Some(f as i128),
        Num::Float(_) => None,
    }
}

/// The one numeric check. `enabled` is `None` when the section's flag is itself invalid; then
/// only the value's own shape is checked.
fn check_number(field: NumberField, enabled: Option<bool>, num: Num) -> Result<u64, FieldError> {
    let int = match (num, integral(num)) {
        (_, Some(i)) => i,
        (Num::Float(f), None) if !f.is_finite() => return Err(field.error(ValidationCode::NotFinite)),
        _ => return Err(field.error(ValidationCode::NotInteger)),
    };
    if int < 0 {
        return Err(field.error(ValidationCode::Negative));
    }
    let value = u64::try_from(int).unwrap_or(u64::MAX);
    match enabled {
        Some(true) if !(field.min()..=field.max()).contains(&value) || i128::from(value) != int => {
            Err(field.error(ValidationCode::OutOfRange))
        }
        Some(false) if value != 0 => Err(field.error(ValidationCode::MustBeZeroWhenDisabled)),
        _ => Ok(value),
    }
}

/// Validates one numeric field from a JSON value (what the server receives).
pub fn validate_number_value(
    field: NumberField,
    section_enabled: bool,
    value: &Value,
) -> Result<u64, FieldError> {
    let num = num_from_value(value).ok_or_else(|| field.error(ValidationCode::WrongType))?;
    check_number(field, Some(section_enabled), num)
}

/// Validates one numeric field from what a person typed (what the UI has), with the exact
/// messages the server would return for the same number. Accepts surrounding spaces, a sign,
/// decimals and exponents (`1e3`), and reports `NaN` and infinities as such.
pub fn validate_number_text(
    field: NumberField,
    section_enabled: bool,
    text: &str,
) -> Result<u64, FieldError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(field.error(ValidationCode::Missing));
    }
    let num = if let Ok(i) = text.parse::<i128>() {
        Num::Int(i)
    } else if let Ok(f) = text.parse::<f64>() {
        Num::Float(f)
    } else {
        return Err(field.error(ValidationCode::WrongType));
    };
    check_number(field, Some(section_enabled), num)
}

/// Validates a candidate id: non-blank, at most [`MAX_CANDIDATE_ID_CHARS`] characters, no
/// control characters.
pub fn validate_candidate_id(id: &str) -> Result<(), FieldError> {
    if id.trim().is_empty() {
        return Err(FieldError::new(
            ValidationCode::Empty,
            "Candidate id cannot be empty.",
        ));
    }
    if id.chars().count() > MAX_CANDIDATE_ID_CHARS {
        return Err(FieldError::new(
            ValidationCode::TooLong,
            format!("Candidate id must be at most {MAX_CANDIDATE_ID_CHARS} characters."),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(FieldError::new(
            ValidationCode::InvalidCharacters,
            "Candidate id cannot contain control characters.",
        ));
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// The walker
// ------------------------------------------------------------------------------------------------

/// Validates a version-1 document from untrusted JSON, reporting every problem.
///
/// A document whose `version` is a supported-looking number other than 1 gets exactly one error
/// (`unsupported_version`): its other fields follow a shape this crate does not know.
pub fn validate_document(value: &Value) -> Result<ValidatedPolicyDocument, ValidationErrors> {
    let mut errs = Errors::default();
    let out = walk_document(value, &mut errs);
    errs.finish(out)
}

/// Validates one class policy found at `path` (for a server that embeds class policies in a
/// larger object). Paths in errors start with `path`.
pub fn validate_class_policy(value: &Value, path: &str) -> Result<ValidatedClassPolicy, ValidationErrors> {
    let mut errs = Errors::default();
    let out = walk_class_policy(value, &Path(path.to_owned()), "class", &mut errs);
    errs.finish(out)
}

/// The path of a field of one class policy in a document, as validation errors spell it:
/// `policy_path(1, ErrorClass::Hard, "retry.max_retries")` is
/// `candidates[1].hard.retry.max_retries`; an empty `field` addresses the class policy itself.
/// The UI uses it to put server errors on the right control.
pub fn policy_path(candidate: usize, class: ErrorClass, field: &str) -> String {
    let class_path = Path::root()
        .key("candidates")
        .index(candidate)
        .key(class.as_str());
    if field.is_empty() {
        class_path.0
    } else {
        format!("{}.{field}", class_path.0)
    }
}

/// Validates one candidate entry found at `path` (id and both class policies).
pub fn validate_candidate(value: &Value, path: &str) -> Result<ValidatedCandidatePolicy, ValidationErrors> {
    let mut errs = Errors::default();
    let out = walk_candidate(value, &Path(path.to_owned()), &mut errs);
    errs.finish(out)
}

#[derive(Debug, Clone)]
pub(crate) struct Path(String);

impl Path {
    pub(crate) fn root() -> Path {
        Path(String::new())
    }

    pub(crate) fn key(&self, key: &str) -> Path {
        let key = display_key(key);
        if self.0.is_empty() {
            Path(key)
        } else {
            Path(format!("{}.{key}", self.0))
        }
    }

    pub(crate) fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// Untrusted keys are echoed in paths and messages; keep that bounded.
pub(crate) fn display_key(key: &str) -> String {
    const MAX: usize = 64;
    match key.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &key[..cut]),
        None => key.to_owned(),
    }
}

#[derive(Debug, Default)]
pub(crate) struct Errors(Vec<ValidationError>);

impl Errors {
    pub(crate) fn push(&mut self, path: &Path, error: FieldError) {
        self.0.push(error.at(path.as_str()));
    }

    pub(crate) fn add(&mut self, path: &Path, code: ValidationCode, message: impl Into<String>) {
        self.push(path, FieldError::new(code, message));
    }

    pub(crate) fn extend(&mut self, other: ValidationErrors) {
        self.0.extend(other.errors);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok` only when no error was recorded (and the walk produced a value).
    pub(crate) fn finish<T>(self, out: Option<T>) -> Result<T, ValidationErrors> {
        match out {
            Some(v) if self.0.is_empty() => Ok(v),
            _ => Err(ValidationErrors { errors: self.0 }),
        }
    }
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn object<'v>(
    value: &'v Value,
    path: &Path,
    errs: &mut Errors,
    expected: &str,
) -> Option<&'v Map<String, Value>> {
    match value.as_object() {
        Some(map) => Some(map),
        None => {
            errs.add(
                path,
                ValidationCode::WrongType,
                format!("{expected}; found {}.", json_type(value)),
            );
            None
        }
    }
}

/// Reports keys outside `known`, in sorted order (the map's own order depends on features).
pub(crate) fn unknown_keys(
    map: &Map<String, Value>,
    known: &[&str],
    path: &Path,
    errs: &mut Errors,
    classify: impl Fn(&str, &Value) -> FieldError,
) {
    let mut unknown: Vec<(&String, &Value)> =
        map.iter().filter(|(k, _)| !known.contains(&k.as_str())).collect();
    unknown.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in unknown {
        errs.push(&path.key(k), classify(k, v));
    }
}

pub(crate) fn unknown_field(key: &str, _: &Value) -> FieldError {
    FieldError::new(
        ValidationCode::UnknownField,
        format!("Unknown field `{}`.", display_key(key)),
    )
}

pub(crate) fn required<'v>(
    map: &'v Map<String, Value>,
    key: &str,
    path: &Path,
    errs: &mut Errors,
    message: &str,
) -> Option<&'v Value> {
    let v = map.get(key);
    if v.is_none() {
        errs.add(&path.key(key), ValidationCode::Missing, message);
    }
    v
}

pub(crate) fn check_candidate_count(len: usize, path: &Path, errs: &mut Errors) {
    if len < MIN_CANDIDATES {
        errs.add(
            path,
            ValidationCode::Empty,
            "A dynamic profile needs at least one candidate.",
        );
    } else if len > MAX_CANDIDATES {
        errs.add(
            path,
            ValidationCode::TooMany,
            format!("A dynamic profile can have at most {MAX_CANDIDATES} candidates."),
        );
    }
}

/// Reports each repeated id at the later candidate, naming the first one.
pub(crate) fn check_duplicate_ids(ids: &[Option<&str>], errs: &mut Errors) {
    let candidates = Path::root().key("candidates");
    for (i, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some(first) = ids[..i].iter().position(|other| *other == Some(*id)) {
            errs.add(
                &candidates.index(i).key("id"),
                ValidationCode::Duplicate,
                format!(
                    "Candidate id `{}` is already used by candidates[{first}].",
                    display_key(id)
                ),
            );
        }
    }
}

fn walk_document(value: &Value, errs: &mut Errors) -> Option<ValidatedPolicyDocument> {
    let root = Path::root();
    let map = object(value, &root, errs, "The policy document must be a JSON object")?;

    let version_path = root.key("version");
    match map.get("version") {
        None => errs.add(
            &version_path,
            ValidationCode::Missing,
            format!("Version is required; the supported version is {POLICY_DOCUMENT_VERSION}."),
        ),
        Some(v) => match num_from_value(v).and_then(integral) {
            Some(n) if n == i128::from(POLICY_DOCUMENT_VERSION) => {}
            Some(n) => {
                errs.add(
                    &version_path,
                    ValidationCode::UnsupportedVersion,
                    format!(
                        "Unsupported policy document version {n}; the supported version is \
                         {POLICY_DOCUMENT_VERSION}."
                    ),
                );
                return None;
            }
            _ => errs.add(
                &version_path,
                ValidationCode::WrongType,
                format!("Version must be the number {POLICY_DOCUMENT_VERSION}."),
            ),
        },
    }

    let candidates_path = root.key("candidates");
    let mut out = None;
    if let Some(v) = required(map, "candidates", &root, errs, "Candidates are required.") {
        match v.as_array() {
            None => errs.add(
                &candidates_path,
                ValidationCode::WrongType,
                format!("Candidates must be a list; found {}.", json_type(v)),
            ),
            Some(items) => {
                check_candidate_count(items.len(), &candidates_path, errs);
                let walked: Vec<Option<ValidatedCandidatePolicy>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| walk_candidate(item, &candidates_path.index(i), errs))
                    .collect();
                let ids: Vec<Option<&str>> = items
                    .iter()
                    .map(|item| {
                        item.get("id")
                            .and_then(Value::as_str)
                            .filter(|id| validate_candidate_id(id).is_ok())
                    })
                    .collect();
                check_duplicate_ids(&ids, errs);
                out = walked.into_iter().collect::<Option<Vec<_>>>();
            }
        }
    }
    unknown_keys(map, &["version", "candidates"], &root, errs, unknown_field);
    out.map(|candidates| ValidatedPolicyDocument { candidates })
}

fn walk_candidate(value: &Value, path: &Path, errs: &mut Errors) -> Option<ValidatedCandidatePolicy> {
    let map = object(
        value,
        path,
        errs,
        "Each candidate must be an object with id, transient and hard",
    )?;
    let id = required(map, "id", path, errs, "Candidate id is required.").and_then(|v| {
        let id_path = path.key("id");
        match v.as_str() {
            None => {
                errs.add(
                    &id_path,
                    ValidationCode::WrongType,
                    format!("Candidate id must be a string; found {}.", json_type(v)),
                );
                None
            }
            Some(id) => match validate_candidate_id(id) {
                Ok(()) => Some(id.to_owned()),
                Err(e) => {
                    errs.push(&id_path, e);
                    None
                }
            },
        }
    });
    let class = |class: ErrorClass, errs: &mut Errors| {
        let key = class.as_str();
        let missing =
            format!("The {key} policy is missing: every candidate needs both a transient and a hard policy.");
        required(map, key, path, errs, &missing).and_then(|v| walk_class_policy(v, &path.key(key), key, errs))
    };
    let transient = class(ErrorClass::Transient, errs);
    let hard = class(ErrorClass::Hard, errs);
    unknown_keys(map, &["id", "transient", "hard"], path, errs, |key, v| {
        if key == "unclassified" {
            FieldError::new(
                ValidationCode::UnknownClass,
                "`unclassified` is a classification state, not a configurable class: use transient or hard.",
            )
        } else if v.is_object() {
            FieldError::new(
                ValidationCode::UnknownClass,
                format!(
                    "`{}` is not a configurable error class: use transient or hard.",
                    display_key(key)
                ),
            )
        } else {
            unknown_field(key, v)
        }
    });
    Some(ValidatedCandidatePolicy {
        id: id?,
        transient: transient?,
        hard: hard?,
    })
}

fn walk_class_policy(
    value: &Value,
    path: &Path,
    class: &str,
    errs: &mut Errors,
) -> Option<ValidatedClassPolicy> {
    let expected =
        format!("The {class} policy must be an object with retry, wait_for_reset and on_exhausted");
    let map = object(value, path, errs, &expected)?;
    let retry = required(map, "retry", path, errs, "Retry is required.")
        .and_then(|v| walk_retry(v, &path.key("retry"), errs));
    let wait = required(map, "wait_for_reset", path, errs, "Wait for reset is required.")
        .and_then(|v| walk_wait(v, &path.key("wait_for_reset"), errs));
    let on_exhausted = required(map, "on_exhausted", path, errs, "On exhausted is required.")
        .and_then(|v| walk_outcome(v, &path.key("on_exhausted"), errs));
    unknown_keys(
        map,
        &["retry", "wait_for_reset", "on_exhausted"],
        path,
        errs,
        unknown_field,
    );
    Some(ValidatedClassPolicy {
        retry: retry?,
        max_wait_seconds: wait?,
        on_exhausted: on_exhausted?,
    })
}

fn walk_enabled(map: &Map<String, Value>, path: &Path, errs: &mut Errors) -> Option<bool> {
    let v = required(map, "enabled", path, errs, "Enabled is required.")?;
    let b = v.as_bool();
    if b.is_none() {
        errs.add(
            &path.key("enabled"),
            ValidationCode::WrongType,
            format!("Enabled must be true or false; found {}.", json_type(v)),
        );
    }
    b
}

fn walk_number(
    map: &Map<String, Value>,
    field: NumberField,
    enabled: Option<bool>,
    path: &Path,
    errs: &mut Errors,
) -> Option<u64> {
    let field_path = path.key(field.key());
    let Some(v) = map.get(field.key()) else {
        errs.push(&field_path, field.error(ValidationCode::Missing));
        return None;
    };
    let checked = match num_from_value(v) {
        None => Err(field.error(ValidationCode::WrongType)),
        Some(num) => check_number(field, enabled, num),
    };
    checked.map_err(|e| errs.push(&field_path, e)).ok()
}

fn walk_retry(value: &Value, path: &Path, errs: &mut Errors) -> Option<Option<RetrySettings>> {
    let map = object(
        value,
        path,
        errs,
        "Retry must be an object with enabled, max_retries and initial_interval_seconds",
    )?;
    let enabled = walk_enabled(map, path, errs);
    let max = walk_number(map, NumberField::MaxRetries, enabled, path, errs);
    let initial = walk_number(map, NumberField::InitialIntervalSeconds, enabled, path, errs);
    unknown_keys(
        map,
        &["enabled", "max_retries", "initial_interval_seconds"],
        path,
        errs,
        unknown_field,
    );
    let (enabled, max, initial) = (enabled?, max?, initial?);
    Some(enabled.then_some(RetrySettings {
        max_retries: u32::try_from(max).unwrap_or(MAX_MAX_RETRIES),
        initial_interval_seconds: initial,
    }))
}

fn walk_wait(value: &Value, path: &Path, errs: &mut Errors) -> Option<Option<u64>> {
    let map = object(
        value,
        path,
        errs,
        "Wait for reset must be an object with enabled and max_wait_seconds",
    )?;
    let enabled = walk_enabled(map, path, errs);
    let max_wait = walk_number(map, NumberField::MaxWaitSeconds, enabled, path, errs);
    unknown_keys(map, &["enabled", "max_wait_seconds"], path, errs, unknown_field);
    let (enabled, max_wait) = (enabled?, max_wait?);
    Some(enabled.then_some(max_wait))
}

fn walk_outcome(value: &Value, path: &Path, errs: &mut Errors) -> Option<OnExhausted> {
    match value.as_str() {
        None => {
            errs.add(
                path,
                ValidationCode::WrongType,
                format!(
                    "On exhausted must be \"skip\" or \"stop\"; found {}.",
                    json_type(value)
                ),
            );
            None
        }
        Some(s) => {
            let parsed = OnExhausted::parse(s);
            if parsed.is_none() {
                errs.add(
                    path,
                    ValidationCode::UnknownOutcome,
                    format!(
                        "Unknown outcome `{}`: on exhausted must be \"skip\" or \"stop\".",
                        display_key(s)
                    ),
                );
            }
            parsed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(retry: (bool, u64, u64), wait: (bool, u64), on: &str) -> Value {
        json!({
            "retry": {"enabled": retry.0, "max_retries": retry.1, "initial_interval_seconds": retry.2},
            "wait_for_reset": {"enabled": wait.0, "max_wait_seconds": wait.1},
            "on_exhausted": on,
        })
    }

    fn off() -> Value {
        policy((false, 0, 0), (false, 0), "skip")
    }

    fn doc(candidates: Vec<Value>) -> Value {
        json!({"version": 1, "candidates": candidates})
    }

    fn errors(v: &Value) -> Vec<(String, ValidationCode)> {
        match validate_document(v) {
            Ok(_) => vec![],
            Err(e) => e.errors.into_iter().map(|e| (e.path, e.code)).collect(),
        }
    }

    fn e(path: &str, code: ValidationCode) -> (String, ValidationCode) {
        (path.to_owned(), code)
    }

    #[test]
    fn a_valid_document_validates_and_normalizes_to_itself() {
        let v = doc(vec![
            json!({"id": "a", "transient": policy((true, 3, 5), (false, 0), "skip"), "hard": policy((false, 0, 0), (true, 300), "stop")}),
            json!({"id": "b", "transient": off(), "hard": off()}),
        ]);
        let d = validate_document(&v).unwrap();
        assert_eq!(d.to_json(), v);
        let a = d.candidate("a").unwrap();
        assert_eq!(a.transient().max_retries(), 3);
        assert_eq!(a.hard().max_wait_seconds(), Some(300));
        assert_eq!(a.policy(ErrorClass::Hard).on_exhausted(), OnExhausted::Stop);
    }

    #[test]
    fn every_problem_is_reported_at_once_with_its_path() {
        let v = doc(vec![
            json!({"id": "a", "transient": off(), "hard": off()}),
            json!({"id": "b",
                   "transient": policy((true, 11, 0), (false, 5), "later"),
                   "hard": {"retry": {"enabled": "yes", "max_retries": -1, "initial_interval_seconds": 2.5},
                            "wait_for_reset": {"enabled": true, "max_wait_seconds": 604_801},
                            "on_exhausted": 3, "extra": true}}),
        ]);
        assert_eq!(
            errors(&v),
            vec![
                e(
                    "candidates[1].transient.retry.max_retries",
                    ValidationCode::OutOfRange
                ),
                e(
                    "candidates[1].transient.retry.initial_interval_seconds",
                    ValidationCode::OutOfRange
                ),
                e(
                    "candidates[1].transient.wait_for_reset.max_wait_seconds",
                    ValidationCode::MustBeZeroWhenDisabled
                ),
                e(
                    "candidates[1].transient.on_exhausted",
                    ValidationCode::UnknownOutcome
                ),
                e("candidates[1].hard.retry.enabled", ValidationCode::WrongType),
                e("candidates[1].hard.retry.max_retries", ValidationCode::Negative),
                e(
                    "candidates[1].hard.retry.initial_interval_seconds",
                    ValidationCode::NotInteger
                ),
                e(
                    "candidates[1].hard.wait_for_reset.max_wait_seconds",
                    ValidationCode::OutOfRange
                ),
                e("candidates[1].hard.on_exhausted", ValidationCode::WrongType),
                e("candidates[1].hard.extra", ValidationCode::UnknownField),
            ]
        );
    }

    #[test]
    fn out_of_range_message_names_the_limits() {
        let v = doc(vec![
            json!({"id": "a", "transient": policy((true, 11, 5), (false, 0), "skip"), "hard": off()}),
        ]);
        let err = validate_document(&v).unwrap_err();
        assert_eq!(err.errors[0].message, "Maximum retries must be between 1 and 10.");
        let v = doc(vec![
            json!({"id": "a", "transient": policy((true, 1, 3601), (false, 0), "skip"), "hard": off()}),
        ]);
        let err = validate_document(&v).unwrap_err();
        assert_eq!(
            err.errors[0].message,
            "Initial interval must be between 1 s and 1 h (3600 seconds)."
        );
        let v = doc(vec![
            json!({"id": "a", "transient": policy((false, 0, 0), (true, 0), "skip"), "hard": off()}),
        ]);
        let err = validate_document(&v).unwrap_err();
        assert_eq!(
            err.errors[0].message,
            "Maximum wait must be between 1 s and 7 days (604800 seconds)."
        );
    }

    #[test]
    fn disabled_sections_must_store_zeros() {
        let v = doc(vec![
            json!({"id": "a", "transient": policy((false, 3, 5), (false, 60), "skip"), "hard": off()}),
        ]);
        assert_eq!(
            errors(&v),
            vec![
                e(
                    "candidates[0].transient.retry.max_retries",
                    ValidationCode::MustBeZeroWhenDisabled
                ),
                e(
                    "candidates[0].transient.retry.initial_interval_seconds",
                    ValidationCode::MustBeZeroWhenDisabled
                ),
                e(
                    "candidates[0].transient.wait_for_reset.max_wait_seconds",
                    ValidationCode::MustBeZeroWhenDisabled
                ),
            ]
        );
    }

    #[test]
    fn limits_are_inclusive() {
        for (retries, interval, wait) in [(1, 1, 1), (10, 3600, 604_800)] {
            let v = doc(vec![json!({"id": "a",
                "transient": policy((true, retries, interval), (true, wait), "skip"), "hard": off()})]);
            assert!(validate_document(&v).is_ok(), "{retries} {interval} {wait}");
        }
    }

    #[test]
    fn unsupported_version_is_the_only_error_reported() {
        let v = json!({"version": 2, "candidates": "whatever", "x": 1});
        assert_eq!(errors(&v), vec![e("version", ValidationCode::UnsupportedVersion)]);
        let v = json!({"version": "1", "candidates": []});
        assert_eq!(
            errors(&v),
            vec![
                e("version", ValidationCode::WrongType),
                e("candidates", ValidationCode::Empty)
            ]
        );
    }

    #[test]
    fn missing_class_coverage_and_unknown_classes_are_reported() {
        let v = doc(vec![
            json!({"id": "a", "transient": off(), "unclassified": off(), "fatal": off(), "note": "x"}),
        ]);
        assert_eq!(
            errors(&v),
            vec![
                e("candidates[0].hard", ValidationCode::Missing),
                e("candidates[0].fatal", ValidationCode::UnknownClass),
                e("candidates[0].note", ValidationCode::UnknownField),
                e("candidates[0].unclassified", ValidationCode::UnknownClass),
            ]
        );
    }

    #[test]
    fn duplicate_and_bad_ids_are_reported() {
        let long = "x".repeat(MAX_CANDIDATE_ID_CHARS + 1);
        let v = doc(vec![
            json!({"id": "a", "transient": off(), "hard": off()}),
            json!({"id": "a", "transient": off(), "hard": off()}),
            json!({"id": " ", "transient": off(), "hard": off()}),
            json!({"id": long, "transient": off(), "hard": off()}),
            json!({"id": "a\u{7}", "transient": off(), "hard": off()}),
            json!({"id": 7, "transient": off(), "hard": off()}),
            json!({"transient": off(), "hard": off()}),
        ]);
        assert_eq!(
            errors(&v),
            vec![
                e("candidates[2].id", ValidationCode::Empty),
                e("candidates[3].id", ValidationCode::TooLong),
                e("candidates[4].id", ValidationCode::InvalidCharacters),
                e("candidates[5].id", ValidationCode::WrongType),
                e("candidates[6].id", ValidationCode::Missing),
                e("candidates[1].id", ValidationCode::Duplicate),
            ]
        );
    }

    #[test]
    fn candidate_count_is_bounded() {
        let many: Vec<Value> = (0..=MAX_CANDIDATES)
            .map(|i| json!({"id": format!("c{i}"), "transient": off(), "hard": off()}))
            .collect();
        assert_eq!(errors(&doc(many)), vec![e("candidates", ValidationCode::TooMany)]);
        assert_eq!(errors(&doc(vec![])), vec![e("candidates", ValidationCode::Empty)]);
    }

    #[test]
    fn wrong_shapes_are_wrong_types() {
        assert_eq!(errors(&json!([])), vec![e("", ValidationCode::WrongType)]);
        assert_eq!(
            errors(&json!({"candidates": {}})),
            vec![
                e("version", ValidationCode::Missing),
                e("candidates", ValidationCode::WrongType)
            ]
        );
        assert_eq!(
            errors(&doc(vec![json!(1)])),
            vec![e("candidates[0]", ValidationCode::WrongType)]
        );
        assert_eq!(
            errors(&doc(vec![
                json!({"id": "a", "transient": [], "hard": {"retry": 1, "wait_for_reset": null}})
            ])),
            vec![
                e("candidates[0].transient", ValidationCode::WrongType),
                e("candidates[0].hard.retry", ValidationCode::WrongType),
                e("candidates[0].hard.wait_for_reset", ValidationCode::WrongType),
                e("candidates[0].hard.on_exhausted", ValidationCode::Missing),
            ]
        );
    }

    #[test]
    fn integral_floats_are_integers_and_fractions_are_not() {
        let v = doc(vec![json!({"id": "a",
            "transient": {"retry": {"enabled": true, "max_retries": 3.0, "initial_interval_seconds": 5e0},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": -0.0},
                          "on_exhausted": "skip"},
            "hard": off()})]);
        let d = validate_document(&v).unwrap();
        assert_eq!(d.candidates()[0].transient().max_retries(), 3);
        assert_eq!(
            errors(&json!({"version": 1.5, "candidates": [] })).first(),
            Some(&e("version", ValidationCode::WrongType))
        );
        assert_eq!(
            errors(&json!({"version": 1.0, "candidates": [] })),
            vec![e("candidates", ValidationCode::Empty)]
        );
    }

    #[test]
    fn huge_numbers_are_out_of_range_not_wrapped() {
        let v: Value = serde_json::from_str(
            r#"{"version":1,"candidates":[{"id":"a","hard":{"retry":{"enabled":false,"max_retries":0,"initial_interval_seconds":0},"wait_for_reset":{"enabled":false,"max_wait_seconds":0},"on_exhausted":"skip"},
               "transient":{"retry":{"enabled":true,"max_retries":18446744073709551617,"initial_interval_seconds":4294967301},
               "wait_for_reset":{"enabled":true,"max_wait_seconds":1e300},"on_exhausted":"skip"}}]}"#,
        )
        .unwrap();
        assert_eq!(
            errors(&v),
            vec![
                e(
                    "candidates[0].transient.retry.max_retries",
                    ValidationCode::OutOfRange
                ),
                e(
                    "candidates[0].transient.retry.initial_interval_seconds",
                    ValidationCode::OutOfRange
                ),
                e(
                    "candidates[0].transient.wait_for_reset.max_wait_seconds",
                    ValidationCode::OutOfRange
                ),
            ]
        );
    }

    #[test]
    fn typed_text_gets_the_server_messages() {
        use NumberField::*;
        let server = |field: NumberField, enabled: bool, v: Value| validate_number_value(field, enabled, &v);
        assert_eq!(validate_number_text(MaxRetries, true, " 3 "), Ok(3));
        assert_eq!(
            validate_number_text(MaxRetries, true, "11"),
            server(MaxRetries, true, json!(11))
        );
        assert_eq!(
            validate_number_text(MaxRetries, true, "2.5"),
            server(MaxRetries, true, json!(2.5))
        );
        assert_eq!(
            validate_number_text(MaxRetries, true, "-1"),
            server(MaxRetries, true, json!(-1))
        );
        assert_eq!(
            validate_number_text(MaxRetries, false, "4"),
            server(MaxRetries, false, json!(4))
        );
        assert_eq!(validate_number_text(MaxWaitSeconds, true, "1e3"), Ok(1000));
        assert_eq!(
            validate_number_text(InitialIntervalSeconds, true, "NaN").map_err(|e| e.code),
            Err(ValidationCode::NotFinite)
        );
        assert_eq!(
            validate_number_text(InitialIntervalSeconds, true, "-inf").map_err(|e| e.code),
            Err(ValidationCode::NotFinite)
        );
        assert_eq!(
            validate_number_text(MaxRetries, true, "").map_err(|e| e.code),
            Err(ValidationCode::Missing)
        );
        assert_eq!(
            validate_number_text(MaxRetries, true, "three").map_err(|e| e.message),
            Err("Maximum retries must be a number.".to_owned())
        );
        assert_eq!(
            validate_number_text(MaxWaitSeconds, false, "60").map_err(|e| e.message),
            Err("Maximum wait must be 0 while reset waiting is off.".to_owned())
        );
    }

    #[test]
    fn typed_policies_validate_through_the_same_walker() {
        let bad = ClassPolicy {
            retry: RetryPolicy {
                enabled: true,
                max_retries: 0,
                initial_interval_seconds: 5,
            },
            ..ClassPolicy::default()
        };
        let err = ValidatedClassPolicy::new(bad).unwrap_err();
        assert_eq!(err.errors[0].path, "retry.max_retries");
        assert_eq!(err.errors[0].code, ValidationCode::OutOfRange);
        assert_eq!(
            ValidatedClassPolicy::new(ClassPolicy::default()),
            Ok(ValidatedClassPolicy::default())
        );
    }

    #[test]
    fn validated_types_refuse_to_deserialize_invalid_data() {
        let bad = json!({"retry": {"enabled": true, "max_retries": 99, "initial_interval_seconds": 5},
                         "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "skip"});
        assert!(serde_json::from_value::<ValidatedClassPolicy>(bad).is_err());
        let good = json!({"retry": {"enabled": true, "max_retries": 9, "initial_interval_seconds": 5},
                          "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": "stop"});
        let p: ValidatedClassPolicy = serde_json::from_value(good.clone()).unwrap();
        assert_eq!(serde_json::to_value(p).unwrap(), good);
    }

    #[test]
    fn policy_paths_match_the_paths_of_errors() {
        let v = doc(vec![
            json!({"id": "a", "transient": off(), "hard": off()}),
            json!({"id": "b", "transient": off(), "hard": policy((true, 0, 5), (false, 0), "skip")}),
        ]);
        let err = validate_document(&v).unwrap_err();
        let path = policy_path(1, ErrorClass::Hard, &NumberField::MaxRetries.relative_path());
        assert_eq!(path, "candidates[1].hard.retry.max_retries");
        assert_eq!(err.at(&path).count(), 1);
        assert_eq!(
            policy_path(0, ErrorClass::Transient, ""),
            "candidates[0].transient"
        );
    }

    #[test]
    fn validation_errors_serialize_as_the_api_body() {
        let err = validate_document(&json!({"version": 1})).unwrap_err();
        assert_eq!(
            serde_json::to_value(&err).unwrap(),
            json!({"errors": [{"path": "candidates", "code": "missing", "message": "Candidates are required."}]})
        );
        assert_eq!(
            err.to_string(),
            "[PL1001] invalid policy document: candidates: Candidates are required."
        );
    }

    #[test]
    fn untrusted_keys_are_bounded_in_paths_and_messages() {
        let key = "k".repeat(10_000);
        let mut m = Map::new();
        m.insert("version".into(), json!(1));
        m.insert(
            "candidates".into(),
            json!([{"id": "a", "transient": off(), "hard": off()}]),
        );
        m.insert(key, json!(1));
        let err = validate_document(&Value::Object(m)).unwrap_err();
        assert!(err.errors[0].path.chars().count() <= 65);
        assert!(err.errors[0].message.chars().count() < 100);
    }
}
