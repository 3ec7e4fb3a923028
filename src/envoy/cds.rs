//! CDS: per service port the EDS cluster `outbound|<port>||<hostname>` and one
//! `outbound|<port>|<subset>|<hostname>` per subset of the DestinationRule the proxy gets, the
//! sidecar's `PassthroughCluster`, and an east-west gateway's SNI-DNAT clusters
//! `outbound_.<port>_.<subset>_.<hostname>`.
//!
//! Owns: which clusters exist for a proxy, the cluster shape, its metadata and its TLS sockets.
//! Secure naming pins the service's SPIFFE identities as URI SANs. Proxyless gRPC gets a plain
//! `transport_socket` with certificate-provider instances (`default` for its certificate, `ROOTCA` for
//! the root; the bootstrap's `certificate_providers`) only when the rule says `ISTIO_MUTUAL`, as
//! istiod's gRPC generator. Envoy gets auto-mTLS (transport-socket matches on the endpoints'
//! `tlsMode`) unless the rule or PeerAuthentication says otherwise, with SDS secrets (`default`,
//! `ROOTCA`) from the istio-agent's `sds-grpc` cluster and the SNI `outbound_.<port>_.<subset>_.<host>`
//! that lets a remote network's east-west gateway route the connection without terminating it. The
//! rule's policy fields are [`cluster_policy`]'s; a sidecar's inbound clusters are [`virtual_inbound`]'s.
//! Does NOT: endpoints (EDS).

use std::{
    collections::BTreeSet,
    hash::BuildHasher,
    sync::{Arc, LazyLock},
};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{
                    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig, LbPolicy, TransportSocketMatch,
                },
            },
            core::v3::{
                ApiConfigSource, ApiVersion, ConfigSource, GrpcService, Http1ProtocolOptions,
                Http2ProtocolOptions, HttpProtocolOptions as CommonHttpProtocolOptions, TransportSocket,
                api_config_source::ApiType, config_source::ConfigSourceSpecifier, grpc_service,
                transport_socket,
            },
        },
        extensions::{
            transport_sockets::{
                raw_buffer::v3::RawBuffer,
                tls::v3::{
                    CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
                    SdsSecretConfig, SubjectAltNameMatcher, TlsParameters, UpstreamTlsContext,
                    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                    subject_alt_name_matcher::SanType,
                    tls_parameters::TlsProtocol,
                },
            },
            upstreams::http::v3::{
                HttpProtocolOptions,
                http_protocol_options::{UpstreamProtocolOptions, UseDownstreamHttpConfig},
            },
        },
        r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
    },
    google::protobuf::{Any, Duration},
};

use prost::Message;

use super::{
    Context, Mesh, Target, ads_source, any, cluster_discovery,
    cluster_meta::IstioMeta,
    cluster_policy::{self, Client, FieldNote, TlsContext, UpstreamProtocol, UpstreamTls, upstream_tls},
    eds::strings,
    envoy_ads_source, parse_cluster, virtual_inbound,
};
use crate::{
    envoy::{Proxy, ProxyKind, XdsType, resource::Resource},
    istio::{
        destination_rule::{ClientTlsSettings, TlsMode},
        peer_authentication::MtlsMode,
    },
    model::{self, Service, ServicePort},
    traffic::MergedRule,
};

/// The certificate-provider / SDS name of the workload certificate.
pub const WORKLOAD_CERT: &str = "default";
/// The certificate-provider / SDS name of the mesh root.
pub const ROOT_CERT: &str = "ROOTCA";
/// The istio-agent's bootstrap cluster serving SDS to a sidecar.
const SDS_CLUSTER: &str = "sds-grpc";
/// The sidecar's original-destination cluster for traffic to no known service.
pub const PASSTHROUGH: &str = "PassthroughCluster";
/// The sidecar's cluster with no endpoints: where `REGISTRY_ONLY` sends traffic to no known service.
pub const BLACKHOLE: &str = "BlackHoleCluster";

