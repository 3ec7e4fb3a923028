//! TLS for the secure gRPC port (15012): one rustls [`ServerConfig`] whose serving certificate and
//! client roots are swapped atomically when the CA rotates, so new connections see the new material
//! without a restart while established streams carry on.
//!
//! - TLS 1.2 and 1.3, ring, ALPN `h2`.
//! - Client certificates are verified against the mesh roots *if given* (istiod's
//!   `VerifyClientCertIfGiven`): token-only callers must still be able to connect, so every handler
//!   authenticates through [`crate::auth`] before doing anything.
//! - No session resumption (no tickets, no session cache): a client whose root was removed must not
//!   get back in by resuming an old session (the Envoy CVE-2022-21654 class).
//!
//! [`ServingCert::keep_fresh`] is the one writer of the swappable state; [`accept`] turns a listener
//! into a stream of completed TLS connections for tonic.

pub mod accept;

use std::{fmt, sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, UnixTime},
    server::{
        ClientHello, NoServerSessionStorage, ResolvesServerCert, WebPkiClientVerifier,
        danger::{ClientCertVerified, ClientCertVerifier},
    },
    sign::CertifiedKey,
};
use tracing::{error, info};

pub use accept::{AcceptLimits, SecureConn, incoming};

use crate::{
    ca::{CaBundle, MeshCa},
    drain::Tasks,
};

/// Lifetime of meshd's serving certificate; it is renewed at half-life and on every CA change.
pub const SERVING_CERT_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why TLS material could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rustls refused the configuration, key or roots.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// No usable root in the trust bundle.
    #[error("TLS client roots: {0}")]
    Roots(#[from] rustls::server::VerifierBuilderError),
    /// The serving certificate could not be issued.
    #[error(transparent)]
    Issue(#[from] crate::ca::CaError),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The swappable half of the 15012 TLS config: serving chain and client-root verifier.
#[derive(Clone)]
pub struct ServingCert {
    cert: Arc<ArcSwap<CertifiedKey>>,
    verifier: Arc<ArcSwap<Arc<dyn ClientCertVerifier>>>,
    hosts: Arc<[String]>,
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// Issues a serving certificate for `hosts` from the CA's current material.
    pub fn new(ca: &MeshCa, hosts: Vec<String>) -> Result<Self, TlsError> {
        let bundle = ca.current();
        let (cert, verifier) = (issue(&bundle, &hosts)?, verifier(&bundle)?);
        Ok(Self {
            cert: Arc::new(ArcSwap::from_pointee(cert)),
            verifier: Arc::new(ArcSwap::from_pointee(verifier)),
            hosts: hosts.into(),
        })
    }

    /// The server config for 15012. It reads the current material on every handshake.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_client_cert_verifier(Arc::new(SwappableVerifier(self.verifier.clone())))
            .with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = vec![b"h2".to_vec()];
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        Ok(Arc::new(config))
    }

    /// The chain currently served (leaf first).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.cert.load().cert.clone()
    }

    /// Re-issues from `bundle` and swaps: handshakes from now on use the new chain and roots.
    fn rotate(&self, bundle: &CaBundle) -> Result<(), TlsError> {
        let (cert, verifier) = (issue(bundle, &self.hosts)?, verifier(bundle)?);
        self.verifier.store(Arc::new(verifier));
        self.cert.store(Arc::new(cert));
        Ok(())
    }

    /// Spawns the one writer of this state: re-issues on every CA change and at half-life.
    pub fn keep_fresh(&self, tasks: &Tasks, ca: &MeshCa) {
        let this = self.clone();
        let mut changes = ca.subscribe();
        let stop = tasks.cancelled();
        tasks.spawn("serving-cert", async move {
            tokio::pin!(stop);
            let mut ca_open = true;
            loop {
                let renew = tokio::time::sleep(SERVING_CERT_TTL / 2);
                tokio::select! {
                    _ = &mut stop => return,
                    _ = renew => {}
                    changed = changes.changed(), if ca_open => {
                        // A fixed CA drops its sender at once: only half-life renewals remain.
                        if changed.is_err() { ca_open = false; continue; }
                    }
                }
                let bundle = changes.borrow_and_update().clone();
                match this.rotate(&bundle) {
                    Ok(()) => info!(hosts = %this.hosts.join(","), "serving certificate re-issued"),
                    Err(e) => {
                        error!(error = %e, "serving certificate not re-issued; keeping the current one")
                    }
                }
            }
        });
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.cert.load_full())
    }
}

fn issue(bundle: &CaBundle, hosts: &[String]) -> Result<CertifiedKey, TlsError> {
    let issued =
        bundle
            .issue_serving(hosts, SERVING_CERT_TTL)
            .map_err(|source| crate::ca::CaError::Issue {
                what: "serving certificate",
                source,
            })?;
    Ok(CertifiedKey::from_der(
        issued.chain.clone(),
        issued.key_der(),
        &provider(),
    )?)
}

fn verifier(bundle: &CaBundle) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    let (_, unusable) = roots.add_parsable_certificates(bundle.roots().iter().cloned());
    if unusable > 0 {
        error!(unusable, "some mesh roots are not usable as TLS trust anchors");
    }
    Ok(
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .allow_unauthenticated()
            .build()?,
    )
}

/// Delegates to the current root verifier, so a root rotation needs no new `ServerConfig`.
#[derive(Debug)]
struct SwappableVerifier(Arc<ArcSwap<Arc<dyn ClientCertVerifier>>>);

impl ClientCertVerifier for SwappableVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints cannot borrow from swappable state; an empty list lets clients send any cert.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0.load().verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.load().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.load().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.load().supported_verify_schemes()
    }
}
