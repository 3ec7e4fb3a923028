//! ServiceEntries selecting pods, table-driven: Kubernetes Pods (JSON, as the API server gives them)
//! through the Kubernetes registry's compact form and workload list, then the registry view.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{
    build,
    tests::{ctx, lines, se, we},
};
use crate::{
    model::Locality,
    registry::{
        endpoints::{self, ObjectName, PodEntry, Sources},
        network::NetworkResolver,
        objects, service,
    },
};

/// A pod of `namespace/name` with `labels`; `ready` and `ip` set its status.
fn pod(name: &str, labels: Value, ready: bool, ip: Option<&str>) -> Value {
    let (namespace, name) = name.split_once('/').unwrap();
    json!({
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"serviceAccountName": "hello", "nodeName": "node-1", "containers": [
            {"name": "app", "ports": [{"name": "web", "containerPort": 5001}, {"containerPort": 9090}]}]},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    })
}

/// The pods as the config cluster's Kubernetes registry publishes them.
fn workloads(pods: &[Value]) -> std::sync::Arc<[endpoints::PodWorkload]> {
    let ctx = service::Context {
        cluster: "cluster1".into(),
        domain_suffix: "cluster.local".into(),
        trust_domain: "cluster.local".into(),
    };
    let pods: HashMap<ObjectName, PodEntry> = pods
        .iter()
        .map(|p| {
            let p: objects::Pod = serde_json::from_value(p.clone()).unwrap();
            let name = ObjectName {
                namespace: p.metadata.namespace.as_deref().unwrap().into(),
                name: p.metadata.name.as_deref().unwrap().into(),
            };
            let entry = PodEntry {
                pod: endpoints::pod(&p, &ctx).map(Box::new),
                services: Default::default(),
            };
            (name, entry)
        })
        .collect();
    let nodes = HashMap::from([(
        "node-1".into(),
        Locality {
            region: "r1".into(),
            zone: "z1".into(),
            subzone: "".into(),
        },
    )]);
    let sources = Sources {
        ctx: &ctx,
        pods: &pods,
        nodes: &nodes,
        networks: &NetworkResolver::default(),
        system_network: Some(&"net1".into()),
        placements: &Default::default(),
    };
    sources.workloads()
}

#[test]
fn service_entries_select_ready_pods_of_their_namespace() {
    let app = json!({"app": "hello"});
    let tls = json!({"app": "hello", "security.istio.io/tlsMode": "istio"});
    let entry = se(
        "sample/hello",
        "2024-01-01T00:00:00Z",
        json!({"hosts": ["hello.example.com"], "resolution": "STATIC", "workloadSelector": {"labels": {"app": "hello"}},
        "ports": [{"number": 80, "name": "web"}, {"number": 8080, "name": "metrics", "targetPort": 9090},
            {"number": 7070, "name": "grpc"}]}),
    );
    let svc = r#"svc hello.example.com ns=sample ClientSideLb ext=true vips=[] export=Default ports=[web:80:Unknown:None,metrics:8080:Unknown:Some(Number(9090)),grpc:7070:Unknown:None] from=ServiceEntry { namespace: "sample", names: ["hello"] }"#;
    let ep = |ip: &str, tls: &str, name: &str| {
        format!(
            "ep hello.example.com {ip} [web=5001,metrics=9090,grpc=7070] net=net1 w=1 tls={tls} Pod {name}"
        )
    };
    let cases: Vec<(&str, Vec<Value>, Vec<String>)> = vec![
        (
            "a ready pod with the labels is selected (named container port, then targetPort, then number)",
            vec![pod("sample/hello-1", tls.clone(), true, Some("10.0.0.1"))],
            vec![svc.into(), ep("10.0.0.1", "Istio", "hello-1")],
        ),
        (
            "a pod without the labels is not",
            vec![pod("sample/other", json!({"app": "other"}), true, Some("10.0.0.2"))],
            vec![svc.into()],
        ),
        (
            "a pod of another namespace is not",
            vec![
                pod("other/hello-2", app.clone(), true, Some("10.0.0.3")),
                pod("zz/hello-3", app.clone(), true, Some("10.0.0.4")),
            ],
            vec![svc.into()],
        ),
        (
            "a pod that is not ready is not",
            vec![pod("sample/hello-4", app.clone(), false, Some("10.0.0.5"))],
            vec![svc.into()],
        ),
        (
            "a pod without an IP yet is not",
            vec![pod("sample/hello-5", app.clone(), true, None)],
            vec![svc.into()],
        ),
        (
            "pods beside a WorkloadEntry, sorted by address",
            vec![
                pod("sample/hello-7", app.clone(), true, Some("10.0.0.7")),
                pod("sample/hello-6", app.clone(), true, Some("10.0.0.6")),
            ],
            vec![
                svc.into(),
                ep("10.0.0.6", "Disabled", "hello-6"),
                ep("10.0.0.7", "Disabled", "hello-7"),
                "ep hello.example.com 10.9.0.1 [web=80,metrics=9090,grpc=7070] net=- w=1 tls=Disabled WorkloadEntry vm"
                    .into(),
            ],
        ),
    ];
    for (name, pods, want) in cases {
        let vm = we(
            "sample/vm",
            json!({"app": "hello"}),
            json!({"address": "10.9.0.1"}),
        );
        let mut configs = vec![entry.clone()];
        if name.contains("WorkloadEntry") {
            configs.push(vm);
        }
        let got = lines(&build(&configs, &[], &workloads(&pods), &ctx()));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn a_pod_endpoint_carries_the_fields_of_a_service_endpoint() {
    let entry = se(
        "sample/hello",
        "2024-01-01T00:00:00Z",
        json!({"hosts": ["hello.example.com"], "resolution": "STATIC", "workloadSelector": {"labels": {"app": "hello"}},
        "ports": [{"number": 80, "name": "web"}]}),
    );
    let pods = [pod(
        "sample/hello-1",
        json!({"app": "hello"}),
        true,
        Some("10.0.0.1"),
    )];
    let built = build(&[entry], &[], &workloads(&pods), &ctx());
    let e = &built.endpoints[0].1[0];
    assert_eq!(e.cluster().as_str(), "cluster1");
    assert_eq!(e.locality().to_string(), "r1/z1/");
    assert_eq!(
        e.service_account().as_deref(),
        Some("spiffe://cluster.local/ns/sample/sa/hello")
    );
    assert_eq!(e.health, crate::model::Health::Healthy);
    assert_eq!(e.label("app"), Some("hello"));
}
