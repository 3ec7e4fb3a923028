//! A cluster's compact state and the indexes that say which services an event touches. Owned by the
//! registry task; pure (no I/O), so its bookkeeping is unit-tested.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    sync::Arc,
};

use smallvec::SmallVec;

use super::{
    endpoints::{ObjectName, Pod, PodEntry, PodTraits, PodWorkload, Slice, Sources},
    network::NetworkResolver,
    service::Context,
};
use crate::{
    intern::Interner,
    model::{Endpoint, Locality, NetworkId, Placement, Service, ServiceKey},
};

/// Everything one cluster's watchers have seen, in compact form.
pub(super) struct State {
    pub(super) ctx: Context,
    pub(super) networks: NetworkResolver,
    pub(super) system_network: Option<NetworkId>,
    services: HashMap<ServiceKey, Arc<Service>>,
    slices: HashMap<ObjectName, (ServiceKey, Slice)>,
    /// Each service's slices, sorted (a service has one slice per 100 endpoints; kept inline).
    slices_by_service: HashMap<ServiceKey, SmallVec<[ObjectName; 1]>>,
    /// Pods by name, with the services whose slices name them, present or not.
    pods: HashMap<ObjectName, PodEntry>,
    nodes: HashMap<Arc<str>, Locality>,
    /// One copy of each namespace and node name, however many objects name it.
    names: Interner<str>,
    /// One copy of each pod's traits, however many replicas share them.
    traits: Interner<PodTraits>,
    /// One copy of each endpoint placement (built while `&self` is borrowed, hence the lock).
    placements: parking_lot::Mutex<Interner<Placement>>,
    /// A pod changed since [`State::take_workloads`] last built the workloads (or it never did: the
    /// first build is published even when empty, so a reader can tell "no pods" from "not yet").
    pods_changed: bool,
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
            nodes: HashMap::new(),
            names: Interner::default(),
            traits: Interner::default(),
            placements: Default::default(),
            pods_changed: true,
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
    pub(super) fn set_slice(&mut self, mut name: ObjectName, slice: Option<Slice>) -> Touched {
        let mut touched = Touched::new();
        name.namespace = self.names.intern(name.namespace);
        if let Some((key, old)) = self.slices.remove(&name) {
            self.unindex_slice(&name, &key, &old);
            touched.insert(key);
        }
        if let Some(mut slice) = slice {
            let key = self.key(&name.namespace, &slice.service);
            let names = self.slices_by_service.entry(key.clone()).or_default();
            if let Err(at) = names.binary_search(&name) {
                names.insert(at, name.clone());
            }
            for e in &mut slice.endpoints {
                e.node = e.node.take().map(|n| self.names.intern(n));
                let Some(pod) = &mut e.pod else { continue };
                let entry = self.pods.entry(ObjectName {
                    namespace: name.namespace.clone(),
                    name: pod.clone(),
                });
                // The slice keeps the table's copy of the pod name.
                *pod = entry.key().name.clone();
                let services = &mut entry.or_default().services;
                if !services.contains(&key.hostname) {
                    services.push(key.hostname.clone());
                }
            }
            self.slices.insert(name, (key.clone(), slice));
            touched.insert(key);
        }
        touched
    }

