//! The load tool's smoke run: a small mesh, delta and SotW clients, one stalled client, churn in the
//! remote clusters; the same against a control plane started by hand (`--target`), and a one-cluster
//! run. Asserts behaviour only (every client configured, every change everywhere, every client ends
//! with exactly the truth), never times.

use std::{
    net::{SocketAddr, TcpListener},
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use meshctl::bench::{
    self, Config, Protocols, Target,
    scope::Scope,
    world::{Shape, World},
};

/// One run at a time: each starts meshd on ports that were free a moment before, and a second run
/// starting beside it can take one of them first.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The workspace's `meshd` binary (a sibling package's, built by `cargo test --workspace`), beside this
/// test binary's `deps/` folder.
fn meshd_exe() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
    dir.join("meshd")
}

/// 3 × 20 × 3, 20 mixed clients and one stalled, 20 changes/s for 3 s, verified against the truth.
fn smoke(out: &std::path::Path) -> Config {
    Config {
        shape: Shape {
            clusters: 3,
            services: 20,
            endpoints: 3,
        },
        scope: None,
        clients: 20,
        flavor: Protocols::Mixed,
        stalled: 1,
        connect_per_s: None,
        churn_per_s: 20.0,
        duration: Duration::from_secs(3),
        debounce: Duration::from_millis(50),
        target: Target::Meshd(meshd_exe()),
        verify: true,
        configure_timeout: Duration::from_secs(60),
        settle_timeout: Duration::from_secs(20),
        out_dir: out.to_owned(),
        kubeconfig: None,
        secret_storm: 0,
        reconnect_storm: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_every_client_converges_to_the_truth() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    // After the churn, 200 updates to Secrets no proxy uses: they must cause no push.
    let config = Config {
        secret_storm: 200,
        ..smoke(out.path())
    };
    let report = bench::run(config, true).await.expect("bench run");
    eprintln!("{}", report.table());
    assert_eq!(report.initial.configured, 20, "every client configured");
    let storm = report.secret_storm.as_ref().expect("the storm ran");
    assert_eq!(
        (storm.updates, storm.responses),
        (200, 0),
        "unrelated Secrets pushed: {storm:?}"
    );
    assert_eq!(report.convergence.changes, 60);
    assert_eq!(
        report.convergence.converged, 60,
        "every change reached every client"
    );
    let verified = report.verified.expect("verified");
    assert!(verified.mismatches.is_empty(), "{:?}", verified.mismatches);
    assert!(report.target.is_some(), "meshd's RSS and CPU were read");
    let cost = &report.cost;
    assert!(cost.churn.target_cpu_s.is_some() && cost.target_ms_per_change_per_1k_streams.is_some());
    assert!(
        cost.connect.tool.clients_s + cost.churn.tool.clients_s > 0.0,
        "the clients' runtime threads are counted: {cost:?}"
    );
    assert!(report.initial.bytes_per_client > 0.0);
    for file in ["report.json", "events.csv", "convergence.svg"] {
        assert!(out.path().join(file).is_file(), "{file} written");
    }
}

/// SotW sidecars watching every cluster of a mesh whose EDS set is ≈ 5 MiB each. When meshd split the
/// set into 128 KiB responses, each was acknowledged with the whole 1,000-name list, the clients'
/// bounded request queues filled while meshd was still writing, and neither side read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_sidecars_of_a_large_mesh_are_configured() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    let config = Config {
        shape: Shape {
            clusters: 1,
            services: 1000,
            endpoints: 60,
        },
        clients: 2,
        flavor: Protocols::Sotw,
        stalled: 0,
        churn_per_s: 0.0,
        duration: Duration::ZERO,
        verify: false,
        configure_timeout: Duration::from_secs(90),
        settle_timeout: Duration::from_secs(5),
        ..smoke(out.path())
    };
    let report = bench::run(config, true).await.expect("bench run");
    eprintln!("{}", report.table());
    assert_eq!(report.initial.configured, 2, "every SotW client configured");
}

/// A loopback port that was free a moment ago (`ONE_AT_A_TIME` keeps the other runs from taking it).
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// A control plane the test started itself, as an operator starts one for `--target`; killed when
/// dropped.
struct External(Child);

