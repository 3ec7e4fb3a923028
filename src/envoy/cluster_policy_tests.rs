//! One row per DestinationRule field × client: the Cluster fields written (proto3 JSON, the name and
//! EDS config left out) and the notes `explain` shows.

use std::{
    collections::BTreeSet,
    sync::{Arc, LazyLock},
};

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use serde_json::{Value, json};

use super::{
    Client, Effect, FieldNote, TlsContext, UpstreamProtocol, UpstreamTls, apply, upstream_protocol,
    upstream_tls,
};
use crate::{
    config::MeshConfig,
    envoy::cds::{apply_tls, eds_cluster},
    istio::destination_rule::PortTrafficPolicy,
    model::Protocol,
};

/// What, the rule's `trafficPolicy` (YAML), the client, the cluster's JSON, (field, effect) notes.
type Row = (
    &'static str,
    &'static str,
    Client,
    Value,
    Vec<(&'static str, &'static str)>,
);

fn policy(yaml: &str) -> PortTrafficPolicy {
    serde_yaml::from_str(yaml).expect("trafficPolicy yaml")
}

/// The Envoy descriptors `build.rs` compiled.
static ENVOY: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/envoy.bin"))[..]).unwrap()
});

/// The cluster as proto3 JSON (Envoy's descriptors, `Any` expanded), without what every row shares.
fn json_of(c: &envoy_types::pb::envoy::config::cluster::v3::Cluster) -> Value {
    let desc = ENVOY
        .get_message_by_name("envoy.config.cluster.v3.Cluster")
        .unwrap();
    let msg = DynamicMessage::decode(desc, c.encode_to_vec().as_slice()).unwrap();
    let mut v = msg
        .serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new())
        .unwrap();
    let obj = v.as_object_mut().unwrap();
    for shared in ["name", "type", "edsClusterConfig", "connectTimeout"] {
        obj.remove(shared);
    }
    v
}

/// Builds the cluster of `yaml` for `client` (a port that speaks HTTP), as the generator does.
fn build(yaml: &str, client: Client) -> (Value, Vec<FieldNote>, Value) {
    build_on(yaml, client, Protocol::Http)
}

/// [`build`] for a port of `protocol`.
fn build_on(yaml: &str, client: Client, protocol: Protocol) -> (Value, Vec<FieldNote>, Value) {
    let p = policy(yaml);
    let ids: BTreeSet<Arc<str>> = ["spiffe://cluster.local/ns/d/sa/r".into()].into();
    let ctx = TlsContext {
        identities: &ids,
        sni: "outbound_.80_._.r.d.svc.cluster.local",
        auto_mtls: false,
        rule_has_selector: false,
    };
    let (tls, tls_note) = upstream_tls(p.tls.as_ref(), client, &ctx);
    let mut c = envoy_types::pb::envoy::config::cluster::v3::Cluster::default();
    eds_cluster(&mut c, "outbound|80||r.d.svc.cluster.local", client);
    let mut notes = apply(&mut c, &p, client, protocol, &MeshConfig::default(), &tls);
    notes.extend(tls_note);
    let upstream = upstream_protocol(p.connection_pool.as_ref(), protocol, client);
    apply_tls(&mut c, &tls, client, upstream == UpstreamProtocol::Http2);
    let timeout = json_of_timeout(&c);
    (json_of(&c), notes, timeout)
}

fn json_of_timeout(c: &envoy_types::pb::envoy::config::cluster::v3::Cluster) -> Value {
    let d = c.connect_timeout.as_ref().unwrap();
    json!(format!("{}.{:03}s", d.seconds, d.nanos / 1_000_000))
}

/// Circuit breakers and panic threshold as Envoy clients get them by default (istiod's thresholds; 0 %:
/// no panic mode).
fn envoy_defaults() -> Value {
    json!({"circuitBreakers": {"thresholds": [{
        "maxConnections": 4294967295u32, "maxPendingRequests": 4294967295u32,
        "maxRequests": 4294967295u32, "maxRetries": 4294967295u32, "trackRemaining": true}]},
        "commonLbConfig": {"healthyPanicThreshold": {}}, "lbPolicy": "LEAST_REQUEST"})
}

