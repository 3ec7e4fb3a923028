//! One registry per cluster: kube-rs watchers on Namespaces, Services, EndpointSlices, Pods and Nodes,
//! folded into a compact [`state::State`] by one task, which sends the aggregator what changed.
//!
//! Discovery selectors ([`namespaces`]): the namespaced watchers start once the Namespaces are listed,
//! and keep only the objects of discovered namespaces, so an undiscovered namespace costs no memory
//! beyond decoding its objects into [`objects`]' slim types, which skip what meshd does not read, and
//! none at all when a few namespaces are selected ([`watches`] then lists only those). A
//! namespace that stops being discovered has its objects dropped at once; one that starts makes the
//! namespaced watchers relist (istiod replays its informer cache instead, which holds every object).
//!
//! Until every watcher has finished its initial list the registry sends nothing; then it sends its whole
//! view at once ([`Update::Replace`]), which is what lets a rotated registry replace the old one without
//! a gap. A relist after a watch error (410 Gone, 500s, a dropped connection) updates objects in place
//! and deletes only what the new list lacks, so the last good state is served meanwhile.

pub mod endpoints;
pub mod invalid;
mod metrics;
pub mod namespaces;
pub mod network;
pub mod objects;
pub mod service;
mod state;
mod watches;
mod workload_name;

pub use metrics::Metrics;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::{Client, ResourceExt, core::PartialObjectMeta, runtime::watcher};
use tokio::sync::watch;
use tracing::{info, warn};

use self::{
    endpoints::{ObjectName, PodWorkload},
    invalid::{InvalidAddress, Reported},
    namespaces::{Namespaces, Selection},
    network::NetworkResolver,
    objects::{EndpointSlice, Pod, Service},
    state::State,
    watches::{FirstLists, Scope, WatchBatches, WatchItem},
};
use crate::{
    aggregate::{RegistryId, Update, UpdateSender},
    config::{MeshNetworks, selectors::Selected},
    drain::Tasks,
    model::{LABEL_NETWORK, NetworkId, ServiceKey},
    telemetry::{REPEAT_WINDOW, Repeats},
};

/// Every cluster's ready pods, by cluster (each sorted by namespace).
pub type ClusterWorkloads = Arc<std::collections::BTreeMap<crate::model::ClusterId, Arc<[PodWorkload]>>>;

/// Events handled per batch: a burst rebuilds each touched service once.
const BATCH: usize = 512;

/// What a registry needs besides its client.
pub struct Options {
    /// Its cluster and generation.
    pub id: RegistryId,
    /// Conversion context (cluster, domain suffix, trust domain).
    pub ctx: service::Context,
    /// The cluster's system namespace, whose network label applies to all its endpoints.
    pub system_namespace: String,
    /// meshNetworks; a reload re-evaluates every endpoint's network.
    pub networks: watch::Receiver<Arc<MeshNetworks>>,
    /// `pilot_k8s_reg_events`, `meshd_registry_invalid_addresses_total`.
    pub metrics: Metrics,
    /// Server-side timeout of each watch, in seconds; kube-rs presumes a watch silent for 5 s longer
    /// dead (a blackholed connection) and re-establishes it.
    pub watch_timeout: u32,
    /// The API server's URL, named when it cannot be reached.
    pub server: Arc<str>,
    /// Where the registry publishes its ready pods under its cluster, for the ServiceEntries that
    /// select them (the ServiceEntry registry reads every cluster's, as istiod's).
    pub workloads: Option<watch::Sender<ClusterWorkloads>>,
    /// Whether any ServiceEntry selects pods: the registry builds and publishes its pods only then
    /// (rebuilding every pod's workload per pod event was most of an endpoint change's fixed cost);
    /// `None` publishes always.
    pub workloads_wanted: Option<watch::Receiver<bool>>,
    /// The discovery selectors this cluster follows.
    pub selection: Selection,
    /// Where the config cluster's registry publishes its discovered namespaces (the config controller
    /// and the root publisher follow them); `None` for remote clusters.
    pub selected: Option<watch::Sender<Option<Selected>>>,
}

