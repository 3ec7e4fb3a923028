//! Process readiness: ready only when every registered component has released its guard.

use std::{collections::BTreeMap, sync::Arc};

use parking_lot::Mutex;

/// Tracks components that still block readiness. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Ready(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    pending: Mutex<Pending>,
    became_ready: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Pending {
    next: u64,
    tasks: BTreeMap<u64, String>,
}

/// Blocks readiness until dropped (RAII): a component holds it until it has done its initial work.
#[must_use = "readiness is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct BlockReady {
    ready: Ready,
    id: u64,
}

impl Ready {
    /// A tracker with nothing pending (ready).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `name` as pending until the returned guard is dropped.
    pub fn register(&self, name: impl Into<String>) -> BlockReady {
        let mut p = self.0.pending.lock();
        let id = p.next;
        p.next += 1;
        p.tasks.insert(id, name.into());
        BlockReady {
            ready: self.clone(),
            id,
        }
    }

    /// Names of the components still pending, in registration order.
    pub fn pending(&self) -> Vec<String> {
        self.0.pending.lock().tasks.values().cloned().collect()
    }

    /// True once nothing is pending.
    pub fn is_ready(&self) -> bool {
        self.0.pending.lock().tasks.is_empty()
    }

    /// Resolves once nothing is pending.
    pub async fn wait(&self) {
        loop {
            let notified = self.0.became_ready.notified();
            if self.is_ready() {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for BlockReady {
    fn drop(&mut self) {
        let mut p = self.ready.0.pending.lock();
        p.tasks.remove(&self.id);
        if p.tasks.is_empty() {
            self.ready.0.became_ready.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_guard_is_released() {
        let ready = Ready::new();
        assert!(ready.is_ready());
        let a = ready.register("config cluster");
        let b = ready.register("remote clusters");
        let c = ready.register("config cluster");
        assert_eq!(
            ready.pending(),
            ["config cluster", "remote clusters", "config cluster"]
        );
        drop(b);
        assert_eq!(ready.pending(), ["config cluster", "config cluster"]);
        drop(a);
        assert!(
            !ready.is_ready(),
            "a second guard with the same name still blocks"
        );
        drop(c);
        assert!(ready.is_ready());
    }

    #[tokio::test]
    async fn wait_resolves_when_the_last_guard_drops() {
        let ready = Ready::new();
        let guard = ready.register("x");
        let waiter = tokio::spawn({
            let ready = ready.clone();
            async move { ready.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(guard);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
