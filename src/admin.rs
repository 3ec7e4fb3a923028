//! The admin HTTP server: `/ready`, `/metrics`, `/version` and the `/debug` endpoints, served on both
//! the HTTP (8080) and monitoring (15014) addresses as istiod does.
//!
//! Debug access is istiod's `allowAuthenticatedOrLocalhost`: loopback callers (`kubectl port-forward`)
//! see everything; any other caller must present a Kubernetes service-account token
//! (`Authorization: Bearer …`), validated by the same authenticator as the secure xDS port (the admin
//! port is plain HTTP, so client certificates do not apply). A system-namespace identity sees
//! everything; any other identity only `/debug/config_dump` of proxies in its own namespace.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{ConnectInfo, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{MethodRouter, get},
};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::Service;
use tracing::{debug, info, warn};

use crate::{
    auth::{AuthRequest, Authenticator},
    drain::Tasks,
    readiness::Ready,
};

/// The debug endpoints components contribute, with the index entries `/debug` lists.
#[derive(Default)]
pub struct Debug {
    routes: Router,
    index: Vec<DebugEntry>,
}

/// One line of the `/debug` index.
#[derive(Debug, Clone, Serialize)]
pub struct DebugEntry {
    /// The path, e.g. `/debug/configz`.
    pub path: &'static str,
    /// What it shows.
    pub help: &'static str,
}

impl Debug {
    /// Adds a debug endpoint at `path` (which must start with `/debug/`).
    pub fn route(mut self, path: &'static str, help: &'static str, handler: MethodRouter) -> Self {
        debug_assert!(path.starts_with("/debug/"));
        self.routes = self.routes.route(path, handler);
        self.index.push(DebugEntry { path, help });
        self
    }
}

/// Who is calling a debug endpoint, as the access middleware established it (a request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugCaller {
    /// A loopback caller: unrestricted.
    Local,
    /// An identity in the system namespace: unrestricted.
    System(String),
    /// An identity in another namespace: only its own proxies' config.
    Namespace(String),
}

impl DebugCaller {
    /// Whether this caller may see a proxy in `namespace`.
    pub fn may_see(&self, namespace: Option<&str>) -> bool {
        match self {
            Self::Local | Self::System(_) => true,
            Self::Namespace(ns) => namespace == Some(ns.as_str()),
        }
    }
}

/// Paths a caller outside the system namespace may use (istiod also allows its typed dumps).
const NAMESPACE_PATHS: &[&str] = &["/debug/config_dump"];

/// How non-loopback debug callers are authenticated.
#[derive(Clone)]
pub struct DebugAuth {
    /// The mesh authenticator (`None`: non-loopback callers are refused).
    pub authenticator: Option<Arc<dyn Authenticator>>,
    /// Identities in this namespace see everything.
    pub system_namespace: String,
}

#[derive(Clone)]
struct AdminState {
    ready: Ready,
    registry: Arc<Registry>,
    index: Arc<Vec<DebugEntry>>,
}

/// Registers `meshd_build_info{version}` (always 1), so every scrape shows which build answered.
pub fn register_build_info(registry: &mut Registry) {
    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Build {
        version: &'static str,
    }
    let info = prometheus_client::metrics::family::Family::<Build, prometheus_client::metrics::gauge::Gauge>::default();
    info.get_or_create(&Build {
        version: env!("CARGO_PKG_VERSION"),
    })
    .set(1);
    registry.register("meshd_build_info", "meshd build; the value is always 1", info);
}

/// Builds the admin router.
pub fn router(ready: Ready, registry: Arc<Registry>, debug: Debug, auth: DebugAuth) -> Router {
    let state = AdminState {
        ready,
        registry,
        index: Arc::new(debug.index),
    };
    let debug_routes = Router::new()
        .route("/debug", get(debug_index))
        .with_state(state.clone())
        .merge(debug.routes)
        .layer(middleware::from_fn_with_state(Arc::new(auth), debug_access));
    Router::new()
        .route("/ready", get(ready_handler))
        .route("/metrics", get(metrics_handler))
        .route("/version", get(version_handler))
        .with_state(state)
        .merge(debug_routes)
}

