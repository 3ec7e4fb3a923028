//! VirtualService HTTP routes → Envoy routes, as istiod translates them (`core/route/route.go`:
//! `BuildHTTPRoutesForVirtualService`, `translateRoute`, `TranslateRouteMatch`,
//! `TranslateHeadersOperations`, `TranslateFault`, `setTimeout`; `route/retry/retry.go:ConvertPolicy`),
//! pure in its arguments; redirects, direct responses, mirrors and CORS are in
//! [`route_actions`](super::route_actions). The same shapes go to Envoy sidecars and proxyless
//! gRPC, except where istiod itself tells them apart (timeouts), consistent-hash policies gRPC
//! cannot use, and CORS (gRPC NACKs a per-route config of a filter it does not know).
//! Delegates are merged before translation (`traffic::delegate`).

use std::{collections::BTreeMap, time::Duration};

use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{HeaderValue, HeaderValueOption, Metadata, header_value_option::HeaderAppendAction},
            route::v3::{
                Decorator, HeaderMatcher, QueryParameterMatcher, RetryPolicy, Route, RouteAction, RouteMatch,
                WeightedCluster, header_matcher::HeaderMatchSpecifier,
                query_parameter_matcher::QueryParameterMatchSpecifier, retry_policy, route, route_action,
                route_match, weighted_cluster,
            },
        },
        extensions::{
            filters::{
                common::fault::v3::{FaultDelay, fault_delay},
                http::fault::v3::{FaultAbort, HttpFault, fault_abort},
            },
            retry::{
                host::previous_hosts::v3::PreviousHostsPredicate,
                priority::previous_priorities::v3::PreviousPrioritiesConfig,
            },
        },
        r#type::{
            matcher::v3::{RegexMatchAndSubstitute, RegexMatcher, StringMatcher, string_matcher},
            v3::{FractionalPercent, fractional_percent::DenominatorType},
        },
    },
    google::protobuf::{BoolValue, UInt32Value},
};

use super::{
    any,
    cds::{cluster_name, subset_cluster_name},
    eds::strings,
    route_actions::{self, CORS_FILTER},
};
use crate::{
    envoy::ProxyKind,
    istio::{
        StringMatch,
        destination_rule::ConsistentHashLb,
        virtual_service::{
            Destination, GRPC_CODES, Headers, HttpFaultInjection, HttpMatchRequest, HttpRetry, HttpRoute,
        },
    },
    traffic::virtual_service::ResolvedVs,
};

/// The name of the fault filter (HCM) and of its per-route configuration.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";

/// Who the routes are for and on which port: what translation reads from the proxy.
#[derive(Clone, Copy)]
pub struct RouteInput<'a> {
    /// Sidecar or proxyless gRPC (timeouts and hash policies differ).
    pub kind: ProxyKind,
    /// The proxy's namespace (`sourceNamespace`).
    pub namespace: &'a str,
    /// The proxy's labels (`sourceLabels`).
    pub labels: &'a BTreeMap<String, String>,
    /// The listener (service) port the routes serve: `match.port` must agree, and destinations
    /// without a port go to it.
    pub port: u16,
    /// For a gateway, its name (`ns/name`): `match.gateways` must name it. `None`: the mesh.
    pub gateway: Option<&'a str>,
    /// For a gateway, the only port of a destination's service, which a destination without a port
    /// goes to instead of the listener port (istiod's `GetDestinationCluster`).
    pub only_port: Option<PortOf<'a>>,
    /// The routes serve a TLS server (a gateway's HTTPS port): a redirect's default scheme.
    pub tls: bool,
}

/// The only port of a host's service, if it has one port.
pub type PortOf<'a> = &'a dyn Fn(&str) -> Option<u16>;

/// The consistent hash a destination's DestinationRule asks for, if any: `(host, port, subset)`.
pub type HashOf<'a> = &'a dyn Fn(&str, u16, Option<&str>) -> Option<ConsistentHashLb>;