fn merged(base: Value, extra: Value) -> Value {
    let mut base = base;
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

fn a(field: &'static str) -> FieldNote {
    FieldNote {
        field,
        effect: Effect::Applies,
    }
}

fn ig(field: &'static str) -> (&'static str, &'static str) {
    (field, "ignored")
}

fn summary(notes: &[FieldNote]) -> Vec<(&'static str, &'static str)> {
    notes
        .iter()
        .map(|n| {
            let e = match n.effect {
                Effect::Applies => "applies",
                Effect::Downgraded { .. } => "downgraded",
                Effect::Ignored { .. } => "ignored",
            };
            (n.field, e)
        })
        .collect()
}

#[test]
fn no_policy_is_istiods_default_cluster() {
    let (sidecar, notes, timeout) = build("{}", Client::Sidecar);
    assert_eq!(sidecar, envoy_defaults());
    assert!(notes.is_empty());
    assert_eq!(timeout, json!("10.000s"));
    // gRPC: exactly today's cluster (ROUND_ROBIN is the enum default, absent in JSON), no breakers.
    let (grpc, notes, _) = build("{}", Client::Grpc);
    assert_eq!(grpc, json!({}));
    assert!(notes.is_empty());
}

#[test]
fn every_field_per_client() {
    let od_envoy = json!({"consecutive5xx": 3, "enforcingConsecutive5xx": 100, "enforcingSuccessRate": 0,
        "interval": "5s", "baseEjectionTime": "30s", "maxEjectionPercent": 50});
    let cases: Vec<Row> = vec![
        (
            "round robin",
            "loadBalancer: {simple: ROUND_ROBIN}",
            Client::Sidecar,
            merged(envoy_defaults(), json!({"lbPolicy": null})),
            vec![("loadBalancer.simple", "applies")],
        ),
        (
            "round robin",
            "loadBalancer: {simple: ROUND_ROBIN}",
            Client::Grpc,
            json!({}),
            vec![("loadBalancer.simple", "applies")],
        ),
        (
            "random",
            "loadBalancer: {simple: RANDOM}",
            Client::Sidecar,
            merged(envoy_defaults(), json!({"lbPolicy": "RANDOM"})),
            vec![("loadBalancer.simple", "applies")],
        ),
        (
            "random → RR",
            "loadBalancer: {simple: RANDOM}",
            Client::Grpc,
            json!({}),
            vec![("loadBalancer.simple", "downgraded")],
        ),
        (
            "least request → RR",
            "loadBalancer: {simple: LEAST_REQUEST}",
            Client::Grpc,
            json!({}),
            vec![("loadBalancer.simple", "downgraded")],
        ),
        (
            "least conn",
            "loadBalancer: {simple: LEAST_CONN}",
            Client::Router,
            envoy_defaults(),
            vec![("loadBalancer.simple", "applies")],
        ),
        (
            "passthrough",
            "loadBalancer: {simple: PASSTHROUGH}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"lbPolicy": "CLUSTER_PROVIDED", "type": null}),
            ),
            vec![("loadBalancer.simple", "applies")],
        ),
        (
            "passthrough",
            "loadBalancer: {simple: PASSTHROUGH}",
            Client::Grpc,
            json!({}),
            vec![ig("loadBalancer.simple")],
        ),
        (
            "warmup",
            "loadBalancer: {simple: ROUND_ROBIN, warmupDurationSecs: 30s}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"lbPolicy": null,
             "roundRobinLbConfig": {"slowStartConfig": {"slowStartWindow": "30s"}}}),
            ),
            vec![
                ("loadBalancer.simple", "applies"),
                ("loadBalancer.warmupDurationSecs", "applies"),
            ],
        ),
        (
            "warmup",
            "loadBalancer: {warmupDurationSecs: 30s}",
            Client::Grpc,
            json!({}),
            vec![ig("loadBalancer.warmupDurationSecs")],
        ),
        (
            "ring hash default",
            "loadBalancer: {consistentHash: {httpHeaderName: x-user}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "1024"}}),
            ),
            vec![("loadBalancer.consistentHash", "applies")],
        ),
        (
            "ring hash default",
            "loadBalancer: {consistentHash: {httpHeaderName: x-user}}",
            Client::Grpc,
            json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "1024"}}),
            vec![("loadBalancer.consistentHash", "applies")],
        ),
        (
            "ring hash size",
            "loadBalancer: {consistentHash: {httpHeaderName: x, ringHash: {minimumRingSize: 64}}}",
            Client::Grpc,
            json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "64"}}),
            vec![("loadBalancer.consistentHash", "applies")],
        ),
        (
            "ring too large for gRPC",
            "loadBalancer: {consistentHash: {httpHeaderName: x, ringHash: {minimumRingSize: 9000000}}}",
            Client::Grpc,
            json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "8388608"}}),
            vec![("loadBalancer.consistentHash", "downgraded")],
        ),
        (
            "deprecated ring size",
            "loadBalancer: {consistentHash: {useSourceIp: true, minimumRingSize: 2048}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "2048"}}),
            ),
            vec![("loadBalancer.consistentHash", "applies")],
        ),
        (
            "maglev",
            "loadBalancer: {consistentHash: {httpHeaderName: x, maglev: {tableSize: 65537}}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"lbPolicy": "MAGLEV", "maglevLbConfig": {"tableSize": "65537"}}),
            ),
            vec![("loadBalancer.consistentHash", "applies")],
        ),
        (
            "maglev → ring",
            "loadBalancer: {consistentHash: {httpHeaderName: x, maglev: {tableSize: 65537}}}",
            Client::Grpc,
            json!({"lbPolicy": "RING_HASH", "ringHashLbConfig": {"minimumRingSize": "1024"}}),
            vec![("loadBalancer.consistentHash", "downgraded")],
        ),
        (
            "distribute",
            "loadBalancer: {localityLbSetting: {distribute: [{from: r/*, to: {r/a: 80, r/b: 20}}]}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"commonLbConfig": {"localityWeightedLbConfig": {}, "healthyPanicThreshold": {}}}),
            ),
            vec![("loadBalancer.localityLbSetting", "applies")],
        ),
        (
            "distribute",
            "loadBalancer: {localityLbSetting: {distribute: [{from: r/*, to: {r/a: 80, r/b: 20}}]}}",
            Client::Grpc,
            json!({}),
            vec![("loadBalancer.localityLbSetting", "applies")],
        ),
        (
            "failover without outlier detection",
            "loadBalancer: {localityLbSetting: {failover: [{from: r1, to: r2}]}}",
            Client::Sidecar,
            envoy_defaults(),
            vec![ig("loadBalancer.localityLbSetting.failover")],
        ),
        (
            "failover",
            "loadBalancer: {localityLbSetting: {failover: [{from: r1, to: r2}]}}\noutlierDetection: {}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"outlierDetection": {"enforcingSuccessRate": 0},
             "commonLbConfig": {"localityWeightedLbConfig": {}, "healthyPanicThreshold": {}}}),
            ),
            vec![("loadBalancer.localityLbSetting", "applies")],
        ),
        (
            "locality off",
            "loadBalancer: {localityLbSetting: {enabled: false, distribute: [{from: '*', to: {r: 100}}]}}",
            Client::Sidecar,
            envoy_defaults(),
            vec![("loadBalancer.localityLbSetting", "applies")],
        ),
        (
            "outlier detection",
            "outlierDetection: {consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 30s, maxEjectionPercent: 50}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"outlierDetection": od_envoy, "commonLbConfig": {"healthyPanicThreshold": {}}}),
            ),
            vec![
                ("outlierDetection.consecutive5xxErrors", "applies"),
                ("outlierDetection.interval", "applies"),
                ("outlierDetection.baseEjectionTime", "applies"),
                ("outlierDetection.maxEjectionPercent", "applies"),
            ],
        ),
        (
            "outlier detection",
            "outlierDetection: {consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 30s, maxEjectionPercent: 50}",
            Client::Grpc,
            json!({"outlierDetection": od_envoy}),
            vec![
                ig("outlierDetection.consecutive5xxErrors"),
                ("outlierDetection.interval", "applies"),
                ("outlierDetection.baseEjectionTime", "applies"),
                ("outlierDetection.maxEjectionPercent", "applies"),
            ],
        ),
        (
            "zero errors disable enforcing",
            "outlierDetection: {consecutiveGatewayErrors: 0, minHealthPercent: 25}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"outlierDetection": {"enforcingSuccessRate": 0,
             "consecutiveGatewayFailure": 0, "enforcingConsecutiveGatewayFailure": 0},
             "commonLbConfig": {"healthyPanicThreshold": {"value": 25.0}}}),
            ),
            vec![
                ("outlierDetection.consecutiveGatewayErrors", "applies"),
                ("outlierDetection.minHealthPercent", "applies"),
            ],
        ),
        (
            "local origin",
            "outlierDetection: {splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 4}",
            Client::Grpc,
            json!({"outlierDetection": {"enforcingSuccessRate": 0, "splitExternalLocalOriginErrors": true,
             "consecutiveLocalOriginFailure": 4, "enforcingConsecutiveLocalOriginFailure": 100,
             "enforcingLocalOriginSuccessRate": 0}}),
            vec![ig("outlierDetection.splitExternalLocalOriginErrors")],
        ),
        (
            "min health on gRPC",
            "outlierDetection: {minHealthPercent: 10}",
            Client::Grpc,
            json!({"outlierDetection": {"enforcingSuccessRate": 0}}),
            vec![ig("outlierDetection.minHealthPercent")],
        ),
        (
            "breakers",
            "connectionPool: {http: {http2MaxRequests: 7, http1MaxPendingRequests: 3, maxRetries: 2}, tcp: {maxConnections: 5}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"circuitBreakers": {"thresholds": [{"maxConnections": 5,
             "maxPendingRequests": 3, "maxRequests": 7, "maxRetries": 2, "trackRemaining": true}]}}),
            ),
            vec![
                ("connectionPool.http.http2MaxRequests", "applies"),
                ("connectionPool.http.http1MaxPendingRequests", "applies"),
                ("connectionPool.http.maxRetries", "applies"),
                ("connectionPool.tcp.maxConnections", "applies"),
            ],
        ),
        (
            "breakers",
            "connectionPool: {http: {http2MaxRequests: 7, http1MaxPendingRequests: 3, maxRetries: 2}, tcp: {maxConnections: 5}}",
            Client::Grpc,
            json!({"circuitBreakers": {"thresholds": [{"maxRequests": 7}]}}),
            vec![
                ("connectionPool.http.http2MaxRequests", "applies"),
                ig("connectionPool.http.http1MaxPendingRequests"),
                ig("connectionPool.http.maxRetries"),
                ig("connectionPool.tcp.maxConnections"),
            ],
        ),
        (
            "zero keeps the default",
            "connectionPool: {http: {http2MaxRequests: 0}}",
            Client::Sidecar,
            envoy_defaults(),
            vec![],
        ),
        (
            "no max requests on gRPC",
            "connectionPool: {tcp: {maxConnections: 5}}",
            Client::Grpc,
            json!({}),
            vec![ig("connectionPool.tcp.maxConnections")],
        ),
        (
            "http options",
            "connectionPool: {http: {idleTimeout: 60s, maxRequestsPerConnection: 1}, tcp: {maxConnectionDuration: 1h}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"typedExtensionProtocolOptions": {
             "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                 "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                 "commonHttpProtocolOptions": {"idleTimeout": "60s", "maxConnectionDuration": "3600s",
                     "maxRequestsPerConnection": 1},
                 "explicitHttpConfig": {"httpProtocolOptions": {}}}}}),
            ),
            vec![
                ("connectionPool.http.idleTimeout", "applies"),
                ("connectionPool.http.maxRequestsPerConnection", "applies"),
                ("connectionPool.tcp.maxConnectionDuration", "applies"),
            ],
        ),
        (
            "client protocol",
            "connectionPool: {http: {useClientProtocol: true}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"typedExtensionProtocolOptions": {
             "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                 "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                 "useDownstreamProtocolConfig": {"httpProtocolOptions": {}, "http2ProtocolOptions": {}}}}}),
            ),
            vec![("connectionPool.http.useClientProtocol", "applies")],
        ),
        (
            "http options",
            "connectionPool: {http: {idleTimeout: 60s}}",
            Client::Grpc,
            json!({}),
            vec![ig("connectionPool.http.idleTimeout")],
        ),
        (
            "h2 upgrade",
            "connectionPool: {http: {h2UpgradePolicy: UPGRADE, maxConcurrentStreams: 50}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"typedExtensionProtocolOptions": {
             "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                 "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                 "commonHttpProtocolOptions": {},
                 "explicitHttpConfig": {"http2ProtocolOptions": {"maxConcurrentStreams": 50}}}}}),
            ),
            vec![
                ("connectionPool.http.h2UpgradePolicy", "applies"),
                ("connectionPool.http.maxConcurrentStreams", "applies"),
            ],
        ),
        (
            "streams on HTTP/1.1",
            "connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE, maxConcurrentStreams: 50}}",
            Client::Sidecar,
            merged(
                envoy_defaults(),
                json!({"typedExtensionProtocolOptions": {
             "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                 "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                 "commonHttpProtocolOptions": {},
                 "explicitHttpConfig": {"httpProtocolOptions": {}}}}}),
            ),
            vec![
                ("connectionPool.http.h2UpgradePolicy", "applies"),
                ig("connectionPool.http.maxConcurrentStreams"),
            ],
        ),
        (
            "h2 upgrade",
            "connectionPool: {http: {h2UpgradePolicy: UPGRADE}}",
            Client::Grpc,
            json!({}),
            vec![ig("connectionPool.http.h2UpgradePolicy")],
        ),
        (
            "not implemented",
            "connectionPool: {tcp: {tcpKeepalive: {time: 10s}}}",
            Client::Sidecar,
            envoy_defaults(),
            vec![ig("connectionPool.tcp.tcpKeepalive")],
        ),
        (
            "tls disable",
            "tls: {mode: DISABLE}",
            Client::Grpc,
            json!({}),
            vec![("tls.mode", "applies")],
        ),
        (
            "simple on gRPC",
            "tls: {mode: SIMPLE}",
            Client::Grpc,
            json!({}),
            vec![ig("tls.mode")],
        ),
        (
            "mutual without certificates",
            "tls: {mode: MUTUAL}",
            Client::Sidecar,
            envoy_defaults(),
            vec![ig("tls.mode")],
        ),
        (
            "credential without selector",
            "tls: {mode: SIMPLE, credentialName: c}",
            Client::Sidecar,
            envoy_defaults(),
            vec![ig("tls.mode")],
        ),
    ];
    for (what, yaml, client, want, want_notes) in cases {
        let (got, notes, _) = build(yaml, client);
        assert_eq!(got, want, "{what} ({client:?}): cluster");
        assert_eq!(summary(&notes), want_notes, "{what} ({client:?}): notes");
    }
}

