//! Random meshes: what explain says is sent must equal the decoded EDS resource, for every proxy kind.

use super::*;

/// A tiny deterministic PRNG (xorshift64*): reproducible random meshes without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32;
        usize::try_from(r).unwrap() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NETWORKS: [Option<&str>; 4] = [Some("n1"), Some("n2"), Some("n3"), None];
const CLUSTERS: [&str; 3] = ["c1", "c2", "c3"];
const ZONES: [&str; 3] = ["z1", "z2", "z3"];

/// Two services (one with two ports), endpoints anywhere, 0–2 gateways per network, some of them
/// of no cluster and some sharing an address across networks.
fn random_mesh(rng: &mut Rng) -> StaticMesh {
    let mut m = StaticMesh::new(1);
    let services = [
        service(
            "a",
            "sample",
            &[("http", 80, Protocol::Http), ("grpc", 7070, Protocol::Grpc)],
        ),
        service("b", "sample", &[("grpc", 7070, Protocol::Grpc)]),
    ];
    for (s, svc) in services.into_iter().enumerate() {
        let count = rng.below(9);
        let eps = (0..count)
            .map(|i| {
                // Few distinct addresses, so some repeat across clusters and localities.
                let address: IpAddr = format!("10.{s}.0.{}", rng.below(6) + 1).parse().unwrap();
                let names: &[&str] = match rng.below(3) {
                    0 => &["http"],
                    1 => &["grpc"],
                    _ => &["http", "grpc"],
                };
                let ports: Arc<[EndpointPort]> = names
                    .iter()
                    .map(|n| EndpointPort {
                        service_port_name: (*n).into(),
                        port: 8000 + u16::try_from(i).unwrap(),
                    })
                    .collect();
                let cluster = *rng.pick(&CLUSTERS);
                Endpoint {
                    address,
                    ports,
                    placement: crate::model::Placement::new(
                        cluster.into(),
                        rng.pick(&NETWORKS).map(Into::into),
                        Locality {
                            region: "r".into(),
                            zone: (*rng.pick(&ZONES)).into(),
                            subzone: "".into(),
                        },
                    ),
                    info: crate::model::WorkloadInfo::new(Labels::default(), None),
                    workload_meta: crate::model::workload_meta("", "", &Default::default(), cluster),
                    tls_mode: *rng.pick(&[TlsMode::Istio, TlsMode::Istio, TlsMode::Disabled]),
                    health: *rng.pick(&[
                        Health::Healthy,
                        Health::Healthy,
                        Health::Unhealthy,
                        Health::Draining,
                    ]),
                    workload: None,
                    kind: crate::model::WorkloadKind::Pod,
                    weight: u32::try_from(rng.below(4)).unwrap(),
                }
            })
            .collect();
        m = m.with(svc, eps);
    }
    for net in NETWORKS.iter().flatten() {
        for _ in 0..rng.below(3) {
            m.gateways.push(NetworkGateway {
                network: (*net).into(),
                cluster: rng.pick(&[Some("c1"), Some("c2"), None]).map(Into::into),
                address: format!("192.0.2.{}", rng.below(4) + 1).parse().unwrap(),
                port: *rng.pick(&[15443, 15444]),
                hostname: None,
            });
        }
    }
    m.gateways.sort();
    m.gateways.dedup();
    m
}

/// Every proxy kind, east-west gateway included, on a random network and view.
fn random_proxies(rng: &mut Rng) -> Vec<Proxy> {
    let mut view = || -> Vec<&str> {
        match rng.below(3) {
            0 => vec![],
            1 => vec!["n1"],
            _ => vec!["n2", "n3"],
        }
    };
    let (v1, v2, v3) = (view(), view(), view());
    let own = *rng.pick(&NETWORKS);
    let mut east_west = proxy(ProxyKind::Router, Some("n2"), &["n2"]);
    east_west.id = "router~east-west".into();
    vec![
        proxy(ProxyKind::Grpc, own, &v1),
        proxy(ProxyKind::Sidecar, *rng.pick(&NETWORKS), &v2),
        proxy(ProxyKind::Router, *rng.pick(&NETWORKS), &v3),
        east_west,
    ]
}

/// A sent row in comparable form: address, port, zone, weight, health, cluster (the network is not
/// encoded: istiod sends none).
type Row = (IpAddr, u16, String, u32, String, String);

