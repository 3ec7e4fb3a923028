//! EndpointSlices, Pods and Nodes → [`Endpoint`]s (istiod's `EndpointBuilder`). Pure.
//!
//! The registry keeps only the compact forms below, not the Kubernetes objects: a pod is its node and
//! its [`PodTraits`] (labels, identity and the few labels that steer routing), which the replicas of a
//! deployment share.

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    sync::Arc,
};

use k8s_openapi::api::discovery::v1 as discovery;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::{
    invalid::{InvalidAddress, parse_ip},
    network::NetworkResolver,
    objects,
    service::Context,
    workload_name::workload_name,
};
use crate::{
    intern::Interner,
    model::{
        Endpoint, EndpointPort, Health, Hostname, LABEL_LOCALITY, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE,
        LABEL_TLS_MODE, LABEL_ZONE, Locality, NetworkId, Placement, TlsMode, WorkloadInfo, WorkloadKind,
        workload_meta,
    },
};

/// Slice label naming its service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Slice label of MCS-imported slices, which istiod ignores too.
const LABEL_MCS_SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
/// Node labels Kubernetes used before the `topology.kubernetes.io` ones.
const LABEL_REGION_LEGACY: &str = "failure-domain.beta.kubernetes.io/region";
const LABEL_ZONE_LEGACY: &str = "failure-domain.beta.kubernetes.io/zone";

/// A namespaced object name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectName {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
}

/// What the registry keeps of an EndpointSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// The service it belongs to (same namespace).
    pub service: Arc<str>,
    /// Its ports, shared by every endpoint built from it.
    pub ports: Arc<[EndpointPort]>,
    /// Its endpoints.
    pub endpoints: Vec<SliceEndpoint>,
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceEndpoint {
    /// Its addresses: almost always one, kept inline.
    pub addresses: SmallVec<[IpAddr; 1]>,
    /// From its conditions.
    pub health: Health,
    /// The pod it targets, if any.
    pub pod: Option<Arc<str>>,
    /// The node it runs on, if known.
    pub node: Option<Arc<str>>,
}

/// What the registry keeps of a Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    /// Its node.
    pub node: Option<Arc<str>>,
    /// `status.podIP` while the pod is ready, for the ServiceEntries that select it (istiod's pod
    /// workload instances: a pod without an IP or not ready is none).
    pub ready_ip: Option<IpAddr>,
    /// What it has in common with its replicas (the registry interns them).
    pub traits: Arc<PodTraits>,
    /// Its endpoints' `istio.workload` telemetry string: the same for a deployment's replicas (the
    /// registry interns it), the pod's own for a bare pod, so not part of the traits.
    pub workload_meta: Arc<str>,
}

/// What the replicas of a deployment have in common: labels, identity and what the labels steer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodTraits {
    /// Its labels and SPIFFE identity, as its endpoints carry them.
    pub info: Arc<WorkloadInfo>,
    /// `topology.istio.io/network`.
    pub network: Option<NetworkId>,
    /// `topology.istio.io/locality` (`region.zone.subzone`).
    pub locality: Option<Locality>,
    /// `security.istio.io/tlsMode`.
    pub tls_mode: TlsMode,
    /// Named container ports (a ServiceEntry port of that name targets it, istiod's `PortMap`).
    pub ports: Arc<BTreeMap<String, u32>>,
}

/// A pod name's entry in the registry: the pod once it has arrived, and the services whose slices name
/// it (so its arrival rebuilds exactly those). One table for both keeps one copy of each name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodEntry {
    /// The pod, once seen. Boxed: the table keeps a slot for every name, and hashbrown's tables are up
    /// to half empty after they grow, so a pod inline would cost its size in every empty slot too.
    pub pod: Option<Box<Pod>>,
    /// Host names of the services (in its namespace) whose slices name it: almost always one, kept
    /// inline.
    pub services: SmallVec<[Hostname; 1]>,
}

