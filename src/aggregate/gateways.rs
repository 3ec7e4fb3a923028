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
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{config::MeshNetworks, envoy::static_mesh::service, model::Protocol};

    /// A gateway-shaped Service in `cluster`: `ports`, external addresses, labels, node ports.
    fn svc(
        name: &str,
        cluster: &str,
        ports: &[u16],
        external: &[&str],
        labels: &[(&str, &str)],
        node_ports: &[(u16, u16)],
    ) -> Service {
        let port_defs: Vec<(&str, u16, Protocol)> =
            ports.iter().map(|p| ("tls", *p, Protocol::Tls)).collect();
        let mut s = service(name, "istio-system", &port_defs);
        let c = ClusterId::from(cluster);
        let addrs: Vec<ExternalAddress> = external
            .iter()
            .map(|a| match a.parse() {
                Ok(ip) => ExternalAddress::Ip(ip),
                Err(_) => ExternalAddress::Hostname((*a).into()),
            })
            .collect();
        if !addrs.is_empty() {
            s.external_addresses.insert(c.clone(), addrs);
        }
        if !node_ports.is_empty() {
            s.node_ports.insert(c, node_ports.iter().copied().collect());
        }
        s.labels = Arc::new(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
        s
    }

    fn line(c: &Candidate) -> String {
        let addr = match &c.address {
            ExternalAddress::Ip(ip) => ip.to_string(),
            ExternalAddress::Hostname(h) => h.to_string(),
        };
        format!(
            "{} {} {addr}:{}",
            c.network,
            c.cluster.as_deref().unwrap_or("-"),
            c.port
        )
    }

    #[test]
    fn every_source_in_one_sorted_set() {
        let networks = MeshNetworks::parse(
            "networks:
  vm-net:
    endpoints: [{fromCidr: 192.168.0.0/16}]
    gateways: [{address: 203.0.113.10, port: 15443}, {address: gw.vm.example, port: 443}]
  net-r:
    endpoints: [{fromRegistry: c3}]
    gateways: [{registryServiceName: gw.istio-system.svc.cluster.local, port: 15443}]
",
        )
        .unwrap();
        let net = |n| [(LABEL_NETWORK, n)];
        let services = [
            // Labelled, LB IP and an externalIP: two gateways.
            (
                "c1",
                svc(
                    "eastwest",
                    "c1",
                    &[15021, 15443],
                    &["192.0.2.10", "192.0.2.11"],
                    &net("network1"),
                    &[],
                ),
            ),
            // Same Service in another cluster, another network, an LB host name.
            (
                "c2",
                svc(
                    "eastwest",
                    "c2",
                    &[15443],
                    &["lb.c2.example"],
                    &net("network2"),
                    &[],
                ),
            ),
            // gatewayPort label, exposed.
            (
                "c2",
                svc(
                    "alt",
                    "c2",
                    &[443],
                    &["198.51.100.1"],
                    &[(LABEL_NETWORK, "network2"), (LABEL_GATEWAY_PORT, "443")],
                    &[],
                ),
            ),
            // NodePort: the gateway port maps to the node port.
            (
                "c4",
                svc(
                    "np",
                    "c4",
                    &[15443],
                    &["203.0.113.41"],
                    &net("network4"),
                    &[(15443, 31443)],
                ),
            ),
            // registryServiceName, in its fromRegistry cluster only.
            ("c3", svc("gw", "c3", &[15443], &["198.51.100.30"], &[], &[])),
            ("c1", svc("gw", "c1", &[15443], &["192.0.2.99"], &[], &[])),
            // Unlabelled: not a gateway.
            ("c1", svc("plain", "c1", &[15443], &["192.0.2.50"], &[], &[])),
        ];
        let ids: Vec<(ClusterId, Service)> = services.into_iter().map(|(c, s)| (c.into(), s)).collect();
        let found = discover(&networks, ids.iter().map(|(c, s)| (c, s)));
        let lines: Vec<String> = found.candidates.iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "net-r c3 198.51.100.30:15443",
                "network1 c1 192.0.2.10:15443",
                "network1 c1 192.0.2.11:15443",
                "network2 c2 198.51.100.1:443",
                "network2 c2 lb.c2.example:15443",
                "network4 c4 203.0.113.41:31443",
                "vm-net - 203.0.113.10:15443",
                "vm-net - gw.vm.example:443",
            ]
        );
        assert!(found.ignored.is_empty(), "{:?}", found.ignored);
        assert_eq!(
            hostnames(&found.candidates).into_iter().collect::<Vec<_>>(),
            [Arc::from("gw.vm.example"), Arc::from("lb.c2.example")]
        );
    }

    #[test]
    fn a_labelled_service_must_expose_its_gateway_port() {
        let cases = [
            (
                vec![(LABEL_NETWORK, "n")],
                vec![15021],
                "the Service does not expose gateway port 15443",
            ),
            (
                vec![(LABEL_NETWORK, "n"), (LABEL_GATEWAY_PORT, "8443")],
                vec![15443],
                "the Service does not expose gateway port 8443",
            ),
            (
                vec![(LABEL_NETWORK, "n"), (LABEL_GATEWAY_PORT, "tls")],
                vec![15443],
                "label networking.istio.io/gatewayPort=\"tls\" is not a port number",
            ),
        ];
        for (labels, ports, reason) in cases {
            let s = svc("gw", "c1", &ports, &["192.0.2.1"], &labels, &[]);
            let c = ClusterId::from("c1");
            let found = discover(&MeshNetworks::default(), [(&c, &s)]);
            assert!(found.candidates.is_empty());
            assert_eq!(found.ignored[0].reason, reason);
        }
    }

    #[test]
    fn resolve_expands_names_and_drops_unresolved_ones() {
        let cand = |addr: ExternalAddress| Candidate {
            network: "n".into(),
            cluster: Some("c".into()),
            address: addr,
            port: 15443,
        };
        let candidates = [
            cand(ExternalAddress::Ip("192.0.2.1".parse().unwrap())),
            cand(ExternalAddress::Hostname("a.example".into())),
            cand(ExternalAddress::Hostname("b.example".into())),
        ];
        let dns: BTreeMap<Arc<str>, Vec<IpAddr>> = [(
            "a.example".into(),
            vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()],
        )]
        .into();
        let gws = resolve(&candidates, &dns);
        let got: Vec<(String, Option<&str>)> = gws
            .iter()
            .map(|g| (g.address.to_string(), g.hostname.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("192.0.2.1".into(), None),
                ("192.0.2.1".into(), Some("a.example")),
                ("192.0.2.2".into(), Some("a.example")),
            ]
        );
    }
}