/// What the proxy decodes from the wire, in wire order.
fn decoded_rows(cla: &ClusterLoadAssignment) -> Vec<Row> {
    use envoy_types::pb::envoy::config::{
        core::v3::{address, socket_address},
        endpoint::v3::lb_endpoint::HostIdentifier,
    };
    let mut rows = Vec::new();
    for group in &cla.endpoints {
        let zone = group
            .locality
            .as_ref()
            .map(|l| l.zone.clone())
            .unwrap_or_default();
        let sum: u32 = group
            .lb_endpoints
            .iter()
            .map(|e| e.load_balancing_weight.map_or(0, |w| w.value))
            .sum();
        assert_eq!(
            group.load_balancing_weight.map(|w| w.value),
            Some(sum),
            "locality weight"
        );
        for lb in &group.lb_endpoints {
            let Some(HostIdentifier::Endpoint(ep)) = &lb.host_identifier else {
                panic!("endpoint without an address: {lb:?}");
            };
            let Some(address::Address::SocketAddress(sa)) =
                ep.address.as_ref().and_then(|a| a.address.as_ref())
            else {
                panic!("not a socket address: {ep:?}");
            };
            let Some(socket_address::PortSpecifier::PortValue(port)) = sa.port_specifier else {
                panic!("no port: {sa:?}");
            };
            let istio = &lb.metadata.as_ref().unwrap().filter_metadata["istio"].fields;
            let text = |k: &str| match istio.get(k).and_then(|v| v.kind.as_ref()) {
                Some(Kind::StringValue(s)) => Some(s.clone()),
                _ => None,
            };
            let health = match lb.health_status {
                1 => "Healthy",
                2 => "Unhealthy",
                3 => "Draining",
                other => panic!("health {other}"),
            };
            rows.push((
                sa.address.parse().unwrap(),
                u16::try_from(port).unwrap(),
                zone.clone(),
                lb.load_balancing_weight.map_or(0, |w| w.value),
                health.to_owned(),
                // `workload;namespace;name;revision;cluster`
                text("workload")
                    .and_then(|w| Some(w.rsplit(';').next()?.to_owned()))
                    .unwrap_or_default(),
            ));
        }
    }
    rows
}

fn explained_rows(sent: &[SentEndpoint]) -> Vec<Row> {
    sent.iter()
        .map(|e| {
            (
                e.address,
                e.port,
                e.locality.zone.to_string(),
                e.weight,
                format!("{:?}", e.health),
                e.cluster.to_string(),
            )
        })
        .collect()
}

#[test]
fn explain_sends_exactly_what_eds_encodes_for_every_proxy_kind() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let m = random_mesh(&mut rng);
        for p in random_proxies(&mut rng) {
            let view = NetworkView::of(&p);
            let cache = ResourceCache::new(64, None);
            let ctx = Context {
                mesh: &m,
                proxy: &p,
                view: &view,
                endpoints: &SplitHorizon,
                scope: &scope_of(&m, &p),
            };
            for svc in m.services() {
                for report in explain(&m, &p, svc, None).ports {
                    let sub = Subscription {
                        wildcard: false,
                        names: Arc::new([Arc::from(report.eds_cluster.as_str())].into()),
                    };
                    let resources = generate(&ctx, &cache, XdsType::Endpoint, &sub, None);
                    let [eds] = resources.as_slice() else {
                        panic!("seed {seed}: one EDS resource for {}", report.eds_cluster);
                    };
                    let cla = ClusterLoadAssignment::decode(eds.value()).unwrap();
                    let wire = decoded_rows(&cla);
                    let case = format!(
                        "seed {seed}, {:?} proxy {:?}, {}",
                        p.kind, view, report.eds_cluster
                    );
                    assert_eq!(explained_rows(&report.sent), wire, "{case}");
                    if p.kind == ProxyKind::Grpc {
                        let mut addrs: Vec<_> = wire.iter().map(|r| (r.0, r.1)).collect();
                        addrs.sort();
                        let n = addrs.len();
                        addrs.dedup();
                        assert_eq!(addrs.len(), n, "{case}: gRPC NACKs a repeated address");
                    }
                    for e in &report.sent {
                        let is_gw = m
                            .gateways
                            .iter()
                            .any(|g| (g.address, g.port) == (e.address, e.port));
                        assert_eq!(e.gateway, is_gw, "{case}: gateway flag of {}", e.address);
                    }
                }
            }
        }
    }
}
