//! The xDS debug endpoints in istiod's JSON shapes, so `istioctl`-style tooling and `meshctl` read
//! them: `/debug/adsz` (connected clients), `/debug/syncz` (per proxy and type: nonces sent and
//! ACKed, last NACK), `/debug/config_dump?proxyID=` (what a proxy was last sent, as Envoy's admin
//! `ConfigDump`), `/debug/push_status` (the latest push), `/debug/sidecarz?proxyID=` (the proxy's
//! Sidecar scope), `/debug/explain?proxyID=&service=` (`envoy::explain`'s report for a connected
//! proxy, or one described by the query), and meshd's own `/debug/connections`.
//!
//! Owns: pure views over [`ConnectionStatus`] lists and the routes serving them. Does NOT: decide who
//! may call (the admin middleware does; `config_dump` only checks the namespace it was handed).

use std::{collections::BTreeMap, sync::Arc};

use axum::{
    Extension, Json,
    extract::Query,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    AdsServer,
    dump::{self, Section},
    status::{ConnectionStatus, Connections},
};
use crate::admin::{self, DebugCaller};
use crate::envoy::{
    Mesh, Proxy, ProxyKind, Resource, ScopedMesh, XdsType,
    explain::{self, ExplainQuery},
    scope_of,
};

/// Adds the xDS debug endpoints.
pub fn routes(debug: admin::Debug, ads: &AdsServer) -> admin::Debug {
    let (c1, c2, c3, c4) = (
        ads.connections(),
        ads.connections(),
        ads.connections(),
        ads.connections(),
    );
    let log = ads.push_log();
    let ads = ads.clone();
    let explain_ads = ads.clone();
    debug
        .route(
            "/debug/adsz",
            "connected xDS clients: node metadata, locality, watched resources",
            get(move || async move { Json(adsz(&c1.list())) }),
        )
        .route(
            "/debug/syncz",
            "per proxy and type: nonce sent and ACKed, versions, last NACK",
            get(move || async move { Json(syncz(&c2.list())) }),
        )
        .route(
            "/debug/config_dump",
            "?proxyID=: what that proxy was last sent, as Envoy's admin ConfigDump in proto3 JSON",
            get(
                move |Query(q): Query<ProxyQuery>, Extension(caller): Extension<DebugCaller>| async move {
                    config_dump(&c3.list(), &q.proxy_id, &caller)
                },
            ),
        )
        .route(
            "/debug/push_status",
            "the latest push: when, why, proxies pushed, responses and NACKs per type",
            get(move || async move { Json(log.current()) }),
        )
        .route(
            "/debug/sidecarz",
            "?proxyID=: the proxy's Sidecar scope: the Sidecar applied, outbound policy, services it sees and why",
            get(move |Query(q): Query<ProxyQuery>| async move {
                if q.proxy_id.is_empty() {
                    return (StatusCode::BAD_REQUEST, "proxyID is required\n").into_response();
                }
                let snapshot = ads.snapshot();
                let conns = ads.connections().list();
                let proxy = conns
                    .iter()
                    .filter_map(|c| c.proxy.as_ref())
                    .find(|p| *p.id == *q.proxy_id);
                match (proxy, snapshot) {
                    (Some(p), Some(s)) => Json(sidecarz(s.mesh(), p)).into_response(),
                    _ => (
                        StatusCode::NOT_FOUND,
                        format!("proxy {:?} is not connected\n", q.proxy_id),
                    )
                        .into_response(),
                }
            }),
        )
        .route(
            "/debug/explain",
            "?proxyID=&service=host[:port]: every endpoint that proxy gets for the service, and why",
            get(move |Query(q): Query<ExplainQuery>| async move {
                match explain_ads.snapshot() {
                    Some(s) => explain(s.mesh(), &explain_ads.connections(), &q, explain_ads.debouncing()),
                    None => (StatusCode::SERVICE_UNAVAILABLE, "no mesh snapshot yet\n").into_response(),
                }
            }),
        )
        .route(
            "/debug/connections",
            "meshd's raw per-stream status: node, subscriptions, nonces, versions, last NACK",
            get(move || async move { Json(c4.list()) }),
        )
}

/// `?proxyID=`.
#[derive(Debug, Deserialize)]
pub struct ProxyQuery {
    /// The node ID (or a connection ID).
    #[serde(rename = "proxyID", default)]
    pub proxy_id: String,
}

/// istiod's `AdsClients`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdsClients {
    /// How many.
    pub total_clients: usize,
    /// One per stream.
    pub clients: Vec<Value>,
}

