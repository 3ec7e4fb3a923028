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
                ApiConfigSource, ApiVersion, ConfigSource, GrpcService, Metadata, TransportSocket,
                api_config_source::ApiType, config_source::ConfigSourceSpecifier, grpc_service,
                transport_socket,
            },
        },
        extensions::transport_sockets::{
            raw_buffer::v3::RawBuffer,
            tls::v3::{
                CertificateProviderPluginInstance, CertificateValidationContext, CommonTlsContext,
                SdsSecretConfig, SubjectAltNameMatcher, TlsParameters, UpstreamTlsContext,
                common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
                subject_alt_name_matcher::SanType,
                tls_parameters::TlsProtocol,
            },
        },
        r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern},
    },
    google::protobuf::{Duration, ListValue, Struct, Value, value::Kind},
};

use super::{
    ads_source, any,
    cluster_policy::{Client, UpstreamTls},
    eds::strings,
};
use crate::{
    istio::{
        ObjectRef,
        destination_rule::{ClientTlsSettings, TlsMode},
    },
    model::Service,
};

/// The certificate-provider / SDS name of the workload certificate.
pub const WORKLOAD_CERT: &str = "default";
/// The certificate-provider / SDS name of the mesh root.
pub const ROOT_CERT: &str = "ROOTCA";
/// The istio-agent's bootstrap cluster serving SDS to a sidecar.
const SDS_CLUSTER: &str = "sds-grpc";
/// The sidecar's original-destination cluster for traffic to no known service.
pub const PASSTHROUGH: &str = "PassthroughCluster";

/// `outbound|<port>||<hostname>` (istiod's `BuildSubsetKey` without a subset).
pub fn cluster_name(port: u16, hostname: &str) -> String {
    format!("outbound|{port}||{hostname}")
}

/// `outbound_.<port>_._.<hostname>` (istiod's `BuildDNSSrvSubsetKey`): the SNI a sidecar sends with
/// Istio mTLS, and the name of the east-west gateway's cluster that SNI is routed to.
pub fn sni_name(port: u16, hostname: &str) -> String {
    format!("outbound_.{port}_._.{hostname}")
}

/// What a cluster name means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRef<'a> {
    /// `outbound|<port>||<hostname>`: a service port, for sidecars, gRPC and gateways.
    Outbound {
        /// Service port.
        port: u16,
        /// Service host name.
        hostname: &'a str,
    },
    /// `outbound_.<port>_._.<hostname>`: an east-west gateway's SNI-DNAT cluster (local mTLS endpoints).
    SniDnat {
        /// Service port.
        port: u16,
        /// Service host name.
        hostname: &'a str,
    },
}

impl<'a> ClusterRef<'a> {
    /// Parses a cluster name; `None` for names meshd does not build (subsets, inbound, …).
    pub fn parse(name: &'a str) -> Option<Self> {
        if let Some(rest) = name.strip_prefix("outbound|") {
            let (port, hostname) = rest.split_once("||")?;
            return Some(Self::Outbound {
                port: port.parse().ok()?,
                hostname,
            });
        }
        let rest = name.strip_prefix("outbound_.")?;
        let (port, hostname) = rest.split_once("_._.")?;
        Some(Self::SniDnat {
            port: port.parse().ok()?,
            hostname,
        })
    }
}

/// The EDS cluster `name` over ADS, before any policy ([`cluster_policy::apply`]).
pub fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads_source()),
            service_name: name.to_owned(),
        }),
        ..Default::default()
    }
}

/// Secures `c`'s upstream connections as `tls` says. gRPC gets certificate-provider instances
/// (`default` for its certificate, `ROOTCA` for the root; the bootstrap's `certificate_providers`),
/// Envoy SDS secrets from the istio-agent; auto-mTLS is Envoy's transport-socket matches on the
/// endpoints' `tlsMode` (gRPC does not evaluate those).
pub fn apply_tls(c: &mut Cluster, tls: &UpstreamTls, client: Client) {
    match (tls, client) {
        (UpstreamTls::None, _) => {}
        (UpstreamTls::IstioMutual { sans, .. }, Client::Grpc) => {
            c.transport_socket = Some(tls_socket(provider_tls(sans), String::new()));
        }
        (UpstreamTls::IstioMutual { sans, sni }, _) => {
            c.transport_socket = Some(tls_socket(sds_tls(sans), sni.clone()));
        }
        (UpstreamTls::Auto { sans, sni }, _) => {
            c.transport_socket_matches = vec![
                TransportSocketMatch {
                    name: "tlsMode-istio".to_owned(),
                    r#match: Some(strings(&[("tlsMode", "istio")])),
                    transport_socket: Some(tls_socket(sds_tls(sans), sni.clone())),
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
        (UpstreamTls::Originate(t), _) => {
            c.transport_socket = Some(tls_socket(originate_tls(t), t.sni.clone()));
        }
    }
}

/// `metadata.filter_metadata.istio` as istiod writes it (`AddConfigInfoMetadata`,
/// `AddSubsetToMetadata`, telemetry's `services`): the service, and the DestinationRule and subset
/// the cluster was built from (what `/debug/config_dump` shows).
pub fn istio_metadata(service: &Service, rule: Option<&ObjectRef>, subset: Option<&str>) -> Metadata {
    let s = |v: &str| Value {
        kind: Some(Kind::StringValue(v.to_owned())),
    };
    let svc = Struct {
        fields: [
            ("host", s(&service.hostname)),
            ("name", s(&service.name)),
            ("namespace", s(&service.namespace)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    };
    let mut fields = std::collections::BTreeMap::from([(
        "services".to_owned(),
        Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![Value {
                    kind: Some(Kind::StructValue(svc)),
                }],
            })),
        },
    )]);
    if let Some(r) = rule {
        let config = format!(
            "/apis/networking.istio.io/v1/namespaces/{}/destination-rule/{}",
            r.namespace, r.name
        );
        fields.insert("config".to_owned(), s(&config));
    }
    if let Some(subset) = subset {
        fields.insert("subset".to_owned(), s(subset));
    }
    Metadata {
        filter_metadata: [(
            "istio".to_owned(),
            Struct {
                fields: fields.into_iter().collect(),
            },
        )]
        .into(),
        ..Default::default()
    }
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
fn provider_tls(sans: &[String]) -> CommonTlsContext {
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
fn sds_tls(sans: &[String]) -> CommonTlsContext {
    CommonTlsContext {
        tls_certificate_sds_secret_configs: vec![sds(WORKLOAD_CERT)],
        validation_context_type: Some(ValidationContextType::CombinedValidationContext(
            CombinedCertificateValidationContext {
                default_validation_context: Some(CertificateValidationContext {
                    match_typed_subject_alt_names: san_matchers(sans),
                    ..Default::default()
                }),
                validation_context_sds_secret_config: Some(sds(ROOT_CERT)),
                ..Default::default()
            },
        )),
        alpn_protocols: vec!["istio-peer-exchange".to_owned(), "istio".to_owned()],
        tls_params: Some(tls_1_2_to_1_3()),
        ..Default::default()
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
fn originate_tls(t: &ClientTlsSettings) -> CommonTlsContext {
    let mutual = t.mode == TlsMode::Mutual;
    let (cert, root) = if t.credential_name.is_empty() {
        let ca = if t.ca_certificates.is_empty() { "system" } else { &t.ca_certificates };
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
