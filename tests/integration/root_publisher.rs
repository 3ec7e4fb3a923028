//! The mesh root publisher against the API server simulator: as the leader, meshd writes
//! `istio-ca-root-cert` into every namespace (a new one too), skips Kubernetes' own, repairs a deleted or
//! edited copy, and follows a root rotation; in the primary and in every remote cluster joined through a
//! remote secret, with that remote's credentials, until the remote is removed. A remote whose
//! credentials may not write gets one warning; the primary keeps publishing.

use crate::common;

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use kube_sim::{ApiServerConfig, RequestLog};
use meshd::{
    ca::{
        CaBundle, MeshCa, WorkloadCertPolicy,
        root_publisher::{self, CONFIGMAP_NAME, IGNORED_NAMESPACES, ROOT_CERT_KEY, RootPublisherConfig},
    },
    drain::Tasks,
    leader::{self, ElectionConfig},
    multicluster::status::Clusters,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;

const NS: &str = "istio-system";

fn bundle() -> Arc<CaBundle> {
    Arc::new(fresh_ca())
}

fn fresh_ca() -> CaBundle {
    let pem = CaBundle::generate_self_signed("cluster.local").expect("generate CA");
    CaBundle::from_pem(&pem).expect("load CA")
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}

async fn root_in(client: &Client, ns: &str) -> Option<ConfigMap> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(CONFIGMAP_NAME)
        .await
        .expect("get configmap")
}

/// Waits until every namespace in `namespaces` holds `root` under `root-cert.pem`.
async fn until_published(client: &Client, namespaces: &[&str], root: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut missing = Vec::new();
        for ns in namespaces {
            let data = root_in(client, ns).await.and_then(|cm| cm.data);
            if data
                .as_ref()
                .and_then(|d| d.get(ROOT_CERT_KEY))
                .map(String::as_str)
                != Some(root)
            {
                missing.push(*ns);
            }
        }
        if missing.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the current root never reached {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the publisher as the only replica (so the leader) on a fresh simulator.
async fn publisher(roots: watch::Receiver<Arc<CaBundle>>) -> (common::Sim, Client, Tasks) {
    let sim = common::start().await;
    let client = sim.client.clone();
    for ns in [NS, "sample", "local-path-storage"] {
        create_namespace(&client, ns).await;
    }
    let tasks = Tasks::new();
    lead(&client, roots, Clusters::default(), &tasks);
    (sim, client, tasks)
}

/// Elects this process (the only replica) in the primary behind `client` and runs the publishers for
/// it and `remotes`.
fn lead(client: &Client, roots: watch::Receiver<Arc<CaBundle>>, remotes: Clusters, tasks: &Tasks) {
    let election = ElectionConfig {
        identity: "meshd-0".into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(250),
        ..ElectionConfig::new(NS)
    };
    let leadership = leader::start(client.clone(), election, tasks).expect("election");
    let cfg = RootPublisherConfig {
        cluster: "c1".into(),
        client: client.clone(),
        remotes,
        leadership,
        roots,
        watch_timeout: 290,
        mesh: watch::channel(Arc::new(meshd::config::MeshConfig::default())).1,
    };
    root_publisher::spawn(cfg, tasks);
}

#[tokio::test]
async fn the_leader_keeps_the_mesh_root_in_every_namespace() {
    let first = bundle();
    let (rotate, roots) = watch::channel(first.clone());
    let (_sim, client, tasks) = publisher(roots).await;

    // Every namespace but Kubernetes' own, labelled as istiod labels it.
    until_published(&client, &[NS, "sample", "default"], &first.roots_pem()).await;
    let cm = root_in(&client, "sample").await.expect("published");
    assert_eq!(
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("istio.io/config"))
            .map(String::as_str),
        Some("true")
    );
    for ns in IGNORED_NAMESPACES {
        assert!(
            root_in(&client, ns).await.is_none(),
            "{ns} is not part of the mesh"
        );
    }

    // A namespace created later gets it.
    create_namespace(&client, "late").await;
    until_published(&client, &["late"], &first.roots_pem()).await;

    // Deleted: re-created.
    Api::<ConfigMap>::namespaced(client.clone(), "sample")
        .delete(CONFIGMAP_NAME, &DeleteParams::default())
        .await
        .expect("delete");
    until_published(&client, &["sample"], &first.roots_pem()).await;

    // Edited: the root is put back, a key someone added stays.
    let api = Api::<ConfigMap>::namespaced(client.clone(), "late");
    let mut edited = api.get(CONFIGMAP_NAME).await.expect("get");
    edited.data = Some(BTreeMap::from([
        (ROOT_CERT_KEY.to_owned(), "tampered".to_owned()),
        ("extra".to_owned(), "kept".to_owned()),
    ]));
    api.replace(CONFIGMAP_NAME, &PostParams::default(), &edited)
        .await
        .expect("edit");
    until_published(&client, &["late"], &first.roots_pem()).await;
    let repaired = api.get(CONFIGMAP_NAME).await.expect("get").data.expect("data");
    assert_eq!(repaired.get("extra").map(String::as_str), Some("kept"));

    // Root rotation reaches every namespace.
    let second = bundle();
    assert_ne!(first.roots_pem(), second.roots_pem());
    rotate.send(second.clone()).expect("publisher is running");
    until_published(&client, &[NS, "sample", "default", "late"], &second.roots_pem()).await;

    tasks.cancel();
}

#[tokio::test]
async fn a_root_that_never_rotates_is_published_too() {
    // The self-signed Secret CA is fixed: its channel's sender is gone from the start.
    let ca = MeshCa::fixed(fresh_ca(), WorkloadCertPolicy::default());
    let (_sim, client, tasks) = publisher(ca.subscribe()).await;
    until_published(&client, &[NS, "sample", "default"], &ca.roots_pem()).await;
    tasks.cancel();
}

/// A simulated cluster named `name` that logs every request to `log` (and enforces RBAC if `rbac`).
async fn logged_sim(name: &str, log: &Path, rbac: bool) -> common::Sim {
    let log = Arc::new(RequestLog::open(log).expect("request log"));
    common::start_with(ApiServerConfig {
        request_log: Some(log),
        enforce_rbac: rbac,
        ..ApiServerConfig::new(name)
    })
    .await
}

/// One line of the simulator's request log.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    user: String,
    verb: String,
    resource: String,
    namespace: String,
}