/// A registry's progress, as its cluster's status shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every watcher has completed its initial list and the view was sent.
    pub synced: bool,
    /// The last watch error, in words, until the watches recover.
    pub last_error: Option<String>,
    /// When the last watch event arrived (set without waking receivers: only `--check` reads it).
    pub last_event: Option<std::time::SystemTime>,
}

/// Starts the registry task under `tasks` (cancel them to stop it).
pub fn spawn(tasks: &Tasks, client: Client, opts: Options, sink: UpdateSender) -> watch::Receiver<Progress> {
    let (progress, rx) = watch::channel(Progress::default());
    let name = format!("registry {}#{}", opts.id.cluster, opts.id.generation);
    let stop = tasks.cancelled();
    let registry = Registry::new(opts, sink, progress);
    tasks.spawn(&name, async move {
        tokio::select! {
            _ = stop => {}
            _ = registry.run(client) => {}
        }
    });
    rx
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Namespace,
    Service,
    Slice,
    Pod,
    Node,
}

const KINDS: usize = 5;

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.metric_label())
    }
}

impl Kind {
    /// istiod's `type` label of `pilot_k8s_reg_events`.
    fn metric_label(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespaces",
            Kind::Service => "Services",
            Kind::Slice => "EndpointSlice",
            Kind::Pod => "Pods",
            Kind::Node => "Nodes",
        }
    }
}

enum Event {
    Namespace(watcher::Event<PartialObjectMeta<Namespace>>),
    Service(Box<watcher::Event<Service>>),
    Slice(Box<watcher::Event<EndpointSlice>>),
    Pod(Box<watcher::Event<Pod>>),
    Node(watcher::Event<PartialObjectMeta<Node>>),
}

/// What one kind's handler is asked to do.
enum Op<'a, K> {
    Apply(K),
    Delete(K),
    /// A relist of a namespace (or of every one, `None`) finished: delete what it did not list there.
    Prune(&'a HashSet<String>, Option<&'a str>),
}

struct Registry {
    id: RegistryId,
    system_namespace: String,
    networks: watch::Receiver<Arc<MeshNetworks>>,
    state: State,
    sink: UpdateSender,
    progress: watch::Sender<Progress>,
    /// Per kind and scope: the names listed so far during a (re)list.
    relisting: HashMap<(Kind, Scope), HashSet<String>>,
    listed: [bool; KINDS],
    /// Per kind: its watches (one per scope) yet to finish their first list.
    unlisted: FirstLists,
    synced: bool,
    changed_services: HashSet<ServiceKey>,
    touched: HashSet<ServiceKey>,
    network_changed: bool,
    metrics: Metrics,
    watch_timeout: u32,
    server: Arc<str>,
    /// Every kind's watch fails with the same words while the server is down: one line per window.
    repeats: Repeats,
    /// Objects with invalid addresses, per kind, as last reported: each is reported once, not per resync.
    invalid_services: Reported,
    invalid_slices: Reported,
    /// See [`Options::workloads`].
    workloads: Option<watch::Sender<ClusterWorkloads>>,
    /// See [`Options::workloads_wanted`].
    workloads_wanted: Option<watch::Receiver<bool>>,
    selection: Selection,
    namespaces: Namespaces,
    /// See [`Options::selected`].
    selected: Option<watch::Sender<Option<Selected>>>,
    /// The namespaced watchers must (re)start: the Namespaces were listed, or a namespace was added.
    restart_objects: bool,
}

impl Registry {
    fn new(opts: Options, sink: UpdateSender, progress: watch::Sender<Progress>) -> Self {
        let mut networks = opts.networks;
        let resolver = NetworkResolver::new(&networks.borrow_and_update(), &opts.id.cluster);
        Self {
            id: opts.id,
            system_namespace: opts.system_namespace,
            watch_timeout: opts.watch_timeout,
            server: opts.server,
            repeats: Repeats::new(REPEAT_WINDOW),
            networks,
            state: State::new(opts.ctx, resolver),
            sink,
            progress,
            relisting: HashMap::new(),
            listed: [false; KINDS],
            unlisted: FirstLists::default(),
            synced: false,
            changed_services: HashSet::new(),
            touched: HashSet::new(),
            network_changed: false,
            metrics: opts.metrics,
            invalid_services: Reported::default(),
            invalid_slices: Reported::default(),
            workloads: opts.workloads,
            workloads_wanted: opts.workloads_wanted,
            selection: opts.selection,
            namespaces: Namespaces::default(),
            selected: opts.selected,
            restart_objects: false,
        }
    }

