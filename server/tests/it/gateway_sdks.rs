//! The official OpenAI and Anthropic Python SDKs (pinned, in the virtual environment `./dev`
//! installs; `RECOURSE_SDK_PYTHON` names its interpreter) call a real Recourse served on a
//! loopback port in front of the fake provider (`tests/sdk/gateway_sdks.py` does the calls and
//! checks what the SDK saw; this test checks the routes and the provider's log).
//!
//! Without `RECOURSE_SDK_PYTHON` the tests are reported skipped and counted (`requires.rs`),
//! unless `RECOURSE_REQUIRE_SDKS=1` (as `./dev test` sets it), which makes that a failure.

use crate::common;

use chrono::TimeDelta;
use common::{gateway::*, provider::*};
use serde_json::Value;

/// The SDKs' interpreter, or `None` when the test is skipped (`requires.rs`, need `sdks`).
fn python() -> Option<String> {
    if !common::requires::check(common::requires::Need::Sdks) {
        return None;
    }
    std::env::var("RECOURSE_SDK_PYTHON").ok()
}

/// Serves a rig with the script's profiles for `style`; runs the script; returns the rig and
/// the route ids it printed.
async fn run(style: &str, python: &str) -> (Rig, Value) {
    // Each endpoint is a provider of its own: the overloaded first endpoint of `fast` opens its
    // provider's circuit, so `streaming` has a first endpoint of its own to switch from.
    let rig = Rig::new(&[
        ("main", style),
        ("backup", style),
        ("main2", style),
        ("backup2", style),
        ("limited", style),
        ("broken", style),
        ("spare", style),
    ])
    .await;
    let reset = rig.h.now() + TimeDelta::seconds(600);
    if style == "openai" {
        rig.fake.script("main", vec![openai_503()]);
        rig.fake.script("backup", vec![openai_ok("green")]);
        rig.fake.script("main2", vec![openai_503()]);
        rig.fake.script(
            "backup2",
            vec![Reply::Sse {
                frames: openai_stream_frames(&["gr", "een"], true),
                end: SseEnd::Close,
            }],
        );
        rig.fake.script("limited", vec![openrouter_per_day(reset)]);
        rig.fake.script(
            "broken",
            vec![Reply::Sse {
                frames: openai_stream_frames(&["gr"], false),
                end: SseEnd::Drop,
            }],
        );
        rig.fake.script("spare", vec![openai_ok("never")]);
    } else {
        rig.fake.script("main", vec![anthropic_overloaded()]);
        rig.fake.script("backup", vec![anthropic_ok("green")]);
        rig.fake.script("main2", vec![anthropic_overloaded()]);
        rig.fake.script(
            "backup2",
            vec![Reply::Sse {
                frames: anthropic_stream_frames(&["gr", "een"], true),
                end: SseEnd::Close,
            }],
        );
        rig.fake.script("limited", vec![anthropic_rate_limited(reset)]);
        rig.fake.script(
            "broken",
            vec![Reply::Sse {
                frames: anthropic_stream_frames(&["Hel"], false),
                end: SseEnd::Drop,
            }],
        );
        rig.fake.script("spare", vec![anthropic_ok("never")]);
    }
    rig.profile("fast", &["main", "backup"]).await;
    rig.profile("streaming", &["main2", "backup2"]).await;
    rig.profile("limited", &["limited"]).await;
    rig.profile("broken", &["broken", "spare"]).await;
    let base = rig.serve().await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/gateway_sdks.py");
    let out = tokio::process::Command::new(python)
        .args([script, style, &base, &rig.h.token])
        .output()
        .await
        .expect("the SDKs' python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{style} SDK: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let routes: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{stdout}"));
    (rig, routes)
}

async fn sdk_sees_one_clean_success_its_usual_exceptions_and_a_broken_stream_that_stops_for_a_person(
    style: &str,
) {
    let Some(python) = python() else { return };
    let (rig, routes) = run(style, &python).await;
    for (call, second) in [("json", "backup"), ("stream", "backup2")] {
        let r = routes[call].as_str().unwrap();
        let s = rig.h.wait_state(r, "completed").await;
        assert_eq!(s["candidate_id"], second, "{call}");
    }
    for endpoint in ["main", "backup", "main2", "backup2"] {
        assert_eq!(rig.fake.received(endpoint).len(), 1, "{endpoint}: one request");
    }
    let s = rig.h.snapshot(routes["limited"].as_str().unwrap()).await;
    assert_eq!(s["state"], "waiting_for_reset", "the route keeps its state: {s}");
    let s = rig
        .h
        .wait_state(routes["broken"].as_str().unwrap(), "action_required")
        .await;
    assert_eq!(s["action_reason"], "effect_unsafe");
    assert_eq!(rig.fake.received("broken").len(), 1);
    assert!(
        rig.fake.received("spare").is_empty(),
        "no second request after the first byte"
    );
}

#[tokio::test]
async fn the_openai_sdk_sees_one_clean_success_its_usual_exceptions_and_a_broken_stream_raise() {
    sdk_sees_one_clean_success_its_usual_exceptions_and_a_broken_stream_that_stops_for_a_person("openai")
        .await;
}

#[tokio::test]
async fn the_anthropic_sdk_sees_one_clean_success_its_usual_exceptions_and_a_broken_stream_raise() {
    sdk_sees_one_clean_success_its_usual_exceptions_and_a_broken_stream_that_stops_for_a_person("anthropic")
        .await;
}
