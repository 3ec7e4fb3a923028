//! Push scope derivation, push decisions by Sidecar scope (change × old scope × new scope), rate limit.

use super::*;
use crate::envoy::StaticMesh;

#[test]
fn scope_is_the_change_set_only_from_the_version_it_applies_to() {
    let eds = PushScope::Endpoints(["a".into()].into());
    let snapshot = StaticSnapshot::after(4, eds.clone(), StaticMesh::new(5));
    for (seen, want) in [
        (Some(4), eds),
        (Some(3), PushScope::Full),
        (Some(5), PushScope::Full),
        (None, PushScope::Full),
    ] {
        assert_eq!(scope(&snapshot, seen), want, "seen {seen:?}");
    }
}

/// reviews and ratings in `a`, details in `b`; in `a` too, the headless db (TCP) and stream (HTTP only).
fn services() -> [crate::model::Service; 5] {
    use crate::{envoy::static_mesh::service, model::Protocol};
    let headless = |name: &str, port: (&str, u16, Protocol)| crate::model::Service {
        resolution: crate::model::Resolution::Passthrough,
        ..service(name, "a", &[port])
    };
    [
        service("reviews", "a", &[("http", 80, Protocol::Http)]),
        service("ratings", "a", &[("http", 80, Protocol::Http)]),
        service("details", "b", &[("http", 80, Protocol::Http)]),
        headless("db", ("tcp", 5432, Protocol::Tcp)),
        headless("stream", ("http", 80, Protocol::Http)),
    ]
}

/// The mesh of [`services`].
fn mesh() -> StaticMesh {
    services()
        .into_iter()
        .fold(StaticMesh::new(1), |m, s| m.with(s, vec![]))
}

/// A proxy in `a` with no Sidecar, one importing only reviews, one importing all of `a`.
fn scopes() -> [SidecarScope; 3] {
    use crate::traffic::{ProxyRef, tests::config};
    let services = services();
    let narrow = config(
        "Sidecar",
        "a",
        "default",
        "1",
        "egress: [{hosts: [a/reviews.a.svc.cluster.local]}]",
    );
    let wide = config("Sidecar", "a", "default", "1", "egress: [{hosts: ['./*']}]");
    let vs = config(
        "VirtualService",
        "a",
        "to-ratings",
        "1",
        "hosts: [ratings]\nhttp: [{route: [{destination: {host: ratings}}]}]",
    );
    let labels = Default::default();
    let proxy = ProxyRef {
        namespace: "a",
        labels: &labels,
        router: false,
    };
    let settings = crate::traffic::Settings::default();
    [None, Some(&narrow), Some(&wide)]
        .map(|sc| SidecarScope::build(proxy, sc.map(|c| &**c), [&vs], &services, &settings))
}

