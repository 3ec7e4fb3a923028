//! The end-to-end load tool behind `meshctl bench`: simulated clusters, the control plane under
//! test, ADS clients that subscribe as sidecars do, endpoint churn in the remote clusters (or the
//! only one), and what it all measured.
//!
//! Owns: the run's phases (start → initial config → churn → settle → verify) and their timing.
//! Does NOT: reach beyond loopback, or judge the numbers (the report states them; CI asserts only
//! that every client converged to the truth).
//!
//! Flow: [`world::World`] generates manifests and is the only writer to the simulators, so it is the
//! truth → [`target`] starts `meshd` on them (or the caller points at another ADS server fed by the
//! same simulators) → [`client`] tasks connect, get configured, tell which world service each EDS
//! resource is by its addresses ([`names`]), and recognise each change by its wire marker →
//! [`report`] and [`plot`] turn the observations into JSON, CSV, a table and an SVG.

mod ads;
mod client;
pub mod cost;
pub mod floor;
mod names;
pub mod plot;
mod real;
pub mod report;
pub mod restart;
pub mod scope;
pub mod stack_floor;
pub mod storm;
pub mod summary;
pub mod target;
pub mod world;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;
use tracing::info;

pub use client::Flavor;
use client::{ClientContext, Event, EventLog, Progress, Traffic};
use cost::{Pools, ToolCpu};
use names::Directory;
use real::RealCluster;
use report::{
    Convergence, Costs, EventRow, Initial, Machine, Percentiles, Phase, Report, TargetCost,
    Traffic as TrafficReport, Verification,
};
use scope::Scope;
use target::{Meshd, MeshdArgs, Usage};
use world::{Shape, World};

use meshd::{drain::Tasks, sandbox};

/// Namespace of the control plane in the simulated primary (remote secrets go there).
const SYSTEM_NAMESPACE: &str = "istio-system";
/// How often progress is polled while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Mismatches listed in a failed verification.
const MAX_MISMATCHES: usize = 10;

/// Why a run could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The simulated clusters did not start.
    #[error("starting the simulated clusters: {0:#}")]
    Sandbox(anyhow::Error),
    /// The real API server (`--kubeconfig`) refused a write.
    #[error("the API server: {0:#}")]
    Real(anyhow::Error),
    /// A file could not be written or a program not started.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The control plane process exited early.
    #[error("the control plane exited ({status}); its log is {}, ending:\n{tail}", log.display())]
    TargetExited {
        /// How it exited.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The end of the log (the reason, usually).
        tail: String,
    },
    /// The control plane did not become ready.
    #[error("the control plane was not ready within {0:?}")]
    NotReady(Duration),
    /// A simulator refused a change.
    #[error("writing a change to a simulator: {0}")]
    Churn(#[from] kube_sim::Error),
    /// The options contradict each other.
    #[error("invalid bench options: {0}")]
    Options(String),
    /// A floor measurement (`bench-floor`) failed on its own loopback clients and servers.
    #[error("measuring the floor: {0}")]
    Floor(String),
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// An I/O error of the floors' loopback sockets.
    fn loopback(source: std::io::Error) -> Self {
        Error::io(Path::new("loopback"), source)
    }
}

/// Which protocol the clients speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Protocols {
    /// All delta.
    Delta,
    /// All state of the world.
    Sotw,
    /// Alternating.
    Mixed,
}

impl Protocols {
    fn of(self, client: usize) -> Flavor {
        match self {
            Self::Delta => Flavor::Delta,
            Self::Sotw => Flavor::Sotw,
            Self::Mixed if client.is_multiple_of(2) => Flavor::Delta,
            Self::Mixed => Flavor::Sotw,
        }
    }
}

/// The control plane to measure.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Target {
    /// Start this `meshd` binary on the simulators.
    Meshd(PathBuf),
    /// An ADS server the caller runs on the simulators (`pid`: for its RSS and CPU).
    Address {
        /// Plaintext ADS `host:port`.
        addr: String,
        /// Its process, if known.
        pid: Option<u32>,
        /// Its HTTP readiness address: clients dial only once `GET /ready` there answers 200, as
        /// they do for a meshd the run starts (`None`: at once, retrying until the server answers).
        ready: Option<std::net::SocketAddr>,
    },
}

