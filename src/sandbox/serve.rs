//! Starts simulated clusters for `meshctl sandbox serve`: one API server per cluster, admin kubeconfigs on disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Keep;
use crate::model::is_dns1123_label;
use kube_sim::{ApiServer, ApiServerConfig, RequestLog};

/// A started cluster and where its admin kubeconfig was written.
pub struct ServedCluster {
    pub name: String,
    pub server: ApiServer,
    pub kubeconfig: PathBuf,
    /// The port of the previous run, when it was taken and the cluster moved to a new one.
    pub moved_from: Option<u16>,
}

/// The store folder of cluster `name` in a state folder.
fn store_dir(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(name).join("store")
}

/// The port of the API server an earlier run wrote into `kubeconfig`, if it names one on loopback.
fn previous_port(kubeconfig: &Path) -> Option<u16> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).ok()?;
    let server = config.clusters.first()?.cluster.as_ref()?.server.as_deref()?;
    let uri: http::Uri = server.parse().ok()?;
    (uri.host() == Some("127.0.0.1")).then(|| uri.port_u16())?
}

/// Cluster names from `--clusters`: the subdirectories of a directory (sorted), or a comma-separated list.
pub fn cluster_names(spec: &str) -> anyhow::Result<Vec<String>> {
    let path = Path::new(spec);
    let names: Vec<String> = if path.is_dir() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).with_context(|| format!("reading {spec}"))? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        names
    } else {
        spec.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    anyhow::ensure!(!names.is_empty(), "no cluster names in {spec:?}");
    if let Some(bad) = names.iter().find(|n| !is_dns1123_label(n)) {
        anyhow::bail!(
            "{spec:?} is neither a directory nor a comma-separated list of cluster names: {bad:?} is not a \
             DNS label"
        );
    }
    Ok(names)
}

/// Starts one API server per name on a loopback port and writes `<state_dir>/<name>/kubeconfig`.
/// Every cluster gets `template`'s settings (request log, RBAC) under its own name. Kept in the state
/// folder, a cluster is restored from it and takes its previous port again when that is free (a free
/// one otherwise). Istio's CRDs are applied at every start, so a restored cluster gets the binary's.
pub async fn start_clusters(
    names: &[String],
    state_dir: &Path,
    template: &ApiServerConfig,
    keep: Keep,
    shutdown: CancellationToken,
) -> anyhow::Result<Vec<ServedCluster>> {
    let mut clusters = Vec::new();
    for name in names {
        let dir = state_dir.join(name);
        let kubeconfig = dir.join("kubeconfig");
        let mut cfg = ApiServerConfig {
            cluster_name: name.clone(),
            ..template.clone()
        };
        let mut previous = None;
        if let Keep::StateDir { fresh } = keep {
            let store = store_dir(state_dir, name);
            if fresh && let Err(e) = std::fs::remove_dir_all(&store) {
                anyhow::ensure!(
                    e.kind() == std::io::ErrorKind::NotFound,
                    "emptying {}: {e}",
                    store.display()
                );
            }
            previous = previous_port(&kubeconfig);
            cfg.bind.set_port(previous.unwrap_or(0));
            cfg.store_dir = Some(store);
        }
        let started = match ApiServer::start(cfg.clone(), shutdown.clone()).await {
            Err(kube_sim::Error::Bind { .. }) if previous.is_some() => {
                cfg.bind.set_port(0);
                ApiServer::start(cfg, shutdown.clone()).await
            }
            started => started,
        };
        let server = match started {
            Err(e @ kube_sim::Error::Persist(_)) => {
                return Err(anyhow::Error::new(e).context(format!(
                    "starting cluster {name} (meshd --fresh starts it empty instead)"
                )));
            }
            started => started.with_context(|| format!("starting cluster {name}"))?,
        };
        let moved_from = previous.filter(|p| *p != server.addr().port());
        load_istio_crds(&server).with_context(|| format!("loading Istio's CRDs into {name}"))?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        write_private(&kubeconfig, &server.admin_kubeconfig())?;
        clusters.push(ServedCluster {
            name: name.clone(),
            server,
            kubeconfig,
            moved_from,
        });
    }
    Ok(clusters)
}

