//! The readable views of meshd's debug JSON: what each `meshctl` command shows, derived by pure
//! functions from what the debug endpoints return (table-driven tests below).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::output::Rows;
use meshd::xds::XdsType;

// === remote-clusters ===

mod remote_clusters;
pub use remote_clusters::{ClusterzRow, RemoteCluster, RemoteClusters, Stale, remote_cluster};

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
#[serde(rename_all = "camelCase", default)]
pub struct TypeSync {
    /// Nonce sent.
    pub sent: String,
    /// Nonce ACKed.
    pub acked: String,
    /// The last NACK's message.
    pub last_error: String,
    /// How many names the client asked for that meshd does not have.
    pub waiting: usize,
    /// The first of them.
    pub waiting_names: Vec<String>,
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
    /// `<TYPE> <name>` per type the proxy waits on a resource meshd does not have (+ how many more):
    /// SYNCED alone would hide a client stuck on a cluster CDS never builds.
    pub waiting_for: String,
}

/// The row for one `/debug/syncz` entry.
pub fn proxy_status(s: &SyncStatus) -> ProxyStatus {
    let mut status = BTreeMap::new();
    let mut nacks = Vec::new();
    let mut waiting = Vec::new();
    for ty in XdsType::PUSH_ORDER {
        let t = s.resources.get(ty.url());
        status.insert(ty.short(), sync_state(t));
        if let Some(t) = t.filter(|t| !t.last_error.is_empty()) {
            nacks.push(format!("{}: {}", ty.short(), t.last_error));
        }
        if let Some((t, first)) = t.and_then(|t| Some((t, t.waiting_names.first()?))) {
            let more = match t.waiting.saturating_sub(1) {
                0 => String::new(),
                n => format!(" (+{n} more)"),
            };
            waiting.push(format!("{} {first}{more}", ty.short()));
        }
    }
    ProxyStatus {
        name: s.proxy.clone(),
        cluster: s.cluster_id.clone(),
        network: s.network.clone(),
        status,
        last_nack: nacks.join("; "),
        waiting_for: waiting.join("; "),
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
            "WAITING FOR",
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
                    p.waiting_for.clone(),
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
                "proxylessWithoutNetwork" => {
                    "proxyless gRPC without a NETWORK cannot use a gateway: sent as is, must be directly reachable"
                }
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
                "notInSubset" => "not in the subset (its labels lack the subset's)",
                "noSuchPort" => "does not serve this port",
                "notMtls" => {
                    "not mTLS-capable from this client (a remote endpoint is reached through the gateway \
                     by its mTLS SNI; see MTLS)"
                }
                "unhealthy" => {
                    "unhealthy (a remote endpoint would draw traffic through the gateway to nothing)"
                }
                "proxylessBehindGateway" => {
                    "behind another network's gateway, which proxyless gRPC cannot cross (no SNI)"
                }
                other => other,
            };
            format!("DROPPED: {reason}")
        }
        other => other.to_owned(),
    }
}

/// Whether a client sends an endpoint Istio mTLS, and what decided, in words.
pub fn mtls_words(v: &Value) -> String {
    let yes = if v["enabled"] == true { "yes" } else { "no" };
    let why = &v["why"];
    let mode = why["mode"].as_str().unwrap_or("");
    match why["by"].as_str().unwrap_or("") {
        "noSidecar" => format!("{yes}: no sidecar"),
        "destinationRule" => format!("{yes}: DestinationRule tls {mode}"),
        "peerAuthentication" => match why["from"].as_object() {
            Some(from) => format!(
                "{yes}: PeerAuthentication {}/{} {mode}",
                from.get("namespace").and_then(Value::as_str).unwrap_or(""),
                from.get("name").and_then(Value::as_str).unwrap_or("")
            ),
            None => format!("{yes}: auto-mTLS ({mode} by default)"),
        },
        _ => yes.to_owned(),
    }
}

