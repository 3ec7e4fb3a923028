//! The Envoy sidecar's inbound side, as istiod builds it (`listener_inbound.go`,
//! `filterchain_options.go`, `cluster_builder.go`'s `buildInboundCluster` and
//! `buildInboundPassthroughCluster`): what the sidecar does with connections iptables redirects to
//! 15006.
//!
//! Each of the proxy's service targets ([`super::service_targets`]: the ports it serves a Service on)
//! gets filter chains on `virtualInbound` whose shape follows the PeerAuthentication mode of the
//! workload at that port (port-level settings first):
//! - STRICT: only TLS (`transport_protocol: tls`), terminated with the workload certificate, a client
//!   certificate from the mesh required;
//! - PERMISSIVE (nothing set): that, matched by the Istio mTLS ALPNs, plus plaintext (`raw_buffer`)
//!   and, on TCP ports, TLS the application terminates itself;
//! - DISABLE: plaintext only.
//!
//! HTTP ports get an HttpConnectionManager with an inline route to `inbound|<port>||`, others a TCP
//! proxy to it, ports of no declared protocol both (the HTTP inspector tells them apart). Before the
//! targets' chains: `virtualInbound-blackhole` (connections to 15006 itself, which would loop) and the
//! passthrough chains for every other port (`InboundPassthroughCluster`, the original destination), in
//! the workload's mode, plus one set per `portLevelMtls` port that is no target. The TLS and HTTP
//! inspectors run only on the ports whose chains need them.
//!
//! `inbound|<port>||` is an ORIGINAL_DST cluster (the application at the connection's destination,
//! `bind` unset at this istiod version) whose connections come from 127.0.0.6, which iptables does not
//! redirect back to the sidecar; `InboundPassthroughCluster` is `PassthroughCluster` bound the same way.
//!
//! Does NOT: the metadata-exchange, telemetry, CORS, fault or gRPC-stats filters istiod adds,
//! AuthorizationPolicy (RBAC), tracing, Sidecar `ingress` listeners, inbound DestinationRule traffic
//! policy, or NONE interception (docs/compatibility.md).

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{ClusterDiscoveryType, CommonLbConfig, DiscoveryType, LbPolicy},
            },
            core::v3::{
                BindConfig, Http2ProtocolOptions, SocketAddress, TrafficDirection, TransportSocket,
                socket_address, transport_socket,
            },
            listener::v3::{
                Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
                ListenerFilterChainMatchPredicate, filter, listener_filter,
                listener_filter_chain_match_predicate::{MatchSet, Rule},
            },
            route::v3::{
                Decorator, RetryPolicy, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
                route, route_action, route_match,
            },
        },
        extensions::{
            filters::{
                http::router::v3::Router,
                listener::{
                    http_inspector::v3::HttpInspector, original_dst::v3::OriginalDst,
                    tls_inspector::v3::TlsInspector,
                },
                network::{
                    http_connection_manager::v3::{
                        HttpConnectionManager, HttpFilter, RequestIdExtension,
                        http_connection_manager::{
                            ForwardClientCertDetails, PathWithEscapedSlashesAction, RouteSpecifier,
                            SetCurrentClientCertDetails, UpgradeConfig,
                        },
                        http_filter,
                    },
                    tcp_proxy::v3::{TcpProxy, tcp_proxy},
                },
            },
            request_id::uuid::v3::UuidRequestIdConfig,
            transport_sockets::tls::v3::{
                CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, TlsParameters,
                common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                tls_parameters::TlsProtocol,
            },
            upstreams::http::v3::{
                HttpProtocolOptions,
                http_protocol_options::{
                    ExplicitHttpConfig, UpstreamProtocolOptions, explicit_http_config::ProtocolConfig,
                },
            },
        },
        r#type::{
            matcher::v3::{StringMatcher, string_matcher::MatchPattern},
            v3::Int32Range,
        },
    },
    google::protobuf::{BoolValue, Duration, UInt32Value},
};

use super::{
    Mesh, Proxy, any, cds,
    cluster_meta::IstioMeta,
    cluster_policy,
    eds::socket,
    lds::ISTIO_MTLS_ALPNS,
    service_targets::{ServiceTarget, service_targets},
};
use crate::{istio::peer_authentication::MtlsMode, model::Protocol};

