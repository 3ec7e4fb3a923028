//! The simulated clusters behind the sandbox: started, loaded with the topology, and joined to the
//! primary by remote secrets.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kube_sim::ApiServerConfig;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{
    Keep, default_state_dir,
    serve::{self, ServedCluster},
    topology::ClusterManifests,
};
use crate::multicluster::remote_secret::{self, READER_SERVICE_ACCOUNT, ReaderCredentials};

/// A running sandbox: one simulated API server per cluster folder.
pub struct Sandbox {
    /// The clusters, in topology order.
    pub clusters: Vec<ServedCluster>,
    /// Restored clusters whose folder's manifests are not the ones their store was loaded with.
    pub changed_folders: Vec<String>,
    /// The cluster meshd runs in (its ID).
    pub primary: String,
    /// Where kubeconfigs and certificates are written.
    pub state_dir: PathBuf,
    /// meshd's namespace (remote secrets, the primary's network label).
    pub system_namespace: String,
}

/// Written into `<state-dir>/<cluster>/` once the cluster's store holds its folder's manifests.
const MANIFESTS_LOADED: &str = "manifests-loaded";

/// What [`load_once`] did.
#[derive(Debug, PartialEq, Eq)]
enum Loaded {
    Manifests,
    Restored,
    /// Restored, but the folder's manifests changed since the store was loaded with them (or another
    /// topology loaded it): they are not applied over what the store holds.
    RestoredFromOtherManifests,
}

/// Loads a cluster's manifests unless its store was restored: a restored cluster has what was applied
/// to it since. A crash during the first loading leaves no marker, so the next start applies them again
/// (idempotent). The marker holds the manifests' fingerprint.
fn load_once(
    cluster: &ServedCluster,
    manifests: &ClusterManifests,
    state_dir: &Path,
    keep: Keep,
) -> anyhow::Result<Loaded> {
    let url = cluster.server.url();
    let marker = state_dir.join(&cluster.name).join(MANIFESTS_LOADED);
    let fingerprint = fingerprint(manifests);
    if let (Some(r), Ok(loaded)) = (cluster.server.restored(), std::fs::read_to_string(&marker)) {
        info!(cluster = %cluster.name, objects = r.objects, revision = r.revision, %url, "simulated cluster restored");
        return Ok(if loaded.trim() == fingerprint {
            Loaded::Restored
        } else {
            Loaded::RestoredFromOtherManifests
        });
    }
    let kept = keep != Keep::Memory;
    if kept {
        remove_if_present(&marker)?;
    }
    serve::load(cluster, manifests)?;
    if kept {
        std::fs::write(&marker, fingerprint).with_context(|| format!("writing {}", marker.display()))?;
    }
    info!(cluster = %cluster.name, objects = manifests.objects.len(), %url, "simulated cluster up");
    Ok(Loaded::Manifests)
}

/// A short fingerprint of a folder's objects, in order.
fn fingerprint(manifests: &ClusterManifests) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for (_, object) in &manifests.objects {
        hash.update(object.to_string());
        hash.update([0]);
    }
    hash.finalize()[..12].iter().map(|b| format!("{b:02x}")).collect()
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Starts the topology's clusters, restored from the state folder when `keep` keeps them there and it
/// holds them (else loaded with their manifests), and writes a remote secret for every non-primary cluster
/// into the primary's `system_namespace`.
pub async fn start(
    topology: Vec<ClusterManifests>,
    primary: Option<&str>,
    state_dir: &Path,
    system_namespace: &str,
    keep: Keep,
    shutdown: CancellationToken,
) -> anyhow::Result<Sandbox> {
    let names: Vec<String> = topology.iter().map(|c| c.name.clone()).collect();
    let primary = match primary {
        Some(p) if names.iter().any(|n| n == p) => p.to_owned(),
        Some(p) => anyhow::bail!(
            "--cluster-id {p:?} is not a cluster of the sandbox (clusters: {})",
            names.join(", ")
        ),
        None => names
            .first()
            .cloned()
            .context("the sandbox topology has no clusters")?,
    };
    let template = ApiServerConfig::new("");
    let clusters = serve::start_clusters(&names, state_dir, &template, keep, shutdown).await?;
    let mut changed_folders = Vec::new();
    for (cluster, manifests) in clusters.iter().zip(&topology) {
        if load_once(cluster, manifests, state_dir, keep)? == Loaded::RestoredFromOtherManifests {
            changed_folders.push(cluster.name.clone());
        }
    }
    let sandbox = Sandbox {
        clusters,
        changed_folders,
        primary,
        state_dir: state_dir.to_owned(),
        system_namespace: system_namespace.to_owned(),
    };
    let config_cluster = sandbox.client(&sandbox.primary).await?;
    for remote in sandbox.clusters.iter().filter(|c| c.name != sandbox.primary) {
        let client = sandbox.client(&remote.name).await?;
        remote_secret::ensure_reader(&client, system_namespace, READER_SERVICE_ACCOUNT).await?;
        let (token, ca_pem) =
            remote_secret::long_lived_token(&client, system_namespace, READER_SERVICE_ACCOUNT).await?;
        let creds = ReaderCredentials {
            server: remote.server.url(),
            ca_pem,
            token,
        };
        let secret = remote_secret::secret(&remote.name, system_namespace, &creds)?;
        remote_secret::apply(&config_cluster, &secret).await?;
        info!(cluster = %remote.name, "remote secret written to the primary");
    }
    Ok(sandbox)
}

