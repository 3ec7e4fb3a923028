//! ADS protocol rules, message by message, against meshd's real server on a static mesh
//! (`meshd::xds::harness`): SotW and delta subscribe, ACK, NACK, nonces, and what a published snapshot
//! pushes. Fast and in-process; `tests/e2e/test_xds_protocol.py` proves the same rules with real
//! clients.

use std::{net::IpAddr, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::Cluster, core::v3::Node, endpoint::v3::ClusterLoadAssignment,
            listener::v3::Listener, route::v3::RouteConfiguration,
        },
        extensions::transport_sockets::tls::v3::Secret,
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
        },
    },
    google::protobuf::Any,
};
use meshd::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, service},
    },
    model::Protocol,
    xds::{
        PushScope, XdsType,
        harness::{self, Harness},
    },
};
use prost::Message;

const ECHO: &str = "outbound|7070||echo.default.svc.cluster.local";
const OTHER: &str = "outbound|80||other.default.svc.cluster.local";
const THIRD: &str = "outbound|9090||third.default.svc.cluster.local";
const MISSING: &str = "outbound|1||missing.default.svc.cluster.local";
const PASSTHROUGH: &str = "PassthroughCluster";
const BLACKHOLE: &str = "BlackHoleCluster";
/// What a wildcard CDS gives the sidecar (10.0.0.1, echo's endpoint): echo and other, the outbound
/// catch-alls, and its inbound clusters.
const SIDECAR_CDS: &[&str] = &[
    ECHO,
    OTHER,
    BLACKHOLE,
    PASSTHROUGH,
    INBOUND_PASSTHROUGH,
    ECHO_INBOUND,
];
/// Its listeners: the outbound and inbound catch-alls and one per HTTP (and gRPC) port.
const SIDECAR_LDS: &[&str] = &["virtualOutbound", "virtualInbound", "0.0.0.0_7070", "0.0.0.0_80"];
const INBOUND_PASSTHROUGH: &str = "InboundPassthroughCluster";
const ECHO_INBOUND: &str = "inbound|50051||";
const ECHO_LISTENER: &str = "echo.default.svc.cluster.local:7070";

/// How long "no response" is awaited.
const QUIET: Duration = Duration::from_millis(200);

const CDS: XdsType = XdsType::Cluster;
const EDS: XdsType = XdsType::Endpoint;
const LDS: XdsType = XdsType::Listener;

/// The mesh states a case can publish.
#[derive(Debug, Clone, Copy)]
enum Mesh {
    /// echo (one endpoint) and other (one endpoint).
    Base,
    /// echo gained an endpoint (an endpoint-only change).
    EchoScaled,
    /// other gained an endpoint (an endpoint-only change).
    OtherScaled,
    /// other gained an endpoint at the sidecar's IP (an endpoint-only change that gives the sidecar
    /// a service target).
    OtherOnSidecar,
    /// other is gone.
    WithoutOther,
    /// third was added.
    WithThird,
}

impl Mesh {
    fn build(self) -> StaticMesh {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut echo = vec![endpoint(ip("10.0.0.1"), &[("grpc", 50051)], "c1")];
        let mut other = vec![endpoint(ip("10.0.0.2"), &[("http", 8080)], "c1")];
        match self {
            Self::EchoScaled => echo.push(endpoint(ip("10.0.0.3"), &[("grpc", 50051)], "c1")),
            Self::OtherScaled => other.push(endpoint(ip("10.0.0.4"), &[("http", 8080)], "c1")),
            Self::OtherOnSidecar => other.push(endpoint(ip("10.0.0.1"), &[("http", 8080)], "c1")),
            _ => {}
        }
        let mut mesh = StaticMesh::default().with(
            service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
            echo,
        );
        if !matches!(self, Self::WithoutOther) {
            mesh = mesh.with(
                service("other", "default", &[("http", 80, Protocol::Http)]),
                other,
            );
        }
        if matches!(self, Self::WithThird) {
            mesh = mesh.with(
                service("third", "default", &[("grpc", 9090, Protocol::Grpc)]),
                vec![],
            );
        }
        mesh
    }

