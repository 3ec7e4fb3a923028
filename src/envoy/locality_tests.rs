//! istiod's `loadbalancer_test.go` scenarios, by meaning: the assignment a proxy in
//! `region1/zone1/subzone1` gets, one line per locality group (`p<priority> <locality> w=<weight>:
//! <addresses>`).

use std::collections::BTreeMap;

use super::*;
use crate::{
    envoy::{
        ProxyKind,
        static_mesh::{endpoint, proxy, service},
    },
    model::{Protocol, WorkloadKind},
};

fn port() -> ServicePort {
    service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0].clone()
}

/// An endpoint at `region/zone/subzone` with `key=value` labels (network and cluster as fields).
fn ep(ip: &str, locality: &str, labels: &[(&str, &str)]) -> Endpoint {
    let mut parts = locality.split('/');
    let mut e = endpoint(ip.parse().unwrap(), &[("grpc", 7070)], "");
    let at = e.placement_mut();
    at.locality = Locality {
        region: parts.next().unwrap_or("").into(),
        zone: parts.next().unwrap_or("").into(),
        subzone: parts.next().unwrap_or("").into(),
    };
    let mut own = BTreeMap::new();
    for (k, v) in labels {
        match *k {
            LABEL_NETWORK => at.network = Some((*v).into()),
            LABEL_CLUSTER => at.cluster = (*v).into(),
            _ => {
                own.insert((*k).to_owned(), (*v).to_owned());
            }
        }
    }
    e.info_mut().labels = Arc::new(own);
    e
}

/// The proxy of istiod's tests, with these labels (network and cluster as metadata).
fn client(labels: &[(&str, &str)]) -> Proxy {
    let mut p = proxy(ProxyKind::Sidecar, "default");
    p.locality = Locality {
        region: "region1".into(),
        zone: "zone1".into(),
        subzone: "subzone1".into(),
    };
    for (k, v) in labels {
        match *k {
            LABEL_NETWORK => p.network = Some((*v).into()),
            LABEL_CLUSTER => p.cluster_id = Some((*v).into()),
            _ => {
                p.labels.insert((*k).to_owned(), (*v).to_owned());
            }
        }
    }
    p
}

fn render(a: &Assignment) -> Vec<String> {
    a.localities
        .iter()
        .map(|g| {
            let eps: Vec<String> = g
                .endpoints
                .iter()
                .map(|t| match t.weight {
                    1 => t.address.to_string(),
                    w => format!("{}({w})", t.address),
                })
                .collect();
            format!("p{} {} w={}: {}", g.priority, g.locality, g.weight, eps.join(" "))
        })
        .collect()
}

fn failover_mode(failover: &[(&str, &str)], priority: &[&str]) -> Mode {
    let dr = LocalityLbSetting {
        failover: failover
            .iter()
            .map(|(from, to)| Failover {
                from: (*from).into(),
                to: (*to).into(),
            })
            .collect(),
        failover_priority: priority.iter().map(|p| (*p).to_owned()).collect(),
        ..Default::default()
    };
    mode(Some(&dr), &mesh::LocalityLbSetting::default(), true)
}

fn run(mode: &Mode, proxy: &Proxy, eps: &[Endpoint], dups: Client) -> Vec<String> {
    let plan = Plan::new(mode, Place::of(proxy));
    render(&plan.assignment("c".into(), &port(), eps, dups, &BTreeMap::new()))
}

/// istiod's `buildFakeCluster` localities, one endpoint each.
fn ladder_endpoints() -> Vec<Endpoint> {
    vec![
        ep("10.0.0.1", "region1/zone1/subzone1", &[]),
        ep("10.0.0.2", "region1/zone1/subzone2", &[]),
        ep("10.0.0.3", "region1/zone2/subzone1", &[]),
        ep("10.0.0.4", "region2/zone1/subzone1", &[]),
        ep("10.0.0.5", "region3/zone1/subzone1", &[]),
        ep("10.0.0.6", "", &[]),
    ]
}

