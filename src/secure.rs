//! The secure gRPC server (15012): composes the mesh CA, the hot-swapping TLS config and the
//! authenticator, and serves the gRPC services that require an authenticated caller.
//!
//! [`start`] composes it at start-up: the certificate service from [`routes`] plus the ADS service;
//! [`serve`] binds and runs it.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use tokio::net::TcpListener;
use tonic::service::Routes;
use tracing::{info, warn};

use anyhow::Context;

use crate::{
    app::StartContext,
    auth::{Authenticator, CertAuthenticator, Chain, ClusterClients, PrimaryCluster, TokenAuthenticator},
    ca::{
        CaError, MeshCa, WorkloadCertPolicy, sandbox::write_sandbox_certs, service::CertificateService,
        source,
    },
    cli::{Args, KubeSource},
    config::MeshConfig,
    drain::Tasks,
    leader::{self, ElectionConfig},
    multicluster::status::Clusters,
    tls::{AcceptLimits, ServingCert, TlsError},
    xds::AdsServer,
};

/// Why the secure server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    /// The CA's material is unusable.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// The TLS config could not be built.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
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
        leader: tokio::sync::watch::Receiver<bool>,
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
    Routes::new(CertificateService::new(ca.clone(), auth.clone()))
}

/// Binds `addr` and serves `routes` over TLS with `tls` until shutdown. Returns the bound address.
pub async fn serve(
    tasks: &Tasks,
    addr: SocketAddr,
    tls: &ServingCert,
    routes: Routes,
    limits: AcceptLimits,
) -> Result<SocketAddr, SecureError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| SecureError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| SecureError::Bind { addr, source })?;
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
    info!(addr = %bound, "secure gRPC (mTLS) listening");
    Ok(bound)
}

/// The mesh authenticator of `args`: certificates, then tokens reviewed by the primary cluster. Shared
/// by the secure port and the admin server's debug endpoints.
pub fn mesh_authenticator(
    args: &Args,
    mesh: &MeshConfig,
    primary: kube::Client,
    remotes: Clusters,
) -> Arc<dyn Authenticator> {
    let cluster_id = args.cluster_id.clone().unwrap_or_else(|| "Kubernetes".into());
    let clients: Arc<dyn ClusterClients> = Arc::new(MeshClusters {
        primary: PrimaryCluster::new(cluster_id.clone(), primary),
        remotes,
    });
    authenticator(
        &mesh.trust_domain,
        &mesh.trust_domain_aliases,
        Some((clients, cluster_id)),
        &args.token_audience,
    )
}

/// Starts the mesh CA and the secure gRPC server (15012): CA from `--ca-dir` or the CA Secret; then
/// TLS, and the secure services (certificate signing and ADS) behind `auth`.
pub async fn start(
    ctx: &StartContext,
    args: &Args,
    mesh: &MeshConfig,
    primary: kube::Client,
    auth: Arc<dyn Authenticator>,
    ads: &AdsServer,
) -> anyhow::Result<()> {
    let sandbox = matches!(args.kube_source(), KubeSource::Sandbox(_));
    let source = match &args.ca_dir {
        Some(dir) => CaSource::Dir(dir.clone()),
        None => {
            let mut election = ElectionConfig::new(args.system_namespace.clone());
            election.lease_name.clone_from(&args.leader_lease);
            let leadership =
                leader::start(primary.clone(), election, &ctx.tasks).context("leader election")?;
            CaSource::Secret {
                client: primary.clone(),
                namespace: args.system_namespace.clone(),
                leader: leadership.subscribe(),
            }
        }
    };
    let policy = WorkloadCertPolicy {
        default_ttl: args.workload_cert_ttl,
        max_ttl: args.max_workload_cert_ttl,
    };
    let ca = start_ca(source, &mesh.trust_domain, policy, args.config_poll, &ctx.tasks)
        .await
        .context("starting the mesh CA")?;
    if let (true, Some(state)) = (sandbox, &args.state_dir) {
        let certs = write_sandbox_certs(&ca, &mesh.trust_domain, &state.join("certs"))?;
        info!(dir = %state.join("certs").display(), identity = %certs.identity, "sandbox client certificates written");
    }
    let hosts = serving_hosts(
        &args.system_namespace,
        &args.domain_suffix,
        &args.tls_hosts,
        sandbox,
    );
    let tls = ServingCert::new(&ca, hosts)?;
    tls.keep_fresh(&ctx.tasks, &ca);
    let addr = args.secure_grpc_addr.resolve(args.unspecified_host());
    serve(
        &ctx.tasks,
        addr,
        &tls,
        routes(&ca, &auth).add_service(ads.service(Some(auth.clone()))),
        AcceptLimits::default(),
    )
    .await?;
    Ok(())
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
