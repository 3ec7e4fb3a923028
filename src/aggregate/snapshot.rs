//! The published view: an immutable, versioned [`MeshSnapshot`] and the [`ChangeSet`] that produced it.
//!
//! Readers [`Snapshots::load`] the current snapshot without locking (arc-swap) and wait for new ones on a
//! `watch` channel of versions, so a slow reader never blocks the aggregator.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, OnceLock},
};

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::{sync::watch, time::Instant};

use crate::{
    config_controller::{self, ConfigSnapshot},
    model::{ClusterId, Endpoint, NetworkGateway, Provider, Service, ServiceKey, ShardKey, StaleAction},
    traffic,
};

/// The merged mesh at one version. Cheap to share: every map holds `Arc`s.
#[derive(Debug, Default)]
pub struct MeshSnapshot {
    /// Increases by one per publish; 0 is the empty start.
    pub version: u64,
    /// One service per key, merged across clusters (attributes from the first cluster, primary first).
    pub services: BTreeMap<ServiceKey, Arc<Service>>,
    /// Endpoints per service, sharded by cluster.
    pub endpoints: BTreeMap<ServiceKey, Arc<EndpointShards>>,
    /// Gateways into each network, from meshNetworks and the registries, resolved and sorted.
    pub gateways: Arc<[NetworkGateway]>,
    /// The gateway DNS names the resolver task must keep resolved.
    pub gateway_hostnames: Arc<BTreeSet<Arc<str>>>,
    /// ★ Remote clusters whose stale-endpoints action is in force (EDS deprioritises or drops their
    /// endpoints).
    pub stale: Arc<BTreeMap<ClusterId, StaleAction>>,
    /// The registries whose complete view it includes, with their generation (a reader that depends on
    /// another registry's services waits for it here).
    pub registries: BTreeMap<ShardKey, u64>,
    /// What changed since version [`ChangeSet::since`].
    pub changes: ChangeSet,
    /// When the oldest change in `changes` happened (the debounce start), so proxy convergence time
    /// counts the debounce as istiod's does. `None` for the empty start.
    pub changed_at: Option<Instant>,
    /// The Istio config in force at this version (DestinationRules, VirtualServices, …).
    pub config: Arc<ConfigSnapshot>,
    /// What the traffic index is built with (mesh config, domain suffix).
    pub settings: traffic::Settings,
    /// `config` indexed, built by the first reader that needs it. Snapshots that changed neither the
    /// config nor the settings share the previous one's cell, so an endpoint churn never rebuilds it.
    pub traffic: Arc<OnceLock<Arc<traffic::Index>>>,
}

impl MeshSnapshot {
    /// The traffic index of this snapshot's config.
    pub fn traffic(&self) -> &traffic::Index {
        self.traffic
            .get_or_init(|| Arc::new(traffic::Index::build(self.config.clone(), self.settings.clone())))
    }
}

/// A service's endpoints, one shard per registry: (provider, cluster) (istiod's `EndpointShards`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct EndpointShards {
    /// (provider, cluster) → its endpoints, sorted by address.
    pub shards: BTreeMap<ShardKey, Arc<[Endpoint]>>,
    /// Union of the endpoints' SPIFFE identities (CDS carries them for secure naming).
    pub service_accounts: BTreeSet<Arc<str>>,
}

impl EndpointShards {
    /// Every endpoint, shard by shard.
    pub fn iter(&self) -> impl Iterator<Item = &Endpoint> {
        self.shards.values().flat_map(|eps| eps.iter())
    }

    /// The endpoints of one provider's shards.
    pub fn of(&self, provider: Provider) -> impl Iterator<Item = &Endpoint> {
        self.shards
            .iter()
            .filter(move |(k, _)| k.provider == provider)
            .flat_map(|(_, eps)| eps.iter())
    }
}

/// What a publish changed. A reader whose last seen version is not [`ChangeSet::since`] missed a change
/// set and must treat the new snapshot as a full change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChangeSet {
    /// The version these changes apply on top of.
    pub since: u64,
    /// Changed services: which clusters' shards changed, and how much must be pushed.
    pub services: BTreeMap<ServiceKey, ServiceChange>,
    /// Mesh-wide reasons to recompute everything (empty for incremental changes).
    pub full: BTreeSet<FullReason>,
    /// Istio objects whose version in force changed.
    #[serde(skip_serializing_if = "config_controller::ChangeSet::is_empty")]
    pub config: config_controller::ChangeSet,
}

/// How one service changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServiceChange {
    /// The clusters whose shard or service changed.
    pub clusters: BTreeSet<ClusterId>,
    /// Endpoints only, or more.
    pub kind: ChangeKind,
}

