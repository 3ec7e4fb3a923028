//! The readable views of meshd's debug JSON: what each `meshctl` command shows, derived by pure
//! functions from what the debug endpoints return (table-driven tests below).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::output::{Rows, table};
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
        "proxy {} on network {}{}{}\nservice {}\n",
        s(&e["proxy"]),
        s(&e["view"]["network"]),
        if view.is_empty() {
            String::new()
        } else {
            format!(" (REQUESTED_NETWORK_VIEW {})", view.join(","))
        },
        if e["connected"] == Value::Bool(false) {
            " (not connected: what it would be sent)"
        } else {
            ""
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
                    s(&ep["health"]).to_lowercase(),
                ]
            })
            .collect();
        out += &indent(&super::output::table(
            &[
                "ADDRESS", "KIND", "CLUSTER", "NETWORK", "LOCALITY", "WEIGHT", "HEALTH",
            ],
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

// === proxy-config ===

/// A row of a `meshctl proxy-config` table.
pub trait ConfigRow {
    /// istioctl's column names (those meshd has).
    const HEADER: &'static [&'static str];
    /// Cells in header order.
    fn cells(&self) -> Vec<String>;
}

/// Which part of a proxy's config dump `meshctl proxy-config` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigKind {
    /// CDS: `ClustersConfigDump`.
    Clusters,
    /// EDS: `EndpointsConfigDump`.
    Endpoints,
    /// LDS: `ListenersConfigDump`.
    Listeners,
    /// RDS: `RoutesConfigDump`.
    Routes,
}

impl ConfigKind {
    /// The `@type` of its section in `/debug/config_dump`.
    pub fn section_type(self) -> &'static str {
        match self {
            Self::Clusters => "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
            Self::Endpoints => "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
            Self::Listeners => "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
            Self::Routes => "type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
        }
    }
}

/// The section of `kind` in a `/debug/config_dump` answer (Envoy's admin `ConfigDump`), or `null`.
pub fn dump_section(dump: &Value, kind: ConfigKind) -> Value {
    list(&dump["configs"])
        .find(|c| c["@type"] == kind.section_type())
        .cloned()
        .unwrap_or(Value::Null)
}

/// A string field, or `-` when absent or empty (proto3 JSON omits defaults).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => "-".into(),
    }
}

/// The elements of an array field; none when absent.
fn list(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// The resources of a section: its `entries`, each one's resource under `path`.
fn resources<'a>(section: &'a Value, entries: &str, path: &[&str]) -> impl Iterator<Item = &'a Value> {
    list(&section[entries]).map(move |e| path.iter().fold(e, |v, k| &v[*k]))
}

/// A `meshctl proxy-config clusters` row (istioctl's columns; meshd has no DestinationRules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRow {
    /// The service host name, or the cluster name for clusters that are not a service's.
    pub service_fqdn: String,
    /// Service port.
    pub port: String,
    /// Subset.
    pub subset: String,
    /// `outbound`, `inbound`, or `-`.
    pub direction: String,
    /// Discovery type (`EDS`, `ORIGINAL_DST`, …).
    pub r#type: String,
}

/// One row per cluster in a `ClustersConfigDump`. Names are istiod's: `outbound|port|subset|host`, or
/// the SNI form `outbound_.port_.subset_.host` of east-west gateways.
pub fn cluster_rows(section: &Value) -> Vec<ClusterRow> {
    resources(section, "dynamic_active_clusters", &["cluster"])
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            let parts: Vec<&str> = if name.contains('|') {
                name.splitn(4, '|').collect()
            } else {
                name.splitn(4, "_.").collect()
            };
            let r#type = match (&c["type"], &c["cluster_type"]["name"]) {
                (Value::String(t), _) => t.clone(),
                (_, Value::String(custom)) => custom.clone(),
                // Proto3 JSON omits the default, STATIC.
                _ => "STATIC".into(),
            };
            let dash = |s: &str| {
                if s.is_empty() {
                    "-".to_owned()
                } else {
                    s.to_owned()
                }
            };
            match parts[..] {
                [direction @ ("outbound" | "inbound"), port, subset, host] => ClusterRow {
                    service_fqdn: host.into(),
                    port: dash(port),
                    subset: dash(subset),
                    direction: direction.into(),
                    r#type,
                },
                _ => ClusterRow {
                    service_fqdn: name.into(),
                    port: "-".into(),
                    subset: "-".into(),
                    direction: "-".into(),
                    r#type,
                },
            }
        })
        .collect()
}

