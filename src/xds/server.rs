//! The tonic ADS service and how to serve it.
//!
//! Owns: accepting streams (rate limit, authentication hook, readiness), a response body driving each
//! stream (no task of its own: hyper's task for the HTTP/2 stream polls it), tracked through
//! [`Tasks::track`] so shutdown waits for it, message-size caps, and serving on a plaintext listener or any incoming
//! connection stream (the secure side hands in accepted rustls streams). Does NOT: terminate TLS or
//! verify credentials itself ([`Authenticator`] does), or know what the streams send.

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::Semaphore,
};
use tokio_stream::{Stream, StreamExt};
use tonic::{
    Request, Status,
    body::Body,
    server::NamedService,
    transport::server::{Connected, Server},
};

use super::{
    EndpointView, Error,
    cache::ResourceCache,
    connection,
    delta::Delta,
    metrics::Metrics,
    protocol::Protocol,
    push::{RateLimiter, SnapshotSource},
    shared::{Caller, Shared, XdsLimits},
    sotw::Sotw,
    status::{Connections, PushLog},
    wire::{Requests, ResponseBody},
};
use crate::{
    auth::{AuthRequest, Authenticator},
    drain::Tasks,
    readiness::Ready,
};

/// The ADS server: one per process, served on any number of ports. Cheap to clone.
#[derive(Clone)]
pub struct AdsServer {
    shared: Arc<Shared>,
}

impl AdsServer {
    /// A server whose streams follow `snapshots` (the aggregate's, or a fixture's), tracked on `tasks`
    /// (shutdown ends them and waits for them). `endpoints` is the split-horizon hook ([`super::AllEndpoints`] by default).
    pub fn new(
        snapshots: Arc<dyn SnapshotSource>,
        tasks: Tasks,
        metrics: Metrics,
        endpoints: Arc<dyn EndpointView>,
        limits: XdsLimits,
    ) -> Self {
        let shared = Shared {
            snapshots,
            cache: ResourceCache::new(limits.cache_capacity, Some(metrics.clone())),
            endpoints,
            metrics,
            connections: Connections::default(),
            push_log: PushLog::default(),
            permits: Arc::new(Semaphore::new(limits.push_concurrency.max(1))),
            tasks,
            stream_limit: RateLimiter::new(limits.new_streams_per_second),
            limits,
            secrets: Default::default(),
            gate: Default::default(),
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Resolves once there is a snapshot to serve (streams opened before are refused with
    /// `UNAVAILABLE`), or at shutdown: the readiness gate.
    pub fn first_snapshot(&self) -> impl Future<Output = ()> + Send + 'static {
        let snapshots = self.shared.snapshots.clone();
        let mut versions = snapshots.versions();
        let stop = self.shared.tasks.cancelled();
        async move {
            tokio::pin!(stop);
            while snapshots.load().is_none() {
                tokio::select! {
                    _ = &mut stop => return,
                    changed = versions.changed() => if changed.is_err() { return },
                }
            }
        }
    }

    /// Refuses new streams (`UNAVAILABLE`) whenever `ready` is not: until the config cluster and the
    /// initial remotes have synced (or timed out), as istiod does. The first gate set stays.
    pub fn serve_when_ready(&self, ready: Ready) {
        let _ = self.shared.gate.set(ready);
    }

    /// Serves SDS from `source` (gateway certificates) on every stream opened from now on; the first
    /// source set stays.
    pub fn serve_secrets(&self, source: Arc<dyn super::SecretSource>) {
        let _ = self.shared.secrets.set(source);
    }

    /// Live connections, for debug.
    pub fn connections(&self) -> Connections {
        self.shared.connections.clone()
    }

    /// The newest snapshot streams serve (`None` before the first), for debug views that compute what
    /// a proxy gets from it.
    pub fn snapshot(&self) -> Option<Arc<dyn super::Snapshot>> {
        self.shared.snapshots.load()
    }

    /// Changes not yet in [`AdsServer::snapshot`] (inside the aggregate's debounce window).
    pub fn debouncing(&self) -> Option<crate::envoy::explain::Debouncing> {
        self.shared.snapshots.debouncing()
    }

    /// What the latest push did, for debug.
    pub fn push_log(&self) -> PushLog {
        self.shared.push_log.clone()
    }

    /// The gRPC service for one port, checking every stream with `auth` (`None`: plaintext 15010,
    /// where callers are not authenticated, as on istiod).
    pub fn service(&self, auth: Option<Arc<dyn Authenticator>>) -> AdsService {
        AdsService {
            shared: self.shared.clone(),
            auth,
        }
    }

    /// Serves plaintext on `listener` (15010) with no authentication until shutdown. Nagle is off, as on
    /// 15012 and in grpc-go: a push written behind unacknowledged bytes would otherwise wait for the
    /// client's delayed ACK.
    pub async fn serve_plaintext(&self, listener: TcpListener) -> Result<(), tonic::transport::Error> {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
            conn.inspect(|tcp| {
                let _ = tcp.set_nodelay(true);
            })
        });
        self.serve_incoming(incoming, None).await
    }

