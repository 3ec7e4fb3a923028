//! EDS: one `ClusterLoadAssignment` per `outbound|port||host` cluster.
//!
//! Owns: grouping a service port's endpoints by locality (each group weighted by the sum of its
//! endpoint weights, which gRPC requires), health mapping, `istio` endpoint metadata and a
//! deterministic order. Does NOT: choose which endpoints a proxy sees (the [`super::EndpointView`]
//! hook does, before this runs) or set priorities (everything is priority 0).
//!
//! The assignment is first built as a plain, hashable [`Assignment`]: its hash is the resource
//! version, because the encoded proto holds protobuf maps that prost encodes in `HashMap` order.

use std::{
    collections::{BTreeMap, BTreeSet},
    hash::{DefaultHasher, Hash, Hasher},
    net::IpAddr,
    sync::Arc,
};

use envoy_types::pb::{
    envoy::config::{
        core::v3::{
            Address, HealthStatus, Locality as PbLocality, Metadata, SocketAddress, address, socket_address,
        },
        endpoint::v3::{
            ClusterLoadAssignment, Endpoint as PbEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
        },
    },
    google::protobuf::{Struct, UInt32Value, Value, value::Kind},
};
use serde::Serialize;

use super::Context;
use crate::xds::{XdsType, resource::Resource};

use crate::model::{ClusterId, Endpoint, Health, Locality, NetworkId, ServicePort, TlsMode};

/// A load assignment before encoding: what goes on the wire, in wire order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// The cluster (and EDS service) name.
    pub cluster: Arc<str>,
    /// Locality groups, ordered by locality.
    pub localities: Vec<LocalityGroup>,
}

/// The endpoints of one locality.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalityGroup {
    /// Where they run.
    pub locality: Locality,
    /// Sum of the endpoint weights (never 0: gRPC silently drops unweighted localities).
    pub weight: u32,
    /// Ordered by address and port.
    pub endpoints: Vec<LbTarget>,
}

/// One address to balance over.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LbTarget {
    /// IP.
    pub address: IpAddr,
    /// Port the workload listens on for this service port.
    pub port: u16,
    /// Health as EDS reports it.
    pub health: Health,
    /// At least 1 (gRPC NACKs 0).
    pub weight: u32,
    /// For the `istio` metadata and transport-socket matching.
    pub tls_mode: TlsMode,
    /// The pod, when known.
    pub workload: Option<Arc<str>>,
    /// Its network.
    pub network: Option<NetworkId>,
    /// Its cluster.
    pub cluster: ClusterId,
}

/// What to do with an address that appears more than once, which split horizon causes: a gateway
/// stands in for remote endpoints in every locality they run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicates {
    /// Envoy: keep one per locality (istiod's shape: the gateway stays in each locality it serves).
    PerLocality,
    /// Proxyless gRPC, which NACKs an address repeated anywhere in an assignment: the first locality
    /// keeps it, with the weights of the later ones added.
    Merge,
}

/// Builds the assignment for `port` of a service from the endpoints the proxy may see. An endpoint
/// without a port of that name is skipped; a repeated address is handled as `duplicates` says,
/// otherwise its first occurrence wins.
pub fn assignment<'a>(
    cluster: Arc<str>,
    port: &ServicePort,
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    duplicates: Duplicates,
) -> Assignment {
    let mut seen: BTreeMap<(IpAddr, u16), BTreeSet<&Locality>> = BTreeMap::new();
    let mut by_locality: BTreeMap<Locality, Vec<LbTarget>> = BTreeMap::new();
    for ep in endpoints {
        let Some(target_port) = ep.port(&port.name) else {
            continue;
        };
        let localities = seen.entry((ep.address, target_port)).or_default();
        match (localities.first(), duplicates) {
            (Some(_), Duplicates::PerLocality) if localities.contains(&ep.locality) => continue,
            (Some(first), Duplicates::Merge) => {
                let target = by_locality.get_mut(*first).and_then(|ts| {
                    ts.iter_mut()
                        .find(|t| (t.address, t.port) == (ep.address, target_port))
                });
                if let Some(t) = target {
                    t.weight = t.weight.saturating_add(ep.weight.max(1));
                }
                continue;
            }
            _ => {}
        }
        localities.insert(&ep.locality);
        by_locality
            .entry(ep.locality.clone())
            .or_default()
            .push(LbTarget {
                address: ep.address,
                port: target_port,
                health: ep.health,
                weight: ep.weight.max(1),
                tls_mode: ep.tls_mode,
                workload: ep.workload.clone(),
                network: ep.network.clone(),
                cluster: ep.cluster.clone(),
            });
    }
    let localities = by_locality
        .into_iter()
        .map(|(locality, mut endpoints)| {
            endpoints.sort_by_key(|e| (e.address, e.port));
            let weight = endpoints.iter().fold(0u32, |sum, e| sum.saturating_add(e.weight));
            LocalityGroup {
                locality,
                weight,
                endpoints,
            }
        })
        .collect();
    Assignment { cluster, localities }
}

