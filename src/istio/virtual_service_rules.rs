//! istiod's `ValidateVirtualService` (`pkg/config/validation/validation.go`, `virtualservice.go`)
//! on meshd's VirtualService model: hosts and their overlaps, gateway names, JWT-claim routing only
//! on gateways, HTTP routes (matches, destinations, retries, faults, header operations, redirects,
//! direct responses, mirrors, CORS, delegation), and TCP/TLS routes, checked before sidecars'
//! are reported as ignored.

use std::collections::BTreeSet;

use super::{
    common::StringMatch,
    http_actions,
    l4_route::{self, TcpRoute, TlsRoute},
    validate::{self, Report},
    virtual_service::{
        GRPC_CODES, Headers, HttpFaultInjection, HttpMatchRequest, HttpRetry, HttpRewrite, HttpRoute,
        HttpRouteDestination, VirtualService,
    },
};

/// The sidecars' gateway name.
const MESH: &str = "mesh";

/// The prefix of a header name that routes on a JWT claim (istiod's `jwt.ToRoutingClaim`).
const JWT_CLAIM_PREFIX: &str = "@request.auth.claims";

/// Envoy's `x-envoy-retry-on` and `x-envoy-retry-grpc-on` policies (istiod's
/// `supportedRetryOnPolicies`); HTTP status codes are taken too.
const RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// Pseudo-headers a match may name.
const PSEUDO_HEADERS: &[&str] = &[":method", ":scheme", ":authority", ":path", ":status"];

/// istiod's `ValidateVirtualService`.
pub(crate) fn validate(vs: &VirtualService, namespace: &str, r: &mut Report) {
    let delegate = vs.hosts.is_empty();
    if delegate {
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
    validate::gateway_names(&vs.gateways, "spec.gateways", r);
    // Bound to gateways only when gateways are named and `mesh` is not among them.
    let to_gateway = !vs.gateways.is_empty() && !vs.gateways.iter().any(|g| g == MESH);
    if !to_gateway {
        for (i, route) in vs.http.iter().enumerate() {
            for (j, m) in route.matches.iter().enumerate() {
                for (group, map) in [("headers", &m.headers), ("withoutHeaders", &m.without_headers)] {
                    for name in map.keys().filter(|n| is_jwt_claim(n)) {
                        r.error(
                            format!("spec.http[{i}].match[{j}].{group}.{name}"),
                            "JWT claim based routing is only supported on gateways (the mesh gateway applies here)",
                        );
                    }
                }
            }
        }
    }
    hosts(vs, to_gateway, r);
    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        r.error("spec", "one of http, tcp or tls is required");
    }
    for (i, route) in vs.http.iter().enumerate() {
        http_route(route, &format!("spec.http[{i}]"), delegate, r);
    }
    for (i, route) in vs.tcp.iter().enumerate() {
        let f = format!("spec.tcp[{i}]");
        if let Some(t) = validate::typed::<TcpRoute>(route, &f, r) {
            l4_route::tcp_route(&t, &f, r);
        }
    }
    for (i, route) in vs.tls.iter().enumerate() {
        let f = format!("spec.tls[{i}]");
        if let Some(t) = validate::typed::<TlsRoute>(route, &f, r) {
            l4_route::tls_route(&t, &vs.hosts, to_gateway, &f, r);
        }
    }
    r.unsupported("spec.tcp", !vs.tcp.is_empty());
    r.unsupported("spec.tls", !vs.tls.is_empty());
    validate::export_to(&vs.export_to, namespace, false, "spec.exportTo", r);
}

