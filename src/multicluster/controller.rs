//! The secret controller: watches labelled Secrets in the system namespace on the config cluster, or
//! polls a kubeconfig folder instead ([`super::kubeconfig_dir`]), and keeps one supervised cluster per
//! wanted cluster ID (see [`super::secrets::desired`]).

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt, runtime::watcher};
use tracing::{info, warn};

use super::{
    cluster::{Env, Handle, SecretSettings},
    kubeconfig_dir,
    secrets::{Desired, SELECTORS_ANNOTATION, SecretData, SecretEntry, desired},
    stale::{self, StaleOverride},
    status::{Clusters, Entry, StatusSource, SyncStatus},
};
use crate::kube_watch;
use crate::{
    config::watch::{Change, ChangeDetector},
    drain::Tasks,
    model::ClusterId,
    readiness::{BlockReady, Ready},
    telemetry::{REPEAT_WINDOW, Repeats},
};

/// The label selecting remote-cluster Secrets (istiod's).
pub const SECRET_LABEL: &str = "istio/multiCluster=true";

/// Secrets (and data keys) beyond these are refused rather than buffered.
const MAX_SECRETS: usize = 1024;

/// Everything the controller needs.
pub struct Controller {
    /// Shared cluster settings.
    pub env: Env,
    /// meshd's own cluster (its entry and any Secret naming it).
    pub own: ClusterId,
    /// The table `/debug/clusterz` reads.
    pub clusters: Clusters,
    /// The own cluster's status row.
    pub own_status: StatusSource,
    /// The config cluster's API server URL, for messages.
    pub server: std::sync::Arc<str>,
    /// `PILOT_MULTICLUSTER_KUBECONFIG_PATH`: remote kubeconfigs from this folder, polled this often,
    /// instead of Secrets (istiod gives the folder precedence too).
    pub kubeconfig_dir: Option<(PathBuf, Duration)>,
}

struct Running {
    secret: String,
    handle: Handle,
}

impl Controller {
    /// Watches Secrets until `tasks` is cancelled. Readiness waits for the initial list and then for each
    /// cluster found in it (up to the remote-cluster timeout).
    pub fn spawn(self, tasks: &Tasks, ready: &Ready, client: Client) {
        let initial = ready.register("remote cluster secrets");
        // The config cluster's row shows from the start: while its API server is down no Secret list
        // arrives, and its status (why it is down) is what the operator needs to see.
        self.clusters.publish(vec![self.own_entry()]);
        let api = Api::<Secret>::namespaced(client, &self.env.system_namespace);
        let stop = tasks.cancelled();
        let tasks_inner = tasks.clone();
        let ready = ready.clone();
        tasks.spawn("secret controller", async move {
            tokio::select! {
                _ = stop => {}
                _ = async {
                    match self.kubeconfig_dir.clone() {
                        Some((dir, poll)) => self.run_dir(dir, poll, tasks_inner, ready, initial).await,
                        None => self.run(api, tasks_inner, ready, initial).await,
                    }
                } => {}
            }
        });
    }

