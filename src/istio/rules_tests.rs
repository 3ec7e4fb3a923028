//! istiod's rules added for issue 31, one case per rule (with a valid neighbour where the line is
//! fine), from `pkg/config/validation` and its tests.

use super::{
    Kind,
    tests::{Want, check},
};

fn cases(kind: Kind, cases: &[(&str, Want)]) {
    for (yaml, want) in cases {
        check(kind, yaml, *want);
    }
}

#[test]
fn durations_are_at_least_a_millisecond_in_whole_milliseconds() {
    use Want::*;
    let tcp = |d: &str| format!("host: r\ntrafficPolicy: {{connectionPool: {{tcp: {{{d}}}}}}}");
    let (a, b, c, d) = (
        tcp("connectTimeout: 0.0005s"),
        tcp("maxConnectionDuration: 1.0005s"),
        tcp("idleTimeout: 0s"),
        tcp("connectTimeout: 2ms"),
    );
    cases(
        Kind::DestinationRule,
        &[
            (
                &a,
                Err(
                    "spec.trafficPolicy.connectionPool.tcp.connectTimeout",
                    "at least 1ms",
                ),
            ),
            (
                &b,
                Err(
                    "spec.trafficPolicy.connectionPool.tcp.maxConnectionDuration",
                    "millisecond",
                ),
            ),
            (&c, Ok),
            (&d, Ok),
            (
                "host: r\ntrafficPolicy: {outlierDetection: {interval: 1.5ms}}",
                Err("spec.trafficPolicy.outlierDetection.interval", "millisecond"),
            ),
        ],
    );
    cases(
        Kind::VirtualService,
        &[
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], timeout: 0.1ms}]",
                Err("spec.http[0].timeout", "at least 1ms"),
            ),
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], retries: {attempts: 2, perTryTimeout: 1.0001s}}]",
                Err("spec.http[0].retries.perTryTimeout", "millisecond"),
            ),
        ],
    );
}

#[test]
fn destination_rule_tls_warmup_and_failover() {
    use Want::*;
    cases(
        Kind::DestinationRule,
        &[
            (
                "host: r\ntrafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: true, subjectAltNames: [a]}}",
                Err("spec.trafficPolicy.tls.insecureSkipVerify", "cannot be set"),
            ),
            (
                "host: r\ntrafficPolicy: {tls: {mode: MUTUAL, insecureSkipVerify: true, caCertificates: /ca}}",
                Err("spec.trafficPolicy.tls.insecureSkipVerify", "cannot be set"),
            ),
            (
                "host: r\ntrafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: true}}",
                Ok,
            ),
            (
                "host: r\ntrafficPolicy: {tls: {mode: SIMPLE, credentialName: c, caCertificates: /ca}}",
                Err("spec.trafficPolicy.tls.credentialName", "cannot be set"),
            ),
            (
                "host: r\ntrafficPolicy: {loadBalancer: {warmup: {minimumPercent: 10}}}",
                Err("spec.trafficPolicy.loadBalancer.warmup.duration", "required"),
            ),
            (
                "host: r\ntrafficPolicy: {loadBalancer: {warmup: {duration: 10s, aggression: 0.5}}}",
                Err("spec.trafficPolicy.loadBalancer.warmup.aggression", "at least 1"),
            ),
            (
                "host: r\ntrafficPolicy: {loadBalancer: {warmup: {duration: 10s, minimumPercent: 10, aggression: 2}}}",
                Warn("spec.trafficPolicy.loadBalancer.warmup"),
            ),
            (
                "host: r\ntrafficPolicy: {outlierDetection: {}, loadBalancer: {localityLbSetting: {failover: [{from: '*', to: us}]}}}",
                Err(
                    "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0].from",
                    "`*`",
                ),
            ),
        ],
    );
}

