//! An ingress gateway's listeners, as istiod builds them (`core/gateway.go:buildGatewayListeners`,
//! `buildGatewayTCPBasedFilterChains`, `createGatewayTCPFilterChainOpts`,
//! `buildGatewayNetworkFiltersFromTCPRoutes` / `…FromTLSRoutes`, `tls.go:BuildListenerTLSContext`):
//! one listener per merged port ([`gateway_servers`]). A port of plain-text HTTP servers is one HTTP
//! connection manager with RDS `http.<port>`; otherwise each server is a filter chain: HTTPS that
//! terminates TLS (matched by the server's SNI hosts) an HTTP connection manager with its own route
//! configuration; TCP, or TLS terminated here, a `tcp_proxy` to the first TCP route of a VirtualService
//! bound to the gateway whose hosts meet the server's; PASSTHROUGH one chain per TLS route match,
//! by its SNI hosts; AUTO_PASSTHROUGH the SNI-DNAT chains of the services its hosts cover.
//! Certificates come over SDS: `credentialName` as `kubernetes://<name>` (and `-cacert` for MUTUAL)
//! over ADS from meshd, ISTIO_MUTUAL and certificate files from the gateway's agent.

use std::{collections::BTreeSet, net::IpAddr, sync::Arc};

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{Http1ProtocolOptions, TrafficDirection, TransportSocket, transport_socket},
            listener::v3::{Filter, FilterChain, FilterChainMatch, Listener, filter},
        },
        extensions::{
            filters::network::{
                http_connection_manager::v3::{
                    HttpConnectionManager,
                    http_connection_manager::{
                        ForwardClientCertDetails, PathWithEscapedSlashesAction, SetCurrentClientCertDetails,
                        UpgradeConfig,
                    },
                },
                tcp_proxy::v3::{TcpProxy, tcp_proxy},
            },
            transport_sockets::tls::v3::{
                CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
                TlsParameters,
                common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                tls_parameters::TlsProtocol,
            },
        },
        r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
    },
    google::protobuf::{BoolValue, Duration, UInt32Value},
};

use super::{
    Mesh, Proxy, ads_source, any, cds,
    eds::socket,
    envoy_ads_source,
    gateway_servers::{Bound, ListenerPort, Merged},
    lds,
};
use crate::{
    istio::{
        gateway::{ServerTlsMode, ServerTlsSettings},
        l4_route::RouteDestination,
    },
    traffic::virtual_service::ResolvedVs,
};

/// The SDS resource name prefix of a Kubernetes Secret (istiod's `credentials.KubernetesSecretTypeURI`).
pub const SECRET_PREFIX: &str = "kubernetes://";
/// The suffix naming a credential's CA (istiod's `SdsCaSuffix`).
pub const CA_SUFFIX: &str = "-cacert";

/// The names of the listeners the gateway's merged servers make.
pub fn listener_names(merged: &Merged) -> BTreeSet<Arc<str>> {
    merged.ports.iter().map(|p| Arc::from(p.name())).collect()
}

/// The gateway listener `name`; `None` when no merged port makes it (or none of its servers has a
/// filter chain: istiod omits such a listener).
pub fn listener(mesh: &dyn Mesh, proxy: &Proxy, merged: &Merged, name: &str) -> Option<Listener> {
    let port = merged.listener(name)?;
    let mut chains = chains(mesh, proxy, port);
    if chains.is_empty() {
        return None;
    }
    // istiod's gateway defaults: a TLS handshake (or plain connection) has 15 s to complete.
    for c in &mut chains {
        c.transport_socket_connect_timeout = Some(Duration {
            seconds: 15,
            nanos: 0,
        });
    }
    let inspector = chains.iter().any(|c| {
        c.filter_chain_match
            .as_ref()
            .is_some_and(|m| !m.server_names.is_empty())
            || c.transport_socket.is_some()
    });
    let bind: IpAddr = if port.bind.is_empty() {
        IpAddr::from([0, 0, 0, 0])
    } else {
        port.bind.parse().ok()?
    };
    Some(Listener {
        name: name.to_owned(),
        address: Some(socket(bind, port.port)),
        listener_filters: if inspector {
            vec![lds::tls_inspector()]
        } else {
            vec![]
        },
        filter_chains: chains,
        traffic_direction: TrafficDirection::Outbound as i32,
        // One connection per socket event (istiod's gateway default): a burst is spread over workers.
        max_connections_to_accept_per_socket_event: Some(UInt32Value { value: 1 }),
        ..Default::default()
    })
}

