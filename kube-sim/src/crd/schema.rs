//! The structural-schema checks kube-apiserver makes of a custom object: pruning of unknown fields, then
//! type, enum, bounds and required checks, in its wording (`spec.host in body must be of type string`).
//!
//! Not checked (a documented difference): `oneOf`/`anyOf`/`not`, patterns, formats, lengths and CEL rules.

use serde_json::{Map, Value};

/// What checking an object found; the object itself is pruned in place.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Outcome {
    /// (field path, detail) as field.Error prints them.
    pub(crate) errors: Vec<(String, String)>,
    /// Paths of the pruned fields (`spec.foo`).
    pub(crate) unknown: Vec<String>,
}

/// Checks `obj` against the version's `openAPIV3Schema`. `apiVersion`, `kind` and `metadata` are the
/// server's (ObjectMeta is checked by the metadata rules), so only the rest of the root is walked.
pub(crate) fn check(schema: &Value, obj: &mut Value) -> Outcome {
    let mut out = Outcome::default();
    let Some(root) = obj.as_object_mut() else {
        return out;
    };
    let props = &schema["properties"];
    let preserve = preserves(schema);
    let keys: Vec<String> = root.keys().cloned().collect();
    for key in keys {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match props.get(&key) {
            Some(sub) => {
                if let Some(v) = root.get_mut(&key) {
                    if v.is_null() && !nullable(sub) {
                        root.remove(&key);
                        continue;
                    }
                    walk(sub, v, &key, &mut out);
                }
            }
            None if preserve => {}
            None => {
                root.remove(&key);
                out.unknown.push(key);
            }
        }
    }
    required(schema, root, "", &mut out);
    out
}

fn preserves(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
}

fn nullable(schema: &Value) -> bool {
    schema["nullable"] == true
}

/// The JSON type name kube-openapi reports for a value.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// Go's `%q`-like printing of a value in `Invalid value:` and `Unsupported value:`.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn walk(schema: &Value, v: &mut Value, path: &str, out: &mut Outcome) {
    if v.is_null() && nullable(schema) {
        return;
    }
    let actual = type_of(v);
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if int_or_string {
        if !matches!(actual, "integer" | "string") {
            out.errors.push((
                path.to_string(),
                format!(
                    "Invalid value: \"{actual}\": {path} in body must be of type integer,string: \"{actual}\""
                ),
            ));
            return;
        }
    } else if let Some(want) = schema["type"].as_str() {
        let fits = want == actual || (want == "number" && actual == "integer");
        if !fits {
            out.errors.push((
                path.to_string(),
                format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\""),
            ));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(shown).collect();
        out.errors.push((
            path.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                shown(v),
                list.join(", ")
            ),
        ));
    }
    if let Some(n) = v.as_f64() {
        bounds(schema, n, v, path, out);
    }
    match v {
        Value::Object(map) => object(schema, map, path, out),
        Value::Array(items) if schema["items"].is_object() => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(&schema["items"], item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn bounds(schema: &Value, n: f64, v: &Value, path: &str, out: &mut Outcome) {
    if let Some(max) = schema["maximum"].as_f64()
        && n > max
    {
        out.errors.push((
            path.to_string(),
            format!(
                "Invalid value: {v}: {path} in body should be less than or equal to {}",
                schema["maximum"]
            ),
        ));
    }
    if let Some(min) = schema["minimum"].as_f64()
        && n < min
    {
        out.errors.push((
            path.to_string(),
            format!(
                "Invalid value: {v}: {path} in body should be greater than or equal to {}",
                schema["minimum"]
            ),
        ));
    }
}

fn object(schema: &Value, map: &mut Map<String, Value>, path: &str, out: &mut Outcome) {
    let props = schema["properties"].as_object();
    let additional = schema["additionalProperties"]
        .is_object()
        .then(|| &schema["additionalProperties"]);
    let preserve = preserves(schema) || schema["additionalProperties"] == true;
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let sub = props.and_then(|p| p.get(&key)).or(additional);
        let field = join(path, &key);
        match sub {
            Some(sub) => {
                if let Some(v) = map.get_mut(&key) {
                    if v.is_null() && !nullable(sub) {
                        map.remove(&key);
                        continue;
                    }
                    walk(sub, v, &field, out);
                }
            }
            // A schema that says nothing about the fields (no properties at all, typeless) keeps them.
            None if preserve || (props.is_none() && schema["type"].is_null()) => {}
            None => {
                map.remove(&key);
                out.unknown.push(field);
            }
        }
    }
    required(schema, map, path, out);
}

fn required(schema: &Value, map: &Map<String, Value>, path: &str, out: &mut Outcome) {
    for field in schema["required"].as_array().into_iter().flatten() {
        if let Some(f) = field.as_str()
            && !map.contains_key(f)
        {
            out.errors.push((join(path, f), "Required value".to_string()));
        }
    }
}
