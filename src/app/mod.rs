//! The composition root: loads config, builds components from typed configs made from the command
//! line, runs their start functions in order (istiod's `startFuncs`), waits for a signal, then drains
//! everything through one shutdown path.
//!
//! - [`clusters`]: assembles cluster discovery (aggregate, config cluster registry, secret controller).
//! - [`listeners`]: binds every served address first, naming the flag when one is taken.
//! - [`secure`]: composes the CA, TLS and authentication into the secure port (15012).
//!
//! Nothing below `app` imports it: components get their own configs, never [`Args`].

pub mod clusters;
pub mod listeners;
pub mod secure;

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use anyhow::Context;
use axum::{Json, routing::get};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use self::listeners::{ListenSpecs, Listeners};
use crate::{
    admin, aggregate, analysis,
    cli::{Args, KubeSource},
    config::{
        MeshConfig, MeshNetworks, ParseError,
        watch::{ConfigFile, ReloadMetrics},
    },
    config_controller,
    drain::Tasks,
    envoy,
    leader::{self, ElectionConfig},
    model::{ClusterId, DEFAULT_CLUSTER_ID},
    multicluster::{self, status::Clusters},
    readiness::Ready,
    registry,
    sandbox::{self, Sandbox},
    start::StartContext,
    xds,
};

type StartFuture = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>;
type StartFn = Box<dyn FnOnce(StartContext) -> StartFuture + Send>;

/// Components register start functions; [`Server::start`] runs them in registration order. Each one
/// binds what it serves and spawns its tasks, then returns; an error aborts start-up naming the component.
pub struct Server {
    ctx: StartContext,
    start_funcs: Vec<(&'static str, StartFn)>,
}

impl Server {
    /// A server with no components yet.
    pub fn new() -> Self {
        Self {
            ctx: StartContext {
                tasks: Tasks::new(),
                ready: Ready::new(),
            },
            start_funcs: Vec::new(),
        }
    }

    /// The shared start context (for components that need readiness or tasks before start).
    pub fn context(&self) -> &StartContext {
        &self.ctx
    }

    /// Registers a named start function.
    pub fn add_start_func<F, Fut>(&mut self, name: &'static str, f: F)
    where
        F: FnOnce(StartContext) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.start_funcs
            .push((name, Box::new(move |ctx| Box::pin(f(ctx)))));
    }

    /// Runs every start function in order. Readiness is held until all of them have returned.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        let _starting = self.ctx.ready.register("start-up");
        for (name, f) in self.start_funcs.drain(..) {
            info!(component = name, "starting");
            f(self.ctx.clone())
                .await
                .with_context(|| format!("starting {name}"))?;
        }
        Ok(())
    }

    /// Stops every task, waiting at most `deadline`.
    pub async fn drain(&self, deadline: Duration) {
        info!(deadline = %humantime::format_duration(deadline), "draining");
        match self.ctx.tasks.drain(deadline).await {
            Ok(()) => info!("drained"),
            Err(e) => warn!(error = %e, "drain deadline passed; exiting anyway"),
        }
    }
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

/// The effective configuration files, each a watch channel with the last good value.
#[derive(Clone)]
pub struct MeshWatches {
    /// Mesh config.
    pub mesh: watch::Receiver<Arc<MeshConfig>>,
    /// meshNetworks.
    pub networks: watch::Receiver<Arc<MeshNetworks>>,
}

/// Runs meshd until SIGTERM/ctrl-c, then drains. Start-up errors are returned (non-zero exit).
pub async fn run(mut args: Args) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    admin::register_build_info(&mut registry);
    let reload_metrics = ReloadMetrics::new(&mut registry);
    let xds_metrics = xds::metrics::Metrics::new(&mut registry);
    let config_metrics = config_controller::Metrics::new(&mut registry);
    let clusters = Clusters::default();
    let cluster_metrics = clusters::Metrics {
        registry: registry::Metrics::new(&mut registry),
        aggregate: aggregate::Metrics::new(&mut registry),
        multicluster: multicluster::Metrics::new(&mut registry, clusters.clone()),
    };
    let mut server = Server::new();

