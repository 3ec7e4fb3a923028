//! The Istio configuration model: the kinds meshd reads (`networking.istio.io`, `security.istio.io`),
//! typed with Istio's field names, and their validation with istiod's rules for what meshd implements.
//!
//! Pure: [`parse`] turns an object's metadata and its `spec` (JSON, as the API server or a YAML file
//! gives it) into a [`Config`] plus the [`Warning`]s for what meshd ignores, or a [`ConfigError`] that
//! names the object and the field. Every API version of a kind decodes into the same model, as istiod
//! decodes them all into its `v1alpha3` protos. Sources (Kubernetes, files) and the store live in
//! `config_controller`.

mod common;
pub mod destination_rule;
mod destination_rule_rules;
pub mod gateway;
pub mod http_actions;
pub mod l4_route;
pub mod peer_authentication;
pub mod service_entry;
pub mod sidecar;
mod validate;
pub mod virtual_service;
mod virtual_service_rules;
pub mod workload_entry;
pub mod workload_group;

use std::{collections::BTreeMap, fmt, sync::Arc};

use serde::{Deserialize, Serialize};

pub use common::{LabelSelector, Labels, PortSelector, StringMatch, WorkloadSelector};
pub use destination_rule::DestinationRule;
pub use gateway::Gateway;
pub use peer_authentication::PeerAuthentication;
pub use service_entry::ServiceEntry;
pub use sidecar::Sidecar;
pub use virtual_service::VirtualService;
pub use workload_entry::WorkloadEntry;
pub use workload_group::WorkloadGroup;

use crate::model::ClusterId;

/// Largest `spec` meshd decodes, in bytes of JSON; a bigger object is rejected, not buffered further.
pub const MAX_SPEC_BYTES: usize = 1024 * 1024;

/// The Istio kinds meshd reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// `networking.istio.io` DestinationRule.
    DestinationRule,
    /// `networking.istio.io` VirtualService.
    VirtualService,
    /// `networking.istio.io` ServiceEntry.
    ServiceEntry,
    /// `networking.istio.io` WorkloadEntry.
    WorkloadEntry,
    /// `networking.istio.io` WorkloadGroup.
    WorkloadGroup,
    /// `networking.istio.io` Sidecar.
    Sidecar,
    /// `networking.istio.io` Gateway.
    Gateway,
    /// `security.istio.io` PeerAuthentication.
    PeerAuthentication,
}

/// Istio's networking API group.
pub const NETWORKING_GROUP: &str = "networking.istio.io";
/// Istio's security API group.
pub const SECURITY_GROUP: &str = "security.istio.io";

impl Kind {
    /// Every kind, in a fixed order.
    pub const ALL: [Kind; 8] = [
        Kind::DestinationRule,
        Kind::VirtualService,
        Kind::ServiceEntry,
        Kind::WorkloadEntry,
        Kind::WorkloadGroup,
        Kind::Sidecar,
        Kind::Gateway,
        Kind::PeerAuthentication,
    ];

    /// The kind's name as in `kind:` (`DestinationRule`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::DestinationRule => "DestinationRule",
            Kind::VirtualService => "VirtualService",
            Kind::ServiceEntry => "ServiceEntry",
            Kind::WorkloadEntry => "WorkloadEntry",
            Kind::WorkloadGroup => "WorkloadGroup",
            Kind::Sidecar => "Sidecar",
            Kind::Gateway => "Gateway",
            Kind::PeerAuthentication => "PeerAuthentication",
        }
    }

    /// The kind named `name` (as in `kind:`), if meshd reads it.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The API group.
    pub fn group(self) -> &'static str {
        match self {
            Kind::PeerAuthentication => SECURITY_GROUP,
            _ => NETWORKING_GROUP,
        }
    }

    /// Versions Istio's CRDs serve, newest first.
    pub fn versions(self) -> &'static [&'static str] {
        match self {
            Kind::PeerAuthentication => &["v1", "v1beta1"],
            _ => &["v1", "v1beta1", "v1alpha3"],
        }
    }

    /// The version Istio's CRDs store (`storage: true`).
    pub fn storage_version(self) -> &'static str {
        match self {
            Kind::PeerAuthentication => "v1beta1",
            _ => "v1alpha3",
        }
    }

    /// The resource's plural (the URL segment and the CRD name's first part).
    pub fn plural(self) -> &'static str {
        match self {
            Kind::DestinationRule => "destinationrules",
            Kind::VirtualService => "virtualservices",
            Kind::ServiceEntry => "serviceentries",
            Kind::WorkloadEntry => "workloadentries",
            Kind::WorkloadGroup => "workloadgroups",
            Kind::Sidecar => "sidecars",
            Kind::Gateway => "gateways",
            Kind::PeerAuthentication => "peerauthentications",
        }
    }

    /// Short names from Istio's CRDs (`kubectl get dr`).
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Kind::DestinationRule => &["dr"],
            Kind::VirtualService => &["vs"],
            Kind::ServiceEntry => &["se"],
            Kind::WorkloadEntry => &["we"],
            Kind::WorkloadGroup => &["wg"],
            Kind::Sidecar => &[],
            Kind::Gateway => &["gw"],
            Kind::PeerAuthentication => &["pa"],
        }
    }

    /// The CRD's name, `<plural>.<group>`.
    pub fn crd_name(self) -> String {
        format!("{}.{}", self.plural(), self.group())
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An object's identity: kind, namespace and name. The store's key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The kind.
    pub kind: Kind,
    /// The namespace.
    pub namespace: Arc<str>,
    /// The name.
    pub name: Arc<str>,
}

