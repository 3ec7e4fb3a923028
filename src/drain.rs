//! One shutdown path: a cancellation signal every task obeys, and a tracker the top level waits on.
//!
//! Every long-lived task is spawned through [`Tasks::spawn`], which names it, gives it a tracing span and
//! tracks it, so draining is "cancel, then wait for the tracker to empty, bounded by a deadline".

use std::{future::Future, time::Duration};

use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tracing::{Instrument, debug, info_span};

/// The spawner and shutdown signal shared by every component. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Tasks {
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// Returned when tasks were still running at the drain deadline.
#[derive(Debug, thiserror::Error)]
#[error("{remaining} task(s) still running after the {deadline:?} drain deadline")]
pub struct DrainTimeout {
    /// Tasks that had not finished.
    pub remaining: usize,
    /// The deadline that elapsed.
    pub deadline: Duration,
}

impl Tasks {
    /// A fresh, uncancelled task set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `fut` as a named, traced and tracked task.
    ///
    /// The task must watch [`Tasks::cancelled`] (or a child's) and return when it fires.
    pub fn spawn<F>(&self, name: &str, fut: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(self.track(name, fut))
    }

    /// `fut` named, traced and tracked as [`Tasks::spawn`] does, for a caller that polls it itself (an
    /// ADS stream runs inside its HTTP/2 response body): drain waits for it until it ends or is dropped.
    pub fn track<F: Future>(&self, name: &str, fut: F) -> impl Future<Output = F::Output> + use<F> {
        let span = info_span!("task", name = %name);
        let name = name.to_owned();
        self.tracker.track_future(
            async move {
                debug!("started");
                let out = fut.await;
                debug!(task = %name, "stopped");
                out
            }
            .instrument(span),
        )
    }

    /// A task set whose cancellation also fires when this one's does, and can be cancelled on its own
    /// (e.g. to stop one remote cluster). Its tasks are still drained with the parent's.
    pub fn child(&self) -> Tasks {
        Tasks {
            cancel: self.cancel.child_token(),
            tracker: self.tracker.clone(),
        }
    }

    /// Resolves once shutdown (or this child's stop) has begun.
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.cancel.clone().cancelled_owned()
    }

    /// Whether shutdown has begun.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The underlying token, for APIs (servers) that take one.
    pub fn token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Signals every task to stop, without waiting.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Number of tasks currently running (for diagnostics).
    pub fn running(&self) -> usize {
        self.tracker.len()
    }

    /// Cancels every task and waits for them to finish, at most `deadline`.
    pub async fn drain(&self, deadline: Duration) -> Result<(), DrainTimeout> {
        self.cancel.cancel();
        self.tracker.close();
        match tokio::time::timeout(deadline, self.tracker.wait()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(DrainTimeout {
                remaining: self.tracker.len(),
                deadline,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_waits_for_cooperative_tasks() {
        let tasks = Tasks::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = tasks.clone();
        tasks.spawn("worker", async move {
            t.cancelled().await;
            let _ = tx.send("cleaned up");
        });
        assert_eq!(tasks.running(), 1);
        tasks.drain(Duration::from_secs(5)).await.expect("drains");
        assert_eq!(rx.await.expect("task ran its cleanup"), "cleaned up");
        assert_eq!(tasks.running(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn drain_reports_stuck_tasks_at_deadline() {
        let tasks = Tasks::new();
        tasks.spawn("stuck", std::future::pending());
        let err = tasks
            .drain(Duration::from_millis(50))
            .await
            .expect_err("times out");
        assert_eq!(err.remaining, 1);
    }

    #[tokio::test]
    async fn child_cancels_alone_and_with_parent() {
        let parent = Tasks::new();
        let a = parent.child();
        let b = parent.child();
        a.cancel();
        assert!(a.is_cancelled() && !b.is_cancelled() && !parent.is_cancelled());
        parent.cancel();
        assert!(b.is_cancelled());
    }
}