/// The sidecar's inbound listener.
pub const VIRTUAL_INBOUND: &str = "virtualInbound";
/// The inbound catch-all cluster: the connection's original destination.
pub const INBOUND_PASSTHROUGH: &str = "InboundPassthroughCluster";
/// Where iptables redirects inbound connections (MeshConfig `proxyInboundListenPort`).
const INBOUND_PORT: u16 = 15006;
/// The source address of the sidecar's own connections to the application; iptables lets these through.
const PASSTHROUGH_BIND: &str = "127.0.0.6";
const BLACKHOLE_CHAIN: &str = "virtualInbound-blackhole";
const CATCH_ALL_HTTP_CHAIN: &str = "virtualInbound-catchall-http";
/// istiod's `maxSecondsValue`: an original-destination inbound cluster never cleans up its hosts.
const NO_CLEANUP_SECONDS: i64 = 9_223_372_035;

/// `inbound|<port>||` (istiod's `BuildInboundSubsetKey`).
pub fn cluster_name(target_port: u16) -> String {
    format!("inbound|{target_port}||")
}

/// The target port an `inbound|<port>||` name means.
pub fn parse_cluster_name(name: &str) -> Option<u16> {
    name.strip_prefix("inbound|")?.strip_suffix("||")?.parse().ok()
}

/// Whether CDS name `name` is one of this module's.
pub fn is_inbound_cluster(name: &str) -> bool {
    name == INBOUND_PASSTHROUGH || parse_cluster_name(name).is_some()
}

/// Whether listener or cluster `name` depends on the proxy's addresses and labels ([`view_key`]).
pub fn per_proxy(name: &str) -> bool {
    name == VIRTUAL_INBOUND || parse_cluster_name(name).is_some()
}

/// The inbound cluster names of a sidecar with `targets`.
pub fn cluster_names(targets: &[ServiceTarget]) -> impl Iterator<Item = String> + '_ {
    std::iter::once(INBOUND_PASSTHROUGH.to_owned()).chain(targets.iter().map(|t| cluster_name(t.target_port)))
}

/// The inbound cluster `name` for the proxy, its Istio metadata (the service) apart, for CDS to write
/// in key order; `None` when the proxy serves nothing on that port.
pub fn cluster<'m>(
    mesh: &'m dyn Mesh,
    proxy: &Proxy,
    name: &str,
) -> Option<(Cluster, Option<IstioMeta<'m>>)> {
    if name == INBOUND_PASSTHROUGH {
        return Some((passthrough_cluster(), None));
    }
    let port = parse_cluster_name(name)?;
    let target = service_targets(mesh, proxy)
        .into_iter()
        .find(|t| t.target_port == port)?;
    let whole = mesh.unscoped().unwrap_or(mesh);
    let service = whole.service(&target.hostname)?;
    let connect_timeout = whole.traffic().settings.mesh.connect_timeout;
    let http2 = target.protocol.is_http2().then(|| {
        let options = HttpProtocolOptions {
            upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
                ExplicitHttpConfig {
                    protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(
                        Http2ProtocolOptions::default(),
                    )),
                },
            )),
            ..Default::default()
        };
        (cluster_policy::HTTP_PROTOCOL_OPTIONS.to_owned(), any(&options))
    });
    let cluster = Cluster {
        name: name.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32)),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(Duration {
            seconds: i64::try_from(connect_timeout.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(connect_timeout.subsec_nanos()).unwrap_or(0),
        }),
        cleanup_interval: Some(Duration {
            seconds: NO_CLEANUP_SECONDS,
            nanos: 0,
        }),
        common_lb_config: Some(CommonLbConfig::default()),
        circuit_breakers: Some(cluster_policy::envoy_circuit_breakers()),
        upstream_bind_config: Some(passthrough_bind()),
        typed_extension_protocol_options: http2.into_iter().collect(),
        ..Default::default()
    };
    let meta = IstioMeta {
        service,
        rule: None,
        subset: None,
        no_alpn_override: false,
        external: false,
    };
    Some((cluster, Some(meta)))
}

/// istiod's `InboundPassthroughCluster`: the outbound catch-all, bound to 127.0.0.6.
pub fn passthrough_cluster() -> Cluster {
    Cluster {
        name: INBOUND_PASSTHROUGH.to_owned(),
        upstream_bind_config: Some(passthrough_bind()),
        ..cds::passthrough_cluster()
    }
}

