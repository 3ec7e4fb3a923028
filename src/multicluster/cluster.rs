//! One remote cluster's lifecycle, owned by one supervisor task: build a client from its kubeconfig,
//! run a registry, report status, hold readiness at most the remote-cluster timeout, follow its
//! staleness (★ [`super::stale`]), and rotate
//! credentials make-before-break.
//!
//! Rotation: the new kubeconfig gets a new client and a new registry generation while the old keeps
//! serving. When the new one has synced it has already handed the aggregator its full view (which prunes
//! what it lacks); only then is the old one stopped. A rotation that never syncs leaves the old serving.

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use super::{
    check::{self, Credentials},
    kubeconfig::{self, InsecureOption},
    stale::{StalePolicy, Staleness, Tracker},
    status::SyncStatus,
};
use crate::{
    aggregate::{RegistryId, Update, UpdateSender},
    config::{MeshConfig, MeshNetworks},
    drain::Tasks,
    model::ClusterId,
    readiness::BlockReady,
    registry::{
        self, Progress,
        namespaces::{Override, Selection},
    },
};

/// Settings shared by every cluster.
#[derive(Clone)]
pub struct Env {
    /// Where registries send.
    pub updates: UpdateSender,
    /// Conversion settings (its cluster is replaced per cluster).
    pub ctx: registry::service::Context,
    /// System namespace (network label source).
    pub system_namespace: String,
    /// meshNetworks.
    pub networks: watch::Receiver<Arc<MeshNetworks>>,
    /// The mesh config (its discovery selectors, unless a Secret overrides them).
    pub mesh: watch::Receiver<Arc<MeshConfig>>,
    /// Where every registry publishes its pods, for the ServiceEntries that select them.
    pub workloads: watch::Sender<registry::ClusterWorkloads>,
    /// Whether a ServiceEntry selects pods (only then do remotes publish theirs).
    pub workloads_wanted: watch::Receiver<bool>,
    /// How long a new cluster may hold readiness.
    pub timeout: Duration,
    /// ★ The mesh-wide stale-endpoints policy (a Secret's annotations override it).
    pub stale: StalePolicy,
    /// Server-side watch timeout, in seconds.
    pub watch_timeout: u32,
    /// `--insecure-kubeconfig-options`.
    pub allowed: Arc<BTreeSet<InsecureOption>>,
    /// Requests per second each remote client may make.
    pub qps: u64,
    /// Generation numbers, unique across clusters and rotations.
    pub generations: Arc<AtomicU64>,
    /// Sync timeouts.
    pub metrics: super::Metrics,
    /// Each registry's events.
    pub registry_metrics: registry::Metrics,
}

/// The progress of a running cluster's generation in charge; `None` before its first and once stopped.
pub type ProgressChannel = watch::Receiver<Option<watch::Receiver<Progress>>>;

/// What a remote's Secret sets besides its kubeconfig.
#[derive(Debug, Clone)]
pub struct SecretSettings {
    /// Its own discovery selectors (`None`: MeshConfig's).
    pub selectors: Override,
    /// ★ Its stale-endpoints policy (resolved over the mesh-wide default).
    pub stale: StalePolicy,
}

/// The controller's handle on a running cluster.
pub struct Handle {
    /// sha256 of the kubeconfig it runs (or is rotating to).
    pub sha: [u8; 32],
    /// Live status and last error.
    pub status: watch::Receiver<(SyncStatus, Option<String>)>,
    /// The client of the generation in charge (serving, else syncing); `None` once stopped. Lets token
    /// reviews for this cluster's workloads go to its own API server.
    pub client: watch::Receiver<Option<kube::Client>>,
    /// The progress of the same generation (its last event), for `remote-clusters --check`.
    pub progress: ProgressChannel,
    /// What the kubeconfig it runs authenticates with (its expiry), for `remote-clusters --check`.
    pub credentials: Credentials,
    /// `--insecure-kubeconfig-options`, to read rotated kubeconfigs' credentials alike.
    allowed: Arc<BTreeSet<InsecureOption>>,
    rotate: mpsc::Sender<Arc<[u8]>>,
    /// The Secret's own discovery selectors, which every registry generation follows.
    selectors: watch::Sender<Override>,
    /// ★ Its stale-endpoints policy, and its staleness as the supervisor follows it.
    stale_policy: watch::Sender<StalePolicy>,
    staleness: watch::Receiver<Staleness>,
    tasks: Tasks,
}

