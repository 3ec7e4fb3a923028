//! kube-rs against the simulator, one test binary: as a test crate each, every file linked the
//! simulator and kube-rs again (≈ 95 MB per debug binary, a link each).
//! `cargo test -p kube-sim --test apiserver <module>` runs one file's tests.

mod apply;
mod crd;
mod crud;
mod deletion;
mod persist;
mod protobuf;
mod rbac;
mod scale;
mod watch;
mod workloads;
