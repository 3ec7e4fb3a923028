//! Split-horizon EDS (istiod's `EndpointsByNetworkFilter`): which endpoints of a service a proxy with a
//! given network view is sent, as a pure function of the endpoints, the gateways and the view.
//!
//! - Endpoints outside `REQUESTED_NETWORK_VIEW` are dropped (the unnamed network is always visible).
//! - With no gateway anywhere, multi-network is off: every visible endpoint goes as is.
//! - An endpoint on the proxy's network, or on a network with no gateway, goes direct.
//! - Any other endpoint is replaced by its network's gateways, preferring those of its own cluster. It
//!   must take Istio mTLS (the gateway routes by the mTLS SNI) and be healthy, or it is dropped.
//! - Every weight is multiplied by the LCM of the gateway counts (per network and per network+cluster),
//!   so that splitting an endpoint's weight evenly over its gateways is exact; a gateway's weight is the
//!   sum of its shares, per locality: gateway endpoints stay in the locality of the endpoints they stand
//!   for, so locality-aware balancing still sees where the load really is.
//!
//! Does NOT: resolve gateway addresses (they arrive resolved), group by locality or encode (that is
//! `xds::generator::eds`), or filter by IP family (istiod 1.30 does; meshd's gateways are IPv4 or not
//! filtered).

use std::{borrow::Cow, collections::BTreeMap, sync::Arc};

use serde::Serialize;

use crate::{
    model::{
        ClusterId, Endpoint, EndpointPort, Health, Labels, Locality, NetworkGateway, NetworkId, Service,
        ServicePort, TlsMode,
    },
    xds::{EndpointView, NetworkView, generator::Mesh},
};

/// The split-horizon [`EndpointView`], reading the snapshot's gateways.
#[derive(Debug, Clone, Copy, Default)]
pub struct SplitHorizon;

impl EndpointView for SplitHorizon {
    fn endpoints<'a>(
        &self,
        mesh: &'a dyn Mesh,
        service: &'a Service,
        port: &ServicePort,
        view: &NetworkView,
    ) -> Vec<Cow<'a, Endpoint>> {
        filter(mesh.endpoints(service), mesh.gateways(), port, view)
    }
}

/// Gateways indexed as istiod's `NetworkGateways`: per network, all of them and those of each cluster.
struct GatewayIndex<'g> {
    by_network: BTreeMap<&'g NetworkId, NetworkGateways<'g>>,
    /// LCM of every group's size; 1 with no gateways.
    scale: u32,
}

#[derive(Default)]
struct NetworkGateways<'g> {
    all: Vec<&'g NetworkGateway>,
    by_cluster: BTreeMap<&'g ClusterId, Vec<&'g NetworkGateway>>,
}

impl<'g> GatewayIndex<'g> {
    fn new(gateways: &'g [NetworkGateway]) -> Self {
        let mut by_network: BTreeMap<_, NetworkGateways<'g>> = BTreeMap::new();
        for gw in gateways {
            let net = by_network.entry(&gw.network).or_default();
            net.all.push(gw);
            if let Some(c) = &gw.cluster {
                net.by_cluster.entry(c).or_default().push(gw);
            }
        }
        let sizes = by_network
            .values()
            .flat_map(|n| std::iter::once(&n.all).chain(n.by_cluster.values()))
            .map(Vec::len);
        let scale = sizes.fold(1u32, |acc, n| lcm(acc, u32::try_from(n).unwrap_or(u32::MAX)));
        Self { by_network, scale }
    }

    /// The gateways of the endpoint's network and cluster, else of its network (istio#33526).
    fn select(&self, network: Option<&NetworkId>, cluster: &ClusterId) -> &[&'g NetworkGateway] {
        let Some(net) = network.and_then(|n| self.by_network.get(n)) else {
            return &[];
        };
        net.by_cluster.get(cluster).unwrap_or(&net.all)
    }
}

/// What the filter does with one endpoint: the single place the rules live, so that `meshctl explain`
/// reports exactly what EDS does.
enum Decision<'i, 'g> {
    Direct(Direct),
    Gateways(&'i [&'g NetworkGateway]),
    Dropped(Dropped),
}

/// Why an endpoint is sent as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Direct {
    /// No gateway anywhere: multi-network is off.
    NoGateways,
    /// It is on the proxy's own network.
    SameNetwork,
    /// Its network has no gateway, so it is sent as is and must be reachable directly.
    NoGatewayForNetwork,
}

/// Why an endpoint is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Dropped {
    /// Its network is not in the proxy's `REQUESTED_NETWORK_VIEW`.
    OutsideNetworkView,
    /// It does not serve the port.
    NoSuchPort,
    /// Remote, and not Istio-mTLS capable: the gateway routes by the mTLS SNI.
    NotMtls,
    /// Remote and not healthy: it would draw traffic through the gateway to nothing.
    Unhealthy,
}

/// How one endpoint reaches a proxy (`meshctl explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "decision")]
pub enum Verdict {
    /// Sent as is, with its (scaled) weight.
    Direct {
        /// Why.
        why: Direct,
        /// The weight sent.
        weight: u32,
    },
    /// Replaced by its network's gateways, each carrying `share` of its weight.
    ViaGateways {
        /// The gateways (of its own cluster when it has any, else of its network).
        gateways: Vec<NetworkGateway>,
        /// The weight each gateway gets for this endpoint.
        share: u32,
    },
    /// Not sent.
    Dropped {
        /// Which rule dropped it.
        why: Dropped,
    },
}