/// The routes of `vs` for this proxy and port; empty when none survives the proxy's source matches
/// (the service then keeps its default route). A catch-all match ends the list, as in istiod. For
/// gRPC, matches on query parameters and routes that redirect or answer directly are left out.
pub fn virtual_service_routes(inp: &RouteInput, vs: &ResolvedVs, hash: HashOf) -> Vec<Route> {
    let mut out = Vec::new();
    for http in &vs.spec.http {
        // gRPC only forwards: grpc-js refuses a whole route configuration holding a redirect or a
        // direct response (grpcio and grpc-go fail the RPCs such a route matches).
        if inp.kind == ProxyKind::Grpc && (http.redirect.is_some() || http.direct_response.is_some()) {
            continue;
        }
        if http.matches.is_empty() {
            out.extend(translate(inp, vs, http, None, hash));
            break;
        }
        let mut catch_all = false;
        for m in &http.matches {
            // gRPC requests have no query string, so such a route can never match one: grpcio skips
            // it, but grpc-js ignores the condition and would send every request down it.
            if inp.kind == ProxyKind::Grpc && !m.query_params.is_empty() {
                continue;
            }
            if let Some(r) = translate(inp, vs, http, Some(m), hash) {
                catch_all = is_catch_all(&r);
                out.push(r);
                if catch_all {
                    break;
                }
            }
        }
        if catch_all {
            break;
        }
    }
    out
}

/// The route of a service without a VirtualService (istiod's `BuildDefaultHTTPOutboundRoute`):
/// everything to its cluster, no timeout, the default retry policy, the DestinationRule's hash.
pub fn default_route(inp: &RouteInput, host: &str, hash: Option<&ConsistentHashLb>) -> Route {
    let mut action = RouteAction {
        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster_name(
            inp.port, host,
        ))),
        retry_policy: retry_policy(None, false),
        hash_policy: hash.and_then(|h| hash_policy(inp.kind, h)).into_iter().collect(),
        ..Default::default()
    };
    // istiod builds the default route without the proxy (`setTimeout(route, nil, nil)`), so gRPC
    // clients get Envoy's fields too.
    set_timeout(&mut action, None, ProxyKind::Sidecar);
    Route {
        name: "default".to_owned(),
        r#match: Some(prefix_match()),
        decorator: Some(Decorator {
            operation: format!("{host}:{}/*", inp.port),
            ..Default::default()
        }),
        action: Some(route::Action::Route(action)),
        ..Default::default()
    }
}

fn prefix_match() -> RouteMatch {
    RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
        ..Default::default()
    }
}

/// istiod's `sourceMatchHTTP`: the proxy's gateway (`mesh` for a sidecar) among the match's, else
/// its labels and namespace.
fn source_matches(m: &HttpMatchRequest, inp: &RouteInput) -> bool {
    if !m.gateways.is_empty() {
        let me = inp
            .gateway
            .unwrap_or(crate::traffic::virtual_service::MESH_GATEWAY);
        return m.gateways.iter().any(|g| g == me);
    }
    m.source_labels.iter().all(|(k, v)| inp.labels.get(k) == Some(v))
        && (m.source_namespace.is_empty() || m.source_namespace == inp.namespace)
}

