//! The explain report against a two-network mesh: every verdict, and the sent set it must agree with.
//! Random meshes, where "sent" must equal the decoded EDS resource, are in `explain_wire_tests.rs`.

use std::{net::IpAddr, sync::Arc};

use envoy_types::pb::{envoy::config::endpoint::v3::ClusterLoadAssignment, google::protobuf::value::Kind};
use prost::Message;

use super::*;
use crate::{
    envoy::split_horizon::{Direct, Dropped},
    envoy::{
        ProxyKind, XdsType,
        {Context, StaticMesh, scope_of, static_mesh::service},
    },
    model::{Endpoint, EndpointPort, Labels, Placement, Protocol, WorkloadInfo},
    xds::{Subscription, cache::ResourceCache, generate::generate},
};

fn ep(ip: &str, network: &str, cluster: &str, mtls: bool, healthy: bool) -> Endpoint {
    Endpoint {
        address: ip.parse().unwrap(),
        ports: Arc::new([EndpointPort {
            service_port_name: "http".into(),
            port: 5000,
        }]),
        placement: Placement::new(cluster.into(), Some(network.into()), Locality::default()),
        info: WorkloadInfo::new(Labels::default(), None),
        workload_meta: crate::model::workload_meta("", "", &Default::default(), cluster),
        tls_mode: if mtls { TlsMode::Istio } else { TlsMode::Disabled },
        health: if healthy {
            Health::Healthy
        } else {
            Health::Unhealthy
        },
        workload: None,
        kind: crate::model::WorkloadKind::Pod,
        weight: 1,
    }
}

fn gw(network: &str, cluster: &str, ip: &str) -> NetworkGateway {
    NetworkGateway {
        network: network.into(),
        cluster: Some(cluster.into()),
        address: ip.parse().unwrap(),
        port: 15443,
        hostname: None,
    }
}

fn mesh() -> StaticMesh {
    let svc = service("hello", "sample", &[("http", 5000, Protocol::Http)]);
    let eps = vec![
        ep("10.10.0.1", "network1", "cluster1", true, true),
        ep("10.10.0.2", "network1", "cluster1", true, false),
        ep("10.20.0.1", "network2", "cluster2", true, true),
        ep("10.20.0.2", "network2", "cluster2", true, true),
        ep("10.20.0.3", "network2", "cluster2", false, true),
        ep("10.20.0.4", "network2", "cluster2", true, false),
    ];
    let mut m = StaticMesh::new(1).with(svc, eps);
    m.gateways = vec![
        gw("network1", "cluster1", "192.0.2.10"),
        gw("network2", "cluster2", "198.51.100.10"),
        gw("network2", "cluster2", "198.51.100.11"),
    ];
    m
}

fn proxy(kind: ProxyKind, network: Option<&str>, requested: &[&str]) -> Proxy {
    Proxy {
        id: "p".into(),
        kind,
        cluster_id: None,
        network: network.map(Into::into),
        requested_network_view: requested.iter().map(|n| (*n).into()).collect(),
        namespace: Some("sample".into()),
        labels: Default::default(),
        ips: vec![],
        service_account: None,
        istio_version: None,
        locality: Locality::default(),
        user_agent: String::new(),
    }
}

fn sidecar(network: &str, requested: &[&str]) -> Proxy {
    proxy(ProxyKind::Sidecar, Some(network), requested)
}

/// A verdict in one word (plus the gateway count and share), for compact tables.
fn short(v: &Verdict) -> String {
    match v {
        Verdict::Direct { why, weight } => format!("direct {why:?} w={weight}"),
        Verdict::ViaGateways { gateways, share } => format!("via {} gw share={share}", gateways.len()),
        Verdict::Dropped { why } => format!("dropped {why:?}"),
    }
}

