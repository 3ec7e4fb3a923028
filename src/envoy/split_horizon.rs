//! Split-horizon EDS (istiod's `EndpointsByNetworkFilter`): which endpoints of a service a proxy with a
//! given network view is sent, as a pure function of the endpoints, the gateways and the query.
//!
//! - Endpoints outside `REQUESTED_NETWORK_VIEW` are dropped (the unnamed network is always visible).
//! - For a cluster-local service, endpoints of other clusters than the proxy's are dropped.
//! - For a subset cluster, endpoints outside the subset are dropped first: they neither go direct nor
//!   count toward a gateway's weight, so a gateway stands in only for its network's subset endpoints.
//! - With no gateway anywhere, multi-network is off: every visible endpoint goes as is.
//! - An endpoint on the proxy's network, or on a network with no gateway, goes direct.
//! - Proxyless gRPC cannot cross a gateway (no SNI, ALPN `h2`): any other endpoint is dropped for it,
//!   or, when it names no network, sent as is.
//! - Any other endpoint is replaced by its network's gateways, preferring those of its own cluster. It
//!   must take Istio mTLS from this client (the gateway routes by the mTLS SNI: sidecar, no
//!   PeerAuthentication DISABLE, no DestinationRule tls other than ISTIO_MUTUAL; the query's `mtls`
//!   decides) and be healthy, or it is dropped.
//! - Every endpoint sent as is carries `tlsMode: istio` only when the client sends it mTLS (istiod
//!   clears it otherwise, so the sidecar's transport-socket match picks plaintext).
//! - Every weight is multiplied by the LCM of the gateway counts (per network and per network+cluster),
//!   so that splitting an endpoint's weight evenly over its gateways is exact; a gateway's weight is the
//!   sum of its shares, per [`StandsFor`]: the locality, cluster and `failoverPriority` label values of
//!   the endpoints it stands for, which it carries (★ istiod's keeps only its own cluster and network,
//!   istio#49500), so locality balancing and failover priorities see what is really behind it, and
//!   each remote cluster and locality is an endpoint of its own where its gateway's address differs
//!   (istio#52435; Envoy keeps one endpoint per address, see [`super::eds::Assignment::merge_duplicates`]).
//! - If the scaled weights add up past uint32 (hostile gateway counts: the LCM of 2, 3, 5, … 29 alone
//!   is 6.5 billion), all are divided by one factor, keeping their proportions: Envoy rejects a
//!   locality or priority whose weights sum past uint32, and saturating each would make them all equal.
//!
//! Does NOT: resolve gateway addresses (they arrive resolved), group by locality or encode (that is
//! `envoy::eds`), or filter by IP family (istiod 1.30 does; meshd's gateways are IPv4 or not
//! filtered).

use std::{
    borrow::Cow,
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

use serde::Serialize;

use crate::{
    envoy::{
        EndpointView, NetworkView, {EndpointQuery, Mesh},
    },
    model::{
        ClusterId, Endpoint, EndpointPort, Health, LABEL_CLUSTER, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE,
        LABEL_ZONE, Labels, Locality, NetworkGateway, NetworkId, Placement, Service, ServicePort,
        StaleAction, TlsMode, WorkloadInfo, WorkloadKind, workload_meta,
    },
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
        let q = EndpointQuery {
            stale: mesh.stale_clusters(),
            ..EndpointQuery::all(service, port, view)
        };
        filter(mesh.endpoints(service), mesh.gateways(), &q)
    }

    fn select<'a>(&self, mesh: &'a dyn Mesh, q: &EndpointQuery<'_>) -> Vec<Cow<'a, Endpoint>> {
        filter(mesh.endpoints(q.service), mesh.gateways(), q)
    }
}

/// Gateways indexed as istiod's `NetworkGateways`: per network, all of them and those of each cluster.
/// Built for every cluster EDS generates, so one allocation: the gateways sorted by (network,
/// cluster), stably, which makes each network's and each (network, cluster)'s gateways a contiguous run.
struct GatewayIndex<'g> {
    sorted: Vec<&'g NetworkGateway>,
    /// LCM of every group's size (saturating); 1 with no gateways.
    scale: u64,
}

