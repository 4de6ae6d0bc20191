//! Legacy recovery rules, normalized once into a version-1 document.
//!
//! Before class policies, a candidate said what to do on any provider error with one action,
//! optionally refined by per-code rules. The legacy shape this crate reads (no `version` key):
//!
//! ```json
//! {"on_error": "try_next",                        // optional default for every candidate
//!  "rules": {"quota_limited": "stop"},             // optional default per-code rules
//!  "candidates": [
//!    {"id": "claude-main", "on_error": "retry_same",
//!     "rules": {"rate_limited": "try_next"}}]}     // candidate rules override defaults per code
//! ```
//!
//! The mapping is the spec's, exactly:
//! - `try_next`: no wait, no retry, then `skip`, for both classes (also the default when a
//!   candidate says nothing, which keeps the old generic behaviour).
//! - `stop`: no wait, no retry, then `stop`, for both classes.
//! - `retry_same`: one same-candidate retry after 5 s, then `stop`.
//! - An explicit per-code rule overrides the mapped class of its code: the code's class gets
//!   the rule's action instead of the candidate's.
//!
//! Why conflicting per-code rules are an error rather than "the most careful wins": version-1
//! policies are per class, so two rules of one class with different actions cannot both be
//! kept. Silently picking one would change behaviour for the other code without anyone
//! deciding it. The error names the codes and asks a person to choose; until then the profile
//! has no valid document, and a candidate without a valid policy can never authorize work (the
//! evaluator decides `manual` / `configuration_error`).
//!
//! The backend stores and returns the normalized document; nothing writes legacy shapes back.

use crate::{
    class::{ErrorClass, SemanticCode},
    document::{
        check_candidate_count, check_duplicate_ids, display_key, json_type, object, unknown_field,
        unknown_keys, validate_candidate_id, validate_document, Errors, OnExhausted, Path,
        ValidatedCandidatePolicy, ValidatedClassPolicy, ValidatedPolicyDocument, ValidationCode,
        ValidationErrors,
    },
    limits::{LEGACY_RETRY_SAME_INITIAL_INTERVAL_SECONDS, LEGACY_RETRY_SAME_MAX_RETRIES},
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A legacy recovery action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LegacyAction {
    TryNext,
    Stop,
    RetrySame,
}

impl LegacyAction {
    pub const ALL: [LegacyAction; 3] = [LegacyAction::TryNext, LegacyAction::Stop, LegacyAction::RetrySame];

    pub const fn as_str(self) -> &'static str {
        match self {
            LegacyAction::TryNext => "try_next",
            LegacyAction::Stop => "stop",
            LegacyAction::RetrySame => "retry_same",
        }
    }

    pub fn parse(s: &str) -> Option<LegacyAction> {
        LegacyAction::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The class policy this action becomes.
    pub const fn class_policy(self) -> ValidatedClassPolicy {
        match self {
            LegacyAction::TryNext => ValidatedClassPolicy::immediately(OnExhausted::Skip),
            LegacyAction::Stop => ValidatedClassPolicy::immediately(OnExhausted::Stop),
            LegacyAction::RetrySame => ValidatedClassPolicy::retry_then(
                LEGACY_RETRY_SAME_MAX_RETRIES,
                LEGACY_RETRY_SAME_INITIAL_INTERVAL_SECONDS,
                OnExhausted::Stop,
            ),
        }
    }
}

/// Where a normalized document came from; `Legacy` tells the server to store the normalized
/// form in place of the old one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentOrigin {
    Version1,
    Legacy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    pub document: ValidatedPolicyDocument,
    pub origin: DocumentOrigin,
}

/// Reads a stored or submitted document of either shape: version 1 is validated, legacy is
/// normalized. A document without `version` whose candidates use `transient`/`hard` keys is
/// treated as version 1 (and told that `version` is missing) rather than as legacy.
pub fn normalize(value: &Value) -> Result<Normalized, ValidationErrors> {
    if is_legacy(value) {
        normalize_legacy(value).map(|document| Normalized {
            document,
            origin: DocumentOrigin::Legacy,
        })
    } else {
        validate_document(value).map(|document| Normalized {
            document,
            origin: DocumentOrigin::Version1,
        })
    }
}

fn is_legacy(value: &Value) -> bool {
    let Some(map) = value.as_object() else {
        return false;
    };
    if map.contains_key("version") {
        return false;
    }
    let looks_v1 = map.get("candidates").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.get("transient").is_some() || c.get("hard").is_some())
    });
    !looks_v1
}

