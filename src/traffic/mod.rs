//! Istio traffic config as proxies see it (stand-in for the foundation's module until it lands).

pub mod hosts;
pub mod sidecar_scope;
pub mod visibility;

use std::sync::Arc;

use crate::config::mesh::MeshConfig;

/// Mesh-wide settings the index reads.
#[derive(Debug, Clone)]
pub struct Settings {
    /// MeshConfig's `rootNamespace`.
    pub root_namespace: Arc<str>,
    /// The cluster domain suffix.
    pub domain_suffix: Arc<str>,
    /// MeshConfig.
    pub mesh: Arc<MeshConfig>,
}
