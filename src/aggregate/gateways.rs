//! Gateway discovery (istiod's `NetworkManager.reload` and the kube `networkManager`), pure: from
//! meshNetworks and every cluster's own Services to the set of gateways into each network.
//!
//! Sources, merged into one sorted set:
//! - meshNetworks `address` gateways (no cluster);
//! - meshNetworks `registryServiceName` gateways, looked up only in the registries the same network names
//!   with `fromRegistry`;
//! - Services labelled `topology.istio.io/network`: port from `networking.istio.io/gatewayPort` (default
//!   15443), which the Service must expose; addresses from load-balancer ingress and `externalIPs`.
//!
//! A NodePort gateway's port is mapped to its node port. DNS names are left as [`Candidate`]s here;
//! [`resolve`] expands them with the addresses the resolver task found.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use serde::Serialize;

use crate::{
    config::networks::{GatewayTarget, MeshNetworks, NetworkEndpoints},
    model::{ClusterId, ExternalAddress, LABEL_NETWORK, NetworkGateway, NetworkId, Service},
};

/// Service label overriding a labelled gateway's port.
pub const LABEL_GATEWAY_PORT: &str = "networking.istio.io/gatewayPort";
/// The east-west gateway's mTLS (AUTO_PASSTHROUGH) port.
pub const DEFAULT_GATEWAY_PORT: u16 = 15443;

/// A gateway before DNS: its address may still be a name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// The network it leads into.
    pub network: NetworkId,
    /// The cluster whose Service provided it.
    pub cluster: Option<ClusterId>,
    /// An IP or a DNS name.
    pub address: ExternalAddress,
    /// Its port (already mapped to the node port for NodePort Services).
    pub port: u16,
}

/// A labelled Service that is not a gateway, and why (reported, never fatal).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ignored {
    /// The Service's cluster.
    pub cluster: ClusterId,
    /// Its host name.
    pub hostname: Arc<str>,
    /// Why.
    pub reason: String,
}

/// What [`discover`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Every gateway candidate, sorted and de-duplicated.
    pub candidates: Vec<Candidate>,
    /// Labelled Services that could not be used.
    pub ignored: Vec<Ignored>,
}

/// Every gateway of every network, from meshNetworks and each cluster's own Services (not the merged
/// ones: the same gateway Service has a different network label in every cluster).
pub fn discover<'a>(
    networks: &MeshNetworks,
    services: impl IntoIterator<Item = (&'a ClusterId, &'a Service)>,
) -> Discovered {
    let mut out = Discovered::default();
    // registryServiceName → (network, registry, port), for the one pass over the Services below.
    let mut by_registry_service: BTreeMap<&str, Vec<(NetworkId, &str, u16)>> = BTreeMap::new();
    for (name, net) in &networks.networks {
        let registries = net.endpoints.iter().filter_map(|e| match e {
            NetworkEndpoints::FromRegistry(r) => Some(r.as_str()),
            NetworkEndpoints::FromCidr(_) => None,
        });
        for gw in &net.gateways {
            match &gw.target {
                GatewayTarget::Address(addr) => out.candidates.push(Candidate {
                    network: name.as_str().into(),
                    cluster: None,
                    address: match addr.parse() {
                        Ok(ip) => ExternalAddress::Ip(ip),
                        Err(_) => ExternalAddress::Hostname(addr.as_str().into()),
                    },
                    port: gw.port,
                }),
                GatewayTarget::RegistryServiceName(host) => {
                    for registry in registries.clone() {
                        by_registry_service.entry(host.as_str()).or_default().push((
                            name.as_str().into(),
                            registry,
                            gw.port,
                        ));
                    }
                }
            }
        }
    }
    for (cluster, svc) in services {
        for (network, _, port) in by_registry_service
            .get(&*svc.hostname)
            .into_iter()
            .flatten()
            .filter(|(_, registry, _)| *registry == cluster.as_str())
        {
            push_service(&mut out.candidates, network, cluster, svc, *port);
        }
        if let Some(network) = svc.labels.get(LABEL_NETWORK) {
            match labelled_port(svc) {
                Ok(port) => push_service(&mut out.candidates, &network.as_str().into(), cluster, svc, port),
                Err(reason) => out.ignored.push(Ignored {
                    cluster: cluster.clone(),
                    hostname: svc.hostname.as_str().into(),
                    reason,
                }),
            }
        }
    }
    out.candidates.sort();
    out.candidates.dedup();
    out.ignored.sort();
    out
}

/// The port of a labelled gateway Service, which it must expose (istiod ≥ 1.29).
fn labelled_port(svc: &Service) -> Result<u16, String> {
    let port = match svc.labels.get(LABEL_GATEWAY_PORT) {
        None => DEFAULT_GATEWAY_PORT,
        Some(v) => v
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("label {LABEL_GATEWAY_PORT}={v:?} is not a port number"))?,
    };
    if svc.ports.iter().any(|p| p.port == port) {
        Ok(port)
    } else {
        Err(format!("the Service does not expose gateway port {port}"))
    }
}

/// One candidate per external address of `svc` in `cluster`.
fn push_service(
    out: &mut Vec<Candidate>,
    network: &NetworkId,
    cluster: &ClusterId,
    svc: &Service,
    port: u16,
) {
    // A NodePort gateway is reached on its node port (istiod's ClusterExternalPorts mapping).
    let port = svc
        .node_ports
        .get(cluster)
        .and_then(|m| m.get(&port))
        .copied()
        .unwrap_or(port);
    for address in svc.external_addresses.get(cluster).into_iter().flatten() {
        out.push(Candidate {
            network: network.clone(),
            cluster: Some(cluster.clone()),
            address: address.clone(),
            port,
        });
    }
}

/// The DNS names among `candidates` (what the resolver task must keep resolved).
pub fn hostnames(candidates: &[Candidate]) -> BTreeSet<Arc<str>> {
    candidates
        .iter()
        .filter_map(|c| match &c.address {
            ExternalAddress::Hostname(h) => Some(h.clone()),
            ExternalAddress::Ip(_) => None,
        })
        .collect()
}

/// The gateways EDS uses: IP candidates as they are, a DNS name once per address it resolved to; a name
/// not (yet) resolved gives none. Sorted, de-duplicated.
pub fn resolve(candidates: &[Candidate], dns: &BTreeMap<Arc<str>, Vec<IpAddr>>) -> Vec<NetworkGateway> {
    let mut out: Vec<NetworkGateway> = candidates
        .iter()
        .flat_map(|c| {
            let (addresses, hostname) = match &c.address {
                ExternalAddress::Ip(ip) => (std::slice::from_ref(ip), None),
                ExternalAddress::Hostname(h) => (dns.get(h).map_or(&[][..], Vec::as_slice), Some(h)),
            };
            addresses.iter().map(move |ip| NetworkGateway {
                network: c.network.clone(),
                cluster: c.cluster.clone(),
                address: *ip,
                port: c.port,
                hostname: hostname.cloned(),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
#[path = "gateways_tests.rs"]
mod tests;
