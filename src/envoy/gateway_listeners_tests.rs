//! Gateway goldens: Istio's documentation examples (Gateway and VirtualService YAML in) and what an
//! ingress gateway proxy gets: every listener and route configuration, as proto3 JSON in
//! `src/envoy/testdata/gateway/<case>.json` (`UPDATE_GOLDENS=1` rewrites them).

use std::net::IpAddr;

use super::*;
use crate::{
    envoy::{
        ProxyKind, StaticMesh, gateway_routes, gateway_servers,
        route::tests::json,
        static_mesh::{endpoint, proxy, service},
    },
    model::{Protocol, Service},
    traffic::tests::config,
};

const GW_IP: &str = "10.1.0.9";

/// The mesh of the docs: httpbin (8000), my-nginx (443, TLS), tcp-echo (9000, TCP), helloworld (5000)
/// and the ingress gateway's Service (80 → 8080, 443 → 8443, 31400) with the gateway pod behind it.
fn mesh(configs: &[(&str, &str, &str)]) -> StaticMesh {
    let mut ingress = service(
        "istio-ingressgateway",
        "istio-system",
        &[
            ("http2", 80, Protocol::Http2),
            ("https", 443, Protocol::Https),
            ("tcp", 31400, Protocol::Tcp),
        ],
    );
    ingress.creation_time = Some("2026-01-01T00:00:00Z".into());
    let ip: IpAddr = GW_IP.parse().unwrap();
    let gw_pod = endpoint(ip, &[("http2", 8080), ("https", 8443), ("tcp", 31400)], "c1");
    let svc = |name: &str, ports: &[(&str, u16, Protocol)]| -> Service { service(name, "default", ports) };
    let mut m = StaticMesh::new(1)
        .with(ingress, vec![gw_pod])
        .with(svc("httpbin", &[("http", 8000, Protocol::Http)]), vec![])
        .with(svc("my-nginx", &[("https", 443, Protocol::Https)]), vec![])
        .with(svc("tcp-echo", &[("tcp", 9000, Protocol::Tcp)]), vec![])
        .with(
            svc(
                "helloworld",
                &[("http", 5000, Protocol::Http), ("grpc", 5001, Protocol::Grpc)],
            ),
            vec![],
        );
    let configs = configs
        .iter()
        .enumerate()
        .map(|(i, (kind, name, spec))| {
            let ns = if *kind == "Gateway" {
                "istio-system"
            } else {
                "default"
            };
            config(kind, ns, name, &i.to_string(), spec)
        })
        .collect::<Vec<_>>();
    m = m.with_config(configs);
    m
}

/// The ingress gateway pod: `istio: ingressgateway`, its address, in `istio-system`.
fn gateway() -> Proxy {
    let mut p = proxy(ProxyKind::Router, "istio-system");
    p.labels.insert("istio".into(), "ingressgateway".into());
    p.ips = vec![GW_IP.parse().unwrap()];
    p.cluster_id = Some("c1".into());
    p
}

const HTTPBIN_GW: &str = "selector: {istio: ingressgateway}\nservers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [httpbin.example.com]}]";
const HTTPBIN_VS: &str = "hosts: [httpbin.example.com]\ngateways: [istio-system/httpbin-gateway]\nhttp: [{match: [{uri: {prefix: /status}}, {uri: {prefix: /delay}}], route: [{destination: {host: httpbin, port: {number: 8000}}}]}]";

/// (case, [(kind, name, spec)]): Gateways live in `istio-system`, VirtualServices in `default`.
type Case = (
    &'static str,
    &'static [(&'static str, &'static str, &'static str)],
);

