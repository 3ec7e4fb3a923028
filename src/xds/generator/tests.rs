//! Table-driven tests of the generators; EDS assignments are compared with JSON goldens in
//! `src/xds/testdata/` (`UPDATE_GOLDENS=1` rewrites them).

use std::{collections::BTreeSet, net::IpAddr, path::Path, sync::Arc};

use super::{
    AllEndpoints, Context, NetworkView, StaticMesh, eds, lds, rds,
    static_mesh::{endpoint, proxy, service},
};
use crate::{
    model::{Endpoint, Health, Locality, Protocol},
    xds::{ProxyKind, XdsType, cache::ResourceCache, resource::Subscription},
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn at(mut ep: Endpoint, zone: &str, health: Health, weight: u32) -> Endpoint {
    ep.locality = Locality {
        region: "r".into(),
        zone: zone.into(),
        subzone: "".into(),
    };
    ep.health = health;
    ep.weight = weight;
    ep
}

fn golden(name: &str, actual: &impl serde::Serialize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/xds/testdata")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; UPDATE_GOLDENS=1", path.display()));
    assert_eq!(
        text,
        want,
        "{} differs; rerun with UPDATE_GOLDENS=1 and review",
        path.display()
    );
}

#[test]
fn eds_assignments_match_goldens() {
    let port = &service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0];
    let e = |addr: &str, p: u16| endpoint(ip(addr), &[("grpc", p)], "c1");
    let cases: Vec<(&str, Vec<Endpoint>)> = vec![
        ("eds-empty", vec![]),
        (
            "eds-localities",
            vec![
                at(e("10.0.0.3", 80), "b", Health::Healthy, 1),
                at(e("10.0.0.1", 80), "a", Health::Draining, 2),
                at(e("10.0.0.2", 80), "a", Health::Unhealthy, 0),
            ],
        ),
        (
            "eds-dedup-and-missing-port",
            vec![
                e("10.0.0.1", 80),
                e("10.0.0.1", 80),
                endpoint(ip("10.0.0.9"), &[("http", 8080)], "c1"),
            ],
        ),
    ];
    for (name, eps) in cases {
        let a = eds::assignment(
            "outbound|7070||echo.default.svc.cluster.local".into(),
            port,
            &eps,
            eds::Duplicates::PerLocality,
        );
        golden(name, &a);
        // The proto carries the same shape; weights are never 0 (gRPC drops or NACKs those).
        let pb = a.to_proto();
        assert_eq!(pb.endpoints.len(), a.localities.len());
        assert!(
            pb.endpoints
                .iter()
                .all(|l| l.load_balancing_weight.is_some_and(|w| w.value > 0))
        );
    }
}

#[test]
fn eds_version_is_stable_and_content_sensitive() {
    let port = &service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0];
    let eps = vec![endpoint(ip("10.0.0.1"), &[("grpc", 80)], "c1")];
    let v = |eps: &[Endpoint]| eds::assignment("c".into(), port, eps, eds::Duplicates::PerLocality).version();
    assert_eq!(v(&eps), v(&eps.clone()));
    let mut moved = eps.clone();
    moved[0].address = ip("10.0.0.2");
    assert_ne!(v(&eps), v(&moved));
}

#[test]
fn route_domains_cover_every_dialled_spelling() {
    let mut svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
    svc.cluster_vips.insert("c1".into(), vec![ip("10.96.0.10")]);
    let d = rds::domains(&svc, 7070);
    for want in [
        "echo.default.svc.cluster.local:7070",
        "echo.default.svc.cluster.local",
        "echo.default.svc:7070",
        "echo.default:7070",
        "echo:7070",
        "echo",
        "10.96.0.10:7070",
    ] {
        assert!(d.contains(&want.to_owned()), "{want} missing from {d:?}");
    }
    assert_eq!(d.len(), d.iter().collect::<BTreeSet<_>>().len(), "unique");
}

fn mesh() -> StaticMesh {
    let eps = vec![endpoint(ip("10.0.0.1"), &[("grpc", 80)], "c1")];
    StaticMesh::new(1)
        .with(
            service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
            eps.clone(),
        )
        .with(service("echo", "other", &[("grpc", 7070, Protocol::Grpc)]), eps)
}

#[test]
fn listener_targets_resolve_like_istiod() {
    let m = mesh();
    let p = proxy(ProxyKind::Grpc, "other");
    let cases = [
        (
            "echo.default.svc.cluster.local:7070",
            Some("echo.default.svc.cluster.local"),
        ),
        ("echo:7070", Some("echo.other.svc.cluster.local")),
        ("echo.default:7070", Some("echo.default.svc.cluster.local")),
        ("echo.default.svc:7070", Some("echo.default.svc.cluster.local")),
        ("echo:7071", None),
        ("echo", None),
        ("nope.default:7070", None),
        ("a.b.c.d:7070", None),
    ];
    for (target, want) in cases {
        let got = lds::resolve_target(&m, &p, target).map(|(s, _)| s.hostname.to_string());
        assert_eq!(got.as_deref(), want, "{target}");
    }
}

#[test]
fn generation_is_shared_through_the_cache() {
    let m = mesh();
    let cache = ResourceCache::new(100, None);
    let view = NetworkView::default();
    let sub = Subscription {
        wildcard: true,
        names: Default::default(),
    };
    let gen_for = |ns: &str| {
        let p = proxy(ProxyKind::Grpc, ns);
        let ctx = Context {
            mesh: &m,
            proxy: &p,
            view: &view,
            endpoints: &AllEndpoints,
            cache: &cache,
        };
        ctx.generate(XdsType::Cluster, &sub, None)
    };
    let (a, b) = (gen_for("default"), gen_for("other"));
    assert_eq!(a.len(), 2);
    assert!(
        a.iter().zip(&b).all(|(x, y)| Arc::ptr_eq(x, y)),
        "CDS does not depend on the namespace"
    );
    let names: Vec<_> = a.iter().map(|r| &*r.name).collect();
    assert_eq!(
        names,
        [
            "outbound|7070||echo.default.svc.cluster.local",
            "outbound|7070||echo.other.svc.cluster.local"
        ]
    );
}
