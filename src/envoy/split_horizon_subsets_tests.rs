//! Subsets through split horizon: goldens per proxy kind, network and gateway count.

use std::collections::BTreeMap;

use super::*;
use crate::{
    envoy::{
        Proxy, ProxyKind, {StaticMesh, static_mesh},
    },
    model::{LABEL_TLS_MODE, Protocol},
    traffic::tests::config,
};

const HOST: &str = "echo.app.svc.cluster.local";

/// net1: c1 (r1/a) and c2 (r1/b); net2: c3 (r2/a), whose 10.3.0.3 has PeerAuthentication
/// DISABLE; net3: c4 (r3/a). Every endpoint has a sidecar.
fn endpoints() -> Vec<Endpoint> {
    let e = |ip: &str, net: &str, cluster: &str, locality: &str, version: &str, extra: &[(&str, &str)]| {
        let mut ep = static_mesh::endpoint(ip.parse().unwrap(), &[("grpc", 7070)], cluster);
        let (region, zone) = locality.split_once('/').unwrap();
        ep.placement_mut().locality = Locality {
            region: region.into(),
            zone: zone.into(),
            subzone: "".into(),
        };
        ep.placement_mut().network = Some(net.into());
        ep.tls_mode = TlsMode::Istio;
        let mut labels: BTreeMap<String, String> =
            [("app", "echo"), ("version", version), (LABEL_TLS_MODE, "istio")]
                .iter()
                .chain(extra)
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
        labels.retain(|_, v| !v.is_empty());
        ep.info_mut().labels = Arc::new(labels);
        ep.workload = Some(format!("echo-{}", ip.rsplit('.').next().unwrap()).into());
        ep
    };
    vec![
        e("10.1.0.1", "net1", "c1", "r1/a", "v1", &[]),
        e("10.1.0.2", "net1", "c1", "r1/a", "v2", &[]),
        e("10.2.0.1", "net1", "c2", "r1/b", "v2", &[]),
        e("10.3.0.1", "net2", "c3", "r2/a", "v1", &[]),
        e("10.3.0.2", "net2", "c3", "r2/a", "v2", &[]),
        e("10.3.0.3", "net2", "c3", "r2/a", "v2", &[("mtls", "off")]),
        e("10.4.0.1", "net3", "c4", "r3/a", "v2", &[]),
    ]
}

fn gateways(per_network: usize) -> Vec<NetworkGateway> {
    let mut gws: Vec<NetworkGateway> = [("net1", "c1", 1), ("net2", "c3", 2), ("net3", "c4", 3)]
        .iter()
        .flat_map(|(net, cluster, n)| {
            (1..=per_network).map(move |i| gw(net, Some(cluster), &format!("192.0.2.{n}{i}")))
        })
        .collect();
    gws.sort();
    gws
}

/// The DestinationRule with subsets v1, v2, c1 (by cluster label) and none (selects nothing),
/// plus `policy` as its top-level trafficPolicy; and the PeerAuthentication DISABLE.
fn mesh(gateways: Vec<NetworkGateway>, policy: &str, subset_v2_policy: &str) -> StaticMesh {
    let svc = service("echo", "app", &[("grpc", 7070, Protocol::Grpc)]);
    let dr = format!(
        "host: echo\n{policy}\nsubsets:\n\
         - {{name: v1, labels: {{version: v1}}}}\n\
         - {{name: v2, labels: {{version: v2}}{subset_v2_policy}}}\n\
         - {{name: c1, labels: {{topology.istio.io/cluster: c1}}}}\n\
         - {{name: none, labels: {{version: v9}}}}\n"
    );
    let mut m = StaticMesh::new(1).with(svc, endpoints()).with_config([
        config("DestinationRule", "app", "echo", "1", &dr),
        config(
            "PeerAuthentication",
            "app",
            "off",
            "1",
            "selector: {matchLabels: {mtls: \"off\"}}\nmtls: {mode: DISABLE}\n",
        ),
    ]);
    m.gateways = gateways;
    m
}

fn client(kind: ProxyKind, network: &str, cluster: &str, locality: &str) -> Proxy {
    let mut p = static_mesh::proxy(kind, "app");
    p.network = Some(network.into());
    p.cluster_id = Some(cluster.into());
    let (region, zone) = locality.split_once('/').unwrap();
    p.locality = Locality {
        region: region.into(),
        zone: zone.into(),
        subzone: "".into(),
    };
    p
}

