//! Table-driven: one case per rule, valid and invalid, for every kind.

use super::*;

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: ns.into(),
        name: name.into(),
        labels: Labels::new(),
        annotations: BTreeMap::new(),
        revision: "1".into(),
        creation_timestamp: None,
        source: Source::Cluster(ClusterId::from("c1")),
    }
}

fn spec(yaml: &str) -> serde_json::Value {
    let v: serde_yaml::Value = serde_yaml::from_str(yaml).expect("test YAML");
    serde_json::to_value(v).expect("YAML to JSON")
}

/// What a case expects.
#[derive(Clone, Copy)]
pub(super) enum Want {
    /// Accepted without warnings.
    Ok,
    /// Accepted, with a warning on this field.
    Warn(&'static str),
    /// Rejected, with this field and message fragment among the errors.
    Err(&'static str, &'static str),
}

pub(super) fn check(kind: Kind, yaml: &str, want: Want) {
    let got = parse(kind, meta("ns1", "obj"), &spec(yaml));
    match (want, got) {
        (Want::Ok, Ok((_, w))) => assert!(w.is_empty(), "{kind} {yaml}: unexpected warnings {w:?}"),
        (Want::Warn(field), Ok((_, w))) => {
            assert!(
                w.iter().any(|w| w.field == field),
                "{kind} {yaml}: want warning on {field}, got {w:?}"
            )
        }
        (Want::Err(field, msg), Err(e)) => {
            let errors = match &e {
                ConfigError::Invalid { errors, .. } => errors.clone(),
                ConfigError::Decode { error, .. } => vec![error.clone()],
                ConfigError::TooLarge { .. } => panic!("{yaml}: too large"),
            };
            assert!(
                errors.iter().any(|e| e.field == field && e.message.contains(msg)),
                "{kind} {yaml}: want {field}: …{msg}…, got {e}"
            );
            assert!(e.to_string().starts_with(&format!("{kind} ns1/obj: ")), "{e}");
        }
        (Want::Ok | Want::Warn(_), Err(e)) => panic!("{kind} {yaml}: rejected: {e}"),
        (Want::Err(field, _), Ok(_)) => panic!("{kind} {yaml}: accepted, want error on {field}"),
    }
}

#[test]
fn destination_rule_rules() {
    use Want::*;
    let cases: &[(&str, Want)] = &[
        ("host: reviews\nsubsets: [{name: v1, labels: {version: v1}}]", Ok),
        ("host: '*.example.com'", Ok),
        ("host: ''", Err("spec.host", "must not be empty")),
        ("host: 'bad_host'", Err("spec.host", "not a valid host")),
        (
            "host: r\nsubsets: [{labels: {version: v1}}]",
            Err("spec.subsets[0].name", "required"),
        ),
        (
            "host: r\nsubsets: [{name: v1}, {name: v1}]",
            Err("spec.subsets[1].name", "duplicate"),
        ),
        (
            "host: r\nsubsets: [{name: V1}]",
            Err("spec.subsets[0].name", "DNS-1123"),
        ),
        (
            "host: r\nsubsets: [{name: v1, labels: {'bad key!': x}}]",
            Err("spec.subsets[0].labels.bad key!", "label key"),
        ),
        (
            "host: r\ntrafficPolicy: {}",
            Err("spec.trafficPolicy", "at least one field"),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}",
            Ok,
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {simple: FASTEST}}",
            Err("spec.trafficPolicy.loadBalancer.simple", "unknown variant"),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {ttl: 0s}}}}",
            Err(
                "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name",
                "required",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {maglev: {tableSize: 1000}}}}",
            Err(
                "spec.trafficPolicy.loadBalancer.consistentHash.maglev.tableSize",
                "prime",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true, maglev: {tableSize: 65537}}}}",
            Ok,
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {minimumRingSize: 10, ringHash: {minimumRingSize: 10}}}}",
            Err("spec.trafficPolicy.loadBalancer.consistentHash", "deprecated"),
        ),
        (
            "host: r\ntrafficPolicy: {connectionPool: {}}",
            Err("spec.trafficPolicy.connectionPool", "tcp or http"),
        ),
        (
            "host: r\ntrafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}}",
            Err("spec.trafficPolicy.connectionPool.tcp.maxConnections", "negative"),
        ),
        (
            "host: r\ntrafficPolicy: {connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}}",
            Err("spec.trafficPolicy.connectionPool.http", "useClientProtocol"),
        ),
        (
            "host: r\ntrafficPolicy: {connectionPool: {http: {http2MaxRequests: 100, idleTimeout: 30s}}}",
            Ok,
        ),
        (
            "host: r\ntrafficPolicy: {outlierDetection: {maxEjectionPercent: 101}}",
            Err("spec.trafficPolicy.outlierDetection.maxEjectionPercent", "0..100"),
        ),
        (
            "host: r\ntrafficPolicy: {outlierDetection: {consecutiveLocalOriginFailures: 3}}",
            Err(
                "spec.trafficPolicy.outlierDetection.consecutiveLocalOriginFailures",
                "split",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {outlierDetection: {interval: soon}}",
            Err("spec.trafficPolicy.outlierDetection.interval", "invalid duration"),
        ),
        (
            "host: r\ntrafficPolicy: {outlierDetection: {consecutive5xxErrors: 7, interval: 5m, baseEjectionTime: 15m}}",
            Ok,
        ),
        (
            "host: r\ntrafficPolicy: {tls: {mode: MUTUAL}}",
            Err("spec.trafficPolicy.tls.clientCertificate", "required"),
        ),
        ("host: r\ntrafficPolicy: {tls: {mode: ISTIO_MUTUAL}}", Ok),
        (
            "host: r\ntrafficPolicy: {portLevelSettings: [{loadBalancer: {simple: RANDOM}}]}",
            Err("spec.trafficPolicy.portLevelSettings[0].port", "required"),
        ),
        (
            "host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}}]}",
            Err("spec.trafficPolicy.portLevelSettings[0]", "must set one of"),
        ),
        (
            "host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 70000}, tls: {mode: SIMPLE}}]}",
            Err("spec.trafficPolicy.portLevelSettings[0].port.number", "1..65535"),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {b/*: 100}}], failover: [{from: a, to: b}]}}}",
            Err("spec.trafficPolicy.loadBalancer.localityLbSetting", "cannot both"),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {b/*: 60, c/*: 30}}]}}}",
            Err(
                "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to",
                "not 100",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: a/*, to: {b/*: 100}}, {from: a/z1, to: {b/*: 100}}]}}}",
            Err(
                "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute",
                "overlaps",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {distribute: [{from: '*/a', to: {b: 100}}]}}}",
            Err(
                "spec.trafficPolicy.loadBalancer.localityLbSetting.distribute",
                "at the end",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east1, to: us-east1}]}}, outlierDetection: {consecutive5xxErrors: 1}}",
            Err(
                "spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0]",
                "different regions",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east1, to: us-west1}], failoverPriority: [topology.kubernetes.io/zone]}}, outlierDetection: {consecutive5xxErrors: 1}}",
            Err(
                "spec.trafficPolicy.loadBalancer.localityLbSetting.failoverPriority",
                "cannot be used",
            ),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east1, to: us-west1}]}}}",
            Warn("spec.trafficPolicy.loadBalancer.localityLbSetting"),
        ),
        (
            "host: r\ntrafficPolicy: {loadBalancer: {localityLbSetting: {failoverPriority: [topology.istio.io/network]}}, outlierDetection: {consecutive5xxErrors: 1}}",
            Ok,
        ),
        (
            "host: r\ntrafficPolicy: {tunnel: {protocol: CONNECT, targetHost: proxy.example.com, targetPort: 8080}}",
            Warn("spec.trafficPolicy.tunnel"),
        ),
        (
            "host: r\ntrafficPolicy: {tunnel: {}, proxyProtocol: {}}",
            Err("spec.trafficPolicy", "cannot both"),
        ),
        (
            "host: r\nexportTo: ['.', '*']",
            Err("spec.exportTo", "only entry"),
        ),
        ("host: r\nexportTo: [a, a]", Err("spec.exportTo[1]", "duplicate")),
        (
            "host: r\nexportTo: ['~']",
            Err("spec.exportTo[0]", "ServiceEntry"),
        ),
        (
            "host: r\nexportTo: ['Bad_NS']",
            Err("spec.exportTo[0]", "namespace"),
        ),
        (
            "host: r\nworkloadSelector: {matchLabels: {app: x}}\nexportTo: [other]",
            Err("spec.exportTo", "own namespace"),
        ),
        (
            "host: r\nworkloadSelector: {matchLabels: {app: '*'}}",
            Err("spec.workloadSelector.matchLabels.app", "wildcard"),
        ),
        (
            "host: r\nworkloadSelector: {matchLabels: {app: x}}\nexportTo: ['.']",
            Ok,
        ),
        ("host: r\nfrobnicate: true", Warn("spec.frobnicate")),
        (
            "host: r\nsubsets: [{name: v1, extra: 1}]",
            Warn("spec.subsets[0].extra"),
        ),
        ("host: [not, a, string]", Err("spec.host", "invalid type")),
    ];
    for (yaml, want) in cases {
        check(Kind::DestinationRule, yaml, *want);
    }
}

