//! What Sidecar scoping saves: one sidecar of a 10-cluster mesh (1,000 services per cluster, 6 mTLS
//! endpoints each) gets every xDS type without a Sidecar and with one importing two hosts; the encoded
//! bytes are summed and compared. `docs/traffic-management.md` quotes the printed figures.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc};

use meshd::{
    envoy::{
        Context, StaticMesh, scope_of,
        static_mesh::{endpoint, proxy, service},
    },
    istio::{self, Kind, ObjectMeta, Source},
    model::{Protocol, TlsMode},
    xds::{
        AllEndpoints, NetworkView, ProxyKind, Subscription, XdsType, cache::ResourceCache, generate::generate,
    },
};

const CLUSTERS: usize = 10;
const SERVICES: usize = 1_000;
const ENDPOINTS: usize = 6;

fn mesh() -> StaticMesh {
    let mut mesh = StaticMesh::new(1);
    for c in 0..CLUSTERS {
        let cluster = format!("cluster-{c}");
        for s in 0..SERVICES {
            let ns = format!("ns-{c}-{}", s / 100);
            let mut svc = service(&format!("svc-{s}"), &ns, &[("http", 80, Protocol::Http)]);
            let vip: IpAddr = [10, 96 + c as u8, (s / 256) as u8, (s % 256) as u8].into();
            svc.cluster_vips.insert(cluster.as_str().into(), vec![vip]);
            let eps = (0..ENDPOINTS)
                .map(|e| {
                    let ip: IpAddr = [10, c as u8, (s / 40) as u8, (s % 40 * 6 + e) as u8].into();
                    let mut ep = endpoint(ip, &[("http", 8080)], &cluster);
                    ep.tls_mode = TlsMode::Istio;
                    ep.info_mut().service_account =
                        Some(format!("spiffe://cluster.local/ns/{ns}/sa/svc-{s}").into());
                    ep
                })
                .collect();
            mesh = mesh.with(svc, eps);
        }
    }
    mesh
}

/// A Sidecar in `app` importing two hosts of two clusters.
fn sidecar() -> Arc<istio::Config> {
    let meta = ObjectMeta {
        namespace: "app".into(),
        name: "default".into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: None,
        source: Source::File {
            path: "sidecar.yaml".into(),
            index: 0,
        },
    };
    let spec = serde_json::json!({"egress": [{"hosts": [
        "ns-0-0/svc-0.ns-0-0.svc.cluster.local",
        "ns-7-3/svc-321.ns-7-3.svc.cluster.local",
    ]}]});
    Arc::new(istio::parse(Kind::Sidecar, meta, &spec).expect("valid").0)
}

/// Every type a sidecar in `app` subscribes to, as Envoy would (wildcard CDS and LDS, then EDS for
/// the EDS clusters and RDS for the HTTP listeners' routes): (resource count, encoded bytes).
fn everything(mesh: &StaticMesh) -> (usize, usize) {
    let (p, cache, view) = (
        proxy(ProxyKind::Sidecar, "app"),
        ResourceCache::new(0, None),
        NetworkView::default(),
    );
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
    let named = |names: BTreeSet<Arc<str>>| Subscription {
        wildcard: false,
        names: Arc::new(names),
    };
    let clusters = generate(&ctx, &cache, XdsType::Cluster, &wildcard, None);
    let listeners = generate(&ctx, &cache, XdsType::Listener, &wildcard, None);
    let eds = named(
        clusters
            .iter()
            .filter(|r| r.name.starts_with("outbound|"))
            .map(|r| r.name.clone())
            .collect(),
    );
    let rds = named(
        listeners
            .iter()
            .filter_map(|r| r.name.strip_prefix("0.0.0.0_").map(Arc::from))
            .collect(),
    );
    let endpoints = generate(&ctx, &cache, XdsType::Endpoint, &eds, None);
    let routes = generate(&ctx, &cache, XdsType::Route, &rds, None);
    assert!(
        !endpoints.is_empty() && !routes.is_empty(),
        "every type is generated"
    );
    let all = [clusters, listeners, endpoints, routes].concat();
    (all.len(), all.iter().map(|r| r.any().len()).sum())
}

#[test]
fn a_sidecar_importing_two_hosts_gets_kilobytes() {
    let mesh = mesh();
    let (full_count, full) = everything(&mesh);
    let scoped_mesh = mesh.with_config([sidecar()]);
    let (scoped_count, scoped) = everything(&scoped_mesh);
    println!(
        "sidecar of {CLUSTERS} clusters × {SERVICES} services × {ENDPOINTS} endpoints: \
         no Sidecar {full_count} resources, {full} bytes ({:.1} MiB); \
         Sidecar with two hosts {scoped_count} resources, {scoped} bytes ({:.1} KiB); {:.0}× smaller",
        full as f64 / (1 << 20) as f64,
        scoped as f64 / 1024.0,
        full as f64 / scoped as f64
    );
    assert!(scoped < 64 << 10, "scoped: {scoped} bytes");
    assert!(full > 100 * scoped, "{full} vs {scoped}");
    // Two services: their clusters and assignments, PassthroughCluster, BlackHoleCluster and
    // InboundPassthroughCluster, virtualOutbound, virtualInbound and the port's listener and route.
    assert_eq!(
        scoped_count,
        2 + 2 + 3 + 3 + 1,
        "clusters, endpoints, listeners, routes"
    );
}
