//! The VirtualService HTTP actions besides forwarding, as istiod translates them
//! (`core/route/route.go`: `ApplyRedirect`, `ApplyDirectResponse`, `MirrorPercent`,
//! `TranslateRequestMirrorPolicy`, `TranslateCORSPolicy`; `core/httproute.go`:
//! `buildCatchAllVirtualHost`), pure in their arguments. [`route`](super::route) calls them.

use base64::Engine as _;
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{DataSource, RuntimeFractionalPercent, data_source},
            route::v3::{
                DirectResponseAction, RedirectAction, Route, RouteAction, RouteMatch, VirtualHost,
                redirect_action::{self, RedirectResponseCode},
                route, route_action, route_match,
            },
        },
        extensions::filters::http::cors::v3::CorsPolicy as EnvoyCors,
        r#type::v3::{FractionalPercent, fractional_percent::DenominatorType},
    },
    google::protobuf::{BoolValue, Duration},
};

use super::cds;
use crate::{
    config::mesh::OutboundMode,
    istio::{
        http_actions::{CorsPolicy, HttpDirectResponse, HttpRedirect},
        virtual_service::{Destination, HttpRoute},
    },
};

/// istiod's `max_direct_response_body_size_bytes` on route configurations (Envoy's default is 4 KiB):
/// what validation admits for a `directResponse` body.
pub const MAX_DIRECT_RESPONSE_BODY: u32 = 1024 * 1024;

/// The name of the CORS filter (HCM) and of its per-route configuration.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";

/// istiod's `ApplyRedirect` (VirtualService semantics): `None` for a status Envoy has no
/// redirect code for (istiod then leaves the route without an action; validation rejects non-3xx).
pub fn redirect(rd: &HttpRedirect, port: u16, tls: bool) -> Option<RedirectAction> {
    let code = match rd.redirect_code.unwrap_or(0) {
        0 | 301 => RedirectResponseCode::MovedPermanently,
        302 => RedirectResponseCode::Found,
        303 => RedirectResponseCode::SeeOther,
        307 => RedirectResponseCode::TemporaryRedirect,
        308 => RedirectResponseCode::PermanentRedirect,
        _ => return None,
    };
    let mut out = RedirectAction {
        host_redirect: rd.authority.clone(),
        path_rewrite_specifier: Some(redirect_action::PathRewriteSpecifier::PathRedirect(
            rd.uri.clone(),
        )),
        response_code: code as i32,
        ..Default::default()
    };
    if !rd.scheme.is_empty() {
        out.scheme_rewrite_specifier = Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(
            rd.scheme.clone(),
        ));
    }
    // `port` and `derivePort` are a oneof; FROM_PROTOCOL_DEFAULT is Envoy's behaviour already, and
    // FROM_REQUEST_PORT is the port these routes serve.
    let port_set = match (rd.port, rd.derive_port.as_deref()) {
        (Some(p), _) => {
            out.port_redirect = p;
            true
        }
        (None, Some(d)) => {
            if d == "FROM_REQUEST_PORT" {
                out.port_redirect = u32::from(port);
            }
            true
        }
        (None, None) => false,
    };
    if port_set {
        let scheme = match (rd.scheme.as_str(), tls) {
            ("", true) => "https",
            ("", false) => "http",
            (s, _) => s,
        };
        // No explicit :80 for http or :443 for https.
        if (out.port_redirect == 80 && scheme == "http") || (out.port_redirect == 443 && scheme == "https") {
            out.port_redirect = 0;
        }
    }
    Some(out)
}

/// istiod's `ApplyDirectResponse`: the status and the body, text or bytes (base64 in the config;
/// validation rejects what does not decode).
pub fn direct_response(dr: &HttpDirectResponse) -> DirectResponseAction {
    let body = dr.body.as_ref().and_then(|b| {
        let specifier = match (&b.string, &b.bytes) {
            (Some(s), _) => data_source::Specifier::InlineString(s.clone()),
            (None, Some(b)) => {
                data_source::Specifier::InlineBytes(base64::engine::general_purpose::STANDARD.decode(b).ok()?)
            }
            (None, None) => return None,
        };
        Some(DataSource {
            specifier: Some(specifier),
            ..Default::default()
        })
    });
    DirectResponseAction {
        status: dr.status,
        body,
        ..Default::default()
    }
}

