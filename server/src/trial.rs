//! "Try an error" on the server: the classifier on evidence a person pasted or picked in the
//! profile editor, and the catalogue's fixtures to pick from. Nothing is stored, sent or
//! logged: the evidence goes through the classifier exactly as a route's would (the same
//! bounded reader, the built-in catalogue, this server's clock) and only its classification
//! comes back, whose excerpt is redacted as every excerpt is.
//!
//! Why on the server and not in the browser: the classifier carries its catalogue, the
//! `regex` engine and a time-zone database. Compiled to WASM on its own (size profile, before
//! wasm-opt) it added 2.5 MB, 453 KB brotli, to a module that already had `serde_json` and
//! `chrono`: more than the whole first visit may bring (450 KB), and over seven times what a
//! page that loads on demand may (60 KB).

use crate::failure::Failure;
use chrono::{DateTime, Utc};
use classifier::Envelope;
use policy::{
    document::{ValidationCode, ValidationError, ValidationErrors},
    trial::EvidenceTrial,
};
use serde_json::Value;

/// The classifier's fixtures, one sanitized piece of real evidence per file, embedded so an
/// installed binary offers them too (rust-embed reads the folder at run time in debug builds).
#[derive(rust_embed::Embed)]
#[folder = "../fixtures/classifier"]
struct Fixtures;

/// Classifies `envelope` as of `now`, read by the classifier's own bounded reader as `recourse
/// classify` reads it, and again as if the attempt had already shown output, for the gate's
/// other answer. What that reader refuses is `Invalid` at `envelope`, without repeating it.
pub fn try_evidence(envelope: &Value, now: DateTime<Utc>) -> Result<EvidenceTrial, Failure> {
    let classify = |value: &Value| {
        Envelope::from_value(value)
            .map(|e| classifier::classify(&e, now))
            .map_err(|e| {
                Failure::Invalid(ValidationErrors {
                    errors: vec![ValidationError {
                        path: "envelope".into(),
                        code: ValidationCode::WrongType,
                        message: format!("This is not an evidence envelope ({}).", e.kind()),
                    }],
                })
            })
    };
    let verdict = classify(envelope)?;
    let mut after_output = envelope.clone();
    if let Some(fields) = after_output.as_object_mut() {
        let effects = fields
            .entry("effects")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(effects) = effects.as_object_mut() {
            effects.insert("assistant_output".into(), Value::Bool(true));
        }
    }
    let after = classify(&after_output)?;
    Ok(EvidenceTrial {
        classification: verdict.classification,
        gate: verdict.gate,
        gate_after_output: after.gate,
        truncated: verdict.truncated,
        classified_at: now,
    })
}

/// Every fixture's name (`source/case`, its path without `.json`), sorted.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = Fixtures::iter()
        .filter_map(|path| path.strip_suffix(".json").map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// The evidence envelope (`input`) of the fixture `name`. Only a name [`fixture_names`] lists
/// is read, so no other path can be asked for.
pub fn fixture(name: &str) -> Result<Value, Failure> {
    if !fixture_names().iter().any(|n| n == name) {
        return Err(Failure::NotFound("fixture"));
    }
    let file = Fixtures::get(&format!("{name}.json")).ok_or(Failure::NotFound("fixture"))?;
    let mut value: Value = serde_json::from_slice(&file.data).map_err(|_| Failure::Internal)?;
    Ok(value.get_mut("input").map(Value::take).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t0() -> DateTime<Utc> {
        "2026-11-30T08:00:00Z".parse().unwrap()
    }

    #[test]
    fn an_overload_before_output_may_recover_and_after_output_may_not() {
        let envelope = json!({"items": [{"kind": "http", "status": 529,
            "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}]});
        let trial = try_evidence(&envelope, t0()).unwrap();
        assert_eq!(
            trial.classification.code.map(|c| c.as_str()),
            Some("provider_overloaded")
        );
        assert!(trial.gate.automatic_recovery, "{trial:?}");
        assert!(!trial.gate_after_output.automatic_recovery, "{trial:?}");
        assert_eq!(trial.classified_at, t0());
    }

    #[test]
    fn what_is_not_an_envelope_is_refused_at_envelope_without_repeating_it() {
        for bad in [
            json!("rct_SECRETPROBE"),
            json!({"no_items": "rct_SECRETPROBE"}),
            json!([1]),
        ] {
            let Err(Failure::Invalid(errors)) = try_evidence(&bad, t0()) else {
                panic!("{bad} was read");
            };
            assert_eq!(errors.errors[0].path, "envelope");
            assert!(!format!("{errors:?}").contains("SECRETPROBE"));
        }
    }

    #[test]
    fn every_fixture_is_listed_and_read_and_no_other_path_is() {
        let names = fixture_names();
        assert!(names.len() > 100, "{}", names.len());
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        let first = fixture(&names[0]).unwrap();
        assert!(first["items"].is_array(), "{first}");
        for bad in ["../catalogue/anthropic.toml", "nope", "", "/etc/passwd"] {
            assert!(matches!(fixture(bad), Err(Failure::NotFound(_))), "{bad}");
        }
    }
}