fn translate(
    inp: &RouteInput,
    vs: &ResolvedVs,
    http: &HttpRoute,
    m: Option<&HttpMatchRequest>,
    hash: HashOf,
) -> Option<Route> {
    if let Some(m) = m
        && (m.port.is_some_and(|p| p != 0 && p != u32::from(inp.port)) || !source_matches(m, inp))
    {
        return None;
    }
    let name = match m {
        Some(m) if !m.name.is_empty() => format!("{}.{}", http.name, m.name),
        _ => http.name.clone(),
    };
    let mut out = Route {
        name,
        r#match: Some(route_match(m)),
        metadata: Some(Metadata {
            filter_metadata: [("istio".to_owned(), strings(&[("config", &vs.config_path())]))].into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let ops = http.headers.as_ref().map(header_operations).unwrap_or_default();
    out.request_headers_to_add = ops.request_add;
    out.request_headers_to_remove = ops.request_remove;
    out.response_headers_to_add = ops.response_add;
    out.response_headers_to_remove = ops.response_remove;
    let action = if let Some(rd) = &http.redirect {
        route_actions::redirect(rd, inp.port, inp.tls).map(route::Action::Redirect)
    } else if let Some(dr) = &http.direct_response {
        Some(route::Action::DirectResponse(route_actions::direct_response(dr)))
    } else {
        Some(route::Action::Route(route_action(
            inp,
            http,
            &mut out,
            ops.authority,
            hash,
        )))
    };
    let operation_path = match out.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
        Some(route_match::PathSpecifier::Prefix(p)) => format!("{p}*"),
        Some(route_match::PathSpecifier::Path(p)) => p.clone(),
        Some(route_match::PathSpecifier::SafeRegex(r)) => r.regex.clone(),
        _ => "/*".to_owned(),
    };
    let cluster = match &action {
        Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(c)),
            ..
        })) => Some(c.split('|').collect::<Vec<_>>()),
        _ => None,
    };
    let operation = match cluster.as_deref() {
        Some([_, port, _, host]) => format!("{host}:{port}{operation_path}"),
        _ => format!("{}:{}{operation_path}", vs.object.name, inp.port),
    };
    out.decorator = Some(Decorator {
        operation,
        ..Default::default()
    });
    out.action = action;
    if let Some(f) = http.fault.as_ref().and_then(fault) {
        out.typed_per_filter_config
            .insert(FAULT_FILTER.to_owned(), any(&f));
    }
    if let Some(c) = &http.cors_policy
        && inp.kind != ProxyKind::Grpc
    {
        out.typed_per_filter_config
            .insert(CORS_FILTER.to_owned(), any(&route_actions::cors_policy(c)));
    }
    Some(out)
}

/// istiod's `applyHTTPRouteDestination`: one destination is a cluster, several a weighted set
/// (weight-0 entries dropped, weights as written).
fn route_action(
    inp: &RouteInput,
    http: &HttpRoute,
    out: &mut Route,
    mut authority: Option<String>,
    hash: HashOf,
) -> RouteAction {
    let mut action = RouteAction::default();
    set_timeout(&mut action, http.timeout, inp.kind);
    if let Some(rw) = &http.rewrite {
        if let Some(re) = &rw.uri_regex_rewrite {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(regex(&re.pattern)),
                substitution: re.rewrite.clone(),
            });
        } else if !rw.uri.is_empty() {
            action.prefix_rewrite = rw.uri.clone();
        }
        if !rw.authority.is_empty() {
            authority = Some(rw.authority.clone());
        }
    }
    if let Some(a) = authority {
        action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(a));
    }
    let port_of = |d: &Destination| match d.port {
        Some(p) => p.number as u16,
        None => inp.only_port.and_then(|f| f(&d.host)).unwrap_or(inp.port),
    };
    let cluster_of = |d: &Destination| {
        let port = port_of(d);
        let subset = (!d.subset.is_empty()).then_some(d.subset.as_str());
        (
            subset_cluster_name(port, &d.subset, &d.host),
            hash(&d.host, port, subset),
        )
    };
    action.request_mirror_policies = route_actions::mirror_policies(http, &|d: &Destination| {
        subset_cluster_name(port_of(d), &d.subset, &d.host)
    });
    let mut consistent_hash = false;
    if let [only] = &http.route[..] {
        let (cluster, h) = cluster_of(&only.destination);
        action.cluster_specifier = Some(route_action::ClusterSpecifier::Cluster(cluster));
        if let Some(ops) = only.headers.as_ref().map(header_operations) {
            out.request_headers_to_add.extend(ops.request_add);
            out.request_headers_to_remove.extend(ops.request_remove);
            out.response_headers_to_add.extend(ops.response_add);
            out.response_headers_to_remove.extend(ops.response_remove);
            if let Some(a) = ops.authority
                && action.host_rewrite_specifier.is_none()
            {
                action.host_rewrite_specifier =
                    Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(a));
            }
        }
        consistent_hash = h.is_some();
        action
            .hash_policy
            .extend(h.and_then(|h| hash_policy(inp.kind, &h)));
    } else {
        let mut clusters = Vec::new();
        for d in http.route.iter().filter(|d| d.weight.unwrap_or(0) != 0) {
            let (name, h) = cluster_of(&d.destination);
            let ops = d.headers.as_ref().map(header_operations).unwrap_or_default();
            clusters.push(weighted_cluster::ClusterWeight {
                name,
                weight: Some(UInt32Value {
                    value: d.weight.unwrap_or(0).max(0) as u32,
                }),
                request_headers_to_add: ops.request_add,
                request_headers_to_remove: ops.request_remove,
                response_headers_to_add: ops.response_add,
                response_headers_to_remove: ops.response_remove,
                host_rewrite_specifier: ops
                    .authority
                    .map(weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral),
                ..Default::default()
            });
            action
                .hash_policy
                .extend(h.and_then(|h| hash_policy(inp.kind, &h)));
        }
        action.cluster_specifier = Some(route_action::ClusterSpecifier::WeightedClusters(
            WeightedCluster {
                clusters,
                ..Default::default()
            },
        ));
    }
    action.retry_policy = retry_policy(http.retries.as_ref(), consistent_hash);
    action
}

