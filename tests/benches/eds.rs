//! EDS generation + encoding in istiod's `BenchmarkEndpointGeneration` shapes (endpoints per service /
//! services: 1/100, 10/10, 100/10, 1000/1), with split horizon over 4 networks with gateways, cache
//! miss and hit, reported per endpoint, beside the encode floor of the same messages; and CDS for
//! 1,000 services. Everything goes through the generators' public entry point with meshd's
//! [`SplitHorizon`] view, as a stream would.

use std::{collections::BTreeSet, hint::black_box, net::IpAddr, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use envoy_types::pb::envoy::config::{cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment};
use meshd::{
    envoy::{
        Context, NetworkView, Proxy, ProxyKind, Resource, SplitHorizon, StaticMesh, XdsType, scope_of,
        static_mesh::{endpoint, service},
    },
    istio::{self, Kind, ObjectMeta, Source},
    model::{Locality, NetworkGateway, Protocol, TlsMode},
    xds::{self, Subscription, cache::ResourceCache},
};
use prost::Message;

const NETWORKS: usize = 4;

/// Each network's east-west gateways, in its own cluster: one each, two for network-2 (so weights are
/// scaled by the LCM, as in a real multi-gateway network).
fn gateways() -> Vec<NetworkGateway> {
    (0..NETWORKS)
        .flat_map(|n| (0..if n == 2 { 2 } else { 1 }).map(move |g| (n, g)))
        .map(|(n, g)| NetworkGateway {
            network: format!("network-{n}").as_str().into(),
            cluster: Some(format!("cluster-{n}").as_str().into()),
            address: IpAddr::from([192, 168, n as u8, g as u8 + 1]),
            port: 15443,
            hostname: None,
        })
        .collect()
}

/// `services` services of `per_service` mTLS endpoints, round-robin over 4 networks (each its own
/// cluster) with gateways. A sidecar on network-0 gets a quarter of the endpoints directly and the rest
/// as their networks' gateways.
fn mesh(per_service: usize, services: usize) -> StaticMesh {
    let mut mesh = StaticMesh::new(1);
    mesh.gateways = gateways();
    (0..services).fold(mesh, |m, s| {
        let eps = (0..per_service)
            .map(|i| {
                let n = s * per_service + i;
                let ip = IpAddr::from([10, (n >> 16) as u8, (n >> 8) as u8, n as u8]);
                let mut e = endpoint(ip, &[("http", 8080)], &format!("cluster-{}", n % NETWORKS));
                e.placement_mut().network = Some(format!("network-{}", n % NETWORKS).as_str().into());
                e.tls_mode = TlsMode::Istio;
                e.workload = Some(format!("svc-{s}-{i}").into());
                e.info_mut().service_account =
                    Some(format!("spiffe://cluster.local/ns/bench/sa/svc-{s}").into());
                e
            })
            .collect();
        m.with(
            service(&format!("svc-{s}"), "bench", &[("http", 80, Protocol::Http)]),
            eps,
        )
    })
}

fn sidecar() -> Proxy {
    Proxy {
        id: "sidecar~10.255.0.1~bench.bench~bench.svc.cluster.local".into(),
        kind: ProxyKind::Sidecar,
        cluster_id: Some("cluster-0".into()),
        network: Some("network-0".into()),
        requested_network_view: vec![],
        namespace: Some("bench".into()),
        labels: Default::default(),
        ips: vec![],
        service_account: None,
        istio_version: None,
        locality: Locality::default(),
        user_agent: String::new(),
    }
}

/// Generates `ty` for `sub` as one stream would; returns the encoded bytes (kept alive by the caller).
fn generate(mesh: &StaticMesh, cache: &ResourceCache, ty: XdsType, sub: &Subscription) -> usize {
    let (proxy, endpoints) = (sidecar(), SplitHorizon);
    let view = NetworkView::of(&proxy);
    let ctx = Context {
        mesh,
        proxy: &proxy,
        view: &view,
        endpoints: &endpoints,
        scope: &scope_of(mesh, &proxy),
    };
    xds::generate::generate(&ctx, cache, ty, sub, None)
        .iter()
        .map(|r| r.value().len())
        .sum()
}

/// The resources one stream is sent for `sub`, built without a cache.
fn built(mesh: &StaticMesh, ty: XdsType, sub: &Subscription) -> Vec<Arc<Resource>> {
    let (proxy, endpoints) = (sidecar(), SplitHorizon);
    let view = NetworkView::of(&proxy);
    let ctx = Context {
        mesh,
        proxy: &proxy,
        view: &view,
        endpoints: &endpoints,
        scope: &scope_of(mesh, &proxy),
    };
    xds::generate::generate(&ctx, &ResourceCache::new(0, None), ty, sub, None)
}

/// A DestinationRule on every service of `mesh(_, services)`, so that each cluster looks its rule up
/// and reads what it decides: ISTIO_MUTUAL, outlier detection and locality failover (priorities).
fn with_rules(mesh: StaticMesh, services: usize) -> StaticMesh {
    let rule = |s: usize| {
        let meta = ObjectMeta {
            namespace: "bench".into(),
            name: format!("svc-{s}").into(),
            labels: Default::default(),
            annotations: Default::default(),
            revision: "1".into(),
            creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
            source: Source::Cluster("cluster-0".into()),
        };
        let spec = serde_json::json!({
            "host": format!("svc-{s}.bench.svc.cluster.local"),
            "trafficPolicy": {
                "tls": {"mode": "ISTIO_MUTUAL"},
                "outlierDetection": {"consecutive5xxErrors": 3},
                "loadBalancer": {"localityLbSetting": {"failover": [{"from": "r0", "to": "r1"}]}},
            },
        });
        Arc::new(istio::parse(Kind::DestinationRule, meta, &spec).expect("valid").0)
    };
    mesh.with_config((0..services).map(rule))
}

fn names(services: usize) -> Subscription {
    Subscription {
        wildcard: false,
        names: (0..services)
            .map(|s| Arc::from(format!("outbound|80||svc-{s}.bench.svc.cluster.local")))
            .collect::<BTreeSet<_>>()
            .into(),
    }
}

/// Per shape: `miss` (build + encode, no cache), `floor` (prost encoding the very messages the miss
/// sends, each into its `Any`: nothing built, the limit of the pipeline; report miss / floor), `hit`,
/// and for 1/100 and 100/10 `miss, DR per service` (a DestinationRule per service, see [`with_rules`]).
fn eds(c: &mut Criterion) {
    let mut g = c.benchmark_group("eds");
    for (per_service, services) in [(1, 100), (10, 10), (100, 10), (1000, 1)] {
        let (mesh, sub) = (mesh(per_service, services), names(services));
        g.throughput(Throughput::Elements((per_service * services) as u64));
        g.bench_function(format!("{per_service}/{services} miss"), |b| {
            b.iter(|| {
                black_box(generate(
                    &mesh,
                    &ResourceCache::new(0, None),
                    XdsType::Endpoint,
                    &sub,
                ))
            })
        });
        let sent: Vec<(Arc<str>, ClusterLoadAssignment)> = built(&mesh, XdsType::Endpoint, &sub)
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    prost::Message::decode(r.value()).expect("a ClusterLoadAssignment"),
                )
            })
            .collect();
        assert_eq!(sent.len(), services, "one assignment per service");
        g.bench_function(format!("{per_service}/{services} floor"), |b| {
            b.iter(|| {
                let encoded = sent.iter().map(|(name, cla)| {
                    Resource::encode_with_version(XdsType::Endpoint, name.clone(), cla, 0)
                        .value()
                        .len()
                });
                black_box(encoded.sum::<usize>())
            })
        });
        let warm = ResourceCache::new(100_000, None);
        generate(&mesh, &warm, XdsType::Endpoint, &sub);
        g.bench_function(format!("{per_service}/{services} hit"), |b| {
            b.iter(|| black_box(generate(&mesh, &warm, XdsType::Endpoint, &sub)))
        });
        if [(1, 100), (100, 10)].contains(&(per_service, services)) {
            let ruled = with_rules(mesh, services);
            assert_eq!(built(&ruled, XdsType::Endpoint, &sub).len(), services);
            g.bench_function(format!("{per_service}/{services} miss, DR per service"), |b| {
                b.iter(|| {
                    black_box(generate(
                        &ruled,
                        &ResourceCache::new(0, None),
                        XdsType::Endpoint,
                        &sub,
                    ))
                })
            });
        }
    }
    g.finish();
}

