//! The sidecar's inbound listener for each PeerAuthentication mode (workload, namespace, port level),
//! its listener filters and clusters, service targets, and what moves them. The expected chains are
//! istiod's (pilot-discovery at the pinned version, for the same workloads and policies).

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType},
        listener::v3::{
            Listener, ListenerFilterChainMatchPredicate, filter, listener_filter_chain_match_predicate::Rule,
        },
    },
    extensions::{
        filters::network::{
            http_connection_manager::v3::{HttpConnectionManager, http_connection_manager::RouteSpecifier},
            tcp_proxy::v3::{TcpProxy, tcp_proxy},
        },
        transport_sockets::tls::v3::DownstreamTlsContext,
    },
};
use prost::Message;

use super::*;
use crate::{
    envoy::{
        ProxyKind, StaticMesh,
        static_mesh::{endpoint, proxy, service},
    },
    traffic::tests::config,
};

const WEB_IP: &str = "10.1.0.3";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `web` (HTTP 80 → 8080) and `db` (TCP 5432 → 15432) on the pod at 10.1.0.3, `echo` (gRPC 7070 →
/// 17070) elsewhere; `objects` are PeerAuthentications in `diff` (name, spec).
fn mesh(objects: &[(&str, &str)]) -> StaticMesh {
    let web = endpoint(ip(WEB_IP), &[("http", 8080), ("tcp", 15432)], "c1");
    StaticMesh::new(1)
        .with(
            service("web", "diff", &[("http", 80, Protocol::Http)]),
            vec![web.clone()],
        )
        .with(service("db", "diff", &[("tcp", 5432, Protocol::Tcp)]), vec![web])
        .with(
            service("echo", "diff", &[("grpc", 7070, Protocol::Grpc)]),
            vec![endpoint(ip("10.1.0.1"), &[("grpc", 17070)], "c1")],
        )
        .with_config(
            objects
                .iter()
                .map(|(name, spec)| config("PeerAuthentication", "diff", name, "1", spec))
                .collect::<Vec<_>>(),
        )
}

/// The sidecar of the pod at `ip`, labelled `app: web`.
fn sidecar(ip_: &str) -> Proxy {
    let mut p = proxy(ProxyKind::Sidecar, "diff");
    p.ips = vec![ip(ip_)];
    p.labels = [("app".to_owned(), "web".to_owned())].into();
    p
}

/// One line per chain: name, destination port, transport, ALPNs, the TLS it terminates (its ALPNs),
/// and where it sends the connection (`hcm:` an HTTP route's cluster, `tcp:` a TCP proxy's).
fn chains(l: &Listener) -> Vec<String> {
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            let port = m.destination_port.map_or("*".to_owned(), |p| p.value.to_string());
            let tls = c.transport_socket.as_ref().map_or("-".to_owned(), |t| {
                let Some(transport_socket::ConfigType::TypedConfig(a)) = &t.config_type else {
                    panic!("typed socket");
                };
                let ctx = DownstreamTlsContext::decode(a.value.as_slice()).unwrap();
                assert_eq!(ctx.require_client_certificate, Some(BoolValue { value: true }));
                format!("mtls{:?}", ctx.common_tls_context.unwrap().alpn_protocols)
            });
            let Some(filter::ConfigType::TypedConfig(a)) = &c.filters[0].config_type else {
                panic!("typed filter");
            };
            let to = if a.type_url.ends_with("HttpConnectionManager") {
                let hcm = HttpConnectionManager::decode(a.value.as_slice()).unwrap();
                let Some(RouteSpecifier::RouteConfig(rc)) = hcm.route_specifier else {
                    panic!("inline routes");
                };
                let Some(route::Action::Route(r)) = &rc.virtual_hosts[0].routes[0].action else {
                    panic!("a route");
                };
                let Some(route_action::ClusterSpecifier::Cluster(c)) = &r.cluster_specifier else {
                    panic!("a cluster");
                };
                format!("hcm:{c}")
            } else {
                let tcp = TcpProxy::decode(a.value.as_slice()).unwrap();
                let Some(tcp_proxy::ClusterSpecifier::Cluster(c)) = tcp.cluster_specifier else {
                    panic!("a cluster");
                };
                format!("tcp:{c}")
            };
            let transport = if m.transport_protocol.is_empty() {
                "any"
            } else {
                &m.transport_protocol
            };
            format!(
                "{} {port} {transport} {:?} {tls} {to}",
                c.name, m.application_protocols
            )
        })
        .collect()
}

const BLACKHOLE: &str = "virtualInbound-blackhole 15006 any [] - tcp:BlackHoleCluster";
const H2_H1: &str = r#"mtls["h2", "http/1.1"]"#;
const MX_H2_H1: &str = r#"mtls["istio-peer-exchange", "h2", "http/1.1"]"#;