    async fn run(mut self, client: Client) {
        let mut events =
            watches::watch_cluster_scoped(client.clone(), self.watch_timeout).ready_chunks(BATCH);
        // Started once the Namespaces are listed, replaced (a relist) when a namespace is added.
        let mut objects: Option<WatchBatches> = None;
        let mut networks_open = true;
        let diff = self.namespaces.set_selectors(self.selection.current());
        debug_assert!(diff.is_empty(), "no namespace is known yet");
        loop {
            tokio::select! {
                batch = events.next() => {
                    let Some(batch) = batch else { return };
                    self.on_batch(batch);
                }
                batch = watches::next_batch(&mut objects) => {
                    let Some(batch) = batch else { return };
                    self.on_batch(batch);
                }
                () = wanted_changed(&mut self.workloads_wanted) => {}
                () = self.selection.changed() => {
                    let diff = self.namespaces.set_selectors(self.selection.current());
                    self.on_selection(diff);
                }
                r = self.networks.changed(), if networks_open => {
                    if r.is_err() {
                        networks_open = false;
                        continue;
                    }
                    let resolver = NetworkResolver::new(&self.networks.borrow_and_update(), &self.id.cluster);
                    if resolver != self.state.networks {
                        self.state.networks = resolver;
                        self.state.workloads_stale();
                        self.network_changed = true;
                        self.touched.extend(self.state.all_keys());
                    }
                }
            }
            if std::mem::take(&mut self.restart_objects) {
                let scopes = self.namespaces.watch_scopes();
                self.relisting
                    .retain(|(kind, _), _| matches!(kind, Kind::Namespace | Kind::Node));
                for kind in [Kind::Service, Kind::Slice, Kind::Pod] {
                    self.unlisted.start(kind, &scopes);
                }
                objects =
                    Some(watches::watch_namespaced(&client, self.watch_timeout, &scopes).ready_chunks(BATCH));
            }
            if !self.flush().await {
                return;
            }
        }
    }

    fn on_batch(&mut self, batch: Vec<WatchItem>) {
        if batch.iter().any(|i| i.result.is_ok()) {
            let now = std::time::SystemTime::now();
            self.progress.send_if_modified(|p| {
                p.last_event = Some(now);
                false
            });
        }
        for item in batch {
            match item.result {
                Ok(ev) => self.on_event(ev, item.scope),
                Err((kind, e)) => self.on_error(kind, &e),
            }
        }
    }

    /// Acts on a selection change: a removed namespace's objects go now; an added one's are listed.
    fn on_selection(&mut self, diff: namespaces::Diff) {
        if diff.is_empty() {
            return;
        }
        if let Some(tx) = &self.selected {
            tx.send_replace(Some(self.namespaces.selected()));
        }
        if !diff.removed.is_empty() {
            info!(cluster = %self.id.cluster, namespaces = ?diff.removed, "namespaces no longer discovered; dropping their objects");
            self.drop_namespaces(&diff.removed);
        }
        // Before the first list the watchers start with the selection as it is by then.
        if diff.added && self.listed[Kind::Namespace as usize] {
            info!(cluster = %self.id.cluster, "namespaces newly discovered; relisting their objects");
            self.restart_objects = true;
        }
    }

    fn drop_namespaces(&mut self, gone: &std::collections::BTreeSet<String>) {
        let gone = |ns: &str| gone.contains(ns);
        for key in self.state.service_keys() {
            if gone(&key.namespace) && self.state.set_service(key.clone(), None) {
                self.changed_services.insert(key);
            }
        }
        for name in self.state.slice_names() {
            if gone(&name.namespace) {
                self.invalid_slices.forget(&name);
                let touched = self.state.set_slice(name, None);
                self.touched.extend(touched);
            }
        }
        for name in self.state.pod_names() {
            if gone(&name.namespace) {
                let touched = self.state.set_pod(name, None);
                self.touched.extend(touched);
            }
        }
    }

