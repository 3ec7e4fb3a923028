//! istiod's merge rules: route names, port translation, which servers are skipped.

use std::net::IpAddr;

use super::*;
use crate::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, proxy, service},
    },
    traffic::tests::config,
};

/// An ingress gateway pod behind a Service with 80 → 8080, and `gateways` (name, spec) in
/// `istio-system`, created in order.
fn setup(gateways: &[(&str, &str)]) -> (StaticMesh, Proxy) {
    let ip: IpAddr = "10.1.0.9".parse().unwrap();
    let configs = gateways
        .iter()
        .enumerate()
        .map(|(i, (n, spec))| config("Gateway", "istio-system", n, &i.to_string(), spec))
        .collect::<Vec<_>>();
    let m = StaticMesh::new(1)
        .with(
            service(
                "istio-ingressgateway",
                "istio-system",
                &[("http2", 80, Protocol::Http2)],
            ),
            vec![endpoint(ip, &[("http2", 8080)], "c1")],
        )
        .with_config(configs);
    let mut p = proxy(ProxyKind::Router, "istio-system");
    p.labels.insert("istio".into(), "ingressgateway".into());
    p.ips = vec![ip];
    p.cluster_id = Some("c1".into());
    (m, p)
}

/// Each listener's name with its servers' (gateway, route configuration).
type Summary = Vec<(String, Vec<(String, Option<String>)>)>;

/// (what, gateways, listeners wanted, servers skipped).
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Want, usize);
type Want = &'static [(&'static str, &'static [(&'static str, Option<&'static str>)])];

fn summary(m: &Merged) -> Summary {
    m.ports
        .iter()
        .map(|p| {
            let servers = p
                .servers
                .iter()
                .map(|s| (s.gateway.clone(), s.route.clone()))
                .collect();
            (p.name(), servers)
        })
        .collect()
}

const SEL: &str = "selector: {istio: ingressgateway}\n";

#[test]
fn servers_merge_as_istiod_merges_them() {
    let cases: &[Case] = &[
        (
            "port 80 translates to the Service's target port, HTTP servers share http.<port>",
            &[
                (
                    "a",
                    "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}]",
                ),
                (
                    "b",
                    "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [b.example.com]}]",
                ),
            ],
            &[(
                "0.0.0.0_8080",
                &[
                    ("istio-system/a", Some("http.8080")),
                    ("istio-system/b", Some("http.8080")),
                ],
            )],
            0,
        ),
        (
            "HTTPS servers get their own route; a repeated TLS host is skipped",
            &[
                (
                    "a",
                    "servers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: c}, hosts: [a.example.com]}]",
                ),
                (
                    "b",
                    "servers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: d}, hosts: [a.example.com]}]",
                ),
                (
                    "c",
                    "servers: [{port: {number: 443, name: tls, protocol: TLS}, tls: {mode: PASSTHROUGH}, hosts: [c.example.com]}]",
                ),
            ],
            &[(
                "0.0.0.0_443",
                &[
                    ("istio-system/a", Some("https.443.https.a.istio-system")),
                    ("istio-system/c", None),
                ],
            )],
            1,
        ),
        (
            "a TCP server on an HTTP port conflicts; a second TCP server on a port is skipped",
            &[
                (
                    "a",
                    "servers: [{port: {number: 9000, name: http, protocol: HTTP}, hosts: ['*']}]",
                ),
                (
                    "b",
                    "servers: [{port: {number: 9000, name: tcp, protocol: TCP}, hosts: ['*']}]",
                ),
                (
                    "c",
                    "servers: [{port: {number: 9001, name: tcp, protocol: TCP}, hosts: ['*']}]",
                ),
                (
                    "d",
                    "servers: [{port: {number: 9001, name: tcp2, protocol: TCP}, hosts: ['*']}]",
                ),
            ],
            &[
                ("0.0.0.0_9000", &[("istio-system/a", Some("http.9000"))]),
                ("0.0.0.0_9001", &[("istio-system/c", None)]),
            ],
            2,
        ),
        (
            "a Gateway selecting other labels is not the proxy's",
            &[(
                "a",
                "selector: {istio: egressgateway}\nservers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]",
            )],
            &[],
            0,
        ),
    ];
    for (what, gateways, want, skipped) in cases {
        let specs: Vec<(&str, String)> = gateways
            .iter()
            .map(|(n, s)| {
                (
                    *n,
                    if s.starts_with("selector") {
                        s.to_string()
                    } else {
                        format!("{SEL}{s}")
                    },
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = specs.iter().map(|(n, s)| (*n, s.as_str())).collect();
        let (m, p) = setup(&refs);
        let merged = merge(&m, &p);
        let want: Summary = want
            .iter()
            .map(|(l, s)| {
                let s = s
                    .iter()
                    .map(|(g, r)| (g.to_string(), r.map(str::to_owned)))
                    .collect();
                (l.to_string(), s)
            })
            .collect();
        assert_eq!(summary(&merged), want, "{what}");
        assert_eq!(merged.skipped.len(), *skipped, "{what}: {:?}", merged.skipped);
    }
}

#[test]
fn hosts_are_sanitized_and_sni_hosts_lose_namespaces() {
    let (m, p) = setup(&[(
        "a",
        "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: c}, hosts: [./a.example.com, '*/b.example.com', other/b.example.com]}]",
    )]);
    let merged = merge(&m, &p);
    let s = &merged.ports[0].servers[0];
    assert_eq!(
        s.hosts,
        [
            "istio-system/a.example.com",
            "b.example.com",
            "other/b.example.com"
        ]
    );
    assert_eq!(s.sni_hosts, ["a.example.com", "b.example.com"]);
    let (m, p) = setup(&[(
        "a",
        "selector: {istio: ingressgateway}\nservers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com, '*/*']}]",
    )]);
    assert_eq!(merge(&m, &p).ports[0].servers[0].hosts, ["*"]);
}

#[test]
fn credentials_name_the_ca_for_mutual_only() {
    let (m, p) = setup(&[(
        "a",
        "selector: {istio: ingressgateway}\nservers: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: MUTUAL, credentialName: m}, hosts: [a.example.com]}, {port: {number: 443, name: https2, protocol: HTTPS}, tls: {mode: SIMPLE, credentialName: s}, hosts: [b.example.com]}, {port: {number: 444, name: tls, protocol: TLS}, tls: {mode: PASSTHROUGH, credentialName: p}, hosts: [c.example.com]}]",
    )]);
    let got = merge(&m, &p).credentials();
    let want = BTreeMap::from([
        (
            "m",
            BTreeSet::from([CredentialUse::Certificate, CredentialUse::ClientCa]),
        ),
        ("s", BTreeSet::from([CredentialUse::Certificate])),
    ]);
    assert_eq!(got, want);
}