fn is_jwt_claim(name: &str) -> bool {
    name.strip_prefix(JWT_CLAIM_PREFIX)
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Each host valid (`*` not for the mesh gateway; IPs allowed), and, when all are, no two
/// overlapping (`*.foo.com` and `*.com` route the same requests).
fn hosts(vs: &VirtualService, to_gateway: bool, r: &mut Report) {
    let mut all_valid = true;
    for (i, host) in vs.hosts.iter().enumerate() {
        let f = format!("spec.hosts[{i}]");
        if host.parse::<std::net::IpAddr>().is_ok() || (to_gateway && host == "*") {
            continue;
        }
        let mut one = Report::default();
        validate::wildcard_domain(host, &f, &mut one);
        let (errors, _) = one.finish();
        if !errors.is_empty() {
            all_valid = false;
            for e in errors {
                r.error(e.field, e.message);
            }
        } else if host == "*" {
            all_valid = false;
            r.error(&f, "the wildcard host `*` is not allowed for the mesh gateway");
        }
    }
    if !all_valid {
        return;
    }
    for (j, b) in vs.hosts.iter().enumerate() {
        if let Some(a) = vs.hosts[..j].iter().find(|a| validate::hosts_overlap(a, b)) {
            r.error(
                format!("spec.hosts[{j}]"),
                format!("duplicate host: {b:?} overlaps {a:?}"),
            );
        }
    }
}

/// istiod's `validateHTTPRoute`.
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
    let replaces = route.redirect.is_some() || route.direct_response.is_some();
    if replaces && (route.fault.is_some() || route.rewrite.is_some()) {
        r.error(
            f,
            "a redirect or directResponse cannot be combined with fault or rewrite",
        );
    }
    if route.mirror.is_some() && route.mirrors.is_some() {
        r.error(f, "only one of mirror or mirrors may be set");
    }
    actions(route, f, r);
    for (i, m) in route.matches.iter().enumerate() {
        match_request(m, &format!("{f}.match[{i}]"), in_delegate, r);
    }
    destinations(&route.route, f, r);
    if let Some(rw) = &route.rewrite {
        rewrite(rw, &format!("{f}.rewrite"), r);
    }
    authority_once(route, f, r);
    if let Some(t) = route.timeout {
        validate::duration(t, &format!("{f}.timeout"), r);
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

/// istiod's rules for the HTTP actions besides forwarding: redirect, direct response, mirrors, CORS.
fn actions(route: &HttpRoute, f: &str, r: &mut Report) {
    if let Some(rd) = &route.redirect {
        http_actions::redirect(rd, &format!("{f}.redirect"), r);
    }
    if let Some(dr) = &route.direct_response {
        http_actions::direct_response(dr, &format!("{f}.directResponse"), r);
    }
    if let Some(d) = &route.mirror {
        http_actions::destination(d, &format!("{f}.mirror"), r);
    }
    if let Some(ms) = &route.mirrors {
        http_actions::mirrors(ms, &format!("{f}.mirrors"), r);
    }
    if let Some(p) = route.mirror_percentage {
        validate::percent(p.value, &format!("{f}.mirrorPercentage.value"), r);
    }
    if let Some(p) = route.mirror_percent {
        let pf = format!("{f}.mirrorPercent");
        if p > 100 {
            r.error(&pf, format!("{p} is over 100"));
        }
        r.warn(&pf, "deprecated: use mirrorPercentage");
    }
    if let Some(c) = &route.cors_policy {
        http_actions::cors(c, &format!("{f}.corsPolicy"), r);
    }
}

/// istiod's `validateHTTPRewrite`: `uri` or `uriRegexRewrite` (not both) or `authority`; a regex
/// rewrite needs a valid pattern and a substitution.
fn rewrite(rw: &HttpRewrite, f: &str, r: &mut Report) {
    if !rw.uri.is_empty() && rw.uri_regex_rewrite.is_some() {
        r.error(f, "rewrite may set only one of uri or uriRegexRewrite");
    }
    if rw.uri.is_empty() && rw.uri_regex_rewrite.is_none() && rw.authority.is_empty() {
        r.error(f, "rewrite must set uri, uriRegexRewrite or authority");
    }
    if let Some(re) = &rw.uri_regex_rewrite {
        let rf = format!("{f}.uriRegexRewrite");
        if re.pattern.is_empty() || re.rewrite.is_empty() {
            r.error(&rf, "uriRegexRewrite needs both match and rewrite");
        } else {
            validate::regex(&re.pattern, &format!("{rf}.match"), r);
        }
    }
}

/// istiod's `validateAuthorityRewrite`: the authority is rewritten in one place only.
fn authority_once(route: &HttpRoute, f: &str, r: &mut Report) {
    let mut sets = usize::from(route.rewrite.as_ref().is_some_and(|rw| !rw.authority.is_empty()));
    if let Some(req) = route.headers.as_ref().and_then(|h| h.request.as_ref()) {
        sets += req
            .set
            .keys()
            .chain(req.add.keys())
            .filter(|k| is_authority(k))
            .count();
    }
    if sets > 1 {
        r.error(
            format!("{f}.headers.request"),
            "the authority is set more than once (rewrite.authority, :authority, host)",
        );
    }
}

fn is_authority(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

/// istiod's `validateHTTPRouteMatchRequest`.
fn match_request(m: &HttpMatchRequest, f: &str, in_delegate: bool, r: &mut Report) {
    for (name, sm, empty_prefix_ok) in [
        ("uri", &m.uri, true),
        ("scheme", &m.scheme, false),
        ("method", &m.method, false),
        ("authority", &m.authority, false),
    ] {
        if let Some(sm) = sm {
            sm.validate(&format!("{f}.{name}"), empty_prefix_ok, r);
            no_regex_in_delegate(sm, in_delegate, &format!("{f}.{name}"), r);
        }
    }
    for (group, map) in [
        ("headers", &m.headers),
        ("withoutHeaders", &m.without_headers),
        ("queryParams", &m.query_params),
    ] {
        for (name, sm) in map {
            let hf = format!("{f}.{group}.{name}");
            if group == "queryParams" {
                if name.is_empty() {
                    r.error(&hf, "name must not be empty");
                }
            } else {
                match_header_name(name, &hf, r);
            }
            // In withoutHeaders, regex `*` means "present", not an RE2 regex.
            if !(group == "withoutHeaders" && sm.regex.as_deref() == Some("*")) {
                sm.validate(&hf, false, r);
            }
            no_regex_in_delegate(sm, in_delegate, &hf, r);
        }
    }
    validate::port_if_set(m.port.unwrap_or(0), &format!("{f}.port"), r);
    validate::labels(&m.source_labels, &format!("{f}.sourceLabels"), r);
    validate::gateway_names(&m.gateways, &format!("{f}.gateways"), r);
    if !m.source_namespace.is_empty() && !validate::is_dns1123_label(&m.source_namespace) {
        r.error(
            format!("{f}.sourceNamespace"),
            format!("{:?} is not a namespace name", m.source_namespace),
        );
    }
}

fn no_regex_in_delegate(sm: &StringMatch, in_delegate: bool, f: &str, r: &mut Report) {
    if in_delegate && sm.regex.is_some() {
        r.error(
            format!("{f}.regex"),
            "regex matches are not allowed in a delegate",
        );
    }
}

/// istiod's `ValidateHTTPHeaderNameOrJwtClaimRoute`: an RFC 7230 token, a pseudo-header or a JWT
/// claim. Upper case is Istio-valid but a warning: gRPC clients match metadata keys as written.
fn match_header_name(name: &str, f: &str, r: &mut Report) {
    if name.is_empty() {
        r.error(f, "header name must not be empty");
    } else if !(is_jwt_claim(name) || PSEUDO_HEADERS.contains(&name) || validate::is_header_name(name)) {
        r.error(f, format!("{name:?} is not a valid header name"));
    } else if !is_jwt_claim(name) && name.bytes().any(|b| b.is_ascii_uppercase()) {
        r.warn(
            f,
            "header names are case-insensitive; write it in lowercase (gRPC clients compare as written)",
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
        } else {
            http_actions::destination(dest, &format!("{df}.destination"), r);
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

/// istiod's `validateHTTPRetry`.
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
    if let Some(d) = retry.per_try_timeout {
        validate::duration(d, &format!("{f}.perTryTimeout"), r);
    }
    if !retry.retry_on.is_empty() {
        // As istiod: split on `,` alone (` 503` is no policy).
        for p in retry.retry_on.split(',') {
            let status = p.parse::<u16>().is_ok_and(is_http_status);
            if !status && !RETRY_ON.contains(&p) {
                r.error(
                    format!("{f}.retryOn"),
                    format!("{p:?} is not a retryOn policy or HTTP status"),
                );
            }
        }
    }
    if let Some(d) = retry.backoff {
        validate::duration(d, &format!("{f}.backoff"), r);
    }
}

/// Whether Go's `http.StatusText` names `code` (what istiod's retryOn check asks).
fn is_http_status(code: u16) -> bool {
    matches!(code, 100..=103 | 200..=208 | 226 | 300..=305 | 307 | 308 | 400..=418 | 421..=426
        | 428 | 429 | 431 | 451 | 500..=508 | 510 | 511)
}

/// istiod's `validateHTTPFaultInjection`.
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
            fault_percentage(p.value, &format!("{af}.percentage.value"), r);
        }
    }
    if let Some(d) = &fault.delay {
        let df = format!("{f}.delay");
        if d.exponential_delay.is_some() {
            r.error(
                format!("{df}.exponentialDelay"),
                "exponentialDelay is not supported",
            );
        } else {
            match d.fixed_delay {
                None => r.error(format!("{df}.fixedDelay"), "fixedDelay is required"),
                Some(t) => validate::duration(t, &format!("{df}.fixedDelay"), r),
            }
        }
        if let Some(p) = d.percentage {
            fault_percentage(p.value, &format!("{df}.percentage.value"), r);
        }
        if let Some(p) = d.percent.filter(|p| !(0..=100).contains(p)) {
            r.error(format!("{df}.percent"), format!("{p} is not in 0..100"));
        }
    }
}

/// istiod's `validatePercentage`: 0, or 0.0001..=100.
fn fault_percentage(value: f64, f: &str, r: &mut Report) {
    validate::percent(value, f, r);
    if value > 0.0 && value < 0.0001 {
        r.error(f, format!("percentage {value} is neither 0 nor at least 0.0001"));
    }
}

/// istiod's header operation rules: request `set`/`add` may name `:authority` (or `host`), nothing
/// else `:`-prefixed; `remove` and response operations name no `:` header and not `host`; values
/// are Envoy-formattable.
fn headers(h: &Headers, f: &str, r: &mut Report) {
    for (side, ops) in [("request", &h.request), ("response", &h.response)] {
        let Some(ops) = ops else { continue };
        let request = side == "request";
        let named = ops
            .set
            .iter()
            .chain(ops.add.iter())
            .map(|(k, v)| (k, Some(v), request))
            .chain(ops.remove.iter().map(|k| (k, None, false)));
        let mut seen = BTreeSet::new();
        for (name, value, authority_ok) in named {
            let nf = format!("{f}.{side}.{name}");
            let internal = name.starts_with(':') || name.eq_ignore_ascii_case("host");
            let bad = if name.is_empty() {
                Some("header name must not be empty".to_owned())
            } else if internal && !(authority_ok && is_authority(name)) {
                Some(format!("header {name:?} cannot be set or removed here"))
            } else {
                None
            };
            if let Some(why) = bad {
                if seen.insert(nf.clone()) {
                    r.error(&nf, why);
                }
                continue;
            }
            if let Some(v) = value {
                validate::header_value(v, &nf, r);
            }
        }
    }
}
