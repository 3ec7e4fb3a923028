use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{LOG_FILE, PersistError, Restored, SNAPSHOT_FILE, open};
use crate::auth::Authority;
use crate::error::Error;
use crate::selector::Filter;
use crate::store::{Store, WatchFrom};

fn start(dir: &Path) -> Result<(Store, Option<Restored>), Error> {
    start_compacting_after(dir, None)
}

fn start_compacting_after(dir: &Path, bytes: Option<u64>) -> Result<(Store, Option<Restored>), Error> {
    let mut opened = open(dir)?;
    if let Some(bytes) = bytes {
        opened.log.compact_after = bytes;
    }
    let authority = Arc::new(Authority::load_or_create(dir, "t")?);
    Store::open(1000, authority, opened)
}

fn config_map(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
           "data": {"k": data}})
}

fn names(store: &Store) -> Vec<String> {
    store
        .list("v1", "ConfigMap", Some("default"))
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .filter(|n| n != "kube-root-ca.crt")
        .collect()
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn log_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(LOG_FILE)).unwrap().len()
}

#[test]
fn a_reopened_store_has_its_objects_its_authority_and_later_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let (store, restored) = start(dir.path()).unwrap();
    assert_eq!(restored, None, "an empty folder starts a new cluster");
    let bootstrap = store.len();
    store.apply(config_map("a", "1")).unwrap();
    store.apply(config_map("b", "1")).unwrap();
    store.apply(config_map("b", "2")).unwrap();
    store.delete("v1", "ConfigMap", Some("default"), "a").unwrap();
    let (revision, objects, ca) = (store.revision(), store.len(), store.authority.ca_pem().to_owned());
    assert_eq!(objects, bootstrap + 1);
    drop(store);

    let (store, restored) = start(dir.path()).unwrap();
    assert_eq!(
        restored,
        Some(Restored {
            objects,
            revision,
            truncated: None
        })
    );
    assert_eq!(store.revision(), revision);
    assert_eq!(names(&store), ["b"]);
    let b = store.get("v1", "ConfigMap", Some("default"), "b").unwrap();
    assert_eq!(b["data"]["k"], "2");
    assert_eq!(store.authority.ca_pem(), ca, "the same CA");
    let c = store.apply(config_map("c", "1")).unwrap();
    assert!(rv(&c) > revision, "{} after {revision}", rv(&c));
    // Watches from before the restart are expired, as after a real API server's restart.
    let kind = store.kinds().by_type("v1", "ConfigMap").unwrap().id();
    let expired = store.watch(kind, &Filter::default(), WatchFrom::After(revision - 1));
    assert!(matches!(expired, Err(Error::Expired { .. })));
    assert!(
        store
            .watch(kind, &Filter::default(), WatchFrom::After(revision))
            .is_ok()
    );
}

#[test]
fn a_torn_last_record_is_cut_off_and_everything_before_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    store.apply(config_map("a", "1")).unwrap();
    let before_b = log_len(dir.path());
    let revision = store.revision();
    store.apply(config_map("b", "1")).unwrap();
    drop(store);
    // A crash in the middle of writing b's record.
    let wal = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(LOG_FILE))
        .unwrap();
    wal.set_len(log_len(dir.path()) - 3).unwrap();
    drop(wal);

    let (store, restored) = start(dir.path()).unwrap();
    let restored = restored.unwrap();
    assert_eq!(names(&store), ["a"]);
    assert_eq!(restored.revision, revision);
    let what = restored.truncated.unwrap();
    assert!(
        what.contains("cut short") && what.contains(&format!("at byte {before_b}")),
        "{what}"
    );
    assert_eq!(
        log_len(dir.path()),
        before_b,
        "the torn end is removed from the file"
    );
    store.apply(config_map("c", "1")).unwrap();
    drop(store);
    let (store, restored) = start(dir.path()).unwrap();
    assert_eq!(restored.unwrap().truncated, None);
    assert_eq!(names(&store), ["a", "c"]);
}

#[test]
fn a_record_with_a_bad_checksum_ends_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    store.apply(config_map("a", "1")).unwrap();
    store.apply(config_map("b", "1")).unwrap();
    drop(store);
    let path = dir.path().join(LOG_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x20;
    std::fs::write(&path, bytes).unwrap();

    let (store, restored) = start(dir.path()).unwrap();
    assert_eq!(names(&store), ["a"]);
    let what = restored.unwrap().truncated.unwrap();
    assert!(what.contains("checksum"), "{what}");
}

