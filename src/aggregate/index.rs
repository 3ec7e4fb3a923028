//! The aggregator's state: per-registry services, merged services and endpoint shards. Owned by the
//! aggregator task alone; every mutation records what it changed in a [`ChangeSet`].
//!
//! Everything per registry is keyed by its [`ShardKey`] (provider, cluster), as istiod keys endpoint
//! shards: the ServiceEntry registry fed from a cluster never overwrites that cluster's Kubernetes
//! shards, and removing one leaves the other.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
};

use super::{
    RegistryId, Update,
    snapshot::{ChangeKind, ChangeSet, EndpointShards, FullReason},
};
use crate::model::{ClusterId, Endpoint, Provider, Service, ServiceKey, ShardKey, StaleAction};

/// Which registry instance currently owns a (provider, cluster)'s shards. A rotated kubeconfig starts a newer
/// generation; the older one's late events are ignored, so it can never wipe the newer one's shards
/// (istio #61043).
#[derive(Debug, Clone, Copy)]
struct Owner {
    generation: u64,
    live: bool,
}

pub(super) struct Index {
    primary: ClusterId,
    owners: HashMap<ShardKey, Owner>,
    /// Per key, each registry's own service, in merge order (Kubernetes before External, primary
    /// first, then by cluster ID).
    by_cluster: HashMap<ServiceKey, Vec<(ShardKey, Arc<Service>)>>,
    /// Keys for which a registry has a service or a non-empty shard: makes its removal O(its keys).
    cluster_keys: HashMap<ShardKey, HashSet<ServiceKey>>,
    pub(super) services: BTreeMap<ServiceKey, Arc<Service>>,
    pub(super) endpoints: BTreeMap<ServiceKey, Arc<EndpointShards>>,
    /// Gateway DNS names → their last resolved addresses.
    dns: BTreeMap<Arc<str>, Vec<IpAddr>>,
    /// A DNS answer or a cluster's own Service changed: recompute the gateway set at the next publish.
    gateways_dirty: bool,
    /// ★ The remote clusters whose stale-endpoints action is in force.
    pub(super) stale: Arc<BTreeMap<ClusterId, StaleAction>>,
    changes: ChangeSet,
}

impl Index {
    pub(super) fn new(primary: ClusterId) -> Self {
        Self {
            primary,
            owners: HashMap::new(),
            by_cluster: HashMap::new(),
            cluster_keys: HashMap::new(),
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            dns: BTreeMap::new(),
            gateways_dirty: false,
            stale: Arc::default(),
            changes: ChangeSet::default(),
        }
    }

    /// Applies one registry update, recording the changes.
    pub(super) fn apply(&mut self, update: Update) {
        match update {
            Update::Replace {
                from,
                services,
                endpoints,
            } => self.replace(from, services, endpoints),
            Update::Service { from, key, service } if self.accepts(&from) => {
                self.set_service(&from.shard(), &key, service);
            }
            Update::Endpoints { from, key, endpoints } if self.accepts(&from) => {
                self.set_endpoints(&from.shard(), &key, endpoints)
            }
            Update::NetworkChanged { from } if self.accepts(&from) => {
                self.changes.full.insert(FullReason::Networks);
            }
            Update::GatewayAddresses { hostname, addresses } => {
                if self.dns.get(&hostname) != Some(&addresses) {
                    self.dns.insert(hostname, addresses);
                    self.gateways_dirty = true;
                }
            }
            Update::Stale { cluster, action } => {
                if self.stale.get(&cluster) != action.as_ref() {
                    let stale = Arc::make_mut(&mut self.stale);
                    match action {
                        Some(a) => stale.insert(cluster.clone(), a),
                        None => stale.remove(&cluster),
                    };
                    self.changes.full.insert(FullReason::Stale(cluster));
                }
            }
            Update::Remove { shard, generation } => self.remove(shard, generation),
            Update::Service { .. } | Update::Endpoints { .. } | Update::NetworkChanged { .. } => {}
        }
    }

    /// Records a mesh-wide reason for a full push.
    pub(super) fn record_full(&mut self, reason: FullReason) {
        self.changes.full.insert(reason);
    }

    /// Whether the changes taken in need more than EDS.
    pub(super) fn needs_full_push(&self) -> bool {
        self.changes.needs_full_push()
    }

    pub(super) fn has_changes(&self) -> bool {
        !self.changes.is_empty() || self.gateways_dirty
    }