/// `/debug/adsz`: istiod's `AdsClient` per stream, metadata under `NodeMetadata` JSON names.
pub fn adsz(conns: &[Arc<ConnectionStatus>]) -> AdsClients {
    let clients: Vec<Value> = conns
        .iter()
        .filter_map(|c| {
            let p = c.proxy.as_ref()?;
            let watches: BTreeMap<&str, Vec<&str>> = c
                .watches
                .iter()
                .map(|(ty, w)| {
                    let mut names: Vec<&str> = w.subscription.names.iter().map(|n| &**n).collect();
                    if w.subscription.wildcard {
                        names.insert(0, "*");
                    }
                    (ty.url(), names)
                })
                .collect();
            Some(json!({
                "connectionId": c.id,
                "connectedAt": c.connected_at,
                "address": c.peer.as_deref().unwrap_or(""),
                "labels": p.labels,
                "metadata": {
                    "CLUSTER_ID": p.cluster_id,
                    "NETWORK": p.network,
                    "REQUESTED_NETWORK_VIEW": p.requested_network_view,
                    "NAMESPACE": p.namespace,
                    "SERVICE_ACCOUNT": p.service_account,
                    "ISTIO_VERSION": p.istio_version,
                    "LABELS": p.labels,
                    "GENERATOR": (p.kind == ProxyKind::Grpc).then_some("grpc"),
                },
                "locality": {"region": p.locality.region, "zone": p.locality.zone, "sub_zone": p.locality.subzone},
                "watches": watches,
                // meshd's additions: the node ID on its own, the protocol and who authenticated.
                "proxyID": p.id,
                "protocol": c.protocol,
                "identities": c.identities,
            }))
        })
        .collect();
    AdsClients {
        total_clients: clients.len(),
        clients,
    }
}

/// Most names of one type listed as waiting in `/debug/syncz` (the count is always exact).
const MAX_WAITING_NAMES: usize = 20;

/// Names a client asked for by name and does not hold: meshd has no such resource (a cluster for a
/// subset no DestinationRule defines, a listener for a port nothing serves). The client waits for
/// them — a gRPC channel stays in CONNECTING — although every nonce is ACKed and the type reads SYNCED.
/// Returns the count and the first [`MAX_WAITING_NAMES`] names, sorted.
pub fn waiting_on(
    names: &std::collections::BTreeSet<Arc<str>>,
    held: &[Arc<Resource>],
) -> (usize, Vec<String>) {
    let missing: Vec<&Arc<str>> = names
        .iter()
        .filter(|n| {
            held.binary_search_by(|r| r.name.as_ref().cmp(n.as_ref()))
                .is_err()
        })
        .collect();
    let listed = missing
        .iter()
        .take(MAX_WAITING_NAMES)
        .map(|n| n.to_string())
        .collect();
    (missing.len(), listed)
}

/// `/debug/syncz`: istiod's `SyncStatus` per stream. The `*_sent` / `*_acked` fields are nonces, as in
/// istiod; `resources` adds meshd's versions, last NACK and the names the client waits on per type URL.
pub fn syncz(conns: &[Arc<ConnectionStatus>]) -> Vec<Value> {
    conns
        .iter()
        .filter_map(|c| {
            let p = c.proxy.as_ref()?;
            let held = c.sent.snapshot();
            let nonce = |ty: XdsType, acked: bool| {
                c.watches
                    .get(&ty)
                    .and_then(|w| {
                        if acked {
                            w.nonce_acked.clone()
                        } else {
                            w.nonce_sent.clone()
                        }
                    })
                    .unwrap_or_default()
            };
            let resources: BTreeMap<&str, Value> = c
                .watches
                .iter()
                .map(|(ty, w)| {
                    let last_error = w
                        .last_nack
                        .as_ref()
                        .map(|n| n.message.clone())
                        .unwrap_or_default();
                    let (waiting, waiting_names) =
                        waiting_on(&w.subscription.names, held.get(ty).map_or(&[][..], Vec::as_slice));
                    let entry = json!({
                        "sent": w.nonce_sent.clone().unwrap_or_default(),
                        "acked": w.nonce_acked.clone().unwrap_or_default(),
                        "versionSent": w.version_sent,
                        "versionAcked": w.version_acked,
                        "resourcesSent": w.resources_sent,
                        "lastError": last_error,
                        "waiting": waiting,
                        "waitingNames": waiting_names,
                    });
                    (ty.url(), entry)
                })
                .collect();
            Some(json!({
                "cluster_id": p.cluster_id.as_deref().unwrap_or(""),
                "network": p.network.as_deref().unwrap_or(""),
                "proxy": p.id,
                "proxy_type": proxy_type(p.kind),
                "proxy_version": "",
                "istio_version": p.istio_version.as_deref().unwrap_or(""),
                "cluster_sent": nonce(XdsType::Cluster, false),
                "cluster_acked": nonce(XdsType::Cluster, true),
                "listener_sent": nonce(XdsType::Listener, false),
                "listener_acked": nonce(XdsType::Listener, true),
                "route_sent": nonce(XdsType::Route, false),
                "route_acked": nonce(XdsType::Route, true),
                "endpoint_sent": nonce(XdsType::Endpoint, false),
                "endpoint_acked": nonce(XdsType::Endpoint, true),
                "extensionconfig_sent": "",
                "extensionconfig_acked": "",
                "resources": resources,
            }))
        })
        .collect()
}