fn chains(mesh: &dyn Mesh, proxy: &Proxy, port: &ListenerPort) -> Vec<FilterChain> {
    // istiod's `DelimitedStatsPrefix`: `;` ends the prefix for its stats tag extraction.
    let stat_prefix = format!("outbound_{};", port.name());
    if port.protocol.is_http() {
        let Some(route) = port.servers.first().and_then(|s| s.route.clone()) else {
            return Vec::new();
        };
        return vec![lds::http_chain(gateway_hcm(&stat_prefix, route))];
    }
    let mut sni_seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in &port.servers {
        let tls = s.server.tls.as_ref();
        if s.is_http() {
            let (Some(route), Some(t)) = (s.route.clone(), tls) else {
                continue;
            };
            let prefix = if s.server.name.is_empty() {
                &stat_prefix
            } else {
                &s.server.name
            };
            out.push(FilterChain {
                filter_chain_match: sni_match(&s.sni_hosts),
                transport_socket: Some(downstream_tls(t, proxy, false)),
                ..lds::http_chain(gateway_hcm(prefix, route))
            });
            continue;
        }
        match tls.map(|t| t.mode) {
            None => out.extend(tcp_route_chain(mesh, proxy, s)),
            Some(ServerTlsMode::AutoPassthrough) => {
                let hosts = &s.sni_hosts;
                out.extend(lds::auto_passthrough_chains(mesh, proxy, |h| {
                    hosts.iter().any(|p| host_matches(p, h))
                }));
            }
            Some(ServerTlsMode::Passthrough) => out.extend(tls_route_chains(mesh, proxy, s, &mut sni_seen)),
            Some(_) => {
                if let (Some(chain), Some(t)) = (tcp_route_chain(mesh, proxy, s), tls) {
                    out.push(FilterChain {
                        filter_chain_match: sni_match(&s.sni_hosts),
                        transport_socket: Some(downstream_tls(t, proxy, true)),
                        ..chain
                    });
                }
            }
        }
    }
    out
}

/// A filter chain match on SNI names; none when a name is `*` (every name).
fn sni_match(hosts: &[String]) -> Option<FilterChainMatch> {
    if hosts.is_empty() || hosts.iter().any(|h| h == "*") {
        return None;
    }
    Some(FilterChainMatch {
        server_names: hosts.to_vec(),
        ..Default::default()
    })
}

/// The gateway's HTTP connection manager (istiod's `buildGatewayConnectionManager` on top of the
/// filters every proxy gets): the client's address is the remote address, client certificate
/// details are sanitized and set, paths normalized (escaped slashes kept), `100-continue` proxied,
/// `server: istio-envoy`, websockets upgrade, RDS waits for its routes.
fn gateway_hcm(stat_prefix: &str, route: String) -> HttpConnectionManager {
    HttpConnectionManager {
        use_remote_address: Some(BoolValue { value: true }),
        forward_client_cert_details: ForwardClientCertDetails::SanitizeSet as i32,
        set_current_client_cert_details: Some(SetCurrentClientCertDetails {
            subject: Some(BoolValue { value: true }),
            cert: true,
            dns: true,
            uri: true,
            ..Default::default()
        }),
        http_protocol_options: Some(Http1ProtocolOptions::default()),
        stream_idle_timeout: Some(Duration::default()),
        normalize_path: Some(BoolValue { value: true }),
        path_with_escaped_slashes_action: PathWithEscapedSlashesAction::KeepUnchanged as i32,
        proxy_100_continue: true,
        server_name: "istio-envoy".to_owned(),
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_owned(),
            ..Default::default()
        }],
        ..lds::http_connection_manager(stat_prefix, route, envoy_ads_source())
    }
}

