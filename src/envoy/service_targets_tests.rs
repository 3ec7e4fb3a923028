//! Service targets (which ports a sidecar serves, the oldest Service winning a port) and what moves
//! them.

use std::net::IpAddr;

use super::*;
use crate::envoy::{
    StaticMesh,
    static_mesh::{endpoint, proxy, service},
};

const WEB_IP: &str = "10.1.0.3";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The sidecar of the pod at `ip`.
fn sidecar(ip_: &str) -> Proxy {
    let mut p = proxy(ProxyKind::Sidecar, "diff");
    p.ips = vec![ip(ip_)];
    p
}

/// `web` (HTTP 80 → 8080) on the pod at 10.1.0.3, `echo` (gRPC 7070 → 17070) elsewhere.
fn mesh() -> StaticMesh {
    StaticMesh::new(1)
        .with(
            service("web", "diff", &[("http", 80, Protocol::Http)]),
            vec![endpoint(ip(WEB_IP), &[("http", 8080)], "c1")],
        )
        .with(
            service("echo", "diff", &[("grpc", 7070, Protocol::Grpc)]),
            vec![endpoint(ip("10.1.0.1"), &[("grpc", 17070)], "c1")],
        )
}

#[test]
fn service_targets_are_the_proxys_endpoints_oldest_service_first() {
    let mut newer = service("web-new", "diff", &[("http", 81, Protocol::Http)]);
    newer.creation_time = Some("2026-02-01T00:00:00Z".into());
    let mut older = service("web-old", "diff", &[("http", 82, Protocol::Grpc)]);
    older.creation_time = Some("2026-01-01T00:00:00Z".into());
    let ep = endpoint(ip(WEB_IP), &[("http", 8080)], "c1");
    let other_cluster = endpoint(ip(WEB_IP), &[("http", 9090)], "c2");
    let m = StaticMesh::new(1)
        .with(newer, vec![ep.clone()])
        .with(older, vec![ep])
        .with(
            service("remote", "diff", &[("http", 80, Protocol::Http)]),
            vec![other_cluster],
        );
    let mut p = sidecar(WEB_IP);
    p.cluster_id = Some("c1".into());
    let got: Vec<(u16, u16, Protocol, String)> = service_targets(&m, &p)
        .into_iter()
        .map(|t| (t.target_port, t.port, t.protocol, t.hostname.to_string()))
        .collect();
    assert_eq!(
        got,
        [(
            8080,
            82,
            Protocol::Grpc,
            "web-old.diff.svc.cluster.local".to_owned()
        )],
        "the older service's port; another cluster's endpoint at the same IP is not the proxy"
    );
    p.namespace = Some("other".into());
    assert!(
        service_targets(&m, &p).is_empty(),
        "only its own namespace's Services"
    );
    p.namespace = Some("diff".into());
    p.ips.clear();
    assert!(service_targets(&m, &p).is_empty(), "no address, no targets");
}

#[test]
fn served_targets_move_only_with_the_proxys_own_endpoints() {
    let web = sidecar(WEB_IP);
    let before = mesh();
    let served = Served::of(&before, &web).expect("a sidecar with an address");
    let hosts = |h: &str| -> BTreeSet<Hostname> { [Hostname::from(h)].into() };
    let echo = "echo.diff.svc.cluster.local";
    // echo's endpoints change, none of them the proxy's: nothing moved.
    let moved_elsewhere = before.clone().with(
        service("echo", "diff", &[("grpc", 7070, Protocol::Grpc)]),
        vec![endpoint(ip("10.1.0.2"), &[("grpc", 17070)], "c1")],
    );
    assert_eq!(served.after(&moved_elsewhere, &web, &hosts(echo)), served);
    // The proxy's pod becomes an endpoint of echo: its inbound side changes.
    let eps: Vec<Endpoint> = vec![endpoint(ip(WEB_IP), &[("grpc", 17070)], "c1")];
    let joined = before
        .clone()
        .with(service("echo", "diff", &[("grpc", 7070, Protocol::Grpc)]), eps);
    let after = served.after(&joined, &web, &hosts(echo));
    assert_ne!(after, served);
    assert_eq!(
        Some(after.clone()),
        Served::of(&joined, &web),
        "the same as from scratch"
    );
    // And leaves again.
    assert_eq!(after.after(&before, &web, &hosts(echo)), served);
    assert_eq!(
        Served::of(&before, &proxy(ProxyKind::Grpc, "diff")),
        None,
        "sidecars only"
    );
}