impl Assignment {
    /// The resource version: a hash of exactly what is encoded.
    pub fn version(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }

    /// The wire form.
    pub fn to_proto(&self) -> ClusterLoadAssignment {
        ClusterLoadAssignment {
            cluster_name: self.cluster.to_string(),
            endpoints: self
                .localities
                .iter()
                .map(|g| LocalityLbEndpoints {
                    locality: Some(PbLocality {
                        region: g.locality.region.to_string(),
                        zone: g.locality.zone.to_string(),
                        sub_zone: g.locality.subzone.to_string(),
                    }),
                    lb_endpoints: g.endpoints.iter().map(LbTarget::to_proto).collect(),
                    load_balancing_weight: Some(UInt32Value { value: g.weight }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }
}

impl LbTarget {
    fn to_proto(&self) -> LbEndpoint {
        LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(PbEndpoint {
                address: Some(socket(self.address, self.port)),
                ..Default::default()
            })),
            health_status: match self.health {
                Health::Healthy => HealthStatus::Healthy,
                Health::Unhealthy => HealthStatus::Unhealthy,
                Health::Draining => HealthStatus::Draining,
            } as i32,
            metadata: Some(self.metadata()),
            load_balancing_weight: Some(UInt32Value { value: self.weight }),
        }
    }

    /// `envoy.transport_socket_match: {tlsMode}` (what the CDS socket matches read) and istiod's
    /// `istio: {workload, tlsMode, network, cluster}`.
    fn metadata(&self) -> Metadata {
        let tls = match self.tls_mode {
            TlsMode::Istio => "istio",
            TlsMode::Disabled => "disabled",
        };
        let mut istio = vec![("tlsMode", tls), ("cluster", self.cluster.as_str())];
        if let Some(w) = &self.workload {
            istio.push(("workload", w));
        }
        if let Some(n) = &self.network {
            istio.push(("network", n.as_str()));
        }
        Metadata {
            filter_metadata: [
                (
                    "envoy.transport_socket_match".to_owned(),
                    strings(&[("tlsMode", tls)]),
                ),
                ("istio".to_owned(), strings(&istio)),
            ]
            .into(),
            ..Default::default()
        }
    }
}

pub(super) fn socket(ip: IpAddr, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port.into())),
            ..Default::default()
        })),
    }
}

pub(super) fn strings(pairs: &[(&str, &str)]) -> Struct {
    Struct {
        fields: pairs
            .iter()
            .map(|(k, v)| {
                let value = Value {
                    kind: Some(Kind::StringValue((*v).to_owned())),
                };
                ((*k).to_owned(), value)
            })
            .collect(),
    }
}

/// What an assignment depends on besides its name: the network view, and whether duplicates merge
/// (gRPC) or not (Envoy).
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    format!(
        "{}|{}|{}",
        super::duplicates(ctx.proxy.kind) == Duplicates::Merge,
        ctx.view.network.as_deref().unwrap_or(""),
        ctx.requested_networks()
    )
    .into()
}

/// The assignment of EDS cluster `name` for the proxy; `None` when no such cluster exists.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    let a = super::assignment(ctx.mesh, ctx.endpoints, ctx.proxy, ctx.view, name.clone())?;
    let version = a.version();
    Some(Resource::encode_with_version(
        XdsType::Endpoint,
        name,
        &a.to_proto(),
        version,
    ))
}
