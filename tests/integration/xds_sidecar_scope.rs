//! Sidecar scoping over the real ADS server (`meshd::xds::harness`): a sidecar whose namespace's Sidecar
//! imports two hosts gets exactly their clusters and endpoints, a change outside its scope sends it
//! nothing, and a Sidecar change re-scopes it.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc, time::Duration};

use envoy_types::pb::envoy::{
    config::{cluster::v3::Cluster, endpoint::v3::ClusterLoadAssignment},
    service::discovery::v3::DiscoveryResponse,
};
use meshd::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, service},
    },
    istio::{self, Kind, ObjectMeta, ObjectRef, Source},
    model::Protocol,
    xds::{
        PushScope, XdsType,
        harness::{self, Harness},
        push::Changes,
    },
};
use prost::Message;

const QUIET: Duration = Duration::from_millis(300);
const ECHO: &str = "outbound|7070||echo.default.svc.cluster.local";
const OTHER: &str = "outbound|80||other.default.svc.cluster.local";
const THIRD: &str = "outbound|9090||third.default.svc.cluster.local";
/// The catch-alls every sidecar gets (this one, in namespace `app`, serves no Service).
const BLACKHOLE: &str = "BlackHoleCluster";
const PASSTHROUGH: &str = "PassthroughCluster";
const INBOUND_PASSTHROUGH: &str = "InboundPassthroughCluster";

fn sidecar(hosts: &[&str]) -> Arc<istio::Config> {
    let meta = ObjectMeta {
        namespace: "app".into(),
        name: "default".into(),
        labels: Default::default(),
        annotations: Default::default(),
        revision: hosts.len().to_string(),
        creation_timestamp: None,
        source: Source::File {
            path: "sidecar.yaml".into(),
            index: 0,
        },
    };
    let spec = serde_json::json!({"egress": [{"hosts": hosts}]});
    Arc::new(istio::parse(Kind::Sidecar, meta, &spec).expect("valid").0)
}

/// echo, other and third in `default`, `third_endpoints` endpoints for third; a Sidecar in `app`
/// importing `hosts`.
fn mesh(third_endpoints: u8, hosts: &[&str]) -> StaticMesh {
    let ip = |last: u8| IpAddr::from([10, 0, 0, last]);
    StaticMesh::new(1)
        .with(
            service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
            vec![endpoint(ip(1), &[("grpc", 50051)], "c1")],
        )
        .with(
            service("other", "default", &[("http", 80, Protocol::Http)]),
            vec![endpoint(ip(2), &[("http", 8080)], "c1")],
        )
        .with(
            service("third", "default", &[("http", 9090, Protocol::Http)]),
            (0..third_endpoints)
                .map(|i| endpoint(ip(10 + i), &[("http", 9090)], "c1"))
                .collect(),
        )
        .with_config([sidecar(hosts)])
}

const TWO: &[&str] = &[
    "default/echo.default.svc.cluster.local",
    "default/other.default.svc.cluster.local",
];

fn names<M: Message + Default>(r: &DiscoveryResponse, name: impl Fn(&M) -> String) -> BTreeSet<String> {
    r.resources
        .iter()
        .map(|a| name(&M::decode(a.value.as_slice()).expect("decodes")))
        .collect()
}

fn clusters(r: &DiscoveryResponse) -> BTreeSet<String> {
    names::<Cluster>(r, |c| c.name.clone())
}

