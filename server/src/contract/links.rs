//! OpenAPI links: which response gives the id (and generation, and lease) another operation takes.

use serde_json::{json, Map, Value};

/// What follows from a profile: its `id` is the `{id}` of these operations...
pub const PROFILE_LINKS: [&str; 3] = ["get_profile", "update_profile", "delete_profile"];
/// ...and of a route's: these take its `{id}`...
pub const ROUTE_LINKS: [&str; 10] = [
    "get_route",
    "submit_evidence",
    "manual_action",
    "submit_work",
    "complete_route",
    "abandon_route",
    "submit_result",
    "get_result",
    "clear_result",
    "claim_route",
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
    // A made account's id is the one its changes take; a made role's name, those of the role's.
    let made = [
        ("/api/v1/accounts", "id", &["update_account"][..]),
        ("/api/v1/roles", "name", &["update_role", "delete_role"][..]),
    ];
    for (path, key, targets) in made {
        let links: Map<String, Value> = targets
            .iter()
            .map(|&target| {
                let link = json!({
                    "operationId": target,
                    "parameters": {key: format!("$response.body#/{key}")},
                });
                (target.to_owned(), link)
            })
            .collect();
        doc["paths"][path]["post"]["responses"]["201"]["links"] = Value::Object(links);
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
    doc["paths"]["/api/v1/dispatches/claim"]["post"]["responses"]["200"]["links"] =
        Value::Object(lease.clone());
    doc["paths"]["/api/v1/routes/{id}/claim"]["post"]["responses"]["200"]["links"] = Value::Object(lease);
}
