//! Service conversion, table-driven from Kubernetes JSON.

use serde_json::json;

use super::*;

fn ctx() -> Context {
    Context {
        cluster: "c2".into(),
        domain_suffix: "cluster.local".into(),
        trust_domain: "td".into(),
    }
}

fn svc(spec: serde_json::Value, extra: serde_json::Value) -> k8s::Service {
    let mut v = json!({
        "metadata": {"name": "reviews", "namespace": "bookinfo", "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": spec,
    });
    if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in extra {
            obj.insert(k.clone(), val.clone());
        }
    }
    serde_json::from_value(v).expect("valid Service")
}

#[test]
fn services_convert_like_istiod() {
    // (case, spec, extra top-level fields, expected JSON subset of the converted service)
    let cases = [
        (
            "ClusterIP, ports by appProtocol and name prefix",
            json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::a"], "ports": [
                {"name": "http-web", "port": 9080, "targetPort": 8080},
                {"name": "grpc", "port": 9090, "appProtocol": "kubernetes.io/h2c", "targetPort": "grpc-port"},
                {"name": "metrics", "port": 15020},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ]}),
            json!({}),
            json!({
                "hostname": "reviews.bookinfo.svc.cluster.local",
                "clusterVIPs": {"c2": ["10.96.0.10", "fd00::a"]},
                "ports": [
                    {"name": "http-web", "port": 9080, "protocol": "HTTP", "targetPort": 8080},
                    {"name": "grpc", "port": 9090, "protocol": "HTTP2", "targetPort": "grpc-port"},
                    {"name": "metrics", "port": 15020, "protocol": "UnsupportedProtocol", "targetPort": null},
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": null},
                ],
                "resolution": "ClientSideLb",
                "creationTime": "2024-05-01T10:00:00Z",
            }),
        ),
        (
            "headless",
            json!({"clusterIP": "None", "ports": [{"name": "tcp-db", "port": 5432}]}),
            json!({}),
            json!({"clusterVIPs": {}, "resolution": "Passthrough", "ports": [{"name": "tcp-db", "port": 5432, "protocol": "TCP", "targetPort": null}]}),
        ),
        (
            "ExternalName",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
            json!({}),
            json!({"resolution": {"Alias": "db.example.com"}}),
        ),
        (
            "LoadBalancer ingress (ip, else hostname) and externalIPs",
            json!({"type": "LoadBalancer", "clusterIP": "10.96.0.11", "externalIPs": ["198.51.100.7"],
                   "ports": [{"name": "tls", "port": 15443, "nodePort": 31443}]}),
            json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}, {"hostname": "lb.example.com"}]}}}),
            json!({"externalAddresses": {"c2": ["203.0.113.5", "lb.example.com", "198.51.100.7"]}, "nodePorts": {}}),
        ),
        (
            "NodePort only with the gateway node selector annotation",
            json!({"type": "NodePort", "clusterIP": "10.96.0.12", "ports": [{"name": "tls", "port": 15443, "nodePort": 31443}]}),
            json!({"metadata": {"name": "reviews", "namespace": "bookinfo", "annotations": {"traffic.istio.io/nodeSelector": "{}"}}}),
            json!({"nodePorts": {"c2": {"15443": 31443}}}),
        ),
        (
            "service accounts from annotations",
            json!({"clusterIP": "10.96.0.13"}),
            json!({"metadata": {"name": "reviews", "namespace": "bookinfo", "annotations": {
                "alpha.istio.io/kubernetes-serviceaccounts": "reviews, ratings",
                "alpha.istio.io/canonical-serviceaccounts": "spiffe://other/ns/x/sa/y"}}}),
            json!({"serviceAccounts": ["spiffe://other/ns/x/sa/y", "spiffe://td/ns/bookinfo/sa/ratings", "spiffe://td/ns/bookinfo/sa/reviews"]}),
        ),
    ];
    for (name, spec, extra, want) in cases {
        let got = serde_json::to_value(convert(&svc(spec, extra), &ctx()).expect(name)).unwrap();
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(&got[field], value, "{name}: field {field}");
        }
    }
}

#[test]
fn protocol_rules() {
    let cases = [
        (None, "http", None, Protocol::Http),
        (None, "HTTP2-x", None, Protocol::Http2),
        (None, "grpc-web", None, Protocol::GrpcWeb),
        (None, "grpc-api", None, Protocol::Grpc),
        (None, "https", None, Protocol::Https),
        (None, "tcp-db", None, Protocol::Tcp),
        (None, "mongo", None, Protocol::Mongo),
        (None, "web", None, Protocol::Unknown),
        (Some("http"), "tcp", None, Protocol::Http),
        (Some("kubernetes.io/wss"), "", None, Protocol::Https),
        (Some("custom"), "redis", None, Protocol::Redis),
        (None, "http", Some("UDP"), Protocol::Udp),
    ];
    for (app, name, k8s_proto, want) in cases {
        assert_eq!(protocol(app, name, k8s_proto), want, "{app:?} {name}");
    }
}

#[test]
fn nameless_service_is_skipped() {
    let s: k8s::Service = serde_json::from_value(json!({"metadata": {"namespace": "x"}})).unwrap();
    assert!(convert(&s, &ctx()).is_none());
}