    /// What changed relative to `Base` (or to the previous scaled state: the same services).
    fn scope(self) -> PushScope {
        let host = |h: &str| format!("{h}.default.svc.cluster.local").into();
        match self {
            Self::EchoScaled => PushScope::Endpoints([host("echo")].into()),
            Self::OtherScaled | Self::OtherOnSidecar => PushScope::Endpoints([host("other")].into()),
            Self::Base | Self::WithoutOther | Self::WithThird => PushScope::Full,
        }
    }
}

/// The resource names a SotW response carries.
fn names_of(resources: &[Any], ty: XdsType) -> Vec<String> {
    let mut names: Vec<String> = resources
        .iter()
        .map(|any| {
            let v = &any.value[..];
            match ty {
                XdsType::Cluster => Cluster::decode(v).expect("Cluster").name,
                XdsType::Endpoint => ClusterLoadAssignment::decode(v).expect("CLA").cluster_name,
                XdsType::Listener => Listener::decode(v).expect("Listener").name,
                XdsType::Route => RouteConfiguration::decode(v).expect("Route").name,
                XdsType::Secret => Secret::decode(v).expect("Secret").name,
            }
        })
        .collect();
    names.sort();
    names
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    v.sort();
    v
}

// --- state of the world ----------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Sotw {
    /// A request for these names from scratch (no nonce).
    Request(XdsType, &'static [&'static str]),
    /// The next response is of this type, carrying exactly these resources.
    Expect(XdsType, &'static [&'static str]),
    /// ACK the last response.
    Ack,
    /// ACK the last response, asking for these names instead.
    AckWith(&'static [&'static str]),
    /// NACK the last response.
    Nack,
    /// A request for these names carrying a nonce that is not the latest.
    Stale(&'static [&'static str]),
    /// Nothing arrives for a while.
    Quiet,
    /// A new snapshot is published.
    Publish(Mesh),
    /// `/debug/connections` shows the last response of this type rejected.
    Rejected(XdsType),
}

