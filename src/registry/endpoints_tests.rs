//! Endpoint building, table-driven: each case is Kubernetes JSON in, one summary line per endpoint out.

use serde_json::json;

use super::*;
use crate::config::MeshNetworks;

fn ctx() -> Context {
    Context {
        cluster: "c2".into(),
        domain_suffix: "cluster.local".into(),
        trust_domain: "td".into(),
    }
}

fn k8s_slice(endpoints: serde_json::Value) -> discovery::EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": "reviews-abc", "namespace": "ns", "labels": {"kubernetes.io/service-name": "reviews"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 9080}],
        "endpoints": endpoints,
    }))
    .unwrap()
}

fn k8s_pod(name: &str, labels: serde_json::Value, node: &str) -> (ObjectName, PodEntry) {
    let p: core::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"serviceAccountName": "reviews", "nodeName": node, "containers": []},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    let key = ObjectName {
        namespace: "ns".into(),
        name: name.into(),
    };
    let entry = PodEntry {
        pod: pod(&p, &ctx()),
        services: Default::default(),
    };
    (key, entry)
}

fn summary(e: &Endpoint) -> String {
    format!(
        "{} http:{} net={} loc={} sa={} tls={:?} {:?} pod={} app={}",
        e.address,
        e.port("http").unwrap_or(0),
        e.label(crate::model::LABEL_NETWORK).unwrap_or("-"),
        e.locality,
        e.service_account.as_deref().unwrap_or("-"),
        e.tls_mode,
        e.health,
        e.workload.as_deref().unwrap_or("-"),
        e.label("app").unwrap_or("-"),
    )
}

#[test]
fn endpoints_are_built_like_istiod() {
    let pods: HashMap<ObjectName, PodEntry> = [
        k8s_pod(
            "p1",
            json!({"app": "reviews", "security.istio.io/tlsMode": "istio", "topology.istio.io/network": "pod-net",
                   "topology.istio.io/locality": "eu.eu-1a.rack7"}),
            "n1",
        ),
        k8s_pod("p2", json!({"app": "reviews"}), "n1"),
    ]
    .into();
    let nodes: HashMap<Arc<str>, Locality> = [(
        Arc::from("n1"),
        node_locality(
            &[
                ("topology.kubernetes.io/region".to_owned(), "us".to_owned()),
                (
                    "failure-domain.beta.kubernetes.io/zone".to_owned(),
                    "us-1b".to_owned(),
                ),
            ]
            .into(),
        ),
    )]
    .into();
    let nets =
        MeshNetworks::parse("networks:\n  cidr-net: {endpoints: [{fromCidr: 10.9.0.0/16}]}\n").unwrap();
    let resolver = NetworkResolver::new(&nets, &"c2".into());
    let system_net = NetworkId::from("ns-net");

    let cases = [
        (
            "pod labels set tls mode, network and locality",
            json!([{"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "p1"}}]),
            None,
            vec![
                "10.0.0.1 http:9080 net=pod-net loc=eu/eu-1a/rack7 sa=spiffe://td/ns/ns/sa/reviews tls=Istio Healthy pod=p1 app=reviews",
            ],
            vec![],
        ),
        (
            "node locality (legacy zone label), system namespace network",
            json!([{"addresses": ["10.0.0.2"], "targetRef": {"kind": "Pod", "name": "p2"}}]),
            Some(&system_net),
            vec![
                "10.0.0.2 http:9080 net=ns-net loc=us/us-1b/ sa=spiffe://td/ns/ns/sa/reviews tls=Disabled Healthy pod=p2 app=reviews",
            ],
            vec![],
        ),
        (
            "meshNetworks fromCidr; serving+terminating drains, not ready is unhealthy",
            json!([
                {"addresses": ["10.9.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}, "targetRef": {"kind": "Pod", "name": "p2"}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false}, "nodeName": "n1"},
            ]),
            None,
            vec![
                "10.9.0.2 http:9080 net=cidr-net loc=us/us-1b/ sa=spiffe://td/ns/ns/sa/reviews tls=Disabled Draining pod=p2 app=reviews",
                "10.0.0.3 http:9080 net=- loc=us/us-1b/ sa=- tls=Disabled Unhealthy pod=- app=-",
            ],
            vec![],
        ),
        (
            "pod not arrived yet: skipped and named",
            json!([{"addresses": ["10.0.0.4"], "targetRef": {"kind": "Pod", "name": "p9"}}]),
            None,
            vec![],
            vec!["p9"],
        ),
    ];
    for (name, eps, system_network, want, want_missing) in cases {
        let sources = Sources {
            ctx: &ctx(),
            pods: &pods,
            nodes: &nodes,
            networks: &resolver,
            system_network,
        };
        let s = slice(&k8s_slice(eps)).expect(name);
        let (mut out, mut missing) = (Vec::new(), Vec::new());
        sources.build(&"ns".into(), &s, &mut out, &mut missing);
        assert_eq!(out.iter().map(summary).collect::<Vec<_>>(), want, "{name}");
        assert_eq!(
            missing.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            want_missing,
            "{name}"
        );
        for e in &out {
            assert_eq!(
                e.label(crate::model::LABEL_CLUSTER),
                Some("c2"),
                "{name}: cluster label"
            );
        }
    }
}

#[test]
fn slices_meshd_does_not_serve_are_skipped() {
    let mut mcs = k8s_slice(json!([]));
    mcs.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("multicluster.kubernetes.io/service-name".into(), "x".into());
    let mut fqdn = k8s_slice(json!([]));
    fqdn.address_type = "FQDN".into();
    let mut orphan = k8s_slice(json!([]));
    orphan.metadata.labels = None;
    for s in [mcs, fqdn, orphan] {
        assert!(slice(&s).is_none());
    }
}

#[test]
fn failed_pods_are_dropped() {
    let p: core::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"}, "status": {"phase": "Failed"}}))
    .unwrap();
    assert!(pod(&p, &ctx()).is_none());
}