impl ConfigRow for ClusterRow {
    const HEADER: &'static [&'static str] = &["SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.service_fqdn.clone(),
            self.port.clone(),
            self.subset.clone(),
            self.direction.clone(),
            self.r#type.clone(),
        ]
    }
}

/// A `meshctl proxy-config endpoints` row (istioctl's columns but OUTLIER CHECK, which is the proxy's
/// own runtime state and not in what a control plane sends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRow {
    /// `address:port`.
    pub endpoint: String,
    /// The health meshd sent (`HEALTHY`, `UNHEALTHY`, `DRAINING`; `UNKNOWN` counts as healthy).
    pub status: String,
    /// The cluster it belongs to.
    pub cluster: String,
}

/// One row per endpoint in an `EndpointsConfigDump`, in the order sent (locality by locality).
pub fn endpoint_rows(section: &Value) -> Vec<EndpointRow> {
    resources(section, "dynamic_endpoint_configs", &["endpoint_config"])
        .flat_map(|cla| {
            let cluster = text(&cla["cluster_name"]);
            let lb_endpoints = list(&cla["endpoints"]).flat_map(|l| list(&l["lb_endpoints"]));
            lb_endpoints.map(move |lb| {
                let a = &lb["endpoint"]["address"]["socket_address"];
                EndpointRow {
                    endpoint: format!("{}:{}", text(&a["address"]), text(&a["port_value"])),
                    status: lb["health_status"].as_str().unwrap_or("UNKNOWN").into(),
                    cluster: cluster.clone(),
                }
            })
        })
        .collect()
}

impl ConfigRow for EndpointRow {
    const HEADER: &'static [&'static str] = &["ENDPOINT", "STATUS", "CLUSTER"];
    fn cells(&self) -> Vec<String> {
        vec![self.endpoint.clone(), self.status.clone(), self.cluster.clone()]
    }
}

/// A `meshctl proxy-config listeners` row: one per filter chain (istioctl's), or one per API listener
/// (proxyless gRPC, which has no address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerRow {
    /// Listener name.
    pub name: String,
    /// Address, `-` for an API listener.
    pub address: String,
    /// Port.
    pub port: String,
    /// The filter chain match in words (`ALL` when it matches everything).
    pub r#match: String,
    /// `Route: <name>` (HTTP) or `Cluster: <name>` (TCP).
    pub destination: String,
}

/// Where a network filter (or an API listener's HCM) sends traffic.
fn filter_destination(typed: &Value) -> String {
    let route = &typed["rds"]["route_config_name"];
    if let Some(r) = route.as_str() {
        return format!("Route: {r}");
    }
    match typed["cluster"].as_str() {
        Some(c) => format!("Cluster: {c}"),
        None => "-".into(),
    }
}

/// A filter chain match in istioctl's words.
fn chain_match(m: &Value) -> String {
    let list = |k: &str| {
        m[k].as_array()
            .map(|v| v.iter().map(text).collect::<Vec<_>>().join(","))
            .filter(|s| !s.is_empty())
    };
    let mut parts = Vec::new();
    if let Some(ips) = m["prefix_ranges"].as_array().filter(|v| !v.is_empty()) {
        let cidrs: Vec<String> = ips
            .iter()
            .map(|r| format!("{}/{}", text(&r["address_prefix"]), text(&r["prefix_len"])))
            .collect();
        parts.push(format!("Addr: {}", cidrs.join(",")));
    }
    if let Some(sni) = list("server_names") {
        parts.push(format!("SNI: {sni}"));
    }
    if let Some(t) = m["transport_protocol"].as_str() {
        parts.push(format!("Trans: {t}"));
    }
    if let Some(app) = list("application_protocols") {
        parts.push(format!("App: {app}"));
    }
    if parts.is_empty() {
        "ALL".into()
    } else {
        parts.join("; ")
    }
}