/// A case: its name, the client's node, the steps.
type SotwCase = (&'static str, fn() -> Node, &'static [Sotw]);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_rules() {
    use Sotw::*;
    let cases: &[SotwCase] = &[
        (
            "a request is answered, its ACK is not",
            sidecar,
            &[Request(CDS, &["*"]), Expect(CDS, SIDECAR_CDS), Ack, Quiet],
        ),
        (
            "a proxyless client gets the listener it names",
            grpc,
            &[
                Request(LDS, &[ECHO_LISTENER]),
                Expect(LDS, &[ECHO_LISTENER]),
                Ack,
                Quiet,
            ],
        ),
        (
            "a NACK is recorded and not answered",
            sidecar,
            &[
                Request(EDS, &[ECHO]),
                Expect(EDS, &[ECHO]),
                Nack,
                Quiet,
                Rejected(EDS),
            ],
        ),
        (
            "an ACK adding a name is answered with the whole subscription",
            sidecar,
            &[
                Request(EDS, &[ECHO]),
                Expect(EDS, &[ECHO]),
                AckWith(&[ECHO, OTHER]),
                Expect(EDS, &[ECHO, OTHER]),
                Ack,
                Quiet,
            ],
        ),
        (
            "a stale nonce is ignored, even with new names",
            sidecar,
            &[
                Request(EDS, &[ECHO]),
                Expect(EDS, &[ECHO]),
                Ack,
                Stale(&[ECHO, OTHER]),
                Quiet,
            ],
        ),
        (
            "an endpoint change goes to its watchers only",
            sidecar,
            &[
                Request(EDS, &[ECHO]),
                Expect(EDS, &[ECHO]),
                Ack,
                Publish(Mesh::OtherScaled),
                Quiet,
                Publish(Mesh::EchoScaled),
                Expect(EDS, &[ECHO]),
                Ack,
                Quiet,
            ],
        ),
        (
            "an endpoint change sends no CDS",
            sidecar,
            &[
                Request(CDS, &["*"]),
                Expect(CDS, SIDECAR_CDS),
                Ack,
                Publish(Mesh::EchoScaled),
                Quiet,
            ],
        ),
        (
            "a full push that changes nothing sends nothing",
            sidecar,
            &[
                Request(CDS, &["*"]),
                Expect(CDS, SIDECAR_CDS),
                Ack,
                Publish(Mesh::Base),
                Quiet,
            ],
        ),
        (
            "an endpoint change that makes the sidecar serve a port pushes its inbound cluster",
            sidecar,
            &[
                Request(CDS, &["*"]),
                Expect(CDS, SIDECAR_CDS),
                Ack,
                Publish(Mesh::OtherOnSidecar),
                Expect(
                    CDS,
                    &[
                        ECHO,
                        OTHER,
                        BLACKHOLE,
                        PASSTHROUGH,
                        INBOUND_PASSTHROUGH,
                        ECHO_INBOUND,
                        "inbound|8080||",
                    ],
                ),
                Ack,
                Quiet,
            ],
        ),
        (
            // The listener's name stays, its chains change: a cached copy from before would be stale.
            "an endpoint change that makes the sidecar serve a port pushes its inbound listener",
            sidecar,
            &[
                Request(LDS, &["*"]),
                Expect(LDS, SIDECAR_LDS),
                Ack,
                Publish(Mesh::OtherOnSidecar),
                Expect(LDS, SIDECAR_LDS),
                Ack,
                Quiet,
            ],
        ),
        (
            "a new service is pushed in the whole CDS set",
            sidecar,
            &[
                Request(CDS, &["*"]),
                Expect(CDS, SIDECAR_CDS),
                Ack,
                Publish(Mesh::WithThird),
                Expect(
                    CDS,
                    &[
                        ECHO,
                        OTHER,
                        BLACKHOLE,
                        PASSTHROUGH,
                        INBOUND_PASSTHROUGH,
                        ECHO_INBOUND,
                        THIRD,
                    ],
                ),
                Ack,
                Quiet,
            ],
        ),
        (
            "a NACKed config is not resent, a newer one is",
            sidecar,
            &[
                Request(EDS, &[ECHO]),
                Expect(EDS, &[ECHO]),
                Nack,
                Publish(Mesh::Base),
                Quiet,
                Publish(Mesh::EchoScaled),
                Expect(EDS, &[ECHO]),
            ],
        ),
    ];
    for (name, node, steps) in cases {
        run_sotw(node(), steps)
            .await
            .unwrap_or_else(|e| panic!("SotW case {name:?}: {e}"));
    }
}

async fn run_sotw(node: Node, steps: &[Sotw]) -> Result<(), String> {
    let h = Harness::start(Mesh::Base.build())
        .await
        .map_err(|e| e.to_string())?;
    let mut c = h.sotw(node).await.map_err(|e| e.to_string())?;
    let mut last: Option<DiscoveryResponse> = None;
    for (i, step) in steps.iter().enumerate() {
        let at = |e: &dyn std::fmt::Display| format!("step {i} {step:?}: {e}");
        let last_response = || last.clone().ok_or_else(|| at(&"no response yet"));
        match *step {
            Sotw::Request(ty, names) => c.request(ty, names).map_err(|e| at(&e))?,
            Sotw::Expect(ty, names) => {
                let r = c.recv().await.map_err(|e| at(&e))?;
                if r.type_url != ty.url() || names_of(&r.resources, ty) != sorted(names) {
                    return Err(at(&format!(
                        "got {} {:?}",
                        r.type_url,
                        XdsType::from_url(&r.type_url).map(|t| names_of(&r.resources, t))
                    )));
                }
                if r.nonce.is_empty() || last.as_ref().is_some_and(|l| l.nonce == r.nonce) {
                    return Err(at(&format!("nonce {:?} is not fresh", r.nonce)));
                }
                last = Some(r);
            }
            Sotw::Ack => c.ack(&last_response()?).map_err(|e| at(&e))?,
            Sotw::AckWith(names) => c.ack_with(&last_response()?, names).map_err(|e| at(&e))?,
            Sotw::Nack => c
                .nack(&last_response()?, "rejected by the test")
                .map_err(|e| at(&e))?,
            Sotw::Stale(names) => {
                let r = last_response()?;
                c.send(DiscoveryRequest {
                    type_url: r.type_url.clone(),
                    version_info: r.version_info.clone(),
                    response_nonce: "stale".into(),
                    resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
                    ..DiscoveryRequest::default()
                })
                .map_err(|e| at(&e))?;
            }
            Sotw::Quiet => c.expect_none(QUIET).await.map_err(|e| at(&e))?,
            Sotw::Publish(mesh) => {
                h.publish(mesh.build(), mesh.scope());
            }
            Sotw::Rejected(ty) => {
                let connections = h.ads().connections().list();
                let nack = connections
                    .first()
                    .and_then(|c| c.watches.get(&ty))
                    .and_then(|w| w.last_nack.clone());
                if nack.is_none_or(|n| n.message != "rejected by the test") {
                    return Err(at(&"no NACK recorded"));
                }
            }
        }
    }
    Ok(())
}