/// How much of a proxy's config one service change can affect (what the ADS side must regenerate).
/// Ordered: merging keeps the larger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ChangeKind {
    /// Only endpoints changed: EDS for this service.
    #[default]
    Eds,
    /// The service appeared, went, changed, or its identity set changed: CDS and friends too.
    Full,
}

/// Why every proxy needs a full recomputation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum FullReason {
    /// A cluster's shards were all removed.
    ClusterRemoved(ClusterId),
    /// An endpoint network assignment rule changed (namespace label, meshNetworks).
    Networks,
    /// The network gateways changed.
    Gateways,
    /// ★ A remote cluster's stale-endpoints action started or ended.
    Stale(ClusterId),
    /// The mesh config changed (root namespace, defaults every rule falls back to).
    MeshConfig,
}

impl ChangeSet {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.full.is_empty() && self.config.is_empty()
    }

    /// True when more than EDS is needed somewhere.
    pub fn needs_full_push(&self) -> bool {
        !self.full.is_empty()
            || !self.config.is_empty()
            || self.services.values().any(|c| c.kind == ChangeKind::Full)
    }

    /// Records that `cluster`'s part of `key` changed.
    pub fn record(&mut self, key: &ServiceKey, cluster: &ClusterId, kind: ChangeKind) {
        let change = self.services.entry(key.clone()).or_default();
        change.clusters.insert(cluster.clone());
        change.kind = change.kind.max(kind);
    }
}

/// Changes taken in but not yet published: the debounce window they wait in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// When the first of them arrived.
    pub first: Instant,
    /// When they publish unless more arrive (never later than `first` + the debounce maximum).
    pub deadline: Instant,
}

/// Reader handle: cheap to clone, never blocks the writer.
#[derive(Clone)]
pub struct Snapshots {
    current: Arc<ArcSwap<MeshSnapshot>>,
    versions: watch::Receiver<u64>,
    pending: watch::Receiver<Option<Pending>>,
}

impl Snapshots {
    /// The current snapshot (lock-free).
    pub fn load(&self) -> Arc<MeshSnapshot> {
        self.current.load_full()
    }

    /// Waits for a version newer than the last one this handle saw, and returns the snapshot then current.
    /// `None` once the aggregator has stopped.
    pub async fn changed(&mut self) -> Option<Arc<MeshSnapshot>> {
        self.versions.changed().await.ok()?;
        self.versions.borrow_and_update();
        Some(self.load())
    }

    /// A channel of published versions (a new one can be [`Snapshots::load`]ed when it changes).
    pub fn versions(&self) -> watch::Receiver<u64> {
        self.versions.clone()
    }

    /// Changes still inside the debounce window, which the current snapshot does not show yet
    /// (`meshctl explain` says so instead of presenting the old state as the new one).
    pub fn pending(&self) -> Option<Pending> {
        *self.pending.borrow()
    }

    /// Waits until a snapshot satisfies `f` (tests and start-up checks).
    pub async fn wait_for(&mut self, mut f: impl FnMut(&MeshSnapshot) -> bool) -> Arc<MeshSnapshot> {
        loop {
            let snap = self.load();
            if f(&snap) {
                return snap;
            }
            if self.changed().await.is_none() {
                return self.load();
            }
        }
    }
}

/// The single writer's side.
pub(super) struct Publisher {
    current: Arc<ArcSwap<MeshSnapshot>>,
    versions: watch::Sender<u64>,
    pending: watch::Sender<Option<Pending>>,
}

impl Publisher {
    pub(super) fn new() -> (Self, Snapshots) {
        let current = Arc::new(ArcSwap::from_pointee(MeshSnapshot::default()));
        let (versions, rx) = watch::channel(0);
        let (pending, pending_rx) = watch::channel(None);
        let snapshots = Snapshots {
            current: current.clone(),
            versions: rx,
            pending: pending_rx,
        };
        (
            Self {
                current,
                versions,
                pending,
            },
            snapshots,
        )
    }

    /// Shows readers the debounce window changes now wait in. Nobody awaits this channel: readers
    /// only look, so a send wakes no task.
    pub(super) fn pending(&self, window: Option<Pending>) {
        self.pending.send_replace(window);
    }

    /// The last published snapshot.
    pub(super) fn current(&self) -> Arc<MeshSnapshot> {
        self.current.load_full()
    }

    /// Installs `snapshot` (its version must be the next one) and wakes readers.
    pub(super) fn publish(&self, snapshot: MeshSnapshot) {
        let version = snapshot.version;
        self.current.store(Arc::new(snapshot));
        self.versions.send_replace(version);
        self.pending.send_replace(None);
    }
}
