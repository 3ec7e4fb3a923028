//! Strategic merge patch for the built-in kinds: lists merge by key, `$patch`, `$retainKeys`,
//! `$setElementOrder` and `$deleteFromPrimitiveList` directives, as kubectl's patches rely on.

use serde_json::{Map, Value};

use super::error::Error;

/// The merge key of a list field, given the field that holds the enclosing object (from the Go types'
/// `patchMergeKey` tags); `None` means the list is replaced whole.
fn merge_key(field: &str, parent: &str) -> Option<&'static str> {
    match (field, parent) {
        (
            "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "imagePullSecrets" | "env",
            _,
        ) => Some("name"),
        ("resourceClaims", _) => Some("name"),
        ("ports", "containers" | "initContainers" | "ephemeralContainers") => Some("containerPort"),
        ("ports", "spec") => Some("port"),
        ("volumeMounts", _) => Some("mountPath"),
        ("volumeDevices", _) => Some("devicePath"),
        ("conditions", _) => Some("type"),
        ("ownerReferences", _) => Some("uid"),
        ("hostAliases" | "podIPs" | "hostIPs", _) => Some("ip"),
        ("topologySpreadConstraints", _) => Some("topologyKey"),
        ("addresses", "status") => Some("type"),
        _ => None,
    }
}

/// Lists of scalars that merge as sets instead of being replaced.
fn merges_as_set(field: &str) -> bool {
    field == "finalizers"
}

const SET_ORDER: &str = "$setElementOrder/";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to an object.
pub(crate) fn merge(original: &Value, patch: &Value) -> Result<Value, Error> {
    let (Value::Object(orig), Value::Object(patch)) = (original, patch) else {
        return Err(Error::BadRequest(
            "a strategic merge patch must be a JSON object".into(),
        ));
    };
    let mut out = orig.clone();
    merge_map(&mut out, patch, "")?;
    Ok(Value::Object(out))
}

fn directive(v: &Value) -> Option<&str> {
    v.get("$patch").and_then(Value::as_str)
}

fn bad_directive(d: &str) -> Error {
    Error::BadRequest(format!(
        "unknown patch directive {d:?}: want replace, merge or delete"
    ))
}

/// Merges `patch` into `orig`; `ctx` is the field holding this map (for merge-key lookup).
fn merge_map(orig: &mut Map<String, Value>, patch: &Map<String, Value>, ctx: &str) -> Result<(), Error> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            orig.clear();
            return merge_map(orig, &without(patch, "$patch"), ctx);
        }
        Some("merge") | None => {}
        Some(d) => return Err(bad_directive(d)),
    }
    let mut orders = Vec::new();
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix(SET_ORDER) {
            orders.push((field, v));
        } else if let Some(field) = k.strip_prefix(DELETE_FROM) {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (orig.get_mut(field), v) {
                list.retain(|item| !gone.contains(item));
            }
        } else if k == "$patch" || k == "$retainKeys" {
            continue;
        } else if v.is_null() {
            orig.remove(k);
        } else if let Value::Object(pm) = v {
            match directive(v) {
                Some("delete") => {
                    orig.remove(k);
                }
                _ => {
                    let target = orig.entry(k.clone()).or_insert_with(|| Value::Object(Map::new()));
                    if !target.is_object() {
                        *target = Value::Object(Map::new());
                    }
                    if let Value::Object(tm) = target {
                        merge_map(tm, pm, k)?;
                    }
                }
            }
        } else if let Value::Array(pl) = v {
            let merged = merge_list(orig.get(k), pl, k, ctx)?;
            orig.insert(k.clone(), Value::Array(merged));
        } else {
            orig.insert(k.clone(), v.clone());
        }
    }
    for (field, order) in orders {
        if let (Some(Value::Array(list)), Value::Array(order)) = (orig.get_mut(field), order) {
            reorder(list, order, merge_key(field, ctx));
        }
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        orig.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k)));
    }
    Ok(())
}