    // Config files are validated before anything listens: a bad file at start is a clear, fatal error.
    let watches = watch_config(&args, &server.context().tasks, reload_metrics)?;

    // The sandbox's state folder is claimed and every address bound before anything is written, so a
    // second meshd on the same machine fails without touching the first one's state.
    let sandboxed = matches!(args.kube_source(), KubeSource::Sandbox(_));
    anyhow::ensure!(
        sandboxed || !args.fresh,
        "--fresh empties the sandbox's state folder, and this meshd runs against a real cluster, not the \
         sandbox"
    );
    let _state_lock = if sandboxed {
        let dir = args.state_dir.get_or_insert_with(sandbox::default_state_dir);
        Some(sandbox::StateLock::acquire(dir)?)
    } else {
        None
    };
    let listeners = Listeners::bind(&listen_specs(&args, sandboxed)).await?;
    let bound = listeners.addresses;

    // The simulated clusters stop after meshd has drained (when this guard drops on return), so its
    // components' last calls (releasing the lease, closing watches) still reach them.
    let simulators = CancellationToken::new();
    let _stop_simulators = simulators.clone().drop_guard();
    // With no real cluster, simulated ones take its place; the pipeline below cannot tell the difference.
    let sandbox = match args.kube_source() {
        KubeSource::Sandbox(dir) => Some(start_sandbox(&mut args, dir, &bound, simulators.clone()).await?),
        _ => None,
    };

    if let Some(dir) = &args.multicluster_kubeconfig_path {
        anyhow::ensure!(
            dir.is_dir(),
            "--multicluster-kubeconfig-path {}: not a readable folder",
            dir.display()
        );
    }
    let cluster_id: ClusterId = args.cluster_id.as_deref().unwrap_or(DEFAULT_CLUSTER_ID).into();
    let (cluster_discovery, view) = clusters::new(
        clusters_options(&args, &cluster_id, &watches),
        watches.networks.clone(),
        clusters,
        cluster_metrics,
    );
    let cluster_discovery = cluster_discovery.with_mesh_config(watches.mesh.clone());
    let registry = Arc::new(registry);
    let limits = xds::XdsLimits::default().with_new_stream_rate(args.max_new_streams_per_second);
    let ads = xds_server(
        &server.context().tasks,
        view.snapshots.clone(),
        xds_metrics,
        limits,
    );

    let primary_source = match &sandbox {
        Some(sb) => KubeSource::Kubeconfig(sb.primary_kubeconfig()?.to_owned()),
        None => args.kube_source(),
    };
    let (primary, primary_server) = primary_client(&primary_source).await?;
    let secure_config = secure_config(&args, cluster_id.clone(), &watches.mesh.borrow().trust_domain);
    let mesh_auth = secure::mesh_authenticator(
        &secure_config,
        &watches.mesh.borrow(),
        primary.clone(),
        view.clusters.clone(),
    );

    // Gateway certificates over SDS, from the gateway's cluster.
    let credentials = crate::credentials::Credentials::new(
        secure::cluster_clients(&cluster_id, primary.clone(), view.clusters.clone()),
        &cluster_id,
        args.watch_timeout,
        server.context().tasks.clone(),
    );
    ads.serve_secrets(Arc::new(credentials));

