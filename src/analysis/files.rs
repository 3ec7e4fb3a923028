//! Analyzer input from YAML files, as `istioctl analyze --use-kube=false` reads them (`meshctl analyze
//! -f`, and Istio's analyzer table in `tests/integration/analysis_istio.rs`): the Istio objects of the kinds meshd
//! reads, decoded without validation so that invalid ones are analyzed too (each also reported as
//! IST0106 with meshd's reason), and the Kubernetes Services, Pods and Nodes turned into one cluster's
//! registry, `files`. `kind: List` documents contribute their items; other kinds are skipped.

use std::{collections::BTreeMap, sync::Arc};

use serde_json::Value;

use super::{Code, Input, Message, Service, Workload};
use crate::{
    config_controller::yaml,
    istio::{self, Config, Kind, ObjectMeta, Source, Spec},
    traffic::{Settings, Visibility, hosts::resolve},
};

/// The cluster name the files' objects are given.
pub const CLUSTER: &str = "files";

/// Why files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A document is not YAML.
    #[error("{file}: document {index} is not YAML: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// The document's 0-based index.
        index: usize,
        /// The parser's words.
        message: String,
    },
}

/// What the files hold.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The analyzers' input.
    pub input: Input,
    /// IST0106 for each Istio object meshd's validation rejects, or that does not decode at all
    /// (those are not analyzed).
    pub invalid: Vec<Message>,
}

/// Reads `files` (name, text) and an optional mesh config (its text: only
/// `defaultConfig.proxyMetadata`'s DNS auto-allocation is read).
pub fn load(files: &[(String, String)], mesh_config: Option<&str>) -> Result<Loaded, FilesError> {
    let mut loaded = Loaded::default();
    let mut kube = Vec::new();
    for (file, text) in files {
        for (index, o) in objects(file, text)?.into_iter().enumerate() {
            match istio_config(file, index, &o) {
                Some(Ok((config, invalid))) => {
                    loaded.invalid.extend(invalid);
                    loaded.input.configs.push(Arc::new(config));
                }
                Some(Err((object, e))) => loaded.invalid.push(Message::new(
                    Code::SchemaValidationError,
                    &object,
                    format!("Schema validation error: {e}"),
                )),
                None => kube.push(o),
            }
        }
    }
    let settings = Settings::default();
    let workloads = pods(&kube);
    let mut services = kubernetes_services(&kube, &workloads, &settings);
    services.extend(service_entry_services(
        &loaded.input.configs,
        &workloads,
        &settings,
    ));
    loaded.input.services = services;
    loaded.input.workloads = workloads;
    loaded.input.settings = settings;
    loaded.input.dns_auto_allocate = mesh_config.is_some_and(dns_auto_allocate);
    Ok(loaded)
}

/// The documents of a file as JSON, `kind: List` items in place of the list.
fn objects(file: &str, text: &str) -> Result<Vec<Value>, FilesError> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(d) = docs.last_mut() {
            d.push_str(line);
            d.push('\n');
        }
    }
    let mut out = Vec::new();
    for (index, d) in docs.iter().enumerate() {
        let error = |message: String| FilesError::Yaml {
            file: file.to_owned(),
            index,
            message,
        };
        let v = yaml::from_str(d).map_err(|e| error(e.to_string()))?;
        let v = serde_json::to_value(v).map_err(|e| error(e.to_string()))?;
        match v["kind"].as_str() {
            Some("List") => out.extend(v["items"].as_array().cloned().unwrap_or_default()),
            Some(_) => out.push(v),
            None => {}
        }
    }
    Ok(out)
}