fn assignments(r: &DiscoveryResponse) -> BTreeSet<String> {
    names::<ClusterLoadAssignment>(r, |a| a.cluster_name.clone())
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Resources looked up in the shared cache so far: what generation did.
fn cache_reads(h: &Harness) -> f64 {
    h.metric("xds_cache_reads_total{type=\"hit\"}") + h.metric("xds_cache_reads_total{type=\"miss\"}")
}

#[tokio::test]
async fn a_sidecar_gets_only_what_its_sidecar_imports_and_nothing_else_moves_it() {
    let h = Harness::start(mesh(1, TWO)).await.expect("harness");
    let mut c = h.sotw(harness::sidecar("client", "app")).await.expect("client");
    c.request(XdsType::Cluster, &[]).expect("send");
    let cds = c.recv().await.expect("CDS");
    assert_eq!(
        clusters(&cds),
        set(&[BLACKHOLE, PASSTHROUGH, INBOUND_PASSTHROUGH, ECHO, OTHER])
    );
    c.ack(&cds).expect("ack");
    // A hidden cluster behaves as a missing one.
    c.request(XdsType::Endpoint, &[ECHO, OTHER, THIRD]).expect("send");
    let eds = c.recv().await.expect("EDS");
    assert_eq!(assignments(&eds), set(&[ECHO, OTHER]));
    c.ack(&eds).expect("ack");
    c.expect_none(QUIET).await.expect("settled");

    // third's endpoints change: out of scope, nothing is generated or sent.
    let reads = cache_reads(&h);
    h.publish(
        mesh(2, TWO),
        PushScope::Endpoints(["third.default.svc.cluster.local".into()].into()),
    );
    c.expect_none(QUIET)
        .await
        .expect("an out-of-scope endpoint change sends nothing");
    assert_eq!(cache_reads(&h), reads, "nothing was generated");
    // A whole-service change of third, in a partial change set: nothing either.
    let third_changed = Changes {
        services: ["third.default.svc.cluster.local".into()].into(),
        ..Changes::default()
    };
    h.publish(mesh(3, TWO), PushScope::Partial(Arc::new(third_changed)));
    c.expect_none(QUIET)
        .await
        .expect("an out-of-scope service change sends nothing");
    assert_eq!(cache_reads(&h), reads, "nothing was generated");

    // The Sidecar now imports every host of `default`: third's cluster and endpoints appear.
    let sidecar_changed = Changes {
        objects: [(ObjectRef::new(Kind::Sidecar, "app", "default"), vec![])].into(),
        ..Changes::default()
    };
    h.publish(
        mesh(3, &["default/*"]),
        PushScope::Partial(Arc::new(sidecar_changed)),
    );
    let cds = c.recv().await.expect("CDS after the Sidecar change");
    assert_eq!(
        clusters(&cds),
        set(&[BLACKHOLE, PASSTHROUGH, INBOUND_PASSTHROUGH, ECHO, OTHER, THIRD])
    );
    c.ack(&cds).expect("ack");
    let eds = c.recv().await.expect("EDS after the Sidecar change");
    assert_eq!(
        assignments(&eds),
        set(&[THIRD]),
        "the named cluster now exists (the others, unchanged, are not resent)"
    );
    let third = ClusterLoadAssignment::decode(
        eds.resources
            .iter()
            .find(|a| {
                ClusterLoadAssignment::decode(a.value.as_slice()).is_ok_and(|l| l.cluster_name == THIRD)
            })
            .expect("third")
            .value
            .as_slice(),
    )
    .expect("decodes");
    assert_eq!(third.endpoints[0].lb_endpoints.len(), 3);
}

#[tokio::test]
async fn a_proxy_without_a_sidecar_is_pushed_what_it_sees() {
    let h = Harness::start(mesh(1, TWO)).await.expect("harness");
    let mut c = h
        .sotw(harness::sidecar("client", "elsewhere"))
        .await
        .expect("client");
    c.request(XdsType::Cluster, &[]).expect("send");
    let cds = c.recv().await.expect("CDS");
    assert_eq!(
        clusters(&cds),
        set(&[BLACKHOLE, PASSTHROUGH, INBOUND_PASSTHROUGH, ECHO, OTHER, THIRD])
    );
    c.ack(&cds).expect("ack");
    c.request(XdsType::Endpoint, &[THIRD]).expect("send");
    let eds = c.recv().await.expect("EDS");
    c.ack(&eds).expect("ack");
    let reads = cache_reads(&h);
    h.publish(
        mesh(2, TWO),
        PushScope::Endpoints(["third.default.svc.cluster.local".into()].into()),
    );
    let eds = c.recv().await.expect("an in-scope endpoint change is pushed");
    assert!(cache_reads(&h) > reads, "generated");
    assert_eq!(assignments(&eds), set(&[THIRD]));
}

#[tokio::test]
async fn a_narrowed_sidecar_removes_what_it_no_longer_imports_over_delta() {
    let h = Harness::start(mesh(1, &["default/*"])).await.expect("harness");
    let mut c = h.delta(harness::sidecar("client", "app")).await.expect("client");
    c.subscribe(XdsType::Cluster, &["*"]).expect("send");
    let cds = c.recv().await.expect("CDS");
    let names: BTreeSet<String> = cds.resources.iter().map(|r| r.name.clone()).collect();
    assert_eq!(
        names,
        set(&[BLACKHOLE, PASSTHROUGH, INBOUND_PASSTHROUGH, ECHO, OTHER, THIRD])
    );
    c.ack(&cds).expect("ack");
    let narrowed = Changes {
        objects: [(ObjectRef::new(Kind::Sidecar, "app", "default"), vec![])].into(),
        ..Changes::default()
    };
    h.publish(mesh(1, TWO), PushScope::Partial(Arc::new(narrowed)));
    let cds = c.recv().await.expect("CDS after narrowing");
    assert!(cds.resources.is_empty(), "nothing else changed");
    assert_eq!(cds.removed_resources, [THIRD]);
}
