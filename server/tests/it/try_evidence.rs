//! "Try an error" agrees with `recourse classify`: for every fixture of the catalogue, the
//! classification the profile editor's panel gets from its server function (through the real
//! router, as a signed-in person's browser calls it, on the server's clock) is the one the
//! `recourse` binary prints for the same evidence as of the same instant, field by field, with
//! the same gate and the same truncation. The panel shows the server function's answer as it
//! comes; `end2end/tests/try-error.test.mjs` checks that in the browser.

use crate::common;

use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use common::Harness;
use serde_json::{json, Value};
use std::{
    collections::BTreeMap,
    io::Write,
    path::Path,
    process::{Command, Stdio},
};

const BIN: &str = env!("CARGO_BIN_EXE_recourse");
/// The instant a fixture is judged at when it names none (fixtures/README.md).
const DEFAULT_NOW: &str = "2026-11-30T08:00:00Z";

fn server_fn_path(name: &str) -> String {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .find(|path| server::auth::rules::server_fn_name(path) == name)
        .unwrap_or_else(|| panic!("no server function {name}"))
        .to_owned()
}

/// Every fixture file under `dir`: (name, its JSON).
fn fixtures(dir: &Path, prefix: &str, out: &mut Vec<(String, Value)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            fixtures(&path, &format!("{prefix}{name}/"), out);
        } else if let Some(stem) = name.strip_suffix(".json") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((format!("{prefix}{stem}"), serde_json::from_str(&text).unwrap()));
        }
    }
}

/// `recourse classify --now NOW` on `envelopes` (JSON Lines): one verdict per envelope.
fn classify(now: &str, envelopes: &[&Value]) -> Vec<Value> {
    let mut child = Command::new(BIN)
        .args(["classify", "--now", now, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for e in envelopes {
        input.push_str(&e.to_string());
        input.push('\n');
    }
    // Written from another thread: the answers fill the output pipe while the input is still
    // being written.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn the_panel_classifies_every_catalogue_fixture_as_recourse_classify_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/classifier");
    let mut all = Vec::new();
    fixtures(&dir, "", &mut all);
    assert!(all.len() > 100, "{} fixtures", all.len());
    // The instant each fixture is judged at, and the fixtures judged at it.
    let mut by_now: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for (name, fixture) in all {
        let now = fixture["now"].as_str().unwrap_or(DEFAULT_NOW).to_owned();
        by_now
            .entry(now)
            .or_default()
            .push((name, fixture["input"].clone()));
    }
    let path = server_fn_path("try_evidence");
    let mut compared = 0;
    for (now, cases) in by_now {
        let at: DateTime<Utc> = now.parse().unwrap();
        let h = Harness::open(tempfile::tempdir().unwrap(), at).await;
        let envelopes: Vec<&Value> = cases.iter().map(|(_, e)| e).collect();
        let printed = classify(&now, &envelopes);
        assert_eq!(printed.len(), cases.len(), "one line per envelope");
        for ((name, envelope), cli) in cases.iter().zip(printed) {
            let (status, trial) = h
                .call(Method::POST, &path, Some(json!({ "envelope": envelope })))
                .await;
            assert!(
                cli.get("error").is_none(),
                "{name}: `recourse classify` could not read it: {cli}"
            );
            assert_eq!(status, StatusCode::OK, "{name}: {trial}");
            let classification = trial["classification"].as_object().unwrap();
            for (field, value) in classification {
                assert_eq!(&cli[field], value, "{name}: `{field}` differs");
            }
            for field in ["code", "class", "classifier_rule", "confidence", "reset_at"] {
                assert!(classification.contains_key(field), "{name}: no `{field}`");
            }
            assert_eq!(trial["gate"], cli["gate"], "{name}: gate");
            assert_eq!(trial["truncated"], cli["truncated"], "{name}: truncated");
            assert_eq!(
                trial["classified_at"],
                json!(now),
                "{name}: judged at the server's now"
            );
            compared += 1;
        }
    }
    assert!(compared > 100, "{compared} compared");
}

#[tokio::test]
async fn after_output_the_gate_refuses_what_it_allowed_before() {
    let h = Harness::new().await;
    let envelope = json!({"items": [{"kind": "http", "status": 529,
        "body": "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}]});
    let (status, trial) = h
        .call(
            Method::POST,
            &server_fn_path("try_evidence"),
            Some(json!({ "envelope": envelope })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{trial}");
    assert_eq!(trial["gate"]["automatic_recovery"], true, "{trial}");
    assert_eq!(trial["gate_after_output"]["automatic_recovery"], false, "{trial}");
    assert_eq!(
        trial["gate_after_output"]["reason"], "assistant_output",
        "{trial}"
    );
    // Nothing was stored: no route, no profile.
    assert_eq!(h.get("/api/v1/routes").await, json!([]));
    assert_eq!(h.get("/api/v1/profiles").await, json!([]));
}
