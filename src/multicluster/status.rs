//! Per-cluster status as `/debug/clusterz` shows it, and the table the secret controller publishes.
//! `/debug/clusterz` is shaped like istiod's so existing tooling (`istioctl remote-clusters`) reads it;
//! its rows carry no credentials.

use std::{fmt, sync::Arc};

use axum::{Json, routing::get};
use serde::Serialize;
use tokio::sync::watch;

use super::{check::Credentials, cluster::ProgressChannel, stale::Staleness};
use crate::{
    admin,
    config::selectors::LabelSelector,
    model::ClusterId,
    registry::{Progress, namespaces::Override},
};

/// Adds `/debug/clusterz`.
pub fn routes(debug: admin::Debug, clusters: Clusters) -> admin::Debug {
    debug.route(
        "/debug/clusterz",
        "clusters, their secrets and sync status",
        get(move || async move { Json(clusters.rows()) }),
    )
}

/// A cluster's sync status (istiod's values, plus `error: <reason>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncStatus {
    /// Initial lists in progress.
    Syncing,
    /// Initial lists done; watching.
    Synced,
    /// Not synced within the remote-cluster timeout: no longer blocks readiness, still retrying.
    Timeout,
    /// Stopped.
    Closed,
    /// Not usable as configured, or failing before sync: in words.
    Error(String),
}

impl SyncStatus {
    /// The status implied by a registry's progress.
    pub fn from_progress(p: &Progress, timed_out: bool) -> Self {
        match (&p.last_error, p.synced, timed_out) {
            (_, true, _) => Self::Synced,
            (_, false, true) => Self::Timeout,
            (Some(e), false, false) => Self::Error(e.clone()),
            (None, false, false) => Self::Syncing,
        }
    }
}

impl fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syncing => f.write_str("syncing"),
            Self::Synced => f.write_str("synced"),
            Self::Timeout => f.write_str("timeout"),
            Self::Closed => f.write_str("closed"),
            Self::Error(reason) => write!(f, "error: {reason}"),
        }
    }
}

/// One row of `/debug/clusterz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    /// Cluster ID.
    pub id: ClusterId,
    /// `namespace/name` of the Secret; empty for the config cluster.
    pub secret_name: String,
    /// `syncing|synced|timeout|closed|error: <reason>`.
    pub sync_status: String,
    /// The last watch error, while it lasts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// ★ The remote Secret's own discovery selectors (annotation `meshd.io/discovery-selectors`),
    /// replacing MeshConfig's for this cluster; absent when it follows MeshConfig's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery_selectors: Option<Vec<LabelSelector>>,
    /// ★ Its stale-endpoints policy and whether it is in force (running remotes only); absent while
    /// the policy is istiod's (keep) and its API server answers, so the row stays istiod's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_endpoints: Option<Staleness>,
}

/// A cluster as the table holds it: a live status, or a fixed one for rejected entries.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) id: ClusterId,
    pub(crate) secret: String,
    pub(crate) status: StatusSource,
    /// The remote's current client (running remotes only).
    pub(crate) client: Option<ClientChannel>,
    /// The remote's own discovery selectors (running remotes only).
    pub(crate) selectors: Option<watch::Receiver<Override>>,
    /// ★ The remote's staleness (running remotes only).
    pub(crate) staleness: Option<watch::Receiver<Staleness>>,
    /// Its registry's progress (running remotes only), for its last event.
    pub(crate) progress: Option<ProgressChannel>,
    /// What its kubeconfig authenticates with (running remotes only).
    pub(crate) credentials: Option<Credentials>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.id)
            .field("secret", &self.secret)
            .field("status", &self.status)
            .finish()
    }
}

/// Where a row's status comes from.
#[derive(Debug, Clone)]
pub enum StatusSource {
    /// A remote cluster's supervisor.
    Live(watch::Receiver<(SyncStatus, Option<String>)>),
    /// The config cluster's registry (never times out).
    Registry(watch::Receiver<Progress>),
    /// A rejected Secret entry.
    Fixed(SyncStatus),
}

impl StatusSource {
    /// The status and last error now.
    fn now(&self) -> (SyncStatus, Option<String>) {
        match self {
            Self::Live(rx) => rx.borrow().clone(),
            Self::Registry(rx) => {
                let p = rx.borrow();
                (SyncStatus::from_progress(&p, false), p.last_error.clone())
            }
            Self::Fixed(s) => (s.clone(), None),
        }
    }
}

/// A running remote cluster's client as a channel: a new client when its credentials rotate, `None` once
/// it stops (then closed).
pub type ClientChannel = watch::Receiver<Option<kube::Client>>;