impl Handle {
    /// Starts supervising `cluster`; `ready` (given for the clusters known at start-up only) is released
    /// once it syncs or times out.
    pub fn start(
        tasks: &Tasks,
        env: Env,
        cluster: ClusterId,
        kubeconfig: Arc<[u8]>,
        sha: [u8; 32],
        own: SecretSettings,
        ready: Option<BlockReady>,
    ) -> Self {
        let SecretSettings { selectors, stale } = own;
        let (status_tx, status) = watch::channel((SyncStatus::Syncing, None));
        let (selectors, selectors_rx) = watch::channel(selectors);
        let (stale_policy, stale_rx) = watch::channel(stale);
        let (staleness_tx, staleness) = watch::channel(Staleness::at(stale, None, SystemTime::now()));
        let (rotate, rotations) = mpsc::channel(4);
        let (client_tx, client) = watch::channel(None);
        let (progress_tx, progress) = watch::channel(None);
        let tasks = tasks.child();
        let credentials = check::credentials(&kubeconfig, &env.allowed);
        let allowed = env.allowed.clone();
        let supervisor = Supervisor {
            env,
            cluster: cluster.clone(),
            tasks: tasks.clone(),
            status: status_tx,
            client: client_tx,
            progress: progress_tx,
            selectors: selectors_rx,
            stale: stale_rx,
            tracker: Tracker::new(stale, staleness_tx),
            published: 0,
            latest: 0,
        };
        tasks.spawn(
            &format!("cluster {cluster}"),
            supervisor.run(kubeconfig, rotations, ready),
        );
        Self {
            sha,
            status,
            client,
            progress,
            credentials,
            allowed,
            rotate,
            selectors,
            stale_policy,
            staleness,
            tasks,
        }
    }

    /// Replaces its stale-endpoints policy; whether it changed.
    pub fn set_stale_policy(&self, policy: StalePolicy) -> bool {
        send_if_changed(&self.stale_policy, policy)
    }

    /// Its staleness, as `/debug/clusterz` shows it.
    pub fn staleness(&self) -> watch::Receiver<Staleness> {
        self.staleness.clone()
    }

    /// Replaces the Secret's own selectors (the registry drops or relists namespaces in place);
    /// whether they changed.
    pub fn set_selectors(&self, selectors: Override) -> bool {
        send_if_changed(&self.selectors, selectors)
    }

    /// The Secret's own selectors, as `/debug/clusterz` shows them.
    pub fn selectors(&self) -> watch::Receiver<Override> {
        self.selectors.subscribe()
    }

    /// Rotates to a new kubeconfig (make-before-break).
    pub fn rotate(&mut self, kubeconfig: Arc<[u8]>, sha: [u8; 32]) {
        self.sha = sha;
        self.credentials = check::credentials(&kubeconfig, &self.allowed);
        if self.rotate.try_send(kubeconfig).is_err() {
            warn!("cluster supervisor is busy or gone; rotation dropped");
        }
    }

    /// Stops the cluster; its supervisor removes its shards.
    pub fn stop(&self) {
        self.tasks.cancel();
    }
}

/// A running registry generation.
struct Generation {
    id: u64,
    client: kube::Client,
    tasks: Tasks,
    progress: watch::Receiver<Progress>,
}

struct Supervisor {
    env: Env,
    cluster: ClusterId,
    tasks: Tasks,
    status: watch::Sender<(SyncStatus, Option<String>)>,
    client: watch::Sender<Option<kube::Client>>,
    progress: watch::Sender<Option<watch::Receiver<Progress>>>,
    selectors: watch::Receiver<Override>,
    stale: watch::Receiver<StalePolicy>,
    tracker: Tracker,
    /// Generation whose client was last published.
    published: u64,
    latest: u64,
}

