//! `/debug/registryz`, `/debug/endpointz` (alias `/debug/endpointShardz`) and `/debug/networkz`: the
//! merged view of the latest snapshot and its gateways, shaped like istiod's so existing tooling reads
//! them. Does NOT: show clusters and
//! their status (`/debug/clusterz`, `multicluster::status`).

use std::collections::BTreeMap;

use axum::{Json, routing::get};
use serde_json::{Value, json};

use super::{MeshSnapshot, Snapshots};
use crate::{admin, model::NetworkGateway};

/// Adds the merged view's debug endpoints.
pub fn routes(debug: admin::Debug, snapshots: &Snapshots) -> admin::Debug {
    let (s1, s2, s3, s4) = (
        snapshots.clone(),
        snapshots.clone(),
        snapshots.clone(),
        snapshots.clone(),
    );
    debug
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
        .route(
            "/debug/networkz",
            "network gateways: network, cluster, address, port",
            get(move || async move { Json(networkz(&s4.load().gateways)) }),
        )
}

/// istiod's `[{"Network","Cluster","Addr","Port","HBONEPort","ServiceAccount"}]`, plus the DNS name an
/// address came from.
fn networkz(gateways: &[NetworkGateway]) -> Value {
    gateways
        .iter()
        .map(|g| {
            let mut v = json!({
                "Network": g.network,
                "Cluster": g.cluster.as_deref().unwrap_or(""),
                "Addr": g.address.to_string(),
                "Port": g.port,
                "HBONEPort": 0,
                "ServiceAccount": "",
            });
            if let Some(h) = &g.hostname {
                v["Hostname"] = json!(h);
            }
            v
        })
        .collect()
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
                "origin": s.origin,
                "meshExternal": s.mesh_external,
                "exportTo": s.export_to,
                "attributes": {
                    "ServiceRegistry": s.provider(),
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

/// istiod's `{host: {ns: {"Shards": {"<provider>/<cluster>": [...]}, "ServiceAccounts": {...}}}}`;
/// each endpoint names its `workload` (pod, WorkloadEntry or ServiceEntry).
fn endpointz(snap: &MeshSnapshot) -> Value {
    let mut out: BTreeMap<&str, BTreeMap<&str, Value>> = BTreeMap::new();
    for (key, shards) in &snap.endpoints {
        let by_cluster: BTreeMap<String, Value> = shards
            .shards
            .iter()
            .map(|(shard, eps)| (shard.to_string(), json!(eps)))
            .collect();
        out.entry(&key.hostname).or_default().insert(
            &key.namespace,
            json!({"Shards": by_cluster, "ServiceAccounts": shards.service_accounts}),
        );
    }
    json!(out)
}