/// `outbound|<port>||<hostname>` (istiod's `BuildSubsetKey` without a subset).
pub fn cluster_name(port: u16, hostname: &str) -> String {
    subset_cluster_name(port, "", hostname)
}

/// `outbound|<port>|<subset>|<hostname>`: a DestinationRule subset's cluster (istiod's `BuildSubsetKey`).
pub fn subset_cluster_name(port: u16, subset: &str, hostname: &str) -> String {
    join_name(["outbound|", "|", "|"], port, subset, hostname)
}

/// `<p0><port><p1><subset><p2><hostname>` in one allocation of the exact size (`format!` grows its
/// buffer: these names are built for every cluster of every CDS miss).
fn join_name(parts: [&str; 3], port: u16, subset: &str, hostname: &str) -> String {
    let mut digits = [0u8; 5];
    let mut n = port;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let port = &digits[at..];
    let len = parts.iter().map(|p| p.len()).sum::<usize>() + port.len() + subset.len() + hostname.len();
    let mut s = String::with_capacity(len);
    s.push_str(parts[0]);
    port.iter().for_each(|d| s.push(char::from(*d)));
    s.push_str(parts[1]);
    s.push_str(subset);
    s.push_str(parts[2]);
    s.push_str(hostname);
    s
}

/// `outbound_.<port>_._.<hostname>` (istiod's `BuildDNSSrvSubsetKey`): the SNI a sidecar sends with
/// Istio mTLS, and the name of the east-west gateway's cluster that SNI is routed to.
pub fn sni_name(port: u16, hostname: &str) -> String {
    subset_sni_name(port, "", hostname)
}

/// `outbound_.<port>_.<subset>_.<hostname>`: [`sni_name`] of a subset cluster.
pub fn subset_sni_name(port: u16, subset: &str, hostname: &str) -> String {
    join_name(["outbound_.", "_.", "_."], port, subset, hostname)
}

/// What a cluster name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRef<'a> {
    /// `outbound|<port>|<subset>|<hostname>`: a service port, for sidecars, gRPC and gateways.
    Outbound {
        /// Service port.
        port: u16,
        /// DestinationRule subset; empty for the whole service.
        subset: &'a str,
        /// Service host name.
        hostname: &'a str,
    },
    /// `outbound_.<port>_.<subset>_.<hostname>`: an east-west gateway's SNI-DNAT cluster (local mTLS
    /// endpoints).
    SniDnat {
        /// Service port.
        port: u16,
        /// DestinationRule subset; empty for the whole service.
        subset: &'a str,
        /// Service host name.
        hostname: &'a str,
    },
}

impl<'a> ClusterRef<'a> {
    /// Parses a cluster name; `None` for names meshd does not build (inbound, …).
    pub fn parse(name: &'a str) -> Option<Self> {
        if let Some(rest) = name.strip_prefix("outbound|") {
            let mut parts = rest.splitn(3, '|');
            let (port, subset, hostname) = (parts.next()?, parts.next()?, parts.next()?);
            if hostname.is_empty() {
                return None;
            }
            return Some(Self::Outbound {
                port: port.parse().ok()?,
                subset,
                hostname,
            });
        }
        let rest = name.strip_prefix("outbound_.")?;
        let (port, rest) = rest.split_once("_.")?;
        let (subset, hostname) = rest.split_once("_.")?;
        Some(Self::SniDnat {
            port: port.parse().ok()?,
            subset,
            hostname,
        })
    }

    /// The service host name it names.
    pub fn hostname(&self) -> &'a str {
        match self {
            Self::Outbound { hostname, .. } | Self::SniDnat { hostname, .. } => hostname,
        }
    }
}

/// Every cluster name a proxy's wildcard CDS lists: [`port_cluster_names`] of every service port, and
/// a sidecar's `PassthroughCluster`.
pub(super) fn all_names(ctx: &Context) -> BTreeSet<Arc<str>> {
    let mut names: BTreeSet<Arc<str>> = ctx
        .ports()
        .flat_map(|(s, p)| port_cluster_names(ctx.mesh, ctx.proxy, s, p.port))
        .map(Into::into)
        .collect();
    if ctx.proxy.kind == ProxyKind::Sidecar {
        names.insert(PASSTHROUGH.into());
        names.insert(BLACKHOLE.into());
        let targets = super::service_targets::service_targets(ctx.mesh, ctx.proxy);
        names.extend(virtual_inbound::cluster_names(&targets).map(Into::into));
    }
    names
}