/// An endpoint's priority and what ranked it, in words; `-` when it is not sent.
pub fn priority_words(v: &Value) -> String {
    if v.is_null() {
        return "-".into();
    }
    let why = &v["why"];
    if why.is_null() {
        // Locality load balancing is off: everything is at priority 0.
        return v["priority"].to_string();
    }
    let mut reasons = Vec::new();
    if let Some(m) = why["labelMismatch"].as_object() {
        let get = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        reasons.push(format!(
            "{} differs ({} ≠ {})",
            get("key"),
            get("want"),
            get("got")
        ));
    }
    let ladder = &why["ladder"];
    match ladder["match"].as_str() {
        Some("sameSubzone") => reasons.push("same subzone".into()),
        Some("sameZone") => reasons.push("same zone".into()),
        Some("sameRegion") => reasons.push("same region".into()),
        Some("otherRegion") => reasons.push("other region".into()),
        Some("notFailoverTarget") => reasons.push(format!(
            "not {}'s failover region {}",
            ladder["from"].as_str().unwrap_or(""),
            ladder["to"].as_str().unwrap_or("")
        )),
        _ => {}
    }
    match &why["distribute"] {
        Value::Array(d) => reasons.push(format!(
            "distribute {} → {} {}%",
            d[0].as_str().unwrap_or(""),
            d[1].as_str().unwrap_or(""),
            d[2]
        )),
        Value::Null if why.get("distribute").is_some() => reasons.push("no distribute entry: emptied".into()),
        _ => {}
    }
    if reasons.is_empty() {
        reasons.push("every failoverPriority label matches".into());
    }
    format!("{}: {}", v["priority"], reasons.join(", "))
}

/// A cluster's locality load balancing in words.
fn locality_words(v: &Value) -> String {
    let source = |s: &Value| match s.as_str() {
        Some("destinationRule") => "DestinationRule",
        _ => "MeshConfig",
    };
    match v["mode"].as_str().unwrap_or("") {
        "off" => match v["why"].as_object().and_then(|o| o.iter().next()) {
            Some((k, s)) if k == "disabled" => format!("off (disabled by the {})", source(s)),
            Some((_, s)) => format!("off ({}'s failover needs outlierDetection)", source(s)),
            None => "off".into(),
        },
        "distribute" => format!("distribute (from the {})", source(&v["source"])),
        "failover" => {
            let labels: Vec<String> = v["priority"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| match l["value"].as_str() {
                    Some(value) => format!("{}={value}", l["key"].as_str().unwrap_or("")),
                    None => l["key"].as_str().unwrap_or("").to_owned(),
                })
                .collect();
            let pairs: Vec<String> = v["failover"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| {
                    format!(
                        "{}→{}",
                        f["from"].as_str().unwrap_or(""),
                        f["to"].as_str().unwrap_or("")
                    )
                })
                .collect();
            format!(
                "failover (from the {}){}{}",
                source(&v["source"]),
                if labels.is_empty() {
                    String::new()
                } else {
                    format!(", failoverPriority {}", labels.join(","))
                },
                if pairs.is_empty() {
                    String::new()
                } else {
                    format!(", failover {}", pairs.join(" "))
                }
            )
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
    if let Some(d) = e["debouncing"].as_object() {
        let ms = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (since, within) = (ms("sinceMs"), ms("publishWithinMs"));
        out += &format!(
            "NOTE: a change arrived {since} ms ago and is still inside the debounce window: this report \
             shows the state before it; run again in {within} ms\n"
        );
    }
    out += &scope_text(&e["sidecar"]);
    out += &destination_rule_line(&e["destinationRule"]);
    for port in e["ports"].as_array().into_iter().flatten() {
        let discovery = port["discovery"].as_str().unwrap_or("EDS");
        let (port_n, name, cluster) = (&port["port"], s(&port["name"]), s(&port["edsCluster"]));
        out += &format!("\nport {port_n} ({name}), {discovery} cluster {cluster}\n");
        if let Some(names) = port["dnsNames"].as_array() {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            out += &format!("  resolved by the proxy: {}\n", names.join(", "));
        }
        if let Some(subset) = port["subset"].as_object() {
            let labels: Vec<String> = subset
                .get("labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            out += &format!(
                "  subset {}: {}\n",
                subset.get("name").and_then(Value::as_str).unwrap_or(""),
                if labels.is_empty() {
                    "every endpoint (no labels)".to_owned()
                } else {
                    labels.join(",")
                }
            );
        }
        if let Some(why) = port["notBuilt"].as_str() {
            out += &format!("  CLUSTER NOT BUILT: {why}: the traffic routed to it fails\n");
        }
        if !port["localityLb"].is_null() {
            out += &format!(
                "  locality load balancing: {}\n",
                locality_words(&port["localityLb"])
            );
        }
        out += &cluster_policy_rows(port);
        out += "\n  sent:\n";
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
                    ep["priority"].as_u64().map_or("-".into(), |p| p.to_string()),
                ]
            })
            .collect();
        out += &indent(&super::output::table(
            &[
                "ADDRESS", "KIND", "CLUSTER", "NETWORK", "LOCALITY", "WEIGHT", "HEALTH", "PRIORITY",
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
                    s(&ep["origin"]),
                    s(&ep["cluster"]),
                    s(&ep["network"]),
                    s(&ep["health"]).to_lowercase(),
                    s(&ep["tlsMode"]),
                    if ep["mtls"].is_null() {
                        "-".into()
                    } else {
                        mtls_words(&ep["mtls"])
                    },
                    priority_words(&ep["priority"]),
                    verdict_words(&ep["verdict"]),
                ]
            })
            .collect();
        out += &indent(&super::output::table(
            &[
                "ADDRESS", "ORIGIN", "CLUSTER", "NETWORK", "HEALTH", "TLS", "MTLS", "PRIORITY", "WHY",
            ],
            &eps,
        ));
        if !port["routes"].is_null() {
            out += &explain_routes_text(&port["routes"]);
        }
    }
    out
}

