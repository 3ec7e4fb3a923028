//! Test harness: serves a mesh described in a JSON file over ADS (plaintext), re-reading the file when
//! it changes, with meshd's real xDS server, generators and push pipeline. End-to-end tests drive real
//! xDS clients against it before the full discovery pipeline exists; not part of a deployment.
//!
//! `xds-fixture --mesh mesh.json [--addr 127.0.0.1:0]` prints `listening on <addr>` once serving.

use std::{collections::BTreeMap, net::IpAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context;
use clap::Parser;
use meshd::{
    drain::Tasks,
    model::{Health, Locality, Protocol, TlsMode},
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
use serde::Deserialize;

#[derive(Parser)]
struct Args {
    /// The mesh file (see `MeshFile`).
    #[arg(long)]
    mesh: PathBuf,
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: std::net::SocketAddr,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MeshFile {
    services: Vec<ServiceDef>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ServiceDef {
    name: String,
    namespace: String,
    /// `[name, port, protocol]`; protocol is `GRPC`, `HTTP` or `TCP`.
    ports: Vec<(String, u16, String)>,
    #[serde(default)]
    service_accounts: Vec<String>,
    #[serde(default)]
    endpoints: Vec<EndpointDef>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EndpointDef {
    address: IpAddr,
    ports: BTreeMap<String, u16>,
    #[serde(default = "default_cluster")]
    cluster: String,
    #[serde(default)]
    tls_mode_istio: bool,
    service_account: Option<String>,
    #[serde(default)]
    locality: (String, String),
    #[serde(default)]
    unhealthy: bool,
}

fn default_cluster() -> String {
    "cluster-1".to_owned()
}

fn protocol(p: &str) -> Protocol {
    match p {
        "GRPC" => Protocol::Grpc,
        "HTTP" => Protocol::Http,
        _ => Protocol::Tcp,
    }
}

fn build(file: &MeshFile, version: u64) -> StaticMesh {
    file.services.iter().fold(StaticMesh::new(version), |mesh, s| {
        let ports: Vec<(&str, u16, Protocol)> = s
            .ports
            .iter()
            .map(|(n, p, proto)| (n.as_str(), *p, protocol(proto)))
            .collect();
        let mut svc = service(&s.name, &s.namespace, &ports);
        svc.service_accounts = s.service_accounts.iter().map(|a| Arc::from(a.as_str())).collect();
        let eps = s
            .endpoints
            .iter()
            .map(|e| {
                let ports: Vec<(&str, u16)> = e.ports.iter().map(|(n, p)| (n.as_str(), *p)).collect();
                let mut ep = endpoint(e.address, &ports, &e.cluster);
                ep.tls_mode = if e.tls_mode_istio {
                    TlsMode::Istio
                } else {
                    TlsMode::Disabled
                };
                ep.service_account = e.service_account.as_deref().map(Arc::from);
                ep.locality = Locality {
                    region: e.locality.0.as_str().into(),
                    zone: e.locality.1.as_str().into(),
                    subzone: "".into(),
                };
                ep.health = if e.unhealthy {
                    Health::Unhealthy
                } else {
                    Health::Healthy
                };
                ep
            })
            .collect();
        mesh.with(svc, eps)
    })
}

/// Endpoint-only when nothing CDS reads changed: service definitions, and endpoint identities and
/// mTLS modes.
fn scope<'a>(old: &'a MeshFile, new: &'a MeshFile) -> PushScope {
    type Shape<'a> = (
        &'a str,
        &'a str,
        &'a [(String, u16, String)],
        &'a [String],
        Vec<(bool, Option<&'a str>)>,
    );
    let shape = |f: &'a MeshFile| -> Vec<Shape<'a>> {
        f.services
            .iter()
            .map(|s| {
                let ids = s
                    .endpoints
                    .iter()
                    .map(|e| (e.tls_mode_istio, e.service_account.as_deref()))
                    .collect();
                (
                    &*s.name,
                    &*s.namespace,
                    &s.ports[..],
                    &s.service_accounts[..],
                    ids,
                )
            })
            .collect()
    };
    if shape(old) != shape(new) {
        return PushScope::Full;
    }
    let changed = old
        .services
        .iter()
        .zip(&new.services)
        .filter(|(a, b)| a.endpoints != b.endpoints)
        .map(|(_, b)| format!("{}.{}.svc.cluster.local", b.name, b.namespace).into())
        .collect();
    PushScope::Endpoints(changed)
}

fn read(path: &PathBuf) -> anyhow::Result<MeshFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    meshd::telemetry::init(&filter, meshd::cli::LogFormat::Text).map_err(anyhow::Error::msg)?;
    let args = Args::parse();
    let tasks = Tasks::new();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let pushes = spawn_debouncer(&tasks, rx, Duration::from_millis(10), Duration::from_secs(1));
    let mut current = read(&args.mesh)?;
    let mut version = 1;
    tx.send(Update {
        mesh: Arc::new(build(&current, version)),
        scope: PushScope::Full,
    })
    .await?;
    let server = AdsServer::new(
        pushes,
        tasks.clone(),
        Metrics::unregistered(),
        Arc::new(AllEndpoints),
        XdsLimits::default(),
    );
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    println!("listening on {}", listener.local_addr()?);
    tasks.spawn("mesh-file", {
        let stop = tasks.cancelled();
        async move {
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                let Ok(next) = read(&args.mesh) else { continue };
                if next == current {
                    continue;
                }
                version += 1;
                let update = Update {
                    mesh: Arc::new(build(&next, version)),
                    scope: scope(&current, &next),
                };
                current = next;
                if tx.send(update).await.is_err() {
                    return;
                }
            }
        }
    });
    let serve = server.serve_plaintext(listener);
    tokio::select! {
        r = serve => r?,
        _ = meshd::signal::shutdown() => {}
    }
    tasks.drain(Duration::from_secs(5)).await?;
    Ok(())
}
