//! CDS through the generator: which clusters a proxy lists and gets for the DestinationRules and
//! PeerAuthentications in force, per client kind, and what the cache shares.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc};

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster::LbPolicy};
use prost::Message;

use super::{ClusterRef, cluster, cluster_name, rule_for, sni_name, subset_cluster_name, subset_sni_name};
use crate::{
    envoy::{
        ProxyKind, XdsType,
        {
            AllEndpoints, Context, NetworkView, StaticMesh,
            static_mesh::{endpoint, proxy, service},
        },
    },
    model::{Protocol, TlsMode},
    traffic::tests::config,
    xds::{Subscription, cache::ResourceCache, generate::generate},
};

const HOST: &str = "echo.default.svc.cluster.local";

/// An Istio object: kind, namespace, name, spec (YAML).
type Obj<'a> = (&'a str, &'a str, &'a str, &'a str);

/// A DestinationRule for echo turning TLS off.
const TLS_DISABLE: Obj = (
    "DestinationRule",
    "default",
    "echo",
    "host: echo\ntrafficPolicy: {tls: {mode: DISABLE}}",
);

#[test]
fn names_round_trip_with_and_without_subsets() {
    let h = "reviews.ns.svc.cluster.local";
    assert_eq!(
        cluster_name(9080, h),
        "outbound|9080||reviews.ns.svc.cluster.local"
    );
    assert_eq!(
        subset_sni_name(9080, "v1", h),
        "outbound_.9080_.v1_.reviews.ns.svc.cluster.local"
    );
    assert_eq!(
        sni_name(9080, h),
        "outbound_.9080_._.reviews.ns.svc.cluster.local"
    );
    for (subset, sni) in [("", false), ("v1", false), ("", true), ("v2", true)] {
        let name = if sni {
            subset_sni_name(9080, subset, h)
        } else {
            subset_cluster_name(9080, subset, h)
        };
        let want = if sni {
            ClusterRef::SniDnat {
                port: 9080,
                subset,
                hostname: h,
            }
        } else {
            ClusterRef::Outbound {
                port: 9080,
                subset,
                hostname: h,
            }
        };
        assert_eq!(ClusterRef::parse(&name), Some(want), "{name}");
    }
    for bad in [
        "outbound|x||h",
        "outbound|80|v1|",
        "inbound|80||h",
        "outbound|80",
        "outbound_.80_.h",
    ] {
        assert_eq!(ClusterRef::parse(bad), None, "{bad}");
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `echo.default` (port 7070, two Istio-mTLS endpoints v1 and v2) with `configs` in force.
fn mesh(configs: &[Obj]) -> StaticMesh {
    let eps = ["v1", "v2"]
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut ep = endpoint(ip(&format!("10.0.0.{}", i + 1)), &[("grpc", 7070)], "c1");
            ep.tls_mode = TlsMode::Istio;
            ep.info_mut().labels = Arc::new([("version".to_owned(), (*v).to_owned())].into());
            ep
        })
        .collect();
    StaticMesh::new(1)
        .with(service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]), eps)
        .with_config(objects(configs))
}

/// `configs` as the Istio objects a mesh holds.
fn objects(configs: &[Obj]) -> Vec<Arc<crate::istio::Config>> {
    configs
        .iter()
        .map(|(kind, ns, name, spec)| config(kind, ns, name, "1", spec))
        .collect()
}

/// The sidecar's cluster for echo's port 7070.
fn echo_cluster(m: &StaticMesh) -> Cluster {
    built(
        m,
        ProxyKind::Sidecar,
        "default",
        &format!("outbound|7070||{HOST}"),
    )
    .unwrap()
}

const SUBSETS: &str = "host: echo.default.svc.cluster.local
trafficPolicy: {loadBalancer: {simple: RANDOM}}
subsets:
- {name: v1, labels: {version: v1}, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}
- {name: v2, labels: {version: v2}}
";

