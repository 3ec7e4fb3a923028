//! Per-endpoint listeners of passthrough services, as a sidecar's LDS lists and builds them: which
//! names, which cluster each proxies to, and the listeners' shape (golden
//! `src/envoy/testdata/lds/headless.json`).

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use envoy_types::pb::envoy::{
    config::listener::v3::{Listener, filter},
    extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy},
};
use prost::Message;

use super::*;
use crate::{
    config::mesh::OutboundMode,
    envoy::{
        ProxyKind, StaticMesh, lds,
        route::tests::json,
        static_mesh::{endpoint, proxy, service},
    },
    model::{Endpoint, Health, Protocol},
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A headless Kubernetes Service `name.ns.svc.cluster.local`.
fn headless(name: &str, ns: &str, ports: &[(&str, u16, Protocol)]) -> Service {
    Service {
        resolution: Resolution::Passthrough,
        ..service(name, ns, ports)
    }
}

/// A ServiceEntry `resolution: NONE` for `host` in namespace `apps`, without addresses.
fn entry(host: &str, ports: &[(&str, u16, Protocol)]) -> Service {
    Service {
        hostname: host.into(),
        origin: Origin::ServiceEntry {
            namespace: "apps".into(),
            names: vec![host.into()],
        },
        ..headless(host, "apps", ports)
    }
}

/// The sidecar of 10.1.0.99 in cluster c1.
fn sidecar() -> Proxy {
    Proxy {
        cluster_id: Some("c1".into()),
        ips: vec![ip("10.1.0.99")],
        ..proxy(ProxyKind::Sidecar, "default")
    }
}

/// `db.data`: TCP 5432, HTTP 8080, UDP 5353 and undeclared 9000; its pods: 10.1.0.10 (every port but
/// UDP), 10.1.0.11 (another cluster and network, not ready), 10.1.0.12 (HTTP only) and the sidecar's
/// own 10.1.0.99.
fn db() -> (Service, Vec<Endpoint>) {
    let svc = headless(
        "db",
        "data",
        &[
            ("tcp", 5432, Protocol::Tcp),
            ("http", 8080, Protocol::Http),
            ("dns", 5353, Protocol::Udp),
            ("mystery", 9000, Protocol::Unknown),
        ],
    );
    let mut remote = endpoint(ip("10.1.0.11"), &[("tcp", 5432), ("http", 8080)], "c2");
    remote.placement_mut().network = Some("n2".into());
    remote.health = Health::Unhealthy;
    let eps = vec![
        endpoint(
            ip("10.1.0.10"),
            &[("tcp", 5432), ("http", 8080), ("dns", 5353), ("mystery", 9000)],
            "c1",
        ),
        remote,
        endpoint(ip("10.1.0.12"), &[("http", 8080)], "c1"),
        endpoint(ip("10.1.0.99"), &[("tcp", 5432)], "c1"),
    ];
    (svc, eps)
}

/// What a listener proxies to: `http` for an HTTP connection manager, else its TCP proxy's cluster.
fn target(l: &Listener) -> String {
    let f = &l.filter_chains[0].filters[0];
    if f.name == "envoy.filters.network.http_connection_manager" {
        return "http".into();
    }
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("{}: typed filter", l.name);
    };
    match TcpProxy::decode(any.value.as_slice())
        .expect("tcp proxy")
        .cluster_specifier
    {
        Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("{}: {other:?}", l.name),
    }
}

/// Every listener but the virtual ones, with what it proxies to.
fn listeners(m: &StaticMesh, p: &Proxy) -> BTreeMap<String, String> {
    lds::sidecar_listener_names(m, p)
        .iter()
        .filter(|n| !n.starts_with("virtual"))
        .map(|n| {
            let l = lds::sidecar_listener(m, p, n, OutboundMode::AllowAny)
                .unwrap_or_else(|| panic!("listener {n} is listed but not built"));
            (n.to_string(), target(&l))
        })
        .collect()
}

/// (what it shows, the services and their endpoints, every listener and what it proxies to).
type Case = (
    &'static str,
    Vec<(Service, Vec<Endpoint>)>,
    Vec<(&'static str, &'static str)>,
);

const DB_TCP: &str = "outbound|5432||db.data.svc.cluster.local";
const LEGACY: &str = "outbound|3306||legacy.example.com";