/// The one-line readiness report: `{"clusters":{"<name>":{"url":…,"kubeconfig":…}}}`.
pub fn ready_report(clusters: &[ServedCluster]) -> Value {
    let map: serde_json::Map<String, Value> = clusters
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                json!({"url": c.server.url(), "kubeconfig": c.kubeconfig.display().to_string()}),
            )
        })
        .collect();
    json!({"clusters": map})
}

/// Kubeconfigs hold the admin token: owner-only permissions.
fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// Istio's CRDs as the chart installs them (helm/meshd/crds/istio.yaml).
const ISTIO_CRDS: &str = include_str!("../../helm/meshd/crds/istio.yaml");

/// Loads Istio's CRDs into a cluster before any manifest, through the same write path as manifests: every
/// simulated cluster has them, as remote clusters of a real mesh do.
fn load_istio_crds(server: &ApiServer) -> anyhow::Result<()> {
    use serde::Deserialize;
    for (i, doc) in serde_yaml::Deserializer::from_str(ISTIO_CRDS).enumerate() {
        let crd = Value::deserialize(doc).with_context(|| format!("helm/meshd/crds/istio.yaml#{}", i + 1))?;
        if crd.is_null() {
            continue;
        }
        server
            .store()
            .apply(crd)
            .with_context(|| format!("helm/meshd/crds/istio.yaml#{}", i + 1))?;
    }
    Ok(())
}

/// Applies a cluster folder's manifests to its simulated API server.
pub fn load(cluster: &ServedCluster, manifests: &super::topology::ClusterManifests) -> anyhow::Result<()> {
    for (origin, object) in &manifests.objects {
        cluster
            .server
            .store()
            .apply(object.clone())
            .with_context(|| format!("loading {origin} into {}", cluster.name))?;
    }
    Ok(())
}

/// `meshctl sandbox serve`: starts the clusters (loading each folder's manifests when `spec` is a
/// directory), prints the readiness report, and serves until SIGTERM or ctrl-c. With `request_log`,
/// every request is appended to that file as a JSON line; with `enforce_rbac`, requests are authorized
/// by the stored RBAC objects.
pub async fn run(
    spec: &str,
    state_dir: &Path,
    request_log: Option<&Path>,
    enforce_rbac: bool,
) -> anyhow::Result<()> {
    let dir = Path::new(spec);
    let topology = if dir.is_dir() {
        super::topology::from_dir(dir).with_context(|| format!("loading {spec}"))?
    } else {
        Vec::new()
    };
    let names = cluster_names(spec)?;
    let shutdown = CancellationToken::new();
    let request_log = request_log
        .map(|p| RequestLog::open(p).with_context(|| format!("opening the request log {}", p.display())))
        .transpose()?
        .map(Arc::new);
    let template = ApiServerConfig {
        request_log,
        enforce_rbac,
        ..ApiServerConfig::new("")
    };
    let started = start_clusters(&names, state_dir, &template, Keep::Memory, shutdown.clone()).await?;
    for manifests in &topology {
        let Some(cluster) = started.iter().find(|c| c.name == manifests.name) else {
            continue;
        };
        load(cluster, manifests)?;
    }
    println!("{}", ready_report(&started));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("ctrl-c handler")?,
    }
    shutdown.cancel();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_are_folders_or_dns_labels() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        assert_eq!(cluster_names(dir.path().to_str().unwrap()).unwrap(), ["a", "b"]);
        assert_eq!(cluster_names("primary, remote").unwrap(), ["primary", "remote"]);
        let err = cluster_names("./missing-folder").unwrap_err().to_string();
        assert!(
            err.contains("neither a directory") && err.contains("\"./missing-folder\" is not a DNS label"),
            "{err}"
        );
        assert!(cluster_names(" , ").is_err());
    }

    #[test]
    fn the_previous_port_is_read_from_a_loopback_kubeconfig_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let kubeconfig = |server: &str| {
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{server}\"}}\n\
                 contexts: []\nusers: []\n"
            )
        };
        let cases = [
            (kubeconfig("https://127.0.0.1:34567"), Some(34567)),
            (kubeconfig("https://10.0.0.1:34567"), None),
            (kubeconfig("https://127.0.0.1"), None),
            ("{".to_owned(), None),
        ];
        assert_eq!(previous_port(&path), None, "no kubeconfig yet");
        for (text, want) in cases {
            std::fs::write(&path, &text).unwrap();
            assert_eq!(previous_port(&path), want, "{text}");
        }
    }
}
