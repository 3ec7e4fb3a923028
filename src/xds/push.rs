//! The push pipeline: debounce snapshot changes, publish one push at a time, bound the work.
//!
//! Owns: the debouncer task (quiet period `debounce_after`, at most `debounce_max` after the first
//! change; istiod's `PILOT_DEBOUNCE_AFTER` / `_MAX`) merging change scopes, the `watch` channel every
//! stream reads (a slow stream simply sees the newest push later: one pending push per connection,
//! coalesced by construction), the concurrent-push bound and the new-stream rate limit. Does NOT:
//! decide per-stream what to send (the stream task diffs against what it sent).

use std::{
    collections::BTreeSet,
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tracing::debug;

use super::generator::Mesh;
use crate::{drain::Tasks, model::Hostname};

/// What changed between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushScope {
    /// Anything may have changed: regenerate every type.
    Full,
    /// Only these services' endpoints changed: push EDS, only for their clusters. Producers must say
    /// [`PushScope::Full`] instead when an endpoint change alters what CDS reads (the set of endpoint
    /// identities or mTLS modes of a service), as istiod does for service-account changes.
    Endpoints(BTreeSet<Hostname>),
}

impl PushScope {
    /// The scope covering both.
    pub fn merge(self, other: PushScope) -> PushScope {
        match (self, other) {
            (PushScope::Endpoints(mut a), PushScope::Endpoints(b)) => {
                a.extend(b);
                PushScope::Endpoints(a)
            }
            _ => PushScope::Full,
        }
    }
}

/// A new snapshot and what changed since the previous one.
pub struct Update {
    /// The snapshot.
    pub mesh: Arc<dyn Mesh>,
    /// The change since the previous update.
    pub scope: PushScope,
}

/// A debounced push: every stream moves to `mesh`.
pub struct Push {
    /// The snapshot to serve.
    pub mesh: Arc<dyn Mesh>,
    /// The push this one follows (`None` for the first). A stream that processed exactly that one
    /// may apply `scope`; any other stream treats this push as full.
    pub base: Option<u64>,
    /// What changed since `base`.
    pub scope: PushScope,
    /// When the oldest change merged into this push happened (for convergence time).
    pub changed_at: Instant,
}

impl Push {
    /// The snapshot version.
    pub fn version(&self) -> u64 {
        self.mesh.version()
    }
}

/// Receives updates, debounces them and publishes pushes; returns the channel streams watch.
pub fn spawn_debouncer(
    tasks: &Tasks,
    mut updates: mpsc::Receiver<Update>,
    after: Duration,
    max: Duration,
) -> watch::Receiver<Option<Arc<Push>>> {
    let (tx, rx) = watch::channel(None::<Arc<Push>>);
    let stop = tasks.cancelled();
    tasks.spawn("xds-debounce", async move {
        tokio::pin!(stop);
        let mut base: Option<u64> = None;
        loop {
            // Wait for the first change of a burst.
            let first = tokio::select! {
                _ = &mut stop => return,
                u = updates.recv() => match u { Some(u) => u, None => return },
            };
            let started = tokio::time::Instant::now();
            let changed_at = Instant::now();
            let (mut mesh, mut scope) = (first.mesh, first.scope);
            // The first snapshot is served at once: nothing is connected yet that could be spared work.
            if base.is_some() {
                loop {
                    let quiet = tokio::time::sleep(after);
                    let deadline = tokio::time::sleep_until(started + max);
                    tokio::select! {
                        _ = &mut stop => return,
                        _ = quiet => break,
                        _ = deadline => break,
                        u = updates.recv() => match u {
                            Some(u) => { mesh = u.mesh; scope = scope.merge(u.scope); }
                            None => break,
                        },
                    }
                }
            }
            let version = mesh.version();
            debug!(version, ?scope, "push");
            let push = Push {
                mesh,
                base,
                scope,
                changed_at,
            };
            base = Some(version);
            tx.send_replace(Some(Arc::new(push)));
        }
    });
    rx
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

    fn mesh_at(version: u64) -> Arc<dyn Mesh> {
        Arc::new(StaticMesh::new(version))
    }

    #[test]
    fn scopes_merge_to_the_wider() {
        let a = PushScope::Endpoints(["a".into()].into());
        let b = PushScope::Endpoints(["b".into()].into());
        assert_eq!(
            a.clone().merge(b),
            PushScope::Endpoints(["a".into(), "b".into()].into())
        );
        assert_eq!(a.merge(PushScope::Full), PushScope::Full);
    }

    #[test]
    fn rate_limiter_bounds_bursts() {
        let l = RateLimiter::new(2);
        assert!(l.try_acquire().is_ok() && l.try_acquire().is_ok());
        let wait = l.try_acquire().expect_err("bucket empty");
        assert!(wait <= Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn debounce_merges_a_burst_and_pushes_after_quiet() {
        let tasks = Tasks::new();
        let (tx, rx) = mpsc::channel(16);
        let mut pushes = spawn_debouncer(&tasks, rx, Duration::from_millis(100), Duration::from_secs(10));
        tx.send(Update {
            mesh: mesh_at(1),
            scope: PushScope::Full,
        })
        .await
        .unwrap();
        pushes.changed().await.unwrap();
        assert_eq!(
            pushes.borrow().as_ref().unwrap().version(),
            1,
            "first snapshot served at once"
        );

        for (v, host) in [(2, "a"), (3, "b")] {
            let scope = PushScope::Endpoints([Hostname::from(host)].into());
            tx.send(Update {
                mesh: mesh_at(v),
                scope,
            })
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        pushes.changed().await.unwrap();
        let p = pushes.borrow_and_update().clone().unwrap();
        assert_eq!((p.version(), p.base), (3, Some(1)));
        assert_eq!(p.scope, PushScope::Endpoints(["a".into(), "b".into()].into()));
        tasks.drain(Duration::from_secs(1)).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn debounce_max_bounds_the_delay() {
        let tasks = Tasks::new();
        let (tx, rx) = mpsc::channel(16);
        let mut pushes = spawn_debouncer(&tasks, rx, Duration::from_millis(100), Duration::from_millis(300));
        tx.send(Update {
            mesh: mesh_at(1),
            scope: PushScope::Full,
        })
        .await
        .unwrap();
        pushes.changed().await.unwrap();
        let start = tokio::time::Instant::now();
        let sender = tokio::spawn(async move {
            for v in 2..20 {
                if tx
                    .send(Update {
                        mesh: mesh_at(v),
                        scope: PushScope::Full,
                    })
                    .await
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        pushes.changed().await.unwrap();
        assert!(
            start.elapsed() <= Duration::from_millis(350),
            "pushed within max despite changes every 50ms"
        );
        sender.abort();
        tasks.drain(Duration::from_secs(1)).await.unwrap();
    }
}