impl ObjectRef {
    /// The reference to `kind` `namespace/name`.
    pub fn new(kind: Kind, namespace: &str, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A Kubernetes cluster's API server (the config cluster).
    Cluster(ClusterId),
    /// A YAML file under `--config-dir`: its path and the 0-based index of the document in it.
    File {
        /// The file.
        path: Arc<str>,
        /// The document's index in the file.
        index: usize,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Cluster(c) => write!(f, "cluster {c}"),
            Source::File { path, index } => write!(f, "file {path} document {index}"),
        }
    }
}

/// An object's metadata: what meshd keeps of `metadata` plus where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The namespace.
    pub namespace: Arc<str>,
    /// The name.
    pub name: Arc<str>,
    /// `metadata.labels`.
    pub labels: Labels,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `metadata.resourceVersion` for a cluster object, a content hash for a file's.
    pub revision: String,
    /// `metadata.creationTimestamp` (RFC 3339, UTC), which orders objects where istiod says "oldest
    /// wins"; files have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Where the object came from.
    pub source: Source,
}

/// A typed spec, one variant per kind; `Arc`ed, so snapshots share them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Spec {
    /// A DestinationRule.
    DestinationRule(Arc<DestinationRule>),
    /// A VirtualService.
    VirtualService(Arc<VirtualService>),
    /// A ServiceEntry.
    ServiceEntry(Arc<ServiceEntry>),
    /// A WorkloadEntry.
    WorkloadEntry(Arc<WorkloadEntry>),
    /// A WorkloadGroup.
    WorkloadGroup(Arc<WorkloadGroup>),
    /// A Sidecar.
    Sidecar(Arc<Sidecar>),
    /// A Gateway.
    Gateway(Arc<Gateway>),
    /// A PeerAuthentication.
    PeerAuthentication(Arc<PeerAuthentication>),
}

impl Spec {
    /// The spec's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::DestinationRule(_) => Kind::DestinationRule,
            Spec::VirtualService(_) => Kind::VirtualService,
            Spec::ServiceEntry(_) => Kind::ServiceEntry,
            Spec::WorkloadEntry(_) => Kind::WorkloadEntry,
            Spec::WorkloadGroup(_) => Kind::WorkloadGroup,
            Spec::Sidecar(_) => Kind::Sidecar,
            Spec::Gateway(_) => Kind::Gateway,
            Spec::PeerAuthentication(_) => Kind::PeerAuthentication,
        }
    }
}

/// One Istio object: metadata and typed spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Metadata.
    pub meta: ObjectMeta,
    /// The typed spec.
    pub spec: Spec,
}

impl Config {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    /// The object's identity.
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            kind: self.kind(),
            namespace: self.meta.namespace.clone(),
            name: self.meta.name.clone(),
        }
    }

    /// The hosts the object names (a DestinationRule's `host`, a VirtualService's and ServiceEntry's
    /// `hosts` and route destinations, a Sidecar's egress hosts): what a change of it can affect.
    /// Empty for kinds that select workloads rather than hosts.
    pub fn hosts(&self) -> Vec<String> {
        match &self.spec {
            Spec::DestinationRule(dr) => vec![dr.host.clone()],
            Spec::VirtualService(vs) => vs.named_hosts(),
            Spec::ServiceEntry(se) => se.hosts.clone(),
            Spec::Sidecar(sc) => sc.egress.iter().flat_map(|e| e.hosts.iter().cloned()).collect(),
            Spec::Gateway(gw) => gw.servers.iter().flat_map(|s| s.hosts.iter().cloned()).collect(),
            Spec::WorkloadEntry(_) | Spec::WorkloadGroup(_) | Spec::PeerAuthentication(_) => Vec::new(),
        }
    }
}

/// Something meshd accepted but does not act on, or istiod's "admitted with a warning".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}{message}", field_prefix(.field))]
pub struct Warning {
    /// Path of the field, e.g. `spec.trafficPolicy.tunnel`.
    pub field: String,
    /// What meshd does with it.
    pub message: String,
}

