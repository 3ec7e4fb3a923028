//! The ServiceEntry registry (istiod's `serviceEntryStore`): ServiceEntries and WorkloadEntries of the
//! config store, and the pods of every cluster they select, become services and endpoints, sent to the
//! aggregate as the `External` provider of the config cluster, beside the per-cluster Kubernetes
//! registries.
//!
//! Owns: the conversion ([`convert`], [`workload`], pure) and one task that recomputes the registry's
//! whole view when the config, meshNetworks, any cluster's pods or the Kubernetes Services that
//! may select WorkloadEntries change, and sends it as one `Update::Replace` (the aggregate diffs it). Does NOT: watch or validate
//! Istio objects (the config controller), merge with Kubernetes Services (the aggregate), or filter by
//! `exportTo` (#19).

pub mod convert;
pub mod workload;

use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, warn};

pub use convert::{Built, Selecting};
pub use workload::Context;

use crate::{
    aggregate::{MeshSnapshot, RegistryId, Snapshots, Update, UpdateSender},
    config::MeshNetworks,
    config_controller::ConfigSnapshot,
    drain::Tasks,
    istio::{Kind, Spec},
    model::{Origin, Provider, ShardKey},
    readiness::{BlockReady, Ready},
    registry::{ClusterWorkloads, endpoints::PodWorkload, network::NetworkResolver},
};

/// The Kubernetes Services of a snapshot that may select WorkloadEntries: those with a selector, in
/// key order.
pub fn selecting(snapshot: &MeshSnapshot) -> Vec<Selecting> {
    snapshot
        .services
        .iter()
        .filter(|(_, s)| s.origin == Origin::Kubernetes)
        .filter_map(|(key, s)| {
            Some(Selecting {
                key: key.clone(),
                selector: s.selector.clone()?,
                ports: s.ports.clone(),
            })
        })
        .collect()
}

/// Every cluster's pods in one list sorted by namespace (stable: per namespace, by cluster ID).
fn all_pods(by_cluster: &ClusterWorkloads) -> Vec<PodWorkload> {
    let mut pods: Vec<PodWorkload> = by_cluster.values().flat_map(|p| p.iter().cloned()).collect();
    pods.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    pods
}

/// Whether any ServiceEntry has a `workloadSelector` (only then do pods matter).
fn selects_pods(configs: &ConfigSnapshot) -> bool {
    configs
        .of_kind(Kind::ServiceEntry)
        .any(|c| matches!(&c.spec, Spec::ServiceEntry(se) if se.workload_selector.is_some()))
}

/// What the registry task needs.
pub struct Options {
    /// Cluster, domain suffix and trust domain (its networks are replaced from `networks`).
    pub ctx: Context,
    /// Where it sends its view.
    pub updates: UpdateSender,
    /// The config controller's snapshots.
    pub configs: watch::Receiver<Arc<ConfigSnapshot>>,
    /// meshNetworks (entries without a network are placed by it).
    pub networks: watch::Receiver<Arc<MeshNetworks>>,
    /// The aggregate's snapshots (the Kubernetes Services that select WorkloadEntries).
    pub snapshots: Snapshots,
    /// Every cluster's ready pods, which ServiceEntries select in their namespace (a Kubernetes
    /// registry publishes them before its view while they are wanted).
    pub pods: watch::Receiver<ClusterWorkloads>,
    /// Set while a ServiceEntry selects pods: every registry, the config cluster's too, builds and
    /// publishes its pods only then (they change with every rollout).
    pub pods_wanted: watch::Sender<bool>,
}

/// Spawns the registry task. It holds readiness until it has sent a view of synced config, so a ready
/// meshd serves its WorkloadEntries from the first push.
pub fn spawn(tasks: &Tasks, ready: &Ready, opts: Options) {
    let guard = ready.register("ServiceEntry registry");
    tasks.spawn("serviceentry registry", run(opts, guard, tasks.cancelled()));
}

/// Whether every config source has listed what it has or failed (a missing CRD must not hold
/// readiness, as the sources' own guards do not).
fn synced(configs: &ConfigSnapshot) -> bool {
    !configs.sources.is_empty() && configs.sources.values().all(|s| s.synced || s.error.is_some())
}