fn sidecar() -> Node {
    harness::sidecar("client", "default")
}

fn grpc() -> Node {
    harness::grpc("client", "default")
}

// --- delta -----------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Delta {
    Subscribe(XdsType, &'static [&'static str]),
    Unsubscribe(XdsType, &'static [&'static str]),
    /// The next response is of this type, sending and removing exactly these.
    Expect(XdsType, &'static [&'static str], &'static [&'static str]),
    Ack,
    Nack,
    /// A subscription change carrying a nonce that is not the latest.
    StaleSubscribe(XdsType, &'static [&'static str]),
    Quiet,
    Publish(Mesh),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_rules() {
    use Delta::*;
    let cases: &[(&str, &[Delta])] = &[
        (
            "a subscription is answered, its ACK is not",
            &[Subscribe(EDS, &[ECHO]), Expect(EDS, &[ECHO], &[]), Ack, Quiet],
        ),
        (
            "a NACK is not answered",
            &[Subscribe(EDS, &[ECHO]), Expect(EDS, &[ECHO], &[]), Nack, Quiet],
        ),
        (
            "a new name sends only that resource",
            &[
                Subscribe(EDS, &[ECHO]),
                Expect(EDS, &[ECHO], &[]),
                Ack,
                Subscribe(EDS, &[OTHER]),
                Expect(EDS, &[OTHER], &[]),
                Ack,
                Quiet,
            ],
        ),
        (
            "an unsubscribed resource is no longer pushed",
            &[
                Subscribe(EDS, &[ECHO, OTHER]),
                Expect(EDS, &[ECHO, OTHER], &[]),
                Ack,
                Unsubscribe(EDS, &[ECHO]),
                Quiet,
                Publish(Mesh::EchoScaled),
                Quiet,
            ],
        ),
        (
            "subscription changes with a stale nonce are honoured",
            &[
                Subscribe(EDS, &[ECHO]),
                Expect(EDS, &[ECHO], &[]),
                Ack,
                StaleSubscribe(EDS, &[OTHER]),
                Expect(EDS, &[OTHER], &[]),
            ],
        ),
        (
            "an endpoint change pushes only the changed resource",
            &[
                Subscribe(EDS, &[ECHO, OTHER]),
                Expect(EDS, &[ECHO, OTHER], &[]),
                Ack,
                Publish(Mesh::EchoScaled),
                Expect(EDS, &[ECHO], &[]),
                Ack,
                Quiet,
            ],
        ),
        (
            "a removed service is removed from CDS",
            &[
                Subscribe(CDS, &["*"]),
                Expect(CDS, SIDECAR_CDS, &[]),
                Ack,
                Publish(Mesh::WithoutOther),
                Expect(CDS, &[], &[OTHER]),
                Ack,
                Quiet,
            ],
        ),
        (
            "a named but missing cluster is reported removed at once",
            &[Subscribe(CDS, &[MISSING]), Expect(CDS, &[], &[MISSING])],
        ),
    ];
    for (name, steps) in cases {
        run_delta(steps)
            .await
            .unwrap_or_else(|e| panic!("delta case {name:?}: {e}"));
    }
}

