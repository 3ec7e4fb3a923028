//! A service as the mesh sees it: one per host name, with per-cluster addresses.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use serde::Serialize;

use super::{ClusterId, Hostname, ServiceKey};

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
    pub cluster_vips: BTreeMap<ClusterId, Vec<IpAddr>>,
    /// LoadBalancer ingress addresses and `externalIPs` per cluster.
    pub external_addresses: BTreeMap<ClusterId, Vec<ExternalAddress>>,
    /// Service port → node port, per cluster (only for services selecting gateway nodes).
    pub node_ports: BTreeMap<ClusterId, BTreeMap<u16, u16>>,
    /// The service's own labels.
    pub labels: Labels,
    /// SPIFFE identities declared by annotation (endpoint identities are in the endpoint shards).
    pub service_accounts: BTreeSet<Arc<str>>,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub creation_time: Option<Arc<str>>,
    /// How clients reach the endpoints.
    pub resolution: Resolution,
}

impl Service {
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
    /// Whether the proxy terminates it as HTTP.
    pub fn is_http(self) -> bool {
        matches!(self, Self::Http | Self::Http2 | Self::Grpc | Self::GrpcWeb)
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

/// How clients reach a service's endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Resolution {
    /// Load-balanced over the endpoints (the usual ClusterIP service).
    ClientSideLb,
    /// Headless: the client's chosen address is used as is.
    Passthrough,
    /// `ExternalName`: an alias for this DNS name.
    Alias(Arc<str>),
}
