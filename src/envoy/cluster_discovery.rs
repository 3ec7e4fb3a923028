//! How an outbound cluster finds its endpoints (istiod's `convertResolution` and the discovery part
//! of `buildCluster`): EDS for load-balanced services; for Envoy, `STRICT_DNS` for a ServiceEntry
//! `DNS` and an `ExternalName` Service, `LOGICAL_DNS` for `DNS_ROUND_ROBIN`, each with its endpoints
//! inline in the cluster's `load_assignment` (Envoy resolves the names, so they cannot go over EDS);
//! `ORIGINAL_DST` for a headless Service or ServiceEntry `NONE` on a sidecar (a gateway has no
//! original destination: EDS).
//!
//! Owns: the discovery type per proxy and service, the DNS cluster fields and inline endpoints.
//! Does NOT: the rule's policy ([`super::cluster_policy`]), TLS ([`super::cds`]).
//!
//! Proxyless gRPC gets EDS whatever the resolution, as istiod's gRPC generator (it builds only EDS
//! clusters): its EDS carries the IP endpoints.

use std::{collections::BTreeMap, sync::Arc};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{ClusterDiscoveryType, DiscoveryType, DnsLookupFamily, LbPolicy},
            },
            core::v3::{
                Address, Locality as LocalityPb, SocketAddress, TypedExtensionConfig, address, socket_address,
            },
            endpoint::v3::{ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint},
        },
        extensions::network::dns_resolver::cares::v3::CaresDnsResolverConfig,
    },
    google::protobuf::{Duration, UInt32Value},
};
use prost::Message;

use super::{Mesh, any, eds};
use crate::{
    envoy::{Proxy, ProxyKind},
    model::{DnsTarget, EndpointPort, Locality, Resolution, Service, ServicePort},
};

/// istiod's default MeshConfig `dnsRefreshRate`: how often Envoy re-resolves a DNS cluster's names
/// (it honours shorter TTLs too: `respect_dns_ttl`).
const DNS_REFRESH_SECS: i64 = 60;

/// istiod's `PILOT_DNS_JITTER_DURATION` (100ms): spreads the proxies' re-resolutions.
const DNS_JITTER_NANOS: i32 = 100_000_000;

/// istiod's `PILOT_DNS_CARES_UDP_MAX_QUERIES`: queries per UDP socket before c-ares opens another.
const CARES_UDP_MAX_QUERIES: u32 = 100;

/// How a cluster finds its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovery {
    /// Over EDS.
    Eds,
    /// Envoy resolves every name and balances over every address.
    StrictDns,
    /// Envoy resolves its one name and connects to the first address.
    LogicalDns,
    /// The connection's original destination.
    OriginalDst,
}

/// The discovery type of `service`'s clusters for a `kind` proxy (istiod's `convertResolution`).
pub fn of(kind: ProxyKind, service: &Service) -> Discovery {
    match (&service.resolution, kind) {
        (_, ProxyKind::Grpc) | (Resolution::ClientSideLb, _) => Discovery::Eds,
        (Resolution::Dns(_) | Resolution::Alias(_), _) => Discovery::StrictDns,
        (Resolution::DnsRoundRobin(_), _) => Discovery::LogicalDns,
        // A gateway cannot use the original destination: its client dialled the gateway.
        (Resolution::Passthrough, ProxyKind::Router) => Discovery::Eds,
        (Resolution::Passthrough, _) => Discovery::OriginalDst,
    }
}

/// Makes the EDS cluster `c` (its policy applied) use `discovery`. `false` when it must not be sent:
/// a DNS cluster with no endpoint (istiod builds none). `subset` is the subset's labels, if any.
pub fn apply(
    c: &mut Cluster,
    discovery: Discovery,
    mesh: &dyn Mesh,
    proxy: &Proxy,
    service: &Service,
    port: &ServicePort,
    subset: Option<&BTreeMap<String, String>>,
) -> bool {
    let dns = match discovery {
        Discovery::Eds => return true,
        Discovery::OriginalDst => {
            // istiod's `applyLoadBalancer`: the original-destination load balancer, nothing else.
            set_type(c, DiscoveryType::OriginalDst);
            c.lb_policy = LbPolicy::ClusterProvided as i32;
            c.lb_config = None;
            return true;
        }
        Discovery::StrictDns => DiscoveryType::StrictDns,
        Discovery::LogicalDns => DiscoveryType::LogicalDns,
    };
    let mut groups = load_assignment(mesh, service, port, subset, &c.name);
    if discovery == Discovery::LogicalDns {
        // Envoy takes exactly one endpoint in a LOGICAL_DNS cluster (validation allows one).
        groups.truncate(1);
        if let Some(g) = groups.first_mut() {
            g.lb_endpoints.truncate(1);
        }
    }
    if groups.is_empty() {
        return false;
    }
    set_type(c, dns);
    set_dns(c, proxy);
    c.load_assignment = Some(ClusterLoadAssignment {
        cluster_name: c.name.clone(),
        endpoints: groups,
        ..Default::default()
    });
    true
}

