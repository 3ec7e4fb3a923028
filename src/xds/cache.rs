//! Encoded resources shared across proxies (istiod's XDS cache).
//!
//! Owns: a map from (type, name, view) to the encoded resource and the range of snapshot versions it
//! is valid for. Proxies that see the same thing (same kind, same network view) get the same `Arc`,
//! so 1,000 sidecars cost one encode. When a push names what changed ([`PushScope::Endpoints`]),
//! [`ResourceCache::advance`] carries every other entry forward to the new version, so a stream that
//! missed pushes and recomputes everything re-encodes only what really changed. Entries no longer
//! valid for the newest or the previous version are evicted; the map is capped. Does NOT: decide what
//! a view is (the generators build the key) or generate anything under its lock.

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

use crate::istio::Kind;

use super::{
    metrics::Metrics,
    push::{PushScope, Snapshot, scope},
};
use crate::envoy::{Resource, XdsType, cds::ClusterRef, pod_listeners, virtual_inbound};

/// Default entry cap (istiod's `PILOT_XDS_CACHE_SIZE`).
pub const DEFAULT_CAPACITY: usize = 60_000;

/// What a cached resource depends on besides the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Resource type.
    pub ty: XdsType,
    /// Resource name.
    pub name: Arc<str>,
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
    /// foldhash: every lookup hashes a resource name; SipHash was most of a cache hit's cost.
    entries: HashMap<CacheKey, Entry, foldhash::fast::RandomState>,
}

/// A resource (`None` caches "no such resource" too: a name asked for by many proxies is resolved
/// once) and the snapshot versions `from..=to` it is right for.
struct Entry {
    from: u64,
    to: u64,
    resource: Option<Arc<Resource>>,
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

    /// The resource for `key` at snapshot `version`: cached, or `build()`'s (built outside the lock,
    /// then shared).
    pub fn get_or_insert(
        &self,
        key: CacheKey,
        version: u64,
        build: impl FnOnce() -> Option<Resource>,
    ) -> Option<Arc<Resource>> {
        if let Some(e) = self.inner.lock().entries.get(&key)
            && (e.from..=e.to).contains(&version)
        {
            if let Some(m) = &self.metrics {
                m.cache_hit();
            }
            return e.resource.clone();
        }
        if let Some(m) = &self.metrics {
            m.cache_miss();
        }
        let built = build().map(Arc::new);
        if self.capacity == 0 {
            return built;
        }
        let mut inner = self.inner.lock();
        if version > inner.newest {
            inner.evict_before(version);
        }
        if version + 1 < inner.newest || inner.entries.len() >= self.capacity {
            return built;
        }
        match inner.entries.get_mut(&key) {
            // Another stream raced us here; keep the first so everyone shares one `Arc`.
            Some(e) if (e.from..=e.to).contains(&version) => e.resource.clone(),
            Some(e) if e.to > version => built,
            slot => {
                let entry = Entry {
                    from: version,
                    to: version,
                    resource: built.clone(),
                };
                match slot {
                    Some(e) => *e = entry,
                    None => {
                        inner.entries.insert(key, entry);
                    }
                }
                built
            }
        }
    }

