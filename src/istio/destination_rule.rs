//! `DestinationRule` (networking.istio.io): what happens to traffic for a host after routing — subsets,
//! load balancing (incl. locality failover), connection pools, outlier detection, client TLS. Its
//! validation, istiod's `ValidateDestinationRule`, is `destination_rule_rules`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::common::{Labels, PortSelector, WorkloadSelector};

/// Istio's `DestinationRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DestinationRule {
    /// The service host (short names resolve in the rule's namespace; may start with `*`).
    pub host: String,
    /// Policies for every subset and port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
    /// Named subsets of the host's endpoints.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<Subset>,
    /// Namespaces the rule applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Applies the rule only to these workloads (then private to its namespace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
}

/// Istio's `TrafficPolicy`. `tunnel` and `proxyProtocol` are kept only to be reported as unimplemented.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficPolicy {
    /// Load-balancing algorithm and locality settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection limits (circuit breakers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Ejection of failing endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// Client TLS to the upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
    /// Per-port overrides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub port_level_settings: Vec<PortTrafficPolicy>,
    /// HTTP CONNECT tunnelling (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<serde_json::Value>,
    /// PROXY protocol to the upstream (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<serde_json::Value>,
}

/// Istio's `TrafficPolicy.PortTrafficPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortTrafficPolicy {
    /// The port these settings apply to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
    /// Load balancing on this port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection pool on this port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Outlier detection on this port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// TLS on this port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
}

/// Istio's `Subset`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subset {
    /// The subset's name (cluster `outbound|port|name|host`).
    pub name: String,
    /// Endpoints whose labels include these belong to the subset.
    pub labels: Labels,
    /// Overrides the rule's policy for this subset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
}

/// Istio's `LoadBalancerSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerSettings {
    /// A standard algorithm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simple: Option<SimpleLb>,
    /// Hash-based affinity (ring hash / maglev).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistent_hash: Option<ConsistentHashLb>,
    /// Locality-weighted load balancing and failover.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locality_lb_setting: Option<LocalityLbSetting>,
    /// Slow start for new endpoints (deprecated form of `warmup`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub warmup_duration_secs: Option<Duration>,
    /// Slow start for new endpoints (not implemented by meshd: validated, then reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
}

/// Istio's `WarmupConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Warmup {
    /// How long a new endpoint warms up; required.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub duration: Option<Duration>,
    /// The share of traffic a new endpoint starts with, 0..=100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_percent: Option<serde_json::Number>,
    /// How fast the share grows, at least 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggression: Option<serde_json::Number>,
}

/// Istio's `LoadBalancerSettings.SimpleLB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLb {
    /// Proxy's default.
    Unspecified,
    /// Deprecated alias of LEAST_REQUEST.
    LeastConn,
    /// Random.
    Random,
    /// Forward to the address the caller asked for.
    Passthrough,
    /// Round robin.
    RoundRobin,
    /// Least outstanding requests.
    LeastRequest,
}

/// Istio's `ConsistentHashLB`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsistentHashLb {
    /// Hash on this request header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_header_name: Option<String>,
    /// Hash on this cookie (generated when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_cookie: Option<HttpCookie>,
    /// Hash on the source IP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_source_ip: Option<bool>,
    /// Hash on this query parameter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_query_parameter_name: Option<String>,
    /// Ring hash with this minimum ring size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// Maglev with this table size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maglev: Option<Maglev>,
    /// Deprecated: use `ringHash`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

/// Istio's `ConsistentHashLB.HTTPCookie`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpCookie {
    /// Cookie name.
    pub name: String,
    /// Cookie path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Cookie lifetime.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub ttl: Option<Duration>,
}

/// Istio's `ConsistentHashLB.RingHash`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RingHash {
    /// Minimum ring size.
    pub minimum_ring_size: u64,
}

/// Istio's `ConsistentHashLB.MagLev`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Maglev {
    /// Table size (a prime).
    pub table_size: u64,
}