#[test]
fn every_endpoint_gets_the_filters_verdict() {
    // (case, view, the verdict of each endpoint in input order, the sent addresses with weights)
    let cases: [(&str, Proxy, [&str; 6], &[&str]); 3] = [
        (
            "network1 proxy: local direct, remote through cluster2's two gateways",
            sidecar("network1", &[]),
            [
                "direct SameNetwork w=2",
                "direct SameNetwork w=2",
                "via 2 gw share=1",
                "via 2 gw share=1",
                "dropped NotMtls",
                "dropped Unhealthy",
            ],
            &[
                "10.10.0.1 w=2",
                "10.10.0.2 w=2",
                "198.51.100.10 w=2",
                "198.51.100.11 w=2",
            ],
        ),
        (
            "network2 proxy: the mirror image",
            sidecar("network2", &[]),
            [
                "via 1 gw share=2",
                "dropped Unhealthy",
                "direct SameNetwork w=2",
                "direct SameNetwork w=2",
                "direct SameNetwork w=2",
                "direct SameNetwork w=2",
            ],
            &[
                "10.20.0.1 w=2",
                "10.20.0.2 w=2",
                "10.20.0.3 w=2",
                "10.20.0.4 w=2",
                "192.0.2.10 w=2",
            ],
        ),
        (
            "a view of network1 only hides network2",
            sidecar("network1", &["network1"]),
            [
                "direct SameNetwork w=2",
                "direct SameNetwork w=2",
                "dropped OutsideNetworkView",
                "dropped OutsideNetworkView",
                "dropped OutsideNetworkView",
                "dropped OutsideNetworkView",
            ],
            &["10.10.0.1 w=2", "10.10.0.2 w=2"],
        ),
    ];
    let m = mesh();
    let svc = m.service("hello.sample.svc.cluster.local").unwrap();
    for (case, p, verdicts, sent) in cases {
        let report = explain(&m, &p, svc, None);
        let port = &report.ports[0];
        let got: Vec<String> = port.endpoints.iter().map(|e| short(&e.verdict)).collect();
        assert_eq!(got, verdicts, "{case}");
        let got: Vec<String> = port
            .sent
            .iter()
            .map(|e| format!("{} w={}", e.address, e.weight))
            .collect();
        assert_eq!(got, sent, "{case}");
    }
}

#[test]
fn without_gateways_everything_visible_goes_direct() {
    let mut m = mesh();
    m.gateways.clear();
    let svc = m.service("hello.sample.svc.cluster.local").unwrap();
    let report = explain(&m, &sidecar("network1", &[]), svc, Some(5000));
    assert!(report.ports[0].endpoints.iter().all(|e| e.verdict
        == Verdict::Direct {
            why: Direct::NoGateways,
            weight: 1
        }));
    assert_eq!(report.ports[0].sent.len(), 6);
    assert!(!report.ports[0].endpoints.iter().any(|e| matches!(
        e.verdict,
        Verdict::Dropped {
            why: Dropped::NotMtls
        }
    )));
}

#[test]
fn services_are_found_by_short_name_and_port() {
    let m = mesh();
    let (s, p) = find_service(&m, "hello.sample:5000").unwrap();
    assert_eq!((&*s.hostname, p), ("hello.sample.svc.cluster.local", Some(5000)));
    assert!(find_service(&m, "hello.sample.svc.cluster.local").is_ok());
    assert!(
        find_service(&m, "hello.sample:81")
            .unwrap_err()
            .contains("no port 81")
    );
    assert!(
        find_service(&m, "nope.sample")
            .unwrap_err()
            .contains("no service")
    );
}

fn in_zone(mut ep: Endpoint, zone: &str) -> Endpoint {
    ep.placement_mut().locality = Locality {
        region: "r".into(),
        zone: zone.into(),
        subzone: "".into(),
    };
    ep
}

