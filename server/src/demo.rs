//! The demo workspace (`recourse serve --demo`): simulated candidates and a handful of routes
//! whose scripts make a newcomer see, within a minute, a retry schedule that succeeds, a
//! retry budget that runs out and switches to a backup, a durable wait for a trusted reset,
//! an unknown error that stops for a person, and tool activity that overrides the policy.
//! Each profile sends what needs a person and what switched to the in-app notification list.
//!
//! Profiles have stable ids (`demo-*`) and are replaced on each run; routes are new each run.

use crate::{
    engine::{Engine, EngineError},
    profiles,
    store::new_id,
};
use policy::{
    api::{
        Caller, CallerKind, CandidateTarget, DispatcherKind, ProfileInput, SimulatedOutcome, SimulatedStep,
        StartRouteRequest,
    },
    input::{ValidatedProfile, ValidatedStartRoute},
    notify::{NotificationRule, NotifyEventType, IN_APP_CHANNEL},
};
use serde_json::{json, Value};

fn overloaded() -> Value {
    json!({"phase": "prompt", "effects": {"prompt_delivery": "confirmed"}, "items": [{"kind": "http",
        "status": 529, "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]})
}

fn usage_limit(reset_epoch: i64) -> Value {
    json!({"agent": "claude-code", "items": [{"kind": "acp_updates", "updates": [{"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": format!("Claude AI usage limit reached|{reset_epoch}")}}],
        "prompt_result": {"stopReason": "end_turn"}}]})
}

fn unknown() -> Value {
    json!({"phase": "prompt", "items": [{"kind": "stderr", "lines": ["frobnicator jammed at stage 7"]}]})
}

fn after_tool_activity() -> Value {
    json!({"phase": "tool", "effects": {"tool_activity": true, "prompt_delivery": "confirmed"}, "items": [{"kind": "http",
        "status": 529, "body": "{\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}"}]})
}

fn step(outcome: SimulatedOutcome, after_seconds: u64, envelope: Option<Value>) -> SimulatedStep {
    SimulatedStep {
        outcome,
        after_seconds,
        envelope,
    }
}

fn target(id: &str, provider: &str, script: Vec<SimulatedStep>) -> CandidateTarget {
    CandidateTarget {
        id: id.to_owned(),
        dispatcher: DispatcherKind::Simulated,
        provider_id: Some(provider.to_owned()),
        model_id: None,
        label: Some(format!("Simulated {provider}")),
        runner: None,
        script,
    }
}

fn policy(retries: u32, interval: u64, wait: u64, transient_exhausted: &str) -> Value {
    let retry = if retries > 0 {
        json!({"enabled": true, "max_retries": retries, "initial_interval_seconds": interval})
    } else {
        json!({"enabled": false, "max_retries": 0, "initial_interval_seconds": 0})
    };
    let waiting = if wait > 0 {
        json!({"enabled": true, "max_wait_seconds": wait})
    } else {
        json!({"enabled": false, "max_wait_seconds": 0})
    };
    json!({
        "transient": {"retry": retry, "wait_for_reset": {"enabled": false, "max_wait_seconds": 0}, "on_exhausted": transient_exhausted},
        "hard": {"retry": {"enabled": false, "max_retries": 0, "initial_interval_seconds": 0}, "wait_for_reset": waiting, "on_exhausted": "stop"}
    })
}

fn candidate(id: &str, p: Value) -> Value {
    let mut c = p;
    c["id"] = json!(id);
    c
}

/// Seeds the demo; returns how many routes it started.
pub async fn seed(engine: &Engine) -> Result<usize, EngineError> {
    let now = engine.now();
    let reset = now.timestamp() + 20;
    let profiles_to_seed = vec![
        (
            "demo-retry",
            "Demo: retries, then succeeds",
            vec![target(
                "sim-primary",
                "sim-anthropic",
                vec![
                    step(SimulatedOutcome::Fail, 2, Some(overloaded())),
                    step(SimulatedOutcome::Fail, 2, Some(overloaded())),
                    step(SimulatedOutcome::Succeed, 3, None),
                ],
            )],
            json!({"version": 1, "candidates": [candidate("sim-primary", policy(3, 5, 0, "skip"))]}),
            CallerKind::KanbanTask,
        ),
        (
            "demo-switch",
            "Demo: budget runs out, switches to the backup",
            vec![
                target(
                    "sim-flaky",
                    "sim-flaky-provider",
                    vec![step(SimulatedOutcome::Fail, 2, Some(overloaded()))],
                ),
                target(
                    "sim-backup",
                    "sim-openai",
                    vec![step(SimulatedOutcome::Succeed, 3, None)],
                ),
            ],
            json!({"version": 1, "candidates": [candidate("sim-flaky", policy(2, 4, 0, "skip")),
                candidate("sim-backup", policy(0, 0, 0, "stop"))]}),
            CallerKind::Workflow,
        ),
        (
            "demo-reset",
            "Demo: waits for a trusted reset",
            vec![target(
                "sim-subscription",
                "sim-subscription-provider",
                vec![
                    step(SimulatedOutcome::Fail, 2, Some(usage_limit(reset))),
                    step(SimulatedOutcome::Succeed, 3, None),
                ],
            )],
            json!({"version": 1, "candidates": [candidate("sim-subscription", policy(0, 0, 300, "skip"))]}),
            CallerKind::Office,
        ),
        (
            "demo-unknown",
            "Demo: an unknown error stops for a person",
            vec![target(
                "sim-mystery",
                "sim-mystery-provider",
                vec![
                    step(SimulatedOutcome::Fail, 4, Some(unknown())),
                    step(SimulatedOutcome::Succeed, 2, None),
                ],
            )],
            json!({"version": 1, "candidates": [candidate("sim-mystery", policy(3, 5, 0, "skip"))]}),
            CallerKind::Utility,
        ),
        (
            "demo-unsafe",
            "Demo: tool activity overrides the policy",
            vec![target(
                "sim-busy",
                "sim-busy-provider",
                vec![
                    step(SimulatedOutcome::Fail, 6, Some(after_tool_activity())),
                    step(SimulatedOutcome::Hang, 0, None),
                ],
            )],
            json!({"version": 1, "candidates": [candidate("sim-busy", policy(3, 5, 0, "skip"))]}),
            CallerKind::KanbanTask,
        ),
    ];
    let mut started = 0;
    for (id, name, targets, doc, caller) in profiles_to_seed {
        let input = ProfileInput {
            name: name.to_owned(),
            kind: policy::api::ProfileKind::Dynamic,
            description: Some(
                "Seeded by `recourse serve --demo`; candidates use the simulated provider.".to_owned(),
            ),
            targets,
            policy: doc,
            expected_revision: None,
            // The notification list shows what needs a person and what switched.
            notifications: vec![NotificationRule {
                events: vec![NotifyEventType::RouteNeedsPerson, NotifyEventType::RouteSwitched],
                channels: vec![IN_APP_CHANNEL.to_owned()],
                min_wait_seconds: 0,
            }],
        };
        let profile = ValidatedProfile::parse(&input).map_err(EngineError::Invalid)?;
        profiles::put(engine, id, profile).await?;
        let invocation = new_id("demo", now);
        let request = StartRouteRequest {
            profile_id: id.to_owned(),
            caller: Caller {
                kind: caller,
                reference: format!("{id}-work"),
                invocation_id: invocation,
            },
            title: Some(name.trim_start_matches("Demo: ").to_owned()),
            work: None,
            pin: None,
        };
        let request = ValidatedStartRoute::parse(&request).map_err(EngineError::Invalid)?;
        match engine.start_route(request).await {
            Ok(_) => started += 1,
            Err(EngineError::Conflict(m)) => tracing::warn!(message = m, "demo route not started"),
            Err(e) => return Err(e),
        }
    }
    Ok(started)
}
