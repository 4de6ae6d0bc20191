//! `recourse catalogue check`: the catalogue and its fixtures, validated together.
//!
//! A clean report means: every rule compiles (known code, valid regex, known tier and timing
//! extractors, unique IDs), every fixture parses and produces exactly the result it names,
//! every fixture names a rule the catalogue has (or `null` for results without a rule), every
//! rule is the deciding rule of at least one fixture, and visiting the rules in reverse order
//! changes no result. The caller reads the files; this module only judges their contents.

use crate::{catalogue::BUILTIN_SOURCES, Catalogue, Envelope, Verdict};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::{collections::BTreeMap, fmt};

/// The `now` a fixture is classified at when it names none.
pub const DEFAULT_FIXTURE_NOW: &str = "2026-11-30T08:00:00Z";

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub catalogue_version: String,
    pub rules: usize,
    pub fixtures: usize,
    /// Every problem found, each naming its rule or fixture path.
    pub problems: Vec<String>,
    /// For each fixture source (the folder under `fixtures/classifier/`), how many fixtures
    /// yield each code (`unclassified/<reason>` for unclassified results).
    pub per_source: BTreeMap<String, BTreeMap<String, usize>>,
    /// For each rule ID, how many fixtures it decides.
    pub rule_hits: BTreeMap<String, usize>,
    /// For each catalogue file, how many rules it holds.
    pub rules_per_file: BTreeMap<String, usize>,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "catalogue {}: {} rules, {} fixtures, {} problem(s)",
            self.catalogue_version,
            self.rules,
            self.fixtures,
            self.problems.len()
        )?;
        for p in &self.problems {
            writeln!(f, "  problem: {p}")?;
        }
        writeln!(f, "rules per file:")?;
        for (file, n) in &self.rules_per_file {
            writeln!(f, "  {file}: {n}")?;
        }
        writeln!(f, "fixtures per source:")?;
        for (source, codes) in &self.per_source {
            let total: usize = codes.values().sum();
            let list = codes
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            writeln!(f, "  {source}: {total} ({list})")?;
        }
        if self.is_clean() {
            writeln!(f, "clean")?;
        }
        Ok(())
    }
}

/// Checks the built-in catalogue against fixture files given as `(path, content)`.
pub fn check_catalogue(fixture_files: &[(String, String)]) -> CheckReport {
    match Catalogue::from_sources(BUILTIN_SOURCES) {
        Ok(cat) => check_catalogue_with(&cat, fixture_files),
        Err(e) => CheckReport {
            problems: e.0,
            ..CheckReport::default()
        },
    }
}

/// Checks a given catalogue against fixture files.
pub fn check_catalogue_with(cat: &Catalogue, fixture_files: &[(String, String)]) -> CheckReport {
    let mut r = CheckReport {
        catalogue_version: cat.version().to_owned(),
        rules: cat.rules().len(),
        fixtures: fixture_files.len(),
        ..CheckReport::default()
    };
    for rule in cat.rules() {
        r.rule_hits.insert(rule.id.clone(), 0);
        *r.rules_per_file.entry(rule.source.clone()).or_default() += 1;
    }
    let reversed_order: Vec<usize> = (0..cat.rules().len()).rev().collect();
    let reversed = cat.reordered(&reversed_order);
    for (path, content) in fixture_files {
        let problems = check_fixture(cat, &reversed, path, content, &mut r);
        r.problems
            .extend(problems.into_iter().map(|p| format!("{path}: {p}")));
    }
    for (id, hits) in &r.rule_hits {
        if *hits == 0 {
            r.problems
                .push(format!("rule `{id}` is not the deciding rule of any fixture"));
        }
    }
    r
}

fn source_of(path: &str) -> String {
    let parts: Vec<&str> = path.split(['/', '\\']).collect();
    match parts.len() {
        0 | 1 => "(root)".to_owned(),
        n => parts[n - 2].to_owned(),
    }
}

