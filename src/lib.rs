//! meshd: a multi-cluster service-mesh control plane.
//!
//! Data flow: per-cluster watchers → per-cluster registry → aggregate → immutable snapshot → xDS
//! generators → ADS streams, with the admin server beside. See `docs/ARCHITECTURE.md`.

pub mod admin;
pub mod aggregate;
pub mod app;
pub mod auth;
pub mod ca;
pub mod cli;
pub mod config;
pub mod config_controller;
pub mod drain;
pub mod envoy;
#[cfg(test)]
mod golden;
pub mod intern;
pub mod istio;
pub mod kube_errors;
pub mod leader;
pub mod metrics;
pub mod model;
pub mod multicluster;
pub mod readiness;
pub mod registry;
pub mod sandbox;
pub mod serviceentry;
pub mod signal;
pub mod start;
pub mod telemetry;
pub mod tls;
pub mod traffic;
pub mod xds;

#[cfg(test)]
mod import_cycles;