/// istiod's DNS fields, which it still sets on the cluster itself (not the `envoy.clusters.dns`
/// extension that deprecates them): meshd sends what istiod sends.
#[allow(deprecated)]
fn set_dns(c: &mut Cluster, proxy: &Proxy) {
    c.dns_lookup_family = lookup_family(proxy) as i32;
    c.dns_refresh_rate = Some(Duration {
        seconds: DNS_REFRESH_SECS,
        nanos: 0,
    });
    c.respect_dns_ttl = true;
    c.dns_jitter = Some(Duration {
        seconds: 0,
        nanos: DNS_JITTER_NANOS,
    });
    c.typed_dns_resolver_config = Some(TypedExtensionConfig {
        name: "envoy.network.dns_resolver.cares".to_owned(),
        typed_config: Some(any(&CaresDnsResolverConfig {
            udp_max_queries: Some(UInt32Value {
                value: CARES_UDP_MAX_QUERIES,
            }),
            ..Default::default()
        })),
    });
}

fn set_type(c: &mut Cluster, t: DiscoveryType) {
    c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(t as i32));
    c.eds_cluster_config = None;
}

/// istiod's rule: the proxy's own address families (both, or none known: both).
fn lookup_family(proxy: &Proxy) -> DnsLookupFamily {
    if !proxy.ips.is_empty() && proxy.ips.iter().all(|ip| ip.is_ipv4()) {
        DnsLookupFamily::V4Only
    } else if !proxy.ips.is_empty() && proxy.ips.iter().all(|ip| ip.is_ipv6()) {
        DnsLookupFamily::V6Only
    } else {
        DnsLookupFamily::All
    }
}

/// The cluster's endpoints: the service's IP endpoints as EDS would send them (every cluster's, as
/// istiod's endpoint builder), then the names to resolve, by locality. A subset with labels selects
/// IP endpoints only (a name carries no labels, as istiod's host instance).
fn load_assignment(
    mesh: &dyn Mesh,
    service: &Service,
    port: &ServicePort,
    subset: Option<&BTreeMap<String, String>>,
    name: &str,
) -> Vec<LocalityLbEndpoints> {
    let selects = |labels: &BTreeMap<String, String>, ep: &crate::model::Endpoint| {
        labels.iter().all(|(k, v)| ep.label(k) == Some(v.as_str()))
    };
    let ips = eds::grouped(
        Arc::from(name),
        port,
        mesh.endpoints(service)
            .filter(|ep| subset.is_none_or(|l| selects(l, ep))),
        |_| 0,
    );
    // The EDS encoding is the one EDS sends; decoding it keeps the two identical.
    let mut groups = ClusterLoadAssignment::decode(eds::encode(name.into(), &ips).value())
        .map(|a| a.endpoints)
        .unwrap_or_default();
    if subset.is_some_and(|l| !l.is_empty()) {
        return groups;
    }
    for (t, port) in dns_targets(service, port) {
        let lb = LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: t.address.to_string(),
                        port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            load_balancing_weight: Some(UInt32Value { value: t.weight }),
            ..Default::default()
        };
        // EDS always writes the locality, empty or not: the same here, so groups compare.
        let locality = Some(LocalityPb {
            region: t.locality.region.to_string(),
            zone: t.locality.zone.to_string(),
            sub_zone: t.locality.subzone.to_string(),
        });
        match groups.iter_mut().find(|g| g.locality == locality) {
            Some(g) => {
                g.lb_endpoints.push(lb);
                if let Some(w) = &mut g.load_balancing_weight {
                    w.value = w.value.saturating_add(t.weight);
                }
            }
            None => groups.push(LocalityLbEndpoints {
                locality,
                lb_endpoints: vec![lb],
                load_balancing_weight: Some(UInt32Value { value: t.weight }),
                ..Default::default()
            }),
        }
    }
    groups
}

/// The names `service`'s DNS clusters of `port` resolve, with the port each is dialled on: the
/// ServiceEntry's, or an ExternalName's external name on the service port (istiod's ExternalName
/// endpoint).
pub fn dns_targets(service: &Service, port: &ServicePort) -> Vec<(DnsTarget, u16)> {
    if let Resolution::Alias(host) = &service.resolution {
        let t = DnsTarget {
            address: host.clone(),
            ports: Arc::new([EndpointPort {
                service_port_name: port.name.clone(),
                port: port.port,
            }]),
            locality: Locality::default(),
            weight: 1,
        };
        return vec![(t, port.port)];
    }
    service
        .resolution
        .dns_targets()
        .iter()
        .filter_map(|t| {
            let p = t.ports.iter().find(|p| p.service_port_name == port.name)?;
            Some((t.clone(), p.port))
        })
        .collect()
}

impl Discovery {
    /// Envoy's name of the discovery type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Eds => "EDS",
            Self::StrictDns => "STRICT_DNS",
            Self::LogicalDns => "LOGICAL_DNS",
            Self::OriginalDst => "ORIGINAL_DST",
        }
    }
}

#[cfg(test)]
#[path = "cluster_discovery_tests.rs"]
mod tests;
