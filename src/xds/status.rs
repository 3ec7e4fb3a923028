//! Per-connection status for debug (`/debug/connections`, `/debug/adsz`, `/debug/syncz`,
//! `/debug/config_dump`) and the latest push's record (`/debug/push_status`).
//!
//! Owns: a registry of live streams. Each entry is the stream's fixed facts plus handles on what its
//! task owns (protocol state, what the client holds, the push it serves); a reader builds a
//! [`ConnectionStatus`] from them on demand, so a stream pays nothing per request or push for being
//! observable (copying its status out after every change was a quarter of meshd's CPU under churn).
//! Locks are short and never held across `.await`. Does NOT: serve HTTP.

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use parking_lot::Mutex;
use serde::Serialize;

use super::{
    Proxy, XdsType,
    held::Held,
    protocol::TypeStatus,
    push::{PushScope, Snapshot},
};
use crate::model::Hostname;

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
    /// What the client holds, per type and name, as last sent (`/debug/config_dump`).
    #[serde(skip)]
    pub sent: Held,
}

/// Per-type status, read from a stream's protocol state when asked.
pub(crate) trait Watches: Send + Sync {
    fn watches(&self) -> BTreeMap<XdsType, TypeStatus>;
}

/// One live stream as the registry holds it.
struct Live {
    /// Everything but `watches` and `push_version`, which are read live.
    fixed: ConnectionStatus,
    watches: Arc<dyn Watches>,
    /// Snapshot version of the last push processed (0: none yet).
    push_version: AtomicU64,
}

/// Live connections. Cheap to clone.
#[derive(Clone, Default)]
pub struct Connections {
    next: Arc<AtomicU64>,
    live: Arc<Mutex<BTreeMap<u64, Arc<Live>>>>,
}

impl Connections {
    /// Every live connection's status now, in connection order.
    pub fn list(&self) -> Vec<Arc<ConnectionStatus>> {
        let entries: Vec<_> = self.live.lock().values().cloned().collect();
        entries
            .iter()
            .map(|e| {
                let version = e.push_version.load(Ordering::Relaxed);
                Arc::new(ConnectionStatus {
                    watches: e.watches.watches(),
                    push_version: (version > 0).then_some(version),
                    ..e.fixed.clone()
                })
            })
            .collect()
    }

    /// Registers a stream; it is listed until the handle is dropped. Its id is `<node id>-<n>`.
    pub(crate) fn register(&self, mut fixed: ConnectionStatus, watches: Arc<dyn Watches>) -> StatusHandle {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some(proxy) = &fixed.proxy {
            fixed.id = format!("{}-{key}", proxy.id);
        }
        let live = Arc::new(Live {
            push_version: AtomicU64::new(fixed.push_version.unwrap_or(0)),
            fixed,
            watches,
        });
        self.live.lock().insert(key, live.clone());
        StatusHandle {
            key,
            live,
            registry: self.clone(),
        }
    }
}

/// A stream's handle on its own registry entry.
pub(crate) struct StatusHandle {
    key: u64,
    live: Arc<Live>,
    registry: Connections,
}

impl StatusHandle {
    /// The stream now serves the push of snapshot `version`.
    pub(crate) fn pushed(&self, version: u64) {
        self.live.push_version.store(version, Ordering::Relaxed);
    }
}

impl Drop for StatusHandle {
    fn drop(&mut self) {
        self.registry.live.lock().remove(&self.key);
    }
}

/// The latest push as `/debug/push_status` shows it: when, why, how many proxies got something, and
/// what they sent back. (istiod dumps its whole `PushContext` there; these are the parts an operator
/// asks about.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushStatus {
    /// Snapshot version pushed.
    pub version: u64,
    /// When the first stream started on it (RFC 3339).
    pub start: String,
    /// `full`, or `endpoints` when only EDS of `endpointsChanged` was due.
    pub reason: &'static str,
    /// Services whose endpoints changed (endpoint pushes only).
    pub endpoints_changed: Vec<Hostname>,
    /// Streams that were sent at least one response for this push.
    pub proxies_pushed: u64,
    /// Responses sent, per type.
    pub pushes: BTreeMap<XdsType, u64>,
    /// NACKs received since, per type.
    pub errors: BTreeMap<XdsType, u64>,
}

/// Where streams record what the latest push did. Cheap to clone; the lock is held only to
/// update counters.
#[derive(Clone, Default)]
pub struct PushLog(Arc<Mutex<PushStatus>>);

impl PushLog {
    /// The latest push's record.
    pub fn current(&self) -> PushStatus {
        self.0.lock().clone()
    }

    /// A stream starts on `snapshot`; the first one to see a newer version starts a new record.
    pub(crate) fn begin(&self, snapshot: &dyn Snapshot) {
        let version = snapshot.mesh().version();
        let mut s = self.0.lock();
        if version <= s.version && !s.start.is_empty() {
            return;
        }
        let (reason, endpoints_changed) = match snapshot.changes() {
            PushScope::Full => ("full", Vec::new()),
            PushScope::Endpoints(hosts) => ("endpoints", hosts.into_iter().collect()),
            PushScope::Partial(c) => ("partial", c.endpoints.iter().cloned().collect()),
        };
        *s = PushStatus {
            version,
            start: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            reason,
            endpoints_changed,
            ..PushStatus::default()
        };
    }

    /// A stream sent `responses` per type on `version`; `new_proxy` the first time it does on it.
    pub(crate) fn pushed(&self, version: u64, new_proxy: bool, responses: &BTreeMap<XdsType, u64>) {
        let mut s = self.0.lock();
        if s.version != version || responses.is_empty() {
            return;
        }
        s.proxies_pushed += u64::from(new_proxy);
        for (ty, n) in responses {
            *s.pushes.entry(*ty).or_default() += n;
        }
    }

    /// A proxy rejected a response of `ty`.
    pub(crate) fn nacked(&self, ty: XdsType) {
        *self.0.lock().errors.entry(ty).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_counts_once_per_push_whether_served_on_request_or_pushed() {
        let log = PushLog(Arc::new(Mutex::new(PushStatus {
            version: 3,
            start: "2026-11-22T04:16:13Z".into(),
            ..PushStatus::default()
        })));
        let one = |ty| BTreeMap::from([(ty, 1)]);
        // Connected after the push: its requests are answered one type at a time.
        log.pushed(3, true, &one(XdsType::Cluster));
        log.pushed(3, false, &one(XdsType::Endpoint));
        log.pushed(3, true, &one(XdsType::Cluster));
        log.pushed(2, true, &one(XdsType::Cluster));
        log.pushed(3, true, &BTreeMap::new());
        let s = log.current();
        assert_eq!(s.proxies_pushed, 2);
        assert_eq!(
            s.pushes,
            BTreeMap::from([(XdsType::Cluster, 2), (XdsType::Endpoint, 1)])
        );
    }
}
