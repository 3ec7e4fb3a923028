//! Cluster discovery, assembled: the aggregate, the config cluster's registry and the secret
//! controller for remote clusters. Both the real (kubeconfig / in-cluster) and the sandbox start-up
//! paths call [`new`] then [`ClusterDiscovery::start`]. Does NOT: own any state, metric or debug
//! route (the aggregate, registries and `multicluster` do); it only wires them.

use std::{
    collections::BTreeSet,
    sync::{Arc, atomic::AtomicU64},
    time::Duration,
};

use tokio::sync::watch;

use crate::{
    aggregate::{self, Aggregator, Snapshots, UpdateSender},
    config::{MeshConfig, MeshNetworks, selectors::Selected},
    config_controller::ConfigHandle,
    model::ClusterId,
    multicluster::{
        self,
        cluster::Env,
        controller::Controller,
        kubeconfig::InsecureOption,
        status::{Clusters, StatusSource},
    },
    registry::{self, namespaces::Selection, service::Context},
    serviceentry,
    start::StartContext,
};

/// Requests per second each cluster's client may make (client-go's remote default is far lower; istiod
/// raises it to this order for remote registries).
const CLIENT_QPS: u64 = 50;

/// Cluster discovery settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// meshd's own (config) cluster.
    pub cluster_id: ClusterId,
    /// Namespace of remote secrets and of the network label.
    pub system_namespace: String,
    /// Service DNS suffix.
    pub domain_suffix: String,
    /// SPIFFE trust domain of endpoint identities.
    pub trust_domain: String,
    /// How long a remote cluster may hold readiness.
    pub remote_cluster_timeout: Duration,
    /// ★ The mesh-wide stale-endpoints policy.
    pub stale: crate::multicluster::stale::StalePolicy,
    /// Server-side timeout of every watch, in seconds (silent 5 s longer: re-established).
    pub watch_timeout: u32,
    /// Snapshot debounce quiet period.
    pub debounce_after: Duration,
    /// Snapshot debounce maximum delay.
    pub debounce_max: Duration,
    /// ★ How endpoint-only bursts publish.
    pub eds_debounce: aggregate::EdsDebounce,
    /// Kubeconfig features remote secrets may use.
    pub insecure_kubeconfig_options: BTreeSet<InsecureOption>,
    /// Remote kubeconfigs from this folder instead of Secrets, polled every `config_poll`.
    pub kubeconfig_dir: Option<std::path::PathBuf>,
    /// How often the kubeconfig folder is read.
    pub config_poll: Duration,
}

/// The metrics cluster discovery records, each owned by the module that counts it.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// `pilot_k8s_reg_events`.
    pub registry: registry::Metrics,
    /// `pilot_debounce_time`.
    pub aggregate: aggregate::Metrics,
    /// Sync timeouts and the cluster gauges (over the same [`Clusters`] passed to [`new`]).
    pub multicluster: multicluster::Metrics,
}

impl Metrics {
    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self {
            registry: registry::Metrics::unregistered(),
            aggregate: aggregate::Metrics::unregistered(),
            multicluster: multicluster::Metrics::unregistered(),
        }
    }
}

/// What the rest of meshd reads. Cheap to clone.
#[derive(Clone)]
pub struct ClusterView {
    /// The merged view: `load()` it, or wait for `changed()`.
    pub snapshots: Snapshots,
    /// Per-cluster status (`/debug/clusterz`).
    pub clusters: Clusters,
    /// The config cluster's discovered namespaces (`None` until listed), which the config controller
    /// and the root publisher follow.
    pub namespaces: watch::Receiver<Option<Selected>>,
}

/// Cluster discovery, built but not started.
pub struct ClusterDiscovery {
    opts: Options,
    networks: watch::Receiver<Arc<MeshNetworks>>,
    /// The mesh config the traffic index follows.
    mesh: watch::Receiver<Arc<MeshConfig>>,
    aggregator: Aggregator,
    updates: UpdateSender,
    view: ClusterView,
    metrics: Metrics,
    selected: watch::Sender<Option<Selected>>,
}

/// Builds cluster discovery without I/O; the secret controller will publish into `clusters`. The view
/// is usable (empty) at once, e.g. for debug routes.
pub fn new(
    opts: Options,
    networks: watch::Receiver<Arc<MeshNetworks>>,
    clusters: Clusters,
    metrics: Metrics,
) -> (ClusterDiscovery, ClusterView) {
    let (aggregator, updates, snapshots) = aggregate::new(
        aggregate::Options {
            primary: opts.cluster_id.clone(),
            debounce_after: opts.debounce_after,
            debounce_max: opts.debounce_max,
            eds_debounce: opts.eds_debounce,
            metrics: metrics.aggregate.clone(),
            domain_suffix: opts.domain_suffix.as_str().into(),
        },
        networks.clone(),
    );
    let (selected, namespaces) = watch::channel(None);
    let view = ClusterView {
        snapshots,
        clusters,
        namespaces,
    };
    let discovery = ClusterDiscovery {
        opts,
        networks,
        mesh: watch::channel(Arc::new(MeshConfig::default())).1,
        aggregator,
        updates,
        view: view.clone(),
        metrics,
        selected,
    };
    (discovery, view)
}