impl Supervisor {
    async fn run(
        mut self,
        kubeconfig: Arc<[u8]>,
        mut rotations: mpsc::Receiver<Arc<[u8]>>,
        mut ready: Option<BlockReady>,
    ) {
        let stop = self.tasks.cancelled();
        tokio::pin!(stop);
        // Until the first sync or the timeout, whether or not readiness is held.
        let mut waiting = true;
        let deadline = tokio::time::sleep(self.env.timeout);
        tokio::pin!(deadline);
        let mut timed_out = false;
        let mut policy_open = true;
        let mut serving: Option<Generation> = None;
        let mut pending = self.start(&kubeconfig).await;
        if pending.is_none() {
            // An unusable kubeconfig will not get better by waiting: do not hold readiness for it.
            drop(ready.take());
            waiting = false;
        }
        loop {
            let stale_in = self.tracker.wake_in(SystemTime::now());
            let probe_in = self.tracker.counting().then_some(PROBE_EVERY);
            tokio::select! {
                _ = &mut stop => break,
                _ = sleep_for(stale_in) => {}
                _ = sleep_for(probe_in) => {}
                r = self.stale.changed(), if policy_open => match r {
                    Ok(()) => self.tracker.set_policy(*self.stale.borrow_and_update()),
                    Err(_) => policy_open = false,
                },
                Some(kc) = rotations.recv() => {
                    if let Some(old) = pending.take() {
                        old.tasks.cancel();
                    }
                    info!(cluster = %self.cluster, "kubeconfig changed; syncing new credentials while the old serve");
                    pending = self.start(&kc).await;
                }
                _ = &mut deadline, if waiting => {
                    timed_out = true;
                    self.env.metrics.sync_timeout();
                    warn!(cluster = %self.cluster, timeout = %humantime::format_duration(self.env.timeout), "remote cluster did not sync in time; no longer blocking readiness, still retrying");
                    drop(ready.take());
                    waiting = false;
                }
                r = changed(&mut pending) => {
                    if r.is_err() {
                        pending = None;
                    }
                }
                r = changed(&mut serving) => {
                    if r.is_err() {
                        serving = None;
                    }
                }
            }
            // A pending generation that has synced has already sent its full view: swap, then stop the old.
            if pending.as_ref().is_some_and(|p| p.progress.borrow().synced) {
                if let Some(old) = serving.take() {
                    old.tasks.cancel();
                    info!(cluster = %self.cluster, "switched to the new credentials");
                }
                serving = pending.take();
                drop(ready.take());
                waiting = false;
            }
            self.report(serving.as_ref().or(pending.as_ref()), timed_out);
            self.follow_staleness(serving.as_ref()).await;
        }
        self.env
            .updates
            .send(Update::Stale {
                cluster: self.cluster.clone(),
                action: None,
            })
            .await;
        // Late updates from stopped generations are ignored by the aggregator (generation check).
        self.env
            .updates
            .send(Update::Remove {
                shard: crate::model::ShardKey::kubernetes(self.cluster.clone()),
                generation: self.latest,
            })
            .await;
        self.env.workloads.send_if_modified(|all| {
            all.contains_key(&self.cluster) && Arc::make_mut(all).remove(&self.cluster).is_some()
        });
        self.status.send_replace((SyncStatus::Closed, None));
        self.client.send_replace(None);
        self.progress.send_replace(None);
    }