/// The clusters of one service port for `proxy`: the default one and one per subset of the
/// DestinationRule it gets, and for an east-west gateway (or a gateway with an AUTO_PASSTHROUGH
/// server) their SNI-DNAT clusters (wildcard CDS, and the EDS names an endpoint change of the service
/// touches).
pub fn port_cluster_names(mesh: &dyn Mesh, proxy: &Proxy, service: &Service, port: u16) -> Vec<String> {
    let east_west = proxy.is_east_west_gateway()
        || (proxy.kind == ProxyKind::Router && super::gateway_servers::auto_passthrough(mesh, proxy));
    let subsets = rule_for(mesh, proxy, service)
        .into_iter()
        .flat_map(|r| r.rule.subsets.iter().map(|x| x.name.as_str()));
    let mut names = Vec::new();
    for subset in std::iter::once("").chain(subsets) {
        names.push(subset_cluster_name(port, subset, &service.hostname));
        if east_west {
            names.push(subset_sni_name(port, subset, &service.hostname));
        }
    }
    names
}

/// A cluster name's service, port and subset, and the DestinationRule the proxy gets for the service:
/// looked up once per cluster and generate call, for both [`view_key`] and [`build`].
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'m, 'n> {
    target: Target<'m, 'n>,
    rule: Option<&'m Arc<MergedRule>>,
}

/// Resolves cluster `name` for `proxy`; `None` when it names no service port.
pub fn resolve<'m, 'n>(mesh: &'m dyn Mesh, proxy: &Proxy, name: &'n str) -> Option<Resolved<'m, 'n>> {
    let target = parse_cluster(mesh, name)?;
    let rule = rule_for(mesh, proxy, target.service);
    Some(Resolved { target, rule })
}

/// What a cluster depends on besides its name and the snapshot: the proxy kind (`kind`, the type's
/// view) and the DestinationRule the proxy gets for the service (its objects and revisions), so
/// proxies that get the same rule share one encode whatever their namespace.
pub(super) fn view_key(resolved: Option<&Resolved>, kind: &Arc<str>) -> Arc<str> {
    match resolved.and_then(|r| r.rule) {
        Some(r) => format!("{kind}|{}", r.key).into(),
        None => kind.clone(),
    }
}

/// The cluster `name` for the proxy, `resolved` from it; `None` when it does not exist.
pub(super) fn build(ctx: &Context, name: Arc<str>, resolved: Option<Resolved>) -> Option<Resource> {
    if &*name == PASSTHROUGH && ctx.proxy.kind == ProxyKind::Sidecar {
        return Some(Resource::encode(XdsType::Cluster, name, &passthrough_cluster()));
    }
    if &*name == BLACKHOLE && ctx.proxy.kind == ProxyKind::Sidecar {
        return Some(Resource::encode(XdsType::Cluster, name, &blackhole_cluster()));
    }
    if ctx.proxy.kind == ProxyKind::Sidecar && virtual_inbound::is_inbound_cluster(&name) {
        let (c, meta) = virtual_inbound::cluster(ctx.mesh, ctx.proxy, &name)?;
        return Some(encode(name, &c, meta));
    }
    // Filled in place: a `Cluster` is over a kilobyte, and moving it out of the builder (three
    // copies) was 7% of a CDS miss.
    let mut c = Cluster::default();
    let (_, meta) = cluster_of(ctx.mesh, ctx.proxy, &name, resolved?, &mut c)?;
    Some(encode(name, &c, meta))
}

