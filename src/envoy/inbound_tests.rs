//! The gRPC server listener for each PeerAuthentication mode, workload label and port.

use envoy_types::pb::envoy::{
    config::{core::v3::address, listener::v3::filter},
    extensions::{
        filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager::RouteSpecifier,
        },
        transport_sockets::tls::v3::DownstreamTlsContext,
    },
};
use prost::Message;

use super::*;
use crate::{
    envoy::{
        ProxyKind, StaticMesh,
        static_mesh::{proxy, service},
    },
    model::Protocol,
    traffic::tests::config,
};

const NAME: &str = "xds.istio.io/grpc/lds/inbound/0.0.0.0:7070";

/// An Istio object: kind, namespace, name, spec (YAML).
type Obj<'a> = (&'a str, &'a str, &'a str, &'a str);

/// case, objects, the proxy's labels, the chain (name, client certificate required).
type Case<'a> = (
    &'a str,
    Vec<Obj<'a>>,
    &'a [(&'a str, &'a str)],
    (&'a str, Option<bool>),
);

fn mesh(configs: &[Obj]) -> StaticMesh {
    StaticMesh::new(1)
        .with(
            service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
            vec![],
        )
        .with_config(
            configs
                .iter()
                .map(|(kind, ns, name, spec)| config(kind, ns, name, "1", spec))
                .collect::<Vec<_>>(),
        )
}

fn server(labels: &[(&str, &str)]) -> Proxy {
    let mut p = proxy(ProxyKind::Grpc, "default");
    p.labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    p
}

/// The one chain's name and whether it requires a client certificate.
fn chain(m: &StaticMesh, p: &Proxy, name: &str) -> (String, Option<bool>) {
    let l = grpc_server_listener(m, p, name).expect("a server listener");
    assert_eq!(l.name, name);
    assert_eq!(l.filter_chains.len(), 1);
    let fc = &l.filter_chains[0];
    let tls = fc.transport_socket.as_ref().map(|t| {
        assert_eq!(t.name, "envoy.transport_sockets.tls");
        let Some(transport_socket::ConfigType::TypedConfig(any)) = &t.config_type else {
            panic!("no typed config")
        };
        let ctx = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
        let common = ctx.common_tls_context.unwrap();
        assert_eq!(
            common.tls_certificate_provider_instance.unwrap().instance_name,
            cds::WORKLOAD_CERT
        );
        ctx.require_client_certificate.unwrap().value
    });
    (fc.name.clone(), tls)
}

#[test]
fn the_chain_follows_the_workloads_peer_authentication() {
    let strict = "mtls: {mode: STRICT}";
    let disable = "mtls: {mode: DISABLE}";
    let sidecar = [("app", "echo"), ("security.istio.io/tlsMode", "istio")];
    let plain = [("app", "echo")];
    let cases: Vec<Case> = vec![
        (
            "nothing: PERMISSIVE, no tlsMode label",
            vec![],
            &plain,
            ("inbound-plaintext", None),
        ),
        (
            "nothing, tlsMode label: clients send mTLS",
            vec![],
            &sidecar,
            ("inbound-mtls", Some(true)),
        ),
        (
            "namespace STRICT",
            vec![("PeerAuthentication", "default", "ns", strict)],
            &plain,
            ("inbound-mtls", Some(true)),
        ),
        (
            "mesh-wide STRICT",
            vec![("PeerAuthentication", "istio-system", "mesh", strict)],
            &plain,
            ("inbound-mtls", Some(true)),
        ),
        (
            "another namespace's STRICT",
            vec![("PeerAuthentication", "other", "ns", strict)],
            &plain,
            ("inbound-plaintext", None),
        ),
        (
            "DISABLE wins over the label",
            vec![("PeerAuthentication", "default", "off", disable)],
            &sidecar,
            ("inbound-plaintext", None),
        ),
        (
            "a workload selector that matches",
            vec![(
                "PeerAuthentication",
                "default",
                "echo",
                "selector: {matchLabels: {app: echo}}\nmtls: {mode: STRICT}",
            )],
            &plain,
            ("inbound-mtls", Some(true)),
        ),
        (
            "a workload selector that does not",
            vec![(
                "PeerAuthentication",
                "default",
                "other",
                "selector: {matchLabels: {app: other}}\nmtls: {mode: STRICT}",
            )],
            &plain,
            ("inbound-plaintext", None),
        ),
        (
            "port-level DISABLE under namespace STRICT",
            vec![
                ("PeerAuthentication", "default", "ns", strict),
                (
                    "PeerAuthentication",
                    "default",
                    "echo",
                    "selector: {matchLabels: {app: echo}}\nmtls: {mode: STRICT}\nportLevelMtls: {7070: {mode: DISABLE}}",
                ),
            ],
            &plain,
            ("inbound-plaintext", None),
        ),
    ];
    for (case, objects, labels, (name, tls)) in cases {
        let got = chain(&mesh(&objects), &server(labels), NAME);
        assert_eq!(got, (name.to_owned(), tls), "{case}");
    }
}

