//! The audit log: who did what, when, from where, and what changed. Rows are appended after
//! the change they record has committed (the change and its row are two writes: if the append
//! fails, the change stands and the failure is logged as an error). A route's start is the
//! exception: its `route.start` row is written in the start's own transaction (the engine's
//! `StartOptions::by`), so the two commit together. Details never hold a
//! password, a password hash or a token's secret; a policy edit's detail is its diff
//! ([`diff`]): the changed JSON paths with the values before and after.

use super::{Actor, Auth};
use crate::store::audit::AuditInsert;
use policy::api::{ActionOutcome, ManualActionRequest, Profile};
use serde_json::{json, Map, Value};

impl Auth {
    /// Appends one row; never fails the request (see the module docs).
    pub async fn audit(&self, actor: &Actor, action: &str, target: Option<&str>, detail: Value) {
        let entry = AuditInsert {
            actor_kind: actor.kind,
            actor: actor.name.as_deref(),
            address: actor.address.as_deref(),
            action,
            target,
            detail: &detail,
        };
        if let Err(e) = self.store().append_audit(entry, self.now()).await {
            tracing::error!(error = %e, action, "the audit log could not be appended to");
        }
    }
}

impl Auth {
    /// A profile created (`before` is `None`), edited, or deleted (`after` is `None`): the
    /// detail is the diff of the two documents.
    pub async fn audit_profile(
        &self,
        actor: &Actor,
        id: &str,
        before: Option<&Profile>,
        after: Option<&Profile>,
    ) {
        let action = match (before, after) {
            (None, _) => "profile.create",
            (Some(_), Some(_)) => "profile.update",
            (Some(_), None) => "profile.delete",
        };
        let as_json = |p: Option<&Profile>| {
            p.map_or_else(|| json!({}), |p| serde_json::to_value(p).unwrap_or_default())
        };
        self.audit(actor, action, Some(id), diff(&as_json(before), &as_json(after)))
            .await;
    }

    /// A person's manual action, and whether it applied.
    pub async fn audit_action(
        &self,
        actor: &Actor,
        route_id: &str,
        request: &ManualActionRequest,
        outcome: &ActionOutcome,
    ) {
        let (applied, generation) = match outcome {
            ActionOutcome::Applied(s) => (true, s.generation),
            ActionOutcome::Conflict(s) => (false, s.generation),
        };
        self.audit(
            actor,
            "route.action",
            Some(route_id),
            json!({"action": request.action, "expected_generation": request.expected_generation,
                   "applied": applied, "generation": generation}),
        )
        .await;
    }
}

/// Fields that change on every write and say nothing about what was edited.
const NOISE: [&str; 2] = ["updated_at", "created_at"];

/// The differences between two JSON documents: `{"changes": [{"path", "before", "after"}]}`,
/// paths written as `policy.candidates[0].transient.retry.max_retries`. Objects are compared
/// key by key, arrays element by element; a value that only one side has is `null` on the
/// other.
pub fn diff(before: &Value, after: &Value) -> Value {
    let mut changes = Vec::new();
    walk("", before, after, &mut changes);
    json!({ "changes": changes })
}

fn walk(path: &str, before: &Value, after: &Value, out: &mut Vec<Value>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                if path.is_empty() && NOISE.contains(&key.as_str()) {
                    continue;
                }
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(
                    &child,
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                walk(
                    &format!("{path}[{i}]"),
                    a.get(i).unwrap_or(&Value::Null),
                    b.get(i).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (a, b) if a != b => {
            let mut change = Map::new();
            change.insert("path".into(), Value::String(path.to_owned()));
            change.insert("before".into(), a.clone());
            change.insert("after".into(), b.clone());
            out.push(Value::Object(change));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_edit_is_its_changed_paths_with_before_and_after() {
        let before = json!({"name": "p", "revision": 1, "updated_at": "t1",
            "policy": {"candidates": [{"id": "a", "transient": {"retry": {"max_retries": 3}}}]}});
        let after = json!({"name": "p", "revision": 2, "updated_at": "t2",
            "policy": {"candidates": [{"id": "a", "transient": {"retry": {"max_retries": 5}}}, {"id": "b"}]}});
        assert_eq!(
            diff(&before, &after),
            json!({"changes": [
                {"path": "policy.candidates[0].transient.retry.max_retries", "before": 3, "after": 5},
                {"path": "policy.candidates[1]", "before": null, "after": {"id": "b"}},
                {"path": "revision", "before": 1, "after": 2},
            ]})
        );
    }

    #[test]
    fn equal_documents_have_no_changes() {
        let doc = json!({"a": [1, {"b": null}]});
        assert_eq!(diff(&doc, &doc), json!({"changes": []}));
    }
}
