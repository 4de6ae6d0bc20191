//! The gateway's part of the OpenAPI document: its three operations and their schemas, added
//! to the generated document after the REST API's post-processing (`crate::contract`), because
//! their errors are the OpenAI and Anthropic shapes, not the REST API's `ApiError`. Bounds come
//! from `policy::limits`, as the parser enforces them (`policy::gateway::GatewayRequest`).

use policy::limits::{
    LINE_PATTERN, MAX_GATEWAY_BODY_BYTES, MAX_GATEWAY_MESSAGES, MAX_GATEWAY_WAIT_SECONDS, MAX_ID_CHARS,
};
use serde_json::{json, Map, Value};

/// Statuses a call can answer with an error, and what each means.
const CALL_ERRORS: [(&str, &str); 9] = [
    ("400", "The request is not one the gateway takes (the message names the field), the profile's candidates are not all endpoints of this style, or `x-recourse-max-wait` is out of range"),
    ("401", "No Recourse API token, or one that is unknown, expired or revoked (`Authorization: Bearer` or `x-api-key`)"),
    ("403", "The token lacks `operate_routes`, or the profile is outside its scope"),
    ("404", "No profile has this id or name"),
    ("413", "The body is larger than the gateway takes"),
    ("415", "The body is not sent as `Content-Type: application/json`"),
    ("429", "The route waits for a rate limit or quota longer than the client holds (`Retry-After` until its deadline), or it stopped for a person on one; or the token has too many calls open (`Retry-After: 1`)"),
    ("500", "Something failed inside Recourse"),
    ("503", "The route waits longer than the client holds (`Retry-After` until its deadline), stopped for a person, or ended; or the database could not be written"),
];

fn error_response(description: &str, schema: &str) -> Value {
    json!({"description": description,
           "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn route_headers() -> Value {
    json!({
        "x-recourse-route-id": {"description": "The route this call started", "schema": {"type": "string"}},
        "x-recourse-candidate": {"description": "The candidate that answered (or the route's current one)", "schema": {"type": "string"}},
        "x-recourse-attempts": {"description": "The number of the route's latest attempt", "schema": {"type": "integer", "minimum": 0}}
    })
}

fn request_schema(roles: &[&str], description: &str) -> Value {
    json!({
        "type": "object",
        "description": description,
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": LINE_PATTERN,
                      "description": "The id or name of a Recourse profile (GET /v1/models)"},
            "messages": {"type": "array", "minItems": 1, "maxItems": MAX_GATEWAY_MESSAGES,
                         "items": {"type": "object", "required": ["role"],
                                   "properties": {"role": {"type": "string", "enum": roles}}}},
            "stream": {"type": ["boolean", "null"], "description": "Answer as server-sent events"}
        },
        "additionalProperties": true
    })
}

fn call(operation_id: &str, summary: &str, request: &str, error: &str, overload: bool) -> Value {
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "The answer of the candidate that succeeded, as its provider sent it: JSON, or \
                            (with `stream: true`) its events from the first content on",
            "headers": route_headers(),
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}}
            }
        }),
    );
    for (status, description) in CALL_ERRORS {
        responses.insert(status.into(), error_response(description, error));
    }
    if overload {
        responses.insert(
            "529".into(),
            error_response(
                "The route stopped for a person on an overloaded provider or model",
                error,
            ),
        );
    }
    json!({
        "operationId": operation_id,
        "summary": summary,
        "tags": ["gateway"],
        "parameters": [{
            "name": "x-recourse-max-wait", "in": "header", "required": false,
            "description": "Seconds the client holds while the route waits (default 60)",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_GATEWAY_WAIT_SECONDS}
        }],
        "requestBody": {"required": true, "content": {"application/json": {
            "schema": {"$ref": format!("#/components/schemas/{request}")}}}},
        "responses": responses
    })
}