    /// Whether the gateway set may have changed since the last call.
    pub(super) fn take_gateways_dirty(&mut self) -> bool {
        std::mem::take(&mut self.gateways_dirty)
    }

    /// Every cluster's own version of every Kubernetes service (gateway discovery reads per-cluster
    /// labels; a ServiceEntry is never a network gateway).
    pub(super) fn cluster_services(&self) -> impl Iterator<Item = (&ClusterId, &Service)> {
        self.by_cluster
            .values()
            .flatten()
            .filter(|(k, _)| k.provider == Provider::Kubernetes)
            .map(|(k, s)| (&k.cluster, &**s))
    }

    /// The live registries and their generations.
    pub(super) fn registries(&self) -> BTreeMap<ShardKey, u64> {
        self.owners
            .iter()
            .filter(|(_, o)| o.live)
            .map(|(k, o)| (k.clone(), o.generation))
            .collect()
    }

    /// Gateway DNS names → addresses.
    pub(super) fn dns(&self) -> &BTreeMap<Arc<str>, Vec<IpAddr>> {
        &self.dns
    }

    /// Forgets the addresses of names no gateway uses any more.
    pub(super) fn retain_dns(&mut self, names: &BTreeSet<Arc<str>>) {
        self.dns.retain(|n, _| names.contains(n));
    }

    pub(super) fn take_changes(&mut self) -> ChangeSet {
        std::mem::take(&mut self.changes)
    }

    /// Incremental updates come only from the live owner generation.
    fn accepts(&self, from: &RegistryId) -> bool {
        self.owners
            .get(&from.shard())
            .is_some_and(|o| o.live && o.generation == from.generation)
    }

    /// A registry's complete view, sent when it has synced: installs that generation as the owner and
    /// prunes whatever the previous owner had that this view lacks. Nothing present in both ever
    /// disappears, which is what makes credential rotation make-before-break.
    fn replace(
        &mut self,
        from: RegistryId,
        services: Vec<Arc<Service>>,
        endpoints: Vec<(ServiceKey, Arc<[Endpoint]>)>,
    ) {
        let cluster = from.shard();
        if self
            .owners
            .get(&cluster)
            .is_some_and(|o| o.generation >= from.generation)
        {
            return;
        }
        self.owners.insert(
            cluster.clone(),
            Owner {
                generation: from.generation,
                live: true,
            },
        );
        let new_services: HashSet<ServiceKey> = services.iter().map(|s| s.key()).collect();
        let new_endpoints: HashSet<&ServiceKey> = endpoints.iter().map(|(k, _)| k).collect();
        let old_keys: Vec<ServiceKey> = self
            .cluster_keys
            .get(&cluster)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        for key in old_keys {
            if !new_services.contains(&key) {
                self.set_service(&cluster, &key, None);
            }
            if !new_endpoints.contains(&key) {
                self.set_endpoints(&cluster, &key, Arc::from([]));
            }
        }
        for service in services {
            self.set_service(&cluster, &service.key(), Some(service));
        }
        for (key, eps) in endpoints {
            self.set_endpoints(&cluster, &key, eps);
        }
    }

    fn remove(&mut self, cluster: ShardKey, generation: u64) {
        if self
            .owners
            .get(&cluster)
            .is_some_and(|o| o.generation > generation)
        {
            return;
        }
        self.owners.insert(
            cluster.clone(),
            Owner {
                generation,
                live: false,
            },
        );
        for key in self.cluster_keys.remove(&cluster).unwrap_or_default() {
            self.set_service(&cluster, &key, None);
            self.set_endpoints(&cluster, &key, Arc::from([]));
        }
        self.changes
            .full
            .insert(FullReason::ClusterRemoved(cluster.cluster));
    }

