//! The routes section of `/debug/explain`: for one HTTP service port, the VirtualService that applies
//! for this proxy (or the default route), its routes as sent (matches, destinations with weights and
//! cluster names, timeout, retries, fault, hash), the VirtualServices it shadows, and the fields this
//! client does not act on. Built from [`rds::service_routes`], the function RDS encodes, so it cannot
//! drift from what the proxy is sent.

use envoy_types::pb::envoy::{
    config::{
        core::v3::data_source,
        route::v3::{
            DirectResponseAction, HeaderMatcher, RedirectAction, Route, header_matcher::HeaderMatchSpecifier,
            redirect_action, route, route_action, route_match,
        },
    },
    extensions::filters::{
        common::fault::v3::fault_delay,
        http::fault::v3::{HttpFault, fault_abort},
    },
    r#type::{matcher::v3::string_matcher::MatchPattern, v3::FractionalPercent},
};
use prost::Message;
use serde::Serialize;

use crate::{
    envoy::{
        Proxy, ProxyKind, {Mesh, cds, rds, route as translate},
    },
    model::Service,
};

/// The routes a proxy gets for one service port.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutesReport {
    /// The route configuration that carries them (`outbound|<port>||<host>` for gRPC, `<port>` for a
    /// sidecar).
    pub route_config: String,
    /// The VirtualService they come from (`namespace/name`); `None`: the default route.
    pub virtual_service: Option<String>,
    /// VirtualServices that also name the host and that the proxy sees, but lose to the first.
    pub shadowed: Vec<String>,
    /// The routes, in match order.
    pub routes: Vec<RouteReport>,
    /// VirtualService fields this client does not act on.
    pub ignored: Vec<String>,
}

/// One route as sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteReport {
    /// The route's name (`<http name>[.<match name>]`, `default`).
    pub name: String,
    /// Its conditions in words (`prefix /api, header x-canary exact "true"`).
    pub r#match: String,
    /// Where it sends requests.
    pub destinations: Vec<DestinationReport>,
    /// What the proxy answers itself instead (a redirect or a direct response), in words.
    pub answer: Option<String>,
    /// The request timeout (`0s`: none).
    pub timeout: Option<String>,
    /// Retries in words; `None`: no retries.
    pub retries: Option<String>,
    /// Injected faults in words.
    pub fault: Option<String>,
    /// Consistent-hash keys (from the DestinationRule).
    pub hash: Vec<String>,
}

/// One destination cluster.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationReport {
    /// The CDS cluster (`outbound|<port>|<subset>|<host>`).
    pub cluster: String,
    /// Its weight; `None` for a single destination.
    pub weight: Option<u32>,
}

/// The report for `port` of `service` as `proxy` gets it; `None` for a port without HTTP routes.
pub fn report(mesh: &dyn Mesh, proxy: &Proxy, service: &Service, port: u16) -> Option<RoutesReport> {
    let sp = service.ports.iter().find(|p| p.port == port)?;
    let route_config = match proxy.kind {
        ProxyKind::Grpc => cds::cluster_name(port, &service.hostname),
        ProxyKind::Sidecar if sp.protocol.is_http() => port.to_string(),
        _ => return None,
    };
    let r = rds::service_routes(mesh, proxy, service, port);
    let name = |vs: &crate::traffic::virtual_service::ResolvedVs| {
        format!("{}/{}", vs.object.namespace, vs.object.name)
    };
    Some(RoutesReport {
        route_config,
        virtual_service: r.virtual_service.map(|vs| name(vs)),
        shadowed: r.shadowed.iter().map(|vs| name(vs)).collect(),
        ignored: r
            .virtual_service
            .map(|vs| translate::ignored_fields(proxy.kind, vs))
            .unwrap_or_default(),
        routes: r.routes.iter().map(route_report).collect(),
    })
}

