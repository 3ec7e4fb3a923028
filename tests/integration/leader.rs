//! Leader election against the API server simulator: two electors, exactly one leader, hand-over on
//! graceful stop (release) and on crash (expiry), and leader-only duties that never overlap.

use crate::common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::{coordination::v1::Lease, core::v1::Namespace};
use kube::{Api, Client, api::PostParams};
use meshd::{
    drain::Tasks,
    leader::{self, ElectionConfig, Leadership},
};
use serde_json::json;
use tokio::{sync::watch, time::Instant};

const NS: &str = "istio-system";
const LEASE: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(250);

fn config(identity: &str) -> ElectionConfig {
    ElectionConfig {
        identity: identity.to_owned(),
        lease_duration: LEASE,
        renew_deadline: Duration::from_secs(2),
        retry_period: RETRY,
        ..ElectionConfig::new(NS)
    }
}

async fn sim_with_namespace() -> common::Sim {
    let sim = common::start().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace");
    Api::<Namespace>::all(sim.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    sim
}

async fn holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get_opt(leader::DEFAULT_LEASE_NAME)
        .await
        .expect("get lease")
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// Waits until `rx` shows `want`, at most `limit`; returns how long it took.
async fn wait_for(rx: &mut watch::Receiver<bool>, want: bool, limit: Duration) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(limit, rx.wait_for(|v| *v == want))
        .await
        .unwrap_or_else(|_| panic!("leadership did not become {want} within {limit:?}"))
        .expect("election task alive");
    start.elapsed()
}

