//! `/debug/explain?proxyID=&service=<host>[:<port>]` (what `meshctl explain` shows): for one connected
//! proxy and one service, every endpoint the split-horizon filter is given and what it does with it
//! (direct, through which gateways with what weight, or dropped by which rule), and the endpoints
//! the proxy is actually sent.
//!
//! Owns: the pure report. The reasons come from [`split_horizon::explain`] (subset, network,
//! gateways), [`mtls`] (mTLS per endpoint) and [`locality`] (priority or weight)
//! through the cluster EDS resolves ([`EdsCluster`]), and the sent endpoints from
//! [`assignment`], the function the EDS generator encodes, so the report cannot drift
//! from EDS. The `sidecar` section says what the proxy's Sidecar scope does with the service (hidden,
//! and why); a hidden service is sent nothing. The DestinationRule that applied and what the proxy's client does with each
//! of its fields come from [`cds::cluster`], the function CDS encodes.
//! Does NOT: hold state or find the proxy: `xds::debug` hands it a connected proxy, or one made from
//! the query's node metadata ([`ExplainQuery::hypothetical_proxy`]).

pub mod routes;

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use serde::{Deserialize, Serialize};

use super::{
    SplitHorizon,
    cluster_discovery::{self, Discovery},
    split_horizon::{self, Verdict},
};
use crate::{
    config::mesh::OutboundMode,
    envoy::{
        NetworkView, Proxy,
        {
            Mesh, ScopedMesh, cds,
            cluster_policy::FieldNote,
            eds::{Assignment, EdsCluster, LocalityGroup},
            locality::{self, Place, Plan, PriorityWhy},
            mtls::MtlsDecision,
            scope_of,
        },
    },
    model::{
        ClusterId, Endpoint, Health, Locality, NetworkGateway, NetworkId, Service, ServicePort, TlsMode,
    },
    traffic::{
        SidecarScope,
        sidecar_scope::{Hidden, Ports, Via},
    },
};

/// `?proxyID=&service=`, and for a proxy that is not connected, the node metadata to explain it
/// with (`network=`, optional `cluster=` and `generator=`), as it would be parsed from its first request.
#[derive(Debug, Default, Deserialize)]
pub struct ExplainQuery {
    /// The proxy's node ID.
    #[serde(rename = "proxyID", default)]
    pub proxy_id: String,
    /// `<host>[:<port>]`; the host may be short (`name.namespace`).
    #[serde(default)]
    pub service: String,
    /// `NETWORK` of a proxy that is not connected.
    #[serde(default)]
    pub network: Option<String>,
    /// `CLUSTER_ID` of a proxy that is not connected.
    #[serde(default)]
    pub cluster: Option<String>,
    /// `GENERATOR` of a proxy that is not connected (`grpc`; default: from the ID, as for a stream).
    #[serde(default)]
    pub generator: Option<String>,
    /// A DestinationRule subset: explain its cluster `outbound|<port>|<subset>|<host>`.
    #[serde(default)]
    pub subset: Option<String>,
}

impl ExplainQuery {
    /// The proxy a stream would see for this node ID and metadata: the same parser, so the answer is
    /// what that proxy would get once connected.
    pub fn hypothetical_proxy(&self) -> Result<Option<Proxy>, String> {
        let Some(network) = &self.network else {
            return Ok(None);
        };
        use envoy_types::pb::{
            envoy::config::core::v3::Node,
            google::protobuf::{Struct, Value, value::Kind},
        };
        let fields = [
            ("NETWORK", Some(network)),
            ("CLUSTER_ID", self.cluster.as_ref()),
            ("GENERATOR", self.generator.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| {
            let kind = Some(Kind::StringValue(v?.clone()));
            Some((k.to_owned(), Value { kind }))
        })
        .collect();
        let node = Node {
            id: self.proxy_id.clone(),
            metadata: Some(Struct { fields }),
            ..Node::default()
        };
        Proxy::from_node(Some(&node)).map(Some).map_err(|e| e.to_string())
    }
}

/// The whole report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The proxy's node ID.
    pub proxy: String,
    /// Whether it is connected; if not, it is explained from the node metadata in the query.
    pub connected: bool,
    /// Changes meshd has taken in that this report (the published snapshot) does not show yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debouncing: Option<Debouncing>,
    /// Its network and requested view.
    pub view: ViewReport,
    /// The service's host name.
    pub service: String,
    /// What the proxy's Sidecar scope does with the service.
    pub sidecar: ScopeReport,
    /// The DestinationRule the proxy gets for the service (`None`: defaults).
    pub destination_rule: Option<RuleReport>,
    /// One entry per explained port.
    pub ports: Vec<PortReport>,
}