/// A run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The generated mesh.
    pub shape: Shape,
    /// What each client's `Sidecar` imports (`None`: no Sidecar, every service).
    pub scope: Option<Scope>,
    /// Clients that must be configured and converge.
    pub clients: usize,
    /// Their protocol.
    pub flavor: Protocols,
    /// Extra clients that subscribe and never read.
    pub stalled: usize,
    /// New clients per second (`None`: all at once).
    pub connect_per_s: Option<f64>,
    /// Endpoint changes per second in remote clusters.
    pub churn_per_s: f64,
    /// How long to churn.
    pub duration: Duration,
    /// meshd's `--debounce-after`.
    pub debounce: Duration,
    /// The control plane.
    pub target: Target,
    /// Keep every client's endpoints and compare them with the truth at the end.
    pub verify: bool,
    /// Longest wait for the target to be ready and every client configured.
    pub configure_timeout: Duration,
    /// Longest wait after the churn for every change to reach every client.
    pub settle_timeout: Duration,
    /// Where the state, logs and reports go.
    pub out_dir: PathBuf,
    /// A real API server to write the world to instead of starting simulators (one cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Unrelated Secret updates written after the churn ([`storm`]).
    pub secret_storm: usize,
    /// Endpoint changes written while meshd is down for a restart under every client ([`restart`]).
    pub reconnect_storm: Option<usize>,
}

/// `meshctl bench` options.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Simulated clusters (the first is the primary).
    #[arg(long, default_value_t = 3)]
    pub clusters: usize,
    /// Services per cluster (same names everywhere).
    #[arg(long, default_value_t = 100)]
    pub services: usize,
    /// Endpoints per service per cluster.
    #[arg(long, default_value_t = 10)]
    pub endpoints: usize,
    /// Spread the clients over a few namespaces whose `Sidecar` imports this many services each.
    #[arg(long, value_name = "N")]
    pub sidecar_hosts: Option<usize>,
    /// ADS clients.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Their protocol.
    #[arg(long, value_enum, default_value = "delta")]
    pub protocol: Protocols,
    /// Extra clients that never read their stream.
    #[arg(long, default_value_t = 0)]
    pub stalled: usize,
    /// New clients per second (default: all at once).
    #[arg(long)]
    pub connect_rate: Option<f64>,
    /// Endpoint changes per second in remote clusters.
    #[arg(long, default_value_t = 10.0)]
    pub churn: f64,
    /// How long to churn.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// meshd's debounce quiet period.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub debounce: Duration,
    /// The meshd binary to start (default: next to this one).
    #[arg(long, value_name = "PATH", conflicts_with = "target")]
    pub meshd_bin: Option<PathBuf>,
    /// Measure this ADS server instead (start it on the simulators' kubeconfigs, printed at start).
    #[arg(long)]
    pub target: Option<String>,
    /// The target's process ID, for its RSS and CPU.
    #[arg(long, requires = "target")]
    pub target_pid: Option<u32>,
    /// The target's HTTP address: dial only once `GET /ready` there answers 200 (istiod's
    /// `--httpAddr`), so its start-up is not counted in the clients' initial config.
    #[arg(long, value_name = "HOST:PORT", requires = "target")]
    pub target_ready: Option<std::net::SocketAddr>,
    /// Compare every client's final endpoints with the truth (keeps every response: small runs).
    #[arg(long)]
    pub verify: bool,
    /// Longest wait for readiness and every client's initial config.
    #[arg(long, default_value = "180s", value_parser = humantime::parse_duration)]
    pub configure_timeout: Duration,
    /// Longest wait for the last changes to arrive after the churn.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub settle_timeout: Duration,
    /// Output folder: report.json, events.csv, convergence.svg, meshd.log, simulator state.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Also render convergence.svg.
    #[arg(long)]
    pub plot: bool,
    /// Write the world to this real API server instead of simulators (`--clusters 1`; the Istio CRDs
    /// and nothing else of the world must be there; no EndpointSlice controller may run).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// After the churn, this many updates to Secrets no proxy uses; reports the responses they caused.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub secret_storm: usize,
    /// Then kill meshd, write this many endpoint changes, restart it: every delta client resumes with
    /// `initial_resource_versions`; reports how long until all are up to date and what was re-sent.
    #[arg(long, value_name = "CHANGES", conflicts_with = "target")]
    pub reconnect_storm: Option<usize>,
}

