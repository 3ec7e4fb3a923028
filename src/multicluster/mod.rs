//! Remote cluster discovery: the secret controller and per-cluster lifecycle.

pub mod kubeconfig;