#[test]
fn failover_ladder_and_region_pairs() {
    let p = client(&[]);
    let eps = ladder_endpoints();
    let cases: [(&str, Mode, &[Endpoint], Vec<&str>); 4] = [
        (
            // Same subzone 0, zone 1, region 2, the failover region 3, other regions (and none) 4.
            "all priorities",
            failover_mode(&[("region1", "region2")], &[]),
            &eps,
            vec![
                "p4  w=1: 10.0.0.6",
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p1 region1/zone1/subzone2 w=1: 10.0.0.2",
                "p2 region1/zone2/subzone1 w=1: 10.0.0.3",
                "p3 region2/zone1/subzone1 w=1: 10.0.0.4",
                "p4 region3/zone1/subzone1 w=1: 10.0.0.5",
            ],
        ),
        (
            // No failover pair: every other region is 3.
            "default ladder",
            failover_mode(&[], &[]),
            &eps,
            vec![
                "p3  w=1: 10.0.0.6",
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p1 region1/zone1/subzone2 w=1: 10.0.0.2",
                "p2 region1/zone2/subzone1 w=1: 10.0.0.3",
                "p3 region2/zone1/subzone1 w=1: 10.0.0.4",
                "p3 region3/zone1/subzone1 w=1: 10.0.0.5",
            ],
        ),
        (
            // Gaps are closed: 1 and 3 become 0 and 1 (gRPC NACKs a missing priority).
            "priorities with gaps",
            failover_mode(&[("region1", "region2")], &[]),
            &[eps[1].clone(), eps[3].clone()],
            vec![
                "p0 region1/zone1/subzone2 w=1: 10.0.0.2",
                "p1 region2/zone1/subzone1 w=1: 10.0.0.4",
            ],
        ),
        (
            // A locality without region is another region, not the failover target.
            "empty locality",
            failover_mode(&[("region1", "region2")], &[]),
            &[eps[1].clone(), eps[3].clone(), eps[5].clone()],
            vec![
                "p2  w=1: 10.0.0.6",
                "p0 region1/zone1/subzone2 w=1: 10.0.0.2",
                "p1 region2/zone1/subzone1 w=1: 10.0.0.4",
            ],
        ),
    ];
    for (name, mode, eps, want) in cases {
        assert_eq!(run(&mode, &p, eps, Client::Envoy), want, "{name}");
    }
}

#[test]
fn locality_lb_off_leaves_everything_at_priority_0() {
    let p = client(&[]);
    let eps = ladder_endpoints();
    let off = [
        (
            mode(
                Some(&LocalityLbSetting {
                    enabled: Some(false),
                    failover_priority: vec![LABEL_NETWORK.into()],
                    ..Default::default()
                }),
                &mesh::LocalityLbSetting::default(),
                true,
            ),
            Off::Disabled(Source::DestinationRule),
        ),
        (
            mode(
                None,
                &mesh::LocalityLbSetting {
                    enabled: false,
                    ..Default::default()
                },
                true,
            ),
            Off::Disabled(Source::MeshConfig),
        ),
        // Failover without outlier detection: Envoy would never leave priority 0.
        (
            mode(None, &mesh::LocalityLbSetting::default(), false),
            Off::NoOutlierDetection(Source::MeshConfig),
        ),
    ];
    for (mode, why) in off {
        assert_eq!(mode, Mode::Off { why });
        let got = run(&mode, &p, &eps, Client::Envoy);
        assert!(got.iter().all(|l| l.starts_with("p0 ")), "{got:?}");
    }
}

#[test]
fn the_destination_rule_setting_replaces_the_mesh_setting_whole() {
    let mesh = mesh::LocalityLbSetting {
        failover_priority: vec![LABEL_NETWORK.into()],
        ..Default::default()
    };
    // The DR says nothing about failoverPriority: the mesh's is not merged in.
    let from_dr = mode(Some(&LocalityLbSetting::default()), &mesh, true);
    assert_eq!(
        from_dr,
        Mode::Failover {
            source: Source::DestinationRule,
            failover: vec![],
            priority: vec![]
        }
    );
    let from_mesh = mode(None, &mesh, true);
    assert!(
        matches!(from_mesh, Mode::Failover { source: Source::MeshConfig, ref priority, .. } if priority.len() == 1)
    );
}

/// name, failoverPriority, the proxy's labels, the rendered assignment.
type PriorityCase<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

