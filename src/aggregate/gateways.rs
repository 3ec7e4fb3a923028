//! Network gateways from meshNetworks: fixed addresses, or the external addresses of a registry service
//! in the clusters the network names with `fromRegistry`.

use std::collections::BTreeMap;

use crate::{
    config::networks::{GatewayTarget, MeshNetworks, NetworkEndpoints},
    model::{ClusterId, ExternalAddress, Hostname, NetworkGateway, Service, ServiceKey},
};

/// Every gateway of every network, sorted.
pub(super) fn network_gateways(
    networks: &MeshNetworks,
    services: &BTreeMap<ServiceKey, std::sync::Arc<Service>>,
) -> Vec<NetworkGateway> {
    let mut out = Vec::new();
    for (name, net) in &networks.networks {
        let registries: Vec<ClusterId> = net
            .endpoints
            .iter()
            .filter_map(|e| match e {
                NetworkEndpoints::FromRegistry(r) => Some(ClusterId::from(r.as_str())),
                NetworkEndpoints::FromCidr(_) => None,
            })
            .collect();
        for gw in &net.gateways {
            match &gw.target {
                GatewayTarget::Address(addr) => out.push(NetworkGateway {
                    network: name.as_str().into(),
                    cluster: None,
                    address: match addr.parse() {
                        Ok(ip) => ExternalAddress::Ip(ip),
                        Err(_) => ExternalAddress::Hostname(addr.as_str().into()),
                    },
                    port: gw.port,
                }),
                GatewayTarget::RegistryServiceName(host) => {
                    let Some(svc) = find_by_hostname(services, host) else {
                        continue;
                    };
                    for cluster in &registries {
                        for address in svc.external_addresses.get(cluster).into_iter().flatten() {
                            out.push(NetworkGateway {
                                network: name.as_str().into(),
                                cluster: Some(cluster.clone()),
                                address: address.clone(),
                                port: gw.port,
                            });
                        }
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Keys sort by host name first, so the first key at or after `(host, "")` is the one if any.
fn find_by_hostname<'a>(
    services: &'a BTreeMap<ServiceKey, std::sync::Arc<Service>>,
    host: &str,
) -> Option<&'a Service> {
    let from = ServiceKey::new(Hostname::from(host), "");
    services
        .range(from..)
        .next()
        .filter(|(k, _)| &*k.hostname == host)
        .map(|(_, s)| &**s)
}
