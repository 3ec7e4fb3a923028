//! The structural-schema checks kube-apiserver makes of a custom object: pruning of unknown fields, then
//! type, enum, required, the value validations ([`super::values`]) and `oneOf`/`anyOf`/`allOf`/`not`, in
//! its wording (`spec.host in body must be of type string`). The CEL rules are [`super::rules`].

use serde_json::{Map, Value};

use super::values::{self, push};

/// What checking an object found; the object itself is pruned in place.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Outcome {
    /// (field path, detail) as field.Error prints them.
    pub(crate) errors: Vec<(String, String)>,
    /// Paths of the pruned fields (`spec.foo`).
    pub(crate) unknown: Vec<String>,
    /// An error of a kind that keeps the CEL rules from running (see [`values::push`]).
    pub(crate) blocked: bool,
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
pub(super) fn shown(v: &Value) -> String {
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
            let detail = format!(
                "Invalid value: \"{actual}\": {path} in body must be of type integer,string: \"{actual}\""
            );
            push(out, path, detail, true);
            return;
        }
    } else if let Some(want) = schema["type"].as_str() {
        let fits = want == actual || (want == "number" && actual == "integer");
        if !fits {
            let detail =
                format!("Invalid value: \"{actual}\": {path} in body must be of type {want}: \"{actual}\"");
            push(out, path, detail, true);
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(shown).collect();
        let detail = format!(
            "Unsupported value: {}: supported values: {}",
            shown(v),
            list.join(", ")
        );
        push(out, path, detail, true);
    }
    if let Some(n) = v.as_f64() {
        values::bounds(schema, n, v, path, out);
    }
    if let Value::String(s) = v {
        values::string(schema, s, path, out);
    }
    values::counts(schema, v, path, out);
    alternatives(schema, v, path, out);
    match v {
        Value::Object(map) => object(schema, map, path, out),
        Value::Array(items) => {
            values::list_type(schema, items, path, out);
            if schema["items"].is_object() {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(&schema["items"], item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// What checking `v` against one alternative of `oneOf`/`anyOf`/`allOf`/`not` finds (on a copy: an
/// alternative prunes nothing).
fn alternative(schema: &Value, v: &Value, path: &str) -> Outcome {
    let mut out = Outcome::default();
    walk(schema, &mut v.clone(), path, &mut out);
    out
}

/// `oneOf`, `anyOf`, `allOf` and `not`: kube-openapi reports the composition at `<nil>` naming the
/// field, then (when none fits) what the first alternative found.
fn alternatives(schema: &Value, v: &Value, path: &str, out: &mut Outcome) {
    let merge = |out: &mut Outcome, found: Outcome| {
        out.errors.extend(found.errors);
        out.blocked |= found.blocked;
    };
    let composite = |out: &mut Outcome, why: String| {
        out.errors
            .push(("<nil>".into(), format!("Invalid value: \"\": \"{path}\" {why}")));
    };
    if let Some(alts) = schema["oneOf"].as_array().filter(|a| !a.is_empty()) {
        let mut found: Vec<Outcome> = alts.iter().map(|a| alternative(a, v, path)).collect();
        match found.iter().filter(|o| o.errors.is_empty()).count() {
            1 => {}
            0 => {
                composite(
                    out,
                    "must validate one and only one schema (oneOf). Found none valid".into(),
                );
                merge(out, found.swap_remove(0));
            }
            n => composite(
                out,
                format!("must validate one and only one schema (oneOf). Found {n} valid alternatives"),
            ),
        }
    }
    if let Some(alts) = schema["anyOf"].as_array().filter(|a| !a.is_empty()) {
        let mut found: Vec<Outcome> = alts.iter().map(|a| alternative(a, v, path)).collect();
        if !found.iter().any(|o| o.errors.is_empty()) {
            composite(out, "must validate at least one schema (anyOf)".into());
            merge(out, found.swap_remove(0));
        }
    }
    for alt in schema["allOf"].as_array().into_iter().flatten() {
        merge(out, alternative(alt, v, path));
    }
    if schema["not"].is_object() && alternative(&schema["not"], v, path).errors.is_empty() {
        composite(out, "must not validate the schema (not)".into());
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
            push(out, &join(path, f), "Required value".to_string(), true);
        }
    }
}