#[test]
fn virtual_service_hosts_gateways_and_jwt_claims() {
    use Want::*;
    let route = "http: [{route: [{destination: {host: r}}]}]";
    let jwt = "http: [{match: [{headers: {'@request.auth.claims.group': {exact: a}}}], route: [{destination: {host: r}}]}]";
    let owned = [
        format!("hosts: ['*.foo.com', '*.com']\n{route}"),
        format!("hosts: [a.foo.com, '*.foo.com']\n{route}"),
        format!("hosts: [a.foo.com, b.foo.com]\n{route}"),
        format!("hosts: [r]\ngateways: ['ns1/']\n{route}"),
        format!("hosts: [r]\ngateways: ['ns1/bad.name']\n{route}"),
        format!("hosts: [r]\ngateways: [gw.ns1]\n{route}"),
        format!("hosts: [r]\ngateways: [ns1/gw, mesh]\n{route}"),
        format!("hosts: [r]\n{jwt}"),
        format!("hosts: [r]\ngateways: [mesh, ns1/gw]\n{jwt}"),
        format!("hosts: [r]\ngateways: [ns1/gw]\n{jwt}"),
    ];
    cases(
        Kind::VirtualService,
        &[
            (&owned[0], Err("spec.hosts[1]", "overlaps")),
            (&owned[1], Err("spec.hosts[1]", "overlaps")),
            (&owned[2], Ok),
            (&owned[3], Err("spec.gateways[0]", "must not be empty")),
            (&owned[4], Err("spec.gateways[0]", "gateway name")),
            (&owned[5], Warn("spec.gateways[0]")),
            (&owned[6], Ok),
            (
                &owned[7],
                Err(
                    "spec.http[0].match[0].headers.@request.auth.claims.group",
                    "gateways",
                ),
            ),
            (
                &owned[8],
                Err(
                    "spec.http[0].match[0].headers.@request.auth.claims.group",
                    "gateways",
                ),
            ),
            (&owned[9], Ok),
        ],
    );
}

#[test]
fn virtual_service_http_rules() {
    use Want::*;
    let r = "route: [{destination: {host: r}}]";
    let owned = [
        format!("hosts: [r]\nhttp: [{{{r}, retries: {{attempts: 1, retryOn: 'connect-failure,bogus'}}}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, retries: {{attempts: 1, retryOn: '5xx,503,unavailable'}}}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, match: [{{authority: {{prefix: ''}}}}]}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, match: [{{uri: {{prefix: ''}}}}]}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, match: [{{headers: {{'bad header': {{exact: a}}}}}}]}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, match: [{{withoutHeaders: {{x-a: {{regex: '*'}}}}}}]}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, headers: {{request: {{set: {{x-a: 'abc%1'}}}}}}}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, headers: {{request: {{set: {{x-a: '%HOSTNAME% 100%%'}}}}}}}}]"),
        format!(
            "hosts: [r]\nhttp: [{{{r}, rewrite: {{authority: a}}, headers: {{request: {{set: {{':authority': b}}}}}}}}]"
        ),
        format!(
            "hosts: [r]\nhttp: [{{{r}, headers: {{request: {{set: {{host: a}}, add: {{':authority': b}}}}}}}}]"
        ),
        format!("hosts: [r]\nhttp: [{{{r}, headers: {{response: {{set: {{host: a}}}}}}}}]"),
        format!("hosts: [r]\nhttp: [{{{r}, match: [{{headers: {{X-User: {{exact: a}}}}}}]}}]"),
    ];
    cases(
        Kind::VirtualService,
        &[
            (&owned[0], Err("spec.http[0].retries.retryOn", "\"bogus\"")),
            (&owned[1], Ok),
            (
                &owned[2],
                Err("spec.http[0].match[0].authority.prefix", "must not be empty"),
            ),
            (&owned[3], Ok),
            (
                &owned[4],
                Err(
                    "spec.http[0].match[0].headers.bad header",
                    "not a valid header name",
                ),
            ),
            (&owned[5], Ok),
            (&owned[6], Err("spec.http[0].headers.request.x-a", "unterminated")),
            (&owned[7], Ok),
            (&owned[8], Err("spec.http[0].headers.request", "more than once")),
            (&owned[9], Err("spec.http[0].headers.request", "more than once")),
            (
                &owned[10],
                Err("spec.http[0].headers.response.host", "cannot be set"),
            ),
            (&owned[11], Warn("spec.http[0].match[0].headers.X-User")),
        ],
    );
}

