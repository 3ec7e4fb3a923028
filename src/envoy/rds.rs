//! RDS: route configurations.
//!
//! Proxyless gRPC asks for `outbound|<port>||<host>` (the name its listener's HCM points at); Envoy
//! sidecars ask for `<port>`: one virtual host per HTTP service on that port. A service's virtual
//! host routes everything to its cluster (`default`), unless a mesh-bound VirtualService the proxy
//! sees names the host: then that VirtualService's routes, translated by [`route`](super::route),
//! replace it. The gRPC configuration carries only the dialled host's virtual host (istiod sends
//! every virtual host of the port in the proxy's scope): gRPC matches the authority it dialled, so
//! the others are never used, and leaving them out keeps one host's route change from re-sending
//! every same-port route configuration.

use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};

use super::{
    Context, Mesh, parse_cluster,
    route::{self, RouteInput},
    route_actions,
};
use crate::{
    config::mesh::OutboundMode,
    envoy::{Proxy, ProxyKind, XdsType, resource::Resource},
    istio::destination_rule::ConsistentHashLb,
    model::Service,
    traffic::{self, virtual_service::ResolvedVs},
};

/// What RDS reads from the proxy besides the name: its kind and namespace (which VirtualServices and
/// DestinationRules it sees), and only when some rule there depends on them, its labels. Without any
/// VirtualService or hashing DestinationRule, every proxy of a kind shares one encode.
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    if ctx.proxy.kind == ProxyKind::Router {
        return super::gateway_servers::view_key(ctx.mesh, ctx.proxy).into();
    }
    let kind = ctx.kind_name();
    let vs = &ctx.mesh.traffic().virtual_services;
    if !vs.shapes_routes() {
        return kind.into();
    }
    let ns = ctx.proxy.namespace.as_deref().unwrap_or("");
    format!("{kind}|{ns}|{}", vs.label_key(ns, &ctx.proxy.labels)).into()
}

/// The route configuration `name` for the proxy: gRPC's per-service name or a sidecar's port.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    let route = match ctx.proxy.kind {
        ProxyKind::Grpc => {
            let target = parse_cluster(ctx.mesh, &name)?;
            grpc_route(ctx.mesh, ctx.proxy, &name, target.service, target.port.port)
        }
        ProxyKind::Sidecar => port_route(ctx.mesh, ctx.proxy, name.parse().ok()?, ctx.scope.outbound)?,
        ProxyKind::Router if super::gateway_routes::is_gateway_route(&name) => {
            let merged = super::gateway_servers::merge(ctx.mesh, ctx.proxy);
            super::gateway_routes::route_config(ctx.mesh, ctx.proxy, &merged, &name)
        }
        ProxyKind::Router => return None,
    };
    Some(Resource::encode(XdsType::Route, name, &route))
}

/// The gRPC route configuration `name` (`outbound|<port>||<host>`) for `port` of `service`.
pub fn grpc_route(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    name: &str,
    service: &Service,
    port: u16,
) -> RouteConfiguration {
    RouteConfiguration {
        name: name.to_owned(),
        virtual_hosts: vec![virtual_host(mesh, proxy, service, port)],
        ..Default::default()
    }
}

/// The sidecar route configuration for `port`: every HTTP service with that port, then istiod's
/// catch-all virtual host for the `outbound` mode (`allow_any` / `block_all`). `None` when no
/// service has the port.
pub fn port_route(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    port: u16,
    outbound: OutboundMode,
) -> Option<RouteConfiguration> {
    // Envoy NACKs a domain repeated across virtual hosts: a short name two namespaces share goes to
    // the first service (host-name order) only.
    let mut used = std::collections::HashSet::new();
    let mut virtual_hosts: Vec<VirtualHost> = mesh
        .services()
        .filter(|s| s.ports.iter().any(|p| p.port == port && p.protocol.is_http()))
        .map(|s| {
            let mut vh = virtual_host(mesh, proxy, s, port);
            vh.domains.retain(|d| used.insert(d.clone()));
            vh
        })
        .collect();
    if virtual_hosts.is_empty() {
        return None;
    }
    virtual_hosts.push(route_actions::catch_all_virtual_host(outbound));
    Some(RouteConfiguration {
        name: port.to_string(),
        virtual_hosts,
        validate_clusters: Some(envoy_types::pb::google::protobuf::BoolValue { value: false }),
        max_direct_response_body_size_bytes: Some(envoy_types::pb::google::protobuf::UInt32Value {
            value: route_actions::MAX_DIRECT_RESPONSE_BODY,
        }),
        ..Default::default()
    })
}

fn virtual_host(mesh: &dyn Mesh, proxy: &Proxy, service: &Service, port: u16) -> VirtualHost {
    VirtualHost {
        name: format!("{}:{port}", service.hostname),
        domains: domains(service, port),
        routes: service_routes(mesh, proxy, service, port).routes,
        ..Default::default()
    }
}

/// The routes `proxy` gets for `port` of `service`, and where they come from.
#[derive(Debug, Clone)]
pub struct ServiceRoutes<'m> {
    /// The routes, exactly as RDS sends them.
    pub routes: Vec<Route>,
    /// The VirtualService they were translated from; `None`: the default route.
    pub virtual_service: Option<&'m Arc<ResolvedVs>>,
    /// Other VirtualServices naming the host that the proxy also sees: they lose (istiod's
    /// duplicate-host rule, oldest first).
    pub shadowed: Vec<&'m Arc<ResolvedVs>>,
}

/// The routes of one service port for one proxy: those of the first VirtualService for the host
/// (see [`traffic::virtual_service::VsIndex::for_host`]) with a route left after the proxy's source
/// matches, else the default route. `meshctl explain` calls this too, so it shows what RDS sends.
pub fn service_routes<'m>(
    mesh: &'m dyn Mesh,
    proxy: &Proxy,
    service: &Service,
    port: u16,
) -> ServiceRoutes<'m> {
    let index = mesh.traffic();
    let ns = proxy.namespace.as_deref().unwrap_or("");
    let inp = RouteInput {
        kind: proxy.kind,
        namespace: ns,
        labels: &proxy.labels,
        port,
        gateway: None,
        only_port: None,
        tls: false,
    };
    let hash = |host: &str, port: u16, subset: Option<&str>| consistent_hash(mesh, proxy, host, port, subset);
    let mut candidates = index.virtual_services.for_host(ns, &service.hostname).into_iter();
    for vs in candidates.by_ref() {
        let routes = route::virtual_service_routes(&inp, vs, &hash);
        if !routes.is_empty() {
            return ServiceRoutes {
                routes,
                virtual_service: Some(vs),
                shadowed: candidates.collect(),
            };
        }
    }
    let h = consistent_hash(mesh, proxy, &service.hostname, port, None);
    ServiceRoutes {
        routes: vec![route::default_route(&inp, &service.hostname, h.as_ref())],
        virtual_service: None,
        shadowed: Vec::new(),
    }
}

/// The consistent hash of the DestinationRule `proxy` uses for `host` at `port` and `subset`.
pub(super) fn consistent_hash(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    host: &str,
    port: u16,
    subset: Option<&str>,
) -> Option<ConsistentHashLb> {
    let service = mesh.service(host)?;
    let ns = proxy.namespace.as_deref().unwrap_or("");
    let rule = mesh.traffic().destination_rule(ns, &proxy.labels, service)?;
    traffic::effective(Some(&rule.rule), port, subset)
        .load_balancer?
        .consistent_hash
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
