//! The ADS stream state machine under libFuzzer: one in-process ADS server (the real `AdsServer` on a
//! loopback port, two services), and per input one stream carrying the sequence of requests the input
//! decodes to. Byte 0 picks state of the world (even) or delta (odd); the rest is a series of
//! `u16`-length-prefixed protobuf messages (`DiscoveryRequest` or `DeltaDiscoveryRequest`; undecodable
//! ones are skipped). Every response must carry a nonce and a served type, with no resource twice.

use std::{
    collections::HashSet,
    sync::{Arc, OnceLock},
    time::Duration,
};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DiscoveryRequest,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
};
use meshd::{
    drain::Tasks,
    model::Protocol,
    xds::{
        AdsServer, AllEndpoints, XdsLimits,
        generator::{
            StaticMesh,
            static_mesh::{endpoint, service},
        },
        metrics::Metrics,
        push::{PushScope, Update, spawn_debouncer},
    },
};
use prost::Message;
use tokio_stream::StreamExt;

struct Server {
    rt: tokio::runtime::Runtime,
    url: String,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let url = rt.block_on(async {
            let tasks = Tasks::new();
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            let pushes = spawn_debouncer(&tasks, rx, Duration::from_millis(1), Duration::from_millis(10));
            let ip = "127.0.0.1".parse().expect("ip");
            let mesh = StaticMesh::new(1)
                .with(
                    service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
                    vec![endpoint(ip, &[("grpc", 50051)], "c1")],
                )
                .with(
                    service("other", "default", &[("http", 80, Protocol::Http)]),
                    vec![],
                );
            tx.send(Update {
                mesh: Arc::new(mesh),
                scope: PushScope::Full,
            })
            .await
            .expect("first push");
            std::mem::forget(tx);
            let ads = AdsServer::new(
                pushes,
                tasks.clone(),
                Metrics::unregistered(),
                Arc::new(AllEndpoints),
                XdsLimits::default(),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let url = format!("http://{}", listener.local_addr().expect("addr"));
            tokio::spawn(async move { ads.serve_plaintext(listener).await });
            std::mem::forget(tasks);
            url
        });
        Server { rt, url }
    })
}

fn messages(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 2 && out.len() < 32 {
        let n = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        out.push(&rest[2..2 + n]);
        rest = &rest[2 + n..];
    }
    out
}

fn check(type_url: &str, nonce: &str, names: Vec<String>) {
    assert!(!nonce.is_empty(), "response without a nonce");
    assert!(
        meshd::xds::XdsType::from_url(type_url).is_some(),
        "response for unserved type {type_url:?}"
    );
    let mut seen = HashSet::new();
    for n in names {
        assert!(seen.insert(n.clone()), "{n} twice in one response");
    }
}

pub fn discovery_stream(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let s = server();
    s.rt.block_on(async {
        let Ok(mut client) = AggregatedDiscoveryServiceClient::connect(s.url.clone()).await else {
            return;
        };
        let wait = Duration::from_millis(20);
        if mode % 2 == 0 {
            let reqs: Vec<DiscoveryRequest> = messages(rest)
                .into_iter()
                .filter_map(|m| DiscoveryRequest::decode(m).ok())
                .collect();
            if let Ok(resp) = client.stream_aggregated_resources(tokio_stream::iter(reqs)).await {
                let mut inbound = resp.into_inner();
                while let Ok(Some(Ok(r))) = tokio::time::timeout(wait, inbound.next()).await {
                    let names = r.resources.iter().map(|a| format!("{:?}", a.value)).collect();
                    check(&r.type_url, &r.nonce, names);
                }
            }
        } else {
            let reqs: Vec<DeltaDiscoveryRequest> = messages(rest)
                .into_iter()
                .filter_map(|m| DeltaDiscoveryRequest::decode(m).ok())
                .collect();
            if let Ok(resp) = client.delta_aggregated_resources(tokio_stream::iter(reqs)).await {
                let mut inbound = resp.into_inner();
                while let Ok(Some(Ok(r))) = tokio::time::timeout(wait, inbound.next()).await {
                    let names = r.resources.iter().map(|x| x.name.clone()).collect();
                    check(&r.type_url, &r.nonce, names);
                }
            }
        }
    });
}