#[test]
fn virtual_service_parts_meshd_ignores_are_validated() {
    use Want::*;
    cases(
        Kind::VirtualService,
        &[
            (
                "hosts: [r]\ntcp: [{route: [{destination: {host: r}}]}]",
                Warn("spec.tcp"),
            ),
            (
                "hosts: [r]\ntcp: [{match: [{port: 70000}], route: [{destination: {host: r}}]}]",
                Err("spec.tcp[0].match[0].port", "1..65535"),
            ),
            ("hosts: [r]\ntcp: [{}]", Err("spec.tcp[0].route", "destination")),
            (
                "hosts: [r]\ntcp: [{route: [{destination: {host: r}, weight: 'x'}]}]",
                Err("spec.tcp[0].route[0].weight", "invalid type"),
            ),
            (
                "hosts: [a.example.com]\ntls: [{match: [{sniHosts: [b.example.com]}], route: [{destination: {host: r}}]}]",
                Err("spec.tls[0].match[0].sniHosts[0]", "not within"),
            ),
            (
                "hosts: ['*.example.com']\ntls: [{match: [{sniHosts: [b.example.com]}], route: [{destination: {host: r}}]}]",
                Warn("spec.tls"),
            ),
            // The SNI hosts AUTO_PASSTHROUGH generates, on a gateway-bound VirtualService.
            (
                "hosts: ['*.foobar.mesh']\ngateways: [gw]\ntls: [{match: [{sniHosts: [outbound_.80_._.e2e.foobar.mesh]}], route: [{destination: {host: r}}]}]",
                Warn("spec.tls"),
            ),
            (
                "hosts: ['*.foobar.mesh']\ngateways: [gw]\ntls: [{match: [{sniHosts: [outbound_.x_._.e2e.foobar.mesh]}], route: [{destination: {host: r}}]}]",
                Err(
                    "spec.tls[0].match[0].sniHosts[0]",
                    "should follow outbound_.<port>_._.<hostname> format",
                ),
            ),
            (
                "hosts: ['*.foobar.mesh']\ntls: [{match: [{sniHosts: [outbound_.80_._.e2e.foobar.mesh]}], route: [{destination: {host: r}}]}]",
                Err("spec.tls[0].match[0].sniHosts[0]", "not a valid host"),
            ),
            (
                "hosts: [r]\nhttp: [{redirect: {redirectCode: 200, uri: /x}}]",
                Err("spec.http[0].redirect.redirectCode", "3xx"),
            ),
            (
                "hosts: [r]\nhttp: [{redirect: {}}]",
                Err("spec.http[0].redirect", "must set"),
            ),
            (
                "hosts: [r]\nhttp: [{directResponse: {status: 700}}]",
                Err("spec.http[0].directResponse.status", "200..599"),
            ),
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], mirror: {host: m}, mirrors: [{destination: {host: m}}]}]",
                Err("spec.http[0]", "mirror or mirrors"),
            ),
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], mirrors: [{destination: {host: '*'}}]}]",
                Err("spec.http[0].mirrors[0].destination.host", "not a destination"),
            ),
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], corsPolicy: {allowMethods: [FETCH]}}]",
                Err("spec.http[0].corsPolicy.allowMethods[0]", "method"),
            ),
            (
                "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], corsPolicy: {maxAge: 1.5s}}]",
                Err("spec.http[0].corsPolicy.maxAge", "seconds"),
            ),
        ],
    );
}

