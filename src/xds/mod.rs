//! xDS serving: the Aggregated Discovery Service (state of the world and delta), the per-stream protocol
//! state machines, node metadata, the CDS/EDS/LDS/RDS generators and the push pipeline.
//!
//! Owns: everything between an immutable mesh snapshot and the bytes on an ADS stream.
//! Does NOT: build the snapshot (that is `aggregate`), terminate TLS or decide who may connect (the
//! secure listener and the [`Authenticator`] come from the security side), or compute split-horizon
//! endpoints (plugged in through [`EndpointView`]).
//!
//! Data flow: one [`SnapshotSource`] (the aggregate's debounced snapshots; a fixture's in tests) →
//! every stream task, which wakes on its version channel, loads the newest [`Snapshot`], derives its
//! [`PushScope`] from the snapshot's change set and the version it served last ([`push::scope`]),
//! regenerates what its proxy watches (through the shared [`cache::ResourceCache`]), diffs against
//! what it last sent and answers. There is no debouncer here: the publisher debounces.

pub mod cache;
mod connection;
pub mod debug;
mod delta;
pub mod dump;
pub mod generator;
#[cfg(any(test, feature = "testing"))]
pub mod harness;
pub mod held;
pub mod metrics;
pub mod node;
pub mod push;
mod resource;
pub mod server;
pub mod snapshot;
mod sotw;
pub mod status;
mod wire;

use std::fmt;

pub use generator::{AllEndpoints, EndpointView, NetworkView};
pub use node::{NodeError, Proxy, ProxyKind};
pub use push::{PushScope, Snapshot, SnapshotSource};
pub use resource::{Resource, Subscription};
pub use server::{AdsServer, Caller, XdsLimits};

/// `Cluster` (CDS).
pub const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `ClusterLoadAssignment` (EDS).
pub const ENDPOINT_TYPE: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `Listener` (LDS).
pub const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `RouteConfiguration` (RDS).
pub const ROUTE_TYPE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// The resource types meshd serves, in make-before-break push order (istiod's `PushOrder`):
/// clusters before their endpoints, listeners before their routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum XdsType {
    /// CDS.
    Cluster,
    /// EDS.
    Endpoint,
    /// LDS.
    Listener,
    /// RDS.
    Route,
}

impl XdsType {
    /// Every type, in push order.
    pub const PUSH_ORDER: [XdsType; 4] = [Self::Cluster, Self::Endpoint, Self::Listener, Self::Route];

    /// The type for a request's `type_url`; `None` for types meshd does not serve.
    pub fn from_url(url: &str) -> Option<Self> {
        Self::PUSH_ORDER.into_iter().find(|t| t.url() == url)
    }

    /// The full type URL.
    pub fn url(self) -> &'static str {
        match self {
            Self::Cluster => CLUSTER_TYPE,
            Self::Endpoint => ENDPOINT_TYPE,
            Self::Listener => LISTENER_TYPE,
            Self::Route => ROUTE_TYPE,
        }
    }

    /// The short name used in logs and metric labels (istiod's `v3.GetShortType`).
    pub fn short(self) -> &'static str {
        match self {
            Self::Cluster => "CDS",
            Self::Endpoint => "EDS",
            Self::Listener => "LDS",
            Self::Route => "RDS",
        }
    }

    /// istiod's metric label (`v3.GetMetricType`): `cds`, `eds`, `lds`, `rds`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Cluster => "cds",
            Self::Endpoint => "eds",
            Self::Listener => "lds",
            Self::Route => "rds",
        }
    }

    /// LDS and CDS: may be wildcard-subscribed, and every SotW response carries the whole set (an
    /// omitted resource is deleted). EDS and RDS are only ever named, and omission means nothing.
    pub fn is_full_state(self) -> bool {
        matches!(self, Self::Cluster | Self::Listener)
    }
}

impl fmt::Display for XdsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

/// Why a stream is refused or ended. Mapped to a gRPC status at the edge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The first request had no usable node, or its metadata is malformed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// No mesh snapshot yet: serving now would hand proxies empty config (istio#25495).
    #[error("meshd has no mesh snapshot yet; retry shortly")]
    NotReady,
    /// The new-stream rate limit is exhausted.
    #[error("too many new xDS streams; retry with backoff")]
    RateLimited,
    /// The node claims a namespace or service account its credentials do not carry.
    #[error("node claims {claimed}, but the caller authenticated as {authenticated:?}")]
    IdentityMismatch {
        /// What the node metadata claims (`ns/<ns>/sa/<sa>`).
        claimed: String,
        /// The caller's identities.
        authenticated: Vec<String>,
    },
    /// A request could not be read from the stream.
    #[error("reading the request stream: {0}")]
    Receive(#[source] tonic::Status),
    /// A response would exceed the configured cap (`XdsLimits::max_response_bytes`).
    #[error("the {ty} response is {bytes} bytes, over the {limit} byte limit")]
    ResponseTooLarge {
        /// The resource type.
        ty: XdsType,
        /// Encoded size.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
    /// meshd is shutting down.
    #[error("meshd is shutting down")]
    ShuttingDown,
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        let msg = e.to_string();
        match e {
            Error::Node(_) => tonic::Status::invalid_argument(msg),
            Error::NotReady | Error::ShuttingDown => tonic::Status::unavailable(msg),
            Error::RateLimited => tonic::Status::resource_exhausted(msg),
            Error::IdentityMismatch { .. } => tonic::Status::permission_denied(msg),
            Error::Receive(status) => status,
            Error::ResponseTooLarge { .. } => tonic::Status::out_of_range(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_urls_round_trip_in_push_order() {
        for t in XdsType::PUSH_ORDER {
            assert_eq!(XdsType::from_url(t.url()), Some(t));
        }
        assert_eq!(
            XdsType::from_url("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"),
            None
        );
        assert!(XdsType::Cluster < XdsType::Endpoint && XdsType::Listener < XdsType::Route);
    }

    #[test]
    fn errors_map_to_grpc_codes() {
        let s: tonic::Status = Error::NotReady.into();
        assert_eq!(s.code(), tonic::Code::Unavailable);
        let s: tonic::Status = Error::Node(NodeError::MissingNode).into();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        let s: tonic::Status = Error::RateLimited.into();
        assert_eq!(s.code(), tonic::Code::ResourceExhausted);
    }
}