/// One field's problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}{message}", field_prefix(.field))]
pub struct FieldError {
    /// Path of the field, e.g. `spec.subsets[1].name`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}

/// Why an object was rejected. Each names the object and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The spec does not decode into the kind's model (wrong type, unknown enum value).
    #[error("{object}: {error}")]
    Decode {
        /// The object.
        object: ObjectRef,
        /// The field and what is wrong.
        error: FieldError,
    },
    /// The spec decodes but breaks one of istiod's validation rules.
    #[error("{object}: {}", join(.errors))]
    Invalid {
        /// The object.
        object: ObjectRef,
        /// Every broken rule, in field order.
        errors: Vec<FieldError>,
    },
    /// The spec is larger than [`MAX_SPEC_BYTES`].
    #[error("{object}: spec is {size} bytes, over the {MAX_SPEC_BYTES}-byte limit")]
    TooLarge {
        /// The object.
        object: ObjectRef,
        /// The spec's size.
        size: usize,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ConfigError {
    /// The rejected object.
    pub fn object(&self) -> &ObjectRef {
        match self {
            ConfigError::Decode { object, .. }
            | ConfigError::Invalid { object, .. }
            | ConfigError::TooLarge { object, .. } => object,
        }
    }

    /// The first offending field's path (`spec` for a whole-spec problem).
    pub fn field(&self) -> &str {
        match self {
            ConfigError::Decode { error, .. } => &error.field,
            ConfigError::Invalid { errors, .. } => errors.first().map_or("spec", |e| &e.field),
            ConfigError::TooLarge { .. } => "spec",
        }
    }
}

/// Decodes and validates one object of `kind`: its metadata and `spec` (a JSON value; `null` or
/// absent is an empty spec). Returns the object and the warnings for what meshd ignores (unknown
/// fields by path, fields it reads but does not implement, istiod's admit-with-warning rules).
pub fn parse(
    kind: Kind,
    meta: ObjectMeta,
    spec: &serde_json::Value,
) -> Result<(Config, Vec<Warning>), ConfigError> {
    let object = ObjectRef {
        kind,
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
    };
    let size = serde_json::to_vec(spec).map_or(usize::MAX, |v| v.len());
    if size > MAX_SPEC_BYTES {
        return Err(ConfigError::TooLarge { object, size });
    }
    let empty = serde_json::Value::Object(Default::default());
    let spec = if spec.is_null() { &empty } else { spec };
    let mut report = validate::Report::default();
    validate::metadata(&meta, &mut report);
    let spec = match kind {
        Kind::DestinationRule => Spec::DestinationRule(decode(&object, spec, &mut report, |s, r| {
            destination_rule_rules::validate(s, &meta.namespace, r)
        })?),
        Kind::VirtualService => Spec::VirtualService(decode(&object, spec, &mut report, |s, r| {
            virtual_service_rules::validate(s, &meta.namespace, r)
        })?),
        Kind::ServiceEntry => Spec::ServiceEntry(decode(&object, spec, &mut report, |s, r| {
            service_entry::validate(s, &meta.namespace, r)
        })?),
        Kind::WorkloadEntry => Spec::WorkloadEntry(decode(&object, spec, &mut report, |s, r| {
            workload_entry::validate_object(s, r)
        })?),
        Kind::WorkloadGroup => {
            Spec::WorkloadGroup(decode(&object, spec, &mut report, workload_group::validate)?)
        }
        Kind::Sidecar => Spec::Sidecar(decode(&object, spec, &mut report, |s, r| {
            sidecar::validate(s, &meta.namespace, r)
        })?),
        Kind::Gateway => Spec::Gateway(decode(&object, spec, &mut report, |s, r| {
            gateway::validate(s, &meta.name, r)
        })?),
        Kind::PeerAuthentication => {
            Spec::PeerAuthentication(decode(&object, spec, &mut report, peer_authentication::validate)?)
        }
    };
    let (errors, warnings) = report.finish();
    if !errors.is_empty() {
        return Err(ConfigError::Invalid { object, errors });
    }
    Ok((Config { meta, spec }, warnings))
}

/// Decodes `spec` into `T` (unknown fields become warnings), then runs `check` on it.
fn decode<'a, T: Deserialize<'a>>(
    object: &ObjectRef,
    spec: &'a serde_json::Value,
    report: &mut validate::Report,
    check: impl FnOnce(&T, &mut validate::Report),
) -> Result<Arc<T>, ConfigError> {
    let mut unknown = Vec::new();
    let value: T = crate::config::deserialize_tracked(spec, &mut |p| unknown.push(p)).map_err(|e| {
        let field = spec_path(&e.path().to_string());
        ConfigError::Decode {
            object: object.clone(),
            error: FieldError {
                field,
                message: e.into_inner().to_string(),
            },
        }
    })?;
    for path in unknown {
        report.warn(spec_path(&path), "unknown field, ignored");
    }
    check(&value, report);
    Ok(Arc::new(value))
}

/// A path inside `spec` as the user sees it: `spec.subsets[0].name`.
fn spec_path(path: &str) -> String {
    if path.is_empty() || path == "." {
        "spec".into()
    } else {
        format!("spec.{path}")
    }
}

#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;