/// Normalizes a legacy document, reporting every problem with a path and a message that says
/// what to change.
pub fn normalize_legacy(value: &Value) -> Result<ValidatedPolicyDocument, ValidationErrors> {
    let mut errs = Errors::default();
    let out = walk(value, &mut errs);
    errs.finish(out)
}

type Rules = BTreeMap<SemanticCode, LegacyAction>;

fn walk(value: &Value, errs: &mut Errors) -> Option<ValidatedPolicyDocument> {
    let root = Path::root();
    let map = object(value, &root, errs, "The legacy policy must be a JSON object")?;
    let default_action = match map.get("on_error") {
        None => Some(LegacyAction::TryNext),
        Some(v) => action(v, &root.key("on_error"), errs),
    };
    let default_rules = match map.get("rules") {
        None => Some(Rules::new()),
        Some(v) => rules(v, &root.key("rules"), errs),
    };
    unknown_keys(
        map,
        &["candidates", "on_error", "rules"],
        &root,
        errs,
        unknown_field,
    );

    let candidates_path = root.key("candidates");
    let Some(items) = map.get("candidates") else {
        errs.add(
            &candidates_path,
            ValidationCode::Missing,
            "Candidates are required.",
        );
        return None;
    };
    let Some(items) = items.as_array() else {
        errs.add(
            &candidates_path,
            ValidationCode::WrongType,
            format!("Candidates must be a list; found {}.", json_type(items)),
        );
        return None;
    };
    check_candidate_count(items.len(), &candidates_path, errs);
    let walked: Vec<Option<ValidatedCandidatePolicy>> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            candidate(
                item,
                &candidates_path.index(i),
                default_action,
                default_rules.as_ref(),
                errs,
            )
        })
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
    let candidates = walked.into_iter().collect::<Option<Vec<_>>>()?;
    if !errs.is_empty() {
        return None;
    }
    match ValidatedPolicyDocument::new(candidates) {
        Ok(doc) => Some(doc),
        Err(e) => {
            errs.extend(e);
            None
        }
    }
}

fn candidate(
    value: &Value,
    path: &Path,
    default_action: Option<LegacyAction>,
    default_rules: Option<&Rules>,
    errs: &mut Errors,
) -> Option<ValidatedCandidatePolicy> {
    let map: &Map<String, Value> = object(
        value,
        path,
        errs,
        "Each legacy candidate must be an object with an id and optionally on_error and rules",
    )?;
    let id_path = path.key("id");
    let id = match map.get("id") {
        None => {
            errs.add(&id_path, ValidationCode::Missing, "Candidate id is required.");
            None
        }
        Some(Value::String(id)) => match validate_candidate_id(id) {
            Ok(()) => Some(id.clone()),
            Err(e) => {
                errs.push(&id_path, e);
                None
            }
        },
        Some(other) => {
            errs.add(
                &id_path,
                ValidationCode::WrongType,
                format!("Candidate id must be a string; found {}.", json_type(other)),
            );
            None
        }
    };
    let own_action = match map.get("on_error") {
        None => default_action,
        Some(v) => action(v, &path.key("on_error"), errs),
    };
    let rules_path = path.key("rules");
    let own_rules = match map.get("rules") {
        None => Some(Rules::new()),
        Some(v) => rules(v, &rules_path, errs),
    };
    unknown_keys(map, &["id", "on_error", "rules"], path, errs, unknown_field);

    let (id, base, own_rules, defaults) = (id?, own_action?, own_rules?, default_rules?);
    let mut merged = defaults.clone();
    merged.extend(own_rules);
    let policy = |class: ErrorClass, errs: &mut Errors| -> Option<ValidatedClassPolicy> {
        let of_class: Vec<(SemanticCode, LegacyAction)> = merged
            .iter()
            .filter(|(c, _)| c.class() == class)
            .map(|(c, a)| (*c, *a))
            .collect();
        match of_class.first() {
            None => Some(base.class_policy()),
            Some((_, first)) if of_class.iter().all(|(_, a)| a == first) => Some(first.class_policy()),
            Some(_) => {
                let listed: Vec<String> = of_class
                    .iter()
                    .map(|(c, a)| format!("{}: {}", c.as_str(), a.as_str()))
                    .collect();
                errs.add(
                    &rules_path,
                    ValidationCode::ConflictingRules,
                    format!(
                        "Per-code rules for {class} errors disagree ({}); policies are now per class, so \
                         choose one action for {class} errors.",
                        listed.join(", ")
                    ),
                );
                None
            }
        }
    };
    let transient = policy(ErrorClass::Transient, errs);
    let hard = policy(ErrorClass::Hard, errs);
    ValidatedCandidatePolicy::new(&id, transient?, hard?)
        .map_err(|e| errs.extend(e))
        .ok()
}