    /// Moves the cache to `snapshot`. When it follows the newest version the cache knows and names
    /// what changed, every entry it does not touch stays valid: with endpoints only, everything but
    /// those services' EDS and clusters and sidecars' inbound listeners and clusters (and every listener when one
    /// of them is a passthrough service: its endpoints are listeners); with services and Istio
    /// objects, the clusters and endpoints of other hosts (listeners and routes are rebuilt once).
    /// Idempotent: every stream calls it, the first does the work (and is the only one to build the
    /// scope).
    pub fn advance(&self, snapshot: &dyn Snapshot) {
        if self.capacity == 0 {
            return;
        }
        let version = snapshot.mesh().version();
        let mut inner = self.inner.lock();
        if version <= inner.newest {
            return;
        }
        let base = inner.newest;
        let keep: Box<dyn Fn(&CacheKey) -> bool> = match scope(snapshot, Some(base)) {
            PushScope::Full => Box::new(|_| false),
            PushScope::Endpoints(hosts) => {
                // A passthrough service's endpoints are sidecar listeners too.
                let mesh = snapshot.mesh();
                let listeners = hosts
                    .iter()
                    .any(|h| mesh.service(h).is_some_and(pod_listeners::follows_endpoints));
                Box::new(move |key| match key.ty {
                    XdsType::Endpoint => {
                        ClusterRef::parse(&key.name).is_some_and(|c| !hosts.contains(c.hostname()))
                    }
                    // A cluster reads its service's endpoints too (identities, a passthrough cluster's mTLS).
                    XdsType::Cluster
                        if ClusterRef::parse(&key.name).is_some_and(|c| hosts.contains(c.hostname())) =>
                    {
                        false
                    }
                    XdsType::Listener if listeners => false,
                    // A sidecar's inbound side follows which endpoints are its own.
                    _ => !virtual_inbound::per_proxy(&key.name),
                })
            }
            // A PeerAuthentication can change any cluster's mTLS.
            PushScope::Partial(c) if c.objects.keys().any(|o| o.kind == Kind::PeerAuthentication) => {
                Box::new(|_| false)
            }
            PushScope::Partial(c) => Box::new(move |key| {
                matches!(key.ty, XdsType::Cluster | XdsType::Endpoint)
                    && ClusterRef::parse(&key.name).is_some_and(|r| !c.touches(r.hostname()))
            }),
        };
        for (key, e) in inner.entries.iter_mut().filter(|(_, e)| e.to == base) {
            if keep(key) {
                e.to = version;
            }
        }
        inner.evict_before(version);
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

impl Inner {
    /// `version` is the newest now: keep what is valid for it or the one before (lagging streams).
    fn evict_before(&mut self, version: u64) {
        self.newest = version;
        self.entries.retain(|_, e| e.to + 1 >= version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{envoy::StaticMesh, xds::push::StaticSnapshot};

    fn key(name: &str) -> CacheKey {
        CacheKey {
            ty: XdsType::Cluster,
            name: name.into(),
            view: "grpc".into(),
        }
    }

    fn build(name: &str) -> Option<Resource> {
        Some(Resource::with_version(XdsType::Cluster, name.into(), vec![1], 1))
    }

    fn eds(host: &str) -> CacheKey {
        CacheKey {
            ty: XdsType::Endpoint,
            name: format!("outbound|80||{host}").into(),
            view: "|".into(),
        }
    }

    #[test]
    fn shares_one_encode_and_evicts_old_versions() {
        let c = ResourceCache::new(10, None);
        let a = c.get_or_insert(key("a"), 1, || build("a")).unwrap();
        let b = c.get_or_insert(key("a"), 1, || panic!("must hit")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let a2 = c.get_or_insert(key("a"), 2, || build("a")).unwrap();
        assert!(!Arc::ptr_eq(&a, &a2), "a full push rebuilds");
        c.get_or_insert(key("b"), 2, || build("b"));
        c.get_or_insert(key("c"), 4, || build("c"));
        assert_eq!(c.len(), 1, "entries older than the previous version are evicted");
    }

    #[test]
    fn endpoint_pushes_carry_everything_else_forward() {
        let c = ResourceCache::new(10, None);
        let eds_only = |version, since| {
            StaticSnapshot::after(
                since,
                PushScope::Endpoints(["a".into()].into()),
                StaticMesh::new(version),
            )
        };
        c.get_or_insert(eds("a"), 1, || build("a"));
        let b = c.get_or_insert(eds("b"), 1, || build("b")).unwrap();
        let cds = c.get_or_insert(key("outbound|80||b"), 1, || build("b")).unwrap();
        c.get_or_insert(key("outbound|80||a"), 1, || build("a"));
        c.advance(&eds_only(2, 1));
        let b2 = c
            .get_or_insert(eds("b"), 2, || panic!("b did not change"))
            .unwrap();
        assert!(Arc::ptr_eq(&b, &b2));
        let cds2 = c
            .get_or_insert(key("outbound|80||b"), 2, || panic!("b's cluster did not change"))
            .unwrap();
        assert!(Arc::ptr_eq(&cds, &cds2));
        // a's cluster reads a's endpoints (identities; a passthrough cluster's mTLS).
        let mut rebuilt = false;
        c.get_or_insert(key("outbound|80||a"), 2, || {
            rebuilt = true;
            build("a")
        });
        assert!(rebuilt, "a's cluster follows its endpoints");
        let mut rebuilt = false;
        c.get_or_insert(eds("a"), 2, || {
            rebuilt = true;
            build("a")
        });
        assert!(rebuilt, "a's endpoints changed");
        c.advance(&eds_only(2, 1));
        c.advance(&eds_only(4, 3));
        assert!(c.is_empty(), "a missed push carries nothing forward");
        c.get_or_insert(eds("b"), 4, || build("b"));
        c.advance(&StaticSnapshot::after(4, PushScope::Full, StaticMesh::new(5)));
        let mut rebuilt = false;
        c.get_or_insert(eds("b"), 5, || {
            rebuilt = true;
            build("b")
        });
        assert!(rebuilt, "a full push carries nothing forward");
    }

    /// A headless service's endpoints are sidecar listeners (`<pod IP>_<port>`): their change rebuilds
    /// listeners; any other service's endpoint change keeps them.
    #[test]
    fn endpoint_pushes_of_a_passthrough_service_rebuild_listeners() {
        use crate::{
            envoy::static_mesh::service,
            model::{Protocol, Resolution},
        };
        let db = crate::model::Service {
            resolution: Resolution::Passthrough,
            ..service("db", "data", &[("tcp", 5432, Protocol::Tcp)])
        };
        let web = service("web", "data", &[("tcp", 80, Protocol::Tcp)]);
        let (db_host, web_host) = (db.hostname.clone(), web.hostname.clone());
        let mesh = StaticMesh::new(2).with(db, vec![]).with(web, vec![]);
        let listener = CacheKey {
            ty: XdsType::Listener,
            name: "10.1.0.10_5432".into(),
            view: "sidecar".into(),
        };
        for (host, kept) in [(web_host, true), (db_host, false)] {
            let c = ResourceCache::new(10, None);
            c.get_or_insert(listener.clone(), 1, || build("l"));
            let changes = PushScope::Endpoints([host.clone()].into());
            c.advance(&StaticSnapshot::after(1, changes, mesh.clone()));
            let mut hit = true;
            c.get_or_insert(listener.clone(), 2, || {
                hit = false;
                build("l")
            });
            assert_eq!(hit, kept, "endpoints of {host}");
        }
    }

    #[test]
    fn partial_pushes_carry_clusters_of_untouched_hosts_forward() {
        use crate::{istio::ObjectRef, traffic::hosts::HostPattern, xds::push::Changes};
        let lds = CacheKey {
            ty: XdsType::Listener,
            name: "virtualOutbound".into(),
            view: "sidecar".into(),
        };
        let partial = |objects: Vec<(Kind, &str)>| {
            let changes = Changes {
                services: ["a".into()].into(),
                objects: objects
                    .into_iter()
                    .map(|(kind, host)| (ObjectRef::new(kind, "ns", "x"), vec![HostPattern::parse(host)]))
                    .collect(),
                ..Changes::default()
            };
            PushScope::Partial(Arc::new(changes))
        };
        // (what changed, keys kept from version 1 to 2)
        let cases = [
            (partial(vec![]), vec!["b", "c"]),
            (partial(vec![(Kind::DestinationRule, "*.c")]), vec!["b"]),
            (partial(vec![(Kind::VirtualService, "b")]), vec!["c"]),
            (partial(vec![(Kind::PeerAuthentication, "")]), vec![]),
        ];
        for (changes, kept) in cases {
            let c = ResourceCache::new(10, None);
            for host in ["a", "b", "x.c"] {
                c.get_or_insert(eds(host), 1, || build(host));
                c.get_or_insert(key(&format!("outbound|80||{host}")), 1, || build(host));
            }
            c.get_or_insert(lds.clone(), 1, || build("l"));
            c.advance(&StaticSnapshot::after(1, changes.clone(), StaticMesh::new(2)));
            let mut got = vec![];
            for (host, label) in [("a", "a"), ("b", "b"), ("x.c", "c")] {
                let (mut e, mut k) = (true, true);
                c.get_or_insert(eds(host), 2, || {
                    e = false;
                    build(host)
                });
                c.get_or_insert(key(&format!("outbound|80||{host}")), 2, || {
                    k = false;
                    build(host)
                });
                assert_eq!(e, k, "{changes:?}: EDS and CDS of {host} alike");
                if e {
                    got.push(label);
                }
            }
            assert_eq!(got, kept, "{changes:?}");
            let mut listener = true;
            c.get_or_insert(lds.clone(), 2, || {
                listener = false;
                build("l")
            });
            assert!(!listener, "listeners are rebuilt once");
        }
    }

    #[test]
    fn caches_absence_and_respects_capacity() {
        let c = ResourceCache::new(1, None);
        assert!(c.get_or_insert(key("missing"), 1, || None).is_none());
        assert!(
            c.get_or_insert(key("missing"), 1, || panic!("absence is cached"))
                .is_none()
        );
        assert!(c.get_or_insert(key("b"), 1, || build("b")).is_some());
        assert_eq!(c.len(), 1);
    }
}
