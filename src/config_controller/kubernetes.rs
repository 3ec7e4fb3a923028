//! The Kubernetes source: one kube-rs watcher per Istio kind in the config cluster (as istiod reads
//! Istio config from its own cluster only), over `Api<DynamicObject>` at version `v1` (Istio ≥ 1.22
//! serves every kind there). Each object is parsed where it arrives; a kind whose CRD is missing is
//! reported by name and retried, without stopping the other kinds.
//!
//! Discovery selectors apply (as istiod's config informers share its namespace filter): only objects
//! of the namespaces the config cluster's registry discovers are read. The watches start once that
//! selection is known, and relist when it changes (the store then drops what the list left out).

use std::{collections::BTreeSet, sync::Arc};

use futures::StreamExt;
use kube::{
    Api, Client, ResourceExt,
    api::{ApiResource, DynamicObject},
    runtime::watcher,
};
use tokio::sync::{mpsc::UnboundedSender, watch};
use tracing::{info, warn};

use super::{
    Event, Metrics,
    store::{Parsed, SourceId, SourceState},
};
use crate::kube_watch;
use crate::{
    config::selectors::Selected,
    drain::Tasks,
    istio::{self, Kind, ObjectMeta, ObjectRef, Source},
    kube_errors as errors,
    model::ClusterId,
    readiness::Ready,
    telemetry::{REPEAT_WINDOW, Repeats},
};

/// The version meshd watches each kind at.
pub const WATCH_VERSION: &str = "v1";

/// Where and how to watch.
#[derive(Clone)]
pub struct KubeSource {
    /// The config cluster's client.
    pub client: Client,
    /// Its cluster ID (the objects' source).
    pub cluster: ClusterId,
    /// Its API server URL, for messages.
    pub server: Arc<str>,
    /// Server-side timeout of each watch, in seconds.
    pub watch_timeout: u32,
    /// The config cluster's discovered namespaces (`None` until its registry has listed them).
    pub namespaces: watch::Receiver<Option<Selected>>,
}

/// The API resource of `kind` at [`WATCH_VERSION`].
pub fn api_resource(kind: Kind) -> ApiResource {
    ApiResource {
        group: kind.group().into(),
        version: WATCH_VERSION.into(),
        api_version: format!("{}/{WATCH_VERSION}", kind.group()),
        kind: kind.name().into(),
        plural: kind.plural().into(),
    }
}

/// An object's metadata as the model keeps it.
fn meta(obj: &DynamicObject, cluster: &ClusterId) -> ObjectMeta {
    ObjectMeta {
        namespace: obj.namespace().unwrap_or_default().into(),
        name: obj.name_any().into(),
        labels: obj.labels().clone(),
        annotations: obj.annotations().clone(),
        revision: obj.resource_version().unwrap_or_default(),
        creation_timestamp: obj.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        source: Source::Cluster(cluster.clone()),
    }
}

/// Parses one object: the store's input.
pub fn convert(kind: Kind, obj: &DynamicObject, cluster: &ClusterId) -> (ObjectRef, ObjectMeta, Parsed) {
    let meta = meta(obj, cluster);
    let object = ObjectRef::new(kind, &meta.namespace, &meta.name);
    let spec = obj.data.get("spec").cloned().unwrap_or(serde_json::Value::Null);
    let parsed = match istio::parse(kind, meta.clone(), &spec) {
        Ok((cfg, warnings)) => Parsed::Valid(Arc::new(cfg), warnings),
        Err(e) => Parsed::Rejected {
            field: e.field().to_owned(),
            reason: e.to_string(),
        },
    };
    (object, meta, parsed)
}

/// A watch failure in words; a missing CRD by name.
fn describe(kind: Kind, e: &watcher::Error, src: &KubeSource) -> String {
    let not_found = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 404,
        watcher::Error::WatchError(s) => s.code == 404,
        _ => false,
    };
    if not_found {
        format!(
            "CRD {} (version {WATCH_VERSION}) is not installed in cluster {}: {kind} objects are not read; retrying",
            kind.crd_name(),
            src.cluster
        )
    } else {
        errors::describe(e, &src.server)
    }
}