/// Encodes `c` (no metadata) and then its Istio metadata, written directly in key order (protobuf
/// fields may come in any order): prost writes maps in `HashMap` order, so equal clusters could differ
/// in bytes; these do not, and the version hashes them (foldhash with its fixed seed, the same version
/// across runs; SipHash was 3% of a miss).
fn encode(name: Arc<str>, c: &Cluster, meta: Option<IstioMeta>) -> Resource {
    let bare = c.encoded_len();
    let meta_len = meta.as_ref().map_or(0, IstioMeta::field_len);
    let mut r = Resource::write(XdsType::Cluster, name, bare + meta_len, |buf| {
        c.encode_raw(buf);
        if let Some(m) = &meta {
            m.encode_field(buf);
        }
    });
    r.version = foldhash::fast::FixedState::default().hash_one(r.value());
    r
}

/// The DestinationRule `proxy` gets for `service` (outbound).
pub fn rule_for<'m>(mesh: &'m dyn Mesh, proxy: &Proxy, service: &Service) -> Option<&'m Arc<MergedRule>> {
    mesh.traffic()
        .destination_rule(proxy.namespace.as_deref().unwrap_or(""), &proxy.labels, service)
}

/// A cluster as a proxy gets it, with what built it.
#[derive(Debug)]
pub struct Built<'m> {
    /// The cluster.
    pub cluster: Cluster,
    /// The DestinationRule that applied.
    pub rule: Option<&'m Arc<MergedRule>>,
    /// What this proxy's client does with each field of the rule it read.
    pub notes: Vec<FieldNote>,
}

/// Cluster `name` as `proxy` gets it (CDS encodes it, `explain` shows its notes); `None` when it does
/// not exist: an unknown service or port, a subset the proxy's rule does not define (istiod builds
/// only its rule's subsets), an SNI-DNAT cluster for anything but an east-west gateway.
pub fn cluster<'m>(mesh: &'m dyn Mesh, proxy: &Proxy, name: &str) -> Option<Built<'m>> {
    let mut cluster = Cluster::default();
    let ((rule, notes), meta) = cluster_of(mesh, proxy, name, resolve(mesh, proxy, name)?, &mut cluster)?;
    cluster.metadata = meta.map(|m| m.metadata());
    Some(Built { cluster, rule, notes })
}

/// [`cluster`] from what `name` resolved to, written into `c` (a default cluster); returns the rule
/// and notes of [`Built`] and the Istio metadata apart (CDS writes it as bytes).
#[allow(clippy::type_complexity)] // a private pair of what `cluster` and `build` each take
fn cluster_of<'m: 'n, 'n>(
    mesh: &'m dyn Mesh,
    proxy: &Proxy,
    name: &str,
    resolved: Resolved<'m, 'n>,
    c: &mut Cluster,
) -> Option<(
    (Option<&'m Arc<MergedRule>>, Vec<FieldNote>),
    Option<IstioMeta<'n>>,
)> {
    let Resolved {
        target:
            Target {
                service,
                port,
                subset,
                sni_dnat,
            },
        rule,
    } = resolved;
    // Listed only for an east-west gateway or one with an AUTO_PASSTHROUGH server
    // ([`port_cluster_names`]); the same for every router that asks.
    if sni_dnat && proxy.kind != ProxyKind::Router {
        return None;
    }
    let traffic = mesh.traffic();
    let subset = (!subset.is_empty()).then_some(subset);
    if let Some(s) = subset
        && rule.and_then(|r| r.subset(s)).is_none()
    {
        return None;
    }
    let policy = crate::traffic::effective(rule.map(|r| &r.rule), port.port, subset);
    let client = Client::of(proxy.kind);
    let settings = &traffic.settings.mesh;
    // The gateway passes the client's mTLS through its SNI-DNAT clusters: no TLS of their own.
    let (tls, tls_note) = if sni_dnat {
        (UpstreamTls::None, None)
    } else {
        // Secure naming pins every workload identity of the service, including those behind gateways.
        let mut identities = service.service_accounts.clone();
        // A service's endpoints mostly share one account: look before cloning.
        for sa in mesh
            .endpoints(service)
            .filter_map(|e| e.service_account().as_ref())
        {
            if !identities.contains(sa) {
                identities.insert(sa.clone());
            }
        }
        let sni = subset_sni_name(port.port, subset.unwrap_or(""), &service.hostname);
        let ctx = TlsContext {
            identities: &identities,
            sni: &sni,
            auto_mtls: settings.enable_auto_mtls
                && !service.mesh_external
                && traffic.peer_authn.namespace_mode(&service.namespace).mode != MtlsMode::Disable,
            rule_has_selector: rule.is_some_and(|r| r.selector.is_some()),
        };
        upstream_tls(policy.tls.as_ref(), client, &ctx)
    };
    eds_cluster(c, name, client);
    let mut notes = cluster_policy::apply(c, &policy, client, port.protocol, settings, &tls);
    notes.extend(tls_note);
    let discovery = cluster_discovery::of(proxy.kind, service);
    let subset_labels = subset.and_then(|s| rule?.subset(s)).map(|s| &s.labels);
    if !cluster_discovery::apply(c, discovery, mesh, proxy, service, port, subset_labels) {
        return None;
    }
    let original_dst =
        c.cluster_discovery_type == Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32));
    let tls = match tls {
        UpstreamTls::Auto { sans, sni } if original_dst => passthrough_mtls(mesh, service, port, sans, sni),
        tls => tls,
    };
    let upstream = cluster_policy::upstream_protocol(policy.connection_pool.as_ref(), port.protocol, client);
    apply_tls(c, &tls, client, upstream == UpstreamProtocol::Http2);
    let meta = (client != Client::Grpc).then(|| IstioMeta {
        service,
        rule: rule.and_then(|r| r.from.first()),
        subset,
        no_alpn_override: matches!(tls, UpstreamTls::Originate(_)),
        external: service.mesh_external,
    });
    Some(((rule, notes), meta))
}