    /// Polls the kubeconfig folder: the first read applies at once, later ones once two polls agree
    /// (a file being written is not half-read). A folder that cannot be read keeps what runs.
    async fn run_dir(self, dir: PathBuf, poll: Duration, tasks: Tasks, ready: Ready, initial: BlockReady) {
        let mut initial = Some(initial);
        let mut running: BTreeMap<ClusterId, Running> = BTreeMap::new();
        let mut changes: Option<ChangeDetector> = None;
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let read = kubeconfig_dir::read(&dir);
            let folder = match &mut changes {
                None => match read {
                    Ok(f) => {
                        changes = Some(ChangeDetector::new(f.digest));
                        f
                    }
                    Err(e) => {
                        warn!(error = %e, "reading remote cluster kubeconfigs failed; retrying");
                        changes = Some(ChangeDetector::new([0; 32]));
                        drop(initial.take());
                        continue;
                    }
                },
                Some(c) => match c.observe_by(read, |f| f.digest) {
                    Change::None => continue,
                    Change::Failed(e) => {
                        warn!(error = %e, "reading remote cluster kubeconfigs failed; keeping the clusters running");
                        continue;
                    }
                    Change::Stable(f) => f,
                },
            };
            info!(dir = %dir.display(), files = folder.secrets.len() + folder.rejected.len(), "remote cluster kubeconfigs read");
            let mut want = desired(&folder.secrets, &self.own, &self.env.allowed);
            want.rejected.extend(folder.rejected);
            let hold = initial.is_some().then_some(&ready);
            self.reconcile(want, &mut running, &tasks, hold);
            initial = None;
        }
    }

    async fn run(self, api: Api<Secret>, tasks: Tasks, ready: Ready, initial: BlockReady) {
        let mut initial = Some(initial);
        let config = kube_watch::config(self.env.watch_timeout).labels(SECRET_LABEL);
        let mut events = kube_watch::watch(api, config).boxed();
        let mut secrets = SecretData::new();
        let mut relist: Option<SecretData> = None;
        let mut repeats = Repeats::new(REPEAT_WINDOW);
        let mut running: BTreeMap<ClusterId, Running> = BTreeMap::new();
        while let Some(ev) = events.next().await {
            match ev {
                Ok(watcher::Event::Init) => {
                    relist = Some(SecretData::new());
                    continue;
                }
                Ok(watcher::Event::InitApply(s)) => {
                    if let Some(r) = &mut relist {
                        insert(r, &s);
                    }
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(n) = repeats.clear() {
                        info!(repeats = n, "watching remote cluster secrets recovered");
                    }
                    secrets = relist.take().unwrap_or_default();
                }
                Ok(watcher::Event::Apply(s)) => insert(&mut secrets, &s),
                Ok(watcher::Event::Delete(s)) => {
                    secrets.remove(&secret_name(&s));
                }
                Err(e) => {
                    let reason = crate::kube_errors::describe(&e, &self.server);
                    match repeats.observe(&reason, tokio::time::Instant::now()) {
                        Some(0) => warn!(error = %reason, "watching remote cluster secrets failed; retrying"),
                        Some(n) => {
                            let window = humantime::format_duration(repeats.window());
                            warn!(error = %reason, "watching remote cluster secrets failed; retrying (repeated {n} times in the last {window})");
                        }
                        None => {}
                    }
                    continue;
                }
            }
            // Only the clusters of the first full list hold readiness (as istiod's initial sync): a Secret
            // added later, even for an unreachable cluster, must not make every replica unready.
            let hold = initial.is_some().then_some(&ready);
            self.reconcile(
                desired(&secrets, &self.own, &self.env.allowed),
                &mut running,
                &tasks,
                hold,
            );
            initial = None;
        }
        drop(initial);
    }

    /// Starts, rotates and stops clusters to match what the Secrets (or files) ask for, and republishes
    /// the status table.
    fn reconcile(
        &self,
        want: Desired,
        running: &mut BTreeMap<ClusterId, Running>,
        tasks: &Tasks,
        ready: Option<&Ready>,
    ) {
        running.retain(|id, r| {
            // A Secret entry that turned invalid (malformed update) keeps the last valid client running,
            // as istiod does: a bad edit must not wipe a healthy cluster's endpoints.
            let still_claimed = want
                .rejected
                .iter()
                .any(|rej| &rej.cluster == id && rej.secret == r.secret);
            let keep = want.clusters.contains_key(id) || still_claimed;
            if still_claimed && !want.clusters.contains_key(id) {
                warn!(cluster = %id, secret = %r.secret, "remote cluster secret entry became invalid; keeping the previous client");
            }
            if !keep {
                info!(cluster = %id, secret = %r.secret, "remote cluster removed");
                r.handle.stop();
            }
            keep
        });
        for (id, w) in &want.clusters {
            match running.get_mut(id) {
                Some(r) => {
                    if r.handle.sha != w.sha {
                        info!(cluster = %id, secret = %w.secret, "remote cluster kubeconfig changed");
                        r.handle.rotate(w.kubeconfig.clone(), w.sha);
                    }
                    if r.handle.set_selectors(w.selectors.clone()) {
                        info!(cluster = %id, secret = %w.secret, "remote cluster discovery selectors changed");
                    }
                    if r.handle.set_stale_policy(self.stale_policy(&w.stale)) {
                        info!(cluster = %id, secret = %w.secret, "remote cluster stale-endpoints policy changed");
                    }
                    r.secret.clone_from(&w.secret);
                }
                None => {
                    info!(cluster = %id, secret = %w.secret, "remote cluster added");
                    let guard = ready.map(|r| r.register(format!("remote cluster {id}")));
                    let handle = Handle::start(
                        tasks,
                        self.env.clone(),
                        id.clone(),
                        w.kubeconfig.clone(),
                        w.sha,
                        SecretSettings {
                            selectors: w.selectors.clone(),
                            stale: self.stale_policy(&w.stale),
                        },
                        guard,
                    );
                    running.insert(
                        id.clone(),
                        Running {
                            secret: w.secret.clone(),
                            handle,
                        },
                    );
                }
            }
        }
        for r in &want.rejected {
            warn!(cluster = %r.cluster, secret = %r.secret, reason = %r.reason, "remote cluster secret entry not used");
        }
        let mut entries = vec![self.own_entry()];
        let mut rest: Vec<Entry> = running
            .iter()
            .map(|(id, r)| Entry {
                id: id.clone(),
                secret: r.secret.clone(),
                status: StatusSource::Live(r.handle.status.clone()),
                client: Some(r.handle.client.clone()),
                selectors: Some(r.handle.selectors()),
                staleness: Some(r.handle.staleness()),
                progress: Some(r.handle.progress.clone()),
                credentials: Some(r.handle.credentials.clone()),
            })
            .chain(want.rejected.iter().map(|r| Entry {
                id: r.cluster.clone(),
                secret: r.secret.clone(),
                status: StatusSource::Fixed(SyncStatus::Error(r.reason.clone())),
                client: None,
                selectors: None,
                staleness: None,
                progress: None,
                credentials: None,
            }))
            .collect();
        rest.sort_by(|a, b| (&a.id, &a.secret).cmp(&(&b.id, &b.secret)));
        entries.extend(rest);
        self.clusters.publish(entries);
    }
}