/// One row per filter chain (or API listener) in a `ListenersConfigDump`.
pub fn listener_rows(section: &Value) -> Vec<ListenerRow> {
    resources(section, "dynamic_listeners", &["active_state", "listener"])
        .flat_map(|l| {
            let name = text(&l["name"]);
            let a = &l["address"]["socket_address"];
            let (address, port) = (text(&a["address"]), text(&a["port_value"]));
            if l["api_listener"].is_object() {
                return vec![ListenerRow {
                    name,
                    address,
                    port,
                    r#match: "-".into(),
                    destination: filter_destination(&l["api_listener"]["api_listener"]),
                }];
            }
            list(&l["filter_chains"])
                .map(|chain| ListenerRow {
                    name: name.clone(),
                    address: address.clone(),
                    port: port.clone(),
                    r#match: chain_match(&chain["filter_chain_match"]),
                    destination: chain["filters"]
                        .as_array()
                        .and_then(|f| f.last())
                        .map_or("-".into(), |f| filter_destination(&f["typed_config"])),
                })
                .collect()
        })
        .collect()
}

impl ConfigRow for ListenerRow {
    const HEADER: &'static [&'static str] = &["NAME", "ADDRESSES", "PORT", "MATCH", "DESTINATION"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            self.address.clone(),
            self.port.clone(),
            self.r#match.clone(),
            self.destination.clone(),
        ]
    }
}

/// A `meshctl proxy-config routes` row: one per route of each virtual host (istioctl's columns; meshd
/// has no VirtualServices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRow {
    /// Route configuration name.
    pub name: String,
    /// Virtual host name.
    pub vhost: String,
    /// The first domain, and how many more.
    pub domains: String,
    /// The route's match (`/*` for a prefix `/`).
    pub r#match: String,
}

/// A route match in istioctl's words.
fn route_match(m: &Value) -> String {
    if let Some(p) = m["prefix"].as_str() {
        return format!("{p}*");
    }
    if let Some(p) = m["path"].as_str() {
        return p.into();
    }
    match m["safe_regex"]["regex"].as_str() {
        Some(r) => format!("regex {r}"),
        // An empty prefix is the proto3 default: it matches everything.
        None => "/*".into(),
    }
}

/// One row per route per virtual host in a `RoutesConfigDump`.
pub fn route_rows(section: &Value) -> Vec<RouteRow> {
    let mut rows = Vec::new();
    for rc in resources(section, "dynamic_route_configs", &["route_config"]) {
        for vh in list(&rc["virtual_hosts"]) {
            let domains: Vec<&Value> = list(&vh["domains"]).collect();
            let domains = match domains[..] {
                [] => "-".into(),
                [one] => text(one),
                [first, ..] => format!("{} +{} more", text(first), domains.len() - 1),
            };
            rows.extend(list(&vh["routes"]).map(|r| RouteRow {
                name: text(&rc["name"]),
                vhost: text(&vh["name"]),
                domains: domains.clone(),
                r#match: route_match(&r["match"]),
            }));
        }
    }
    rows
}

impl ConfigRow for RouteRow {
    const HEADER: &'static [&'static str] = &["NAME", "VHOST NAME", "DOMAINS", "MATCH"];
    fn cells(&self) -> Vec<String> {
        vec![
            self.name.clone(),
            self.vhost.clone(),
            self.domains.clone(),
            self.r#match.clone(),
        ]
    }
}

fn rows_table<R: ConfigRow>(rows: &[R]) -> String {
    table(R::HEADER, &rows.iter().map(R::cells).collect::<Vec<_>>())
}

/// The `meshctl proxy-config <kind>` table of a config dump section.
pub fn proxy_config_table(kind: ConfigKind, section: &Value) -> String {
    match kind {
        ConfigKind::Clusters => rows_table(&cluster_rows(section)),
        ConfigKind::Endpoints => rows_table(&endpoint_rows(section)),
        ConfigKind::Listeners => rows_table(&listener_rows(section)),
        ConfigKind::Routes => rows_table(&route_rows(section)),
    }
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
