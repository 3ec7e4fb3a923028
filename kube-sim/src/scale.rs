//! The `/scale` subresource (autoscaling/v1 Scale) of Deployments and ReplicaSets: `kubectl scale`
//! PATCHes it; reads report the replicas and the label selector, writes change `spec.replicas`.

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::Kind;
use super::object::Key;
use super::patch::{self, PatchType};
use super::store::Store;
use super::write::{self, StatusMode, Track, WriteOpts};

/// The Scale view of a workload.
pub(crate) fn scale_of(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_u64().unwrap_or(0)},
        "status": {
            "replicas": obj["status"]["replicas"].as_u64().unwrap_or(0),
            "selector": selector_string(&obj["spec"]["selector"]),
        },
    })
}

/// A LabelSelector in its string form (`app=web,tier in (a,b)`).
fn selector_string(selector: &Value) -> String {
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for e in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        parts.push(match e["operator"].as_str() {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("DoesNotExist") => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    parts.sort();
    parts.join(",")
}

/// PUT (`patch` = None, `body` is a Scale) or PATCH of the Scale; returns the new Scale.
pub(crate) fn write(
    store: &Store,
    kind: &'static Kind,
    key: &Key,
    body: &Value,
    patch_type: Option<PatchType>,
    dry_run: bool,
) -> Result<Value, Error> {
    let opts = WriteOpts {
        dry_run,
        status: StatusMode::Ignore,
        track: Track::None,
        fields: crate::typed::FieldCheck::new(crate::typed::FieldValidation::Ignore),
    };
    let stored = write::update(store, kind, key, &opts, |cur| {
        let scale = scale_of(cur);
        let wanted = match patch_type {
            Some(t) => patch::apply("Scale", &key.1, t, &scale, body)?,
            None => body.clone(),
        };
        let rv = wanted["metadata"]["resourceVersion"]
            .as_str()
            .filter(|rv| !rv.is_empty());
        if rv.is_some_and(|rv| Some(rv) != cur["metadata"]["resourceVersion"].as_str()) {
            return Err(Error::Conflict {
                resource: kind.qualified_plural(),
                name: key.1.clone(),
                detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
            });
        }
        let replicas = match &wanted["spec"]["replicas"] {
            Value::Null => 0,
            v => v
                .as_i64()
                .filter(|r| *r >= 0 && *r <= i64::from(i32::MAX))
                .ok_or_else(|| {
                    Error::invalid(
                        "Scale",
                        &key.1,
                        "spec.replicas",
                        format!("Invalid value: {v}: must be greater than or equal to 0"),
                    )
                })?,
        };
        let mut next = cur.clone();
        next["spec"]["replicas"] = json!(replicas);
        Ok(next)
    })?;
    Ok(scale_of(&stored.value()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_reports_replicas_and_selector() {
        let d = json!({"metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "a": "b"},
                "matchExpressions": [{"key": "t", "operator": "In", "values": ["y", "x"]}]}},
            "status": {"replicas": 2}});
        let s = scale_of(&d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(
            s["status"],
            json!({"replicas": 2, "selector": "a=b,app=web,t in (x,y)"})
        );
        assert_eq!(s["metadata"]["resourceVersion"], "7");
    }
}