impl Args {
    /// The run these options describe.
    pub fn config(self) -> Result<Config, Error> {
        if self.clusters == 0 || self.services == 0 || self.endpoints == 0 {
            return Err(Error::Options(
                "clusters, services and endpoints must be at least 1".into(),
            ));
        }
        if self.kubeconfig.is_some() && self.clusters != 1 {
            return Err(Error::Options(
                "--kubeconfig takes one cluster: --clusters 1".into(),
            ));
        }
        if self.sidecar_hosts == Some(0) {
            return Err(Error::Options("--sidecar-hosts must be at least 1".into()));
        }
        if self.churn < 0.0 || self.connect_rate.is_some_and(|r| r <= 0.0) {
            return Err(Error::Options("rates must be positive".into()));
        }
        let target = match self.target {
            Some(addr) => Target::Address {
                addr,
                pid: self.target_pid,
                ready: self.target_ready,
            },
            None => Target::Meshd(match self.meshd_bin {
                Some(path) => path,
                None => std::env::current_exe()
                    .map_err(|e| Error::io(Path::new("meshctl"), e))?
                    .with_file_name("meshd"),
            }),
        };
        Ok(Config {
            shape: Shape {
                clusters: self.clusters,
                services: self.services,
                endpoints: self.endpoints,
            },
            scope: self.sidecar_hosts.map(|hosts| Scope::new(hosts, self.services)),
            clients: self.clients,
            flavor: self.protocol,
            stalled: self.stalled,
            connect_per_s: self.connect_rate,
            churn_per_s: self.churn,
            duration: self.duration,
            debounce: self.debounce,
            target,
            verify: self.verify,
            configure_timeout: self.configure_timeout,
            settle_timeout: self.settle_timeout,
            out_dir: self.out,
            kubeconfig: self.kubeconfig,
            secret_storm: self.secret_storm,
            reconnect_storm: self.reconnect_storm,
        })
    }
}

/// Runs the benchmark; with `plot`, also writes `convergence.svg` beside the report.
pub async fn run(cfg: Config, plot: bool) -> Result<Report, Error> {
    let tasks = Tasks::new();
    let _stop = tasks.token().drop_guard();
    let report = Run::start(cfg, &tasks).await?.measure().await?;
    write(&report, plot)?;
    tasks.cancel();
    // Clients and simulators stop on cancellation; a stuck one must not hang the report.
    let _ = tasks.drain(Duration::from_secs(5)).await;
    Ok(report)
}

/// Where the world lives.
enum Source {
    /// The simulators the run started.
    Sim(sandbox::Sandbox),
    /// A real API server (`--kubeconfig`).
    Real(RealCluster),
}

/// A started run: simulators up, target ready.
struct Run {
    cfg: Config,
    machine: Machine,
    tasks: Tasks,
    world: World,
    source: Source,
    meshd: Option<Meshd>,
    pid: Option<u32>,
    ctx: Arc<ClientContext>,
    started: Instant,
    /// Last: the runtimes outlive the sandbox and the clients that run on them.
    pools: Pools,
}