fn names(m: &StaticMesh, kind: ProxyKind, ns: &str, east_west: bool) -> Vec<String> {
    let mut p = proxy(kind, ns);
    if east_west {
        // What gen-eastwest-gateway.sh sets: its own network as the only one it sees.
        p.network = Some("n1".into());
        p.requested_network_view = vec!["n1".into()];
    }
    let cache = ResourceCache::new(100, None);
    let ctx = Context {
        mesh: m,
        proxy: &p,
        view: &NetworkView::default(),
        endpoints: &AllEndpoints,
        scope: &crate::envoy::scope_of(m, &p),
    };
    let sub = Subscription {
        wildcard: true,
        names: Default::default(),
    };
    generate(&ctx, &cache, XdsType::Cluster, &sub, None)
        .iter()
        .map(|r| r.name.to_string())
        .collect()
}

fn built(m: &StaticMesh, kind: ProxyKind, ns: &str, name: &str) -> Option<Cluster> {
    cluster(m, &proxy(kind, ns), name).map(|b| b.cluster)
}

#[test]
fn names_are_what_format_writes_for_every_port_width() {
    for port in [0, 7, 10, 99, 443, 9080, 10000, u16::MAX] {
        for subset in ["", "v1"] {
            assert_eq!(
                subset_cluster_name(port, subset, HOST),
                format!("outbound|{port}|{subset}|{HOST}")
            );
            let sni = subset_sni_name(port, subset, HOST);
            assert_eq!(sni, format!("outbound_.{port}_.{subset}_.{HOST}"));
            assert_eq!(sni.capacity(), sni.len(), "one allocation of the exact size");
        }
    }
}

#[test]
fn subsets_are_clusters_for_the_proxies_that_get_the_rule() {
    let m = mesh(&[("DestinationRule", "default", "echo", SUBSETS)]);
    assert_eq!(
        names(&m, ProxyKind::Sidecar, "default", false),
        [
            "BlackHoleCluster",
            "InboundPassthroughCluster",
            "PassthroughCluster",
            "outbound|7070|v1|echo.default.svc.cluster.local",
            "outbound|7070|v2|echo.default.svc.cluster.local",
            "outbound|7070||echo.default.svc.cluster.local",
        ]
    );
    // An east-west gateway also routes each subset's mTLS SNI.
    let ew = names(&m, ProxyKind::Router, "istio-system", true);
    for want in [
        "outbound_.7070_._.echo.default.svc.cluster.local",
        "outbound_.7070_.v1_.echo.default.svc.cluster.local",
        "outbound_.7070_.v2_.echo.default.svc.cluster.local",
    ] {
        assert!(ew.contains(&want.to_owned()), "{want} not in {ew:?}");
    }
    // A rule private to another namespace gives this proxy no subsets.
    let private = SUBSETS.to_owned() + "exportTo: ['.']\n";
    let m = mesh(&[("DestinationRule", "default", "echo", &private)]);
    assert_eq!(names(&m, ProxyKind::Sidecar, "other", false).len(), 4);
    assert_eq!(names(&m, ProxyKind::Sidecar, "default", false).len(), 6);
}

#[test]
fn a_named_subset_exists_only_if_the_rule_defines_it() {
    let m = mesh(&[("DestinationRule", "default", "echo", SUBSETS)]);
    let v1 = built(
        &m,
        ProxyKind::Grpc,
        "default",
        &format!("outbound|7070|v1|{HOST}"),
    )
    .expect("v1");
    // The subset's own policy overrides the rule's (RANDOM → ROUND_ROBIN is what gRPC takes anyway).
    assert_eq!(v1.lb_policy, LbPolicy::RoundRobin as i32);
    assert_eq!(
        v1.eds_cluster_config.unwrap().service_name,
        format!("outbound|7070|v1|{HOST}")
    );
    let v2 = built(
        &m,
        ProxyKind::Sidecar,
        "default",
        &format!("outbound|7070|v2|{HOST}"),
    )
    .expect("v2");
    assert_eq!(v2.lb_policy, LbPolicy::Random as i32);
    assert!(
        built(
            &m,
            ProxyKind::Grpc,
            "default",
            &format!("outbound|7070|v3|{HOST}")
        )
        .is_none()
    );
    // Without a rule, no subset exists at all; SNI-DNAT clusters only for east-west gateways.
    let bare = mesh(&[]);
    assert!(
        built(
            &bare,
            ProxyKind::Sidecar,
            "default",
            &format!("outbound|7070|v1|{HOST}")
        )
        .is_none()
    );
    assert!(
        built(
            &m,
            ProxyKind::Sidecar,
            "default",
            &format!("outbound_.7070_.v1_.{HOST}")
        )
        .is_none()
    );
}

