//! One workload address behind a service, with what EDS needs to route to it.

use std::{fmt, net::IpAddr, sync::Arc};

use serde::Serialize;

use super::{
    ClusterId, LABEL_CLUSTER, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE, LABEL_ZONE, Labels, NetworkId,
};

/// An endpoint of one service in one cluster. Built per address from an EndpointSlice; strings are
/// shared (`Arc`) with the pod and slice it came from, so 100k of them stay small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The workload's IP.
    pub address: IpAddr,
    /// Ports, by service port name; shared by every endpoint of the slice.
    pub ports: Arc<[EndpointPort]>,
    /// The cluster it runs in.
    pub cluster: ClusterId,
    /// Its network; `None` is the unnamed network, reachable from every network.
    pub network: Option<NetworkId>,
    /// Where it runs.
    pub locality: Locality,
    /// The pod's labels, shared with the pod. The topology labels istiod adds (cluster, network, region,
    /// zone, subzone) are derived from the fields above: read labels through [`Endpoint::label`].
    pub labels: Labels,
    /// `spiffe://<trust domain>/ns/<ns>/sa/<sa>`, when the pod is known.
    pub service_account: Option<Arc<str>>,
    /// Whether it takes Istio mTLS.
    pub tls_mode: TlsMode,
    /// From the EndpointSlice conditions.
    pub health: Health,
    /// The name of the object it came from (pod, WorkloadEntry, ServiceEntry endpoint), if any.
    pub workload: Option<Arc<str>>,
    /// What kind of object `workload` names: its origin in `/debug/endpointz` and `meshctl explain`.
    pub kind: WorkloadKind,
    /// istiod's `istio.workload` telemetry string ([`super::workload_meta()`]), shared by a deployment's
    /// replicas: built with the endpoint so pushes only copy it.
    pub workload_meta: Arc<str>,
    /// Load-balancing weight (1 unless set).
    pub weight: u32,
}

impl Endpoint {
    /// The target port for the service port named `name`.
    pub fn port(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| &*p.service_port_name == name)
            .map(|p| p.port)
    }

    /// A label as in istiod's augmented endpoint labels (for subset selection and failoverPriority): the
    /// topology labels come from the endpoint itself (a pod's own network label wins), every other key
    /// from the pod. A network gateway standing in for remote endpoints has their cluster, locality
    /// and `failoverPriority` labels (★ istiod's has only its own cluster and network).
    pub fn label(&self, key: &str) -> Option<&str> {
        let pod = self.labels.get(key).map(String::as_str);
        match key {
            LABEL_CLUSTER => Some(&self.cluster),
            LABEL_NETWORK => pod.or(self.network.as_deref()),
            LABEL_REGION => non_empty(&self.locality.region),
            LABEL_ZONE => non_empty(&self.locality.zone),
            LABEL_SUBZONE => non_empty(&self.locality.subzone),
            _ => pod,
        }
    }
}

fn non_empty(s: &Arc<str>) -> Option<&str> {
    Some(&**s).filter(|s| !s.is_empty())
}

/// The kind of object an endpoint came from (its `workload` names it, in the service's namespace).
/// A field of its own rather than beside the name in one struct, which would not fit
/// [`Endpoint`]'s size budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub enum WorkloadKind {
    /// A Kubernetes pod (or an EndpointSlice address without one).
    #[default]
    Pod,
    /// A `WorkloadEntry` (a VM).
    WorkloadEntry,
    /// An inline endpoint of a `ServiceEntry`.
    ServiceEntry,
    /// A network gateway that split horizon put in place of a remote network's endpoints.
    NetworkGateway,
}

/// One port of an endpoint: the service port name it serves and the port it listens on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// The service port's name (EndpointSlice port name).
    pub service_port_name: Arc<str>,
    /// The port the workload listens on.
    pub port: u16,
}

/// `region/zone/subzone`; each part may be empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Locality {
    /// e.g. `us-east1`.
    pub region: Arc<str>,
    /// e.g. `us-east1-b`.
    pub zone: Arc<str>,
    /// Free-form (rack, node pool).
    pub subzone: Arc<str>,
}

impl Locality {
    /// True when no part is known.
    pub fn is_empty(&self) -> bool {
        self.region.is_empty() && self.zone.is_empty() && self.subzone.is_empty()
    }
}

impl fmt::Display for Locality {
    /// Istio's locality label: `region/zone/subzone`, or empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return Ok(());
        }
        write!(f, "{}/{}/{}", self.region, self.zone, self.subzone)
    }
}

/// Whether an endpoint accepts Istio mutual TLS (`security.istio.io/tlsMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// A sidecar or ztunnel terminates Istio mTLS.
    Istio,
    /// Plaintext (or the application's own TLS).
    Disabled,
}

/// Endpoint health, from EndpointSlice conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Health {
    /// `ready` (or unset).
    Healthy,
    /// Not ready.
    Unhealthy,
    /// Terminating but still serving: keep existing connections, send no new ones.
    Draining,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locality_label_is_istios() {
        let l = Locality {
            region: "r".into(),
            zone: "z".into(),
            subzone: "".into(),
        };
        assert_eq!(l.to_string(), "r/z/");
        assert_eq!(Locality::default().to_string(), "");
    }

    #[test]
    fn endpoint_stays_compact() {
        // 100k endpoints must fit comfortably in memory: strings are shared, not owned (the
        // telemetry string took it from 160 to 176 bytes).
        assert!(
            std::mem::size_of::<Endpoint>() <= 176,
            "{}",
            std::mem::size_of::<Endpoint>()
        );
    }
}
