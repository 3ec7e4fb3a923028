//! Golden tables: endpoints and gateways in, the rendered `ClusterLoadAssignment` out, exactly.

use std::{collections::BTreeMap, net::IpAddr};

use super::*;
use crate::{
    aggregate::gateways::{Candidate, resolve},
    envoy::{eds, static_mesh::service},
    model::{ExternalAddress, Placement, Protocol, WorkloadInfo},
};

fn svc() -> Service {
    service("hello", "sample", &[("http", 5000, Protocol::Http)])
}

fn port() -> ServicePort {
    svc().ports[0].clone()
}

/// Every endpoint of the port, no policy: today's rules.
fn all<'q>(svc: &'q Service, view: &'q NetworkView) -> EndpointQuery<'q> {
    EndpointQuery::all(svc, &svc.ports[0], view)
}

/// `ep("10.0.0.1", "net-a", "ca", "z1", mtls, healthy)`; an empty network is the unnamed one.
fn ep(ip: &str, network: &str, cluster: &str, zone: &str, mtls: bool, healthy: bool) -> Endpoint {
    Endpoint {
        address: ip.parse().unwrap(),
        ports: Arc::new([EndpointPort {
            service_port_name: "http".into(),
            port: 5000,
        }]),
        placement: Placement::new(
            cluster.into(),
            (!network.is_empty()).then(|| network.into()),
            Locality {
                region: "r".into(),
                zone: zone.into(),
                subzone: "".into(),
            },
        ),
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

fn gw(network: &str, cluster: Option<&str>, ip: &str) -> NetworkGateway {
    NetworkGateway {
        network: network.into(),
        cluster: cluster.map(Into::into),
        address: ip.parse().unwrap(),
        port: 15443,
        hostname: None,
    }
}

fn view(network: &str, requested: &[&str]) -> NetworkView {
    NetworkView {
        network: (!network.is_empty()).then(|| network.into()),
        requested: requested.iter().map(|n| (*n).into()).collect(),
        proxyless: false,
    }
}

/// A proxyless gRPC client's view on `network`.
fn proxyless(network: &str) -> NetworkView {
    NetworkView {
        proxyless: true,
        ..view(network, &[])
    }
}

/// One line per locality (`r/zone/ w=<sum>`), then one per endpoint, duplicates merged as sent.
fn render(eps: &[Endpoint], gws: &[NetworkGateway], view: &NetworkView) -> Vec<String> {
    let mut sorted = gws.to_vec();
    sorted.sort();
    let s = svc();
    let out = filter(eps, &sorted, &all(&s, view));
    let mut a = eds::grouped("c".into(), &port(), out.iter().map(|e| &**e), |_| 0);
    a.merge_duplicates();
    let mut lines = Vec::new();
    for g in &a.localities {
        lines.push(format!("{} w={}", g.locality, g.weight));
        for t in &g.endpoints {
            let net = t.network.as_deref().unwrap_or("-");
            let tls = match t.tls_mode {
                TlsMode::Istio => "istio",
                TlsMode::Disabled => "plain",
            };
            lines.push(format!(
                "  {}:{} w={} {net}/{} {tls}{}",
                t.address,
                t.port,
                t.weight,
                t.cluster,
                if t.health == Health::Healthy {
                    ""
                } else {
                    " unhealthy"
                }
            ));
        }
    }
    lines
}

/// net-a: the proxy's (1 gateway); net-b: no gateway; net-c: 1 gateway; net-d: 2 gateways. LCM 2.
fn four_networks() -> (Vec<Endpoint>, Vec<NetworkGateway>) {
    let eps = vec![
        ep("10.1.0.1", "net-a", "ca", "z1", true, true),
        ep("10.1.0.2", "net-a", "ca", "z2", false, true),
        ep("10.2.0.1", "net-b", "cb", "z1", true, true),
        ep("10.3.0.1", "net-c", "cc", "z1", true, true),
        ep("10.3.0.2", "net-c", "cc", "z1", true, true),
        ep("10.3.0.3", "net-c", "cc", "z2", true, true),
        ep("10.4.0.1", "net-d", "cd", "z2", true, true),
        ep("10.4.0.2", "net-d", "cd", "z2", true, true),
        ep("10.4.0.3", "net-d", "cd", "z2", false, true),
        ep("10.4.0.4", "net-d", "cd", "z2", true, false),
        ep("10.9.0.1", "", "cx", "z1", false, true),
    ];
    let gws = vec![
        gw("net-a", Some("ca"), "192.0.2.1"),
        gw("net-c", Some("cc"), "192.0.2.3"),
        gw("net-d", Some("cd"), "192.0.2.41"),
        gw("net-d", Some("cd"), "192.0.2.42"),
    ];
    (eps, gws)
}

/// name, endpoints, gateways, the proxy's view, the rendered assignment.
type Case<'a> = (
    &'a str,
    &'a [Endpoint],
    &'a [NetworkGateway],
    NetworkView,
    Vec<&'a str>,
);

#[test]
fn golden_tables() {
    let (eps, gws) = four_networks();
    let same_cluster = vec![
        ep("10.3.0.1", "net-c", "cc", "z1", true, true),
        ep("10.3.1.1", "net-c", "cc2", "z1", true, true),
        ep("10.3.9.1", "net-c", "c-nogw", "z1", true, true),
    ];
    let same_cluster_gws = vec![
        gw("net-c", Some("cc"), "192.0.2.31"),
        gw("net-c", Some("cc2"), "192.0.2.32"),
        gw("net-c", None, "203.0.113.30"),
    ];
    let cases: Vec<Case> = vec![
        (
            // Local and gateway-less networks direct (×2); net-c's 3 endpoints → its gateway, once
            // (2+2 in z1, z2's 2 merged into it: Envoy keeps one per address); net-d's 2 healthy mTLS endpoints split over 2 gateways
            // (1 each per endpoint); its plaintext and unhealthy endpoints dropped.
            "four networks, proxy on net-a",
            &eps,
            &gws,
            view("net-a", &[]),
            vec![
                "r/z1/ w=12",
                "  10.1.0.1:5000 w=2 net-a/ca istio",
                "  10.2.0.1:5000 w=2 net-b/cb istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "  192.0.2.3:15443 w=6 net-c/cc istio",
                "r/z2/ w=6",
                "  10.1.0.2:5000 w=2 net-a/ca plain",
                "  192.0.2.41:15443 w=2 net-d/cd istio",
                "  192.0.2.42:15443 w=2 net-d/cd istio",
            ],
        ),
        (
            // The mirror image: net-a (and its plaintext endpoint) behind its gateway.
            "four networks, proxy on net-d",
            &eps,
            &gws,
            view("net-d", &[]),
            vec![
                "r/z1/ w=12",
                "  10.2.0.1:5000 w=2 net-b/cb istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "  192.0.2.1:15443 w=2 net-a/ca istio",
                "  192.0.2.3:15443 w=6 net-c/cc istio",
                "r/z2/ w=8",
                "  10.4.0.1:5000 w=2 net-d/cd istio",
                "  10.4.0.2:5000 w=2 net-d/cd istio",
                "  10.4.0.3:5000 w=2 net-d/cd plain",
                "  10.4.0.4:5000 w=2 net-d/cd istio unhealthy",
            ],
        ),
        (
            // Proxyless gRPC on net-a: local and gateway-less networks direct as for a sidecar; the
            // networks behind gateways (net-c, net-d) are dropped, not replaced by their gateways.
            "four networks, proxyless gRPC on net-a",
            &eps,
            &gws,
            proxyless("net-a"),
            vec![
                "r/z1/ w=6",
                "  10.1.0.1:5000 w=2 net-a/ca istio",
                "  10.2.0.1:5000 w=2 net-b/cb istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "r/z2/ w=2",
                "  10.1.0.2:5000 w=2 net-a/ca plain",
            ],
        ),
        (
            // Proxyless gRPC without a network: no gateway it could use, so everything visible goes
            // as is (net-d's plaintext and unhealthy endpoints too, as on the proxy's own network).
            "four networks, proxyless gRPC without a network",
            &eps,
            &gws,
            proxyless(""),
            vec![
                "r/z1/ w=10",
                "  10.1.0.1:5000 w=2 net-a/ca istio",
                "  10.2.0.1:5000 w=2 net-b/cb istio",
                "  10.3.0.1:5000 w=2 net-c/cc istio",
                "  10.3.0.2:5000 w=2 net-c/cc istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "r/z2/ w=12",
                "  10.1.0.2:5000 w=2 net-a/ca plain",
                "  10.3.0.3:5000 w=2 net-c/cc istio",
                "  10.4.0.1:5000 w=2 net-d/cd istio",
                "  10.4.0.2:5000 w=2 net-d/cd istio",
                "  10.4.0.3:5000 w=2 net-d/cd plain",
                "  10.4.0.4:5000 w=2 net-d/cd istio unhealthy",
            ],
        ),
        (
            // No network (istiod 1.30 forceGateway): every network with a gateway through it.
            "proxy without a network",
            &eps,
            &gws,
            view("", &[]),
            vec![
                "r/z1/ w=12",
                "  10.2.0.1:5000 w=2 net-b/cb istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "  192.0.2.1:15443 w=2 net-a/ca istio",
                "  192.0.2.3:15443 w=6 net-c/cc istio",
                "r/z2/ w=4",
                "  192.0.2.41:15443 w=2 net-d/cd istio",
                "  192.0.2.42:15443 w=2 net-d/cd istio",
            ],
        ),
        (
            // An east-west gateway's view: its own network and the unnamed one, nothing else.
            "network view restricted to net-a",
            &eps,
            &gws,
            view("net-a", &["net-a"]),
            vec![
                "r/z1/ w=4",
                "  10.1.0.1:5000 w=2 net-a/ca istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "r/z2/ w=2",
                "  10.1.0.2:5000 w=2 net-a/ca plain",
            ],
        ),
        (
            // A view naming two networks sees both, one of them through its gateways.
            "network view of net-a and net-d",
            &eps,
            &gws,
            view("net-a", &["net-d", "net-a"]),
            vec![
                "r/z1/ w=4",
                "  10.1.0.1:5000 w=2 net-a/ca istio",
                "  10.9.0.1:5000 w=2 -/cx plain",
                "r/z2/ w=6",
                "  10.1.0.2:5000 w=2 net-a/ca plain",
                "  192.0.2.41:15443 w=2 net-d/cd istio",
                "  192.0.2.42:15443 w=2 net-d/cd istio",
            ],
        ),
        (
            // Multi-network off: everything as is, weights unscaled.
            "no gateways at all",
            &eps[..4],
            &[],
            view("net-a", &[]),
            vec![
                "r/z1/ w=3",
                "  10.1.0.1:5000 w=1 net-a/ca istio",
                "  10.2.0.1:5000 w=1 net-b/cb istio",
                "  10.3.0.1:5000 w=1 net-c/cc istio",
                "r/z2/ w=1",
                "  10.1.0.2:5000 w=1 net-a/ca plain",
            ],
        ),
        (
            // LCM(3 per network, 1 per cluster) = 3: cc's and cc2's endpoints go to their own
            // cluster's gateway (3 each); c-nogw's to all three (1 each). A gateway endpoint names
            // the cluster it carries the most weight for.
            "same-cluster gateways preferred",
            &same_cluster,
            &same_cluster_gws,
            view("net-a", &[]),
            vec![
                "r/z1/ w=9",
                "  192.0.2.31:15443 w=4 net-c/cc istio",
                "  192.0.2.32:15443 w=4 net-c/cc2 istio",
                "  203.0.113.30:15443 w=1 net-c/c-nogw istio",
            ],
        ),
    ];
    for (name, eps, gws, view, want) in cases {
        assert_eq!(render(eps, gws, &view), want, "{name}");
    }
}

#[test]
fn a_cluster_local_service_keeps_the_proxy_cluster_only_and_no_gateway_stands_in() {
    let (eps, mut gws) = four_networks();
    gws.sort();
    let s = svc();
    let v = view("net-c", &[]);
    let sent = |local: Option<&str>| {
        let own = local.map(ClusterId::from);
        let q = EndpointQuery {
            cluster_local: own.as_ref(),
            ..all(&s, &v)
        };
        let mut addresses: Vec<String> = filter(&eps, &gws, &q)
            .iter()
            .map(|e| e.address.to_string())
            .collect();
        addresses.sort();
        addresses.dedup();
        let dropped: Vec<Dropped> = explain(&eps, &gws, &q)
            .into_iter()
            .filter_map(|(_, v)| match v {
                Verdict::Dropped { why } => Some(why),
                _ => None,
            })
            .collect();
        (addresses, dropped)
    };
    let (global, _) = sent(None);
    assert!(global.iter().any(|a| a.starts_with("192.0.2.")), "{global:?}");
    let (local, dropped) = sent(Some("cc"));
    assert_eq!(local, ["10.3.0.1", "10.3.0.2", "10.3.0.3"]);
    assert_eq!(
        dropped.iter().filter(|d| **d == Dropped::OtherCluster).count(),
        8,
        "{dropped:?}"
    );
}

#[test]
fn a_gateway_endpoint_stands_for_one_cluster_locality_and_priority_label_values() {
    // ★ istio#49500 and #52435: one gateway endpoint per (locality, cluster, kept label values) of
    // what it stands for, carrying them; labels the query does not keep are not carried. LCM 2: net-b
    // has two gateways, one per cluster.
    let tiers = ["gold", "silver", "gold", "gold"];
    let mut eps = vec![
        ep("10.2.0.1", "net-b", "cb1", "z1", true, true),
        ep("10.2.0.2", "net-b", "cb1", "z1", true, true),
        ep("10.2.0.3", "net-b", "cb1", "z2", true, true),
        ep("10.2.1.1", "net-b", "cb2", "z1", true, true),
    ];
    for (e, tier) in eps.iter_mut().zip(tiers) {
        let pod = format!("pod-{}", e.address);
        e.info_mut().labels = Arc::new([("tier".into(), tier.into()), ("pod".into(), pod)].into());
    }
    let mut gws = vec![
        gw("net-b", Some("cb1"), "192.0.2.1"),
        gw("net-b", Some("cb2"), "192.0.2.2"),
    ];
    gws.sort();
    let s = svc();
    let v = view("net-a", &[]);
    let sent = |keep: &[String]| -> Vec<String> {
        let q = EndpointQuery {
            keep_labels: keep,
            ..all(&s, &v)
        };
        filter(&eps, &gws, &q)
            .iter()
            .map(|e| {
                let labels: Vec<String> = e.labels().iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "{} {} {} [{}] w={}",
                    e.address,
                    e.cluster(),
                    e.locality(),
                    labels.join(","),
                    e.weight
                )
            })
            .collect()
    };
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[],
            &[
                "192.0.2.1 cb1 r/z1/ [] w=4",
                "192.0.2.2 cb2 r/z1/ [] w=2",
                "192.0.2.1 cb1 r/z2/ [] w=2",
            ],
        ),
        (
            &["tier", LABEL_REGION],
            &[
                "192.0.2.1 cb1 r/z1/ [tier=gold] w=2",
                "192.0.2.1 cb1 r/z1/ [tier=silver] w=2",
                "192.0.2.2 cb2 r/z1/ [tier=gold] w=2",
                "192.0.2.1 cb1 r/z2/ [tier=gold] w=2",
            ],
        ),
        // A key no endpoint has splits nothing.
        (
            &["absent"],
            &[
                "192.0.2.1 cb1 r/z1/ [] w=4",
                "192.0.2.2 cb2 r/z1/ [] w=2",
                "192.0.2.1 cb1 r/z2/ [] w=2",
            ],
        ),
    ];
    for (keep, want) in cases {
        let keep: Vec<String> = keep.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(sent(&keep), want, "{keep:?}");
    }
}