/// Changes inside the debounce window when the report was made: a report made right after an apply
/// can show the state before it, and should say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Debouncing {
    /// How long ago the first of them arrived.
    pub since_ms: u64,
    /// When they publish unless more arrive.
    pub publish_within_ms: u64,
}

/// What a proxy's Sidecar scope (istiod's `SidecarScope`) does with one service.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeReport {
    /// The Sidecar in effect, `namespace/name`; none: the default scope (every exported service).
    pub sidecar: Option<String>,
    /// Traffic to unknown destinations.
    pub outbound_traffic_policy: OutboundMode,
    /// Whether the proxy gets the service at all; when not, it is sent nothing for it.
    pub visible: bool,
    /// Why not: not exported to the proxy's namespace, or not imported by the Sidecar's egress hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Hidden>,
    /// The namespace of the copy the proxy sees, when several namespaces define the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Arc<str>>,
    /// The ports it sees, when the Sidecar imported only some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Ports>,
    /// What imported it: an egress host or a VirtualService.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

/// The scope section of a report.
fn scope_report(mesh: &dyn Mesh, scope: &SidecarScope, service: &Service) -> ScopeReport {
    let host = &*service.hostname;
    let import = scope.imports().and_then(|i| i.get(host));
    ScopeReport {
        sidecar: scope
            .sidecar
            .as_ref()
            .map(|o| format!("{}/{}", o.namespace, o.name)),
        outbound_traffic_policy: scope.outbound,
        visible: scope.sees_host(host),
        hidden: scope.hidden(host, mesh.all_services().filter(|s| &*s.hostname == host)),
        namespace: scope.chosen_namespace(host).cloned(),
        ports: import.map(|i| i.ports.clone()).filter(|p| *p != Ports::All),
        via: import.map(|i| i.via.clone()),
    }
}

/// The DestinationRule that applied.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleReport {
    /// Every contributing DestinationRule (`DestinationRule <namespace>/<name>`), oldest first.
    pub from: Vec<String>,
    /// The host it is written for.
    pub host: String,
}

/// One cluster of a port (the default, then each subset) and what the proxy's client does with each
/// field of the rule it was built from (the same function CDS builds it with).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    /// The cluster name.
    pub name: String,
    /// The subset, for a subset cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subset: Option<String>,
    /// Per field of the rule: applies, downgraded, or ignored and why.
    pub notes: Vec<FieldNote>,
}

/// A proxy's network view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewReport {
    /// Its own network.
    pub network: Option<NetworkId>,
    /// `REQUESTED_NETWORK_VIEW`.
    pub requested_network_view: Vec<NetworkId>,
}

/// One service port: every candidate endpoint, and what is sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortReport {
    /// The service port.
    pub port: u16,
    /// Its name.
    pub name: String,
    /// The cluster name (also the EDS service name of an EDS cluster).
    pub eds_cluster: String,
    /// How the proxy finds the cluster's endpoints: `EDS`, `STRICT_DNS`, `LOGICAL_DNS`, `ORIGINAL_DST`.
    pub discovery: &'static str,
    /// `name:port` a DNS cluster's proxy resolves (beside the IP endpoints `sent` lists).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// The port's clusters as CDS builds them for this proxy.
    pub clusters: Vec<ClusterReport>,
    /// The subset explained and the labels that select it (`None`: every endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subset: Option<SubsetReport>,
    /// Why CDS builds no cluster of this name for the proxy (a subset no DestinationRule it gets
    /// defines): routes to it fail, whatever EDS would say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_built: Option<String>,
    /// Locality load balancing for this cluster and where its setting came from.
    pub locality_lb: locality::Mode,
    /// Every endpoint of the service (all clusters) and its fate.
    pub endpoints: Vec<EndpointReport>,
    /// What the proxy is sent, gateways included.
    pub sent: Vec<SentEndpoint>,
    /// Its HTTP routes and the VirtualService they come from (none for a sidecar's TCP port).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<routes::RoutesReport>,
}

