//! CDS: one EDS cluster per service port, `outbound|<port>||<hostname>`, plus the sidecar's
//! `PassthroughCluster` and an east-west gateway's SNI-DNAT clusters `outbound_.<port>_._.<hostname>`.
//!
//! Owns: the cluster shape and its upstream TLS. Secure naming pins the service's SPIFFE identities
//! as URI SANs. Proxyless gRPC gets a plain `transport_socket` with certificate-provider instances
//! (`default` for its certificate, `ROOTCA` for the root; the bootstrap's `certificate_providers`)
//! when every endpoint takes Istio mTLS, because gRPC does not evaluate transport-socket matches.
//! Envoy sidecars get transport-socket matches on the endpoints' `tlsMode` with SDS secrets
//! (`default`, `ROOTCA`) from the istio-agent's `sds-grpc` cluster, and the SNI
//! `outbound_.<port>_._.<hostname>` that lets a remote network's east-west gateway route the
//! connection without terminating it. Does NOT: DestinationRule
//! policies, subsets, outlier detection or circuit breakers.

use std::{collections::BTreeSet, sync::Arc};

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
                ApiConfigSource, ApiVersion, ConfigSource, GrpcService, TransportSocket,
                api_config_source::ApiType, config_source::ConfigSourceSpecifier, grpc_service,
                transport_socket,
            },
        },
        extensions::transport_sockets::{
            raw_buffer::v3::RawBuffer,
            tls::v3::{
                CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
                SdsSecretConfig, SubjectAltNameMatcher, UpstreamTlsContext,
                common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                subject_alt_name_matcher::SanType,
            },
        },
        r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
    },
    google::protobuf::Duration,
};

use super::{Context, Target, ads_source, any, eds::strings, parse_cluster};
use crate::{
    model::TlsMode,
    xds::{ProxyKind, XdsType, resource::Resource},
};

/// The certificate-provider / SDS name of the workload certificate.
pub const WORKLOAD_CERT: &str = "default";
/// The certificate-provider / SDS name of the mesh root.
pub const ROOT_CERT: &str = "ROOTCA";
/// The istio-agent's bootstrap cluster serving SDS to a sidecar.
const SDS_CLUSTER: &str = "sds-grpc";
/// The sidecar's original-destination cluster for traffic to no known service.
pub const PASSTHROUGH: &str = "PassthroughCluster";

/// How a cluster's upstream connections are secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamTls {
    /// Plaintext only.
    None,
    /// Proxyless gRPC: every endpoint takes Istio mTLS; certificate-provider instances.
    GrpcMutual,
    /// Sidecar: Istio mTLS to endpoints labelled `tlsMode: istio`, plaintext to the rest.
    SidecarAuto,
}

/// `outbound|<port>||<hostname>` (istiod's `BuildSubsetKey` without a subset).
pub fn cluster_name(port: u16, hostname: &str) -> String {
    subset_cluster_name(port, "", hostname)
}

/// `outbound|<port>|<subset>|<hostname>`: a DestinationRule subset's cluster (istiod's `BuildSubsetKey`).
pub fn subset_cluster_name(port: u16, subset: &str, hostname: &str) -> String {
    format!("outbound|{port}|{subset}|{hostname}")
}

/// `outbound_.<port>_._.<hostname>` (istiod's `BuildDNSSrvSubsetKey`): the SNI a sidecar sends with
/// Istio mTLS, and the name of the east-west gateway's cluster that SNI is routed to.
pub fn sni_name(port: u16, hostname: &str) -> String {
    subset_sni_name(port, "", hostname)
}

