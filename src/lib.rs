//! meshd: a multi-cluster service-mesh control plane.
//!
//! Data flow: per-cluster watchers → per-cluster registry → aggregate → immutable snapshot → xds stream
//! tasks, which have envoy translate it per proxy (through xds's shared cache) → ADS streams, with the
//! admin server beside. Imports point one way: app → xds → envoy → traffic → istio/model; aggregate →
//! registry. See `docs/ARCHITECTURE.md`.

/// The admin HTTP server (8080, 15014): `/ready`, `/metrics`, `/version`, the `/debug` index and access rule.
pub mod admin;
/// The single-writer merge of all registries into `MeshSnapshot`s; gateways and their DNS; `/debug/networkz`.
pub mod aggregate;
/// istioctl analyze's analyzers, run live on the config in force and every cluster's registry (pure).
pub mod analysis;
/// The composition root: typed configs from the command line, listeners, start functions, run and drain.
pub mod app;
/// Caller identity on 15012 and for remote debug callers: SPIFFE certificates and service-account tokens.
pub mod auth;
/// The mesh CA: key material, certificate signing (`CreateCertificate`), the `istio-ca-root-cert` ConfigMaps.
pub mod ca;
/// The `meshd` command line: clap flags with environment fallbacks.
pub mod cli;
/// Mesh config and meshNetworks files: pure parsing, polling and hot reload.
pub mod config;
/// Istio objects from the config cluster and `--config-dir` into one store that publishes `ConfigSnapshot`s.
pub mod config_controller;
/// Gateway certificates: the Secrets Gateways name, watched one by one and served over SDS to proxies allowed to read them.
pub mod credentials;
/// The one shutdown path: named, tracked tasks and the cancellation they obey.
pub mod drain;
/// Translation, what a proxy is sent: a mesh snapshot and one proxy in, encoded CDS/EDS/LDS/RDS out (pure).
pub mod envoy;
#[cfg(test)]
mod golden;
/// Hash-consing: one shared copy of values many owners repeat.
pub mod intern;
/// The Istio configuration model and istiod's validation rules, pure.
pub mod istio;
/// Kubernetes client and watch errors in words an operator can act on.
pub mod kube_errors;
/// Every Kubernetes watch, built in one place with `--watch-timeout` and backoff.
pub mod kube_watch;
/// Kubernetes Lease leader election for the duties that write shared state.
pub mod leader;
/// Metric types shared by components (`IstioCounter`); each module registers its own metrics.
pub mod metrics;
/// The domain model, free of Kubernetes and protobuf: clusters, services, endpoints, gateways.
pub mod model;
/// Remote cluster discovery: secret controller, per-cluster supervisors, `/debug/clusterz`, remote secrets.
pub mod multicluster;
/// Readiness guards: `/ready` is 200 once every component has released its guard.
pub mod readiness;
/// One registry per cluster: Kubernetes watchers folded into services and endpoints for the aggregate.
pub mod registry;
/// The embedded sandbox: simulated clusters (default-on `sandbox` feature), its topology and state folder.
pub mod sandbox;
/// The ServiceEntry registry: ServiceEntries and WorkloadEntries as the config cluster's `External` services.
pub mod serviceentry;
/// SIGTERM and ctrl-c into the one shutdown path.
pub mod signal;
/// What every start function gets (`StartContext`): the task spawner and readiness.
pub mod start;
/// Logging: the tracing subscriber, text or JSON, and how errors are printed.
pub mod telemetry;
/// TLS for 15012: the rustls config kept fresh from the CA, and the bounded accept loop.
pub mod tls;
/// Istio traffic config as proxies receive it (istiod's `PushContext`): one pure `Index` per snapshot.
pub mod traffic;
/// The xDS protocol: ADS streams, SotW/delta, the 15012 node-claim check, the shared cache, xDS debug views.
pub mod xds;

#[cfg(test)]
mod import_cycles;
