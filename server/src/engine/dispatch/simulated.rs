//! The simulated dispatcher: a scripted provider for the demo and the tests. Attempt `n` on a
//! candidate (1-based, counted per route) plays step `n` of its script; attempts past the end
//! repeat the last step. A step reports success or its evidence envelope after
//! `after_seconds` (a durable `report` timer), or hangs. A candidate without a script succeeds
//! at once (what the profile editor tells a person who picks it).
//!
//! It stands for a provider or an agent, and differs from one in everything below the report:
//! no process, no network, no session; the evidence is whatever envelope the script carries,
//! delivered whole at the scripted instant (route time, so a test's manual clock moves it),
//! never partial output, never an exit of its own, never a retry of its own. What the real
//! agents do on the wire is tested with the `acp` dispatcher against them
//! (`server/tests/it/agents_matrix.rs`); the `http` dispatcher against `fake-provider`.

use super::{DispatchError, DispatchFuture, Dispatcher, LaunchRequest, Launched, Report};
use crate::store::Store;
use policy::{api::SimulatedOutcome, time::after_seconds};
use serde_json::{json, Value};

pub(crate) struct Simulated {
    store: Store,
}

impl Simulated {
    pub(crate) fn new(store: Store) -> Simulated {
        Simulated { store }
    }
}

impl Dispatcher for Simulated {
    fn launch(&self, r: LaunchRequest) -> DispatchFuture<'_, Result<Option<Launched>, DispatchError>> {
        Box::pin(async move {
            let ordinal = self
                .store
                .candidate_ordinal(&r.route_id, &r.target.id, r.attempt)
                .await?;
            let index = usize::try_from(ordinal.saturating_sub(1)).unwrap_or(usize::MAX);
            let Some(step) = r.target.script.get(index).or(r.target.script.last()) else {
                // No script (a simulated candidate made in the profile editor): it succeeds.
                return Ok(Some(Launched {
                    audit: true,
                    report: Some((r.now, Report::Succeeded { result: None })),
                }));
            };
            let due = after_seconds(r.now, step.after_seconds);
            let report = match step.outcome {
                SimulatedOutcome::Hang => None,
                SimulatedOutcome::Succeed => Some((due, Report::Succeeded { result: None })),
                SimulatedOutcome::Fail => Some((
                    due,
                    Report::Failed {
                        envelope: envelope(step.envelope.as_ref(), &r, due),
                    },
                )),
            };
            Ok(Some(Launched { audit: true, report }))
        })
    }
}

/// The step's envelope with the attempt's identity filled in (the provider and model from the
/// target when the script names none).
fn envelope(script: Option<&Value>, r: &LaunchRequest, at: chrono::DateTime<chrono::Utc>) -> Value {
    let mut env = match script {
        Some(Value::Object(o)) => o.clone(),
        _ => json!({"items": []}).as_object().cloned().unwrap_or_default(),
    };
    env.insert("invocation_id".into(), json!(r.invocation_id));
    env.insert("generation".into(), json!(r.invocation_generation));
    env.insert("occurred_at".into(), json!(at));
    for (key, value) in [
        ("provider_id", &r.target.provider_id),
        ("model_id", &r.target.model_id),
    ] {
        if let (false, Some(v)) = (env.contains_key(key), value) {
            env.insert(key.into(), json!(v));
        }
    }
    Value::Object(env)
}