    fn set_service(&mut self, cluster: &ShardKey, key: &ServiceKey, service: Option<Arc<Service>>) {
        let entries = self.by_cluster.entry(key.clone()).or_default();
        let pos = entries.iter().position(|(c, _)| c == cluster);
        match (pos, service) {
            (Some(i), Some(s)) if entries[i].1 == s => return,
            (Some(i), Some(s)) => entries[i].1 = s,
            (Some(i), None) => {
                entries.remove(i);
            }
            (None, Some(s)) => {
                let new = rank(&self.primary, cluster);
                let at = entries.partition_point(|(c, _)| rank(&self.primary, c) < new);
                entries.insert(at, (cluster.clone(), s));
            }
            (None, None) => return,
        }
        // Gateways are found from each cluster's own Service (labels differ per cluster, and the merged
        // Service keeps the primary's), so any per-cluster change may change them.
        self.gateways_dirty = true;
        let merged = merge(entries);
        if entries.is_empty() {
            self.by_cluster.remove(key);
        }
        let changed = match &merged {
            Some(m) => self.services.insert(key.clone(), m.clone()).as_ref() != Some(m),
            None => self.services.remove(key).is_some(),
        };
        if changed {
            self.changes.record(key, &cluster.cluster, ChangeKind::Full);
        }
        self.prune_empty_shards(key);
        self.track(cluster, key);
    }

    fn set_endpoints(&mut self, cluster: &ShardKey, key: &ServiceKey, eps: Arc<[Endpoint]>) {
        let current = self.endpoints.get(key).and_then(|s| s.shards.get(cluster));
        let unchanged = match current {
            Some(old) => **old == *eps,
            None => eps.is_empty(),
        };
        if unchanged {
            return;
        }
        let shards = Arc::make_mut(self.endpoints.entry(key.clone()).or_default());
        if eps.is_empty() {
            shards.shards.remove(cluster);
        } else {
            shards.shards.insert(cluster.clone(), eps);
        }
        let accounts = shards
            .iter()
            .filter_map(|e| e.service_account().clone())
            .collect();
        let kind = if accounts == shards.service_accounts {
            ChangeKind::Eds
        } else {
            shards.service_accounts = accounts;
            ChangeKind::Full
        };
        self.changes.record(key, &cluster.cluster, kind);
        self.prune_empty_shards(key);
        self.track(cluster, key);
    }

    /// Keeps an empty shard set while the service exists (a pod flapping 0↔1 stays EDS-only, as in
    /// istiod), and drops it once neither exists.
    fn prune_empty_shards(&mut self, key: &ServiceKey) {
        if !self.services.contains_key(key) && self.endpoints.get(key).is_some_and(|s| s.shards.is_empty()) {
            self.endpoints.remove(key);
        }
    }

    fn track(&mut self, cluster: &ShardKey, key: &ServiceKey) {
        let has_service = self
            .by_cluster
            .get(key)
            .is_some_and(|e| e.iter().any(|(c, _)| c == cluster));
        let has_endpoints = self
            .endpoints
            .get(key)
            .is_some_and(|s| s.shards.contains_key(cluster));
        let keys = self.cluster_keys.entry(cluster.clone()).or_default();
        if has_service || has_endpoints {
            keys.insert(key.clone());
        } else {
            keys.remove(key);
            if keys.is_empty() {
                self.cluster_keys.remove(cluster);
            }
        }
    }
}

/// Merge order: Kubernetes before External, then the primary cluster first, then by cluster ID
/// (deterministic, unlike istiod's secret-processing order).
fn rank<'a>(primary: &ClusterId, shard: &'a ShardKey) -> (Provider, bool, &'a ClusterId) {
    (shard.provider, &shard.cluster != primary, &shard.cluster)
}

/// One service from its per-registry versions: attributes from the first, per-cluster addresses and
/// service accounts from the others of the same provider. A service in one registry is shared as is.
/// A ServiceEntry is never merged into a Kubernetes Service of the same host and namespace: the
/// Kubernetes one wins (istiod's "domain squatting" guard in `initServiceRegistry`).
fn merge(entries: &[(ShardKey, Arc<Service>)]) -> Option<Arc<Service>> {
    let ((first_shard, first), rest) = entries.split_first()?;
    let rest: Vec<_> = rest
        .iter()
        .filter(|(k, _)| k.provider == first_shard.provider)
        .collect();
    if rest.is_empty() {
        return Some(first.clone());
    }
    let mut merged = Service::clone(first);
    for (_, s) in rest {
        for (c, vips) in &s.cluster_vips {
            merged.cluster_vips.get_or_insert_with(c, || vips.clone());
        }
        for (c, addrs) in &s.external_addresses {
            merged.external_addresses.get_or_insert_with(c, || addrs.clone());
        }
        for (c, ports) in &s.node_ports {
            merged.node_ports.get_or_insert_with(c, || ports.clone());
        }
        merged.service_accounts.extend(s.service_accounts.iter().cloned());
    }
    Some(Arc::new(merged))
}
