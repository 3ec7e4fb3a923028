//! The store of every Istio object, pure: what each source holds (with its status), which copy is in
//! force, and what each change can affect. Owned by the controller's one writer task; readers get
//! [`ConfigSnapshot`]s.
//!
//! Rules:
//! - an object that turns invalid keeps serving its last valid version (marked rejected); an object
//!   never valid serves nothing; a deletion always removes it;
//! - the same kind/namespace/name from two sources is a conflict: the Kubernetes copy is in force, the
//!   file copy is ignored, and both say so.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    sync::Arc,
};

use serde::Serialize;

use crate::{
    istio::{Config, Kind, ObjectMeta, ObjectRef, Spec, Warning},
    model::ClusterId,
};

/// A source of Istio objects. The order is the precedence in a conflict (Kubernetes first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceId {
    /// The config cluster's API server.
    Cluster(ClusterId),
    /// The `--config-dir` directory.
    Directory,
}

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceId::Cluster(c) => write!(f, "cluster {c}"),
            SourceId::Directory => f.write_str("config directory"),
        }
    }
}

/// How meshd treats one source's copy of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Status {
    /// Valid; in force unless another source's copy wins (then `ignored` says so). Warnings name what
    /// meshd ignores in it.
    Valid,
    /// Invalid; the last valid version from this source (if any) keeps serving.
    Rejected {
        /// The field the first error is on.
        field: String,
        /// Why, naming the object and field (and for files the document and line).
        reason: String,
    },
}

/// What a source sent for one object: parsed, or rejected.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// Valid, with warnings.
    Valid(Arc<Config>, Vec<Warning>),
    /// Rejected: the field and the reason.
    Rejected {
        /// The first offending field.
        field: String,
        /// Why.
        reason: String,
    },
}

/// One source's copy of an object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Metadata of the latest version seen (source, revision), valid or not.
    pub meta: ObjectMeta,
    /// Its status.
    pub status: Status,
    /// Set when another source's copy is in force instead (a conflict): why this one is not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
    /// What meshd ignores in the latest valid version.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// The version this source serves: the latest valid one.
    #[serde(skip)]
    pub serving: Option<Arc<Config>>,
    /// `serving`'s revision, when it is not the latest seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_revision: Option<String>,
}

/// One object whose version in force changed: removed, added or replaced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Change {
    /// The hosts the old and new versions name: proxies that see none of them are unaffected.
    pub hosts: BTreeSet<String>,
}

/// The objects whose version in force changed, each with the hosts it can affect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChangeSet {
    /// By object.
    pub objects: BTreeMap<ObjectRef, Change>,
}

impl ChangeSet {
    /// Nothing in force changed.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The kinds that changed.
    pub fn kinds(&self) -> BTreeSet<Kind> {
        self.objects.keys().map(|o| o.kind).collect()
    }

    /// Every host a change names.
    pub fn hosts(&self) -> BTreeSet<&str> {
        self.objects
            .values()
            .flat_map(|c| c.hosts.iter().map(String::as_str))
            .collect()
    }

    /// Folds `other` (a later change) into this one.
    pub fn merge(&mut self, other: ChangeSet) {
        for (obj, change) in other.objects {
            self.objects.entry(obj).or_default().hosts.extend(change.hosts);
        }
    }

    fn record(&mut self, obj: &ObjectRef, before: Option<&Arc<Config>>, after: Option<&Arc<Config>>) {
        let same = match (before, after) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        let hosts = before.into_iter().chain(after).flat_map(|c| c.hosts());
        self.objects.entry(obj.clone()).or_default().hosts.extend(hosts);
    }
}

/// A source's state per kind (or for the whole source).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceState {
    /// The initial list (or load) completed.
    pub synced: bool,
    /// The last error, until the source recovers (e.g. a missing CRD, a bad file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every object, every source's copy, what is in force. Mutated only by the controller's writer.
#[derive(Debug, Default)]
pub struct Store {
    records: BTreeMap<ObjectRef, BTreeMap<SourceId, Record>>,
    in_force: BTreeMap<ObjectRef, Arc<Config>>,
    sources: BTreeMap<String, SourceState>,
}