/// Starts one watcher task per kind. Readiness waits for each kind's first list or first error (a
/// missing CRD must not hold meshd unready).
pub(crate) fn spawn(
    tasks: &Tasks,
    ready: &Ready,
    src: KubeSource,
    tx: UnboundedSender<Event>,
    metrics: Metrics,
) {
    for kind in Kind::ALL {
        let guard = ready.register(format!("config {kind}"));
        let (src, tx, metrics) = (src.clone(), tx.clone(), metrics.clone());
        let stop = tasks.cancelled();
        tasks.spawn(&format!("config-watch {kind}"), async move {
            tokio::select! {
                _ = stop => {}
                _ = watch_kind(kind, src, tx, metrics, guard) => {}
            }
        });
    }
}

async fn watch_kind(
    kind: Kind,
    src: KubeSource,
    tx: UnboundedSender<Event>,
    metrics: Metrics,
    guard: crate::readiness::BlockReady,
) {
    let api: Api<DynamicObject> = Api::all_with(src.client.clone(), &api_resource(kind));
    let watch = || kube_watch::watch(api.clone(), kube_watch::config(src.watch_timeout)).boxed();
    let mut namespaces = src.namespaces.clone();
    let Ok(first) = namespaces.wait_for(Option::is_some).await.map(|s| s.clone()) else {
        return;
    };
    let mut selected = first.unwrap_or(Selected::All);
    let mut events = watch();
    let mut namespaces_open = true;
    let source = SourceId::Cluster(src.cluster.clone());
    let state_name = format!("{source} {kind}");
    let mut guard = Some(guard);
    let mut listing: Option<BTreeSet<ObjectRef>> = None;
    let mut repeats = Repeats::new(REPEAT_WINDOW);
    let send_state = |state: SourceState| {
        let _ = tx.send(Event::State {
            name: state_name.clone(),
            state: Some(state),
        });
    };
    loop {
        let item = tokio::select! {
            item = events.next() => match item {
                Some(item) => item,
                None => return,
            },
            r = namespaces.changed(), if namespaces_open => {
                // A stopped registry leaves the last selection in force.
                namespaces_open = r.is_ok();
                let now = namespaces.borrow_and_update().clone();
                if let Some(now) = now.filter(|n| *n != selected) {
                    selected = now;
                    events = watch();
                }
                continue;
            }
        };
        let ev = match item {
            Ok(ev) => ev,
            Err(e) => {
                let reason = describe(kind, &e, &src);
                if repeats.observe(&reason, tokio::time::Instant::now()) == Some(0) {
                    warn!(cluster = %src.cluster, %kind, error = %reason, "config watch failed");
                }
                send_state(SourceState {
                    synced: false,
                    error: Some(reason),
                });
                guard.take();
                continue;
            }
        };
        match ev {
            watcher::Event::Init => listing = Some(BTreeSet::new()),
            watcher::Event::InitApply(obj) | watcher::Event::Apply(obj)
                if !selected.contains(&obj.namespace().unwrap_or_default()) =>
            {
                // Not (or no longer) discovered: as if deleted, and not listed.
                let object = ObjectRef::new(kind, &obj.namespace().unwrap_or_default(), &obj.name_any());
                let _ = tx.send(Event::Delete {
                    source: source.clone(),
                    object,
                });
            }
            watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) => {
                let (object, meta, parsed) = convert(kind, &obj, &src.cluster);
                let event = match &mut listing {
                    Some(listed) => {
                        listed.insert(object.clone());
                        "add"
                    }
                    None => "update",
                };
                metrics.cfg_event(kind, event);
                let _ = tx.send(Event::Apply {
                    source: source.clone(),
                    object,
                    meta,
                    parsed,
                });
            }
            watcher::Event::Delete(obj) => {
                metrics.cfg_event(kind, "delete");
                let object = ObjectRef::new(kind, &obj.namespace().unwrap_or_default(), &obj.name_any());
                let _ = tx.send(Event::Delete {
                    source: source.clone(),
                    object,
                });
            }
            watcher::Event::InitDone => {
                let listed = listing.take().unwrap_or_default();
                let _ = tx.send(Event::Retain {
                    source: source.clone(),
                    kind: Some(kind),
                    listed,
                });
                if repeats.clear().is_some() {
                    info!(cluster = %src.cluster, %kind, "config watch recovered");
                }
                send_state(SourceState {
                    synced: true,
                    error: None,
                });
                guard.take();
            }
        }
    }
}