fn route_report(r: &Route) -> RouteReport {
    let action = match &r.action {
        Some(route::Action::Route(a)) => Some(a),
        _ => None,
    };
    let destinations = match action.and_then(|a| a.cluster_specifier.as_ref()) {
        Some(route_action::ClusterSpecifier::Cluster(c)) => vec![DestinationReport {
            cluster: c.clone(),
            weight: None,
        }],
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => w
            .clusters
            .iter()
            .map(|c| DestinationReport {
                cluster: c.name.clone(),
                weight: c.weight.map(|w| w.value),
            })
            .collect(),
        _ => Vec::new(),
    };
    let retries = action.and_then(|a| a.retry_policy.as_ref()).map(|p| {
        let mut s = format!("{} on {}", p.num_retries.map_or(1, |n| n.value), p.retry_on);
        if !p.retriable_status_codes.is_empty() {
            s += &format!(" (codes {:?})", p.retriable_status_codes);
        }
        if let Some(t) = &p.per_try_timeout {
            s += &format!(", {} per try", duration(t));
        }
        s
    });
    let fault = r
        .typed_per_filter_config
        .get(translate::FAULT_FILTER)
        .and_then(|a| HttpFault::decode(a.value.as_slice()).ok())
        .map(|f| fault_words(&f));
    let hash = action
        .map(|a| a.hash_policy.iter().filter_map(hash_words).collect())
        .unwrap_or_default();
    let answer = match &r.action {
        Some(route::Action::Redirect(rd)) => Some(redirect_words(rd)),
        Some(route::Action::DirectResponse(dr)) => Some(direct_response_words(dr)),
        _ => None,
    };
    RouteReport {
        name: r.name.clone(),
        r#match: r.r#match.as_ref().map(match_words).unwrap_or_default(),
        destinations,
        answer,
        timeout: action.and_then(|a| a.timeout.as_ref()).map(duration),
        retries,
        fault,
        hash,
    }
}

/// `redirect 301 to https://<request's host>:8443/login`: what the redirect changes, the rest is the
/// request's own.
fn redirect_words(rd: &RedirectAction) -> String {
    use redirect_action::{PathRewriteSpecifier, RedirectResponseCode, SchemeRewriteSpecifier};
    let code = match RedirectResponseCode::try_from(rd.response_code) {
        Ok(RedirectResponseCode::Found) => 302,
        Ok(RedirectResponseCode::SeeOther) => 303,
        Ok(RedirectResponseCode::TemporaryRedirect) => 307,
        Ok(RedirectResponseCode::PermanentRedirect) => 308,
        _ => 301,
    };
    let scheme = match &rd.scheme_rewrite_specifier {
        Some(SchemeRewriteSpecifier::HttpsRedirect(true)) => "https",
        Some(SchemeRewriteSpecifier::SchemeRedirect(s)) => s.as_str(),
        _ => "<request's scheme>",
    };
    let host = match rd.host_redirect.as_str() {
        "" => "<request's host>",
        h => h,
    };
    let port = match rd.port_redirect {
        0 => String::new(),
        p => format!(":{p}"),
    };
    let path = match &rd.path_rewrite_specifier {
        Some(PathRewriteSpecifier::PathRedirect(p)) if !p.is_empty() => p.clone(),
        Some(PathRewriteSpecifier::PrefixRewrite(p)) => format!("{p}<rest of the path>"),
        _ => "<request's path>".to_owned(),
    };
    let query = if rd.strip_query { " (query dropped)" } else { "" };
    format!("redirect {code} to {scheme}://{host}{port}{path}{query}")
}

/// `answer 503 directly, body "unavailable"` (bodies past 40 characters, or not text, by size).
fn direct_response_words(dr: &DirectResponseAction) -> String {
    let body = match dr.body.as_ref().and_then(|b| b.specifier.as_ref()) {
        Some(data_source::Specifier::InlineString(s)) if s.chars().count() <= 40 => format!(", body {s:?}"),
        Some(data_source::Specifier::InlineString(s)) => format!(", body of {} bytes", s.len()),
        Some(data_source::Specifier::InlineBytes(b)) => format!(", body of {} bytes", b.len()),
        _ => ", no body".to_owned(),
    };
    format!("answer {} directly{body}", dr.status)
}