#[test]
fn virtual_service_rules() {
    use Want::*;
    let route = "route: [{destination: {host: r}}]";
    let cases: Vec<(String, Want)> = vec![
        (format!("hosts: [reviews]\nhttp: [{{{route}}}]"), Ok),
        ("hosts: [reviews]\nhttp: [{route: [{destination: {host: r, subset: v1}, weight: 80}, {destination: {host: r, subset: v2}, weight: 30}]}]".into(), Ok),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r}, weight: -1}, {destination: {host: s}, weight: 5}]}]".into(), Err("spec.http[0].route[0].weight", "negative")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r}, weight: 0}, {destination: {host: s}, weight: 0}]}]".into(), Err("spec.http[0].route", "cannot all be 0")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r}, weight: 2147483647}, {destination: {host: s}, weight: 2147483647}, {destination: {host: t}, weight: 2147483647}]}]".into(), Err("spec.http[0].route", "over")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r}, weight: 3000000000}]}]".into(), Err("spec.http[0].route[0].weight", "invalid value")),
        (format!("hosts: ['*']\nhttp: [{{{route}}}]"), Err("spec.hosts[0]", "wildcard")),
        (format!("hosts: ['*']\ngateways: [my-gw]\nhttp: [{{{route}}}]"), Ok),
        (format!("hosts: [r, r]\nhttp: [{{{route}}}]"), Err("spec.hosts[1]", "duplicate")),
        ("hosts: [r]".into(), Err("spec", "one of http, tcp or tls")),
        (format!("gateways: [gw]\nhttp: [{{{route}}}]"), Err("spec.gateways", "delegate")),
        ("hosts: [r]\nhttp: [{match: [{uri: {prefix: /}}]}]".into(), Err("spec.http[0]", "one of route")),
        (format!("hosts: [r]\nhttp: [{{{route}, redirect: {{uri: /x}}}}]"), Err("spec.http[0]", "only one of route")),
        ("hosts: [r]\nhttp: [{redirect: {uri: /x}, fault: {abort: {httpStatus: 500}}}]".into(), Err("spec.http[0]", "cannot be combined")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: '*'}}]}]".into(), Err("spec.http[0].route[0].destination.host", "not a destination")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: ''}}]}]".into(), Err("spec.http[0].route[0].destination.host", "required")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r, subset: Bad_Subset}}]}]".into(), Err("spec.http[0].route[0].destination.subset", "subset name")),
        ("hosts: [r]\nhttp: [{route: [{destination: {host: r, port: {number: 0}}}]}]".into(), Err("spec.http[0].route[0].destination.port.number", "1..65535")),
        (format!("hosts: [r]\nhttp: [{{{route}, retries: {{attempts: -1}}}}]"), Err("spec.http[0].retries.attempts", "negative")),
        (format!("hosts: [r]\nhttp: [{{{route}, retries: {{attempts: 0, perTryTimeout: 1s}}}}]"), Err("spec.http[0].retries", "attempts 0")),
        (format!("hosts: [r]\nhttp: [{{{route}, retries: {{attempts: 3, perTryTimeout: 2s, retryOn: 'connect-failure,503'}}, timeout: 10s}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{}}}}]"), Err("spec.http[0].fault", "abort or delay")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{abort: {{http2Error: x}}}}}}]"), Err("spec.http[0].fault.abort.http2Error", "not supported")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{abort: {{httpStatus: 700}}}}}}]"), Err("spec.http[0].fault.abort.httpStatus", "200..599")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{abort: {{grpcStatus: NOPE}}}}}}]"), Err("spec.http[0].fault.abort.grpcStatus", "gRPC status")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{abort: {{httpStatus: 503, percentage: {{value: 150}}}}}}}}]"), Err("spec.http[0].fault.abort.percentage.value", "0..100")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{delay: {{exponentialDelay: 1s}}}}}}]"), Err("spec.http[0].fault.delay.exponentialDelay", "not supported")),
        (format!("hosts: [r]\nhttp: [{{{route}, fault: {{delay: {{fixedDelay: 5s, percentage: {{value: 10}}}}, abort: {{grpcStatus: UNAVAILABLE, percentage: {{value: 5}}}}}}}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, match: [{{uri: {{regex: '(unclosed'}}}}]}}]"), Err("spec.http[0].match[0].uri.regex", "invalid regex")),
        (format!("hosts: [r]\nhttp: [{{{route}, match: [{{uri: {{exact: /a, prefix: /b}}}}]}}]"), Err("spec.http[0].match[0].uri", "only one")),
        (format!("hosts: [r]\nhttp: [{{{route}, match: [{{port: 99999}}]}}]"), Err("spec.http[0].match[0].port", "1..65535")),
        (format!("hosts: [r]\nhttp: [{{{route}, match: [{{headers: {{end-user: {{exact: jason}}}}, sourceLabels: {{app: web}}, sourceNamespace: ns2, uri: {{prefix: /api}}}}]}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, rewrite: {{}}}}]"), Err("spec.http[0].rewrite", "uri, uriRegexRewrite or authority")),
        (format!("hosts: [r]\nhttp: [{{{route}, headers: {{request: {{set: {{':path': x}}}}}}}}]"), Err("spec.http[0].headers.request.:path", "cannot be set")),
        (format!("hosts: [r]\nhttp: [{{{route}, headers: {{request: {{set: {{x-a: b}}, remove: [x-c]}}}}}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, mirror: {{host: m}}, mirrorPercentage: {{value: 10}}}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, mirrors: [{{destination: {{host: m}}, percentage: {{value: 5}}}}]}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, rewrite: {{uriRegexRewrite: {{match: ^/v1/(.*), rewrite: /v2/\\1}}}}}}]"), Ok),
        (format!("hosts: [r]\nhttp: [{{{route}, rewrite: {{uri: /a, uriRegexRewrite: {{match: a, rewrite: b}}}}}}]"), Err("spec.http[0].rewrite", "only one of uri")),
        (format!("hosts: [r]\nhttp: [{{{route}, rewrite: {{uriRegexRewrite: {{match: '(x'}}}}}}]"), Err("spec.http[0].rewrite.uriRegexRewrite", "both match and rewrite")),
        (format!("hosts: [r]\nhttp: [{{{route}, rewrite: {{uriRegexRewrite: {{match: '(x', rewrite: y}}}}}}]"), Err("spec.http[0].rewrite.uriRegexRewrite.match", "invalid regex")),
        (format!("hosts: [r]\nhttp: [{{{route}, retries: {{attempts: 2, backoff: 100ms}}, corsPolicy: {{allowOrigins: [{{exact: https://a.example}}], allowMethods: [GET]}}}}]"), Ok),
        ("hosts: [r]\nhttp: [{redirect: {uri: /new, redirectCode: 302}}, {directResponse: {status: 503, body: {string: down}}}]".into(), Ok),
        ("hosts: [r]\nhttp: [{directResponse: {status: 200, body: {bytes: 'not base64!'}}}]".into(), Err("spec.http[0].directResponse.body.bytes", "base64")),
        ("hosts: [r]\ntcp: [{route: [{destination: {host: r}}]}]".into(), Warn("spec.tcp")),
        ("http: [{delegate: {name: d}, match: [{uri: {prefix: /}}]}]\nhosts: [r]".into(), Ok),
        (format!("http: [{{{route}, match: [{{uri: {{regex: a.*}}}}]}}]"), Err("spec.http[0].match[0].uri.regex", "delegate")),
        (format!("hosts: [r]\nexportTo: ['*', ns2]\nhttp: [{{{route}}}]"), Err("spec.exportTo", "only entry")),
    ];
    for (yaml, want) in cases {
        check(Kind::VirtualService, &yaml, want);
    }
}