impl Run {
    async fn start(cfg: Config, tasks: &Tasks) -> Result<Run, Error> {
        let (machine, started) = (Machine::current(), Instant::now());
        let state_dir = cfg.out_dir.join("state");
        std::fs::create_dir_all(&state_dir).map_err(|e| Error::io(&state_dir, e))?;
        let pools = Pools::new().map_err(|e| Error::io(Path::new("tokio runtime"), e))?;
        let world = World::new(cfg.shape);
        info!(shape = ?cfg.shape, "starting simulated clusters");
        let primary = World::cluster_name(0);
        let mut manifests = world.manifests();
        if let (Some(scope), Some(first)) = (&cfg.scope, manifests.first_mut()) {
            first.objects.extend(scope.manifests());
        }
        let (source, kubeconfig) = match &cfg.kubeconfig {
            Some(path) => {
                let real = RealCluster::connect(path).await.map_err(Error::Real)?;
                let objects: Vec<_> = manifests.into_iter().flat_map(|m| m.objects).collect();
                let count = objects.len();
                let loading = Instant::now();
                real.load(objects).await.map_err(Error::Real)?;
                info!(
                    objects = count,
                    seconds = loading.elapsed().as_secs_f64(),
                    "world written to the API server"
                );
                (Source::Real(real), path.clone())
            }
            None => {
                let (first, dir, token) = (primary.clone(), state_dir.clone(), tasks.token());
                let sandbox = pools
                    .on_sims(async move {
                        let keep = sandbox::Keep::Memory;
                        sandbox::start(manifests, Some(&first), &dir, SYSTEM_NAMESPACE, keep, token).await
                    })
                    .await
                    .map_err(|e| Error::Sandbox(e.into()))?
                    .map_err(Error::Sandbox)?;
                let kubeconfig = sandbox
                    .kubeconfig(&primary)
                    .ok_or_else(|| Error::Options("the sandbox lost its primary".into()))?
                    .to_owned();
                (Source::Sim(sandbox), kubeconfig)
            }
        };
        let (meshd, addr, pid) = match &cfg.target {
            Target::Meshd(binary) => {
                let args = MeshdArgs {
                    binary: binary.clone(),
                    kubeconfig,
                    cluster_id: primary,
                    debounce: cfg.debounce,
                    log: cfg.out_dir.join("meshd.log"),
                };
                let within = cfg.configure_timeout;
                let meshd = tokio::task::spawn_blocking(move || Meshd::start(args, within))
                    .await
                    .map_err(|e| Error::Options(format!("starting meshd: {e}")))??;
                let (addr, pid) = (meshd.ads.to_string(), meshd.pid());
                (Some(meshd), addr, Some(pid))
            }
            Target::Address { addr, pid, ready } => {
                println!(
                    "simulators are up; start the control plane with --kubeconfig {} (cluster ID {primary})",
                    kubeconfig.display()
                );
                if let Some(ready) = *ready {
                    let within = cfg.configure_timeout;
                    tokio::task::spawn_blocking(move || target::wait_ready(ready, within))
                        .await
                        .map_err(|e| Error::Options(format!("waiting for the target: {e}")))??;
                    info!(%ready, "the target is ready");
                }
                (None, addr.clone(), *pid)
            }
        };
        let ctx = Arc::new(ClientContext {
            target: addr,
            events: Arc::new(EventLog::default()),
            directory: Arc::new(Directory::new(world.addresses())),
            traffic: Arc::new(Traffic::default()),
            verify: cfg.verify,
            scope: cfg.scope,
            resume: cfg.reconnect_storm.is_some(),
        });
        Ok(Run {
            cfg,
            machine,
            tasks: tasks.clone(),
            world,
            source,
            meshd,
            pid,
            ctx,
            started,
            pools,
        })
    }

    fn usage(&self) -> Option<Usage> {
        self.pid.and_then(target::usage)
    }