    // Istio objects: one store fed by the config cluster and `--config-dir`.
    let (config_controller, istio_config) = config_controller::new(
        config_controller::Options {
            config_dir: args.config_dir.clone(),
            poll: args.config_poll,
        },
        config_metrics,
    );
    let debug = admin::Debug::default().route(
        "/debug/configz",
        "effective mesh config, meshNetworks and every Istio object with its source and status",
        get({
            let w = watches.clone();
            let istio = istio_config.clone();
            move || async move {
                Json(serde_json::json!({
                    "meshConfig": *w.mesh.borrow().clone(),
                    "meshNetworks": *w.networks.borrow().clone(),
                    "istioConfig": config_controller::configz(&istio.current()),
                }))
            }
        }),
    );
    let debug = debug.route(
        "/debug/analyzez",
        "istioctl analyze's messages (IST codes) on the config in force and every cluster's registry",
        get({
            let snapshots = view.snapshots.clone();
            move || async move {
                let snap = snapshots.load();
                Json(serde_json::json!({
                    "version": snap.version,
                    "messages": analysis::analyze(&analysis::Input::of_snapshot(&snap)),
                }))
            }
        }),
    );
    let debug = multicluster::status::routes(debug, view.clusters.clone());
    let debug = multicluster::check::routes(debug, view.clusters.clone(), view.snapshots.clone());
    let debug = xds::debug::routes(aggregate::routes(debug, &view.snapshots), &ads);
    let debug_auth = admin::DebugAuth {
        authenticator: Some(mesh_auth.clone()),
        system_namespace: args.system_namespace.clone(),
    };
    let admin = admin::router(server.context().ready.clone(), registry, debug, debug_auth);
    let header_timeout = args.http_header_timeout;
    let Listeners {
        grpc: grpc_listener,
        secure_grpc: secure_listener,
        http,
        monitoring,
        addresses: _,
    } = listeners;
    for (name, listener) in [("http", http), ("monitoring", monitoring)] {
        let router = admin.clone();
        server.add_start_func(name, move |ctx| async move {
            admin::serve(&ctx.tasks, name, listener, router, header_timeout);
            Ok(())
        });
    }

    let secure_ads = ads.clone();
    server.add_start_func("xds", move |ctx| async move {
        // Ready only once there is a snapshot to serve; streams are refused (UNAVAILABLE) until ready.
        let guard = ctx.ready.register("first xDS snapshot");
        ads.serve_when_ready(ctx.ready.clone());
        let first_snapshot = ads.first_snapshot();
        ctx.tasks.spawn("xds-first-snapshot", async move {
            first_snapshot.await;
            drop(guard);
        });
        info!(addr = %bound[0], "serving plaintext xDS");
        ctx.tasks.spawn("xds-plaintext", async move {
            if let Err(e) = ads.serve_plaintext(grpc_listener).await {
                warn!(error = %e, "plaintext xDS server failed");
            }
        });
        Ok(())
    });

    let config_source = config_controller::kubernetes::KubeSource {
        client: primary.clone(),
        cluster: cluster_id.clone(),
        server: primary_server.as_str().into(),
        watch_timeout: args.watch_timeout,
        namespaces: view.namespaces.clone(),
    };
    server.add_start_func("config controller", move |ctx| async move {
        config_controller.start(&ctx, Some(config_source));
        Ok(())
    });

    let discovery_client = primary.clone();
    server.add_start_func("cluster discovery", move |ctx| async move {
        cluster_discovery.start(&ctx, discovery_client, &primary_server, &istio_config);
        Ok(())
    });
    // Leader duties: publishing the mesh root (always, in the primary and every remote) and creating the self-signed CA's Secret.
    let leadership = start_leader_election(&mut server, &args, primary.clone())?;
    let ca = match &args.ca_dir {
        Some(dir) => secure::CaSource::Dir(dir.clone()),
        None => secure::CaSource::Secret {
            client: primary.clone(),
            namespace: args.system_namespace.clone(),
            leader: leadership.subscribe(),
        },
    };
    let duties = secure::LeaderDuties {
        client: primary,
        remotes: view.clusters.clone(),
        leadership,
        mesh: watches.mesh.clone(),
    };
    server.add_start_func("secure grpc", move |ctx| async move {
        secure::start(
            &ctx,
            &secure_config,
            secure_listener,
            ca,
            duties,
            mesh_auth,
            &secure_ads,
        )
        .await
    });

