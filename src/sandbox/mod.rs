//! The embedded sandbox: simulated Kubernetes API servers for the `clusters/` topology.

pub mod apiserver;
pub mod serve;
