//! DestinationRule subsets over the real ADS server (`meshd::xds::harness`): a sidecar lists the
//! subset clusters of the rule it gets, and an endpoint-only change of the service pushes the EDS of
//! every subset cluster it watches, not only the default one.

use std::{net::IpAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::config::{cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment};
use meshd::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, service},
    },
    istio::{self, Kind, ObjectMeta, Source},
    model::Protocol,
    xds::{
        PushScope, XdsType,
        harness::{Harness, sidecar},
    },
};
use prost::Message;

const HOST: &str = "echo.default.svc.cluster.local";
const V1: &str = "outbound|7070|v1|echo.default.svc.cluster.local";

fn rule() -> Arc<istio::Config> {
    let meta = ObjectMeta {
        namespace: "default".into(),
        name: "echo".into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        source: Source::Cluster("c1".into()),
    };
    let spec = serde_json::json!({"host": "echo", "subsets": [{"name": "v1", "labels": {"version": "v1"}}]});
    Arc::new(istio::parse(Kind::DestinationRule, meta, &spec).expect("valid").0)
}

/// echo with `n` endpoints labelled `version: v1`.
fn mesh(n: u8) -> StaticMesh {
    let eps = (1..=n)
        .map(|i| {
            let mut ep = endpoint(IpAddr::from([10, 0, 0, i]), &[("grpc", 7070)], "c1");
            ep.info_mut().labels = Arc::new([("version".to_owned(), "v1".to_owned())].into());
            ep
        })
        .collect();
    StaticMesh::default()
        .with(service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]), eps)
        .with_config([rule()])
}

#[tokio::test]
async fn subset_clusters_are_listed_and_their_endpoints_pushed() {
    let h = Harness::start(mesh(1)).await.expect("harness");
    let mut c = h.sotw(sidecar("client", "default")).await.expect("connect");
    c.request(XdsType::Cluster, &[]).expect("send");
    let cds = c.recv().await.expect("CDS");
    let mut names: Vec<String> = cds
        .resources
        .iter()
        .map(|a| Cluster::decode(&a.value[..]).expect("Cluster").name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "BlackHoleCluster".to_owned(),
            "InboundPassthroughCluster".to_owned(),
            "PassthroughCluster".to_owned(),
            // The client's address is one of echo's endpoints: it serves 7070 (its inbound side).
            "inbound|7070||".to_owned(),
            V1.to_owned(),
            format!("outbound|7070||{HOST}")
        ]
    );
    c.ack(&cds).expect("ack");
    c.request(XdsType::Endpoint, &[V1]).expect("send");
    let first = c.recv().await.expect("EDS");
    c.ack_with(&first, &[V1]).expect("ack");

    h.publish(mesh(2), PushScope::Endpoints([HOST.into()].into()));
    let pushed = c.recv_within(Duration::from_secs(5)).await.expect("recv");
    let pushed = pushed.expect("an endpoint change pushes the subset cluster's EDS");
    assert_eq!(pushed.type_url, XdsType::Endpoint.url());
    let cla = ClusterLoadAssignment::decode(&pushed.resources[0].value[..]).expect("CLA");
    assert_eq!(cla.cluster_name, V1);
}
