use serde_json::json;

use super::*;

fn row(status: &str, secret: &str, err: Option<&str>) -> ClusterzRow {
    ClusterzRow {
        id: "c".into(),
        secret_name: secret.into(),
        sync_status: status.into(),
        last_error: err.map(Into::into),
    }
}

#[test]
fn remote_cluster_status_and_reason() {
    // (clusterz status, last error) → (status, reason contains)
    let cases = [
        ("synced", None, "synced", ""),
        (
            "synced",
            Some("unreachable: API server https://10.0.0.1:6443: connection refused"),
            "synced",
            "now failing: unreachable: API server https://10.0.0.1:6443",
        ),
        ("syncing", None, "syncing", "initial list"),
        (
            "syncing",
            Some("connection refused"),
            "syncing",
            "last error: connection refused",
        ),
        (
            "timeout",
            Some("401 Unauthorized"),
            "timeout",
            "remote-cluster timeout",
        ),
        ("timeout", None, "timeout", "still retrying"),
        ("closed", None, "closed", "stopped"),
        (
            "error: kubeconfig exec plugin is not allowed",
            None,
            "error",
            "exec plugin",
        ),
    ];
    for (status, err, want_status, want_reason) in cases {
        let r = remote_cluster(&row(status, "istio-system/s", err));
        assert_eq!(r.status, want_status, "{status}");
        assert!(r.reason.contains(want_reason), "{status}: {:?}", r.reason);
        assert_eq!(r.reason.is_empty(), want_reason.is_empty(), "{status}");
    }
    assert_eq!(remote_cluster(&row("synced", "", None)).secret, "-");
}

#[test]
fn per_type_sync_states() {
    let t = |sent: &str, acked: &str| TypeSync {
        sent: sent.into(),
        acked: acked.into(),
        last_error: String::new(),
    };
    let cases = [
        (None, "NOT SENT"),
        (Some(t("", "")), "NOT SENT"),
        (Some(t("3", "3")), "SYNCED"),
        (Some(t("4", "3")), "STALE"),
        (Some(t("4", "")), "STALE"),
    ];
    for (input, want) in cases {
        assert_eq!(sync_state(input.as_ref()), want, "{input:?}");
    }
}

#[test]
fn proxy_status_row_names_the_nack() {
    let s: SyncStatus = serde_json::from_value(json!({
        "proxy": "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local",
        "cluster_id": "cluster1",
        "network": "network1",
        "resources": {
            XdsType::Cluster.url(): {"sent": "2", "acked": "2", "lastError": ""},
            XdsType::Endpoint.url(): {"sent": "3", "acked": "1", "lastError": "bad endpoint"},
        },
    }))
    .unwrap();
    let p = proxy_status(&s);
    assert_eq!(
        (p.status["CDS"], p.status["EDS"], p.status["LDS"]),
        ("SYNCED", "STALE", "NOT SENT")
    );
    assert_eq!(p.last_nack, "EDS: bad endpoint");
    let table = crate::output::table(
        &ProxyStatuses(vec![p.clone()]).header(),
        &ProxyStatuses(vec![p]).cells(),
    );
    assert!(table.starts_with("NAME "), "{table}");
}

#[test]
fn verdicts_in_words() {
    let gw = json!({"network": "network2", "address": "198.51.100.10", "port": 15443});
    let cases = [
        (
            json!({"decision": "direct", "why": "sameNetwork", "weight": 2}),
            "sent directly, weight 2: same network",
        ),
        (
            json!({"decision": "viaGateways", "gateways": [gw], "share": 2}),
            "through network2's gateway 198.51.100.10:15443 with weight 2 each",
        ),
        (
            json!({"decision": "dropped", "why": "notMtls"}),
            "DROPPED: not mTLS-capable",
        ),
        (
            json!({"decision": "dropped", "why": "unhealthy"}),
            "DROPPED: unhealthy",
        ),
        (
            json!({"decision": "dropped", "why": "outsideNetworkView"}),
            "DROPPED: outside the proxy's REQUESTED_NETWORK_VIEW",
        ),
    ];
    for (v, want) in cases {
        let got = verdict_words(&v);
        assert!(got.starts_with(want), "{got}");
    }
}

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

#[test]
fn explain_sent_rows_show_kind_locality_weight_and_health() {
    let report = json!({
        "proxy": "p", "view": {"network": "network1", "requestedNetworkView": []}, "service": "h",
        "ports": [{"port": 5000, "name": "http", "edsCluster": "outbound|5000||h", "endpoints": [],
                   "sent": [
                       {"address": "10.10.2.4", "port": 5000, "cluster": "cluster1", "network": "network1",
                        "locality": {"region": "r", "zone": "a", "subzone": ""}, "weight": 1,
                        "health": "Unhealthy", "gateway": false},
                       {"address": "198.51.100.10", "port": 15443, "cluster": "cluster2", "network": "network2",
                        "locality": {"region": "r", "zone": "a", "subzone": ""}, "weight": 2,
                        "health": "Healthy", "gateway": true}]}],
    });
    let text = explain_text(&report);
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.contains("ADDRESS"))
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![
                "ADDRESS", "KIND", "CLUSTER", "NETWORK", "LOCALITY", "WEIGHT", "HEALTH"
            ],
            vec![
                "10.10.2.4:5000",
                "endpoint",
                "cluster1",
                "network1",
                "r/a/",
                "1",
                "unhealthy"
            ],
            vec![
                "198.51.100.10:15443",
                "gateway",
                "cluster2",
                "network2",
                "r/a/",
                "2",
                "healthy"
            ],
        ]
    );
}