/// A DestinationRule on every service of [`mesh`]: subsets v1/v2, outlier detection, a connection
/// pool and `ISTIO_MUTUAL`, so each service has three clusters with every policy field istiod writes.
fn rules(services: usize) -> Vec<Arc<istio::Config>> {
    (0..services)
        .map(|s| {
            let meta = ObjectMeta {
                namespace: "bench".into(),
                name: format!("svc-{s}").into(),
                labels: Default::default(),
                annotations: Default::default(),
                revision: "1".into(),
                creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
                source: Source::Cluster("cluster-0".into()),
            };
            let spec = serde_json::json!({
                "host": format!("svc-{s}"),
                "trafficPolicy": {
                    "connectionPool": {
                        "tcp": {"maxConnections": 100, "connectTimeout": "5s"},
                        "http": {"http2MaxRequests": 1000, "maxRequestsPerConnection": 10, "idleTimeout": "60s"},
                    },
                    "outlierDetection": {"consecutive5xxErrors": 5, "interval": "10s", "baseEjectionTime": "30s"},
                    "tls": {"mode": "ISTIO_MUTUAL"},
                },
                "subsets": [
                    {"name": "v1", "labels": {"version": "v1"}},
                    {"name": "v2", "labels": {"version": "v2"}},
                ],
            });
            match istio::parse(Kind::DestinationRule, meta, &spec) {
                Ok((config, _)) => Arc::new(config),
                Err(e) => panic!("bench DestinationRule: {e:?}"),
            }
        })
        .collect()
}

