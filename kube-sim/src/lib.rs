//! A Kubernetes API server simulator that stock clients (kube-rs, kubectl) cannot tell from a real one.
//!
//! One [`ApiServer`] is one simulated cluster: an in-memory [`Store`] with etcd-like revisions and watch
//! history, served over TLS on a loopback port with its own CA, bearer tokens and client certificates.
//! Given a folder ([`ApiServerConfig::store_dir`]), it keeps the store and its credentials there as etcd
//! would (a write-ahead log and snapshots) and restores them at the next start.
//! Every cluster starts with kube-apiserver's bootstrap RBAC policy. By default RBAC objects are stored but
//! not enforced: every authenticated identity may do everything.
//! Opt-in, [`ApiServerConfig::enforce_rbac`] authorizes each resource request with them, and a
//! [`RequestLog`] records who made each request in RBAC's terms, so tests can compare what a client
//! used with what it is granted.

mod access_reviews;
mod auth;
mod controllers;
mod crd;
mod delete;
mod discovery;
mod error;
mod escalation;
mod faults;
mod fields;
mod handlers;
mod http;
mod impersonation;
mod kinds;
mod object;
mod openapi;
mod patch;
mod persist;
mod proto;
mod rbac;
mod requestlog;
mod reviews;
mod routes;
mod scale;
mod selector;
mod ssa;
mod store;
mod strategic;
mod table;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;
mod typed;
mod watch;
mod write;

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use error::Error;
pub use faults::{FaultMode, Faults};
pub use persist::{PersistError, Restored};
pub use requestlog::RequestLog;
pub use store::Store;

use auth::Authority;

#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    pub cluster_name: String,
    /// Must be a loopback address; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Watch events kept for resuming watches and paginated lists.
    pub history_limit: usize,
    /// Larger request bodies get 413.
    pub max_body_bytes: usize,
    /// Where to record who made each resource request (off by default).
    pub request_log: Option<Arc<RequestLog>>,
    /// Authorize requests with the stored RBAC objects, impersonation with the `impersonate` verb, and
    /// RBAC writes against escalation (off by default: everyone may do everything).
    pub enforce_rbac: bool,
    /// Keep the store (and the CA, admin token and token key) in this folder: restored at start,
    /// every write made durable before it is answered (off by default: memory only).
    pub store_dir: Option<std::path::PathBuf>,
}

impl ApiServerConfig {
    /// A config with the defaults: a free loopback port, 10 000 events of history, 3 MiB bodies.
    pub fn new(cluster_name: impl Into<String>) -> ApiServerConfig {
        ApiServerConfig {
            cluster_name: cluster_name.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 10_000,
            max_body_bytes: 3 * 1024 * 1024,
            request_log: None,
            enforce_rbac: false,
            store_dir: None,
        }
    }
}

/// State shared by every connection and request of one simulated cluster.
pub(crate) struct Ctx {
    cfg: ApiServerConfig,
    addr: SocketAddr,
    store: Store,
    faults: Faults,
    authority: Arc<Authority>,
    shutdown: CancellationToken,
    restored: Option<Restored>,
}

/// A running simulated API server; it stops when the shutdown token is cancelled.
pub struct ApiServer {
    ctx: Arc<Ctx>,
}

impl ApiServer {
    pub async fn start(cfg: ApiServerConfig, shutdown: CancellationToken) -> Result<ApiServer, Error> {
        if !cfg.bind.ip().is_loopback() {
            return Err(Error::Startup(format!("{} is not a loopback address", cfg.bind)));
        }
        let listener = TcpListener::bind(cfg.bind).await.map_err(|source| Error::Bind {
            addr: cfg.bind,
            source,
        })?;
        let addr = listener.local_addr().map_err(|e| Error::Startup(e.to_string()))?;
        let (authority, store, restored) = match &cfg.store_dir {
            None => {
                let authority = Arc::new(Authority::new(&cfg.cluster_name)?);
                let store = Store::new(cfg.history_limit, authority.clone())?;
                (authority, store, None)
            }
            Some(dir) => {
                let opened = persist::open(dir)?;
                let authority = Arc::new(Authority::load_or_create(dir, &cfg.cluster_name)?);
                let (store, restored) = Store::open(cfg.history_limit, authority.clone(), opened)?;
                (authority, store, restored)
            }
        };
        let acceptor = TlsAcceptor::from(tls::server_config(&authority)?);
        let span = tracing::info_span!("apiserver", cluster = %cfg.cluster_name, %addr);
        let ctx = Arc::new(Ctx {
            cfg,
            addr,
            store,
            faults: Faults::default(),
            authority,
            shutdown,
            restored,
        });
        tokio::spawn(tls::accept_loop(listener, acceptor, ctx.clone()).instrument(span));
        Ok(ApiServer { ctx })
    }

    /// What the store folder held at start; `None` without a folder or when it was empty.
    pub fn restored(&self) -> Option<&Restored> {
        self.ctx.restored.as_ref()
    }

    pub fn addr(&self) -> SocketAddr {
        self.ctx.addr
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.ctx.addr)
    }

    pub fn cluster_name(&self) -> &str {
        &self.ctx.cfg.cluster_name
    }

    /// The simulator's own CA, which signs the serving certificate and client certificates.
    pub fn ca_pem(&self) -> &str {
        self.ctx.authority.ca_pem()
    }

    pub fn admin_token(&self) -> &str {
        self.ctx.authority.admin_token()
    }

    /// A kubeconfig for the admin: the cluster (server + CA data), a user with the admin token, and a
    /// context named after the cluster.
    pub fn admin_kubeconfig(&self) -> String {
        let name = &self.ctx.cfg.cluster_name;
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": name, "cluster": {"server": self.url(), "certificate-authority-data": B64.encode(self.ca_pem())}}],
            "users": [{"name": format!("{name}-admin"), "user": {"token": self.admin_token()}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": format!("{name}-admin")}}],
            "current-context": name,
        });
        serde_yaml::to_string(&config).unwrap_or_default()
    }

    /// A client certificate and key (PEM) for `user` in `groups` (CN=user, O=group), signed by the CA.
    /// At most two groups can be encoded.
    pub fn issue_client_cert(&self, user: &str, groups: &[&str]) -> Result<(String, String), Error> {
        self.ctx.authority.issue_client_cert(user, groups)
    }

    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    pub fn faults(&self) -> &Faults {
        &self.ctx.faults
    }
}