/// Auto-mTLS on an original-destination cluster (a passthrough service, or a rule's `PASSTHROUGH`
/// load balancer), where Envoy has no endpoint metadata to match on: istiod's
/// `BestEffortInferServiceMTLSMode` turns it on only when the port has endpoints and every one of them
/// runs a sidecar, and then always (`applyUpstreamTLSSettings` keeps a plain socket, no matches);
/// otherwise plaintext. So the cluster follows the service's endpoints (a passthrough service's
/// endpoint change rebuilds and pushes its clusters: `xds::push`, `xds::cache`).
fn passthrough_mtls(
    mesh: &dyn Mesh,
    service: &Service,
    port: &ServicePort,
    sans: Vec<String>,
    sni: String,
) -> UpstreamTls {
    let mut on_port = mesh
        .endpoints(service)
        .filter(|e| e.ports.iter().any(|p| p.service_port_name == port.name))
        .peekable();
    let any = on_port.peek().is_some();
    if any && on_port.all(|e| e.tls_mode == model::TlsMode::Istio) {
        UpstreamTls::IstioMutual { sans, sni }
    } else {
        UpstreamTls::None
    }
}

/// Makes `c` (a default cluster) the EDS cluster `name` over ADS for `client`, before any policy
/// ([`cluster_policy::apply`]).
pub(super) fn eds_cluster(c: &mut Cluster, name: &str, client: Client) {
    let source = match client {
        Client::Grpc => ads_source(),
        Client::Sidecar | Client::Router => envoy_ads_source(),
    };
    c.name = name.to_owned();
    c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32));
    c.eds_cluster_config = Some(EdsClusterConfig {
        eds_config: Some(source),
        service_name: name.to_owned(),
    });
}

/// Auto-mTLS's transport-socket matches but the Istio socket itself (built once, cloned per cluster).
static AUTO_MTLS: LazyLock<[TransportSocketMatch; 2]> = LazyLock::new(|| {
    [
        TransportSocketMatch {
            name: "tlsMode-istio".to_owned(),
            r#match: Some(strings(&[("tlsMode", "istio")])),
            transport_socket: None,
        },
        TransportSocketMatch {
            name: "tlsMode-disabled".to_owned(),
            r#match: Some(Default::default()),
            transport_socket: Some(TransportSocket {
                name: "envoy.transport_sockets.raw_buffer".to_owned(),
                config_type: Some(transport_socket::ConfigType::TypedConfig(any(&RawBuffer {}))),
            }),
        },
    ]
});