/// Compacts a slice; `None` for slices meshd does not serve (no service, MCS imports, FQDN addresses).
/// Addresses that do not parse are left out and returned beside it.
pub fn slice(s: &objects::EndpointSlice) -> Option<(Slice, Vec<InvalidAddress>)> {
    let labels = s.metadata.labels.as_ref()?;
    if labels.contains_key(LABEL_MCS_SERVICE_NAME) || s.address_type == "FQDN" {
        return None;
    }
    let service = labels.get(LABEL_SERVICE_NAME)?;
    let ports = s
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(EndpointPort {
                service_port_name: p.name.as_deref().unwrap_or_default().into(),
                port: super::service::port(p.port?)?,
            })
        })
        .collect();
    let mut invalid = Vec::new();
    let endpoints = s
        .endpoints
        .iter()
        .map(|e| SliceEndpoint {
            addresses: e
                .addresses
                .iter()
                .filter_map(|a| parse_ip("endpoints[].addresses", a, &mut invalid))
                .collect(),
            health: health(e.conditions.as_ref()),
            pod: e
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.as_deref())
                .map(Arc::from),
            node: e.node_name.as_deref().map(Arc::from),
        })
        .collect();
    let slice = Slice {
        service: service.as_str().into(),
        ports,
        endpoints,
    };
    Some((slice, invalid))
}

/// Ready (or unknown) → healthy; terminating but serving → draining; otherwise unhealthy.
pub fn health(c: Option<&discovery::EndpointConditions>) -> Health {
    let c = c.cloned().unwrap_or_default();
    match (c.ready, c.serving, c.terminating) {
        (None | Some(true), _, _) => Health::Healthy,
        (_, Some(true), Some(true)) => Health::Draining,
        _ => Health::Unhealthy,
    }
}

/// Compacts a pod; `None` for failed pods (whose IPs may be reused).
pub fn pod(p: &objects::Pod, ctx: &Context) -> Option<Pod> {
    let namespace = p.metadata.namespace.as_deref()?;
    if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
        return None;
    }
    let spec = p.spec.as_ref();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let sa = spec
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    let workload_meta = workload_meta(workload_name(p), namespace, &labels, &ctx.cluster);
    let traits = PodTraits {
        network: labels.get(LABEL_NETWORK).map(|n| n.as_str().into()),
        locality: labels.get(LABEL_LOCALITY).map(|l| {
            let mut parts = l.splitn(3, '.').map(Arc::from);
            Locality {
                region: parts.next().unwrap_or_default(),
                zone: parts.next().unwrap_or_default(),
                subzone: parts.next().unwrap_or_default(),
            }
        }),
        tls_mode: match labels.get(LABEL_TLS_MODE).map(String::as_str) {
            Some("istio") => TlsMode::Istio,
            _ => TlsMode::Disabled,
        },
        info: WorkloadInfo::new(Arc::new(labels), Some(ctx.spiffe(namespace, sa))),
        ports: Arc::new(
            spec.into_iter()
                .flat_map(|s| &s.containers)
                .flat_map(|c| c.ports.iter().flatten())
                .filter_map(|p| Some((p.name.clone()?, u32::try_from(p.container_port).ok()?)))
                .collect(),
        ),
    };
    let status = p.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Some(Pod {
        node: spec.and_then(|s| s.node_name.as_deref()).map(Arc::from),
        ready_ip: status
            .and_then(|s| s.pod_ip.as_deref())
            .filter(|_| ready && p.metadata.deletion_timestamp.is_none())
            .and_then(|ip| ip.parse().ok()),
        traits: Arc::new(traits),
        workload_meta,
    })
}

/// A node's locality from its topology labels (legacy failure-domain labels as fallback).
pub fn node_locality(labels: &std::collections::BTreeMap<String, String>) -> Locality {
    let get = |keys: &[&str]| -> Arc<str> {
        keys.iter()
            .find_map(|k| labels.get(*k))
            .map(|v| v.as_str().into())
            .unwrap_or_default()
    };
    Locality {
        region: get(&[LABEL_REGION, LABEL_REGION_LEGACY]),
        zone: get(&[LABEL_ZONE, LABEL_ZONE_LEGACY]),
        subzone: get(&[LABEL_SUBZONE]),
    }
}

/// Everything outside a slice that its endpoints depend on.
pub struct Sources<'a> {
    /// Cluster facts.
    pub ctx: &'a Context,
    /// Pods by name.
    pub pods: &'a HashMap<ObjectName, PodEntry>,
    /// Node localities by node name.
    pub nodes: &'a HashMap<Arc<str>, Locality>,
    /// meshNetworks rules for this cluster.
    pub networks: &'a NetworkResolver,
    /// The system namespace's network label.
    pub system_network: Option<&'a NetworkId>,
    /// One copy of each placement, shared by the endpoints of a cluster, network and locality.
    pub placements: &'a Mutex<Interner<Placement>>,
}