#[test]
fn failover_priority_splits_localities_by_label_match() {
    // istiod's FailoverPriority table: endpoints in three regions with network/cluster/key labels.
    let eps = vec![
        ep("1.1.1.1", "region1/zone1/subzone1", &[]),
        ep(
            "2.2.2.2",
            "region1/zone1/subzone1",
            &[(LABEL_NETWORK, "n2"), (LABEL_CLUSTER, "c2"), ("key", "value")],
        ),
        ep(
            "3.3.3.3",
            "region2/zone2/subzone2",
            &[(LABEL_NETWORK, "n1"), ("key", "value")],
        ),
        ep(
            "4.4.4.4",
            "region2/zone2/subzone2",
            &[(LABEL_NETWORK, "n2"), ("key", "value")],
        ),
    ];
    let net_cluster = [LABEL_NETWORK, LABEL_CLUSTER];
    let cases: [PriorityCase; 5] = [
        (
            "match no label: one priority",
            net_cluster.to_vec(),
            vec![(LABEL_NETWORK, "test"), (LABEL_CLUSTER, "test")],
            vec![
                "p0 region1/zone1/subzone1 w=2: 1.1.1.1 2.2.2.2",
                "p0 region2/zone2/subzone2 w=2: 3.3.3.3 4.4.4.4",
            ],
        ),
        (
            "match the network label",
            net_cluster.to_vec(),
            vec![(LABEL_NETWORK, "n2"), (LABEL_CLUSTER, "test")],
            vec![
                "p0 region1/zone1/subzone1 w=1: 2.2.2.2",
                "p1 region1/zone1/subzone1 w=1: 1.1.1.1",
                "p0 region2/zone2/subzone2 w=1: 4.4.4.4",
                "p1 region2/zone2/subzone2 w=1: 3.3.3.3",
            ],
        ),
        (
            "match all labels: 3 − (first mismatch)",
            vec!["key", LABEL_NETWORK, LABEL_CLUSTER],
            vec![("key", "value"), (LABEL_NETWORK, "n2"), (LABEL_CLUSTER, "c2")],
            vec![
                "p0 region1/zone1/subzone1 w=1: 2.2.2.2",
                "p3 region1/zone1/subzone1 w=1: 1.1.1.1",
                "p1 region2/zone2/subzone2 w=1: 4.4.4.4",
                "p2 region2/zone2/subzone2 w=1: 3.3.3.3",
            ],
        ),
        (
            // `key=value` compares with the pinned value, whatever the proxy's label.
            "pinned value",
            vec!["key=value", LABEL_NETWORK],
            vec![("key", "other"), (LABEL_NETWORK, "n1")],
            vec![
                "p1 region1/zone1/subzone1 w=1: 2.2.2.2",
                "p2 region1/zone1/subzone1 w=1: 1.1.1.1",
                "p0 region2/zone2/subzone2 w=1: 3.3.3.3",
                "p1 region2/zone2/subzone2 w=1: 4.4.4.4",
            ],
        ),
        (
            // With failover pairs too: failoverPriority rank × 5 + ladder (0 here, 3 for the failover
            // region), renumbered: 0, 3, 5, 8 → 0, 1, 2, 3.
            "combined with failover",
            vec![LABEL_NETWORK],
            vec![(LABEL_NETWORK, "n2")],
            vec![
                "p0 region1/zone1/subzone1 w=1: 2.2.2.2",
                "p2 region1/zone1/subzone1 w=1: 1.1.1.1",
                "p1 region2/zone2/subzone2 w=1: 4.4.4.4",
                "p3 region2/zone2/subzone2 w=1: 3.3.3.3",
            ],
        ),
    ];
    for (name, priority, labels, want) in cases {
        let failover: &[(&str, &str)] = if name.starts_with("combined") {
            &[("region1", "region2")]
        } else {
            &[]
        };
        let mode = failover_mode(failover, &priority);
        // Each locality's groups in rank order, as istiod splits them.
        assert_eq!(run(&mode, &client(&labels), &eps, Client::Envoy), want, "{name}");
    }
}