/// The ConfigMap requests `user` made, per the log.
fn configmap_requests(log: &Path, user: &str) -> Vec<Request> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Request>(l).expect("log line"))
        .filter(|r| r.user == user && r.resource == "configmaps")
        .collect()
}

fn writes_by(log: &Path, user: &str) -> usize {
    configmap_requests(log, user)
        .iter()
        .filter(|r| r.verb == "create" || r.verb == "update")
        .count()
}

/// A ServiceAccount in `NS` of `sim` bound to a ClusterRole with `rules`, and a token for it.
async fn service_account(sim: &common::Sim, name: &str, rules: Value) -> String {
    let store = sim.server.store();
    store
        .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .expect("namespace");
    store
        .apply(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": NS}}))
        .expect("service account");
    store
        .apply(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}),
        )
        .expect("role");
    store
        .apply(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]}),
        )
        .expect("binding");
    let request = serde_json::from_value(json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest", "spec": {"audiences": []}}))
    .expect("token request");
    Api::<ServiceAccount>::namespaced(sim.client.clone(), NS)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("token status")
        .token
}

fn user(name: &str) -> String {
    format!("system:serviceaccount:{NS}:{name}")
}

/// The remote secret for cluster `id` of `sim`, reading it with `token`.
fn remote_secret(sim: &common::Sim, id: &str, token: &str) -> Value {
    use base64::Engine;
    let kubeconfig = common::kubeconfig_with_user(sim, json!({ "token": token }));
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("remote-{id}"), "namespace": NS, "labels": {"istio/multiCluster": "true"}},
        "data": {id: base64::engine::general_purpose::STANDARD.encode(kubeconfig)}})
}

/// meshd's cluster discovery on `primary` (its secret controller joins remotes) and the publishers, as
/// the only replica. Stopped on drop.
fn mesh(primary: &common::Sim, roots: watch::Receiver<Arc<CaBundle>>) -> common::Discovery {
    let discovery = common::start_discovery(primary, NS, Duration::from_secs(5));
    lead(
        &primary.client,
        roots,
        discovery.view.clusters.clone(),
        &discovery.ctx.tasks,
    );
    discovery
}

