//! istioctl analyze's analyzers for the kinds meshd reads, run live on what meshd serves: the Istio
//! objects in force and the aggregate's merged registry of every cluster (services, their endpoints
//! with labels, the workloads behind them). A reference resolves when it resolves in any cluster, so
//! a DestinationRule subset whose pods run only in cluster2 is not reported (istio#24345: istioctl
//! analyzes one cluster at a time). Pure: [`analyze`] maps an [`Input`] to [`Message`]s; `app` serves
//! them on `/debug/analyzez`, `meshctl analyze` prints them.

mod destination_rule;
pub mod files;
mod hosts;
mod matches;
pub mod message;
mod selectors;
mod service_entry;
mod virtual_service;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

pub use message::{Code, Level, Message};

use crate::{
    aggregate::MeshSnapshot,
    istio::{Config, Spec},
    model::{Endpoint, LABEL_REGION, LABEL_SUBZONE, LABEL_ZONE},
    traffic::{Settings, Visibility},
};

/// What the analyzers look at.
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// The Istio objects in force.
    pub configs: Vec<Arc<Config>>,
    /// Every service of every cluster, Kubernetes Services and ServiceEntry hosts alike.
    pub services: Vec<Service>,
    /// Every workload meshd knows of, in every cluster.
    pub workloads: Vec<Workload>,
    /// The root namespace and domain suffix (short names resolve with it).
    pub settings: Settings,
    /// The proxies allocate ServiceEntry addresses themselves (`ISTIO_META_DNS_AUTO_ALLOCATE` with DNS
    /// capture), so a TCP ServiceEntry needs none.
    pub dns_auto_allocate: bool,
}

/// A service as the analyzers see it: merged across clusters.
#[derive(Debug, Clone)]
pub struct Service {
    /// Its host name (`reviews.default.svc.cluster.local`, `*.example.com`).
    pub hostname: String,
    /// Its namespace.
    pub namespace: String,
    /// Its port numbers.
    pub ports: Vec<u32>,
    /// Which namespaces see it.
    pub visibility: Visibility,
    /// The clusters it is defined in.
    pub clusters: BTreeSet<String>,
    /// Its endpoints, in every cluster.
    pub endpoints: Vec<Workload>,
}

/// A workload (a pod or WorkloadEntry): where it runs and its labels, topology labels included.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Workload {
    /// Its namespace.
    pub namespace: String,
    /// Its name (an address when it has none).
    pub name: String,
    /// Its cluster.
    pub cluster: String,
    /// Its labels, with the topology labels istiod adds (region, zone, subzone, cluster, network).
    pub labels: BTreeMap<String, String>,
}