/// istiod's mirror policies: `mirror` with `mirrorPercentage` (or the integer `mirrorPercent`; all
/// when neither is set), then each of `mirrors` with its own share; an explicit 0% mirrors nothing.
/// `cluster_of` names a destination's cluster as the route's destinations are named.
pub fn mirror_policies(
    http: &HttpRoute,
    cluster_of: &dyn Fn(&Destination) -> String,
) -> Vec<route_action::RequestMirrorPolicy> {
    let policy = |d: &Destination, share: FractionalPercent| route_action::RequestMirrorPolicy {
        cluster: cluster_of(d),
        runtime_fraction: Some(RuntimeFractionalPercent {
            default_value: Some(share),
            ..Default::default()
        }),
        trace_sampled: Some(BoolValue { value: false }),
        // istiod 1.31: the mirrored request keeps its Host (no `-shadow` suffix).
        disable_shadow_host_suffix_append: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    if let Some(d) = &http.mirror {
        let share = match (http.mirror_percentage, http.mirror_percent) {
            (Some(p), _) => (p.value > 0.0).then(|| per_million(p.value)),
            (None, Some(p)) => (p > 0).then(|| per_hundred(p)),
            (None, None) => Some(per_hundred(100)),
        };
        out.extend(share.map(|s| policy(d, s)));
    }
    for m in http.mirrors.iter().flatten() {
        let share = match m.percentage {
            Some(p) => (p.value > 0.0).then(|| per_million(p.value)),
            None => Some(per_hundred(100)),
        };
        if let (Some(d), Some(s)) = (&m.destination, share) {
            out.push(policy(d, s));
        }
    }
    out
}

/// istiod's `translatePercentToFractionalPercent`: a percentage, per million.
pub(super) fn per_million(p: f64) -> FractionalPercent {
    FractionalPercent {
        numerator: (p * 10_000.0) as u32,
        denominator: DenominatorType::Million as i32,
    }
}

fn per_hundred(p: u32) -> FractionalPercent {
    FractionalPercent {
        numerator: p,
        denominator: DenominatorType::Hundred as i32,
    }
}

/// istiod's `TranslateCORSPolicy`: the filter on for the route (100%), origins as string matches
/// (`allowOrigins`, else the deprecated exact `allowOrigin`), lists comma-joined, `maxAge` in
/// seconds, unmatched preflights forwarded unless `IGNORE`.
pub fn cors_policy(c: &CorsPolicy) -> EnvoyCors {
    let origins = if !c.allow_origins.is_empty() {
        c.allow_origins.iter().map(super::route::string_matcher).collect()
    } else {
        c.allow_origin
            .iter()
            .map(|o| {
                super::route::string_matcher(&crate::istio::StringMatch {
                    exact: Some(o.clone()),
                    ..Default::default()
                })
            })
            .collect()
    };
    EnvoyCors {
        allow_origin_string_match: origins,
        allow_methods: c.allow_methods.join(","),
        allow_headers: c.allow_headers.join(","),
        expose_headers: c.expose_headers.join(","),
        max_age: c.max_age.map(|a| a.as_secs().to_string()).unwrap_or_default(),
        allow_credentials: c.allow_credentials.map(|value| BoolValue { value }),
        filter_enabled: Some(RuntimeFractionalPercent {
            default_value: Some(per_hundred(100)),
            ..Default::default()
        }),
        forward_not_matching_preflights: Some(BoolValue {
            value: c.unmatched_preflights.as_deref() != Some("IGNORE"),
        }),
        ..Default::default()
    }
}

/// istiod's `buildCatchAllVirtualHost`: the last virtual host of a sidecar's port route, for a host
/// no service claims. `ALLOW_ANY`: `allow_any` to `PassthroughCluster`, no timeout;
/// `REGISTRY_ONLY`: `block_all`, answered 502 by the sidecar itself.
pub fn catch_all_virtual_host(outbound: OutboundMode) -> VirtualHost {
    let (name, action) = match outbound {
        OutboundMode::AllowAny => {
            #[allow(deprecated)] // istiod sets `max_grpc_timeout` (see `route::set_timeout`)
            let action = RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                    cds::PASSTHROUGH.to_owned(),
                )),
                timeout: Some(Duration::default()),
                max_grpc_timeout: Some(Duration::default()),
                ..Default::default()
            };
            ("allow_any", route::Action::Route(action))
        }
        OutboundMode::RegistryOnly => (
            "block_all",
            route::Action::DirectResponse(DirectResponseAction {
                status: 502,
                ..Default::default()
            }),
        ),
    };
    VirtualHost {
        name: name.to_owned(),
        domains: vec!["*".to_owned()],
        routes: vec![Route {
            name: name.to_owned(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".to_owned())),
                ..Default::default()
            }),
            action: Some(action),
            ..Default::default()
        }],
        ..Default::default()
    }
}
