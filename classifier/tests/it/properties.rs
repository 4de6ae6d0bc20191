//! Properties that hold for any input: nothing panics, and every verdict is well formed
//! (the gate never allows unclassified evidence, hints are in the validated window, excerpts are
//! bounded). Case counts are modest so the suite stays fast on two cores.

use chrono::{DateTime, Duration, Utc};
use classifier::{
    classify, cli::classify_stream, redact::MAX_EXCERPT_CHARS, Envelope, Verdict, MAX_HINT_SECS,
};
use policy::classification::ClassState;
use proptest::prelude::*;
use serde_json::{json, Value};

fn now() -> DateTime<Utc> {
    "2026-11-30T08:00:00Z".parse().expect("now")
}

fn assert_well_formed(v: &Verdict) {
    let c = &v.classification;
    assert_eq!(c.class == ClassState::Unclassified, c.reason.is_some(), "{v:?}");
    assert_eq!(c.class == ClassState::Unclassified, c.code.is_none(), "{v:?}");
    assert_eq!(v.gate.automatic_recovery, v.gate.reason.is_none(), "{v:?}");
    if v.gate.automatic_recovery {
        assert_ne!(c.class, ClassState::Unclassified, "{v:?}");
    }
    if let Some(e) = &c.safe_excerpt {
        assert!(e.chars().count() <= MAX_EXCERPT_CHARS, "{e}");
    }
    assert_eq!(c.reset_at.is_some(), c.retry_after_seconds.is_some());
    if let (Some(at), Some(secs)) = (c.reset_at, c.retry_after_seconds) {
        assert!(at > now());
        assert!(at <= now() + Duration::seconds(MAX_HINT_SECS));
        assert!(secs >= 1 && i64::try_from(secs).unwrap_or(i64::MAX) <= MAX_HINT_SECS);
    }
    let json = serde_json::to_value(v).expect("verdict serializes");
    assert!(json.get("gate").is_some() && json.get("code").is_some());
}

/// Fragments of real messages, so generated envelopes reach deep into the catalogue.
const FRAGMENTS: &[&str] = &[
    "API Error: 529 ",
    r#"{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}"#,
    r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"39s"}]}}"#,
    "You've hit your limit · resets 7pm (Europe/Istanbul)",
    "Claude AI usage limit reached|1796083200",
    "try again in 4h12m",
    "resets in 5 days 22 hours",
    "getaddrinfo ENOTFOUND api.openai.com",
    "npm error code ENOTFOUND",
    "Rate limit reached for gpt-4o in organization org-AbCdEfGhIjKlMnOpQr on tokens per day (TPD)",
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz",
    "ThrottlingException",
    "\u{2219}\u{1F600}\n\t",
    "{",
    "[[[",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..4).prop_map(|v| v.concat()),
        (proptest::sample::select(FRAGMENTS), any::<String>()).prop_map(|(a, b)| format!("{a}{b}")),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        Just(json!(1.5)),
        text().prop_map(Value::String),
    ]
}

fn update() -> impl Strategy<Value = Value> {
    prop_oneof![
        text()
            .prop_map(|t| json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":t}})),
        text()
            .prop_map(|t| json!({"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":t}})),
        Just(json!({"sessionUpdate":"tool_call","toolCallId":"t","status":"completed"})),
        scalar().prop_map(|v| json!({"update": {"sessionUpdate": v}})),
    ]
}

fn item() -> impl Strategy<Value = Value> {
    prop_oneof![
        (any::<u16>(), text(), text(), scalar()).prop_map(|(s, h, b, body)| json!({
            "kind":"http","status":s,
            "headers":{"retry-after":h,"x-ratelimit-reset-tokens":"6m0s","anthropic-ratelimit-tokens-reset":"2026-11-30T08:01:00Z"},
            "body": if s % 2 == 0 { Value::String(b) } else { body }
        })),
        (any::<i64>(), text(), scalar()).prop_map(|(c, m, d)| json!({"kind":"acp_error","code":c,"message":m,"data":d})),
        (proptest::collection::vec(update(), 0..6), scalar()).prop_map(|(u, s)| json!({
            "kind":"acp_updates","updates":u,"prompt_result":{"stopReason":s}
        })),
        proptest::collection::vec(text(), 0..4).prop_map(|l| json!({"kind":"stderr","lines":l})),
        (scalar(), scalar()).prop_map(|(c, s)| json!({"kind":"process_exit","code":c,"signal":s})),
        scalar().prop_map(|k| json!({"kind":k})),
    ]
}

fn envelope() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec(item(), 0..5),
        scalar(),
        scalar(),
        scalar(),
        any::<bool>(),
        scalar(),
    )
        .prop_map(|(items, g, a, occurred, cancel, phase)| {
            json!({
                "generation": g, "active_generation": a, "occurred_at": occurred,
                "cancel_requested": cancel, "phase": phase, "agent": "amp",
                "effects": {"prompt_delivery": phase},
                "items": items
            })
        })
}

/// JSON text of an object with `pairs` in the order given: keys may repeat (the last counts)
/// and come in any order, which a `Value` cannot express.
fn object_text(pairs: &[(&str, String)]) -> String {
    let fields: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::from(*k)))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Keys of every kind of item, each field as any of several JSON types.