#[test]
fn passthrough_services_get_a_listener_per_endpoint_of_each_tcp_port() {
    let (db, db_eps) = db();
    let mut echo = service("echo", "default", &[("tcp", 7000, Protocol::Tcp)]);
    echo.cluster_vips.insert("c1".into(), vec![ip("10.96.0.10")]);
    let legacy = || entry("legacy.example.com", &[("mysql", 3306, Protocol::Mysql)]);
    let legacy_ep = || vec![endpoint(ip("10.2.0.1"), &[("mysql", 3306)], "c1")];
    let mut selecting = legacy();
    selecting.selector = Some(Arc::new([("app".to_owned(), "legacy".to_owned())].into()));
    let mut addressed = legacy();
    addressed
        .cluster_vips
        .insert("c1".into(), vec![ip("240.240.0.1")]);
    let web = service("web", "default", &[("http", 3306, Protocol::Http)]);
    let cache = headless("cache", "data", &[("tcp", 5432, Protocol::Tcp)]);
    let cache_ep = vec![endpoint(ip("10.1.0.10"), &[("tcp", 5432)], "c1")];
    let cases: Vec<Case> = vec![
        (
            // Every endpoint of a TCP or undeclared port, whatever its cluster, network or health,
            // but the sidecar's own; HTTP keeps the wildcard listener; UDP gets none.
            "headless TCP, HTTP, UDP and undeclared ports",
            vec![(db.clone(), db_eps.clone())],
            vec![
                ("0.0.0.0_8080", "http"),
                ("10.1.0.10_5432", DB_TCP),
                ("10.1.0.10_9000", "outbound|9000||db.data.svc.cluster.local"),
                ("10.1.0.11_5432", DB_TCP),
            ],
        ),
        (
            "a cluster IP: one listener on it, none per endpoint",
            vec![(echo, vec![endpoint(ip("10.1.0.20"), &[("tcp", 7000)], "c1")])],
            vec![("10.96.0.10_7000", "outbound|7000||echo.default.svc.cluster.local")],
        ),
        (
            "ServiceEntry NONE with endpoints",
            vec![(legacy(), legacy_ep())],
            vec![("10.2.0.1_3306", LEGACY)],
        ),
        (
            "ServiceEntry NONE without endpoints: istiod's wildcard fallback",
            vec![(legacy(), vec![])],
            vec![("0.0.0.0_3306", LEGACY)],
        ),
        (
            "ServiceEntry NONE selecting workloads that are not there yet",
            vec![(selecting, vec![])],
            vec![],
        ),
        (
            "ServiceEntry NONE with addresses listens on them",
            vec![(addressed, legacy_ep())],
            vec![("240.240.0.1_3306", LEGACY)],
        ),
        (
            "the fallback under an HTTP port: the HTTP listener stays",
            vec![(legacy(), vec![]), (web, vec![])],
            vec![("0.0.0.0_3306", "http")],
        ),
        (
            "headless Kubernetes Service without endpoints",
            vec![(db.clone(), vec![])],
            vec![("0.0.0.0_8080", "http")],
        ),
        (
            "two headless services on one pod address: the first host keeps it",
            vec![(db, db_eps), (cache, cache_ep)],
            vec![
                ("0.0.0.0_8080", "http"),
                ("10.1.0.10_5432", "outbound|5432||cache.data.svc.cluster.local"),
                ("10.1.0.10_9000", "outbound|9000||db.data.svc.cluster.local"),
                ("10.1.0.11_5432", DB_TCP),
            ],
        ),
    ];
    for (name, services, want) in cases {
        let m = services
            .into_iter()
            .fold(StaticMesh::new(1), |m, (s, eps)| m.with(s, eps));
        let want: BTreeMap<String, String> =
            want.iter().map(|(l, t)| (l.to_string(), t.to_string())).collect();
        assert_eq!(listeners(&m, &sidecar()), want, "{name}");
    }
}

#[test]
fn the_own_address_is_left_out_of_names_only() {
    let (db, eps) = db();
    let m = StaticMesh::new(1).with(db, eps);
    // Another sidecar with the same cache view builds the listener the first one does not list.
    let own = ip("10.1.0.99");
    assert!(!names(&m, &sidecar()).contains("10.1.0.99_5432"));
    assert_eq!(
        owner(&m, &sidecar(), own, 5432).map(|s| &*s.hostname),
        Some("db.data.svc.cluster.local")
    );
    let other = Proxy {
        ips: vec![ip("10.1.0.98")],
        ..sidecar()
    };
    assert!(names(&m, &other).contains("10.1.0.99_5432"));
}

#[test]
fn only_passthrough_services_with_a_tcp_port_follow_their_endpoints() {
    let (db, _) = db();
    let mut cluster_ip = service("echo", "default", &[("tcp", 7000, Protocol::Tcp)]);
    cluster_ip
        .cluster_vips
        .insert("c1".into(), vec![ip("10.96.0.10")]);
    let cases = [
        ("headless with a TCP port", db, true),
        (
            "headless, HTTP only",
            headless(
                "web",
                "default",
                &[("http", 80, Protocol::Http), ("grpc", 90, Protocol::Grpc)],
            ),
            false,
        ),
        (
            "headless, UDP only",
            headless("dns", "default", &[("dns", 53, Protocol::Udp)]),
            false,
        ),
        ("cluster IP", cluster_ip, false),
        (
            "ServiceEntry NONE",
            entry("legacy.example.com", &[("mysql", 3306, Protocol::Mysql)]),
            true,
        ),
    ];
    for (name, s, want) in cases {
        assert_eq!(follows_endpoints(&s), want, "{name}");
    }
}

#[test]
fn per_endpoint_listeners_match_golden() {
    let (db, eps) = db();
    let m = StaticMesh::new(1).with(db, eps);
    let p = sidecar();
    let got: Vec<serde_json::Value> = lds::sidecar_listener_names(&m, &p)
        .iter()
        .filter(|n| !n.starts_with("virtual"))
        .map(|n| {
            let l = lds::sidecar_listener(&m, &p, n, OutboundMode::AllowAny).expect("listener");
            json(&l, "envoy.config.listener.v3.Listener")
        })
        .collect();
    crate::golden::check("src/envoy/testdata/lds", "headless", &got);
}