/// Secures `c`'s upstream connections as `tls` says. gRPC gets certificate-provider instances
/// (`default` for its certificate, `ROOTCA` for the root; the bootstrap's `certificate_providers`),
/// Envoy SDS secrets from the istio-agent; auto-mTLS is Envoy's transport-socket matches on the
/// endpoints' `tlsMode` (gRPC does not evaluate those). An Envoy cluster speaking HTTP/2 (`h2`)
/// offers the `h2` ALPN, as istiod's `buildUpstreamClusterTLSContext`.
pub fn apply_tls(c: &mut Cluster, tls: &UpstreamTls, client: Client, h2: bool) {
    match (tls, client) {
        (UpstreamTls::None, _) => {}
        (UpstreamTls::IstioMutual { sans, .. }, Client::Grpc) => {
            c.transport_socket = Some(tls_socket(provider_tls(sans), String::new()));
        }
        (UpstreamTls::IstioMutual { sans, sni }, _) => {
            c.transport_socket = Some(sds_tls_socket(sans, sni, h2));
        }
        (UpstreamTls::Auto { sans, sni }, _) => {
            c.transport_socket_matches = vec![
                TransportSocketMatch {
                    transport_socket: Some(sds_tls_socket(sans, sni, h2)),
                    ..AUTO_MTLS[0].clone()
                },
                AUTO_MTLS[1].clone(),
            ];
        }
        (UpstreamTls::Originate(t), _) => {
            c.transport_socket = Some(tls_socket(originate_tls(t, h2), t.sni.clone()));
        }
    }
}

/// istiod's `BlackHoleCluster`: static, no endpoints, so every connection to it fails.
pub fn blackhole_cluster() -> Cluster {
    Cluster {
        name: BLACKHOLE.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        lb_policy: LbPolicy::RoundRobin as i32,
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        ..Default::default()
    }
}

/// The sidecar's catch-all: forwards to the original destination, as istiod's
/// `buildDefaultPassthroughCluster`: its circuit breakers (not Envoy's 1,024-connection limit) and
/// HTTP in the client's version with a 5-minute idle timeout.
pub fn passthrough_cluster() -> Cluster {
    let http = HttpProtocolOptions {
        common_http_protocol_options: Some(CommonHttpProtocolOptions {
            idle_timeout: Some(Duration {
                seconds: 300,
                nanos: 0,
            }),
            ..Default::default()
        }),
        upstream_protocol_options: Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(
            UseDownstreamHttpConfig {
                http_protocol_options: Some(Http1ProtocolOptions::default()),
                http2_protocol_options: Some(Http2ProtocolOptions::default()),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    Cluster {
        name: PASSTHROUGH.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32)),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        circuit_breakers: Some(cluster_policy::envoy_circuit_breakers()),
        typed_extension_protocol_options: [(cluster_policy::HTTP_PROTOCOL_OPTIONS.to_owned(), any(&http))]
            .into(),
        ..Default::default()
    }
}

fn tls_socket(common: CommonTlsContext, sni: String) -> TransportSocket {
    let ctx = UpstreamTlsContext {
        common_tls_context: Some(common),
        sni,
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&ctx))),
    }
}

