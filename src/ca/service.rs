//! `istio.v1.auth.IstioCertificateService/CreateCertificate`, wire-compatible with istio-agent,
//! ztunnel and Istio's proto (`security/v1alpha1/ca.proto`, package `istio.v1.auth`).
//!
//! Messages and service plumbing are generated at build time from `proto/istio/v1/auth/ca.proto`
//! (see `build.rs`). Authenticated callers only; a CSR must ask for the caller's own identity.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::{info, warn};

use super::{MeshCa, SignError, sign::MAX_CSR_BYTES};
use crate::auth::{AuthRequest, Authenticator};

/// Generated from `proto/istio/v1/auth/ca.proto`.
#[allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
mod pb {
    tonic::include_proto!("istio.v1.auth");
}

pub use pb::{
    IstioCertificateRequest, IstioCertificateResponse,
    istio_certificate_service_server::{IstioCertificateService, IstioCertificateServiceServer},
};

/// Largest request decoded: a CSR plus metadata.
const MAX_REQUEST_BYTES: usize = MAX_CSR_BYTES + 16 * 1024;

impl From<SignError> for Status {
    fn from(e: SignError) -> Self {
        match &e {
            SignError::NotOwnIdentity { .. } => Status::permission_denied(e.to_string()),
            SignError::Sign(_) => Status::internal(e.to_string()),
            SignError::CsrTooLarge(_) | SignError::InvalidCsr(_) | SignError::TtlTooLong { .. } => {
                Status::invalid_argument(e.to_string())
            }
        }
    }
}

/// The certificate service: authenticate, check, sign.
#[derive(Clone)]
pub struct CertificateService {
    ca: MeshCa,
    auth: Arc<dyn Authenticator>,
}

impl CertificateService {
    /// Signs with `ca` for callers `auth` admits.
    pub fn new(ca: MeshCa, auth: Arc<dyn Authenticator>) -> Self {
        Self { ca, auth }
    }

    /// The gRPC server for this service, refusing requests over `MAX_REQUEST_BYTES` before decoding.
    pub fn into_server(self) -> IstioCertificateServiceServer<Self> {
        IstioCertificateServiceServer::new(self).max_decoding_message_size(MAX_REQUEST_BYTES)
    }
}

#[tonic::async_trait]
impl IstioCertificateService for CertificateService {
    async fn create_certificate(
        &self,
        request: Request<IstioCertificateRequest>,
    ) -> Result<Response<IstioCertificateResponse>, Status> {
        let certs = request.peer_certs();
        let caller = self
            .auth
            .authenticate(AuthRequest::new(request.metadata(), certs.as_ref()))
            .await?;
        let req = request.get_ref();
        let ttl = req.validity_duration;
        match self.ca.sign_csr(&req.csr, &caller, ttl) {
            Ok(cert_chain) => {
                info!(%caller, requested_ttl_secs = ttl, "signed a workload certificate");
                Ok(Response::new(IstioCertificateResponse { cert_chain }))
            }
            Err(e) => {
                warn!(%caller, error = %e, "certificate request refused");
                Err(e.into())
            }
        }
    }
}