/// istiod's `BuildListenerTLSContext` for a server that terminates TLS: ALPN `h2`, `http/1.1`; a
/// client certificate required for MUTUAL and ISTIO_MUTUAL; certificates from `credentialName` over
/// ADS, from the agent for ISTIO_MUTUAL (the workload certificate and mesh root) and for certificate
/// files (`file-cert:<cert>~<key>`, `file-root:<ca>`); TLS versions and ciphers only when set.
pub fn downstream_tls(t: &ServerTlsSettings, _proxy: &Proxy, tcp: bool) -> TransportSocket {
    let mutual = matches!(t.mode, ServerTlsMode::Mutual | ServerTlsMode::IstioMutual);
    let validate_client = mutual || t.mode == ServerTlsMode::OptionalMutual;
    let alpn = if tcp && t.mode == ServerTlsMode::IstioMutual {
        vec![
            "istio-peer-exchange".to_owned(),
            "h2".to_owned(),
            "http/1.1".to_owned(),
        ]
    } else {
        vec!["h2".to_owned(), "http/1.1".to_owned()]
    };
    // istiod still writes the deprecated field for a server's SANs.
    #[allow(deprecated)]
    let sans = || CertificateValidationContext {
        match_subject_alt_names: t
            .subject_alt_names
            .iter()
            .map(|s| StringMatcher {
                match_pattern: Some(MatchPattern::Exact(s.clone())),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let combined = |root: SdsSecretConfig| {
        ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
            default_validation_context: Some(sans()),
            validation_context_sds_secret_config: Some(root),
            ..Default::default()
        })
    };
    let mut common = CommonTlsContext {
        alpn_protocols: alpn,
        ..Default::default()
    };
    if t.mode == ServerTlsMode::IstioMutual {
        common.tls_certificate_sds_secret_configs = vec![cds::sds(cds::WORKLOAD_CERT)];
        common.validation_context_type = Some(combined(cds::sds(cds::ROOT_CERT)));
    } else if !t.credential_name.is_empty() {
        let name = resource_name(&t.credential_name);
        common.tls_certificate_sds_secret_configs = vec![ads_secret(&name)];
        if validate_client {
            common.validation_context_type = Some(combined(ads_secret(&format!("{name}{CA_SUFFIX}"))));
        }
    } else {
        let cert = format!("file-cert:{}~{}", t.server_certificate, t.private_key);
        common.tls_certificate_sds_secret_configs = vec![cds::sds(&cert)];
        if validate_client && !t.ca_certificates.is_empty() {
            common.validation_context_type =
                Some(combined(cds::sds(&format!("file-root:{}", t.ca_certificates))));
        }
    }
    let min = tls_protocol(&t.min_protocol_version);
    let max = tls_protocol(&t.max_protocol_version);
    if !t.cipher_suites.is_empty() || min != TlsProtocol::TlsAuto || max != TlsProtocol::TlsAuto {
        common.tls_params = Some(TlsParameters {
            tls_minimum_protocol_version: min as i32,
            tls_maximum_protocol_version: max as i32,
            cipher_suites: t.cipher_suites.clone(),
            ..Default::default()
        });
    }
    let ctx = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(BoolValue { value: mutual }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    }
}

/// `credentialName` as an SDS resource name (istiod's `credentials.ToResourceName`).
pub fn resource_name(credential: &str) -> String {
    if credential.contains("://") {
        credential.to_owned()
    } else {
        format!("{SECRET_PREFIX}{credential}")
    }
}

fn ads_secret(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_owned(),
        sds_config: Some(ads_source()),
    }
}

fn tls_protocol(v: &str) -> TlsProtocol {
    match v {
        "TLSV1_0" => TlsProtocol::TlSv10,
        "TLSV1_1" => TlsProtocol::TlSv11,
        "TLSV1_2" => TlsProtocol::TlSv12,
        "TLSV1_3" => TlsProtocol::TlSv13,
        _ => TlsProtocol::TlsAuto,
    }
}

/// istiod's `host.Name.Matches`: either side may be a wildcard.
pub fn host_matches(a: &str, b: &str) -> bool {
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (Some(sa), Some(sb)) => sa.ends_with(sb) || sb.ends_with(sa),
        (Some(sa), None) => b.ends_with(sa),
        (None, Some(sb)) => a.ends_with(sb),
        (None, None) => a == b,
    }
}

/// istiod's `pickMatchingGatewayHosts`: whether some host of `vs` matches some server host (a
/// `ns/host` server host only for VirtualServices of that namespace).
pub fn vs_matches_server(vs: &ResolvedVs, server_hosts: &[String]) -> bool {
    vs.hosts.iter().any(|vh| {
        let vh = vh.to_string();
        server_hosts.iter().any(|sh| match sh.split_once('/') {
            Some((ns, h)) => *ns == *vs.object.namespace && host_matches(h, &vh),
            None => host_matches(sh, &vh),
        })
    })
}

