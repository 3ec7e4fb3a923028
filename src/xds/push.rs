//! What ADS streams follow and how pushes are bounded.
//!
//! Owns: the [`Snapshot`] a stream serves and the [`SnapshotSource`] it follows (one writer publishes,
//! every stream loads the newest: a slow stream skips straight to it, so there is one pending push per
//! connection, coalesced by construction), the [`PushScope`] a stream derives from a snapshot's change
//! set, the concurrent-push bound and the new-stream rate limit. Does NOT: debounce (the publisher
//! does; the aggregate with `--debounce-after` / `--debounce-max`) or decide per stream what to send
//! (the stream task diffs against what it sent).

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use parking_lot::Mutex;
use tokio::{sync::watch, time::Instant};

use super::generator::Mesh;
use crate::model::Hostname;

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

    #[test]
    fn rate_limiter_bounds_bursts() {
        let l = RateLimiter::new(2);
        assert!(l.try_acquire().is_ok() && l.try_acquire().is_ok());
        let wait = l.try_acquire().expect_err("bucket empty");
        assert!(wait <= Duration::from_millis(500));
    }
}
