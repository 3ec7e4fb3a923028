//! LDS: listeners.
//!
//! Proxyless gRPC asks for the target it dials (`host:port`, or a short form `name:port`,
//! `name.ns:port`, `name.ns.svc:port` that resolves in the proxy's namespace); the listener is named
//! exactly as asked and its `api_listener` holds an HttpConnectionManager with RDS over ADS and the
//! fault and router filters (router last). Envoy sidecars get `virtualOutbound` (15001, original destination, passthrough
//! by default), one `0.0.0.0_<port>` HTTP listener per HTTP service port, one `<vip>_<port>` TCP
//! proxy listener per other service port with a cluster IP, and a passthrough service's per-endpoint
//! `<endpoint IP>_<port>` ones ([`pod_listeners`]). An east-west gateway gets `0.0.0.0_15443`:
//! a TLS inspector reads the SNI `outbound_.<port>_.<subset>_.<hostname>` that sidecars send with
//! Istio mTLS, and one filter chain per service port and per subset of the port's DestinationRule,
//! matching that SNI and the Istio mTLS ALPNs, proxies the connection, still encrypted, to the SNI-DNAT
//! cluster of the same name (istiod's AUTO_PASSTHROUGH). A gRPC server's listener
//! (`xds.istio.io/grpc/lds/inbound/…`) is [`inbound`]'s, the sidecar's `virtualInbound` (15006)
//! [`virtual_inbound`]'s. Sidecars' and gateways' HCMs also carry the CORS filter. Does NOT: outbound
//! protocol sniffing, or filters beyond fault, CORS and router.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc};

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{ConfigSource, TrafficDirection},
            listener::v3::{
                ApiListener, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter,
                listener_filter,
            },
        },
        extensions::filters::{
            http::{cors::v3::Cors, fault::v3::HttpFault, router::v3::Router},
            listener::tls_inspector::v3::TlsInspector,
            network::{
                http_connection_manager::v3::{
                    HttpConnectionManager, HttpFilter, Rds,
                    http_connection_manager::{RouteSpecifier, UpgradeConfig},
                    http_filter,
                },
                tcp_proxy::v3::{TcpProxy, tcp_proxy},
            },
        },
    },
    google::protobuf::{BoolValue, Duration},
};

use super::{
    Context, Mesh, ads_source, any, cds, eds::socket, envoy_ads_source, gateway_listeners, gateway_servers,
    inbound, pod_listeners, route, route_actions, virtual_inbound,
};
use crate::envoy::{ProxyKind, XdsType, resource::Resource};
use crate::{
    config::mesh::OutboundMode,
    envoy::Proxy,
    model::{Service, ServicePort},
};

/// The east-west gateway's AUTO_PASSTHROUGH listener.
pub const EAST_WEST_LISTENER: &str = "0.0.0.0_15443";
const EAST_WEST_PORT: u16 = 15443;

/// The sidecar's outbound capture port (iptables redirects here).
const VIRTUAL_OUTBOUND_PORT: u16 = 15001;
const VIRTUAL_OUTBOUND: &str = "virtualOutbound";

/// The gRPC client listener for `name` (as the client asked for it), or `None` if no service port
/// matches.
pub fn grpc_listener(mesh: &dyn Mesh, proxy: &Proxy, name: &str) -> Option<Listener> {
    let (service, port) = resolve_target(mesh, proxy, name)?;
    let hcm = grpc_http_connection_manager(
        name,
        cds::cluster_name(port.port, &service.hostname),
        ads_source(),
    );
    Some(Listener {
        name: name.to_owned(),
        api_listener: Some(ApiListener {
            api_listener: Some(any(&hcm)),
        }),
        ..Default::default()
    })
}

