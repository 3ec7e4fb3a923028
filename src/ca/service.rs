//! `istio.v1.auth.IstioCertificateService/CreateCertificate`, wire-compatible with istio-agent,
//! ztunnel and Istio's proto (`security/v1alpha1/ca.proto`, package `istio.v1.auth`).
//!
//! The two messages are written by hand (three fields) rather than generated: `proto/` holds
//! meshd's own protos only. Authenticated callers only; a CSR must ask for the caller's own identity.

use std::{
    convert::Infallible,
    sync::Arc,
    task::{Context, Poll},
};

use envoy_types::pb::google::protobuf::Struct;
use futures::future::BoxFuture;
use tonic::{
    Request, Response, Status,
    body::Body,
    codegen::{Body as HttpBody, Service, StdError, http},
    server::{Grpc, NamedService, UnaryService},
};
use tracing::{info, warn};

use super::{MeshCa, SignError, sign::MAX_CSR_BYTES};
use crate::auth::{AuthRequest, Authenticator};

/// The gRPC service name.
pub const SERVICE_NAME: &str = "istio.v1.auth.IstioCertificateService";
const CREATE_CERTIFICATE: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";
/// Largest request decoded: a CSR plus metadata.
const MAX_REQUEST_BYTES: usize = MAX_CSR_BYTES + 16 * 1024;

/// `istio.v1.auth.IstioCertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateRequest {
    /// PEM-encoded PKCS#10 request.
    #[prost(string, tag = "1")]
    pub csr: String,
    /// Requested validity in seconds; 0 means the CA's default.
    #[prost(int64, tag = "3")]
    pub validity_duration: i64,
    /// Opaque node metadata (istio-agent sends e.g. `ClusterID`). Read by nothing: impersonation
    /// (`ImpersonatedIdentity`) is not supported.
    #[prost(message, optional, tag = "4")]
    pub metadata: Option<Struct>,
}

/// `istio.v1.auth.IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateResponse {
    /// One PEM certificate per entry: leaf, intermediates, then roots.
    #[prost(string, repeated, tag = "1")]
    pub cert_chain: Vec<String>,
}

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

    /// Handles one CreateCertificate call.
    pub async fn create_certificate(
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

impl NamedService for CertificateService {
    const NAME: &'static str = SERVICE_NAME;
}

struct CreateCertificate(CertificateService);

impl UnaryService<IstioCertificateRequest> for CreateCertificate {
    type Response = IstioCertificateResponse;
    type Future = BoxFuture<'static, Result<Response<Self::Response>, Status>>;

    fn call(&mut self, request: Request<IstioCertificateRequest>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { service.create_certificate(request).await })
    }
}

impl<B> Service<http::Request<B>> for CertificateService
where
    B: HttpBody + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != CREATE_CERTIFICATE {
            let path = req.uri().path().to_owned();
            return Box::pin(async move {
                Ok(Status::unimplemented(format!("{path} is not implemented")).into_http())
            });
        }
        let method = CreateCertificate(self.clone());
        Box::pin(async move {
            let mut grpc = Grpc::new(tonic_prost::ProstCodec::default())
                .apply_max_message_size_config(Some(MAX_REQUEST_BYTES), None);
            Ok(grpc.unary(method, req).await)
        })
    }
}
