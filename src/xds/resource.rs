//! An encoded xDS resource and the subscription it answers; shared by both protocol state machines.

use std::{
    collections::BTreeSet,
    hash::{BuildHasher, DefaultHasher, Hasher},
    sync::{Arc, LazyLock},
};

use bytes::{BufMut, Bytes};
use parking_lot::Mutex;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use super::XdsType;
use crate::intern::Interner;

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

/// Resource names as clients send them, shared by every stream that names them: 1,000 sidecars watching
/// the same 1,000 clusters hold one copy of each name (and so do the cache keys and resources built
/// for them), not 1,000.
pub(crate) fn intern(name: &str) -> Arc<str> {
    static NAMES: LazyLock<Mutex<Interner<str>>> = LazyLock::new(Mutex::default);
    NAMES.lock().get_or_insert(name, |n: &str| Arc::from(n))
}

/// A set of subscribed names, shared by every stream subscribed to exactly that set: sidecars of one
/// mesh without a `Sidecar` scope all watch the same clusters.
pub(crate) fn intern_names(names: &BTreeSet<Arc<str>>) -> Arc<BTreeSet<Arc<str>>> {
    static SETS: LazyLock<Mutex<Interner<BTreeSet<Arc<str>>>>> = LazyLock::new(Mutex::default);
    SETS.lock().get_or_insert(names, |n| Arc::new(n.clone()))
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

#[cfg(test)]
mod tests {
    use envoy_types::pb::{envoy::config::cluster::v3::Cluster, google::protobuf::Any};
    use prost::Message;

    use super::*;

    #[test]
    fn equal_subscriptions_share_one_set() {
        let set = |names: &[&str]| names.iter().map(|n| intern(n)).collect::<BTreeSet<_>>();
        let a = intern_names(&set(&["x", "y"]));
        assert!(Arc::ptr_eq(&a, &intern_names(&set(&["y", "x"]))));
        assert!(!Arc::ptr_eq(&a, &intern_names(&set(&["x"]))));
    }

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
}