/// Resolves a dialled `host:port` to a service port: the host is a full host name, or a short form
/// resolved in the proxy's namespace (istiod expands these the same way).
pub fn resolve_target<'a>(
    mesh: &'a dyn Mesh,
    proxy: &Proxy,
    name: &str,
) -> Option<(&'a Service, &'a ServicePort)> {
    let (host, port) = name.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let service = match mesh.service(host) {
        Some(s) => s,
        None => {
            let labels: Vec<&str> = host.split('.').collect();
            let (svc, ns) = match labels.as_slice() {
                [svc] => (*svc, proxy.namespace.as_deref()?),
                [svc, ns] | [svc, ns, "svc"] => (*svc, *ns),
                _ => return None,
            };
            mesh.services().find(|s| &*s.name == svc && &*s.namespace == ns)?
        }
    };
    Some((service, service.ports.iter().find(|p| p.port == port)?))
}

/// The names of the sidecar's listeners.
pub fn sidecar_listener_names(mesh: &dyn Mesh, proxy: &Proxy) -> BTreeSet<Arc<str>> {
    let mut names = BTreeSet::from([
        Arc::from(VIRTUAL_OUTBOUND),
        Arc::from(virtual_inbound::VIRTUAL_INBOUND),
    ]);
    for s in mesh.services() {
        for p in &s.ports {
            if p.protocol.is_http() {
                names.insert(format!("0.0.0.0_{}", p.port).into());
            } else if p.protocol != crate::model::Protocol::Udp {
                names.extend(vips(s, proxy).map(|ip| Arc::from(format!("{ip}_{}", p.port))));
            }
        }
    }
    names.extend(pod_listeners::names(mesh, proxy));
    names
}

/// One sidecar listener by name.
pub fn sidecar_listener(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    name: &str,
    outbound: OutboundMode,
) -> Option<Listener> {
    if name == VIRTUAL_OUTBOUND {
        return Some(virtual_outbound(outbound));
    }
    if name == virtual_inbound::VIRTUAL_INBOUND {
        return Some(virtual_inbound::listener(mesh, proxy));
    }
    let (addr, port) = name.rsplit_once('_')?;
    let ip: IpAddr = addr.parse().ok()?;
    let port: u16 = port.parse().ok()?;
    let http = ip.is_unspecified()
        && mesh
            .services()
            .any(|s| s.ports.iter().any(|p| p.port == port && p.protocol.is_http()));
    let chain = if http {
        http_chain(sidecar_http_connection_manager(name, port.to_string()))
    } else {
        let service = mesh
            .services()
            .find(|s| vips(s, proxy).any(|v| v == ip))
            .filter(|s| s.ports.iter().any(|p| p.port == port && !p.protocol.is_http()))
            .or_else(|| pod_listeners::owner(mesh, proxy, ip, port))?;
        tcp_chain(name, &cds::cluster_name(port, &service.hostname))
    };
    Some(Listener {
        name: name.to_owned(),
        address: Some(socket(ip, port)),
        filter_chains: vec![chain],
        bind_to_port: Some(BoolValue { value: false }),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    })
}

/// The cluster IPs of `service` the proxy dials: its own cluster's, else every cluster's.
pub(super) fn vips<'a>(service: &'a Service, proxy: &Proxy) -> impl Iterator<Item = IpAddr> + 'a {
    let own = proxy
        .cluster_id
        .as_ref()
        .and_then(|c| service.cluster_vips.get(c));
    let all: Vec<IpAddr> = match own {
        Some(v) => v.clone(),
        None => service
            .cluster_vips
            .values()
            .flatten()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    all.into_iter()
}

/// The ALPNs Istio mTLS clients offer (istiod's `allIstioMtlsALPNs`): an AUTO_PASSTHROUGH chain admits
/// only these, so a plain TLS client that happens to send a mesh SNI is not passed through.
pub const ISTIO_MTLS_ALPNS: [&str; 5] = [
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];

