//! The ADS stream state machine under libFuzzer: one in-process ADS server (`meshd::xds::harness`: the
//! real `AdsServer` on a loopback port, two services), and per input one stream carrying the sequence
//! of requests the input decodes to. Byte 0 picks state of the world (even) or delta (odd); the rest is a series of
//! `u16`-length-prefixed protobuf messages (`DiscoveryRequest` or `DeltaDiscoveryRequest`; undecodable
//! ones are skipped). Every response must carry a nonce and a served type, with no resource twice.

use std::{collections::HashSet, sync::OnceLock, time::Duration};

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use meshd::{
    envoy::{
        StaticMesh,
        static_mesh::{endpoint, service},
    },
    model::Protocol,
    xds::harness::{Client, DeltaClient, Harness, SotwClient, Wire},
};
use prost::Message;

struct Server {
    rt: tokio::runtime::Runtime,
    harness: Harness,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let ip = "127.0.0.1".parse().expect("ip");
        let mesh = StaticMesh::default()
            .with(
                service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
                vec![endpoint(ip, &[("grpc", 50051)], "c1")],
            )
            .with(
                service("other", "default", &[("http", 80, Protocol::Http)]),
                vec![],
            );
        let harness = rt.block_on(Harness::start(mesh)).expect("ADS harness");
        Server { rt, harness }
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

/// Sends every request, ends the request stream, and checks each response until the stream ends or
/// is quiet for 20 ms.
async fn exchange<W: Wire>(
    mut client: Client<W>,
    requests: Vec<W::Request>,
    names: impl Fn(&W::Response) -> (&str, &str, Vec<String>),
) {
    for r in requests {
        if client.send(r).is_err() {
            return;
        }
    }
    client.close();
    while let Ok(Some(r)) = client.recv_within(Duration::from_millis(20)).await {
        let (type_url, nonce, names) = names(&r);
        check(type_url, nonce, names);
    }
}

pub fn discovery_stream(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let s = server();
    let url = s.harness.url();
    s.rt.block_on(async {
        if mode % 2 == 0 {
            let reqs = decoded::<DiscoveryRequest>(rest);
            let Ok(client) = SotwClient::connect(url, None).await else {
                return;
            };
            exchange(client, reqs, |r| {
                let names = r.resources.iter().map(|a| format!("{:?}", a.value)).collect();
                (&r.type_url, &r.nonce, names)
            })
            .await;
        } else {
            let reqs = decoded::<DeltaDiscoveryRequest>(rest);
            let Ok(client) = DeltaClient::connect(url, None).await else {
                return;
            };
            exchange(client, reqs, |r| {
                let names = r.resources.iter().map(|x| x.name.clone()).collect();
                (&r.type_url, &r.nonce, names)
            })
            .await;
        }
    });
}

/// The messages of `data` that decode as `M` (undecodable ones are skipped).
fn decoded<M: Message + Default>(data: &[u8]) -> Vec<M> {
    messages(data)
        .into_iter()
        .filter_map(|m| M::decode(m).ok())
        .collect()
}
