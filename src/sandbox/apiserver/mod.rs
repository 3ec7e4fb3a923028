//! A Kubernetes API server simulator.