/// istiod's `setTimeout`: the VirtualService's timeout, else none (`0s`); Envoy also bounds gRPC
/// requests by it (`max_grpc_timeout`), proxyless gRPC reads only `max_stream_duration`.
fn set_timeout(action: &mut RouteAction, timeout: Option<Duration>, kind: ProxyKind) {
    let t = pb_duration(timeout.unwrap_or_default());
    action.timeout = Some(t);
    if kind == ProxyKind::Grpc {
        action.max_stream_duration = Some(route_action::MaxStreamDuration {
            max_stream_duration: Some(t),
            ..Default::default()
        });
    } else {
        #[allow(deprecated)] // istiod still sets it: `max_stream_duration` had regressions in Envoy
        {
            action.max_grpc_timeout = Some(t);
        }
    }
}

fn pb_duration(d: Duration) -> envoy_types::pb::google::protobuf::Duration {
    envoy_types::pb::google::protobuf::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

/// istiod's `TranslateRouteMatch`: no match is `prefix: /`; headers sorted by name, then the
/// pseudo-headers `:method`, `:authority`, `:scheme`; query parameters sorted by name.
pub fn route_match(m: Option<&HttpMatchRequest>) -> RouteMatch {
    let mut out = prefix_match();
    let Some(m) = m else { return out };
    for (name, sm) in &m.headers {
        out.headers.push(header_matcher(name, sm));
    }
    for (name, sm) in &m.without_headers {
        let mut h = header_matcher(name, sm);
        h.invert_match = true;
        // `treat_missing_header_as_empty` conflicts with a presence match.
        h.treat_missing_header_as_empty = !is_presence(sm);
        out.headers.push(h);
    }
    out.headers.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(uri) = &m.uri {
        if let Some(e) = &uri.exact {
            out.path_specifier = Some(route_match::PathSpecifier::Path(e.clone()));
        } else if let Some(p) = &uri.prefix {
            out.path_specifier = Some(route_match::PathSpecifier::Prefix(p.clone()));
        } else if let Some(r) = &uri.regex {
            out.path_specifier = Some(route_match::PathSpecifier::SafeRegex(regex(r)));
        }
    }
    out.case_sensitive = Some(BoolValue {
        value: !m.ignore_uri_case,
    });
    for (name, sm) in [
        (":method", &m.method),
        (":authority", &m.authority),
        (":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            out.headers.push(header_matcher(name, sm));
        }
    }
    for (name, sm) in &m.query_params {
        out.query_parameters.push(QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(if is_presence(sm) {
                QueryParameterMatchSpecifier::PresentMatch(true)
            } else {
                QueryParameterMatchSpecifier::StringMatch(string_matcher(sm))
            }),
        });
    }
    out
}

