//! CustomResourceDefinitions through kube-rs: a CRD created with `Api<CustomResourceDefinition>` is found
//! by `kube::discovery`, and `Api<DynamicObject>` lists, watches, creates, patches and reads its objects
//! under every served version; a wrong type is a 422 naming the field; deleting the CRD deletes them.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::discovery::{self, Discovery, Scope};
use kube_sim::testing::{eventually_async, raw, start, status_of};
use serde_json::{Value, json};

fn widget_crd() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "required": ["host"], "properties": {
                "host": {"type": "string"},
                "replicas": {"type": "integer"},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    });
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage, "schema": {"openAPIV3Schema": schema},
               "subresources": {"status": {}},
               "additionalPrinterColumns": [{"name": "Host", "type": "string", "jsonPath": ".spec.host"}]})
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"],
                      "categories": ["examples"]},
            "versions": [version("v1", false), version("v1beta1", true)],
        },
    })
}

async fn create_crd(client: &kube::Client) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd()).unwrap();
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD")
}

#[tokio::test]
async fn a_crd_is_established_and_found_by_discovery() {
    let sim = start().await;
    let created = create_crd(&sim.client).await;
    let status = created.status.expect("status");
    let conditions: Vec<(String, String)> = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert!(
        conditions.contains(&("Established".into(), "True".into())),
        "{conditions:?}"
    );
    assert!(
        conditions.contains(&("NamesAccepted".into(), "True".into())),
        "{conditions:?}"
    );
    assert_eq!(status.accepted_names.map(|n| n.kind), Some("Widget".to_string()));
    assert_eq!(status.stored_versions, Some(vec!["v1beta1".to_string()]));

    let discovery = Discovery::new(sim.client.clone()).run().await.expect("discovery");
    let group = discovery.get("example.com").expect("group example.com");
    assert_eq!(group.preferred_version(), Some("v1"));
    let (ar, caps) = group.recommended_kind("Widget").expect("Widget");
    assert_eq!((ar.plural.as_str(), ar.version.as_str()), ("widgets", "v1"));
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural.ends_with("status")),
        "{:?}",
        caps.subresources
    );
    let (beta, _) = discovery::pinned_kind(
        &sim.client,
        &kube::api::GroupVersionKind::gvk("example.com", "v1beta1", "Widget"),
    )
    .await
    .expect("pinned v1beta1");
    assert_eq!(beta.api_version, "example.com/v1beta1");
}

#[tokio::test]
async fn dynamic_objects_list_watch_create_patch_across_versions() {
    let sim = start().await;
    create_crd(&sim.client).await;
    let (ar, _) = discovery::pinned_kind(
        &sim.client,
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
    )
    .await
    .expect("v1 Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client.clone(), "default", &ar);
    let mut watch = api
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .expect("watch")
        .boxed();

    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"host": "a.example.com", "replicas": 1, "unknown": true},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &obj).await.expect("create");
    assert_eq!(
        created.data["spec"],
        json!({"host": "a.example.com", "replicas": 1}),
        "unknown pruned"
    );
    assert_eq!(created.metadata.generation, Some(1));
    match watch.try_next().await.expect("event") {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("w1")),
        other => panic!("expected ADDED, got {other:?}"),
    }

    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data["spec"]["replicas"], 3);
    assert_eq!(patched.metadata.generation, Some(2));
    let applied = api
        .patch(
            "w1",
            &PatchParams::apply("test").force(),
            &Patch::Apply(
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
                                 "spec": {"host": "b.example.com"}}),
            ),
        )
        .await
        .expect("server-side apply");
    assert_eq!(applied.data["spec"]["host"], "b.example.com");
    let json_patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]))
                    .unwrap(),
            ),
        )
        .await
        .expect("json patch");
    assert_eq!(json_patched.data["spec"]["replicas"], 5);
    let status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("status patch");
    assert_eq!(status.data["status"]["ready"], true);
    assert_eq!(
        status.metadata.generation,
        Some(4),
        "status writes do not bump generation"
    );

    let mut seen = 0;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), watch.try_next())
        .await
        .expect("watch event in time")
        .expect("event")
    {
        if let WatchEvent::Modified(o) = ev {
            assert_eq!(
                o.types.as_ref().map(|t| t.api_version.as_str()),
                Some("example.com/v1")
            );
            seen += 1;
            if seen == 4 {
                break;
            }
        }
    }

    // Stored under v1beta1, read back under whichever version is asked for.
    let (beta_ar, _) = discovery::pinned_kind(
        &sim.client,
        &kube::api::GroupVersionKind::gvk("example.com", "v1beta1", "Widget"),
    )
    .await
    .expect("v1beta1");
    let beta: Api<DynamicObject> = Api::namespaced_with(sim.client.clone(), "default", &beta_ar);
    let got = beta.get("w1").await.expect("get v1beta1");
    assert_eq!(
        got.types.map(|t| t.api_version),
        Some("example.com/v1beta1".to_string())
    );
    let got = api.get("w1").await.expect("get v1");
    assert_eq!(
        got.types.map(|t| t.api_version),
        Some("example.com/v1".to_string())
    );
    assert_eq!(api.list(&Default::default()).await.expect("list").items.len(), 1);
    // The embedding API (manifest loading, tests) answers under the version asked for as well.
    let store = sim.server.store();
    let v1 = store
        .get("example.com/v1", "Widget", Some("default"), "w1")
        .expect("stored");
    assert_eq!(v1["apiVersion"], "example.com/v1");
    let listed = store.list("example.com/v1beta1", "Widget", None);
    assert_eq!(listed[0]["apiVersion"], "example.com/v1beta1");

    // A wrong type is a 422 naming the field, in kube-apiserver's words.
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"host": 5},
    }))
    .unwrap();
    let st = status_of(api.create(&PostParams::default(), &bad).await);
    assert_eq!(st.code, 422);
    assert!(
        st.message.contains(
            "spec.host: Invalid value: \"integer\": spec.host in body must be of type string: \"integer\""
        ),
        "{}",
        st.message
    );
    // Strategic merge patch is refused for custom resources, as kube-apiserver does.
    let (code, _) = raw(
        &sim.client,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        "application/strategic-merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 415);
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_objects_then_stops_serving() {
    let sim = start().await;
    create_crd(&sim.client).await;
    let (ar, _) = discovery::pinned_kind(
        &sim.client,
        &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
    )
    .await
    .expect("v1 Widget");
    let api: Api<DynamicObject> = Api::namespaced_with(sim.client.clone(), "default", &ar);
    for name in ["a", "b"] {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"host": "h"},
        }))
        .unwrap();
        api.create(&PostParams::default(), &obj).await.expect("create");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    let store = sim.server.store();
    assert!(
        eventually_async(5, || store
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                "widgets.example.com"
            )
            .is_none())
        .await
    );
    assert!(store.list("example.com/v1beta1", "Widget", None).is_empty());
    let (code, _) = raw(
        &sim.client,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 404);
    // Re-created, the resource starts empty.
    create_crd(&sim.client).await;
    assert!(
        api.list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn crd_names_must_be_plural_dot_group() {
    let sim = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(sim.client.clone());
    let mut bad = widget_crd();
    bad["metadata"]["name"] = json!("widget.example.com");
    let crd: CustomResourceDefinition = serde_json::from_value(bad).unwrap();
    let st = status_of(crds.create(&PostParams::default(), &crd).await);
    assert_eq!(st.code, 422);
    assert!(
        st.message.contains(
            "metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"
        ),
        "{}",
        st.message
    );
}
