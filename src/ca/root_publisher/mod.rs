//! Publishes the mesh root: the ConfigMap `istio-ca-root-cert` (key `root-cert.pem`) in every namespace,
//! as istiod's namespace controller does. istio-agent mounts it to verify istiod on 15012, and proxyless
//! clients read it the same way, so a namespace without it cannot join the mesh.
//!
//! A leader duty: only the Lease holder writes, so replicas never fight over the objects. It runs in the
//! primary and, through [`remotes`], in every remote cluster the secret controller has joined, with that
//! cluster's credentials: remote workloads verify the primary's 15012 with the same root. Each cluster's
//! publisher watches Namespaces and the ConfigMaps of that name, keeps them in memory and, after every
//! change (a namespace created, the ConfigMap edited or deleted, the CA's roots rotated), writes what
//! [`writes`] says differs from [`desired`]. Both are pure. As istiod's namespace controller, it writes
//! only in the namespaces the cluster's discovery selectors select (MeshConfig's, or a remote Secret's). Failures (a remote whose credentials may not
//! write ConfigMaps) are logged, rate-limited, and retried with backoff; they stop nothing else.

mod remotes;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Client, ResourceExt,
    api::{PartialObjectMeta, PostParams},
    runtime::watcher,
};
use tokio::{sync::watch, time::Instant};
use tracing::{debug, info, warn};

use super::CaBundle;
use crate::kube_watch;
use crate::{
    config::{
        MeshConfig,
        selectors::{self, LabelSelector},
    },
    drain::Tasks,
    leader::Leadership,
    model::ClusterId,
    multicluster::status::Clusters,
    registry::namespaces::Selection,
    telemetry::{REPEAT_WINDOW, Repeats},
};

/// Name of the ConfigMap (istiod: `CACertNamespaceConfigMap`).
pub const CONFIGMAP_NAME: &str = "istio-ca-root-cert";
/// Its data key holding the roots, PEM (istiod: `CACertNamespaceConfigMapDataName`).
pub const ROOT_CERT_KEY: &str = "root-cert.pem";
/// Label istiod puts on the ConfigMap.
pub const CONFIG_LABEL: (&str, &str) = ("istio.io/config", "true");
/// Kubernetes' own namespaces, never part of the mesh (istiod: `inject.IgnoredNamespaces`).
pub const IGNORED_NAMESPACES: [&str; 4] = [
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "local-path-storage",
];

/// Longest wait before retrying failed writes.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Why publishing in a cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The cluster's credentials lack the RBAC for a call: a remote whose reader role predates root
    /// publishing, or a narrowed one.
    #[error(
        "forbidden to {verb} {resource}: the publisher needs list, watch on namespaces and list, watch, \
         create, update on configmaps (the chart's RBAC grants them)"
    )]
    Forbidden {
        /// `list`, `watch`, `create` or `update`.
        verb: &'static str,
        /// `namespaces` or `configmaps`.
        resource: &'static str,
    },
    /// The API server refused or failed a write otherwise.
    #[error("{verb} ConfigMap {namespace}/{CONFIGMAP_NAME}: {source}")]
    Write {
        /// `create` or `update`.
        verb: &'static str,
        /// The namespace.
        namespace: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A watch failed otherwise (API server unreachable, …); it retries with backoff.
    #[error("watching {resource}: {source}")]
    Watch {
        /// `namespaces` or `configmaps`.
        resource: &'static str,
        /// The watch error.
        #[source]
        source: Box<watcher::Error>,
    },
}

impl PublishError {
    /// A watch error of `resource`, told apart as forbidden or not.
    fn watch(resource: &'static str, e: watcher::Error) -> Self {
        let verb = match &e {
            watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 403 => Some("list"),
            watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s))
                if s.code == 403 =>
            {
                Some("watch")
            }
            watcher::Error::WatchError(s) if s.code == 403 => Some("watch"),
            _ => None,
        };
        match verb {
            Some(verb) => Self::Forbidden { verb, resource },
            None => Self::Watch {
                resource,
                source: Box::new(e),
            },
        }
    }
}

/// A namespace as the decision needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceState {
    /// Being deleted: writing there would fail, and the ConfigMap goes with it.
    pub terminating: bool,
    /// Its labels, which discovery selectors match.
    pub labels: BTreeMap<String, String>,
}

/// One API call to make.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// No ConfigMap there: create this one.
    Create(ConfigMap),
    /// The ConfigMap holds other roots: replace it with this (the observed object with the roots set,
    /// so its resourceVersion makes the update conditional).
    Update(ConfigMap),
}

