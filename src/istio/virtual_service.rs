//! `VirtualService` (networking.istio.io): HTTP routing for hosts — matches, weighted destinations,
//! timeouts, retries, faults, header manipulation, redirects, direct responses, mirrors, CORS,
//! delegation — with istiod's `ValidateVirtualService`. TCP and TLS routes (`l4_route`) are
//! validated, then reported as ignored for sidecars.

use std::{collections::BTreeMap, time::Duration};

use serde::{Deserialize, Serialize};

use super::{
    common::{Labels, Percent, PortSelector, StringMatch},
    http_actions::{CorsPolicy, HttpDirectResponse, HttpMirrorPolicy, HttpRedirect},
};

/// Istio's `VirtualService`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualService {
    /// Hosts the routes apply to (short names resolve in the VirtualService's namespace); none for a
    /// delegate.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Gateways the routes apply to; `mesh` (the default when empty) means sidecars.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// HTTP routes, first match wins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<HttpRoute>,
    /// TLS routes (not implemented by meshd: kept as JSON, validated as `l4_route::TlsRoute`, then
    /// reported).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls: Vec<serde_json::Value>,
    /// TCP routes (not implemented by meshd: kept as JSON, validated as `l4_route::TcpRoute`, then
    /// reported).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<serde_json::Value>,
    /// Namespaces the VirtualService is visible in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
}

impl VirtualService {
    /// The hosts it routes for and the destination hosts it routes to.
    pub fn named_hosts(&self) -> Vec<String> {
        let mut out = self.hosts.clone();
        for route in &self.http {
            out.extend(route.route.iter().map(|d| d.destination.host.clone()));
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Istio's `HTTPRoute`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    /// Route name (stats, debugging).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Conditions, any of which selects the route; none matches everything.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<HttpMatchRequest>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<HttpRouteDestination>,
    /// Redirect instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<HttpRedirect>,
    /// Answer directly instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_response: Option<HttpDirectResponse>,
    /// Hand the route to a delegate VirtualService (merged into this one, as istiod does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    /// URI / authority rewrite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<HttpRewrite>,
    /// Request timeout.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub timeout: Option<Duration>,
    /// Retry policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<HttpRetry>,
    /// Fault injection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<HttpFaultInjection>,
    /// Header manipulation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
    /// Copy requests to this destination too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Destination>,
    /// The share of requests `mirror` copies (all when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_percentage: Option<Percent>,
    /// `mirrorPercentage`'s deprecated integer form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_percent: Option<u32>,
    /// Several mirror destinations, each with its share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<Vec<HttpMirrorPolicy>>,
    /// CORS policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors_policy: Option<CorsPolicy>,
}

/// Istio's `HTTPMatchRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMatchRequest {
    /// Match name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The request path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    /// `http`/`https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<StringMatch>,
    /// The HTTP method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    /// The authority (Host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authority: Option<StringMatch>,
    /// Request headers (lowercase names).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, StringMatch>,
    /// Headers that must not match.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub without_headers: BTreeMap<String, StringMatch>,
    /// Query parameters.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub query_params: BTreeMap<String, StringMatch>,
    /// The port the request arrived on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Labels the calling workload must carry.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: Labels,
    /// Namespace the caller must be in.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
    /// Gateways this match applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Case-insensitive URI match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignore_uri_case: bool,
}

/// Istio's `HTTPRouteDestination`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteDestination {
    /// Where to send.
    pub destination: Destination,
    /// Relative weight (need not sum to 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Header manipulation for this destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
}

/// Istio's `Destination`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Destination {
    /// The service host.
    pub host: String,
    /// A DestinationRule subset.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subset: String,
    /// The service port (needed when the service has several).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
}

/// Istio's `Delegate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Delegate {
    /// The delegate VirtualService's name.
    pub name: String,
    /// Its namespace (default: this VirtualService's).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// Istio's `HTTPRewrite`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRewrite {
    /// Replacement for the matched path or prefix.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replacement authority.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// A regex substitution of the path (instead of `uri`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

/// Istio's `RegexRewrite`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RegexRewrite {
    /// RE2 pattern matched against the path.
    #[serde(rename = "match")]
    pub pattern: String,
    /// The substitution (`\1` names a capture group).
    pub rewrite: String,
}

/// Istio's `HTTPRetry`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRetry {
    /// Number of retries; 0 disables retries.
    pub attempts: i32,
    /// Timeout per try.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub per_try_timeout: Option<Duration>,
    /// Conditions, comma-separated (Envoy `retry_on` names and status codes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub retry_on: String,
    /// Retry in other localities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_remote_localities: Option<bool>,
    /// Base interval between retries (Envoy's and gRPC's `retry_back_off.base_interval`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub backoff: Option<Duration>,
}

/// Istio's `HTTPFaultInjection`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpFaultInjection {
    /// Delay some requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<Delay>,
    /// Fail some requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<Abort>,
}

/// Istio's `HTTPFaultInjection.Delay`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Delay {
    /// The delay.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "crate::config::duration::option"
    )]
    pub fixed_delay: Option<Duration>,
    /// Exponential delay (rejected, as by istiod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exponential_delay: Option<String>,
    /// Share of requests delayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
    /// Deprecated integer percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<i32>,
}

/// Istio's `HTTPFaultInjection.Abort`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Abort {
    /// HTTP status to return.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<i32>,
    /// gRPC status to return (a code name, e.g. `UNAVAILABLE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<String>,
    /// HTTP/2 error (rejected, as by istiod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_error: Option<String>,
    /// Share of requests aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// Istio's `Headers`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Headers {
    /// Request header operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderOperations>,
    /// Response header operations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderOperations>,
}

/// Istio's `Headers.HeaderOperations`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderOperations {
    /// Overwrite or add.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Append.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Remove.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// gRPC status code names istiod accepts in `abort.grpcStatus`, in code order (index = code).
pub(crate) const GRPC_CODES: &[&str] = &[
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];
