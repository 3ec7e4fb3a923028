//! The admin HTTP server: `/ready`, `/metrics`, `/version` and the `/debug` endpoints, served on both
//! the HTTP (8080) and monitoring (15014) addresses as istiod does.
//!
//! Debug endpoints are loopback-only: callers from elsewhere get 403 (istiod lets authenticated
//! callers in; meshd adds that with the mTLS identity work).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Json, Router,
    extract::{ConnectInfo, Request, State},
    http::{StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{MethodRouter, get},
};
use prometheus_client::registry::Registry;
use serde::Serialize;
use tracing::{info, warn};

use crate::{drain::Tasks, readiness::Ready};

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
pub fn router(ready: Ready, registry: Arc<Registry>, debug: Debug) -> Router {
    let state = AdminState {
        ready,
        registry,
        index: Arc::new(debug.index),
    };
    let debug_routes = Router::new()
        .route("/debug", get(debug_index))
        .with_state(state.clone())
        .merge(debug.routes)
        .layer(middleware::from_fn(loopback_only));
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

async fn loopback_only(ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request, next: Next) -> Response {
    if peer.ip().is_loopback() {
        return next.run(req).await;
    }
    warn!(%peer, path = %req.uri().path(), "refused a debug request from a non-loopback address");
    (
        StatusCode::FORBIDDEN,
        "debug endpoints are served to loopback callers only\n",
    )
        .into_response()
}

/// Binds `addr` and serves `router` until shutdown. Returns the bound address (useful with port 0).
pub async fn serve(
    tasks: &Tasks,
    name: &'static str,
    addr: SocketAddr,
    router: Router,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    info!(server = name, addr = %bound, "listening");
    let stop = tasks.cancelled();
    tasks.spawn(name, async move {
        let app = router.into_make_service_with_connect_info::<SocketAddr>();
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
            warn!(error = %e, "admin server stopped with an error");
        }
    });
    Ok(bound)
}