impl Write {
    fn namespace(&self) -> &str {
        let (Write::Create(cm) | Write::Update(cm)) = self;
        cm.metadata.namespace.as_deref().unwrap_or_default()
    }
}

/// The ConfigMap every discovered namespace but the ignored and terminating ones should hold, by
/// namespace.
pub fn desired(
    namespaces: &BTreeMap<String, NamespaceState>,
    discovery: &[LabelSelector],
    root_pem: &str,
) -> BTreeMap<String, ConfigMap> {
    namespaces
        .iter()
        .filter(|(name, ns)| {
            !ns.terminating
                && !IGNORED_NAMESPACES.contains(&name.as_str())
                && selectors::selects(discovery, &ns.labels)
        })
        .map(|(name, _)| {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(CONFIGMAP_NAME.to_owned()),
                    namespace: Some(name.clone()),
                    labels: Some(BTreeMap::from([(
                        CONFIG_LABEL.0.to_owned(),
                        CONFIG_LABEL.1.to_owned(),
                    )])),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([(ROOT_CERT_KEY.to_owned(), root_pem.to_owned())])),
                ..ConfigMap::default()
            };
            (name.clone(), cm)
        })
        .collect()
}

/// What to write so that `existing` (the observed ConfigMaps, by namespace) matches `desired`. Only the
/// `root-cert.pem` key is owned: other keys, labels and annotations someone added are kept (as istiod's
/// `InsertDataToConfigMap`). ConfigMaps in namespaces not desired are left alone.
pub fn writes(desired: &BTreeMap<String, ConfigMap>, existing: &BTreeMap<String, ConfigMap>) -> Vec<Write> {
    desired
        .iter()
        .filter_map(|(ns, want)| {
            let Some(have) = existing.get(ns) else {
                return Some(Write::Create(want.clone()));
            };
            let root = want.data.as_ref()?.get(ROOT_CERT_KEY)?;
            if have.data.as_ref().and_then(|d| d.get(ROOT_CERT_KEY)) == Some(root) {
                return None;
            }
            let mut updated = have.clone();
            updated
                .data
                .get_or_insert_with(BTreeMap::new)
                .insert(ROOT_CERT_KEY.to_owned(), root.clone());
            Some(Write::Update(updated))
        })
        .collect()
}

/// What the publisher needs: the clusters to write in, leadership, and the CA's material.
pub struct RootPublisherConfig {
    /// The primary (config) cluster's ID, for logs.
    pub cluster: ClusterId,
    /// Client of the primary cluster.
    pub client: Client,
    /// The remote clusters the secret controller runs: each gets a publisher of its own.
    pub remotes: Clusters,
    /// Only the leader writes.
    pub leadership: Leadership,
    /// The CA's material; its roots are published, again on every rotation.
    pub roots: watch::Receiver<Arc<CaBundle>>,
    /// Server-side timeout of its watches, in seconds (`--watch-timeout`).
    pub watch_timeout: u32,
    /// The mesh config, whose discovery selectors say where to publish.
    pub mesh: watch::Receiver<Arc<MeshConfig>>,
}

/// Runs the publishers as leader duties on `tasks`: the primary's (`ca-root-publisher`) and one per
/// remote cluster (`ca-root-publisher-remotes`, see [`remotes`]).
pub fn spawn(cfg: RootPublisherConfig, tasks: &Tasks) {
    let RootPublisherConfig {
        cluster,
        client,
        remotes,
        leadership,
        roots,
        watch_timeout,
        mesh,
    } = cfg;
    let primary_roots = roots.clone();
    let primary_mesh = mesh.clone();
    leadership.run_while_leader(tasks, "ca-root-publisher", move |term| {
        let (cluster, client, roots) = (cluster.clone(), client.clone(), primary_roots.clone());
        let selection = Selection::mesh_wide(primary_mesh.clone());
        async move { run(&cluster, client, roots, selection, watch_timeout, &term).await }
    });
    leadership.run_while_leader(tasks, "ca-root-publisher-remotes", move |term| {
        remotes::run(
            remotes.watch_remotes(),
            roots.clone(),
            mesh.clone(),
            watch_timeout,
            term,
        )
    });
}

enum Event {
    Namespace(watcher::Event<PartialObjectMeta<Namespace>>),
    ConfigMap(watcher::Event<ConfigMap>),
}