#[test]
fn grpc_gets_mtls_only_from_istio_mutual() {
    // Every endpoint takes Istio mTLS, yet without a rule gRPC is plaintext (istiod's gRPC generator).
    let bare = mesh(&[]);
    let c = built(
        &bare,
        ProxyKind::Grpc,
        "default",
        &format!("outbound|7070||{HOST}"),
    )
    .unwrap();
    assert!(c.transport_socket.is_none() && c.transport_socket_matches.is_empty());
    let m = mesh(&[(
        "DestinationRule",
        "default",
        "echo",
        "host: echo\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
    )]);
    let c = built(&m, ProxyKind::Grpc, "default", &format!("outbound|7070||{HOST}")).unwrap();
    assert_eq!(c.transport_socket.unwrap().name, "envoy.transport_sockets.tls");
}

#[test]
fn sidecar_auto_mtls_follows_peer_authentication_and_the_rule() {
    let tls = |m: &StaticMesh| {
        let c = echo_cluster(m);
        match (c.transport_socket.is_some(), c.transport_socket_matches.len()) {
            (false, 2) => "auto",
            (true, 0) => "mutual",
            (false, 0) => "none",
            other => panic!("{other:?}"),
        }
    };
    let disable = "mtls: {mode: DISABLE}";
    let cases: Vec<(Vec<Obj>, &str)> = vec![
        (vec![], "auto"),
        (vec![("PeerAuthentication", "default", "off", disable)], "none"),
        (
            vec![("PeerAuthentication", "istio-system", "mesh", disable)],
            "none",
        ),
        (vec![("PeerAuthentication", "other", "off", disable)], "auto"),
        (vec![TLS_DISABLE], "none"),
        (
            vec![
                ("PeerAuthentication", "default", "off", disable),
                (
                    "DestinationRule",
                    "default",
                    "echo",
                    "host: echo\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
                ),
            ],
            "mutual",
        ),
    ];
    for (configs, want) in cases {
        assert_eq!(tls(&mesh(&configs)), want, "{configs:?}");
    }
    // A PASSTHROUGH cluster dials the original destination: no per-endpoint matches (as istiod).
    let m = mesh(&[(
        "DestinationRule",
        "default",
        "echo",
        "host: echo\ntrafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}",
    )]);
    let c = echo_cluster(&m);
    assert!(c.eds_cluster_config.is_none() && c.transport_socket_matches.is_empty());
    assert_eq!(c.lb_policy, LbPolicy::ClusterProvided as i32);
}

/// istiod's `BestEffortInferServiceMTLSMode` for a passthrough (headless) service: mTLS only when the
/// port has endpoints and all of them run a sidecar, then on every connection (a plain socket: an
/// original-destination cluster has no endpoint metadata to match).
#[test]
fn a_passthrough_cluster_is_mtls_only_when_every_endpoint_has_a_sidecar() {
    let headless = |modes: &[TlsMode], configs: &[Obj]| {
        let mut svc = service("echo", "default", &[("tcp", 7070, Protocol::Tcp)]);
        svc.resolution = crate::model::Resolution::Passthrough;
        let eps = modes
            .iter()
            .enumerate()
            .map(|(i, mode)| {
                let mut ep = endpoint(ip(&format!("10.0.0.{}", i + 1)), &[("tcp", 7070)], "c1");
                ep.tls_mode = *mode;
                ep
            })
            .collect();
        let c = echo_cluster(&StaticMesh::new(1).with(svc, eps).with_config(objects(configs)));
        assert_eq!(c.lb_policy, LbPolicy::ClusterProvided as i32);
        match (c.transport_socket.is_some(), c.transport_socket_matches.len()) {
            (true, 0) => "mutual",
            (false, 0) => "none",
            other => panic!("{other:?}"),
        }
    };
    let (istio, off) = (TlsMode::Istio, TlsMode::Disabled);
    let disable = "mtls: {mode: DISABLE}";
    let cases: Vec<(&str, Vec<TlsMode>, Vec<Obj>, &str)> = vec![
        (
            "every endpoint has a sidecar",
            vec![istio, istio],
            vec![],
            "mutual",
        ),
        ("one endpoint without", vec![istio, off], vec![], "none"),
        ("no endpoint on the port", vec![], vec![], "none"),
        (
            "the namespace's PeerAuthentication disables mTLS",
            vec![istio],
            vec![("PeerAuthentication", "default", "off", disable)],
            "none",
        ),
        ("a rule's DISABLE wins", vec![istio], vec![TLS_DISABLE], "none"),
        (
            "a rule's ISTIO_MUTUAL is the user's: kept whatever the endpoints",
            vec![off],
            vec![(
                "DestinationRule",
                "default",
                "echo",
                "host: echo\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
            )],
            "mutual",
        ),
    ];
    for (what, modes, configs, want) in cases {
        assert_eq!(headless(&modes, &configs), want, "{what}");
    }
}

