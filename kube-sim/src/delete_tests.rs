use serde_json::{Value, json};

use super::*;
use crate::controllers::test_store;
use crate::kinds;
use crate::write::{self, StatusMode, WriteOpts};

fn cm(name: &str, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "finalizers": finalizers}})
}

fn key(name: &str) -> Key {
    ("default".into(), name.into())
}

fn configmaps() -> &'static Kind {
    kinds::by_type("v1", "ConfigMap").unwrap()
}

fn update(store: &Store, name: &str, f: impl FnOnce(&mut Value)) -> Result<Arc<Obj>, Error> {
    let opts = WriteOpts {
        dry_run: false,
        status: StatusMode::Ignore,
        track: crate::write::Track::None,
        fields: crate::typed::FieldCheck::new(crate::typed::FieldValidation::Ignore),
    };
    write::update(store, configmaps(), &key(name), &opts, |cur| {
        let mut v = cur.clone();
        f(&mut v);
        Ok(v)
    })
}

#[test]
fn finalizers_hold_a_delete_until_an_update_empties_them() {
    let store = test_store();
    store.apply(cm("held", &["example.com/hold"])).unwrap();
    let outcome = delete(&store, configmaps(), &key("held"), &DeleteOpts::default()).unwrap();
    let Outcome::Pending(marked) = outcome else {
        panic!("not pending: {outcome:?}")
    };
    let v = marked.value();
    assert!(v["metadata"]["deletionTimestamp"].is_string(), "{v}");
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(store.get("v1", "ConfigMap", Some("default"), "held").is_some());

    // A second delete changes nothing and still answers with the object.
    let again = delete(&store, configmaps(), &key("held"), &DeleteOpts::default()).unwrap();
    assert!(matches!(again, Outcome::Pending(ref o) if o.rv == marked.rv));

    let err = update(&store, "held", |v| {
        v["metadata"]["finalizers"] = json!(["example.com/hold", "new"])
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the \
         object is being deleted, found new finalizers []string{\"new\"}"
    );
    // Clients cannot clear deletionTimestamp: it is kept.
    let kept = update(&store, "held", |v| {
        v["metadata"].as_object_mut().unwrap().remove("deletionTimestamp");
        v["data"] = json!({"a": "1"});
    })
    .unwrap();
    assert_eq!(
        kept.value()["metadata"]["deletionTimestamp"],
        v["metadata"]["deletionTimestamp"]
    );

    let last = update(&store, "held", |v| v["metadata"]["finalizers"] = json!([])).unwrap();
    assert_eq!(last.value()["data"]["a"], "1");
    assert!(store.get("v1", "ConfigMap", Some("default"), "held").is_none());
}

#[test]
fn clients_cannot_set_a_deletion_timestamp() {
    let store = test_store();
    store.apply(cm("plain", &[])).unwrap();
    let err = update(&store, "plain", |v| {
        v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z")
    })
    .unwrap_err();
    assert!(
        matches!(err, Error::Invalid { ref causes, .. } if causes.iter().any(|(f, _)| f == "metadata.deletionTimestamp")),
        "{err}"
    );
    // On create it is ignored, as every server-set field.
    let created = store
        .apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "fresh", "namespace": "default", "deletionTimestamp": "2024-01-01T00:00:00Z"}}))
        .unwrap();
    assert!(created["metadata"]["deletionTimestamp"].is_null());
}

#[test]
fn dry_run_deletes_write_nothing() {
    let store = test_store();
    store.apply(cm("kept", &[])).unwrap();
    store.apply(cm("held", &["x/y"])).unwrap();
    let rv = store.revision();
    let opts = DeleteOpts {
        dry_run: true,
        ..DeleteOpts::default()
    };
    assert!(matches!(
        delete(&store, configmaps(), &key("kept"), &opts).unwrap(),
        Outcome::Removed(_)
    ));
    let pending = delete(&store, configmaps(), &key("held"), &opts).unwrap();
    assert!(pending.obj().value()["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(store.revision(), rv);
}

#[test]
fn delete_options_are_validated() {
    let both = DeleteOpts::parse(
        &json!({"orphanDependents": true, "propagationPolicy": "Orphan"}),
        false,
    )
    .unwrap_err();
    assert_eq!(
        both.to_string(),
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents \
         and deletionPropagation cannot be both set"
    );
    let bad = DeleteOpts::parse(&json!({"propagationPolicy": "Later"}), false).unwrap_err();
    assert!(bad.to_string().contains("Unsupported value: \"Later\""), "{bad}");
    let legacy = DeleteOpts::parse(&json!({"orphanDependents": false}), false).unwrap();
    assert_eq!(legacy.propagation, Some(Propagation::Background));
    assert!(legacy.orphan_dependents_false);
    let opts = DeleteOpts::parse(
        &json!({"propagationPolicy": "Foreground", "dryRun": ["All"],
        "preconditions": {"uid": "u"}}),
        false,
    )
    .unwrap();
    assert_eq!(
        (opts.propagation, opts.dry_run, opts.pre.uid.as_deref()),
        (Some(Propagation::Foreground), true, Some("u"))
    );
}

#[test]
fn policies_set_the_garbage_collector_finalizers() {
    let obj = cm("x", &["a/b", ORPHAN]);
    assert_eq!(gc_finalizers(&obj, None), ["a/b", ORPHAN]);
    assert_eq!(
        gc_finalizers(&obj, Some(Propagation::Foreground)),
        ["a/b", FOREGROUND]
    );
    assert_eq!(gc_finalizers(&obj, Some(Propagation::Background)), ["a/b"]);
    assert_eq!(gc_finalizers(&cm("y", &[]), Some(Propagation::Orphan)), [ORPHAN]);
}
