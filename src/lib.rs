//! meshd: a multi-cluster service-mesh control plane.

pub mod sandbox;
