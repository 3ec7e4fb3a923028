//! The explain report against a two-network mesh: every verdict, and the sent set it must agree with.

use std::sync::Arc;

use super::*;
use crate::{
    model::{EndpointPort, Labels, NetworkGateway, Protocol},
    network::split_horizon::{Direct, Dropped},
    xds::generator::{StaticMesh, static_mesh::service},
};

fn ep(ip: &str, network: &str, cluster: &str, mtls: bool, healthy: bool) -> Endpoint {
    Endpoint {
        address: ip.parse().unwrap(),
        ports: Arc::new([EndpointPort {
            service_port_name: "http".into(),
            port: 5000,
        }]),
        cluster: cluster.into(),
        network: Some(network.into()),
        locality: Locality::default(),
        labels: Labels::default(),
        service_account: None,
        tls_mode: if mtls { TlsMode::Istio } else { TlsMode::Disabled },
        health: if healthy {
            Health::Healthy
        } else {
            Health::Unhealthy
        },
        workload: None,
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

fn view(network: &str, requested: &[&str]) -> NetworkView {
    NetworkView {
        network: Some(network.into()),
        requested: requested.iter().map(|n| (*n).into()).collect(),
    }
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
    let cases: [(&str, NetworkView, [&str; 6], &[&str]); 3] = [
        (
            "network1 proxy: local direct, remote through cluster2's two gateways",
            view("network1", &[]),
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
            view("network2", &[]),
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
            view("network1", &["network1"]),
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
    for (case, v, verdicts, sent) in cases {
        let report = explain(&m, "p", svc, None, &v);
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
    let report = explain(&m, "p", svc, Some(5000), &view("network1", &[]));
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
