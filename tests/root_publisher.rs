//! The mesh root publisher against the API server simulator: as the leader, meshd writes
//! `istio-ca-root-cert` into every namespace (a new one too), skips Kubernetes' own, repairs a deleted or
//! edited copy, and follows a root rotation.

mod common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use meshd::{
    ca::{
        CaBundle, MeshCa, WorkloadCertPolicy,
        root_publisher::{self, CONFIGMAP_NAME, IGNORED_NAMESPACES, ROOT_CERT_KEY, RootPublisherConfig},
    },
    drain::Tasks,
    leader::{self, ElectionConfig},
};
use serde_json::json;
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
    let election = ElectionConfig {
        identity: "meshd-0".into(),
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(250),
        ..ElectionConfig::new(NS)
    };
    let leadership = leader::start(client.clone(), election, &tasks).expect("election");
    let cfg = RootPublisherConfig {
        client: client.clone(),
        leadership,
        roots,
    };
    root_publisher::spawn(cfg, &tasks);
    (sim, client, tasks)
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