fn hash_words(h: &route_action::HashPolicy) -> Option<String> {
    use route_action::hash_policy::PolicySpecifier;
    Some(match h.policy_specifier.as_ref()? {
        PolicySpecifier::Header(h) => format!("header {}", h.header_name),
        PolicySpecifier::Cookie(c) => format!("cookie {}", c.name),
        PolicySpecifier::ConnectionProperties(_) => "source IP".to_owned(),
        PolicySpecifier::QueryParameter(q) => format!("query parameter {}", q.name),
        PolicySpecifier::FilterState(f) => format!("filter state {}", f.key),
    })
}

fn duration(d: &envoy_types::pb::google::protobuf::Duration) -> String {
    format!("{}s", d.seconds as f64 + f64::from(d.nanos) / 1e9)
}

fn match_words(m: &envoy_types::pb::envoy::config::route::v3::RouteMatch) -> String {
    let mut parts = vec![match &m.path_specifier {
        Some(route_match::PathSpecifier::Prefix(p)) => format!("prefix {p}"),
        Some(route_match::PathSpecifier::Path(p)) => format!("path {p}"),
        Some(route_match::PathSpecifier::SafeRegex(r)) => format!("path regex {}", r.regex),
        _ => "any path".to_owned(),
    }];
    if m.case_sensitive.is_some_and(|c| !c.value) {
        parts.push("ignoring case".to_owned());
    }
    parts.extend(m.headers.iter().map(header_words));
    parts.extend(m.query_parameters.iter().map(|q| format!("query {}", q.name)));
    parts.join(", ")
}

fn header_words(h: &HeaderMatcher) -> String {
    let how = match &h.header_match_specifier {
        Some(HeaderMatchSpecifier::PresentMatch(_)) => "present".to_owned(),
        Some(HeaderMatchSpecifier::StringMatch(s)) => match &s.match_pattern {
            Some(MatchPattern::Exact(v)) => format!("exact {v:?}"),
            Some(MatchPattern::Prefix(v)) => format!("prefix {v:?}"),
            Some(MatchPattern::SafeRegex(r)) => format!("regex {:?}", r.regex),
            other => format!("{other:?}"),
        },
        other => format!("{other:?}"),
    };
    let not = if h.invert_match { "not " } else { "" };
    format!("{not}header {} {how}", h.name)
}

