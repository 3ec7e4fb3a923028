//! `meshctl bootstrap <proxy-id>`: a gRPC xDS bootstrap (`GRPC_XDS_BOOTSTRAP`) for a proxyless client
//! of meshd, complete enough to reach SYNCED on every type.
//!
//! Proxyless gRPC NACKs a Cluster whose TLS names a certificate-provider instance its bootstrap lacks,
//! and meshd's mTLS clusters name [`WORKLOAD_CERT`], so the bootstrap always declares that instance
//! (`file_watcher` over the sandbox's workload certificate unless `--cert-dir` says otherwise).
//!
//! Owns: the JSON, as a pure function of a [`Spec`] ([`bootstrap_json`]); finding the defaults in the
//! sandbox state folder and writing the file are [`run`]'s, at the edge.

use std::path::{Path, PathBuf};

use meshd::{
    envoy::{cds::WORKLOAD_CERT, inbound::GRPC_SERVER_LISTENER_PREFIX},
    sandbox,
};
use serde_json::{Map, Value, json};

/// Used when no sandbox state folder names meshd's address.
pub const DEFAULT_XDS_ADDRESS: &str = "127.0.0.1:15010";
/// How often gRPC re-reads the certificate files (istio-agent rotates well before this matters).
const REFRESH_INTERVAL: &str = "900s";

/// `meshctl bootstrap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node ID, e.g. `sidecar~127.0.0.1~client-0.sample~sample.svc.cluster.local`.
    pub proxy_id: String,
    /// `NAMESPACE` (default: meshd takes it from a `sidecar~ip~pod.ns~…` ID).
    #[arg(long)]
    pub namespace: Option<String>,
    /// `CLUSTER_ID`: the cluster the client runs in.
    #[arg(long)]
    pub cluster_id: Option<String>,
    /// `NETWORK`: the client's network (split horizon).
    #[arg(long)]
    pub network: Option<String>,
    /// `GENERATOR`: the config shape the client needs.
    #[arg(long, value_enum, default_value_t = Generator::Grpc)]
    pub generator: Generator,
    /// meshd's plaintext xDS address (default: the one the sandbox in `--state-dir` serves, else
    /// 127.0.0.1:15010).
    #[arg(long)]
    pub xds_address: Option<String>,
    /// Folder with `cert-chain.pem`, `key.pem` and `root-cert.pem` (default: `<state-dir>/certs`, the
    /// sandbox's workload certificate).
    #[arg(long)]
    pub cert_dir: Option<PathBuf>,
    /// The sandbox state folder (meshd's `--state-dir`).
    #[arg(long, env = "MESHD_STATE_DIR", default_value_os_t = sandbox::default_state_dir())]
    pub state_dir: PathBuf,
    /// Write the bootstrap here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The `GENERATOR` node metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generator {
    /// Proxyless gRPC.
    Grpc,
}

/// Everything the bootstrap says, defaults resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `node.id`.
    pub proxy_id: String,
    /// `NAMESPACE`.
    pub namespace: Option<String>,
    /// `CLUSTER_ID`.
    pub cluster_id: Option<String>,
    /// `NETWORK`.
    pub network: Option<String>,
    /// `GENERATOR`.
    pub generator: Generator,
    /// `host:port` of meshd's plaintext xDS.
    pub xds_address: String,
    /// Absolute folder of the workload certificate files.
    pub cert_dir: PathBuf,
}

