//! Remote cluster discovery on the config cluster: the secret controller turns labelled kubeconfig
//! Secrets into supervised clusters, each running a registry that feeds the aggregate.
//!
//! - [`kubeconfig`]: untrusted kubeconfigs are sanitised before kube-rs sees them.
//! - [`kubeconfig_dir`]: the kubeconfig folder source, read into the Secrets' form.
//! - [`secrets`]: which clusters the Secrets ask for (pure; duplicate IDs have a deterministic winner).
//! - [`controller`]: the Secret watcher; starts, rotates and stops clusters.
//! - [`cluster`]: one cluster's supervisor: client, registry generations, status, readiness timeout.
//! - [`client`]: a remote's Kubernetes client (kube's stack, rate-limited, fixed-size read buffers).
//! - [`status`]: the `/debug/clusterz` table and its route.
//! - [`check`]: ★ `/debug/clusterz/check` (`meshctl remote-clusters --check`): whether each remote works.
//! - [`stale`]: ★ what happens to an unreachable remote's endpoints (keep, deprioritise, drop).
//! - [`metrics`]: sync timeouts and the cluster gauges ([`Metrics`]).
//! - [`remote_secret`]: building remote secrets (sandbox, `meshctl add-cluster`).

pub mod check;
pub mod client;
pub mod cluster;
pub mod controller;
pub mod kubeconfig;
pub mod kubeconfig_dir;
mod metrics;
pub mod remote_secret;
pub mod secrets;
pub mod stale;
pub mod status;

pub use metrics::Metrics;