fn strict_passthrough() -> Vec<String> {
    vec![
        format!(
            r#"virtualInbound-catchall-http * tls ["istio-http/1.0", "istio-http/1.1", "istio-h2"] {H2_H1} hcm:InboundPassthroughCluster"#
        ),
        format!("virtualInbound * tls [] {MX_H2_H1} tcp:InboundPassthroughCluster"),
    ]
}

fn permissive_passthrough(port: &str) -> Vec<String> {
    vec![
        format!(
            r#"virtualInbound-catchall-http {port} tls ["istio-http/1.0", "istio-http/1.1", "istio-h2"] {H2_H1} hcm:InboundPassthroughCluster"#
        ),
        format!(
            r#"virtualInbound-catchall-http {port} raw_buffer ["http/1.1", "h2c"] - hcm:InboundPassthroughCluster"#
        ),
        format!(
            r#"virtualInbound {port} tls ["istio-peer-exchange", "istio"] {MX_H2_H1} tcp:InboundPassthroughCluster"#
        ),
        format!("virtualInbound {port} raw_buffer [] - tcp:InboundPassthroughCluster"),
        format!("virtualInbound {port} tls [] - tcp:InboundPassthroughCluster"),
    ]
}

const ALL_MTLS: &str = r#"["istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"]"#;

#[test]
fn chains_follow_the_peer_authentication_mode_like_istiod() {
    let strict_ns = ("default", "mtls: {mode: STRICT}");
    let disable_ns = ("default", "mtls: {mode: DISABLE}");
    let port_level = (
        "web",
        "selector: {matchLabels: {app: web}}\nmtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: DISABLE}, 9999: {mode: PERMISSIVE}}",
    );
    let strict_http = format!("0.0.0.0_8080 8080 tls [] {H2_H1} hcm:inbound|8080||");
    let strict_tcp = format!("0.0.0.0_15432 15432 tls [] {MX_H2_H1} tcp:inbound|15432||");
    let plain_http = "0.0.0.0_8080 8080 raw_buffer [] - hcm:inbound|8080||".to_owned();
    let plain_tcp = "0.0.0.0_15432 15432 raw_buffer [] - tcp:inbound|15432||".to_owned();
    /// Name, PeerAuthentications (namespace, spec), the chains expected.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<String>);
    let cases: Vec<Case> = vec![
        (
            "STRICT",
            vec![strict_ns],
            [vec![BLACKHOLE.to_owned()], strict_passthrough(), vec![strict_http.clone(), strict_tcp.clone()]]
                .concat(),
        ),
        (
            "PERMISSIVE (nothing set)",
            vec![],
            [
                vec![BLACKHOLE.to_owned()],
                permissive_passthrough("*"),
                vec![
                    format!("0.0.0.0_8080 8080 tls {ALL_MTLS} {H2_H1} hcm:inbound|8080||"),
                    plain_http.clone(),
                    format!("0.0.0.0_15432 15432 tls {ALL_MTLS} {MX_H2_H1} tcp:inbound|15432||"),
                    "0.0.0.0_15432 15432 tls [] - tcp:inbound|15432||".to_owned(),
                    plain_tcp.clone(),
                ],
            ]
            .concat(),
        ),
        (
            "DISABLE",
            vec![disable_ns],
            vec![
                BLACKHOLE.to_owned(),
                r#"virtualInbound-catchall-http * raw_buffer ["http/1.1", "h2c"] - hcm:InboundPassthroughCluster"#
                    .to_owned(),
                "virtualInbound * raw_buffer [] - tcp:InboundPassthroughCluster".to_owned(),
                plain_http.clone(),
                plain_tcp,
            ],
        ),
        (
            // A target port's own mode; a port-level port that is no target gets passthrough chains.
            "port level over a STRICT workload",
            vec![port_level],
            [
                vec![BLACKHOLE.to_owned()],
                strict_passthrough(),
                permissive_passthrough("9999"),
                vec![plain_http, strict_tcp],
            ]
            .concat(),
        ),
    ];
    for (name, objects, want) in cases {
        let l = listener(&mesh(&objects), &sidecar(WEB_IP));
        assert_eq!(chains(&l), want, "{name}");
        assert_eq!(l.name, VIRTUAL_INBOUND);
        assert_eq!(l.traffic_direction, TrafficDirection::Inbound as i32);
    }
}

/// A proxy that serves nothing still gets the blackhole and passthrough chains.
#[test]
fn a_proxy_serving_nothing_gets_the_passthrough_chains() {
    let l = listener(
        &mesh(&[("default", "mtls: {mode: STRICT}")]),
        &sidecar("10.9.9.9"),
    );
    assert_eq!(
        chains(&l),
        [vec![BLACKHOLE.to_owned()], strict_passthrough()].concat()
    );
}