impl<'g> GatewayIndex<'g> {
    fn new(gateways: &'g [NetworkGateway]) -> Self {
        let mut sorted: Vec<&NetworkGateway> = gateways.iter().collect();
        sorted.sort_by(|a, b| (&a.network, &a.cluster).cmp(&(&b.network, &b.cluster)));
        let networks = sorted.chunk_by(|a, b| a.network == b.network);
        let clusters = sorted
            .chunk_by(|a, b| (&a.network, &a.cluster) == (&b.network, &b.cluster))
            .filter(|run| run[0].cluster.is_some());
        let scale = networks
            .chain(clusters)
            .map(<[_]>::len)
            .fold(1u64, |acc, n| lcm(acc, u64::try_from(n).unwrap_or(u64::MAX)));
        Self { sorted, scale }
    }

    /// Whether there is no gateway at all (multi-network is off).
    fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The gateways of the endpoint's network and cluster, else of its network (istio#33526).
    fn select(&self, network: Option<&NetworkId>, cluster: &ClusterId) -> &[&'g NetworkGateway] {
        let Some(network) = network else {
            return &[];
        };
        let from = self.sorted.partition_point(|g| g.network < *network);
        let to = from + self.sorted[from..].partition_point(|g| g.network == *network);
        let net = &self.sorted[from..to];
        let cluster = Some(cluster);
        let from = net.partition_point(|g| g.cluster.as_ref() < cluster);
        let to = from + net[from..].partition_point(|g| g.cluster.as_ref() == cluster);
        if from == to { net } else { &net[from..to] }
    }

    /// An endpoint's weight times the scale, exact (before [`Weighted::divisor`]).
    fn scaled(&self, ep: &Endpoint) -> u64 {
        u64::from(ep.weight.max(1)).saturating_mul(self.scale)
    }
}

/// What a gateway endpoint stands for: remote endpoints sharing a locality, a cluster and the values
/// of the labels the query keeps. One gateway endpoint is sent per gateway and `StandsFor`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StandsFor<'a> {
    /// Their locality.
    pub locality: &'a Locality,
    /// Their cluster.
    pub cluster: &'a ClusterId,
    /// Their values of the query's `keep_labels` (topology labels come from the fields above).
    pub labels: Vec<(&'a str, &'a str)>,
}