#[test]
fn a_dropped_stale_cluster_sends_nothing_direct_or_through_its_gateway() {
    // ★ A remote whose API server has been unreachable past its policy's `after`, with action drop:
    // its endpoints are neither sent direct nor counted towards a gateway; deprioritize and keep
    // leave them to locality (tested there).
    let (eps, mut gws) = four_networks();
    gws.sort();
    let s = svc();
    let v = view("net-a", &[]);
    let sent = |stale: &BTreeMap<ClusterId, StaleAction>| -> Vec<String> {
        let q = EndpointQuery { stale, ..all(&s, &v) };
        filter(&eps, &gws, &q)
            .iter()
            .map(|e| e.address.to_string())
            .collect()
    };
    let none = sent(&BTreeMap::new());
    assert!(none.contains(&"10.2.0.1".to_owned()) && none.contains(&"192.0.2.3".to_owned()));
    for (cluster, action, gone) in [
        ("cb", StaleAction::Drop, "10.2.0.1"),
        ("cc", StaleAction::Drop, "192.0.2.3"),
    ] {
        let stale = BTreeMap::from([(ClusterId::from(cluster), action)]);
        let got = sent(&stale);
        assert!(!got.contains(&gone.to_owned()), "{cluster}: {got:?}");
        assert_eq!(
            got.len(),
            none.len() - usize::from(cluster == "cb") - 2 * usize::from(cluster == "cc")
        );
        let q = EndpointQuery {
            stale: &stale,
            ..all(&s, &v)
        };
        let why: Vec<Dropped> = explain(&eps, &gws, &q)
            .into_iter()
            .filter(|(e, _)| e.cluster().as_str() == cluster)
            .filter_map(|(_, v)| match v {
                Verdict::Dropped { why } => Some(why),
                _ => None,
            })
            .collect();
        assert!(
            !why.is_empty() && why.iter().all(|w| *w == Dropped::StaleCluster),
            "{why:?}"
        );
    }
}

