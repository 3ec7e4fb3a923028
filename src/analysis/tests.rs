//! The analyzers on a two-cluster registry: references resolve in any cluster, and each message
//! names its object and code. Istio's own analyzer table runs in `tests/integration/analysis_istio.rs`.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::istio::{Kind, ObjectMeta, Source, parse};

fn config(kind: Kind, ns: &str, name: &str, spec: serde_json::Value) -> Arc<Config> {
    let meta = ObjectMeta {
        namespace: ns.into(),
        name: name.into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: None,
        source: Source::Cluster("cluster1".into()),
    };
    Arc::new(parse(kind, meta, &spec).expect("valid").0)
}

fn workload(cluster: &str, name: &str, labels: &[(&str, &str)]) -> Workload {
    Workload {
        namespace: "sample".into(),
        name: name.into(),
        cluster: cluster.into(),
        labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
    }
}

/// helloworld runs v1 in cluster1 and v2 in cluster2 only.
fn mesh(configs: Vec<Arc<Config>>) -> Input {
    let v1 = workload(
        "cluster1",
        "helloworld-v1",
        &[("app", "helloworld"), ("version", "v1")],
    );
    let v2 = workload(
        "cluster2",
        "helloworld-v2",
        &[("app", "helloworld"), ("version", "v2")],
    );
    Input {
        configs,
        services: vec![Service {
            hostname: "helloworld.sample.svc.cluster.local".into(),
            namespace: "sample".into(),
            ports: vec![5000],
            visibility: Visibility::Public,
            clusters: ["cluster1".to_owned(), "cluster2".to_owned()].into(),
            endpoints: vec![v1.clone(), v2.clone()],
        }],
        workloads: vec![v1, v2],
        settings: Settings::default(),
        dns_auto_allocate: false,
    }
}

fn codes(input: &Input) -> Vec<(String, String)> {
    analyze(input).into_iter().map(|m| (m.code, m.origin)).collect()
}

#[test]
fn a_subset_whose_pods_run_in_another_cluster_is_not_reported() {
    let dr = config(
        Kind::DestinationRule,
        "sample",
        "helloworld",
        json!({"host": "helloworld", "subsets": [
            {"name": "v1", "labels": {"version": "v1"}},
            {"name": "v2", "labels": {"version": "v2"}},
            {"name": "v3", "labels": {"version": "v3"}}]}),
    );
    let msgs = analyze(&mesh(vec![dr]));
    assert_eq!(msgs.len(), 1, "{msgs:#?}");
    assert_eq!(
        (msgs[0].code.as_str(), msgs[0].level, msgs[0].origin.as_str()),
        ("IST0173", Level::Error, "DestinationRule sample/helloworld")
    );
    assert!(
        msgs[0]
            .message
            .starts_with("The Subset v3 defined in the DestinationRule")
            && msgs[0]
                .message
                .contains("clusters with endpoints: cluster1, cluster2")
            && msgs[0].message.contains("version=v3"),
        "{}",
        msgs[0].message
    );
}