fn decide<'i, 'g>(
    ep: &Endpoint,
    index: &'i GatewayIndex<'g>,
    port: &ServicePort,
    view: &NetworkView,
) -> Decision<'i, 'g> {
    if !view.sees(ep.network.as_ref()) {
        return Decision::Dropped(Dropped::OutsideNetworkView);
    }
    if index.by_network.is_empty() {
        return Decision::Direct(Direct::NoGateways);
    }
    // Only endpoints serving this port count towards a gateway's weight.
    if ep.port(&port.name).is_none() {
        return Decision::Dropped(Dropped::NoSuchPort);
    }
    // A proxy with no network still goes through the gateways of a named network that has some
    // (istiod 1.30 `forceGateway`); before 1.30 it went direct.
    if ep.network == view.network {
        return Decision::Direct(Direct::SameNetwork);
    }
    let gws = index.select(ep.network.as_ref(), &ep.cluster);
    if gws.is_empty() {
        return Decision::Direct(Direct::NoGatewayForNetwork);
    }
    if ep.tls_mode != TlsMode::Istio {
        return Decision::Dropped(Dropped::NotMtls);
    }
    if ep.health != Health::Healthy {
        return Decision::Dropped(Dropped::Unhealthy);
    }
    Decision::Gateways(gws)
}

/// The endpoints a proxy with `view` is sent for `port`, gateways standing in for remote networks.
/// Deterministic: direct endpoints in input order, then gateway endpoints by (locality, gateway).
pub fn filter<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    gateways: &[NetworkGateway],
    port: &ServicePort,
    view: &NetworkView,
) -> Vec<Cow<'a, Endpoint>> {
    let index = GatewayIndex::new(gateways);
    let mut out = Vec::new();
    let mut gateway_weights: BTreeMap<(&Locality, &NetworkGateway), u32> = BTreeMap::new();
    for ep in endpoints {
        let weight = ep.weight.max(1).saturating_mul(index.scale);
        match decide(ep, &index, port, view) {
            Decision::Dropped(_) => {}
            Decision::Direct(_) if weight == ep.weight => out.push(Cow::Borrowed(ep)),
            Decision::Direct(_) => out.push(Cow::Owned(Endpoint { weight, ..ep.clone() })),
            Decision::Gateways(gws) => {
                for gw in gws {
                    let w = gateway_weights.entry((&ep.locality, *gw)).or_default();
                    *w = w.saturating_add(share(weight, gws));
                }
            }
        }
    }
    let labels = Labels::default();
    let no_cluster = ClusterId::from("");
    let mut ports_by_gw_port: BTreeMap<u16, Arc<[EndpointPort]>> = BTreeMap::new();
    for ((locality, gw), weight) in gateway_weights {
        let ports = ports_by_gw_port
            .entry(gw.port)
            .or_insert_with(|| {
                Arc::new([EndpointPort {
                    service_port_name: port.name.clone(),
                    port: gw.port,
                }])
            })
            .clone();
        out.push(Cow::Owned(Endpoint {
            address: gw.address,
            ports,
            cluster: gw.cluster.clone().unwrap_or_else(|| no_cluster.clone()),
            network: Some(gw.network.clone()),
            locality: locality.clone(),
            labels: labels.clone(),
            service_account: None,
            tls_mode: TlsMode::Istio,
            health: Health::Healthy,
            workload: None,
            weight: weight.max(1),
        }));
    }
    out
}

/// Why each of `endpoints` is sent as is, through gateways, or not at all, by the rules [`filter`]
/// applies (the weights are the ones it sends).
pub fn explain<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    gateways: &[NetworkGateway],
    port: &ServicePort,
    view: &NetworkView,
) -> Vec<(&'a Endpoint, Verdict)> {
    let index = GatewayIndex::new(gateways);
    endpoints
        .into_iter()
        .map(|ep| {
            let weight = ep.weight.max(1).saturating_mul(index.scale);
            let verdict = match decide(ep, &index, port, view) {
                Decision::Direct(why) => Verdict::Direct { why, weight },
                Decision::Dropped(why) => Verdict::Dropped { why },
                Decision::Gateways(gws) => Verdict::ViaGateways {
                    gateways: gws.iter().map(|g| (*g).clone()).collect(),
                    share: share(weight, gws),
                },
            };
            (ep, verdict)
        })
        .collect()
}

/// An endpoint's weight split evenly over its gateways.
fn share(weight: u32, gateways: &[&NetworkGateway]) -> u32 {
    weight / u32::try_from(gateways.len()).unwrap_or(u32::MAX)
}

impl NetworkView {
    /// Whether endpoints on `network` are visible (istiod's `ProxyView`): everything without a
    /// `REQUESTED_NETWORK_VIEW`, else the networks it names and the unnamed one.
    pub fn sees(&self, network: Option<&NetworkId>) -> bool {
        match network {
            None => true,
            Some(n) => self.requested.is_empty() || self.requested.contains(n),
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u32, b: u32) -> u32 {
    if a == 0 || b == 0 {
        return a.max(b);
    }
    (a / gcd(a, b)).saturating_mul(b)
}

#[cfg(test)]
#[path = "split_horizon_tests.rs"]
mod tests;