#[test]
fn a_proxy_without_any_label_gets_no_failover_priority() {
    let mut p = proxy(ProxyKind::Sidecar, "default");
    p.labels.clear();
    let eps = [
        ep("1.1.1.1", "", &[(LABEL_NETWORK, "n1")]),
        ep("2.2.2.2", "", &[]),
    ];
    let got = run(&failover_mode(&[], &[LABEL_NETWORK]), &p, &eps, Client::Envoy);
    assert_eq!(got, ["p0  w=2: 1.1.1.1 2.2.2.2"]);
}

#[test]
fn a_gateway_is_ranked_as_what_it_stands_for() {
    // ★ The gateway carries the region, cluster and failoverPriority labels of the endpoints it
    // stands for (istiod's has only its network and own cluster, so [network, region] would rank a
    // same-region remote by its missing region, istio#49500).
    let mut gw = ep(
        "192.0.2.1",
        "region1/zone1/subzone1",
        &[(LABEL_NETWORK, "n2"), ("tier", "gold")],
    );
    gw.kind = WorkloadKind::NetworkGateway;
    let local = ep("10.0.0.1", "region2/zone1/subzone1", &[(LABEL_NETWORK, "n1")]);
    let p = client(&[(LABEL_NETWORK, "n1"), (LABEL_REGION, "region1"), ("tier", "gold")]);
    let cases: [(&str, &[&str], (u32, u32)); 4] = [
        // The local endpoint differs on region (rank 1), the gateway on network (rank 2).
        ("network first", &[LABEL_NETWORK, LABEL_REGION], (1, 2)),
        // Region first: the remote region1 endpoints behind the gateway come first.
        ("region first", &[LABEL_REGION, LABEL_NETWORK], (2, 1)),
        // A custom label kept through the gateway matches the proxy's.
        ("custom label", &["tier"], (1, 0)),
        ("custom label, then region", &["tier", LABEL_REGION], (2, 0)),
    ];
    for (name, priority, want) in cases {
        let mode = failover_mode(&[], priority);
        let plan = Plan::new(&mode, Place::of(&p));
        assert_eq!((plan.rank(&local), plan.rank(&gw)), want, "{name}");
    }
    let mode = failover_mode(&[], &[LABEL_NETWORK]);
    let plan = Plan::new(&mode, Place::of(&p));
    assert_eq!(
        plan.why(&gw, gw.locality()).label_mismatch,
        Some(LabelMismatch {
            index: 0,
            key: LABEL_NETWORK.into(),
            want: "n1".into(),
            got: "n2".into()
        })
    );
}

#[test]
fn distribute_shares_each_percentage_by_weight_and_empties_the_rest() {
    let mut eps = vec![
        ep("10.0.0.1", "region1/zone1/subzone1", &[]),
        ep("10.0.0.2", "region1/zone1/subzone1", &[]),
        ep("10.0.0.3", "region1/zone1/subzone2", &[]),
        ep("10.0.0.4", "region1/zone2/subzone1", &[]),
        ep("10.0.0.5", "region2/zone1/subzone1", &[]),
    ];
    eps[2].weight = 3;
    let dist = |from: &str, to: &[(&str, u32)]| LocalityLbSetting {
        distribute: vec![Distribute {
            from: from.into(),
            to: to.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }],
        ..Default::default()
    };
    let cases = [
        (
            "between subzones",
            dist(
                "region1/zone1/subzone1",
                &[
                    ("region1/zone1/subzone1", 80),
                    ("region1/zone1/subzone2", 15),
                    ("region1/zone2/*", 5),
                ],
            ),
            vec![
                "p0 region1/zone1/subzone1 w=80: 10.0.0.1 10.0.0.2",
                "p0 region1/zone1/subzone2 w=15: 10.0.0.3(3)",
                "p0 region1/zone2/subzone1 w=5: 10.0.0.4",
                "p0 region2/zone1/subzone1 w=1: ",
            ],
        ),
        (
            // `region1/*` is shared by three localities by weight (2:3:1 of 70, rounded up).
            "wildcard destination",
            dist("region1/*", &[("region1/*", 70), ("region2", 30)]),
            vec![
                "p0 region1/zone1/subzone1 w=24: 10.0.0.1 10.0.0.2",
                "p0 region1/zone1/subzone2 w=35: 10.0.0.3(3)",
                "p0 region1/zone2/subzone1 w=12: 10.0.0.4",
                "p0 region2/zone1/subzone1 w=30: 10.0.0.5",
            ],
        ),
        (
            // No rule for the proxy's locality: nothing changes.
            "no matching source",
            dist("region9", &[("region1", 100)]),
            vec![
                "p0 region1/zone1/subzone1 w=2: 10.0.0.1 10.0.0.2",
                "p0 region1/zone1/subzone2 w=3: 10.0.0.3(3)",
                "p0 region1/zone2/subzone1 w=1: 10.0.0.4",
                "p0 region2/zone1/subzone1 w=1: 10.0.0.5",
            ],
        ),
    ];
    let p = client(&[]);
    for (name, setting, want) in cases {
        // Distribute applies without outlier detection.
        let mode = mode(Some(&setting), &mesh::LocalityLbSetting::default(), false);
        assert_eq!(run(&mode, &p, &eps, Client::Envoy), want, "{name}");
        // gRPC is not sent the emptied locality.
        let grpc: Vec<String> = want
            .iter()
            .filter(|l| !l.ends_with(": "))
            .map(|l| l.to_string())
            .collect();
        assert_eq!(run(&mode, &p, &eps, Client::Grpc), grpc, "{name}, gRPC");
    }
}

