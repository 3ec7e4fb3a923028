//! EDS: one `ClusterLoadAssignment` per `outbound|port|subset|host` cluster.
//!
//! Owns: grouping a service port's endpoints by locality and priority (each group weighted by the
//! sum of its endpoint weights, which gRPC requires), merging repeated addresses ([`Client`]), renumbering priorities
//! without gaps and a deterministic order. Does NOT: choose which endpoints a proxy sees (the
//! [`super::EndpointView`] hook does, before this runs), decide priorities and locality weights
//! ([`super::locality`]) or lay out the bytes (health values, `istio` metadata: [`eds_wire`]).
//!
//! The assignment is first built as a plain [`Assignment`] (what `meshctl explain` reads too), then
//! written to the wire by [`eds_wire`] in a fixed order, so a hash of the bytes is its version.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use envoy_types::pb::{
    envoy::config::core::v3::{Address, SocketAddress, address, socket_address},
    google::protobuf::{Struct, Value, value::Kind},
};
use serde::Serialize;

use super::{
    Context, EndpointQuery, EndpointView, Mesh, NetworkView, Target, eds_wire,
    locality::{self, Place},
    mtls::MtlsCheck,
    parse_cluster,
};
use crate::{
    envoy::{Proxy, ProxyKind, XdsType, resource::Resource},
    model::{
        ClusterId, Endpoint, Health, Locality, NetworkId, ServicePort, StaleAction, TlsMode, WorkloadKind,
    },
    traffic::{self, MergedRule},
};

/// A load assignment before encoding: what goes on the wire, in wire order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    /// The cluster (and EDS service) name.
    pub cluster: Arc<str>,
    /// Locality groups, ordered by locality.
    pub localities: Vec<LocalityGroup>,
}

/// The endpoints of one locality at one priority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalityGroup {
    /// Where they run.
    pub locality: Locality,
    /// 0 is used first; contiguous from 0 (gRPC NACKs a gap).
    pub priority: u32,
    /// Sum of the endpoint weights (never 0: gRPC silently drops unweighted localities).
    pub weight: u32,
    /// Ordered by address and port.
    pub endpoints: Vec<LbTarget>,
}

/// One address to balance over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
    /// For transport-socket matching: `envoy.transport_socket_match: {tlsMode: istio}` is sent only
    /// for `Istio` (istiod; the cluster's catch-all match sends the rest plaintext).
    pub tls_mode: TlsMode,
    /// `istio.workload`: istiod's compressed telemetry string, built with the endpoint
    /// ([`crate::model::workload_meta()`]).
    pub workload_meta: Arc<str>,
    /// Its network (`meshctl explain`; not encoded).
    pub network: Option<NetworkId>,
    /// Its cluster (`meshctl explain`; encoded inside `workload_meta`).
    pub cluster: ClusterId,
}

/// The client an assignment is for, where clients differ. Both keep one endpoint per address, which
/// split horizon repeats (a gateway stands in for remote endpoints of several localities, clusters
/// and priorities): Envoy ignores every occurrence but the first anywhere in an assignment
/// (envoy#23445), gRPC NACKs it, so meshd merges them itself ([`Assignment::merge_duplicates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Envoy: keeps a locality that `distribute` empties (istiod's shape).
    Envoy,
    /// Proxyless gRPC: grpcio reports a locality without endpoints as an error, so none is sent.
    Grpc,
}