/// Istio's `LocalityLoadBalancerSetting`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityLbSetting {
    /// Weights from a source locality to destination localities.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distribute: Vec<Distribute>,
    /// Region to fail over to when a region has no healthy endpoint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<Failover>,
    /// Label keys ordering endpoints into priorities.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
    /// Switches locality load balancing (default: the mesh config's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Istio's `LocalityLoadBalancerSetting.Distribute`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Distribute {
    /// Source locality (`region/zone/subzone`, trailing `*` allowed).
    pub from: String,
    /// Destination locality → weight (1..100, summing to 100).
    pub to: std::collections::BTreeMap<String, u32>,
}

/// Istio's `LocalityLoadBalancerSetting.Failover`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Failover {
    /// Source region.
    pub from: String,
    /// Region to fail over to.
    pub to: String,
}

/// Istio's `ConnectionPoolSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionPoolSettings {
    /// TCP limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSettings>,
    /// HTTP limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
}

/// Istio's `ConnectionPoolSettings.TCPSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpSettings {
    /// Most connections to a host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    /// Connect timeout.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub connect_timeout: Option<Duration>,
    /// Longest connection lifetime.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub max_connection_duration: Option<Duration>,
    /// Idle timeout.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub idle_timeout: Option<Duration>,
    /// TCP keepalive (not implemented by meshd: validated, then reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_keepalive: Option<TcpKeepalive>,
}

/// Istio's `ConnectionPoolSettings.TCPSettings.TcpKeepalive`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpKeepalive {
    /// Unanswered probes before the connection is dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
    /// Idle time before the first probe.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub time: Option<Duration>,
    /// Time between probes.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub interval: Option<Duration>,
}

/// Istio's `ConnectionPoolSettings.HTTPSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpSettings {
    /// Most queued requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http1_max_pending_requests: Option<i32>,
    /// Most concurrent requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_max_requests: Option<i32>,
    /// Requests per connection (1 disables keep-alive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_requests_per_connection: Option<i32>,
    /// Most concurrent retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    /// Idle timeout.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub idle_timeout: Option<Duration>,
    /// `DEFAULT`, `DO_NOT_UPGRADE` or `UPGRADE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    /// Use the client's protocol upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_client_protocol: Option<bool>,
    /// Most concurrent streams per HTTP/2 connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<i32>,
}

/// Istio's `H2UpgradePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum H2UpgradePolicy {
    /// The mesh default.
    Default,
    /// Keep HTTP/1.1.
    DoNotUpgrade,
    /// Upgrade to HTTP/2.
    Upgrade,
}

/// Istio's `OutlierDetection`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutlierDetection {
    /// Count local-origin failures separately.
    pub split_external_local_origin_errors: bool,
    /// Local-origin failures before ejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_local_origin_failures: Option<u32>,
    /// 502/503/504s before ejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_gateway_errors: Option<u32>,
    /// 5xxs before ejection.
    #[serde(skip_serializing_if = "Option::is_none", rename = "consecutive5xxErrors")]
    pub consecutive_5xx_errors: Option<u32>,
    /// Deprecated alias of `consecutive5xxErrors` (as 502/503/504).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<i32>,
    /// Time between sweeps.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub interval: Option<Duration>,
    /// Minimum ejection time.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub base_ejection_time: Option<Duration>,
    /// Most of the pool ejected at once, in percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<i32>,
    /// Outlier detection stops below this healthy percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_health_percent: Option<i32>,
}

/// Istio's `ClientTLSSettings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTlsSettings {
    /// The TLS mode.
    pub mode: TlsMode,
    /// Client certificate file (MUTUAL).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_certificate: String,
    /// Private key file (MUTUAL).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// Secret holding the client certificate, key and CA.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// SANs the server certificate must carry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// SNI sent to the server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sni: String,
    /// Skip verifying the server certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
    /// Certificate revocation list file (checked, not acted on by meshd).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
}

/// Istio's `ClientTLSSettings.TLSmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TlsMode {
    /// Plaintext (the protobuf default).
    #[default]
    Disable,
    /// TLS, server authenticated.
    Simple,
    /// mTLS with given certificates.
    Mutual,
    /// mTLS with Istio's workload certificates.
    IstioMutual,
}