    /// Builds a client and starts a registry generation; `None` (with the reason in the status) if the
    /// kubeconfig cannot be loaded.
    async fn start(&mut self, kubeconfig: &[u8]) -> Option<Generation> {
        let config = match kubeconfig::client_config(kubeconfig, &self.env.allowed).await {
            Ok(c) => c,
            Err(e) => {
                warn!(cluster = %self.cluster, error = %e, "remote cluster kubeconfig rejected");
                self.status.send_replace((SyncStatus::Error(e.to_string()), None));
                return None;
            }
        };
        let server: Arc<str> = crate::kube_errors::server_url(&config).into();
        let client = match super::client::build(config, self.env.qps) {
            Ok(c) => c,
            Err(e) => {
                let reason = format!("cannot build a client for {server}: {e}");
                warn!(cluster = %self.cluster, error = %reason, "remote cluster client");
                self.status.send_replace((SyncStatus::Error(reason), None));
                return None;
            }
        };
        let id = self.env.generations.fetch_add(1, Ordering::Relaxed) + 1;
        self.latest = id;
        let tasks = self.tasks.child();
        let mut ctx = self.env.ctx.clone();
        ctx.cluster = self.cluster.clone();
        let progress = registry::spawn(
            &tasks,
            client.clone(),
            registry::Options {
                id: RegistryId::kubernetes(self.cluster.clone(), id),
                ctx,
                system_namespace: self.env.system_namespace.clone(),
                networks: self.env.networks.clone(),
                metrics: self.env.registry_metrics.clone(),
                watch_timeout: self.env.watch_timeout,
                server,
                workloads: Some(self.env.workloads.clone()),
                workloads_wanted: Some(self.env.workloads_wanted.clone()),
                selection: Selection {
                    mesh: self.env.mesh.clone(),
                    cluster: self.selectors.clone(),
                },
                selected: None,
            },
            self.env.updates.clone(),
        );
        Some(Generation {
            id,
            client,
            tasks,
            progress,
        })
    }

    /// ★ The serving registry's watches failing after its sync, and its API server not answering a
    /// request of its own, mean it is unreachable: the tracker counts down to stale and the aggregator
    /// learns the action in force. The probe matters both ways: a watch error stays until the next
    /// relist, and a watch that resumes on a quiet cluster brings no event to say so.
    async fn follow_staleness(&mut self, serving: Option<&Generation>) {
        let failing = serving.filter(|g| {
            let p = g.progress.borrow();
            p.synced && p.last_error.is_some()
        });
        let unreachable = match failing {
            Some(g) => !answers(&g.client).await,
            None => false,
        };
        let (change, turned) = self.tracker.observe(unreachable, SystemTime::now());
        if turned {
            self.env.metrics.stale();
            warn!(cluster = %self.cluster, "remote cluster API server unreachable past its stale-endpoints policy; its endpoints are now stale");
        }
        if let Some(action) = change {
            info!(cluster = %self.cluster, action = ?action, "remote cluster stale-endpoints action");
            self.env
                .updates
                .send(Update::Stale {
                    cluster: self.cluster.clone(),
                    action,
                })
                .await;
        }
    }

    fn report(&mut self, current: Option<&Generation>, timed_out: bool) {
        let Some(generation) = current else { return };
        if self.published != generation.id {
            self.published = generation.id;
            self.client.send_replace(Some(generation.client.clone()));
            self.progress.send_replace(Some(generation.progress.clone()));
        }
        let progress = generation.progress.borrow().clone();
        let status = SyncStatus::from_progress(&progress, timed_out);
        tracing::trace!(cluster = %self.cluster, generation = generation.id, %status, "status");
        self.status.send_if_modified(|s| {
            let new = (status, progress.last_error);
            let changed = *s != new;
            *s = new;
            changed
        });
    }
}

/// How often an unreachable remote's API server is asked whether it answers again.
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Whether the API server answers `GET /version` within [`PROBE_EVERY`].
async fn answers(client: &kube::Client) -> bool {
    matches!(
        tokio::time::timeout(PROBE_EVERY, client.apiserver_version()).await,
        Ok(Ok(_))
    )
}

/// Sends `value` unless it is the current one (receivers wake only on a change); whether it changed.
fn send_if_changed<T: PartialEq>(tx: &watch::Sender<T>, value: T) -> bool {
    tx.send_if_modified(|v| {
        let changed = *v != value;
        *v = value;
        changed
    })
}

/// Resolves after `d`; never without one.
async fn sleep_for(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the generation's progress changes; never if there is none.
async fn changed(generation: &mut Option<Generation>) -> Result<(), watch::error::RecvError> {
    match generation {
        Some(g) => g.progress.changed().await,
        None => std::future::pending().await,
    }
}