/// The east-west gateway's listener (istiod's `builtAutoPassthroughFilterChains`): by SNI, each
/// in-mesh service port's mTLS connections, and those of each subset of the DestinationRule the
/// gateway gets for the service, pass through still encrypted to the SNI-DNAT cluster of the same name;
/// in the order of the services (host name, then port), the whole service before its subsets.
pub fn east_west_listener(mesh: &dyn Mesh, proxy: &Proxy) -> Listener {
    Listener {
        name: EAST_WEST_LISTENER.to_owned(),
        address: Some(socket(IpAddr::from([0, 0, 0, 0]), EAST_WEST_PORT)),
        listener_filters: vec![tls_inspector()],
        filter_chains: auto_passthrough_chains(mesh, proxy, |_| true),
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

/// The AUTO_PASSTHROUGH filter chains of the in-mesh services `host` accepts (see
/// [`east_west_listener`]; a Gateway's AUTO_PASSTHROUGH server keeps those its hosts match).
pub(super) fn auto_passthrough_chains(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    host: impl Fn(&str) -> bool,
) -> Vec<FilterChain> {
    mesh.services()
        .filter(|s| !s.mesh_external && host(&s.hostname))
        .flat_map(|s| s.ports.iter().map(move |p| (s, p)))
        .filter(|(_, p)| p.protocol != crate::model::Protocol::Udp)
        .flat_map(|(s, p)| {
            let subsets = cds::rule_for(mesh, proxy, s)
                .into_iter()
                .flat_map(|r| r.rule.subsets.iter().map(|x| x.name.clone()));
            std::iter::once(String::new())
                .chain(subsets)
                .map(move |subset| cds::subset_sni_name(p.port, &subset, &s.hostname))
        })
        .map(|sni| FilterChain {
            filter_chain_match: Some(FilterChainMatch {
                server_names: vec![sni.clone()],
                application_protocols: ISTIO_MTLS_ALPNS.map(str::to_owned).to_vec(),
                ..Default::default()
            }),
            ..tcp_chain(&sni, &sni)
        })
        .collect()
}

/// The TLS inspector: SNI and ALPN for filter chain matches.
pub(super) fn tls_inspector() -> ListenerFilter {
    ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".to_owned(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    }
}

/// istiod's catch-all for connections to no known listener: `PassthroughCluster` under `ALLOW_ANY`,
/// `BlackHoleCluster` under `REGISTRY_ONLY` (the Sidecar's `outboundTrafficPolicy`, else MeshConfig's).
fn virtual_outbound(outbound: OutboundMode) -> Listener {
    let cluster = match outbound {
        OutboundMode::AllowAny => cds::PASSTHROUGH,
        OutboundMode::RegistryOnly => cds::BLACKHOLE,
    };
    Listener {
        name: VIRTUAL_OUTBOUND.to_owned(),
        address: Some(socket(IpAddr::from([0, 0, 0, 0]), VIRTUAL_OUTBOUND_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        filter_chains: vec![tcp_chain(cluster, cluster)],
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

/// An HCM with RDS from `source` and the filters istiod gives Envoy (sidecars and gateways): fault
/// and CORS (empty: routes turn them on through `typed_per_filter_config`), then the router.
pub(super) fn http_connection_manager(
    stat_prefix: &str,
    route: String,
    source: ConfigSource,
) -> HttpConnectionManager {
    let mut hcm = grpc_http_connection_manager(stat_prefix, route, source);
    let cors = HttpFilter {
        name: route_actions::CORS_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&Cors::default()))),
        ..Default::default()
    };
    hcm.http_filters.insert(1, cors);
    hcm
}

/// The HCM of a gRPC client listener: fault, then the router, which gRPC requires last (gRPC has
/// no CORS filter).
fn grpc_http_connection_manager(
    stat_prefix: &str,
    route: String,
    source: ConfigSource,
) -> HttpConnectionManager {
    HttpConnectionManager {
        stat_prefix: stat_prefix.to_owned(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(source),
            route_config_name: route,
        })),
        http_filters: vec![
            HttpFilter {
                name: route::FAULT_FILTER.to_owned(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(&HttpFault::default()))),
                ..Default::default()
            },
            HttpFilter {
                name: "envoy.filters.http.router".to_owned(),
                config_type: Some(http_filter::ConfigType::TypedConfig(any(&Router::default()))),
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

/// A sidecar's outbound HCM: [`http_connection_manager`] with what istiod's
/// `buildHTTPConnectionManager` adds for Envoy: no stream idle timeout (Envoy's 5-minute default resets
/// quiet long-lived streams, such as gRPC watches), websocket upgrades, and RDS that waits for its
/// routes ([`envoy_ads_source`]).
fn sidecar_http_connection_manager(stat_prefix: &str, route: String) -> HttpConnectionManager {
    HttpConnectionManager {
        stream_idle_timeout: Some(Duration::default()),
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_owned(),
            ..Default::default()
        }],
        ..http_connection_manager(stat_prefix, route, envoy_ads_source())
    }
}

pub(super) fn http_chain(hcm: HttpConnectionManager) -> FilterChain {
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.http_connection_manager".to_owned(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
        }],
        ..Default::default()
    }
}