    fn on_error(&mut self, kind: Kind, e: &watcher::Error) {
        let reason = crate::kube_errors::describe(e, &self.server);
        match self.repeats.observe(&reason, tokio::time::Instant::now()) {
            Some(0) => {
                warn!(cluster = %self.id.cluster, %kind, error = %reason, "watch failed; backing off and relisting");
            }
            Some(n) => {
                let window = humantime::format_duration(self.repeats.window());
                warn!(cluster = %self.id.cluster, %kind, error = %reason, "watch failed; backing off and relisting (repeated {n} times in the last {window})");
            }
            None => {}
        }
        // Every failure wakes the cluster supervisor, a repeat of the last one too: a watch that resumed
        // on a quiet cluster never cleared the error (no relist), and a second outage with the same words
        // must still start the stale-endpoints countdown.
        self.progress.send_modify(|p| p.last_error = Some(reason));
    }

    fn on_event(&mut self, ev: Event, scope: Scope) {
        match ev {
            Event::Namespace(e) => self.on_kind((Kind::Namespace, scope), e, Self::namespace),
            Event::Service(e) => self.on_kind((Kind::Service, scope), *e, Self::service),
            Event::Slice(e) => self.on_kind((Kind::Slice, scope), *e, Self::slice),
            Event::Pod(e) => self.on_kind((Kind::Pod, scope), *e, Self::pod),
            Event::Node(e) => self.on_kind((Kind::Node, scope), e, Self::node),
        }
    }

