//! An in-process ADS harness: meshd's real [`AdsServer`] serving a [`StaticMesh`] on a loopback port,
//! and a small client to drive it (request → response → ACK or NACK, expect silence) over state of the
//! world or delta. The protocol tests (`tests/integration/xds_protocol.rs`), the fuzz targets (`tests/fuzz`) and
//! the `xds-fixture` example the Python e2e tests drive all start their server here.
//!
//! Owns: the fixtures' [`SnapshotSource`] ([`Meshes`]: every publish is one snapshot, as the aggregate
//! publishes after its debounce), the server's start and stop, and the clients. Does NOT: check
//! protocol rules (the tests do) or debounce. Test support only (`testing` feature).
// Test support only (also gated where the module is declared): a panic here fails a test, not the server.
#![cfg(any(test, feature = "testing"))]

use std::{collections::HashMap, net::SocketAddr, sync::Arc, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{
            DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
            aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
        },
    },
    google::{
        protobuf::{Struct, Value, value::Kind},
        rpc,
    },
};
use parking_lot::Mutex;
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use tokio_stream::{StreamExt, wrappers::UnboundedReceiverStream};
use tonic::Streaming;

use super::{
    AdsServer, AllEndpoints, XdsLimits, XdsType,
    metrics::Metrics,
    push::{PushScope, Snapshot, SnapshotSource, StaticSnapshot},
};
use crate::drain::{DrainTimeout, Tasks};
use crate::envoy::StaticMesh;

/// How long [`Client::recv`] waits for a response.
pub const RECV_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a harness step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The client could not reach the server.
    #[error("connecting to the ADS server: {0}")]
    Connect(#[from] tonic::transport::Error),
    /// The server refused or ended the stream with this status.
    #[error("the server ended the stream: {0}")]
    Status(tonic::Status),
    /// The server closed the stream without a status.
    #[error("the server closed the stream")]
    Closed,
    /// The client closed its request stream; nothing more can be sent.
    #[error("the request stream is closed")]
    RequestsClosed,
    /// Nothing came within the wait.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// A response came where none was expected.
    #[error("expected no response, got {0}")]
    Unexpected(String),
}

/// The fixtures' snapshot source: each [`Meshes::publish`] is the next version, its change set
/// relative to the one before.
pub struct Meshes {
    current: Mutex<Option<Arc<StaticSnapshot>>>,
    versions: watch::Sender<u64>,
}

impl Meshes {
    /// Nothing published: streams are refused (`UNAVAILABLE`) until the first publish.
    pub fn new() -> Self {
        Self {
            current: Mutex::new(None),
            versions: watch::channel(0).0,
        }
    }

    /// Publishes `mesh` as the next version (its own version is replaced), saying `changes` since the
    /// previous one; returns the version.
    pub fn publish(&self, mut mesh: StaticMesh, changes: PushScope) -> u64 {
        let mut current = self.current.lock();
        let since = current.as_ref().map_or(0, |m| m.mesh.version);
        mesh.version = since + 1;
        let mut snapshot = StaticSnapshot::after(since, changes, mesh);
        snapshot.changed_at = Some(Instant::now());
        *current = Some(Arc::new(snapshot));
        self.versions.send_replace(since + 1);
        since + 1
    }
}

impl Default for Meshes {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotSource for Meshes {
    fn load(&self) -> Option<Arc<dyn Snapshot>> {
        self.current.lock().clone().map(|m| m as Arc<dyn Snapshot>)
    }

    fn versions(&self) -> watch::Receiver<u64> {
        self.versions.subscribe()
    }
}

/// A running ADS server over [`Meshes`]. Dropping it stops the server.
pub struct Harness {
    ads: AdsServer,
    meshes: Arc<Meshes>,
    tasks: Tasks,
    addr: SocketAddr,
    registry: prometheus_client::registry::Registry,
}

impl Harness {
    /// Serves `mesh` (as version 1) on a free loopback port.
    pub async fn start(mesh: StaticMesh) -> Result<Self, Error> {
        Self::bind(SocketAddr::from(([127, 0, 0, 1], 0)), Some(mesh)).await
    }