async fn run_delta(steps: &[Delta]) -> Result<(), String> {
    let h = Harness::start(Mesh::Base.build())
        .await
        .map_err(|e| e.to_string())?;
    let mut c = h.delta(sidecar()).await.map_err(|e| e.to_string())?;
    let mut last: Option<DeltaDiscoveryResponse> = None;
    for (i, step) in steps.iter().enumerate() {
        let at = |e: &dyn std::fmt::Display| format!("step {i} {step:?}: {e}");
        let last_response = || last.clone().ok_or_else(|| at(&"no response yet"));
        match *step {
            Delta::Subscribe(ty, names) => c.subscribe(ty, names).map_err(|e| at(&e))?,
            Delta::Unsubscribe(ty, names) => c.unsubscribe(ty, names).map_err(|e| at(&e))?,
            Delta::Expect(ty, names, removed) => {
                let r = c.recv().await.map_err(|e| at(&e))?;
                let mut sent: Vec<String> = r.resources.iter().map(|r| r.name.clone()).collect();
                sent.sort();
                let mut gone = r.removed_resources.clone();
                gone.sort();
                if r.type_url != ty.url() || sent != sorted(names) || gone != sorted(removed) {
                    return Err(at(&format!("got {} {sent:?} removed {gone:?}", r.type_url)));
                }
                if r.nonce.is_empty() || last.as_ref().is_some_and(|l| l.nonce == r.nonce) {
                    return Err(at(&format!("nonce {:?} is not fresh", r.nonce)));
                }
                last = Some(r);
            }
            Delta::Ack => c.ack(&last_response()?).map_err(|e| at(&e))?,
            Delta::Nack => c
                .nack(&last_response()?, "rejected by the test")
                .map_err(|e| at(&e))?,
            Delta::StaleSubscribe(ty, names) => c
                .send(DeltaDiscoveryRequest {
                    type_url: ty.url().into(),
                    response_nonce: "stale".into(),
                    resource_names_subscribe: names.iter().map(|n| (*n).to_owned()).collect(),
                    ..DeltaDiscoveryRequest::default()
                })
                .map_err(|e| at(&e))?,
            Delta::Quiet => c.expect_none(QUIET).await.map_err(|e| at(&e))?,
            Delta::Publish(mesh) => {
                h.publish(mesh.build(), mesh.scope());
            }
        }
    }
    Ok(())
}

// --- admission -------------------------------------------------------------------------------------

/// Before the first snapshot streams are refused (never empty config, istio#25495), and the readiness
/// gate opens with the first publish.
#[tokio::test]
async fn streams_wait_for_the_first_snapshot() {
    let h = Harness::bind(([127, 0, 0, 1], 0).into(), None)
        .await
        .expect("harness");
    let ready = tokio::spawn(h.ads().first_snapshot());
    let mut early = h.sotw(sidecar()).await.expect("connect");
    early.request(CDS, &["*"]).expect("send");
    let status = early.status().await.expect("a status");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(!ready.is_finished(), "ready before any snapshot");

    h.publish(Mesh::Base.build(), PushScope::Full);
    tokio::time::timeout(Duration::from_secs(5), ready)
        .await
        .expect("ready after the first snapshot")
        .expect("join");
    let mut c = h.sotw(sidecar()).await.expect("connect");
    c.request(CDS, &["*"]).expect("send");
    let r = c.recv().await.expect("answered once there is a snapshot");
    assert_eq!(r.version_info, "1");
}

#[tokio::test]
async fn a_first_request_without_node_is_invalid() {
    let h = Harness::start(Mesh::Base.build()).await.expect("harness");
    for delta in [false, true] {
        let status = if delta {
            let mut c = harness::DeltaClient::connect(h.url(), None)
                .await
                .expect("connect");
            c.subscribe(EDS, &[ECHO]).expect("send");
            c.status().await
        } else {
            let mut c = harness::SotwClient::connect(h.url(), None)
                .await
                .expect("connect");
            c.request(EDS, &[ECHO]).expect("send");
            c.status().await
        };
        assert_eq!(
            status.expect("a status").code(),
            tonic::Code::InvalidArgument,
            "delta: {delta}"
        );
    }
}