/// `/debug/sidecarz?proxyID=`: what `proxy` sees of `mesh` (istiod's SidecarScope view): the Sidecar in
/// effect (`null`: the default scope), the outbound policy, the egress hosts, every service it sees
/// with the ports it sees and why (`via`: the egress host or VirtualService that imported it; absent
/// without a Sidecar), and the VirtualServices a change of which pushes it.
pub fn sidecarz(mesh: &dyn Mesh, proxy: &Proxy) -> Value {
    let scope = scope_of(mesh, proxy);
    let scoped = ScopedMesh::new(mesh, &scope);
    let services: Vec<Value> = scoped
        .services()
        .map(|s| {
            json!({
                "hostname": s.hostname,
                "namespace": s.namespace,
                "ports": s.ports.iter().map(|p| p.port).collect::<Vec<_>>(),
                "via": scope.imports().and_then(|i| i.get(&*s.hostname)).map(|i| &i.via),
            })
        })
        .collect();
    let name = |o: &crate::istio::ObjectRef| format!("{}/{}", o.namespace, o.name);
    json!({
        "proxyID": proxy.id,
        "version": mesh.version(),
        "namespace": scope.namespace,
        "sidecar": scope.sidecar.as_ref().map(name),
        "outboundTrafficPolicy": {"mode": scope.outbound},
        "egressHosts": scope.egress_hosts(),
        "services": services,
        "virtualServices": scope.virtual_services().iter().map(name).collect::<Vec<_>>(),
    })
}

/// istiod's `NodeType` names.
fn proxy_type(kind: ProxyKind) -> &'static str {
    match kind {
        ProxyKind::Router => "router",
        ProxyKind::Sidecar | ProxyKind::Grpc => "sidecar",
    }
}