#[test]
fn service_entry_rules() {
    use Want::*;
    let p = "ports: [{number: 443, name: https, protocol: HTTPS}]";
    let cases: Vec<(String, Want)> = vec![
        (format!("hosts: [api.example.com]\n{p}\nresolution: DNS\nlocation: MESH_EXTERNAL"), Ok),
        (format!("{p}\nresolution: DNS"), Err("spec.hosts", "at least one host")),
        (format!("hosts: ['*']\n{p}"), Err("spec.hosts[0]", "wildcard")),
        ("hosts: [a.example.com]".into(), Warn("spec.ports")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: STATIC\nendpoints: [{{address: db.example.com}}]"), Err("spec.endpoints[0].address", "not an IP")),
        ("hosts: [a.example.com]\nports: [{number: 443, name: https, protocol: HTTPS}, {number: 80, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 10.0.0.1, ports: {https: 8443}}, {address: 'unix:///sock'}]".into(), Err("spec.ports", "exactly one")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: STATIC\nendpoints: [{{address: 10.0.0.1, ports: {{http: 8080}}}}]"), Err("spec.endpoints[0].ports.http", "not defined")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: STATIC\nendpoints: [{{address: 10.0.0.1, ports: {{https: 8443}}, labels: {{app: a}}, network: n2, locality: r/z, weight: 3, serviceAccount: sa}}]"), Ok),
        (format!("hosts: [a.example.com]\n{p}\nresolution: NONE\nendpoints: [{{address: 10.0.0.1}}]"), Err("spec.endpoints", "resolution NONE")),
        (format!("hosts: [a.example.com]\n{p}\naddresses: [10.0.0.0/8]\nresolution: DNS"), Err("spec.addresses", "CIDR")),
        (format!("hosts: [a.example.com]\n{p}\naddresses: [10.0.0.0/33]"), Err("spec.addresses[0]", "IP address or CIDR")),
        (format!("hosts: [a.example.com]\n{p}\naddresses: [10.0.0.0/8, 10.1.2.3/32, '2001:db8::/64']\nresolution: STATIC\nworkloadSelector: {{labels: {{app: vm}}}}"), Ok),
        ("hosts: [a.example.com]\nports: [{number: 0, name: tcp, protocol: TCP}]\naddresses: [10.0.0.1]".into(), Err("spec.ports[0].number", "1..65535")),
        ("hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 80, name: http2, protocol: HTTP}]".into(), Err("spec.ports[1].number", "already defined")),
        ("hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: http, protocol: HTTP}]".into(), Err("spec.ports[1].name", "already defined")),
        ("hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: CARRIER-PIGEON}]".into(), Err("spec.ports[0].protocol", "unsupported protocol")),
        ("hosts: [a.example.com]\nports: [{number: 80, name: Bad_Name, protocol: HTTP}]".into(), Err("spec.ports[0].name", "invalid port name")),
        ("hosts: [a.example.com]\nports: [{number: 80, name: http, protocol: HTTP, targetPort: 70000}]".into(), Err("spec.ports[0].targetPort", "1..65535")),
        ("hosts: [a.example.com]\nports: [{number: 5432, name: tcp, protocol: TCP}]\nresolution: DNS".into(), Warn("spec.ports[0]")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: STATIC\nendpoints: [{{address: 10.0.0.1}}]\nworkloadSelector: {{labels: {{app: a}}}}"), Err("spec.endpoints", "only one of workloadSelector")),
        (format!("hosts: [short]\n{p}\nresolution: DNS"), Err("spec.hosts[0]", "fully qualified")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: DNS_ROUND_ROBIN\nendpoints: [{{address: a.example.com}}, {{address: b.example.com}}]"), Err("spec.endpoints", "at most one")),
        ("hosts: [a.example.com, b.example.com]\nports: [{number: 5432, name: tcp, protocol: TCP}]\naddresses: [10.0.0.1]\nresolution: DNS".into(), Err("spec.hosts", "multiple hosts")),
        (format!("hosts: [a.example.com, b.example.com]\n{p}\nresolution: DNS"), Ok),
        (format!("hosts: [a.example.com]\n{p}\nexportTo: ['~', ns2]"), Err("spec.exportTo", "`~` must be the only")),
        (format!("hosts: [a.example.com]\n{p}\nexportTo: ['~']"), Ok),
        (format!("hosts: [a.example.com]\n{p}\nresolution: SOMETIMES"), Err("spec.resolution", "unknown variant")),
        (format!("hosts: [a.example.com]\n{p}\nlocation: MESH_INTERNAL\nresolution: STATIC\nendpoints: [{{network: n2}}]"), Warn("spec.endpoints[0].address")),
        (format!("hosts: [a.example.com]\n{p}\nresolution: STATIC\nendpoints: [{{labels: {{app: a}}}}]"), Err("spec.endpoints[0].address", "required unless network")),
    ];
    for (yaml, want) in cases {
        check(Kind::ServiceEntry, &yaml, want);
    }
}

#[test]
fn workload_entry_and_group_rules() {
    use Want::*;
    let we: &[(&str, Want)] = &[
        (
            "address: 10.1.0.5\nports: {http: 8080}\nlabels: {app: vm}\nnetwork: network2\nlocality: us-east1/us-east1-a\nweight: 2\nserviceAccount: vm-sa",
            Ok,
        ),
        (
            "labels: {app: vm}",
            Err("spec.address", "required unless network"),
        ),
        ("network: network2", Warn("spec.address")),
        ("address: vm.example.com", Ok),
        ("address: 'not an address'", Err("spec.address", "not an IP")),
        (
            "address: 'unix:///var/run/s.sock'\nports: {http: 80}",
            Err("spec.ports", "unix"),
        ),
        (
            "address: 10.0.0.1\nports: {http: 0}",
            Err("spec.ports.http", "1..65535"),
        ),
        (
            "address: 10.0.0.1\nports: {Bad_Name: 80}",
            Err("spec.ports.Bad_Name", "port name"),
        ),
        (
            "address: 10.0.0.1\nlabels: {'a/b/c': x}",
            Err("spec.labels.a/b/c", "label key"),
        ),
        (
            "address: 10.0.0.1\nweight: -1",
            Err("spec.weight", "invalid value"),
        ),
    ];
    for (yaml, want) in we {
        check(Kind::WorkloadEntry, yaml, *want);
    }
    let wg: &[(&str, Want)] = &[
        (
            "metadata: {labels: {app: vm}}\ntemplate: {ports: {http: 8080}, serviceAccount: vm-sa, network: network2}\nprobe: {periodSeconds: 5, httpGet: {path: /ready, port: 8080}}",
            Ok,
        ),
        ("metadata: {labels: {app: vm}}", Err("spec.template", "required")),
        (
            "template: {}\nmetadata: {labels: {'bad key!': x}}",
            Err("spec.metadata.labels.bad key!", "label key"),
        ),
        (
            "template: {}\nprobe: {periodSeconds: -1, tcpSocket: {port: 80}}",
            Err("spec.probe.periodSeconds", "negative"),
        ),
        (
            "template: {}\nprobe: {periodSeconds: 1}",
            Err("spec.probe", "one of httpGet"),
        ),
        (
            "template: {}\nprobe: {tcpSocket: {port: 80}, exec: {command: ['true']}}",
            Err("spec.probe", "only one"),
        ),
        ("template: {address: 10.0.0.1}", Warn("spec.template.address")),
        (
            "template: {ports: {http: 99999}}",
            Err("spec.template.ports.http", "1..65535"),
        ),
    ];
    for (yaml, want) in wg {
        check(Kind::WorkloadGroup, yaml, *want);
    }
}

#[test]
fn sidecar_gateway_and_peer_authentication_rules() {
    use Want::*;
    let sc: &[(&str, Want)] = &[
        (
            "egress: [{hosts: ['./*', 'istio-system/*']}]\noutboundTrafficPolicy: {mode: REGISTRY_ONLY}",
            Ok,
        ),
        ("{}", Err("spec", "must set")),
        (
            "egress: [{hosts: []}]",
            Err("spec.egress[0].hosts", "at least one host"),
        ),
        (
            "egress: [{hosts: [reviews]}]",
            Err("spec.egress[0].hosts[0]", "namespace/dnsName"),
        ),
        (
            "egress: [{hosts: [ns1/reviews]}]",
            Err("spec.egress[0].hosts[0]", "short names"),
        ),
        (
            "egress: [{hosts: ['ns1/*.example.com', '*/api.example.com', '~/*']}]",
            Ok,
        ),
        (
            "egress: [{hosts: ['Bad_NS/*']}]",
            Err("spec.egress[0].hosts[0]", "namespace name"),
        ),
        (
            "egress: [{hosts: ['*/*']}, {port: {number: 80, protocol: HTTP, name: http}, hosts: ['*/*']}]",
            Err("spec.egress[0]", "must be the last"),
        ),
        (
            "egress: [{port: {number: 80, name: http}, hosts: ['*/*']}, {port: {number: 80, name: http2}, hosts: ['*/*']}]",
            Err("spec.egress[1].port.number", "must be unique"),
        ),
        (
            "ingress: [{port: {number: 0, name: x, protocol: HTTP}, defaultEndpoint: '127.0.0.1:80'}]",
            Err("spec.ingress[0].port.number", "1..65535"),
        ),
        (
            "ingress: [{port: {number: 9080, name: http, protocol: HTTP}, defaultEndpoint: '127.0.0.1:8080'}]",
            Ok,
        ),
        (
            "outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: egress.example.com}}",
            Err("spec.outboundTrafficPolicy.egressProxy", "ALLOW_ANY"),
        ),
        (
            "outboundTrafficPolicy: {mode: SOMETIMES}",
            Err("spec.outboundTrafficPolicy.mode", "unknown variant"),
        ),
        (
            "workloadSelector: {labels: {'*': x}}\negress: [{hosts: ['*/*']}]",
            Err("spec.workloadSelector.labels.*", "wildcard"),
        ),
    ];
    for (yaml, want) in sc {
        check(Kind::Sidecar, yaml, *want);
    }
    let gw: &[(&str, Want)] = &[
        (
            "selector: {istio: ingressgateway}\nservers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]",
            Ok,
        ),
        (
            "selector: {istio: ingressgateway}",
            Err("spec.servers", "at least one server"),
        ),
        (
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: []}]",
            Err("spec.servers[0].hosts", "at least one host"),
        ),
        (
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*']}]",
            Err("spec.servers[0].tls", "needs tls"),
        ),
        (
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['*'], tls: {mode: SIMPLE}}]",
            Err("spec.servers[0].tls.serverCertificate", "required"),
        ),
        (
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: ['ns1/a.example.com'], tls: {mode: SIMPLE, credentialName: cert}}]",
            Ok,
        ),
        (
            "servers: [{port: {number: 15443, name: tls, protocol: TLS}, hosts: ['*.local'], tls: {mode: AUTO_PASSTHROUGH}}]",
            Ok,
        ),
        (
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['Bad_NS/*']}]",
            Err("spec.servers[0].hosts[0]", "namespace"),
        ),
        (
            "servers: [{port: {number: 80, name: a, protocol: HTTP}, hosts: ['*'], name: s}, {port: {number: 81, name: b, protocol: HTTP}, hosts: ['*'], name: s}]",
            Warn("spec.servers[1].name"),
        ),
    ];
    for (yaml, want) in gw {
        check(Kind::Gateway, yaml, *want);
    }
    let pa: &[(&str, Want)] = &[
        ("mtls: {mode: STRICT}", Ok),
        (
            "selector: {matchLabels: {app: a}}\nmtls: {mode: PERMISSIVE}\nportLevelMtls: {8080: {mode: DISABLE}}",
            Ok,
        ),
        (
            "mtls: {mode: STRICT}\nportLevelMtls: {8080: {mode: DISABLE}}",
            Err("spec.portLevelMtls", "workload selector"),
        ),
        (
            "selector: {matchLabels: {app: a}}\nportLevelMtls: {}",
            Err("spec.portLevelMtls", "must not be empty"),
        ),
        (
            "selector: {matchLabels: {app: a}}\nportLevelMtls: {0: {mode: DISABLE}}",
            Err("spec.portLevelMtls.0", "1..65535"),
        ),
        (
            "mtls: {mode: SOMETIMES}",
            Err("spec.mtls.mode", "unknown variant"),
        ),
    ];
    for (yaml, want) in pa {
        check(Kind::PeerAuthentication, yaml, *want);
    }
}

