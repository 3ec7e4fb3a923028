//! `VirtualService` (networking.istio.io): HTTP routing for hosts — matches, weighted destinations,
//! timeouts, retries, faults, header manipulation. TCP and TLS routes are kept only to be reported.

use std::{collections::BTreeMap, time::Duration};

use serde::{Deserialize, Serialize};

use super::{
    common::{Labels, Percent, PortSelector, StringMatch},
    validate::{self, Report},
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
    /// TLS routes (not implemented by meshd).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls: Vec<serde_json::Value>,
    /// TCP routes (not implemented by meshd).
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
    pub redirect: Option<serde_json::Value>,
    /// Answer directly instead of forwarding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_response: Option<serde_json::Value>,
    /// Hand the route to another VirtualService (not implemented by meshd).
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
    /// Traffic mirroring (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<serde_json::Value>,
    /// The share of traffic mirrored (not implemented by meshd; known, so not reported as unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_percentage: Option<serde_json::Value>,
    /// `mirrorPercentage`'s deprecated integer form (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_percent: Option<serde_json::Value>,
    /// Several mirror destinations (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrors: Option<serde_json::Value>,
    /// CORS policy (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors_policy: Option<serde_json::Value>,
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

/// istiod's `ValidateVirtualService` and `validateHTTPRoute`.
pub(crate) fn validate(vs: &VirtualService, namespace: &str, r: &mut Report) {
    let mesh_bound = vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh");
    if vs.hosts.is_empty() {
        // A delegate: routed to from another VirtualService.
        if !vs.gateways.is_empty() {
            r.error(
                "spec.gateways",
                "a delegate VirtualService (no hosts) cannot name gateways",
            );
        }
        if !vs.tcp.is_empty() || !vs.tls.is_empty() {
            r.error(
                "spec",
                "a delegate VirtualService (no hosts) takes only http routes",
            );
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, host) in vs.hosts.iter().enumerate() {
        let f = format!("spec.hosts[{i}]");
        if host == "*" && mesh_bound {
            r.error(&f, "the wildcard host `*` is not allowed for the mesh gateway");
        } else if host.parse::<std::net::IpAddr>().is_err() {
            validate::wildcard_domain(host, &f, r);
        }
        if !seen.insert(host.as_str()) {
            r.error(&f, format!("duplicate host {host:?}"));
        }
    }
    for (i, gw) in vs.gateways.iter().enumerate() {
        if gw.is_empty() {
            r.error(format!("spec.gateways[{i}]"), "gateway name must not be empty");
        }
    }
    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        r.error("spec", "one of http, tcp or tls is required");
    }
    r.unsupported("spec.tcp", !vs.tcp.is_empty());
    r.unsupported("spec.tls", !vs.tls.is_empty());
    for (i, route) in vs.http.iter().enumerate() {
        http_route(route, &format!("spec.http[{i}]"), vs.hosts.is_empty(), r);
    }
    validate::export_to(&vs.export_to, namespace, false, "spec.exportTo", r);
}

fn http_route(route: &HttpRoute, f: &str, in_delegate: bool, r: &mut Report) {
    if let Some(d) = &route.delegate {
        if in_delegate {
            r.error(
                format!("{f}.delegate"),
                "a delegate VirtualService cannot delegate again",
            );
        }
        if !route.route.is_empty() || route.redirect.is_some() {
            r.error(f, "a delegating route takes no route or redirect");
        }
        if d.name.is_empty() {
            r.error(format!("{f}.delegate.name"), "name is required");
        }
        r.unsupported(format!("{f}.delegate"), true);
    } else {
        let actions = [
            !route.route.is_empty(),
            route.redirect.is_some(),
            route.direct_response.is_some(),
        ];
        match actions.iter().filter(|a| **a).count() {
            0 => r.error(f, "one of route, redirect or directResponse is required"),
            1 => {}
            _ => r.error(f, "only one of route, redirect or directResponse may be set"),
        }
    }
    if route.redirect.is_some() && (route.fault.is_some() || route.rewrite.is_some()) {
        r.error(f, "a redirect cannot be combined with fault or rewrite");
    }
    r.unsupported(format!("{f}.redirect"), route.redirect.is_some());
    r.unsupported(format!("{f}.directResponse"), route.direct_response.is_some());
    r.unsupported(format!("{f}.mirror"), route.mirror.is_some());
    r.unsupported(format!("{f}.mirrorPercentage"), route.mirror_percentage.is_some());
    r.unsupported(format!("{f}.mirrorPercent"), route.mirror_percent.is_some());
    r.unsupported(format!("{f}.mirrors"), route.mirrors.is_some());
    r.unsupported(format!("{f}.corsPolicy"), route.cors_policy.is_some());
    for (i, m) in route.matches.iter().enumerate() {
        match_request(m, &format!("{f}.match[{i}]"), in_delegate, r);
    }
    destinations(&route.route, f, r);
    if let Some(rw) = &route.rewrite
        && rw.uri.is_empty()
        && rw.authority.is_empty()
    {
        r.error(format!("{f}.rewrite"), "rewrite must set uri, authority or both");
    }
    if let Some(retry) = &route.retries {
        retries(retry, &format!("{f}.retries"), r);
    }
    if let Some(fault) = &route.fault {
        fault_injection(fault, &format!("{f}.fault"), r);
    }
    if let Some(h) = &route.headers {
        headers(h, &format!("{f}.headers"), r);
    }
}

fn match_request(m: &HttpMatchRequest, f: &str, in_delegate: bool, r: &mut Report) {
    for (name, sm) in [
        ("uri", &m.uri),
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ] {
        if let Some(sm) = sm {
            sm.validate(&format!("{f}.{name}"), r);
            if in_delegate && sm.regex.is_some() {
                r.error(
                    format!("{f}.{name}.regex"),
                    "regex matches are not allowed in a delegate",
                );
            }
        }
    }
    for (group, map) in [
        ("headers", &m.headers),
        ("withoutHeaders", &m.without_headers),
        ("queryParams", &m.query_params),
    ] {
        for (name, sm) in map {
            let hf = format!("{f}.{group}.{name}");
            if name.is_empty() {
                r.error(&hf, "name must not be empty");
            }
            if group != "queryParams" && name.bytes().any(|b| b.is_ascii_uppercase()) {
                r.error(&hf, "header names must be lowercase");
            }
            sm.validate(&hf, r);
        }
    }
    if let Some(port) = m.port {
        validate::port(port, &format!("{f}.port"), r);
    }
    validate::labels(&m.source_labels, &format!("{f}.sourceLabels"), r);
    if !m.source_namespace.is_empty() && !validate::is_dns1123_label(&m.source_namespace) {
        r.error(
            format!("{f}.sourceNamespace"),
            format!("{:?} is not a namespace name", m.source_namespace),
        );
    }
}

fn destinations(dests: &[HttpRouteDestination], f: &str, r: &mut Report) {
    let mut total: i64 = 0;
    for (i, d) in dests.iter().enumerate() {
        let df = format!("{f}.route[{i}]");
        let dest = &d.destination;
        if dest.host.is_empty() {
            r.error(format!("{df}.destination.host"), "host is required");
        } else if dest.host == "*" {
            r.error(format!("{df}.destination.host"), "`*` is not a destination");
        } else {
            validate::wildcard_domain(&dest.host, &format!("{df}.destination.host"), r);
        }
        if !dest.subset.is_empty() && !validate::is_dns1123_label(&dest.subset) {
            r.error(
                format!("{df}.destination.subset"),
                format!("{:?} is not a valid subset name", dest.subset),
            );
        }
        if let Some(p) = dest.port {
            validate::port(p.number, &format!("{df}.destination.port.number"), r);
        }
        let w = d.weight.unwrap_or(0);
        if w < 0 {
            r.error(format!("{df}.weight"), format!("weight {w} is negative"));
        }
        total += i64::from(w.max(0));
        if let Some(h) = &d.headers {
            headers(h, &format!("{df}.headers"), r);
        }
    }
    // Weights are relative: any total works (istiod dropped the sum-to-100 rule), except none at all
    // with several destinations, or one that overflows Envoy's uint32 total.
    if dests.len() > 1 && total == 0 {
        r.error(
            format!("{f}.route"),
            "the weights of several destinations cannot all be 0",
        );
    }
    if total > i64::from(u32::MAX) {
        r.error(
            format!("{f}.route"),
            format!("the weights add up to {total}, over {}", u32::MAX),
        );
    }
}

fn retries(retry: &HttpRetry, f: &str, r: &mut Report) {
    if retry.attempts < 0 {
        r.error(format!("{f}.attempts"), "attempts must not be negative");
    }
    if retry.attempts == 0
        && (retry.per_try_timeout.is_some()
            || !retry.retry_on.is_empty()
            || retry.retry_remote_localities.is_some())
    {
        r.error(f, "attempts 0 disables retries: no other retry field may be set");
    }
    if retry
        .per_try_timeout
        .is_some_and(|d| d < Duration::from_millis(1))
    {
        r.error(format!("{f}.perTryTimeout"), "must be at least 1ms");
    }
}

fn fault_injection(fault: &HttpFaultInjection, f: &str, r: &mut Report) {
    if fault.abort.is_none() && fault.delay.is_none() {
        r.error(f, "one of abort or delay is required");
    }
    if let Some(a) = &fault.abort {
        let af = format!("{f}.abort");
        let kinds = [
            a.http_status.is_some(),
            a.grpc_status.is_some(),
            a.http2_error.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            r.error(&af, "exactly one of httpStatus or grpcStatus is required");
        }
        if a.http2_error.is_some() {
            r.error(
                format!("{af}.http2Error"),
                "HTTP/2 error aborts are not supported",
            );
        }
        if let Some(s) = a.http_status.filter(|s| !(200..=599).contains(s)) {
            r.error(
                format!("{af}.httpStatus"),
                format!("{s} is not an HTTP status in 200..599"),
            );
        }
        if let Some(g) = a
            .grpc_status
            .as_ref()
            .filter(|g| !GRPC_CODES.contains(&g.as_str()))
        {
            r.error(
                format!("{af}.grpcStatus"),
                format!("{g:?} is not a gRPC status code name"),
            );
        }
        if let Some(p) = a.percentage {
            validate::percent(p.value, &format!("{af}.percentage.value"), r);
        }
    }
    if let Some(d) = &fault.delay {
        let df = format!("{f}.delay");
        if d.exponential_delay.is_some() {
            r.error(
                format!("{df}.exponentialDelay"),
                "exponentialDelay is not supported",
            );
        } else if d.fixed_delay.is_none() {
            r.error(format!("{df}.fixedDelay"), "fixedDelay is required");
        }
        if let Some(p) = d.percentage {
            validate::percent(p.value, &format!("{df}.percentage.value"), r);
        }
        if let Some(p) = d.percent.filter(|p| !(0..=100).contains(p)) {
            r.error(format!("{df}.percent"), format!("{p} is not in 0..100"));
        }
    }
}

fn headers(h: &Headers, f: &str, r: &mut Report) {
    for (side, ops) in [("request", &h.request), ("response", &h.response)] {
        let Some(ops) = ops else { continue };
        let names = ops.set.keys().chain(ops.add.keys()).chain(ops.remove.iter());
        for name in names {
            let bad = name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(&b))
                || (name.starts_with(':') && !name.eq_ignore_ascii_case(":authority"));
            if bad {
                r.error(
                    format!("{f}.{side}.{name}"),
                    format!("invalid header name {name:?}"),
                );
            }
        }
    }
}