#[test]
fn a_repeated_address_is_merged_into_its_best_priority() {
    // One gateway standing in for endpoints of two localities: Envoy would keep only its first
    // occurrence in the assignment (envoy#23445), gRPC NACKs the repeat; both get it once in the
    // better priority with the summed weight, and the emptied priority disappears.
    let mut a = ep("192.0.2.1", "region2/zone1/subzone1", &[]);
    a.weight = 2;
    let mut b = ep("192.0.2.1", "region1/zone2/subzone1", &[]);
    b.weight = 3;
    let local = ep("10.0.0.1", "region1/zone1/subzone1", &[]);
    let eps = [a, b, local];
    let mode = failover_mode(&[], &[]);
    let p = client(&[]);
    for c in [Client::Envoy, Client::Grpc] {
        assert_eq!(
            run(&mode, &p, &eps, c),
            [
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p1 region1/zone2/subzone1 w=5: 192.0.2.1(5)",
            ],
            "{c:?}"
        );
    }
}

#[test]
fn the_cache_key_holds_only_what_the_result_reads() {
    let ladder = failover_mode(&[("region1", "region2")], &[]);
    let labels = failover_mode(&[], &[LABEL_NETWORK, "key=v"]);
    let off = Mode::Off {
        why: Off::NoOutlierDetection(Source::MeshConfig),
    };
    let key = |m: &Mode, p: &Proxy| Plan::new(m, Place::of(p)).key();
    let a = client(&[(LABEL_NETWORK, "n1"), ("app", "a")]);
    let mut b = client(&[(LABEL_NETWORK, "n1"), ("app", "b")]);
    // Same locality and network, other labels: one entry.
    assert_eq!(key(&ladder, &a), key(&ladder, &b));
    assert_eq!(key(&labels, &a), key(&labels, &b));
    assert_eq!(key(&ladder, &a), "loc=region1/zone1/subzone1>region2");
    assert_eq!(key(&labels, &a), "|topology.istio.io/network:n1|key:v");
    // Another zone: the ladder differs, failoverPriority on the network does not.
    b.locality.zone = "zone2".into();
    assert_ne!(key(&ladder, &a), key(&ladder, &b));
    assert_eq!(key(&labels, &a), key(&labels, &b));
    assert_eq!(key(&off, &a), "");
    // A locality from the proxy's topology labels wins over node.locality (istiod's setTopologyLabels).
    b.labels.insert(LABEL_REGION.into(), "region9".into());
    assert_eq!(Place::of(&b).locality(), ("region9", "", ""));
    assert_eq!(Place::of(&b).label(LABEL_REGION), Some("region9"));
}