impl Store {
    /// A source's new version of an object. Returns what changed in force.
    pub fn apply(&mut self, source: SourceId, obj: ObjectRef, meta: ObjectMeta, parsed: Parsed) -> ChangeSet {
        let copies = self.records.entry(obj.clone()).or_default();
        let previous = copies.remove(&source);
        let record = match parsed {
            Parsed::Valid(cfg, warnings) => {
                // An unchanged object (a relist, a rescan) keeps its Arc: nothing changes in force.
                let cfg = match previous.and_then(|p| p.serving) {
                    Some(prev) if *prev == *cfg => prev,
                    _ => cfg,
                };
                Record {
                    meta,
                    status: Status::Valid,
                    ignored: None,
                    warnings,
                    serving: Some(cfg),
                    serving_revision: None,
                }
            }
            Parsed::Rejected { field, reason } => {
                let (serving, warnings) = previous.map(|p| (p.serving, p.warnings)).unwrap_or_default();
                let serving_revision = serving.as_ref().map(|c| c.meta.revision.clone());
                Record {
                    meta,
                    status: Status::Rejected { field, reason },
                    ignored: None,
                    warnings,
                    serving,
                    serving_revision,
                }
            }
        };
        copies.insert(source, record);
        self.resolve(&obj)
    }

    /// A source no longer has the object.
    pub fn delete(&mut self, source: &SourceId, obj: &ObjectRef) -> ChangeSet {
        if let Some(copies) = self.records.get_mut(obj) {
            copies.remove(source);
            if copies.is_empty() {
                self.records.remove(obj);
            }
        }
        self.resolve(obj)
    }

    /// A source listed everything it has of `kind` (every kind when `None`): deletes the rest.
    pub fn retain(
        &mut self,
        source: &SourceId,
        kind: Option<Kind>,
        listed: &BTreeSet<ObjectRef>,
    ) -> ChangeSet {
        let gone: Vec<ObjectRef> = self
            .records
            .iter()
            .filter(|(o, copies)| {
                kind.is_none_or(|k| o.kind == k) && copies.contains_key(source) && !listed.contains(*o)
            })
            .map(|(o, _)| o.clone())
            .collect();
        let mut changes = ChangeSet::default();
        for obj in gone {
            changes.merge(self.delete(source, &obj));
        }
        changes
    }

    /// Records a source's state under `name` (`cluster c1 DestinationRule`, `config directory`);
    /// `None` forgets it (a file that was bad and is fixed).
    pub fn set_source_state(&mut self, name: String, state: Option<SourceState>) {
        match state {
            Some(state) => self.sources.insert(name, state),
            None => self.sources.remove(&name),
        };
    }

    /// Picks the copy in force (the first source's, in [`SourceId`] order), marks the others ignored,
    /// and returns the change in force.
    fn resolve(&mut self, obj: &ObjectRef) -> ChangeSet {
        let before = self.in_force.get(obj).cloned();
        let after = match self.records.get_mut(obj) {
            None => None,
            Some(copies) => {
                let mut winner: Option<SourceId> = None;
                for (source, record) in copies.iter_mut() {
                    record.ignored = winner
                        .as_ref()
                        .map(|w| format!("conflict: {w} also has {obj}, and its copy is in force"));
                    winner.get_or_insert_with(|| source.clone());
                }
                winner
                    .and_then(|w| copies.get(&w))
                    .and_then(|r| r.serving.clone())
            }
        };
        match &after {
            Some(cfg) => self.in_force.insert(obj.clone(), cfg.clone()),
            None => self.in_force.remove(obj),
        };
        let mut changes = ChangeSet::default();
        changes.record(obj, before.as_ref(), after.as_ref());
        changes
    }

    /// An immutable view for readers.
    pub fn snapshot(&self, version: u64, changes: ChangeSet) -> ConfigSnapshot {
        let shadowed = shadowed_sidecars(&self.in_force);
        ConfigSnapshot {
            version,
            in_force: self.in_force.clone(),
            records: self
                .records
                .iter()
                .flat_map(|(o, copies)| copies.iter().map(move |(s, r)| (o.clone(), s.clone(), r.clone())))
                .map(|(object, source, mut record)| {
                    if let Some(w) = shadowed.get(&object).filter(|_| record.ignored.is_none()) {
                        record.warnings.push(w.clone());
                    }
                    RecordView {
                        object,
                        source,
                        record,
                    }
                })
                .collect(),
            sources: self.sources.clone(),
            changes,
        }
    }
}

