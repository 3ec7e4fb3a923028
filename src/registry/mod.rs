//! One registry per cluster: watches its Kubernetes API and turns it into mesh services and endpoints.

pub mod endpoints;
pub mod network;
pub mod service;