/// gRPC: the new-style provider-instance fields (grpc-js-xds understands only these).
pub(super) fn provider_tls(sans: &[String]) -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_provider_instance: Some(CertificateProviderPluginInstance {
            instance_name: WORKLOAD_CERT.to_owned(),
            certificate_name: WORKLOAD_CERT.to_owned(),
        }),
        validation_context_type: Some(ValidationContextType::ValidationContext(
            CertificateValidationContext {
                ca_certificate_provider_instance: Some(CertificateProviderPluginInstance {
                    instance_name: WORKLOAD_CERT.to_owned(),
                    certificate_name: ROOT_CERT.to_owned(),
                }),
                match_typed_subject_alt_names: san_matchers(sans),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// Sidecar: SDS secrets from the agent, as istiod configures them; the SAN matchers are the default
/// part of a combined validation context whose root comes from SDS.
#[cfg(test)]
fn sds_tls(sans: &[String], h2: bool) -> CommonTlsContext {
    let mut common = SdsTls::common(h2);
    common.validation_context_type = Some(ValidationContextType::CombinedValidationContext(
        CombinedCertificateValidationContext {
            default_validation_context: Some(CertificateValidationContext {
                match_typed_subject_alt_names: san_matchers(sans),
                ..Default::default()
            }),
            ..SdsTls::root()
        },
    ));
    common
}

/// [`sds_tls`]'s socket, written as prost writes it, from the parts every cluster shares (encoded
/// once per ALPN list: the secrets, ALPN, TLS versions) and the cluster's SANs and SNI: building and
/// encoding the shared parts was most of the cost of a cluster.
fn sds_tls_socket(sans: &[String], sni: &str, h2: bool) -> TransportSocket {
    use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len, message};
    static PARTS: LazyLock<SdsTls> = LazyLock::new(|| SdsTls::new(false));
    static PARTS_H2: LazyLock<SdsTls> = LazyLock::new(|| SdsTls::new(true));
    let parts = if h2 { &*PARTS_H2 } else { &*PARTS };
    let sans = CertificateValidationContext {
        match_typed_subject_alt_names: san_matchers(sans),
        ..Default::default()
    };
    // CombinedCertificateValidationContext: the SANs (1), then the root (2).
    let combined = message::encoded_len(1, &sans) + parts.root.len();
    // CommonTlsContext in tag order: `tls_params` (1), the validation oneof (3..12, here 8), the rest.
    let common =
        parts.head.len() + key_len(8) + encoded_len_varint(combined as u64) + combined + parts.tail.len();
    let sni_len = if sni.is_empty() {
        0
    } else {
        key_len(2) + encoded_len_varint(sni.len() as u64) + sni.len()
    };
    let mut value = Vec::with_capacity(key_len(1) + encoded_len_varint(common as u64) + common + sni_len);
    encode_key(1, WireType::LengthDelimited, &mut value);
    encode_varint(common as u64, &mut value);
    value.extend_from_slice(&parts.head);
    encode_key(8, WireType::LengthDelimited, &mut value);
    encode_varint(combined as u64, &mut value);
    message::encode(1, &sans, &mut value);
    value.extend_from_slice(&parts.root);
    value.extend_from_slice(&parts.tail);
    if !sni.is_empty() {
        encode_key(2, WireType::LengthDelimited, &mut value);
        encode_varint(sni.len() as u64, &mut value);
        value.extend_from_slice(sni.as_bytes());
    }
    TransportSocket {
        name: "envoy.transport_sockets.tls".to_owned(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(Any {
            type_url: parts.type_url.clone(),
            value,
        })),
    }
}

/// The encoded parts of [`sds_tls`] that do not depend on the cluster.
struct SdsTls {
    /// `CommonTlsContext` fields before the validation context.
    head: Vec<u8>,
    /// `CommonTlsContext` fields after it.
    tail: Vec<u8>,
    /// `CombinedCertificateValidationContext.validation_context_sds_secret_config`.
    root: Vec<u8>,
    type_url: String,
}

impl SdsTls {
    fn new(h2: bool) -> Self {
        let common = Self::common(h2);
        let head = CommonTlsContext {
            tls_params: common.tls_params.clone(),
            ..Default::default()
        };
        let tail = CommonTlsContext {
            tls_params: None,
            ..common
        };
        Self {
            head: head.encode_to_vec(),
            tail: tail.encode_to_vec(),
            root: Self::root().encode_to_vec(),
            type_url: <UpstreamTlsContext as prost::Name>::type_url(),
        }
    }

    /// Everything but the validation context; `h2` adds the ALPN (istiod's `ALPNInMeshH2WithMxc`).
    fn common(h2: bool) -> CommonTlsContext {
        let alpn: &[&str] = if h2 {
            &["istio-peer-exchange", "istio", "h2"]
        } else {
            &["istio-peer-exchange", "istio"]
        };
        CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![sds(WORKLOAD_CERT)],
            alpn_protocols: alpn.iter().map(|a| (*a).to_owned()).collect(),
            tls_params: Some(tls_1_2_to_1_3()),
            ..Default::default()
        }
    }

    /// The root certificate from SDS.
    fn root() -> CombinedCertificateValidationContext {
        CombinedCertificateValidationContext {
            validation_context_sds_secret_config: Some(sds(ROOT_CERT)),
            ..Default::default()
        }
    }
}

/// istiod's `defaultUpstreamCommonTLSContext`: TLS 1.2 to 1.3.
fn tls_1_2_to_1_3() -> TlsParameters {
    TlsParameters {
        tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
        tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
        ..Default::default()
    }
}

/// `SIMPLE` / `MUTUAL` origination (istiod's `constructUpstreamTLS`): with `credentialName`, the
/// agent serves the secret (`kubernetes://<name>`, its CA as `<name>-cacert`); otherwise the files
/// named in the rule, through the agent's SDS (`file-cert:<cert>~<key>`, `file-root:<ca or system>`).
/// An HTTP/2 cluster (`h2`) offers only the `h2` ALPN.
fn originate_tls(t: &ClientTlsSettings, h2: bool) -> CommonTlsContext {
    let mutual = t.mode == TlsMode::Mutual;
    let (cert, root) = if t.credential_name.is_empty() {
        let ca = if t.ca_certificates.is_empty() {
            "system"
        } else {
            &t.ca_certificates
        };
        (
            format!("file-cert:{}~{}", t.client_certificate, t.private_key),
            format!("file-root:{ca}"),
        )
    } else {
        let name = format!("kubernetes://{}", t.credential_name);
        (name.clone(), format!("{name}-cacert"))
    };
    let validation = if t.insecure_skip_verify == Some(true) {
        ValidationContextType::ValidationContext(CertificateValidationContext::default())
    } else {
        ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
            default_validation_context: Some(CertificateValidationContext {
                #[allow(deprecated)] // istiod's field: SANs of any type, matched exactly
                match_subject_alt_names: t
                    .subject_alt_names
                    .iter()
                    .map(|san| StringMatcher {
                        match_pattern: Some(MatchPattern::Exact(san.clone())),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            validation_context_sds_secret_config: Some(sds(&root)),
            ..Default::default()
        })
    };
    CommonTlsContext {
        tls_certificate_sds_secret_configs: if mutual { vec![sds(&cert)] } else { vec![] },
        validation_context_type: Some(validation),
        tls_params: Some(tls_1_2_to_1_3()),
        alpn_protocols: if h2 { vec!["h2".to_owned()] } else { vec![] },
        ..Default::default()
    }
}

/// The agent's secret `name` over SDS. The workload certificate and root wait for the agent
/// (`initial_fetch_timeout: 0s`, as istiod); other secrets may not exist, and must not block the cluster.
pub(super) fn sds(name: &str) -> SdsSecretConfig {
    let wait = name == WORKLOAD_CERT || name == ROOT_CERT;
    SdsSecretConfig {
        name: name.to_owned(),
        sds_config: Some(ConfigSource {
            initial_fetch_timeout: wait.then(Duration::default),
            resource_api_version: ApiVersion::V3 as i32,
            config_source_specifier: Some(ConfigSourceSpecifier::ApiConfigSource(ApiConfigSource {
                api_type: ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: SDS_CLUSTER.to_owned(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                set_node_on_first_message_only: true,
                ..Default::default()
            })),
            ..Default::default()
        }),
    }
}

fn san_matchers(sans: &[String]) -> Vec<SubjectAltNameMatcher> {
    sans.iter()
        .map(|id| SubjectAltNameMatcher {
            san_type: SanType::Uri as i32,
            matcher: Some(StringMatcher {
                match_pattern: Some(MatchPattern::Exact(id.clone())),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
#[path = "cds_tests.rs"]
mod tests;