#[test]
fn a_compacted_store_replays_its_snapshot_then_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start_compacting_after(dir.path(), Some(4096)).unwrap();
    let big = "x".repeat(1000);
    for i in 0..20 {
        store.apply(config_map(&format!("cm{i:02}"), &big)).unwrap();
    }
    store.delete("v1", "ConfigMap", Some("default"), "cm00").unwrap();
    assert!(log_len(dir.path()) < 4096 + 2048, "folded into the snapshot");
    let (revision, objects) = (store.revision(), store.len());
    drop(store);

    let (store, restored) = start(dir.path()).unwrap();
    let restored = restored.unwrap();
    assert_eq!((restored.revision, restored.objects), (revision, objects));
    assert_eq!(names(&store).len(), 19);
    assert!(!names(&store).contains(&"cm00".to_string()));
}

#[test]
fn a_crash_between_snapshot_and_log_reset_replays_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    store.apply(config_map("a", "1")).unwrap();
    store.apply(config_map("a", "2")).unwrap();
    let old_log = std::fs::read(dir.path().join(LOG_FILE)).unwrap();
    let revision = store.revision();
    store.snapshot_now().unwrap();
    drop(store);
    // The log as it was before its reset: every change in it is also in the snapshot.
    std::fs::write(dir.path().join(LOG_FILE), old_log).unwrap();

    let (store, restored) = start(dir.path()).unwrap();
    assert_eq!(restored.unwrap().revision, revision);
    let a = store.get("v1", "ConfigMap", Some("default"), "a").unwrap();
    assert_eq!((a["data"]["k"].as_str(), rv(&a)), (Some("2"), revision));
}

#[test]
fn a_damaged_snapshot_is_an_error_not_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    drop(store);
    let path = dir.path().join(SNAPSHOT_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = start(dir.path()).err().unwrap();
    assert!(
        matches!(&err, Error::Persist(PersistError::Corrupt { .. })) && err.to_string().contains("snapshot"),
        "{err}"
    );
}

#[test]
fn one_folder_serves_one_store_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let held = start(dir.path()).unwrap();
    let err = start(dir.path()).err().unwrap();
    assert!(matches!(err, Error::Persist(PersistError::InUse { .. })), "{err}");
    drop(held);
    start(dir.path()).unwrap();
}

#[test]
fn custom_resources_come_back_under_their_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    store
        .apply(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": true}}}]},
        }))
        .unwrap();
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}});
    store.apply(widget).unwrap();
    drop(store);
    // Once from the log, then (compacting after the write) from the snapshot.
    for compact_after in [Some(1), None] {
        let (store, _) = start_compacting_after(dir.path(), compact_after).unwrap();
        let got = store
            .get("example.com/v1", "Widget", Some("default"), "w")
            .unwrap();
        assert_eq!(got["spec"]["size"], 3);
        store
            .apply(json!({"apiVersion": "example.com/v1", "kind": "Widget",
                          "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 3}}))
            .unwrap();
    }
}

#[test]
fn every_built_in_table_has_its_own_stored_name() {
    for id in 0..crate::kinds::KINDS.len() {
        let name = super::table_name(id).unwrap();
        assert_eq!(super::table_id(&name), Some(id), "{name}");
    }
    assert_eq!(super::table_id("v0/nothings"), None);
}

#[test]
fn restored_dependents_are_still_collected_with_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = start(dir.path()).unwrap();
    let owner = store.apply(config_map("owner", "1")).unwrap();
    let dependent = |data: &str| {
        let mut d = config_map("dependent", data);
        d["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                                    "uid": owner["metadata"]["uid"]}]);
        d
    };
    // Two versions in the log: the second replaces the first under the same owner.
    store.apply(dependent("1")).unwrap();
    store.apply(dependent("2")).unwrap();
    drop(store);

    let (store, _) = start(dir.path()).unwrap();
    store.delete("v1", "ConfigMap", Some("default"), "owner").unwrap();
    assert_eq!(
        names(&store),
        Vec::<String>::new(),
        "the garbage collector found the dependent"
    );
}
