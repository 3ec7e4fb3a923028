//! Build steps, one function each so that steps added by other changes merge without conflict.

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

/// A build script's failure is its message: cargo prints it and stops.
type BuildResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BuildResult<()> {
    envoy_descriptor_set()?;
    compile_protos().map_err(|e| format!("compiling proto/: {e}"))?;
    Ok(())
}

/// The Envoy protos `/debug/config_dump` needs, as roots: the admin `ConfigDump` messages, the four
/// resource types meshd serves, and every message meshd packs into an `Any` inside them (an `Any`
/// whose type is missing from the set cannot be rendered; `xds::dump`'s tests render every kind of
/// proxy to catch one). Their imports come along.
const ENVOY_ROOTS: &[&str] = &[
    "envoy/admin/v3/config_dump.proto",
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
    "envoy/config/listener/v3/listener.proto",
    "envoy/config/route/v3/route.proto",
    "envoy/extensions/transport_sockets/tls/v3/tls.proto",
    "envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer.proto",
    "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
    "envoy/extensions/filters/listener/http_inspector/v3/http_inspector.proto",
    "envoy/extensions/filters/listener/original_dst/v3/original_dst.proto",
    "envoy/extensions/request_id/uuid/v3/uuid.proto",
    "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
    "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
    "envoy/extensions/filters/http/router/v3/router.proto",
    "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
    "envoy/extensions/filters/http/fault/v3/fault.proto",
    "envoy/extensions/filters/http/cors/v3/cors.proto",
    "envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto",
    "envoy/extensions/retry/priority/previous_priorities/v3/previous_priorities_config.proto",
];

/// Compiles [`ENVOY_ROOTS`] from the `.proto` sources the `envoy-types` crate ships (the very sources its
/// Rust types were generated from, so the descriptors cannot drift from what meshd encodes) into
/// `$OUT_DIR/envoy.bin`, a `FileDescriptorSet` without source info. protox is a pure-Rust compiler:
/// no `protoc` on the build machine.
fn envoy_descriptor_set() -> BuildResult<()> {
    let proto = envoy_types_dir()?.join("proto");
    let includes = [
        "data-plane-api",
        "xds",
        "protoc-gen-validate",
        "googleapis",
        "cel-spec",
        "opentelemetry-proto",
        "client_model",
    ]
    .map(|d| proto.join(d));
    let mut compiler =
        protox::Compiler::new(&includes).map_err(|e| format!("envoy-types proto include paths: {e}"))?;
    compiler.include_imports(true).include_source_info(false);
    compiler
        .open_files(ENVOY_ROOTS)
        .map_err(|e| format!("compiling the Envoy protos in {}: {e}", proto.display()))?;
    let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR unset")?).join("envoy.bin");
    std::fs::write(&out, compiler.encode_file_descriptor_set())
        .map_err(|e| format!("writing {}: {e}", out.display()))?;
    println!("cargo::rerun-if-changed={}", proto.display());
    println!("cargo::rerun-if-changed=Cargo.lock");
    Ok(())
}

/// Where the `envoy-types` package this build resolved lives (`cargo metadata`: registry, vendored or
/// git sources alike).
fn envoy_types_dir() -> BuildResult<PathBuf> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest =
        Path::new(&env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?).join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--locked", "--manifest-path"])
        .arg(&manifest);
    if let Some(target) = env::var_os("TARGET") {
        cmd.arg("--filter-platform").arg(target);
    }
    let out = cmd.output().map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let manifest_path = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("envoy-types is not in cargo metadata")?;
    Ok(Path::new(manifest_path)
        .parent()
        .ok_or("envoy-types' manifest has no folder")?
        .to_owned())
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