const CASES: &[Case] = &[
    // istio.io "Ingress Gateways": port 80 → the Service's target port 8080, `http.8080`.
    (
        "ingress-http",
        &[
            ("Gateway", "httpbin-gateway", HTTPBIN_GW),
            ("VirtualService", "httpbin", HTTPBIN_VS),
        ],
    ),
    // istio.io "Secure Gateways", single host: SIMPLE with credentialName.
    (
        "https-simple",
        &[
            (
                "Gateway",
                "mygateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: httpbin-credential}, hosts: [httpbin.example.com]}]",
            ),
            (
                "VirtualService",
                "httpbin",
                "hosts: [httpbin.example.com]\ngateways: [istio-system/mygateway]\nhttp: [{match: [{uri: {prefix: /status}}], route: [{destination: {host: httpbin, port: {number: 8000}}}]}]",
            ),
        ],
    ),
    // "Secure Gateways", multiple hosts: two servers on 443, a filter chain and route each.
    (
        "https-multiple-hosts",
        &[
            (
                "Gateway",
                "mygateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https-httpbin, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: httpbin-credential}, hosts: [httpbin.example.com]}, {port: {number: 443, name: https-helloworld, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: helloworld-credential}, hosts: [helloworld.example.com]}]",
            ),
            (
                "VirtualService",
                "httpbin",
                "hosts: [httpbin.example.com]\ngateways: [istio-system/mygateway]\nhttp: [{route: [{destination: {host: httpbin, port: {number: 8000}}}]}]",
            ),
            (
                "VirtualService",
                "helloworld",
                "hosts: [helloworld.example.com]\ngateways: [istio-system/mygateway]\nhttp: [{match: [{uri: {exact: /hello}}], route: [{destination: {host: helloworld}}]}]",
            ),
        ],
    ),
    // "Secure Gateways", mutual TLS: the CA from `<credential>-cacert`, client certificates required.
    (
        "https-mutual",
        &[
            (
                "Gateway",
                "mygateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: MUTUAL, credentialName: httpbin-credential, subjectAltNames: [client.example.com], minProtocolVersion: TLSV1_2}, hosts: [httpbin.example.com]}]",
            ),
            (
                "VirtualService",
                "httpbin",
                "hosts: [httpbin.example.com]\ngateways: [istio-system/mygateway]\nhttp: [{route: [{destination: {host: httpbin, port: {number: 8000}}}]}]",
            ),
        ],
    ),
    // "Ingress Gateway without TLS Termination": PASSTHROUGH by SNI to my-nginx.
    (
        "tls-passthrough",
        &[
            (
                "Gateway",
                "mygateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: PASSTHROUGH}, hosts: [nginx.example.com]}]",
            ),
            (
                "VirtualService",
                "nginx",
                "hosts: [nginx.example.com]\ngateways: [istio-system/mygateway]\ntls: [{match: [{port: 443, sniHosts: [nginx.example.com]}], route: [{destination: {host: my-nginx, port: {number: 443}}}]}]",
            ),
        ],
    ),
    // "TCP Traffic Shifting": TCP on 31400, weighted over tcp-echo's subsets.
    (
        "tcp-route",
        &[
            (
                "Gateway",
                "tcp-echo-gateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 31400, name: tcp, protocol: TCP}, hosts: ['*']}]",
            ),
            (
                "VirtualService",
                "tcp-echo",
                "hosts: ['*']\ngateways: [istio-system/tcp-echo-gateway]\ntcp: [{match: [{port: 31400}], route: [{destination: {host: tcp-echo.default.svc.cluster.local, port: {number: 9000}, subset: v1}, weight: 80}, {destination: {host: tcp-echo.default.svc.cluster.local, port: {number: 9000}, subset: v2}, weight: 20}]}]",
            ),
        ],
    ),
    // Two Gateways on port 80 merge into `http.8080`; httpsRedirect makes its host require TLS;
    // a VirtualService bound only to the mesh is not the gateway's.
    (
        "merged-http-redirect",
        &[
            ("Gateway", "httpbin-gateway", HTTPBIN_GW),
            (
                "Gateway",
                "hello-gateway",
                "selector: {istio: ingressgateway}\nservers: [{port: {number: 80, name: http-hello, protocol: HTTP}, hosts: [default/helloworld.example.com, '*.redirect.example.com'], tls: {httpsRedirect: true}}]",
            ),
            ("VirtualService", "httpbin", HTTPBIN_VS),
            (
                "VirtualService",
                "helloworld",
                "hosts: [helloworld.example.com]\ngateways: [istio-system/hello-gateway, mesh]\nhttp: [{match: [{gateways: [mesh]}], route: [{destination: {host: httpbin}}]}, {route: [{destination: {host: helloworld, port: {number: 5000}}}]}]",
            ),
            (
                "VirtualService",
                "mesh-only",
                "hosts: [httpbin.example.com]\nhttp: [{route: [{destination: {host: helloworld}}]}]",
            ),
        ],
    ),
];

#[test]
fn gateway_configuration_matches_goldens() {
    for (case, configs) in CASES {
        let m = mesh(configs);
        let gw = gateway();
        let merged = gateway_servers::merge(&m, &gw);
        assert!(merged.skipped.is_empty(), "{case}: {:?}", merged.skipped);
        let listeners: Vec<serde_json::Value> = listener_names(&merged)
            .iter()
            .map(|n| {
                let l = listener(&m, &gw, &merged, n).unwrap_or_else(|| panic!("{case}: listener {n}"));
                json(&l, "envoy.config.listener.v3.Listener")
            })
            .collect();
        let routes: Vec<serde_json::Value> = merged
            .routes
            .keys()
            .map(|r| {
                json(
                    &gateway_routes::route_config(&m, &gw, &merged, r),
                    "envoy.config.route.v3.RouteConfiguration",
                )
            })
            .collect();
        let got = serde_json::json!({"listeners": listeners, "routes": routes});
        crate::golden::check("src/envoy/testdata/gateway", case, &got);
    }
}

#[test]
fn a_proxy_no_gateway_selects_gets_no_listener() {
    let m = mesh(&[("Gateway", "httpbin-gateway", HTTPBIN_GW)]);
    let mut other = gateway();
    other.labels.insert("istio".into(), "egressgateway".into());
    assert!(gateway_servers::merge(&m, &other).ports.is_empty());
    let sidecar = proxy(ProxyKind::Sidecar, "istio-system");
    assert!(gateway_servers::merge(&m, &sidecar).ports.is_empty());
}

#[test]
fn a_tcp_server_without_a_route_has_no_listener() {
    let m = mesh(&[(
        "Gateway",
        "tcp-echo-gateway",
        "selector: {istio: ingressgateway}\nservers: [{port: {number: 31400, name: tcp, protocol: TCP}, hosts: ['*']}]",
    )]);
    let merged = gateway_servers::merge(&m, &gateway());
    assert_eq!(listener_names(&merged).len(), 1);
    assert!(listener(&m, &gateway(), &merged, "0.0.0.0_31400").is_none());
}

#[test]
fn host_matching_follows_istiod() {
    for (a, b, want) in [
        ("*", "httpbin.example.com", true),
        ("*.example.com", "httpbin.example.com", true),
        ("httpbin.example.com", "*.example.com", true),
        ("*.example.com", "*.foo.example.com", true),
        ("a.example.com", "b.example.com", false),
        ("*.example.com", "example.com", false),
    ] {
        assert_eq!(host_matches(a, b), want, "{a} vs {b}");
    }
}

#[test]
fn credential_names_become_kubernetes_resources() {
    assert_eq!(
        resource_name("httpbin-credential"),
        "kubernetes://httpbin-credential"
    );
    assert_eq!(resource_name("kubernetes://x"), "kubernetes://x");
}
