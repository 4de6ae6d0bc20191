//! The fixture walk: every sanitized real message under `fixtures/classifier/` must produce
//! exactly the result it names, every rule must decide at least one fixture, and results must
//! not depend on the order rules are visited in. The same check backs `recourse catalogue check`.

use chrono::{DateTime, Utc};
use classifier::{
    check::{check_catalogue, check_catalogue_with, DEFAULT_FIXTURE_NOW},
    Catalogue, Envelope,
};
use std::path::{Path, PathBuf};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/classifier")
}

fn read_fixtures() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("fixture dir").flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                let text = std::fs::read_to_string(&p).expect("fixture text");
                out.push((p.display().to_string(), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&fixture_dir(), &mut out);
    out
}

#[test]
fn every_fixture_passes_and_every_rule_is_covered() {
    let fixtures = read_fixtures();
    let report = check_catalogue(&fixtures);
    assert!(report.is_clean(), "{report}");
    assert!(report.fixtures >= 150, "only {} fixtures", report.fixtures);
    println!("{report}");
}

/// A permutation from a small seeded generator (no RNG dependency; deterministic).
fn permutation(n: usize, mut seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = usize::try_from(seed >> 33).unwrap_or(0) % (i + 1);
        v.swap(i, j);
    }
    v
}

#[test]
fn shuffled_rule_order_gives_identical_verdicts_on_every_fixture() {
    let cat = Catalogue::builtin();
    let n = cat.rules().len();
    let orders: Vec<Vec<usize>> = [1u64, 2, 3, 0xC0FFEE]
        .iter()
        .map(|s| permutation(n, *s))
        .chain(std::iter::once((0..n).rev().collect()))
        .collect();
    let shuffled: Vec<Catalogue> = orders.iter().map(|o| cat.reordered(o)).collect();
    let mut compared = 0;
    for (path, text) in read_fixtures() {
        let doc: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
        let env = Envelope::from_value(&doc["input"]).expect("envelope");
        let now: DateTime<Utc> = doc["now"]
            .as_str()
            .unwrap_or(DEFAULT_FIXTURE_NOW)
            .parse()
            .expect("fixture now");
        let base = cat.classify(&env, now);
        for other in &shuffled {
            assert_eq!(
                base,
                other.classify(&env, now),
                "{path}: result depends on rule order"
            );
            compared += 1;
        }
    }
    assert!(compared > 0);
}

const TINY: &str = r#"
[[rule]]
id = "t.rate"
tier = "exact"
code = "rate_limited"
confidence = "high"
kinds = ["stderr"]
contains = ["slow down"]

[[rule]]
id = "t.quota"
tier = "exact"
code = "quota_limited"
confidence = "high"
kinds = ["stderr"]
contains = ["out of credits"]
"#;

fn fixture(line: &str, code: &str, class: &str, rule: &str) -> String {
    format!(
        r#"{{"note":"source: test","input":{{"items":[{{"kind":"stderr","lines":["{line}"]}}]}},
           "expect":{{"code":"{code}","class":"{class}","classifier_rule":"{rule}"}}}}"#
    )
}

fn check(files: &[(&str, String)]) -> Vec<String> {
    let cat = Catalogue::from_str(TINY).expect("tiny catalogue");
    let files: Vec<(String, String)> = files.iter().map(|(p, c)| ((*p).to_owned(), c.clone())).collect();
    check_catalogue_with(&cat, &files).problems
}

#[test]
fn the_check_is_clean_when_fixtures_match_and_cover_every_rule() {
    let problems = check(&[
        (
            "x/rate.json",
            fixture("please slow down", "rate_limited", "transient", "t.rate"),
        ),
        (
            "x/quota.json",
            fixture("you are out of credits", "quota_limited", "hard", "t.quota"),
        ),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn the_check_fails_on_a_wrong_class() {
    let problems = check(&[
        (
            "x/rate.json",
            fixture("please slow down", "rate_limited", "hard", "t.rate"),
        ),
        (
            "x/quota.json",
            fixture("you are out of credits", "quota_limited", "hard", "t.quota"),
        ),
    ]);
    assert!(
        problems.iter().any(|p| p.contains("class: expected")),
        "{problems:?}"
    );
}

#[test]
fn the_check_fails_on_a_wrong_rule() {
    let problems = check(&[
        (
            "x/rate.json",
            fixture("please slow down", "rate_limited", "transient", "t.quota"),
        ),
        (
            "x/quota.json",
            fixture("you are out of credits", "quota_limited", "hard", "t.quota"),
        ),
    ]);
    assert!(
        problems.iter().any(|p| p.contains("classifier_rule: expected")),
        "{problems:?}"
    );
}

#[test]
fn the_check_fails_on_a_rule_without_a_fixture() {
    let problems = check(&[(
        "x/rate.json",
        fixture("please slow down", "rate_limited", "transient", "t.rate"),
    )]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("rule `t.quota` is not the deciding rule")),
        "{problems:?}"
    );
}

#[test]
fn the_check_fails_on_a_fixture_naming_an_unknown_rule() {
    let problems = check(&[
        (
            "x/rate.json",
            fixture("please slow down", "rate_limited", "transient", "t.nope"),
        ),
        (
            "x/quota.json",
            fixture("you are out of credits", "quota_limited", "hard", "t.quota"),
        ),
    ]);
    assert!(
        problems.iter().any(|p| p.contains("names unknown rule `t.nope`")),
        "{problems:?}"
    );
}

#[test]
fn the_check_fails_on_a_fixture_without_a_source_or_with_a_bad_name() {
    let no_source =
        fixture("please slow down", "rate_limited", "transient", "t.rate").replace("source: test", "x");
    let problems = check(&[
        ("x/Rate_Case.json", no_source),
        (
            "x/quota.json",
            fixture("you are out of credits", "quota_limited", "hard", "t.quota"),
        ),
    ]);
    assert!(problems.iter().any(|p| p.contains("must cite")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("kebab-case")), "{problems:?}");
}