/// Adds the gateway's operations and schemas to `doc`.
pub(crate) fn extend(doc: &mut Value) {
    let paths = doc["paths"].as_object_mut().expect("paths");
    paths.insert(
        "/v1/chat/completions".into(),
        json!({"post": call("gateway_chat_completions",
            "OpenAI chat completions, answered by a profile's OpenAI-style endpoints with failover",
            "GatewayChatRequest", "OpenAiError", false)}),
    );
    paths.insert(
        "/v1/messages".into(),
        json!({"post": call("gateway_messages",
            "Anthropic Messages, answered by a profile's Anthropic-style endpoints with failover",
            "GatewayMessagesRequest", "AnthropicError", true)}),
    );
    paths.insert(
        "/v1/models".into(),
        json!({"get": {
            "operationId": "gateway_models",
            "summary": "The profiles this token may name as `model`: OpenAI's list, or Anthropic's page when \
                        the request carries `anthropic-version`",
            "tags": ["gateway"],
            "responses": {
                "200": {"description": "The profiles whose candidates serve the style",
                        "content": {"application/json": {"schema": {"oneOf": [
                            {"$ref": "#/components/schemas/OpenAiModelList"},
                            {"$ref": "#/components/schemas/AnthropicModelList"}]}}}},
                "401": error_response("No valid Recourse API token", "GatewayError"),
                "403": error_response("The token lacks `operate_routes`", "GatewayError"),
                "503": error_response("The database could not be read", "GatewayError")
            }
        }}),
    );
    let schemas = doc["components"]["schemas"].as_object_mut().expect("schemas");
    schemas.insert(
        "GatewayChatRequest".into(),
        request_schema(
            &["system", "developer", "user", "assistant", "tool", "function"],
            &format!(
                "An OpenAI chat completion request whose `model` names a profile; every other field is passed \
                 to the endpoint as sent (the endpoint's own model replaces `model`). At most \
                 {MAX_GATEWAY_BODY_BYTES} bytes."
            ),
        ),
    );
    let mut chat = schemas["GatewayChatRequest"].take();
    chat["properties"]["stream_options"] = json!({"type": ["object", "null"]});
    schemas.insert("GatewayChatRequest".into(), chat);
    schemas.insert(
        "GatewayMessagesRequest".into(),
        request_schema(
            &["user", "assistant"],
            &format!(
                "An Anthropic Messages request whose `model` names a profile; every other field is passed to \
                 the endpoint as sent (the endpoint's own model replaces `model`). At most \
                 {MAX_GATEWAY_BODY_BYTES} bytes."
            ),
        ),
    );
    let mut messages = schemas["GatewayMessagesRequest"].take();
    messages["properties"]["stream_options"] = json!({"not": {}});
    schemas.insert("GatewayMessagesRequest".into(), messages);
    schemas.insert(
        "OpenAiError".into(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "code"],
            "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                           "param": {"type": "null"}, "code": {"type": "string"}}}}}),
    );
    schemas.insert(
        "AnthropicError".into(),
        json!({"type": "object", "required": ["type", "error"], "properties": {
            "type": {"const": "error"},
            "error": {"type": "object", "required": ["type", "message"],
                      "properties": {"type": {"type": "string"}, "message": {"type": "string"}}}}}),
    );
    schemas.insert(
        "GatewayError".into(),
        json!({"oneOf": [{"$ref": "#/components/schemas/OpenAiError"},
                         {"$ref": "#/components/schemas/AnthropicError"}]}),
    );
    schemas.insert(
        "OpenAiModelList".into(),
        json!({"type": "object", "required": ["object", "data"], "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object", "required": ["id", "object", "created", "owned_by"],
                "properties": {"id": {"type": "string"}, "object": {"const": "model"},
                               "created": {"type": "integer"}, "owned_by": {"type": "string"}}}}}}),
    );
    schemas.insert(
        "AnthropicModelList".into(),
        json!({"type": "object", "required": ["data", "has_more", "first_id", "last_id"], "properties": {
            "data": {"type": "array", "items": {"type": "object", "required": ["type", "id", "display_name", "created_at"],
                "properties": {"type": {"const": "model"}, "id": {"type": "string"},
                               "display_name": {"type": "string"}, "created_at": {"type": "string", "format": "date-time"}}}},
            "has_more": {"type": "boolean"},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]}}}),
    );
}
