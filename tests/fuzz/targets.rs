//! The fuzz targets' bodies, shared by the cargo-fuzz crate (`tests/fuzz`, libFuzzer on nightly) and the
//! stable seeded loop in `tests/integration/torture_fuzz.rs`. Each takes arbitrary bytes and must not panic, hang
//! or allocate without bound; where a parse succeeds, a cheap invariant is checked too.

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use meshd::{
    config::{mesh::MeshConfig, networks::MeshNetworks},
    istio,
    model::ClusterId,
    multicluster::kubeconfig::{InsecureOption, sanitize},
    registry::{endpoints, objects, service},
    xds::Proxy,
};
use prost::Message;

/// `node` (protobuf bytes, as on the wire) → [`Proxy`]: either a proxy or a `NodeError`.
pub fn node_metadata(data: &[u8]) {
    if let Ok(node) = Node::decode(data)
        && Proxy::from_node(Some(&node)).is_ok()
    {
        assert!(!node.id.is_empty(), "a proxy without a node id was accepted");
    }
}

/// Kubeconfig bytes → the sanitiser, with nothing and with everything allowed.
pub fn kubeconfig(data: &[u8]) {
    let strict = sanitize(data, &BTreeSet::new());
    let lax: BTreeSet<InsecureOption> = [
        InsecureOption::Exec,
        InsecureOption::AuthProvider,
        InsecureOption::FilePaths,
    ]
    .into_iter()
    .collect();
    let relaxed = sanitize(data, &lax);
    // Allowing more can never reject what the strict mode accepted.
    assert!(
        strict.is_err() || relaxed.is_ok(),
        "strict accepted what lax rejected"
    );
}

/// meshNetworks YAML/JSON text → parser.
pub fn mesh_networks(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = MeshNetworks::parse(text);
    }
}

/// Mesh config YAML text → parser.
pub fn mesh_config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = MeshConfig::parse(text);
    }
}

/// JSON → Service / EndpointSlice / Pod → the registry's model conversions.
pub fn k8s_objects(data: &[u8]) {
    let ctx = service::Context {
        cluster: ClusterId::from("fuzz"),
        domain_suffix: Arc::from("cluster.local"),
        trust_domain: Arc::from("cluster.local"),
    };
    if let Ok(svc) = serde_json::from_slice::<objects::Service>(data) {
        let _ = service::convert(&svc, &ctx);
    }
    if let Ok(slice) = serde_json::from_slice::<objects::EndpointSlice>(data) {
        let _ = endpoints::slice(&slice);
    }
    if let Ok(pod) = serde_json::from_slice::<objects::Pod>(data) {
        let _ = endpoints::pod(&pod, &ctx);
    }
}

/// JSON → every Istio kind's parser (a spec valid for one kind is hostile input for the others).
/// Rejections must name the object; accepted objects must serialize (for `/debug/configz`).
pub fn istio_config(data: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for kind in istio::Kind::ALL {
        let meta = istio::ObjectMeta {
            namespace: "fuzz".into(),
            name: "obj".into(),
            labels: Default::default(),
            annotations: Default::default(),
            revision: "1".into(),
            creation_timestamp: None,
            source: istio::Source::Cluster(ClusterId::from("fuzz")),
        };
        match istio::parse(kind, meta, &spec) {
            Ok((cfg, _)) => {
                serde_json::to_vec(&cfg).expect("an accepted object serializes");
            }
            Err(e) => assert!(
                e.to_string().starts_with(&format!("{kind} fuzz/obj: ")),
                "error does not name the object: {e}"
            ),
        }
    }
}