/// The clusters a miss produced, decoded once: what the floor re-encodes.
fn decoded(mesh: &StaticMesh, sub: &Subscription) -> Vec<(Arc<str>, Cluster)> {
    let (proxy, endpoints) = (sidecar(), SplitHorizon);
    let view = NetworkView::of(&proxy);
    let ctx = Context {
        mesh,
        proxy: &proxy,
        view: &view,
        endpoints: &endpoints,
        scope: &scope_of(mesh, &proxy),
    };
    xds::generate::generate(&ctx, &ResourceCache::new(0, None), XdsType::Cluster, sub, None)
        .iter()
        .map(|r| match Cluster::decode(r.value()) {
            Ok(c) => (r.name.clone(), c),
            Err(e) => panic!("{}: {e}", r.name),
        })
        .collect()
}

fn cds(c: &mut Criterion) {
    let wildcard = Subscription {
        wildcard: true,
        names: Default::default(),
    };
    let plain = mesh(10, 1000);
    let with_rules = mesh(10, 1000).with_config(rules(1000));
    let mut g = c.benchmark_group("cds 1000 services");
    g.sample_size(20);
    for (label, mesh) in [("", &plain), (", DR per service", &with_rules)] {
        let clusters = decoded(mesh, &wildcard);
        g.throughput(Throughput::Elements(clusters.len() as u64));
        g.bench_function(format!("miss{label}"), |b| {
            b.iter(|| {
                black_box(generate(
                    mesh,
                    &ResourceCache::new(0, None),
                    XdsType::Cluster,
                    &wildcard,
                ))
            })
        });
        // The physical limit: encoding the same clusters into the `Any`s meshd ships, nothing else.
        g.bench_function(format!("floor{label}"), |b| {
            b.iter(|| {
                let encoded = clusters
                    .iter()
                    .map(|(name, c)| Resource::encode_with_version(XdsType::Cluster, name.clone(), c, 0));
                black_box(encoded.map(|r| r.any().len()).sum::<usize>())
            })
        });
        let warm = ResourceCache::new(100_000, None);
        generate(mesh, &warm, XdsType::Cluster, &wildcard);
        g.bench_function(format!("hit{label}"), |b| {
            b.iter(|| black_box(generate(mesh, &warm, XdsType::Cluster, &wildcard)))
        });
    }
    g.finish();
}

criterion_group!(benches, eds, cds);
criterion_main!(benches);
