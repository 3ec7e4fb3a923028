//! `meshctl remote-clusters`: `/debug/clusterz` rows as a table (status in words, ★ own discovery
//! selectors, ★ stale-endpoints policy and state).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::output::Rows;

/// One `/debug/clusterz` row as meshd serves it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterzRow {
    /// Cluster ID.
    pub id: String,
    /// `namespace/name` of its Secret; empty for the config cluster.
    #[serde(default)]
    pub secret_name: String,
    /// `synced`, `syncing`, `timeout`, `closed` or `error: …`.
    pub sync_status: String,
    /// The last watch error, while it lasts.
    #[serde(default)]
    pub last_error: Option<String>,
    /// The remote Secret's own discovery selectors, when it overrides MeshConfig's.
    #[serde(default)]
    pub discovery_selectors: Option<Value>,
    /// ★ Its stale-endpoints policy and state (remotes only).
    #[serde(default)]
    pub stale_endpoints: Option<Stale>,
}

/// ★ A remote's stale-endpoints policy and state, as `/debug/clusterz` shows it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stale {
    /// `keep`, `deprioritize` or `drop`.
    pub action: String,
    /// After how long unreachable (`5m`).
    pub after: String,
    /// Since when its API server has not answered.
    #[serde(default)]
    pub unreachable_since: Option<String>,
    /// Whether the action is in force.
    #[serde(default)]
    pub stale: bool,
}

/// A `meshctl remote-clusters` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteCluster {
    /// Cluster ID.
    pub name: String,
    /// Its Secret (`-` for the config cluster).
    pub secret: String,
    /// `synced`, `syncing`, `timeout`, `closed` or `error`.
    pub status: String,
    /// Why it is not synced, in words; empty when synced.
    pub reason: String,
    /// ★ Its own discovery selectors (compact JSON) when its Secret overrides MeshConfig's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery_selectors: Option<String>,
    /// ★ Its stale-endpoints policy and state in words (`drop after 5m`, `STALE since …: drop`);
    /// empty for the config cluster.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stale_endpoints: String,
    /// Whether its policy acts (not keep) or is in force: only then is the column shown.
    #[serde(skip)]
    stale_acts: bool,
}

/// The stale-endpoints cell: the policy, or what is in force since when.
fn stale_cell(s: &Stale) -> String {
    match (&s.unreachable_since, s.stale) {
        (Some(since), true) => format!("STALE since {since}: {}", s.action),
        (Some(since), false) => format!("unreachable since {since}: {} after {}", s.action, s.after),
        (None, _) => format!("{} after {}", s.action, s.after),
    }
}

/// The status word and, unless synced, the reason in words.
pub fn remote_cluster(row: &ClusterzRow) -> RemoteCluster {
    let detail = row.last_error.as_deref().filter(|e| !e.is_empty());
    let (status, reason) = match (row.sync_status.as_str(), detail) {
        ("synced", None) => ("synced", String::new()),
        // Synced once, failing now (e.g. its API server went down): the last good state is served.
        ("synced", Some(e)) => (
            "synced",
            format!("serving the last synced state; now failing: {e}"),
        ),
        ("syncing", None) => (
            "syncing",
            "initial list of services and endpoints in progress".into(),
        ),
        ("syncing", Some(e)) => ("syncing", format!("initial list in progress; last error: {e}")),
        ("timeout", e) => (
            "timeout",
            format!(
                "not synced within the remote-cluster timeout (readiness no longer waits; still retrying){}",
                e.map(|e| format!("; last error: {e}")).unwrap_or_default()
            ),
        ),
        ("closed", _) => ("closed", "stopped: its Secret was removed or replaced".into()),
        (other, _) => match other.strip_prefix("error: ") {
            Some(reason) => ("error", reason.to_owned()),
            None => (other, String::new()),
        },
    };
    RemoteCluster {
        name: row.id.clone(),
        secret: if row.secret_name.is_empty() {
            "-".into()
        } else {
            row.secret_name.clone()
        },
        status: status.into(),
        reason,
        discovery_selectors: row.discovery_selectors.as_ref().map(Value::to_string),
        stale_endpoints: row.stale_endpoints.as_ref().map(stale_cell).unwrap_or_default(),
        stale_acts: row
            .stale_endpoints
            .as_ref()
            .is_some_and(|s| s.action != "keep" || s.stale),
    }
}

/// `meshctl remote-clusters` rows.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RemoteClusters(pub Vec<RemoteCluster>);

impl RemoteClusters {
    /// Whether any cluster has its own discovery selectors (only then is their column shown).
    fn any_selectors(&self) -> bool {
        self.0.iter().any(|c| c.discovery_selectors.is_some())
    }

    /// Whether any remote's stale-endpoints policy acts or is in force (only then is the column
    /// shown: istiod's keep on a reachable or briefly unreachable remote changes nothing).
    fn any_stale(&self) -> bool {
        self.0.iter().any(|c| c.stale_acts)
    }
}

impl Rows for RemoteClusters {
    fn header(&self) -> Vec<&'static str> {
        let mut h = vec!["NAME", "SECRET", "STATUS", "REASON"];
        if self.any_selectors() {
            h.push("DISCOVERY SELECTORS");
        }
        if self.any_stale() {
            h.push("STALE ENDPOINTS");
        }
        h
    }
    fn cells(&self) -> Vec<Vec<String>> {
        let (selectors, stale) = (self.any_selectors(), self.any_stale());
        self.0
            .iter()
            .map(|c| {
                let mut row = vec![
                    c.name.clone(),
                    c.secret.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                ];
                if selectors {
                    let own = c.discovery_selectors.as_deref().unwrap_or("mesh-wide");
                    row.push(own.to_owned());
                }
                if stale {
                    row.push(c.stale_endpoints.clone());
                }
                row
            })
            .collect()
    }
}