#[test]
fn sidecar_rules() {
    use Want::*;
    cases(
        Kind::Sidecar,
        &[
            (
                "egress: [{hosts: ['*/*', '~ns2/*']}]",
                Warn("spec.egress[0].hosts[1]"),
            ),
            (
                "egress: [{hosts: ['~Bad/*']}]",
                Err("spec.egress[0].hosts[0]", "namespace name"),
            ),
            ("egress: [{hosts: ['~/*']}]", Ok),
            (
                "egress: [{hosts: [ns2/foo]}]",
                Err("spec.egress[0].hosts[0]", "short names"),
            ),
            (
                "egress: [{hosts: ['ns2/foo*.com']}]",
                Err("spec.egress[0].hosts[0]", "partial wildcard"),
            ),
            (
                "egress: [{hosts: [ns2/a.com, ns2/a.com]}]",
                Warn("spec.egress[0].hosts[1]"),
            ),
            (
                "egress: [{hosts: ['*/*', ns2/a.com]}]",
                Warn("spec.egress[0].hosts"),
            ),
            (
                "egress: [{port: {number: 0, name: uds}, bind: 'unix://rel.sock', hosts: ['*/*']}]",
                Err("spec.egress[0].bind", "absolute"),
            ),
            (
                "egress: [{port: {number: 80, name: http}, bind: not-an-ip, hosts: ['*/*']}]",
                Err("spec.egress[0].bind", "IP address"),
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP}, defaultEndpoint: '10.0.0.1:80'}]",
                Err("spec.ingress[0].defaultEndpoint", "127.0.0.1"),
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP}, defaultEndpoint: '127.0.0.1:8080'}]",
                Ok,
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP}, defaultEndpoint: 'unix://relative'}]",
                Err("spec.ingress[0].defaultEndpoint", "absolute"),
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP, targetPort: 81}}]",
                Err("spec.ingress[0].port.targetPort", "no effect"),
            ),
            (
                "ingress: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: ISTIO_MUTUAL}}]",
                Err("spec.ingress[0].tls.mode", "ISTIO_MUTUAL"),
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP}, tls: {mode: SIMPLE, serverCertificate: /c, privateKey: /k}}]",
                Err("spec.ingress[0].tls", "HTTPS or TLS port"),
            ),
            (
                "ingress: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, serverCertificate: /c}}]",
                Err("spec.ingress[0].tls.privateKey", "required"),
            ),
            (
                "ingress: [{port: {number: 443, name: https, protocol: HTTPS}, tls: {mode: SIMPLE, serverCertificate: /c, privateKey: /k}}]",
                Warn("spec.ingress[0].tls"),
            ),
            (
                "ingress: [{port: {number: 80, name: http, protocol: HTTP}, connectionPool: {}}]",
                Err("spec.ingress[0].connectionPool", "tcp or http"),
            ),
            (
                "inboundConnectionPool: {tcp: {connectTimeout: 0.5ms}}",
                Err("spec.inboundConnectionPool.tcp.connectTimeout", "1ms"),
            ),
            (
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: proxy.example.com}}",
                Err("spec.outboundTrafficPolicy.egressProxy.port", "required"),
            ),
            (
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: proxy.example.com, port: {number: 70000}}}",
                Err("spec.outboundTrafficPolicy.egressProxy.port.number", "1..65535"),
            ),
            (
                "outboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {host: proxy.example.com, port: {number: 3128}}}",
                Warn("spec.outboundTrafficPolicy.egressProxy"),
            ),
            (
                "workloadSelector: {labels: {}}\negress: [{hosts: ['./*']}]",
                Warn("spec.workloadSelector"),
            ),
        ],
    );
}

