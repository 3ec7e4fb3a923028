//! Which network an endpoint is on (istiod's `endpointNetwork`): the pod's `topology.istio.io/network`
//! label, else that label on the cluster's system namespace, else meshNetworks — `fromRegistry` naming
//! this cluster, then the first `fromCidr` containing the address. Networks are tried in name order, so
//! the first match is deterministic; overlapping claims are warned about, as in istiod.

use std::net::IpAddr;

use ipnet::IpNet;
use tracing::warn;

use crate::{
    config::{MeshNetworks, networks::NetworkEndpoints},
    model::{ClusterId, NetworkId},
};

/// meshNetworks rules, pre-digested for one cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkResolver {
    from_registry: Option<NetworkId>,
    cidrs: Vec<(IpNet, NetworkId)>,
}

impl NetworkResolver {
    /// The rules of `networks` that can apply to endpoints of `cluster`.
    pub fn new(networks: &MeshNetworks, cluster: &ClusterId) -> Self {
        let mut out = Self::default();
        for (name, net) in &networks.networks {
            for ep in &net.endpoints {
                match ep {
                    NetworkEndpoints::FromRegistry(r) if r.as_str() == cluster.as_str() => {
                        match &out.from_registry {
                            Some(first) => {
                                warn!(%cluster, first = %first, ignored = %name, "two networks claim this registry; the first wins")
                            }
                            None => out.from_registry = Some(name.as_str().into()),
                        }
                    }
                    NetworkEndpoints::FromCidr(cidr) => out.cidrs.push((*cidr, name.as_str().into())),
                    NetworkEndpoints::FromRegistry(_) => {}
                }
            }
        }
        for (i, (a, net_a)) in out.cidrs.iter().enumerate() {
            for (b, net_b) in &out.cidrs[i + 1..] {
                if net_a != net_b && (a.contains(&b.network()) || b.contains(&a.network())) {
                    warn!(%a, %b, first = %net_a, ignored = %net_b, "meshNetworks fromCidr ranges of two networks overlap; the first wins");
                }
            }
        }
        out
    }

    /// The network of an endpoint at `addr`, given its pod label and the system namespace label.
    pub fn resolve(
        &self,
        pod_label: Option<&NetworkId>,
        system_namespace: Option<&NetworkId>,
        addr: IpAddr,
    ) -> Option<NetworkId> {
        pod_label
            .or(system_namespace)
            .or(self.from_registry.as_ref())
            .or_else(|| self.cidrs.iter().find(|(c, _)| c.contains(&addr)).map(|(_, n)| n))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_rule_wins_in_istios_order() {
        let nets = MeshNetworks::parse(
            "networks:\n  a-net: {endpoints: [{fromCidr: 10.0.0.0/8}]}\n  b-net: {endpoints: [{fromRegistry: c2}, {fromCidr: 10.1.0.0/16}]}\n",
        )
        .unwrap();
        let c2 = NetworkResolver::new(&nets, &"c2".into());
        let c3 = NetworkResolver::new(&nets, &"c3".into());
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let other: IpAddr = "192.168.0.1".parse().unwrap();
        let label = NetworkId::from("pod-net");
        let ns = NetworkId::from("ns-net");
        let cases = [
            (&c2, Some(&label), Some(&ns), ip, Some("pod-net")),
            (&c2, None, Some(&ns), ip, Some("ns-net")),
            (&c2, None, None, ip, Some("b-net")),
            (&c3, None, None, ip, Some("a-net")),
            (&c3, None, None, other, None),
        ];
        for (i, (r, pod, sys, addr, want)) in cases.into_iter().enumerate() {
            assert_eq!(r.resolve(pod, sys, addr).as_deref(), want, "case {i}");
        }
    }
}