fn without(m: &Map<String, Value>, key: &str) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| *k != key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A fresh element from a patch: merged onto nothing, which drops directives and nulls.
fn fresh(v: &Value, field: &str) -> Result<Value, Error> {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            merge_map(&mut out, m, field)?;
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn merge_list(orig: Option<&Value>, patch: &[Value], field: &str, ctx: &str) -> Result<Vec<Value>, Error> {
    let items = || {
        patch
            .iter()
            .filter(|v| directive(v).is_none_or(|d| d != "replace"))
    };
    if patch.iter().any(|v| directive(v) == Some("replace")) {
        return items().map(|v| fresh(v, field)).collect();
    }
    let orig: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    match merge_key(field, ctx) {
        Some(mk) if patch.iter().all(Value::is_object) => {
            let mut out = orig;
            for pe in patch {
                let key = &pe[mk];
                match directive(pe) {
                    Some("delete") => out.retain(|e| e[mk] != *key),
                    Some("merge") | None => match out.iter_mut().find(|e| e[mk] == *key) {
                        Some(Value::Object(existing)) => {
                            merge_map(existing, pe.as_object().unwrap_or(&Map::new()), field)?
                        }
                        _ => out.push(fresh(pe, field)?),
                    },
                    Some(d) => return Err(bad_directive(d)),
                }
            }
            Ok(out)
        }
        _ if merges_as_set(field) => {
            let mut out = orig;
            for v in patch {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Ok(out)
        }
        _ => patch.iter().map(|v| fresh(v, field)).collect(),
    }
}

/// `$setElementOrder`: listed elements first, in the given order; others keep their relative order after.
fn reorder(list: &mut [Value], order: &[Value], mk: Option<&str>) {
    let position = |e: &Value| {
        order.iter().position(|o| match mk {
            Some(mk) => o[mk] == e[mk],
            None => o == e,
        })
    };
    list.sort_by_key(|e| position(e).unwrap_or(usize::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_cases() {
        let pod = json!({
            "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [
                {"name": "app", "image": "v1", "ports": [{"containerPort": 80, "name": "http"}]},
                {"name": "side", "image": "s1"},
            ]},
        });
        let cases = [
            (
                json!({"metadata": {"labels": {"b": null, "c": "3"}}}),
                json!({"a": "1", "c": "3"}),
                "/metadata/labels",
            ),
            (
                json!({"spec": {"containers": [{"name": "app", "image": "v2"}]}}),
                json!("v2"),
                "/spec/containers/0/image",
            ),
            (
                json!({"spec": {"containers": [{"name": "app", "image": "v2"}]}}),
                json!("side"),
                "/spec/containers/1/name",
            ),
            (
                json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}),
                Value::Null,
                "/spec/containers/1",
            ),
            (
                json!({"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 81}]}]}}),
                json!(81),
                "/spec/containers/0/ports/1/containerPort",
            ),
            (
                json!({"spec": {"containers": [{"name": "new"}, {"$patch": "replace"}]}}),
                json!([{"name": "new"}]),
                "/spec/containers",
            ),
            (
                json!({"metadata": {"finalizers": ["y"]}}),
                json!(["x", "y"]),
                "/metadata/finalizers",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
                json!([]),
                "/metadata/finalizers",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}}),
                json!("side"),
                "/spec/containers/0/name",
            ),
            (
                json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}),
                json!({"z": "9"}),
                "/metadata/labels",
            ),
            (
                json!({"metadata": {"$retainKeys": ["labels"]}}),
                json!({"labels": {"a": "1", "b": "2"}}),
                "/metadata",
            ),
        ];
        for (patch, want, pointer) in cases {
            let got = merge(&pod, &patch).unwrap();
            assert_eq!(
                got.pointer(pointer).cloned().unwrap_or(Value::Null),
                want,
                "patch {patch}"
            );
        }
    }

    #[test]
    fn service_ports_merge_by_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}});
        let got = merge(
            &svc,
            &json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}}),
        )
        .unwrap();
        assert_eq!(
            got["spec"]["ports"][1],
            json!({"port": 443, "name": "https", "targetPort": 8443})
        );
        assert_eq!(got["spec"]["ports"].as_array().map(Vec::len), Some(2));
    }
}