fn passthrough_bind() -> BindConfig {
    BindConfig {
        source_address: Some(SocketAddress {
            address: PASSTHROUGH_BIND.to_owned(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(0)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How a port's chains read its connections (istiod's `ListenerProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    Http,
    Tcp,
    /// No declared protocol: HTTP and TCP chains, told apart by the HTTP inspector's ALPN.
    Auto,
}

impl Reads {
    fn of(p: Protocol) -> Self {
        if p.is_http() {
            Self::Http
        } else if p == Protocol::Unknown {
            Self::Auto
        } else {
            Self::Tcp
        }
    }
}

/// One filter chain of a port (istiod's `FilterChainMatchOptions`).
#[derive(Debug, Clone, Copy)]
struct Opt {
    /// `application_protocols` to match.
    alpns: &'static [&'static str],
    /// `transport_protocol: tls` (else `raw_buffer`).
    tls: bool,
    /// An HttpConnectionManager (else a TCP proxy).
    http: bool,
    /// Terminates Istio mTLS.
    terminate: bool,
}

const MTLS_HTTP_ALPNS: &[&str] = &["istio-http/1.0", "istio-http/1.1", "istio-h2"];
const PLAINTEXT_HTTP_ALPNS: &[&str] = &["http/1.1", "h2c"];
const MTLS_TCP_ALPNS: &[&str] = &["istio-peer-exchange", "istio"];
const ALL_MTLS_ALPNS: &[&str] = &ISTIO_MTLS_ALPNS;

const fn opt(alpns: &'static [&'static str], tls: bool, http: bool, terminate: bool) -> Opt {
    Opt {
        alpns,
        tls,
        http,
        terminate,
    }
}

/// istiod's `getFilterChainMatchOptions`: the chains of a port in `mode` that `reads` its traffic.
fn options(mode: MtlsMode, reads: Reads) -> &'static [Opt] {
    const STRICT_HTTP: &[Opt] = &[opt(&[], true, true, true)];
    const STRICT_TCP: &[Opt] = &[opt(&[], true, false, true)];
    const STRICT_AUTO: &[Opt] = &[
        opt(MTLS_HTTP_ALPNS, true, true, true),
        opt(&[], true, false, true),
    ];
    const PERMISSIVE_HTTP: &[Opt] = &[
        opt(ALL_MTLS_ALPNS, true, true, true),
        opt(&[], false, true, false),
    ];
    const PERMISSIVE_TCP: &[Opt] = &[
        opt(ALL_MTLS_ALPNS, true, false, true),
        opt(&[], true, false, false),
        opt(&[], false, false, false),
    ];
    const PERMISSIVE_AUTO: &[Opt] = &[
        opt(MTLS_HTTP_ALPNS, true, true, true),
        opt(PLAINTEXT_HTTP_ALPNS, false, true, false),
        opt(MTLS_TCP_ALPNS, true, false, true),
        opt(&[], false, false, false),
        opt(&[], true, false, false),
    ];
    const PLAIN_HTTP: &[Opt] = &[opt(&[], false, true, false)];
    const PLAIN_TCP: &[Opt] = &[opt(&[], false, false, false)];
    const PLAIN_AUTO: &[Opt] = &[
        opt(PLAINTEXT_HTTP_ALPNS, false, true, false),
        opt(&[], false, false, false),
    ];
    match (mode, reads) {
        (MtlsMode::Strict, Reads::Http) => STRICT_HTTP,
        (MtlsMode::Strict, Reads::Tcp) => STRICT_TCP,
        (MtlsMode::Strict, Reads::Auto) => STRICT_AUTO,
        (MtlsMode::Permissive | MtlsMode::Unset, Reads::Http) => PERMISSIVE_HTTP,
        (MtlsMode::Permissive | MtlsMode::Unset, Reads::Tcp) => PERMISSIVE_TCP,
        (MtlsMode::Permissive | MtlsMode::Unset, Reads::Auto) => PERMISSIVE_AUTO,
        (MtlsMode::Disable, Reads::Http) => PLAIN_HTTP,
        (MtlsMode::Disable, Reads::Tcp) => PLAIN_TCP,
        (MtlsMode::Disable, Reads::Auto) => PLAIN_AUTO,
    }
}

/// What a set of chains serves: a service target, or the passthrough for one port (0: every port).
#[derive(Debug, Clone, Copy)]
enum Serves<'t> {
    Target(&'t ServiceTarget),
    Passthrough(u16),
}

impl Serves<'_> {
    fn port(&self) -> u16 {
        match self {
            Self::Target(t) => t.target_port,
            Self::Passthrough(p) => *p,
        }
    }

    fn cluster(&self) -> String {
        match self {
            Self::Target(t) => cluster_name(t.target_port),
            Self::Passthrough(_) => INBOUND_PASSTHROUGH.to_owned(),
        }
    }

    fn chain_name(&self, http: bool) -> String {
        match self {
            Self::Target(t) => format!("0.0.0.0_{}", t.target_port),
            Self::Passthrough(_) if http => CATCH_ALL_HTTP_CHAIN.to_owned(),
            Self::Passthrough(_) => VIRTUAL_INBOUND.to_owned(),
        }
    }
}

/// The sidecar's `virtualInbound` listener (see the module doc).
pub fn listener(mesh: &dyn Mesh, proxy: &Proxy) -> Listener {
    let whole = mesh.unscoped().unwrap_or(mesh);
    let traffic = whole.traffic();
    let settings = &traffic.settings.mesh;
    let trust_domains: Vec<&str> = std::iter::once(settings.trust_domain.as_str())
        .chain(settings.trust_domain_aliases.iter().map(String::as_str))
        .collect();
    let namespace = proxy.namespace.as_deref().unwrap_or("");
    let mode = |port: u16| traffic.peer_mode(namespace, &proxy.labels, port).mode;
    let targets = service_targets(whole, proxy);
    let served: BTreeSet<u16> = targets.iter().map(|t| t.target_port).collect();
    let port_levels = traffic
        .peer_authn
        .port_levels(namespace, &proxy.labels)
        .into_iter()
        .filter(|p| !served.contains(p));
    let mut filter_chains = vec![blackhole_chain()];
    for port in std::iter::once(0).chain(port_levels) {
        let serves = Serves::Passthrough(port);
        filter_chains.extend(chains(serves, options(mode(port), Reads::Auto), &trust_domains));
    }
    for t in &targets {
        let serves = Serves::Target(t);
        filter_chains.extend(chains(
            serves,
            options(mode(t.target_port), Reads::of(t.protocol)),
            &trust_domains,
        ));
    }
    Listener {
        name: VIRTUAL_INBOUND.to_owned(),
        address: Some(socket(IpAddr::from([0, 0, 0, 0]), INBOUND_PORT)),
        listener_filters: listener_filters(&filter_chains),
        listener_filters_timeout: Some(Duration::default()),
        continue_on_listener_filters_timeout: true,
        max_connections_to_accept_per_socket_event: Some(UInt32Value { value: 1 }),
        traffic_direction: TrafficDirection::Inbound as i32,
        filter_chains,
        ..Default::default()
    }
}

/// Connections to 15006 itself go nowhere (they would loop).
fn blackhole_chain() -> FilterChain {
    FilterChain {
        name: BLACKHOLE_CHAIN.to_owned(),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: Some(UInt32Value {
                value: u32::from(INBOUND_PORT),
            }),
            ..Default::default()
        }),
        filters: vec![tcp_proxy(cds::BLACKHOLE, cds::BLACKHOLE)],
        ..Default::default()
    }
}

/// The chains of `serves` for `opts` (istiod's `inboundChainForOpts`).
fn chains(serves: Serves, opts: &[Opt], trust_domains: &[&str]) -> Vec<FilterChain> {
    let port = serves.port();
    opts.iter()
        .map(|o| FilterChain {
            name: serves.chain_name(o.http),
            filter_chain_match: Some(FilterChainMatch {
                destination_port: (port > 0).then_some(UInt32Value {
                    value: u32::from(port),
                }),
                transport_protocol: if o.tls { "tls" } else { "raw_buffer" }.to_owned(),
                application_protocols: o.alpns.iter().map(|a| (*a).to_owned()).collect(),
                ..Default::default()
            }),
            filters: vec![if o.http {
                http_filter(serves)
            } else {
                let cluster = serves.cluster();
                tcp_proxy(&cluster, &cluster)
            }],
            transport_socket: o.terminate.then(|| mtls_socket(o.http, trust_domains)),
            ..Default::default()
        })
        .collect()
}

fn tcp_proxy(stat_prefix: &str, cluster: &str) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_owned(),
        cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster.to_owned())),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.tcp_proxy".to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    }
}

/// istiod's inbound HttpConnectionManager (`buildSidecarInboundHTTPOpts`): an inline route to the
/// chain's cluster, the client certificate's details forwarded to the application, no timeouts.
fn http_filter(serves: Serves) -> Filter {
    let cluster = serves.cluster();
    let (stat_prefix, service_port, operation, retry, http2) = match serves {
        Serves::Target(t) => (
            format!("inbound_0.0.0.0_{};", t.target_port),
            t.port,
            format!("{}:{}/*", t.hostname, t.port),
            None,
            t.protocol.is_http2(),
        ),
        // istiod retries a passthrough request reset before it was sent.
        Serves::Passthrough(_) => (
            format!("{INBOUND_PASSTHROUGH};"),
            0,
            ":0/*".to_owned(),
            Some(RetryPolicy {
                retry_on: "reset-before-request".to_owned(),
                num_retries: Some(UInt32Value { value: 2 }),
                ..Default::default()
            }),
            false,
        ),
    };
    let zero = || Some(Duration::default());
    let route = Route {
        name: "default".to_owned(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
            ..Default::default()
        }),
        decorator: Some(Decorator {
            operation,
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster.clone())),
            timeout: zero(),
            max_stream_duration: Some(route_action::MaxStreamDuration {
                max_stream_duration: zero(),
                grpc_timeout_header_max: zero(),
                ..Default::default()
            }),
            retry_policy: retry,
            ..Default::default()
        })),
        ..Default::default()
    };
    let routes = RouteConfiguration {
        name: cluster,
        validate_clusters: Some(BoolValue { value: false }),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{service_port}"),
            domains: vec!["*".to_owned()],
            routes: vec![route],
            ..Default::default()
        }],
        ..Default::default()
    };
    let uuid = UuidRequestIdConfig {
        use_request_id_for_trace_sampling: Some(BoolValue { value: true }),
        ..Default::default()
    };
    let hcm = HttpConnectionManager {
        stat_prefix,
        route_specifier: Some(RouteSpecifier::RouteConfig(routes)),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".to_owned(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&Router::default()))),
            ..Default::default()
        }],
        http2_protocol_options: http2.then(Default::default),
        server_name: "istio-envoy".to_owned(),
        use_remote_address: Some(BoolValue { value: false }),
        forward_client_cert_details: ForwardClientCertDetails::AppendForward as i32,
        set_current_client_cert_details: Some(SetCurrentClientCertDetails {
            subject: Some(BoolValue { value: true }),
            dns: true,
            uri: true,
            ..Default::default()
        }),
        normalize_path: Some(BoolValue { value: true }),
        path_with_escaped_slashes_action: PathWithEscapedSlashesAction::KeepUnchanged as i32,
        proxy_100_continue: true,
        stream_idle_timeout: zero(),
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_owned(),
            ..Default::default()
        }],
        request_id_extension: Some(RequestIdExtension {
            typed_config: Some(any(&uuid)),
        }),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.http_connection_manager".to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
    }
}

/// istiod's default cipher suites for Istio mTLS (`SupportedCiphers`).
const CIPHER_SUITES: [&str; 6] = [
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-GCM-SHA256",
];

/// The server side of Istio mTLS (istiod's `BuildInboundTLS`): the workload certificate and the root
/// from the agent's SDS, a client certificate of the mesh's trust domains required. HTTP chains offer
/// `h2` and `http/1.1`; TCP chains also `istio-peer-exchange`.
fn mtls_socket(http: bool, trust_domains: &[&str]) -> TransportSocket {
    let alpn: &[&str] = if http {
        &["h2", "http/1.1"]
    } else {
        &["istio-peer-exchange", "h2", "http/1.1"]
    };
    let common = CommonTlsContext {
        tls_params: Some(TlsParameters {
            tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
            tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
            cipher_suites: CIPHER_SUITES.map(str::to_owned).to_vec(),
            ..Default::default()
        }),
        alpn_protocols: alpn.iter().map(|a| (*a).to_owned()).collect(),
        tls_certificate_sds_secret_configs: vec![cds::sds(cds::WORKLOAD_CERT)],
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    #[allow(deprecated)] // istiod's field: any SAN with the trust domain's prefix
                    match_subject_alt_names: trust_domains
                        .iter()
                        .map(|td| StringMatcher {
                            match_pattern: Some(MatchPattern::Prefix(format!("spiffe://{td}/"))),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(cds::sds(cds::ROOT_CERT)),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let ctx = DownstreamTlsContext {
        common_tls_context: Some(common),
        require_client_certificate: Some(BoolValue { value: true }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    }
}

/// Which inspectors a destination port's chains need.
#[derive(Debug, Clone, Copy, Default)]
struct Inspect {
    tls: bool,
    http: bool,
}

/// istiod's `populateListenerFilters`: the original destination, then the TLS inspector if some chain
/// matches `tls` and the HTTP inspector if some chain matches a plaintext HTTP ALPN, each disabled on
/// the ports (0: no port match) whose chains do not need it.
fn listener_filters(chains: &[FilterChain]) -> Vec<ListenerFilter> {
    let mut ports: BTreeMap<u32, Inspect> = BTreeMap::new();
    for m in chains.iter().filter_map(|c| c.filter_chain_match.as_ref()) {
        let port = m.destination_port.as_ref().map_or(0, |p| p.value);
        let i = ports.entry(port).or_default();
        i.tls |= m.transport_protocol == "tls";
        i.http |= m
            .application_protocols
            .iter()
            .any(|a| a == "http/1.1" || a == "h2c");
    }
    let mut filters = vec![listener_filter(
        "envoy.filters.listener.original_dst",
        any(&OriginalDst::default()),
        None,
    )];
    if ports.values().any(|i| i.tls) {
        let default = ports.get(&0).is_some_and(|i| i.tls);
        // On by default: off where no chain needs it; off by default: on only where one does.
        let listed: Vec<u32> = ports
            .iter()
            .filter(|(p, i)| **p != 0 && i.tls != default)
            .map(|(p, _)| *p)
            .collect();
        let disabled = match (listed.is_empty(), default) {
            (true, _) => None,
            (false, true) => Some(excluding(&listed)),
            (false, false) => Some(ListenerFilterChainMatchPredicate {
                rule: Some(Rule::NotMatch(Box::new(excluding(&listed)))),
            }),
        };
        let inspector = TlsInspector {
            initial_read_buffer_size: Some(UInt32Value { value: 512 }),
            ..Default::default()
        };
        filters.push(listener_filter(
            "envoy.filters.listener.tls_inspector",
            any(&inspector),
            disabled,
        ));
    }
    if ports.values().any(|i| i.http) {
        let off: Vec<u32> = ports.iter().filter(|(_, i)| !i.http).map(|(p, _)| *p).collect();
        let disabled = (!off.is_empty()).then(|| excluding(&off));
        filters.push(listener_filter(
            "envoy.filters.listener.http_inspector",
            any(&HttpInspector::default()),
            disabled,
        ));
    }
    filters
}

fn listener_filter(
    name: &str,
    config: envoy_types::pb::google::protobuf::Any,
    filter_disabled: Option<ListenerFilterChainMatchPredicate>,
) -> ListenerFilter {
    ListenerFilter {
        name: name.to_owned(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(config)),
        filter_disabled,
    }
}

/// A predicate matching connections to any of `ports` (istiod's `listenerPredicateExcludePorts`).
fn excluding(ports: &[u32]) -> ListenerFilterChainMatchPredicate {
    let mut rules: Vec<ListenerFilterChainMatchPredicate> = ports
        .iter()
        .map(|p| {
            let start = i32::try_from(*p).unwrap_or(i32::MAX);
            ListenerFilterChainMatchPredicate {
                rule: Some(Rule::DestinationPortRange(Int32Range {
                    start,
                    end: start.saturating_add(1),
                })),
            }
        })
        .collect();
    match rules.len() {
        1 => rules.remove(0),
        _ => ListenerFilterChainMatchPredicate {
            rule: Some(Rule::OrMatch(MatchSet { rules })),
        },
    }
}

/// What a listener or cluster of this module depends on besides its name and the snapshot: the
/// proxy's addresses, cluster and labels (its service targets and PeerAuthentication).
pub(super) fn view_key(base: &Arc<str>, proxy: &Proxy) -> Arc<str> {
    // JSON: no two label sets spell the same key.
    let labels = serde_json::to_string(&proxy.labels).unwrap_or_default();
    let ips: Vec<String> = proxy.ips.iter().map(IpAddr::to_string).collect();
    format!(
        "{base}|inbound|{}|{}|{labels}",
        ips.join(","),
        proxy.cluster_id.as_deref().unwrap_or("")
    )
    .into()
}

#[cfg(test)]
#[path = "virtual_inbound_tests.rs"]
mod tests;