impl ClusterDiscovery {
    /// Follows `mesh` (root namespace, traffic defaults) instead of the default mesh config.
    pub fn with_mesh_config(mut self, mesh: watch::Receiver<Arc<MeshConfig>>) -> Self {
        self.mesh = mesh;
        self
    }

    /// Starts the aggregator, the config cluster's registry (readiness waits for its initial sync) and
    /// the secret controller (readiness waits for each remote cluster, up to the timeout). `server` is
    /// the primary's API server URL, for messages.
    pub fn start(self, ctx: &StartContext, primary: kube::Client, server: &str, istio: &ConfigHandle) {
        let ClusterDiscovery {
            opts,
            networks,
            mesh,
            aggregator,
            updates,
            view,
            metrics,
            selected,
        } = self;
        aggregator
            .with_config(istio.subscribe(), mesh.clone())
            .spawn(&ctx.tasks);
        aggregate::dns::spawn(
            &ctx.tasks,
            Arc::new(aggregate::dns::SystemResolver),
            view.snapshots.clone(),
            updates.clone(),
        );
        let conv = Context {
            cluster: opts.cluster_id.clone(),
            domain_suffix: opts.domain_suffix.as_str().into(),
            trust_domain: opts.trust_domain.as_str().into(),
        };
        let generations = Arc::new(AtomicU64::new(0));
        let (pods, pods_rx) = watch::channel(registry::ClusterWorkloads::default());
        let (pods_wanted, pods_wanted_rx) = watch::channel(false);
        let progress = registry::spawn(
            &ctx.tasks,
            primary.clone(),
            registry::Options {
                id: aggregate::RegistryId::kubernetes(opts.cluster_id.clone(), 0),
                ctx: conv.clone(),
                system_namespace: opts.system_namespace.clone(),
                networks: networks.clone(),
                metrics: metrics.registry.clone(),
                watch_timeout: opts.watch_timeout,
                server: server.into(),
                workloads: Some(pods.clone()),
                workloads_wanted: Some(pods_wanted_rx.clone()),
                selection: Selection::mesh_wide(mesh.clone()),
                selected: Some(selected),
            },
            updates.clone(),
        );
        // ServiceEntries and WorkloadEntries: the `External` registry of the config cluster.
        serviceentry::spawn(
            &ctx.tasks,
            &ctx.ready,
            serviceentry::Options {
                ctx: serviceentry::Context {
                    cluster: opts.cluster_id.clone(),
                    trust_domain: conv.trust_domain.clone(),
                    networks: Default::default(),
                },
                updates: updates.clone(),
                configs: istio.subscribe(),
                networks: networks.clone(),
                snapshots: view.snapshots.clone(),
                pods: pods_rx,
                pods_wanted,
            },
        );
        hold_until_synced(ctx, &opts.cluster_id, progress.clone());
        let controller = Controller {
            env: Env {
                updates,
                ctx: conv,
                system_namespace: opts.system_namespace,
                networks,
                mesh,
                workloads: pods,
                workloads_wanted: pods_wanted_rx,
                timeout: opts.remote_cluster_timeout,
                stale: opts.stale,
                watch_timeout: opts.watch_timeout,
                allowed: Arc::new(opts.insecure_kubeconfig_options),
                qps: CLIENT_QPS,
                generations,
                metrics: metrics.multicluster,
                registry_metrics: metrics.registry,
            },
            own: opts.cluster_id,
            clusters: view.clusters,
            own_status: StatusSource::Registry(progress),
            server: server.into(),
            kubeconfig_dir: opts.kubeconfig_dir.map(|d| (d, opts.config_poll)),
        };
        controller.spawn(&ctx.tasks, &ctx.ready, primary);
    }
}

/// The config cluster blocks readiness until its registry has synced (no timeout: without it meshd
/// has nothing to serve).
fn hold_until_synced(
    ctx: &StartContext,
    cluster: &ClusterId,
    mut progress: watch::Receiver<registry::Progress>,
) {
    let guard = ctx.ready.register(format!("config cluster {cluster}"));
    let stop = ctx.tasks.cancelled();
    ctx.tasks.spawn("config cluster sync", async move {
        tokio::select! {
            _ = stop => {}
            _ = progress.wait_for(|p| p.synced) => {}
        }
        drop(guard);
    });
}