/// A cross-object rule no single object can break: a namespace's Sidecars without a `workloadSelector`
/// beyond the oldest (creation time, then name). istiod applies only the oldest and its analyzer reports
/// the others (`MultipleSidecarsWithoutWorkloadSelectors`); each of them gets a warning naming it.
fn shadowed_sidecars(in_force: &BTreeMap<ObjectRef, Arc<Config>>) -> BTreeMap<ObjectRef, Warning> {
    let mut by_namespace: BTreeMap<&str, Vec<(&ObjectRef, &Config)>> = BTreeMap::new();
    for (obj, cfg) in in_force.iter().filter(|(o, _)| o.kind == Kind::Sidecar) {
        if let Spec::Sidecar(sidecar) = &cfg.spec
            && sidecar.workload_selector.is_none()
        {
            by_namespace.entry(&obj.namespace).or_default().push((obj, cfg));
        }
    }
    let mut shadowed = BTreeMap::new();
    for (namespace, mut sidecars) in by_namespace {
        sidecars.sort_by(|(_, a), (_, b)| {
            (a.meta.creation_timestamp.as_deref(), &a.meta.name)
                .cmp(&(b.meta.creation_timestamp.as_deref(), &b.meta.name))
        });
        let Some(((_, oldest), rest)) = sidecars.split_first() else {
            continue;
        };
        for (obj, _) in rest {
            let message = format!(
                "namespace {namespace} has several Sidecars without a workloadSelector: only the oldest, {}, \
                 applies (as in istiod)",
                oldest.meta.name
            );
            shadowed.insert(
                (*obj).clone(),
                Warning {
                    field: "spec.workloadSelector".into(),
                    message,
                },
            );
        }
    }
    shadowed
}

/// One source's copy of an object, as `/debug/configz` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RecordView {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The source holding this copy.
    #[serde(skip)]
    pub source: SourceId,
    /// The copy.
    #[serde(flatten)]
    pub record: Record,
}

/// What readers see: the objects in force, every copy with its status, the sources' states, and the
/// change from the previous snapshot.
#[derive(Debug, Clone, Default)]
pub struct ConfigSnapshot {
    /// Increases by one per snapshot.
    pub version: u64,
    in_force: BTreeMap<ObjectRef, Arc<Config>>,
    /// Every source's copy of every object.
    pub records: Vec<RecordView>,
    /// Each source's state (`cluster c1 DestinationRule`, `config directory`).
    pub sources: BTreeMap<String, SourceState>,
    /// What changed in force since the snapshot `version - 1`.
    pub changes: ChangeSet,
}

impl ConfigSnapshot {
    /// A snapshot holding exactly `configs` (fixtures and tests; no sources, no change set).
    #[cfg(any(test, feature = "testing"))]
    pub fn from_configs(version: u64, configs: impl IntoIterator<Item = Arc<Config>>) -> Self {
        Self {
            version,
            in_force: configs.into_iter().map(|c| (c.object_ref(), c)).collect(),
            ..Self::default()
        }
    }

    /// The version of `obj` in force.
    pub fn get(&self, obj: &ObjectRef) -> Option<&Arc<Config>> {
        self.in_force.get(obj)
    }

    /// Every object of `kind` in force, by namespace and name.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Arc<Config>> {
        let start = ObjectRef::new(kind, "", "");
        self.in_force
            .range(start..)
            .take_while(move |(o, _)| o.kind == kind)
            .map(|(_, c)| c)
    }

    /// Every object in force.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Config>> {
        self.in_force.values()
    }

    /// What changed in force since `prev`: the recorded change set when `prev` is the previous
    /// snapshot, else a diff (a reader that skipped snapshots loses nothing).
    pub fn changes_since(&self, prev: &ConfigSnapshot) -> ChangeSet {
        if prev.version + 1 == self.version {
            return self.changes.clone();
        }
        let mut changes = ChangeSet::default();
        let keys: BTreeSet<&ObjectRef> = self.in_force.keys().chain(prev.in_force.keys()).collect();
        for obj in keys {
            changes.record(obj, prev.in_force.get(obj), self.in_force.get(obj));
        }
        changes
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