/// A candidate endpoint and the filter's verdict.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointReport {
    /// Pod IP.
    pub address: IpAddr,
    /// Target port, when it serves this port.
    pub target_port: Option<u16>,
    /// Cluster.
    pub cluster: ClusterId,
    /// Network.
    pub network: Option<NetworkId>,
    /// Workload (pod, WorkloadEntry, ServiceEntry endpoint) name.
    pub workload: Option<String>,
    /// Where it came from: `Pod <ns>/<name>`, `WorkloadEntry <ns>/<name>`, `ServiceEntry <ns>/<name>-<i>`.
    pub origin: Option<String>,
    /// Health.
    pub health: Health,
    /// Whether it takes Istio mTLS.
    pub tls_mode: TlsMode,
    /// What the filter does with it.
    pub verdict: Verdict,
    /// Whether this client sends it Istio mTLS, and what decided.
    pub mtls: MtlsDecision,
    /// The priority it (or the gateway standing in for it) is sent at, and why; `None` when not sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityReport>,
}

/// A subset and its labels.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubsetReport {
    /// The subset's name.
    pub name: String,
    /// Its labels (`None`: the rule does not define it or selects everything, so every endpoint is in
    /// it, as istiod).
    pub labels: Option<BTreeMap<String, String>>,
}

/// Where an endpoint lands in the assignment.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityReport {
    /// The priority sent.
    pub priority: u32,
    /// What ranked it (failoverPriority label, locality ladder, distribute entry); `None` when
    /// locality load balancing is off for the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<PriorityWhy>,
}

/// An endpoint in the assignment the proxy receives.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SentEndpoint {
    /// Address.
    pub address: IpAddr,
    /// Port.
    pub port: u16,
    /// Cluster (a gateway's cluster).
    pub cluster: ClusterId,
    /// Network.
    pub network: Option<NetworkId>,
    /// Locality.
    pub locality: Locality,
    /// Load-balancing weight.
    pub weight: u32,
    /// Health.
    pub health: Health,
    /// Whether this is a network gateway standing in for remote endpoints.
    pub gateway: bool,
    /// Its locality group's priority.
    pub priority: u32,
}

/// The report for `service`, only `port` when given, as `proxy` gets it.
pub fn explain(mesh: &dyn Mesh, proxy: &Proxy, service: &Service, port: Option<u16>) -> Explanation {
    explain_subset(mesh, proxy, service, port, None)
}

/// [`explain`] for the clusters of a DestinationRule subset.
pub fn explain_subset(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    service: &Service,
    port: Option<u16>,
    subset: Option<&str>,
) -> Explanation {
    let view = NetworkView::of(proxy);
    let scope = scope_of(mesh, proxy);
    let scoped = ScopedMesh::new(mesh, &scope);
    let ports = service
        .ports
        .iter()
        .filter(|p| port.is_none_or(|want| want == p.port))
        .filter_map(|p| {
            let name = cds::subset_cluster_name(p.port, subset.unwrap_or(""), &service.hostname);
            // What the proxy gets comes through its Sidecar scope: a port the scope hides has no
            // cluster, so no report (the `sidecar` section says why).
            let mut report = port_report(&scoped, proxy, &view, p, &name)?;
            report.routes = routes::report(&scoped, proxy, service, p.port);
            Some(report)
        })
        .collect();
    Explanation {
        proxy: proxy.id.to_string(),
        connected: true,
        debouncing: None,
        view: ViewReport {
            network: view.network,
            requested_network_view: view.requested,
        },
        service: service.hostname.to_string(),
        sidecar: scope_report(mesh, &scope, service),
        destination_rule: cds::rule_for(mesh, proxy, service).map(|r| RuleReport {
            from: r.from.iter().map(ToString::to_string).collect(),
            host: r.host.to_string(),
        }),
        ports,
    }
}