    async fn measure(mut self) -> Result<Report, Error> {
        let (ready, tool_ready) = (self.usage(), ToolCpu::now());
        let (progress, mut initial) = self.connect().await;
        let (configured, tool_configured) = (self.usage(), ToolCpu::now());
        let churned = self.churn().await?;
        let converged = self.settle().await;
        let (end, tool_end) = (self.usage(), ToolCpu::now());
        initial.bytes_per_client = churned.bytes_before as f64 / self.cfg.clients.max(1) as f64;
        let cpu = |u: Option<Usage>| u.map(|u| u.cpu_seconds);
        let since = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        let cost = Costs::new(
            Phase {
                target_cpu_s: since(cpu(configured), cpu(ready)),
                tool: tool_configured.since(&tool_ready),
            },
            Phase {
                target_cpu_s: since(cpu(end), cpu(configured)),
                tool: tool_end.since(&tool_configured),
            },
            converged.0.changes,
            self.cfg.clients,
        );
        let traffic = &self.ctx.traffic;
        let churn_s = churned.elapsed.as_secs_f64().max(1e-9);
        let churn_responses = traffic.responses.load(Ordering::Relaxed) - churned.responses_before;
        let traffic = TrafficReport {
            pushes_per_s: churn_responses as f64 / churn_s,
            churn_responses,
            responses: traffic.responses.load(Ordering::Relaxed),
            resources: traffic.resources.load(Ordering::Relaxed),
            bytes: traffic.bytes.load(Ordering::Relaxed),
            churn_bytes_per_s: (traffic.bytes.load(Ordering::Relaxed) - churned.bytes_before) as f64
                / churn_s,
        };
        let target = match (ready, configured, end) {
            (Some(ready), Some(configured), Some(end)) => Some(TargetCost {
                ready,
                configured,
                end,
                churn_cpu_seconds: end.cpu_seconds - configured.cpu_seconds,
            }),
            _ => None,
        };
        // After every churn figure is taken: the storms' traffic and CPU are their own.
        let secret_storm = self.secret_storm().await?;
        let reconnect_storm = self.reconnect_storm(&progress, initial.bytes_per_client).await?;
        let verified = self.cfg.verify.then(|| self.verify(&progress));
        drop(self.meshd.take());
        let machine = Machine {
            load_at_end: Machine::load(),
            ..self.machine.clone()
        };
        Ok(Report {
            config: self.cfg.clone(),
            machine,
            initial,
            convergence: converged.0,
            traffic,
            target,
            cost,
            wall_s: self.started.elapsed().as_secs_f64(),
            verified,
            secret_storm,
            reconnect_storm,
            events: converged.1,
        })
    }

    /// Starts every client (the stalled ones last) and waits until the others are configured.
    async fn connect(&self) -> (Vec<Arc<Mutex<Progress>>>, Initial) {
        let started = Instant::now();
        let total = self.cfg.clients + self.cfg.stalled;
        let mut progress = Vec::with_capacity(total);
        for id in 0..total {
            if let Some(rate) = self.cfg.connect_per_s {
                tokio::time::sleep_until(started + Duration::from_secs_f64(id as f64 / rate)).await;
            }
            let p = Arc::new(Mutex::new(Progress::default()));
            progress.push(p.clone());
            let (ctx, stop) = (self.ctx.clone(), self.tasks.cancelled());
            let (flavor, stalled) = (self.cfg.flavor.of(id), id >= self.cfg.clients);
            // On their own runtime, so their CPU is counted apart from the simulators'.
            self.pools.clients().spawn(async move {
                tokio::select! {
                    _ = stop => {}
                    _ = client::run(ctx, id, flavor, stalled, p) => {}
                }
            });
        }
        let active = &progress[..self.cfg.clients];
        let deadline = started + self.cfg.configure_timeout;
        while Instant::now() < deadline && active.iter().any(|p| p.lock().configured.is_none()) {
            tokio::time::sleep(POLL).await;
        }
        let all_configured_s = started.elapsed().as_secs_f64();
        let done: Vec<Progress> = active.iter().map(|p| p.lock().clone()).collect();
        let initial = Initial {
            clients: self.cfg.clients,
            configured: done.iter().filter(|p| p.configured.is_some()).count(),
            since_accept_ms: Percentiles::of(done.iter().filter_map(|p| p.configured_since_accept).collect()),
            since_dial_ms: Percentiles::of(done.iter().filter_map(|p| p.configured).collect()),
            retries: done.iter().map(|p| u64::from(p.retries)).sum(),
            all_configured_s,
            bytes_per_client: 0.0,
        };
        info!(
            configured = initial.configured,
            seconds = all_configured_s,
            "initial config done"
        );
        (progress, initial)
    }