    /// Serves on `addr`, `mesh` published first if given (else streams are refused until a publish).
    pub async fn bind(addr: SocketAddr, mesh: Option<StaticMesh>) -> Result<Self, Error> {
        let meshes = Arc::new(Meshes::new());
        if let Some(mesh) = mesh {
            meshes.publish(mesh, PushScope::Full);
        }
        let tasks = Tasks::new();
        let mut registry = prometheus_client::registry::Registry::default();
        let ads = AdsServer::new(
            meshes.clone(),
            tasks.clone(),
            Metrics::new(&mut registry),
            Arc::new(AllEndpoints),
            XdsLimits::default(),
        );
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let server = ads.clone();
        tasks.spawn("ads-harness", async move {
            if let Err(e) = server.serve_plaintext(listener).await {
                tracing::warn!(error = %e, "harness ADS server failed");
            }
        });
        Ok(Self {
            ads,
            meshes,
            tasks,
            addr,
            registry,
        })
    }

    /// The server's xDS metrics in the text exposition format (what work a push did).
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("encodes");
        out
    }

    /// The value of the sample `name{labels}` (as written in the text format), 0 when absent.
    pub fn metric(&self, sample: &str) -> f64 {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, for gRPC clients.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server (connections, push log).
    pub fn ads(&self) -> &AdsServer {
        &self.ads
    }

    /// The snapshot source, for a task that publishes on its own.
    pub fn meshes(&self) -> Arc<Meshes> {
        self.meshes.clone()
    }

    /// The server's task set (spawn fixture tasks here so they stop with it).
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// Publishes the next version; see [`Meshes::publish`].
    pub fn publish(&self, mesh: StaticMesh, changes: PushScope) -> u64 {
        self.meshes.publish(mesh, changes)
    }

    /// A state-of-the-world stream for `node`.
    pub async fn sotw(&self, node: Node) -> Result<SotwClient, Error> {
        SotwClient::connect(self.url(), Some(node)).await
    }

    /// A delta stream for `node`.
    pub async fn delta(&self, node: Node) -> Result<DeltaClient, Error> {
        DeltaClient::connect(self.url(), Some(node)).await
    }

    /// Stops the server and waits for its tasks.
    pub async fn shutdown(self, deadline: Duration) -> Result<(), DrainTimeout> {
        self.tasks.cancel();
        self.tasks.drain(deadline).await
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.tasks.cancel();
    }
}

/// An Envoy sidecar's node in `namespace`.
pub fn sidecar(name: &str, namespace: &str) -> Node {
    Node {
        id: format!("sidecar~10.0.0.1~{name}.{namespace}~{namespace}.svc.cluster.local"),
        ..Node::default()
    }
}

/// A proxyless gRPC client's node in `namespace`.
pub fn grpc(name: &str, namespace: &str) -> Node {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    };
    Node {
        metadata: Some(Struct {
            fields: [
                ("GENERATOR".to_owned(), string("grpc")),
                ("NAMESPACE".to_owned(), string(namespace)),
            ]
            .into(),
        }),
        ..sidecar(name, namespace)
    }
}

/// One ADS protocol's messages, as the client needs them.
pub trait Wire {
    /// What the client sends.
    type Request: Send + 'static;
    /// What the server answers.
    type Response: Send + 'static;
    /// Opens the stream.
    fn open(
        client: &mut AggregatedDiscoveryServiceClient<tonic::transport::Channel>,
        requests: UnboundedReceiverStream<Self::Request>,
    ) -> impl Future<Output = Result<Streaming<Self::Response>, tonic::Status>> + Send;
    /// Type, nonce and resource count, for failure messages.
    fn describe(response: &Self::Response) -> String;
}

/// State of the world (`StreamAggregatedResources`).
#[derive(Debug)]
pub enum Sotw {}

/// Delta (`DeltaAggregatedResources`).
#[derive(Debug)]
pub enum Delta {}

impl Wire for Sotw {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;

    async fn open(
        client: &mut AggregatedDiscoveryServiceClient<tonic::transport::Channel>,
        requests: UnboundedReceiverStream<DiscoveryRequest>,
    ) -> Result<Streaming<DiscoveryResponse>, tonic::Status> {
        Ok(client.stream_aggregated_resources(requests).await?.into_inner())
    }

    fn describe(r: &DiscoveryResponse) -> String {
        format!(
            "{} nonce {:?} with {} resources",
            r.type_url,
            r.nonce,
            r.resources.len()
        )
    }
}

impl Wire for Delta {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;

