//! Helpers shared by the integration tests: free ports, a minimal HTTP client, running the real `meshd`
//! binary as a child process that is killed when the test ends, and starting the API server simulator
//! with kube clients for it.
#![allow(dead_code, unreachable_pub)]

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use http_body_util::BodyExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config};
use meshd::sandbox::apiserver::{ApiServer, ApiServerConfig};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

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
pub fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
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

pub struct Sim {
    pub server: ApiServer,
    pub client: Client,
    shutdown: CancellationToken,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub async fn start() -> Sim {
    start_with(ApiServerConfig::new("test")).await
}

pub async fn start_with(cfg: ApiServerConfig) -> Sim {
    let shutdown = CancellationToken::new();
    let server = ApiServer::start(cfg, shutdown.clone())
        .await
        .expect("start api server");
    let client = client_for(&server.admin_kubeconfig()).await;
    Sim {
        server,
        client,
        shutdown,
    }
}

pub async fn client_for(kubeconfig_yaml: &str) -> Client {
    client_with(kubeconfig_yaml, |_| {}).await
}

/// A kube client from a kubeconfig, with its config adjusted (timeouts, retries) by `tweak`.
pub async fn client_with(kubeconfig_yaml: &str, tweak: impl FnOnce(&mut Config)) -> Client {
    let kc = Kubeconfig::from_yaml(kubeconfig_yaml).expect("parse kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    tweak(&mut config);
    Client::try_from(config).expect("client")
}

/// A client that gives up quickly and never retries, to observe faults directly.
pub async fn impatient_client(sim: &Sim, timeout: Duration) -> Client {
    client_with(&sim.server.admin_kubeconfig(), |c| {
        c.read_timeout = Some(timeout);
        c.connect_timeout = Some(timeout);
        c.default_retry = false;
    })
    .await
}

/// The admin kubeconfig with its user swapped for `user` (a YAML mapping such as `{token: x}`).
pub fn kubeconfig_with_user(sim: &Sim, user: serde_json::Value) -> String {
    let mut kc: Value = serde_yaml::from_str(&sim.server.admin_kubeconfig()).expect("yaml");
    kc["users"][0]["user"] = user;
    serde_yaml::to_string(&kc).expect("yaml")
}

/// The Status of a failed kube call.
pub fn status_of<T: std::fmt::Debug>(res: Result<T, kube::Error>) -> Status {
    match res {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error Status, got {other:?}"),
    }
}

/// A raw request through the client; returns the HTTP code and the decoded JSON body (Null if not JSON).
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body))
        .expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Polls `f` (asynchronously) until it is true or `secs` pass; returns the last result.
pub async fn eventually_async(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f()
}