/// Groups endpoints by (locality, `rank`), the rank becoming the group's priority (istiod splits each
/// locality group by `failoverPriority` rank). Groups are ordered by locality, then rank; an address
/// repeated within a group is sent once: a gateway's with the weights added, a workload's first.
pub fn grouped<'a>(
    cluster: Arc<str>,
    port: &ServicePort,
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    rank: impl Fn(&Endpoint) -> u32,
) -> Assignment {
    // One sorted list instead of a map of groups and a set of seen addresses: EDS builds this for
    // every cluster, most with a handful of endpoints. The sort is stable, so of a repeated address
    // the first occurrence is the one kept.
    let mut rows: Vec<(&Locality, u32, IpAddr, u16, &Endpoint)> = endpoints
        .into_iter()
        .filter_map(|ep| Some((ep.locality(), rank(ep), ep.address, ep.port(&port.name)?, ep)))
        .collect();
    rows.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
    let localities = rows
        .chunk_by(|a, b| (a.0, a.1) == (b.0, b.1))
        .map(|group| {
            let mut endpoints: Vec<LbTarget> = Vec::with_capacity(group.len());
            // The weight of the occurrence whose cluster each target names.
            let mut lead: u32 = 0;
            for &(_, _, address, port, ep) in group {
                let weight = ep.weight.max(1);
                match endpoints.last_mut() {
                    // A gateway standing in for several clusters or label values: their weights
                    // add up, and it names the cluster with the most. A workload listed twice
                    // keeps its first entry.
                    Some(last) if (last.address, last.port) == (address, port) => {
                        if ep.kind == WorkloadKind::NetworkGateway {
                            last.weight = last.weight.saturating_add(weight);
                            if weight > lead {
                                lead = weight;
                                last.cluster = ep.cluster().clone();
                                last.workload_meta = ep.workload_meta.clone();
                            }
                        }
                    }
                    _ => {
                        lead = weight;
                        endpoints.push(LbTarget {
                            address,
                            port,
                            health: ep.health,
                            weight,
                            tls_mode: ep.tls_mode,
                            workload_meta: ep.workload_meta.clone(),
                            network: ep.network().clone(),
                            cluster: ep.cluster().clone(),
                        });
                    }
                }
            }
            LocalityGroup {
                locality: group[0].0.clone(),
                priority: group[0].1,
                weight: sum(&endpoints),
                endpoints,
            }
        })
        .collect();
    Assignment { cluster, localities }
}

fn sum(endpoints: &[LbTarget]) -> u32 {
    endpoints.iter().fold(0u32, |sum, e| sum.saturating_add(e.weight))
}

impl Assignment {
    /// Renumbers the priorities in use to 0, 1, 2, … in order (istiod does the same after each
    /// step; gRPC NACKs a missing priority).
    pub fn renumber(&mut self) {
        let used: BTreeSet<u32> = self.localities.iter().map(|g| g.priority).collect();
        let new: BTreeMap<u32, u32> = used.into_iter().zip(0..).collect();
        for g in &mut self.localities {
            g.priority = new[&g.priority];
        }
    }

