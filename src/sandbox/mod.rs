//! The embedded sandbox: simulated Kubernetes API servers for the `clusters/` topology, joined into one
//! mesh the way an operator would join real clusters (reader service account, remote secret).
//!
//! It does not run the control plane: `app` points the real pipeline at the sandbox's primary. The
//! simulated servers (`serve`, `simulated`) come with the default-on `sandbox` feature; the state folder
//! and topology files are plain files every build reads (meshctl finds a running meshd through them).

#[cfg(feature = "sandbox")]
pub mod serve;
#[cfg(feature = "sandbox")]
mod simulated;
pub mod state;
pub mod topology;

use std::path::PathBuf;

#[cfg(feature = "sandbox")]
pub use simulated::{Sandbox, start};
pub use state::{Addresses, StateLock};

/// Where the simulated clusters keep their objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// In memory: every start is a new cluster on a new port.
    Memory,
    /// In `<state_dir>/<name>/store/`, restored at the next start on the same port if it is free;
    /// `fresh` empties the folder first (new objects, new cluster CA).
    StateDir { fresh: bool },
}

/// The default state folder: stable, so `export KUBECONFIG=…` keeps working across restarts.
pub fn default_state_dir() -> PathBuf {
    std::env::temp_dir().join("meshd-sandbox")
}

/// Without the `sandbox` feature there are no simulated clusters: this type has no values, and
/// [`start`] refuses with the flag to give instead.
#[cfg(not(feature = "sandbox"))]
pub enum Sandbox {}

#[cfg(not(feature = "sandbox"))]
impl Sandbox {
    /// See the feature build's `Sandbox::primary_kubeconfig`.
    pub fn primary_kubeconfig(&self) -> anyhow::Result<&std::path::Path> {
        match *self {}
    }

    /// See the feature build's `Sandbox::summary`.
    pub fn summary(&self, _serving: &[(&str, String)]) -> String {
        match *self {}
    }

    /// See the feature build's `Sandbox::primary`.
    pub fn primary(&self) -> &str {
        match *self {}
    }
}

/// Refused: this build has no simulator.
#[cfg(not(feature = "sandbox"))]
pub async fn start(
    _topology: Vec<topology::ClusterManifests>,
    _primary: Option<&str>,
    _state_dir: &std::path::Path,
    _system_namespace: &str,
    _keep: Keep,
    _shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Sandbox> {
    anyhow::bail!(
        "this meshd was built without the embedded sandbox (the `sandbox` feature): give --kubeconfig, \
         or run it in a pod"
    )
}