/// `outbound_.<port>_.<subset>_.<hostname>`: [`sni_name`] of a subset cluster.
pub fn subset_sni_name(port: u16, subset: &str, hostname: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{hostname}")
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

/// Every cluster name a proxy's wildcard CDS lists.
pub(super) fn all_names(ctx: &Context) -> BTreeSet<Arc<str>> {
    let mut names: BTreeSet<Arc<str>> = ctx
        .ports()
        .map(|(s, p)| cluster_name(p.port, &s.hostname).into())
        .collect();
    if ctx.proxy.kind == ProxyKind::Sidecar {
        names.insert(PASSTHROUGH.into());
    }
    if ctx.proxy.is_east_west_gateway() {
        names.extend(ctx.ports().map(|(s, p)| sni_name(p.port, &s.hostname).into()));
    }
    names
}

/// What a cluster depends on besides its name: which clusters use mTLS depends on the endpoints the
/// view sees (gateways are mTLS).
pub(super) fn view_key(ctx: &Context) -> Arc<str> {
    format!(
        "{}|{}|{}",
        ctx.kind_name(),
        ctx.view.network.as_deref().unwrap_or(""),
        ctx.requested_networks()
    )
    .into()
}

/// The cluster `name` for the proxy; `None` when it does not exist.
pub(super) fn build(ctx: &Context, name: Arc<str>) -> Option<Resource> {
    if &*name == PASSTHROUGH && ctx.proxy.kind == ProxyKind::Sidecar {
        return Some(Resource::encode(XdsType::Cluster, name, &passthrough_cluster()));
    }
    let Target {
        service,
        port,
        sni_dnat,
        ..
    } = parse_cluster(ctx.mesh, &name)?;
    if sni_dnat {
        return ctx
            .proxy
            .is_east_west_gateway()
            .then(|| Resource::encode(XdsType::Cluster, name.clone(), &sni_dnat_cluster(&name)));
    }
    let endpoints = ctx.endpoints.endpoints(ctx.mesh, service, port, ctx.view);
    // Secure naming pins every workload identity of the service, including those behind gateways.
    let mut identities = service.service_accounts.clone();
    identities.extend(
        ctx.mesh
            .endpoints(service)
            .filter_map(|e| e.service_account.clone()),
    );
    let mtls = endpoints.iter().filter(|e| e.tls_mode == TlsMode::Istio).count();
    let tls = match ctx.proxy.kind {
        ProxyKind::Grpc if mtls > 0 && mtls == endpoints.len() => UpstreamTls::GrpcMutual,
        ProxyKind::Sidecar | ProxyKind::Router if mtls > 0 => UpstreamTls::SidecarAuto,
        _ => UpstreamTls::None,
    };
    Some(Resource::encode(
        XdsType::Cluster,
        name.clone(),
        &eds_cluster(&name, tls, &identities, &sni_name(port.port, &service.hostname)),
    ))
}

/// An east-west gateway's cluster for one SNI: EDS over the local network's mTLS endpoints; no
/// transport socket, since the client's mTLS passes through untouched.
pub fn sni_dnat_cluster(name: &str) -> Cluster {
    eds_cluster(name, UpstreamTls::None, &BTreeSet::new(), "")
}

/// An EDS cluster over ADS, round robin. `sni` is sent with Istio mTLS (sidecars), so that an east-west
/// gateway can route the connection without terminating it.
pub fn eds_cluster(name: &str, tls: UpstreamTls, identities: &BTreeSet<Arc<str>>, sni: &str) -> Cluster {
    let mut cluster = Cluster {
        name: name.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads_source()),
            service_name: name.to_owned(),
        }),
        lb_policy: LbPolicy::RoundRobin as i32,
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        ..Default::default()
    };
    match tls {
        UpstreamTls::None => {}
        UpstreamTls::GrpcMutual => {
            cluster.transport_socket = Some(tls_socket(provider_tls(identities), String::new()));
        }
        UpstreamTls::SidecarAuto => {
            cluster.transport_socket_matches = vec![
                TransportSocketMatch {
                    name: "tlsMode-istio".to_owned(),
                    r#match: Some(strings(&[("tlsMode", "istio")])),
                    transport_socket: Some(tls_socket(sds_tls(identities), sni.to_owned())),
                },
                TransportSocketMatch {
                    name: "tlsMode-disabled".to_owned(),
                    r#match: Some(Default::default()),
                    transport_socket: Some(TransportSocket {
                        name: "envoy.transport_sockets.raw_buffer".to_owned(),
                        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&RawBuffer {}))),
                    }),
                },
            ];
        }
    }
    cluster
}

/// The sidecar's catch-all: forwards to the original destination.
pub fn passthrough_cluster() -> Cluster {
    Cluster {
        name: PASSTHROUGH.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32)),
        lb_policy: LbPolicy::ClusterProvided as i32,
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
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
fn provider_tls(identities: &BTreeSet<Arc<str>>) -> CommonTlsContext {
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
                match_typed_subject_alt_names: san_matchers(identities),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// Sidecar: SDS secrets from the agent, as istiod configures them; the SAN matchers are the default
/// part of a combined validation context whose root comes from SDS.
fn sds_tls(identities: &BTreeSet<Arc<str>>) -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_sds_secret_configs: vec![sds(WORKLOAD_CERT)],
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: san_matchers(identities),
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(sds(ROOT_CERT)),
                ..Default::default()
            },
        )),
        alpn_protocols: vec!["istio-peer-exchange".to_owned(), "istio".to_owned()],
        ..Default::default()
    }
}

fn sds(name: &str) -> SdsSecretConfig {
    SdsSecretConfig {
        name: name.to_owned(),
        sds_config: Some(ConfigSource {
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

fn san_matchers(identities: &BTreeSet<Arc<str>>) -> Vec<SubjectAltNameMatcher> {
    identities
        .iter()
        .map(|id| SubjectAltNameMatcher {
            san_type: SanType::Uri as i32,
            matcher: Some(StringMatcher {
                match_pattern: Some(MatchPattern::Exact(id.to_string())),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_with_and_without_subsets() {
        let h = "reviews.ns.svc.cluster.local";
        assert_eq!(
            cluster_name(9080, h),
            "outbound|9080||reviews.ns.svc.cluster.local"
        );
        assert_eq!(
            subset_sni_name(9080, "v1", h),
            "outbound_.9080_.v1_.reviews.ns.svc.cluster.local"
        );
        assert_eq!(
            sni_name(9080, h),
            "outbound_.9080_._.reviews.ns.svc.cluster.local"
        );
        for (subset, sni) in [("", false), ("v1", false), ("", true), ("v2", true)] {
            let name = if sni {
                subset_sni_name(9080, subset, h)
            } else {
                subset_cluster_name(9080, subset, h)
            };
            let want = if sni {
                ClusterRef::SniDnat {
                    port: 9080,
                    subset,
                    hostname: h,
                }
            } else {
                ClusterRef::Outbound {
                    port: 9080,
                    subset,
                    hostname: h,
                }
            };
            assert_eq!(ClusterRef::parse(&name), Some(want), "{name}");
        }
        for bad in [
            "outbound|x||h",
            "outbound|80|v1|",
            "inbound|80||h",
            "outbound|80",
            "outbound_.80_.h",
        ] {
            assert_eq!(ClusterRef::parse(bad), None, "{bad}");
        }
    }
}
