use serde_json::{Value, json};

use super::*;
use crate::kinds;

fn kind(api_version: &str, k: &str) -> &'static Kind {
    kinds::by_type(api_version, k).unwrap()
}

fn writer(m: &str) -> Writer {
    Writer {
        manager: m.into(),
        subresource: None,
    }
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
}

#[test]
fn apply_then_drop_a_field_removes_it() {
    let k = kind("v1", "ConfigMap");
    let first = apply(k, None, &cm(json!({"a": "1", "b": "2"})), &writer("m"), false).unwrap();
    assert_eq!(managers(&first), [("m".into(), "Apply".into())]);
    assert_eq!(
        first["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );
    let second = apply(k, Some(&first), &cm(json!({"a": "1"})), &writer("m"), false).unwrap();
    assert_eq!(second["data"], json!({"a": "1"}));
    // Dropping every key removes the now-empty map too.
    let third = apply(k, Some(&second), &cm(json!(null)), &writer("m"), false).unwrap();
    assert!(third.get("data").is_none(), "{third}");
}

#[test]
fn a_field_another_applier_owns_stays() {
    let k = kind("v1", "ConfigMap");
    let one = apply(k, None, &cm(json!({"a": "1", "b": "2"})), &writer("m1"), false).unwrap();
    let two = apply(k, Some(&one), &cm(json!({"a": "1"})), &writer("m2"), false).unwrap();
    assert_eq!(managers(&two).len(), 2, "shared ownership of .data.a");
    let three = apply(k, Some(&two), &cm(json!({"b": "2"})), &writer("m1"), false).unwrap();
    assert_eq!(
        three["data"],
        json!({"a": "1", "b": "2"}),
        "m2 still owns .data.a"
    );
}

#[test]
fn conflicts_and_force() {
    let k = kind("v1", "ConfigMap");
    let one = apply(k, None, &cm(json!({"a": "1", "b": "1"})), &writer("m1"), false).unwrap();
    // Same value: no conflict, shared ownership.
    apply(k, Some(&one), &cm(json!({"a": "1"})), &writer("m2"), false).unwrap();
    let err = apply(k, Some(&one), &cm(json!({"a": "2"})), &writer("m2"), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"m1\": .data.a"
    );
    let status = err.to_status();
    assert_eq!(
        (status["code"].as_u64(), status["reason"].as_str()),
        (Some(409), Some("Conflict"))
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"type": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".data.a"}])
    );
    let err = apply(
        k,
        Some(&one),
        &cm(json!({"a": "2", "b": "2"})),
        &writer("m2"),
        false,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .data.a\n- .data.b"
    );
    let forced = apply(k, Some(&one), &cm(json!({"a": "2"})), &writer("m2"), true).unwrap();
    assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
    let m1 = &forced["metadata"]["managedFields"][0];
    assert_eq!(
        (m1["manager"].as_str(), &m1["fieldsV1"]),
        (Some("m1"), &json!({"f:data": {"f:b": {}}}))
    );
}

#[test]
fn updates_take_ownership_and_conflict_with_appliers() {
    let k = kind("apps/v1", "Deployment");
    let dep = |replicas: i64| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
               "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}}})
    };
    let mut created = dep(1);
    track_update(k, None, &mut created, &writer("kubectl-create"));
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(entry["operation"], "Update");
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(
        entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"],
        json!({".": {}, "f:image": {}, "f:name": {}})
    );
    let err = apply(k, Some(&created), &dep(3), &writer("kubectl"), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Apply failed with 1 conflict: conflict with \"kubectl-create\" using apps/v1: .spec.replicas"
    );
    let applied = apply(k, Some(&created), &dep(3), &writer("kubectl"), true).unwrap();
    // An update of the replicas takes them back from the applier.
    let mut scaled = applied.clone();
    scaled["spec"]["replicas"] = json!(5);
    track_update(k, Some(&applied), &mut scaled, &writer("kubectl-scale"));
    let err = apply(k, Some(&scaled), &dep(3), &writer("kubectl"), false).unwrap_err();
    assert!(
        err.to_string()
            .contains("conflict with \"kubectl-scale\" using apps/v1: .spec.replicas"),
        "{err}"
    );
}

#[test]
fn status_is_tracked_apart() {
    let k = kind("apps/v1", "Deployment");
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
                      "spec": {"replicas": 1}, "status": {}});
    let applied = apply(
        k,
        Some(&live),
        &json!({"spec": {"replicas": 1}, "status": {"replicas": 9}}),
        &writer("m"),
        false,
    )
    .unwrap();
    assert_eq!(
        applied["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    let mut with_status = applied.clone();
    with_status["status"] = json!({"replicas": 1});
    let status_writer = Writer {
        manager: "ctrl".into(),
        subresource: Some("status"),
    };
    track_update(k, Some(&applied), &mut with_status, &status_writer);
    let entries = managed::decode(with_status["metadata"].get("managedFields")).unwrap();
    let ctrl = entries.iter().find(|e| e.manager == "ctrl").unwrap();
    assert_eq!(
        (ctrl.subresource.as_str(), ctrl.set.to_fields()),
        ("status", json!({"f:status": {"f:replicas": {}}}))
    );
}

#[test]
fn requested_managed_fields() {
    let k = kind("v1", "ConfigMap");
    let live = apply(k, None, &cm(json!({"a": "1"})), &writer("m"), false).unwrap();
    // Reset: managedFields go away, and later updates are not tracked.
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    track_update(k, Some(&live), &mut reset, &writer("u"));
    assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
    let mut later = reset.clone();
    later["data"]["a"] = json!("2");
    track_update(k, Some(&reset), &mut later, &writer("u"));
    assert!(later["metadata"].get("managedFields").is_none());
    // Invalid managedFields in a request fall back to the live ones.
    let mut invalid = live.clone();
    invalid["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Nope"}]);
    invalid["data"]["b"] = json!("2");
    track_update(k, Some(&live), &mut invalid, &writer("u"));
    assert_eq!(
        managers(&invalid),
        [("m".into(), "Apply".into()), ("u".into(), "Update".into())]
    );
    // A no-op update adds no entry.
    let mut same = live.clone();
    track_update(k, Some(&live), &mut same, &writer("u"));
    assert_eq!(same, live);
}

#[test]
fn kubectl_server_side_takes_over_from_client_side_apply() {
    let k = kind("v1", "ConfigMap");
    let last = r#"{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"c","namespace":"default"}}"#;
    let mut live = cm(json!({"a": "1"}));
    live["metadata"]["annotations"] = json!({LAST_APPLIED: format!("{last}\n")});
    track_update(k, None, &mut live, &writer("kubectl-client-side-apply"));
    // Another manager conflicts as usual; `kubectl` may take the annotation's fields.
    assert!(apply(k, Some(&live), &cm(json!({"a": "2"})), &writer("other"), false).is_err());
    let upgraded = apply(k, Some(&live), &cm(json!({"a": "2"})), &writer(KUBECTL), false).unwrap();
    assert_eq!(upgraded["data"]["a"], "2");
    // The client-side applier keeps the annotation it wrote and the `data` map itself (`.` when created).
    let entries = managed::decode(upgraded["metadata"].get("managedFields")).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[1].set.to_fields(),
        json!({"f:data": {}, "f:metadata": {"f:annotations": {".": {}, format!("f:{LAST_APPLIED}"): {}}}})
    );
    let annotation = upgraded["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap();
    let synced: Value = serde_json::from_str(annotation).unwrap();
    assert_eq!(synced["data"]["a"], "2");
    assert!(annotation.ends_with('\n'));
}