/// No value, or regex `*` (not RE2: istiod reads it as "present", istio#20629).
fn is_presence(sm: &StringMatch) -> bool {
    sm.regex.as_deref() == Some("*") || (sm.exact.is_none() && sm.prefix.is_none() && sm.regex.is_none())
}

fn header_matcher(name: &str, sm: &StringMatch) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_owned(),
        header_match_specifier: Some(if is_presence(sm) {
            HeaderMatchSpecifier::PresentMatch(true)
        } else {
            HeaderMatchSpecifier::StringMatch(string_matcher(sm))
        }),
        ..Default::default()
    }
}

/// istiod's `ConvertToEnvoyMatch`.
pub(super) fn string_matcher(sm: &StringMatch) -> StringMatcher {
    let pattern = if let Some(e) = &sm.exact {
        string_matcher::MatchPattern::Exact(e.clone())
    } else if let Some(p) = &sm.prefix {
        string_matcher::MatchPattern::Prefix(p.clone())
    } else {
        string_matcher::MatchPattern::SafeRegex(regex(sm.regex.as_deref().unwrap_or_default()))
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    }
}

fn regex(r: &str) -> RegexMatcher {
    RegexMatcher {
        regex: r.to_owned(),
        ..Default::default()
    }
}

/// istiod's `IsCatchAllRoute`: prefix `/` or regex `.*`, with no header or query match.
pub fn is_catch_all(r: &Route) -> bool {
    let Some(m) = &r.r#match else { return false };
    let all = match &m.path_specifier {
        Some(route_match::PathSpecifier::Prefix(p)) => p == "/",
        Some(route_match::PathSpecifier::SafeRegex(r)) => r.regex == ".*",
        _ => false,
    };
    all && m.headers.is_empty() && m.query_parameters.is_empty() && m.dynamic_metadata.is_empty()
}

/// istiod's `ConvertPolicy`: none set → the default (2 retries on connection failures, refused
/// streams, `unavailable` and `cancelled`, its `retriable-status-codes` listing no code, so 503s are
/// not retried; another host each time unless a consistent hash pins one); `attempts: 0` → no
/// retries; else the default with the VirtualService's fields (integers in `retryOn` are status
/// codes). MeshConfig `defaultHttpRetryPolicy` is not read.
pub fn retry_policy(r: Option<&HttpRetry>, consistent_hash: bool) -> Option<RetryPolicy> {
    let mut out = RetryPolicy {
        retry_on: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes".to_owned(),
        num_retries: Some(UInt32Value { value: 2 }),
        host_selection_retry_max_attempts: 5,
        ..Default::default()
    };
    if !consistent_hash {
        out.retry_host_predicate = vec![retry_policy::RetryHostPredicate {
            name: "envoy.retry_host_predicates.previous_hosts".to_owned(),
            config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(any(
                &PreviousHostsPredicate::default(),
            ))),
        }];
    }
    let Some(r) = r else { return Some(out) };
    if r.attempts <= 0 {
        return None;
    }
    out.num_retries = Some(UInt32Value {
        value: r.attempts as u32,
    });
    if !r.retry_on.is_empty() {
        let (mut on, mut codes) = (Vec::new(), Vec::new());
        for part in r.retry_on.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.parse::<u32>() {
                Ok(code) if is_http_status(code) => codes.push(code),
                _ => on.push(part),
            }
        }
        out.retry_on = on.join(",");
        if !codes.is_empty() && !out.retry_on.contains("retriable-status-codes") {
            out.retry_on.push_str(",retriable-status-codes");
        }
        out.retriable_status_codes = codes;
    }
    out.per_try_timeout = r.per_try_timeout.map(pb_duration);
    out.retry_back_off = r.backoff.map(|b| retry_policy::RetryBackOff {
        base_interval: Some(pb_duration(b)),
        ..Default::default()
    });
    if r.retry_remote_localities == Some(true) {
        out.retry_priority = Some(retry_policy::RetryPriority {
            name: "envoy.retry_priorities.previous_priorities".to_owned(),
            config_type: Some(retry_policy::retry_priority::ConfigType::TypedConfig(any(
                &PreviousPrioritiesConfig { update_frequency: 2 },
            ))),
        });
    }
    Some(out)
}

