//! A cluster's compact state and the indexes that say which services an event touches. Owned by the
//! registry task; pure (no I/O), so its bookkeeping is unit-tested.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::Arc,
};

use super::{
    endpoints::{ObjectName, Pod, Slice, Sources},
    network::NetworkResolver,
    service::Context,
};
use crate::model::{Endpoint, Locality, NetworkId, Service, ServiceKey};

/// Everything one cluster's watchers have seen, in compact form.
pub(super) struct State {
    pub(super) ctx: Context,
    pub(super) networks: NetworkResolver,
    pub(super) system_network: Option<NetworkId>,
    services: HashMap<ServiceKey, Arc<Service>>,
    slices: HashMap<ObjectName, (ServiceKey, Slice)>,
    slices_by_service: HashMap<ServiceKey, BTreeSet<ObjectName>>,
    pub(super) pods: HashMap<ObjectName, Pod>,
    /// Which services' slices name a pod, present or not: a pod's arrival rebuilds exactly these.
    services_by_pod: HashMap<ObjectName, HashSet<ServiceKey>>,
    pub(super) nodes: HashMap<Arc<str>, Locality>,
}

/// A cluster's complete view: services, and endpoints per service.
pub(super) type View = (Vec<Arc<Service>>, Vec<(ServiceKey, Arc<[Endpoint]>)>);

/// The services an event touched.
pub(super) type Touched = HashSet<ServiceKey>;

impl State {
    pub(super) fn new(ctx: Context, networks: NetworkResolver) -> Self {
        Self {
            ctx,
            networks,
            system_network: None,
            services: HashMap::new(),
            slices: HashMap::new(),
            slices_by_service: HashMap::new(),
            pods: HashMap::new(),
            services_by_pod: HashMap::new(),
            nodes: HashMap::new(),
        }
    }

    pub(super) fn key(&self, namespace: &str, name: &str) -> ServiceKey {
        ServiceKey::new(self.ctx.hostname(namespace, name), namespace)
    }

    pub(super) fn service(&self, key: &ServiceKey) -> Option<&Arc<Service>> {
        self.services.get(key)
    }

    /// Sets or removes a service; returns whether it changed.
    pub(super) fn set_service(&mut self, key: ServiceKey, svc: Option<Service>) -> bool {
        match svc {
            Some(s) if self.services.get(&key).is_some_and(|old| **old == s) => false,
            Some(s) => {
                self.services.insert(key, Arc::new(s));
                true
            }
            None => self.services.remove(&key).is_some(),
        }
    }

    /// Sets or removes a slice; returns the services whose endpoints may have changed.
    pub(super) fn set_slice(&mut self, name: ObjectName, slice: Option<Slice>) -> Touched {
        let mut touched = Touched::new();
        if let Some((key, old)) = self.slices.remove(&name) {
            self.unindex_slice(&name, &key, &old);
            touched.insert(key);
        }
        if let Some(slice) = slice {
            let key = self.key(&name.namespace, &slice.service);
            self.slices_by_service
                .entry(key.clone())
                .or_default()
                .insert(name.clone());
            for pod in slice.endpoints.iter().filter_map(|e| e.pod.clone()) {
                let pod = ObjectName {
                    namespace: name.namespace.clone(),
                    name: pod,
                };
                self.services_by_pod.entry(pod).or_default().insert(key.clone());
            }
            self.slices.insert(name, (key.clone(), slice));
            touched.insert(key);
        }
        touched
    }

    fn unindex_slice(&mut self, name: &ObjectName, key: &ServiceKey, slice: &Slice) {
        if let Some(names) = self.slices_by_service.get_mut(key) {
            names.remove(name);
            if names.is_empty() {
                self.slices_by_service.remove(key);
            }
        }
        for pod in slice.endpoints.iter().filter_map(|e| e.pod.clone()) {
            let pod = ObjectName {
                namespace: name.namespace.clone(),
                name: pod,
            };
            if let Some(keys) = self.services_by_pod.get_mut(&pod) {
                keys.remove(key);
                if keys.is_empty() {
                    self.services_by_pod.remove(&pod);
                }
            }
        }
    }

    /// Sets or removes a pod; returns the services whose endpoints it feeds, if it changed.
    pub(super) fn set_pod(&mut self, name: ObjectName, pod: Option<Pod>) -> Touched {
        let changed = match pod {
            Some(p) if self.pods.get(&name) == Some(&p) => false,
            Some(p) => {
                self.pods.insert(name.clone(), p);
                true
            }
            None => self.pods.remove(&name).is_some(),
        };
        match self.services_by_pod.get(&name) {
            Some(keys) if changed => keys.clone(),
            _ => Touched::new(),
        }
    }

    /// Sets or removes a node's locality; returns whether it changed.
    pub(super) fn set_node(&mut self, name: Arc<str>, locality: Option<Locality>) -> bool {
        match locality {
            Some(l) if self.nodes.get(&name) == Some(&l) => false,
            Some(l) => {
                self.nodes.insert(name, l);
                true
            }
            None => self.nodes.remove(&name).is_some(),
        }
    }

    /// Every service with a service object or a slice.
    pub(super) fn all_keys(&self) -> Touched {
        self.services
            .keys()
            .chain(self.slices_by_service.keys())
            .cloned()
            .collect()
    }

    /// Names of every object of a kind currently held (for deleting what a relist no longer has).
    pub(super) fn service_keys(&self) -> Vec<ServiceKey> {
        self.services.keys().cloned().collect()
    }
    pub(super) fn slice_names(&self) -> Vec<ObjectName> {
        self.slices.keys().cloned().collect()
    }
    pub(super) fn pod_names(&self) -> Vec<ObjectName> {
        self.pods.keys().cloned().collect()
    }
    pub(super) fn node_names(&self) -> Vec<Arc<str>> {
        self.nodes.keys().cloned().collect()
    }

    /// The endpoints of `key` in this cluster, sorted and de-duplicated by address.
    pub(super) fn endpoints(&self, key: &ServiceKey) -> Arc<[Endpoint]> {
        let sources = Sources {
            ctx: &self.ctx,
            pods: &self.pods,
            nodes: &self.nodes,
            networks: &self.networks,
            system_network: self.system_network.as_ref(),
        };
        let mut out = Vec::new();
        let mut missing = Vec::new();
        for name in self.slices_by_service.get(key).into_iter().flatten() {
            if let Some((_, slice)) = self.slices.get(name) {
                sources.build(&name.namespace, slice, &mut out, &mut missing);
            }
        }
        if !missing.is_empty() {
            tracing::debug!(service = %key, pods = ?missing, "endpoints wait for their pods");
        }
        out.sort_by_key(|e| e.address);
        out.dedup_by(|a, b| a.address == b.address);
        out.into()
    }

    /// The complete view, for the aggregator's `Replace`.
    pub(super) fn view(&self) -> View {
        let services = self.services.values().cloned().collect();
        let endpoints = self
            .slices_by_service
            .keys()
            .map(|k| (k.clone(), self.endpoints(k)))
            .filter(|(_, eps)| !eps.is_empty())
            .collect();
        (services, endpoints)
    }
}
