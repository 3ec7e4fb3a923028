use serde_json::{Value, json};

use crate::controllers::test_store;
use crate::delete::{self, DeleteOpts, Outcome, Propagation};
use crate::kinds;
use crate::store::Store;

fn cm(store: &Store, name: &str, owners: &[(&str, bool)], finalizers: &[&str]) -> Value {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(owner, block)| {
            let uid = store.get("v1", "ConfigMap", Some("default"), owner).unwrap()["metadata"]["uid"].clone();
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid, "blockOwnerDeletion": block})
        })
        .collect();
    store
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": refs, "finalizers": finalizers}}))
        .unwrap()
}

fn get(store: &Store, name: &str) -> Option<Value> {
    store.get("v1", "ConfigMap", Some("default"), name)
}

fn delete(store: &Store, name: &str, propagation: Option<Propagation>) -> Outcome {
    let opts = DeleteOpts {
        propagation,
        ..DeleteOpts::default()
    };
    let kind = kinds::by_type("v1", "ConfigMap").unwrap();
    delete::delete(store, kind, &("default".into(), name.into()), &opts).unwrap()
}

#[test]
fn background_collects_dependents_whose_owners_are_all_gone() {
    let store = test_store();
    cm(&store, "owner", &[], &[]);
    cm(&store, "other", &[], &[]);
    cm(&store, "child", &[("owner", false)], &[]);
    cm(&store, "grandchild", &[("child", false)], &[]);
    cm(&store, "shared", &[("owner", false), ("other", false)], &[]);
    assert!(matches!(delete(&store, "owner", None), Outcome::Removed(_)));
    assert!(get(&store, "child").is_none() && get(&store, "grandchild").is_none());
    // Kept by its live owner, without the reference to the one that went.
    let shared = get(&store, "shared").expect("kept");
    let refs = shared["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["name"], "other");
}

#[test]
fn owners_are_matched_by_uid() {
    let store = test_store();
    cm(&store, "owner", &[], &[]);
    cm(&store, "child", &[("owner", false)], &[]);
    // Same name, new object: the child's reference is to the old uid.
    store.delete("v1", "ConfigMap", Some("default"), "owner").unwrap();
    assert!(get(&store, "child").is_none());
    cm(&store, "owner", &[], &[]);
    let mut stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "not-the-owner"});
    stale["blockOwnerDeletion"] = json!(false);
    store
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "orphaned", "namespace": "default", "ownerReferences": [stale]}}))
        .unwrap();
    store.delete("v1", "ConfigMap", Some("default"), "owner").unwrap();
    assert!(
        get(&store, "orphaned").is_some(),
        "another object's deletion does not collect it"
    );
}

#[test]
fn orphan_releases_dependents() {
    let store = test_store();
    cm(&store, "owner", &[], &[]);
    cm(&store, "child", &[("owner", true)], &[]);
    let outcome = delete(&store, "owner", Some(Propagation::Orphan));
    let Outcome::Pending(marked) = outcome else {
        panic!("orphan deletion goes through the orphan finalizer: {outcome:?}")
    };
    assert_eq!(marked.value()["metadata"]["finalizers"], json!(["orphan"]));
    assert!(get(&store, "owner").is_none());
    let child = get(&store, "child").expect("orphaned, not deleted");
    assert!(child["metadata"]["ownerReferences"].is_null(), "{child}");
}

#[test]
fn foreground_deletes_dependents_first_and_waits_for_blocking_ones() {
    let store = test_store();
    cm(&store, "owner", &[], &[]);
    cm(&store, "child", &[("owner", true)], &[]);
    cm(&store, "grandchild", &[("child", true)], &[]);
    cm(&store, "slow", &[("owner", true)], &["example.com/hold"]);
    let outcome = delete(&store, "owner", Some(Propagation::Foreground));
    let Outcome::Pending(marked) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        marked.value()["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(get(&store, "child").is_none() && get(&store, "grandchild").is_none());
    // A blocking dependent held by its own finalizer keeps the owner.
    let owner = get(&store, "owner").expect("waiting for slow");
    assert!(owner["metadata"]["deletionTimestamp"].is_string());
    assert!(get(&store, "slow").unwrap()["metadata"]["deletionTimestamp"].is_string());
    let mut slow = get(&store, "slow").unwrap();
    slow["metadata"]["finalizers"] = json!([]);
    store.apply(slow).unwrap();
    assert!(get(&store, "slow").is_none());
    assert!(
        get(&store, "owner").is_none(),
        "released once its blocking dependent went"
    );
}

#[test]
fn non_blocking_dependents_do_not_hold_a_foreground_owner() {
    let store = test_store();
    cm(&store, "owner", &[], &[]);
    cm(&store, "loose", &[("owner", false)], &["example.com/hold"]);
    delete(&store, "owner", Some(Propagation::Foreground));
    assert!(get(&store, "owner").is_none());
    assert!(get(&store, "loose").unwrap()["metadata"]["deletionTimestamp"].is_string());
}

#[test]
fn a_foreground_cycle_is_broken_instead_of_waiting_forever() {
    let store = test_store();
    cm(&store, "a", &[], &[]);
    cm(&store, "b", &[("a", true)], &[]);
    // a now also depends on b: a cycle of blocking references.
    let mut a = get(&store, "a").unwrap();
    let b_uid = get(&store, "b").unwrap()["metadata"]["uid"].clone();
    a["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": b_uid, "blockOwnerDeletion": true}]);
    store.apply(a).unwrap();
    delete(&store, "a", Some(Propagation::Foreground));
    assert!(get(&store, "a").is_none() && get(&store, "b").is_none());
}