    async fn open(
        client: &mut AggregatedDiscoveryServiceClient<tonic::transport::Channel>,
        requests: UnboundedReceiverStream<DeltaDiscoveryRequest>,
    ) -> Result<Streaming<DeltaDiscoveryResponse>, tonic::Status> {
        Ok(client.delta_aggregated_resources(requests).await?.into_inner())
    }

    fn describe(r: &DeltaDiscoveryResponse) -> String {
        format!(
            "{} nonce {:?} with {} resources, {} removed",
            r.type_url,
            r.nonce,
            r.resources.len(),
            r.removed_resources.len()
        )
    }
}

/// One ADS stream. The protocol helpers put `node` on the first request they build; [`Client::send`]
/// sends requests exactly as given.
pub struct Client<W: Wire> {
    node: Option<Node>,
    requests: Option<mpsc::UnboundedSender<W::Request>>,
    responses: Streaming<W::Response>,
    /// SotW: the names last requested per type (ACKs repeat them).
    names: HashMap<XdsType, Vec<String>>,
    /// SotW: the version last accepted per type (NACKs carry it).
    accepted: HashMap<XdsType, String>,
}

/// A state-of-the-world stream.
pub type SotwClient = Client<Sotw>;
/// A delta stream.
pub type DeltaClient = Client<Delta>;

impl<W: Wire> Client<W> {
    /// Opens a stream to `url`; the helpers send `node` first.
    pub async fn connect(url: String, node: Option<Node>) -> Result<Self, Error> {
        let mut client = AggregatedDiscoveryServiceClient::connect(url).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let responses = W::open(&mut client, UnboundedReceiverStream::new(rx))
            .await
            .map_err(Error::Status)?;
        Ok(Self {
            node,
            requests: Some(tx),
            responses,
            names: HashMap::new(),
            accepted: HashMap::new(),
        })
    }

    /// Sends `request` as it is.
    pub fn send(&mut self, request: W::Request) -> Result<(), Error> {
        let requests = self.requests.as_ref().ok_or(Error::RequestsClosed)?;
        requests.send(request).map_err(|_| Error::RequestsClosed)
    }

    /// Ends the request stream (the server then ends the stream too).
    pub fn close(&mut self) {
        self.requests = None;
    }

    /// The next response, waiting at most [`RECV_TIMEOUT`].
    pub async fn recv(&mut self) -> Result<W::Response, Error> {
        self.recv_within(RECV_TIMEOUT)
            .await?
            .ok_or(Error::Timeout(RECV_TIMEOUT))
    }

    /// The next response if one comes within `wait`.
    pub async fn recv_within(&mut self, wait: Duration) -> Result<Option<W::Response>, Error> {
        match tokio::time::timeout(wait, self.responses.next()).await {
            Err(_) => Ok(None),
            Ok(None) => Err(Error::Closed),
            Ok(Some(Err(status))) => Err(Error::Status(status)),
            Ok(Some(Ok(r))) => Ok(Some(r)),
        }
    }

    /// Fails if a response comes within `wait`.
    pub async fn expect_none(&mut self, wait: Duration) -> Result<(), Error> {
        match self.recv_within(wait).await? {
            None => Ok(()),
            Some(r) => Err(Error::Unexpected(W::describe(&r))),
        }
    }

    /// The status the stream ends with, waiting at most [`RECV_TIMEOUT`]; responses before it are
    /// skipped.
    pub async fn status(&mut self) -> Result<tonic::Status, Error> {
        loop {
            match self.recv().await {
                Ok(_) => continue,
                Err(Error::Status(status)) => return Ok(status),
                Err(e) => return Err(e),
            }
        }
    }
}

