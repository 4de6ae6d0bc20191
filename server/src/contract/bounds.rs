//! The request bounds: `policy::limits` on every property the server bounds, integer ranges,
//! the work's shape, the evidence body, the route list's query, the policy sections' rules.

use super::schema;
use policy::limits;
use serde_json::{json, Value};

/// Every request integer's range: the Rust type's, or a tighter one the server enforces.
const U64_MAX: u64 = u64::MAX;

fn merge(target: &mut Value, patch: Value) {
    if let (Some(t), Value::Object(p)) = (target.as_object_mut(), patch) {
        t.extend(p);
    }
}

/// Patches one property of a component schema (`schema.property`).
fn property(doc: &mut Value, name: &str, prop: &str, patch: Value) {
    let field = &mut schema(doc, name)["properties"][prop];
    // `Option<Struct>` properties are `{"oneOf": [{"type": "null"}, {"$ref": ...}]}`; the
    // bound belongs on the non-null arm.
    if let Some(arms) = field.get_mut("oneOf").and_then(Value::as_array_mut) {
        for arm in arms.iter_mut().filter(|a| a.get("$ref").is_some()) {
            merge(arm, patch.clone());
        }
    } else {
        merge(field, patch);
    }
}

fn line(max: usize) -> Value {
    json!({"minLength": 1, "maxLength": max, "pattern": limits::LINE_PATTERN})
}

fn text(max: usize) -> Value {
    json!({"maxLength": max, "pattern": limits::TEXT_PATTERN})
}

/// An account or role name (`policy::auth::check_name`).
fn account_name() -> Value {
    json!({"minLength": 1, "maxLength": limits::MAX_ACCOUNT_NAME_CHARS, "pattern": limits::ACCOUNT_NAME_PATTERN})
}

/// A role an account holds: a name by the same rules, which must name a built-in or a made
/// role (examples from the built-in ones, so generated requests can succeed).
fn role_name() -> Value {
    let mut v = account_name();
    v["examples"] = json!([
        policy::auth::BuiltinRole::Viewer.name(),
        policy::auth::BuiltinRole::Operator.name()
    ]);
    v
}

/// A new password (`policy::auth::check_password`).
fn password() -> Value {
    json!({"minLength": limits::MIN_PASSWORD_CHARS, "maxLength": limits::MAX_PASSWORD_CHARS})
}

fn identifier() -> Value {
    json!({"minLength": 1, "maxLength": limits::MAX_IDENTIFIER_CHARS, "pattern": limits::IDENTIFIER_PATTERN})
}