#[test]
fn changes_push_only_proxies_whose_scope_sees_them() {
    let [all, narrow, wide] = scopes();
    let hosts = |h: &[&str]| -> BTreeSet<Hostname> { h.iter().map(|h| Hostname::from(*h)).collect() };
    let (reviews, details) = ("reviews.a.svc.cluster.local", "details.b.svc.cluster.local");
    let (db, stream) = ("db.a.svc.cluster.local", "stream.a.svc.cluster.local");
    let object = |kind: Kind, ns: &str, name: &str, host: &[&str]| {
        let c = Changes {
            objects: [(
                ObjectRef::new(kind, ns, name),
                host.iter().map(|h| HostPattern::parse(h)).collect(),
            )]
            .into(),
            ..Changes::default()
        };
        PushScope::Partial(Arc::new(c))
    };
    let partial = |endpoints: &[&str], services: &[&str]| {
        PushScope::Partial(Arc::new(Changes {
            endpoints: hosts(endpoints),
            services: hosts(services),
            ..Changes::default()
        }))
    };
    let eds = |h: &[&str]| Push::Endpoints(hosts(h));
    let lds = |h: &[&str]| Push::Listeners(hosts(h));
    let sidecar_a = object(Kind::Sidecar, "a", "default", &[]);
    let dr_details = object(Kind::DestinationRule, "b", "d", &[details]);
    let dr_wild = object(Kind::DestinationRule, "b", "d", &["*.b.svc.cluster.local"]);
    let vs = object(Kind::VirtualService, "a", "to-ratings", &[]);
    let pa = |ns: &str| object(Kind::PeerAuthentication, ns, "default", &[]);
    let gateway = object(Kind::Gateway, "a", "gw", &["*"]);
    let we = object(Kind::WorkloadEntry, "a", "vm", &[]);
    // (what changed, scope before, scope after, proxy kind, the push)
    let sidecar = ProxyKind::Sidecar;
    let cases: Vec<(&str, PushScope, &SidecarScope, &SidecarScope, ProxyKind, Push)> = vec![
        (
            "mesh-wide",
            PushScope::Full,
            &narrow,
            &narrow,
            sidecar,
            Push::Full,
        ),
        (
            "other endpoints",
            PushScope::Endpoints(hosts(&[details])),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "own endpoints",
            PushScope::Endpoints(hosts(&[details, reviews])),
            &narrow,
            &narrow,
            sidecar,
            eds(&[reviews]),
        ),
        (
            "endpoints, no Sidecar",
            PushScope::Endpoints(hosts(&[details])),
            &all,
            &all,
            sidecar,
            eds(&[details]),
        ),
        (
            "other service",
            partial(&[], &[details]),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "other service, no Sidecar",
            partial(&[], &[details]),
            &all,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "endpoints in a partial",
            partial(&[details, reviews], &[]),
            &narrow,
            &narrow,
            sidecar,
            eds(&[reviews]),
        ),
        (
            "own Sidecar changed",
            sidecar_a.clone(),
            &narrow,
            &wide,
            sidecar,
            Push::Full,
        ),
        (
            "own Sidecar removed",
            sidecar_a.clone(),
            &narrow,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "own Sidecar added",
            sidecar_a.clone(),
            &all,
            &narrow,
            sidecar,
            Push::Full,
        ),
        (
            "a Sidecar elsewhere",
            object(Kind::Sidecar, "b", "default", &[]),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "unselected VirtualService",
            vs.clone(),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "selected VirtualService",
            vs.clone(),
            &wide,
            &wide,
            sidecar,
            Push::Full,
        ),
        (
            "visible VirtualService, no Sidecar",
            vs,
            &all,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "DestinationRule out of scope",
            dr_details.clone(),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "DestinationRule, no Sidecar",
            dr_details,
            &all,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "wildcard DestinationRule out of scope",
            dr_wild.clone(),
            &wide,
            &wide,
            sidecar,
            Push::None,
        ),
        (
            "wildcard DestinationRule, no Sidecar",
            dr_wild,
            &all,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "PeerAuthentication in the root",
            pa("istio-system"),
            &narrow,
            &narrow,
            sidecar,
            Push::Full,
        ),
        (
            "PeerAuthentication in the proxy's namespace",
            pa("a"),
            &narrow,
            &narrow,
            sidecar,
            Push::Full,
        ),
        (
            "PeerAuthentication of unseen servers",
            pa("b"),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "PeerAuthentication of seen servers",
            pa("b"),
            &all,
            &all,
            sidecar,
            Push::Full,
        ),
        (
            "Gateway, sidecar",
            gateway.clone(),
            &all,
            &all,
            sidecar,
            Push::None,
        ),
        (
            "Gateway, router",
            gateway,
            &all,
            &all,
            ProxyKind::Router,
            Push::Full,
        ),
        ("WorkloadEntry", we, &all, &all, sidecar, Push::None),
        // A headless service's endpoints are a sidecar's listeners (`<pod IP>_<port>`): LDS besides
        // EDS for sidecars only, for a TCP port only; any other service's endpoints never push LDS.
        (
            "headless endpoints",
            PushScope::Endpoints(hosts(&[db, details])),
            &all,
            &all,
            sidecar,
            lds(&[db, details]),
        ),
        (
            "headless endpoints in a partial",
            partial(&[db], &[]),
            &wide,
            &wide,
            sidecar,
            lds(&[db]),
        ),
        (
            "headless endpoints out of scope",
            PushScope::Endpoints(hosts(&[db, details])),
            &narrow,
            &narrow,
            sidecar,
            Push::None,
        ),
        (
            "headless endpoints, router",
            PushScope::Endpoints(hosts(&[db])),
            &all,
            &all,
            ProxyKind::Router,
            eds(&[db]),
        ),
        (
            "headless endpoints, gRPC",
            PushScope::Endpoints(hosts(&[db])),
            &all,
            &all,
            ProxyKind::Grpc,
            eds(&[db]),
        ),
        (
            "HTTP-only headless endpoints: the cluster's mTLS follows them, no listener does",
            PushScope::Endpoints(hosts(&[stream])),
            &all,
            &all,
            sidecar,
            Push::Clusters(hosts(&[stream])),
        ),
    ];
    let mesh = mesh();
    for (name, changes, old, new, kind, want) in cases {
        let proxy = Recipient {
            kind,
            namespace: "a",
            root: "istio-system",
            inbound_moved: false,
            mesh: &mesh,
        };
        assert_eq!(decide(&changes, proxy, old, new), want, "{name}");
    }
}

/// An endpoint of the proxy's own IP joining or leaving a service changes its inbound listener and
/// clusters: everything is pushed, even for a service its Sidecar does not import.
#[test]
fn a_change_that_moves_the_proxys_service_targets_pushes_everything() {
    let [_, narrow, _] = scopes();
    let details: BTreeSet<Hostname> = ["details.b.svc.cluster.local".into()].into();
    let mesh = mesh();
    let recipient = |inbound_moved| Recipient {
        kind: ProxyKind::Sidecar,
        namespace: "a",
        root: "istio-system",
        inbound_moved,
        mesh: &mesh,
    };
    let changes = [
        PushScope::Endpoints(details.clone()),
        PushScope::Partial(Arc::new(Changes {
            endpoints: details,
            ..Changes::default()
        })),
    ];
    for c in &changes {
        assert_eq!(decide(c, recipient(false), &narrow, &narrow), Push::None, "{c:?}");
        assert_eq!(decide(c, recipient(true), &narrow, &narrow), Push::Full, "{c:?}");
    }
}

#[test]
fn rate_limiter_bounds_bursts() {
    let l = RateLimiter::new(2.0);
    assert!(l.try_acquire().is_ok() && l.try_acquire().is_ok());
    let wait = l.try_acquire().expect_err("bucket empty");
    assert!(wait <= Duration::from_millis(500));
    // Below one a second: one at a time, the next after 1 / rate.
    let slow = RateLimiter::new(0.01);
    assert!(slow.try_acquire().is_ok());
    let wait = slow.try_acquire().expect_err("one at a time");
    assert!(wait > Duration::from_secs(90), "{wait:?}");
}