#[test]
fn connect_timeout_from_the_rule_else_the_mesh() {
    let (_, notes, t) = build("connectionPool: {tcp: {connectTimeout: 250ms}}", Client::Sidecar);
    assert_eq!(t, json!("0.250s"));
    assert_eq!(notes, vec![a("connectionPool.tcp.connectTimeout")]);
    let (_, notes, t) = build("connectionPool: {tcp: {connectTimeout: 2s}}", Client::Grpc);
    assert_eq!(t, json!("2.000s"));
    assert_eq!(summary(&notes), vec![ig("connectionPool.tcp.connectTimeout")]);
}

#[path = "cluster_policy_tls_tests.rs"]
mod tls;

#[test]
fn meshconfig_locality_applies_without_a_rule_setting() {
    let mut mesh = MeshConfig::default();
    mesh.locality_lb_setting.distribute = vec![crate::config::mesh::LocalityDistribute {
        from: "r1/*".into(),
        to: [("r2/*".to_owned(), 100)].into(),
    }];
    let weighted = |yaml: &str, client| {
        let p = policy(yaml);
        let mut c = envoy_types::pb::envoy::config::cluster::v3::Cluster::default();
        eds_cluster(&mut c, "outbound|80||r.d.svc.cluster.local", client);
        let notes = apply(&mut c, &p, client, Protocol::Http, &mesh, &UpstreamTls::None);
        let locality = c
            .common_lb_config
            .and_then(|l| l.locality_config_specifier)
            .is_some();
        (locality, summary(&notes))
    };
    // The mesh's distribute, as istiod's GetLocalityLbSetting falls back to it; no note: no rule field.
    assert_eq!(weighted("{}", Client::Sidecar), (true, vec![]));
    assert_eq!(weighted("{}", Client::Grpc), (false, vec![]));
    // A rule's setting replaces the mesh's whole: here it turns locality load balancing off.
    assert_eq!(
        weighted(
            "loadBalancer: {localityLbSetting: {enabled: false}}",
            Client::Sidecar
        ),
        (false, vec![("loadBalancer.localityLbSetting", "applies")])
    );
}

