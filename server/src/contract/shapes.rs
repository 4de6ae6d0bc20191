//! Shapes client generators can name: tagged variants as components, operations under tags.

use serde_json::{json, Map, Value};

/// Each operation under the tag of what it acts on (`/api/v1/<tag>/...`), which generated
/// clients use for their module names.
pub(super) fn tags(doc: &mut Value) {
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