pub(super) fn tcp_chain(stat_prefix: &str, cluster: &str) -> FilterChain {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_owned(),
        cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster.to_owned())),
        ..Default::default()
    };
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.tcp_proxy".to_owned(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
        }],
        ..Default::default()
    }
}

/// Every listener name a proxy's wildcard LDS lists.
pub(super) fn all_names(ctx: &Context) -> BTreeSet<Arc<str>> {
    match ctx.proxy.kind {
        ProxyKind::Grpc => ctx
            .ports()
            .map(|(s, p)| format!("{}:{}", s.hostname, p.port).into())
            .collect(),
        ProxyKind::Sidecar => sidecar_listener_names(ctx.mesh, ctx.proxy),
        ProxyKind::Router => {
            let merged = gateway_servers::merge(ctx.mesh, ctx.proxy);
            let mut names = gateway_listeners::listener_names(&merged);
            if ctx.proxy.is_east_west_gateway() {
                names.insert(EAST_WEST_LISTENER.into());
            }
            names
        }
    }
}

/// What a listener depends on besides its name: short listener names resolve in the proxy's
/// namespace; sidecar TCP listeners use its cluster's VIPs; a gateway's also depend on its labels
/// (which Gateways select it) and the ports it serves (server ports become target ports).
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    if ctx.proxy.kind == ProxyKind::Router {
        return gateway_servers::view_key(ctx.mesh, ctx.proxy).into();
    }
    format!(
        "{}|{}|{}",
        ctx.kind_name(),
        ctx.proxy.namespace.as_deref().unwrap_or(""),
        ctx.proxy.cluster_id.as_deref().unwrap_or("")
    )
    .into()
}

/// The listener `name` for the proxy; `None` when it does not exist.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    let listener = match ctx.proxy.kind {
        ProxyKind::Grpc if name.starts_with(inbound::GRPC_SERVER_LISTENER_PREFIX) => {
            inbound::grpc_server_listener(ctx.mesh, ctx.proxy, &name)?
        }
        ProxyKind::Grpc => grpc_listener(ctx.mesh, ctx.proxy, &name)?,
        ProxyKind::Sidecar => sidecar_listener(ctx.mesh, ctx.proxy, &name, ctx.scope.outbound)?,
        ProxyKind::Router if ctx.proxy.is_east_west_gateway() && &*name == EAST_WEST_LISTENER => {
            east_west_listener(ctx.mesh, ctx.proxy)
        }
        ProxyKind::Router => {
            let merged = gateway_servers::merge(ctx.mesh, ctx.proxy);
            gateway_listeners::listener(ctx.mesh, ctx.proxy, &merged, &name)?
        }
    };
    Some(Resource::encode(XdsType::Listener, name, &listener))
}

#[cfg(test)]
#[path = "lds_tests.rs"]
mod tests;