/// `explicitHttpConfig` with HTTP/2 options, as istiod's `setH2Options` writes it.
fn h2_options(common: Option<Value>) -> Value {
    let mut opts = json!({
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicitHttpConfig": {"http2ProtocolOptions": {}}});
    if let Some(c) = common {
        opts["commonHttpProtocolOptions"] = c;
    }
    json!({"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": opts})
}

#[test]
fn http2_and_grpc_ports_speak_http2_upstream_as_istiod() {
    for protocol in [Protocol::Grpc, Protocol::Http2, Protocol::GrpcWeb] {
        for client in [Client::Sidecar, Client::Router] {
            // No rule: HTTP/2 options alone; auto-mTLS offers `h2` too.
            let (c, notes, _) = build_on("{}", client, protocol);
            assert_eq!(
                c["typedExtensionProtocolOptions"],
                h2_options(None),
                "{protocol:?} {client:?}"
            );
            assert!(notes.is_empty());
            // `connectionPool.http` with common options keeps HTTP/2 (meshd once sent HTTP/1.1 here).
            let (c, _, _) = build_on("connectionPool: {http: {idleTimeout: 60s}}", client, protocol);
            assert_eq!(
                c["typedExtensionProtocolOptions"],
                h2_options(Some(json!({"idleTimeout": "60s"}))),
                "{protocol:?} {client:?}"
            );
            // DO_NOT_UPGRADE does not downgrade an HTTP/2 port.
            let (c, notes, _) = build_on(
                "connectionPool: {http: {h2UpgradePolicy: DO_NOT_UPGRADE}}",
                client,
                protocol,
            );
            assert_eq!(c["typedExtensionProtocolOptions"], h2_options(None));
            assert_eq!(summary(&notes), vec![ig("connectionPool.http.h2UpgradePolicy")]);
            // useClientProtocol wins.
            let (c, _, _) = build_on(
                "connectionPool: {http: {useClientProtocol: true}}",
                client,
                protocol,
            );
            let opts =
                &c["typedExtensionProtocolOptions"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
            assert_eq!(
                opts["useDownstreamProtocolConfig"],
                json!({"httpProtocolOptions": {}, "http2ProtocolOptions": {}})
            );
        }
        // gRPC clients speak HTTP/2 anyway and read no Envoy protocol options.
        let (c, _, _) = build_on("{}", Client::Grpc, protocol);
        assert_eq!(c, json!({}));
    }
    // HTTP/1.1 ports: nothing unless asked; TCP ports upgrade only on the rule's UPGRADE (as istiod).
    let (c, _, _) = build_on("{}", Client::Sidecar, Protocol::Http);
    assert!(c.get("typedExtensionProtocolOptions").is_none());
    let (c, _, _) = build_on(
        "connectionPool: {http: {h2UpgradePolicy: UPGRADE}}",
        Client::Sidecar,
        Protocol::Tcp,
    );
    assert_eq!(c["typedExtensionProtocolOptions"], h2_options(None));
    // A sidecar's port of no declared protocol uses the client's (istiod sniffs it); a gateway's does not.
    let (c, _, _) = build_on("{}", Client::Sidecar, Protocol::Unknown);
    let opts = &c["typedExtensionProtocolOptions"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    assert_eq!(
        opts["useDownstreamProtocolConfig"],
        json!({"httpProtocolOptions": {}, "http2ProtocolOptions": {}})
    );
    let (c, _, _) = build_on("{}", Client::Router, Protocol::Unknown);
    assert!(c.get("typedExtensionProtocolOptions").is_none());
}

#[test]
fn http2_clusters_offer_the_h2_alpn() {
    let alpn =
        |c: &Value, socket: &str| c[socket]["typedConfig"]["commonTlsContext"]["alpnProtocols"].clone();
    let (c, _, _) = build_on("tls: {mode: ISTIO_MUTUAL}", Client::Sidecar, Protocol::Grpc);
    assert_eq!(
        alpn(&c, "transportSocket"),
        json!(["istio-peer-exchange", "istio", "h2"])
    );
    let (c, _, _) = build_on("tls: {mode: ISTIO_MUTUAL}", Client::Sidecar, Protocol::Http);
    assert_eq!(
        alpn(&c, "transportSocket"),
        json!(["istio-peer-exchange", "istio"])
    );
    let (c, _, _) = build_on("tls: {mode: SIMPLE}", Client::Sidecar, Protocol::Grpc);
    assert_eq!(alpn(&c, "transportSocket"), json!(["h2"]));
    let (c, _, _) = build_on("tls: {mode: SIMPLE}", Client::Sidecar, Protocol::Http);
    assert!(alpn(&c, "transportSocket").is_null());
}