    // One signal listener for the whole run: a fresh one per wait would lose a SIGINT that lands
    // between two of them (the first ctrl-c right after ready was swallowed).
    let shutdown = crate::signal::shutdown();
    tokio::pin!(shutdown);
    let started = tokio::select! {
        r = server.start() => Some(r),
        _ = &mut shutdown => None,
    };
    if let Some(Err(e)) = started {
        server.drain(args.drain_deadline).await;
        return Err(e);
    }
    if started.is_some() {
        let ready = server.context().ready.clone();
        tokio::select! {
            _ = ready.wait() => {
                info!("meshd is ready");
                if let Some(sb) = &sandbox {
                    println!("{}", sb.summary(&serving_addresses(&bound)));
                }
            }
            _ = &mut shutdown => { server.drain(args.drain_deadline).await; return Ok(()); }
        }
        shutdown.await;
    }
    server.drain(args.drain_deadline).await;
    Ok(())
}

/// The ADS server, its streams following discovery's snapshots as the aggregate publishes them
/// (debounced there with `--debounce-after` / `--debounce-max`), within `limits`
/// (`--max-new-streams-per-second`).
fn xds_server(
    tasks: &Tasks,
    snapshots: aggregate::Snapshots,
    metrics: xds::metrics::Metrics,
    limits: xds::XdsLimits,
) -> xds::AdsServer {
    xds::AdsServer::new(
        Arc::new(snapshots),
        tasks.clone(),
        metrics,
        Arc::new(envoy::SplitHorizon),
        limits,
    )
}

fn watch_config(args: &Args, tasks: &Tasks, metrics: ReloadMetrics) -> anyhow::Result<MeshWatches> {
    let mesh = match &args.mesh_config {
        Some(path) => ConfigFile::new("mesh config", path, parse_mesh_config).watch(
            tasks,
            args.config_poll,
            metrics.clone(),
        )?,
        None => watch::channel(Arc::new(MeshConfig::default())).1,
    };
    let networks = match &args.mesh_networks {
        Some(path) => ConfigFile::new("meshNetworks", path, MeshNetworks::parse).watch(
            tasks,
            args.config_poll,
            metrics,
        )?,
        None => watch::channel(Arc::new(MeshNetworks::default())).1,
    };
    Ok(MeshWatches { mesh, networks })
}

/// Mesh config tolerates unknown fields (newer Istio settings) but says which it ignores.
fn parse_mesh_config(text: &str) -> Result<MeshConfig, ParseError> {
    let (cfg, unknown) = MeshConfig::parse(text)?;
    for field in unknown {
        warn!(%field, "mesh config field not used by meshd; ignored");
    }
    Ok(cfg)
}

/// Registers leader election among the replicas (a Lease in the system namespace) as a start function;
/// returns whether this replica leads, for the duties that write.
fn start_leader_election(
    server: &mut Server,
    args: &Args,
    client: kube::Client,
) -> anyhow::Result<leader::Leadership> {
    let mut cfg = ElectionConfig::new(args.system_namespace.clone());
    cfg.lease_name.clone_from(&args.leader_lease);
    let (election, leadership) = leader::new(client, cfg).context("leader election")?;
    server.add_start_func("leader election", move |ctx| async move {
        election.spawn(&ctx.tasks);
        Ok(())
    });
    Ok(leadership)
}

fn secure_config(args: &Args, cluster_id: ClusterId, trust_domain: &str) -> secure::Config {
    secure::Config {
        trust_domain: trust_domain.to_owned(),
        system_namespace: args.system_namespace.clone(),
        domain_suffix: args.domain_suffix.clone(),
        tls_hosts: args.tls_hosts.clone(),
        token_audience: args.token_audience.clone(),
        cluster_id,
        workload_certs: crate::ca::WorkloadCertPolicy {
            default_ttl: args.workload_cert_ttl,
            max_ttl: args.max_workload_cert_ttl,
        },
        config_poll: args.config_poll,
        sandbox: matches!(args.kube_source(), KubeSource::Sandbox(_)),
        state_dir: args.state_dir.clone(),
        watch_timeout: args.watch_timeout,
    }
}