#[test]
fn metadata_and_limits() {
    let bad_name = parse(Kind::DestinationRule, meta("ns1", "Bad_Name"), &spec("host: r")).unwrap_err();
    assert_eq!(bad_name.field(), "metadata.name");
    let bad_ns = parse(Kind::DestinationRule, meta("", "ok"), &spec("host: r")).unwrap_err();
    assert_eq!(bad_ns.field(), "metadata.namespace");
    let huge = serde_json::json!({ "host": "r", "pad": "x".repeat(MAX_SPEC_BYTES) });
    let err = parse(Kind::DestinationRule, meta("ns1", "big"), &huge).unwrap_err();
    assert!(matches!(err, ConfigError::TooLarge { .. }), "{err}");
    // A null spec is an empty one: for a DestinationRule, a missing host.
    let err = parse(Kind::DestinationRule, meta("ns1", "e"), &serde_json::Value::Null).unwrap_err();
    assert_eq!(err.field(), "spec.host");
    assert_eq!(
        err.to_string(),
        "DestinationRule ns1/e: spec.host: host must not be empty"
    );
}

#[test]
fn parsed_objects_carry_meta_hosts_and_kind() {
    let (cfg, _) = parse(
        Kind::VirtualService,
        meta("ns1", "vs"),
        &spec("hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews, subset: v1}, weight: 1}, {destination: {host: ratings}, weight: 1}]}]"),
    )
    .unwrap();
    assert_eq!(cfg.kind(), Kind::VirtualService);
    assert_eq!(
        cfg.object_ref(),
        ObjectRef::new(Kind::VirtualService, "ns1", "vs")
    );
    assert_eq!(cfg.hosts(), ["ratings", "reviews"]);
    let Spec::VirtualService(vs) = &cfg.spec else {
        panic!("kind")
    };
    assert_eq!(vs.http[0].route[0].destination.subset, "v1");
}

