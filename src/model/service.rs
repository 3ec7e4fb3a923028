//! A service as the mesh sees it: one per host name, with per-cluster addresses.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use serde::Serialize;

use super::{Hostname, PerCluster, Provider, ServiceKey};

/// Labels shared between the objects that carry them.
pub type Labels = Arc<BTreeMap<String, String>>;

/// A service. A registry produces one with only its own cluster in the per-cluster maps; the aggregate
/// merges them: attributes from the first cluster (primary first), addresses from every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// `name.namespace.svc.<domain suffix>`.
    pub hostname: Hostname,
    /// Kubernetes namespace.
    pub namespace: Arc<str>,
    /// Kubernetes name.
    pub name: Arc<str>,
    /// Ports in declaration order.
    pub ports: Vec<ServicePort>,
    /// ClusterIPs per cluster (empty for headless services).
    #[serde(rename = "clusterVIPs")]
    pub cluster_vips: PerCluster<Vec<IpAddr>>,
    /// LoadBalancer ingress addresses and `externalIPs` per cluster.
    pub external_addresses: PerCluster<Vec<ExternalAddress>>,
    /// Service port → node port, per cluster (only for services selecting gateway nodes).
    pub node_ports: PerCluster<BTreeMap<u16, u16>>,
    /// The service's own labels.
    pub labels: Labels,
    /// SPIFFE identities declared by annotation (endpoint identities are in the endpoint shards).
    pub service_accounts: BTreeSet<Arc<str>>,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub creation_time: Option<Arc<str>>,
    /// How clients reach the endpoints.
    pub resolution: Resolution,
    /// Which registry made it (`/debug/registryz` shows it; a Kubernetes Service wins a host clash).
    pub origin: Origin,
    /// `location: MESH_EXTERNAL` of a ServiceEntry: outside the mesh, so never Istio mTLS.
    pub mesh_external: bool,
    /// Namespaces that may see it (`exportTo`, or the Kubernetes annotation), filtered by #19.
    pub export_to: ExportTo,
    /// The labels its workloads carry: a Kubernetes Service's `spec.selector` (WorkloadEntries it
    /// selects become its endpoints), a ServiceEntry's `workloadSelector`. `None` selects nothing.
    pub selector: Option<Labels>,
}

impl Service {
    /// The registry (endpoint shard provider) it belongs to.
    pub fn provider(&self) -> Provider {
        match self.origin {
            Origin::Kubernetes => Provider::Kubernetes,
            Origin::ServiceEntry { .. } => Provider::External,
        }
    }

    /// The shard-index key of this service.
    pub fn key(&self) -> ServiceKey {
        ServiceKey {
            hostname: self.hostname.clone(),
            namespace: self.namespace.clone(),
        }
    }

    /// The port named `name`, if any.
    pub fn port_by_name(&self, name: &str) -> Option<&ServicePort> {
        self.ports.iter().find(|p| &*p.name == name)
    }
}

/// One port of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Port name (may be empty for a single-port service); EDS matches endpoints by it.
    pub name: Arc<str>,
    /// The service port number.
    pub port: u16,
    /// Application protocol.
    pub protocol: Protocol,
    /// Where the endpoints listen, when the service says.
    pub target_port: Option<TargetPort>,
}

/// A service's `targetPort`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum TargetPort {
    /// A port number.
    Number(u16),
    /// A named container port.
    Name(Arc<str>),
}

/// Application protocol of a port, from `appProtocol` or the port-name prefix (Istio's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Protocol {
    /// HTTP/1.1.
    #[serde(rename = "HTTP")]
    Http,
    /// HTTP/2 (h2c).
    #[serde(rename = "HTTP2")]
    Http2,
    /// gRPC.
    #[serde(rename = "GRPC")]
    Grpc,
    /// gRPC-Web.
    #[serde(rename = "GRPC-Web")]
    GrpcWeb,
    /// HTTPS (TLS, not terminated by the mesh).
    #[serde(rename = "HTTPS")]
    Https,
    /// Opaque TLS.
    #[serde(rename = "TLS")]
    Tls,
    /// Opaque TCP.
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP (not proxied).
    #[serde(rename = "UDP")]
    Udp,
    /// MongoDB.
    Mongo,
    /// Redis.
    Redis,
    /// MySQL.
    #[serde(rename = "MySQL")]
    Mysql,
    /// Not declared: the proxy sniffs it.
    #[serde(rename = "UnsupportedProtocol")]
    Unknown,
}

impl Protocol {
    /// A protocol name as Istio spells it (`HTTP`, `http2`, `tcp`…, any case; istiod's
    /// `protocol.Parse`); unknown names are [`Protocol::Unknown`].
    pub fn from_name(s: &str) -> Self {
        match s.to_ascii_lowercase().as_str() {
            "http" => Self::Http,
            "http2" | "h2c" => Self::Http2,
            "grpc" => Self::Grpc,
            "grpc-web" => Self::GrpcWeb,
            "https" => Self::Https,
            "tls" => Self::Tls,
            "tcp" => Self::Tcp,
            "udp" => Self::Udp,
            "mongo" => Self::Mongo,
            "redis" => Self::Redis,
            "mysql" => Self::Mysql,
            _ => Self::Unknown,
        }
    }

