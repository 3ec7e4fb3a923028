use serde_json::json;

use super::*;

fn row(status: &str, secret: &str, err: Option<&str>) -> ClusterzRow {
    ClusterzRow {
        id: "c".into(),
        secret_name: secret.into(),
        sync_status: status.into(),
        last_error: err.map(Into::into),
        discovery_selectors: None,
        stale_endpoints: None,
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
fn the_discovery_selectors_column_shows_only_when_a_remote_overrides_them() {
    let plain = RemoteClusters(vec![remote_cluster(&row("synced", "", None))]);
    assert_eq!(plain.header(), ["NAME", "SECRET", "STATUS", "REASON"]);
    let mut own = row("synced", "istio-system/s", None);
    own.discovery_selectors = Some(json!([{"matchLabels": {"team": "a"}}]));
    let both = RemoteClusters(vec![
        remote_cluster(&row("synced", "", None)),
        remote_cluster(&own),
    ]);
    assert_eq!(both.header().last(), Some(&"DISCOVERY SELECTORS"));
    let cells = both.cells();
    assert_eq!(cells[0][4], "mesh-wide");
    assert_eq!(cells[1][4], r#"[{"matchLabels":{"team":"a"}}]"#);
}

#[test]
fn the_stale_endpoints_column_shows_only_when_a_policy_acts_or_is_in_force() {
    let stale = |action: &str, since: Option<&str>, stale: bool| {
        let mut r = row("synced", "istio-system/s", None);
        r.stale_endpoints = Some(Stale {
            action: action.into(),
            after: "5m".into(),
            unreachable_since: since.map(Into::into),
            stale,
        });
        remote_cluster(&r)
    };
    let own = remote_cluster(&row("synced", "", None));
    let keep = RemoteClusters(vec![
        own.clone(),
        stale("keep", Some("2026-11-27T20:00:00Z"), false),
    ]);
    assert_eq!(keep.header(), ["NAME", "SECRET", "STATUS", "REASON"]);
    let cases = [
        (stale("drop", None, false), "drop after 5m"),
        (
            stale("deprioritize", Some("2026-11-27T20:00:00Z"), false),
            "unreachable since 2026-11-27T20:00:00Z: deprioritize after 5m",
        ),
        (
            stale("keep", Some("2026-11-27T20:00:00Z"), true),
            "STALE since 2026-11-27T20:00:00Z: keep",
        ),
    ];
    for (remote, want) in cases {
        let rows = RemoteClusters(vec![own.clone(), remote]);
        assert_eq!(rows.header().last(), Some(&"STALE ENDPOINTS"), "{want}");
        assert_eq!(rows.cells()[0][4], "", "the config cluster has no policy");
        assert_eq!(rows.cells()[1][4], want);
    }
}

#[test]
fn per_type_sync_states() {
    let t = |sent: &str, acked: &str| TypeSync {
        sent: sent.into(),
        acked: acked.into(),
        last_error: String::new(),
        ..TypeSync::default()
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
    assert_eq!(p.waiting_for, "");
    let table = crate::output::table(
        &ProxyStatuses(vec![p.clone()]).header(),
        &ProxyStatuses(vec![p]).cells(),
    );
    assert!(table.starts_with("NAME "), "{table}");
}

#[test]
fn proxy_status_row_names_what_the_proxy_waits_for() {
    let sync = |cds: usize, eds: usize| -> SyncStatus {
        let names =
            |n: usize, prefix: &str| (0..n.min(2)).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
        serde_json::from_value(json!({
            "proxy": "proxyless~10.0.0.1~a.ns~ns.svc.cluster.local",
            "resources": {
                XdsType::Cluster.url(): {"sent": "2", "acked": "2", "waiting": cds, "waitingNames": names(cds, "c")},
                XdsType::Endpoint.url(): {"sent": "3", "acked": "3", "waiting": eds, "waitingNames": names(eds, "e")},
            },
        }))
        .unwrap()
    };
    let cases = [
        (0, 0, ""),
        (1, 0, "CDS c0"),
        (0, 3, "EDS e0 (+2 more)"),
        (2, 1, "CDS c0 (+1 more); EDS e0"),
    ];
    for (cds, eds, want) in cases {
        let p = proxy_status(&sync(cds, eds));
        assert_eq!(p.waiting_for, want, "cds {cds} eds {eds}");
        // Waiting is shown beside the state, not instead of it: every nonce was ACKed.
        assert_eq!((p.status["CDS"], p.status["EDS"]), ("SYNCED", "SYNCED"));
    }
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

#[test]
fn explain_names_what_a_sidecar_hid() {
    let report =
        |sidecar: Value| json!({"proxy": "p", "view": {}, "service": "h", "ports": [], "sidecar": sidecar});
    let cases = [
        (
            json!({"sidecar": null, "outboundTrafficPolicy": "ALLOW_ANY", "visible": true}),
            "scope none (every exported service), outbound ALLOW_ANY: visible",
        ),
        (
            json!({"sidecar": "a/default", "outboundTrafficPolicy": "REGISTRY_ONLY", "visible": false,
                   "hidden": {"reason": "notImported", "egress": ["b/echo", "./*"]}}),
            "scope Sidecar a/default, outbound REGISTRY_ONLY: hidden: not imported by the egress hosts [b/echo, ./*]",
        ),
        (
            json!({"sidecar": null, "outboundTrafficPolicy": "ALLOW_ANY", "visible": false,
                   "hidden": {"reason": "notExported"}}),
            "scope none (every exported service), outbound ALLOW_ANY: hidden: not exported to the proxy's namespace (exportTo)",
        ),
    ];
    for (sidecar, want) in cases {
        let text = explain_text(&report(sidecar));
        assert_eq!(text.lines().nth(2), Some(want), "{text}");
    }
}

#[test]
fn explain_names_the_rule_and_what_the_client_does_with_each_field() {
    let report = json!({
        "proxy": "p", "view": {"network": "network1", "requestedNetworkView": []}, "service": "h",
        "destinationRule": {"from": ["DestinationRule default/h"], "host": "h"},
        "ports": [{"port": 80, "name": "grpc", "edsCluster": "outbound|80||h", "endpoints": [], "sent": [],
                   "clusters": [
                       {"name": "outbound|80||h", "notes": []},
                       {"name": "outbound|80|v1|h", "subset": "v1", "notes": [
                           {"field": "loadBalancer.simple", "effect": "downgraded", "to": "ROUND_ROBIN"},
                           {"field": "outlierDetection.consecutive5xxErrors", "effect": "ignored",
                            "why": "gRPC ejects only on success rate"},
                           {"field": "tls.mode", "effect": "applies"}]}]}],
    });
    let text = explain_text(&report);
    assert!(
        text.contains("destination rule: DestinationRule default/h (host h)"),
        "{text}"
    );
    let rows: Vec<String> = text
        .lines()
        .skip_while(|l| !l.contains("FIELD"))
        .skip(1)
        .take(4)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        rows,
        [
            "outbound|80||h - defaults",
            "outbound|80|v1|h loadBalancer.simple downgraded to ROUND_ROBIN",
            "outbound|80|v1|h outlierDetection.consecutive5xxErrors ignored: gRPC ejects only on success rate",
            "outbound|80|v1|h tls.mode applies",
        ]
    );
    let none = explain_text(&json!({"proxy": "p", "view": {}, "service": "h", "ports": []}));
    assert!(none.contains("destination rule: none (defaults)"), "{none}");
    assert!(!none.contains("debounce"), "{none}");
}

#[test]
fn explain_says_when_a_change_is_inside_the_debounce_window() {
    let report = json!({"proxy": "p", "view": {}, "service": "h", "ports": [],
                        "debouncing": {"sinceMs": 40, "publishWithinMs": 60}});
    let text = explain_text(&report);
    assert!(
        text.contains("NOTE: a change arrived 40 ms ago and is still inside the debounce window")
            && text.contains("run again in 60 ms"),
        "{text}"
    );
}

#[test]
fn mtls_priority_and_locality_in_words() {
    let pa = json!({"enabled": false, "why": {"by": "peerAuthentication", "mode": "DISABLE",
                    "from": {"kind": "PeerAuthentication", "namespace": "app", "name": "off"}}});
    assert_eq!(mtls_words(&pa), "no: PeerAuthentication app/off DISABLE");
    let auto = json!({"enabled": true, "why": {"by": "peerAuthentication", "mode": "PERMISSIVE"}});
    assert_eq!(mtls_words(&auto), "yes: auto-mTLS (PERMISSIVE by default)");
    let dr = json!({"enabled": false, "why": {"by": "destinationRule", "mode": "DISABLE", "from": []}});
    assert_eq!(mtls_words(&dr), "no: DestinationRule tls DISABLE");
    let cases = [
        (json!(null), "-"),
        (json!({"priority": 0}), "0"),
        (
            json!({"priority": 1, "why": {"labelMismatch": {"index": 0, "key": "topology.istio.io/network",
                   "want": "n1", "got": "n2"}}}),
            "1: topology.istio.io/network differs (n1 ≠ n2)",
        ),
        (
            json!({"priority": 3, "why": {"ladder": {"match": "notFailoverTarget", "from": "r1", "to": "r3"}}}),
            "3: not r1's failover region r3",
        ),
        (
            json!({"priority": 0, "why": {"ladder": {"match": "sameZone"}}}),
            "0: same zone",
        ),
        (
            json!({"priority": 0, "why": {"distribute": ["r1/*", "r2", 20]}}),
            "0: distribute r1/* → r2 20%",
        ),
        (
            json!({"priority": 0, "why": {"distribute": null}}),
            "0: no distribute entry: emptied",
        ),
        (
            json!({"priority": 0, "why": {}}),
            "0: every failoverPriority label matches",
        ),
    ];
    for (v, want) in cases {
        assert_eq!(priority_words(&v), want);
    }
    let modes = [
        (
            json!({"mode": "off", "why": {"noOutlierDetection": "meshConfig"}}),
            "off (MeshConfig's failover needs outlierDetection)",
        ),
        (
            json!({"mode": "off", "why": {"disabled": "destinationRule"}}),
            "off (disabled by the DestinationRule)",
        ),
        (
            json!({"mode": "failover", "source": "destinationRule", "failover": [{"from": "r1", "to": "r3"}],
                   "priority": [{"key": "topology.istio.io/network"}, {"key": "k", "value": "v"}]}),
            "failover (from the DestinationRule), failoverPriority topology.istio.io/network,k=v, failover r1→r3",
        ),
    ];
    for (v, want) in modes {
        assert_eq!(locality_words(&v), want);
    }
}

#[test]
fn explain_routes_show_the_virtual_service_weights_and_ignored_fields() {
    let routes = json!({
        "routeConfig": "outbound|9080||r", "virtualService": "default/r", "shadowed": ["default/old"],
        "routes": [{"name": "split", "match": "prefix /", "timeout": "0s", "retries": "2 on unavailable",
                    "fault": "abort with gRPC status 14 for 50%", "hash": [],
                    "destinations": [{"cluster": "outbound|9080|v1|r", "weight": 80},
                                     {"cluster": "outbound|9080|v2|r", "weight": 20}]}],
        "ignored": ["spec.http[0].headers (gRPC does not rewrite headers)"],
    });
    let text = explain_routes_text(&routes);
    for want in [
        "VirtualService default/r",
        "shadowed (same host, loses): VirtualService default/old",
        "split: prefix / → outbound|9080|v1|r (80), outbound|9080|v2|r (20)",
        "fault: abort with gRPC status 14 for 50%",
        "ignored by this client: spec.http[0].headers",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    let default = explain_routes_text(&json!({"routeConfig": "9080", "virtualService": null, "routes": []}));
    assert!(
        default.contains("no VirtualService: the default route"),
        "{default}"
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
                        "health": "Unhealthy", "gateway": false, "priority": 0},
                       {"address": "198.51.100.10", "port": 15443, "cluster": "cluster2", "network": "network2",
                        "locality": {"region": "r", "zone": "a", "subzone": ""}, "weight": 2,
                        "health": "Healthy", "gateway": true, "priority": 1}]}],
    });
    let text = explain_text(&report);
    assert!(!text.contains("scope"), "no scope section, no line");
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
                "ADDRESS", "KIND", "CLUSTER", "NETWORK", "LOCALITY", "WEIGHT", "HEALTH", "PRIORITY"
            ],
            vec![
                "10.10.2.4:5000",
                "endpoint",
                "cluster1",
                "network1",
                "r/a/",
                "1",
                "unhealthy",
                "0"
            ],
            vec![
                "198.51.100.10:15443",
                "gateway",
                "cluster2",
                "network2",
                "r/a/",
                "2",
                "healthy",
                "1"
            ],
        ]
    );
}

#[test]
fn explain_names_the_discovery_type_and_the_names_a_dns_cluster_resolves() {
    let port = |extra: serde_json::Value| {
        let mut p =
            json!({"port": 80, "name": "http", "edsCluster": "outbound|80||h", "endpoints": [], "sent": []});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        explain_text(
            &json!({"proxy": "p", "view": {"network": null, "requestedNetworkView": []}, "service": "h",
                             "ports": [p]}),
        )
    };
    let dns = port(json!({"discovery": "STRICT_DNS", "dnsNames": ["a.example:443", "b.example:443"]}));
    assert!(dns.contains("port 80 (http), STRICT_DNS cluster outbound|80||h\n  resolved by the proxy: a.example:443, b.example:443\n"), "{dns}");
    // Older meshd reports have no discovery type: their clusters were EDS.
    let eds = port(json!({}));
    assert!(
        eds.contains("port 80 (http), EDS cluster outbound|80||h\n") && !eds.contains("resolved"),
        "{eds}"
    );
}
