//! Deletion as a real API server does it, seen by clients: response bodies, finalizers, owner-reference
//! garbage collection, namespace termination (event order included) and the admission checks around them.

use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_sim::testing::{Sim, raw, start, status_of};
use serde_json::{Value, json};

const JSON: &str = "application/json";

fn apply(sim: &Sim, obj: Value) -> Value {
    sim.server.store().apply(obj).unwrap()
}

/// Replays a watch of `path` from `rv` until the stream's timeout ends it.
async fn replay(sim: &Sim, path: &str, rv: u64) -> Vec<Value> {
    let req = http::Request::get(format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=1"))
        .body(vec![])
        .unwrap();
    let mut lines = sim.client.request_stream(req).await.unwrap().lines();
    let mut events = Vec::new();
    while let Ok(Some(Ok(line))) = tokio::time::timeout(Duration::from_secs(5), lines.next()).await {
        events.push(serde_json::from_str(&line).unwrap());
    }
    events
}

fn rv_of(event: &Value) -> u64 {
    event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_namespace_is_deleted_after_its_contents() {
    let sim = start().await;
    for name in ["a", "b"] {
        apply(
            &sim,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "doomed"}}),
        );
    }
    apply(
        &sim,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "doomed"}}),
    );
    let before = sim.server.store().revision();
    let (code, body) = raw(&sim.client, "DELETE", "/api/v1/namespaces/doomed", JSON, vec![]).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (body["kind"].as_str(), body["status"]["phase"].as_str()),
        (Some("Namespace"), Some("Terminating"))
    );

    let namespaces = replay(&sim, "/api/v1/namespaces", before).await;
    let types: Vec<&str> = namespaces.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types.first(),
        Some(&"MODIFIED"),
        "Terminating first: {namespaces:?}"
    );
    assert_eq!(namespaces[0]["object"]["status"]["phase"], "Terminating");
    let gone = namespaces
        .iter()
        .find(|e| e["type"] == "DELETED")
        .expect("namespace DELETED");

    let mut contents = replay(&sim, "/api/v1/configmaps", before).await;
    contents.extend(replay(&sim, "/api/v1/secrets", before).await);
    contents.extend(replay(&sim, "/api/v1/serviceaccounts", before).await);
    let deleted: Vec<&Value> = contents.iter().filter(|e| e["type"] == "DELETED").collect();
    let mut names: Vec<&str> = deleted
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["a", "b", "default", "kube-root-ca.crt", "s"]);
    assert!(
        deleted.iter().all(|e| rv_of(e) < rv_of(gone)),
        "namespace DELETED comes last: {contents:?}"
    );
}

#[tokio::test]
async fn deletes_answer_as_the_real_registries() {
    let sim = start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let post = |name: &str, finalizers: Value| {
        serde_json::to_vec(&json!({"metadata": {"name": name, "finalizers": finalizers}})).unwrap()
    };
    // Most kinds: a Status naming what went.
    raw(&sim.client, "POST", cms, JSON, post("plain", json!([]))).await;
    let (code, status) = raw(&sim.client, "DELETE", &format!("{cms}/plain"), JSON, vec![]).await;
    assert_eq!(
        (code, status["kind"].as_str(), status["status"].as_str()),
        (200, Some("Status"), Some("Success"))
    );
    assert_eq!(status["details"]["kind"], "configmaps");

    // Held by a finalizer: the marked object; 202 only for the legacy orphanDependents=false.
    raw(
        &sim.client,
        "POST",
        cms,
        JSON,
        post("held", json!(["example.com/hold"])),
    )
    .await;
    let legacy = serde_json::to_vec(&json!({"orphanDependents": false})).unwrap();
    let (code, obj) = raw(&sim.client, "DELETE", &format!("{cms}/held"), JSON, legacy).await;
    assert_eq!(code, 202, "{obj}");
    assert!(obj["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = raw(&sim.client, "DELETE", &format!("{cms}/held"), JSON, vec![]).await;
    assert_eq!(code, 200);
    let release = serde_json::to_vec(&json!({"metadata": {"finalizers": null}})).unwrap();
    let (code, _) = raw(
        &sim.client,
        "PATCH",
        &format!("{cms}/held"),
        "application/merge-patch+json",
        release,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = raw(&sim.client, "GET", &format!("{cms}/held"), JSON, vec![]).await;
    assert_eq!(code, 404);

    // Pods, Services, Namespaces and ServiceAccounts answer with the object.
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    raw(
        &sim.client,
        "POST",
        "/api/v1/namespaces/default/pods",
        JSON,
        serde_json::to_vec(&pod).unwrap(),
    )
    .await;
    let (code, obj) = raw(
        &sim.client,
        "DELETE",
        "/api/v1/namespaces/default/pods/p",
        JSON,
        vec![],
    )
    .await;
    assert_eq!((code, obj["kind"].as_str()), (200, Some("Pod")));
}

#[tokio::test]
async fn cascading_policies_through_kube_rs() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client.clone());
    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let child = |name: &str| -> ConfigMap {
        serde_json::from_value(
            json!({"metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1",
            "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "blockOwnerDeletion": true}]}}),
        )
        .unwrap()
    };
    api.create(&PostParams::default(), &child("kid")).await.unwrap();
    let answer = api.delete("owner", &DeleteParams::foreground()).await.unwrap();
    let marked = answer.left().expect("the marked owner");
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert!(api.get_opt("kid").await.unwrap().is_none());
    assert!(api.get_opt("owner").await.unwrap().is_none());

    let owner = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let kid: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "kid", "ownerReferences": [{"apiVersion": "v1",
        "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &kid).await.unwrap();
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    let kept = api.get("kid").await.unwrap();
    assert!(kept.metadata.owner_references.is_none());

    let namespaces: Api<Namespace> = Api::all(sim.client.clone());
    let status = status_of(namespaces.delete("kube-system", &DeleteParams::default()).await);
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        status.message,
        "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
    );
}
