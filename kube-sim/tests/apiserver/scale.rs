//! Scale: 100,000 ConfigMaps load, list (paginated and whole), watch from resourceVersion 0, and go with
//! their namespace.
//! Prints the timings and the process RSS (run with `--nocapture` to see them).

use std::time::Duration;

use tokio::time::Instant;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use kube_sim::testing::start;
use serde_json::{Value, json};

const N: usize = 100_000;

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
    kib.unwrap_or_default() / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_objects_list_and_watch() {
    let sim = start().await;
    let t = Instant::now();
    for i in 0..N {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:06}"), "namespace": "scale", "labels": {"shard": (i % 10).to_string()}},
            "data": {"index": i.to_string()}});
        sim.server.store().apply(cm).unwrap();
    }
    println!(
        "load: {N} objects via Store::apply in {:?}, RSS {} MiB",
        t.elapsed(),
        rss_mib()
    );

    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), "scale");
    let t = Instant::now();
    let (mut seen, mut pages, mut lp) = (0usize, 0usize, ListParams::default().limit(500));
    let mut last = String::new();
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        for item in &page.items {
            let name = item.metadata.name.clone().unwrap();
            assert!(name > last, "ordered and unique");
            last = name;
        }
        seen += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    // The N ConfigMaps plus the namespace's kube-root-ca.crt.
    assert_eq!((seen, pages), (N + 1, N / 500 + 1));
    println!("paginated list: {pages} pages of 500 in {:?}", t.elapsed());

    let t = Instant::now();
    let req = http::Request::get("/api/v1/namespaces/scale/configmaps")
        .body(vec![])
        .unwrap();
    let whole: Value = sim.client.request(req).await.unwrap();
    assert_eq!(whole["items"].as_array().map(Vec::len), Some(N + 1));
    println!("single list of {N}: {:?}, RSS {} MiB", t.elapsed(), rss_mib());

    let t = Instant::now();
    let selected = api.list(&ListParams::default().labels("shard=3")).await.unwrap();
    assert_eq!(selected.items.len(), N / 10);
    println!(
        "label-selected list ({} items): {:?}",
        selected.items.len(),
        t.elapsed()
    );

    let t = Instant::now();
    let req = http::Request::get("/api/v1/namespaces/scale/configmaps?watch=true&resourceVersion=0")
        .body(vec![])
        .unwrap();
    let mut lines = sim.client.request_stream(req).await.unwrap().lines();
    let mut added = 0;
    while added < N + 1 {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(line.starts_with(r#"{"type":"ADDED""#));
        added += 1;
    }
    sim.server.store().apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-000000", "namespace": "scale"}})).unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), lines.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(next.starts_with(r#"{"type":"MODIFIED""#));
    println!(
        "watch from 0: {added} ADDED events then live in {:?}, RSS {} MiB",
        t.elapsed(),
        rss_mib()
    );

    // The namespace controller empties the namespace (one DELETED event each) before the namespace goes.
    let t = Instant::now();
    let namespaces: Api<Namespace> = Api::all(sim.client.clone());
    namespaces
        .delete("scale", &DeleteParams::default())
        .await
        .unwrap();
    assert!(namespaces.get_opt("scale").await.unwrap().is_none());
    assert!(
        sim.server
            .store()
            .list("v1", "ConfigMap", Some("scale"))
            .is_empty()
    );
    println!("namespace of {N} objects deleted in {:?}", t.elapsed());
}