#[test]
fn proxies_that_get_the_same_rule_share_one_encode() {
    let m = mesh(&[
        (
            "DestinationRule",
            "istio-system",
            "echo",
            "host: echo.default.svc.cluster.local\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL}}",
        ),
        (
            "DestinationRule",
            "team",
            "echo",
            "host: echo.default.svc.cluster.local\nexportTo: ['.']\ntrafficPolicy: {tls: {mode: DISABLE}}",
        ),
    ]);
    let cache = ResourceCache::new(100, None);
    let view = NetworkView::default();
    let sub = Subscription {
        wildcard: false,
        names: Arc::new(BTreeSet::from([Arc::from(
            format!("outbound|7070||{HOST}").as_str(),
        )])),
    };
    let get = |ns: &str| {
        let p = proxy(ProxyKind::Grpc, ns);
        let ctx = Context {
            mesh: &m,
            proxy: &p,
            view: &view,
            endpoints: &AllEndpoints,
            scope: &crate::envoy::scope_of(&m, &p),
        };
        let r = generate(&ctx, &cache, XdsType::Cluster, &sub, None);
        assert_eq!(r.len(), 1);
        (
            r[0].clone(),
            rule_for(&m, &p, super::super::Mesh::service(&m, HOST).unwrap())
                .map(|r| r.from[0].namespace.to_string()),
        )
    };
    let (a, rule_a) = get("default");
    let (b, rule_b) = get("other");
    let (c, rule_c) = get("team");
    assert_eq!(
        (rule_a.as_deref(), rule_b.as_deref(), rule_c.as_deref()),
        (Some("istio-system"), Some("istio-system"), Some("team"))
    );
    assert!(Arc::ptr_eq(&a, &b), "same rule, one encode");
    assert!(!Arc::ptr_eq(&a, &c), "another rule, another cluster");
    let decoded = Cluster::decode(c.value()).unwrap();
    assert!(decoded.transport_socket.is_none());
}

#[test]
fn a_cluster_encodes_once_with_a_version_of_its_content() {
    let m = mesh(&[("DestinationRule", "default", "echo", SUBSETS)]);
    let p = proxy(ProxyKind::Sidecar, "default");
    let name = subset_cluster_name(7070, "v1", HOST);
    let want = built(&m, ProxyKind::Sidecar, "default", &name).expect("v1");
    assert!(
        want.metadata
            .as_ref()
            .is_some_and(|m| m.filter_metadata["istio"].fields.len() == 3),
        "services, config and subset: the map prost writes in any order"
    );
    let parts = || {
        let mut c = Cluster::default();
        let resolved = super::resolve(&m, &p, &name).expect("resolves");
        let (_, meta) = super::cluster_of(&m, &p, &name, resolved, &mut c).expect("v1");
        (c, meta.expect("a sidecar's cluster has metadata"))
    };
    let encoded: Vec<_> = (0..16)
        .map(|_| {
            let (c, meta) = parts();
            super::encode(name.as_str().into(), &c, Some(meta))
        })
        .collect();
    for r in &encoded {
        assert_eq!(Cluster::decode(r.value()).expect("decodes"), want);
        assert_eq!(r.value(), encoded[0].value(), "equal clusters, equal bytes");
        assert_eq!(r.version, encoded[0].version, "equal clusters, equal versions");
    }
    let (mut other, meta) = parts();
    other.connect_timeout = None;
    assert_ne!(
        super::encode(name.as_str().into(), &other, Some(meta)).version,
        encoded[0].version
    );
    let (c, mut meta) = parts();
    meta.subset = None;
    assert_ne!(
        super::encode(name.as_str().into(), &c, Some(meta)).version,
        encoded[0].version,
        "the metadata counts"
    );
}