#[test]
fn each_gateway_is_sent_once_with_the_summed_weight() {
    let (eps, gws) = four_networks();
    let remote_c: Vec<Endpoint> = eps.into_iter().filter(|e| e.cluster().as_str() == "cc").collect();
    assert_eq!(
        render(&remote_c, &gws, &view("net-a", &[])),
        ["r/z1/ w=6", "  192.0.2.3:15443 w=6 net-c/cc istio"],
        "gRPC NACKs an address repeated across localities, Envoy keeps only the first"
    );
}

#[test]
fn a_gateway_appears_changes_address_and_disappears() {
    let eps = [
        ep("10.1.0.1", "net-a", "ca", "z1", true, true),
        ep("10.2.0.1", "net-b", "cb", "z1", true, true),
        ep("10.2.0.2", "net-b", "cb", "z1", true, true),
    ];
    let v = view("net-a", &[]);
    let steps: [(&[NetworkGateway], &[&str]); 4] = [
        (
            &[],
            &[
                "r/z1/ w=3",
                "  10.1.0.1:5000 w=1 net-a/ca istio",
                "  10.2.0.1:5000 w=1 net-b/cb istio",
                "  10.2.0.2:5000 w=1 net-b/cb istio",
            ],
        ),
        (
            &[gw("net-b", Some("cb"), "198.51.100.10")],
            &[
                "r/z1/ w=3",
                "  10.1.0.1:5000 w=1 net-a/ca istio",
                "  198.51.100.10:15443 w=2 net-b/cb istio",
            ],
        ),
        (
            &[gw("net-b", Some("cb"), "198.51.100.11")],
            &[
                "r/z1/ w=3",
                "  10.1.0.1:5000 w=1 net-a/ca istio",
                "  198.51.100.11:15443 w=2 net-b/cb istio",
            ],
        ),
        (
            &[],
            &[
                "r/z1/ w=3",
                "  10.1.0.1:5000 w=1 net-a/ca istio",
                "  10.2.0.1:5000 w=1 net-b/cb istio",
                "  10.2.0.2:5000 w=1 net-b/cb istio",
            ],
        ),
    ];
    for (i, (gws, want)) in steps.into_iter().enumerate() {
        assert_eq!(render(&eps, gws, &v), want, "step {i}");
    }
}