fn clusters_options(args: &Args, cluster_id: &ClusterId, watches: &MeshWatches) -> clusters::Options {
    clusters::Options {
        cluster_id: cluster_id.clone(),
        system_namespace: args.system_namespace.clone(),
        domain_suffix: args.domain_suffix.clone(),
        trust_domain: watches.mesh.borrow().trust_domain.clone(),
        remote_cluster_timeout: args.remote_cluster_timeout,
        stale: crate::multicluster::stale::StalePolicy {
            action: args.stale_endpoints,
            after: args.stale_endpoints_after,
        },
        watch_timeout: args.watch_timeout,
        debounce_after: args.debounce_after,
        debounce_max: args.debounce_max,
        eds_debounce: args.eds_debounce(),
        insecure_kubeconfig_options: args.insecure_kubeconfig_options.iter().copied().collect(),
        kubeconfig_dir: args.multicluster_kubeconfig_path.clone(),
        config_poll: args.config_poll,
    }
}

/// What to bind: the four listen flags, resolved; in the sandbox, those left at their default may move
/// to a free port.
fn listen_specs(args: &Args, sandboxed: bool) -> ListenSpecs {
    let host = args.unspecified_host();
    let addrs = [
        args.grpc_addr,
        args.secure_grpc_addr,
        args.http_addr,
        args.monitoring_addr,
    ];
    std::array::from_fn(|i| {
        let flag = crate::cli::LISTEN_FLAGS[i].1;
        listeners::Listen {
            flag,
            addr: addrs[i].resolve(host),
            fallback: sandboxed && args.defaulted_listen_flags.contains(&flag),
        }
    })
}

/// Starts the sandbox for `dir` (or the built-in topology) and makes `args` describe it: the cluster
/// ID is the sandbox primary's and the state folder is the sandbox's. `bound` (see [`Listeners`]) is
/// written for tools.
async fn start_sandbox(
    args: &mut Args,
    dir: Option<std::path::PathBuf>,
    bound: &[SocketAddr; 4],
    stop: CancellationToken,
) -> anyhow::Result<Sandbox> {
    let topology = match &dir {
        Some(d) => sandbox::topology::from_dir(d),
        None => sandbox::topology::embedded(),
    }
    .context("loading the sandbox topology")?;
    let state_dir = args.state_dir.clone().unwrap_or_else(sandbox::default_state_dir);
    let sb = sandbox::start(
        topology,
        args.cluster_id.as_deref(),
        &state_dir,
        &args.system_namespace,
        sandbox::Keep::StateDir { fresh: args.fresh },
        stop,
    )
    .await
    .context("starting the sandbox")?;
    let [xds, secure_xds, http, monitoring] = bound.map(|a| a.to_string());
    sandbox::Addresses {
        xds,
        secure_xds,
        http,
        monitoring,
    }
    .write(&state_dir)?;
    args.cluster_id = Some(sb.primary().to_owned());
    args.state_dir = Some(state_dir);
    Ok(sb)
}

/// What the sandbox summary lists as meshd's addresses.
fn serving_addresses(bound: &[SocketAddr; 4]) -> Vec<(&'static str, String)> {
    let [grpc, secure_grpc, http, monitoring] = bound;
    vec![
        ("xDS (plaintext)", grpc.to_string()),
        ("xDS (mTLS)", secure_grpc.to_string()),
        ("ready", format!("http://{http}/ready")),
        ("monitoring", format!("http://{monitoring}")),
    ]
}

/// The primary (config) cluster's client, from a kubeconfig file or the pod's service account. The
/// operator's own kubeconfig is trusted (unlike remote secrets). Also returns its API server's URL.
async fn primary_client(source: &KubeSource) -> anyhow::Result<(kube::Client, String)> {
    let config = match source {
        KubeSource::Kubeconfig(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        _ => kube::Config::incluster().context("loading the in-cluster config")?,
    };
    let server = crate::kube_errors::server_url(&config);
    let client = kube::Client::try_from(config)
        .with_context(|| format!("building the Kubernetes client for {server}"))?;
    Ok((client, server))
}
