//! RDS: route configurations.
//!
//! Proxyless gRPC asks for `outbound|<port>||<host>` (the name its listener's HCM points at): one
//! virtual host whose domains are every spelling a client may dial, routing everything to that
//! cluster. Envoy sidecars ask for `<port>`: one virtual host per HTTP service on that port. Does NOT:
//! VirtualService routing (matches, splits, retries, timeouts, rewrites).

use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route, route_action, route_match,
};

use std::sync::Arc;

use super::{Context, Mesh, cds::cluster_name, parse_cluster};
use crate::model::Service;
use crate::xds::{ProxyKind, XdsType, resource::Resource};

/// The gRPC route configuration for `port` of `service`, named `name`.
pub fn service_route(name: &str, service: &Service, port: u16) -> RouteConfiguration {
    RouteConfiguration {
        name: name.to_owned(),
        virtual_hosts: vec![virtual_host(service, port)],
        ..Default::default()
    }
}

/// The sidecar route configuration for `port`: every HTTP service with that port. `None` when there
/// is none.
pub fn port_route(mesh: &dyn Mesh, port: u16) -> Option<RouteConfiguration> {
    // Envoy NACKs a domain repeated across virtual hosts: a short name two namespaces share goes to
    // the first service (host-name order) only.
    let mut used = std::collections::HashSet::new();
    let virtual_hosts: Vec<VirtualHost> = mesh
        .services()
        .filter(|s| s.ports.iter().any(|p| p.port == port && p.protocol.is_http()))
        .map(|s| {
            let mut vh = virtual_host(s, port);
            vh.domains.retain(|d| used.insert(d.clone()));
            vh
        })
        .collect();
    (!virtual_hosts.is_empty()).then(|| RouteConfiguration {
        name: port.to_string(),
        virtual_hosts,
        validate_clusters: Some(envoy_types::pb::google::protobuf::BoolValue { value: false }),
        ..Default::default()
    })
}

fn virtual_host(service: &Service, port: u16) -> VirtualHost {
    VirtualHost {
        name: format!("{}:{port}", service.hostname),
        domains: domains(service, port),
        routes: vec![Route {
            name: "default".to_owned(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
                ..Default::default()
            }),
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster_name(
                    port,
                    &service.hostname,
                ))),
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Every spelling of the service a client may dial, bare and with `:port` (gRPC matches the
/// authority `host:port` verbatim; Envoy strips a default port). Unique, in a fixed order.
pub fn domains(service: &Service, port: u16) -> Vec<String> {
    let mut hosts = vec![service.hostname.to_string()];
    let short = [
        format!("{}.{}.svc", service.name, service.namespace),
        format!("{}.{}", service.name, service.namespace),
        service.name.to_string(),
    ];
    hosts.extend(short.into_iter().filter(|h| *h != *service.hostname));
    let vips = service.cluster_vips.values().flatten().map(|ip| ip.to_string());
    let mut out: Vec<String> = Vec::new();
    for h in hosts.into_iter().chain(vips) {
        for d in [format!("{h}:{port}"), h] {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// What a route configuration depends on besides its name.
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    ctx.kind_name().into()
}

/// The route configuration `name` for the proxy; `None` when it does not exist.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    let route = match ctx.proxy.kind {
        ProxyKind::Grpc => {
            let target = parse_cluster(ctx.mesh, &name)?;
            service_route(&name, target.service, target.port.port)
        }
        ProxyKind::Sidecar => port_route(ctx.mesh, name.parse().ok()?)?,
        ProxyKind::Router => return None,
    };
    Some(Resource::encode(XdsType::Route, name, &route))
}
