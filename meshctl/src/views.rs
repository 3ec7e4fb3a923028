//! The readable views of meshd's debug JSON: what each `meshctl` command shows, derived by pure
//! functions from what the debug endpoints return (table-driven tests below).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::output::Rows;
use meshd::xds::XdsType;

// === remote-clusters ===

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
    }
}

/// `meshctl remote-clusters` rows.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RemoteClusters(pub Vec<RemoteCluster>);

impl Rows for RemoteClusters {
    fn header(&self) -> Vec<&'static str> {
        vec!["NAME", "SECRET", "STATUS", "REASON"]
    }
    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|c| {
                vec![
                    c.name.clone(),
                    c.secret.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                ]
            })
            .collect()
    }
}

// === proxy-status ===

/// One `/debug/syncz` entry (istiod's `SyncStatus` plus meshd's per-type details).
#[derive(Debug, Clone, Deserialize)]
pub struct SyncStatus {
    /// Node ID.
    pub proxy: String,
    /// `CLUSTER_ID`.
    #[serde(default)]
    pub cluster_id: String,
    /// `NETWORK`.
    #[serde(default)]
    pub network: String,
    /// Per type URL.
    #[serde(default)]
    pub resources: BTreeMap<String, TypeSync>,
}

/// One type of one proxy.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeSync {
    /// Nonce sent.
    #[serde(default)]
    pub sent: String,
    /// Nonce ACKed.
    #[serde(default)]
    pub acked: String,
    /// The last NACK's message.
    #[serde(default)]
    pub last_error: String,
}

/// istioctl's per-type states.
pub fn sync_state(t: Option<&TypeSync>) -> &'static str {
    match t {
        None => "NOT SENT",
        Some(t) if t.sent.is_empty() => "NOT SENT",
        Some(t) if t.sent == t.acked => "SYNCED",
        Some(_) => "STALE",
    }
}

/// A `meshctl proxy-status` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProxyStatus {
    /// Node ID.
    pub name: String,
    /// Its cluster.
    pub cluster: String,
    /// Its network.
    pub network: String,
    /// Short type name → SYNCED / STALE / NOT SENT.
    pub status: BTreeMap<&'static str, &'static str>,
    /// `<TYPE>: <message>` of the last NACK, if any.
    pub last_nack: String,
}

/// The row for one `/debug/syncz` entry.
pub fn proxy_status(s: &SyncStatus) -> ProxyStatus {
    let mut status = BTreeMap::new();
    let mut nacks = Vec::new();
    for ty in XdsType::PUSH_ORDER {
        let t = s.resources.get(ty.url());
        status.insert(ty.short(), sync_state(t));
        if let Some(t) = t.filter(|t| !t.last_error.is_empty()) {
            nacks.push(format!("{}: {}", ty.short(), t.last_error));
        }
    }
    ProxyStatus {
        name: s.proxy.clone(),
        cluster: s.cluster_id.clone(),
        network: s.network.clone(),
        status,
        last_nack: nacks.join("; "),
    }
}

/// `meshctl proxy-status` rows.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ProxyStatuses(pub Vec<ProxyStatus>);

impl Rows for ProxyStatuses {
    fn header(&self) -> Vec<&'static str> {
        vec![
            "NAME",
            "CLUSTER",
            "NETWORK",
            "CDS",
            "LDS",
            "EDS",
            "RDS",
            "LAST NACK",
        ]
    }
    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|p| {
                let s = |t: &str| p.status.get(t).copied().unwrap_or("NOT SENT").to_owned();
                vec![
                    p.name.clone(),
                    p.cluster.clone(),
                    p.network.clone(),
                    s("CDS"),
                    s("LDS"),
                    s("EDS"),
                    s("RDS"),
                    p.last_nack.clone(),
                ]
            })
            .collect()
    }
}

// === adsz, networks ===

/// `meshctl adsz` rows: one per connected client.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct AdsClients(pub Vec<Value>);

impl Rows for AdsClients {
    fn header(&self) -> Vec<&'static str> {
        vec![
            "CONNECTION",
            "ADDRESS",
            "CLUSTER",
            "NETWORK",
            "CONNECTED",
            "WATCHES",
        ]
    }
    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|c| {
                let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
                let watches = c["watches"]
                    .as_object()
                    .map(|w| {
                        XdsType::PUSH_ORDER
                            .iter()
                            .filter_map(|ty| {
                                let n = w.get(ty.url())?.as_array()?.len();
                                Some(format!("{}:{n}", ty.short()))
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                vec![
                    s(&c["connectionId"]),
                    s(&c["address"]),
                    s(&c["metadata"]["CLUSTER_ID"]),
                    s(&c["metadata"]["NETWORK"]),
                    s(&c["connectedAt"]),
                    watches,
                ]
            })
            .collect()
    }
}

/// `meshctl networks` rows: one per gateway from `/debug/networkz`.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Networks(pub Vec<Value>);

impl Rows for Networks {
    fn header(&self) -> Vec<&'static str> {
        vec!["NETWORK", "CLUSTER", "GATEWAY", "PORT", "FROM DNS NAME"]
    }
    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|g| {
                let s = |v: &Value| match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                vec![
                    s(&g["Network"]),
                    s(&g["Cluster"]),
                    s(&g["Addr"]),
                    s(&g["Port"]),
                    s(&g["Hostname"]),
                ]
            })
            .collect()
    }
}

