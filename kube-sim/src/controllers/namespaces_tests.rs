use serde_json::{Value, json};

use crate::controllers::test_store;
use crate::store::Store;

fn ns(store: &Store, name: &str) -> Option<Value> {
    store.get("v1", "Namespace", None, name)
}

#[test]
fn namespaces_carry_the_kubernetes_finalizer() {
    let store = test_store();
    store
        .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}))
        .unwrap();
    assert_eq!(
        ns(&store, "apps").unwrap()["spec"]["finalizers"],
        json!(["kubernetes"])
    );
    // Only the finalize subresource changes them; an update keeps them.
    store
        .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}, "spec": {}}))
        .unwrap();
    assert_eq!(
        ns(&store, "apps").unwrap()["spec"]["finalizers"],
        json!(["kubernetes"])
    );
}

#[test]
fn a_terminating_namespace_takes_no_new_content_and_goes_when_empty() {
    let store = test_store();
    store
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "held", "namespace": "apps", "finalizers": ["example.com/hold"]}}))
        .unwrap();
    store
        .apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "apps"}}))
        .unwrap();
    let terminating = store.delete("v1", "Namespace", None, "apps").unwrap();
    assert_eq!(terminating["status"]["phase"], "Terminating");
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    assert!(store.get("v1", "Secret", Some("apps"), "s").is_none());
    assert!(
        store
            .get("v1", "ConfigMap", Some("apps"), "kube-root-ca.crt")
            .is_none(),
        "not republished"
    );
    let status = ns(&store, "apps").unwrap()["status"].clone();
    assert_eq!(status["phase"], "Terminating");
    let condition = |t: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()
            .clone()
    };
    assert_eq!(
        condition("NamespaceContentRemaining")["message"],
        "Some resources are remaining: configmaps has 1 resource instances"
    );
    assert_eq!(
        condition("NamespaceFinalizersRemaining")["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );

    let err = store
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": "apps"}}))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "configmaps \"late\" is forbidden: unable to create new content in namespace apps because it is being terminated"
    );
    let status = err.to_status();
    assert_eq!(status["details"]["causes"][0]["reason"], "NamespaceTerminating");
    assert_eq!(status["code"], 403);

    let again = store.delete("v1", "Namespace", None, "apps").unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        ns(&store, "apps").unwrap()["metadata"]["resourceVersion"]
    );

    let mut held = store.get("v1", "ConfigMap", Some("apps"), "held").unwrap();
    held["metadata"]["finalizers"] = json!([]);
    store.apply(held).unwrap();
    assert!(
        ns(&store, "apps").is_none(),
        "finished once the last content went"
    );
}

#[test]
fn system_namespaces_cannot_be_deleted() {
    let store = test_store();
    for name in ["default", "kube-system", "kube-public"] {
        let err = store.delete("v1", "Namespace", None, name).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
        );
        assert!(ns(&store, name).is_some());
    }
}
