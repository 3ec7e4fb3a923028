//! The mesh's domain model, free of Kubernetes and of protobuf: what registries produce, the aggregate
//! merges, and xDS generators read. Nothing here does I/O.
//!
//! Identifiers are `Arc<str>` newtypes so the many endpoints of a cluster share their strings.

mod endpoint;
mod gateway;
mod ids;
mod per_cluster;
mod service;
mod stale;
mod workload_meta;

pub use endpoint::{
    Endpoint, EndpointPort, Health, Locality, Placement, TlsMode, WorkloadInfo, WorkloadKind,
};
pub use gateway::NetworkGateway;
pub use ids::{ClusterId, Hostname, NetworkId, Provider, ServiceKey, ShardKey, is_dns1123_label};
pub use per_cluster::PerCluster;
pub use service::{
    DnsTarget, DnsTargets, ExportTo, ExternalAddress, Labels, Origin, Protocol, Resolution, Service,
    ServicePort, TargetPort,
};
pub use stale::{StaleAction, UnknownStaleAction};
pub use workload_meta::workload_meta;

/// meshd's own cluster ID when `--cluster-id` is not given: istiod's default `CLUSTER_ID`.
pub const DEFAULT_CLUSTER_ID: &str = "Kubernetes";

/// Pod and namespace label naming an endpoint's network.
pub const LABEL_NETWORK: &str = "topology.istio.io/network";
/// Endpoint label naming its cluster.
pub const LABEL_CLUSTER: &str = "topology.istio.io/cluster";
/// Pod label overriding locality, `region.zone.subzone`.
pub const LABEL_LOCALITY: &str = "topology.istio.io/locality";
/// Node/endpoint label for the subzone.
pub const LABEL_SUBZONE: &str = "topology.istio.io/subzone";
/// Node/endpoint label for the region.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Node/endpoint label for the zone.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Pod label saying whether it takes Istio mTLS.
pub const LABEL_TLS_MODE: &str = "security.istio.io/tlsMode";