impl Controller {
    /// A Secret's stale-endpoints policy over the mesh-wide default (checked by [`desired`]).
    fn stale_policy(&self, own: &StaleOverride) -> stale::StalePolicy {
        own.resolve(self.env.stale).unwrap_or(self.env.stale)
    }

    fn own_entry(&self) -> Entry {
        Entry {
            id: self.own.clone(),
            secret: String::new(),
            status: self.own_status.clone(),
            client: None,
            selectors: None,
            staleness: None,
            progress: None,
            credentials: None,
        }
    }
}

fn secret_name(s: &Secret) -> String {
    format!("{}/{}", s.namespace().unwrap_or_default(), s.name_any())
}

fn insert(secrets: &mut SecretData, s: &Secret) {
    if secrets.len() >= MAX_SECRETS && !secrets.contains_key(&secret_name(s)) {
        warn!(secret = %secret_name(s), "too many remote cluster secrets; ignoring this one");
        return;
    }
    let data = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), Arc::<[u8]>::from(v.0.as_slice())))
        .collect();
    let annotation = |key: &str| s.annotations().get(key).cloned();
    let entry = SecretEntry {
        data,
        selectors: annotation(SELECTORS_ANNOTATION),
        stale: StaleOverride {
            action: annotation(stale::ACTION_ANNOTATION),
            after: annotation(stale::AFTER_ANNOTATION),
        },
    };
    secrets.insert(secret_name(s), entry);
}
