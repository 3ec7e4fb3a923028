//! Watches and faults: kube-rs watcher/reflector through compaction and dropped connections, raw watch
//! protocol details, slow watchers, and each fault mode observed by a client and lifted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::runtime::reflector::{self, Store as Reader};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use kube_sim::testing::{
    Sim, client_for, eventually_async, impatient_client, kubeconfig_with_user, raw, start, start_with,
    status_of,
};
use kube_sim::{ApiServerConfig, FaultMode};
use serde_json::{Value, json};

const NS: &str = "w";

fn put(sim: &Sim, name: &str, value: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"v": value}});
    sim.server.store().apply(cm).unwrap();
}

fn del(sim: &Sim, name: &str) {
    sim.server
        .store()
        .delete("v1", "ConfigMap", Some(NS), name)
        .unwrap();
}

/// name -> resourceVersion, from the server's store.
fn truth(sim: &Sim) -> BTreeMap<String, String> {
    let items = sim.server.store().list("v1", "ConfigMap", Some(NS));
    items
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().into(),
                o["metadata"]["resourceVersion"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn mirror(reader: &Reader<ConfigMap>) -> BTreeMap<String, String> {
    reader
        .state()
        .iter()
        .map(|c| (c.name_any(), c.resource_version().unwrap()))
        .collect()
}

/// Runs a reflector over `w` and counts the initial lists (each relist starts with `Init`).
fn spawn_reflector(sim: &Sim, config: watcher::Config) -> (Reader<ConfigMap>, Arc<AtomicUsize>) {
    let api: Api<ConfigMap> = Api::namespaced(sim.client.clone(), NS);
    let (reader, writer) = reflector::store();
    let inits = Arc::new(AtomicUsize::new(0));
    let counter = inits.clone();
    let stream = watcher(api, config).default_backoff().reflect(writer);
    tokio::spawn(stream.for_each(move |ev| {
        if matches!(ev, Ok(watcher::Event::Init)) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        async {}
    }));
    (reader, inits)
}

async fn assert_converges(sim: &Sim, reader: &Reader<ConfigMap>, what: &str) {
    let ok = eventually_async(20, || mirror(reader) == truth(sim)).await;
    assert!(
        ok,
        "{what}: reflector {:?}\n != store {:?}",
        mirror(reader),
        truth(sim)
    );
}

#[tokio::test]
async fn reflector_survives_compaction_and_dropped_watches() {
    let sim = start().await;
    for i in 0..20 {
        put(&sim, &format!("cm-{i}"), "0");
    }
    let (reader, inits) = spawn_reflector(&sim, watcher::Config::default().page_size(7));
    reader.wait_until_ready().await.unwrap();
    assert_converges(&sim, &reader, "initial list").await;

    // Live changes.
    put(&sim, "cm-0", "1");
    del(&sim, "cm-1");
    put(&sim, "new-a", "0");
    assert_converges(&sim, &reader, "live events").await;

    // Dropped connection: the watcher resumes from its last resourceVersion, still in history.
    sim.server.faults().drop_watches();
    put(&sim, "cm-2", "1");
    del(&sim, "cm-3");
    put(&sim, "new-b", "0");
    assert_converges(&sim, &reader, "after dropWatches").await;

    // Down while changes happen, then history is compacted: resuming gets 410 and the watcher relists.
    let relists_before = inits.load(Ordering::SeqCst);
    sim.server.faults().set(FaultMode::Refuse);
    tokio::time::sleep(Duration::from_millis(200)).await;
    put(&sim, "cm-4", "2");
    del(&sim, "cm-5");
    del(&sim, "new-a");
    put(&sim, "new-c", "0");
    sim.server.store().compact();
    sim.server.faults().set(FaultMode::None);
    assert_converges(&sim, &reader, "after refuse + compaction").await;
    assert!(
        inits.load(Ordering::SeqCst) > relists_before,
        "a 410 must force a relist"
    );

    // And it keeps following afterwards.
    put(&sim, "cm-6", "3");
    del(&sim, "new-b");
    assert_converges(&sim, &reader, "after recovery").await;
}

#[tokio::test]
async fn streaming_list_reflector() {
    let sim = start().await;
    for i in 0..10 {
        put(&sim, &format!("s-{i}"), "0");
    }
    let (reader, _) = spawn_reflector(&sim, watcher::Config::default().streaming_lists());
    reader.wait_until_ready().await.unwrap();
    assert_converges(&sim, &reader, "streaming list").await;
    del(&sim, "s-0");
    put(&sim, "s-1", "1");
    assert_converges(&sim, &reader, "streaming list follow").await;
}

/// Reads newline-delimited watch events from a raw watch request until `stop` says so or the stream ends.
async fn read_events(sim: &Sim, query: &str, mut stop: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let req = http::Request::get(format!("/api/v1/namespaces/{NS}/configmaps?watch=true&{query}"))
        .body(vec![])
        .unwrap();
    let mut lines = sim.client.request_stream(req).await.unwrap().lines();
    let mut events = Vec::new();
    while let Ok(Some(Ok(line))) = tokio::time::timeout(Duration::from_secs(10), lines.next()).await {
        events.push(serde_json::from_str(&line).unwrap());
        if stop(&events) {
            break;
        }
    }
    events
}

#[tokio::test]
async fn raw_watch_protocol() {
    let sim = start().await;
    put(&sim, "a", "0");
    let rv_a = sim.server.store().revision();
    put(&sim, "b", "0");

    // Replay from a resourceVersion: only what came after it.
    let ev = read_events(&sim, &format!("resourceVersion={rv_a}"), |e| !e.is_empty()).await;
    assert_eq!(
        (
            ev[0]["type"].as_str(),
            ev[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("b"))
    );

    // Bookmarks carry only kind, apiVersion and the resourceVersion.
    let ev = read_events(&sim, "resourceVersion=0&allowWatchBookmarks=true", |e| {
        e.iter().any(|e| e["type"] == "BOOKMARK")
    })
    .await;
    let bookmark = ev.iter().find(|e| e["type"] == "BOOKMARK").unwrap();
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert_eq!(
        bookmark["object"]["metadata"]["resourceVersion"],
        sim.server.store().revision().to_string()
    );
    // a, b and the namespace's kube-root-ca.crt.
    assert_eq!(ev.iter().filter(|e| e["type"] == "ADDED").count(), 3);

    // sendInitialEvents: ADDED for each object, then the annotated end marker.
    let query = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let ev = read_events(&sim, query, |e| e.iter().any(|e| e["type"] == "BOOKMARK")).await;
    assert_eq!(ev.len(), 4);
    assert_eq!(
        ev[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // timeoutSeconds ends the stream cleanly.
    let started = Instant::now();
    let ev = read_events(
        &sim,
        &format!(
            "resourceVersion={}&timeoutSeconds=1",
            sim.server.store().revision()
        ),
        |_| false,
    )
    .await;
    assert!(ev.is_empty() && started.elapsed() < Duration::from_secs(5));

    // Too old: HTTP 200 and one ERROR event with a 410 Expired Status.
    sim.server.store().compact();
    put(&sim, "c", "0");
    let ev = read_events(&sim, &format!("resourceVersion={rv_a}"), |_| false).await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["type"], "ERROR");
    assert_eq!(
        (
            ev[0]["object"]["code"].as_u64(),
            ev[0]["object"]["reason"].as_str()
        ),
        (Some(410), Some("Expired"))
    );
}

#[tokio::test]
async fn slow_watchers_do_not_block_writers() {
    let sim = start_with(ApiServerConfig {
        history_limit: 100,
        ..ApiServerConfig::new("slow")
    })
    .await;
    put(&sim, "seed", "0");
    let req = http::Request::get(format!(
        "/api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion=0"
    ))
    .body(vec![])
    .unwrap();
    let stalled = sim.client.request_stream(req).await.unwrap();
    let started = Instant::now();
    for i in 0..12_000 {
        put(&sim, "hot", &i.to_string());
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "writers were blocked: {:?}",
        started.elapsed()
    );
    // The stalled watcher fell behind by more than its buffer and was closed: its stream ends.
    let mut lines = stalled.lines();
    let drained = tokio::time::timeout(Duration::from_secs(20), async {
        let mut n = 0;
        while let Some(Ok(_)) = lines.next().await {
            n += 1;
        }
        n
    })
    .await
    .expect("a lagging watch must be closed, not kept open");
    assert!(
        drained < 12_001,
        "the watcher cannot have received every event: {drained}"
    );
}

async fn fault_over_http(sim: &Sim, body: Value) -> (u16, Value) {
    raw(
        &sim.client,
        "POST",
        "/sandbox/v1/faults",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await
}

#[tokio::test]
async fn fault_modes_are_observable_and_recoverable() {
    let sim = start().await;
    // kube-rs retries 429 with backoff by default; this client shows each answer as is.
    let impatient = impatient_client(&sim, Duration::from_millis(800)).await;
    let api: Api<ConfigMap> = Api::namespaced(impatient.clone(), "default");
    let lp = ListParams::default();
    api.list(&lp).await.unwrap();

    for code in [500u16, 429] {
        assert_eq!(
            fault_over_http(&sim, json!({"mode": "error", "status": code}))
                .await
                .0,
            200
        );
        assert_eq!(status_of(api.list(&lp).await).code, code);
        let req = http::Request::get("/api/v1/namespaces/default/configmaps")
            .body(kube::client::Body::empty())
            .unwrap();
        let resp = impatient.send(req).await.unwrap();
        assert_eq!(resp.headers().contains_key("retry-after"), code == 429);
        assert_eq!(
            fault_over_http(&sim, json!({"mode": "none"})).await.0,
            200,
            "fault endpoint works in error mode"
        );
        api.list(&lp).await.unwrap();
    }

    // Only the admin token may drive faults.
    let outsider = client_for(&kubeconfig_with_user(&sim, json!({"token": "nope"}))).await;
    let (code, _) = raw(
        &outsider,
        "POST",
        "/sandbox/v1/faults",
        "application/json",
        br#"{"mode":"hang"}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(fault_over_http(&sim, json!({"mode": "bogus"})).await.0, 400);

    fault_over_http(&sim, json!({"mode": "hang"})).await;
    let hung = api.list(&lp).await;
    assert!(hung.is_err(), "hang mode must not answer: {hung:?}");
    assert_eq!(
        fault_over_http(&sim, json!({"mode": "none"})).await.0,
        200,
        "fault endpoint works in hang mode"
    );
    api.list(&lp).await.unwrap();

    sim.server.faults().set(FaultMode::Refuse);
    let refused = api.list(&lp).await;
    assert!(
        matches!(refused, Err(ref e) if !matches!(e, kube::Error::Api(_))),
        "refuse mode is a connection error: {refused:?}"
    );
    sim.server.faults().set(FaultMode::None);
    api.list(&lp).await.unwrap();

    let (code, state) = fault_over_http(&sim, json!({"compact": true, "dropWatches": true})).await;
    assert_eq!((code, state["mode"].as_str()), (200, Some("none")));
}