#[test]
fn the_listener_binds_the_asked_address_and_accepts_every_request() {
    let m = mesh(&[]);
    for (name, ip, port) in [
        (NAME, "0.0.0.0", 7070),
        ("xds.istio.io/grpc/lds/inbound/[::]:8080", "::", 8080),
        ("xds.istio.io/grpc/lds/inbound/10.1.2.3:9000", "10.1.2.3", 9000),
    ] {
        let l = grpc_server_listener(&m, &server(&[]), name).unwrap();
        let Some(address::Address::SocketAddress(sa)) = l.address.unwrap().address else {
            panic!("no socket address")
        };
        assert_eq!(
            (sa.address.as_str(), sa.port_specifier),
            (ip, Some(socket_address::PortSpecifier::PortValue(port)))
        );
        let Some(filter::ConfigType::TypedConfig(any)) = &l.filter_chains[0].filters[0].config_type else {
            panic!("no HCM")
        };
        let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
        assert_eq!(hcm.http_filters.len(), 1, "router only");
        assert_eq!(hcm.http_filters[0].name, "envoy.filters.http.router");
        let Some(RouteSpecifier::RouteConfig(rc)) = hcm.route_specifier else {
            panic!("no inline route config")
        };
        let route = &rc.virtual_hosts[0].routes[0];
        assert_eq!(rc.virtual_hosts[0].domains, ["*"]);
        assert!(matches!(
            route.action,
            Some(route::Action::NonForwardingAction(_))
        ));
    }
}

#[test]
fn other_names_are_not_server_listeners() {
    let m = mesh(&[]);
    for name in [
        "echo.default.svc.cluster.local:7070",
        "xds.istio.io/grpc/lds/inbound/",
        "xds.istio.io/grpc/lds/inbound/0.0.0.0",
        "xds.istio.io/grpc/lds/inbound/host.example:7070",
        "xds.istio.io/grpc/lds/inbound/0.0.0.0:99999",
    ] {
        assert!(grpc_server_listener(&m, &server(&[]), name).is_none(), "{name}");
    }
}

#[test]
fn proxies_with_other_labels_do_not_share_a_server_listener() {
    let base: Arc<str> = "grpc|default|".into();
    let a = view_key(&base, &server(&[("app", "echo")]));
    let b = view_key(
        &base,
        &server(&[("app", "echo"), ("security.istio.io/tlsMode", "istio")]),
    );
    let c = view_key(&base, &server(&[("app", "echo")]));
    assert_ne!(a, b);
    assert_eq!(a, c);
    // A label value cannot forge another label set's key.
    let forged = view_key(&base, &server(&[("app", "echo|security.istio.io/tlsMode=istio")]));
    assert_ne!(forged, b);
}
