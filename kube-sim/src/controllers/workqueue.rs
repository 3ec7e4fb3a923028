//! The controllers' work queue: writes enqueue what they affect and the outermost write drains the
//! queue inside the same transaction. Controllers so never recurse into each other, each item is synced
//! once per change in arrival order, and everything a write causes is committed with it.

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};

use crate::error::Error;
use crate::object::Key;
use crate::store::Txn;

/// Items one transaction may sync before the queue gives up (a guard against controllers that fight).
const MAX_ITEMS: usize = 100_000;

/// One unit of controller work, named by the object it is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Task {
    Deployment(Key),
    ReplicaSet(Key),
    /// Scheduling and starting one pod.
    Pod(Key),
    /// A Service's EndpointSlices.
    Slices(Key),
    /// Nodes changed: pods waiting for one are scheduled again.
    PendingPods,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Task>,
    queued: HashSet<Task>,
    draining: bool,
}

thread_local! {
    // A transaction runs on one thread without awaiting, so the queue of the write in progress is
    // thread-local and always empty between transactions.
    static QUEUE: RefCell<Queue> = RefCell::new(Queue::default());
}

/// Resets the queue if draining ends early.
struct Draining;

impl Drop for Draining {
    fn drop(&mut self) {
        QUEUE.with_borrow_mut(|q| *q = Queue::default());
    }
}

/// Adds work; an item already waiting is not queued twice.
pub(super) fn enqueue(work: impl IntoIterator<Item = Task>) {
    QUEUE.with_borrow_mut(|q| {
        for w in work {
            if q.queued.insert(w.clone()) {
                q.items.push_back(w);
            }
        }
    });
}

/// Runs `f` with the queue held, then, if no outer write is already draining, syncs every queued item
/// with `sync`. Errors of single items are logged: like a real controller, the write that caused them
/// still succeeds.
pub(super) fn defer<T>(
    txn: &mut Txn<'_>,
    f: impl FnOnce(&mut Txn<'_>) -> Result<T, Error>,
    sync: fn(&mut Txn<'_>, &Task) -> Result<(), Error>,
) -> Result<T, Error> {
    let outer = QUEUE.with_borrow_mut(|q| !std::mem::replace(&mut q.draining, true));
    if !outer {
        return f(txn);
    }
    let _reset = Draining;
    let out = f(txn)?;
    for _ in 0..MAX_ITEMS {
        let next = QUEUE.with_borrow_mut(|q| {
            let w = q.items.pop_front();
            if let Some(w) = &w {
                q.queued.remove(w);
            }
            w
        });
        let Some(work) = next else {
            return Ok(out);
        };
        if let Err(e) = sync(txn, &work) {
            tracing::warn!(?work, error = %e, "controller sync failed");
        }
    }
    tracing::warn!("controller work queue did not settle; dropping the rest");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enqueue_deduplicates_waiting_items() {
        let _reset = Draining;
        let key = || ("ns".to_string(), "a".to_string());
        enqueue([Task::Pod(key()), Task::Pod(key()), Task::PendingPods]);
        let items = QUEUE.with_borrow(|q| q.items.clone());
        assert_eq!(items, [Task::Pod(key()), Task::PendingPods]);
    }
}