impl Sources<'_> {
    /// Appends the endpoints of `slice` to `out`. Endpoints whose pod is not known yet are skipped and
    /// their pod named in `missing`, so they can be rebuilt when it arrives.
    pub fn build(
        &self,
        namespace: &Arc<str>,
        slice: &Slice,
        out: &mut Vec<Endpoint>,
        missing: &mut Vec<Arc<str>>,
    ) {
        for e in &slice.endpoints {
            let pod = match &e.pod {
                Some(name) => {
                    let key = ObjectName {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    };
                    match self.pods.get(&key).and_then(|e| e.pod.as_deref()) {
                        Some(p) => Some(p),
                        None => {
                            missing.push(name.clone());
                            continue;
                        }
                    }
                }
                None => None,
            };
            for &address in &e.addresses {
                out.push(self.endpoint(
                    address,
                    pod,
                    e.node.as_ref(),
                    slice.ports.clone(),
                    e.health,
                    e.pod.clone(),
                ));
            }
        }
    }

    /// One endpoint of a pod (or of a slice endpoint without one) at `address`.
    pub fn endpoint(
        &self,
        address: IpAddr,
        pod: Option<&Pod>,
        node: Option<&Arc<str>>,
        ports: Arc<[EndpointPort]>,
        health: Health,
        workload: Option<Arc<str>>,
    ) -> Endpoint {
        let node = pod.and_then(|p| p.node.as_ref()).or(node);
        let traits = pod.map(|p| &*p.traits);
        let placement = Placement {
            cluster: self.ctx.cluster.clone(),
            network: self.networks.resolve(
                traits.and_then(|t| t.network.as_ref()),
                self.system_network,
                address,
            ),
            locality: traits
                .and_then(|t| t.locality.as_ref())
                .or_else(|| node.and_then(|n| self.nodes.get(n)))
                .cloned()
                .unwrap_or_default(),
        };
        Endpoint {
            address,
            ports,
            placement: self
                .placements
                .lock()
                .get_or_insert(&placement, |p| Arc::new(p.clone())),
            info: traits.map_or_else(Arc::default, |t| t.info.clone()),
            tls_mode: traits.map_or(TlsMode::Disabled, |t| t.tls_mode),
            health,
            workload,
            kind: WorkloadKind::Pod,
            // istiod without a pod: no workload, namespace or labels.
            workload_meta: pod.map_or_else(
                || workload_meta("", "", &BTreeMap::new(), &self.ctx.cluster),
                |p| p.workload_meta.clone(),
            ),
            weight: 1,
        }
    }

    /// Every ready pod with an IP as a workload ServiceEntries may select, sorted by namespace and name.
    pub fn workloads(&self) -> Arc<[PodWorkload]> {
        let mut out: Vec<PodWorkload> = self
            .pods
            .iter()
            .filter_map(|(name, entry)| {
                let pod = entry.pod.as_deref()?;
                let address = pod.ready_ip?;
                let endpoint = self.endpoint(
                    address,
                    Some(pod),
                    None,
                    Arc::from([]),
                    Health::Healthy,
                    Some(name.name.clone()),
                );
                Some(PodWorkload {
                    namespace: name.namespace.clone(),
                    endpoint,
                    ports: pod.traits.ports.clone(),
                })
            })
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.endpoint.workload).cmp(&(&b.namespace, &b.endpoint.workload)));
        out.into()
    }
}

/// A ready pod as a workload (istiod's pod `WorkloadInstance`): its endpoint without ports, and its
/// named container ports.
#[derive(Debug, Clone, PartialEq)]
pub struct PodWorkload {
    /// Its namespace.
    pub namespace: Arc<str>,
    /// Its endpoint (no ports; `workload` is the pod's name), as a Service's endpoint of it would be.
    pub endpoint: Endpoint,
    /// Named container ports.
    pub ports: Arc<BTreeMap<String, u32>>,
}

#[cfg(test)]
mod tests {
    //! Endpoint building, table-driven: each case is Kubernetes JSON in, one summary line per endpoint out.

    use serde_json::json;

    use super::*;
    use crate::config::MeshNetworks;

    fn ctx() -> Context {
        Context {
            cluster: "c2".into(),
            domain_suffix: "cluster.local".into(),
            trust_domain: "td".into(),
        }
    }