/// Polls `f` until it holds, or fails naming `what`.
async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn every_joined_remote_gets_the_root_with_its_own_credentials_until_it_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("c2.jsonl");
    let (c1, c2) = (common::start().await, logged_sim("c2", &log, false).await);
    for ns in [NS, "sample"] {
        create_namespace(&c1.client, ns).await;
    }
    for ns in ["sample", "local-path-storage"] {
        create_namespace(&c2.client, ns).await;
    }
    let first = bundle();
    let (rotate, roots) = watch::channel(first.clone());
    let meshd = mesh(&c1, roots);
    let reader = service_account(
        &c2,
        "reader",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    )
    .await;
    c1.server
        .store()
        .apply(remote_secret(&c2, "c2", &reader))
        .expect("remote secret");

    // Every namespace of the remote but Kubernetes' own, written as the remote secret's identity.
    until_published(&c2.client, &[NS, "sample", "default"], &first.roots_pem()).await;
    for ns in IGNORED_NAMESPACES {
        assert!(
            root_in(&c2.client, ns).await.is_none(),
            "{ns} is not part of the mesh"
        );
    }
    assert!(writes_by(&log, &user("reader")) >= 3, "written by the reader");

    // Deleted: re-created; a namespace created later gets it; a root rotation reaches the remote.
    Api::<ConfigMap>::namespaced(c2.client.clone(), "sample")
        .delete(CONFIGMAP_NAME, &DeleteParams::default())
        .await
        .expect("delete");
    until_published(&c2.client, &["sample"], &first.roots_pem()).await;
    create_namespace(&c2.client, "late").await;
    until_published(&c2.client, &["late"], &first.roots_pem()).await;
    let second = bundle();
    rotate.send(second.clone()).expect("publishers are running");
    until_published(
        &c2.client,
        &[NS, "sample", "default", "late"],
        &second.roots_pem(),
    )
    .await;
    until_published(&c1.client, &[NS, "sample", "default"], &second.roots_pem()).await;

    // The secret rotates to another identity: the publisher starts again with the new client.
    let rotated = service_account(
        &c2,
        "rotated",
        json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    )
    .await;
    c1.server
        .store()
        .apply(remote_secret(&c2, "c2", &rotated))
        .expect("rotated secret");
    eventually("the rotated identity watching ConfigMaps", async || {
        configmap_requests(&log, &user("rotated"))
            .iter()
            .any(|r| r.verb == "watch")
    })
    .await;
    Api::<ConfigMap>::namespaced(c2.client.clone(), "sample")
        .delete(CONFIGMAP_NAME, &DeleteParams::default())
        .await
        .expect("delete");
    until_published(&c2.client, &["sample"], &second.roots_pem()).await;
    assert!(
        configmap_requests(&log, &user("rotated"))
            .iter()
            .any(|r| r.verb == "create" && r.namespace == "sample"),
        "re-created with the rotated credentials"
    );

    // Removed: no more writes there, while the primary's publisher (the yardstick) still acts.
    Api::<Secret>::namespaced(c1.client.clone(), NS)
        .delete("remote-c2", &DeleteParams::default())
        .await
        .expect("delete the remote secret");
    eventually("c2 removed", async || {
        meshd.view.clusters.rows().iter().all(|r| &*r.id != "c2")
    })
    .await;
    create_namespace(&c1.client, "probe-1").await;
    until_published(&c1.client, &["probe-1"], &second.roots_pem()).await;
    let written = writes_by(&log, &user("reader")) + writes_by(&log, &user("rotated"));
    Api::<ConfigMap>::namespaced(c2.client.clone(), "sample")
        .delete(CONFIGMAP_NAME, &DeleteParams::default())
        .await
        .expect("delete");
    create_namespace(&c2.client, "after").await;
    create_namespace(&c1.client, "probe-2").await;
    until_published(&c1.client, &["probe-2"], &second.roots_pem()).await;
    assert!(root_in(&c2.client, "sample").await.is_none(), "not repaired");
    assert!(root_in(&c2.client, "after").await.is_none(), "not published");
    assert_eq!(
        writes_by(&log, &user("reader")) + writes_by(&log, &user("rotated")),
        written,
        "no writes after removal"
    );
}

/// Collects what meshd logs at WARN and above while it lives (this test's thread only).
#[derive(Clone, Default)]
struct Logs(Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock())
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
            .collect()
    }
}

#[tokio::test]
async fn a_remote_that_may_only_read_gets_one_warning_and_the_rest_keeps_publishing() {
    let logs = Logs::default();
    let writer = logs.clone();
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("c3.jsonl");
    let (c1, c3) = (common::start().await, logged_sim("c3", &log, true).await);
    for ns in [NS, "sample"] {
        create_namespace(&c1.client, ns).await;
        create_namespace(&c3.client, ns).await;
    }
    // The reader role the chart granted before root publishing, plus reading ConfigMaps: no writes.
    let read_only = json!([
        {"apiGroups": [""], "resources": ["namespaces", "services", "pods", "nodes", "configmaps"],
         "verbs": ["list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]);
    let token = service_account(&c3, "reader", read_only).await;
    let root = bundle();
    let (_rotate, roots) = watch::channel(root.clone());
    let meshd = mesh(&c1, roots);
    c1.server
        .store()
        .apply(remote_secret(&c3, "c3", &token))
        .expect("remote secret");

    // The publisher keeps retrying with backoff: at least three refused rounds in one namespace…
    eventually("three refused rounds", async || {
        configmap_requests(&log, &user("reader"))
            .iter()
            .filter(|r| r.verb == "create" && r.namespace == "sample")
            .count()
            >= 3
    })
    .await;
    // …and says so once, naming the cluster, the verb and the resource.
    let warned = logs.lines_with(&["cluster=c3", "forbidden to create configmaps"]);
    assert_eq!(warned.len(), 1, "one warning while it repeats: {warned:#?}");
    assert!(root_in(&c3.client, "sample").await.is_none());

    // Nothing else is disturbed: the remote is discovered, the primary publishes, new namespaces too.
    let status = meshd
        .view
        .clusters
        .rows()
        .into_iter()
        .find(|r| &*r.id == "c3")
        .map(|r| r.sync_status);
    assert_eq!(status.as_deref(), Some("synced"));
    until_published(&c1.client, &[NS, "sample", "default"], &root.roots_pem()).await;
    create_namespace(&c1.client, "late").await;
    until_published(&c1.client, &["late"], &root.roots_pem()).await;
    assert!(
        logs.lines_with(&["cluster=c1"]).is_empty(),
        "the primary's publisher has nothing to warn about: {:#?}",
        logs.lines_with(&["cluster=c1"])
    );
}
