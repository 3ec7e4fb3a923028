//! A DestinationRule's effective traffic policy → the fields of one outbound Cluster, per client kind,
//! as istiod's `applyTrafficPolicy` (`cluster_traffic_policy.go`, `cluster_tls.go`) writes them for
//! Envoy, and beyond istiod's gRPC generator for proxyless gRPC (which drops outlier detection and
//! circuit breakers): gRPC gets what grpcio and grpc-js implement, never what they NACK.
//!
//! Owns: the mapping and, next to every field it reads, a [`FieldNote`] saying whether this client
//! applies the field, applies a downgrade, or ignores it and why (what `explain` shows). The Cluster
//! and its notes come from the same code, so they cannot drift. Does NOT: names, EDS config, the
//! shape of TLS sockets ([`super::cds`]), or endpoints.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::{
            cluster::v3::{
                CircuitBreakers, Cluster, OutlierDetection,
                circuit_breakers::Thresholds,
                cluster::{
                    ClusterDiscoveryType, CommonLbConfig, DiscoveryType, LbConfig, LbPolicy,
                    LeastRequestLbConfig, MaglevLbConfig, RingHashLbConfig, RoundRobinLbConfig,
                    SlowStartConfig,
                    common_lb_config::{LocalityConfigSpecifier, LocalityWeightedLbConfig},
                },
            },
            core::v3::UpstreamHttpProtocolOptions,
        },
        r#type::v3::Percent,
    },
    google::protobuf::{UInt32Value, UInt64Value},
};
use serde::Serialize;

use super::{
    any,
    locality::{self, Mode, Off},
};
use crate::{
    config::MeshConfig,
    envoy::ProxyKind,
    istio::destination_rule::{
        ClientTlsSettings, ConnectionPoolSettings, H2UpgradePolicy, LoadBalancerSettings,
        OutlierDetection as Outlier, PortTrafficPolicy, SimpleLb, TlsMode,
    },
    model::Protocol,
};

/// Envoy's extension key for upstream HTTP protocol options.
pub const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
/// Envoy's (and istiod's) default minimum ring size.
const DEFAULT_RING_SIZE: u64 = 1024;
/// The largest ring grpcio accepts (a larger minimum is NACKed).
const GRPC_MAX_RING_SIZE: u64 = 8_388_608;

/// Which client a cluster is built for: what it can evaluate differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// An Envoy sidecar.
    Sidecar,
    /// An Envoy gateway.
    Router,
    /// Proxyless gRPC (grpcio, grpc-js).
    Grpc,
}

impl Client {
    /// The client of a proxy kind.
    pub fn of(kind: ProxyKind) -> Self {
        match kind {
            ProxyKind::Sidecar => Self::Sidecar,
            ProxyKind::Router => Self::Router,
            ProxyKind::Grpc => Self::Grpc,
        }
    }

    fn envoy(self) -> bool {
        self != Self::Grpc
    }
}

/// What one client does with one DestinationRule field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "effect")]
pub enum Effect {
    /// Sent and honoured.
    Applies,
    /// Sent as something this client accepts instead.
    Downgraded {
        /// What is sent.
        to: String,
    },
    /// Not honoured by this client.
    Ignored {
        /// Why.
        why: String,
    },
}

/// A DestinationRule field (its path in the rule's `trafficPolicy`) and what this client does with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldNote {
    /// `loadBalancer.simple`, `connectionPool.http.http2MaxRequests`, …
    pub field: &'static str,
    /// What the client does with it.
    #[serde(flatten)]
    pub effect: Effect,
}

fn note(field: &'static str, effect: Effect) -> FieldNote {
    FieldNote { field, effect }
}

fn applies(field: &'static str) -> FieldNote {
    note(field, Effect::Applies)
}

fn ignored(field: &'static str, why: &str) -> FieldNote {
    note(field, Effect::Ignored { why: why.to_owned() })
}

fn downgraded(field: &'static str, to: &str) -> FieldNote {
    note(field, Effect::Downgraded { to: to.to_owned() })
}

