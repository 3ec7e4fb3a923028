//! Cluster discovery against simulated API servers, kube-rs doing the talking: remote secrets add,
//! remove, rotate and misconfigure clusters; faults and timeouts keep the last good state, then converge.

use crate::common;

use std::time::Duration;

use common::Sim;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::PostParams};
use kube_sim::{ApiServerConfig, FaultMode};
use meshd::{aggregate::MeshSnapshot, model::ServiceKey};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn sim(name: &str) -> Sim {
    common::start_with(ApiServerConfig::new(name)).await
}

/// What these tests do to a simulated cluster.
trait Cluster {
    fn apply(&self, obj: Value);
    fn service(&self, name: &str, vip: &str, ips: &[&str]);
    fn endpoints(&self, name: &str, ips: &[&str]);
    fn kubeconfig(&self, token: &str) -> String;
}

impl Cluster for Sim {
    fn apply(&self, obj: Value) {
        self.server.store().apply(obj).expect("apply");
    }

    /// A Service with a ClusterIP, and its EndpointSlice with one pod per address.
    fn service(&self, name: &str, vip: &str, ips: &[&str]) {
        self.apply(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": vip, "ports": [{"name": "http", "port": 80}]}}));
        self.endpoints(name, ips);
    }

    fn endpoints(&self, name: &str, ips: &[&str]) {
        // The API server refuses pods whose ServiceAccount is missing.
        self.apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": "default"}}));
        for ip in ips {
            self.apply(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name(ip), "namespace": "default", "labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app"}], "serviceAccountName": name},
                "status": {"phase": "Running", "podIP": ip}}));
        }
        let eps: Vec<Value> = ips
            .iter()
            .map(|ip| {
                json!({"addresses": [ip], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "name": pod_name(ip), "namespace": "default"}})
            })
            .collect();
        self.apply(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-slice"), "namespace": "default",
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}], "endpoints": eps}),
        );
    }

    fn kubeconfig(&self, token: &str) -> String {
        common::kubeconfig_with_user(self, json!({ "token": token }))
    }
}

fn pod_name(ip: &str) -> String {
    format!("pod-{}", ip.replace('.', "-"))
}

fn secret(name: &str, data: &[(&str, &str)]) -> Value {
    use base64::Engine;
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                Value::from(base64::engine::general_purpose::STANDARD.encode(v)),
            )
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "istio-system", "labels": {"istio/multiCluster": "true"}},
        "data": data})
}

fn start(primary: &Sim, remote_timeout: Duration) -> common::Discovery {
    common::start_discovery(primary, "istio-system", remote_timeout)
}

fn key(name: &str) -> ServiceKey {
    ServiceKey::new(format!("{name}.default.svc.cluster.local"), "default")
}

