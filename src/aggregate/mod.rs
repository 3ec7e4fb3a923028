//! The aggregate: a single writer task merges every cluster's registry into one view and publishes it as
//! immutable, versioned [`MeshSnapshot`]s.
//!
//! Registries send [`Update`]s over a bounded channel (back-pressure, not unbounded memory). The task
//! applies them to its [`index::Index`] at once, and publishes when the [`debounce`] says (istiod's quiet
//! period; ★ endpoint-only bursts paced, [`EdsDebounce`]), so a burst becomes one snapshot whose [`ChangeSet`] names every service that changed, in which cluster, and
//! whether EDS alone suffices. It never does I/O and never holds a lock.
//!
//! Also here: the gateway set each snapshot carries, found by the pure [`gateways`] functions and its
//! DNS names kept resolved by [`dns`]; the
//! merged view's debug routes ([`routes`]); `pilot_debounce_time` ([`Metrics`]).

mod debounce;
mod debug;
pub mod dns;
pub mod gateways;
mod index;
mod metrics;
mod snapshot;
#[cfg(test)]
mod tests;

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

pub use debounce::EdsDebounce;
pub use debug::routes;
pub use metrics::Metrics;
pub use snapshot::{
    ChangeKind, ChangeSet, EndpointShards, FullReason, MeshSnapshot, Pending, ServiceChange, Snapshots,
};

use crate::{
    config::{MeshConfig, MeshNetworks},
    config_controller::{self, ConfigSnapshot},
    drain::Tasks,
    model::{ClusterId, Endpoint, NetworkGateway, Provider, Service, ServiceKey, ShardKey, StaleAction},
};

/// Pending updates the aggregator buffers before registries wait.
const CHANNEL_CAPACITY: usize = 4096;

/// One registry instance: its provider, its cluster and a generation that grows with every kubeconfig
/// rotation. The (provider, cluster) pair names the shards it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryId {
    /// Kubernetes, or the ServiceEntry registry.
    pub provider: Provider,
    /// The cluster.
    pub cluster: ClusterId,
    /// Unique per registry instance, increasing.
    pub generation: u64,
}

impl RegistryId {
    /// A Kubernetes registry instance of `cluster`.
    pub fn kubernetes(cluster: ClusterId, generation: u64) -> Self {
        Self {
            provider: Provider::Kubernetes,
            cluster,
            generation,
        }
    }

    /// The shards it writes.
    pub fn shard(&self) -> ShardKey {
        ShardKey {
            provider: self.provider,
            cluster: self.cluster.clone(),
        }
    }
}

/// What a registry tells the aggregator.
#[derive(Debug)]
pub enum Update {
    /// The registry's complete view once synced: becomes the cluster's owner, prunes what it lacks.
    Replace {
        /// Sender.
        from: RegistryId,
        /// Every service of the cluster.
        services: Vec<Arc<Service>>,
        /// Every non-empty endpoint list of the cluster.
        endpoints: Vec<(ServiceKey, Arc<[Endpoint]>)>,
    },
    /// A service was added, changed (`Some`) or deleted (`None`).
    Service {
        /// Sender.
        from: RegistryId,
        /// Which service.
        key: ServiceKey,
        /// Its new state.
        service: Option<Arc<Service>>,
    },
    /// A service's endpoints in this cluster (empty: none left).
    Endpoints {
        /// Sender.
        from: RegistryId,
        /// Which service.
        key: ServiceKey,
        /// Sorted by address.
        endpoints: Arc<[Endpoint]>,
    },
    /// The cluster's network assignment changed (its endpoints follow as `Endpoints` updates).
    NetworkChanged {
        /// Sender.
        from: RegistryId,
    },
    /// A gateway DNS name now resolves to these addresses (from the resolver task; sent only on change).
    GatewayAddresses {
        /// The name, as a gateway Service or meshNetworks gave it.
        hostname: Arc<str>,
        /// Its addresses, sorted.
        addresses: Vec<std::net::IpAddr>,
    },
    /// ★ A remote cluster's stale-endpoints action now in force (`None`: none, its endpoints are
    /// served as usual); see `multicluster::stale`.
    Stale {
        /// The cluster.
        cluster: ClusterId,
        /// What EDS does with its endpoints.
        action: Option<StaleAction>,
    },
    /// The registry is gone: drop its shards, unless a newer generation already owns them.
    Remove {
        /// Which registry.
        shard: ShardKey,
        /// The newest generation the caller started for it.
        generation: u64,
    },
}

