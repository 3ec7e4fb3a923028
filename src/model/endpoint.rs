//! One workload address behind a service, with what EDS needs to route to it.

use std::{fmt, net::IpAddr, sync::Arc};

use serde::Serialize;

use super::{
    ClusterId, LABEL_CLUSTER, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE, LABEL_ZONE, Labels, NetworkId,
};

/// An endpoint of one service in one cluster. Built per address from an EndpointSlice; what it shares
/// with the other endpoints of its cluster and locality ([`Placement`]) and with its pod's replicas
/// ([`WorkloadInfo`]) is one `Arc` each, so 100k of them stay small (88 bytes; was 176 with those
/// fields inline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The workload's IP.
    pub address: IpAddr,
    /// Ports, by service port name; shared by every endpoint of the slice.
    pub ports: Arc<[EndpointPort]>,
    /// Cluster, network and locality: read through [`Endpoint::cluster`], [`Endpoint::network`],
    /// [`Endpoint::locality`]. Registries intern it.
    pub placement: Arc<Placement>,
    /// Labels and identity: read through [`Endpoint::labels`], [`Endpoint::service_account`].
    /// Registries intern it.
    pub info: Arc<WorkloadInfo>,
    /// Whether it takes Istio mTLS.
    pub tls_mode: TlsMode,
    /// From the EndpointSlice conditions.
    pub health: Health,
    /// The name of the object it came from (pod, WorkloadEntry, ServiceEntry endpoint), if any: per
    /// pod, so kept here rather than in [`WorkloadInfo`], which a deployment's replicas share.
    pub workload: Option<Arc<str>>,
    /// What kind of object `workload` names: its origin in `/debug/endpointz` and `meshctl explain`.
    pub kind: WorkloadKind,
    /// istiod's `istio.workload` telemetry string ([`super::workload_meta()`]), shared by a
    /// deployment's replicas: built with the endpoint so pushes only copy it. Here rather than in
    /// [`WorkloadInfo`]: a bare pod's is its own, which would make the info per pod.
    pub workload_meta: Arc<str>,
    /// Load-balancing weight (1 unless set).
    pub weight: u32,
}

/// Where an endpoint runs: the same for every endpoint of a cluster, network and locality.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The cluster it runs in.
    pub cluster: ClusterId,
    /// Its network; `None` is the unnamed network, reachable from every network.
    pub network: Option<NetworkId>,
    /// Where it runs.
    pub locality: Locality,
}

impl Placement {
    /// A placement of its own (registries intern theirs instead).
    pub fn new(cluster: ClusterId, network: Option<NetworkId>, locality: Locality) -> Arc<Self> {
        Arc::new(Self {
            cluster,
            network,
            locality,
        })
    }
}

/// What an endpoint's workload shares with its replicas (and with bare pods of the same labels and
/// service account).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WorkloadInfo {
    /// The pod's labels. The topology labels istiod adds (cluster, network, region, zone, subzone)
    /// come from the [`Placement`]: read labels through [`Endpoint::label`].
    pub labels: Labels,
    /// `spiffe://<trust domain>/ns/<ns>/sa/<sa>`, when the pod is known.
    pub service_account: Option<Arc<str>>,
}

impl WorkloadInfo {
    /// Info of its own (registries intern theirs instead).
    pub fn new(labels: Labels, service_account: Option<Arc<str>>) -> Arc<Self> {
        Arc::new(Self {
            labels,
            service_account,
        })
    }
}

impl Endpoint {
    /// The cluster it runs in.
    pub fn cluster(&self) -> &ClusterId {
        &self.placement.cluster
    }

    /// Its network; `None` is the unnamed network, reachable from every network.
    pub fn network(&self) -> &Option<NetworkId> {
        &self.placement.network
    }

    /// Where it runs.
    pub fn locality(&self) -> &Locality {
        &self.placement.locality
    }

    /// The pod's own labels (see [`Endpoint::label`] for istiod's augmented ones).
    pub fn labels(&self) -> &Labels {
        &self.info.labels
    }