fn strings(v: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

fn namespace(v: &Value) -> String {
    v["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned()
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or_default().to_owned()
}

/// An Istio object of a kind meshd reads, decoded without validation, with meshd's IST0106 when its
/// validation rejects it; the object and the decoding error when it does not decode. `None` for
/// other kinds.
#[allow(clippy::type_complexity)]
fn istio_config(
    file: &str,
    index: usize,
    o: &Value,
) -> Option<Result<(Config, Option<Message>), (istio::ObjectRef, serde_json::Error)>> {
    let (group, _) = o["apiVersion"].as_str()?.split_once('/')?;
    let kind = Kind::from_name(o["kind"].as_str()?).filter(|k| k.group() == group)?;
    let meta = ObjectMeta {
        namespace: namespace(o).into(),
        name: name(o).into(),
        labels: strings(&o["metadata"]["labels"]),
        annotations: strings(&o["metadata"]["annotations"]),
        revision: "1".into(),
        creation_timestamp: o["metadata"]["creationTimestamp"].as_str().map(Into::into),
        source: Source::File {
            path: file.into(),
            index,
        },
    };
    let object = istio::ObjectRef::new(kind, &meta.namespace, &meta.name);
    let spec = match &o["spec"] {
        Value::Null => Value::Object(Default::default()),
        v => v.clone(),
    };
    let invalid = istio::parse(kind, meta.clone(), &spec).err().map(|e| {
        Message::new(
            Code::SchemaValidationError,
            &object,
            format!("Schema validation error: {e}"),
        )
    });
    fn arc<T: serde::de::DeserializeOwned>(v: Value) -> Result<Arc<T>, serde_json::Error> {
        serde_json::from_value(v).map(Arc::new)
    }
    let spec = match kind {
        Kind::DestinationRule => arc(spec).map(Spec::DestinationRule),
        Kind::VirtualService => arc(spec).map(Spec::VirtualService),
        Kind::ServiceEntry => arc(spec).map(Spec::ServiceEntry),
        Kind::WorkloadEntry => arc(spec).map(Spec::WorkloadEntry),
        Kind::WorkloadGroup => arc(spec).map(Spec::WorkloadGroup),
        Kind::Sidecar => arc(spec).map(Spec::Sidecar),
        Kind::Gateway => arc(spec).map(Spec::Gateway),
        Kind::PeerAuthentication => arc(spec).map(Spec::PeerAuthentication),
    };
    Some(
        spec.map(|spec| (Config { meta, spec }, invalid))
            .map_err(|e| (object, e)),
    )
}

/// Pods as workloads, with their node's topology labels as istiod adds them (never an empty value).
fn pods(kube: &[Value]) -> Vec<Workload> {
    let nodes: BTreeMap<String, BTreeMap<String, String>> = kube
        .iter()
        .filter(|o| o["kind"] == "Node")
        .map(|o| (name(o), strings(&o["metadata"]["labels"])))
        .collect();
    kube.iter()
        .filter(|o| o["kind"] == "Pod")
        .map(|o| {
            let mut labels = strings(&o["metadata"]["labels"]);
            let node = o["spec"]["nodeName"].as_str().unwrap_or_default();
            if let Some(node_labels) = nodes.get(node) {
                for key in [
                    crate::model::LABEL_REGION,
                    crate::model::LABEL_ZONE,
                    crate::model::LABEL_SUBZONE,
                ] {
                    if let Some(v) = node_labels.get(key).filter(|v| !v.is_empty()) {
                        labels.insert(key.to_owned(), v.clone());
                    }
                }
                labels.insert("kubernetes.io/hostname".into(), node.to_owned());
            }
            Workload {
                namespace: namespace(o),
                name: name(o),
                cluster: CLUSTER.into(),
                labels,
            }
        })
        .collect()
}

/// Kubernetes Services, their endpoints the pods their selector picks in their namespace, their
/// visibility the `networking.istio.io/exportTo` annotation.
fn kubernetes_services(kube: &[Value], pods: &[Workload], settings: &Settings) -> Vec<Service> {
    kube.iter()
        .filter(|o| o["kind"] == "Service")
        .map(|o| {
            let ns = namespace(o);
            let selector = strings(&o["spec"]["selector"]);
            let values: Vec<String> = o["metadata"]["annotations"]["networking.istio.io/exportTo"]
                .as_str()
                .map(|list| list.split(',').map(|s| s.trim().to_owned()).collect())
                .unwrap_or_default();
            let visibility = Visibility::of_config(&values, &ns, settings.default_service_export);
            Service {
                hostname: format!("{}.{ns}.svc.{}", name(o), settings.domain_suffix),
                namespace: ns.clone(),
                ports: o["spec"]["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["port"].as_u64().and_then(|n| u32::try_from(n).ok()))
                    .collect(),
                visibility,
                clusters: [CLUSTER.to_owned()].into(),
                endpoints: pods
                    .iter()
                    .filter(|w| !selector.is_empty() && w.namespace == ns && w.selected_by(&selector))
                    .cloned()
                    .collect(),
            }
        })
        .collect()
}

/// A service per ServiceEntry host: its endpoints the pods its `workloadSelector` picks, else its
/// inline endpoints.
fn service_entry_services(configs: &[Arc<Config>], pods: &[Workload], settings: &Settings) -> Vec<Service> {
    let mut out = Vec::new();
    for c in configs {
        let Spec::ServiceEntry(se) = &c.spec else {
            continue;
        };
        let ns = &*c.meta.namespace;
        let endpoints: Vec<Workload> = match &se.workload_selector {
            Some(sel) => pods
                .iter()
                .filter(|w| w.namespace == ns && w.selected_by(&sel.labels))
                .cloned()
                .collect(),
            None => se
                .endpoints
                .iter()
                .map(|e| Workload {
                    namespace: ns.to_owned(),
                    name: e.address.clone(),
                    cluster: CLUSTER.into(),
                    labels: e.labels.clone(),
                })
                .collect(),
        };
        for host in &se.hosts {
            out.push(Service {
                hostname: resolve(host, ns, &settings.domain_suffix).to_string(),
                namespace: ns.to_owned(),
                ports: se.ports.iter().map(|p| p.number).collect(),
                visibility: Visibility::of_config(&se.export_to, ns, settings.default_service_export),
                clusters: [CLUSTER.to_owned()].into(),
                endpoints: endpoints.clone(),
            });
        }
    }
    out
}

/// istioctl's rule: ServiceEntry addresses are allocated when the mesh config's proxy metadata turns
/// both DNS capture and auto-allocation on.
fn dns_auto_allocate(mesh_config: &str) -> bool {
    let Ok(v) = yaml::from_str(mesh_config).map(|v| serde_json::to_value(v).unwrap_or_default()) else {
        return false;
    };
    let meta = &v["defaultConfig"]["proxyMetadata"];
    meta["ISTIO_META_DNS_CAPTURE"] == "true" && meta["ISTIO_META_DNS_AUTO_ALLOCATE"] == "true"
}