#[test]
fn gateway_rules() {
    use Want::*;
    let server =
        |port: &str, rest: &str| format!("servers: [{{port: {{{port}}}, hosts: ['*.example.com']{rest}}}]");
    let owned = [
        server("number: 80, protocol: HTTP", ""),
        "servers: [{port: {number: 80, name: web, protocol: HTTP}, hosts: [a.example.com]}, \
         {port: {number: 81, name: web, protocol: HTTP}, hosts: [b.example.com]}]"
            .to_owned(),
        server("number: 80, name: http, protocol: HTTP, targetPort: 8080", ""),
        server("number: 80, name: http, protocol: HTTP", ", bind: 'unix://rel'"),
        server(
            "number: 0, name: http, protocol: HTTP",
            ", bind: 'unix:///var/run/gw.sock'",
        ),
        server(
            "number: 80, name: http, protocol: HTTP",
            ", tls: {mode: SIMPLE, credentialName: c}",
        ),
        server(
            "number: 80, name: http, protocol: HTTP",
            ", tls: {httpsRedirect: true}",
        ),
        server(
            "number: 9000, name: tcp, protocol: TCP",
            ", tls: {httpsRedirect: true}",
        ),
        server(
            "number: 443, name: https, protocol: HTTPS",
            ", tls: {mode: ISTIO_MUTUAL, credentialName: c}",
        ),
        server(
            "number: 443, name: https, protocol: HTTPS",
            ", tls: {mode: SIMPLE, credentialName: c, serverCertificate: /c, privateKey: /k}",
        ),
        server(
            "number: 443, name: https, protocol: HTTPS",
            ", tls: {mode: SIMPLE, credentialName: c, caCrl: /crl}",
        ),
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [ns1/foo]}]".to_owned(),
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['ns1/fo*.com']}]".to_owned(),
        "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [10.0.0.1]}]".to_owned(),
    ];
    cases(
        Kind::Gateway,
        &[
            (&owned[0], Err("spec.servers[0].port.name", "required")),
            (&owned[1], Err("spec.servers[1].port.name", "unique")),
            (&owned[2], Err("spec.servers[0].port.targetPort", "no effect")),
            (&owned[3], Err("spec.servers[0].bind", "absolute")),
            (&owned[4], Ok),
            (&owned[5], Err("spec.servers[0].tls", "plain-text HTTP")),
            (&owned[6], Ok),
            (&owned[7], Err("spec.servers[0].tls", "HTTPS or TLS port")),
            (
                &owned[8],
                Err("spec.servers[0].tls.credentialName", "ISTIO_MUTUAL"),
            ),
            (&owned[9], Err("spec.servers[0].tls", "only one of")),
            (&owned[10], Err("spec.servers[0].tls.caCrl", "credential")),
            (&owned[11], Err("spec.servers[0].hosts[0]", "short names")),
            (&owned[12], Err("spec.servers[0].hosts[0]", "partial wildcard")),
            (&owned[13], Ok),
        ],
    );
    // istiod's cipher-suite warnings: unknown ones, then repeated ones, ignored.
    let ciphers = |list: &str| {
        format!(
            "servers: [{{port: {{number: 443, name: https, protocol: HTTPS}}, hosts: [a.example.com], \
             tls: {{mode: SIMPLE, credentialName: c, cipherSuites: [{list}]}}}}]"
        )
    };
    let (unknown, repeated, fine) = (
        ciphers("BOGUS, AES128-SHA"),
        ciphers("AES128-SHA, AES128-SHA"),
        ciphers("ECDHE-RSA-AES128-GCM-SHA256, '-AES128-SHA', ALL"),
    );
    cases(
        Kind::Gateway,
        &[
            (&unknown, Warn("spec.servers[0].tls.cipherSuites")),
            (&repeated, Warn("spec.servers[0].tls.cipherSuites")),
            (&fine, Ok),
        ],
    );
    // The object's name is a DNS-1123 label: no dots.
    let got = super::parse(
        Kind::Gateway,
        super::ObjectMeta {
            name: "my.gateway".into(),
            ..meta()
        },
        &serde_json::json!({"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["a.example.com"]}]}),
    );
    let e = got.expect_err("a dotted gateway name");
    assert_eq!(e.field(), "metadata.name", "{e}");
}

fn meta() -> super::ObjectMeta {
    super::ObjectMeta {
        namespace: "ns1".into(),
        name: "obj".into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: None,
        source: super::Source::File {
            path: "/t.yaml".into(),
            index: 0,
        },
    }
}

#[test]
fn workload_entry_and_group_rules() {
    use Want::*;
    cases(
        Kind::WorkloadEntry,
        &[
            ("address: 'unix://relative'", Err("spec.address", "absolute")),
            ("address: 'unix:///dir/'", Err("spec.address", "directory")),
            ("address: 'unix://@abstract'", Ok),
        ],
    );
    cases(
        Kind::WorkloadGroup,
        &[
            (
                "template: {}\nprobe: {httpGet: {port: 80, httpHeaders: [{name: 'a_b', value: x}]}}",
                Err("spec.probe.httpGet.httpHeaders[0].name", "probe header name"),
            ),
            (
                "template: {}\nprobe: {httpGet: {port: 80, httpHeaders: [{name: x-a, value: \"a\\x01\"}]}}",
                Err("spec.probe.httpGet.httpHeaders[0].value", "control character"),
            ),
            (
                "template: {}\nprobe: {httpGet: {port: 80, httpHeaders: [{name: x-a, value: b}]}}",
                Ok,
            ),
            (
                "template: {}\nprobe: {httpGet: {port: 80, scheme: FTP}}",
                Err("spec.probe.httpGet.scheme", "HTTP or HTTPS"),
            ),
        ],
    );
}

#[test]
fn reserved_annotations_and_service_entry_selector_warnings() {
    use Want::*;
    cases(
        Kind::ServiceEntry,
        &[
            (
                "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nworkloadSelector: {labels: {}}\nresolution: STATIC",
                Warn("spec.workloadSelector"),
            ),
            (
                "hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}]\nworkloadSelector: {labels: {app: a}}",
                Warn("spec.workloadSelector"),
            ),
        ],
    );
    for key in [
        "istio.io/dry-run",
        "internal.istio.io/webhook-always-reject",
        "internal.istio.io/parents",
    ] {
        let mut m = meta();
        m.annotations.insert(key.into(), "true".into());
        let e = super::parse(
            Kind::Sidecar,
            m,
            &serde_json::json!({"egress": [{"hosts": ["./*"]}]}),
        )
        .expect_err(key);
        assert_eq!(e.field(), format!("metadata.annotations.{key}"), "{e}");
    }
}

#[test]
fn destination_rule_parts_meshd_ignores_are_validated() {
    use Want::*;
    cases(
        Kind::DestinationRule,
        &[
            (
                "host: r\ntrafficPolicy: {tunnel: {protocol: GET, targetHost: a.example.com, targetPort: 80}}",
                Err("spec.trafficPolicy.tunnel.protocol", "CONNECT"),
            ),
            (
                "host: r\ntrafficPolicy: {tunnel: {targetHost: 'not a host', targetPort: 80}}",
                Err("spec.trafficPolicy.tunnel.targetHost", "fully qualified"),
            ),
            (
                "host: r\ntrafficPolicy: {tunnel: {targetHost: 10.0.0.1}}",
                Err("spec.trafficPolicy.tunnel.targetPort", "1..65535"),
            ),
            (
                "host: r\ntrafficPolicy: {tunnel: {protocol: POST, targetHost: a.example.com, targetPort: 80}}",
                Warn("spec.trafficPolicy.tunnel"),
            ),
            (
                "host: r\ntrafficPolicy: {proxyProtocol: {version: V3}}",
                Err("spec.trafficPolicy.proxyProtocol.version", "unknown"),
            ),
            (
                "host: r\ntrafficPolicy: {outlierDetection: {consecutiveErrors: 5}}",
                Warn("spec.trafficPolicy.outlierDetection.consecutiveErrors"),
            ),
        ],
    );
}

#[test]
fn a_selector_without_labels_is_a_warning() {
    use Want::*;
    cases(
        Kind::PeerAuthentication,
        &[("selector: {}\nmtls: {mode: STRICT}", Warn("spec.selector"))],
    );
    cases(
        Kind::DestinationRule,
        &[("host: r\nworkloadSelector: {}", Warn("spec.workloadSelector"))],
    );
}
