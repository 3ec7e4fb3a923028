//! What ADS streams follow and how pushes are bounded.
//!
//! Owns: the [`Snapshot`] a stream serves and the [`SnapshotSource`] it follows (one writer publishes,
//! every stream loads the newest: a slow stream skips straight to it, so there is one pending push per
//! connection, coalesced by construction), the [`PushScope`] a stream derives from a snapshot's change
//! set, which of those changes a proxy's Sidecar scope makes it need ([`decide`], istiod's
//! `proxy_dependencies.go`), the concurrent-push bound and the new-stream rate limit. Does NOT:
//! debounce (the publisher does; the aggregate with `--debounce-after` / `--debounce-max`) or decide
//! per resource what to send (the stream diffs against what it sent).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};

use crate::envoy::{Mesh, ProxyKind, pod_listeners};
use crate::{
    istio::{Kind, ObjectRef},
    model::{Hostname, Resolution},
    traffic::{SidecarScope, hosts::HostPattern},
};

/// What a stream must regenerate for a new snapshot (not to be confused with the aggregate's
/// per-service [`crate::aggregate::ChangeKind`], from which it is derived).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum PushScope {
    /// Anything may have changed: regenerate every type.
    #[default]
    Full,
    /// Only these services' endpoints changed: push EDS, only for their clusters (and a sidecar's
    /// listeners when one is a passthrough service: [`decide`]). Publishers must say
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
    /// A sidecar's clusters too, besides EDS for these hosts' clusters: one of them is a passthrough
    /// service, whose original-destination cluster's mTLS follows its endpoints (`envoy::cds`).
    Clusters(BTreeSet<Hostname>),
    /// A sidecar's listeners and clusters too: one of them is a passthrough service with a TCP port,
    /// whose endpoints are also its per-endpoint listeners (`envoy::pod_listeners`).
    Listeners(BTreeSet<Hostname>),
    /// Every type (the per-resource diff still sends only what changed).
    Full,
}

/// Who is pushed: what [`decide`] reads from a proxy besides its scopes.
#[derive(Clone, Copy)]
pub struct Recipient<'a> {
    /// The proxy's kind (gateways follow Gateway objects, not Sidecars).
    pub kind: ProxyKind,
    /// Its namespace.
    pub namespace: &'a str,
    /// MeshConfig's root namespace.
    pub root: &'a str,
    /// The change moved the proxy's own service targets (`envoy::service_targets::Served`): its inbound
    /// listener and clusters change whatever its scope sees.
    pub inbound_moved: bool,
    /// The snapshot pushed: which of the changed services are passthrough ones.
    pub mesh: &'a dyn Mesh,
}

/// What `changes` makes a proxy need, given its scope before (`old`) and after (`new`) them: a
/// service or rule matters when either scope sees it (a service leaving the scope must disappear, one
/// entering must appear), and anything that moved the proxy's own service targets. The endpoints of a
/// passthrough service decide its sidecar cluster's mTLS, and with a TCP port they are a sidecar's
/// listeners too: it gets CDS (and LDS) with their EDS (istiod's `HeadlessEndpointUpdate`, which
/// pushes sidecars and gives gateways EDS only).
pub fn decide(changes: &PushScope, proxy: Recipient<'_>, old: &SidecarScope, new: &SidecarScope) -> Push {
    let sees = |h: &str| old.sees_host(h) || new.sees_host(h);
    let passthrough = |h: &Hostname, listeners: bool| {
        proxy.kind == ProxyKind::Sidecar
            && proxy.mesh.service(h).is_some_and(|s| {
                s.resolution == Resolution::Passthrough && (!listeners || pod_listeners::follows_endpoints(s))
            })
    };
    let eds = |hosts: &BTreeSet<Hostname>| {
        let seen: BTreeSet<Hostname> = hosts.iter().filter(|h| new.sees_host(h)).cloned().collect();
        if seen.is_empty() {
            Push::None
        } else if seen.iter().any(|h| passthrough(h, true)) {
            Push::Listeners(seen)
        } else if seen.iter().any(|h| passthrough(h, false)) {
            Push::Clusters(seen)
        } else {
            Push::Endpoints(seen)
        }
    };
    if proxy.inbound_moved {
        return Push::Full;
    }
    let c = match changes {
        PushScope::Full => return Push::Full,
        PushScope::Endpoints(hosts) => return eds(hosts),
        PushScope::Partial(c) => c,
    };
    let object_matters = |(obj, hosts): (&ObjectRef, &Vec<HostPattern>)| match obj.kind {
        // A gateway's routes come from the VirtualServices bound to its Gateways.
        Kind::VirtualService if proxy.kind == ProxyKind::Router => true,
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
/// before it. Implemented by the aggregate's `MeshSnapshot` and by [`StaticSnapshot`] (fixtures).
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

/// A fixed mesh served as a snapshot: what tests, benches and the ADS harness publish.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Clone, Default)]
pub struct StaticSnapshot {
    /// The mesh.
    pub mesh: crate::envoy::StaticMesh,
    /// The version `changes` apply on top of.
    pub since: u64,
    /// What changed since `since`.
    pub changes: PushScope,
    /// When the change happened.
    pub changed_at: Option<Instant>,
}

#[cfg(any(test, feature = "testing"))]
impl StaticSnapshot {
    /// `mesh`, changed entirely since the version before.
    pub fn new(mesh: crate::envoy::StaticMesh) -> Self {
        Self::after(mesh.version.saturating_sub(1), PushScope::Full, mesh)
    }

    /// `mesh` following version `since` with `changes`.
    pub fn after(since: u64, changes: PushScope, mesh: crate::envoy::StaticMesh) -> Self {
        Self {
            mesh,
            since,
            changes,
            changed_at: None,
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl Snapshot for StaticSnapshot {
    fn mesh(&self) -> &dyn Mesh {
        &self.mesh
    }

    fn since(&self) -> u64 {
        self.since
    }

    fn changes(&self) -> PushScope {
        self.changes.clone()
    }

    fn changed_at(&self) -> Option<Instant> {
        self.changed_at
    }
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
    /// Changes taken in and not yet in [`SnapshotSource::load`]'s snapshot (debug only).
    fn debouncing(&self) -> Option<crate::envoy::explain::Debouncing> {
        None
    }
}

/// istiod's auto default for `PILOT_PUSH_THROTTLE` and `PILOT_MAX_REQUESTS_PER_SECOND`:
/// `min(15 + 5 × cores, 100)`.
pub fn default_concurrency() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (15 + 5 * cores).min(100)
}

/// A token bucket for new streams (burst `rate`, at least 1, refilled continuously).
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// `rate` new streams per second (fractions allowed; not a positive number: the default).
    pub fn new(rate: f64) -> Self {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            default_concurrency() as f64
        };
        let burst = rate.max(1.0);
        Self {
            rate,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token, or says how long until one is available (nothing is taken then).
    pub fn try_acquire(&self) -> Result<(), Duration> {
        let mut s = self.state.lock();
        let now = Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate).min(self.burst);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            Ok(())
        } else {
            Err(Duration::try_from_secs_f64((1.0 - s.0) / self.rate).unwrap_or(Duration::MAX))
        }
    }
}

#[cfg(test)]
#[path = "push_tests.rs"]
mod tests;
