//! Server-side apply through kube-rs: managedFields on every write, pruning of dropped fields, conflicts
//! between managers (409 with causes), `force`, and the status subresource tracked apart.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube_sim::testing::{raw, start, status_of};
use serde_json::{Value, json};

fn managers(meta: &ObjectMeta) -> Vec<(String, String)> {
    meta.managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data})
}

#[tokio::test]
async fn apply_creates_then_prunes_what_the_manager_dropped() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    let body = serde_json::to_vec(&cm(json!({"a": "1", "b": "2"}))).unwrap();
    let (code, created) = raw(
        &sim.client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cfg?fieldManager=mgr",
        "application/apply-patch+yaml",
        body,
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let entry = &created["metadata"]["managedFields"][0];
    assert_eq!(
        (&entry["manager"], &entry["operation"]),
        (&json!("mgr"), &json!("Apply"))
    );
    assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}}));
    assert!(entry["time"].is_string());

    let pp = PatchParams::apply("mgr");
    let again = api
        .patch("cfg", &pp, &Patch::Apply(cm(json!({"a": "1"}))))
        .await
        .unwrap();
    assert_eq!(again.data.unwrap().keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(managers(&again.metadata), [("mgr".into(), "Apply".into())]);
}

#[tokio::test]
async fn second_manager_conflicts_until_forced() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    api.patch(
        "cfg",
        &PatchParams::apply("one"),
        &Patch::Apply(cm(json!({"a": "1", "b": "1"}))),
    )
    .await
    .unwrap();
    let status = status_of(
        api.patch(
            "cfg",
            &PatchParams::apply("two"),
            &Patch::Apply(cm(json!({"a": "2"}))),
        )
        .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.a"
    );
    let (code, body) = raw(
        &sim.client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cfg?fieldManager=two",
        "application/apply-patch+yaml",
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '2'}\n".to_vec(),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        body["details"]["causes"],
        json!([{"type": "FieldManagerConflict", "message": "conflict with \"one\"", "field": ".data.a"}])
    );

    let forced = api
        .patch(
            "cfg",
            &PatchParams::apply("two").force(),
            &Patch::Apply(cm(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "2");
    let fields: Vec<(String, Value)> = forced
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            (
                e.manager.clone().unwrap(),
                serde_json::to_value(&e.fields_v1).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("one".into(), json!({"f:data": {"f:b": {}}})),
            ("two".into(), json!({"f:data": {"f:a": {}}})),
        ]
    );
    // "one" no longer owns .data.a: dropping it leaves the value alone.
    let after = api
        .patch(
            "cfg",
            &PatchParams::apply("one"),
            &Patch::Apply(cm(json!({"b": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(after.data.unwrap()["a"], "2");
}

#[tokio::test]
async fn updates_own_what_they_change() {
    let sim = start().await;
    let api: Api<Deployment> = Api::namespaced(sim.client.clone(), "default");
    let dep = |replicas: i64| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}})
    };
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..PostParams::default()
    };
    let created = api
        .create(&pp, &serde_json::from_value(dep(1)).unwrap())
        .await
        .unwrap();
    assert_eq!(managers(&created.metadata), [("creator".into(), "Update".into())]);
    let fields =
        serde_json::to_value(&created.metadata.managed_fields.as_ref().unwrap()[0].fields_v1).unwrap();
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["f:ports"],
        // An added list is itself owned (`.`), as in the real server's Update entries; so are the
        // fields defaulting filled in (`protocol`).
        json!({".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}})
    );
    let status = status_of(
        api.patch("web", &PatchParams::apply("applier"), &Patch::Apply(dep(3)))
            .await,
    );
    assert_eq!(
        status.message,
        "Apply failed with 1 conflict: conflict with \"creator\" using apps/v1: .spec.replicas"
    );
    // Same values as the creator: shared, no conflict.
    api.patch("web", &PatchParams::apply("applier"), &Patch::Apply(dep(1)))
        .await
        .unwrap();

    // A status write is recorded under the status subresource and leaves spec ownership alone (a value
    // the Deployment controller has not reported already, so the write is not a no-op).
    let st = api
        .patch_status(
            "web",
            &PatchParams {
                field_manager: Some("ctrl".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"status": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let ctrl = st
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("ctrl"))
        .unwrap();
    assert_eq!(ctrl.subresource.as_deref(), Some("status"));
    assert_eq!(
        serde_json::to_value(&ctrl.fields_v1).unwrap(),
        json!({"f:status": {"f:replicas": {}}})
    );
}

#[tokio::test]
async fn apply_option_errors_are_the_real_servers() {
    let sim = start().await;
    let path = "/api/v1/namespaces/default/services/svc";
    let (code, body) = raw(
        &sim.client,
        "PATCH",
        path,
        "application/apply-patch+yaml",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(
        (
            body["details"]["kind"].as_str(),
            body["details"]["group"].as_str()
        ),
        (Some("PatchOptions"), Some("meta.k8s.io"))
    );
    let (code, body) = raw(
        &sim.client,
        "PATCH",
        &format!("{path}?fieldManager=m&force=true"),
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    let long = "m".repeat(129);
    let (code, body) = raw(
        &sim.client,
        "PATCH",
        &format!("{path}?fieldManager={long}"),
        "application/apply-patch+yaml",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("fieldManager: Too long: may not be more than 128 bytes")
    );
    // Duplicate list-map keys in an applied configuration.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                     "spec": {"ports": [{"port": 80}, {"port": 80, "protocol": "TCP"}]}});
    let (code, body) = raw(
        &sim.client,
        "PATCH",
        &format!("{path}?fieldManager=m"),
        "application/apply-patch+yaml",
        serde_json::to_vec(&svc).unwrap(),
    )
    .await;
    // A plain error in the real server: 500 without a reason.
    assert_eq!((code, body.get("reason")), (500, None), "{body}");
    assert_eq!(
        body["message"],
        "failed to create typed patch object (/svc; /v1, Kind=Service): \
         .spec.ports: duplicate entries for key [port=80,protocol=\"TCP\"]"
    );
}

#[tokio::test]
async fn service_ports_merge_by_port_and_protocol() {
    let sim = start().await;
    let api: Api<Service> = Api::namespaced(sim.client.clone(), "default");
    let svc = |ports: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": {"ports": ports}});
    api.patch(
        "svc",
        &PatchParams::apply("a"),
        &Patch::Apply(svc(json!([{"port": 80, "name": "http"}]))),
    )
    .await
    .unwrap();
    let both = api
        .patch(
            "svc",
            &PatchParams::apply("b"),
            &Patch::Apply(svc(json!([{"port": 53, "protocol": "UDP", "name": "dns"}]))),
        )
        .await
        .unwrap();
    let ports: Vec<i32> = both.spec.unwrap().ports.unwrap().iter().map(|p| p.port).collect();
    assert_eq!(ports, [80, 53]);
    // "a" drops its port: only "b"'s remains.
    let pruned = api
        .patch("svc", &PatchParams::apply("a"), &Patch::Apply(svc(json!([]))))
        .await
        .unwrap();
    let ports: Vec<i32> = pruned
        .spec
        .unwrap()
        .ports
        .unwrap()
        .iter()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [53]);
}

#[tokio::test]
async fn managed_fields_reset_by_request() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "default");
    api.patch(
        "cfg",
        &PatchParams::apply("mgr"),
        &Patch::Apply(cm(json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let reset = api
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"managedFields": [{}]}})),
        )
        .await
        .unwrap();
    assert!(
        reset.metadata.managed_fields.is_none(),
        "{:?}",
        reset.metadata.managed_fields
    );
    // Untracked objects stay untracked on update, as the real server.
    let edited = api
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"b": "2"}})),
        )
        .await
        .unwrap();
    assert!(edited.metadata.managed_fields.is_none());
}
