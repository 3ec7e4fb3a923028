//! The config controller (istiod's `initConfigController`): Istio objects from the config cluster
//! (`kubernetes`, kube-rs watchers) and from `--config-dir` (`file`, polled YAML) into ONE store
//! (`store`) owned by one writer task, which publishes immutable [`ConfigSnapshot`]s, each with the
//! change set of what it changed in force (per object, with the hosts it names).
//!
//! Readers take a [`ConfigHandle`]: `subscribe()` gives a `watch::Receiver<Arc<ConfigSnapshot>>`;
//! `ConfigSnapshot::changes_since(prev)` says what changed even across skipped snapshots.

pub mod file;
pub mod kubernetes;
mod metrics;
pub mod store;
pub mod yaml;

pub use metrics::Metrics;
pub use store::{Change, ChangeSet, ConfigSnapshot, SourceId, SourceState, Status};

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::Arc,
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};
use tracing::warn;

use self::store::{Parsed, Store};
use crate::{
    istio::{Kind, ObjectMeta, ObjectRef, Source, Warning},
    start::StartContext,
};

/// Events handled per batch: one snapshot per burst.
const BATCH: usize = 512;

/// The controller's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--config-dir`: YAML files of Istio objects, besides the config cluster.
    pub config_dir: Option<PathBuf>,
    /// How often the directory is checked.
    pub poll: Duration,
}

/// What sources tell the writer.
#[derive(Debug)]
pub(crate) enum Event {
    /// A source's new version of an object.
    Apply {
        source: SourceId,
        object: ObjectRef,
        meta: ObjectMeta,
        parsed: Parsed,
    },
    /// A source's object is gone.
    Delete { source: SourceId, object: ObjectRef },
    /// A source listed all it has (of one kind, or of every kind): the rest is gone.
    Retain {
        source: SourceId,
        kind: Option<Kind>,
        listed: BTreeSet<ObjectRef>,
    },
    /// A source's state (`None`: forget this name).
    State {
        name: String,
        state: Option<SourceState>,
    },
}

/// Read access to the store's snapshots. Cheap to clone.
#[derive(Clone)]
pub struct ConfigHandle {
    rx: watch::Receiver<Arc<ConfigSnapshot>>,
}

impl ConfigHandle {
    /// A receiver of every new snapshot (the latest is `borrow()`ed; `changed()` waits for the next).
    pub fn subscribe(&self) -> watch::Receiver<Arc<ConfigSnapshot>> {
        self.rx.clone()
    }

    /// The latest snapshot.
    pub fn current(&self) -> Arc<ConfigSnapshot> {
        self.rx.borrow().clone()
    }
}

/// The controller, built but not started.
pub struct ConfigController {
    opts: Options,
    tx: mpsc::UnboundedSender<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
    publish: watch::Sender<Arc<ConfigSnapshot>>,
    metrics: Metrics,
}

/// Builds the controller without I/O; the handle serves an empty snapshot until it starts.
pub fn new(opts: Options, metrics: Metrics) -> (ConfigController, ConfigHandle) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (publish, snapshots) = watch::channel(Arc::new(ConfigSnapshot::default()));
    let controller = ConfigController {
        opts,
        tx,
        rx,
        publish,
        metrics,
    };
    (controller, ConfigHandle { rx: snapshots })
}

impl ConfigController {
    /// Starts the writer, the directory source (when configured) and the Kubernetes source (when
    /// given a config cluster).
    pub fn start(self, ctx: &StartContext, kube: Option<kubernetes::KubeSource>) {
        let ConfigController {
            opts,
            tx,
            rx,
            publish,
            metrics,
        } = self;
        if let Some(src) = kube {
            kubernetes::spawn(&ctx.tasks, &ctx.ready, src, tx.clone(), metrics.clone());
        }
        if let Some(dir) = opts.config_dir {
            file::spawn(&ctx.tasks, &ctx.ready, dir, opts.poll, tx.clone());
        }
        drop(tx);
        let stop = ctx.tasks.cancelled();
        ctx.tasks.spawn("config-store", async move {
            tokio::select! {
                _ = stop => {}
                _ = write(rx, publish, metrics) => {}
            }
        });
    }
}