/// Applies `policy` to the EDS cluster `c` for `client`; `protocol` is the service port's (HTTP
/// protocol options only make sense on HTTP ports; HTTP/2 ones get HTTP/2 upstream), `mesh` gives the
/// defaults (connect timeout, locality load balancing), `tls` what [`upstream_tls`] chose (TLS
/// origination without SNI or SANs needs protocol options too).
pub fn apply(
    c: &mut Cluster,
    policy: &PortTrafficPolicy,
    client: Client,
    protocol: Protocol,
    mesh: &MeshConfig,
    tls: &UpstreamTls,
) -> Vec<FieldNote> {
    let mut notes = Vec::new();
    c.connect_timeout = Some(pb_duration(mesh.connect_timeout));
    if client.envoy() {
        // istiod sets an (empty) common LB config on every cluster it builds.
        c.common_lb_config = Some(CommonLbConfig::default());
    }
    connection_pool(
        c,
        policy.connection_pool.as_ref(),
        client,
        protocol,
        tls,
        &mut notes,
    );
    if let Some(od) = &policy.outlier_detection {
        outlier_detection(c, od, client, &mut notes);
    }
    if client.envoy() {
        // istiod's default (it sends unhealthy endpoints, PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS): no
        // panic mode unless `minHealthPercent` set one, so ejected hosts stay out however many they are.
        c.common_lb_config
            .get_or_insert_with(Default::default)
            .healthy_panic_threshold
            .get_or_insert_with(Percent::default);
    }
    let outlier = policy.outlier_detection.is_some();
    load_balancer(c, policy.load_balancer.as_ref(), client, &mut notes);
    locality_lb(c, policy, mesh, outlier, client, &mut notes);
    notes
}

/// `loadBalancer` (istiod's `applyLoadBalancer`, `ApplyRingHashLoadBalancer`): unset is LEAST_REQUEST
/// on Envoy, ROUND_ROBIN on gRPC, whose legacy `lb_policy` accepts only ROUND_ROBIN and RING_HASH.
fn load_balancer(
    c: &mut Cluster,
    lb: Option<&LoadBalancerSettings>,
    client: Client,
    notes: &mut Vec<FieldNote>,
) {
    let simple = lb.and_then(|l| l.simple);
    let warmup = lb.and_then(|l| l.warmup_duration_secs);
    let slow_start = || {
        warmup.map(|w| SlowStartConfig {
            slow_start_window: Some(pb_duration(w)),
            ..Default::default()
        })
    };
    const SIMPLE: &str = "loadBalancer.simple";
    match client {
        Client::Sidecar | Client::Router => match simple {
            Some(SimpleLb::RoundRobin) => {
                c.lb_policy = LbPolicy::RoundRobin as i32;
                c.lb_config = slow_start().map(|s| {
                    LbConfig::RoundRobinLbConfig(RoundRobinLbConfig {
                        slow_start_config: Some(s),
                    })
                });
            }
            Some(SimpleLb::Random) => c.lb_policy = LbPolicy::Random as i32,
            Some(SimpleLb::Passthrough) => {
                c.lb_policy = LbPolicy::ClusterProvided as i32;
                c.cluster_discovery_type =
                    Some(ClusterDiscoveryType::Type(DiscoveryType::OriginalDst as i32));
                c.eds_cluster_config = None;
            }
            Some(SimpleLb::LeastRequest | SimpleLb::LeastConn | SimpleLb::Unspecified) | None => {
                c.lb_policy = LbPolicy::LeastRequest as i32;
                c.lb_config = slow_start().map(|s| {
                    LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                        slow_start_config: Some(s),
                        ..Default::default()
                    })
                });
            }
        },
        Client::Grpc => c.lb_policy = LbPolicy::RoundRobin as i32,
    }
    let hashed = lb.is_some_and(|l| l.consistent_hash.is_some());
    notes.extend(match (simple, client) {
        (None, _) => None,
        // istiod applies the hash after the simple policy, which it replaces.
        (Some(_), _) if hashed => Some(ignored(SIMPLE, "consistentHash takes precedence")),
        (Some(_), Client::Sidecar | Client::Router) | (Some(SimpleLb::RoundRobin), Client::Grpc) => {
            Some(applies(SIMPLE))
        }
        (Some(SimpleLb::Unspecified), Client::Grpc) => None,
        (Some(SimpleLb::Passthrough), Client::Grpc) => Some(ignored(
            SIMPLE,
            "gRPC cannot dial the original destination (ORIGINAL_DST clusters are NACKed); ROUND_ROBIN over EDS",
        )),
        (Some(_), Client::Grpc) => Some(downgraded(
            SIMPLE,
            "ROUND_ROBIN (gRPC accepts only ROUND_ROBIN and RING_HASH as lb_policy; others are NACKed)",
        )),
    });
    if warmup.is_some() {
        let slow_start_applies = client.envoy()
            && matches!(
                simple,
                None | Some(
                    SimpleLb::RoundRobin
                        | SimpleLb::LeastRequest
                        | SimpleLb::LeastConn
                        | SimpleLb::Unspecified
                )
            );
        notes.push(if slow_start_applies {
            applies("loadBalancer.warmupDurationSecs")
        } else if client.envoy() {
            ignored(
                "loadBalancer.warmupDurationSecs",
                "slow start exists only for ROUND_ROBIN and LEAST_REQUEST",
            )
        } else {
            ignored("loadBalancer.warmupDurationSecs", "gRPC has no slow start")
        });
    }
    if let Some(ch) = lb.and_then(|l| l.consistent_hash.as_ref()) {
        const HASH: &str = "loadBalancer.consistentHash";
        match (&ch.maglev, &ch.ring_hash) {
            (Some(maglev), _) if client.envoy() => {
                c.lb_policy = LbPolicy::Maglev as i32;
                c.lb_config = (maglev.table_size != 0).then_some({
                    LbConfig::MaglevLbConfig(MaglevLbConfig {
                        table_size: Some(UInt64Value {
                            value: maglev.table_size,
                        }),
                    })
                });
                notes.push(applies(HASH));
            }
            (Some(_), _) => {
                ring_hash(c, DEFAULT_RING_SIZE);
                notes.push(downgraded(
                    HASH,
                    "RING_HASH with 1024 entries (gRPC has no MAGLEV; maglev.tableSize is ignored)",
                ));
            }
            (None, ring) => {
                let size = match ring {
                    Some(r) => r.minimum_ring_size,
                    None => ch
                        .minimum_ring_size
                        .filter(|&s| s != 0)
                        .unwrap_or(DEFAULT_RING_SIZE),
                };
                c.lb_policy = LbPolicy::RingHash as i32;
                c.lb_config = None;
                if size > GRPC_MAX_RING_SIZE && client == Client::Grpc {
                    ring_hash(c, GRPC_MAX_RING_SIZE);
                    notes.push(downgraded(
                        HASH,
                        "RING_HASH with the largest ring gRPC accepts (8388608 entries)",
                    ));
                } else {
                    if size != 0 {
                        ring_hash(c, size);
                    }
                    notes.push(applies(HASH));
                }
            }
        }
    }
}

