//! Helpers shared by the integration tests: free ports, a minimal HTTP client, running the real `meshd`
//! binary as a child process that is killed when the test ends, and starting the API server simulator
//! with kube clients for it.
#![allow(dead_code, unreachable_pub)]

#[allow(unused_imports)]
pub use kube_sim::testing::*;

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::Duration,
};

/// A binary of this workspace's build, beside the test binary's `deps/` folder (`examples/` for the
/// test fixtures, which the product binaries do not ship).
pub fn workspace_exe(rel: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join(rel)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// `GET path` over HTTP/1.0; returns (status, body), or an error if nothing answers.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
#[allow(clippy::disallowed_types)] // blocks in std::thread::sleep, so it must read the wall clock
pub fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `meshd`, killed on drop.
pub struct Meshd {
    pub child: Child,
    pub http: SocketAddr,
    pub monitoring: SocketAddr,
    pub stderr_path: std::path::PathBuf,
}

impl Meshd {
    /// Starts meshd with loopback ports and `extra` flags, logging to `dir/meshd.log`.
    pub fn start(dir: &Path, extra: &[&str]) -> Meshd {
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let monitoring: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let stderr_path = dir.join("meshd.log");
        let log = std::fs::File::create(&stderr_path).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_meshd"))
            .args([
                "--http-addr",
                &http.to_string(),
                "--monitoring-addr",
                &monitoring.to_string(),
            ])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--secure-grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--state-dir", &dir.join("state").to_string_lossy()])
            .args(extra)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn meshd");
        Meshd {
            child,
            http,
            monitoring,
            stderr_path,
        }
    }

    /// Waits until `/ready` answers 200.
    pub fn wait_ready(&self, timeout: Duration) {
        eventually("meshd /ready 200", timeout, || {
            match http_get(self.http, "/ready") {
                Ok((200, _)) => Some(()),
                _ => None,
            }
        });
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    }

    /// Waits for exit, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        eventually("meshd to exit", timeout, || {
            self.child.try_wait().expect("try_wait")
        })
    }

    /// Everything meshd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Meshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// meshd's cluster discovery on a simulated primary, assembled as `app::run` does (aggregate, config
/// cluster registry, secret controller) with test timings. Everything it spawned stops on drop.
pub struct Discovery {
    /// Its tasks and readiness.
    pub ctx: meshd::start::StartContext,
    /// Snapshots and the clusters table.
    pub view: meshd::app::clusters::ClusterView,
    _networks: tokio::sync::watch::Sender<std::sync::Arc<meshd::config::MeshNetworks>>,
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.ctx.tasks.cancel();
    }
}

/// Starts [`Discovery`] as cluster `c1` on `primary`, remote secrets read from `system_namespace`.
pub fn start_discovery(primary: &Sim, system_namespace: &str, remote_timeout: Duration) -> Discovery {
    use meshd::app::clusters;
    let (networks_tx, networks) = tokio::sync::watch::channel(Default::default());
    let opts = clusters::Options {
        cluster_id: "c1".into(),
        system_namespace: system_namespace.into(),
        domain_suffix: "cluster.local".into(),
        trust_domain: "cluster.local".into(),
        remote_cluster_timeout: remote_timeout,
        stale: Default::default(),
        watch_timeout: 290,
        debounce_after: Duration::from_millis(20),
        debounce_max: Duration::from_millis(200),
        eds_debounce: meshd::aggregate::EdsDebounce::Paced {
            settle: Duration::from_millis(10),
        },
        insecure_kubeconfig_options: Default::default(),
        kubeconfig_dir: None,
        config_poll: Duration::from_secs(1),
    };
    let (discovery, view) = clusters::new(
        opts,
        networks,
        meshd::multicluster::status::Clusters::default(),
        clusters::Metrics::unregistered(),
    );
    let ctx = meshd::start::StartContext {
        tasks: meshd::drain::Tasks::new(),
        ready: meshd::readiness::Ready::new(),
    };
    // No Istio config here: a handle whose controller never starts (the ServiceEntry registry sends
    // one empty view).
    let (_, istio) = meshd::config_controller::new(
        meshd::config_controller::Options {
            config_dir: None,
            poll: Duration::from_secs(1),
        },
        meshd::config_controller::Metrics::unregistered(),
    );
    discovery.start(&ctx, primary.client.clone(), &primary.server.url(), &istio);
    Discovery {
        ctx,
        view,
        _networks: networks_tx,
    }
}
