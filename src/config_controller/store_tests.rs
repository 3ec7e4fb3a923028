use super::*;
use crate::istio::{self, Labels, Source};

fn meta(name: &str, revision: &str, source: Source) -> ObjectMeta {
    ObjectMeta {
        namespace: "ns1".into(),
        name: name.into(),
        labels: Labels::new(),
        annotations: Default::default(),
        revision: revision.into(),
        creation_timestamp: None,
        source,
    }
}

fn cluster() -> SourceId {
    SourceId::Cluster(ClusterId::from("c1"))
}

fn file() -> Source {
    Source::File {
        path: "/cfg/dr.yaml".into(),
        index: 0,
    }
}

/// Parses a DestinationRule for `host` (an empty host is invalid) as a source would.
fn dr(name: &str, revision: &str, host: &str, source: Source) -> (ObjectRef, ObjectMeta, Parsed) {
    let m = meta(name, revision, source);
    let obj = ObjectRef::new(Kind::DestinationRule, "ns1", name);
    let parsed = match istio::parse(
        Kind::DestinationRule,
        m.clone(),
        &serde_json::json!({ "host": host }),
    ) {
        Ok((cfg, w)) => Parsed::Valid(Arc::new(cfg), w),
        Err(e) => Parsed::Rejected {
            field: e.field().to_owned(),
            reason: e.to_string(),
        },
    };
    (obj, m, parsed)
}

fn hosts(changes: &ChangeSet) -> Vec<&str> {
    changes.hosts().into_iter().collect()
}

fn in_force_host(store: &Store, obj: &ObjectRef) -> Option<String> {
    let snap = store.snapshot(1, ChangeSet::default());
    snap.get(obj).map(|c| match &c.spec {
        istio::Spec::DestinationRule(d) => d.host.clone(),
        _ => unreachable!("a DestinationRule"),
    })
}

#[test]
fn change_sets_name_the_hosts_of_old_and_new_versions() {
    let mut store = Store::default();
    let c = Source::Cluster(ClusterId::from("c1"));
    let (obj, m, p) = dr("r", "1", "reviews", c.clone());
    let added = store.apply(cluster(), obj.clone(), m, p);
    assert_eq!(hosts(&added), ["reviews"]);
    let (obj, m, p) = dr("r", "2", "ratings", c.clone());
    let moved = store.apply(cluster(), obj.clone(), m, p);
    assert_eq!(
        hosts(&moved),
        ["ratings", "reviews"],
        "both the old and the new host are affected"
    );
    let (other, m, p) = dr("other", "1", "details", c);
    store.apply(cluster(), other, m, p);
    let removed = store.delete(&cluster(), &obj);
    assert_eq!(hosts(&removed), ["ratings"]);
    assert_eq!(removed.kinds(), [Kind::DestinationRule].into());
    assert!(
        store.delete(&cluster(), &obj).is_empty(),
        "deleting twice changes nothing"
    );
}

#[test]
fn an_object_that_turns_invalid_keeps_serving_its_last_valid_version() {
    let mut store = Store::default();
    let c = Source::Cluster(ClusterId::from("c1"));
    let (obj, m, p) = dr("r", "1", "reviews", c.clone());
    store.apply(cluster(), obj.clone(), m, p);
    let (_, m, p) = dr("r", "2", "", c.clone());
    let changes = store.apply(cluster(), obj.clone(), m, p);
    assert!(changes.is_empty(), "the valid version stays in force");
    assert_eq!(in_force_host(&store, &obj).as_deref(), Some("reviews"));
    let snap = store.snapshot(1, ChangeSet::default());
    let rec = &snap.records[0].record;
    assert_eq!(rec.meta.revision, "2");
    assert_eq!(rec.serving_revision.as_deref(), Some("1"));
    let Status::Rejected { field, reason } = &rec.status else {
        panic!("{:?}", rec.status)
    };
    assert_eq!(field, "spec.host");
    assert!(
        reason.starts_with("DestinationRule ns1/r: spec.host:"),
        "{reason}"
    );

    // Never valid: nothing in force, but listed with its reason.
    let (bad, m, p) = dr("never", "1", "", c);
    assert!(store.apply(cluster(), bad.clone(), m, p).is_empty());
    assert_eq!(in_force_host(&store, &bad), None);
    assert_eq!(store.snapshot(2, ChangeSet::default()).records.len(), 2);
}

#[test]
fn a_conflict_between_sources_is_reported_and_the_cluster_copy_wins() {
    let mut store = Store::default();
    let (obj, m, p) = dr("r", "f1", "from-file", file());
    store.apply(SourceId::Directory, obj.clone(), m, p);
    assert_eq!(in_force_host(&store, &obj).as_deref(), Some("from-file"));
    let (_, m, p) = dr("r", "7", "from-cluster", Source::Cluster(ClusterId::from("c1")));
    let changes = store.apply(cluster(), obj.clone(), m, p);
    assert_eq!(hosts(&changes), ["from-cluster", "from-file"]);
    assert_eq!(in_force_host(&store, &obj).as_deref(), Some("from-cluster"));
    let snap = store.snapshot(1, ChangeSet::default());
    let file_copy = snap
        .records
        .iter()
        .find(|r| r.source == SourceId::Directory)
        .unwrap();
    let ignored = file_copy
        .record
        .ignored
        .as_deref()
        .expect("the file copy is marked ignored");
    assert!(
        ignored.contains("conflict: cluster c1 also has DestinationRule ns1/r"),
        "{ignored}"
    );
    let cluster_copy = snap.records.iter().find(|r| r.source == cluster()).unwrap();
    assert_eq!(cluster_copy.record.ignored, None);

    // The cluster copy goes: the file copy is in force again, no longer ignored.
    let changes = store.delete(&cluster(), &obj);
    assert_eq!(hosts(&changes), ["from-cluster", "from-file"]);
    assert_eq!(in_force_host(&store, &obj).as_deref(), Some("from-file"));
    assert_eq!(
        store.snapshot(2, ChangeSet::default()).records[0].record.ignored,
        None
    );
}

