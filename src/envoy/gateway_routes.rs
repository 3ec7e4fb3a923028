//! An ingress gateway's route configurations, as istiod builds them
//! (`core/gateway.go:buildGatewayHTTPRouteConfig`): for each server of the route configuration, the
//! VirtualServices bound to its Gateway that the proxy sees, each contributing its routes (translated
//! by [`route`] for the server's port and gateway) to one virtual host per host in both the server's
//! and the VirtualService's hosts (istiod's `Intersection`); a host two VirtualServices share gets
//! both's routes, catch-alls last. `httpsRedirect` makes every host of the server require TLS (a
//! virtual host with no routes when no VirtualService serves it). Virtual hosts whose routes all
//! come from the same VirtualServices collapse into one (the alphabetically first names it), sorted
//! by name; with none, a `blackhole:<port>` virtual host answers 404. A name no server has (a
//! Gateway just removed) is an empty configuration.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::{
    envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost, virtual_host::TlsRequirementType},
    google::protobuf::{BoolValue, UInt32Value},
};

use super::{
    Mesh, Proxy, gateway_listeners,
    gateway_servers::Merged,
    rds,
    route::{self, RouteInput},
};

/// Whether `name` is a gateway route configuration name (`http.<port>…`, `https.<port>.…`).
pub fn is_gateway_route(name: &str) -> bool {
    name.starts_with("http.") || name.starts_with("https.")
}

/// The route configuration `name` for the gateway's merged servers.
pub fn route_config(mesh: &dyn Mesh, proxy: &Proxy, merged: &Merged, name: &str) -> RouteConfiguration {
    let mut out = RouteConfiguration {
        name: name.to_owned(),
        validate_clusters: Some(BoolValue { value: false }),
        ..Default::default()
    };
    let Some(servers) = merged.routes.get(name) else {
        return out;
    };
    let ns = proxy.namespace.as_deref().unwrap_or("");
    let index = &mesh.traffic().virtual_services;
    let only_port = |h: &str| gateway_listeners::only_port(mesh, h);
    let hash =
        |host: &str, port: u16, subset: Option<&str>| rds::consistent_hash(mesh, proxy, host, port, subset);
    // Host → (virtual host, the VirtualServices its routes came from).
    let mut vhosts: BTreeMap<String, (VirtualHost, Vec<usize>)> = BTreeMap::new();
    // (gateway, VirtualService) → its routes, built once.
    let mut built: Vec<((String, String), Vec<Route>)> = Vec::new();
    for s in servers {
        let port = u16::try_from(s.server.port.number).unwrap_or(s.port);
        let redirect = s.server.tls.as_ref().is_some_and(|t| t.https_redirect);
        for vs in index.for_gateway(ns, &s.gateway) {
            let vs_hosts: Vec<String> = vs.hosts.iter().map(ToString::to_string).collect();
            let server_hosts = hosts_for_namespace(&s.hosts, &vs.object.namespace);
            let shared = intersection(&server_hosts, &vs_hosts);
            if shared.is_empty() {
                continue;
            }
            let key = (s.gateway.clone(), vs.config_path());
            let at = match built.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    let inp = RouteInput {
                        kind: proxy.kind,
                        namespace: ns,
                        labels: &proxy.labels,
                        port,
                        gateway: Some(&s.gateway),
                        only_port: Some(&only_port),
                        tls: s.server.port.protocol.eq_ignore_ascii_case("HTTPS"),
                    };
                    built.push((key, route::virtual_service_routes(&inp, vs, &hash)));
                    built.len() - 1
                }
            };
            if built[at].1.is_empty() {
                continue;
            }
            for h in shared {
                let h = h.to_ascii_lowercase();
                let (vh, from) = vhosts
                    .entry(h.clone())
                    .or_insert_with(|| (virtual_host(&h, port), Vec::new()));
                vh.routes.extend(built[at].1.iter().cloned());
                from.push(at);
                if redirect {
                    vh.require_tls = TlsRequirementType::All as i32;
                }
            }
        }
        if redirect {
            // istiod keeps a `ns/` prefix here, making a domain no request carries: meshd strips it.
            for h in &s.hosts {
                let h = h.rsplit('/').next().unwrap_or(h).to_ascii_lowercase();
                let (vh, _) = vhosts
                    .entry(h.clone())
                    .or_insert_with(|| (virtual_host(&h, port), Vec::new()));
                vh.require_tls = TlsRequirementType::All as i32;
            }
        }
    }
    out.virtual_hosts = if vhosts.is_empty() {
        let port = servers.first().map_or(0, |s| s.server.port.number);
        vec![VirtualHost {
            name: format!("blackhole:{port}"),
            domains: vec!["*".to_owned()],
            ..Default::default()
        }]
    } else {
        collapse(vhosts)
    };
    out.ignore_port_in_host_matching = true;
    out.max_direct_response_body_size_bytes = Some(UInt32Value {
        value: super::route_actions::MAX_DIRECT_RESPONSE_BODY,
    });
    out
}

