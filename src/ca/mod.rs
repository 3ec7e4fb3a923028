//! The mesh CA: where its key material comes from, what it signs, and the signing service on 15012.
//!
//! - [`source`]: plugged-in CA files (Istio's `cacerts` layout, hot-reloaded) or a self-signed root
//!   persisted once in the `istio-ca-secret` Secret of the system namespace.
//! - [`bundle`]: loading and validating the key material.
//! - [`sign`]: workload certificates from CSRs, serving and sandbox certificates.
//! - [`service`]: the `istio.v1.auth.IstioCertificateService/CreateCertificate` gRPC service.
//! - [`root_publisher`]: the `istio-ca-root-cert` ConfigMap in every namespace (a leader duty).
//! - [`sandbox`]: ready-made root and workload certificate files for sandbox clients.
//!
//! [`MeshCa`] is the handle everyone shares; the CA's source task is the one writer of its material.
//! Not here: the TLS server ([`crate::tls`]) and caller authentication ([`crate::auth`]).

pub mod bundle;
pub mod root_publisher;
pub mod sandbox;
pub mod service;
pub mod sign;
pub mod source;

use std::{path::PathBuf, sync::Arc, time::Duration};

use tokio::sync::watch;

pub use bundle::{CaBundle, CaPem};
pub use sign::{Issued, SignError};

use crate::{auth::Identity, config::ConfigError};

/// Why the CA's key material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file could not be read.
    #[error(transparent)]
    File(#[from] ConfigError),
    /// A PEM file's content is wrong.
    #[error("{file}: {message}")]
    Invalid {
        /// Which file (`ca-cert.pem`, …), or Secret key.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// In a plugged-in CA folder.
    #[error("plugged-in CA {dir}: {source}")]
    Dir {
        /// The folder.
        dir: PathBuf,
        /// The problem.
        #[source]
        source: Box<CaError>,
    },
    /// In the self-signed CA Secret.
    #[error("CA Secret {namespace}/{name}: {source}")]
    Secret {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The problem.
        #[source]
        source: Box<CaError>,
    },
    /// The Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    /// Shutdown began while waiting for the leader to create the CA Secret.
    #[error("shut down while waiting for the CA Secret")]
    Cancelled,
    /// Key or certificate generation failed.
    #[error("generating the CA: {0}")]
    Generate(#[source] rcgen::Error),
    /// A certificate could not be issued.
    #[error("issuing the {what}: {source}")]
    Issue {
        /// Which certificate.
        what: &'static str,
        /// Why.
        #[source]
        source: SignError,
    },
    /// Writing sandbox files failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl CaError {
    pub(crate) fn invalid(file: &'static str, message: impl Into<String>) -> Self {
        CaError::Invalid {
            file,
            message: message.into(),
        }
    }
}

/// Lifetimes of workload certificates.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadCertPolicy {
    /// Used when a CSR asks for none (istiod: `DEFAULT_WORKLOAD_CERT_TTL`, 24h).
    pub default_ttl: Duration,
    /// Longer requests are refused (istiod: `MAX_WORKLOAD_CERT_TTL`, 90 days).
    pub max_ttl: Duration,
}

impl Default for WorkloadCertPolicy {
    fn default() -> Self {
        Self {
            default_ttl: Duration::from_secs(24 * 3600),
            max_ttl: Duration::from_secs(90 * 24 * 3600),
        }
    }
}

/// The shared CA handle: the current key material (rotations arrive on a watch channel) and policy.
#[derive(Clone)]
pub struct MeshCa {
    bundle: watch::Receiver<Arc<CaBundle>>,
    policy: WorkloadCertPolicy,
}

impl MeshCa {
    /// A CA following `bundle` (whose sender is the source's reload task).
    pub fn new(bundle: watch::Receiver<Arc<CaBundle>>, policy: WorkloadCertPolicy) -> Self {
        Self { bundle, policy }
    }

    /// A CA whose material never changes.
    pub fn fixed(bundle: CaBundle, policy: WorkloadCertPolicy) -> Self {
        Self::new(watch::channel(Arc::new(bundle)).1, policy)
    }

    /// The current key material.
    pub fn current(&self) -> Arc<CaBundle> {
        self.bundle.borrow().clone()
    }

    /// A receiver that sees every rotation.
    pub fn subscribe(&self) -> watch::Receiver<Arc<CaBundle>> {
        self.bundle.clone()
    }

    /// The trust bundle clients should use, PEM.
    pub fn roots_pem(&self) -> String {
        self.current().roots_pem()
    }

    /// Signs a CSR for `caller` (see [`CaBundle::sign_csr`]); `requested_secs <= 0` means the default.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        caller: &Identity,
        requested_secs: i64,
    ) -> Result<Vec<String>, SignError> {
        let ttl = match u64::try_from(requested_secs) {
            Ok(0) | Err(_) => self.policy.default_ttl,
            Ok(s) => Duration::from_secs(s),
        };
        if ttl > self.policy.max_ttl {
            return Err(SignError::TtlTooLong {
                requested: ttl,
                max: self.policy.max_ttl,
            });
        }
        self.current().sign_csr(csr_pem, caller, ttl)
    }
}
