//! `meshctl proxy-config`: istioctl's tables of what a proxy holds, read from the Envoy admin `ConfigDump`
//! that `/debug/config_dump` returns (pure; tests below).

use serde_json::Value;

use super::output::table;

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
    #[value(alias = "cluster")]
    Clusters,
    /// EDS: `EndpointsConfigDump`.
    #[value(alias = "endpoint")]
    Endpoints,
    /// LDS: `ListenersConfigDump`.
    #[value(alias = "listener")]
    Listeners,
    /// RDS: `RoutesConfigDump`.
    #[value(alias = "route")]
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
mod tests {
    use serde_json::json;

    use super::*;

    /// A config dump as meshd renders it (abridged): one section per kind.
    fn config_dump() -> Value {
        let any = |ty: &str| format!("type.googleapis.com/envoy.{ty}");
        json!({"configs": [
            {"@type": any("admin.v3.ClustersConfigDump"), "version_info": "3", "dynamic_active_clusters": [
                {"version_info": "a", "cluster": {"@type": any("config.cluster.v3.Cluster"),
                    "name": "PassthroughCluster", "type": "ORIGINAL_DST"}},
                {"version_info": "b", "cluster": {"@type": any("config.cluster.v3.Cluster"),
                    "name": "outbound|5000||helloworld.sample.svc.cluster.local", "type": "EDS"}},
                {"version_info": "c", "cluster": {"@type": any("config.cluster.v3.Cluster"),
                    "name": "outbound_.5000_._.helloworld.sample.svc.cluster.local"}},
            ]},
            {"@type": any("admin.v3.ListenersConfigDump"), "dynamic_listeners": [
                {"name": "helloworld.sample.svc.cluster.local:5000", "active_state": {"listener": {
                    "@type": any("config.listener.v3.Listener"), "name": "helloworld.sample.svc.cluster.local:5000",
                    "api_listener": {"api_listener": {"@type": any("extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"),
                        "rds": {"route_config_name": "helloworld.sample.svc.cluster.local:5000"}}}}}},
                {"name": "0.0.0.0_15001", "active_state": {"listener": {
                    "@type": any("config.listener.v3.Listener"), "name": "0.0.0.0_15001",
                    "address": {"socket_address": {"address": "0.0.0.0", "port_value": 15001}},
                    "filter_chains": [
                        {"filter_chain_match": {"prefix_ranges": [{"address_prefix": "10.96.0.20", "prefix_len": 32}]},
                         "filters": [{"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                            "@type": any("extensions.filters.network.tcp_proxy.v3.TcpProxy"),
                            "cluster": "outbound|5432||db.default.svc.cluster.local"}}]},
                        {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
                            "@type": any("extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"),
                            "rds": {"route_config_name": "80"}}}]},
                        {"filter_chain_match": {"server_names": ["a", "b"], "transport_protocol": "tls"}},
                    ]}}},
            ]},
            {"@type": any("admin.v3.RoutesConfigDump"), "dynamic_route_configs": [
                {"route_config": {"@type": any("config.route.v3.RouteConfiguration"), "name": "80", "virtual_hosts": [
                    {"name": "echo.default.svc.cluster.local:80",
                     "domains": ["echo.default.svc.cluster.local", "echo", "10.96.0.10"],
                     "routes": [{"match": {"prefix": "/"}}, {"match": {"path": "/healthz"}}, {"match": {}}]},
                ]}},
            ]},
            {"@type": any("admin.v3.EndpointsConfigDump"), "dynamic_endpoint_configs": [
                {"endpoint_config": {"@type": any("config.endpoint.v3.ClusterLoadAssignment"),
                    "cluster_name": "outbound|5000||helloworld.sample.svc.cluster.local",
                    "endpoints": [
                        {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.10.0.7", "port_value": 5000}}}, "health_status": "HEALTHY"}]},
                        {"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "10.10.2.4", "port_value": 5000}}}, "health_status": "UNHEALTHY"},
                                          {"endpoint": {"address": {"socket_address": {"address": "198.51.100.10", "port_value": 15443}}}}]},
                    ]}},
            ]},
        ]})
    }

    #[test]
    fn proxy_config_sections_by_type() {
        let dump = config_dump();
        for kind in [
            ConfigKind::Clusters,
            ConfigKind::Endpoints,
            ConfigKind::Listeners,
            ConfigKind::Routes,
        ] {
            assert_eq!(dump_section(&dump, kind)["@type"], kind.section_type());
        }
        assert_eq!(dump_section(&json!({}), ConfigKind::Clusters), Value::Null);
        assert!(cluster_rows(&Value::Null).is_empty());
    }

    #[test]
    fn proxy_config_clusters_parse_istio_names() {
        let rows = cluster_rows(&dump_section(&config_dump(), ConfigKind::Clusters));
        let got: Vec<[&str; 5]> = rows
            .iter()
            .map(|r| [&*r.service_fqdn, &r.port, &r.subset, &r.direction, &r.r#type])
            .collect();
        assert_eq!(
            got,
            [
                ["PassthroughCluster", "-", "-", "-", "ORIGINAL_DST"],
                [
                    "helloworld.sample.svc.cluster.local",
                    "5000",
                    "-",
                    "outbound",
                    "EDS"
                ],
                [
                    "helloworld.sample.svc.cluster.local",
                    "5000",
                    "-",
                    "outbound",
                    "STATIC"
                ],
            ]
        );
    }

    #[test]
    fn proxy_config_endpoints_listeners_routes() {
        let dump = config_dump();
        let eps = endpoint_rows(&dump_section(&dump, ConfigKind::Endpoints));
        let got: Vec<(&str, &str)> = eps.iter().map(|e| (&*e.endpoint, &*e.status)).collect();
        assert_eq!(
            got,
            [
                ("10.10.0.7:5000", "HEALTHY"),
                ("10.10.2.4:5000", "UNHEALTHY"),
                ("198.51.100.10:15443", "UNKNOWN")
            ]
        );
        assert!(
            eps.iter()
                .all(|e| e.cluster == "outbound|5000||helloworld.sample.svc.cluster.local")
        );

        let ls = listener_rows(&dump_section(&dump, ConfigKind::Listeners));
        let got: Vec<[&str; 4]> = ls
            .iter()
            .map(|l| [&*l.address, &l.port, &l.r#match, &l.destination])
            .collect();
        assert_eq!(
            got,
            [
                ["-", "-", "-", "Route: helloworld.sample.svc.cluster.local:5000"],
                [
                    "0.0.0.0",
                    "15001",
                    "Addr: 10.96.0.20/32",
                    "Cluster: outbound|5432||db.default.svc.cluster.local"
                ],
                ["0.0.0.0", "15001", "ALL", "Route: 80"],
                ["0.0.0.0", "15001", "SNI: a,b; Trans: tls", "-"],
            ]
        );

        let routes = route_rows(&dump_section(&dump, ConfigKind::Routes));
        let got: Vec<[&str; 4]> = routes
            .iter()
            .map(|r| [&*r.name, &r.vhost, &r.domains, &r.r#match])
            .collect();
        let vhost = "echo.default.svc.cluster.local:80";
        let domains = "echo.default.svc.cluster.local +2 more";
        assert_eq!(
            got,
            [
                ["80", vhost, domains, "/*"],
                ["80", vhost, domains, "/healthz"],
                ["80", vhost, domains, "/*"],
            ]
        );
    }

    #[test]
    fn proxy_config_tables_have_istioctl_headers() {
        let dump = config_dump();
        let first_line = |kind| {
            proxy_config_table(kind, &dump_section(&dump, kind))
                .lines()
                .next()
                .unwrap()
                .split("  ")
                .filter(|c| !c.is_empty())
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            first_line(ConfigKind::Clusters),
            ["SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE"]
        );
        assert_eq!(
            first_line(ConfigKind::Endpoints),
            ["ENDPOINT", "STATUS", "CLUSTER"]
        );
        assert_eq!(
            first_line(ConfigKind::Listeners),
            ["NAME", "ADDRESSES", "PORT", "MATCH", "DESTINATION"]
        );
        assert_eq!(
            first_line(ConfigKind::Routes),
            ["NAME", "VHOST NAME", "DOMAINS", "MATCH"]
        );
        let clusters = proxy_config_table(ConfigKind::Clusters, &dump_section(&dump, ConfigKind::Clusters));
        assert!(
            clusters.contains("\nhelloworld.sample.svc.cluster.local  5000  -       outbound   EDS\n"),
            "{clusters}"
        );
    }
}