impl Workload {
    /// Whether every label of `selector` is set to the same value on it (an empty selector selects
    /// everything).
    pub fn selected_by(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

impl Input {
    /// What meshd serves at `snap`: its config and its merged registry. Workloads are the endpoints of
    /// services (a pod no Service selects is not in the registry, so not here).
    pub fn of_snapshot(snap: &MeshSnapshot) -> Self {
        let mut workloads = BTreeMap::new();
        let services = snap
            .services
            .iter()
            .map(|(key, s)| {
                let endpoints: Vec<Workload> = snap
                    .endpoints
                    .get(key)
                    .map(|shards| {
                        shards
                            .iter()
                            .map(|e| {
                                let w = workload(&s.namespace, e);
                                workloads
                                    .entry((e.cluster().clone(), e.address))
                                    .or_insert_with(|| w.clone());
                                w
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let mut clusters: BTreeSet<String> =
                    s.cluster_vips.keys().map(|c| c.as_str().to_owned()).collect();
                clusters.extend(endpoints.iter().map(|e| e.cluster.clone()));
                if let Some(shards) = snap.endpoints.get(key) {
                    clusters.extend(shards.shards.keys().map(|k| k.cluster.as_str().to_owned()));
                }
                Service {
                    hostname: s.hostname.as_str().to_owned(),
                    namespace: s.namespace.to_string(),
                    ports: s.ports.iter().map(|p| u32::from(p.port)).collect(),
                    visibility: Visibility::of_service(s, snap.settings.default_service_export),
                    clusters,
                    endpoints,
                }
            })
            .collect();
        Self {
            configs: snap.config.all().cloned().collect(),
            services,
            workloads: workloads.into_values().collect(),
            settings: snap.settings.clone(),
            dns_auto_allocate: false,
        }
    }

    /// The objects of one kind, with their spec.
    fn each<'a, T: 'a>(
        &'a self,
        pick: impl Fn(&'a Spec) -> Option<&'a Arc<T>> + 'a,
    ) -> impl Iterator<Item = (&'a Config, &'a T)> + 'a {
        self.configs
            .iter()
            .filter_map(move |c| pick(&c.spec).map(|s| (&**c, &**s)))
    }
}

/// An endpoint as a workload, with istiod's augmented labels.
fn workload(namespace: &str, e: &Endpoint) -> Workload {
    let mut labels: BTreeMap<String, String> = (**e.labels()).clone();
    for key in [
        LABEL_REGION,
        LABEL_ZONE,
        LABEL_SUBZONE,
        crate::model::LABEL_CLUSTER,
        crate::model::LABEL_NETWORK,
    ] {
        if let Some(v) = e.label(key) {
            labels.insert(key.to_owned(), v.to_owned());
        }
    }
    Workload {
        namespace: namespace.to_owned(),
        name: e
            .workload
            .as_deref()
            .map_or_else(|| e.address.to_string(), str::to_owned),
        cluster: e.cluster().as_str().to_owned(),
        labels,
    }
}

/// The analyzers, by istioctl's names (meshd's own where istioctl has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Analyzer {
    /// Route and mirror destination hosts and ports.
    VirtualServiceDestinationHosts,
    /// Route and mirror destination subsets.
    VirtualServiceDestinationRules,
    /// Gateways a VirtualService names, and its hosts in them.
    VirtualServiceGateways,
    /// Mesh-bound VirtualServices defining the same host.
    ConflictingMeshGatewayHosts,
    /// Route rules and matches that can never be used.
    UnreachableRules,
    /// DestinationRule hosts and subsets against the endpoints of every cluster.
    DestinationRuleSubsets,
    /// DestinationRules disabling TLS towards STRICT workloads.
    MtlsConflicts,
    /// DestinationRules with TLS that verifies no server certificate.
    DestinationRuleCaCertificates,
    /// Sidecar workload selectors.
    SidecarSelectors,
    /// PeerAuthentication workload selectors.
    PeerAuthenticationSelectors,
    /// ServiceEntry TCP ports without addresses.
    ServiceEntryAddresses,
    /// ServiceEntries giving one host and port different protocols.
    ServiceEntryProtocols,
}

impl Analyzer {
    /// Every analyzer, in the order they run.
    pub const ALL: [Analyzer; 12] = [
        Analyzer::VirtualServiceDestinationHosts,
        Analyzer::VirtualServiceDestinationRules,
        Analyzer::VirtualServiceGateways,
        Analyzer::ConflictingMeshGatewayHosts,
        Analyzer::UnreachableRules,
        Analyzer::DestinationRuleSubsets,
        Analyzer::MtlsConflicts,
        Analyzer::DestinationRuleCaCertificates,
        Analyzer::SidecarSelectors,
        Analyzer::PeerAuthenticationSelectors,
        Analyzer::ServiceEntryAddresses,
        Analyzer::ServiceEntryProtocols,
    ];

    /// istioctl's name for it (`istioctl analyze -L`); `meshd.` for the ones istioctl lacks.
    pub fn name(self) -> &'static str {
        match self {
            Analyzer::VirtualServiceDestinationHosts => "virtualservice.DestinationHostAnalyzer",
            Analyzer::VirtualServiceDestinationRules => "virtualservice.DestinationRuleAnalyzer",
            Analyzer::VirtualServiceGateways => "virtualservice.GatewayAnalyzer",
            Analyzer::ConflictingMeshGatewayHosts => "virtualservice.ConflictingMeshGatewayHostsAnalyzer",
            Analyzer::UnreachableRules => "schema.ValidationAnalyzer.VirtualService",
            Analyzer::DestinationRuleSubsets => "destinationrule.SubsetSelectPodAnalyzer",
            Analyzer::MtlsConflicts => "meshd.MtlsPolicyConflictAnalyzer",
            Analyzer::DestinationRuleCaCertificates => "destinationrule.CaCertificateAnalyzer",
            Analyzer::SidecarSelectors => "sidecar.SelectorAnalyzer",
            Analyzer::PeerAuthenticationSelectors => "meshd.PeerAuthenticationSelectorAnalyzer",
            Analyzer::ServiceEntryAddresses => "serviceentry.Analyzer",
            Analyzer::ServiceEntryProtocols => "serviceentry.ConflictingServiceEntryProtocolAnalyzer",
        }
    }

    /// Its messages on `input`, in the order found.
    pub fn run(self, input: &Input) -> Vec<Message> {
        let mut out = Vec::new();
        match self {
            Analyzer::VirtualServiceDestinationHosts => virtual_service::hosts(input, &mut out),
            Analyzer::VirtualServiceDestinationRules => virtual_service::subsets(input, &mut out),
            Analyzer::VirtualServiceGateways => virtual_service::gateways(input, &mut out),
            Analyzer::ConflictingMeshGatewayHosts => virtual_service::mesh_conflicts(input, &mut out),
            Analyzer::UnreachableRules => matches::analyze(input, &mut out),
            Analyzer::DestinationRuleSubsets => destination_rule::hosts_and_subsets(input, &mut out),
            Analyzer::MtlsConflicts => destination_rule::mtls_conflicts(input, &mut out),
            Analyzer::DestinationRuleCaCertificates => destination_rule::ca_certificates(input, &mut out),
            Analyzer::SidecarSelectors => selectors::sidecars(input, &mut out),
            Analyzer::PeerAuthenticationSelectors => selectors::peer_authentications(input, &mut out),
            Analyzer::ServiceEntryAddresses => service_entry::addresses(input, &mut out),
            Analyzer::ServiceEntryProtocols => service_entry::protocol_conflicts(input, &mut out),
        }
        out
    }
}

/// Every analyzer's messages on `input`, sorted by object, then code.
pub fn analyze(input: &Input) -> Vec<Message> {
    let mut out: Vec<Message> = Analyzer::ALL.iter().flat_map(|a| a.run(input)).collect();
    out.sort_by(|a, b| (&a.resource, &a.code, &a.message).cmp(&(&b.resource, &b.code, &b.message)));
    out
}

/// `a, b and c`-style list of clusters for messages.
fn clusters_text<'a>(clusters: impl IntoIterator<Item = &'a String>) -> String {
    let list: Vec<&str> = clusters.into_iter().map(String::as_str).collect();
    if list.is_empty() {
        "no cluster".into()
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests;
