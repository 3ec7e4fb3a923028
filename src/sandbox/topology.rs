//! The sandbox topology: one folder of Kubernetes manifests per cluster, read from disk or from the
//! copy of `clusters/` built into the binary.

use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde_json::Value;

/// The `clusters/` folder, embedded at build time so an installed `meshd` runs the sandbox anywhere.
static EMBEDDED: include_dir::Dir<'static> = include_dir::include_dir!("$CARGO_MANIFEST_DIR/clusters");

/// Largest manifest file read.
const MAX_MANIFEST_BYTES: usize = 8 * 1024 * 1024;

/// A cluster's manifests, in apply order (files sorted by name, documents in file order).
#[derive(Debug, Clone)]
pub struct ClusterManifests {
    /// Cluster ID (the folder name).
    pub name: String,
    /// Objects with their origin (`file#document`), for error messages.
    pub objects: Vec<(String, Value)>,
}

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file or folder could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest is not valid YAML/JSON, or not a Kubernetes object.
    #[error("{origin}: {message}")]
    Invalid {
        /// `file#document`.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// No cluster folders.
    #[error("{0}: no cluster folders (expected one sub-folder of manifests per cluster)")]
    Empty(String),
}

/// Reads every sub-folder of `dir` as a cluster.
pub fn from_dir(dir: &Path) -> Result<Vec<ClusterManifests>, TopologyError> {
    let read_err = |path: &Path| {
        let path = path.to_owned();
        move |source| TopologyError::Read { path, source }
    };
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err(dir))? {
        let entry = entry.map_err(read_err(dir))?;
        if entry.file_type().map_err(read_err(&entry.path()))?.is_dir() {
            folders.push(entry.path());
        }
    }
    folders.sort();
    let mut clusters = Vec::new();
    for folder in folders {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map_err(read_err(&folder))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_manifest(p))
            .collect();
        files.sort();
        let mut texts = Vec::new();
        for file in files {
            let len = std::fs::metadata(&file).map_err(read_err(&file))?.len();
            if len > MAX_MANIFEST_BYTES as u64 {
                return Err(too_large(&file.display().to_string()));
            }
            texts.push((
                file.display().to_string(),
                std::fs::read_to_string(&file).map_err(read_err(&file))?,
            ));
        }
        clusters.push(parse_cluster(folder_name(&folder), texts)?);
    }
    if clusters.is_empty() {
        return Err(TopologyError::Empty(dir.display().to_string()));
    }
    Ok(clusters)
}

/// The built-in `clusters/` topology.
pub fn embedded() -> Result<Vec<ClusterManifests>, TopologyError> {
    let mut folders: Vec<&include_dir::Dir<'_>> = EMBEDDED.dirs().collect();
    folders.sort_by_key(|d| d.path());
    let mut clusters = Vec::new();
    for folder in folders {
        let mut files: Vec<&include_dir::File<'_>> =
            folder.files().filter(|f| is_manifest(f.path())).collect();
        files.sort_by_key(|f| f.path());
        let texts = files
            .into_iter()
            .map(|f| {
                let origin = format!("clusters/{}", f.path().display());
                f.contents_utf8()
                    .map(|t| (origin.clone(), t.to_owned()))
                    .ok_or(TopologyError::Invalid {
                        origin,
                        message: "not UTF-8".into(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        clusters.push(parse_cluster(folder_name(folder.path()), texts)?);
    }
    if clusters.is_empty() {
        return Err(TopologyError::Empty("built-in clusters/".into()));
    }
    Ok(clusters)
}

fn folder_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

fn too_large(origin: &str) -> TopologyError {
    TopologyError::Invalid {
        origin: origin.into(),
        message: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
    }
}

/// Parses multi-document YAML files into objects; `List` kinds are flattened.
fn parse_cluster(name: String, files: Vec<(String, String)>) -> Result<ClusterManifests, TopologyError> {
    let mut objects = Vec::new();
    for (file, text) in files {
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(too_large(&file));
        }
        for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let origin = format!("{file}#{}", i + 1);
            let value = Value::deserialize(doc).map_err(|e| TopologyError::Invalid {
                origin: origin.clone(),
                message: e.to_string(),
            })?;
            match value {
                Value::Null => {}
                Value::Object(ref o)
                    if o.get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    let items = o
                        .get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for (j, item) in items.into_iter().enumerate() {
                        objects.push((format!("{origin}.items[{j}]"), check_object(&origin, item)?));
                    }
                }
                v => objects.push((origin.clone(), check_object(&origin, v)?)),
            }
        }
    }
    Ok(ClusterManifests { name, objects })
}

fn check_object(origin: &str, v: Value) -> Result<Value, TopologyError> {
    let invalid = |message: &str| TopologyError::Invalid {
        origin: origin.into(),
        message: message.into(),
    };
    let o = v
        .as_object()
        .ok_or_else(|| invalid("not a Kubernetes object (expected a mapping)"))?;
    for field in ["apiVersion", "kind"] {
        if !o.get(field).is_some_and(Value::is_string) {
            return Err(invalid(&format!("missing {field}")));
        }
    }
    if !o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .is_some_and(Value::is_string)
    {
        return Err(invalid("missing metadata.name"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_topology_has_the_documented_clusters() {
        let clusters = embedded().unwrap();
        let names: Vec<_> = clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cluster1", "cluster2"]);
        for c in &clusters {
            assert!(
                c.objects.iter().any(|(_, o)| o["kind"] == "EndpointSlice"),
                "{}",
                c.name
            );
            let first_kind = &c.objects[0].1["kind"];
            assert_eq!(first_kind, "Namespace", "namespaces load first in {}", c.name);
        }
    }

    #[test]
    fn bad_manifests_name_file_and_document() {
        let cases = [
            ("a: [\n", "f.yaml#1"),
            ("---\nkind: Service\n", "missing apiVersion"),
            (
                "apiVersion: v1\nkind: Service\nmetadata: {}\n",
                "missing metadata.name",
            ),
            ("- 1\n", "not a Kubernetes object"),
        ];
        for (text, want) in cases {
            let err = parse_cluster("c".into(), vec![("f.yaml".into(), text.into())])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(want) && err.starts_with("f.yaml#"),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn lists_are_flattened_and_empty_documents_skipped() {
        let text = "---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n";
        let c = parse_cluster("c".into(), vec![("f.yaml".into(), text.into())]).unwrap();
        let names: Vec<_> = c
            .objects
            .iter()
            .map(|(_, o)| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn directories_load_in_sorted_order() {
        let dir = tempfile::tempdir().unwrap();
        for (cluster, file, name) in [("b", "20.yaml", "x"), ("a", "10.yaml", "y"), ("a", "05.yml", "z")] {
            std::fs::create_dir_all(dir.path().join(cluster)).unwrap();
            std::fs::write(
                dir.path().join(cluster).join(file),
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n"),
            )
            .unwrap();
        }
        std::fs::write(dir.path().join("a").join("README.md"), "ignored").unwrap();
        let clusters = from_dir(dir.path()).unwrap();
        assert_eq!(clusters[0].name, "a");
        let names: Vec<_> = clusters[0]
            .objects
            .iter()
            .map(|(_, o)| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, ["z", "y"]);
        assert!(matches!(
            from_dir(&dir.path().join("a")),
            Err(TopologyError::Empty(_))
        ));
    }
}