fn ring_hash(c: &mut Cluster, minimum: u64) {
    c.lb_policy = LbPolicy::RingHash as i32;
    c.lb_config = Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
        minimum_ring_size: Some(UInt64Value { value: minimum }),
        ..Default::default()
    }));
}

/// `localityLbSetting`, the CDS half (istiod's `applyLocalityLoadBalancer`, with the setting EDS
/// uses: the rule's, else MeshConfig's): a locality-weighted LB config when `distribute` applies, or
/// failover with `failover`/`failoverPriority` (which needs outlier detection, else Envoy never
/// leaves priority 0). Priorities and weights themselves are EDS's, per proxy.
fn locality_lb(
    c: &mut Cluster,
    policy: &PortTrafficPolicy,
    mesh: &MeshConfig,
    outlier: bool,
    client: Client,
    notes: &mut Vec<FieldNote>,
) {
    const FIELD: &str = "loadBalancer.localityLbSetting";
    let rule = policy
        .load_balancer
        .as_ref()
        .and_then(|l| l.locality_lb_setting.as_ref());
    let mode = locality::mode(rule, &mesh.locality_lb_setting, outlier);
    let weighted = match &mode {
        Mode::Distribute { .. } => true,
        Mode::Failover {
            failover, priority, ..
        } => !failover.is_empty() || !priority.is_empty(),
        Mode::Off { .. } => false,
    };
    if weighted && client.envoy() {
        c.common_lb_config
            .get_or_insert_with(Default::default)
            .locality_config_specifier = Some(LocalityConfigSpecifier::LocalityWeightedLbConfig(
            LocalityWeightedLbConfig {},
        ));
    }
    let Some(rule) = rule else {
        return;
    };
    let failover = !rule.failover.is_empty() || !rule.failover_priority.is_empty();
    notes.push(match mode {
        Mode::Off {
            why: Off::NoOutlierDetection(_),
        } if failover => ignored(
            "loadBalancer.localityLbSetting.failover",
            "failover needs outlierDetection (as in istiod): without it no endpoint ever leaves priority 0",
        ),
        _ => applies(FIELD),
    });
}