impl Sandbox {
    /// The admin kubeconfig path of `cluster`.
    pub fn kubeconfig(&self, cluster: &str) -> Option<&Path> {
        self.clusters
            .iter()
            .find(|c| c.name == cluster)
            .map(|c| c.kubeconfig.as_path())
    }

    /// The primary's kubeconfig: what meshd's pipeline reads as its own cluster.
    pub fn primary_kubeconfig(&self) -> anyhow::Result<&Path> {
        self.kubeconfig(&self.primary).context("sandbox primary")
    }

    /// The primary cluster's name.
    pub fn primary(&self) -> &str {
        &self.primary
    }

    /// An admin client for `cluster`.
    pub async fn client(&self, cluster: &str) -> anyhow::Result<kube::Client> {
        let c = self
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .context("no such sandbox cluster")?;
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&c.server.admin_kubeconfig())?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Something to try `meshctl explain` on before any proxy connects: the first Service of the
    /// primary's application namespaces, for a sidecar in that namespace on the primary's network.
    fn explain_example(&self) -> Option<(String, String, String)> {
        let primary = self.clusters.iter().find(|c| c.name == self.primary)?;
        let store = primary.server.store();
        let network = store
            .get("v1", "Namespace", None, &self.system_namespace)?
            .pointer("/metadata/labels/topology.istio.io~1network")?
            .as_str()?
            .to_owned();
        let service = store
            .list("v1", "Service", None)
            .into_iter()
            .filter_map(|svc| {
                let ns = svc.pointer("/metadata/namespace")?.as_str()?.to_owned();
                let name = svc.pointer("/metadata/name")?.as_str()?.to_owned();
                let system = ns == self.system_namespace || ns.starts_with("kube-") || ns == "default";
                (!system).then_some((ns, name))
            })
            .min()?;
        let (ns, name) = service;
        Some((
            format!("sidecar~10.0.0.1~try-0.{ns}~{ns}.svc.cluster.local"),
            format!("{name}.{ns}"),
            network,
        ))
    }

    /// Whether the clusters were restored from the state folder or started fresh, and what to know
    /// about it (a cut-off torn write, a port that moved).
    fn state_summary(&self) -> String {
        let dir = self.state_dir.display();
        let restored: Vec<(&str, &kube_sim::Restored)> = self
            .clusters
            .iter()
            .filter_map(|c| Some((c.name.as_str(), c.server.restored()?)))
            .collect();
        let objects: usize = restored.iter().map(|(_, r)| r.objects).sum();
        let mut out = match restored.len() {
            0 => format!(
                "\n  state: started fresh in {dir} (kept there across restarts; --fresh empties it)\n"
            ),
            n if n == self.clusters.len() => {
                format!("\n  state: restored {objects} objects from {dir} (--fresh starts empty)\n")
            }
            _ => {
                let fresh: Vec<&str> = self
                    .clusters
                    .iter()
                    .filter(|c| c.server.restored().is_none())
                    .map(|c| c.name.as_str())
                    .collect();
                format!(
                    "\n  state: restored {objects} objects from {dir}; started fresh: {}\n",
                    fresh.join(", ")
                )
            }
        };
        for (name, r) in &restored {
            if let Some(cut) = &r.truncated {
                out += &format!("    {name}: the last write was torn by a crash and dropped ({cut})\n");
            }
        }
        for name in &self.changed_folders {
            out += &format!(
                "    {name}: its folder's manifests changed since they were loaded; --fresh loads them\n"
            );
        }
        for c in &self.clusters {
            if let Some(port) = c.moved_from {
                out += &format!(
                    "    {}: port {port} is taken now; moved to {} (kubeconfig rewritten)\n",
                    c.name,
                    c.server.addr().port()
                );
            }
        }
        out
    }

    /// The friendly start-up summary: clusters, kubeconfigs, where meshd serves, what to try next.
    pub fn summary(&self, serving: &[(&str, String)]) -> String {
        let mut out = String::from("\nmeshd sandbox is ready\n\n  clusters:\n");
        for c in &self.clusters {
            let role = if c.name == self.primary {
                "primary"
            } else {
                "remote "
            };
            out += &format!(
                "    {:<10} {role}  {}  kubeconfig: {}\n",
                c.name,
                c.server.url(),
                c.kubeconfig.display()
            );
        }
        out += &self.state_summary();
        out += "\n  meshd:\n";
        for (what, addr) in serving {
            out += &format!("    {what:<22} {addr}\n");
        }
        let remote = self
            .clusters
            .iter()
            .find(|c| c.name != self.primary)
            .unwrap_or(&self.clusters[0]);
        out += &format!(
            "\n  try:\n    kubectl --kubeconfig {} get pods -n sample -o wide\n",
            remote.kubeconfig.display()
        );
        // meshctl finds this meshd through the state folder: the default one, or the variable.
        let meshctl = if self.state_dir == default_state_dir() {
            "meshctl".to_owned()
        } else {
            format!("MESHD_STATE_DIR={} meshctl", self.state_dir.display())
        };
        out += &format!("    {meshctl} remote-clusters\n    {meshctl} proxy-status\n");
        if let Some((proxy, service, network)) = self.explain_example() {
            out += &format!("    {meshctl} explain {proxy} {service} --network {network}\n");
        }
        if let Some((_, admin)) = serving.iter().find(|(w, _)| w.starts_with("monitoring")) {
            out += &format!("    curl -s {admin}/debug/clusterz\n");
        }
        out += "  (meshctl: `cargo build`, then target/debug/meshctl)\n";
        out
    }
}