    /// Writes `churn_per_s × duration` changes, evenly spaced.
    async fn churn(&mut self) -> Result<Churned, Error> {
        let traffic = &self.ctx.traffic;
        let before = (
            traffic.responses.load(Ordering::Relaxed),
            traffic.bytes.load(Ordering::Relaxed),
        );
        let count = (self.cfg.churn_per_s * self.cfg.duration.as_secs_f64()).round() as u64;
        let started = Instant::now();
        for n in 0..count {
            let at = started + Duration::from_secs_f64(n as f64 / self.cfg.churn_per_s);
            tokio::time::sleep_until(at).await;
            self.change(n, started).await?;
        }
        Ok(Churned {
            elapsed: started.elapsed().max(self.cfg.duration),
            responses_before: before.0,
            bytes_before: before.1,
        })
    }

    /// Writes the `n`th endpoint change and logs the event the clients watch for (`started`: the
    /// churn's start, for its `at`).
    async fn change(&mut self, n: u64, started: Instant) -> Result<(), Error> {
        let written = Instant::now();
        let directory = &self.ctx.directory;
        let (change, writes) = self
            .world
            .churn_writes(n, |ip, service| directory.add(ip, service));
        // Logged before the writes: a control plane may push the new endpoint before the last write
        // (the old pod's deletion) returns, and a client only counts events it finds in the log.
        let event = Event::new(&change, written, written.saturating_duration_since(started));
        self.ctx.events.push(event);
        match &self.source {
            Source::Sim(sandbox) => World::write_to(&sandbox.clusters[change.cluster].server, writes)?,
            Source::Real(real) => real.write(writes).await.map_err(Error::Real)?,
        }
        Ok(())
    }

    /// Waits until every client saw every change (or the settle timeout), then summarises.
    async fn settle(&self) -> (Convergence, Vec<EventRow>) {
        let deadline = Instant::now() + self.cfg.settle_timeout;
        let events = self.ctx.events.events();
        // Per service: the clients whose scope includes it (all of them without a Sidecar).
        let expected: Vec<usize> = (0..self.cfg.shape.services)
            .map(|s| (0..self.cfg.clients).filter(|&c| self.sees(c, s)).count())
            .collect();
        let wanted = |e: &Event| expected.get(e.service).copied().unwrap_or(self.cfg.clients);
        while Instant::now() < deadline && events.iter().any(|e| e.seen.lock().len() < wanted(e)) {
            tokio::time::sleep(POLL).await;
        }
        let mut all_clients = Vec::new();
        let mut per_client = Vec::new();
        let mut unwatched = 0;
        let rows = events
            .iter()
            .map(|e| {
                let mut seen = e.seen.lock().clone();
                seen.sort_unstable();
                per_client.extend_from_slice(&seen);
                let clients = wanted(e);
                // A change no client's scope includes is delivered trivially, with no latency to count.
                unwatched += usize::from(clients == 0);
                let last =
                    (clients > 0 && seen.len() >= clients).then(|| seen.last().copied().unwrap_or_default());
                all_clients.extend(last);
                EventRow {
                    at_s: e.at.as_secs_f64(),
                    cluster: e.cluster,
                    service: e.service,
                    clients: seen.len(),
                    expected: clients,
                    all_clients_ms: last.map(|d| d.as_secs_f64() * 1e3),
                    median_ms: Percentiles::of(seen).p50,
                }
            })
            .collect();
        let convergence = Convergence {
            changes: events.len(),
            converged: all_clients.len() + unwatched,
            unwatched,
            all_clients_ms: Percentiles::of(all_clients),
            per_client_ms: Percentiles::of(per_client),
        };
        (convergence, rows)
    }

    /// Whether `client` is sent `service`'s endpoints.
    fn sees(&self, client: usize, service: usize) -> bool {
        self.cfg.scope.is_none_or(|s| s.sees(client, service))
    }

