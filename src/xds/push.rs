//! What ADS streams follow and how pushes are bounded.
//!
//! Owns: the [`Snapshot`] a stream serves and the [`SnapshotSource`] it follows (one writer publishes,
//! every stream loads the newest: a slow stream skips straight to it, so there is one pending push per
//! connection, coalesced by construction), the [`PushScope`] a stream derives from a snapshot's change
//! set, which of those changes a proxy's Sidecar scope makes it need ([`decide`], istiod's
//! `proxy_dependencies.go`), the concurrent-push bound and the new-stream rate limit. Does NOT:
//! debounce (the publisher does; the aggregate with `--debounce-after` / `--debounce-max`) or decide
//! per resource what to send (the stream task diffs against what it sent).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};

use super::{ProxyKind, generator::Mesh};
use crate::{
    istio::{Kind, ObjectRef},
    model::Hostname,
    traffic::{SidecarScope, hosts::HostPattern},
};

/// What a stream must regenerate for a new snapshot (not to be confused with the aggregate's
/// per-service [`crate::aggregate::ChangeKind`], from which it is derived).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PushScope {
    /// Anything may have changed: regenerate every type.
    #[default]
    Full,
    /// Only these services' endpoints changed: push EDS, only for their clusters. Publishers must say
    /// [`PushScope::Full`] instead when an endpoint change alters what CDS reads (the set of endpoint
    /// identities or mTLS modes of a service), as istiod does for service-account changes.
    Endpoints(BTreeSet<Hostname>),
    /// Services or Istio objects changed, nothing mesh-wide: each stream works out from its Sidecar
    /// scope what it needs ([`decide`]).
    Partial(Arc<Changes>),
}

/// What a snapshot changed, for streams to match against their scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Services whose endpoints alone changed.
    pub endpoints: BTreeSet<Hostname>,
    /// Services added, removed or changed beyond their endpoints.
    pub services: BTreeSet<Hostname>,
    /// Istio objects whose version in force changed, with the hosts their old and new versions name
    /// (short names resolved in the object's namespace).
    pub objects: BTreeMap<ObjectRef, Vec<HostPattern>>,
}

impl Changes {
    /// Every host a change names: cached clusters of other hosts stay valid.
    pub fn touches(&self, host: &str) -> bool {
        self.endpoints.contains(host)
            || self.services.contains(host)
            || self.objects.values().flatten().any(|p| p.matches(host))
    }
}

/// What one stream sends for a snapshot (istiod's `DefaultProxyNeedsPush` and `checkProxyDependencies`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// Nothing the proxy sees changed: no generation, no response, not counted as a push.
    None,
    /// EDS for these hosts' clusters only.
    Endpoints(BTreeSet<Hostname>),
    /// Every type (the per-resource diff still sends only what changed).
    Full,
}

/// Who is pushed: what [`decide`] reads from a proxy besides its scopes.
#[derive(Debug, Clone, Copy)]
pub struct Recipient<'a> {
    /// The proxy's kind (gateways follow Gateway objects, not Sidecars).
    pub kind: ProxyKind,
    /// Its namespace.
    pub namespace: &'a str,
    /// MeshConfig's root namespace.
    pub root: &'a str,
}

/// What `changes` makes a proxy need, given its scope before (`old`) and after (`new`) them: a
/// service or rule matters when either scope sees it (a service leaving the scope must disappear, one
/// entering must appear).
pub fn decide(changes: &PushScope, proxy: Recipient<'_>, old: &SidecarScope, new: &SidecarScope) -> Push {
    let sees = |h: &str| old.sees_host(h) || new.sees_host(h);
    let eds = |hosts: &BTreeSet<Hostname>| {
        let seen: BTreeSet<Hostname> = hosts.iter().filter(|h| new.sees_host(h)).cloned().collect();
        if seen.is_empty() {
            Push::None
        } else {
            Push::Endpoints(seen)
        }
    };
    let c = match changes {
        PushScope::Full => return Push::Full,
        PushScope::Endpoints(hosts) => return eds(hosts),
        PushScope::Partial(c) => c,
    };
    let object_matters = |(obj, hosts): (&ObjectRef, &Vec<HostPattern>)| match obj.kind {
        Kind::Sidecar | Kind::VirtualService => old.depends_on(obj) || new.depends_on(obj),
        Kind::DestinationRule | Kind::ServiceEntry => {
            hosts.iter().any(|p| old.sees_pattern(p) || new.sees_pattern(p))
        }
        // istiod pushes the root and the policy's own namespace; client-side mTLS also follows the
        // servers' policies, so proxies seeing services of that namespace are pushed too.
        Kind::PeerAuthentication => {
            *obj.namespace == *proxy.root
                || *obj.namespace == *proxy.namespace
                || old.sees_namespace(&obj.namespace)
                || new.sees_namespace(&obj.namespace)
        }
        Kind::Gateway => proxy.kind == ProxyKind::Router,
        // They reach proxies as the service and endpoint changes the ServiceEntry registry makes.
        Kind::WorkloadEntry | Kind::WorkloadGroup => false,
    };
    if c.services.iter().any(|h| sees(h)) || c.objects.iter().any(object_matters) {
        return Push::Full;
    }
    eds(&c.endpoints)
}