/// Why a bootstrap could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The running sandbox's address file is unreadable or not what meshd writes (the error names it).
    #[error(transparent)]
    Addresses(#[from] sandbox::state::StateError),
    /// The current directory, to make `--cert-dir` absolute.
    #[error("resolving --cert-dir: {0}")]
    CurrentDir(std::io::Error),
    /// Writing `--out`.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The bootstrap JSON for `spec`.
pub fn bootstrap_json(spec: &Spec) -> Value {
    let mut metadata = Map::new();
    let generator = match spec.generator {
        Generator::Grpc => "grpc",
    };
    metadata.insert("GENERATOR".into(), generator.into());
    for (key, value) in [
        ("NAMESPACE", &spec.namespace),
        ("CLUSTER_ID", &spec.cluster_id),
        ("NETWORK", &spec.network),
    ] {
        if let Some(v) = value {
            metadata.insert(key.into(), v.as_str().into());
        }
    }
    let file = |name: &str| spec.cert_dir.join(name).to_string_lossy().into_owned();
    json!({
        "xds_servers": [{
            "server_uri": spec.xds_address,
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        // grpc-js refuses a node without a locality, even an empty one.
        "node": {"id": spec.proxy_id, "locality": {}, "metadata": metadata},
        "certificate_providers": {
            (WORKLOAD_CERT): {
                "plugin_name": "file_watcher",
                "config": {
                    "certificate_file": file("cert-chain.pem"),
                    "private_key_file": file("key.pem"),
                    "ca_certificate_file": file("root-cert.pem"),
                    "refresh_interval": REFRESH_INTERVAL,
                },
            },
        },
        // An xDS-enabled gRPC server asks for its listener by this name (meshd's `envoy::inbound`).
        "server_listener_resource_name_template": format!("{GRPC_SERVER_LISTENER_PREFIX}%s"),
    })
}

/// The xDS address the sandbox meshd running on `state_dir` serves (`None` when none runs there).
fn sandbox_xds_address(state_dir: &Path) -> Result<Option<String>, Error> {
    let addresses = sandbox::Addresses::of_running(state_dir)?;
    Ok(addresses.map(|a| a.xds))
}

/// Resolves the defaults, then prints the bootstrap or writes it to `--out`.
pub fn run(args: Args) -> Result<(), Error> {
    let xds_address = match args.xds_address {
        Some(a) => a,
        None => sandbox_xds_address(&args.state_dir)?.unwrap_or_else(|| DEFAULT_XDS_ADDRESS.to_owned()),
    };
    let cert_dir = args.cert_dir.unwrap_or_else(|| args.state_dir.join("certs"));
    // gRPC resolves relative paths against its own working directory, not ours.
    let cert_dir = std::path::absolute(&cert_dir).map_err(Error::CurrentDir)?;
    let spec = Spec {
        proxy_id: args.proxy_id,
        namespace: args.namespace,
        cluster_id: args.cluster_id,
        network: args.network,
        generator: args.generator,
        xds_address,
        cert_dir,
    };
    let text = format!("{:#}\n", bootstrap_json(&spec));
    match args.out {
        Some(path) => {
            std::fs::write(&path, text).map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
            // Said on stderr: stdout stays the bootstrap's when there is no --out.
            eprintln!("wrote {}: the xDS bootstrap of {}", path.display(), spec.proxy_id);
            Ok(())
        }
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            proxy_id: "sidecar~127.0.0.1~client-0.sample~sample.svc.cluster.local".into(),
            namespace: Some("sample".into()),
            cluster_id: Some("cluster1".into()),
            network: Some("network1".into()),
            generator: Generator::Grpc,
            xds_address: "127.0.0.1:15010".into(),
            cert_dir: "/tmp/meshd-sandbox/certs".into(),
        }
    }

    #[test]
    fn the_bootstrap_declares_the_provider_meshds_clusters_name() {
        let want = json!({
            "xds_servers": [{
                "server_uri": "127.0.0.1:15010",
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }],
            "node": {
                "id": "sidecar~127.0.0.1~client-0.sample~sample.svc.cluster.local",
                "locality": {},
                "metadata": {
                    "GENERATOR": "grpc",
                    "NAMESPACE": "sample",
                    "CLUSTER_ID": "cluster1",
                    "NETWORK": "network1",
                },
            },
            "certificate_providers": {
                "default": {
                    "plugin_name": "file_watcher",
                    "config": {
                        "certificate_file": "/tmp/meshd-sandbox/certs/cert-chain.pem",
                        "private_key_file": "/tmp/meshd-sandbox/certs/key.pem",
                        "ca_certificate_file": "/tmp/meshd-sandbox/certs/root-cert.pem",
                        "refresh_interval": "900s",
                    },
                },
            },
            "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
        });
        assert_eq!(bootstrap_json(&spec()), want);
    }

    #[test]
    fn unset_metadata_is_left_out() {
        let s = Spec {
            namespace: None,
            cluster_id: None,
            network: None,
            ..spec()
        };
        assert_eq!(
            bootstrap_json(&s)["node"]["metadata"],
            json!({"GENERATOR": "grpc"})
        );
    }

    #[test]
    fn the_xds_address_comes_from_the_running_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let addresses = sandbox::Addresses {
            xds: "127.0.0.1:40001".into(),
            secure_xds: "127.0.0.1:40002".into(),
            http: "127.0.0.1:40003".into(),
            monitoring: "127.0.0.1:40004".into(),
        };
        addresses.write(dir.path()).unwrap();
        assert_eq!(
            sandbox_xds_address(dir.path()).unwrap(),
            None,
            "no meshd holds the folder"
        );
        let _running = sandbox::StateLock::acquire(dir.path()).unwrap();
        assert_eq!(
            sandbox_xds_address(dir.path()).unwrap().as_deref(),
            Some("127.0.0.1:40001")
        );
        std::fs::write(dir.path().join(sandbox::Addresses::FILE), "{").unwrap();
        assert!(matches!(
            sandbox_xds_address(dir.path()),
            Err(Error::Addresses(_))
        ));
    }
}