impl Client<Sotw> {
    /// Requests `names` of `ty` from scratch (no nonce): the server answers with the current state.
    pub fn request(&mut self, ty: XdsType, names: &[&str]) -> Result<(), Error> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        self.names.insert(ty, names.clone());
        let request = DiscoveryRequest {
            node: self.node.take(),
            type_url: ty.url().to_owned(),
            resource_names: names,
            ..DiscoveryRequest::default()
        };
        self.send(request)
    }

    /// Accepts `response`, repeating the names last requested for its type.
    pub fn ack(&mut self, response: &DiscoveryResponse) -> Result<(), Error> {
        self.answer(response, None, None)
    }

    /// Accepts `response` and changes the subscription to `names` in the same request.
    pub fn ack_with(&mut self, response: &DiscoveryResponse, names: &[&str]) -> Result<(), Error> {
        let names = names.iter().map(|n| (*n).to_owned()).collect();
        self.answer(response, Some(names), None)
    }

    /// Rejects `response` with `message` (keeping the previously accepted version, as Envoy does).
    pub fn nack(&mut self, response: &DiscoveryResponse, message: &str) -> Result<(), Error> {
        self.answer(response, None, Some(rejection(message)))
    }

    fn answer(
        &mut self,
        response: &DiscoveryResponse,
        names: Option<Vec<String>>,
        error: Option<rpc::Status>,
    ) -> Result<(), Error> {
        let ty = XdsType::from_url(&response.type_url);
        if let (Some(ty), Some(names)) = (ty, &names) {
            self.names.insert(ty, names.clone());
        }
        let names = names
            .or_else(|| ty.and_then(|t| self.names.get(&t).cloned()))
            .unwrap_or_default();
        let accepted = ty.and_then(|t| self.accepted.get(&t).cloned());
        let version_info = match (&error, ty) {
            (Some(_), _) => accepted.unwrap_or_default(),
            (None, Some(t)) => {
                self.accepted.insert(t, response.version_info.clone());
                response.version_info.clone()
            }
            (None, None) => response.version_info.clone(),
        };
        let request = DiscoveryRequest {
            node: self.node.take(),
            type_url: response.type_url.clone(),
            resource_names: names,
            version_info,
            response_nonce: response.nonce.clone(),
            error_detail: error,
            ..DiscoveryRequest::default()
        };
        self.send(request)
    }
}

impl Client<Delta> {
    /// Subscribes to `names` of `ty`.
    pub fn subscribe(&mut self, ty: XdsType, names: &[&str]) -> Result<(), Error> {
        let request = DeltaDiscoveryRequest {
            resource_names_subscribe: names.iter().map(|n| (*n).to_owned()).collect(),
            ..self.delta_request(ty)
        };
        self.send(request)
    }

    /// Unsubscribes from `names` of `ty`.
    pub fn unsubscribe(&mut self, ty: XdsType, names: &[&str]) -> Result<(), Error> {
        let request = DeltaDiscoveryRequest {
            resource_names_unsubscribe: names.iter().map(|n| (*n).to_owned()).collect(),
            ..self.delta_request(ty)
        };
        self.send(request)
    }

    /// Accepts `response`.
    pub fn ack(&mut self, response: &DeltaDiscoveryResponse) -> Result<(), Error> {
        let request = DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            node: self.node.take(),
            ..DeltaDiscoveryRequest::default()
        };
        self.send(request)
    }

    /// Rejects `response` with `message`.
    pub fn nack(&mut self, response: &DeltaDiscoveryResponse, message: &str) -> Result<(), Error> {
        let request = DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            error_detail: Some(rejection(message)),
            node: self.node.take(),
            ..DeltaDiscoveryRequest::default()
        };
        self.send(request)
    }

    fn delta_request(&mut self, ty: XdsType) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            node: self.node.take(),
            type_url: ty.url().to_owned(),
            ..DeltaDiscoveryRequest::default()
        }
    }
}

/// A client's rejection (`INVALID_ARGUMENT`, as Envoy reports bad config).
fn rejection(message: &str) -> rpc::Status {
    rpc::Status {
        code: tonic::Code::InvalidArgument as i32,
        message: message.to_owned(),
        ..rpc::Status::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_publish_follows_the_one_before() {
        let meshes = Meshes::new();
        let mut versions = meshes.versions();
        assert!(meshes.load().is_none(), "nothing to serve before a publish");
        let eds = PushScope::Endpoints(["a".into()].into());
        for (version, changes) in [(1, PushScope::Full), (2, eds.clone()), (3, PushScope::Full)] {
            assert_eq!(meshes.publish(StaticMesh::new(99), changes.clone()), version);
            assert!(
                versions.has_changed().expect("open"),
                "version {version} wakes streams"
            );
            versions.borrow_and_update();
            let s = meshes.load().expect("published");
            assert_eq!(
                (s.mesh().version(), s.since(), s.changes()),
                (version, version - 1, changes)
            );
            assert!(s.changed_at().is_some());
        }
    }
}
