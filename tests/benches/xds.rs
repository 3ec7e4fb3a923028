//! CDS + EDS generation and encoding for 1,000 services × 10 endpoints: uncached (every resource
//! built and encoded) and cached (a second proxy with the same view: shared `Arc`s).

use std::{hint::black_box, net::IpAddr, sync::Arc};

use criterion::{Criterion, criterion_group, criterion_main};
use meshd::{
    envoy::{
        AllEndpoints, Context, NetworkView, Proxy, ProxyKind, StaticMesh, XdsType, scope_of,
        static_mesh::{endpoint, service},
    },
    model::{Locality, Protocol},
    xds::{Subscription, cache::ResourceCache, generate::generate},
};

fn mesh() -> StaticMesh {
    (0..1000u32).fold(StaticMesh::new(1), |m, i| {
        let eps = (0..10u32)
            .map(|j| {
                let ip = IpAddr::from([10, (i >> 8) as u8, i as u8, j as u8 + 1]);
                endpoint(ip, &[("grpc", 8080)], "cluster-1")
            })
            .collect();
        m.with(
            service(&format!("svc-{i}"), "bench", &[("grpc", 8080, Protocol::Grpc)]),
            eps,
        )
    })
}

fn proxy() -> Proxy {
    Proxy {
        id: "bench".into(),
        kind: ProxyKind::Grpc,
        cluster_id: None,
        network: None,
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

fn cds_eds(mesh: &StaticMesh, cache: &ResourceCache) -> usize {
    let (p, view) = (proxy(), NetworkView::default());
    let ctx = Context {
        mesh,
        proxy: &p,
        view: &view,
        endpoints: &AllEndpoints,
        scope: &scope_of(mesh, &p),
    };
    let wildcard = Subscription {
        wildcard: true,
        names: Default::default(),
    };
    let clusters = generate(&ctx, cache, XdsType::Cluster, &wildcard, None);
    let names = Subscription {
        wildcard: false,
        names: Arc::new(clusters.iter().map(|c| c.name.clone()).collect()),
    };
    let endpoints = generate(&ctx, cache, XdsType::Endpoint, &names, None);
    clusters.iter().chain(&endpoints).map(|r| r.value().len()).sum()
}

fn bench(c: &mut Criterion) {
    let mesh = mesh();
    let mut g = c.benchmark_group("cds+eds 1000 services x 10 endpoints");
    g.sample_size(20);
    g.bench_function("uncached", |b| {
        b.iter(|| black_box(cds_eds(&mesh, &ResourceCache::new(0, None))))
    });
    let warm = ResourceCache::new(100_000, None);
    cds_eds(&mesh, &warm);
    g.bench_function("cached", |b| b.iter(|| black_box(cds_eds(&mesh, &warm))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