/// A number of a policy section and its range when the section is enabled.
type NumberRange = (&'static str, u64, u64);

/// The request bounds, from `policy::limits`.
pub fn bound(doc: &mut Value) {
    use limits::*;
    let props: Vec<(&str, &str, Value)> = vec![
        ("ProfileInput", "name", line(MAX_PROFILE_NAME_CHARS)),
        (
            "ProfileInput",
            "description",
            json!({"maxLength": MAX_PROFILE_DESCRIPTION_CHARS}),
        ),
        ("ProfileInput", "targets", json!({"maxItems": MAX_CANDIDATES})),
        (
            "ProfileInput",
            "policy",
            json!({
                "type": ["object", "null"],
                "description": "The policy document: a version-1 `PolicyDocument` (what reads return) or a legacy \
                                shape, normalized on write. A `concrete` profile may leave it out (or send null): \
                                its one candidate then gets the interactive defaults."
            }),
        ),
        (
            "CandidateTarget",
            "id",
            json!({"minLength": 1, "maxLength": MAX_CANDIDATE_ID_CHARS}),
        ),
        ("CandidateTarget", "provider_id", identifier()),
        ("CandidateTarget", "model_id", identifier()),
        ("CandidateTarget", "runner", identifier()),
        ("CandidateTarget", "label", text(MAX_LABEL_CHARS)),
        ("CandidateTarget", "script", json!({"maxItems": MAX_SCRIPT_STEPS})),
        (
            "SimulatedStep",
            "after_seconds",
            json!({"minimum": 0, "maximum": MAX_SIMULATED_DELAY_SECONDS}),
        ),
        (
            "ProfileInput",
            "notifications",
            json!({"maxItems": MAX_NOTIFICATION_RULES}),
        ),
        (
            "NotificationRule",
            "events",
            json!({"minItems": 1, "uniqueItems": true}),
        ),
        (
            "NotificationRule",
            "channels",
            json!({"minItems": 1, "maxItems": MAX_RULE_CHANNELS, "uniqueItems": true,
                   "items": {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER_CHARS,
                             "pattern": IDENTIFIER_PATTERN, "examples": [policy::notify::IN_APP_CHANNEL]}}),
        ),
        (
            "NotificationRule",
            "min_wait_seconds",
            json!({"minimum": 0, "maximum": MAX_MAX_WAIT_SECONDS}),
        ),
        ("StartRouteRequest", "profile_id", line(MAX_ID_CHARS)),
        ("StartRouteRequest", "title", text(MAX_TITLE_CHARS)),
        ("StartRouteRequest", "pin", line(MAX_ID_CHARS)),
        ("AccountCreate", "name", account_name()),
        ("AccountCreate", "role", role_name()),
        ("AccountCreate", "password", password()),
        ("AccountPatch", "role", role_name()),
        ("AccountPatch", "password", password()),
        // Signing in answers one 401 for every wrong name or password, so only the lengths any
        // account could have are published.
        (
            "LoginRequest",
            "name",
            json!({"maxLength": MAX_ACCOUNT_NAME_CHARS}),
        ),
        (
            "LoginRequest",
            "password",
            json!({"maxLength": MAX_PASSWORD_CHARS}),
        ),
        ("RoleCreate", "name", account_name()),
        ("RoleCreate", "permissions", json!({"minItems": 1})),
        ("RoleUpdate", "permissions", json!({"minItems": 1})),
        ("TokenCreate", "name", line(MAX_TOKEN_NAME_CHARS)),
        ("TokenCreate", "permissions", json!({"minItems": 1})),
        // `TokenCreate::check`: at least one, each named once, each an id without control
        // characters (absent, not empty, means every profile).
        (
            "TokenCreate",
            "profile_ids",
            json!({
                "minItems": 1,
                "maxItems": MAX_TOKEN_PROFILES,
                "uniqueItems": true,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": TEXT_PATTERN}
            }),
        ),
        (
            "TokenCreate",
            "expires_in_days",
            json!({"minimum": 1, "maximum": MAX_TOKEN_DAYS}),
        ),
        ("Caller", "reference", line(MAX_CALLER_REFERENCE_CHARS)),
        ("Caller", "invocation_id", line(MAX_INVOCATION_ID_CHARS)),
        (
            "Work",
            "prompt",
            json!({"maxItems": MAX_PROMPT_BLOCKS, "items": {
                "type": "object", "required": ["type"], "properties": {"type": {"type": "string"}},
                "description": "An ACP content block, e.g. `{\"type\": \"text\", \"text\": \"Fix the build\"}`."
            }}),
        ),
        (
            "Work",
            "messages",
            json!({"maxItems": MAX_MESSAGES, "items": {
                "type": "object", "required": ["role", "content"],
                "properties": {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": {}}
            }}),
        ),
        (
            "Work",
            "params",
            json!({"propertyNames": {"not": {"enum": policy::input::RESERVED_PARAMS}}}),
        ),
        (
            "Work",
            "cwd",
            json!({"maxLength": MAX_PATH_CHARS, "pattern": PATH_PATTERN}),
        ),
        ("HttpEvidence", "status", json!({"maximum": u16::MAX})),
        ("ClaimRequest", "runner", identifier()),
        (
            "ClaimRequest",
            "lease_seconds",
            json!({"minimum": MIN_LEASE_SECONDS, "maximum": MAX_LEASE_SECONDS}),
        ),
        ("LeaseRenewal", "lease_id", json!({"maxLength": MAX_ID_CHARS})),
        (
            "LeaseRenewal",
            "lease_seconds",
            json!({"minimum": MIN_LEASE_SECONDS, "maximum": MAX_LEASE_SECONDS}),
        ),
        ("RunnerReport", "lease_id", json!({"maxLength": MAX_ID_CHARS})),
        (
            "EvidenceEnvelope",
            "occurred_at",
            json!({"pattern": RFC3339_PATTERN}),
        ),
    ];
    for (name, prop, patch) in props {
        property(doc, name, prop, patch);
    }
    // A policy section that is enabled has its numbers in range; a disabled one stores zeros
    // (the validator's `out_of_range` and `must_be_zero_when_disabled`). Candidate ids are lines.
    let sections: [(&str, Vec<NumberRange>); 2] = [
        (
            "retry",
            vec![
                (
                    "max_retries",
                    u64::from(MIN_MAX_RETRIES),
                    u64::from(MAX_MAX_RETRIES),
                ),
                (
                    "initial_interval_seconds",
                    MIN_INITIAL_INTERVAL_SECONDS,
                    MAX_INITIAL_INTERVAL_SECONDS,
                ),
            ],
        ),
        (
            "wait_for_reset",
            vec![("max_wait_seconds", MIN_MAX_WAIT_SECONDS, MAX_MAX_WAIT_SECONDS)],
        ),
    ];
    // As `if`/`then`/`else`, which client generators read past (a `oneOf` here they cannot).
    for (section, numbers) in sections {
        let mut on = json!({"properties": {}});
        let mut off = json!({"properties": {}});
        for (number, min, max) in numbers {
            on["properties"][number] = json!({"minimum": min, "maximum": max});
            off["properties"][number] = json!({"const": 0});
        }
        merge(
            &mut schema(doc, "ClassPolicy")["properties"][section],
            json!({"if": {"properties": {"enabled": {"const": true}}}, "then": on, "else": off}),
        );
    }
    merge(
        &mut schema(doc, "PolicyDocument")["properties"]["candidates"]["items"]["properties"]["id"],
        line(MAX_CANDIDATE_ID_CHARS),
    );
    // Administration is never scoped: a token with profile ids cannot hold `admin`
    // (`Auth::issue_token`: 422 at `profile_ids`). `null` profile ids are no scope.
    merge(
        schema(doc, "TokenCreate"),
        json!({
            "if": {"required": ["profile_ids"], "properties": {"profile_ids": {"type": "array"}}},
            "then": {"properties": {"permissions": {"not": {"contains": {"const": "admin"}}}}}
        }),
    );
    // Only a caller that runs its attempts (`editor`) pins its route to a candidate
    // (`ValidatedStartRoute`: 422 `unknown_field` at `pin` otherwise).
    merge(
        schema(doc, "StartRouteRequest"),
        json!({
            "if": {"required": ["caller"], "properties": {"caller": {"required": ["kind"],
                   "properties": {"kind": {"const": policy::api::CallerKind::Editor.as_str()}}}}},
            "else": {"properties": {"pin": {"type": "null"}}}
        }),
    );
    // A patch changes something (`AccountPatch::check`: `missing` at the body otherwise).
    merge(schema(doc, "AccountPatch"), json!({"minProperties": 1}));
    // A success carries no envelope; a failure carries one and no result.
    merge(
        schema(doc, "RunnerReport"),
        json!({"oneOf": [
            {"properties": {"outcome": {"enum": ["succeeded"]}, "envelope": {"type": "null"}}},
            {"properties": {"outcome": {"enum": ["failed"]}, "result": {"type": "null"}}, "required": ["envelope"],
             "not": {"properties": {"envelope": {"type": "null"}}}}
        ]}),
    );
    // Evidence over the API names the prompt generation it belongs to (a simulated script's
    // envelope does not: the server fills it in), so its body is `RouteEvidence`: the envelope
    // with `generation` required. A schema of its own rather than an `allOf`, which client
    // generators cannot merge.
    let mut route_evidence = schema(doc, "EvidenceEnvelope").clone();
    route_evidence["description"] = json!(
        "An evidence envelope (contract 1) for a route's current invocation: `generation` (the \
         attempt's invocation generation) is required."
    );
    route_evidence["properties"]["generation"] = json!({
        "type": "integer", "format": "int64", "minimum": 0, "maximum": U64_MAX,
        "description": "The prompt generation the evidence belongs to (the attempt's invocation generation)."
    });
    route_evidence["required"] = json!(["items", "generation"]);
    doc["components"]["schemas"]["RouteEvidence"] = route_evidence;
    doc["paths"]["/api/v1/routes/{id}/evidence"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"] = json!({"$ref": "#/components/schemas/RouteEvidence"});
    // The route list's query, as `api::extract::RouteQuery` reads it.
    if let Some(params) = doc["paths"]["/api/v1/routes"]["get"]["parameters"].as_array_mut() {
        for p in params {
            let schema = match p["name"].as_str() {
                Some("caller_kind") => json!({"$ref": "#/components/schemas/CallerKind"}),
                Some("state") => json!({"$ref": "#/components/schemas/StateName"}),
                Some("caller_reference") => {
                    json!({"type": "string", "maxLength": MAX_CALLER_REFERENCE_CHARS})
                }
                Some("profile_id") => json!({"type": "string", "maxLength": MAX_ID_CHARS}),
                Some("open_only") => json!({"type": "boolean", "default": false}),
                Some("limit") => json!({
                    "type": "integer", "minimum": 1, "maximum": MAX_ROUTE_LIST_LIMIT,
                    "default": DEFAULT_ROUTE_LIST_LIMIT
                }),
                _ => continue,
            };
            p["schema"] = schema;
        }
    }
    // The audit log's page, as `api::extract::AuditQuery` reads it.
    if let Some(params) = doc["paths"]["/api/v1/audit"]["get"]["parameters"].as_array_mut() {
        for p in params {
            match p["name"].as_str() {
                Some("before") => p["schema"] = json!({"type": "integer", "format": "int64"}),
                Some("limit") => {
                    p["schema"] = json!({
                        "type": "integer", "minimum": 1, "maximum": MAX_AUDIT_PAGE, "default": DEFAULT_AUDIT_PAGE
                    })
                }
                _ => {}
            }
        }
    }
    // A notification's `seq` is the databases' signed 64-bit integer.
    schema(doc, "MarkRead")["properties"]["through_seq"] = json!({
        "type": "integer", "format": "int64", "minimum": 0, "maximum": MAX_NOTIFICATION_SEQ,
        "description": "Every notification up to and including this `seq` is read."
    });
    // The notification list's and the deliveries' pages, as `api::extract::NotificationQuery`
    // reads them.
    for path in ["/api/v1/notifications", "/api/v1/notifications/deliveries"] {
        if let Some(params) = doc["paths"][path]["get"]["parameters"].as_array_mut() {
            for p in params {
                match p["name"].as_str() {
                    Some("before") => p["schema"] = json!({"type": "integer", "format": "int64"}),
                    Some("limit") => {
                        p["schema"] = json!({
                            "type": "integer", "minimum": 1, "maximum": MAX_NOTIFICATION_PAGE,
                            "default": DEFAULT_NOTIFICATION_PAGE
                        })
                    }
                    Some("status") => p["schema"] = json!({"$ref": "#/components/schemas/DeliveryStatus"}),
                    _ => {}
                }
            }
        }
    }
    // Whole numbers: in range of the type the server reads them into (`policy::whole`), so a
    // larger one is excluded by the schema rather than refused by the server.
    let schemas = doc["components"]["schemas"].as_object_mut().expect("schemas");
    for s in schemas.values_mut() {
        integer_ranges(s);
    }
}

/// Gives every integer schema without a maximum its type's range (`format` says which type).
fn integer_ranges(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let is_integer = match o.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
                _ => false,
            };
            if is_integer && !o.contains_key("maximum") {
                let unsigned = o.get("minimum").and_then(Value::as_f64) == Some(0.0);
                let max = match (o.get("format").and_then(Value::as_str), unsigned) {
                    (Some("int32"), true) => json!(u32::MAX),
                    (Some("int32"), false) => json!(i32::MAX),
                    (_, true) => json!(U64_MAX),
                    (_, false) => json!(i64::MAX),
                };
                if !unsigned && !o.contains_key("minimum") {
                    let min = if o.get("format").and_then(Value::as_str) == Some("int32") {
                        json!(i32::MIN)
                    } else {
                        json!(i64::MIN)
                    };
                    o.insert("minimum".to_owned(), min);
                }
                o.insert("maximum".to_owned(), max);
            }
            for child in o.values_mut() {
                integer_ranges(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(integer_ranges),
        _ => {}
    }
}
