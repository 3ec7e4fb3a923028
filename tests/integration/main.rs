//! meshd's Rust integration tests, one binary: as a test crate each, every file linked all of meshd
//! again (≈ 170 MB per debug binary, a link each).
//! `cargo test --test integration <module>` runs one file's tests.

mod common;

mod analysis_istio;
mod discovery;
mod eds_locality;
mod istio_conformance;
mod leader;
mod lifecycle;
mod root_publisher;
mod secure;
mod sidecar_scope_size;
mod torture_debug;
mod torture_fuzz;
mod xds_protocol;
mod xds_sidecar_scope;
mod xds_subsets;