/// What the duty has seen; written only by its loop.
#[derive(Default)]
struct View {
    namespaces: BTreeMap<String, NamespaceState>,
    configmaps: BTreeMap<String, ConfigMap>,
    /// Objects of a relist in progress, installed at its end.
    namespaces_init: Option<BTreeMap<String, NamespaceState>>,
    configmaps_init: Option<BTreeMap<String, ConfigMap>>,
    namespaces_synced: bool,
    configmaps_synced: bool,
}

impl View {
    fn apply(&mut self, event: Event) {
        match event {
            Event::Namespace(e) => {
                let state = |ns: &PartialObjectMeta<Namespace>| NamespaceState {
                    terminating: ns.metadata.deletion_timestamp.is_some(),
                    labels: ns.labels().clone(),
                };
                match e {
                    watcher::Event::Apply(ns) => {
                        self.namespaces.insert(ns.name_any(), state(&ns));
                    }
                    watcher::Event::Delete(ns) => {
                        self.namespaces.remove(&ns.name_any());
                    }
                    watcher::Event::Init => self.namespaces_init = Some(BTreeMap::new()),
                    watcher::Event::InitApply(ns) => {
                        if let Some(init) = &mut self.namespaces_init {
                            init.insert(ns.name_any(), state(&ns));
                        }
                    }
                    watcher::Event::InitDone => {
                        if let Some(init) = self.namespaces_init.take() {
                            self.namespaces = init;
                        }
                        self.namespaces_synced = true;
                    }
                }
            }
            Event::ConfigMap(e) => match e {
                watcher::Event::Apply(cm) => {
                    self.configmaps.insert(cm.namespace().unwrap_or_default(), cm);
                }
                watcher::Event::Delete(cm) => {
                    self.configmaps.remove(&cm.namespace().unwrap_or_default());
                }
                watcher::Event::Init => self.configmaps_init = Some(BTreeMap::new()),
                watcher::Event::InitApply(cm) => {
                    if let Some(init) = &mut self.configmaps_init {
                        init.insert(cm.namespace().unwrap_or_default(), cm);
                    }
                }
                watcher::Event::InitDone => {
                    if let Some(init) = self.configmaps_init.take() {
                        self.configmaps = init;
                    }
                    self.configmaps_synced = true;
                }
            },
        }
    }
}

fn events(
    client: &Client,
    watch_timeout: u32,
) -> futures::stream::SelectAll<BoxStream<'static, Result<Event, PublishError>>> {
    let namespaces = kube_watch::watch(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        kube_watch::config(watch_timeout),
    )
    .map(|r| {
        r.map(Event::Namespace)
            .map_err(|e| PublishError::watch("namespaces", e))
    })
    .boxed();
    let configmaps = kube_watch::watch(
        Api::<ConfigMap>::all(client.clone()),
        kube_watch::config(watch_timeout).fields(&format!("metadata.name={CONFIGMAP_NAME}")),
    )
    .map(|r| {
        r.map(Event::ConfigMap)
            .map_err(|e| PublishError::watch("configmaps", e))
    })
    .boxed();
    futures::stream::select_all([namespaces, configmaps])
}

/// Publishes in `cluster` with `client`: watch, decide, write, until `stop` is cancelled.
async fn run(
    cluster: &ClusterId,
    client: Client,
    mut roots: watch::Receiver<Arc<CaBundle>>,
    mut selection: Selection,
    watch_timeout: u32,
    stop: &Tasks,
) {
    let mut events = events(&client, watch_timeout);
    let mut view = View::default();
    let mut retry: Option<(Instant, Duration)> = None;
    let mut repeats = Repeats::new(REPEAT_WINDOW);
    let mut published = 0usize;
    // A fixed CA (the self-signed Secret) drops its sender at once: then there are no rotations to follow.
    let mut rotations = true;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => match event {
                Some(Ok(e)) => view.apply(e),
                // Unreachable API servers are the registry's to report; a refusal is this duty's.
                Some(Err(e @ PublishError::Forbidden { .. })) => { report(&mut repeats, cluster, &e, 1); continue }
                Some(Err(e)) => { debug!(%cluster, error = %e, "root publisher: watch error; retrying"); continue }
                None => return,
            },
            changed = roots.changed(), if rotations => rotations = changed.is_ok(),
            () = selection.changed() => {}
            () = sleep_until(retry.map(|(at, _)| at)) => {}
        }
        if !(view.namespaces_synced && view.configmaps_synced) {
            continue;
        }
        let root_pem = roots.borrow_and_update().roots_pem();
        let todo = writes(
            &desired(&view.namespaces, &selection.current(), &root_pem),
            &view.configmaps,
        );
        let api = |ns: &str| Api::<ConfigMap>::namespaced(client.clone(), ns);
        let mut failures = Vec::new();
        for write in todo {
            match apply(cluster, &api(write.namespace()), &write).await {
                Ok(()) => published += 1,
                Err(e) => failures.push(e),
            }
        }
        match failures.first() {
            Some(first) => report(&mut repeats, cluster, first, failures.len()),
            None => {
                if let Some(n) = repeats.clear() {
                    info!(%cluster, repeats = n, "root publisher: publishing again");
                }
            }
        }
        debug!(%cluster, published, "root publisher: reconciled");
        retry = (!failures.is_empty()).then(|| {
            let wait = retry.map_or(Duration::from_secs(1), |(_, d)| (d * 2).min(MAX_RETRY));
            (Instant::now() + wait, wait)
        });
    }
}