/// The known clusters: written by the secret controller alone, read by anyone. Cheap to clone. A watch
/// channel rather than a plain swap, so duties that follow the remotes ([`RemotesWatch`]) learn of changes.
#[derive(Debug, Clone)]
pub struct Clusters(Arc<watch::Sender<Arc<Vec<Entry>>>>);

impl Default for Clusters {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(Arc::default())))
    }
}

impl Clusters {
    pub(crate) fn publish(&self, entries: Vec<Entry>) {
        self.0.send_replace(Arc::new(entries));
    }

    /// The table now (cloned out, so no lock is held while it is read).
    fn load(&self) -> Arc<Vec<Entry>> {
        self.0.borrow().clone()
    }

    /// Follows the running remote clusters as the secret controller adds, rotates and removes them.
    pub fn watch_remotes(&self) -> RemotesWatch {
        RemotesWatch(self.0.subscribe())
    }

    /// Current rows: the config cluster first, then by cluster ID and Secret.
    pub fn rows(&self) -> Vec<ClusterRow> {
        self.load()
            .iter()
            .map(|e| {
                let (status, last_error) = e.status.now();
                ClusterRow {
                    id: e.id.clone(),
                    secret_name: e.secret.clone(),
                    sync_status: status.to_string(),
                    last_error,
                    discovery_selectors: e
                        .selectors
                        .as_ref()
                        .and_then(|rx| rx.borrow().as_deref().cloned()),
                    stale_endpoints: e
                        .staleness
                        .as_ref()
                        .map(|rx| rx.borrow().clone())
                        .filter(Staleness::worth_showing),
                }
            })
            .collect()
    }

    /// The current client of running remote cluster `id`.
    pub fn client(&self, id: &str) -> Option<kube::Client> {
        self.load()
            .iter()
            .filter(|e| &*e.id == id)
            .find_map(|e| e.client.as_ref()?.borrow().clone())
    }

    /// IDs of the running remote clusters.
    pub fn remote_ids(&self) -> Vec<String> {
        self.load()
            .iter()
            .filter(|e| e.client.is_some())
            .map(|e| e.id.to_string())
            .collect()
    }

    /// Every remote (running or refused) as `remote-clusters --check` sees it now.
    pub(crate) fn remotes(&self) -> Vec<Remote> {
        self.load()
            .iter()
            .filter(|e| !e.secret.is_empty())
            .map(|e| {
                let (status, last_error) = e.status.now();
                let last_event = e.progress.as_ref().and_then(|rx| {
                    let current = rx.borrow();
                    current.as_ref().and_then(|p| p.borrow().last_event)
                });
                Remote {
                    id: e.id.to_string(),
                    status,
                    last_error,
                    last_event,
                    client: e.client.as_ref().and_then(|rx| rx.borrow().clone()),
                    credentials: e
                        .credentials
                        .clone()
                        .unwrap_or_else(|| Credentials::Unreadable("its kubeconfig was refused".into())),
                    staleness: e.staleness.as_ref().map(|rx| rx.borrow().clone()),
                }
            })
            .collect()
    }

    /// The row for `id` from `secret`, if any.
    pub fn row(&self, id: &str, secret: &str) -> Option<ClusterRow> {
        self.rows()
            .into_iter()
            .find(|r| &*r.id == id && r.secret_name == secret)
    }
}

/// A remote as `remote-clusters --check` sees it.
pub(crate) struct Remote {
    pub(crate) id: String,
    pub(crate) status: SyncStatus,
    pub(crate) last_error: Option<String>,
    pub(crate) last_event: Option<std::time::SystemTime>,
    pub(crate) client: Option<kube::Client>,
    pub(crate) credentials: Credentials,
    pub(crate) staleness: Option<Staleness>,
}

/// The running remote clusters of a [`Clusters`] table, as it changes.
#[derive(Debug)]
pub struct RemotesWatch(watch::Receiver<Arc<Vec<Entry>>>);

impl RemotesWatch {
    /// Waits until the table changes; `Err` once the table itself is gone.
    pub async fn changed(&mut self) -> Result<(), watch::error::RecvError> {
        self.0.changed().await
    }

    /// The own discovery selectors of running remote `id` (its Secret's annotation).
    pub fn selectors(&self, id: &ClusterId) -> Option<watch::Receiver<Override>> {
        self.0
            .borrow()
            .iter()
            .find(|e| &e.id == id && e.client.is_some())
            .and_then(|e| e.selectors.clone())
    }

    /// The running remotes now, by cluster ID, each with its client channel.
    pub fn current(&mut self) -> Vec<(ClusterId, ClientChannel)> {
        let entries = self.0.borrow_and_update().clone();
        entries
            .iter()
            .filter_map(|e| Some((e.id.clone(), e.client.clone()?)))
            .collect()
    }
}
