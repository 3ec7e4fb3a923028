//! Who is calling on the secure port (15012): a workload identity from a mesh certificate or a
//! Kubernetes service-account token, or a refusal with a clear [`tonic::Status`].
//!
//! [`Authenticator`] is the one hook every secure gRPC service calls before doing any work. The TLS
//! layer ([`crate::tls`]) only proves that a presented certificate chains to the mesh root; turning it
//! into an identity (SPIFFE rules) happens here ([`cert`]), as does token validation by TokenReview
//! ([`token`]). [`Chain`] tries the certificate first, then the token (istiod's order).
//!
//! Not here: authorization (what an identity may do) belongs to each service: the CA signs only the
//! caller's own identity, xDS checks node metadata against it.

pub mod cert;
pub mod spiffe;
pub mod token;

use std::sync::Arc;

use futures::future::BoxFuture;
use rustls::pki_types::CertificateDer;
use tonic::metadata::MetadataMap;

pub use cert::{CertAuthenticator, CertError};
pub use spiffe::{Identity, SpiffeError};
pub use token::{ClusterClients, PrimaryCluster, TokenAuthenticator, TokenError};

/// gRPC metadata naming the cluster whose API server should validate a token (istio-agent's key).
pub const CLUSTER_ID_METADATA: &str = "clusterid";

/// What an authenticator sees of a request: its metadata and the client's verified certificate chain.
#[derive(Debug, Clone, Copy)]
pub struct AuthRequest<'a> {
    /// gRPC request metadata (`authorization`, `clusterid`, …).
    pub metadata: &'a MetadataMap,
    /// The client's chain, leaf first, already verified against the mesh roots by the TLS layer;
    /// `None` when the client sent no certificate (or the connection is not TLS).
    pub peer_certs: Option<&'a [CertificateDer<'static>]>,
}

impl<'a> AuthRequest<'a> {
    /// The metadata of `request` and the peer certificates its TLS connection recorded.
    /// `certs` must outlive the borrow: pass `request.peer_certs()` held in a local.
    pub fn new(metadata: &'a MetadataMap, certs: Option<&'a Arc<Vec<CertificateDer<'static>>>>) -> Self {
        Self {
            metadata,
            peer_certs: certs.map(|c| c.as_slice()).filter(|c| !c.is_empty()),
        }
    }
}

/// Authenticates a caller. Implementations must not panic or log credentials.
///
/// Call it at the top of every handler on the secure port:
/// ```ignore
/// let certs = request.peer_certs();
/// let caller = auth.authenticate(AuthRequest::new(request.metadata(), certs.as_ref())).await?;
/// ```
pub trait Authenticator: Send + Sync + 'static {
    /// The caller's identity, or why it is refused.
    fn authenticate<'a>(&'a self, req: AuthRequest<'a>) -> BoxFuture<'a, Result<Identity, AuthError>>;
}

/// Why a caller was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Neither credential was presented.
    #[error(
        "no client certificate and no bearer token: present a certificate issued by the mesh CA, \
         or a Kubernetes service-account token as `authorization: Bearer <token>`"
    )]
    NoCredentials,
    /// The client certificate is not a valid workload certificate.
    #[error("client certificate refused: {0}")]
    Cert(#[from] CertError),
    /// The token was refused.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// Both credentials were presented and both were refused.
    #[error("{cert}; and {token}")]
    Both {
        /// Why the certificate was refused.
        cert: CertError,
        /// Why the token was refused.
        token: TokenError,
    },
}

impl From<AuthError> for tonic::Status {
    fn from(e: AuthError) -> Self {
        match &e {
            // The caller did nothing wrong: the API server that must vouch for it is unreachable.
            AuthError::Token(t) if t.is_unavailable() => tonic::Status::unavailable(e.to_string()),
            _ => tonic::Status::unauthenticated(e.to_string()),
        }
    }
}

/// Certificate first, then token: the first credential that proves an identity wins.
pub struct Chain {
    cert: CertAuthenticator,
    token: Option<TokenAuthenticator>,
}

impl Chain {
    /// Certificates only, or certificates then tokens.
    pub fn new(cert: CertAuthenticator, token: Option<TokenAuthenticator>) -> Self {
        Self { cert, token }
    }
}

impl Authenticator for Chain {
    fn authenticate<'a>(&'a self, req: AuthRequest<'a>) -> BoxFuture<'a, Result<Identity, AuthError>> {
        Box::pin(async move {
            let cert = req.peer_certs.map(|chain| self.cert.identity(chain));
            let cert_err = match cert {
                Some(Ok(id)) => return Ok(id),
                Some(Err(e)) => Some(e),
                None => None,
            };
            let token = match (token::bearer(req.metadata), &self.token) {
                (Ok(None), _) => None,
                (Ok(Some(t)), Some(auth)) => Some(auth.identity(t, req.metadata).await),
                (Ok(Some(_)), None) => Some(Err(TokenError::Disabled)),
                (Err(e), _) => Some(Err(e)),
            };
            match (cert_err, token) {
                (_, Some(Ok(id))) => Ok(id),
                (None, None) => Err(AuthError::NoCredentials),
                (Some(cert), None) => Err(AuthError::Cert(cert)),
                (None, Some(Err(token))) => Err(AuthError::Token(token)),
                (Some(cert), Some(Err(token))) => Err(AuthError::Both { cert, token }),
            }
        })
    }
}
