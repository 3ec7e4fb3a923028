//! The secure gRPC server (15012): composes the mesh CA, the hot-swapping TLS config and the
//! authenticator, and serves the gRPC services that require an authenticated caller.
//!
//! [`start`] composes it at start-up from its [`Config`]: the certificate service from [`routes`] plus
//! the ADS service; [`serve`] binds and runs it. Does NOT: elect a leader (`app` starts the election and
//! hands the CA its [`CaSource`]), sign or verify anything itself (`ca`, `tls`, `auth` do).

use std::{path::PathBuf, sync::Arc, time::Duration};

use tokio::{net::TcpListener, sync::watch};
use tonic::service::Routes;
use tracing::{info, warn};

use anyhow::Context;

use crate::{
    auth::{Authenticator, CertAuthenticator, Chain, ClusterClients, PrimaryCluster, TokenAuthenticator},
    ca::{
        CaError, MeshCa, WorkloadCertPolicy,
        root_publisher::{self, RootPublisherConfig},
        sandbox::write_sandbox_certs,
        service::CertificateService,
        source,
    },
    config::MeshConfig,
    drain::Tasks,
    leader::Leadership,
    model::ClusterId,
    multicluster::status::Clusters,
    start::StartContext,
    tls::{AcceptLimits, ServingCert, TlsError},
    xds::AdsServer,
};

/// The secure server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// meshd's system namespace: in its serving certificate's names.
    pub system_namespace: String,
    /// Service DNS suffix: in its serving certificate's names.
    pub domain_suffix: String,
    /// Extra names for the serving certificate.
    pub tls_hosts: Vec<String>,
    /// Audience service-account tokens must carry.
    pub token_audience: String,
    /// The mesh's trust domain (mesh config's `trustDomain` at start).
    pub trust_domain: String,
    /// meshd's own (config) cluster: where tokens naming no cluster are reviewed.
    pub cluster_id: ClusterId,
    /// Lifetimes of workload certificates.
    pub workload_certs: WorkloadCertPolicy,
    /// How often plugged-in CA files are polled.
    pub config_poll: Duration,
    /// Running on simulated clusters: loopback names in the serving certificate, and client
    /// certificates written to `state_dir` for tools.
    pub sandbox: bool,
    /// meshd's state folder, if any.
    pub state_dir: Option<PathBuf>,
    /// Server-side timeout of the root publisher's watches, in seconds (`--watch-timeout`).
    pub watch_timeout: u32,
}

/// Why the secure server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    /// The CA's material is unusable.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// The TLS config could not be built.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Where the CA's key material comes from.
pub enum CaSource {
    /// A plugged-in `cacerts` folder, hot-reloaded.
    Dir(PathBuf),
    /// The self-signed root in `istio-ca-secret` of `namespace`, created by the leader if absent.
    Secret {
        /// Client of the primary cluster.
        client: kube::Client,
        /// The system namespace.
        namespace: String,
        /// Whether this replica leads (only the leader writes the Secret).
        leader: watch::Receiver<bool>,
    },
}