async fn ready_handler(State(s): State<AdminState>) -> Response {
    let pending = s.ready.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: waiting for {}\n", pending.join(", ")),
        )
            .into_response()
    }
}

async fn metrics_handler(State(s): State<AdminState>) -> Response {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &s.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics: {e}\n"),
        )
            .into_response(),
    }
}

async fn version_handler() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "name": "meshd", "version": env!("CARGO_PKG_VERSION") }))
}

async fn debug_index(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "endpoints": *s.index }))
}

async fn debug_access(
    State(auth): State<Arc<DebugAuth>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = if peer.ip().is_loopback() {
        DebugCaller::Local
    } else {
        match authenticate(&auth, req.headers().clone()).await {
            Ok(caller) => caller,
            Err(reason) => {
                warn!(%peer, path = %req.uri().path(), %reason, "refused a debug request");
                return (StatusCode::UNAUTHORIZED, format!("{reason}\n")).into_response();
            }
        }
    };
    if let DebugCaller::Namespace(ns) = &caller
        && !NAMESPACE_PATHS.contains(&req.uri().path())
    {
        return (
            StatusCode::FORBIDDEN,
            format!(
                "identities in namespace {ns:?} may only use {}\n",
                NAMESPACE_PATHS.join(", ")
            ),
        )
            .into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The caller behind a bearer token, by the mesh authenticator; the reason in words otherwise.
async fn authenticate(auth: &DebugAuth, headers: axum::http::HeaderMap) -> Result<DebugCaller, String> {
    let Some(authenticator) = &auth.authenticator else {
        return Err("debug endpoints are served to loopback callers only".into());
    };
    let metadata = tonic::metadata::MetadataMap::from_headers(headers);
    let identity = authenticator
        .authenticate(AuthRequest {
            metadata: &metadata,
            peer_certs: None,
        })
        .await
        .map_err(|e| e.to_string())?;
    Ok(if identity.namespace == auth.system_namespace {
        DebugCaller::System(identity.spiffe_uri())
    } else {
        DebugCaller::Namespace(identity.namespace)
    })
}

/// Connections one admin address serves at once. Further clients wait in the listen backlog until a
/// slot frees, which the header timeout bounds for silent ones.
const MAX_CONNECTIONS: usize = 1024;

/// Serves `router` on `listener` until shutdown.
///
/// A client that takes longer than `header_timeout` to send a request's headers, or idles that long
/// between requests, is disconnected, so slow or silent clients cannot hold connections open.
pub fn serve(
    tasks: &Tasks,
    name: &'static str,
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
) {
    if let Ok(addr) = listener.local_addr() {
        info!(server = name, %addr, "listening");
    }
    tasks.spawn(
        name,
        accept_loop(listener, router, header_timeout, tasks.cancelled()),
    );
}

/// Serves connections until `stop`, then closes idle ones, lets in-flight requests finish and returns.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    // HTTP/1 only: protocol detection would wait for a client's first bytes with no timeout, while the
    // header timeout runs from the moment a connection is served. Probes and scrapers speak HTTP/1.1.
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = accept(&listener, &slots) => accepted,
        };
        let (tcp, peer, slot) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // E.g. EMFILE: back off briefly rather than spin.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let router = router.clone();
        let service = service_fn(move |mut req: Request<Incoming>| {
            // Debug access is decided by the socket peer alone (`debug_access`).
            req.extensions_mut().insert(ConnectInfo(peer));
            let mut router = router.clone();
            async move {
                std::future::poll_fn(|cx| Service::<Request<Incoming>>::poll_ready(&mut router, cx)).await?;
                router.call(req).await
            }
        });
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(tcp), service).into_owned());
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                debug!(%peer, error = %e, "admin connection closed");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Waits for a connection slot, then for a connection. Cancel-safe.
async fn accept(
    listener: &tokio::net::TcpListener,
    slots: &Arc<Semaphore>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let slot = match slots.clone().acquire_owned().await {
        Ok(slot) => slot,
        // The semaphore is never closed.
        Err(_) => std::future::pending().await,
    };
    let (tcp, peer) = listener.accept().await?;
    Ok((tcp, peer, slot))
}