/// The default cluster of `port` and one per subset of the proxy's rule, with their field notes.
fn clusters(mesh: &dyn Mesh, proxy: &Proxy, service: &Service, port: u16) -> Vec<ClusterReport> {
    let subsets = cds::rule_for(mesh, proxy, service)
        .into_iter()
        .flat_map(|r| r.rule.subsets.iter().map(|s| s.name.as_str()));
    std::iter::once("")
        .chain(subsets)
        .filter_map(|subset| {
            let name = cds::subset_cluster_name(port, subset, &service.hostname);
            let built = cds::cluster(mesh, proxy, &name)?;
            Some(ClusterReport {
                name,
                subset: (!subset.is_empty()).then(|| subset.to_owned()),
                notes: built.notes,
            })
        })
        .collect()
}

fn port_report(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    view: &NetworkView,
    p: &ServicePort,
    name: &str,
) -> Option<PortReport> {
    let cluster = EdsCluster::resolve(mesh, proxy, name)?;
    let gateways = mesh.gateways();
    // The generator's own function, duplicates merged.
    let a = super::eds::assignment(mesh, &SplitHorizon, proxy, view, name.into())?;
    let plan = Plan::new(&cluster.locality, Place::of(proxy));
    let mtls = |e: &Endpoint| cluster.mtls.enabled(e);
    let q = cluster.query(view, &mtls);
    let endpoints = split_horizon::explain(mesh.endpoints(cluster.target.service), gateways, &q)
        .into_iter()
        .map(|(ep, verdict)| EndpointReport {
            address: ep.address,
            target_port: ep.port(&p.name),
            cluster: ep.cluster().clone(),
            network: ep.network().clone(),
            workload: ep.workload.as_deref().map(str::to_owned),
            origin: ep
                .workload
                .as_ref()
                .map(|w| format!("{:?} {}/{w}", ep.kind, cluster.target.service.namespace)),
            health: ep.health,
            tls_mode: ep.tls_mode,
            mtls: cluster.mtls.decide(ep),
            priority: priority(ep, &verdict, p, &a, &plan, &cluster.keep_labels),
            verdict,
        })
        .collect();
    let subset = Some(cluster.target.subset)
        .filter(|s| !s.is_empty())
        .map(|s| SubsetReport {
            name: s.to_owned(),
            labels: cluster.subset.cloned(),
        });
    let not_built = subset
        .as_ref()
        .filter(|_| cds::cluster(mesh, proxy, name).is_none())
        .map(|s| match cds::rule_for(mesh, proxy, cluster.target.service) {
            Some(r) => format!(
                "no subset {} in the DestinationRule this proxy gets ({})",
                s.name,
                r.from
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "no DestinationRule for {} applies to this proxy, so it has no subset {}",
                cluster.target.service.hostname, s.name
            ),
        });
    let discovery = cluster_discovery::of(proxy.kind, cluster.target.service);
    Some(PortReport {
        port: p.port,
        name: p.name.to_string(),
        eds_cluster: name.to_owned(),
        discovery: discovery.as_str(),
        dns_names: match discovery {
            Discovery::StrictDns | Discovery::LogicalDns => {
                cluster_discovery::dns_targets(cluster.target.service, p)
                    .iter()
                    .map(|(t, port)| format!("{}:{port}", t.address))
                    .collect()
            }
            Discovery::Eds | Discovery::OriginalDst => Vec::new(),
        },
        clusters: clusters(mesh, proxy, cluster.target.service, p.port),
        subset,
        not_built,
        locality_lb: cluster.locality.clone(),
        endpoints,
        sent: sent(&a, gateways),
        routes: None,
    })
}