/// Starts the CA from `source`. The Secret source retries API errors until shutdown.
pub async fn start_ca(
    source: CaSource,
    trust_domain: &str,
    policy: WorkloadCertPolicy,
    poll: Duration,
    tasks: &Tasks,
) -> Result<MeshCa, CaError> {
    match source {
        CaSource::Dir(dir) => Ok(MeshCa::new(source::watch_dir(&dir, tasks, poll)?, policy)),
        CaSource::Secret {
            client,
            namespace,
            mut leader,
        } => {
            let mut backoff = Duration::from_millis(200);
            let mut waiting_logged = false;
            loop {
                let create = *leader.borrow_and_update();
                match source::load_or_create_secret(client.clone(), &namespace, trust_domain, create).await {
                    Ok(Some(bundle)) => return Ok(MeshCa::fixed(bundle, policy)),
                    Ok(None) => {
                        if !std::mem::replace(&mut waiting_logged, true) {
                            info!(%namespace, "no CA Secret yet; waiting for the leader to create it");
                        }
                        tokio::select! {
                            _ = leader.changed() => {}
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                            _ = tasks.cancelled() => return Err(CaError::Cancelled),
                        }
                        continue;
                    }
                    Err(e @ CaError::Kube(_)) if !tasks.is_cancelled() => {
                        warn!(error = %e, retry_in = %humantime::format_duration(backoff), "CA Secret not available yet");
                    }
                    Err(e) => return Err(e),
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// The names meshd's serving certificate carries: istiod's Service names (so istio-agent and
/// proxyless clients configured for istiod verify it), meshd's own, `extra`, and loopback names
/// in the sandbox.
pub fn serving_hosts(namespace: &str, domain_suffix: &str, extra: &[String], sandbox: bool) -> Vec<String> {
    let mut hosts = Vec::new();
    for name in ["istiod", "meshd", "istiod-remote", "istio-pilot"] {
        hosts.push(format!("{name}.{namespace}.svc"));
        hosts.push(format!("{name}.{namespace}.svc.{domain_suffix}"));
    }
    hosts.extend(extra.iter().cloned());
    if sandbox {
        hosts.extend(["localhost", "127.0.0.1", "::1"].map(String::from));
    }
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    hosts
}

/// Certificates first, then service-account tokens reviewed by `clients` (if any).
pub fn authenticator(
    trust_domain: &str,
    aliases: &[String],
    tokens: Option<(Arc<dyn ClusterClients>, String)>,
    audience: &str,
) -> Arc<dyn Authenticator> {
    let token =
        tokens.map(|(clients, primary)| TokenAuthenticator::new(clients, primary, audience, trust_domain));
    Arc::new(Chain::new(CertAuthenticator::new(trust_domain, aliases), token))
}

/// The gRPC services of the secure port. Add new secure services here.
pub fn routes(ca: &MeshCa, auth: &Arc<dyn Authenticator>) -> Routes {
    Routes::new(CertificateService::new(ca.clone(), auth.clone()).into_server())
}

/// Serves `routes` on `listener` over TLS with `tls` until shutdown.
pub fn serve(
    tasks: &Tasks,
    listener: TcpListener,
    tls: &ServingCert,
    routes: Routes,
    limits: AcceptLimits,
) -> Result<(), SecureError> {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "secure gRPC (mTLS) listening");
    }
    let incoming = crate::tls::incoming(listener, tls.server_config()?, limits, tasks);
    let stop = tasks.cancelled();
    let server = tonic::transport::Server::builder()
        .max_concurrent_streams(Some(1024))
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .add_routes(routes);
    tasks.spawn("secure-grpc", async move {
        if let Err(e) = server.serve_with_incoming_shutdown(incoming, stop).await {
            warn!(error = %e, "secure gRPC server stopped");
        }
    });
    Ok(())
}

/// The mesh authenticator: certificates, then tokens reviewed by the primary cluster (or the remote the
/// caller names). Shared by the secure port and the admin server's debug endpoints.
pub fn mesh_authenticator(
    cfg: &Config,
    mesh: &MeshConfig,
    primary: kube::Client,
    remotes: Clusters,
) -> Arc<dyn Authenticator> {
    let cluster_id = cfg.cluster_id.to_string();
    let clients = cluster_clients(&cluster_id, primary, remotes);
    authenticator(
        &mesh.trust_domain,
        &mesh.trust_domain_aliases,
        Some((clients, cluster_id)),
        &cfg.token_audience,
    )
}

/// What the CA's leader duties need: the clusters' clients and this replica's leadership.
pub struct LeaderDuties {
    /// Client of the primary (config) cluster.
    pub client: kube::Client,
    /// The remote clusters the secret controller runs (the root is published there too).
    pub remotes: Clusters,
    /// Whether this replica leads.
    pub leadership: Leadership,
    /// The mesh config (discovery selectors: where the root is published).
    pub mesh: tokio::sync::watch::Receiver<Arc<crate::config::MeshConfig>>,
}

/// Starts the mesh CA from `ca`, its leader duties, and the secure gRPC server (15012): TLS, and the
/// secure services (certificate signing and ADS) behind `auth`.
pub async fn start(
    ctx: &StartContext,
    cfg: &Config,
    listener: TcpListener,
    ca: CaSource,
    duties: LeaderDuties,
    auth: Arc<dyn Authenticator>,
    ads: &AdsServer,
) -> anyhow::Result<()> {
    let ca = start_ca(
        ca,
        &cfg.trust_domain,
        cfg.workload_certs,
        cfg.config_poll,
        &ctx.tasks,
    )
    .await
    .context("starting the mesh CA")?;
    // A leader duty: `istio-ca-root-cert` in every namespace of the primary and of each remote, again on
    // rotation.
    root_publisher::spawn(
        RootPublisherConfig {
            cluster: cfg.cluster_id.clone(),
            client: duties.client,
            remotes: duties.remotes,
            leadership: duties.leadership,
            roots: ca.subscribe(),
            watch_timeout: cfg.watch_timeout,
            mesh: duties.mesh,
        },
        &ctx.tasks,
    );
    if let (true, Some(state)) = (cfg.sandbox, &cfg.state_dir) {
        let certs = write_sandbox_certs(&ca, &cfg.trust_domain, &state.join("certs"))?;
        info!(dir = %state.join("certs").display(), identity = %certs.identity, "sandbox client certificates written");
    }
    let hosts = serving_hosts(
        &cfg.system_namespace,
        &cfg.domain_suffix,
        &cfg.tls_hosts,
        cfg.sandbox,
    );
    let tls = ServingCert::new(&ca, hosts)?;
    tls.keep_fresh(&ctx.tasks, &ca);
    serve(
        &ctx.tasks,
        listener,
        &tls,
        routes(&ca, &auth).add_service(ads.service(Some(auth.clone()))),
        AcceptLimits::default(),
    )?;
    Ok(())
}

/// Every cluster's client: the primary's, else a remote's the secret controller runs (token reviews,
/// gateway certificates).
pub fn cluster_clients(
    primary_id: &str,
    primary: kube::Client,
    remotes: Clusters,
) -> Arc<dyn ClusterClients> {
    Arc::new(MeshClusters {
        primary: PrimaryCluster::new(primary_id.to_owned(), primary),
        remotes,
    })
}

/// Token reviews go to the cluster the caller names: the primary, or a remote the secret controller runs.
struct MeshClusters {
    primary: PrimaryCluster,
    remotes: Clusters,
}

impl ClusterClients for MeshClusters {
    fn client(&self, cluster: &str) -> Option<kube::Client> {
        self.primary
            .client(cluster)
            .or_else(|| self.remotes.client(cluster))
    }

    fn known(&self) -> Vec<String> {
        let mut known = self.primary.known();
        known.extend(self.remotes.remote_ids());
        known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_names_cover_istiod_meshd_extra_and_sandbox_loopback() {
        let hosts = serving_hosts(
            "istio-system",
            "cluster.local",
            &["istiod.istio-system.svc".into(), "mesh.example".into()],
            true,
        );
        for want in [
            "istiod.istio-system.svc",
            "istiod.istio-system.svc.cluster.local",
            "meshd.istio-system.svc",
            "mesh.example",
            "localhost",
            "127.0.0.1",
        ] {
            assert!(hosts.iter().any(|h| h == want), "{want} missing from {hosts:?}");
        }
        assert_eq!(
            hosts.iter().filter(|h| *h == "istiod.istio-system.svc").count(),
            1
        );
        assert!(!serving_hosts("ns", "cluster.local", &[], false).contains(&"localhost".to_string()));
    }
}
