//! A stream polled only when it woke its task.
//!
//! Owns: [`Woken`], which a stream puts around each source it selects over (its requests, the
//! snapshot and secret watches, shutdown). `tokio::select!` polls every branch on every wake-up, and a
//! pending watch re-registers its waker under the watch's waiter lock, which every stream shares: a
//! stream woken by its client's ACK would take the snapshot watch's, the secrets watch's and the
//! shutdown token's locks, and walk tonic's body layers down to h2, for sources that did not change.
//! With [`Woken`], a source that has not woken since it last said `Pending` answers `Pending` at once:
//! one atomic load of a line nobody wrote meanwhile (the task's waker is handed over once, not
//! re-registered on every poll: a read-modify-write per poll on a line the waking core also writes cost
//! more than the lock it saved). Does NOT: change what a source yields or when.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, Wake, Waker},
};

use futures::Stream;
use parking_lot::Mutex;

/// `inner`, polled only on its first poll, after it yielded an item, or after it woke the task.
pub(crate) struct Woken<S> {
    inner: S,
    flag: Arc<Flag>,
    /// `flag` as a waker, handed to `inner` (built once).
    waker: Waker,
    /// The task waker `flag` holds, compared without its lock.
    task: Option<Waker>,
}

/// Whether the inner stream woke since its last `Pending`, and whom to wake when it does. The task
/// waker stays once set (replaced only if the stream moves to another task), so a wake never leaves it
/// empty for the next one.
struct Flag {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        if let Some(task) = &*self.task.lock() {
            task.wake_by_ref();
        }
    }
}

impl<S> Woken<S> {
    pub(crate) fn new(inner: S) -> Self {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(true),
            task: Mutex::new(None),
        });
        Self {
            inner,
            waker: Waker::from(flag.clone()),
            flag,
            task: None,
        }
    }
}

impl<S: Stream + Unpin> Stream for Woken<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        // Handed over before the flag is read: a wake in between sets the flag and wakes this task.
        if !this.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            let task = cx.waker().clone();
            *this.flag.task.lock() = Some(task.clone());
            this.task = Some(task);
        }
        // Read first, swapped only when set: polls of a source that did not wake write nothing shared.
        if !this.flag.woken.load(Ordering::Acquire) || !this.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let polled = Pin::new(&mut this.inner).poll_next(&mut Context::from_waker(&this.waker));
        if polled.is_ready() {
            // A stream may hold more items without waking anyone: ask it again next time.
            this.flag.woken.store(true, Ordering::Release);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures::StreamExt;
    use tokio::sync::watch;
    use tokio_stream::wrappers::WatchStream;

    use super::*;

    /// A stream that counts its polls.
    struct Counted<S> {
        inner: S,
        polls: Arc<AtomicUsize>,
    }

    impl<S: Stream + Unpin> Stream for Counted<S> {
        type Item = S::Item;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            Pin::new(&mut self.inner).poll_next(cx)
        }
    }

    #[tokio::test]
    async fn a_source_that_did_not_wake_is_not_polled_and_one_that_did_yields_everything() {
        let (tx, rx) = watch::channel(0u32);
        let polls = Arc::new(AtomicUsize::new(0));
        let mut w = Woken::new(Counted {
            inner: WatchStream::from_changes(rx),
            polls: polls.clone(),
        });
        let noop = Waker::noop();
        let mut cx = Context::from_waker(noop);
        assert!(w.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(
            polls.load(Ordering::Relaxed),
            1,
            "the first poll reaches the source"
        );
        for _ in 0..5 {
            assert!(w.poll_next_unpin(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1, "no wake, no poll of the source");
        tx.send(1).unwrap();
        assert_eq!(w.next().await, Some(1), "a change wakes it");
        tx.send(2).unwrap();
        tx.send(3).unwrap();
        assert_eq!(
            w.next().await,
            Some(3),
            "the newest value, as the bare watch gives"
        );
        drop(tx);
        assert_eq!(w.next().await, None, "the end is passed on");
    }

    #[tokio::test]
    async fn every_later_wake_reaches_the_task_that_polls_now() {
        let (tx, rx) = watch::channel(0u32);
        let mut w = Woken::new(WatchStream::from_changes(rx));
        // First polled from elsewhere (another waker), then awaited here: the task waker is replaced.
        assert!(
            w.poll_next_unpin(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        let sender = tokio::spawn(async move {
            for i in 1..=3 {
                tokio::task::yield_now().await;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                tx.send(i).unwrap();
            }
        });
        for i in 1..=3 {
            let got = tokio::time::timeout(std::time::Duration::from_secs(5), w.next()).await;
            assert_eq!(got, Ok(Some(i)), "wake {i} reached the task");
        }
        sender.await.unwrap();
    }

    #[tokio::test]
    async fn items_ready_without_a_wake_are_still_yielded() {
        let mut w = Woken::new(futures::stream::iter([1, 2, 3]));
        assert_eq!(w.by_ref().collect::<Vec<_>>().await, [1, 2, 3]);
    }
}
