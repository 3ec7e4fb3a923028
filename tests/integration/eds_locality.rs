//! Locality failover and subsets over meshd's real ADS server (`meshd::xds::harness`): raw EDS as a
//! sidecar and a proxyless gRPC client in different localities receive it, decoded from the wire.

use std::{net::IpAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::config::{
    core::v3::{Locality as PbLocality, Node, address},
    endpoint::v3::{ClusterLoadAssignment, lb_endpoint::HostIdentifier},
};
use meshd::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, service},
    },
    istio::{self, Kind, ObjectMeta, Source},
    model::{Locality, Protocol, TlsMode},
    xds::{
        XdsType,
        harness::{self, Harness},
    },
};
use prost::Message;

const ECHO: &str = "outbound|7070||echo.default.svc.cluster.local";
const ECHO_V2: &str = "outbound|7070|v2|echo.default.svc.cluster.local";

fn config(kind: Kind, name: &str, spec: &str) -> Arc<istio::Config> {
    let meta = ObjectMeta {
        namespace: "default".into(),
        name: name.into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        source: Source::Cluster("c1".into()),
    };
    let spec: serde_json::Value = serde_yaml::from_str(spec).expect("yaml");
    Arc::new(istio::parse(kind, meta, &spec).expect("valid").0)
}

/// Endpoints in us-east1-a (v1), us-east1-b (v2) and us-west1-a (v2); failover us-east1 → us-west1.
fn mesh() -> StaticMesh {
    let ep = |ip: &str, region: &str, zone: &str, version: &str| {
        let mut e = endpoint(ip.parse::<IpAddr>().unwrap(), &[("grpc", 7070)], "c1");
        e.placement_mut().locality = Locality {
            region: region.into(),
            zone: zone.into(),
            subzone: "".into(),
        };
        e.tls_mode = TlsMode::Istio;
        e.info_mut().labels = Arc::new([("version".to_owned(), version.to_owned())].into());
        e
    };
    StaticMesh::new(1)
        .with(
            service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
            vec![
                ep("10.0.0.1", "us-east1", "us-east1-a", "v1"),
                ep("10.0.0.2", "us-east1", "us-east1-b", "v2"),
                ep("10.0.0.3", "us-west1", "us-west1-a", "v2"),
            ],
        )
        .with_config([config(
            Kind::DestinationRule,
            "echo",
            "host: echo\ntrafficPolicy:\n  outlierDetection: {consecutive5xxErrors: 3}\n  \
             loadBalancer: {localityLbSetting: {failover: [{from: us-east1, to: us-west1}]}}\n\
             subsets:\n- {name: v2, labels: {version: v2}}\n",
        )])
}

fn at(mut node: Node, region: &str, zone: &str) -> Node {
    node.locality = Some(PbLocality {
        region: region.into(),
        zone: zone.into(),
        sub_zone: String::new(),
    });
    node
}

/// `(priority, zone, addresses)` of one locality group.
type Group = (u32, String, Vec<String>);

/// Each locality group, in wire order.
fn priorities(cla: &ClusterLoadAssignment) -> Vec<Group> {
    cla.endpoints
        .iter()
        .map(|l| {
            let addrs = l
                .lb_endpoints
                .iter()
                .filter_map(|e| match &e.host_identifier {
                    Some(HostIdentifier::Endpoint(ep)) => match &ep.address.as_ref()?.address {
                        Some(address::Address::SocketAddress(s)) => Some(s.address.clone()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            (l.priority, l.locality.clone().unwrap_or_default().zone, addrs)
        })
        .collect()
}

async fn eds(h: &Harness, node: Node) -> Vec<(String, Vec<Group>)> {
    let mut c = h.sotw(node).await.expect("connect");
    c.request(XdsType::Endpoint, &[ECHO, ECHO_V2]).expect("request");
    let resp = tokio::time::timeout(Duration::from_secs(5), c.recv())
        .await
        .expect("in time")
        .expect("response");
    let mut out: Vec<(String, Vec<Group>)> = resp
        .resources
        .iter()
        .map(|any| {
            let cla = ClusterLoadAssignment::decode(&*any.value).expect("decodes");
            (cla.cluster_name.clone(), priorities(&cla))
        })
        .collect();
    out.sort();
    out
}

fn group(p: u32, zone: &str, addrs: &[&str]) -> Group {
    (p, zone.into(), addrs.iter().map(|a| (*a).to_owned()).collect())
}

#[tokio::test]
async fn priorities_follow_each_clients_locality_and_the_failover_pair() {
    let h = Harness::start(mesh()).await.expect("harness");
    // A sidecar in us-east1-a: its zone 0, its region 1, the failover region 2.
    let east = eds(&h, at(harness::sidecar("a", "default"), "us-east1", "us-east1-a")).await;
    assert_eq!(
        east,
        [
            // The subset has nothing in the client's zone: priorities start at 0 without a gap.
            (
                ECHO_V2.to_owned(),
                vec![
                    group(0, "us-east1-b", &["10.0.0.2"]),
                    group(1, "us-west1-a", &["10.0.0.3"]),
                ]
            ),
            (
                ECHO.to_owned(),
                vec![
                    group(0, "us-east1-a", &["10.0.0.1"]),
                    group(1, "us-east1-b", &["10.0.0.2"]),
                    group(2, "us-west1-a", &["10.0.0.3"]),
                ]
            ),
        ]
    );
    // A gRPC client in us-west1-a: no failover pair for its region, every other region is 1.
    let west = eds(&h, at(harness::grpc("b", "default"), "us-west1", "us-west1-a")).await;
    assert_eq!(
        west,
        [
            (
                ECHO_V2.to_owned(),
                vec![
                    group(1, "us-east1-b", &["10.0.0.2"]),
                    group(0, "us-west1-a", &["10.0.0.3"]),
                ]
            ),
            (
                ECHO.to_owned(),
                vec![
                    group(1, "us-east1-a", &["10.0.0.1"]),
                    group(1, "us-east1-b", &["10.0.0.2"]),
                    group(0, "us-west1-a", &["10.0.0.3"]),
                ]
            ),
        ]
    );
}
