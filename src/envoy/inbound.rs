//! What a proxy is sent to serve: the proxyless gRPC server listener (gRFC A36), as istiod's
//! `grpcgen` builds it (`buildInboundListeners`).
//!
//! An xDS-enabled gRPC server asks for `xds.istio.io/grpc/lds/inbound/<host>:<port>` (its bootstrap's
//! `server_listener_resource_name_template`) and serves only once it has the listener. The one filter
//! chain follows the PeerAuthentication mode of the proxy's workload (namespace, `LABELS`) at that
//! port:
//! - STRICT, or PERMISSIVE on a workload labelled `security.istio.io/tlsMode: istio` (clients then
//!   send mTLS, and a gRPC server cannot take both: its chain match cannot tell TLS from plaintext):
//!   `inbound-mtls`, a DownstreamTlsContext from the bootstrap's certificate providers that requires
//!   a client certificate signed by the mesh root.
//! - DISABLE, or PERMISSIVE without that label: `inbound-plaintext`.
//!
//! Each chain holds an HttpConnectionManager with an inline route configuration `inbound` that accepts
//! every request (`non_forwarding_action`) and the router filter.
//!
//! Differs from istiod on purpose: istiod sends the listener only when the proxy is an endpoint of a
//! Service at that port (its "service targets"); meshd sends it for any port, since the mode depends
//! only on the workload and the port, and a server that never gets its listener never serves.
//! Does NOT: AuthorizationPolicy (RBAC filters), the Envoy sidecar's `virtualInbound`.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{Address, SocketAddress, TransportSocket, address, socket_address, transport_socket},
            listener::v3::{Filter, FilterChain, Listener, filter},
            route::v3::{
                NonForwardingAction, Route, RouteConfiguration, RouteMatch, VirtualHost, route, route_match,
            },
        },
        extensions::{
            filters::{
                http::router::v3::Router,
                network::http_connection_manager::v3::{
                    HttpConnectionManager, HttpFilter, http_connection_manager::RouteSpecifier, http_filter,
                },
            },
            transport_sockets::tls::v3::DownstreamTlsContext,
        },
    },
    google::protobuf::BoolValue,
};
use serde::Serialize;

use super::{Mesh, Proxy, any, cds};
use crate::istio::peer_authentication::MtlsMode;

/// The prefix of a gRPC server listener's name (istio-agent's `ServerListenerNamePrefix`).
pub const GRPC_SERVER_LISTENER_PREFIX: &str = "xds.istio.io/grpc/lds/inbound/";

/// The label that says a workload's clients send it Istio mTLS.
const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";

/// What a gRPC server on one port takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ServerTls {
    /// Istio mTLS only, with a client certificate.
    Mtls,
    /// Plaintext only.
    Plaintext,
}

/// The address a server listener name asks for: `<prefix><host>:<port>`, the host an IP (IPv6 in
/// brackets). `None` for any other name.
pub fn parse_server_listener(name: &str) -> Option<(IpAddr, u16)> {
    let addr = name.strip_prefix(GRPC_SERVER_LISTENER_PREFIX)?;
    let (host, port) = addr.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some((host.parse().ok()?, port.parse().ok()?))
}

/// What the proxy's workload takes on `port`, by its PeerAuthentication mode (see the module doc).
pub fn server_tls(mesh: &dyn Mesh, proxy: &Proxy, port: u16) -> ServerTls {
    let labels = Arc::new(proxy.labels.clone());
    let namespace = proxy.namespace.as_deref().unwrap_or("");
    match mesh.traffic().peer_mode(namespace, &labels, port).mode {
        MtlsMode::Strict => ServerTls::Mtls,
        MtlsMode::Permissive | MtlsMode::Unset if sidecar_labelled(&proxy.labels) => ServerTls::Mtls,
        MtlsMode::Permissive | MtlsMode::Unset | MtlsMode::Disable => ServerTls::Plaintext,
    }
}

fn sidecar_labelled(labels: &BTreeMap<String, String>) -> bool {
    labels.get(TLS_MODE_LABEL).is_some_and(|v| v == "istio")
}

/// The gRPC server listener `name` for the proxy; `None` when the name is not one.
pub fn grpc_server_listener(mesh: &dyn Mesh, proxy: &Proxy, name: &str) -> Option<Listener> {
    let (ip, port) = parse_server_listener(name)?;
    let (suffix, transport_socket) = match server_tls(mesh, proxy, port) {
        ServerTls::Mtls => ("mtls", Some(mtls_socket())),
        ServerTls::Plaintext => ("plaintext", None),
    };
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::RouteConfig(accept_all())),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".to_owned(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Some(Listener {
        name: name.to_owned(),
        address: Some(Address {
            address: Some(address::Address::SocketAddress(SocketAddress {
                address: ip.to_string(),
                port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
                ..Default::default()
            })),
        }),
        filter_chains: vec![FilterChain {
            name: format!("inbound-{suffix}"),
            filters: vec![Filter {
                name: format!("inbound-hcm{suffix}"),
                config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
            }],
            transport_socket,
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Every request is served by the application (gRPC requires a route; this one forwards nothing).
fn accept_all() -> RouteConfiguration {
    RouteConfiguration {
        name: "inbound".to_owned(),
        virtual_hosts: vec![VirtualHost {
            name: "inbound".to_owned(),
            domains: vec!["*".to_owned()],
            routes: vec![Route {
                r#match: Some(RouteMatch {
                    path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
                    ..Default::default()
                }),
                action: Some(route::Action::NonForwardingAction(NonForwardingAction {})),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The server side of Istio mTLS for gRPC: the workload certificate and the mesh root from the
/// bootstrap's certificate providers, a client certificate required.
fn mtls_socket() -> TransportSocket {
    let ctx = DownstreamTlsContext {
        common_tls_context: Some(cds::provider_tls(&[])),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    }
}

/// What a server listener depends on besides its name and the snapshot: the workload's labels
/// (PeerAuthentication selectors and the tlsMode label); the namespace is in the listener view.
pub(super) fn view_key(base: &Arc<str>, proxy: &Proxy) -> Arc<str> {
    // JSON: no two label sets spell the same key.
    let labels = serde_json::to_string(&proxy.labels).unwrap_or_default();
    format!("{base}|inbound|{labels}").into()
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