/// Where registries send updates. Cheap to clone.
#[derive(Clone, Debug)]
pub struct UpdateSender(mpsc::Sender<Update>);

impl UpdateSender {
    /// Sends an update, waiting while the aggregator is behind. False once it has stopped.
    pub async fn send(&self, update: Update) -> bool {
        self.0.send(update).await.is_ok()
    }
}

/// Aggregator settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The config cluster: its services win attribute merges.
    pub primary: ClusterId,
    /// Quiet time before a publish.
    pub debounce_after: Duration,
    /// Longest a publish may be delayed.
    pub debounce_max: Duration,
    /// How endpoint-only bursts publish.
    pub eds_debounce: EdsDebounce,
    /// `pilot_debounce_time`.
    pub metrics: Metrics,
    /// The cluster domain suffix (Istio config short names resolve with it).
    pub domain_suffix: Arc<str>,
}

/// Builds the aggregator (no I/O, no task yet). Returns it, where registries send, and the reader handle.
pub fn new(
    opts: Options,
    networks: watch::Receiver<Arc<MeshNetworks>>,
) -> (Aggregator, UpdateSender, Snapshots) {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (publisher, snapshots) = snapshot::Publisher::new();
    let aggregator = Aggregator {
        writer: Writer {
            index: index::Index::new(opts.primary),
            debounce: debounce::Debounce::new(opts.debounce_after, opts.debounce_max, opts.eds_debounce),
            publisher,
            networks,
            ignored_gateways: Vec::new(),
            metrics: opts.metrics,
            config: Inputs::closed(),
            settings: crate::traffic::Settings::new(Arc::new(MeshConfig::default()), &opts.domain_suffix),
            domain_suffix: opts.domain_suffix,
            config_seen: Arc::default(),
            config_changes: config_controller::ChangeSet::default(),
        },
        rx,
    };
    (aggregator, UpdateSender(tx), snapshots)
}

/// The single writer of the merged view, with its inbox. Start it with [`Aggregator::spawn`].
pub struct Aggregator {
    writer: Writer,
    rx: mpsc::Receiver<Update>,
}

impl Aggregator {
    /// Follows the Istio config store and the mesh config: each snapshot carries the config in force,
    /// so registry data and traffic rules reach proxies in one version. Without this, no config.
    pub fn with_config(
        mut self,
        istio: watch::Receiver<Arc<ConfigSnapshot>>,
        mesh: watch::Receiver<Arc<MeshConfig>>,
    ) -> Self {
        self.writer.settings =
            crate::traffic::Settings::new(mesh.borrow().clone(), &self.writer.domain_suffix);
        self.writer.config = Inputs {
            istio: Some(istio),
            mesh: Some(mesh),
        };
        self
    }

    /// Runs the aggregator task until `tasks` is cancelled or every sender is gone.
    pub fn spawn(self, tasks: &Tasks) {
        tasks.spawn("aggregate", self.writer.run(self.rx, tasks.cancelled()));
    }
}

struct Writer {
    index: index::Index,
    debounce: debounce::Debounce,
    publisher: snapshot::Publisher,
    networks: watch::Receiver<Arc<MeshNetworks>>,
    /// Labelled Services last found unusable as gateways (each is warned about once).
    ignored_gateways: Vec<gateways::Ignored>,
    metrics: Metrics,
    /// Where Istio and mesh config come from.
    config: Inputs,
    /// The traffic settings snapshots carry (from the latest mesh config).
    settings: crate::traffic::Settings,
    domain_suffix: Arc<str>,
    /// The Istio config the next snapshot carries.
    config_seen: Arc<ConfigSnapshot>,
    /// What changed in it since the last publish.
    config_changes: config_controller::ChangeSet,
}

/// The config receivers; `None` once closed (or never given).
struct Inputs {
    istio: Option<watch::Receiver<Arc<ConfigSnapshot>>>,
    mesh: Option<watch::Receiver<Arc<MeshConfig>>>,
}

impl Inputs {
    fn closed() -> Self {
        Self {
            istio: None,
            mesh: None,
        }
    }
}

