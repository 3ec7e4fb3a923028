//! Encoded resources shared across proxies (istiod's XDS cache).
//!
//! Owns: a map from (type, name, snapshot version, view) to the encoded resource. Proxies that see the
//! same thing (same kind, same network view) get the same `Arc`, so 1,000 sidecars cost one encode.
//! Entries of snapshots older than the previous one are evicted when a newer one is first used; the
//! map is capped. Does NOT: decide what a view is (the generators build the key) or generate anything
//! under its lock.

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

use super::{Resource, XdsType, metrics::Metrics};

/// Default entry cap (istiod's `PILOT_XDS_CACHE_SIZE`).
pub const DEFAULT_CAPACITY: usize = 60_000;

/// What a cached resource depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Resource type.
    pub ty: XdsType,
    /// Resource name.
    pub name: Arc<str>,
    /// Snapshot version it was built from.
    pub version: u64,
    /// Everything else the generator read from the proxy (kind, network view, namespace…).
    pub view: Arc<str>,
}

/// The shared cache. Cheap to clone.
#[derive(Clone)]
pub struct ResourceCache {
    inner: Arc<Mutex<Inner>>,
    capacity: usize,
    metrics: Option<Metrics>,
}

#[derive(Default)]
struct Inner {
    newest: u64,
    /// `None` caches "no such resource" too: a name asked for by many proxies is resolved once.
    entries: HashMap<CacheKey, Option<Arc<Resource>>>,
}

impl ResourceCache {
    /// An empty cache holding at most `capacity` entries (0 disables caching).
    pub fn new(capacity: usize, metrics: Option<Metrics>) -> Self {
        Self {
            inner: Arc::default(),
            capacity,
            metrics,
        }
    }

    /// The cached resource for `key`, or `build()`'s (built outside the lock, then shared).
    pub fn get_or_insert(
        &self,
        key: CacheKey,
        build: impl FnOnce() -> Option<Resource>,
    ) -> Option<Arc<Resource>> {
        if let Some(hit) = self.inner.lock().entries.get(&key) {
            if let Some(m) = &self.metrics {
                m.cache_hit();
            }
            return hit.clone();
        }
        if let Some(m) = &self.metrics {
            m.cache_miss();
        }
        let built = build().map(Arc::new);
        if self.capacity == 0 {
            return built;
        }
        let mut inner = self.inner.lock();
        if key.version > inner.newest {
            let keep_from = inner.newest;
            inner.newest = key.version;
            inner.entries.retain(|k, _| k.version >= keep_from);
        }
        if key.version + 1 >= inner.newest && inner.entries.len() < self.capacity {
            // Another stream may have raced us here; keep the first so everyone shares one `Arc`.
            return inner.entries.entry(key).or_insert(built).clone();
        }
        built
    }

    /// Number of entries (for debug and tests).
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, version: u64) -> CacheKey {
        CacheKey {
            ty: XdsType::Cluster,
            name: name.into(),
            version,
            view: "grpc".into(),
        }
    }

    fn build(name: &str) -> Option<Resource> {
        Some(Resource::with_version(XdsType::Cluster, name.into(), vec![1], 1))
    }

    #[test]
    fn shares_one_encode_and_evicts_old_versions() {
        let c = ResourceCache::new(10, None);
        let a = c.get_or_insert(key("a", 1), || build("a")).unwrap();
        let b = c.get_or_insert(key("a", 1), || panic!("must hit")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        c.get_or_insert(key("a", 2), || build("a"));
        assert_eq!(c.len(), 2, "the previous version stays for lagging streams");
        c.get_or_insert(key("a", 3), || build("a"));
        assert_eq!(c.len(), 2, "version 1 evicted");
    }

    #[test]
    fn caches_absence_and_respects_capacity() {
        let c = ResourceCache::new(1, None);
        assert!(c.get_or_insert(key("missing", 1), || None).is_none());
        assert!(
            c.get_or_insert(key("missing", 1), || panic!("absence is cached"))
                .is_none()
        );
        assert!(c.get_or_insert(key("b", 1), || build("b")).is_some());
        assert_eq!(c.len(), 1);
    }
}
