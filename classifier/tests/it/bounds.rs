//! The envelope's bounds, seen from the verdict: a cut is recorded in what `recourse classify`
//! prints, never silent. An HTTP body keeps its first 16 KiB
//! ([`classifier::envelope::MAX_TEXT_BYTES`]): the error object a provider sends comes first,
//! and a body larger than that is a page or a stream, not a bigger error.

use chrono::{DateTime, Utc};
use classifier::{classify, envelope::MAX_TEXT_BYTES, Envelope};
use serde_json::json;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-30T08:00:00Z")
        .expect("time")
        .with_timezone(&Utc)
}

fn verdict_json(env: &serde_json::Value) -> serde_json::Value {
    let bytes = serde_json::to_vec(env).expect("bytes");
    let env = Envelope::parse(&bytes).expect("parses");
    serde_json::to_value(classify(&env, now())).expect("verdict json")
}

#[test]
fn a_body_cut_at_16_kib_is_still_classified_on_its_first_16_kib_and_the_verdict_says_truncated() {
    let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let body = format!("{error}\n{}", "<p>padding</p>\n".repeat(2 * MAX_TEXT_BYTES / 15));
    assert!(body.len() > MAX_TEXT_BYTES);
    let v = verdict_json(&json!({"items": [{"kind": "http", "status": 529, "body": body}]}));
    assert_eq!(v["truncated"], true);
    assert_eq!(v["code"], "provider_overloaded");
}

#[test]
fn a_json_body_given_as_a_value_is_bounded_by_its_serialization_and_the_cut_recorded() {
    let filler: Vec<String> = (0..3000).map(|i| format!("entry-{i}")).collect();
    let body = json!({"error": {"type": "overloaded_error", "message": "Overloaded"}, "filler": filler});
    assert!(body.to_string().len() > MAX_TEXT_BYTES);
    let v = verdict_json(&json!({"items": [{"kind": "http", "status": 529, "body": body}]}));
    assert_eq!(v["truncated"], true);
}

#[test]
fn an_error_past_the_first_16_kib_of_a_body_is_not_seen_and_the_verdict_says_truncated() {
    let body = format!(
        "{}{}",
        "x".repeat(MAX_TEXT_BYTES + 100),
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
    );
    let v = verdict_json(&json!({"items": [{"kind": "http", "status": 200, "body": body}]}));
    assert_eq!(v["truncated"], true);
    assert_eq!(v["class"], "unclassified");
    // The same error within the bound is recognised: only the cut hid it.
    let short = format!("{}{}", "x".repeat(100), &body[MAX_TEXT_BYTES + 100..]);
    let v = verdict_json(&json!({"items": [{"kind": "http", "status": 200, "body": short}]}));
    assert_eq!(v["truncated"], false);
    assert_eq!(v["code"], "provider_overloaded");
}

#[test]
fn a_body_within_the_bound_is_not_marked_truncated() {
    let v = verdict_json(&json!({"items": [{"kind": "http", "status": 529,
        "body": r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#}]}));
    assert_eq!(v["truncated"], false);
    assert_eq!(v["code"], "provider_overloaded");
}