    /// Whether the proxy terminates it as HTTP.
    pub fn is_http(self) -> bool {
        matches!(self, Self::Http | Self::Http2 | Self::Grpc | Self::GrpcWeb)
    }

    /// Whether it is HTTP/2 on the wire (Istio's `IsHTTP2`): an Envoy upstream speaks HTTP/2 to it.
    pub fn is_http2(self) -> bool {
        matches!(self, Self::Http2 | Self::Grpc | Self::GrpcWeb)
    }
}

/// An address reaching the service from outside its cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum ExternalAddress {
    /// An IP address.
    Ip(IpAddr),
    /// A DNS name (e.g. a cloud load balancer's host name); not resolved here.
    Hostname(Arc<str>),
}

/// How clients reach a service's endpoints (istiod's `model.Resolution`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Load-balanced over the endpoints (the usual ClusterIP service; ServiceEntry `STATIC`).
    ClientSideLb,
    /// Headless, ServiceEntry `NONE`: the client's chosen address is used as is.
    Passthrough,
    /// `ExternalName`: an alias for this DNS name.
    Alias(Arc<str>),
    /// ServiceEntry `DNS`: the proxy resolves these names (beside the IP endpoints) and uses every
    /// address.
    Dns(DnsTargets),
    /// ServiceEntry `DNS_ROUND_ROBIN`: the proxy resolves and uses one address per connection.
    DnsRoundRobin(DnsTargets),
}

/// The DNS names a `DNS` / `DNS_ROUND_ROBIN` ServiceEntry's proxies resolve: its host when it lists
/// no endpoints and selects no workloads, else its endpoints whose address is a name (istiod's
/// `convertServiceEntryToInstances`; IP endpoints are ordinary [`super::Endpoint`]s).
pub type DnsTargets = Arc<[DnsTarget]>;

/// One name to resolve, with its port per service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsTarget {
    /// The DNS name.
    pub address: Arc<str>,
    /// Port per service port name.
    pub ports: Arc<[super::EndpointPort]>,
    /// The endpoint's locality (empty for the host itself).
    pub locality: super::Locality,
    /// Load-balancing weight (at least 1).
    pub weight: u32,
}

impl Resolution {
    /// The DNS names proxies resolve; empty unless `DNS` / `DNS_ROUND_ROBIN`.
    pub fn dns_targets(&self) -> &[DnsTarget] {
        match self {
            Self::Dns(t) | Self::DnsRoundRobin(t) => t,
            _ => &[],
        }
    }
}

/// Written as before DNS names were kept (`"Dns"`, `{"Alias": name}`): registryz readers match on
/// the variant name, and the names are the endpoints' business.
impl Serialize for Resolution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const NAME: &str = "Resolution";
        match self {
            Self::ClientSideLb => s.serialize_unit_variant(NAME, 0, "ClientSideLb"),
            Self::Passthrough => s.serialize_unit_variant(NAME, 1, "Passthrough"),
            Self::Alias(name) => s.serialize_newtype_variant(NAME, 2, "Alias", name),
            Self::Dns(_) => s.serialize_unit_variant(NAME, 3, "Dns"),
            Self::DnsRoundRobin(_) => s.serialize_unit_variant(NAME, 4, "DnsRoundRobin"),
        }
    }
}

/// The registry a service came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "registry")]
pub enum Origin {
    /// A Kubernetes Service (name and namespace are the service's).
    Kubernetes,
    /// ServiceEntries of one namespace declaring this host (several merge their ports), oldest first.
    ServiceEntry {
        /// Their namespace.
        namespace: Arc<str>,
        /// Their names.
        names: Vec<Arc<str>>,
    },
}

/// Namespaces a service is exported to, with istiod's precedence (`initServiceRegistry`): `*` makes it
/// public whatever else is listed, else `~` hides it, else the named namespaces (`.` is its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub enum ExportTo {
    /// Not set: MeshConfig's `defaultServiceExportTo` applies.
    #[default]
    Default,
    /// `*`.
    Public,
    /// `~`: visible nowhere.
    Hidden,
    /// These namespaces only.
    Namespaces(BTreeSet<Arc<str>>),
}

impl ExportTo {
    /// From `exportTo` values of an object in `namespace`.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>, namespace: &str) -> Self {
        let mut names = BTreeSet::new();
        let mut hidden = false;
        let mut any = false;
        for v in values {
            any = true;
            match v.trim() {
                "*" => return Self::Public,
                "~" => hidden = true,
                "." => {
                    names.insert(Arc::from(namespace));
                }
                "" => {}
                ns => {
                    names.insert(Arc::from(ns));
                }
            }
        }
        match (any, hidden) {
            (false, _) => Self::Default,
            (true, true) => Self::Hidden,
            (true, false) => Self::Namespaces(names),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_to_follows_istiods_precedence() {
        let ns = |v: &[&str]| ExportTo::Namespaces(v.iter().map(|s| Arc::from(*s)).collect());
        let cases: [(&[&str], ExportTo); 6] = [
            (&[], ExportTo::Default),
            (&["*"], ExportTo::Public),
            (&["~", "*"], ExportTo::Public),
            (&["~", "other"], ExportTo::Hidden),
            (&["."], ns(&["own"])),
            (&[".", "other", "own"], ns(&["other", "own"])),
        ];
        for (values, want) in cases {
            assert_eq!(ExportTo::parse(values.iter().copied(), "own"), want, "{values:?}");
        }
    }
}