#[test]
fn the_sidecar_tls_socket_is_byte_for_byte_what_prost_writes() {
    let many: Vec<String> = (0..8)
        .map(|i| format!("spiffe://cluster.local/ns/bench/sa/svc-{i}"))
        .collect();
    let cases: [(&[String], &str); 4] = [
        (&[], ""),
        (&many[..1], "outbound_.80_._.echo.default.svc.cluster.local"),
        (&many, "outbound_.80_.v1_.echo.default.svc.cluster.local"),
        (&many, ""),
    ];
    for ((sans, sni), h2) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let want = super::tls_socket(super::sds_tls(sans, h2), sni.to_owned());
        assert_eq!(
            super::sds_tls_socket(sans, sni, h2),
            want,
            "{} SANs, SNI {sni:?}, h2 {h2}",
            sans.len()
        );
    }
}

#[test]
fn envoy_waits_for_endpoints_and_its_certificates_grpc_as_istiod_gives_it() {
    use envoy_types::pb::{
        envoy::extensions::transport_sockets::tls::v3::{UpstreamTlsContext, common_tls_context},
        google::protobuf::Duration,
    };
    let m = mesh(&[]);
    let fetch = |c: &Cluster| {
        c.eds_cluster_config
            .as_ref()
            .and_then(|e| e.eds_config.as_ref())
            .and_then(|s| s.initial_fetch_timeout)
    };
    let sidecar = built(&m, ProxyKind::Sidecar, "default", &cluster_name(7070, HOST)).unwrap();
    assert_eq!(fetch(&sidecar), Some(Duration::default()), "EDS: 0s, as istiod");
    let grpc = built(&m, ProxyKind::Grpc, "default", &cluster_name(7070, HOST)).unwrap();
    assert_eq!(fetch(&grpc), None, "istiod's gRPC generator sets none");
    // The auto-mTLS socket's SDS secrets (`default`, `ROOTCA`) wait too.
    let socket = sidecar.transport_socket_matches[0]
        .transport_socket
        .clone()
        .unwrap();
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(any)) =
        socket.config_type
    else {
        panic!("typed tls")
    };
    let common = UpstreamTlsContext::decode(any.value.as_slice())
        .unwrap()
        .common_tls_context
        .unwrap();
    let Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
        common.validation_context_type
    else {
        panic!("combined validation context")
    };
    for sds in [
        &common.tls_certificate_sds_secret_configs[0],
        combined.validation_context_sds_secret_config.as_ref().unwrap(),
    ] {
        let timeout = sds.sds_config.as_ref().and_then(|s| s.initial_fetch_timeout);
        assert_eq!(timeout, Some(Duration::default()), "{}", sds.name);
    }
}

#[test]
fn passthrough_has_istiods_breakers_and_the_clients_http_version() {
    use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
        HttpProtocolOptions, http_protocol_options::UpstreamProtocolOptions,
    };
    let c = super::passthrough_cluster();
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    for max in [
        t.max_connections,
        t.max_pending_requests,
        t.max_requests,
        t.max_retries,
    ] {
        assert_eq!(max.map(|m| m.value), Some(u32::MAX), "not Envoy's 1,024");
    }
    let any = &c.typed_extension_protocol_options[super::cluster_policy::HTTP_PROTOCOL_OPTIONS];
    let http = HttpProtocolOptions::decode(any.value.as_slice()).unwrap();
    let idle = http.common_http_protocol_options.unwrap().idle_timeout.unwrap();
    assert_eq!(idle.seconds, 300);
    assert!(matches!(
        http.upstream_protocol_options,
        Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(d))
            if d.http_protocol_options.is_some() && d.http2_protocol_options.is_some()
    ));
}
