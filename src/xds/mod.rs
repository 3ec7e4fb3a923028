//! xDS serving, the protocol: the Aggregated Discovery Service (state of the world and delta), the
//! per-stream protocol state machines, the shared resource cache and the push pipeline.
//!
//! Owns: everything between an immutable mesh snapshot and the bytes on an ADS stream except what the
//! bytes say. Does NOT: build the snapshot (that is `aggregate`), decide what a proxy is sent (that is
//! `envoy`, called through [`generate`]), or terminate TLS and decide who may connect (the secure
//! listener and the [`Authenticator`](server::Authenticator) come from the security side).
//!
//! Data flow: one [`SnapshotSource`] (the aggregate's debounced snapshots; a fixture's in tests) →
//! every stream (polled by hyper in its response body), which wakes on its version channel, loads the newest [`Snapshot`], derives its
//! [`PushScope`] from the snapshot's change set and the version it served last ([`push::scope`]),
//! regenerates what its proxy watches (`envoy`'s builds through the shared [`cache::ResourceCache`]),
//! diffs against what it last sent and answers. There is no debouncer here: the publisher debounces.

pub mod cache;
mod connection;
pub mod debug;
mod delta;
pub mod dump;
pub mod generate;
#[cfg(any(test, feature = "testing"))]
pub mod harness;
pub mod held;
pub mod metrics;
mod protocol;
pub mod push;
mod secrets;
pub mod server;
mod shared;
pub mod snapshot;
mod sotw;
pub mod status;
mod subscription;
mod wire;
mod woken;

pub use push::{PushScope, Snapshot, SnapshotSource};
pub use secrets::{SecretRequest, SecretSource};
pub use server::AdsServer;
pub use shared::{Caller, XdsLimits};
pub use subscription::Subscription;

pub use crate::envoy::{
    AllEndpoints, CLUSTER_TYPE, ENDPOINT_TYPE, EndpointView, LISTENER_TYPE, NetworkView, NodeError, Proxy,
    ProxyKind, ROUTE_TYPE, Resource, XdsType,
};

/// Why a stream is refused or ended. Mapped to a gRPC status at the edge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The first request had no usable node, or its metadata is malformed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// meshd is not ready (no mesh snapshot yet, or its clusters still syncing): serving now would hand
    /// proxies empty or partial config (istio#25495).
    #[error("meshd is not ready to serve discovery information yet; retry shortly")]
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
    fn errors_map_to_grpc_codes() {
        let s: tonic::Status = Error::NotReady.into();
        assert_eq!(s.code(), tonic::Code::Unavailable);
        let s: tonic::Status = Error::Node(NodeError::MissingNode).into();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        let s: tonic::Status = Error::RateLimited.into();
        assert_eq!(s.code(), tonic::Code::ResourceExhausted);
    }
}