    /// Decodes every client's final endpoints and compares them, per world service (whatever the
    /// target names its resources), with the truth; each client must hold exactly the services its
    /// scope imports.
    fn verify(&self, progress: &[Arc<Mutex<Progress>>]) -> Verification {
        let mut mismatches = Vec::new();
        let mut other_clusters = BTreeSet::new();
        for (client, p) in progress[..self.cfg.clients].iter().enumerate() {
            let p = p.lock();
            let got = self.ctx.directory.by_service(&p.endpoints);
            let visible: BTreeSet<usize> = (0..self.cfg.shape.services)
                .filter(|&s| self.sees(client, s))
                .collect();
            // The clusters whose assignment is a world service's; the rest are the target's own.
            let mut services = BTreeSet::new();
            for (cluster, eds) in &p.clusters {
                let service = eds.as_deref().and_then(|name| {
                    let body = p.endpoints.get(name)?;
                    self.ctx.directory.service(name, body)
                });
                match service {
                    Some(s) => services.insert(s),
                    None => other_clusters.insert(cluster.to_string()),
                };
            }
            if services != visible {
                mismatches.push(format!(
                    "client {client}: clusters of services {services:?}, its scope {visible:?}"
                ));
            }
            if let Some(&extra) = got.keys().find(|s| !visible.contains(s)) {
                let name = World::service_name(extra);
                mismatches.push(format!("client {client}: {name}: outside its scope"));
            }
            for &service in &visible {
                let want = self.world.truth(service);
                if got.get(&service) != Some(&want) {
                    let (name, got) = (World::service_name(service), got.get(&service));
                    mismatches.push(format!("client {client}: {name}: got {got:?}, want {want:?}"));
                }
            }
        }
        mismatches.truncate(MAX_MISMATCHES);
        Verification {
            clients: self.cfg.clients,
            mismatches,
            other_clusters: other_clusters.into_iter().collect(),
        }
    }
}

/// Counters at the start of the churn, and how long it took.
struct Churned {
    elapsed: Duration,
    responses_before: u64,
    bytes_before: u64,
}

/// Writes report.json, events.csv and (with `plot`) convergence.svg into the output folder.
fn write(report: &Report, plot: bool) -> Result<(), Error> {
    let dir = &report.config.out_dir;
    let json = serde_json::to_string_pretty(report).map_err(|e| Error::io(dir, e.into()))?;
    let mut files = vec![("report.json", json), ("events.csv", report.csv())];
    if plot {
        files.push(("convergence.svg", plot::svg(report)));
    }
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};

    #[test]
    fn meshctl_bench_options_parse() {
        let argv = [
            "meshctl",
            "bench",
            "--meshd-bin",
            "/opt/meshd",
            "--clusters",
            "2",
            "--duration",
            "5s",
        ];
        let Command::Bench(args) = Cli::try_parse_from(argv).expect("parses").command else {
            panic!("not the bench command");
        };
        let config = args.config().expect("valid");
        assert!(matches!(config.target, Target::Meshd(ref p) if p == Path::new("/opt/meshd")));
        assert_eq!(
            (config.shape.clusters, config.duration),
            (2, Duration::from_secs(5))
        );
        let argv = [
            "meshctl",
            "bench",
            "--target",
            "127.0.0.1:15010",
            "--target-pid",
            "7",
        ];
        let Command::Bench(args) = Cli::try_parse_from(argv).expect("parses").command else {
            panic!("not the bench command");
        };
        assert!(matches!(
            args.config().unwrap().target,
            Target::Address { pid: Some(7), .. }
        ));
        let scoped = |hosts: &str| {
            let argv = ["meshctl", "bench", "--services", "100", "--sidecar-hosts", hosts];
            let Command::Bench(args) = Cli::try_parse_from(argv).expect("parses").command else {
                panic!("not the bench command");
            };
            args.config()
        };
        assert_eq!(scoped("20").expect("valid").scope, Some(Scope::new(20, 100)));
        assert!(scoped("0").is_err());
    }
}