/// A duty that counts how many copies of it run at once, across electors.
fn counting_duty(
    running: Arc<AtomicUsize>,
    max_seen: Arc<AtomicUsize>,
    starts: Arc<AtomicUsize>,
) -> impl FnMut(Tasks) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + 'static {
    move |tasks: Tasks| {
        let (running, max_seen, starts) = (running.clone(), max_seen.clone(), starts.clone());
        Box::pin(async move {
            starts.fetch_add(1, Ordering::SeqCst);
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            max_seen.fetch_max(now, Ordering::SeqCst);
            tasks.cancelled().await;
            running.fetch_sub(1, Ordering::SeqCst);
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_graceful_handover() {
    let sim = sim_with_namespace().await;
    let kubeconfig = sim.server.admin_kubeconfig();
    let (running, max_seen, starts) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );

    let tasks_a = Tasks::new();
    let tasks_b = Tasks::new();
    let a = leader::start(common::client_for(&kubeconfig).await, config("a"), &tasks_a).expect("start a");
    let b = leader::start(common::client_for(&kubeconfig).await, config("b"), &tasks_b).expect("start b");
    a.run_while_leader(
        &tasks_a,
        "duty",
        counting_duty(running.clone(), max_seen.clone(), starts.clone()),
    );
    b.run_while_leader(
        &tasks_b,
        "duty",
        counting_duty(running.clone(), max_seen.clone(), starts.clone()),
    );

    // Exactly one leads, and it is the Lease's holder.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(a.is_leader() || b.is_leader()) {
        assert!(Instant::now() < deadline, "nobody acquired the lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Watch both for a few renew rounds: never two leaders, the duty runs exactly once.
    for _ in 0..40 {
        assert!(!(a.is_leader() && b.is_leader()), "two leaders at once");
        assert!(running.load(Ordering::SeqCst) <= 1);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (leader, leader_tasks, standby): (&Leadership, &Tasks, &Leadership) = if a.is_leader() {
        (&a, &tasks_a, &b)
    } else {
        (&b, &tasks_b, &a)
    };
    assert!(!standby.is_leader());
    assert_eq!(holder(&sim.client).await.as_deref(), Some(leader.identity()));
    assert_eq!(running.load(Ordering::SeqCst), 1, "the duty runs on the leader");

    // Graceful stop: the leader releases, the standby takes over within a few retry periods (well inside
    // the lease duration), and the duty moves with it.
    let mut standby_rx = standby.subscribe();
    leader_tasks
        .drain(Duration::from_secs(5))
        .await
        .expect("leader drains");
    assert!(!leader.is_leader());
    let took = wait_for(&mut standby_rx, true, LEASE).await;
    assert!(took < LEASE, "takeover after release took {took:?}");
    assert_eq!(holder(&sim.client).await.as_deref(), Some(standby.identity()));
    common::eventually_async(2, || running.load(Ordering::SeqCst) == 1).await;
    assert_eq!(starts.load(Ordering::SeqCst), 2, "the duty started once per term");
    assert_eq!(
        max_seen.load(Ordering::SeqCst),
        1,
        "the duty never ran twice at once"
    );

    let standby_tasks = if std::ptr::eq(standby, &a) {
        &tasks_a
    } else {
        &tasks_b
    };
    standby_tasks.drain(Duration::from_secs(5)).await.expect("drains");
    assert_eq!(running.load(Ordering::SeqCst), 0, "shutdown cancels the duty");
    assert_eq!(holder(&sim.client).await, None, "released on shutdown");
}

/// Runs an elector on its own runtime so that dropping the runtime kills it without a release, like a
/// crashed process.
struct Crashable {
    rx: watch::Receiver<bool>,
    identity: String,
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Crashable {
    fn start(kubeconfig: String, cfg: ElectionConfig) -> Crashable {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            let tasks = Tasks::new();
            let leadership = rt.block_on(async {
                let client = common::client_for(&kubeconfig).await;
                leader::start(client, cfg, &tasks).expect("start")
            });
            ready_tx.send(leadership).expect("send");
            let _ = stop_rx.recv();
            rt.shutdown_background(); // no drain, no release
        });
        let leadership = ready_rx.recv().expect("elector started");
        Crashable {
            rx: leadership.subscribe(),
            identity: leadership.identity().to_owned(),
            stop,
            thread: Some(thread),
        }
    }

    fn crash(&mut self) {
        let _ = self.stop.send(());
        if let Some(t) = self.thread.take() {
            t.join().expect("elector thread");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_leader_is_replaced_after_the_lease_expires() {
    let sim = sim_with_namespace().await;
    let kubeconfig = sim.server.admin_kubeconfig();

    let mut first = Crashable::start(kubeconfig.clone(), config("first"));
    wait_for(&mut first.rx, true, Duration::from_secs(5)).await;
    assert_eq!(
        holder(&sim.client).await.as_deref(),
        Some(first.identity.as_str())
    );

    let tasks = Tasks::new();
    let second =
        leader::start(common::client_for(&kubeconfig).await, config("second"), &tasks).expect("start second");
    // While the first renews, the second never steals the lease.
    tokio::time::sleep(LEASE + RETRY * 2).await;
    assert!(!second.is_leader(), "stole a lease that was being renewed");

    first.crash();
    let crashed_at = Instant::now();
    let mut rx = second.subscribe();
    wait_for(&mut rx, true, LEASE * 2).await;
    let took = crashed_at.elapsed();
    // Not before the lease could have expired, and within a lease duration plus a couple of retries.
    assert!(took >= LEASE - RETRY * 2, "took over too early: {took:?}");
    assert!(took <= LEASE + RETRY * 4, "took over too late: {took:?}");
    assert_eq!(holder(&sim.client).await.as_deref(), Some(second.identity()));

    let lease = Api::<Lease>::namespaced(sim.client.clone(), NS)
        .get(leader::DEFAULT_LEASE_NAME)
        .await
        .expect("lease");
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.lease_transitions, Some(1), "one hand-over");
    assert_eq!(spec.lease_duration_seconds, Some(3));
    tasks.drain(Duration::from_secs(5)).await.expect("drains");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_timing_is_rejected_before_touching_the_api() {
    let sim = sim_with_namespace().await;
    let mut cfg = config("x");
    cfg.renew_deadline = LEASE;
    let err = leader::start(sim.client.clone(), cfg, &Tasks::new()).expect_err("invalid");
    assert!(err.to_string().contains("renew deadline"), "{err}");
    assert_eq!(holder(&sim.client).await, None);
}