/// One published mesh as streams serve it: what generators read, and what changed since the snapshot
/// before it. Implemented by the aggregate's `MeshSnapshot` and by `StaticMesh` (fixtures).
pub trait Snapshot: Send + Sync {
    /// What generators read.
    fn mesh(&self) -> &dyn Mesh;
    /// The version this snapshot's changes apply on top of.
    fn since(&self) -> u64;
    /// What changed since [`Snapshot::since`]. Built on call: the cache and the push log call it once
    /// per snapshot, streams once each only when they may apply it.
    fn changes(&self) -> PushScope;
    /// When the oldest change it carries happened (`pilot_proxy_convergence_time` starts there).
    fn changed_at(&self) -> Option<Instant>;
}

/// What `snapshot` changed for a stream that last processed version `seen`: its change set only when
/// the stream saw the version that set applies to, else everything (it missed a change set).
pub fn scope(snapshot: &dyn Snapshot, seen: Option<u64>) -> PushScope {
    if seen == Some(snapshot.since()) {
        snapshot.changes()
    } else {
        PushScope::Full
    }
}

/// Where the ADS server reads snapshots: the newest one, and a channel that changes whenever a newer
/// one can be loaded. Implemented by the aggregate's `Snapshots` and by the test harness's feed.
pub trait SnapshotSource: Send + Sync {
    /// The newest snapshot; `None` before the first (streams are refused until then).
    fn load(&self) -> Option<Arc<dyn Snapshot>>;
    /// Wakes a stream when [`SnapshotSource::load`] has something newer. Subscribe before loading, so
    /// nothing published in between is missed.
    fn versions(&self) -> watch::Receiver<u64>;
}

/// istiod's auto default for `PILOT_PUSH_THROTTLE` and `PILOT_MAX_REQUESTS_PER_SECOND`:
/// `min(15 + 5 × cores, 100)`.
pub fn default_concurrency() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (15 + 5 * cores).min(100)
}

/// A token bucket for new streams (burst `rate`, refilled continuously).
pub struct RateLimiter {
    rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// `rate` new streams per second.
    pub fn new(rate: usize) -> Self {
        let rate = rate.max(1) as f64;
        Self {
            rate,
            state: Mutex::new((rate, Instant::now())),
        }
    }