// === explain ===

/// A verdict of `/debug/explain` in words.
pub fn verdict_words(v: &Value) -> String {
    let why = v["why"].as_str().unwrap_or("");
    match v["decision"].as_str().unwrap_or("") {
        "direct" => {
            let reason = match why {
                "sameNetwork" => "same network as the proxy",
                "noGateways" => "no network gateways in the mesh (single network)",
                "noGatewayForNetwork" => "its network has no gateway: sent as is, must be directly reachable",
                other => other,
            };
            format!("sent directly, weight {}: {reason}", v["weight"])
        }
        "viaGateways" => {
            let gws: Vec<String> = v["gateways"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|g| format!("{}:{}", g["address"].as_str().unwrap_or(""), g["port"]))
                        .collect()
                })
                .unwrap_or_default();
            let network = v["gateways"][0]["network"].as_str().unwrap_or("?");
            format!(
                "through {network}'s gateway {} with weight {} each",
                gws.join(", "),
                v["share"]
            )
        }
        "dropped" => {
            let reason = match why {
                "outsideNetworkView" => "outside the proxy's REQUESTED_NETWORK_VIEW",
                "noSuchPort" => "does not serve this port",
                "notMtls" => {
                    "not mTLS-capable (a remote endpoint is reached through the gateway by its mTLS SNI)"
                }
                "unhealthy" => {
                    "unhealthy (a remote endpoint would draw traffic through the gateway to nothing)"
                }
                other => other,
            };
            format!("DROPPED: {reason}")
        }
        other => other.to_owned(),
    }
}

/// `meshctl explain` as text: per port, what is sent, then every endpoint and its verdict.
pub fn explain_text(e: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let view: Vec<String> = e["view"]["requestedNetworkView"]
        .as_array()
        .map(|a| a.iter().map(s).collect())
        .unwrap_or_default();
    let mut out = format!(
        "proxy {} on network {}{}\nservice {}\n",
        s(&e["proxy"]),
        s(&e["view"]["network"]),
        if view.is_empty() {
            String::new()
        } else {
            format!(" (REQUESTED_NETWORK_VIEW {})", view.join(","))
        },
        s(&e["service"]),
    );
    for port in e["ports"].as_array().into_iter().flatten() {
        out += &format!(
            "\nport {} ({}), EDS cluster {}\n\n  sent:\n",
            port["port"],
            s(&port["name"]),
            s(&port["edsCluster"])
        );
        let sent: Vec<Vec<String>> = port["sent"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|ep| {
                vec![
                    format!("{}:{}", s(&ep["address"]), ep["port"]),
                    if ep["gateway"] == true {
                        "gateway".into()
                    } else {
                        "endpoint".into()
                    },
                    s(&ep["cluster"]),
                    s(&ep["network"]),
                    locality(&ep["locality"]),
                    ep["weight"].to_string(),
                ]
            })
            .collect();
        out += &indent(&super::output::table(
            &["ADDRESS", "KIND", "CLUSTER", "NETWORK", "LOCALITY", "WEIGHT"],
            &sent,
        ));
        out += "\n  endpoints:\n";
        let eps: Vec<Vec<String>> = port["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|ep| {
                vec![
                    s(&ep["address"]),
                    s(&ep["cluster"]),
                    s(&ep["network"]),
                    s(&ep["health"]).to_lowercase(),
                    s(&ep["tlsMode"]),
                    verdict_words(&ep["verdict"]),
                ]
            })
            .collect();
        out += &indent(&super::output::table(
            &["ADDRESS", "CLUSTER", "NETWORK", "HEALTH", "TLS", "WHY"],
            &eps,
        ));
    }
    out
}

/// `region/zone/subzone`, or `-` when unset.
fn locality(l: &Value) -> String {
    let parts: Vec<&str> = ["region", "zone", "subzone"]
        .iter()
        .map(|k| l[*k].as_str().unwrap_or(""))
        .collect();
    if parts.iter().all(|p| p.is_empty()) {
        return "-".into();
    }
    parts.join("/")
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect()
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
