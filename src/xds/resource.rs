//! An encoded xDS resource and the subscription it answers; shared by both protocol state machines.

use std::{
    collections::BTreeSet,
    hash::{DefaultHasher, Hasher},
    sync::Arc,
};

use envoy_types::pb::google::protobuf::Any;

use super::XdsType;

/// One resource, encoded once and shared (through the cache) by every stream that sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource name the client asked for (or, for wildcard types, its own name).
    pub name: Arc<str>,
    /// A content hash: equal versions mean byte-identical config, so a stream can skip a resend.
    pub version: u64,
    /// The encoded message.
    pub body: Any,
}

impl Resource {
    /// Encodes `msg`; its version is a hash of the bytes. Only for messages whose encoding is
    /// deterministic (no protobuf map with more than one entry: prost encodes maps in `HashMap` order).
    pub fn encode(ty: XdsType, name: Arc<str>, msg: &impl prost::Message) -> Self {
        let value = msg.encode_to_vec();
        let version = hash_bytes(&value);
        Self::with_version(ty, name, value, version)
    }

    /// A resource whose version the generator computed from its (deterministic) inputs.
    pub fn with_version(ty: XdsType, name: Arc<str>, value: Vec<u8>, version: u64) -> Self {
        Self {
            name,
            version,
            body: Any {
                type_url: ty.url().to_owned(),
                value,
            },
        }
    }

    /// The version as sent in delta `Resource.version` and compared with `initial_resource_versions`.
    pub fn version_string(&self) -> String {
        format!("{:016x}", self.version)
    }
}

/// A stable 64-bit hash (SipHash with fixed keys): the same input gives the same version across runs.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// What a stream subscribed to for one type.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Subscription {
    /// Every resource of the type (LDS/CDS `*` or the legacy empty first request).
    pub wildcard: bool,
    /// Names asked for explicitly (may include names that do not exist yet). Shared: debug status
    /// and every response build take it by `Arc`; only a subscription change copies it.
    pub names: Arc<BTreeSet<Arc<str>>>,
}

impl Subscription {
    /// The wildcard name.
    pub(crate) const WILDCARD: &'static str = "*";

    /// Whether nothing at all is subscribed.
    pub fn is_empty(&self) -> bool {
        !self.wildcard && self.names.is_empty()
    }
}
