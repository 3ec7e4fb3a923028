//! The kubeconfig folder source (istiod 1.30's `PILOT_MULTICLUSTER_KUBECONFIG_PATH`): remote clusters
//! from the kubeconfig files of a mounted folder instead of labelled Secrets. Each file is one
//! kubeconfig; its cluster ID comes from its content as istiod derives it ([`cluster_id`]). The
//! folder is read into the same [`SecretData`] the Secret watcher builds, so validation, duplicate
//! IDs and make-before-break rotation are the Secrets' ([`super::secrets::desired`]). Reading is
//! synchronous and bounded; the controller polls it.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
};

use sha2::{Digest, Sha256};

use super::secrets::{Rejected, SecretData, SecretEntry};
use crate::model::ClusterId;

/// Largest kubeconfig file read; a bigger one is refused rather than buffered.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most files read from the folder (as many as Secrets are watched).
const MAX_FILES: usize = 1024;

/// Why the folder could not be read at all (a file that cannot be used is a [`Rejected`] instead).
#[derive(Debug, thiserror::Error)]
#[error("kubeconfig folder {dir}: {source}")]
pub struct DirError {
    /// The folder.
    pub dir: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// The folder as the controller uses it.
#[derive(Debug, Default, PartialEq)]
pub struct Folder {
    /// One entry per usable file, named by its path, its cluster ID → its content.
    pub secrets: SecretData,
    /// Files that cannot be used, and why.
    pub rejected: Vec<Rejected>,
    /// Digest of every file name and content, which tells a change.
    pub digest: [u8; 32],
}

/// Reads every regular file of `dir` (symlinks followed, as a mounted Secret's are; names starting
/// with `.` skipped: a mounted volume's `..data` machinery), in name order.
pub fn read(dir: &Path) -> Result<Folder, DirError> {
    let err = |source| DirError {
        dir: dir.to_owned(),
        source,
    };
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map_err(err)?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            (!name.starts_with('.') && e.path().is_file()).then(|| (name, e.path()))
        })
        .collect();
    files.sort();
    let mut out = Folder::default();
    let mut hash = Sha256::new();
    for (i, (name, path)) in files.into_iter().enumerate() {
        let shown = path.display().to_string();
        let reject = |reason: String| Rejected {
            cluster: ClusterId::from(name.as_str()),
            secret: shown.clone(),
            reason,
        };
        if i >= MAX_FILES {
            out.rejected.push(reject(format!(
                "more than {MAX_FILES} files in the folder; ignored"
            )));
            continue;
        }
        let bytes = match read_capped(&path) {
            Ok(b) => b,
            Err(reason) => {
                out.rejected.push(reject(reason));
                continue;
            }
        };
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(&bytes);
        hash.update([0]);
        match cluster_id(&bytes) {
            Ok(id) => {
                let data = BTreeMap::from([(id, Arc::<[u8]>::from(bytes))]);
                out.secrets.insert(
                    shown,
                    SecretEntry {
                        data,
                        ..SecretEntry::default()
                    },
                );
            }
            Err(reason) => out.rejected.push(reject(reason)),
        }
    }
    out.digest = hash.finalize().into();
    Ok(out)
}

fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MAX_FILE_BYTES {
        return Err(format!("{size} bytes is over the {MAX_FILE_BYTES}-byte limit"));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

/// istiod's `clusterIDFromKubeconfig`: the cluster of the current context; else of the first context
/// (by name) naming one; else the first cluster name.
pub fn cluster_id(bytes: &[u8]) -> Result<String, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "kubeconfig is not UTF-8".to_owned())?;
    let kc =
        kube::config::Kubeconfig::from_yaml(text).map_err(|e| format!("kubeconfig is not valid: {e}"))?;
    let cluster_of = |name: &str| {
        kc.contexts
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.context.as_ref())
            .map(|c| c.cluster.clone())
            .filter(|c| !c.is_empty())
    };
    if let Some(id) = kc.current_context.as_deref().and_then(cluster_of) {
        return Ok(id);
    }
    let mut contexts: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    contexts.sort_unstable();
    if let Some(id) = contexts.into_iter().find_map(cluster_of) {
        return Ok(id);
    }
    kc.clusters
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !n.is_empty())
        .min()
        .map(str::to_owned)
        .ok_or_else(|| "cannot tell the cluster ID: the kubeconfig names no context or cluster".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_id_follows_istiods_order() {
        let cases = [
            (
                "current-context: b\ncontexts: [{name: a, context: {cluster: ca, user: u}}, \
                 {name: b, context: {cluster: cb, user: u}}]\nclusters: [{name: ca}, {name: cb}]\n",
                Ok("cb"),
            ),
            (
                "contexts: [{name: z, context: {cluster: cz, user: u}}, {name: m, context: {cluster: cm, user: u}}]\n",
                Ok("cm"),
            ),
            (
                "current-context: gone\nclusters: [{name: west, cluster: {server: 'https://w'}}, \
                 {name: east, cluster: {server: 'https://e'}}]\n",
                Ok("east"),
            ),
            ("users: []\n", Err("names no context or cluster")),
            ("{{{", Err("kubeconfig is not valid")),
        ];
        for (yaml, want) in cases {
            let got = cluster_id(yaml.as_bytes());
            match (got, want) {
                (Ok(id), Ok(w)) => assert_eq!(id, w, "{yaml}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{yaml}: {e}"),
                (got, want) => panic!("{yaml}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_folder_reads_files_in_order_skips_dot_entries_and_reports_unusable_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kc = |cluster: &str| {
            format!(
                "current-context: x\ncontexts: [{{name: x, context: {{cluster: {cluster}, user: u}}}}]\n\
                 clusters: [{{name: {cluster}, cluster: {{server: 'https://{cluster}'}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n"
            )
        };
        std::fs::write(dir.path().join("b.yaml"), kc("cluster3")).expect("write");
        std::fs::write(dir.path().join("a.yaml"), kc("cluster2")).expect("write");
        std::fs::write(dir.path().join("..data"), kc("hidden")).expect("write");
        std::fs::write(dir.path().join("junk"), "users: []\n").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let folder = read(dir.path()).expect("reads");
        let ids: Vec<(String, Vec<&String>)> = folder
            .secrets
            .iter()
            .map(|(name, e)| {
                (
                    name.rsplit('/').next().unwrap_or_default().to_owned(),
                    e.data.keys().collect(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("a.yaml".to_owned(), vec![&"cluster2".to_owned()]),
                ("b.yaml".to_owned(), vec![&"cluster3".to_owned()])
            ]
        );
        assert_eq!(folder.rejected.len(), 1);
        assert!(
            folder.rejected[0].secret.ends_with("/junk"),
            "{:?}",
            folder.rejected
        );
        let again = read(dir.path()).expect("reads");
        assert_eq!(again.digest, folder.digest);
        std::fs::write(dir.path().join("b.yaml"), kc("cluster4")).expect("write");
        assert_ne!(read(dir.path()).expect("reads").digest, folder.digest);
        assert!(read(&dir.path().join("missing")).is_err());
    }
}