#[test]
fn kinds_describe_their_crds() {
    for kind in Kind::ALL {
        assert_eq!(Kind::from_name(kind.name()), Some(kind));
        assert!(kind.versions().contains(&kind.storage_version()), "{kind}");
    }
    assert_eq!(
        Kind::DestinationRule.crd_name(),
        "destinationrules.networking.istio.io"
    );
    assert_eq!(Kind::PeerAuthentication.group(), SECURITY_GROUP);
    assert_eq!(Kind::ServiceEntry.short_names(), ["se"]);
    assert_eq!(Kind::from_name("AuthorizationPolicy"), None);
}

#[test]
fn http_actions_are_implemented_not_reported() {
    // Mirrors, CORS, redirects, direct responses, delegation and retry backoff are acted on: no
    // "ignored" warning (the deprecated integer `mirrorPercent` still says so).
    let yaml = "hosts: [r]\nhttp: [{route: [{destination: {host: r}}], mirror: {host: m}, \
                mirrorPercent: 10, corsPolicy: {allowOrigins: [{prefix: https://}]}, \
                retries: {attempts: 1, backoff: 1s}}, {route: [{destination: {host: r}}], \
                mirrors: [{destination: {host: m}}]}, {delegate: {name: d}}, {redirect: {uri: /x}}]";
    let (_, warnings) = parse(Kind::VirtualService, meta("ns1", "obj"), &spec(yaml)).unwrap();
    let got: Vec<(String, String)> = warnings
        .iter()
        .map(|w| (w.field.clone(), w.message.clone()))
        .collect();
    assert_eq!(
        got,
        [(
            "spec.http[0].mirrorPercent".to_owned(),
            "deprecated: use mirrorPercentage".to_owned()
        )]
    );
}
