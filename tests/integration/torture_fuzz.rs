//! Fuzzing on stable, in the normal test run: a seeded mutation loop over the committed corpus
//! (`tests/fuzz/corpus/<target>/`) for every parser target of `tests/fuzz` (libFuzzer, nightly), the
//! `discovery_stream` corpus replayed, plus random `DiscoveryRequest` / `DeltaDiscoveryRequest`
//! sequences against the real ADS server (`xds-fixture`).
//!
//! Bounded: `MESHD_FUZZ_SECONDS` per target (default 2), `MESHD_FUZZ_SEED` (default 1). A panic
//! reports the target, seed, iteration and the input in hex, so it can be committed to the corpus
//! and becomes a regression test (every corpus file is replayed first).

#[path = "../fuzz/targets.rs"]
#[allow(unreachable_pub)]
mod targets;

#[path = "../fuzz/stream.rs"]
#[allow(unreachable_pub)]
mod stream;

use crate::common;

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DeltaDiscoveryRequest, DiscoveryRequest,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::rpc::Status,
};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::IndexedRandom};
use tokio_stream::StreamExt;

fn budget() -> Duration {
    let secs = std::env::var("MESHD_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("MESHD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    let out: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).expect("read corpus file"))
        .collect();
    assert!(!out.is_empty(), "empty corpus for {target}");
    out
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"- ",
    b"\n",
    b"  ",
    b"null",
    b"true",
    b"0",
    b"-1",
    b"65536",
    b"4294967296",
    b"1e309",
    b"\\u0000",
    b"\xff\xfe",
    b"~",
    b"&a",
    b"*a",
    b"!!binary",
    b"...",
    b"---",
];

