//! Build script: generates meshd's gRPC code from `proto/`.

fn main() {
    if let Err(e) = compile_protos() {
        panic!("compiling proto/: {e}");
    }
}

/// Compiles the protos meshd serves (`proto/`) with a pure-Rust protobuf compiler (protox), so a fresh
/// machine needs no `protoc`. Well-known types map to envoy-types' copies, which meshd already links.
fn compile_protos() -> Result<(), Box<dyn std::error::Error>> {
    const PROTOS: &[&str] = &["proto/istio/v1/auth/ca.proto"];
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        // Replaces prost's default mapping of the well-known types (to prost-types) with ours.
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::envoy_types::pb::google::protobuf")
        .compile_fds(descriptors)?;
    Ok(())
}
