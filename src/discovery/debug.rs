//! `/debug/clusterz`, `/debug/registryz` and `/debug/endpointz` (alias `/debug/endpointShardz`), shaped
//! like istiod's so existing tooling (`istioctl remote-clusters`) reads them. They show no credentials:
//! nothing here holds any.

use std::collections::BTreeMap;

use axum::{Json, routing::get};
use serde_json::{Value, json};

use super::DiscoveryHandle;
use crate::{admin, aggregate::MeshSnapshot};

/// Adds the discovery debug endpoints.
pub fn routes(debug: admin::Debug, handle: &DiscoveryHandle) -> admin::Debug {
    let clusters = handle.clusters.clone();
    let (s1, s2, s3) = (
        handle.snapshots.clone(),
        handle.snapshots.clone(),
        handle.snapshots.clone(),
    );
    debug
        .route(
            "/debug/clusterz",
            "clusters, their secrets and sync status",
            get(move || async move { Json(clusters.rows()) }),
        )
        .route(
            "/debug/registryz",
            "merged services",
            get(move || async move { Json(registryz(&s1.load())) }),
        )
        .route(
            "/debug/endpointz",
            "endpoint shards per service and cluster",
            get(move || async move { Json(endpointz(&s2.load())) }),
        )
        .route(
            "/debug/endpointShardz",
            "alias of /debug/endpointz",
            get(move || async move { Json(endpointz(&s3.load())) }),
        )
}

/// istiod's `[]model.Service` shape.
fn registryz(snap: &MeshSnapshot) -> Value {
    snap.services
        .values()
        .map(|s| {
            let default_address = s
                .cluster_vips
                .values()
                .flatten()
                .next()
                .map_or_else(|| "0.0.0.0".to_owned(), ToString::to_string);
            json!({
                "hostname": s.hostname,
                "clusterVIPs": {"Addresses": s.cluster_vips},
                "defaultAddress": default_address,
                "ports": s.ports,
                "serviceAccounts": s.service_accounts,
                "creationTime": s.creation_time,
                "resolution": s.resolution,
                "attributes": {
                    "ServiceRegistry": "Kubernetes",
                    "Name": s.name,
                    "Namespace": s.namespace,
                    "Labels": s.labels,
                    "ClusterExternalAddresses": {"Addresses": s.external_addresses},
                    "ClusterExternalPorts": s.node_ports,
                },
            })
        })
        .collect()
}

/// istiod's `{host: {ns: {"Shards": {"Kubernetes/<cluster>": [...]}, "ServiceAccounts": {...}}}}`.
fn endpointz(snap: &MeshSnapshot) -> Value {
    let mut out: BTreeMap<&str, BTreeMap<&str, Value>> = BTreeMap::new();
    for (key, shards) in &snap.endpoints {
        let by_cluster: BTreeMap<String, Value> = shards
            .shards
            .iter()
            .map(|(c, eps)| (format!("Kubernetes/{c}"), json!(eps)))
            .collect();
        out.entry(&key.hostname).or_default().insert(
            &key.namespace,
            json!({"Shards": by_cluster, "ServiceAccounts": shards.service_accounts}),
        );
    }
    json!(out)
}
