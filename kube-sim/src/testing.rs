//! Test helpers for code that talks to a simulated cluster: start an [`ApiServer`] with an admin
//! client, build clients from kubeconfigs, make raw requests and read API errors. Behind the `testing`
//! feature; shared by kube-sim's own tests and meshd's.
// Test support only (also gated where the module is declared): a panic here fails a test, not the server.
#![cfg(feature = "testing")]

use std::time::Duration;

use http_body_util::BodyExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::Status;
use kube::{Client, Config};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{ApiServer, ApiServerConfig};

/// A running simulator with an admin client; stopped on drop.
pub struct Sim {
    /// The simulator.
    pub server: ApiServer,
    /// An admin client.
    pub client: Client,
    shutdown: CancellationToken,
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A simulator with the default config.
pub async fn start() -> Sim {
    start_with(ApiServerConfig::new("test")).await
}

/// A simulator with `cfg`.
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

/// A client from a kubeconfig.
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