#[test]
fn a_hostname_gateway_counts_only_once_resolved() {
    let eps = [ep("10.2.0.1", "net-b", "cb", "z1", true, true)];
    let candidates = [Candidate {
        network: "net-b".into(),
        cluster: Some("cb".into()),
        address: ExternalAddress::Hostname("gw.example.com".into()),
        port: 15443,
    }];
    let v = view("net-a", &[]);
    // DNS failed before any answer: net-b has no gateway, so its endpoint goes direct (istiod's rule).
    let unresolved = resolve(&candidates, &Default::default());
    assert!(unresolved.is_empty());
    assert_eq!(
        render(&eps, &unresolved, &v),
        ["r/z1/ w=1", "  10.2.0.1:5000 w=1 net-b/cb istio"]
    );
    // Two A records: two gateways, LCM 2.
    let ips: Vec<IpAddr> = vec!["192.0.2.7".parse().unwrap(), "192.0.2.8".parse().unwrap()];
    let resolved = resolve(&candidates, &[("gw.example.com".into(), ips)].into());
    assert_eq!(resolved[0].hostname.as_deref(), Some("gw.example.com"));
    assert_eq!(
        render(&eps, &resolved, &v),
        [
            "r/z1/ w=2",
            "  192.0.2.7:15443 w=1 net-b/cb istio",
            "  192.0.2.8:15443 w=1 net-b/cb istio"
        ]
    );
}