    /// An address repeated anywhere in an assignment is sent once (see [`Client`]): the first
    /// occurrence in (priority, wire order) keeps it with the weights of the others added, groups left
    /// empty are dropped and priorities renumbered. Envoy alone would keep the first in wire order,
    /// whatever its priority, and lose the others' weights.
    pub fn merge_duplicates(&mut self) {
        let mut order: Vec<usize> = (0..self.localities.len()).collect();
        order.sort_by_key(|&i| self.localities[i].priority);
        let mut first: BTreeMap<(IpAddr, u16), (usize, usize)> = BTreeMap::new();
        let mut moved: Vec<(usize, usize, u32)> = Vec::new();
        for &gi in &order {
            let group = &mut self.localities[gi];
            let mut ei = 0;
            group.endpoints.retain(|t| {
                let keep = match first.get(&(t.address, t.port)) {
                    Some(&(g, e)) => {
                        moved.push((g, e, t.weight));
                        false
                    }
                    None => {
                        first.insert((t.address, t.port), (gi, ei));
                        true
                    }
                };
                ei += usize::from(keep);
                keep
            });
        }
        if moved.is_empty() {
            return;
        }
        for (g, e, w) in moved {
            let t = &mut self.localities[g].endpoints[e];
            t.weight = t.weight.saturating_add(w);
        }
        self.localities.retain(|g| !g.endpoints.is_empty());
        for g in &mut self.localities {
            g.weight = sum(&g.endpoints);
        }
        self.renumber();
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

/// What every assignment for this proxy depends on besides its name: the network view, and the
/// client ([`Client`]). [`name_key`] adds what one cluster's depends on.
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    format!(
        "{}|{}|{}|{}",
        client(ctx.proxy.kind) == Client::Grpc,
        ctx.view.proxyless,
        ctx.view.network.as_deref().unwrap_or(""),
        ctx.requested_networks()
    )
    .into()
}

/// [`view_key`] plus what cluster `name` depends on for this proxy: the DestinationRule it uses
/// (objects and revisions) and what locality load balancing reads of the proxy. A cluster with
/// neither keeps the shared key, so every proxy with the same view shares one encode.
pub(super) fn name_key(ctx: &Context, view: &Arc<str>, name: &str) -> Arc<str> {
    let traffic = ctx.mesh.traffic();
    // A cluster-local service's assignment depends on the proxy's cluster (the host is the name's
    // last `|` field; a plain string test, so other clusters keep the shared key).
    let local = ctx.proxy.cluster_id.as_ref().filter(|_| {
        name.rsplit('|')
            .next()
            .is_some_and(|host| traffic.settings.cluster_local.contains(host))
    });
    let own;
    let view = match local {
        Some(c) => {
            own = Arc::from(format!("{view}|cluster={c}"));
            &own
        }
        None => view,
    };
    // Without DestinationRules only a mesh-wide `distribute` reads the proxy (failover needs a
    // rule's outlierDetection): skip the per-cluster lookups.
    if traffic.destination_rules.rules().next().is_none()
        && traffic.settings.mesh.locality_lb_setting.distribute.is_empty()
    {
        return view.clone();
    }
    match EdsCluster::resolve(ctx.mesh, ctx.proxy, name).and_then(|c| c.key(ctx.proxy)) {
        Some(key) => format!("{view}|{key}").into(),
        None => view.clone(),
    }
}

/// The assignment of EDS cluster `name` for the proxy; `None` when no such cluster exists.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    let a = assignment(ctx.mesh, ctx.endpoints, ctx.proxy, ctx.view, name.clone())?;
    Some(encode(name, &a))
}

/// The load assignment of EDS cluster `name` exactly as `proxy` is sent it (see
/// [`EdsCluster::assignment`]). `meshctl explain` calls this too, so its "sent" table cannot
/// differ from EDS. `None` when no such cluster exists.
pub fn assignment(
    mesh: &dyn Mesh,
    endpoints: &dyn EndpointView,
    proxy: &Proxy,
    view: &NetworkView,
    name: Arc<str>,
) -> Option<Assignment> {
    let cluster = EdsCluster::resolve(mesh, proxy, &name)?;
    Some(cluster.assignment(mesh, endpoints, proxy, view, name.clone()))
}

/// The [`Client`] a proxy kind is.
pub(crate) fn client(kind: ProxyKind) -> Client {
    match kind {
        ProxyKind::Grpc => Client::Grpc,
        ProxyKind::Sidecar | ProxyKind::Router => Client::Envoy,
    }
}

/// The resource sent for `a`: written by [`eds_wire`], versioned by a hash of its bytes.
pub fn encode(name: Arc<str>, a: &Assignment) -> Resource {
    let wire = eds_wire::Encoded::new(a);
    Resource::written(XdsType::Endpoint, name, wire.len(), |buf| wire.write(buf))
}

/// One EDS cluster as one proxy gets it: what its name refers to, the DestinationRule the proxy uses
/// for the service, and what that decides (subset labels, mTLS per endpoint, locality load
/// balancing). EDS and `meshctl explain` both read it, so they cannot disagree.
pub struct EdsCluster<'a> {
    /// The service, port and subset named.
    pub target: Target<'a, 'a>,
    /// The proxy's DestinationRule for the service.
    pub rule: Option<&'a Arc<MergedRule>>,
    /// The subset's labels; `None` selects every endpoint (also for a subset the rule does not
    /// define, as istiod's `getSubSetLabels`).
    pub subset: Option<&'a BTreeMap<String, String>>,
    /// Locality load balancing for the cluster.
    pub locality: locality::Mode,
    /// The mTLS rule for its endpoints.
    pub mtls: MtlsCheck<'a>,
    /// The proxy's cluster when the service is cluster-local (only its endpoints are sent).
    pub cluster_local: Option<ClusterId>,
    /// The `failoverPriority` label keys, which gateway endpoints carry for what they stand for.
    pub keep_labels: Vec<String>,
    /// ★ Remote clusters whose stale-endpoints action is in force.
    pub stale: &'a BTreeMap<ClusterId, StaleAction>,
}