    /// `spiffe://<trust domain>/ns/<ns>/sa/<sa>`, when the pod is known.
    pub fn service_account(&self) -> &Option<Arc<str>> {
        &self.info.service_account
    }

    /// The placement to change (its own copy when shared).
    pub fn placement_mut(&mut self) -> &mut Placement {
        Arc::make_mut(&mut self.placement)
    }

    /// The workload info to change (its own copy when shared).
    pub fn info_mut(&mut self) -> &mut WorkloadInfo {
        Arc::make_mut(&mut self.info)
    }

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
        let pod = self.labels().get(key).map(String::as_str);
        let at = &*self.placement;
        match key {
            LABEL_CLUSTER => Some(&at.cluster),
            LABEL_NETWORK => pod.or(at.network.as_deref()),
            LABEL_REGION => non_empty(&at.locality.region),
            LABEL_ZONE => non_empty(&at.locality.zone),
            LABEL_SUBZONE => non_empty(&at.locality.subzone),
            _ => pod,
        }
    }
}

/// Written as when every field was the endpoint's own (`/debug/endpointz`, goldens).
impl Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            address: &'a IpAddr,
            ports: &'a [EndpointPort],
            cluster: &'a ClusterId,
            network: &'a Option<NetworkId>,
            locality: &'a Locality,
            labels: &'a Labels,
            service_account: &'a Option<Arc<str>>,
            tls_mode: TlsMode,
            health: Health,
            workload: &'a Option<Arc<str>>,
            kind: WorkloadKind,
            workload_meta: &'a Arc<str>,
            weight: u32,
        }
        Wire {
            address: &self.address,
            ports: &self.ports,
            cluster: &self.placement.cluster,
            network: &self.placement.network,
            locality: &self.placement.locality,
            labels: &self.info.labels,
            service_account: &self.info.service_account,
            tls_mode: self.tls_mode,
            health: self.health,
            workload: &self.workload,
            kind: self.kind,
            workload_meta: &self.workload_meta,
            weight: self.weight,
        }
        .serialize(s)
    }
}

fn non_empty(s: &Arc<str>) -> Option<&str> {
    Some(&**s).filter(|s| !s.is_empty())
}

/// The kind of object an endpoint came from (its `workload` names it, in the service's namespace).
/// A field of its own rather than beside the name in one struct: it fits in the padding after the
/// address.
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
    fn serializes_as_when_every_field_was_its_own() {
        let ep = Endpoint {
            address: "10.0.0.1".parse().unwrap(),
            ports: Arc::new([EndpointPort {
                service_port_name: "http".into(),
                port: 8080,
            }]),
            placement: Placement::new(
                "c1".into(),
                Some("n1".into()),
                Locality {
                    region: "r".into(),
                    zone: "z".into(),
                    subzone: "".into(),
                },
            ),
            info: WorkloadInfo::new(
                Arc::new([("app".to_owned(), "a".to_owned())].into()),
                Some("spiffe://td/ns/ns/sa/a".into()),
            ),
            tls_mode: TlsMode::Istio,
            health: Health::Draining,
            workload: Some("a-1".into()),
            kind: WorkloadKind::Pod,
            workload_meta: "a;ns;a;;c1".into(),
            weight: 2,
        };
        // The field order and names of the derived form this replaced (`/debug/endpointz` readers).
        let want = r#"{"address":"10.0.0.1","ports":[{"servicePortName":"http","port":8080}],"cluster":"c1","network":"n1","locality":{"region":"r","zone":"z","subzone":""},"labels":{"app":"a"},"serviceAccount":"spiffe://td/ns/ns/sa/a","tlsMode":"istio","health":"Draining","workload":"a-1","kind":"Pod","workloadMeta":"a;ns;a;;c1","weight":2}"#;
        assert_eq!(serde_json::to_string(&ep).unwrap(), want);
    }

    #[test]
    fn endpoint_stays_compact() {
        // 100k endpoints must fit comfortably in memory: what a cluster's or a deployment's endpoints
        // have in common is shared, not owned (176 bytes when it was inline).
        assert_eq!(std::mem::size_of::<Endpoint>(), 88);
    }
}