/// `cluster → sorted addresses` of one service.
fn shards(snap: &MeshSnapshot, name: &str) -> Vec<(String, Vec<String>)> {
    snap.endpoints
        .get(&key(name))
        .map(|s| {
            s.shards
                .iter()
                .map(|(c, eps)| {
                    (
                        c.cluster.to_string(),
                        eps.iter().map(|e| e.address.to_string()).collect(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owned(v: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    v.iter()
        .map(|(c, ips)| (c.to_string(), ips.iter().map(|s| s.to_string()).collect()))
        .collect()
}

async fn eventually<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn status(m: &common::Discovery, id: &str, secret: &str) -> String {
    m.view
        .clusters
        .row(id, secret)
        .map(|r| r.sync_status)
        .unwrap_or_default()
}

#[tokio::test]
async fn remote_secrets_add_remove_and_misconfigure_clusters() {
    let (c1, c2) = (sim("c1").await, sim("c2").await);
    c1.service("reviews", "10.96.1.1", &["10.1.1.1"]);
    c2.service("reviews", "10.97.0.1", &["10.2.1.1"]);
    c2.service("ratings", "10.97.0.2", &["10.2.1.2"]);
    let meshd = start(&c1, Duration::from_secs(5));
    tokio::time::timeout(Duration::from_secs(5), meshd.ctx.ready.wait())
        .await
        .expect("ready");

    // A labelled secret for c2: its services appear merged within 2 s.
    c1.apply(secret(
        "remote-c2",
        &[("c2", &c2.kubeconfig(c2.server.admin_token()))],
    ));
    let snaps = meshd.view.snapshots.clone();
    let snap = eventually("c2 merged", Duration::from_secs(2), || {
        let s = snaps.load();
        (s.endpoints.contains_key(&key("ratings")) && shards(&s, "reviews").len() == 2).then_some(s)
    })
    .await;
    assert_eq!(
        shards(&snap, "reviews"),
        owned(&[("c1", &["10.1.1.1"]), ("c2", &["10.2.1.1"])])
    );
    let reviews = &snap.services[&key("reviews")];
    assert_eq!(reviews.cluster_vips.len(), 2, "VIPs from both clusters");
    assert_eq!(status(&meshd, "c2", "istio-system/remote-c2"), "synced");

    // Bad entries are reported with their reason; c2 keeps working.
    let exec = c2.kubeconfig("t").replace(
        "token: t",
        "exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}",
    );
    let token_file = c2.kubeconfig("t").replace("token: t", "tokenFile: /etc/passwd");
    c1.apply(secret(
        "z-bad",
        &[
            ("c3", &exec),
            ("c4", &token_file),
            ("c5", "{ not: yaml"),
            ("c1", &c2.kubeconfig("t")),
            ("c2", &c2.kubeconfig(c2.server.admin_token())),
        ],
    ));
    let rows = eventually("bad entries reported", Duration::from_secs(2), || {
        let rows = meshd.view.clusters.rows();
        (rows.len() == 7).then_some(rows)
    })
    .await;
    let got: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r.id.to_string(), r.secret_name.clone(), r.sync_status.clone()))
        .collect();
    let want = [
        ("c1", "", "synced"),
        (
            "c1",
            "istio-system/z-bad",
            "error: cluster ID c1 is meshd's own cluster; ignored",
        ),
        ("c2", "istio-system/remote-c2", "synced"),
        (
            "c2",
            "istio-system/z-bad",
            "error: cluster ID c2 is already provided by secret istio-system/remote-c2",
        ),
        (
            "c3",
            "istio-system/z-bad",
            "error: kubeconfig user \"c2-admin\": exec plugin is not allowed",
        ),
        (
            "c4",
            "istio-system/z-bad",
            "error: kubeconfig user \"c2-admin\": tokenFile path is not allowed",
        ),
        (
            "c5",
            "istio-system/z-bad",
            "error: kubeconfig is not valid YAML (line 2)",
        ),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for ((id, secret, status), want) in got.iter().zip(want) {
        assert_eq!((id.as_str(), secret.as_str()), (want.0, want.1), "{got:#?}");
        assert!(
            status.starts_with(want.2),
            "{id} {secret}: {status:?} should start with {:?}",
            want.2
        );
    }
    let json = serde_json::to_string(&rows).unwrap();
    assert!(
        !json.contains(c2.server.admin_token()),
        "no credentials in clusterz"
    );

    // Removing the winner's key hands c2 to the other claimant (istio #36365) without losing it for long.
    c1.apply(secret("remote-c2", &[]));
    eventually("c2 served from z-bad", Duration::from_secs(3), || {
        (status(&meshd, "c2", "istio-system/z-bad") == "synced"
            && shards(&snaps.load(), "reviews").len() == 2)
            .then_some(())
    })
    .await;

    // Deleting the last Secret for c2 removes exactly its shards.
    Api::<Secret>::namespaced(c1.client.clone(), "istio-system")
        .delete("z-bad", &Default::default())
        .await
        .unwrap();
    let snap = eventually("c2 removed", Duration::from_secs(2), || {
        let s = snaps.load();
        (!s.services.contains_key(&key("ratings"))).then_some(s)
    })
    .await;
    assert_eq!(shards(&snap, "reviews"), owned(&[("c1", &["10.1.1.1"])]));
    assert_eq!(snap.services[&key("reviews")].cluster_vips.len(), 1);
}

#[tokio::test]
async fn rotation_never_drops_endpoints_and_converges_to_the_truth() {
    let (c1, c2) = (sim("c1").await, sim("c2").await);
    c1.service("reviews", "10.96.1.1", &["10.1.1.1"]);
    let base = ["10.2.1.1", "10.2.1.2", "10.2.1.3"];
    c2.service("reviews", "10.97.0.1", &base);
    let meshd = start(&c1, Duration::from_secs(5));
    c1.apply(secret(
        "remote-c2",
        &[("c2", &c2.kubeconfig(c2.server.admin_token()))],
    ));
    let snaps = meshd.view.snapshots.clone();
    eventually("c2 synced", Duration::from_secs(3), || {
        (shards(&snaps.load(), "reviews").len() == 2).then_some(())
    })
    .await;

    // Sample every 2 ms: c2's shard must never be missing.
    let sampling = CancellationToken::new();
    let sampler = tokio::spawn({
        let (snaps, stop) = (snaps.clone(), sampling.clone());
        async move {
            let (mut samples, mut missing) = (0u32, 0u32);
            while !stop.is_cancelled() {
                let s = snaps.load();
                samples += 1;
                if !s
                    .endpoints
                    .get(&key("reviews"))
                    .is_some_and(|e| e.shards.contains_key(&meshd::model::ShardKey::kubernetes("c2")))
                {
                    missing += 1;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            (samples, missing)
        }
    });

    // A new token from the TokenRequest API, while endpoints churn.
    c2.apply(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "istio-reader", "namespace": "istio-system"}}));
    let tr = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(c2.client.clone(), "istio-system")
        .create_token_request(
            "istio-reader",
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}})).unwrap(),
        )
        .await
        .expect("token request");
    let token = tr.status.expect("token").token;
    for i in 0..20 {
        let extra = format!("10.2.2.{i}");
        let mut ips: Vec<&str> = base.to_vec();
        ips.push(&extra);
        c2.endpoints("reviews", &ips);
        if i == 5 {
            c1.apply(secret("remote-c2", &[("c2", &c2.kubeconfig(&token))]));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let want = ["10.2.1.1", "10.2.1.2", "10.2.1.3", "10.2.2.19"];
    eventually(
        "view equals the simulator's truth",
        Duration::from_secs(5),
        || {
            let got = shards(&snaps.load(), "reviews");
            (got == owned(&[("c1", &["10.1.1.1"]), ("c2", &want)])).then_some(())
        },
    )
    .await;
    sampling.cancel();
    let (samples, missing) = sampler.await.unwrap();
    assert!(samples > 100, "sampler ran ({samples} samples)");
    assert_eq!(
        missing, 0,
        "c2's endpoints vanished in {missing} of {samples} samples"
    );
}

#[tokio::test]
async fn unreachable_remote_times_out_then_converges() {
    let (c1, c2) = (sim("c1").await, sim("c2").await);
    c2.service("reviews", "10.97.0.1", &["10.2.1.1"]);
    c2.server.faults().set(FaultMode::Refuse);
    c1.apply(secret(
        "remote-c2",
        &[("c2", &c2.kubeconfig(c2.server.admin_token()))],
    ));
    let meshd = start(&c1, Duration::from_millis(1500));
    let t0 = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), meshd.ctx.ready.wait())
        .await
        .expect("ready after the timeout");
    assert!(
        t0.elapsed() >= Duration::from_millis(1400),
        "readiness waited for the remote cluster"
    );
    assert_eq!(status(&meshd, "c2", "istio-system/remote-c2"), "timeout");
    let row = meshd.view.clusters.row("c2", "istio-system/remote-c2").unwrap();
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or_default()
            .starts_with(&format!("unreachable: API server {}: ", c2.server.url())),
        "the reason names the server: {row:?}"
    );

    c2.server.faults().set(FaultMode::None);
    let snaps = meshd.view.snapshots.clone();
    eventually("c2 endpoints after recovery", Duration::from_secs(15), || {
        (shards(&snaps.load(), "reviews") == owned(&[("c2", &["10.2.1.1"])])).then_some(())
    })
    .await;
    assert_eq!(status(&meshd, "c2", "istio-system/remote-c2"), "synced");
}