impl<'a> EdsCluster<'a> {
    /// Cluster `name` for `proxy`; `None` when the name refers to no service port.
    pub fn resolve(mesh: &'a dyn Mesh, proxy: &Proxy, name: &'a str) -> Option<Self> {
        let target = parse_cluster(mesh, name)?;
        let traffic = mesh.traffic();
        let ns = proxy.namespace.as_deref().unwrap_or("");
        let rule = traffic.destination_rule(ns, &proxy.labels, target.service);
        let subset = Some(target.subset).filter(|s| !s.is_empty());
        let policy = traffic::effective(rule.map(|r| &r.rule), target.port.port, subset);
        let dr_lb = policy
            .load_balancer
            .as_ref()
            .and_then(|lb| lb.locality_lb_setting.as_ref());
        let locality = locality::mode(
            dr_lb,
            &traffic.settings.mesh.locality_lb_setting,
            policy.outlier_detection.is_some(),
        );
        let dr_tls = rule.and_then(|r| Some((policy.tls.as_ref()?.mode, &**r)));
        let cluster_local = proxy
            .cluster_id
            .clone()
            .filter(|_| traffic.settings.cluster_local.contains(&target.service.hostname));
        Some(Self {
            cluster_local,
            keep_labels: locality.priority_keys(),
            stale: mesh.stale_clusters(),
            rule,
            subset: subset
                .and_then(|s| rule?.subset(s))
                .map(|s| &s.labels)
                .filter(|l| !l.is_empty()),
            locality,
            mtls: MtlsCheck::new(traffic, &target.service.namespace, target.port, dr_tls),
            target,
        })
    }

    /// What the assignment depends on for `proxy` besides the name and network view; `None` when
    /// nothing (no DestinationRule, no locality setting that reads the proxy).
    fn key(&self, proxy: &Proxy) -> Option<String> {
        let plan = locality::Plan::new(&self.locality, Place::of(proxy)).key();
        if self.rule.is_none() && plan.is_empty() {
            return None;
        }
        Some(format!("dr={}|{plan}", self.rule.map_or("", |r| &*r.key)))
    }

    /// The endpoints query for this cluster and view.
    pub fn query<'q>(
        &'q self,
        view: &'q NetworkView,
        mtls: &'q dyn Fn(&Endpoint) -> bool,
    ) -> EndpointQuery<'q> {
        EndpointQuery {
            service: self.target.service,
            port: self.target.port,
            view,
            subset: self.subset,
            mtls,
            cluster_local: self.cluster_local.as_ref(),
            keep_labels: &self.keep_labels,
            stale: self.stale,
        }
    }

    /// The load assignment `proxy` is sent: the view's endpoints for the query, the SNI-DNAT mTLS
    /// filter, then priorities or locality weights and duplicates merged.
    pub fn assignment(
        &self,
        mesh: &dyn Mesh,
        endpoints: &dyn EndpointView,
        proxy: &Proxy,
        view: &NetworkView,
        name: Arc<str>,
    ) -> Assignment {
        let mtls = |e: &Endpoint| self.mtls.enabled(e);
        let mut eps = endpoints.select(mesh, &self.query(view, &mtls));
        if self.target.sni_dnat {
            // The gateway passes mTLS through: only endpoints that take it from this client
            // (istiod's `EndpointsWithMTLSFilter`).
            eps.retain(|e| e.tls_mode == TlsMode::Istio);
        }
        locality::Plan::new(&self.locality, Place::of(proxy)).assignment(
            name,
            self.target.port,
            eps.iter().map(|e| &**e),
            client(proxy.kind),
            self.stale,
        )
    }
}