    /// Serves on already-accepted connections (e.g. rustls streams for 15012) until shutdown.
    pub async fn serve_incoming<I, IO, IE>(
        &self,
        incoming: I,
        auth: Option<Arc<dyn Authenticator>>,
    ) -> Result<(), tonic::transport::Error>
    where
        I: Stream<Item = Result<IO, IE>> + Send,
        IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
        IO::ConnectInfo: Clone + Send + Sync + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Server::builder()
            .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
            .add_service(self.service(auth))
            .serve_with_incoming_shutdown(incoming, self.shared.tasks.cancelled())
            .await
    }
}

/// The gRPC service for one port. Written against HTTP rather than generated by tonic: responses go out
/// as [`super::wire::Frame`]s that reference the shared encoded resources, which tonic's encoder would
/// copy into a per-stream buffer, and requests are read by [`Requests`], which keeps none.
#[derive(Clone)]
pub struct AdsService {
    shared: Arc<Shared>,
    auth: Option<Arc<dyn Authenticator>>,
}

/// The gRPC path prefix of ADS.
const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";

impl NamedService for AdsService {
    const NAME: &'static str = SERVICE;
}

impl tower::Service<http::Request<Body>> for AdsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let method = req.uri().path().strip_prefix(&format!("/{SERVICE}/"));
            let answer = match method {
                Some("StreamAggregatedResources") => this.accept::<Sotw>(req, "sotw").await,
                Some("DeltaAggregatedResources") => this.accept::<Delta>(req, "delta").await,
                _ => Err(Status::unimplemented("")),
            };
            Ok(answer.unwrap_or_else(Status::into_http))
        })
    }
}

impl AdsService {
    /// Admission: rate limit, authentication, then a response body owning the stream.
    async fn accept<P: Protocol>(
        &self,
        req: http::Request<Body>,
        protocol: &'static str,
    ) -> Result<http::Response<Body>, Status> {
        // meshd enables no compression (as istiod): a compressed request cannot be read.
        if let Some(encoding) = req.headers().get("grpc-encoding")
            && encoding != "identity"
        {
            return Err(Status::unimplemented(format!(
                "request compressed with {encoding:?}, which meshd does not accept"
            )));
        }
        if let Err(wait) = self.shared.stream_limit.try_acquire() {
            return Err(Status::resource_exhausted(format!(
                "{} (next slot in {wait:?})",
                Error::RateLimited
            )));
        }
        let max = self.shared.limits.max_request_bytes;
        let request = Request::from_http(req.map(|body| Requests::<_, P::Request>::new(body, max)));
        let peer = request.remote_addr().map(|a: SocketAddr| a.to_string());
        let (metadata, extensions, requests) = request.into_parts();
        let probe = Request::from_parts(metadata, extensions, ());
        let caller = match &self.auth {
            None => Caller::default(),
            Some(auth) => {
                let certs = probe.peer_certs();
                let identity = auth
                    .authenticate(AuthRequest::new(probe.metadata(), certs.as_ref()))
                    .await?;
                Caller {
                    identities: vec![identity.spiffe_uri()],
                }
            }
        };
        let shared = self.shared.clone();
        let tasks = &self.shared.tasks;
        let body = ResponseBody::new(|out| {
            tasks.track(
                "ads-stream",
                connection::run::<P>(shared, caller, peer, requests, out, protocol),
            )
        });
        let mut response = http::Response::new(Body::new(body));
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
        Ok(response)
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