fn check_fixture(
    cat: &Catalogue,
    reversed: &Catalogue,
    path: &str,
    content: &str,
    r: &mut CheckReport,
) -> Vec<String> {
    let mut problems = Vec::new();
    let stem = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let Some(stem) = stem.strip_suffix(".json") else {
        return vec!["a fixture file must end in .json".into()];
    };
    if stem.is_empty()
        || !stem
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        problems.push("file name must be kebab-case".into());
    }
    let doc: Value = match serde_json::from_str(content) {
        Ok(v) => v,
        Err(e) => return vec![format!("not JSON: {e}")],
    };
    let note = doc.get("note").and_then(Value::as_str).unwrap_or("");
    if !note.contains("source:") {
        problems.push("`note` must cite where the message was seen (`source: ...`)".into());
    }
    let Some(input) = doc.get("input") else {
        problems.push("missing `input`".into());
        return problems;
    };
    let env = match Envelope::from_value(input) {
        Ok(e) => e,
        Err(e) => {
            problems.push(format!("input is not an envelope: {e}"));
            return problems;
        }
    };
    let now_text = doc
        .get("now")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_FIXTURE_NOW);
    let now = match DateTime::parse_from_rfc3339(now_text) {
        Ok(d) => d.with_timezone(&Utc),
        Err(e) => {
            problems.push(format!("`now` is not RFC 3339: {e}"));
            return problems;
        }
    };
    let Some(expect) = doc.get("expect").and_then(Value::as_object) else {
        problems.push("missing `expect` object".into());
        return problems;
    };
    let verdict = cat.classify(&env, now);
    let again = reversed.classify(&env, now);
    if verdict != again {
        problems.push("result depends on rule order".into());
    }
    let got = match serde_json::to_value(&verdict) {
        Ok(v) => v,
        Err(e) => {
            problems.push(format!("verdict does not serialize: {e}"));
            return problems;
        }
    };
    for key in ["code", "class", "classifier_rule"] {
        if !expect.contains_key(key) {
            problems.push(format!("`expect` must name `{key}`"));
        }
    }
    if let Some(Value::String(rule)) = expect.get("classifier_rule") {
        if cat.rule(rule).is_none() {
            problems.push(format!("names unknown rule `{rule}`"));
        }
    }
    for (key, want) in expect {
        let have = match key.as_str() {
            "gate" => match want {
                // `"gate": true` is short for an allowed gate.
                Value::Bool(_) => got["gate"]["automatic_recovery"].clone(),
                _ => got["gate"].clone(),
            },
            "effects" => {
                let mut eff = got["effects"].clone();
                // Only the named effect fields are compared.
                if let (Some(w), Some(h)) = (want.as_object(), eff.as_object_mut()) {
                    h.retain(|k, _| w.contains_key(k));
                }
                eff
            }
            "truncated"
            | "code"
            | "class"
            | "classifier_rule"
            | "reason"
            | "confidence"
            | "scope"
            | "retry_after_seconds"
            | "reset_at"
            | "provider_id"
            | "model_id"
            | "safe_excerpt" => got.get(key).cloned().unwrap_or(Value::Null),
            other => {
                problems.push(format!("`expect` has unknown field `{other}`"));
                continue;
            }
        };
        let equal = match key.as_str() {
            "reset_at" => same_instant(want, &have),
            _ => *want == have,
        };
        if !equal {
            problems.push(format!("{key}: expected {want}, got {have}"));
        }
    }
    let has_hint = verdict.classification.reset_at.is_some();
    if has_hint && !expect.contains_key("reset_at") && !expect.contains_key("retry_after_seconds") {
        problems.push(format!(
            "unexpected timing hint: retry_after_seconds {}, reset_at {}",
            got["retry_after_seconds"], got["reset_at"]
        ));
    }
    if problems.is_empty() {
        if let Some(rule) = &verdict.classification.classifier_rule {
            *r.rule_hits.entry(rule.clone()).or_default() += 1;
        }
        let code = match (&verdict.classification.code, verdict.classification.reason) {
            (Some(c), _) => c.as_str().to_owned(),
            (None, Some(reason)) => format!(
                "unclassified/{}",
                serde_json::to_value(reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            (None, None) => "unclassified".to_owned(),
        };
        *r.per_source
            .entry(source_of(path))
            .or_default()
            .entry(code)
            .or_default() += 1;
    }
    problems
}

fn same_instant(want: &Value, have: &Value) -> bool {
    let parse = |v: &Value| v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok());
    match (want, have) {
        (Value::Null, Value::Null) => true,
        _ => parse(want).is_some() && parse(want) == parse(have),
    }
}

/// For the engine's own consistency checks.
impl Verdict {
    /// The code as spelled on the wire (`unclassified` when there is none).
    pub fn code_str(&self) -> &'static str {
        self.classification.code.map_or("unclassified", |c| c.as_str())
    }
}