fn render(a: &eds::Assignment) -> Vec<String> {
    let mut lines = Vec::new();
    for g in &a.localities {
        lines.push(format!("p{} {} w={}", g.priority, g.locality, g.weight));
        for t in &g.endpoints {
            let tls = match t.tls_mode {
                TlsMode::Istio => "istio",
                TlsMode::Disabled => "plain",
            };
            lines.push(format!(
                "  {}:{} w={} {}/{} {tls}",
                t.address,
                t.port,
                t.weight,
                t.network.as_deref().unwrap_or("-"),
                t.cluster
            ));
        }
    }
    lines
}

/// What every assignment must satisfy for its client to accept it.
fn check(a: &eds::Assignment, kind: ProxyKind, row: &str) {
    let mut used: Vec<u32> = a.localities.iter().map(|g| g.priority).collect();
    used.sort_unstable();
    used.dedup();
    assert!(
        used.iter().enumerate().all(|(i, p)| *p as usize == i),
        "{row}: priorities {used:?} have a gap"
    );
    assert!(a.localities.iter().all(|g| g.weight > 0), "{row}: zero weight");
    if kind == ProxyKind::Grpc {
        let mut addrs: Vec<_> = a
            .localities
            .iter()
            .flat_map(|g| g.endpoints.iter().map(|t| (t.address, t.port)))
            .collect();
        let n = addrs.len();
        addrs.sort();
        addrs.dedup();
        assert_eq!(n, addrs.len(), "{row}: gRPC NACKs a repeated address");
    }
}

fn golden(name: &str, actual: &BTreeMap<String, BTreeMap<String, Vec<String>>>) {
    crate::golden::check("src/envoy/testdata", name, actual);
}

/// Every (proxy, gateways, client) row, every cluster: `{row: {cluster: lines}}`.
fn table(policy: &str, subset_v2_policy: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let proxies = [("net1", "c1", "r1/a"), ("net2", "c3", "r2/a")];
    let clusters = ["", "v1", "v2", "c1", "none"];
    let mut out = BTreeMap::new();
    for per_network in [0, 1, 2] {
        let m = mesh(gateways(per_network), policy, subset_v2_policy);
        for (net, cluster, locality) in proxies {
            for kind in [ProxyKind::Sidecar, ProxyKind::Grpc] {
                let row =
                    format!("{kind} on {net} ({cluster} {locality}), {per_network} gateways per network");
                let p = client(kind, net, cluster, locality);
                let view = NetworkView::of(&p);
                let mut by_cluster = BTreeMap::new();
                for subset in clusters {
                    let name = format!("outbound|7070|{subset}|{HOST}");
                    let a = crate::envoy::eds::assignment(&m, &SplitHorizon, &p, &view, name.as_str().into())
                        .expect("cluster exists");
                    check(&a, kind, &format!("{row} {name}"));
                    by_cluster.insert(name, render(&a));
                }
                out.insert(row, by_cluster);
            }
        }
    }
    out
}

#[test]
fn subsets_through_split_horizon_without_locality_failover() {
    // No outlierDetection: the mesh default (enabled) does nothing; all at priority 0.
    golden("subsets-locality-off", &table("", ""));
}

#[test]
fn subsets_through_split_horizon_with_region_failover() {
    let policy = "trafficPolicy:\n  outlierDetection: {consecutive5xxErrors: 3}\n  \
                  loadBalancer: {localityLbSetting: {failover: [{from: r1, to: r3}]}}";
    golden("subsets-locality-failover", &table(policy, ""));
}

#[test]
fn subsets_through_split_horizon_with_failover_priority_network_cluster() {
    let policy = "trafficPolicy:\n  outlierDetection: {consecutive5xxErrors: 3}\n  \
                  loadBalancer: {localityLbSetting: {failoverPriority: [topology.istio.io/network, topology.istio.io/cluster]}}";
    golden("subsets-failover-priority", &table(policy, ""));
}

#[test]
fn destination_rule_tls_disable_keeps_a_subset_off_the_gateways() {
    // v2's own tls DISABLE: its remote endpoints cannot go through a gateway (it routes by the
    // mTLS SNI) and its direct ones are sent `tlsMode` plaintext; v1 keeps auto-mTLS.
    golden(
        "subsets-tls-disable",
        &table("", ", trafficPolicy: {tls: {mode: DISABLE}}"),
    );
}