    /// Takes a token, or says how long until one is available (nothing is taken then).
    pub fn try_acquire(&self) -> Result<(), Duration> {
        let mut s = self.state.lock();
        let now = Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate).min(self.rate);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - s.0) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::generator::StaticMesh;

    #[test]
    fn scope_is_the_change_set_only_from_the_version_it_applies_to() {
        let eds = PushScope::Endpoints(["a".into()].into());
        let snapshot = StaticMesh::new(5).after(4, eds.clone());
        for (seen, want) in [
            (Some(4), eds),
            (Some(3), PushScope::Full),
            (Some(5), PushScope::Full),
            (None, PushScope::Full),
        ] {
            assert_eq!(scope(&snapshot, seen), want, "seen {seen:?}");
        }
    }

    /// A proxy in `a` with no Sidecar, one importing only reviews, one importing all of `a`.
    fn scopes() -> [SidecarScope; 3] {
        use crate::{
            model::Protocol,
            traffic::{ProxyRef, tests::config},
            xds::generator::static_mesh::service,
        };
        let services = [
            service("reviews", "a", &[("http", 80, Protocol::Http)]),
            service("ratings", "a", &[("http", 80, Protocol::Http)]),
            service("details", "b", &[("http", 80, Protocol::Http)]),
        ];
        let narrow = config(
            "Sidecar",
            "a",
            "default",
            "1",
            "egress: [{hosts: [a/reviews.a.svc.cluster.local]}]",
        );
        let wide = config("Sidecar", "a", "default", "1", "egress: [{hosts: ['./*']}]");
        let vs = config(
            "VirtualService",
            "a",
            "to-ratings",
            "1",
            "hosts: [ratings]\nhttp: [{route: [{destination: {host: ratings}}]}]",
        );
        let labels = Default::default();
        let proxy = ProxyRef {
            namespace: "a",
            labels: &labels,
            router: false,
        };
        let settings = crate::traffic::Settings::default();
        [None, Some(&narrow), Some(&wide)]
            .map(|sc| SidecarScope::build(proxy, sc.map(|c| &**c), [&vs], &services, &settings))
    }

    #[test]
    fn changes_push_only_proxies_whose_scope_sees_them() {
        let [all, narrow, wide] = scopes();
        let hosts = |h: &[&str]| -> BTreeSet<Hostname> { h.iter().map(|h| Hostname::from(*h)).collect() };
        let (reviews, details) = ("reviews.a.svc.cluster.local", "details.b.svc.cluster.local");
        let object = |kind: Kind, ns: &str, name: &str, host: &[&str]| {
            let c = Changes {
                objects: [(
                    ObjectRef::new(kind, ns, name),
                    host.iter().map(|h| HostPattern::parse(h)).collect(),
                )]
                .into(),
                ..Changes::default()
            };
            PushScope::Partial(Arc::new(c))
        };
        let partial = |endpoints: &[&str], services: &[&str]| {
            PushScope::Partial(Arc::new(Changes {
                endpoints: hosts(endpoints),
                services: hosts(services),
                ..Changes::default()
            }))
        };
        let eds = |h: &[&str]| Push::Endpoints(hosts(h));
        let sidecar_a = object(Kind::Sidecar, "a", "default", &[]);
        let dr_details = object(Kind::DestinationRule, "b", "d", &[details]);
        let dr_wild = object(Kind::DestinationRule, "b", "d", &["*.b.svc.cluster.local"]);
        let vs = object(Kind::VirtualService, "a", "to-ratings", &[]);
        let pa = |ns: &str| object(Kind::PeerAuthentication, ns, "default", &[]);
        let gateway = object(Kind::Gateway, "a", "gw", &["*"]);
        let we = object(Kind::WorkloadEntry, "a", "vm", &[]);
        // (what changed, scope before, scope after, proxy kind, the push)
        let sidecar = ProxyKind::Sidecar;
        let cases: Vec<(&str, PushScope, &SidecarScope, &SidecarScope, ProxyKind, Push)> = vec![
            (
                "mesh-wide",
                PushScope::Full,
                &narrow,
                &narrow,
                sidecar,
                Push::Full,
            ),
            (
                "other endpoints",
                PushScope::Endpoints(hosts(&[details])),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "own endpoints",
                PushScope::Endpoints(hosts(&[details, reviews])),
                &narrow,
                &narrow,
                sidecar,
                eds(&[reviews]),
            ),
            (
                "endpoints, no Sidecar",
                PushScope::Endpoints(hosts(&[details])),
                &all,
                &all,
                sidecar,
                eds(&[details]),
            ),
            (
                "other service",
                partial(&[], &[details]),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "other service, no Sidecar",
                partial(&[], &[details]),
                &all,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "endpoints in a partial",
                partial(&[details, reviews], &[]),
                &narrow,
                &narrow,
                sidecar,
                eds(&[reviews]),
            ),
            (
                "own Sidecar changed",
                sidecar_a.clone(),
                &narrow,
                &wide,
                sidecar,
                Push::Full,
            ),
            (
                "own Sidecar removed",
                sidecar_a.clone(),
                &narrow,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "own Sidecar added",
                sidecar_a.clone(),
                &all,
                &narrow,
                sidecar,
                Push::Full,
            ),
            (
                "a Sidecar elsewhere",
                object(Kind::Sidecar, "b", "default", &[]),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "unselected VirtualService",
                vs.clone(),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "selected VirtualService",
                vs.clone(),
                &wide,
                &wide,
                sidecar,
                Push::Full,
            ),
            (
                "visible VirtualService, no Sidecar",
                vs,
                &all,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "DestinationRule out of scope",
                dr_details.clone(),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "DestinationRule, no Sidecar",
                dr_details,
                &all,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "wildcard DestinationRule out of scope",
                dr_wild.clone(),
                &wide,
                &wide,
                sidecar,
                Push::None,
            ),
            (
                "wildcard DestinationRule, no Sidecar",
                dr_wild,
                &all,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "PeerAuthentication in the root",
                pa("istio-system"),
                &narrow,
                &narrow,
                sidecar,
                Push::Full,
            ),
            (
                "PeerAuthentication in the proxy's namespace",
                pa("a"),
                &narrow,
                &narrow,
                sidecar,
                Push::Full,
            ),
            (
                "PeerAuthentication of unseen servers",
                pa("b"),
                &narrow,
                &narrow,
                sidecar,
                Push::None,
            ),
            (
                "PeerAuthentication of seen servers",
                pa("b"),
                &all,
                &all,
                sidecar,
                Push::Full,
            ),
            (
                "Gateway, sidecar",
                gateway.clone(),
                &all,
                &all,
                sidecar,
                Push::None,
            ),
            (
                "Gateway, router",
                gateway,
                &all,
                &all,
                ProxyKind::Router,
                Push::Full,
            ),
            ("WorkloadEntry", we, &all, &all, sidecar, Push::None),
        ];
        for (name, changes, old, new, kind, want) in cases {
            let proxy = Recipient {
                kind,
                namespace: "a",
                root: "istio-system",
            };
            assert_eq!(decide(&changes, proxy, old, new), want, "{name}");
        }
    }

    #[test]
    fn rate_limiter_bounds_bursts() {
        let l = RateLimiter::new(2);
        assert!(l.try_acquire().is_ok() && l.try_acquire().is_ok());
        let wait = l.try_acquire().expect_err("bucket empty");
        assert!(wait <= Duration::from_millis(500));
    }
}