impl<'a> StandsFor<'a> {
    /// What `ep` is stood in for by, keeping the values of `keep` that it has.
    pub fn of(ep: &'a Endpoint, keep: &[String]) -> Self {
        let labels = keep
            .iter()
            .filter(|k| !TOPOLOGY_LABELS.contains(&k.as_str()))
            .filter_map(|k| ep.labels().get_key_value(k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Self {
            locality: ep.locality(),
            cluster: ep.cluster(),
            labels,
        }
    }
}

/// Labels an endpoint derives from its fields, never carried as labels.
const TOPOLOGY_LABELS: [&str; 5] = [
    LABEL_CLUSTER,
    LABEL_NETWORK,
    LABEL_REGION,
    LABEL_ZONE,
    LABEL_SUBZONE,
];

/// What [`filter`] sends, with exact weights, before they are fitted into uint32.
struct Weighted<'a, 'g> {
    /// Endpoints sent as is, in input order.
    direct: Vec<(&'a Endpoint, u64)>,
    /// Each gateway's summed shares, per what it stands for.
    via: BTreeMap<(StandsFor<'a>, &'g NetworkGateway), u64>,
}

impl<'a, 'g> Weighted<'a, 'g> {
    fn new(
        endpoints: impl IntoIterator<Item = &'a Endpoint>,
        index: &GatewayIndex<'g>,
        q: &EndpointQuery<'_>,
    ) -> Self {
        let mut out = Self {
            direct: Vec::new(),
            via: BTreeMap::new(),
        };
        for ep in endpoints {
            let weight = index.scaled(ep);
            match decide(ep, index, q) {
                Decision::Dropped(_) => {}
                Decision::Direct(_) => out.direct.push((ep, weight)),
                Decision::Gateways(gws) => {
                    let stands_for = StandsFor::of(ep, q.keep_labels);
                    for gw in gws {
                        let w = out.via.entry((stands_for.clone(), *gw)).or_default();
                        *w = w.saturating_add(share(weight, gws));
                    }
                }
            }
        }
        out
    }

    /// What every weight is divided by so that all of them together fit in uint32 even after each is
    /// raised to at least 1; 1 when they already fit.
    fn divisor(&self) -> u64 {
        let weights = self
            .direct
            .iter()
            .map(|(_, w)| *w)
            .chain(self.via.values().copied());
        let (count, total) = weights.fold((0u128, 0u128), |(n, t), w| (n + 1, t + u128::from(w)));
        let max = u128::from(u32::MAX);
        if total <= max {
            return 1;
        }
        let room = max.saturating_sub(count).max(1);
        u64::try_from(total.div_ceil(room)).unwrap_or(u64::MAX)
    }
}

/// An exact weight divided by the [`Weighted::divisor`]: never 0, which Envoy rejects.
fn fit(weight: u64, divisor: u64) -> u32 {
    u32::try_from(weight / divisor).unwrap_or(u32::MAX).max(1)
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
    /// Proxyless gRPC without a `NETWORK`: it cannot use a gateway, and dropping every network
    /// that has one would leave it nothing, so it is sent as is (istiod before 1.30 did so for
    /// every proxy without a network).
    ProxylessWithoutNetwork,
}

/// Why an endpoint is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Dropped {
    /// Its network is not in the proxy's `REQUESTED_NETWORK_VIEW`.
    OutsideNetworkView,
    /// The service is cluster-local (MeshConfig `serviceSettings`) and it runs in another cluster.
    OtherCluster,
    /// Its labels do not include the subset's.
    NotInSubset,
    /// It does not serve the port.
    NoSuchPort,
    /// Remote, and this client would not send it Istio mTLS (no sidecar, PeerAuthentication DISABLE,
    /// DestinationRule tls other than ISTIO_MUTUAL): the gateway routes by the mTLS SNI.
    NotMtls,
    /// Remote and not healthy: it would draw traffic through the gateway to nothing.
    Unhealthy,
    /// Remote behind a gateway, and the client is proxyless gRPC, which cannot cross one: it sends no
    /// SNI for the gateway to route by (istiod sends the gateway anyway and the RPCs fail).
    ProxylessBehindGateway,
    /// ★ Its cluster's API server has been unreachable for longer than its stale-endpoints policy
    /// allows, and the policy is `drop`.
    StaleCluster,
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

fn decide<'i, 'g>(ep: &Endpoint, index: &'i GatewayIndex<'g>, q: &EndpointQuery<'_>) -> Decision<'i, 'g> {
    if !q.view.sees(ep.network().as_ref()) {
        return Decision::Dropped(Dropped::OutsideNetworkView);
    }
    if q.stale.get(ep.cluster()) == Some(&StaleAction::Drop) {
        return Decision::Dropped(Dropped::StaleCluster);
    }
    if !q.in_cluster(ep) {
        return Decision::Dropped(Dropped::OtherCluster);
    }
    if !q.in_subset(ep) {
        return Decision::Dropped(Dropped::NotInSubset);
    }
    if index.is_empty() {
        return Decision::Direct(Direct::NoGateways);
    }
    // Only endpoints serving this port count towards a gateway's weight.
    if ep.port(&q.port.name).is_none() {
        return Decision::Dropped(Dropped::NoSuchPort);
    }
    // A proxy with no network still goes through the gateways of a named network that has some
    // (istiod 1.30 `forceGateway`); before 1.30 it went direct.
    if *ep.network() == q.view.network {
        return Decision::Direct(Direct::SameNetwork);
    }
    let gws = index.select(ep.network().as_ref(), ep.cluster());
    if gws.is_empty() {
        return Decision::Direct(Direct::NoGatewayForNetwork);
    }
    if q.view.proxyless {
        return match q.view.network {
            None => Decision::Direct(Direct::ProxylessWithoutNetwork),
            Some(_) => Decision::Dropped(Dropped::ProxylessBehindGateway),
        };
    }
    if !q.mtls(ep) {
        return Decision::Dropped(Dropped::NotMtls);
    }
    if ep.health != Health::Healthy {
        return Decision::Dropped(Dropped::Unhealthy);
    }
    Decision::Gateways(gws)
}

/// The endpoints a proxy is sent for the query's port (and subset), gateways standing in for remote
/// networks. Deterministic: direct endpoints in input order, then gateway endpoints by (what they
/// stand for, gateway).
pub fn filter<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    gateways: &[NetworkGateway],
    q: &EndpointQuery<'_>,
) -> Vec<Cow<'a, Endpoint>> {
    let port = q.port;
    let index = GatewayIndex::new(gateways);
    let weighted = Weighted::new(endpoints, &index, q);
    let divisor = weighted.divisor();
    let mut out: Vec<Cow<'a, Endpoint>> = weighted
        .direct
        .into_iter()
        .map(|(ep, weight)| {
            let weight = fit(weight, divisor);
            let tls_mode = q.tls_mode(ep);
            if weight == ep.weight && tls_mode == ep.tls_mode {
                Cow::Borrowed(ep)
            } else {
                Cow::Owned(Endpoint {
                    weight,
                    tls_mode,
                    ..ep.clone()
                })
            }
        })
        .collect();
    let mut ports_by_gw_port: BTreeMap<u16, Arc<[EndpointPort]>> = BTreeMap::new();
    for ((stands_for, gw), weight) in weighted.via {
        let ports = ports_by_gw_port
            .entry(gw.port)
            .or_insert_with(|| {
                Arc::new([EndpointPort {
                    service_port_name: port.name.clone(),
                    port: gw.port,
                }])
            })
            .clone();
        out.push(Cow::Owned(stand_in(gw, ports, &stands_for, fit(weight, divisor))));
    }
    out
}

/// The endpoint a gateway is sent as for the endpoints it stands in for: their locality, cluster and
/// kept labels (★ istiod's gateway `IstioEndpoint` has only the gateway's own cluster and network, so
/// `failoverPriority` on any other label ranks it last, istio#49500), Istio mTLS, healthy, and a
/// telemetry string naming their cluster.
pub fn stand_in(
    gw: &NetworkGateway,
    ports: Arc<[EndpointPort]>,
    stands_for: &StandsFor<'_>,
    weight: u32,
) -> Endpoint {
    let cluster = stands_for.cluster.clone();
    let labels = if stands_for.labels.is_empty() {
        no_labels()
    } else {
        Arc::new(
            stands_for
                .labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    };
    Endpoint {
        address: gw.address,
        ports,
        info: WorkloadInfo::new(labels, None),
        workload_meta: workload_meta("", "", &BTreeMap::new(), &cluster),
        placement: Placement::new(cluster, Some(gw.network.clone()), stands_for.locality.clone()),
        tls_mode: TlsMode::Istio,
        health: Health::Healthy,
        workload: None,
        kind: WorkloadKind::NetworkGateway,
        weight,
    }
}

/// One shared empty label set: a stand-in is built per gateway and [`StandsFor`] on every EDS build.
fn no_labels() -> Labels {
    static EMPTY: LazyLock<Labels> = LazyLock::new(Labels::default);
    EMPTY.clone()
}

/// Why each of `endpoints` is sent as is, through gateways, or not at all, by the rules [`filter`]
/// applies (the weights are the ones it sends).
pub fn explain<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    gateways: &[NetworkGateway],
    q: &EndpointQuery<'_>,
) -> Vec<(&'a Endpoint, Verdict)> {
    let index = GatewayIndex::new(gateways);
    let endpoints: Vec<&Endpoint> = endpoints.into_iter().collect();
    let divisor = Weighted::new(endpoints.iter().copied(), &index, q).divisor();
    endpoints
        .into_iter()
        .map(|ep| {
            let weight = index.scaled(ep);
            let verdict = match decide(ep, &index, q) {
                Decision::Direct(why) => Verdict::Direct {
                    why,
                    weight: fit(weight, divisor),
                },
                Decision::Dropped(why) => Verdict::Dropped { why },
                Decision::Gateways(gws) => Verdict::ViaGateways {
                    gateways: gws.iter().map(|g| (*g).clone()).collect(),
                    share: fit(share(weight, gws), divisor),
                },
            };
            (ep, verdict)
        })
        .collect()
}

/// An endpoint's weight split evenly over its gateways.
fn share(weight: u64, gateways: &[&NetworkGateway]) -> u64 {
    weight / u64::try_from(gateways.len()).unwrap_or(u64::MAX)
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

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        return a.max(b);
    }
    (a / gcd(a, b)).saturating_mul(b)
}

#[cfg(test)]
#[path = "split_horizon_tests.rs"]
mod tests;
