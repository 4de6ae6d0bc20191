//! The parts of the OpenAPI document that the code's annotations do not say by themselves, put
//! onto the generated document ([`crate::openapi`]) in one place, from the same constants the
//! server enforces:
//!
//! - [`bound`]: the limits and patterns of `policy::limits` on every request property the
//!   server bounds, the request integers' ranges (a whole number out of its type's range is
//!   refused, so the schema says the range), and the shape checks of `policy::input`
//!   (`check_work`) that JSON Schema can state.
//! - [`statuses`]: every status an operation can answer, each with its body's schema (the
//!   shared `ApiError`, or `ValidationErrors` for 422), by the rules the extractors
//!   ([`crate::api`]), the request guard ([`crate::guard`]) and [`crate::failure`] follow.
//! - [`links`]: which operation's response gives the id another operation takes.
//! - [`named_variants`] and `tags`: shapes client generators can name.
//!
//! A request the published schema allows is one the server accepts (or answers 404/409 for,
//! when the thing named is absent or has moved on), and one it refuses the schema excludes. The
//! one exception is a profile write, 422 for rules JSON Schema cannot state (targets repeat the
//! policy's candidate ids in order, ids are unique, a `concrete` profile has one candidate, and
//! the policy may be a legacy shape, so it is an open object there); `schemathesis.toml` says so.
//! Schemathesis checks all this against a running server in `./dev test`;
//! `server/tests/contract.rs` checks the document's shape in `cargo test`.

use policy::limits;
use serde_json::{json, Map, Value};

/// Every request integer's range: the Rust type's, or a tighter one the server enforces.
const U64_MAX: u64 = u64::MAX;

/// The whole post-processing, in order.
pub fn apply(doc: &mut Value) {
    bound(doc);
    statuses(doc);
    links(doc);
    named_variants(doc);
    tags(doc);
}

/// Each operation under the tag of what it acts on (`/api/v1/<tag>/...`), which generated
/// clients use for their module names.
fn tags(doc: &mut Value) {
    for (path, item) in doc["paths"].as_object_mut().expect("paths").iter_mut() {
        let tag = path
            .trim_start_matches("/api/v1/")
            .split('/')
            .next()
            .unwrap_or("api")
            .to_owned();
        for op in item.as_object_mut().expect("path item").values_mut() {
            op["tags"] = json!([tag]);
        }
    }
}

/// Internally tagged enums (`#[serde(tag = "kind")]`, such as `EvidenceItem`) come out of the
/// derive as `oneOf` of inline `allOf`s; client generators (openapi-python-client among them)
/// cannot name those. Each variant becomes a component of its own (`EvidenceItemHttp`: the
/// variant's struct plus its tag), the `oneOf` refers to them, and a `discriminator` maps each
/// tag to its component. The values it allows are the same.
pub fn named_variants(doc: &mut Value) {
    let schemas = doc["components"]["schemas"].as_object_mut().expect("schemas");
    let mut added = Vec::new();
    for (name, schema) in schemas.iter_mut() {
        let Some(arms) = schema.get_mut("oneOf").and_then(Value::as_array_mut) else {
            continue;
        };
        let mut mapping = Map::new();
        let mut tag_name = None;
        for arm in arms.iter_mut() {
            let Some(parts) = arm.get("allOf").and_then(Value::as_array) else {
                continue;
            };
            // The tag part: an object with one required property whose enum has one value.
            let Some((tag, value)) = parts.iter().find_map(|p| {
                let props = p.get("properties")?.as_object()?;
                let (tag, s) = props.iter().next().filter(|_| props.len() == 1)?;
                let value = s.get("enum")?.as_array().filter(|e| e.len() == 1)?[0].as_str()?;
                Some((tag.clone(), value.to_owned()))
            }) else {
                continue;
            };
            let variant = format!("{name}{}", pascal(&value));
            let reference = format!("#/components/schemas/{variant}");
            let mut component = arm.take();
            if let Some(d) = component.get("description").cloned() {
                *arm = json!({"$ref": reference, "description": d});
            } else {
                *arm = json!({"$ref": reference});
            }
            component["title"] = json!(variant);
            mapping.insert(value, json!(reference));
            tag_name = Some(tag);
            added.push((variant, component));
        }
        if let Some(tag) = tag_name {
            schema["discriminator"] = json!({"propertyName": tag, "mapping": mapping});
        }
    }
    for (name, component) in added {
        schemas.insert(name, component);
    }
}