#[test]
fn weights_past_uint32_are_divided_down_in_proportion() {
    let mut big = ep("10.2.0.1", "net-b", "cb", "z1", true, true);
    big.weight = u32::MAX / 2 + 1;
    let gws = [
        gw("net-b", Some("cb"), "192.0.2.1"),
        gw("net-b", Some("cb"), "192.0.2.2"),
    ];
    let out = filter([&big], &gws, &all(&svc(), &view("net-a", &[])));
    let weights: Vec<u32> = out.iter().map(|e| e.weight).collect();
    assert_eq!(weights, [1 << 30, 1 << 30]);
}

#[test]
fn a_gateway_count_lcm_past_uint32_keeps_weights_valid_and_proportional() {
    // Gateway-only networks of 2, 3, 5, … 29 gateways: the scale alone is 6,469,693,230.
    let mut gws: Vec<NetworkGateway> = [2u8, 3, 5, 7, 11, 13, 17, 19, 23, 29]
        .iter()
        .flat_map(|&p| (1..=p).map(move |i| gw(&format!("lcm{p}"), None, &format!("100.64.{p}.{i}"))))
        .collect();
    gws.push(gw("net-b", Some("cb"), "192.0.2.1"));
    let eps = [
        ep("10.1.0.1", "net-a", "ca", "z1", true, true),
        ep("10.1.0.2", "net-a", "ca", "z1", true, true),
        ep("10.2.0.1", "net-b", "cb", "z1", true, true),
        ep("10.2.0.2", "net-b", "cb", "z1", true, true),
    ];
    let v = view("net-a", &[]);
    let s = svc();
    let out = filter(&eps, &gws, &all(&s, &v));
    let weights: Vec<(String, u32)> = out.iter().map(|e| (e.address.to_string(), e.weight)).collect();
    let local = u32::try_from(6_469_693_230u64 / 7).unwrap();
    assert_eq!(
        weights,
        [
            ("10.1.0.1".to_string(), local),
            ("10.1.0.2".to_string(), local),
            ("192.0.2.1".to_string(), 2 * local)
        ]
    );
    assert!(weights.iter().map(|(_, w)| u64::from(*w)).sum::<u64>() <= u64::from(u32::MAX));
    // `meshctl explain` reports the weights EDS sends.
    let explained: Vec<u32> = explain(&eps, &gws, &all(&s, &v))
        .into_iter()
        .map(|(_, verdict)| match verdict {
            Verdict::Direct { weight, .. } => weight,
            Verdict::ViaGateways { share, .. } => share,
            Verdict::Dropped { .. } => 0,
        })
        .collect();
    assert_eq!(explained, [local, local, local, local]);
}

/// The subset × split-horizon × locality goldens: the whole pipeline EDS runs
/// (`assignment`: DestinationRule lookup, subset, mTLS per endpoint, split horizon,
/// priorities, duplicates merged) over one mesh, rendered one line per locality group
/// (`p<priority> <locality> w=<weight>`) and per endpoint, compared with
/// `src/envoy/testdata/subsets-<locality>.json` (`UPDATE_GOLDENS=1` rewrites them).
#[path = "split_horizon_subsets_tests.rs"]
mod subsets;