    fn k8s_slice(endpoints: serde_json::Value) -> objects::EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": "reviews-abc", "namespace": "ns", "labels": {"kubernetes.io/service-name": "reviews"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 9080}],
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    fn k8s_pod(name: &str, labels: serde_json::Value, node: &str) -> (ObjectName, PodEntry) {
        let p: objects::Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {"serviceAccountName": "reviews", "nodeName": node, "containers": []},
            "status": {"phase": "Running"},
        }))
        .unwrap();
        let key = ObjectName {
            namespace: "ns".into(),
            name: name.into(),
        };
        let entry = PodEntry {
            pod: pod(&p, &ctx()).map(Box::new),
            services: Default::default(),
        };
        (key, entry)
    }

    fn summary(e: &Endpoint) -> String {
        format!(
            "{} http:{} net={} loc={} sa={} tls={:?} {:?} pod={} app={}",
            e.address,
            e.port("http").unwrap_or(0),
            e.label(crate::model::LABEL_NETWORK).unwrap_or("-"),
            e.locality(),
            e.service_account().as_deref().unwrap_or("-"),
            e.tls_mode,
            e.health,
            e.workload.as_deref().unwrap_or("-"),
            e.label("app").unwrap_or("-"),
        )
    }

    #[test]
    fn endpoints_are_built_like_istiod() {
        let pods: HashMap<ObjectName, PodEntry> = [
            k8s_pod(
                "p1",
                json!({"app": "reviews", "security.istio.io/tlsMode": "istio", "topology.istio.io/network": "pod-net",
                       "topology.istio.io/locality": "eu.eu-1a.rack7"}),
                "n1",
            ),
            k8s_pod("p2", json!({"app": "reviews"}), "n1"),
        ]
        .into();
        let nodes: HashMap<Arc<str>, Locality> = [(
            Arc::from("n1"),
            node_locality(
                &[
                    ("topology.kubernetes.io/region".to_owned(), "us".to_owned()),
                    (
                        "failure-domain.beta.kubernetes.io/zone".to_owned(),
                        "us-1b".to_owned(),
                    ),
                ]
                .into(),
            ),
        )]
        .into();
        let nets =
            MeshNetworks::parse("networks:\n  cidr-net: {endpoints: [{fromCidr: 10.9.0.0/16}]}\n").unwrap();
        let resolver = NetworkResolver::new(&nets, &"c2".into());
        let system_net = NetworkId::from("ns-net");

        let cases = [
            (
                "pod labels set tls mode, network and locality",
                json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "p1"}}]),
                None,
                vec![
                    "10.0.0.1 http:9080 net=pod-net loc=eu/eu-1a/rack7 sa=spiffe://td/ns/ns/sa/reviews tls=Istio Healthy pod=p1 app=reviews",
                ],
                vec![],
            ),
            (
                "node locality (legacy zone label), system namespace network",
                json!([{"addresses": ["10.0.0.2"], "targetRef": {"kind": "Pod", "name": "p2"}}]),
                Some(&system_net),
                vec![
                    "10.0.0.2 http:9080 net=ns-net loc=us/us-1b/ sa=spiffe://td/ns/ns/sa/reviews tls=Disabled Healthy pod=p2 app=reviews",
                ],
                vec![],
            ),
            (
                "meshNetworks fromCidr; serving+terminating drains, not ready is unhealthy",
                json!([
                    {"addresses": ["10.9.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}, "targetRef": {"kind": "Pod", "name": "p2"}},
                    {"addresses": ["10.0.0.3"], "conditions": {"ready": false}, "nodeName": "n1"},
                ]),
                None,
                vec![
                    "10.9.0.2 http:9080 net=cidr-net loc=us/us-1b/ sa=spiffe://td/ns/ns/sa/reviews tls=Disabled Draining pod=p2 app=reviews",
                    "10.0.0.3 http:9080 net=- loc=us/us-1b/ sa=- tls=Disabled Unhealthy pod=- app=-",
                ],
                vec![],
            ),
            (
                "pod not arrived yet: skipped and named",
                json!([{"addresses": ["10.0.0.4"], "targetRef": {"kind": "Pod", "name": "p9"}}]),
                None,
                vec![],
                vec!["p9"],
            ),
        ];
        for (name, eps, system_network, want, want_missing) in cases {
            let sources = Sources {
                ctx: &ctx(),
                pods: &pods,
                nodes: &nodes,
                networks: &resolver,
                system_network,
                placements: &Default::default(),
            };
            let (s, invalid) = slice(&k8s_slice(eps)).expect(name);
            assert!(invalid.is_empty(), "{name}: {invalid:?}");
            let (mut out, mut missing) = (Vec::new(), Vec::new());
            sources.build(&"ns".into(), &s, &mut out, &mut missing);
            assert_eq!(out.iter().map(summary).collect::<Vec<_>>(), want, "{name}");
            assert_eq!(
                missing.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
                want_missing,
                "{name}"
            );
            for e in &out {
                assert_eq!(
                    e.label(crate::model::LABEL_CLUSTER),
                    Some("c2"),
                    "{name}: cluster label"
                );
            }
        }
    }

    #[test]
    fn addresses_that_do_not_parse_are_left_out_and_returned() {
        for (name, eps, want, want_invalid) in [
            (
                "one bad address among good ones",
                json!([{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.300", "10.0.0.2"]}]),
                vec![vec!["10.0.0.1"], vec!["10.0.0.2"]],
                vec!["10.0.0.300"],
            ),
            (
                "an endpoint left with no address stays (it has none to serve)",
                json!([{"addresses": ["pod-a.example"]}]),
                vec![vec![]],
                vec!["pod-a.example"],
            ),
            (
                "IPv6 and IPv4 parse",
                json!([{"addresses": ["fd00::1"]}, {"addresses": ["10.0.0.3"]}]),
                vec![vec!["fd00::1"], vec!["10.0.0.3"]],
                vec![],
            ),
        ] {
            let (s, invalid) = slice(&k8s_slice(eps)).expect(name);
            let got: Vec<Vec<String>> = s
                .endpoints
                .iter()
                .map(|e| e.addresses.iter().map(ToString::to_string).collect())
                .collect();
            assert_eq!(got, want, "{name}");
            assert!(
                invalid.iter().all(|i| i.field == "endpoints[].addresses"),
                "{name}"
            );
            let invalid: Vec<&str> = invalid.iter().map(|i| i.value.as_str()).collect();
            assert_eq!(invalid, want_invalid, "{name}");
        }
    }

    #[test]
    fn slices_meshd_does_not_serve_are_skipped() {
        let mut mcs = k8s_slice(json!([]));
        mcs.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("multicluster.kubernetes.io/service-name".into(), "x".into());
        let mut fqdn = k8s_slice(json!([]));
        fqdn.address_type = "FQDN".into();
        let mut orphan = k8s_slice(json!([]));
        orphan.metadata.labels = None;
        for s in [mcs, fqdn, orphan] {
            assert!(slice(&s).is_none());
        }
    }

    #[test]
    fn endpoints_carry_istiods_telemetry_string() {
        // A Deployment's pod names the Deployment; an address without a pod only its cluster.
        let p: objects::Pod = serde_json::from_value(json!({
            "metadata": {"name": "reviews-v1-5d8f9c-x7k2p", "generateName": "reviews-v1-5d8f9c-", "namespace": "ns",
                         "labels": {"app": "reviews", "version": "v1", "pod-template-hash": "5d8f9c"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "reviews-v1-5d8f9c",
                                              "uid": "u1", "controller": true}]},
            "status": {"phase": "Running"},
        }))
        .unwrap();
        let key = ObjectName {
            namespace: "ns".into(),
            name: "reviews-v1-5d8f9c-x7k2p".into(),
        };
        let pods: HashMap<ObjectName, PodEntry> = [(
            key,
            PodEntry {
                pod: pod(&p, &ctx()).map(Box::new),
                services: Default::default(),
            },
        )]
        .into();
        let sources = Sources {
            ctx: &ctx(),
            pods: &pods,
            nodes: &HashMap::new(),
            networks: &NetworkResolver::default(),
            system_network: None,
            placements: &Default::default(),
        };
        let eps = json!([{"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "reviews-v1-5d8f9c-x7k2p"}},
                         {"addresses": ["10.0.0.2"]}]);
        let (s, _) = slice(&k8s_slice(eps)).unwrap();
        let (mut out, mut missing) = (Vec::new(), Vec::new());
        sources.build(&"ns".into(), &s, &mut out, &mut missing);
        let got: Vec<&str> = out.iter().map(|e| &*e.workload_meta).collect();
        assert_eq!(got, ["reviews-v1;ns;reviews;v1;c2", ";;;;c2"]);
    }

    #[test]
    fn failed_pods_are_dropped() {
        let p: objects::Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Failed"}}))
        .unwrap();
        assert!(pod(&p, &ctx()).is_none());
    }
}