fn action(value: &Value, path: &Path, errs: &mut Errors) -> Option<LegacyAction> {
    let Some(s) = value.as_str() else {
        errs.add(
            path,
            ValidationCode::WrongType,
            format!(
                "The action must be try_next, stop or retry_same; found {}.",
                json_type(value)
            ),
        );
        return None;
    };
    let parsed = LegacyAction::parse(s);
    if parsed.is_none() {
        errs.add(
            path,
            ValidationCode::UnknownAction,
            format!(
                "Unknown action `{}`: use try_next, stop or retry_same.",
                display_key(s)
            ),
        );
    }
    parsed
}

fn rules(value: &Value, path: &Path, errs: &mut Errors) -> Option<Rules> {
    let map = object(
        value,
        path,
        errs,
        "Per-code rules must be an object of code to action",
    )?;
    let mut out = Rules::new();
    let mut ok = true;
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for key in keys {
        let rule_path = path.key(key);
        let code = SemanticCode::parse(key);
        if code.is_none() {
            let known: Vec<&str> = SemanticCode::ALL.iter().map(|c| c.as_str()).collect();
            errs.add(
                &rule_path,
                ValidationCode::UnknownCode,
                format!(
                    "`{}` is not a known error code; remove this rule or use one of: {}.",
                    display_key(key),
                    known.join(", ")
                ),
            );
        }
        let act = map.get(key.as_str()).and_then(|v| action(v, &rule_path, errs));
        match (code, act) {
            (Some(c), Some(a)) => {
                out.insert(c, a);
            }
            _ => ok = false,
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{
        MAX_INITIAL_INTERVAL_SECONDS, MAX_MAX_RETRIES, MIN_INITIAL_INTERVAL_SECONDS, MIN_MAX_RETRIES,
    };
    use serde_json::json;

    fn one(v: Value) -> ValidatedCandidatePolicy {
        let doc = normalize_legacy(&v).unwrap();
        doc.candidates()[0].clone()
    }

    fn codes(v: Value) -> Vec<(String, ValidationCode)> {
        normalize_legacy(&v)
            .unwrap_err()
            .errors
            .into_iter()
            .map(|e| (e.path, e.code))
            .collect()
    }

    #[test]
    fn try_next_becomes_immediate_skip_for_both_classes() {
        let c = one(json!({"candidates": [{"id": "a", "on_error": "try_next"}]}));
        for class in ErrorClass::ALL {
            assert_eq!(
                c.policy(class),
                &ValidatedClassPolicy::immediately(OnExhausted::Skip)
            );
        }
    }

    #[test]
    fn a_candidate_without_an_action_defaults_to_try_next() {
        let c = one(json!({"candidates": [{"id": "a"}]}));
        assert_eq!(c.transient(), &ValidatedClassPolicy::default());
        assert_eq!(c.hard(), &ValidatedClassPolicy::default());
    }

    #[test]
    fn stop_becomes_immediate_stop_for_both_classes() {
        let c = one(json!({"candidates": [{"id": "a", "on_error": "stop"}]}));
        for class in ErrorClass::ALL {
            assert_eq!(
                c.policy(class),
                &ValidatedClassPolicy::immediately(OnExhausted::Stop)
            );
        }
    }

    #[test]
    fn retry_same_becomes_one_retry_after_five_seconds_then_stop() {
        let c = one(json!({"candidates": [{"id": "a", "on_error": "retry_same"}]}));
        let wire = c.transient().to_wire();
        assert!(wire.retry.enabled);
        assert_eq!(
            (wire.retry.max_retries, wire.retry.initial_interval_seconds),
            (1, 5)
        );
        assert!(!wire.wait_for_reset.enabled);
        assert_eq!(wire.on_exhausted, OnExhausted::Stop);
        assert_eq!(c.hard(), c.transient());
    }

    #[test]
    fn a_per_code_rule_overrides_the_mapped_class_only() {
        let c = one(json!({"candidates": [{"id": "a", "on_error": "retry_same",
                                             "rules": {"quota_limited": "try_next"}}]}));
        assert_eq!(c.transient(), &LegacyAction::RetrySame.class_policy());
        assert_eq!(c.hard(), &ValidatedClassPolicy::immediately(OnExhausted::Skip));
    }

    #[test]
    fn profile_defaults_apply_and_candidate_rules_win_per_code() {
        let doc = normalize_legacy(&json!({
            "on_error": "stop", "rules": {"rate_limited": "retry_same", "auth_required": "stop"},
            "candidates": [{"id": "a", "rules": {"auth_required": "try_next"}}, {"id": "b", "on_error": "try_next"}]
        }))
        .unwrap();
        let a = &doc.candidates()[0];
        assert_eq!(a.transient(), &LegacyAction::RetrySame.class_policy());
        assert_eq!(a.hard(), &LegacyAction::TryNext.class_policy());
        let b = &doc.candidates()[1];
        assert_eq!(b.transient(), &LegacyAction::RetrySame.class_policy());
        assert_eq!(b.hard(), &LegacyAction::Stop.class_policy());
    }

    #[test]
    fn conflicting_rules_of_one_class_are_an_actionable_error() {
        let err = normalize_legacy(&json!({"candidates": [{"id": "a",
            "rules": {"rate_limited": "retry_same", "provider_overloaded": "try_next"}}]}))
        .unwrap_err();
        assert_eq!(err.errors.len(), 1);
        assert_eq!(err.errors[0].path, "candidates[0].rules");
        assert_eq!(err.errors[0].code, ValidationCode::ConflictingRules);
        assert!(err.errors[0].message.contains("provider_overloaded: try_next"));
        assert!(err.errors[0].message.contains("rate_limited: retry_same"));
    }

    #[test]
    fn invalid_legacy_data_reports_every_problem() {
        assert_eq!(
            codes(json!({"on_error": "retry_twice", "candidates": [
                {"id": "a", "on_error": 3, "rules": {"unclassified": "stop", "rate_limited": "later"}, "x": 1},
                {"id": "a"},
                {}
            ]})),
            vec![
                ("on_error".to_owned(), ValidationCode::UnknownAction),
                ("candidates[0].on_error".to_owned(), ValidationCode::WrongType),
                (
                    "candidates[0].rules.rate_limited".to_owned(),
                    ValidationCode::UnknownAction
                ),
                (
                    "candidates[0].rules.unclassified".to_owned(),
                    ValidationCode::UnknownCode
                ),
                ("candidates[0].x".to_owned(), ValidationCode::UnknownField),
                ("candidates[2].id".to_owned(), ValidationCode::Missing),
                ("candidates[1].id".to_owned(), ValidationCode::Duplicate),
            ]
        );
        assert_eq!(
            codes(json!({"candidates": []})),
            vec![("candidates".to_owned(), ValidationCode::Empty)]
        );
        assert_eq!(
            codes(json!({})),
            vec![("candidates".to_owned(), ValidationCode::Missing)]
        );
    }

    #[test]
    fn normalize_tells_legacy_from_version_one() {
        let legacy = normalize(&json!({"candidates": [{"id": "a", "on_error": "stop"}]})).unwrap();
        assert_eq!(legacy.origin, DocumentOrigin::Legacy);
        let v1 = normalize(&legacy.document.to_json()).unwrap();
        assert_eq!(v1.origin, DocumentOrigin::Version1);
        assert_eq!(v1.document, legacy.document);
        // A version-1 shape without its version is told so, not parsed as legacy.
        let mut forgot = legacy.document.to_json();
        forgot.as_object_mut().unwrap().remove("version");
        let err = normalize(&forgot).unwrap_err();
        assert_eq!(err.errors[0].path, "version");
        assert_eq!(err.errors[0].code, ValidationCode::Missing);
    }

    #[test]
    fn legacy_retry_same_constants_are_inside_the_limits() {
        assert!((MIN_MAX_RETRIES..=MAX_MAX_RETRIES).contains(&LEGACY_RETRY_SAME_MAX_RETRIES));
        assert!((MIN_INITIAL_INTERVAL_SECONDS..=MAX_INITIAL_INTERVAL_SECONDS)
            .contains(&LEGACY_RETRY_SAME_INITIAL_INTERVAL_SECONDS));
        let p = LegacyAction::RetrySame.class_policy();
        assert_eq!(ValidatedClassPolicy::new(p.to_wire()), Ok(p));
    }
}