/// Listener filter name → the ports it is disabled on (`None`: on everywhere).
fn inspectors(l: &Listener) -> Vec<(String, Option<Vec<i32>>)> {
    fn ports(p: &ListenerFilterChainMatchPredicate) -> Vec<i32> {
        match &p.rule {
            Some(Rule::DestinationPortRange(r)) => {
                assert_eq!(r.end, r.start + 1);
                vec![r.start]
            }
            Some(Rule::OrMatch(set)) => set.rules.iter().flat_map(ports).collect(),
            // Disabled everywhere but these: negative ports in this table.
            Some(Rule::NotMatch(inner)) => ports(inner).into_iter().map(|p| -p).collect(),
            other => panic!("{other:?}"),
        }
    }
    l.listener_filters
        .iter()
        .map(|f| (f.name.clone(), f.filter_disabled.as_ref().map(ports)))
        .collect()
}

#[test]
fn inspectors_run_only_where_a_chain_needs_them() {
    let od = ("envoy.filters.listener.original_dst".to_owned(), None);
    let tls = |off: Option<Vec<i32>>| ("envoy.filters.listener.tls_inspector".to_owned(), off);
    let http = |off: Vec<i32>| ("envoy.filters.listener.http_inspector".to_owned(), Some(off));
    let cases = [
        (
            "STRICT",
            "mtls: {mode: STRICT}",
            vec![od.clone(), tls(Some(vec![15006]))],
        ),
        (
            "PERMISSIVE",
            "mtls: {mode: PERMISSIVE}",
            vec![od.clone(), tls(Some(vec![15006])), http(vec![8080, 15006, 15432])],
        ),
        (
            "DISABLE",
            "mtls: {mode: DISABLE}",
            vec![od.clone(), http(vec![8080, 15006, 15432])],
        ),
    ];
    for (name, spec, want) in cases {
        let l = listener(&mesh(&[("default", spec)]), &sidecar(WEB_IP));
        assert_eq!(inspectors(&l), want, "{name}");
    }
    // TLS only on one port: on for that port alone.
    let one = mesh(&[
        ("default", "mtls: {mode: DISABLE}"),
        (
            "web",
            "selector: {matchLabels: {app: web}}\nportLevelMtls: {8080: {mode: STRICT}}",
        ),
    ]);
    let got = inspectors(&listener(&one, &sidecar(WEB_IP)));
    assert_eq!(got[1], tls(Some(vec![-8080])));
}

#[test]
fn clusters_are_original_destination_bound_to_the_passthrough_address() {
    let m = mesh(&[]);
    let web = sidecar(WEB_IP);
    let names: Vec<String> = cluster_names(&service_targets(&m, &web)).collect();
    assert_eq!(
        names,
        ["InboundPassthroughCluster", "inbound|8080||", "inbound|15432||"],
        "target port order"
    );
    let (c, meta) = cluster(&m, &web, "inbound|8080||").expect("a target");
    assert_eq!(
        &*meta.expect("istio metadata").service.hostname,
        "web.diff.svc.cluster.local"
    );
    assert_eq!(
        c.cluster_discovery_type,
        Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32))
    );
    assert_eq!(c.lb_policy, LbPolicy::ClusterProvided as i32);
    let bind = c
        .upstream_bind_config
        .and_then(|b| b.source_address)
        .expect("bound");
    assert_eq!(bind.address, "127.0.0.6");
    assert!(c.typed_extension_protocol_options.is_empty(), "HTTP/1.1");
    assert!(cluster(&m, &web, "inbound|9||").is_none(), "no target on 9");
    let echo = sidecar("10.1.0.1");
    let (grpc, _) = cluster(&m, &echo, "inbound|17070||").expect("echo's target");
    assert!(
        grpc.typed_extension_protocol_options
            .contains_key(cluster_policy::HTTP_PROTOCOL_OPTIONS),
        "gRPC: HTTP/2 to the application"
    );
    let (pt, _) = cluster(&m, &web, INBOUND_PASSTHROUGH).expect("always");
    assert_eq!(
        pt.upstream_bind_config
            .and_then(|b| b.source_address)
            .unwrap()
            .address,
        "127.0.0.6"
    );
    assert_eq!(parse_cluster_name("inbound|8080||"), Some(8080));
    for bad in [
        "inbound|x||",
        "inbound|8080|v1|h",
        "outbound|8080||h",
        "inbound|70000||",
    ] {
        assert_eq!(parse_cluster_name(bad), None, "{bad}");
    }
}