/// `/debug/config_dump?proxyID=`: what the proxy holds as Envoy's admin `ConfigDump` in proto3 JSON
/// (see [`super::dump`]). A caller outside the system namespace sees only proxies in its own namespace.
fn config_dump(conns: &[Arc<ConnectionStatus>], proxy_id: &str, caller: &DebugCaller) -> Response {
    if proxy_id.is_empty() {
        return (StatusCode::BAD_REQUEST, "proxyID is required\n").into_response();
    }
    let found = conns
        .iter()
        .find(|c| c.id == proxy_id || c.proxy.as_ref().is_some_and(|p| &*p.id == proxy_id));
    let Some((conn, proxy)) = found.and_then(|c| Some((c, c.proxy.as_ref()?))) else {
        return (
            StatusCode::NOT_FOUND,
            format!(
                "proxy {proxy_id:?} is not connected (`meshctl proxy-status` lists the connected ones); \
                 for what a proxy that is not connected would be sent: meshctl explain PROXY HOST --network \
                 NETWORK\n"
            ),
        )
            .into_response();
    };
    if !caller.may_see(proxy.namespace.as_deref()) {
        return (StatusCode::FORBIDDEN, "that proxy is outside your namespace\n").into_response();
    }
    let held: Vec<(XdsType, Vec<Arc<Resource>>)> = conn
        .sent
        .snapshot()
        .into_iter()
        .map(|(ty, mut resources)| {
            // What the client unsubscribed from since the last full answer is no longer its config.
            if let Some(s) = conn.watches.get(&ty).filter(|s| !s.subscription.wildcard) {
                resources.retain(|r| s.subscription.names.contains(&r.name));
            }
            (ty, resources)
        })
        .collect();
    let sections: Vec<Section<'_>> = held
        .iter()
        .map(|(ty, resources)| Section {
            ty: *ty,
            version: conn.watches.get(ty).map_or("", |s| s.version_sent.as_str()),
            resources,
        })
        .collect();
    match dump::render(&sections) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// The handler: looks the proxy up among live connections and explains against the current snapshot.
fn explain(
    mesh: &dyn Mesh,
    connections: &Connections,
    q: &ExplainQuery,
    debouncing: Option<explain::Debouncing>,
) -> Response {
    if q.proxy_id.is_empty() || q.service.is_empty() {
        return (StatusCode::BAD_REQUEST, "proxyID and service are required\n").into_response();
    }
    let conns = connections.list();
    let connected = conns
        .iter()
        .filter_map(|c| c.proxy.as_ref())
        .find(|p| *p.id == *q.proxy_id);
    let proxy = match (connected, q.hypothetical_proxy()) {
        (Some(p), _) => p.clone(),
        (None, Ok(Some(p))) => {
            let known = explain::known_networks(mesh);
            if let Some(n) = p.network.as_ref().filter(|n| !known.contains(*n)) {
                let known: Vec<&str> = known.iter().map(|n| &**n).collect();
                let msg = match known.as_slice() {
                    [] => {
                        format!("unknown network {n:?}: no gateway or endpoint of the mesh names a network\n")
                    }
                    _ => format!(
                        "unknown network {n:?}; the mesh's networks: {}\n",
                        known.join(", ")
                    ),
                };
                return (StatusCode::BAD_REQUEST, msg).into_response();
            }
            p
        }
        (None, Ok(None)) => {
            let msg = format!(
                "proxy {:?} is not connected (`meshctl proxy-status` lists the connected ones); to explain \
                 a proxy that is not connected, give its network (meshctl explain --network NETWORK \
                 [--cluster CLUSTER])\n",
                q.proxy_id
            );
            return (StatusCode::NOT_FOUND, msg).into_response();
        }
        (None, Err(e)) => return (StatusCode::BAD_REQUEST, e + "\n").into_response(),
    };
    match explain::find_service(mesh, &q.service) {
        Ok((service, port)) => {
            let mut report = explain::explain_subset(mesh, &proxy, service, port, q.subset.as_deref());
            report.connected = connected.is_some();
            report.debouncing = debouncing;
            Json(report).into_response()
        }
        Err(msg) => (StatusCode::NOT_FOUND, msg + "\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        envoy::{
            StaticMesh,
            static_mesh::{proxy, service},
        },
        model::Protocol,
        traffic::tests::config,
    };

    #[test]
    fn sidecarz_shows_the_scope_a_proxy_is_served() {
        let mesh = StaticMesh::new(3)
            .with(
                service("echo", "default", &[("http", 80, Protocol::Http)]),
                vec![],
            )
            .with(
                service("other", "default", &[("http", 80, Protocol::Http)]),
                vec![],
            )
            .with_config([config(
                "Sidecar",
                "app",
                "default",
                "1",
                "egress: [{hosts: [default/echo.default.svc.cluster.local]}]\n\
                 outboundTrafficPolicy: {mode: REGISTRY_ONLY}",
            )]);
        let scoped = sidecarz(&mesh, &proxy(ProxyKind::Sidecar, "app"));
        assert_eq!(
            scoped,
            json!({
                "proxyID": "p", "version": 3, "namespace": "app", "sidecar": "app/default",
                "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"},
                "egressHosts": ["default/echo.default.svc.cluster.local"],
                "services": [{"hostname": "echo.default.svc.cluster.local", "namespace": "default",
                              "ports": [80], "via": {"egress": "default/echo.default.svc.cluster.local"}}],
                "virtualServices": [],
            })
        );
        let default = sidecarz(&mesh, &proxy(ProxyKind::Sidecar, "elsewhere"));
        assert_eq!(default["sidecar"], Value::Null);
        assert_eq!(default["outboundTrafficPolicy"]["mode"], "ALLOW_ANY");
        assert_eq!(default["services"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn waiting_on_lists_names_asked_for_and_not_held() {
        use envoy_types::pb::envoy::config::cluster::v3::Cluster;
        let held = |names: &[&str]| -> Vec<Arc<Resource>> {
            let mut v: Vec<_> = names
                .iter()
                .map(|n| {
                    Arc::new(Resource::encode(
                        XdsType::Cluster,
                        Arc::from(*n),
                        &Cluster::default(),
                    ))
                })
                .collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            v
        };
        let asked = |names: &[&str]| names.iter().map(|n| Arc::<str>::from(*n)).collect();
        let many: Vec<String> = (0..25).map(|i| format!("c{i:02}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        /// Asked for, held, how many wait, which are listed.
        type Case<'a> = (&'a [&'a str], &'a [&'a str], usize, &'a [&'a str]);
        let cases: [Case; 4] = [
            (&[], &["a"], 0, &[]),
            (&["a", "b"], &["a", "b"], 0, &[]),
            (&["a", "v3", "b"], &["a", "b", "extra"], 1, &["v3"]),
            (&many, &[], 25, &many[..MAX_WAITING_NAMES]),
        ];
        for (names, holds, count, listed) in cases {
            let (n, first) = waiting_on(&asked(names), &held(holds));
            assert_eq!(
                (n, first.as_slice()),
                (
                    count,
                    listed
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .as_slice()
                ),
                "{names:?} {holds:?}"
            );
        }
    }
}