/// One mutation of `input`: bit flips, token insertions, deletions, duplications or a splice.
fn mutate(rng: &mut StdRng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.random_range(0..=out.len())
        };
        match rng.random_range(0..6) {
            0 if !out.is_empty() => {
                let i = rng.random_range(0..out.len());
                out[i] ^= 1 << rng.random_range(0..8);
            }
            1 => {
                let t = TOKENS.choose(rng).expect("tokens");
                out.splice(at..at, t.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + rng.random_range(1..16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let start = rng.random_range(0..out.len());
                let end = (start + rng.random_range(1..64)).min(out.len());
                let piece = out[start..end].to_vec();
                for _ in 0..rng.random_range(1..8) {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            4 => {
                let other = pool.choose(rng).expect("pool");
                let cut = rng.random_range(0..=other.len());
                out.truncate(at);
                out.extend_from_slice(&other[cut..]);
            }
            _ => out.insert(at, rng.random()),
        }
    }
    out.truncate(1 << 20);
    out
}

/// Replays every corpus input of `name` (the regressions and what libFuzzer found); panics naming the
/// crashing one.
fn replay(name: &str, target: fn(&[u8])) -> Vec<Vec<u8>> {
    let pool = corpus(name);
    for (i, input) in pool.iter().enumerate() {
        run_one(name, target, input, &format!("corpus #{i}"));
    }
    pool
}

/// Replays the corpus, then mutates it until the budget is spent; panics naming the crashing input.
#[allow(clippy::disallowed_types)] // a CPU-time budget for synchronous code: std's clock
fn fuzz(name: &str, target: fn(&[u8])) {
    let pool = replay(name, target);
    let mut rng = StdRng::seed_from_u64(seed());
    let deadline = std::time::Instant::now() + budget();
    let mut runs = 0u64;
    while std::time::Instant::now() < deadline {
        let base = pool.choose(&mut rng).expect("pool");
        let input = mutate(&mut rng, base, &pool);
        run_one(name, target, &input, &format!("seed {} iteration {runs}", seed()));
        runs += 1;
    }
    assert!(runs > 50, "{name}: only {runs} runs in the budget");
    eprintln!("{name}: {runs} mutated inputs, no crash");
}

#[allow(clippy::disallowed_types)] // how long one input ran, synchronously: std's clock
fn run_one(name: &str, target: fn(&[u8]), input: &[u8], what: &str) {
    let started = std::time::Instant::now();
    if std::panic::catch_unwind(|| target(input)).is_err() {
        let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
        panic!("fuzz target {name} crashed on {what}; input (hex): {hex}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{name}: one input took {:?} ({what})",
        started.elapsed()
    );
}

#[test]
fn fuzz_node_metadata() {
    fuzz("node_metadata", targets::node_metadata);
}

#[test]
fn fuzz_kubeconfig() {
    fuzz("kubeconfig", targets::kubeconfig);
}

#[test]
fn fuzz_mesh_networks() {
    fuzz("mesh_networks", targets::mesh_networks);
}

#[test]
fn fuzz_mesh_config() {
    fuzz("mesh_config", targets::mesh_config);
}

#[test]
fn fuzz_k8s_objects() {
    fuzz("k8s_objects", targets::k8s_objects);
}

#[test]
fn fuzz_istio_config() {
    fuzz("istio_config", targets::istio_config);
}

/// The libFuzzer `discovery_stream` corpus, replayed only: each input is a whole ADS stream (≥ 20 ms),
/// too slow for the mutation loop, which `fuzz_discovery_request_sequences` replaces.
#[test]
fn replay_discovery_stream_corpus() {
    replay("discovery_stream", stream::discovery_stream);
}

// --- the stream state machine, over the wire --------------------------------------------------------

const TYPES: &[&str] = &[
    "type.googleapis.com/envoy.config.cluster.v3.Cluster",
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    "type.googleapis.com/envoy.config.listener.v3.Listener",
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    "type.googleapis.com/envoy.config.cluster.v3.Clusterx",
    "",
];
const NAMES: &[&str] = &[
    "*",
    "outbound|7070||echo.default.svc.cluster.local",
    "outbound|7070||other.default.svc.cluster.local",
    "outbound|1||missing.default.svc.cluster.local",
    "echo.default.svc.cluster.local:7070",
    "echo:7070",
    "",
    "\u{0}",
];

struct Fixture(Child, String);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn xds_fixture(dir: &Path) -> Fixture {
    let mesh = dir.join("mesh.json");
    std::fs::write(
        &mesh,
        r#"{"services":[{"name":"echo","namespace":"default","ports":[["grpc",7070,"GRPC"]],
            "endpoints":[{"address":"127.0.0.1","ports":{"grpc":50051}}]},
           {"name":"other","namespace":"default","ports":[["grpc",7070,"GRPC"]]}]}"#,
    )
    .expect("mesh file");
    let mut child = Command::new(common::workspace_exe("examples/xds-fixture"))
        .args(["--mesh", &mesh.to_string_lossy()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn xds-fixture");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("read address");
    let addr = line.trim().rsplit(' ').next().expect("address").to_owned();
    Fixture(child, format!("http://{addr}"))
}

fn node(rng: &mut StdRng) -> Option<Node> {
    match rng.random_range(0..6) {
        0 => None,
        1 => Some(Node::default()),
        _ => Some(Node {
            id: "sidecar~127.0.0.1~fuzz.default~default.svc.cluster.local".into(),
            ..Default::default()
        }),
    }
}

fn names(rng: &mut StdRng) -> Vec<String> {
    (0..rng.random_range(0..5))
        .map(|_| NAMES.choose(rng).expect("names").to_string())
        .collect()
}

fn error_detail(rng: &mut StdRng) -> Option<Status> {
    rng.random_bool(0.2).then(|| Status {
        code: 3,
        message: "fuzz".into(),
        ..Default::default()
    })
}

/// Every response must carry a nonce, a served type, and each resource at most once.
fn check_response(type_url: &str, nonce: &str, names: &[String]) {
    assert!(!nonce.is_empty(), "response without a nonce");
    assert!(
        TYPES[..4].contains(&type_url),
        "response for an unserved type {type_url:?}"
    );
    let mut seen = HashSet::new();
    for n in names {
        assert!(seen.insert(n), "resource {n:?} twice in one response");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_discovery_request_sequences() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fixture = xds_fixture(dir.path());
    let mut rng = StdRng::seed_from_u64(seed());
    let deadline = tokio::time::Instant::now() + budget() * 3;
    let mut streams = 0;
    while tokio::time::Instant::now() < deadline {
        let mut client = AggregatedDiscoveryServiceClient::connect(fixture.1.clone())
            .await
            .expect("connect");
        let steps = rng.random_range(1..12);
        let mut nonces = vec![String::new(), "stale".to_owned()];
        if rng.random_bool(0.5) {
            let reqs: Vec<DiscoveryRequest> = (0..steps)
                .map(|i| DiscoveryRequest {
                    node: if i == 0 { node(&mut rng) } else { None },
                    type_url: TYPES.choose(&mut rng).expect("types").to_string(),
                    resource_names: names(&mut rng),
                    version_info: ["", "1", "garbage"].choose(&mut rng).expect("v").to_string(),
                    response_nonce: nonces.choose(&mut rng).expect("nonce").clone(),
                    error_detail: error_detail(&mut rng),
                    ..Default::default()
                })
                .collect();
            if let Ok(resp) = client.stream_aggregated_resources(tokio_stream::iter(reqs)).await {
                let mut inbound = resp.into_inner();
                while let Ok(Some(Ok(r))) =
                    tokio::time::timeout(Duration::from_millis(150), inbound.next()).await
                {
                    let decoded: Vec<String> = r.resources.iter().map(|a| format!("{:?}", a.value)).collect();
                    check_response(&r.type_url, &r.nonce, &decoded);
                    nonces.push(r.nonce);
                }
            }
        } else {
            let reqs: Vec<DeltaDiscoveryRequest> = (0..steps)
                .map(|i| DeltaDiscoveryRequest {
                    node: if i == 0 { node(&mut rng) } else { None },
                    type_url: TYPES.choose(&mut rng).expect("types").to_string(),
                    resource_names_subscribe: names(&mut rng),
                    resource_names_unsubscribe: names(&mut rng),
                    initial_resource_versions: names(&mut rng).into_iter().map(|n| (n, "1".into())).collect(),
                    response_nonce: nonces.choose(&mut rng).expect("nonce").clone(),
                    error_detail: error_detail(&mut rng),
                    ..Default::default()
                })
                .collect();
            if let Ok(resp) = client.delta_aggregated_resources(tokio_stream::iter(reqs)).await {
                let mut inbound = resp.into_inner();
                while let Ok(Some(Ok(r))) =
                    tokio::time::timeout(Duration::from_millis(150), inbound.next()).await
                {
                    let names: Vec<String> = r.resources.iter().map(|x| x.name.clone()).collect();
                    check_response(&r.type_url, &r.nonce, &names);
                    for removed in &r.removed_resources {
                        assert!(!names.contains(removed), "{removed} both updated and removed");
                    }
                }
            }
        }
        streams += 1;
        assert!(
            fixture.0.try_wait().expect("try_wait").is_none(),
            "the ADS server died"
        );
    }
    assert!(streams > 10, "only {streams} streams");
    // Still healthy: a well-formed request is answered.
    let mut client = AggregatedDiscoveryServiceClient::connect(fixture.1.clone())
        .await
        .expect("connect");
    let req = DiscoveryRequest {
        node: Some(Node {
            id: "sidecar~127.0.0.1~fuzz.default~default.svc.cluster.local".into(),
            ..Default::default()
        }),
        type_url: TYPES[0].into(),
        resource_names: vec![NAMES[1].into()],
        ..Default::default()
    };
    // The fuzz loop may have spent the new-stream rate limit: retry as a client backs off.
    let mut attempts = 0;
    let mut inbound = loop {
        match client
            .stream_aggregated_resources(tokio_stream::iter(vec![req.clone()]))
            .await
        {
            Err(s) if s.code() == tonic::Code::ResourceExhausted && attempts < 50 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => break other.expect("stream").into_inner(),
        }
    };
    let r = tokio::time::timeout(Duration::from_secs(5), inbound.next())
        .await
        .expect("answer in time");
    assert_eq!(r.expect("a response").expect("ok").resources.len(), 1);
    eprintln!("discovery sequences: {streams} streams, no crash");
}