    /// The watcher protocol, shared by every kind: track what a (re)list of a scope returns, prune the
    /// rest of that scope at its end.
    fn on_kind<K: ResourceExt>(
        &mut self,
        watch: (Kind, Scope),
        ev: watcher::Event<K>,
        handle: fn(&mut Self, Op<'_, K>),
    ) {
        let kind = watch.0;
        let slot = kind as usize;
        let event = match &ev {
            watcher::Event::InitApply(_) => Some("add"),
            watcher::Event::Apply(_) => Some("update"),
            watcher::Event::Delete(_) => Some("delete"),
            watcher::Event::Init | watcher::Event::InitDone => None,
        };
        if let Some(event) = event {
            self.metrics.reg_event(kind.metric_label(), event);
        }
        // An object of an undiscovered namespace is not kept: as if deleted, and not listed.
        let ev = match ev {
            watcher::Event::InitApply(obj) | watcher::Event::Apply(obj)
                if !self
                    .namespaces
                    .contains(obj.namespace().as_deref().unwrap_or_default()) =>
            {
                watcher::Event::Delete(obj)
            }
            ev => ev,
        };
        match ev {
            watcher::Event::Init => {
                self.relisting.insert(watch, HashSet::new());
            }
            watcher::Event::InitApply(obj) => {
                if let Some(seen) = self.relisting.get_mut(&watch) {
                    seen.insert(full_name(&obj));
                }
                handle(self, Op::Apply(obj));
            }
            watcher::Event::InitDone => {
                let seen = self.relisting.remove(&watch).unwrap_or_default();
                handle(self, Op::Prune(&seen, watch.1.as_deref()));
                if kind == Kind::Namespace && !self.listed[slot] {
                    // The selection is known: the namespaced watchers start with it.
                    self.restart_objects = true;
                    if let Some(tx) = &self.selected {
                        tx.send_replace(Some(self.namespaces.selected()));
                    }
                }
                self.listed[slot] |= self.unlisted.done(kind, &watch.1);
                if let Some(n) = self.repeats.clear() {
                    info!(cluster = %self.id.cluster, %kind, repeats = n, "watch recovered");
                }
                self.progress.send_if_modified(|p| p.last_error.take().is_some());
            }
            watcher::Event::Apply(obj) => handle(self, Op::Apply(obj)),
            watcher::Event::Delete(obj) => handle(self, Op::Delete(obj)),
        }
    }

    fn namespace(&mut self, op: Op<'_, PartialObjectMeta<Namespace>>) {
        let diff = match &op {
            Op::Apply(ns) => self.namespaces.apply(&ns.name_any(), ns.labels()),
            Op::Delete(ns) => self.namespaces.remove(&ns.name_any()),
            Op::Prune(seen, _) => {
                let gone: Vec<String> = self
                    .namespaces
                    .names()
                    .filter(|n| !seen.contains(*n))
                    .map(str::to_owned)
                    .collect();
                let mut diff = namespaces::Diff::default();
                for n in gone {
                    diff.removed.extend(self.namespaces.remove(&n).removed);
                }
                diff
            }
        };
        self.on_selection(diff);
        // The system namespace's network label applies whether or not it is discovered (istiod 1.27).
        let network = match op {
            Op::Apply(ns) if ns.name_any() == self.system_namespace => ns
                .labels()
                .get(LABEL_NETWORK)
                .map(|n| NetworkId::from(n.as_str())),
            Op::Apply(_) => return,
            Op::Delete(ns) if ns.name_any() == self.system_namespace => None,
            Op::Delete(_) => return,
            Op::Prune(seen, _) if seen.contains(&self.system_namespace) => return,
            Op::Prune(..) => None,
        };
        if network != self.state.system_network {
            let shown = network.as_deref().unwrap_or("(none)");
            info!(cluster = %self.id.cluster, network = %shown, "system namespace network changed");
            self.state.system_network = network;
            self.state.workloads_stale();
            self.network_changed = true;
            self.touched.extend(self.state.all_keys());
        }
    }

    fn service(&mut self, op: Op<'_, Service>) {
        match op {
            Op::Apply(svc) => {
                let key = self
                    .state
                    .key(&svc.namespace().unwrap_or_default(), &svc.name_any());
                let converted = service::convert(&svc, &self.state.ctx).map(|(converted, invalid)| {
                    let reported = self.invalid_services.update(object_name(&svc), invalid);
                    report_invalid(&self.metrics, &self.id, Kind::Service, &svc, reported);
                    converted
                });
                if self.state.set_service(key.clone(), converted) {
                    self.changed_services.insert(key);
                }
            }
            Op::Delete(svc) => {
                self.invalid_services.forget(&object_name(&svc));
                let key = self
                    .state
                    .key(&svc.namespace().unwrap_or_default(), &svc.name_any());
                if self.state.set_service(key.clone(), None) {
                    self.changed_services.insert(key);
                }
            }
            Op::Prune(seen, scope) => {
                self.invalid_services.retain_listed(seen, scope);
                for key in self.state.service_keys() {
                    if !in_scope(scope, &key.namespace) {
                        continue;
                    }
                    let name = self
                        .state
                        .service(&key)
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    if !seen.contains(&format!("{}/{name}", key.namespace))
                        && self.state.set_service(key.clone(), None)
                    {
                        self.changed_services.insert(key);
                    }
                }
            }
        }
    }

    fn slice(&mut self, op: Op<'_, EndpointSlice>) {
        let touched = match op {
            Op::Apply(s) => {
                let compact = endpoints::slice(&s).map(|(compact, invalid)| {
                    let reported = self.invalid_slices.update(object_name(&s), invalid);
                    report_invalid(&self.metrics, &self.id, Kind::Slice, &s, reported);
                    compact
                });
                self.state.set_slice(object_name(&s), compact)
            }
            Op::Delete(s) => {
                self.invalid_slices.forget(&object_name(&s));
                self.state.set_slice(object_name(&s), None)
            }
            Op::Prune(seen, scope) => {
                self.invalid_slices.retain_listed(seen, scope);
                let mut touched = HashSet::new();
                for name in self.state.slice_names() {
                    if in_scope(scope, &name.namespace)
                        && !seen.contains(&format!("{}/{}", name.namespace, name.name))
                    {
                        touched.extend(self.state.set_slice(name, None));
                    }
                }
                touched
            }
        };
        self.touched.extend(touched);
    }

    fn pod(&mut self, op: Op<'_, Pod>) {
        let touched = match op {
            Op::Apply(p) => self
                .state
                .set_pod(object_name(&p), endpoints::pod(&p, &self.state.ctx)),
            Op::Delete(p) => self.state.set_pod(object_name(&p), None),
            Op::Prune(seen, scope) => {
                let mut touched = HashSet::new();
                for name in self.state.pod_names() {
                    if in_scope(scope, &name.namespace)
                        && !seen.contains(&format!("{}/{}", name.namespace, name.name))
                    {
                        touched.extend(self.state.set_pod(name, None));
                    }
                }
                touched
            }
        };
        self.touched.extend(touched);
    }

    fn node(&mut self, op: Op<'_, PartialObjectMeta<Node>>) {
        let changed = match op {
            Op::Apply(n) => {
                let locality = endpoints::node_locality(n.labels());
                self.state.set_node(n.name_any().into(), Some(locality))
            }
            Op::Delete(n) => self.state.set_node(n.name_any().into(), None),
            Op::Prune(seen, _) => {
                self.state
                    .node_names()
                    .into_iter()
                    .filter(|n| !seen.contains(&**n))
                    .map(|n| self.state.set_node(n, None))
                    .filter(|removed| *removed)
                    .count()
                    > 0
            }
        };
        if changed {
            self.state.workloads_stale();
            self.touched.extend(self.state.all_keys());
        }
    }

    /// Sends what changed. Before the initial sync nothing is sent; at it, the whole view. False once the
    /// aggregator has gone.
    async fn flush(&mut self) -> bool {
        if !self.synced && !self.listed.iter().all(|l| *l) {
            return true;
        }
        // Before the services: a reader that sees this registry's view has its pods too.
        let wanted = self.workloads_wanted.as_ref().is_none_or(|w| *w.borrow());
        if let Some(tx) = &self.workloads
            && wanted
            && let Some(workloads) = self.state.take_workloads()
        {
            tx.send_modify(|all| {
                Arc::make_mut(all).insert(self.id.cluster.clone(), workloads);
            });
        }
        if !self.synced {
            self.synced = true;
            self.changed_services.clear();
            self.touched.clear();
            self.network_changed = false;
            let (services, endpoints) = self.state.view();
            info!(cluster = %self.id.cluster, services = services.len(), "initial sync complete");
            let sent = self
                .sink
                .send(Update::Replace {
                    from: self.id.clone(),
                    services,
                    endpoints,
                })
                .await;
            self.progress.send_modify(|p| p.synced = true);
            return sent;
        }
        let mut ok = true;
        for key in std::mem::take(&mut self.changed_services) {
            let service = self.state.service(&key).cloned();
            ok &= self
                .sink
                .send(Update::Service {
                    from: self.id.clone(),
                    key,
                    service,
                })
                .await;
        }
        for key in std::mem::take(&mut self.touched) {
            let endpoints = self.state.endpoints(&key);
            ok &= self
                .sink
                .send(Update::Endpoints {
                    from: self.id.clone(),
                    key,
                    endpoints,
                })
                .await;
        }
        if std::mem::take(&mut self.network_changed) {
            ok &= self
                .sink
                .send(Update::NetworkChanged {
                    from: self.id.clone(),
                })
                .await;
        }
        ok
    }
}

/// Resolves when pods become wanted or unwanted; never without the channel (or once it closes, which
/// leaves the last value in force).
async fn wanted_changed(wanted: &mut Option<watch::Receiver<bool>>) {
    match wanted {
        Some(w) => {
            if w.changed().await.is_err() {
                *wanted = None;
            }
        }
        None => std::future::pending().await,
    }
}

/// Whether `namespace` is in a watch's `scope` (a namespace, or every one).
fn in_scope(scope: Option<&str>, namespace: &str) -> bool {
    scope.is_none_or(|s| s == namespace)
}

/// Warns once per invalid address of `obj` and counts it.
fn report_invalid<K: ResourceExt>(
    metrics: &Metrics,
    id: &RegistryId,
    kind: Kind,
    obj: &K,
    invalid: &[InvalidAddress],
) {
    for i in invalid {
        warn!(cluster = %id.cluster, %kind, object = %full_name(obj), field = i.field, value = %i.value,
            "address is not an IP address; left out");
        metrics.invalid_address(&id.cluster, kind.metric_label());
    }
}

fn full_name<K: ResourceExt>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

fn object_name<K: ResourceExt>(obj: &K) -> ObjectName {
    ObjectName {
        namespace: obj.namespace().unwrap_or_default().into(),
        name: obj.name_any().into(),
    }
}