/// A match's port and gateways agree with the server (istiod's `l4SingleMatch`).
fn l4_matches(port: u32, gateways: &[String], s: &Bound) -> bool {
    (port == 0 || port == s.server.port.number) && (gateways.is_empty() || gateways.contains(&s.gateway))
}

/// The `tcp_proxy` chain of the first TCP route that fits the server (istiod's
/// `buildGatewayNetworkFiltersFromTCPRoutes`).
fn tcp_route_chain(mesh: &dyn Mesh, proxy: &Proxy, s: &Bound) -> Option<FilterChain> {
    let ns = proxy.namespace.as_deref().unwrap_or("");
    let index = &mesh.traffic().virtual_services;
    for vs in index.for_gateway(ns, &s.gateway) {
        if !vs_matches_server(vs, &s.hosts) {
            continue;
        }
        for tcp in &vs.tcp {
            let any =
                tcp.matches.is_empty() || tcp.matches.iter().any(|m| l4_matches(m.port, &m.gateways, s));
            if any {
                return Some(tcp_proxy_chain(mesh, vs, &tcp.route, port_of(s)));
            }
        }
    }
    None
}

/// The chains of the TLS routes that fit a PASSTHROUGH server, one per match, by its SNI hosts; a
/// match whose SNI names another chain already took is skipped (Envoy rejects equal matches).
fn tls_route_chains(
    mesh: &dyn Mesh,
    proxy: &Proxy,
    s: &Bound,
    seen: &mut BTreeSet<String>,
) -> Vec<FilterChain> {
    let ns = proxy.namespace.as_deref().unwrap_or("");
    let index = &mesh.traffic().virtual_services;
    let mut out = Vec::new();
    for vs in index.for_gateway(ns, &s.gateway) {
        if !vs_matches_server(vs, &s.hosts) {
            continue;
        }
        for tls in &vs.tls {
            for m in tls.matches.iter().filter(|m| l4_matches(m.port, &m.gateways, s)) {
                if m.sni_hosts.iter().any(|h| seen.contains(h)) {
                    continue;
                }
                seen.extend(m.sni_hosts.iter().cloned());
                out.push(FilterChain {
                    filter_chain_match: sni_match(&m.sni_hosts),
                    ..tcp_proxy_chain(mesh, vs, &tls.route, port_of(s))
                });
            }
        }
    }
    out
}

fn port_of(s: &Bound) -> u16 {
    u16::try_from(s.server.port.number).unwrap_or(s.port)
}

/// A `tcp_proxy` to one destination's cluster (its stats under the cluster's name), or weighted over
/// several (under `<vs>.<namespace>`), as istiod's `buildOutboundNetworkFilters`; a destination
/// without a port goes to its service's only port, else the server's.
fn tcp_proxy_chain(mesh: &dyn Mesh, vs: &ResolvedVs, routes: &[RouteDestination], port: u16) -> FilterChain {
    let cluster = |d: &RouteDestination| {
        let p = match d.destination.port {
            Some(p) => p.number as u16,
            None => only_port(mesh, &d.destination.host).unwrap_or(port),
        };
        cds::subset_cluster_name(p, &d.destination.subset, &d.destination.host)
    };
    let specifier = match routes {
        [only] => tcp_proxy::ClusterSpecifier::Cluster(cluster(only)),
        _ => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: routes
                .iter()
                .filter(|d| d.weight.unwrap_or(0) > 0)
                .map(|d| tcp_proxy::weighted_cluster::ClusterWeight {
                    name: cluster(d),
                    weight: d.weight.unwrap_or(0).max(0) as u32,
                    ..Default::default()
                })
                .collect(),
        }),
    };
    let stat_prefix = match &specifier {
        tcp_proxy::ClusterSpecifier::Cluster(c) => c.clone(),
        _ => format!("{}.{}", vs.object.name, vs.object.namespace),
    };
    let p = TcpProxy {
        stat_prefix,
        cluster_specifier: Some(specifier),
        ..Default::default()
    };
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.tcp_proxy".to_owned(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&p))),
        }],
        ..Default::default()
    }
}

/// The only port of `host`'s service, if it has exactly one (istiod's `GetDestinationCluster`).
pub fn only_port(mesh: &dyn Mesh, host: &str) -> Option<u16> {
    match &mesh.service(host)?.ports[..] {
        [only] => Some(only.port),
        _ => None,
    }
}

#[cfg(test)]
#[path = "gateway_listeners_tests.rs"]
mod tests;