fn virtual_host(host: &str, port: u16) -> VirtualHost {
    VirtualHost {
        name: format!("{host}:{port}"),
        domains: vec![host.to_owned()],
        // istiod's gateway default: upstreams see `x-envoy-attempt-count`.
        include_request_attempt_count: true,
        ..Default::default()
    }
}

/// istiod's `collapseDuplicateRoutes` (hosts by name, the first keeps the others' domains when their
/// routes came from the same VirtualServices and TLS requirement), then `SortVHostRoutes` (catch-alls
/// last) and `SortVirtualHosts` (by name).
fn collapse(vhosts: BTreeMap<String, (VirtualHost, Vec<usize>)>) -> Vec<VirtualHost> {
    let mut out: Vec<(VirtualHost, Vec<usize>)> = Vec::new();
    for (_, (vh, from)) in vhosts {
        let same = out.iter_mut().find(|(o, f)| {
            !from.is_empty() && *f == from && o.require_tls == vh.require_tls && o.routes == vh.routes
        });
        match same {
            Some((o, _)) => o.domains.extend(vh.domains),
            None => out.push((vh, from)),
        }
    }
    let mut out: Vec<VirtualHost> = out
        .into_iter()
        .map(|(mut vh, _)| {
            let (rest, catch_all): (Vec<Route>, Vec<Route>) =
                vh.routes.into_iter().partition(|r| !route::is_catch_all(r));
            vh.routes = rest.into_iter().chain(catch_all).collect();
            vh
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// istiod's `host.NamesForNamespace`: a server's hosts a VirtualService of `namespace` may serve,
/// namespaces stripped.
fn hosts_for_namespace(hosts: &[String], namespace: &str) -> Vec<String> {
    hosts
        .iter()
        .filter_map(|h| match h.split_once('/') {
            Some((ns, host)) if ns == namespace || ns == "*" => Some(host.to_owned()),
            Some(_) => None,
            None => Some(h.clone()),
        })
        .collect()
}

/// istiod's `Names.Intersection`: for each pair, the narrower of the two when one covers the other.
fn intersection(a: &[String], b: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    for x in a {
        for y in b {
            let pick = if subset_of(x, y) {
                Some(x)
            } else if subset_of(y, x) {
                Some(y)
            } else {
                None
            };
            if let Some(p) = pick
                && seen.insert(p.clone())
            {
                out.push(p.clone());
            }
        }
    }
    out
}

/// istiod's `host.Name.SubsetOf`: every name `a` covers, `b` covers.
fn subset_of(a: &str, b: &str) -> bool {
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (Some(sa), Some(sb)) => sa.ends_with(sb),
        (None, Some(sb)) => a.ends_with(sb),
        (Some(_), None) => false,
        (None, None) => a == b,
    }
}

#[cfg(test)]
#[path = "gateway_routes_tests.rs"]
mod tests;