#[test]
fn retain_deletes_what_a_relist_no_longer_has_of_that_source_and_kind() {
    let mut store = Store::default();
    let c = Source::Cluster(ClusterId::from("c1"));
    let mut objs = Vec::new();
    for (name, host) in [("a", "ha"), ("b", "hb")] {
        let (obj, m, p) = dr(name, "1", host, c.clone());
        store.apply(cluster(), obj.clone(), m, p);
        objs.push(obj);
    }
    let (fobj, m, p) = dr("c", "1", "hc", file());
    store.apply(SourceId::Directory, fobj.clone(), m, p);
    let listed: BTreeSet<ObjectRef> = [objs[0].clone()].into();
    let other_kind = store.retain(&cluster(), Some(Kind::VirtualService), &listed);
    assert!(other_kind.is_empty(), "a relist of another kind prunes nothing");
    let changes = store.retain(&cluster(), Some(Kind::DestinationRule), &listed);
    assert_eq!(hosts(&changes), ["hb"]);
    assert!(
        in_force_host(&store, &fobj).is_some(),
        "another source's objects stay"
    );
}

#[test]
fn snapshots_diff_across_skipped_versions_and_list_by_kind() {
    let mut store = Store::default();
    let c = Source::Cluster(ClusterId::from("c1"));
    let v0 = store.snapshot(0, ChangeSet::default());
    let (a, m, p) = dr("a", "1", "ha", c.clone());
    let first = store.apply(cluster(), a, m, p);
    let v1 = store.snapshot(1, first.clone());
    let (b, m, p) = dr("b", "1", "hb", c);
    let second = store.apply(cluster(), b, m, p);
    let v2 = store.snapshot(2, second.clone());
    assert_eq!(v2.changes_since(&v1), second);
    let mut both = first;
    both.merge(second);
    assert_eq!(
        v2.changes_since(&v0),
        both,
        "a reader that skipped v1 still sees both changes"
    );
    assert_eq!(v2.of_kind(Kind::DestinationRule).count(), 2);
    assert_eq!(v2.of_kind(Kind::VirtualService).count(), 0);
    assert_eq!(v2.all().count(), 2);
}

/// A namespace-wide Sidecar named `name`, created at `created`.
fn sidecar(name: &str, created: &str, selector: bool) -> (ObjectRef, ObjectMeta, Parsed) {
    let mut m = meta(name, "1", Source::Cluster(ClusterId::from("c1")));
    m.creation_timestamp = Some(created.into());
    let mut spec = serde_json::json!({"egress": [{"hosts": ["./*"]}]});
    if selector {
        spec["workloadSelector"] = serde_json::json!({"labels": {"app": "a"}});
    }
    let (cfg, w) = istio::parse(Kind::Sidecar, m.clone(), &spec).expect("valid sidecar");
    (
        ObjectRef::new(Kind::Sidecar, "ns1", name),
        m,
        Parsed::Valid(Arc::new(cfg), w),
    )
}

/// Sidecars (name, creation time, has a selector) and the names that must be reported.
type SidecarCase<'a> = (&'a [(&'a str, &'a str, bool)], &'a [&'a str]);

#[test]
fn only_the_oldest_namespace_wide_sidecar_applies_and_the_others_are_reported() {
    let cases: &[SidecarCase] = &[
        // One namespace-wide Sidecar, plus one with a selector: nothing to report.
        (
            &[
                ("a", "2026-01-02T00:00:00Z", false),
                ("b", "2026-01-01T00:00:00Z", true),
            ],
            &[],
        ),
        // Two: the newer is reported, whatever the names' order.
        (
            &[
                ("a", "2026-01-02T00:00:00Z", false),
                ("b", "2026-01-01T00:00:00Z", false),
            ],
            &["a"],
        ),
        // Same creation time: the name decides.
        (
            &[
                ("b", "2026-01-01T00:00:00Z", false),
                ("a", "2026-01-01T00:00:00Z", false),
                ("c", "2026-01-03T00:00:00Z", false),
            ],
            &["b", "c"],
        ),
    ];
    for (sidecars, want) in cases {
        let mut store = Store::default();
        for (name, created, selector) in *sidecars {
            let (obj, m, p) = sidecar(name, created, *selector);
            store.apply(cluster(), obj, m, p);
        }
        let snap = store.snapshot(1, ChangeSet::default());
        let reported: Vec<&str> = snap
            .records
            .iter()
            .filter(|r| {
                r.record
                    .warnings
                    .iter()
                    .any(|w| w.message.contains("several Sidecars"))
            })
            .map(|r| &*r.object.name)
            .collect();
        assert_eq!(&reported, want, "{sidecars:?}");
        for r in &snap.records {
            if let Some(w) = r
                .record
                .warnings
                .iter()
                .find(|w| w.message.contains("several Sidecars"))
            {
                assert_eq!(w.field, "spec.workloadSelector");
                assert!(w.message.contains("only the oldest"), "{}", w.message);
            }
        }
    }
}