/// The status codes Go's `http.StatusText` names: what istiod's `parseRetryOn` takes as a code.
fn is_http_status(c: u32) -> bool {
    matches!(c, 100..=103 | 200..=208 | 226 | 300..=305 | 307 | 308 | 400..=418 | 421..=426 | 428 | 429
        | 431 | 451 | 500..=508 | 510 | 511)
}

/// istiod's `TranslateFault`: a fixed delay and an HTTP or gRPC abort, each with its share
/// (`percentage` per million; the deprecated integer `percent` per hundred). `None` when neither is
/// usable (exponential delays are rejected by validation).
pub fn fault(f: &HttpFaultInjection) -> Option<HttpFault> {
    let delay = f.delay.as_ref().and_then(|d| {
        let fixed = d.fixed_delay?;
        Some(FaultDelay {
            percentage: Some(match d.percentage {
                Some(p) => route_actions::per_million(p.value),
                None => FractionalPercent {
                    numerator: d.percent.unwrap_or(0).max(0) as u32,
                    denominator: DenominatorType::Hundred as i32,
                },
            }),
            fault_delay_secifier: Some(fault_delay::FaultDelaySecifier::FixedDelay(pb_duration(fixed))),
        })
    });
    let abort = f.abort.as_ref().and_then(|a| {
        let error = if let Some(s) = a.http_status {
            fault_abort::ErrorType::HttpStatus(s.max(0) as u32)
        } else {
            let code = GRPC_CODES
                .iter()
                .position(|c| Some(*c) == a.grpc_status.as_deref())?;
            fault_abort::ErrorType::GrpcStatus(code as u32)
        };
        Some(FaultAbort {
            percentage: a.percentage.map(|p| route_actions::per_million(p.value)),
            error_type: Some(error),
            ..Default::default()
        })
    });
    (delay.is_some() || abort.is_some()).then(|| HttpFault {
        delay,
        abort,
        ..Default::default()
    })
}

/// istiod's `consistentHashToHashPolicy`. gRPC hashes only on a header (gRFC A42): for it the other
/// keys give no policy.
pub fn hash_policy(kind: ProxyKind, h: &ConsistentHashLb) -> Option<route_action::HashPolicy> {
    use route_action::hash_policy::{ConnectionProperties, Cookie, Header, PolicySpecifier, QueryParameter};
    let spec = if let Some(name) = &h.http_header_name {
        PolicySpecifier::Header(Header {
            header_name: name.clone(),
            ..Default::default()
        })
    } else if kind == ProxyKind::Grpc {
        return None;
    } else if let Some(c) = &h.http_cookie {
        PolicySpecifier::Cookie(Cookie {
            name: c.name.clone(),
            ttl: c.ttl.map(pb_duration),
            path: c.path.clone(),
            ..Default::default()
        })
    } else if let Some(ip) = h.use_source_ip {
        PolicySpecifier::ConnectionProperties(ConnectionProperties { source_ip: ip })
    } else if let Some(q) = &h.http_query_parameter_name {
        PolicySpecifier::QueryParameter(QueryParameter { name: q.clone() })
    } else {
        return None;
    };
    Some(route_action::HashPolicy {
        policy_specifier: Some(spec),
        ..Default::default()
    })
}

/// Header operations of one `headers` block (istiod's `TranslateHeadersOperations`).
#[derive(Debug, Default)]
struct HeaderOps {
    request_add: Vec<HeaderValueOption>,
    request_remove: Vec<String>,
    response_add: Vec<HeaderValueOption>,
    response_remove: Vec<String>,
    /// A `host`/`:authority` set or added: becomes the host rewrite (`set` wins).
    authority: Option<String>,
}

