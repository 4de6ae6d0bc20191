//! `recourse classify --now`: stored evidence re-classifies the same way whenever it is run.

use std::{
    io::Write,
    process::{Command, Stdio},
};

const BIN: &str = env!("CARGO_BIN_EXE_recourse");

fn classify(args: &[&str], input: &str) -> Vec<serde_json::Value> {
    let mut child = Command::new(BIN)
        .arg("classify")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Claude Code's usage limit, resetting at 2026-11-30T18:00:00Z (an absolute epoch).
const USAGE_LIMIT: &str = r#"{"agent":"claude-code","items":[{"kind":"stderr","lines":["Claude AI usage limit reached|1796061600"]}]}"#;

#[test]
fn classify_now_keeps_an_absolute_reset_that_the_wall_clock_has_passed() {
    // As of the evidence's own time, the reset is ten hours ahead: a trusted hint.
    let as_then = classify(&["--now", "2026-11-30T08:00:00Z"], USAGE_LIMIT);
    assert_eq!(as_then.len(), 1);
    assert_eq!(as_then[0]["code"], "quota_limited");
    assert_eq!(as_then[0]["reset_at"], "2026-11-30T18:00:00Z");
    assert_eq!(as_then[0]["retry_after_seconds"], 36000);
    // Run again, the same instant gives the same answer.
    assert_eq!(classify(&["--now", "2026-11-30T08:00:00Z"], USAGE_LIMIT), as_then);
    // On the wall clock (after that reset) the same evidence has no hint left.
    let now = classify(&[], USAGE_LIMIT);
    assert_eq!(now[0]["code"], "quota_limited");
    assert!(now[0]["reset_at"].is_null(), "{}", now[0]);
}

#[test]
fn classify_now_rejects_an_instant_that_is_not_rfc_3339() {
    let out = Command::new(BIN)
        .args(["classify", "--now", "tomorrow", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now"));
}
