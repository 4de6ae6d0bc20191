//! Every status each operation can answer, with its body.

use crate::auth::rules::Access;
use policy::limits;
use serde_json::{json, Value};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}
    })
}

fn validation_response() -> Value {
    json!({
        "description": "The input was refused: every problem with its field path (nothing changed)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ValidationErrors"}}}
    })
}

/// Operations whose input is validated past its shape (422 with field paths).
const VALIDATING: [&str; 19] = [
    "list_notifications",
    "list_deliveries",
    "create_account",
    "update_account",
    "create_role",
    "update_role",
    "create_token",
    "audit",
    "create_profile",
    "update_profile",
    "list_routes",
    "start_route",
    "submit_evidence",
    "submit_work",
    "claim_dispatch",
    "claim_route",
    "ack_dispatch",
    "heartbeat_dispatch",
    "report_dispatch",
];

/// Every status each operation can answer, with its body.
pub fn statuses(doc: &mut Value) {
    let paths = doc["paths"].as_object_mut().expect("paths");
    for (path, item) in paths.iter_mut() {
        let has_id = path.contains('{');
        for (method, op) in item.as_object_mut().expect("path item").iter_mut() {
            let Some(op) = op.as_object_mut() else { continue };
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let write = matches!(method.as_str(), "post" | "put" | "patch" | "delete");
            // Who may call it: `auth::rules`, the table the server enforces.
            let access = crate::auth::rules::route(&method.to_uppercase(), path).map(|(_, a)| a);
            let public = matches!(access, Some(Access::Public));
            let needs_permission = matches!(access, Some(Access::Permission(_) | Access::AnyOf(_)));
            let has_body = op.contains_key("requestBody");
            let has_query = op
                .get("parameters")
                .and_then(Value::as_array)
                .is_some_and(|ps| ps.iter().any(|p| p["in"] == "query"));
            let responses = op
                .entry("responses")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("responses");
            let mut add = |status: &str, response: Value| {
                responses.entry(status.to_owned()).or_insert(response);
            };
            if has_body || has_id || has_query {
                add(
                    "400",
                    error_response(
                        "The body is not JSON of the request's shape, or a path or query part cannot be read \
                         (the message names fields, never values)",
                    ),
                );
            }
            if !public {
                add(
                    "401",
                    error_response(
                        "No principal: sign in, or send an API token as `Authorization: Bearer` \
                         (`unauthenticated`)",
                    ),
                );
            }
            match (needs_permission, write) {
                (true, true) => add(
                    "403",
                    error_response(
                        "The caller lacks the permission this needs, or the route or profile is outside \
                         its reach (`forbidden`, naming what is needed); or a browser sent the change from \
                         another origin (`foreign_origin`)",
                    ),
                ),
                (true, false) => add(
                    "403",
                    error_response(
                        "The caller lacks the permission this needs, or the route or profile is outside \
                         its reach (`forbidden`, naming what is needed)",
                    ),
                ),
                (false, true) => add(
                    "403",
                    error_response("A browser sent the change from another origin (`foreign_origin`)"),
                ),
                (false, false) => {}
            }
            if has_id {
                add("404", error_response("No such profile or route (`not_found`)"));
            }
            if has_body {
                add(
                    "413",
                    error_response(&format!(
                        "The body is larger than {} bytes (`payload_too_large`)",
                        limits::MAX_REQUEST_BODY_BYTES
                    )),
                );
                add(
                    "415",
                    error_response("The body is not sent as `Content-Type: application/json`"),
                );
            }
            if VALIDATING.contains(&id.as_str()) {
                responses.insert("422".to_owned(), validation_response());
            }
            if id != "events" {
                responses.entry("503".to_owned()).or_insert_with(|| {
                    error_response(
                        "The database could not be read or written, or the server is stopping; nothing changed (`storage_unavailable`, `stopping`)",
                    )
                });
            }
            // A 409 about a route carries its snapshot; one about anything else (an invocation
            // that already has a route, a profile revision) is the shared error.
            if let Some(conflict) = responses.get_mut("409") {
                let schema = &mut conflict["content"]["application/json"]["schema"];
                if schema.is_null() {
                    *schema = json!({"$ref": "#/components/schemas/ApiError"});
                } else if schema["$ref"] != "#/components/schemas/ApiError" {
                    *schema = json!({"oneOf": [schema.take(), {"$ref": "#/components/schemas/ApiError"}]});
                }
            }
        }
    }
}