/// The priority `ep` is sent at (directly, or through the gateway standing in for it, which sits in
/// its locality or wherever the duplicate merge kept it) and why.
fn priority(
    ep: &Endpoint,
    verdict: &Verdict,
    p: &ServicePort,
    a: &Assignment,
    plan: &Plan,
    keep_labels: &[String],
) -> Option<PriorityReport> {
    let (target, ranked) = match verdict {
        Verdict::Direct { .. } => ((ep.address, ep.port(&p.name)?), ep.clone()),
        Verdict::ViaGateways { gateways, .. } => {
            let gw = gateways.first()?;
            let stands_for = split_horizon::StandsFor::of(ep, keep_labels);
            let stand_in = split_horizon::stand_in(gw, ep.ports.clone(), &stands_for, 1);
            ((gw.address, gw.port), stand_in)
        }
        Verdict::Dropped { .. } => return None,
    };
    let holds = |g: &&LocalityGroup| g.endpoints.iter().any(|t| (t.address, t.port) == target);
    let group = a
        .localities
        .iter()
        .filter(holds)
        .find(|g| g.locality == *ep.locality())
        .or_else(|| a.localities.iter().find(holds))?;
    Some(PriorityReport {
        priority: group.priority,
        why: plan.applies().then(|| plan.why(&ranked, ep.locality())),
    })
}

/// The assignment's endpoints in wire order (locality, then address), gateways marked.
fn sent(a: &Assignment, gateways: &[NetworkGateway]) -> Vec<SentEndpoint> {
    a.localities
        .iter()
        .flat_map(|g| {
            g.endpoints.iter().map(|t| SentEndpoint {
                address: t.address,
                port: t.port,
                cluster: t.cluster.clone(),
                network: t.network.clone(),
                locality: g.locality.clone(),
                weight: t.weight,
                health: t.health,
                gateway: gateways
                    .iter()
                    .any(|gw| (gw.address, gw.port) == (t.address, t.port)),
                priority: g.priority,
            })
        })
        .collect()
}

/// `host[:port]` → the service (exact host, or `name.namespace` short form) and the port.
pub fn find_service<'m>(mesh: &'m dyn Mesh, spec: &str) -> Result<(&'m Service, Option<u16>), String> {
    let (host, port) = match spec.rsplit_once(':') {
        Some((h, p)) => (
            h,
            Some(p.parse::<u16>().map_err(|_| format!("bad port in {spec:?}"))?),
        ),
        None => (spec, None),
    };
    let service = mesh.service(host).or_else(|| {
        let prefix = format!("{host}.svc.");
        mesh.services().find(|s| s.hostname.starts_with(&prefix))
    });
    let service = service.ok_or_else(|| {
        // A bare name (`helloworld`) is the usual slip: suggest the services it could mean.
        let mut near: Vec<String> = mesh
            .services()
            .filter(|s| !host.contains('.') && *s.name == *host)
            .map(|s| format!("{}.{}", s.name, s.namespace))
            .collect();
        near.sort();
        near.dedup();
        match near.as_slice() {
            [] => format!("no service {host:?} in the mesh"),
            _ => format!(
                "no service {host:?} in the mesh; did you mean {}?",
                near.join(" or ")
            ),
        }
    })?;
    if let Some(p) = port
        && !service.ports.iter().any(|sp| sp.port == p)
    {
        return Err(format!("service {} has no port {p}", service.hostname));
    }
    Ok((service, port))
}

/// Every network meshd knows: those of its gateways and of its endpoints. A hypothetical proxy must
/// name one of them, or explain would describe a network that does not exist.
pub fn known_networks(mesh: &dyn Mesh) -> std::collections::BTreeSet<NetworkId> {
    let gateways = mesh.gateways().iter().map(|g| g.network.clone());
    let endpoints = mesh
        .services()
        .flat_map(|s| mesh.endpoints(s).filter_map(|e| e.network().clone()));
    gateways.chain(endpoints).collect()
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