#[test]
fn proxies_of_one_locality_share_one_encode() {
    use crate::{
        envoy::{
            XdsType, {AllEndpoints, Context, NetworkView, StaticMesh},
        },
        traffic::tests::config,
        xds::{Subscription, cache::ResourceCache, generate::generate},
    };
    let name: Arc<str> = "outbound|7070||echo.default.svc.cluster.local".into();
    let svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
    let eps = vec![
        ep("10.0.0.1", "region1/zone1/subzone1", &[]),
        ep("10.0.0.2", "region2/zone1/subzone1", &[]),
    ];
    let plain = StaticMesh::new(1).with(svc.clone(), eps.clone());
    let failover = StaticMesh::new(1).with(svc, eps).with_config([config(
        "DestinationRule",
        "default",
        "echo",
        "1",
        "host: echo\ntrafficPolicy: {outlierDetection: {consecutive5xxErrors: 1}}\n",
    )]);
    let sub = Subscription {
        wildcard: false,
        names: Arc::new([name].into()),
    };
    let cache = ResourceCache::new(100, None);
    let eds = |mesh: &StaticMesh, p: &Proxy| {
        let view = NetworkView::of(p);
        let ctx = Context {
            mesh,
            proxy: p,
            view: &view,
            endpoints: &AllEndpoints,
            scope: &crate::envoy::scope_of(mesh, p),
        };
        generate(&ctx, &cache, XdsType::Endpoint, &sub, None).remove(0)
    };
    let a = client(&[("app", "a")]);
    let b = client(&[("app", "b")]);
    let mut elsewhere = client(&[("app", "a")]);
    elsewhere.locality.region = "region2".into();
    // Failover reads the locality: one encode per locality, whatever the other labels.
    assert!(Arc::ptr_eq(&eds(&failover, &a), &eds(&failover, &b)));
    assert!(!Arc::ptr_eq(&eds(&failover, &a), &eds(&failover, &elsewhere)));
    // Without a DestinationRule nothing reads the proxy: one encode for all.
    assert!(Arc::ptr_eq(&eds(&plain, &a), &eds(&plain, &elsewhere)));
}

#[test]
fn a_deprioritized_stale_cluster_comes_after_every_other_priority() {
    // ★ Endpoints of a stale remote whose policy is `deprioritize` come last, under any mode: off
    // (everything else at 0), the ladder (past region failover) and failoverPriority.
    let mut stale_ep = ep("10.9.0.1", "region1/zone1/subzone1", &[(LABEL_CLUSTER, "c9")]);
    stale_ep.weight = 2;
    let eps = [
        ep("10.0.0.1", "region1/zone1/subzone1", &[(LABEL_CLUSTER, "c1")]),
        ep("10.0.0.2", "region2/zone1/subzone1", &[(LABEL_CLUSTER, "c2")]),
        stale_ep,
    ];
    let stale = BTreeMap::from([(ClusterId::from("c9"), StaleAction::Deprioritize)]);
    let off = mode(None, &mesh::LocalityLbSetting::default(), false);
    let cases = [
        (
            "locality load balancing off",
            off,
            vec![
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p1 region1/zone1/subzone1 w=2: 10.9.0.1(2)",
                "p0 region2/zone1/subzone1 w=1: 10.0.0.2",
            ],
        ),
        (
            "region ladder",
            failover_mode(&[], &[]),
            vec![
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p2 region1/zone1/subzone1 w=2: 10.9.0.1(2)",
                "p1 region2/zone1/subzone1 w=1: 10.0.0.2",
            ],
        ),
        (
            "failoverPriority on the cluster",
            failover_mode(&[], &[LABEL_CLUSTER]),
            vec![
                "p0 region1/zone1/subzone1 w=1: 10.0.0.1",
                "p2 region1/zone1/subzone1 w=2: 10.9.0.1(2)",
                "p1 region2/zone1/subzone1 w=1: 10.0.0.2",
            ],
        ),
    ];
    let p = client(&[(LABEL_CLUSTER, "c1")]);
    for (name, mode, want) in cases {
        let plan = Plan::new(&mode, Place::of(&p));
        let got = render(&plan.assignment("c".into(), &port(), &eps, Client::Envoy, &stale));
        assert_eq!(got, want, "{name}");
        // Keep changes nothing.
        let keep = BTreeMap::from([(ClusterId::from("c9"), StaleAction::Keep)]);
        assert_eq!(
            render(&plan.assignment("c".into(), &port(), &eps, Client::Envoy, &keep)),
            render(&plan.assignment("c".into(), &port(), &eps, Client::Envoy, &BTreeMap::new())),
            "{name}"
        );
    }
}