impl Drop for External {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for the bench to write its primary's kubeconfig (`<out>/state/<primary>/kubeconfig`, the one
/// it prints), then starts the real meshd on it, serving plaintext ADS on `ads`. The remote secrets may
/// land in the primary after meshd starts: it picks them up as it would in a real cluster.
async fn start_external(out: &Path, ads: SocketAddr) -> External {
    let kubeconfig = out.join("state").join(World::cluster_name(0)).join("kubeconfig");
    let written = || {
        let text = std::fs::read_to_string(&kubeconfig).ok()?;
        let yaml: serde_yaml::Value = serde_yaml::from_str(&text).ok()?;
        yaml.get("users").map(|_| ())
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while written().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no kubeconfig at {}",
            kubeconfig.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = std::fs::File::create(out.join("external.log")).expect("log file");
    let [secure, http, monitoring] = [(); 3].map(|()| free_port());
    let child = Command::new(meshd_exe())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--cluster-id", &World::cluster_name(0)])
        .args(["--grpc-addr", &ads.to_string()])
        .args(["--secure-grpc-addr", &secure.to_string()])
        .args(["--http-addr", &http.to_string()])
        .args(["--monitoring-addr", &monitoring.to_string()])
        .args(["--debounce-after", "50ms", "--log-level", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("meshd starts");
    External(child)
}

/// The tool pointed at an ADS server it did not start: clients follow whatever CDS returns and know
/// each EDS resource by its addresses, so they are configured, see every change, and end with the truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_target_converges_to_the_truth() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    let ads = free_port();
    let config = Config {
        shape: Shape {
            clusters: 2,
            services: 10,
            endpoints: 2,
        },
        clients: 6,
        stalled: 0,
        churn_per_s: 10.0,
        duration: Duration::from_secs(2),
        target: Target::Address {
            addr: ads.to_string(),
            pid: None,
            ready: None,
        },
        ..smoke(out.path())
    };
    let run = tokio::spawn(bench::run(config, false));
    let _meshd = start_external(out.path(), ads).await;
    let report = run.await.expect("bench task").expect("bench run");
    eprintln!("{}", report.table());
    assert_eq!(report.initial.configured, 6, "every client configured");
    assert_eq!(report.convergence.changes, 20);
    assert_eq!(
        report.convergence.converged, 20,
        "every change reached every client"
    );
    let verified = report.verified.expect("verified");
    assert!(verified.mismatches.is_empty(), "{:?}", verified.mismatches);
    assert!(report.target.is_none(), "no PID given, no usage read");
}

/// With one cluster there is no remote: the churn replaces endpoints in the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_cluster_run_churns_and_converges() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    let config = Config {
        shape: Shape {
            clusters: 1,
            services: 10,
            endpoints: 2,
        },
        clients: 4,
        stalled: 0,
        churn_per_s: 10.0,
        duration: Duration::from_secs(1),
        ..smoke(out.path())
    };
    let report = bench::run(config, false).await.expect("bench run");
    eprintln!("{}", report.table());
    assert_eq!(report.initial.configured, 4, "every client configured");
    assert_eq!(report.convergence.changes, 10);
    assert!(
        report.events.iter().all(|e| e.cluster == 0),
        "churned the only cluster"
    );
    assert_eq!(
        report.convergence.converged, 10,
        "every change reached every client"
    );
    let verified = report.verified.expect("verified");
    assert!(verified.mismatches.is_empty(), "{:?}", verified.mismatches);
}

/// meshd killed under 10 delta clients, 4 changes written while it is down (4 of 20 services), meshd
/// restarted: every client resumes with `initial_resource_versions` and is sent the changed assignments
/// only, not its whole config again, and ends with the truth. One cluster: the new meshd's first
/// snapshot holds the whole mesh (with remotes it may be served before they have synced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_meshd_resends_only_what_changed_to_resuming_clients() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    let config = Config {
        shape: Shape {
            clusters: 1,
            services: 20,
            endpoints: 3,
        },
        clients: 10,
        flavor: Protocols::Delta,
        stalled: 0,
        churn_per_s: 10.0,
        duration: Duration::from_secs(1),
        reconnect_storm: Some(4),
        ..smoke(out.path())
    };
    let report = bench::run(config, false).await.expect("bench run");
    eprintln!("{}", report.table());
    let storm = report.reconnect_storm.as_ref().expect("the restart ran");
    assert_eq!((storm.synced, storm.changes), (10, 4), "{storm:?}");
    assert!(
        storm.all_up_to_date_s.is_some(),
        "every change reached every client: {storm:?}"
    );
    assert!(
        storm.bytes_per_client * 3.0 < storm.full_config_bytes_per_client,
        "4 of 20 services re-sent, not the whole config: {storm:?}"
    );
    let verified = report.verified.expect("verified");
    assert!(verified.mismatches.is_empty(), "{:?}", verified.mismatches);
}

/// Clients spread over namespaces whose `Sidecar` imports 3 of 20 services: each client is sent exactly
/// those services' clusters (plus meshd's defaults) and endpoints, and each change reaches exactly the
/// clients that see its service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_scoped_clients_get_only_their_services() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let out = tempfile::tempdir().unwrap();
    let scope = Scope::new(3, 20);
    let config = Config {
        scope: Some(scope),
        clients: 8,
        flavor: Protocols::Mixed,
        duration: Duration::from_secs(2),
        ..smoke(out.path())
    };
    let report = bench::run(config, false).await.expect("bench run");
    eprintln!("{}", report.table());
    assert_eq!(report.initial.configured, 8, "every client configured");
    let verified = report.verified.expect("verified");
    assert!(verified.mismatches.is_empty(), "{:?}", verified.mismatches);
    assert_eq!(
        verified.other_clusters,
        [
            "BlackHoleCluster",
            "InboundPassthroughCluster",
            "PassthroughCluster"
        ],
        "besides its services', only meshd's defaults"
    );
    assert_eq!(report.events.len(), 40);
    for e in &report.events {
        let expected = (0..8).filter(|&c| scope.sees(c, e.service)).count();
        assert_eq!(
            (e.clients, e.expected),
            (expected, expected),
            "change of svc-{}",
            e.service
        );
    }
    // 4 namespaces × 3 services cover svc-0 … svc-11: the 16 changes to svc-12 … svc-19 reach no one.
    assert_eq!(report.convergence.unwatched, 16);
    assert_eq!(report.convergence.converged, 40);
}
