//! EndpointSlices, Pods and Nodes → [`Endpoint`]s (istiod's `EndpointBuilder`). Pure.
//!
//! The registry keeps only the compact forms below, not the Kubernetes objects: a pod is its node and
//! its [`PodTraits`] (labels, identity and the few labels that steer routing), which the replicas of a
//! deployment share.

use std::{collections::HashMap, net::IpAddr, sync::Arc};

use k8s_openapi::api::{core::v1 as core, discovery::v1 as discovery};
use smallvec::SmallVec;

use super::{network::NetworkResolver, service::Context};
use crate::model::{
    Endpoint, EndpointPort, Health, Hostname, LABEL_LOCALITY, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE,
    LABEL_TLS_MODE, LABEL_ZONE, Labels, Locality, NetworkId, TlsMode,
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
    /// What it has in common with its replicas (the registry interns them).
    pub traits: Arc<PodTraits>,
}

/// What the replicas of a deployment have in common: labels, identity and what the labels steer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodTraits {
    /// Its labels.
    pub labels: Labels,
    /// SPIFFE identity.
    pub service_account: Arc<str>,
    /// `topology.istio.io/network`.
    pub network: Option<NetworkId>,
    /// `topology.istio.io/locality` (`region.zone.subzone`).
    pub locality: Option<Locality>,
    /// `security.istio.io/tlsMode`.
    pub tls_mode: TlsMode,
}

/// A pod name's entry in the registry: the pod once it has arrived, and the services whose slices name
/// it (so its arrival rebuilds exactly those). One table for both keeps one copy of each name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodEntry {
    /// The pod, once seen.
    pub pod: Option<Pod>,
    /// Host names of the services (in its namespace) whose slices name it: almost always one, kept
    /// inline.
    pub services: SmallVec<[Hostname; 1]>,
}

/// Compacts a slice; `None` for slices meshd does not serve (no service, MCS imports, FQDN addresses).
pub fn slice(s: &discovery::EndpointSlice) -> Option<Slice> {
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
    let endpoints = s
        .endpoints
        .iter()
        .map(|e| SliceEndpoint {
            addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
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
    Some(Slice {
        service: service.as_str().into(),
        ports,
        endpoints,
    })
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
pub fn pod(p: &core::Pod, ctx: &Context) -> Option<Pod> {
    let namespace = p.metadata.namespace.as_deref()?;
    if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
        return None;
    }
    let spec = p.spec.as_ref();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let sa = spec
        .and_then(|s| s.service_account_name.as_deref())
        .unwrap_or("default");
    let traits = PodTraits {
        service_account: ctx.spiffe(namespace, sa),
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
        labels: Arc::new(labels),
    };
    Some(Pod {
        node: spec.and_then(|s| s.node_name.as_deref()).map(Arc::from),
        traits: Arc::new(traits),
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
        let no_labels = Labels::default();
        for e in &slice.endpoints {
            let pod = match &e.pod {
                Some(name) => {
                    let key = ObjectName {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    };
                    match self.pods.get(&key).and_then(|e| e.pod.as_ref()) {
                        Some(p) => Some(p),
                        None => {
                            missing.push(name.clone());
                            continue;
                        }
                    }
                }
                None => None,
            };
            let node = pod.and_then(|p| p.node.as_ref()).or(e.node.as_ref());
            let traits = pod.map(|p| &*p.traits);
            let locality = traits
                .and_then(|t| t.locality.clone())
                .or_else(|| node.and_then(|n| self.nodes.get(n)).cloned())
                .unwrap_or_default();
            for &address in &e.addresses {
                out.push(Endpoint {
                    address,
                    ports: slice.ports.clone(),
                    cluster: self.ctx.cluster.clone(),
                    network: self.networks.resolve(
                        traits.and_then(|t| t.network.as_ref()),
                        self.system_network,
                        address,
                    ),
                    locality: locality.clone(),
                    labels: traits.map_or_else(|| no_labels.clone(), |t| t.labels.clone()),
                    service_account: traits.map(|t| t.service_account.clone()),
                    tls_mode: traits.map_or(TlsMode::Disabled, |t| t.tls_mode),
                    health: e.health,
                    workload: e.pod.clone(),
                    weight: 1,
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
