//! `PeerAuthentication` (security.istio.io): which mTLS mode workloads accept — mesh-wide (root
//! namespace), per namespace, per workload and per port.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    common::WorkloadSelector,
    validate::{self, Report},
};

/// Istio's `PeerAuthentication`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerAuthentication {
    /// The workloads it applies to; none (or empty): the whole namespace, or mesh in the root namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<WorkloadSelector>,
    /// The mode for every port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtls: Option<Mtls>,
    /// Per workload port (the target port) overrides; workload-level policies only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_level_mtls: Option<BTreeMap<u32, Mtls>>,
}

impl PeerAuthentication {
    /// Whether it applies to selected workloads rather than a namespace or the mesh.
    pub fn is_workload_level(&self) -> bool {
        self.selector.as_ref().is_some_and(|s| !s.match_labels.is_empty())
    }
}

/// Istio's `PeerAuthentication.MutualTLS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Mtls {
    /// The mode.
    pub mode: MtlsMode,
}

/// Istio's `PeerAuthentication.MutualTLS.Mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MtlsMode {
    /// Inherit from the parent scope.
    #[default]
    Unset,
    /// Plaintext only.
    Disable,
    /// mTLS and plaintext.
    Permissive,
    /// mTLS only.
    Strict,
}

/// istiod's `ValidatePeerAuthentication`.
pub(crate) fn validate(pa: &PeerAuthentication, r: &mut Report) {
    if let Some(sel) = &pa.selector {
        sel.validate("spec.selector", r);
    }
    if let Some(ports) = &pa.port_level_mtls {
        if !pa.is_workload_level() {
            r.error("spec.portLevelMtls", "port-level mTLS needs a workload selector");
        }
        if ports.is_empty() {
            r.error("spec.portLevelMtls", "must not be empty when present");
        }
        for port in ports.keys() {
            validate::port(*port, &format!("spec.portLevelMtls.{port}"), r);
        }
    }
}