#[test]
fn grpc_is_not_sent_a_gateway_it_cannot_cross() {
    // cluster2's pods sit behind its gateway: a sidecar reaches them through it (once, the first
    // locality's row carrying both: Envoy keeps one endpoint per address); proxyless gRPC sends no SNI for the gateway to route by, so they are dropped for it
    // and explain says why.
    let svc = service("hello", "sample", &[("http", 5000, Protocol::Http)]);
    let eps = vec![
        in_zone(ep("10.10.0.1", "network1", "cluster1", true, true), "a"),
        in_zone(ep("10.20.0.1", "network2", "cluster2", true, true), "a"),
        in_zone(ep("10.20.0.2", "network2", "cluster2", true, true), "b"),
    ];
    let mut m = StaticMesh::new(1).with(svc, eps);
    m.gateways = vec![gw("network2", "cluster2", "198.51.100.10")];
    let svc = m.service("hello.sample.svc.cluster.local").unwrap();
    let report = |kind| explain(&m, &proxy(kind, Some("network1"), &[]), svc, None);
    let rows = |kind| {
        report(kind).ports[0]
            .sent
            .iter()
            .map(|e| {
                format!(
                    "{}:{} {} w={} gw={}",
                    e.address, e.port, e.locality.zone, e.weight, e.gateway
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        rows(ProxyKind::Sidecar),
        [
            "10.10.0.1:5000 a w=1 gw=false",
            "198.51.100.10:15443 a w=2 gw=true",
        ]
    );
    assert_eq!(rows(ProxyKind::Grpc), ["10.10.0.1:5000 a w=1 gw=false"]);
    let verdicts: Vec<String> = report(ProxyKind::Grpc).ports[0]
        .endpoints
        .iter()
        .map(|e| short(&e.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            "direct SameNetwork w=1",
            "dropped ProxylessBehindGateway",
            "dropped ProxylessBehindGateway"
        ]
    );
}

#[path = "explain_wire_tests.rs"]
mod wire;

#[test]
fn a_proxy_that_is_not_connected_is_parsed_from_the_query_metadata() {
    let query = |network: Option<&str>, generator: Option<&str>| ExplainQuery {
        proxy_id: "sidecar~10.0.0.1~try-0.sample~sample.svc.cluster.local".into(),
        service: "helloworld.sample".into(),
        network: network.map(Into::into),
        cluster: Some("cluster1".into()),
        generator: generator.map(Into::into),
        subset: None,
    };
    assert!(query(None, None).hypothetical_proxy().unwrap().is_none());
    let p = query(Some("network2"), Some("grpc"))
        .hypothetical_proxy()
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            p.network.as_deref(),
            p.cluster_id.as_deref(),
            p.kind,
            p.namespace.as_deref()
        ),
        (
            Some("network2"),
            Some("cluster1"),
            crate::envoy::ProxyKind::Grpc,
            Some("sample")
        )
    );
    let err = query(Some("network2"), Some("envoy"))
        .hypothetical_proxy()
        .unwrap_err();
    assert!(err.contains("GENERATOR"), "{err}");
}

// === Sidecar scope ===

#[test]
fn explain_says_what_a_sidecar_hid_and_sends_nothing_for_it() {
    use crate::{
        envoy::static_mesh::{endpoint, proxy},
        traffic::tests::config,
    };
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let mut private = service("secret", "b", &[("http", 80, Protocol::Http)]);
    private.export_to = crate::model::ExportTo::Namespaces(["b".into()].into());
    let m = StaticMesh::new(1)
        .with(
            service("echo", "b", &[("http", 80, Protocol::Http)]),
            vec![endpoint(ip("10.0.0.1"), &[("http", 8080)], "c1")],
        )
        .with(
            service("other", "b", &[("http", 80, Protocol::Http)]),
            vec![endpoint(ip("10.0.0.2"), &[("http", 8080)], "c1")],
        )
        .with(private, vec![endpoint(ip("10.0.0.3"), &[("http", 8080)], "c1")])
        .with_config([config(
            "Sidecar",
            "a",
            "default",
            "1",
            "egress: [{hosts: [b/echo.b.svc.cluster.local]}]",
        )]);
    let p = proxy(ProxyKind::Sidecar, "a");
    let report = |host: &str| {
        let svc = m.service(host).expect("service");
        serde_json::to_value(explain(&m, &p, svc, None)).unwrap()
    };
    let echo = report("echo.b.svc.cluster.local");
    assert_eq!(echo["sidecar"]["visible"], true);
    assert_eq!(
        echo["sidecar"]["via"],
        serde_json::json!({"egress": "b/echo.b.svc.cluster.local"})
    );
    assert_eq!(echo["ports"][0]["sent"].as_array().map(Vec::len), Some(1));
    let other = report("other.b.svc.cluster.local");
    assert_eq!(
        other["sidecar"],
        serde_json::json!({
            "sidecar": "a/default", "outboundTrafficPolicy": "ALLOW_ANY", "visible": false,
            "hidden": {"reason": "notImported", "sidecar": {"kind": "Sidecar", "namespace": "a", "name": "default"},
                       "egress": ["b/echo.b.svc.cluster.local"]},
        })
    );
    assert_eq!(
        other["ports"],
        serde_json::json!([]),
        "hidden: no cluster, nothing sent"
    );
    let secret = report("secret.b.svc.cluster.local");
    assert_eq!(secret["sidecar"]["hidden"]["reason"], "notExported");
}

#[test]
fn the_rule_that_applied_and_what_each_client_does_with_its_fields() {
    let rule = "host: hello\ntrafficPolicy:\n  loadBalancer: {simple: LEAST_REQUEST}\n  \
                outlierDetection: {consecutive5xxErrors: 3}\nsubsets:\n- {name: v1, labels: {version: v1}}\n";
    let m = mesh().with_config([crate::traffic::tests::config(
        "DestinationRule",
        "sample",
        "hello",
        "1",
        rule,
    )]);
    let (svc, _) = find_service(&m, "hello.sample:5000").unwrap();
    let summary = |kind| {
        let e = explain(&m, &proxy(kind, Some("network1"), &[]), svc, Some(5000));
        let r = e.destination_rule.expect("a rule applied");
        assert_eq!(
            (r.from, r.host.as_str()),
            (
                vec!["DestinationRule sample/hello".to_owned()],
                "hello.sample.svc.cluster.local"
            )
        );
        e.ports[0]
            .clusters
            .iter()
            .map(|c| {
                let notes: Vec<String> = c
                    .notes
                    .iter()
                    .map(|n| {
                        format!(
                            "{}={}",
                            n.field,
                            serde_json::to_value(n).unwrap()["effect"].as_str().unwrap()
                        )
                    })
                    .collect();
                format!("{} {:?} {}", c.name, c.subset, notes.join(","))
            })
            .collect::<Vec<_>>()
    };
    let want = |lb: &str, od: &str| {
        [None, Some("v1")].map(|s| {
            let name = match s {
                Some(s) => format!("outbound|5000|{s}|hello.sample.svc.cluster.local"),
                None => "outbound|5000||hello.sample.svc.cluster.local".to_owned(),
            };
            format!("{name} {s:?} outlierDetection.consecutive5xxErrors={od},loadBalancer.simple={lb}")
        })
    };
    assert_eq!(summary(ProxyKind::Sidecar), want("applies", "applies"));
    assert_eq!(summary(ProxyKind::Grpc), want("downgraded", "ignored"));
    // No rule: defaults, and only the default cluster.
    let e = explain(&mesh(), &sidecar("network1", &[]), svc, Some(5000));
    assert!(e.destination_rule.is_none());
    assert_eq!(e.ports[0].clusters.len(), 1);
    assert!(e.ports[0].clusters[0].notes.is_empty());
}

#[test]
fn a_subset_cluster_explains_membership_mtls_and_priority() {
    use crate::{
        envoy::{
            locality::{LabelMismatch, Mode, Source},
            mtls::MtlsWhy,
        },
        istio::peer_authentication::MtlsMode,
        traffic::tests::config,
    };
    // version=v2 on 10.10.0.1 (local), 10.20.0.1 and 10.20.0.2 (remote; .2 behind PeerAuthentication
    // DISABLE); the DR fails over by network.
    let mut m = mesh();
    for (_, eps) in m.services.values_mut() {
        for e in eps.iter_mut() {
            let mut labels = std::collections::BTreeMap::new();
            if ["10.10.0.1", "10.20.0.1", "10.20.0.2"].contains(&e.address.to_string().as_str()) {
                labels.insert("version".to_owned(), "v2".to_owned());
            }
            if e.address.to_string() == "10.20.0.2" {
                labels.insert("mtls".to_owned(), "off".to_owned());
            }
            e.info_mut().labels = Arc::new(labels);
        }
    }
    let m = m.with_config([
        config(
            "DestinationRule",
            "sample",
            "hello",
            "1",
            "host: hello\ntrafficPolicy:\n  outlierDetection: {consecutive5xxErrors: 1}\n  \
             loadBalancer: {localityLbSetting: {failoverPriority: [topology.istio.io/network]}}\n\
             subsets:\n- {name: v2, labels: {version: v2}}\n",
        ),
        config(
            "PeerAuthentication",
            "sample",
            "off",
            "1",
            "selector: {matchLabels: {mtls: \"off\"}}\nmtls: {mode: DISABLE}\n",
        ),
    ]);
    let svc = m.service("hello.sample.svc.cluster.local").unwrap();
    let report = explain_subset(&m, &sidecar("network1", &[]), svc, None, Some("v2"));
    let port = &report.ports[0];
    assert_eq!(
        port.eds_cluster,
        "outbound|5000|v2|hello.sample.svc.cluster.local"
    );
    assert_eq!(
        port.subset.as_ref().unwrap().labels.as_ref().unwrap()["version"],
        "v2"
    );
    assert!(matches!(
        port.locality_lb,
        Mode::Failover {
            source: Source::DestinationRule,
            ..
        }
    ));
    let row = |ip: &str| {
        port.endpoints
            .iter()
            .find(|e| e.address.to_string() == ip)
            .unwrap()
    };
    // Outside the subset.
    assert_eq!(short(&row("10.10.0.2").verdict), "dropped NotInSubset");
    // Local, in the subset: priority 0, every label matches.
    let local = row("10.10.0.1");
    assert_eq!(short(&local.verdict), "direct SameNetwork w=2");
    let p = local.priority.as_ref().unwrap();
    assert_eq!(
        (p.priority, p.why.as_ref().unwrap().label_mismatch.is_none()),
        (0, true)
    );
    // Remote through the gateways: priority 1, the network label differs.
    let remote = row("10.20.0.1");
    assert_eq!(short(&remote.verdict), "via 2 gw share=1");
    let p = remote.priority.as_ref().unwrap();
    assert_eq!(p.priority, 1);
    assert_eq!(
        p.why.as_ref().unwrap().label_mismatch,
        Some(LabelMismatch {
            index: 0,
            key: "topology.istio.io/network".into(),
            want: "network1".into(),
            got: "network2".into()
        })
    );
    assert_eq!(
        remote.mtls.why,
        MtlsWhy::PeerAuthentication {
            mode: MtlsMode::Permissive,
            from: None
        }
    );
    // PeerAuthentication DISABLE: not through a gateway, and the report names the policy.
    let off = row("10.20.0.2");
    assert_eq!(short(&off.verdict), "dropped NotMtls");
    assert!(off.priority.is_none() && !off.mtls.enabled);
    match &off.mtls.why {
        MtlsWhy::PeerAuthentication { mode, from } => {
            assert_eq!(*mode, MtlsMode::Disable);
            assert_eq!(
                from.as_ref().unwrap().to_string(),
                "PeerAuthentication sample/off"
            );
        }
        other => panic!("{other:?}"),
    }
    // No sidecar.
    assert_eq!(row("10.20.0.3").mtls.why, MtlsWhy::NoSidecar);
    // The sent table carries the same priorities.
    let sent: Vec<(String, u32)> = port
        .sent
        .iter()
        .map(|e| (e.address.to_string(), e.priority))
        .collect();
    assert_eq!(
        sent,
        [
            ("10.10.0.1".to_owned(), 0),
            ("198.51.100.10".to_owned(), 1),
            ("198.51.100.11".to_owned(), 1)
        ]
    );
}

#[test]
fn a_subset_cds_never_builds_is_reported_as_such() {
    let m = mesh();
    let svc = m.service("hello.sample.svc.cluster.local").unwrap().clone();
    let not_built = |m: &StaticMesh, subset: &str| {
        explain_subset(m, &sidecar("network1", &[]), &svc, None, Some(subset)).ports[0]
            .not_built
            .clone()
    };
    assert_eq!(
        not_built(&m, "v3").as_deref(),
        Some(
            "no DestinationRule for hello.sample.svc.cluster.local applies to this proxy, so it has no subset v3"
        )
    );
    let m = m.with_config([crate::traffic::tests::config(
        "DestinationRule",
        "sample",
        "hello",
        "1",
        "host: hello\nsubsets:\n- {name: v1, labels: {version: v1}}\n",
    )]);
    assert_eq!(
        not_built(&m, "v3").as_deref(),
        Some("no subset v3 in the DestinationRule this proxy gets (DestinationRule sample/hello)")
    );
    assert_eq!(not_built(&m, "v1"), None);
    assert_eq!(
        explain(&m, &sidecar("network1", &[]), &svc, None).ports[0].not_built,
        None
    );
}

#[test]
fn known_networks_are_those_of_gateways_and_endpoints() {
    let m = mesh();
    let got: Vec<String> = known_networks(&m).iter().map(ToString::to_string).collect();
    assert_eq!(got, ["network1", "network2"]);
    let mut bare = StaticMesh::new(1);
    bare.gateways.clear();
    assert!(known_networks(&bare).is_empty());
}

#[test]
fn a_bare_service_name_suggests_its_namespaced_forms() {
    let m = mesh();
    let err = find_service(&m, "hello").unwrap_err();
    assert_eq!(
        err,
        "no service \"hello\" in the mesh; did you mean hello.sample?"
    );
    assert_eq!(
        find_service(&m, "nothing").unwrap_err(),
        "no service \"nothing\" in the mesh"
    );
}