/// Whether `snap` serves the view: its services and, in `shard`, its endpoints (readiness waits for
/// it, so the first push a proxy gets already has the WorkloadEntries).
fn applied(snap: &MeshSnapshot, built: &Built, shard: &ShardKey) -> bool {
    built
        .services
        .iter()
        .all(|s| snap.services.contains_key(&s.key()))
        && built
            .endpoints
            .iter()
            .all(|(k, eps)| snap.endpoints.get(k).and_then(|e| e.shards.get(shard)) == Some(eps))
}

async fn run(mut opts: Options, guard: BlockReady, stop: impl Future<Output = ()>) {
    let mut guard = Some(guard);
    tokio::pin!(stop);
    let mut generation = 0u64;
    let mut last: Option<(Vec<Selecting>, Built)> = None;
    // A closed channel (a fixed meshNetworks, a controller that never started) keeps its last value.
    let (mut configs_open, mut networks_open, mut pods_open) = (true, true, true);
    let shard = ShardKey::external(opts.ctx.cluster.clone());
    // Readiness waits for a view of synced config, computed from a snapshot that has the config
    // cluster's Kubernetes services, to be published.
    let kube = ShardKey::kubernetes(opts.ctx.cluster.clone());
    let mut final_view = false;
    loop {
        let networks = opts.networks.borrow_and_update().clone();
        opts.ctx.networks = NetworkResolver::new(&networks, &opts.ctx.cluster);
        let configs = opts.configs.borrow_and_update().clone();
        // Every cluster's pods change often: read them only while a ServiceEntry selects pods.
        let selects_pods = selects_pods(&configs);
        opts.pods_wanted
            .send_if_modified(|w| std::mem::replace(w, selects_pods) != selects_pods);
        let pods = if selects_pods {
            all_pods(&opts.pods.borrow_and_update())
        } else {
            Vec::new()
        };
        let snapshot = opts.snapshots.load();
        let kubernetes = selecting(&snapshot);
        let objects = configs
            .of_kind(Kind::ServiceEntry)
            .chain(configs.of_kind(Kind::WorkloadEntry))
            .map(|c| &**c);
        let built = convert::build(objects, &kubernetes, &pods, &opts.ctx);
        if last.as_ref().is_none_or(|(_, b)| *b != built) {
            for (what, why) in built
                .ignored
                .iter()
                .filter(|i| last.as_ref().is_none_or(|(_, b)| !b.ignored.contains(i)))
            {
                warn!(%what, reason = %why, "ServiceEntry left out");
            }
            generation += 1;
            debug!(
                generation,
                services = built.services.len(),
                "ServiceEntry registry view"
            );
            let update = Update::Replace {
                from: RegistryId {
                    provider: Provider::External,
                    cluster: opts.ctx.cluster.clone(),
                    generation,
                },
                services: built.services.clone(),
                endpoints: built.endpoints.clone(),
            };
            if !opts.updates.send(update).await {
                return;
            }
        }
        // With pods selected, the config cluster's must have arrived too (its registry publishes them
        // once they are wanted, which may be after its view).
        let pods_in = !selects_pods || opts.pods.borrow().contains_key(&opts.ctx.cluster);
        final_view |=
            (synced(&configs) || !configs_open) && snapshot.registries.contains_key(&kube) && pods_in;
        if final_view && applied(&opts.snapshots.load(), &built, &shard) {
            guard.take();
        }
        last = Some((kubernetes, built));
        // Wait for an input that can change the view: the config, meshNetworks, the pods, or the
        // selectors and ports of Kubernetes Services (most snapshots change only endpoints).
        loop {
            tokio::select! {
                _ = &mut stop => return,
                r = opts.configs.changed(), if configs_open => match r {
                    Ok(()) => break,
                    Err(_) => {
                        configs_open = false;
                        if !final_view {
                            break;
                        }
                    }
                },
                r = opts.networks.changed(), if networks_open => match r {
                    Ok(()) => break,
                    Err(_) => networks_open = false,
                },
                r = opts.pods.changed(), if pods_open && selects_pods => match r {
                    Ok(()) => break,
                    Err(_) => pods_open = false,
                },
                s = opts.snapshots.changed() => match s {
                    None => return,
                    Some(snap) if !final_view && snap.registries.contains_key(&kube) => break,
                    Some(snap) if last.as_ref().is_some_and(|(k, _)| *k != selecting(&snap)) => break,
                    Some(snap) => {
                        if final_view && last.as_ref().is_some_and(|(_, b)| applied(&snap, b, &shard)) {
                            guard.take();
                        }
                    }
                },
            }
        }
    }
}
