//! Object-metadata helpers the workload controllers share: controller owner references, label
//! selectors, condition lists.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::{
    object::{now_secs, rfc3339},
    selector::LabelSelector,
};

/// The owner reference a controller puts on what it creates.
pub(super) fn owner_ref(api_version: &str, kind: &str, owner: &Value) -> Value {
    json!([{
        "apiVersion": api_version, "kind": kind,
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true,
    }])
}

/// The (kind, name, uid) of an object's controller, if it has one.
pub(super) fn controller_of(obj: &Value) -> Option<(&str, &str, &str)> {
    obj["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default(),
                r["name"].as_str().unwrap_or_default(),
                r["uid"].as_str().unwrap_or_default(),
            )
        })
}

/// Whether `obj` is controlled by the object with `uid`.
pub(super) fn controlled_by(obj: &Value, uid: &str) -> bool {
    controller_of(obj).is_some_and(|(_, _, u)| u == uid)
}

/// A `metav1.LabelSelector` (matchLabels and matchExpressions) against `labels`, as
/// [`LabelSelector::from_api`] reads it.
pub(super) fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    LabelSelector::from_api(selector).is_some_and(|s| s.matches(labels))
}

/// A Service's `spec.selector` (a plain map): `None` when the Service has none.
pub(super) fn map_selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> Option<bool> {
    let map = selector.as_object().filter(|m| !m.is_empty())?;
    Some(
        map.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str()),
    )
}

/// A `metadata.labels`-style map of an arbitrary JSON value.
pub(super) fn labels_of(map: &Value) -> BTreeMap<String, String> {
    map.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Sets a condition in a status `conditions` list, keeping its transition time when its status is
/// unchanged and its update time when nothing changed, as controllers do. `update_time` adds
/// `lastUpdateTime` (Deployments); `lastProbeTime: null` is what pods carry.
pub(super) fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<&str>,
    update_time: bool,
) {
    let now = json!(rfc3339(now_secs()));
    let status = if status { "True" } else { "False" };
    let old = conditions.iter().position(|c| c["type"] == kind);
    let prev = old.map(|i| conditions[i].clone());
    let mut c = json!({"type": kind, "status": status});
    if update_time {
        let same = prev.as_ref().is_some_and(|p| {
            p["status"] == status && p["reason"] == json!(reason) && p["message"] == json!(message)
        });
        c["lastUpdateTime"] = if same {
            prev.as_ref()
                .map(|p| p["lastUpdateTime"].clone())
                .unwrap_or(now.clone())
        } else {
            now.clone()
        };
    } else {
        c["lastProbeTime"] = Value::Null;
    }
    c["lastTransitionTime"] = match &prev {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => now,
    };
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    match old {
        Some(i) => conditions[i] = c,
        None => conditions.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn service_selectors_are_plain_maps() {
        let l = labels(&[("app", "web"), ("tier", "fe")]);
        assert_eq!(map_selector_matches(&json!({}), &l), None);
        assert_eq!(map_selector_matches(&json!({"app": "web"}), &l), Some(true));
        assert_eq!(map_selector_matches(&json!({"app": "x"}), &l), Some(false));
    }

    #[test]
    fn conditions_keep_transition_times_while_status_holds() {
        let mut list = vec![
            json!({"type": "Ready", "status": "True", "lastTransitionTime": "t0", "lastProbeTime": null}),
        ];
        set_condition(&mut list, "Ready", true, None, None, false);
        assert_eq!(list[0]["lastTransitionTime"], "t0");
        set_condition(&mut list, "Ready", false, Some("ContainersNotReady"), None, false);
        assert_ne!(list[0]["lastTransitionTime"], "t0");
        assert_eq!(list[0]["reason"], "ContainersNotReady");
        set_condition(&mut list, "PodScheduled", true, None, None, false);
        assert_eq!(list.len(), 2);
    }
}