/// With the config cluster's API server down from the start no Secret list ever arrives; its row is
/// still shown, with the server named.
#[tokio::test]
async fn an_unreachable_primary_shows_its_row_and_server() {
    let c1 = sim("c1").await;
    c1.server.faults().set(FaultMode::Refuse);
    let meshd = start(&c1, Duration::from_secs(5));
    let want = format!("error: unreachable: API server {}: ", c1.server.url());
    let row = eventually(
        "the primary's row with its error",
        Duration::from_secs(10),
        || {
            let rows = meshd.view.clusters.rows();
            rows.first().filter(|r| r.sync_status.starts_with(&want)).cloned()
        },
    )
    .await;
    assert_eq!((&*row.id, row.secret_name.as_str()), ("c1", ""));
}

#[tokio::test]
async fn faults_keep_the_last_good_state_then_converge() {
    let (c1, c2) = (sim("c1").await, sim("c2").await);
    c2.service("reviews", "10.97.0.1", &["10.2.1.1"]);
    c1.apply(secret(
        "remote-c2",
        &[("c2", &c2.kubeconfig(c2.server.admin_token()))],
    ));
    let meshd = start(&c1, Duration::from_secs(5));
    let snaps = meshd.view.snapshots.clone();
    eventually("synced", Duration::from_secs(3), || {
        (shards(&snaps.load(), "reviews").len() == 1).then_some(())
    })
    .await;

    for (name, fault) in [
        ("500s", FaultMode::Error { status: 500 }),
        ("hang", FaultMode::Hang),
        ("410", FaultMode::None),
    ] {
        c2.server.faults().set(fault);
        c2.server.faults().drop_watches();
        if name == "410" {
            c2.server.store().compact();
        }
        // While broken, changes cannot arrive, but nothing is lost.
        c2.endpoints("reviews", &["10.2.1.1", "10.2.1.9"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            shards(&snaps.load(), "reviews").iter().any(|(c, _)| c == "c2"),
            "{name}: last good state kept"
        );
        c2.server.faults().set(FaultMode::None);
        c2.server.faults().drop_watches();
        eventually(name, Duration::from_secs(15), || {
            (shards(&snaps.load(), "reviews") == owned(&[("c2", &["10.2.1.1", "10.2.1.9"])])).then_some(())
        })
        .await;
        c2.endpoints("reviews", &["10.2.1.1"]);
        eventually(name, Duration::from_secs(5), || {
            (shards(&snaps.load(), "reviews") == owned(&[("c2", &["10.2.1.1"])])).then_some(())
        })
        .await;
    }
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// `MESHD_LOAD=clusters,services,endpoints` scales it (the run: `10,1000,10`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_many_clusters_converge() {
    let spec = std::env::var("MESHD_LOAD").unwrap_or_else(|_| "3,100,10".into());
    let n: Vec<usize> = spec.split(',').filter_map(|s| s.parse().ok()).collect();
    let [clusters, services, per] = n[..] else {
        panic!("MESHD_LOAD={spec}: want clusters,services,endpoints")
    };
    let mut sims = Vec::new();
    for c in 0..clusters {
        let s = sim(&format!("c{}", c + 1)).await;
        for i in 0..services {
            // Unique per cluster: 10.<cluster>.<service / 16>.<(service % 16) * endpoints + endpoint>;
            // VIPs from 10.96.0.2 (10.96.0.1 is the `kubernetes` Service every cluster has).
            let ips: Vec<String> = (0..per)
                .map(|e| format!("10.{c}.{}.{}", i / 16, (i % 16) * per + e + 1))
                .collect();
            let ips: Vec<&str> = ips.iter().map(String::as_str).collect();
            s.service(
                &format!("svc-{i}"),
                &format!("10.96.{}.{}", i / 250, i % 250 + 2),
                &ips,
            );
        }
        sims.push(s);
    }
    let before = rss_mib();
    let t0 = tokio::time::Instant::now();
    let meshd = start(&sims[0], Duration::from_secs(120));
    for s in &sims[1..] {
        let name = s.server.cluster_name().to_owned();
        sims[0].apply(secret(
            &format!("remote-{name}"),
            &[(&name, &s.kubeconfig(s.server.admin_token()))],
        ));
    }
    // Every simulated cluster also has the `kubernetes` Service with one endpoint (merged into one service).
    let want = clusters * services * per + clusters;
    let snaps = meshd.view.snapshots.clone();
    eventually("load converged", Duration::from_secs(600), || {
        let s = snaps.load();
        (s.endpoints.values().map(|e| e.iter().count()).sum::<usize>() == want).then_some(())
    })
    .await;
    let synced = t0.elapsed();
    tokio::time::timeout(Duration::from_secs(60), meshd.ctx.ready.wait())
        .await
        .expect("ready");
    let snap = snaps.load();
    assert_eq!(
        snap.services.len(),
        services + 1,
        "one merged service per hostname"
    );
    eprintln!(
        "load {clusters} clusters x {services} services x {per} endpoints = {want}: synced in {:.2?}, \
         RSS {:.0} MiB (+{:.0} MiB for meshd's discovery; simulators share the process)",
        synced,
        rss_mib(),
        rss_mib() - before
    );
}
