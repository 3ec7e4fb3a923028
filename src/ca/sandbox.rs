//! Ready-made credentials for sandbox clients: the mesh root and a workload certificate and key, in
//! istio-agent's file names, so a client can dial 15012 with mTLS at once.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{CaError, MeshCa};
use crate::auth::Identity;

/// Namespace of the sample workload identity.
pub const SAMPLE_NAMESPACE: &str = "sample";
/// Service account of the sample workload identity.
pub const SAMPLE_SERVICE_ACCOUNT: &str = "default";
/// The sample certificate's lifetime: long enough for a sandbox session.
const SAMPLE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Paths of the files [`write_sandbox_certs`] wrote.
#[derive(Debug, Clone)]
pub struct SandboxCerts {
    /// `root-cert.pem`: the trust bundle.
    pub root_cert: PathBuf,
    /// `cert-chain.pem`: the sample workload's leaf and intermediates.
    pub cert_chain: PathBuf,
    /// `key.pem`: its private key (mode 0600).
    pub key: PathBuf,
    /// The sample identity.
    pub identity: Identity,
}

/// Writes `root-cert.pem`, `cert-chain.pem` and `key.pem` for
/// `spiffe://<trust_domain>/ns/sample/sa/default` into `dir` (created if needed).
pub fn write_sandbox_certs(ca: &MeshCa, trust_domain: &str, dir: &Path) -> Result<SandboxCerts, CaError> {
    let identity = Identity::new(trust_domain, SAMPLE_NAMESPACE, SAMPLE_SERVICE_ACCOUNT);
    let bundle = ca.current();
    let issued = bundle
        .issue_workload(&identity, SAMPLE_TTL)
        .map_err(|source| CaError::Issue {
            what: "sample workload certificate",
            source,
        })?;
    let certs = SandboxCerts {
        root_cert: dir.join("root-cert.pem"),
        cert_chain: dir.join("cert-chain.pem"),
        key: dir.join("key.pem"),
        identity,
    };
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| CaError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    std::fs::write(&certs.root_cert, bundle.roots_pem()).map_err(write_err(&certs.root_cert))?;
    std::fs::write(&certs.cert_chain, issued.chain_pem()).map_err(write_err(&certs.cert_chain))?;
    write_private(&certs.key, &issued.key_pem()).map_err(write_err(&certs.key))?;
    Ok(certs)
}

/// Creates or truncates `path` readable by the owner only, then writes `text`.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}