/// Logs a failure once, then at most once per [`REPEAT_WINDOW`] while it repeats: a remote that may not
/// write ConfigMaps fails on every retry, in every namespace.
fn report(repeats: &mut Repeats, cluster: &ClusterId, e: &PublishError, failed: usize) {
    let what = e.to_string();
    match repeats.observe(&what, Instant::now()) {
        Some(0) => {
            warn!(%cluster, error = %what, failed, "root publisher: cannot publish {CONFIGMAP_NAME}; retrying with backoff")
        }
        Some(n) => {
            let window = humantime::format_duration(repeats.window());
            warn!(%cluster, error = %what, failed, "root publisher: cannot publish {CONFIGMAP_NAME}; retrying with backoff (repeated {n} times in the last {window})");
        }
        None => debug!(%cluster, error = %what, failed, "root publisher: still failing"),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Makes one write. Races the watch will report anyway are not errors: the object created meanwhile
/// (`AlreadyExists`), changed meanwhile (`Conflict`), or its namespace gone (`NotFound`).
async fn apply(cluster: &ClusterId, api: &Api<ConfigMap>, write: &Write) -> Result<(), PublishError> {
    let pp = PostParams::default();
    let (verb, result) = match write {
        Write::Create(cm) => ("create", api.create(&pp, cm).await.map(drop)),
        Write::Update(cm) => ("update", api.replace(CONFIGMAP_NAME, &pp, cm).await.map(drop)),
    };
    match result {
        Ok(()) => {
            info!(
                %cluster,
                namespace = write.namespace(),
                verb, "root publisher: wrote {CONFIGMAP_NAME}"
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
            debug!(%cluster, namespace = write.namespace(), verb, reason = %s.reason, "root publisher: raced; the watch will tell");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 403 => Err(PublishError::Forbidden {
            verb,
            resource: "configmaps",
        }),
        Err(e) => Err(PublishError::Write {
            verb,
            namespace: write.namespace().to_owned(),
            source: Box::new(e),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaces(list: &[(&str, bool)]) -> BTreeMap<String, NamespaceState> {
        list.iter()
            .map(|(n, terminating)| {
                (
                    (*n).to_owned(),
                    NamespaceState {
                        terminating: *terminating,
                        labels: BTreeMap::from([("name".to_owned(), (*n).to_owned())]),
                    },
                )
            })
            .collect()
    }

    fn configmap(ns: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(CONFIGMAP_NAME.into()),
                namespace: Some(ns.into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            data: Some(data.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn desired_covers_every_namespace_but_kubernetes_own_and_terminating_ones() {
        /// (namespace, terminating) in, namespaces with a ConfigMap out.
        type Case = (&'static [(&'static str, bool)], &'static [&'static str]);
        let cases: &[Case] = &[
            (&[], &[]),
            (
                &[("sample", false), ("istio-system", false)],
                &["istio-system", "sample"],
            ),
            (
                &[
                    ("kube-system", false),
                    ("kube-public", false),
                    ("kube-node-lease", false),
                    ("local-path-storage", false),
                    ("default", false),
                ],
                &["default"],
            ),
            (&[("going", true), ("staying", false)], &["staying"]),
        ];
        for (input, want) in cases {
            let got = desired(&namespaces(input), &[], "ROOT");
            assert_eq!(
                got.keys().map(String::as_str).collect::<Vec<_>>(),
                *want,
                "{input:?}"
            );
            for (ns, cm) in &got {
                assert_eq!(cm.metadata.name.as_deref(), Some(CONFIGMAP_NAME));
                assert_eq!(cm.metadata.namespace.as_deref(), Some(ns.as_str()));
                assert_eq!(
                    cm.labels().get(CONFIG_LABEL.0).map(String::as_str),
                    Some(CONFIG_LABEL.1)
                );
                assert_eq!(cm.data.as_ref().unwrap()[ROOT_CERT_KEY], "ROOT");
            }
        }
    }

    #[test]
    fn desired_follows_the_discovery_selectors() {
        let ns = namespaces(&[("a", false), ("b", false), ("kube-system", false)]);
        let cases = [
            ("[]", vec!["a", "b"]),
            ("[{matchLabels: {name: b}}]", vec!["b"]),
            (
                "[{matchLabels: {name: a}}, {matchLabels: {name: kube-system}}]",
                vec!["a"],
            ),
            (
                "[{matchExpressions: [{key: name, operator: NotIn, values: [a]}]}]",
                vec!["b"],
            ),
        ];
        for (yaml, want) in cases {
            let sel = selectors::parse(yaml).expect(yaml);
            let got = desired(&ns, &sel, "ROOT");
            assert_eq!(got.keys().map(String::as_str).collect::<Vec<_>>(), want, "{yaml}");
        }
    }

    #[test]
    fn writes_create_missing_repair_edited_and_keep_the_rest() {
        let want = desired(
            &namespaces(&[("a", false), ("b", false), ("c", false)]),
            &[],
            "NEW",
        );
        let cases: Vec<(&str, BTreeMap<String, ConfigMap>, Vec<Write>)> = vec![
            (
                "nothing exists: create everywhere",
                BTreeMap::new(),
                ["a", "b", "c"]
                    .iter()
                    .map(|ns| Write::Create(want[*ns].clone()))
                    .collect(),
            ),
            ("all current: nothing to do", want.clone(), vec![]),
            (
                "old root and an edit: update the key only, keeping others and the resourceVersion",
                BTreeMap::from([
                    ("a".into(), configmap("a", &[(ROOT_CERT_KEY, "NEW")])),
                    (
                        "b".into(),
                        configmap("b", &[(ROOT_CERT_KEY, "OLD"), ("extra", "x")]),
                    ),
                    ("c".into(), configmap("c", &[])),
                ]),
                vec![
                    Write::Update(configmap("b", &[(ROOT_CERT_KEY, "NEW"), ("extra", "x")])),
                    Write::Update(configmap("c", &[(ROOT_CERT_KEY, "NEW")])),
                ],
            ),
            (
                "a ConfigMap in a namespace not desired is left alone",
                BTreeMap::from([
                    ("a".into(), want["a"].clone()),
                    ("b".into(), want["b"].clone()),
                    ("c".into(), want["c"].clone()),
                    (
                        "kube-system".into(),
                        configmap("kube-system", &[(ROOT_CERT_KEY, "OLD")]),
                    ),
                ]),
                vec![],
            ),
        ];
        for (name, existing, expected) in cases {
            assert_eq!(writes(&want, &existing), expected, "{name}");
        }
    }

    fn status(code: u16) -> Box<kube::core::Status> {
        Box::new(kube::core::Status::failure("refused", "Forbidden").with_code(code))
    }

    #[test]
    fn a_refused_watch_names_its_verb_and_resource_and_other_failures_do_not_claim_rbac() {
        let cases = [
            (
                watcher::Error::InitialListFailed(kube::Error::Api(status(403))),
                "forbidden to list configmaps",
            ),
            (
                watcher::Error::WatchFailed(kube::Error::Api(status(403))),
                "forbidden to watch configmaps",
            ),
            (
                watcher::Error::WatchError(status(403)),
                "forbidden to watch configmaps",
            ),
            (
                watcher::Error::InitialListFailed(kube::Error::Api(status(500))),
                "watching configmaps: ",
            ),
        ];
        for (e, want) in cases {
            let shown = PublishError::watch("configmaps", e).to_string();
            assert!(shown.starts_with(want), "{shown:?} should start with {want:?}");
        }
        let forbidden = PublishError::Forbidden {
            verb: "create",
            resource: "configmaps",
        };
        assert!(
            forbidden
                .to_string()
                .contains("list, watch, create, update on configmaps"),
            "says what to grant: {forbidden}"
        );
    }

    #[test]
    fn a_configmap_without_data_is_given_the_key() {
        let want = desired(&namespaces(&[("a", false)]), &[], "NEW");
        let mut bare = configmap("a", &[]);
        bare.data = None;
        let existing = BTreeMap::from([("a".to_owned(), bare)]);
        assert_eq!(
            writes(&want, &existing),
            vec![Write::Update(configmap("a", &[(ROOT_CERT_KEY, "NEW")]))]
        );
    }
}
