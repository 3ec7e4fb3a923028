//! Multi-network: gateway DNS, split-horizon EDS and `/debug/networkz`.
//!
//! Owns: the task keeping gateway DNS names resolved ([`dns`]), and the [`SplitHorizon`] endpoint view
//! the xDS generators call. Does NOT: decide an endpoint's network (the registries do,
//! `registry::network`), find the gateways or hold state (the aggregate is the single writer of the
//! gateway set, found by `aggregate::gateways`, and publishes it in each snapshot), or build the
//! east-west gateway's listener (`xds::generator`).

pub mod dns;
pub mod explain;
pub mod split_horizon;

use axum::{Json, extract::Query, routing::get};
use serde_json::{Value, json};

pub use split_horizon::SplitHorizon;

use crate::{admin, aggregate::Snapshots, model::NetworkGateway, xds::status::Connections};

/// Adds `/debug/networkz` (every resolved gateway, in istiod's `NetworkManager.AllGateways()` shape)
/// and `/debug/explain` (see [`explain`]).
pub fn routes(debug: admin::Debug, snapshots: Snapshots, connections: Connections) -> admin::Debug {
    let for_explain = snapshots.clone();
    debug
        .route(
            "/debug/networkz",
            "network gateways: network, cluster, address, port",
            get(move || async move { Json(networkz(&snapshots.load().gateways)) }),
        )
        .route(
            "/debug/explain",
            "?proxyID=&service=host[:port]: every endpoint that proxy gets for the service, and why",
            get(move |Query(q): Query<explain::ExplainQuery>| async move {
                explain::handle(&*for_explain.load(), &connections, &q)
            }),
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