/// Waits for a change on an open receiver; never resolves for a closed one.
async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) -> bool {
    match rx {
        Some(r) => r.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Update>, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut networks_open = true;
        loop {
            let deadline = self.debounce.deadline();
            tokio::select! {
                _ = &mut stop => return,
                update = rx.recv() => match update {
                    Some(u) => {
                        self.index.apply(u);
                        // Drain what is already queued before looking at the clock again.
                        while let Ok(u) = rx.try_recv() {
                            self.index.apply(u);
                        }
                    }
                    None => return,
                },
                r = self.networks.changed(), if networks_open => match r {
                    Ok(()) => self.index.record_full(FullReason::Networks),
                    Err(_) => networks_open = false,
                },
                open = changed(&mut self.config.istio) => match open {
                    true => self.take_istio_config(),
                    false => self.config.istio = None,
                },
                open = changed(&mut self.config.mesh) => match open {
                    true => self.take_mesh_config(),
                    false => self.config.mesh = None,
                },
                _ = sleep_until(deadline), if deadline.is_some() => {
                    self.publish();
                    continue;
                }
            }
            if self.index.has_changes() || !self.config_changes.is_empty() {
                let full = self.index.needs_full_push() || !self.config_changes.is_empty();
                self.debounce.record(tokio::time::Instant::now(), full);
                if let (Some(first), Some(deadline)) = (self.debounce.first(), self.debounce.deadline()) {
                    self.publisher.pending(Some(Pending { first, deadline }));
                }
            }
        }
    }

    /// Adopts the config store's newest snapshot, recording what changed in force since the last one
    /// taken (a diff when snapshots were skipped).
    fn take_istio_config(&mut self) {
        let Some(rx) = &mut self.config.istio else {
            return;
        };
        let next = rx.borrow_and_update().clone();
        self.config_changes.merge(next.changes_since(&self.config_seen));
        self.config_seen = next;
    }

    /// Adopts a new mesh config: every rule's defaults may have changed.
    fn take_mesh_config(&mut self) {
        let Some(rx) = &mut self.config.mesh else {
            return;
        };
        let mesh = rx.borrow_and_update().clone();
        self.settings = crate::traffic::Settings::new(mesh, &self.domain_suffix);
        self.index.record_full(FullReason::MeshConfig);
    }

    /// Builds the next snapshot off the current index and swaps it in.
    fn publish(&mut self) {
        let first = self.debounce.first();
        if let Some(first) = first {
            self.metrics.debounced(first.elapsed());
        }
        self.debounce.published(tokio::time::Instant::now());
        let previous = self.publisher.current();
        let mut changes = self.index.take_changes();
        changes.config = std::mem::take(&mut self.config_changes);
        let traffic = if changes.config.is_empty() && !changes.full.contains(&FullReason::MeshConfig) {
            previous.traffic.clone()
        } else {
            Default::default()
        };
        let gateways_dirty = self.index.take_gateways_dirty();
        let (gateways, gateway_hostnames) = if changes.needs_full_push() || gateways_dirty {
            let (gws, names) = self.gateways();
            if *gws != *previous.gateways {
                changes.full.insert(FullReason::Gateways);
            }
            (gws, names)
        } else {
            (previous.gateways.clone(), previous.gateway_hostnames.clone())
        };
        changes.since = previous.version;
        let version = previous.version + 1;
        debug!(
            version,
            services = changes.services.len(),
            full = changes.needs_full_push(),
            "publishing snapshot"
        );
        self.publisher.publish(MeshSnapshot {
            version,
            services: self.index.services.clone(),
            endpoints: self.index.endpoints.clone(),
            gateways,
            gateway_hostnames,
            stale: self.index.stale.clone(),
            registries: self.index.registries(),
            changes,
            changed_at: first,
            config: self.config_seen.clone(),
            settings: self.settings.clone(),
            traffic,
        });
    }

    /// The gateway set from meshNetworks and every cluster's own Services, DNS names expanded with what
    /// the resolver task last reported.
    fn gateways(&mut self) -> (Arc<[NetworkGateway]>, Arc<BTreeSet<Arc<str>>>) {
        let networks = self.networks.borrow_and_update().clone();
        let found = gateways::discover(&networks, self.index.cluster_services());
        for i in found
            .ignored
            .iter()
            .filter(|i| !self.ignored_gateways.contains(i))
        {
            warn!(cluster = %i.cluster, service = %i.hostname, reason = %i.reason, "labelled network gateway ignored");
        }
        self.ignored_gateways = found.ignored;
        let names = gateways::hostnames(&found.candidates);
        self.index.retain_dns(&names);
        let gws = gateways::resolve(&found.candidates, self.index.dns());
        (gws.into(), Arc::new(names))
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