fn header_operations(h: &Headers) -> HeaderOps {
    let is_authority = |k: &str| k.eq_ignore_ascii_case(":authority") || k.eq_ignore_ascii_case("host");
    let internal = |k: &str| k.starts_with(':') || k.eq_ignore_ascii_case("host");
    let add = |m: &BTreeMap<String, String>, action: HeaderAppendAction| -> Vec<HeaderValueOption> {
        // BTreeMap order = istiod's sort by key.
        m.iter()
            .filter(|(k, _)| !internal(k))
            .map(|(k, v)| HeaderValueOption {
                header: Some(HeaderValue {
                    key: k.clone(),
                    value: v.clone(),
                    ..Default::default()
                }),
                append_action: action as i32,
                ..Default::default()
            })
            .collect()
    };
    let ops = |o: Option<&crate::istio::virtual_service::HeaderOperations>| {
        let Some(o) = o else {
            return (Vec::new(), Vec::new(), None);
        };
        let mut all = add(&o.set, HeaderAppendAction::OverwriteIfExistsOrAdd);
        all.extend(add(&o.add, HeaderAppendAction::AppendIfExistsOrAdd));
        let remove = o.remove.iter().filter(|k| !internal(k)).cloned().collect();
        let auth = |m: &BTreeMap<String, String>| {
            m.iter()
                .filter(|(k, _)| is_authority(k))
                .map(|(_, v)| v.clone())
                .next_back()
        };
        (all, remove, auth(&o.set).or_else(|| auth(&o.add)))
    };
    let (request_add, request_remove, authority) = ops(h.request.as_ref());
    let (response_add, response_remove, _) = ops(h.response.as_ref());
    HeaderOps {
        request_add,
        request_remove,
        response_add,
        response_remove,
        authority,
    }
}

/// The fields of `vs` a client of `kind` does not act on, as `spec.http[i]…` paths (explain).
pub fn ignored_fields(kind: ProxyKind, vs: &ResolvedVs) -> Vec<String> {
    if kind != ProxyKind::Grpc {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, http) in vs.spec.http.iter().enumerate() {
        let f = |s: &str| format!("spec.http[{i}].{s}");
        if http.headers.is_some() || http.route.iter().any(|d| d.headers.is_some()) {
            out.push(f("headers (gRPC does not rewrite headers)"));
        }
        if http.rewrite.is_some() {
            out.push(f("rewrite (gRPC does not rewrite requests)"));
        }
        if http.redirect.is_some() || http.direct_response.is_some() {
            out.push(f(
                "redirect/directResponse (gRPC only forwards: meshd leaves the route out for gRPC)",
            ));
        }
        if http.mirror.is_some() || http.mirrors.is_some() {
            out.push(f("mirror/mirrors (gRPC does not mirror requests)"));
        }
        if http.cors_policy.is_some() {
            out.push(f(
                "corsPolicy (not sent to gRPC, which would refuse the route configuration)",
            ));
        }
        if let Some(r) = &http.retries {
            if r.per_try_timeout.is_some() {
                out.push(f("retries.perTryTimeout"));
            }
            // gRFC A44: gRPC retries on status codes only.
            const GRPC_RETRY_ON: &[&str] = &[
                "cancelled",
                "deadline-exceeded",
                "internal",
                "resource-exhausted",
                "unavailable",
            ];
            let other: Vec<&str> = r
                .retry_on
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty() && !GRPC_RETRY_ON.contains(c))
                .collect();
            if !other.is_empty() {
                out.push(f(&format!(
                    "retries.retryOn {} (gRPC retries on status codes only)",
                    other.join(",")
                )));
            }
        }
        for (j, m) in http.matches.iter().enumerate() {
            if !m.query_params.is_empty() {
                out.push(f(&format!(
                    "match[{j}].queryParams (gRPC requests have no query: meshd leaves the match out for gRPC)"
                )));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "route_tests.rs"]
pub(crate) mod tests;