/// `acp_error` -> `AcpError`.
fn pascal(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn schema<'a>(doc: &'a mut Value, name: &str) -> &'a mut Value {
    &mut doc["components"]["schemas"][name]
}

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
        ("StartRouteRequest", "profile_id", line(MAX_ID_CHARS)),
        ("StartRouteRequest", "title", text(MAX_TITLE_CHARS)),
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
const VALIDATING: [&str; 10] = [
    "create_profile",
    "update_profile",
    "list_routes",
    "start_route",
    "submit_evidence",
    "submit_work",
    "claim_dispatch",
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
            if write {
                add(
                    "403",
                    error_response("A browser sent the change from another origin (`foreign_origin`)"),
                );
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
                        "The database could not be read or written; nothing changed (`storage_unavailable`)",
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

/// What follows from a profile: its `id` is the `{id}` of these operations...
pub const PROFILE_LINKS: [&str; 3] = ["get_profile", "update_profile", "delete_profile"];
/// ...and of a route's: these take its `{id}`...
pub const ROUTE_LINKS: [&str; 9] = [
    "get_route",
    "submit_evidence",
    "manual_action",
    "submit_work",
    "complete_route",
    "abandon_route",
    "submit_result",
    "get_result",
    "clear_result",
];
/// ...and these its current generation as `expected_generation` too.
const FENCED: [&str; 4] = ["manual_action", "submit_work", "complete_route", "abandon_route"];

/// OpenAPI links from the operations that give ids (a create's `201`, a list's `200`, whose
/// first item is followed) to those that take them, so generated clients and stateful testers
/// can chain them: a created profile's id is a route start's `profile_id`, a route's generation
/// is a fenced request's `expected_generation`.
pub fn links(doc: &mut Value) {
    let sources = [
        ("/api/v1/profiles", "post", "201", ""),
        ("/api/v1/profiles", "get", "200", "/0"),
        ("/api/v1/routes", "post", "201", ""),
        ("/api/v1/routes", "get", "200", "/0"),
    ];
    for (path, method, status, item) in sources {
        let mut links = Map::new();
        let mut link = |target: &str, body: Option<Value>| {
            let mut l = json!({
                "operationId": target,
                "parameters": {"id": format!("$response.body#{item}/id")},
            });
            if let Some(body) = body {
                l["requestBody"] = body;
                l.as_object_mut().expect("link").remove("parameters");
            }
            links.insert(target.to_owned(), l);
        };
        if path == "/api/v1/profiles" {
            for target in PROFILE_LINKS {
                link(target, None);
            }
            link(
                "start_route",
                Some(json!({"profile_id": format!("$response.body#{item}/id")})),
            );
        } else {
            for target in ROUTE_LINKS {
                link(target, None);
            }
        }
        let mut links = Value::Object(links);
        if path == "/api/v1/routes" {
            for target in FENCED {
                links[target]["requestBody"] =
                    json!({"expected_generation": format!("$response.body#{item}/snapshot/generation")});
            }
        }
        doc["paths"][path][method]["responses"][status]["links"] = links;
    }
    // A lease names the dispatch its runner acknowledges, renews and reports.
    let mut lease = Map::new();
    for target in ["ack_dispatch", "heartbeat_dispatch", "report_dispatch"] {
        lease.insert(
            target.to_owned(),
            json!({
                "operationId": target,
                "parameters": {"route_id": "$response.body#/route_id", "attempt": "$response.body#/attempt"},
                "requestBody": {"lease_id": "$response.body#/lease_id"},
            }),
        );
    }
    doc["paths"]["/api/v1/dispatches/claim"]["post"]["responses"]["200"]["links"] = Value::Object(lease);
}
