//! Per-connection status for debug (`/debug/connections`, `/debug/syncz`-style views).
//!
//! Owns: a registry of live streams. Each stream task is the only writer of its own entry and
//! publishes an immutable [`ConnectionStatus`] after each change (`ArcSwap` store); readers clone
//! `Arc`s out under a short lock that is never held across `.await`. Does NOT: serve HTTP.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::Serialize;

use super::{Proxy, XdsType, connection::TypeStatus};

/// What one stream looks like right now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// `<node id>-<n>`, unique for this process.
    pub id: String,
    /// `sotw` or `delta`.
    pub protocol: &'static str,
    /// Remote address.
    pub peer: Option<String>,
    /// Identities the authenticator established (empty on plaintext).
    pub identities: Vec<String>,
    /// When the stream was accepted (RFC 3339).
    pub connected_at: String,
    /// The proxy, once its first request arrived.
    pub proxy: Option<Proxy>,
    /// Snapshot version of the last push processed.
    pub push_version: Option<u64>,
    /// Per-type subscription, nonce, versions and last NACK.
    pub watches: BTreeMap<XdsType, TypeStatus>,
}

/// Live connections. Cheap to clone.
#[derive(Clone, Default)]
pub struct Connections {
    next: Arc<AtomicU64>,
    live: Arc<Mutex<BTreeMap<u64, Arc<ArcSwap<ConnectionStatus>>>>>,
}

impl Connections {
    /// A snapshot of every live connection's status, in connection order.
    pub fn list(&self) -> Vec<Arc<ConnectionStatus>> {
        let entries: Vec<_> = self.live.lock().values().cloned().collect();
        entries.iter().map(|e| e.load_full()).collect()
    }

    /// Registers a stream; it is listed until the handle is dropped.
    pub(crate) fn register(&self, initial: ConnectionStatus) -> StatusHandle {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let cell = Arc::new(ArcSwap::from_pointee(initial));
        self.live.lock().insert(key, cell.clone());
        StatusHandle {
            key,
            cell,
            registry: self.clone(),
        }
    }
}

/// A stream's write handle on its own status entry.
pub(crate) struct StatusHandle {
    key: u64,
    cell: Arc<ArcSwap<ConnectionStatus>>,
    registry: Connections,
}

impl StatusHandle {
    /// The registry key: unique for this process.
    pub(crate) fn key(&self) -> u64 {
        self.key
    }

    /// Publishes a new status derived from the current one.
    pub(crate) fn update(&self, f: impl FnOnce(&mut ConnectionStatus)) {
        let mut next = ConnectionStatus::clone(&self.cell.load());
        f(&mut next);
        self.cell.store(Arc::new(next));
    }
}

impl Drop for StatusHandle {
    fn drop(&mut self) {
        self.registry.live.lock().remove(&self.key);
    }
}
