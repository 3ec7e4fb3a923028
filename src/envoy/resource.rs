//! The resource types meshd serves and one encoded resource, as generators build it and every stream
//! that sends it shares it.

use std::{
    fmt,
    hash::{BuildHasher, DefaultHasher, Hasher},
    sync::Arc,
};

use bytes::{BufMut, Bytes};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

/// One resource, encoded once and shared (through the cache) by every stream that sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource name the client asked for (or, for wildcard types, its own name).
    pub name: Arc<str>,
    /// A content hash: equal versions mean byte-identical config, so a stream can skip a resend.
    pub version: u64,
    /// The encoded `google.protobuf.Any`, exactly as it goes on the wire: responses reference these
    /// bytes instead of copying them (see `wire`).
    any: Bytes,
    /// Where the message itself starts in `any`.
    value_at: usize,
}

impl Resource {
    /// Encodes `msg`; its version is a hash of the bytes. Only for messages whose encoding is
    /// deterministic (no protobuf map with more than one entry: prost encodes maps in `HashMap` order).
    pub fn encode(ty: XdsType, name: Arc<str>, msg: &impl prost::Message) -> Self {
        let mut r = Self::encode_with_version(ty, name, msg, 0);
        r.version = hash_bytes(r.value());
        r
    }

    /// Encodes `msg` with a version the generator computed from its (deterministic) inputs.
    pub fn encode_with_version(ty: XdsType, name: Arc<str>, msg: &impl prost::Message, version: u64) -> Self {
        let (mut buf, value_at) = any_header(ty, msg.encoded_len());
        msg.encode_raw(&mut buf);
        Self {
            name,
            version,
            any: buf.into(),
            value_at,
        }
    }

    /// A message of `len` bytes that `write` appends (its fields in any order), at version 0.
    pub fn write(ty: XdsType, name: Arc<str>, len: usize, write: impl FnOnce(&mut Vec<u8>)) -> Self {
        let (mut buf, value_at) = any_header(ty, len);
        write(&mut buf);
        debug_assert_eq!(buf.len(), value_at + len, "wrote the length announced");
        Self {
            name,
            version: 0,
            any: buf.into(),
            value_at,
        }
    }

    /// [`Resource::write`] versioned by a fast hash of the bytes, so the writer must be deterministic
    /// (no `HashMap` order).
    pub fn written(ty: XdsType, name: Arc<str>, len: usize, write: impl FnOnce(&mut Vec<u8>)) -> Self {
        let mut r = Self::write(ty, name, len, write);
        r.version = fast_hash(r.value());
        r
    }

    /// A resource from already-encoded message bytes.
    pub fn with_version(ty: XdsType, name: Arc<str>, value: Vec<u8>, version: u64) -> Self {
        let (mut buf, value_at) = any_header(ty, value.len());
        buf.put_slice(&value);
        Self {
            name,
            version,
            any: buf.into(),
            value_at,
        }
    }

    /// An empty resource of `ty` at `version`, for the state machines' tests.
    #[cfg(test)]
    pub(crate) fn empty(ty: XdsType, name: &str, version: u64) -> Arc<Self> {
        Arc::new(Self::with_version(ty, name.into(), vec![], version))
    }

    /// The encoded message (`Any.value`).
    pub fn value(&self) -> &[u8] {
        &self.any[self.value_at..]
    }

    /// The encoded `Any` wrapping it.
    pub fn any(&self) -> &Bytes {
        &self.any
    }

    /// The version as sent in delta `Resource.version` and compared with `initial_resource_versions`.
    pub fn version_string(&self) -> String {
        format!("{:016x}", self.version)
    }
}

/// A buffer sized for an `Any` of `ty` holding `len` bytes, with everything before the value written;
/// and where the value starts.
fn any_header(ty: XdsType, len: usize) -> (Vec<u8>, usize) {
    let url = ty.url();
    let header = key_len(1) + encoded_len_varint(url.len() as u64) + url.len() + key_len(2);
    let header = header + encoded_len_varint(len as u64);
    let mut buf = Vec::with_capacity(header + len);
    encode_key(1, WireType::LengthDelimited, &mut buf);
    encode_varint(url.len() as u64, &mut buf);
    buf.put_slice(url.as_bytes());
    encode_key(2, WireType::LengthDelimited, &mut buf);
    encode_varint(len as u64, &mut buf);
    (buf, header)
}

/// A stable 64-bit hash (SipHash with fixed keys): the same input gives the same version across runs.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// Like [`hash_bytes`], several times faster on long inputs (foldhash with its fixed seed): EDS hashes
/// every assignment it builds.
fn fast_hash(bytes: &[u8]) -> u64 {
    foldhash::fast::FixedState::default().hash_one(bytes)
}

/// `Cluster` (CDS).
pub const CLUSTER_TYPE: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `ClusterLoadAssignment` (EDS).
pub const ENDPOINT_TYPE: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `Listener` (LDS).
pub const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `RouteConfiguration` (RDS).
pub const ROUTE_TYPE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// `Secret` (SDS).
pub const SECRET_TYPE: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

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
    /// SDS: a gateway's `credentialName` certificates (never cached, never in debug output).
    Secret,
}

impl XdsType {
    /// Every type, in push order.
    pub const PUSH_ORDER: [XdsType; 5] = [
        Self::Cluster,
        Self::Endpoint,
        Self::Listener,
        Self::Route,
        Self::Secret,
    ];

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
            Self::Secret => SECRET_TYPE,
        }
    }

    /// The short name used in logs and metric labels (istiod's `v3.GetShortType`).
    pub fn short(self) -> &'static str {
        match self {
            Self::Cluster => "CDS",
            Self::Endpoint => "EDS",
            Self::Listener => "LDS",
            Self::Route => "RDS",
            Self::Secret => "SDS",
        }
    }

    /// istiod's metric label (`v3.GetMetricType`): `cds`, `eds`, `lds`, `rds`, `sds`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Cluster => "cds",
            Self::Endpoint => "eds",
            Self::Listener => "lds",
            Self::Route => "rds",
            Self::Secret => "sds",
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

#[cfg(test)]
mod tests {
    use envoy_types::pb::{envoy::config::cluster::v3::Cluster, google::protobuf::Any};
    use prost::Message;

    use super::*;

    #[test]
    fn any_is_what_prost_encodes() {
        let c = Cluster {
            name: "x".repeat(300),
            ..Default::default()
        };
        let r = Resource::encode(XdsType::Cluster, "x".into(), &c);
        let any = Any {
            type_url: XdsType::Cluster.url().into(),
            value: c.encode_to_vec(),
        };
        assert_eq!(&r.any()[..], &any.encode_to_vec()[..]);
        assert_eq!(r.value(), &any.value[..]);
        assert_eq!(r.version, hash_bytes(&any.value));
        let raw = Resource::with_version(XdsType::Cluster, "x".into(), any.value.clone(), 5);
        assert_eq!((raw.any(), raw.version), (r.any(), 5));
    }

    #[test]
    fn type_urls_round_trip_in_push_order() {
        for t in XdsType::PUSH_ORDER {
            assert_eq!(XdsType::from_url(t.url()), Some(t));
        }
        assert_eq!(
            XdsType::from_url("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"),
            Some(XdsType::Secret)
        );
        assert_eq!(
            XdsType::from_url("type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"),
            None
        );
        assert!(XdsType::Cluster < XdsType::Endpoint && XdsType::Listener < XdsType::Route);
    }
}