/// `outlierDetection` (istiod's `applyOutlierDetection`), sent to gRPC too; gRPC ejects only on
/// success rate and failure percentage (gRFC A50), which istiod's mapping never turns on.
fn outlier_detection(c: &mut Cluster, od: &Outlier, client: Client, notes: &mut Vec<FieldNote>) {
    let enforcing = |v: u32| Some(u32v(if v > 0 { 100 } else { 0 }));
    let mut out = OutlierDetection {
        enforcing_success_rate: Some(u32v(0)),
        ..Default::default()
    };
    let grpc_no_effect =
        "gRPC ejects only on success rate and failure percentage (gRFC A50), not on consecutive errors";
    let mut field = |name: &'static str, envoy_only: Option<&str>| {
        notes.push(match (client, envoy_only) {
            (Client::Grpc, Some(why)) => ignored(name, why),
            _ => applies(name),
        });
    };
    if let Some(v) = od.consecutive_5xx_errors {
        out.consecutive_5xx = Some(u32v(v));
        out.enforcing_consecutive_5xx = enforcing(v);
        field("outlierDetection.consecutive5xxErrors", Some(grpc_no_effect));
    }
    if let Some(v) = od.consecutive_gateway_errors {
        out.consecutive_gateway_failure = Some(u32v(v));
        out.enforcing_consecutive_gateway_failure = enforcing(v);
        field("outlierDetection.consecutiveGatewayErrors", Some(grpc_no_effect));
    }
    if let Some(i) = od.interval {
        out.interval = Some(pb_duration(i));
        field("outlierDetection.interval", None);
    }
    if let Some(b) = od.base_ejection_time {
        out.base_ejection_time = Some(pb_duration(b));
        field("outlierDetection.baseEjectionTime", None);
    }
    if let Some(p) = od.max_ejection_percent.filter(|&p| p > 0) {
        out.max_ejection_percent = Some(u32v(p.unsigned_abs()));
        field("outlierDetection.maxEjectionPercent", None);
    }
    if od.split_external_local_origin_errors {
        out.split_external_local_origin_errors = true;
        if let Some(v) = od.consecutive_local_origin_failures.filter(|&v| v > 0) {
            out.consecutive_local_origin_failure = Some(u32v(v));
            out.enforcing_consecutive_local_origin_failure = Some(u32v(100));
        }
        out.enforcing_local_origin_success_rate = Some(u32v(0));
        field(
            "outlierDetection.splitExternalLocalOriginErrors",
            Some(grpc_no_effect),
        );
    }
    if od.consecutive_errors.is_some() {
        notes.push(ignored(
            "outlierDetection.consecutiveErrors",
            "deprecated and ignored by istiod: use consecutive5xxErrors",
        ));
    }
    c.outlier_detection = Some(out);
    // Outlier detection turns Envoy's panic mode off unless minHealthPercent says otherwise.
    let min_health = od.min_health_percent.unwrap_or(0);
    if min_health >= 0 {
        match client {
            Client::Sidecar | Client::Router => {
                c.common_lb_config
                    .get_or_insert_with(Default::default)
                    .healthy_panic_threshold = Some(Percent {
                    value: f64::from(min_health),
                });
                if od.min_health_percent.is_some() {
                    notes.push(applies("outlierDetection.minHealthPercent"));
                }
            }
            Client::Grpc if od.min_health_percent.is_some() => notes.push(ignored(
                "outlierDetection.minHealthPercent",
                "gRPC has no panic mode",
            )),
            Client::Grpc => {}
        }
    }
}