#[test]
fn each_analyzer_reports_its_code() {
    let vs = |name: &str, spec| config(Kind::VirtualService, "sample", name, spec);
    // (name, objects, (code, origin) expected)
    type Case<'a> = (&'a str, Vec<Arc<Config>>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        (
            "nothing wrong",
            vec![vs(
                "ok",
                json!({"hosts": ["helloworld"], "http": [{"route": [{"destination": {"host": "helloworld"}}]}]}),
            )],
            vec![],
        ),
        (
            "unknown host and subset",
            vec![vs(
                "bad",
                json!({"hosts": ["helloworld"], "http": [{"route": [
                {"destination": {"host": "nowhere"}, "weight": 50},
                {"destination": {"host": "helloworld", "subset": "v9"}, "weight": 50}]}]}),
            )],
            vec![
                ("IST0101", "VirtualService sample/bad"),
                ("IST0101", "VirtualService sample/bad"),
            ],
        ),
        (
            "unknown port",
            vec![vs(
                "port",
                json!({"hosts": ["helloworld"], "http": [{"route": [{"destination": {"host": "helloworld", "port": {"number": 80}}}]}]}),
            )],
            vec![("IST0101", "VirtualService sample/port")],
        ),
        (
            "missing gateway, so no host in it either",
            vec![vs(
                "gw",
                json!({"hosts": ["hello.example.com"], "gateways": ["nope"], "http": [{"route": [{"destination": {"host": "helloworld"}}]}]}),
            )],
            vec![
                ("IST0101", "VirtualService sample/gw"),
                ("IST0132", "VirtualService sample/gw"),
            ],
        ),
        (
            "two mesh VirtualServices for one host",
            vec![
                vs(
                    "a",
                    json!({"hosts": ["helloworld"], "http": [{"route": [{"destination": {"host": "helloworld"}}]}]}),
                ),
                vs(
                    "b",
                    json!({"hosts": ["helloworld.sample.svc.cluster.local"], "http": [{"route": [{"destination": {"host": "helloworld"}}]}]}),
                ),
            ],
            vec![
                ("IST0109", "VirtualService sample/a"),
                ("IST0109", "VirtualService sample/b"),
            ],
        ),
        (
            "a rule after a catch-all",
            vec![vs(
                "order",
                json!({"hosts": ["helloworld"], "http": [
                {"route": [{"destination": {"host": "helloworld"}}]},
                {"match": [{"uri": {"prefix": "/a"}}], "route": [{"destination": {"host": "helloworld"}}]}]}),
            )],
            vec![("IST0130", "VirtualService sample/order")],
        ),
        (
            "a DestinationRule for no service",
            vec![config(
                Kind::DestinationRule,
                "sample",
                "ghost",
                json!({"host": "ghost"}),
            )],
            vec![("IST0174", "DestinationRule sample/ghost")],
        ),
        (
            "a Sidecar selecting nothing, a PeerAuthentication selecting nothing",
            vec![
                config(
                    Kind::Sidecar,
                    "sample",
                    "sc",
                    json!({"workloadSelector": {"labels": {"app": "nope"}}, "egress": [{"hosts": ["./*"]}]}),
                ),
                config(
                    Kind::PeerAuthentication,
                    "sample",
                    "pa",
                    json!({"selector": {"matchLabels": {"app": "nope"}}, "mtls": {"mode": "STRICT"}}),
                ),
            ],
            vec![
                ("IST0101", "Sidecar sample/sc"),
                ("IST0127", "PeerAuthentication sample/pa"),
            ],
        ),
        (
            "a Sidecar selecting a pod in cluster2 only",
            vec![config(
                Kind::Sidecar,
                "sample",
                "sc",
                json!({"workloadSelector": {"labels": {"version": "v2"}}, "egress": [{"hosts": ["./*"]}]}),
            )],
            vec![],
        ),
        (
            "TLS off towards STRICT workloads",
            vec![
                config(
                    Kind::DestinationRule,
                    "sample",
                    "plain",
                    json!({"host": "helloworld", "trafficPolicy": {"tls": {"mode": "DISABLE"}}}),
                ),
                config(
                    Kind::PeerAuthentication,
                    "sample",
                    "strict",
                    json!({"mtls": {"mode": "STRICT"}}),
                ),
            ],
            vec![("IST0113", "DestinationRule sample/plain")],
        ),
        (
            "a TCP ServiceEntry without addresses",
            vec![config(
                Kind::ServiceEntry,
                "sample",
                "db",
                json!({"hosts": ["db.example.com"], "ports": [{"number": 5432, "name": "tcp", "protocol": "TCP"}], "resolution": "DNS"}),
            )],
            vec![("IST0134", "ServiceEntry sample/db")],
        ),
    ];
    for (name, configs, want) in cases {
        let want: Vec<(String, String)> = want.into_iter().map(|(c, o)| (c.into(), o.into())).collect();
        assert_eq!(codes(&mesh(configs)), want, "{name}");
    }
}

#[test]
fn levels_parse_case_insensitively_and_order_by_severity() {
    assert_eq!(Level::parse("error"), Some(Level::Error));
    assert_eq!(Level::parse("WARNING"), Some(Level::Warning));
    assert_eq!(Level::parse("loud"), None);
    assert!(Level::Info < Level::Warning && Level::Warning < Level::Error);
}