fn fault_words(f: &HttpFault) -> String {
    let pct = |p: Option<&FractionalPercent>| {
        p.map_or(100.0, |p| {
            let per = match p.denominator {
                0 => 100.0,
                1 => 10_000.0,
                _ => 1_000_000.0,
            };
            f64::from(p.numerator) * 100.0 / per
        })
    };
    let mut parts = Vec::new();
    if let Some(d) = &f.delay {
        let by = match &d.fault_delay_secifier {
            Some(fault_delay::FaultDelaySecifier::FixedDelay(t)) => duration(t),
            _ => "?".to_owned(),
        };
        parts.push(format!("delay {by} for {}%", pct(d.percentage.as_ref())));
    }
    if let Some(a) = &f.abort {
        let what = match &a.error_type {
            Some(fault_abort::ErrorType::HttpStatus(s)) => format!("HTTP {s}"),
            Some(fault_abort::ErrorType::GrpcStatus(s)) => format!("gRPC status {s}"),
            other => format!("{other:?}"),
        };
        parts.push(format!("abort with {what} for {}%", pct(a.percentage.as_ref())));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        envoy::{
            StaticMesh,
            static_mesh::{proxy, service},
        },
        model::Protocol,
        traffic::tests::config,
    };

    #[test]
    fn report_names_the_virtual_service_its_routes_and_what_grpc_ignores() {
        let split = "hosts: [echo]\nhttp:\n- name: split\n  fault: {abort: {grpcStatus: UNAVAILABLE, percentage: {value: 50}}}\n  \
                     headers: {request: {set: {x-a: b}}}\n  \
                     route: [{destination: {host: echo, subset: v1}, weight: 80}, {destination: {host: echo, subset: v2}, weight: 20}]";
        let m = StaticMesh::new(1)
            .with(
                service(
                    "echo",
                    "default",
                    &[("grpc", 7070, Protocol::Grpc), ("tcp", 5432, Protocol::Tcp)],
                ),
                vec![],
            )
            .with_config([
                config("VirtualService", "default", "new", "2", split),
                config("VirtualService", "default", "old", "1", split),
            ]);
        let echo = m.service("echo.default.svc.cluster.local").unwrap();
        let grpc = proxy(ProxyKind::Grpc, "default");
        let r = report(&m, &grpc, echo, 7070).unwrap();
        assert_eq!(r.route_config, "outbound|7070||echo.default.svc.cluster.local");
        assert_eq!(
            r.virtual_service.as_deref(),
            Some("default/old"),
            "the oldest wins"
        );
        assert_eq!(r.shadowed, ["default/new"]);
        let route = &r.routes[0];
        assert_eq!(route.name, "split");
        let dests: Vec<(&str, Option<u32>)> = route
            .destinations
            .iter()
            .map(|d| (d.cluster.as_str(), d.weight))
            .collect();
        assert_eq!(
            dests,
            [
                ("outbound|7070|v1|echo.default.svc.cluster.local", Some(80)),
                ("outbound|7070|v2|echo.default.svc.cluster.local", Some(20)),
            ]
        );
        assert_eq!(route.fault.as_deref(), Some("abort with gRPC status 14 for 50%"));
        assert_eq!(route.timeout.as_deref(), Some("0s"));
        assert!(
            r.ignored.iter().any(|f| f.starts_with("spec.http[0].headers")),
            "{:?}",
            r.ignored
        );

        let sidecar = proxy(ProxyKind::Sidecar, "default");
        assert!(
            report(&m, &sidecar, echo, 5432).is_none(),
            "a TCP port has no routes"
        );
        let other = proxy(ProxyKind::Sidecar, "elsewhere");
        let r = report(&m, &other, echo, 7070).unwrap();
        assert_eq!(r.route_config, "7070");
        assert_eq!(
            r.virtual_service.as_deref(),
            Some("default/old"),
            "public by default"
        );
        assert!(r.ignored.is_empty(), "sidecars act on every field");
    }

    #[test]
    fn redirects_and_direct_responses_are_told_in_words() {
        let vs = "hosts: [web]\nhttp:\n\
                  - name: moved\n  match: [{uri: {prefix: /old}}]\n  \
                    redirect: {uri: /new, authority: new.example.com, scheme: https, redirectCode: 308}\n\
                  - name: same-host\n  match: [{uri: {prefix: /v1}}]\n  redirect: {uri: /v2}\n\
                  - name: down\n  match: [{uri: {prefix: /down}}]\n  \
                    directResponse: {status: 503, body: {string: unavailable}}\n\
                  - name: empty\n  directResponse: {status: 204}\n";
        let m = StaticMesh::new(1)
            .with(service("web", "default", &[("http", 80, Protocol::Http)]), vec![])
            .with_config([config("VirtualService", "default", "web", "1", vs)]);
        let web = m.service("web.default.svc.cluster.local").unwrap();
        let r = report(&m, &proxy(ProxyKind::Sidecar, "default"), web, 80).unwrap();
        let answers: Vec<(&str, Option<&str>, usize)> = r
            .routes
            .iter()
            .map(|r| (r.name.as_str(), r.answer.as_deref(), r.destinations.len()))
            .collect();
        assert_eq!(
            answers,
            [
                ("moved", Some("redirect 308 to https://new.example.com/new"), 0),
                (
                    "same-host",
                    Some("redirect 301 to <request's scheme>://<request's host>/v2"),
                    0
                ),
                ("down", Some("answer 503 directly, body \"unavailable\""), 0),
                ("empty", Some("answer 204 directly, no body"), 0),
            ]
        );
    }
}