/// The one writer: applies each batch of events to the store and publishes one snapshot per batch.
async fn write(
    mut rx: mpsc::UnboundedReceiver<Event>,
    publish: watch::Sender<Arc<ConfigSnapshot>>,
    metrics: Metrics,
) {
    let mut store = Store::default();
    let mut version = 0;
    let mut batch = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        let mut changes = ChangeSet::default();
        for ev in batch.drain(..) {
            changes.merge(apply(&mut store, ev, &metrics));
        }
        version += 1;
        let snapshot = store.snapshot(version, changes);
        metrics.set_objects(&counts(&snapshot));
        publish.send_replace(Arc::new(snapshot));
    }
}

/// Applies one event (pure but for the rejection log line and counter).
pub(crate) fn apply(store: &mut Store, ev: Event, metrics: &Metrics) -> ChangeSet {
    match ev {
        Event::Apply {
            source,
            object,
            meta,
            parsed,
        } => {
            if let Parsed::Rejected { reason, .. } = &parsed {
                warn!(%reason, "Istio config rejected");
                metrics.rejected(object.kind, format!("{}/{}", object.namespace, object.name));
            }
            store.apply(source, object, meta, parsed)
        }
        Event::Delete { source, object } => store.delete(&source, &object),
        Event::Retain { source, kind, listed } => store.retain(&source, kind, &listed),
        Event::State { name, state } => {
            store.set_source_state(name, state);
            ChangeSet::default()
        }
    }
}

fn counts(snapshot: &ConfigSnapshot) -> Vec<(Kind, &'static str, i64)> {
    let mut counts: BTreeMap<(Kind, &'static str), i64> = BTreeMap::new();
    for r in &snapshot.records {
        *counts.entry((r.object.kind, view_status(&r.record))).or_default() += 1;
    }
    counts.into_iter().map(|((k, s), n)| (k, s, n)).collect()
}

fn view_status(r: &store::Record) -> &'static str {
    match (&r.ignored, &r.status) {
        (Some(_), _) => "ignored",
        (None, Status::Rejected { .. }) => "rejected",
        (None, Status::Valid) => "valid",
    }
}

/// One source's copy of one object, as `/debug/configz` shows it and `meshctl analyze` reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
    /// The kind.
    pub kind: Kind,
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// Where this copy came from.
    pub source: Source,
    /// Its latest revision.
    pub revision: String,
    /// `valid`, `rejected` or `ignored` (another source's copy is in force).
    pub status: String,
    /// Why it was rejected or ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The offending field of a rejected object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The revision still serving while the latest is rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_revision: Option<String>,
    /// What meshd ignores in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// The Istio part of `/debug/configz`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigzView {
    /// The snapshot's version.
    pub version: u64,
    /// Each source's state.
    pub sources: BTreeMap<String, SourceState>,
    /// Every copy of every object, by kind, namespace, name and source.
    pub objects: Vec<ObjectView>,
}

/// The configz view of a snapshot.
pub fn configz(snapshot: &ConfigSnapshot) -> ConfigzView {
    let objects = snapshot
        .records
        .iter()
        .map(|r| {
            let rec = &r.record;
            let (reason, field) = match (&rec.ignored, &rec.status) {
                (Some(why), _) => (Some(why.clone()), None),
                (None, Status::Rejected { field, reason }) => (Some(reason.clone()), Some(field.clone())),
                (None, Status::Valid) => (None, None),
            };
            ObjectView {
                kind: r.object.kind,
                namespace: r.object.namespace.to_string(),
                name: r.object.name.to_string(),
                source: rec.meta.source.clone(),
                revision: rec.meta.revision.clone(),
                status: view_status(rec).to_owned(),
                reason,
                field,
                serving_revision: rec.serving_revision.clone(),
                warnings: rec.warnings.clone(),
            }
        })
        .collect();
    ConfigzView {
        version: snapshot.version,
        sources: snapshot.sources.clone(),
        objects,
    }
}