fn raw_item() -> impl Strategy<Value = String> {
    const KEYS: &[&str] = &[
        "kind",
        "kind",
        "status",
        "headers",
        "body",
        "code",
        "message",
        "data",
        "updates",
        "prompt_result",
        "prompt_error",
        "lines",
        "text",
        "signal",
    ];
    let value = prop_oneof![
        scalar().prop_map(|v| v.to_string()),
        Just(r#""http""#.to_owned()),
        Just(r#""stderr""#.to_owned()),
        Just(r#""acp_updates""#.to_owned()),
        Just(r#""acp_error""#.to_owned()),
        Just(r#""process_exit""#.to_owned()),
        Just(r#"{"Retry-After":"20","retry-after":"30","x-a":[1],"x-b":[ "v" ]}"#.to_owned()),
        Just(r#"{"error":{"type":"overloaded_error"},"error":{"code":429}}"#.to_owned()),
        proptest::collection::vec(update(), 0..4).prop_map(|u| Value::from(u).to_string()),
        proptest::collection::vec(text(), 0..3).prop_map(|l| Value::from(l).to_string()),
        Just(r#"{"stopReason":"end_turn","stop_reason":"refusal"}"#.to_owned()),
    ];
    proptest::collection::vec((proptest::sample::select(KEYS), value), 0..8).prop_map(|pairs| {
        let pairs: Vec<(&str, String)> = pairs.into_iter().collect();
        object_text(&pairs)
    })
}

fn raw_envelope() -> impl Strategy<Value = String> {
    const KEYS: &[&str] = &[
        "generation",
        "active_generation",
        "phase",
        "occurred_at",
        "provider_id",
        "model_id",
        "agent",
        "cancel_requested",
        "effects",
        "invocation_id",
    ];
    (
        proptest::collection::vec(raw_item(), 0..4),
        proptest::collection::vec((proptest::sample::select(KEYS), scalar()), 0..6),
        any::<bool>(),
    )
        .prop_map(|(items, fields, twice)| {
            let mut pairs: Vec<(&str, String)> =
                fields.into_iter().map(|(k, v)| (k, v.to_string())).collect();
            pairs.push(("items", format!("[{}]", items.join(","))));
            if twice {
                pairs.insert(0, ("items", "[]".to_owned()));
            }
            object_text(&pairs)
        })
}

/// `Envelope::parse` reads bytes without building a `Value`; it must give what
/// `Envelope::from_value` gives for the `Value` `serde_json` reads from the same bytes.
fn assert_parse_is_from_value(bytes: &[u8]) {
    let fast = Envelope::parse(bytes);
    let slow = serde_json::from_slice::<Value>(bytes)
        .map_err(classifier::EnvelopeError::from)
        .and_then(|v| Envelope::from_value(&v).map(Envelope::into_owned));
    match (fast, slow) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!((a.kind(), a.to_string()), (b.kind(), b.to_string())),
        (a, b) => panic!("parse gave {a:?}, from_value gave {b:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(env) = Envelope::parse(&bytes) {
            assert_well_formed(&classify(&env, now()));
        }
        let mut out = Vec::new();
        classify_stream(&bytes[..], &mut out, now()).expect("in-memory IO");
        for line in String::from_utf8(out).expect("output is UTF-8").lines() {
            serde_json::from_str::<Value>(line).expect("every output line is JSON");
        }
    }

    #[test]
    fn parsing_bytes_gives_the_envelope_of_their_json_value(text in raw_envelope(), cut in any::<u16>()) {
        assert_parse_is_from_value(text.as_bytes());
        // And cut anywhere: malformed input fails the same way.
        let end = usize::from(cut) % (text.len() + 1);
        assert_parse_is_from_value(&text.as_bytes()[..end]);
    }

    #[test]
    fn arbitrary_json_envelopes_never_panic_and_give_well_formed_verdicts(v in envelope()) {
        let env = Envelope::from_value(&v).expect("an object with items is an envelope");
        assert_well_formed(&classify(&env, now()));
        let bytes = serde_json::to_vec(&v).expect("serialize");
        let again = Envelope::parse(&bytes).expect("parses");
        assert_eq!(classify(&again, now()), classify(&env, now()));
    }
}

#[test]
fn a_verdict_is_one_flat_object_with_the_contract_fields_and_the_gate_beside_them() {
    let env = Envelope::parse(br#"{"items":[{"kind":"http","status":429,"headers":{"retry-after":"20"},
        "body":"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}"}]}"#)
    .expect("parses");
    let v = serde_json::to_value(classify(&env, now())).expect("serializes");
    for key in [
        "code",
        "class",
        "catalogue_version",
        "confidence",
        "scope",
        "classifier_rule",
        "provider_id",
        "model_id",
        "phase",
        "occurred_at",
        "retry_after_seconds",
        "reset_at",
        "safe_excerpt",
        "gate",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["code"], "rate_limited");
    assert_eq!(v["class"], "transient");
    assert_eq!(v["retry_after_seconds"], 20);
    assert_eq!(v["reset_at"], "2026-11-30T08:00:20Z");
    assert_eq!(v["gate"], json!({"automatic_recovery": true, "reason": null}));
    assert!(v.get("reason").is_none(), "a classified result has no reason");
}

#[test]
fn a_large_adversarial_input_is_cut_to_its_bounds_and_classified_well_formed() {
    // Many near-miss fragments in the largest body the envelope keeps (and catastrophic-
    // backtracking bait in stderr): the verdict records the cut and is well formed. That the
    // time stays linear in the input is measured, not asserted here: the classifier bench's
    // "large and hostile inputs" (time per byte as inputs grow, `cargo bench -p classifier`).
    let body = "Rate limit reached for ".repeat(800);
    let json = json!({"items":[{"kind":"http","status":429,"body":body},
        {"kind":"stderr","lines":vec!["((((((((((((((((((((a".repeat(90); 64]}]});
    let env = Envelope::from_value(&json).expect("parses");
    let v = classify(&env, now());
    assert!(v.truncated);
    assert_well_formed(&v);
}