/// `connectionPool` (istiod's `applyConnectionPool`): circuit-breaker thresholds (Envoy: always,
/// 2^32−1 unless set, 0 keeps the default), the connect timeout, and HTTP protocol options. gRPC
/// limits only concurrent requests (gRFC A32): it gets `max_requests` when set, and no thresholds
/// otherwise, so its own default (1024) stays.
fn connection_pool(
    c: &mut Cluster,
    pool: Option<&ConnectionPoolSettings>,
    client: Client,
    protocol: Protocol,
    tls: &UpstreamTls,
    notes: &mut Vec<FieldNote>,
) {
    let http_settings = pool.and_then(|p| p.http.as_ref());
    let tcp = pool.and_then(|p| p.tcp.as_ref());
    let positive = |v: Option<i32>| v.filter(|&v| v > 0).map(|v| u32v(v.unsigned_abs()));
    let max_requests = positive(http_settings.and_then(|h| h.http2_max_requests));
    let grpc_ignores = "gRPC limits only concurrent requests (gRFC A32)";
    let mut field = |name: &'static str, set: bool, grpc_why: Option<&str>| {
        if set {
            notes.push(match (client, grpc_why) {
                (Client::Grpc, Some(why)) => ignored(name, why),
                _ => applies(name),
            });
        }
    };
    field(
        "connectionPool.http.http2MaxRequests",
        max_requests.is_some(),
        None,
    );
    let pending = positive(http_settings.and_then(|h| h.http1_max_pending_requests));
    field(
        "connectionPool.http.http1MaxPendingRequests",
        pending.is_some(),
        Some(grpc_ignores),
    );
    let retries = positive(http_settings.and_then(|h| h.max_retries));
    field(
        "connectionPool.http.maxRetries",
        retries.is_some(),
        Some(grpc_ignores),
    );
    let connections = positive(tcp.and_then(|t| t.max_connections));
    field(
        "connectionPool.tcp.maxConnections",
        connections.is_some(),
        Some(grpc_ignores),
    );
    match client {
        Client::Sidecar | Client::Router => {
            let mut breakers = envoy_circuit_breakers();
            let t = &mut breakers.thresholds[0];
            t.max_connections = connections.or(t.max_connections.take());
            t.max_pending_requests = pending.or(t.max_pending_requests.take());
            t.max_requests = max_requests.or(t.max_requests.take());
            t.max_retries = retries.or(t.max_retries.take());
            c.circuit_breakers = Some(breakers);
        }
        Client::Grpc => {
            c.circuit_breakers = max_requests.map(|m| CircuitBreakers {
                thresholds: vec![Thresholds {
                    max_requests: Some(m),
                    ..Default::default()
                }],
                ..Default::default()
            });
        }
    }
    if let Some(t) = tcp.and_then(|t| t.connect_timeout) {
        c.connect_timeout = Some(pb_duration(t));
        field(
            "connectionPool.tcp.connectTimeout",
            true,
            Some("gRPC paces connection attempts with its own backoff"),
        );
    }
    if tcp.is_some_and(|t| t.tcp_keepalive.is_some()) {
        notes.push(ignored(
            "connectionPool.tcp.tcpKeepalive",
            "not implemented by meshd yet",
        ));
    }
    if let Some(policy) = http_settings.and_then(|h| h.h2_upgrade_policy) {
        const FIELD: &str = "connectionPool.http.h2UpgradePolicy";
        notes.push(match client {
            Client::Grpc => ignored(FIELD, "gRPC always speaks HTTP/2"),
            _ if policy == H2UpgradePolicy::DoNotUpgrade && protocol.is_http2() => ignored(
                FIELD,
                "an HTTP2 or gRPC port speaks HTTP/2 upstream whatever the rule says (as istiod)",
            ),
            _ => applies(FIELD),
        });
    }
    let upstream = upstream_protocol(pool, protocol, client);
    let mut options = protocol_options(http_settings, tcp, client, protocol.is_http(), upstream, notes);
    if let (UpstreamTls::Originate(t), true) = (tls, client.envoy()) {
        // istiod's `setAutoSniAndAutoSanValidation`: the SNI and SAN check follow the request's host.
        let auto_sni = t.sni.is_empty();
        let auto_san = auto_sni && t.subject_alt_names.is_empty() && t.insecure_skip_verify != Some(true);
        if auto_sni || auto_san {
            options
                .get_or_insert_with(http1_options)
                .upstream_http_protocol_options = Some(UpstreamHttpProtocolOptions {
                auto_sni,
                auto_san_validation: auto_san,
                ..Default::default()
            });
        }
    }
    if let Some(options) = options {
        c.typed_extension_protocol_options
            .insert(HTTP_PROTOCOL_OPTIONS.to_owned(), any(&options));
    }
}

