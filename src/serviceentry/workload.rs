//! WorkloadEntries (and a ServiceEntry's inline endpoints) → [`Endpoint`]s with the same fields as pod
//! endpoints (istiod's `convertWorkloadEntryToWorkloadInstance`), so split horizon, subsets and mTLS
//! treat a VM like a pod. Pure.

use std::{net::IpAddr, sync::Arc};

use crate::{
    istio::WorkloadEntry,
    model::{
        ClusterId, Endpoint, EndpointPort, Health, LABEL_NETWORK, LABEL_TLS_MODE, Labels, Locality,
        NetworkId, Placement, TlsMode, WorkloadInfo, WorkloadKind, workload_meta,
    },
    registry::{endpoints::PodWorkload, network::NetworkResolver},
};

/// Label naming a WorkloadEntry's workload for telemetry (else the entry's name).
const LABEL_WORKLOAD_NAME: &str = "service.istio.io/workload-name";
/// Pod label istiod reads a locality from when a WorkloadEntry has no `locality` (`region.zone.subzone`).
const LABEL_ISTIO_LOCALITY: &str = "istio-locality";

/// What every endpoint of the ServiceEntry registry shares.
#[derive(Debug, Clone)]
pub struct Context {
    /// The config cluster (istiod gives WorkloadEntry endpoints the registry's cluster).
    pub cluster: ClusterId,
    /// SPIFFE trust domain.
    pub trust_domain: Arc<str>,
    /// meshNetworks rules, for entries that name no network.
    pub networks: NetworkResolver,
}

/// A workload as the registry sees it: an IP, its identity and topology, before ports are mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// The workload's IP.
    pub address: IpAddr,
    /// `metadata.labels` over `spec.labels` (selection and subsets read them).
    pub labels: Labels,
    /// Named ports (`spec.ports`).
    pub ports: Arc<std::collections::BTreeMap<String, u32>>,
    /// Its network.
    pub network: Option<NetworkId>,
    /// Where it runs.
    pub locality: Locality,
    /// SPIFFE identity, when `serviceAccount` is set.
    pub service_account: Option<Arc<str>>,
    /// mTLS capability.
    pub tls_mode: TlsMode,
    /// Load-balancing weight, at least 1.
    pub weight: u32,
    /// The object it came from: its kind and name.
    pub kind: WorkloadKind,
    /// The object's name.
    pub name: Arc<str>,
    /// Its endpoints' `istio.workload` telemetry string.
    pub workload_meta: Arc<str>,
}

/// One WorkloadEntry (or inline endpoint) of `namespace` → an instance. `None` for what meshd cannot
/// route to by IP: no address (a gateway-only entry), a DNS name, a `unix://` socket.
pub fn instance(
    we: &WorkloadEntry,
    meta_labels: Option<&std::collections::BTreeMap<String, String>>,
    namespace: &str,
    (kind, name): (WorkloadKind, Arc<str>),
    ctx: &Context,
) -> Option<Instance> {
    let address: IpAddr = we.address.parse().ok()?;
    let mut labels = we.labels.clone();
    if let Some(meta) = meta_labels {
        labels.extend(meta.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    // `spec.network` wins, then the network label, then meshNetworks (istiod fills only the label from
    // meshNetworks and leaves the endpoint's network empty: meshd resolves once and uses it for both).
    let label_network = labels.get(LABEL_NETWORK).map(|n| NetworkId::from(n.as_str()));
    let spec_network = Some(&we.network)
        .filter(|n| !n.is_empty())
        .map(|n| NetworkId::from(n.as_str()));
    let network = ctx
        .networks
        .resolve(spec_network.as_ref().or(label_network.as_ref()), None, address);
    let locality = if we.locality.is_empty() {
        labels
            .get(LABEL_ISTIO_LOCALITY)
            .map_or_else(Locality::default, |l| locality(l, '.'))
    } else {
        locality(&we.locality, '/')
    };
    let service_account = Some(&we.service_account)
        .filter(|sa| !sa.is_empty())
        .map(|sa| Arc::from(format!("spiffe://{}/ns/{namespace}/sa/{sa}", ctx.trust_domain)));
    // istiod's `getTLSModeFromWorkloadEntry`: the label, else `istio` when it has an identity.
    let tls_mode = match labels.get(LABEL_TLS_MODE).map(String::as_str) {
        Some("istio") => TlsMode::Istio,
        Some(_) => TlsMode::Disabled,
        None if service_account.is_some() => TlsMode::Istio,
        None => TlsMode::Disabled,
    };
    // istiod names a WorkloadEntry's workload (`WorkloadNameFromWorkloadEntry`); an inline endpoint has
    // neither workload nor namespace.
    let (workload, ns) = match kind {
        WorkloadKind::ServiceEntry => ("", ""),
        _ => (
            labels.get(LABEL_WORKLOAD_NAME).map_or(&*name, String::as_str),
            namespace,
        ),
    };
    let workload_meta = workload_meta(workload, ns, &labels, &ctx.cluster);
    Some(Instance {
        address,
        labels: Arc::new(labels),
        ports: Arc::new(we.ports.clone()),
        network,
        locality,
        service_account,
        tls_mode,
        weight: we.weight.max(1),
        kind,
        name,
        workload_meta,
    })
}

/// `region<sep>zone<sep>subzone`, missing parts empty.
pub(super) fn locality(s: &str, sep: char) -> Locality {
    let mut parts = s.splitn(3, sep).map(Arc::from);
    Locality {
        region: parts.next().unwrap_or_default(),
        zone: parts.next().unwrap_or_default(),
        subzone: parts.next().unwrap_or_default(),
    }
}

/// Whether every `selector` label is among `labels` (an empty selector selects nothing, as a
/// ServiceEntry without `workloadSelector` selects no workloads).
pub fn selects(
    selector: &std::collections::BTreeMap<String, String>,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// A ready pod of the config cluster → an instance: the Kubernetes registry built its endpoint as for a
/// Service's, so a pod has the same labels, network, locality, identity and tlsMode either way
/// (istiod's pod `WorkloadInstance`); its named container ports map the ServiceEntry's ports.
pub fn pod(p: &PodWorkload) -> Instance {
    let e = &p.endpoint;
    Instance {
        address: e.address,
        labels: e.labels().clone(),
        ports: p.ports.clone(),
        network: e.network().clone(),
        locality: e.locality().clone(),
        service_account: e.service_account().clone(),
        tls_mode: e.tls_mode,
        weight: e.weight,
        kind: WorkloadKind::Pod,
        name: e.workload.clone().unwrap_or_default(),
        workload_meta: e.workload_meta.clone(),
    }
}

impl Instance {
    /// Whether `selector` selects it (see [`selects`]).
    pub fn selected_by(&self, selector: &std::collections::BTreeMap<String, String>) -> bool {
        selects(selector, &self.labels)
    }

    /// Its endpoint for a service with `ports` (service port name → the port the workload listens on).
    pub fn endpoint(&self, ports: Arc<[EndpointPort]>, cluster: &ClusterId) -> Endpoint {
        Endpoint {
            address: self.address,
            ports,
            placement: Placement::new(cluster.clone(), self.network.clone(), self.locality.clone()),
            info: WorkloadInfo::new(self.labels.clone(), self.service_account.clone()),
            workload_meta: self.workload_meta.clone(),
            tls_mode: self.tls_mode,
            health: Health::Healthy,
            workload: Some(self.name.clone()),
            kind: self.kind,
            weight: self.weight,
        }
    }
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