/// The routes section of one port: the VirtualService (or default route), then each route's match,
/// destinations and policies, then what this client ignores.
pub fn explain_routes_text(r: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let from = match r["virtualService"].as_str() {
        Some(vs) => format!("VirtualService {vs}"),
        None => "no VirtualService: the default route".to_owned(),
    };
    let mut out = format!("\n  routes (route config {}): {from}\n", s(&r["routeConfig"]));
    for shadowed in r["shadowed"].as_array().into_iter().flatten() {
        out += &format!(
            "    shadowed (same host, loses): VirtualService {}\n",
            s(shadowed)
        );
    }
    for route in r["routes"].as_array().into_iter().flatten() {
        let dests: Vec<String> = route["destinations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| match d["weight"].as_u64() {
                Some(w) => format!("{} ({w})", s(&d["cluster"])),
                None => s(&d["cluster"]),
            })
            .collect();
        let name = route["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or("(unnamed)");
        let to = route["answer"]
            .as_str()
            .map_or_else(|| dests.join(", "), str::to_owned);
        out += &format!("    {name}: {} → {to}\n", s(&route["match"]));
        out += &format!(
            "      timeout {}, retries {}\n",
            s(&route["timeout"]),
            route["retries"].as_str().unwrap_or("none")
        );
        if let Some(f) = route["fault"].as_str() {
            out += &format!("      fault: {f}\n");
        }
        let hash: Vec<String> = route["hash"].as_array().into_iter().flatten().map(s).collect();
        if !hash.is_empty() {
            out += &format!("      hash on {}\n", hash.join(", "));
        }
    }
    for ignored in r["ignored"].as_array().into_iter().flatten() {
        out += &format!("    ignored by this client: {}\n", s(ignored));
    }
    out
}

/// The Sidecar scope line of `meshctl explain`: which Sidecar applies and whether it hid the service.
fn scope_text(sc: &Value) -> String {
    if sc.is_null() {
        return String::new();
    }
    let sidecar = sc["sidecar"]
        .as_str()
        .map_or("none (every exported service)".into(), |n| format!("Sidecar {n}"));
    let mode = sc["outboundTrafficPolicy"].as_str().unwrap_or("-");
    let fate = match sc["hidden"]["reason"].as_str() {
        None => "visible".to_owned(),
        Some("notExported") => "hidden: not exported to the proxy's namespace (exportTo)".to_owned(),
        Some(_) => {
            let egress: Vec<&str> = sc["hidden"]["egress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!("hidden: not imported by the egress hosts [{}]", egress.join(", "))
        }
    };
    format!("scope {sidecar}, outbound {mode}: {fate}\n")
}

/// Which DestinationRule applied (every contributing one when several were merged).
fn destination_rule_line(r: &Value) -> String {
    let from: Vec<&str> = r["from"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if from.is_empty() {
        return "destination rule: none (defaults)\n".into();
    }
    format!(
        "destination rule: {} (host {})\n",
        from.join(", "),
        r["host"].as_str().unwrap_or("-")
    )
}

/// Per cluster of a port (the default, then each subset), what this proxy's client does with each
/// field of the rule: applies, downgraded to what, or ignored and why.
fn cluster_policy_rows(port: &Value) -> String {
    let mut rows = Vec::new();
    for c in port["clusters"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or("-").to_owned();
        let notes = c["notes"].as_array().map(Vec::as_slice).unwrap_or_default();
        if notes.is_empty() {
            rows.push(vec![name.clone(), "-".into(), "defaults".into()]);
        }
        for n in notes {
            let effect = match n["effect"].as_str().unwrap_or("") {
                "applies" => "applies".to_owned(),
                "downgraded" => format!("downgraded to {}", n["to"].as_str().unwrap_or("?")),
                "ignored" => format!("ignored: {}", n["why"].as_str().unwrap_or("?")),
                other => other.to_owned(),
            };
            rows.push(vec![
                name.clone(),
                n["field"].as_str().unwrap_or("-").to_owned(),
                effect,
            ]);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n  clusters:\n{}",
        indent(&super::output::table(&["CLUSTER", "FIELD", "EFFECT"], &rows))
    )
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