/// istiod's default thresholds (`getDefaultCircuitBreakerThresholds`): 2^32−1 each, not Envoy's
/// 1,024 connections and requests and 3 retries, which churn in a large mesh trips.
pub fn envoy_circuit_breakers() -> CircuitBreakers {
    let max = Some(u32v(u32::MAX));
    CircuitBreakers {
        thresholds: vec![Thresholds {
            max_connections: max,
            max_pending_requests: max,
            max_requests: max,
            max_retries: max,
            track_remaining: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// How a cluster's upstream connections are secured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTls {
    /// Plaintext.
    None,
    /// Istio mTLS to every endpoint (a DestinationRule's `ISTIO_MUTUAL`): a plain `transport_socket`.
    IstioMutual {
        /// Server identities to accept.
        sans: Vec<String>,
        /// SNI (Envoy only; empty for gRPC, as istiod's gRPC generator).
        sni: String,
    },
    /// Envoy auto-mTLS: Istio mTLS to endpoints labelled `tlsMode: istio`, plaintext to the rest.
    Auto {
        /// Server identities to accept.
        sans: Vec<String>,
        /// SNI.
        sni: String,
    },
    /// `SIMPLE` or `MUTUAL` TLS origination (Envoy).
    Originate(ClientTlsSettings),
}

/// What decides TLS besides the rule.
#[derive(Debug, Clone, Copy)]
pub struct TlsContext<'a> {
    /// The service's identities (secure naming).
    pub identities: &'a BTreeSet<Arc<str>>,
    /// istiod's SNI for this cluster, `outbound_.<port>_.<subset>_.<host>`.
    pub sni: &'a str,
    /// Envoy may use auto-mTLS: MeshConfig `enableAutoMtls`, a mesh-internal service, and no
    /// namespace- or mesh-wide PeerAuthentication `DISABLE` (istiod's `BestEffortInferServiceMTLSMode`).
    pub auto_mtls: bool,
    /// The rule has a `workloadSelector` (a `credentialName` is honoured on sidecars only then).
    pub rule_has_selector: bool,
}

/// The upstream TLS of a cluster (istiod's `buildUpstreamTLSSettings`): the rule's `tls` wins; without
/// it Envoy gets auto-mTLS and gRPC plaintext (istiod's gRPC generator applies only an explicit
/// `ISTIO_MUTUAL`: a gRPC client needs xDS credentials and certificate providers for it).
pub fn upstream_tls(
    tls: Option<&ClientTlsSettings>,
    client: Client,
    ctx: &TlsContext,
) -> (UpstreamTls, Option<FieldNote>) {
    const FIELD: &str = "tls.mode";
    let sans = |t: Option<&ClientTlsSettings>| match t {
        Some(t) if !t.subject_alt_names.is_empty() => t.subject_alt_names.clone(),
        _ => ctx.identities.iter().map(|i| i.to_string()).collect(),
    };
    let Some(t) = tls else {
        let auto = client.envoy() && ctx.auto_mtls;
        let out = if auto {
            UpstreamTls::Auto {
                sans: sans(None),
                sni: ctx.sni.to_owned(),
            }
        } else {
            UpstreamTls::None
        };
        return (out, None);
    };
    match (t.mode, client) {
        (TlsMode::Disable, _) => (UpstreamTls::None, Some(applies(FIELD))),
        (TlsMode::IstioMutual, _) => {
            let sni = match client {
                Client::Grpc => String::new(),
                _ if t.sni.is_empty() => ctx.sni.to_owned(),
                _ => t.sni.clone(),
            };
            (
                UpstreamTls::IstioMutual {
                    sans: sans(Some(t)),
                    sni,
                },
                Some(applies(FIELD)),
            )
        }
        (TlsMode::Simple | TlsMode::Mutual, Client::Grpc) => (
            UpstreamTls::None,
            Some(ignored(
                FIELD,
                "SIMPLE and MUTUAL are not built for gRPC (nor by istiod's gRPC generator): the client connects in plaintext",
            )),
        ),
        (TlsMode::Simple | TlsMode::Mutual, _)
            if !t.credential_name.is_empty() && client == Client::Sidecar && !ctx.rule_has_selector =>
        {
            (
                UpstreamTls::None,
                Some(ignored(
                    FIELD,
                    "credentialName is honoured on sidecars only in a rule with a workloadSelector (as istiod): no TLS",
                )),
            )
        }
        (TlsMode::Mutual, _)
            if t.credential_name.is_empty()
                && (t.client_certificate.is_empty() || t.private_key.is_empty()) =>
        {
            (
                UpstreamTls::None,
                Some(ignored(
                    FIELD,
                    "MUTUAL needs clientCertificate and privateKey (or credentialName): no TLS, as istiod",
                )),
            )
        }
        (TlsMode::Simple | TlsMode::Mutual, _) => (UpstreamTls::Originate(t.clone()), Some(applies(FIELD))),
    }
}

fn u32v(value: u32) -> UInt32Value {
    UInt32Value { value }
}

fn pb_duration(d: Duration) -> envoy_types::pb::google::protobuf::Duration {
    envoy_types::pb::google::protobuf::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[path = "cluster_policy_http.rs"]
mod http;
pub use http::{UpstreamProtocol, upstream_protocol};
use http::{http1_options, protocol_options};

#[cfg(test)]
#[path = "cluster_policy_tests.rs"]
mod tests;
