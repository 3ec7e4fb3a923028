//! A store folder seen from a client: a restarted API server on the same folder and port serves the same
//! objects to the same kubeconfig (same CA, same admin token), continues resourceVersions, and answers a
//! watch from before the restart with 410 Expired, as a real API server does after a restart.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube_sim::testing::client_for;
use kube_sim::{ApiServer, ApiServerConfig, Error, PersistError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// Starts on `cfg`, waiting for the previous server's tasks to let go of the folder.
async fn start_when_free(cfg: &ApiServerConfig, stop: &CancellationToken) -> ApiServer {
    for _ in 0..100 {
        match ApiServer::start(cfg.clone(), stop.clone()).await {
            Ok(server) => return server,
            Err(Error::Persist(PersistError::InUse { .. }) | Error::Bind { .. }) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("start: {e}"),
        }
    }
    panic!("the folder or port was never released");
}

#[tokio::test]
async fn a_restarted_server_serves_the_same_objects_to_the_same_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ApiServerConfig {
        store_dir: Some(dir.path().join("store")),
        ..ApiServerConfig::new("kept")
    };
    let stop = CancellationToken::new();
    let server = ApiServer::start(cfg.clone(), stop.clone()).await.unwrap();
    assert!(server.restored().is_none(), "an empty folder is a new cluster");
    let kubeconfig = server.admin_kubeconfig();
    let client = client_for(&kubeconfig).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = cms
        .create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    let rv_a: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
    let revision = server.store().revision();
    cfg.bind.set_port(server.addr().port());
    drop((cms, server));
    stop.cancel();

    let stop = CancellationToken::new();
    let server = start_when_free(&cfg, &stop).await;
    let restored = server.restored().expect("restored");
    assert_eq!(restored.revision, revision);
    assert_eq!(restored.truncated, None);
    // The kubeconfig written before the restart still works: same port, CA and token.
    let cms: Api<ConfigMap> = Api::namespaced(client_for(&kubeconfig).await, "default");
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "v");
    let c = cms
        .create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    let rv_c: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv_c > revision, "{rv_c} after {revision}");

    let mut events = cms
        .watch(&WatchParams::default(), &rv_a.to_string())
        .await
        .unwrap()
        .boxed();
    match events.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    stop.cancel();
}