    fn unindex_slice(&mut self, name: &ObjectName, key: &ServiceKey, slice: &Slice) {
        if let Some(names) = self.slices_by_service.get_mut(key) {
            names.retain(|n| n != name);
            if names.is_empty() {
                self.slices_by_service.remove(key);
            }
        }
        // Pods another slice of the service still names stay indexed to it (the EndpointSlice
        // controller creates a replacement slice before deleting the old one).
        let still_named: HashSet<&Arc<str>> = self
            .slices_by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|n| self.slices.get(n))
            .flat_map(|(_, other)| other.endpoints.iter().filter_map(|e| e.pod.as_ref()))
            .collect();
        let gone: Vec<Arc<str>> = slice
            .endpoints
            .iter()
            .filter_map(|e| e.pod.as_ref())
            .filter(|p| !still_named.contains(p))
            .cloned()
            .collect();
        for pod in gone {
            let pod = ObjectName {
                namespace: name.namespace.clone(),
                name: pod,
            };
            if let Some(entry) = self.pods.get_mut(&pod) {
                entry.services.retain(|h| *h != key.hostname);
                if *entry == PodEntry::default() {
                    self.pods.remove(&pod);
                }
            }
        }
    }

    /// Sets or removes a pod; returns the services whose endpoints it feeds, if it changed.
    pub(super) fn set_pod(&mut self, mut name: ObjectName, pod: Option<Pod>) -> Touched {
        name.namespace = self.names.intern(name.namespace);
        let pod = pod.map(|p| Pod {
            node: p.node.map(|n| self.names.intern(n)),
            ready_ip: p.ready_ip,
            traits: self.traits.intern(p.traits),
            workload_meta: self.names.intern(p.workload_meta),
        });
        let entry = match (&pod, self.pods.entry(name.clone())) {
            (None, Entry::Vacant(_)) => return Touched::new(),
            (_, e) => e.or_default(),
        };
        if entry.pod.as_deref() == pod.as_ref() {
            return Touched::new();
        }
        entry.pod = pod.map(Box::new);
        self.pods_changed = true;
        let touched = entry
            .services
            .iter()
            .map(|h| ServiceKey::new(h.clone(), name.namespace.clone()))
            .collect();
        if *entry == PodEntry::default() {
            self.pods.remove(&name);
        }
        touched
    }

    /// Marks the workloads stale: what every pod's endpoint depends on (nodes, networks) changed.
    pub(super) fn workloads_stale(&mut self) {
        self.pods_changed = true;
    }

    /// The pods as workloads, when they changed since the last call.
    pub(super) fn take_workloads(&mut self) -> Option<Arc<[PodWorkload]>> {
        std::mem::take(&mut self.pods_changed).then(|| self.sources().workloads())
    }

    fn sources(&self) -> Sources<'_> {
        Sources {
            ctx: &self.ctx,
            pods: &self.pods,
            nodes: &self.nodes,
            networks: &self.networks,
            system_network: self.system_network.as_ref(),
            placements: &self.placements,
        }
    }

    /// Sets or removes a node's locality; returns whether it changed.
    pub(super) fn set_node(&mut self, name: Arc<str>, locality: Option<Locality>) -> bool {
        let name = self.names.intern(name);
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
        self.pods
            .iter()
            .filter(|(_, e)| e.pod.is_some())
            .map(|(n, _)| n.clone())
            .collect()
    }
    pub(super) fn node_names(&self) -> Vec<Arc<str>> {
        self.nodes.keys().cloned().collect()
    }

    /// The endpoints of `key` in this cluster, sorted and de-duplicated by address.
    pub(super) fn endpoints(&self, key: &ServiceKey) -> Arc<[Endpoint]> {
        let sources = self.sources();
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

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;
    use crate::{
        model::{Health, TlsMode, WorkloadInfo},
        registry::endpoints::SliceEndpoint,
    };

    fn state() -> State {
        let ctx = Context {
            cluster: "c1".into(),
            domain_suffix: "cluster.local".into(),
            trust_domain: "td".into(),
        };
        State::new(ctx, NetworkResolver::default())
    }

    /// Every call allocates afresh, as converting a watched object does.
    fn name(name: &str) -> ObjectName {
        ObjectName {
            namespace: String::from("ns").into(),
            name: String::from(name).into(),
        }
    }

    fn pod(app: &str) -> Pod {
        Pod {
            node: Some(String::from("node-1").into()),
            ready_ip: None,
            traits: Arc::new(PodTraits {
                info: WorkloadInfo::new(
                    Arc::new([("app".to_owned(), app.to_owned())].into()),
                    Some(format!("spiffe://td/ns/ns/sa/{app}").into()),
                ),
                network: None,
                locality: None,
                tls_mode: TlsMode::Istio,
                ports: Arc::default(),
            }),
            workload_meta: format!("{app};ns;{app};;c1").into(),
        }
    }

    fn slice(service: &str, pods: &[(&str, &str)]) -> Slice {
        Slice {
            service: service.into(),
            ports: Arc::from([]),
            endpoints: pods
                .iter()
                .map(|(pod, ip)| SliceEndpoint {
                    addresses: smallvec![ip.parse().unwrap()],
                    health: Health::Healthy,
                    pod: Some(String::from(*pod).into()),
                    node: None,
                })
                .collect(),
        }
    }

    enum Op {
        Slice(&'static str, Option<Slice>),
        Pod(&'static str, Option<Pod>),
    }

    #[test]
    fn pods_rebuild_exactly_the_services_whose_slices_name_them() {
        let mut s = state();
        let reviews = s.key("ns", "reviews");
        let both = slice("reviews", &[("p1", "10.0.0.1"), ("p2", "10.0.0.2")]);
        let steps = [
            (
                "slice names pods not seen yet",
                Op::Slice("reviews-1", Some(both)),
                true,
                0,
            ),
            (
                "a pod's arrival rebuilds its service",
                Op::Pod("p1", Some(pod("reviews"))),
                true,
                1,
            ),
            (
                "an unchanged pod touches nothing",
                Op::Pod("p1", Some(pod("reviews"))),
                false,
                1,
            ),
            ("second replica", Op::Pod("p2", Some(pod("reviews"))), true, 2),
            (
                "a pod no slice names",
                Op::Pod("p3", Some(pod("ratings"))),
                false,
                2,
            ),
            ("slice deleted", Op::Slice("reviews-1", None), true, 0),
            ("a pod no slice names any more", Op::Pod("p1", None), false, 0),
        ];
        for (step, op, touches, endpoints) in steps {
            let touched = match op {
                Op::Slice(n, slice) => s.set_slice(name(n), slice),
                Op::Pod(n, pod) => s.set_pod(name(n), pod),
            };
            assert_eq!(
                touched,
                Touched::from_iter(touches.then(|| reviews.clone())),
                "{step}"
            );
            assert_eq!(s.endpoints(&reviews).len(), endpoints, "{step}");
        }
        let mut left: Vec<_> = s.pods.keys().map(|n| n.name.to_string()).collect();
        left.sort();
        assert_eq!(
            left,
            ["p2", "p3"],
            "entries go once neither a pod nor a slice needs them"
        );
    }

    /// The EndpointSlice controller replacing a slice (kube-sim does it when a hand-written slice joins
    /// a selector Service; rebalancing does it on a real cluster): the new slice is created, then the old
    /// one deleted, both naming the same pod. The pod must stay indexed to the service, or its arrival
    /// (after a relist, or a lagging pods watch) and its later changes rebuild nothing. Found by
    /// tests/e2e/test_real_multicluster.py on kube-sim: the endpoint stayed missing for good.
    #[test]
    fn a_pod_stays_indexed_while_another_slice_of_its_service_names_it() {
        let mut s = state();
        let reviews = s.key("ns", "reviews");
        let one = || Some(slice("reviews", &[("p1", "10.0.0.1")]));
        s.set_slice(name("reviews-old"), one());
        s.set_slice(name("reviews-new"), one());
        assert_eq!(
            s.set_slice(name("reviews-old"), None),
            Touched::from([reviews.clone()])
        );
        assert_eq!(
            s.set_pod(name("p1"), Some(pod("reviews"))),
            Touched::from([reviews.clone()]),
            "the pod's arrival rebuilds its service"
        );
        assert_eq!(s.endpoints(&reviews).len(), 1);
        assert_eq!(
            s.set_pod(name("p1"), Some(pod("reviews-v2"))),
            Touched::from([reviews.clone()]),
            "so does a change of the pod"
        );
        s.set_slice(name("reviews-new"), None);
        assert_eq!(
            s.set_pod(name("p1"), Some(pod("reviews"))),
            Touched::new(),
            "no slice names it any more"
        );
        assert_eq!(s.endpoints(&reviews).len(), 0);
    }

    #[test]
    fn an_address_in_two_slices_is_taken_from_the_first_by_name() {
        for order in [["reviews-a", "reviews-b"], ["reviews-b", "reviews-a"]] {
            let mut s = state();
            for n in order {
                let workload = if n == "reviews-a" { "p1" } else { "p2" };
                s.set_slice(name(n), Some(slice("reviews", &[(workload, "10.0.0.1")])));
                s.set_pod(name(workload), Some(pod("reviews")));
            }
            let eps = s.endpoints(&s.key("ns", "reviews"));
            let workloads: Vec<_> = eps.iter().map(|e| e.workload.as_deref().unwrap()).collect();
            assert_eq!(workloads, ["p1"], "added in order {order:?}");
        }
    }

    #[test]
    fn endpoints_share_placement_and_info() {
        let mut s = state();
        s.set_slice(
            name("reviews-1"),
            Some(slice("reviews", &[("p1", "10.0.0.1"), ("p2", "10.0.0.2")])),
        );
        s.set_pod(name("p1"), Some(pod("reviews")));
        s.set_pod(name("p2"), Some(pod("reviews")));
        let eps = s.endpoints(&s.key("ns", "reviews"));
        assert_eq!(eps.len(), 2);
        assert!(
            Arc::ptr_eq(&eps[0].placement, &eps[1].placement),
            "one placement per cluster, network and locality"
        );
        assert!(
            Arc::ptr_eq(&eps[0].info, &eps[1].info),
            "one info per set of traits"
        );
    }

    #[test]
    fn replicas_share_traits_and_names() {
        let mut s = state();
        s.set_slice(name("reviews-1"), Some(slice("reviews", &[("p1", "10.0.0.1")])));
        s.set_pod(name("p1"), Some(pod("reviews")));
        s.set_pod(name("p2"), Some(pod("reviews")));
        s.set_pod(name("p3"), Some(pod("ratings")));
        let entry = |n: &str| s.pods.get_key_value(&name(n)).unwrap();
        let traits = |n: &str| entry(n).1.pod.as_ref().unwrap().traits.clone();
        let node = |n: &str| entry(n).1.pod.as_ref().unwrap().node.clone().unwrap();
        assert!(
            Arc::ptr_eq(&traits("p1"), &traits("p2")),
            "one deployment, one copy"
        );
        assert!(!Arc::ptr_eq(&traits("p1"), &traits("p3")));
        assert!(Arc::ptr_eq(&node("p1"), &node("p3")), "node names");
        let meta = |n: &str| entry(n).1.pod.as_ref().unwrap().workload_meta.clone();
        assert!(Arc::ptr_eq(&meta("p1"), &meta("p2")), "telemetry strings");
        assert!(
            Arc::ptr_eq(&entry("p1").0.namespace, &entry("p3").0.namespace),
            "namespaces"
        );
        let (_, (_, slice)) = s.slices.iter().next().unwrap();
        let named = slice.endpoints[0].pod.as_ref().unwrap();
        assert!(
            Arc::ptr_eq(named, &entry("p1").0.name),
            "the slice shares the table's pod name"
        );
    }

    #[test]
    fn workloads_are_rebuilt_only_when_a_pod_or_what_it_depends_on_changed() {
        let mut s = state();
        let ready = |app| Pod {
            ready_ip: Some("10.0.0.1".parse().unwrap()),
            ..pod(app)
        };
        let names = |w: Option<Arc<[PodWorkload]>>| {
            w.map(|w| {
                w.iter()
                    .map(|p| p.endpoint.workload.as_deref().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            names(s.take_workloads()),
            Some(vec![]),
            "the first build, even with no pod"
        );
        assert_eq!(names(s.take_workloads()), None, "nothing since");
        s.set_pod(name("p1"), Some(ready("reviews")));
        s.set_pod(name("p2"), Some(pod("reviews")));
        assert_eq!(
            names(s.take_workloads()),
            Some(vec!["p1".into()]),
            "only the ready pod"
        );
        s.set_pod(name("p1"), Some(ready("reviews")));
        assert_eq!(names(s.take_workloads()), None, "an unchanged pod");
        s.workloads_stale();
        assert_eq!(
            names(s.take_workloads()),
            Some(vec!["p1".into()]),
            "a node or network changed"
        );
        s.set_pod(name("p1"), None);
        assert_eq!(names(s.take_workloads()), Some(vec![]), "the pod went");
    }
}
