//! Route goldens: VirtualService (and DestinationRule) YAML in, the route configurations a sidecar
//! (`9080`) and a proxyless gRPC client (`outbound|9080||reviews…`) get, as proto3 JSON in
//! `src/envoy/testdata/rds/<case>.json` (`UPDATE_GOLDENS=1` rewrites them). Where istio's
//! `route_test.go` covers the same input, the case says which test.

use std::sync::{Arc, LazyLock};

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

use super::*;
use crate::{
    envoy::{
        Mesh, StaticMesh, rds,
        static_mesh::{proxy, service},
    },
    istio::Config,
    model::Protocol,
    traffic::tests::config,
};

const REVIEWS: &str = "reviews.default.svc.cluster.local";

static ENVOY: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/envoy.bin"))[..]).unwrap()
});

/// `msg` as proto3 JSON (Envoy's descriptors).
pub(crate) fn json<M: Message>(msg: &M, full_name: &str) -> serde_json::Value {
    let desc = ENVOY.get_message_by_name(full_name).unwrap();
    serde_json::to_value(DynamicMessage::decode(desc, msg.encode_to_vec().as_slice()).unwrap()).unwrap()
}

/// `reviews` and `ratings` in `default`, each with HTTP port 9080 (and `reviews` with 9090 too).
fn mesh(configs: Vec<Arc<Config>>) -> StaticMesh {
    StaticMesh::new(1)
        .with(
            service(
                "reviews",
                "default",
                &[("http", 9080, Protocol::Http), ("admin", 9090, Protocol::Http)],
            ),
            vec![],
        )
        .with(
            service("ratings", "default", &[("http", 9080, Protocol::Http)]),
            vec![],
        )
        .with_config(configs)
}

const SUBSETS: &str =
    "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]";

/// (case, VirtualService specs, DestinationRule specs).
const CASES: &[(&str, &[&str], &[&str])] = &[
    // No rule: the default route (istiod's BuildDefaultHTTPOutboundRoute).
    ("default", &[], &[]),
    // Weighted subsets; a weight-0 destination is dropped (route_test.go "for weighted clusters").
    (
        "weighted-subsets",
        &[
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews, subset: v1}, weight: 80}, \
           {destination: {host: reviews, subset: v2}, weight: 20}, {destination: {host: ratings}, weight: 0}]}]",
        ],
        &[SUBSETS],
    ),
    // Every match kind; a later catch-all keeps the default behaviour reachable.
    (
        "matches",
        &["hosts: [reviews]\nhttp:\n\
           - name: canary\n  match:\n\
           \x20 - name: hdr\n    headers: {x-canary: {exact: 'true'}, x-user: {prefix: test-}, x-re: {regex: 'a+'}, x-any: {}}\n\
           \x20   withoutHeaders: {x-block: {exact: 'y'}, x-gone: {}}\n\
           \x20 - uri: {prefix: /api}\n    ignoreUriCase: true\n    method: {exact: POST}\n    authority: {exact: reviews}\n\
           \x20 - uri: {exact: /health}\n    queryParams: {debug: {exact: '1'}}\n\
           \x20 - uri: {regex: '/v[0-9]+/.*'}\n\
           \x20 route: [{destination: {host: reviews, subset: v2}}]\n\
           - route: [{destination: {host: reviews, subset: v1}}]"],
        &[SUBSETS],
    ),
    // Source matches are evaluated for the proxy (ns default, app=productpage): the second and third
    // matches are left out; a `gateways` match without `mesh` is too.
    (
        "source-matches",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{sourceLabels: {app: productpage}, headers: {x-a: {exact: '1'}}}, {sourceLabels: {app: other}}, \
           {sourceNamespace: other}, {gateways: [gw]}, {sourceNamespace: default, uri: {prefix: /ns}}]\n\
           \x20 route: [{destination: {host: reviews, subset: v2}}]\n\
           - route: [{destination: {host: reviews, subset: v1}}]"],
        &[SUBSETS],
    ),
    // The first catch-all ends the routes; a match for another port is left out.
    (
        "catch-all-and-ports",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{port: 9090, uri: {prefix: /admin}}]\n  route: [{destination: {host: reviews, port: {number: 9090}}}]\n\
           - match: [{uri: {prefix: /}}]\n  route: [{destination: {host: reviews}}]\n\
           - route: [{destination: {host: ratings}}]"],
        &[],
    ),
    // Timeout and retries (retry_test.go: status codes in retryOn, perTryTimeout, remote localities).
    (
        "timeout-retries",
        &["hosts: [reviews]\nhttp:\n\
           - name: slow\n  match: [{uri: {prefix: /slow}}]\n  timeout: 2.5s\n\
           \x20 retries: {attempts: 3, perTryTimeout: 1s, retryOn: 'gateway-error,503,connect-failure', retryRemoteLocalities: true}\n\
           \x20 route: [{destination: {host: reviews}}]\n\
           - name: no-retries\n  retries: {attempts: 0}\n  route: [{destination: {host: reviews}}]"],
        &[],
    ),
    // Faults: a delay for 10 % and a gRPC abort for 50 %; an HTTP abort with the integer percent.
    (
        "fault",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{headers: {x-fault: {exact: grpc}}}]\n\
           \x20 fault: {delay: {fixedDelay: 5s, percentage: {value: 10}}, abort: {grpcStatus: UNAVAILABLE, percentage: {value: 50}}}\n\
           \x20 route: [{destination: {host: reviews}}]\n\
           - fault: {delay: {fixedDelay: 100ms, percent: 20}, abort: {httpStatus: 503, percentage: {value: 100}}}\n\
           \x20 route: [{destination: {host: reviews}}]"],
        &[],
    ),
    // Header operations on the route and on each weighted destination; `host` becomes the rewrite.
    (
        "headers",
        &["hosts: [reviews]\nhttp:\n\
           - headers: {request: {set: {x-set: a, host: rewritten.example}, add: {x-add: b}, remove: [x-drop]}, \
           response: {set: {x-resp: c}, remove: [server]}}\n\
           \x20 route: [{destination: {host: reviews, subset: v1}, weight: 50, headers: {request: {set: {x-v: '1'}}}}, \
           {destination: {host: reviews, subset: v2}, weight: 50, headers: {response: {add: {x-v: '2'}}}}]"],
        &[SUBSETS],
    ),
    // The DestinationRule's consistent hash becomes the route's hash policy (gRPC: header only);
    // the retry policy then keeps the host.
    (
        "consistent-hash",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{uri: {prefix: /cookie}}]\n  route: [{destination: {host: reviews, subset: v2}}]\n\
           - route: [{destination: {host: reviews, subset: v1}}]"],
        &[
            "host: reviews\ntrafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}\n\
           subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}, \
           trafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {name: session, ttl: 60s}}}}}]",
        ],
    ),
    // Redirects (route_test.go "redirect"/"port redirect"/"derive port"): scheme, authority, port
    // (`:80` for http dropped), the request's port, codes; direct responses with text and bytes.
    (
        "redirect-direct-response",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{uri: {exact: /old}}]\n  redirect: {uri: /new, authority: new.example, redirectCode: 308}\n\
           - match: [{uri: {prefix: /http}}]\n  redirect: {scheme: http, port: 80}\n\
           - match: [{uri: {prefix: /same-port}}]\n  redirect: {derivePort: FROM_REQUEST_PORT, uri: /p}\n\
           - match: [{uri: {prefix: /teapot}}]\n  directResponse: {status: 418, body: {string: short and stout}}\n\
           \x20 headers: {response: {set: {x-why: teapot}}}\n\
           - match: [{uri: {prefix: /bytes}}]\n  directResponse: {status: 200, body: {bytes: aGVsbG8=}}\n\
           - route: [{destination: {host: reviews}}]"],
        &[],
    ),
    // Rewrites (uri, regex, authority), mirrors with their shares (route_test.go "mirror
    // percentage"), CORS (`TranslateCORSPolicy`: not sent to gRPC), retry backoff.
    (
        "rewrite-mirror-cors",
        &["hosts: [reviews]\nhttp:\n\
           - match: [{uri: {prefix: /v1/}}]\n  rewrite: {uri: /api/, authority: internal.example}\n\
           \x20 mirror: {host: ratings}\n  mirrorPercentage: {value: 12.5}\n\
           \x20 route: [{destination: {host: reviews}}]\n\
           - match: [{uri: {prefix: /re/}}]\n  rewrite: {uriRegexRewrite: {match: '^/re/(.*)$', rewrite: '/\\1'}}\n\
           \x20 mirrors: [{destination: {host: ratings}}, {destination: {host: reviews, subset: v2}, percentage: {value: 5}}, \
           {destination: {host: ratings}, percentage: {value: 0}}]\n\
           \x20 route: [{destination: {host: reviews, subset: v1}}]\n\
           - corsPolicy: {allowOrigins: [{exact: 'https://a.example'}, {regex: 'https://.*\\.b\\.example'}], \
           allowMethods: [GET, POST], allowHeaders: [x-a, x-b], exposeHeaders: [x-c], maxAge: 24h, \
           allowCredentials: true, unmatchedPreflights: IGNORE}\n\
           \x20 retries: {attempts: 2, retryOn: unavailable, backoff: 250ms}\n\
           \x20 route: [{destination: {host: reviews}}]"],
        &[SUBSETS],
    ),
    // A delegate (no hosts) merged into its root (virtualservice_test.go "root catch all"): the
    // delegate's matches narrowed by the root's, names joined, the root's timeout inherited; the
    // route whose match leaves the root's prefix is dropped.
    (
        "delegate",
        &[
            "hosts: [reviews]\nhttp:\n\
             - name: api\n  match: [{uri: {prefix: /api}}]\n  timeout: 4s\n  delegate: {name: vs-1}\n\
             - route: [{destination: {host: ratings}}]",
            "http:\n\
             - name: v2\n  match: [{uri: {prefix: /api/v2}, headers: {x-v: {exact: '2'}}}]\n  route: [{destination: {host: reviews, subset: v2}}]\n\
             - name: outside\n  match: [{uri: {prefix: /other}}]\n  route: [{destination: {host: ratings}}]\n\
             - route: [{destination: {host: reviews, subset: v1}}]",
        ],
        &[SUBSETS],
    ),
    // A wildcard host applies to the services it matches; an exact one beats it.
    (
        "wildcard-host",
        &[
            "hosts: ['*.default.svc.cluster.local']\nhttp: [{timeout: 1s, route: [{destination: {host: ratings}}]}]",
            "hosts: [ratings]\nhttp: [{timeout: 3s, route: [{destination: {host: ratings}}]}]",
        ],
        &[],
    ),
];

#[test]
fn route_configurations_match_goldens() {
    for (case, vss, drs) in CASES {
        let mut configs = Vec::new();
        for (i, spec) in vss.iter().enumerate() {
            configs.push(config(
                "VirtualService",
                "default",
                &format!("vs-{i}"),
                &i.to_string(),
                spec,
            ));
        }
        for (i, spec) in drs.iter().enumerate() {
            configs.push(config(
                "DestinationRule",
                "default",
                &format!("dr-{i}"),
                "0",
                spec,
            ));
        }
        let m = mesh(configs);
        let mut sidecar = proxy(ProxyKind::Sidecar, "default");
        sidecar.labels.insert("app".into(), "productpage".into());
        let mut grpc = proxy(ProxyKind::Grpc, "default");
        grpc.labels = sidecar.labels.clone();
        let name = format!("outbound|9080||{REVIEWS}");
        let reviews = m.service(REVIEWS).unwrap();
        let got = serde_json::json!({
            "sidecar": json(&rds::port_route(&m, &sidecar, 9080, crate::config::mesh::OutboundMode::AllowAny).unwrap(), "envoy.config.route.v3.RouteConfiguration"),
            "grpc": json(&rds::grpc_route(&m, &grpc, &name, reviews, 9080), "envoy.config.route.v3.RouteConfiguration"),
        });
        golden(case, &got);
    }
}

fn golden(name: &str, actual: &serde_json::Value) {
    crate::golden::check("src/envoy/testdata/rds", name, actual);
}

#[test]
fn retry_policy_follows_istiod_convert_policy() {
    use crate::istio::virtual_service::HttpRetry;
    let default = retry_policy(None, false).unwrap();
    assert_eq!(default.num_retries.unwrap().value, 2);
    // Current istiod lists no code (older ones listed 503).
    assert!(default.retriable_status_codes.is_empty());
    assert_eq!(default.retry_host_predicate.len(), 1);
    assert!(retry_policy(None, true).unwrap().retry_host_predicate.is_empty());
    let off = HttpRetry {
        attempts: 0,
        ..Default::default()
    };
    assert!(retry_policy(Some(&off), false).is_none());
    let codes = HttpRetry {
        attempts: 1,
        retry_on: "503, 5xx,429".into(),
        ..Default::default()
    };
    let p = retry_policy(Some(&codes), false).unwrap();
    assert_eq!(p.retry_on, "5xx,retriable-status-codes");
    assert_eq!(p.retriable_status_codes, [503, 429]);
}

#[test]
fn faults_translate_percentages_and_grpc_codes() {
    let f: HttpFaultInjection = serde_yaml::from_str(
        "{delay: {exponentialDelay: 1s}, abort: {grpcStatus: DATA_LOSS, percentage: {value: 0.5}}}",
    )
    .unwrap();
    let out = fault(&f).unwrap();
    assert!(out.delay.is_none(), "exponential delays are not supported");
    let abort = out.abort.unwrap();
    assert_eq!(abort.error_type, Some(fault_abort::ErrorType::GrpcStatus(15)));
    assert_eq!(abort.percentage.unwrap().numerator, 5_000);
    assert!(fault(&HttpFaultInjection::default()).is_none());
}

#[test]
fn grpc_gets_only_header_hash_policies() {
    let cookie = ConsistentHashLb {
        http_cookie: Some(crate::istio::destination_rule::HttpCookie {
            name: "s".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(hash_policy(ProxyKind::Sidecar, &cookie).is_some());
    assert!(hash_policy(ProxyKind::Grpc, &cookie).is_none());
    let header = ConsistentHashLb {
        http_header_name: Some("x-user".into()),
        ..Default::default()
    };
    assert!(hash_policy(ProxyKind::Grpc, &header).is_some());
}

#[test]
fn fault_filter_precedes_the_router_in_every_hcm() {
    let m = mesh(vec![]);
    let listener =
        crate::envoy::lds::grpc_listener(&m, &proxy(ProxyKind::Grpc, "default"), "reviews:9080").unwrap();
    let v = json(&listener, "envoy.config.listener.v3.Listener");
    let filters: Vec<&str> = v["apiListener"]["apiListener"]["httpFilters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(filters, [FAULT_FILTER, "envoy.filters.http.router"]);
}

#[test]
fn proxies_with_the_same_routes_share_one_encode() {
    use std::collections::BTreeSet;

    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;

    use crate::envoy::{
        XdsType,
        resource::Resource,
        {AllEndpoints, Context, NetworkView},
    };
    use crate::xds::{Subscription, cache::ResourceCache, generate::generate};
    let by_source = config(
        "VirtualService",
        "default",
        "vs",
        "1",
        "hosts: [reviews]\nhttp:\n- match: [{sourceLabels: {app: productpage}}]\n  \
         route: [{destination: {host: reviews, subset: v2}}]\n- route: [{destination: {host: reviews, subset: v1}}]",
    );
    let cache = ResourceCache::new(100, None);
    let view = NetworkView::default();
    let rds =
        |m: &StaticMesh, kind: ProxyKind, ns: &str, app: &str, pod: &str, name: &str| -> Arc<Resource> {
            let mut p = proxy(kind, ns);
            p.labels.insert("app".into(), app.into());
            p.labels.insert("pod".into(), pod.into());
            let ctx = Context {
                mesh: m,
                proxy: &p,
                view: &view,
                endpoints: &AllEndpoints,
                scope: &crate::envoy::scope_of(m, &p),
            };
            let sub = Subscription {
                wildcard: false,
                names: Arc::new(BTreeSet::from([Arc::from(name)])),
            };
            generate(&ctx, &cache, XdsType::Route, &sub, None)
                .pop()
                .expect("route configuration")
        };

    // No VirtualService: one encode per kind, whatever the namespace or labels.
    let plain = mesh(vec![]);
    let (a, b) = (
        rds(&plain, ProxyKind::Sidecar, "default", "x", "1", "9080"),
        rds(&plain, ProxyKind::Sidecar, "other", "y", "2", "9080"),
    );
    assert!(Arc::ptr_eq(&a, &b));

    // A sourceLabels match: proxies share by outcome, not by label set.
    let m = mesh(vec![by_source]);
    let product = rds(&m, ProxyKind::Sidecar, "default", "productpage", "1", "9080");
    let product2 = rds(&m, ProxyKind::Sidecar, "default", "productpage", "2", "9080");
    let other = rds(&m, ProxyKind::Sidecar, "default", "other", "1", "9080");
    let another = rds(&m, ProxyKind::Sidecar, "default", "another", "1", "9080");
    assert!(
        Arc::ptr_eq(&product, &product2),
        "same outcome, other labels: shared"
    );
    assert!(Arc::ptr_eq(&other, &another), "both miss the match: shared");
    assert_ne!(product.value(), other.value(), "the match holds for one only");

    // gRPC asks by cluster name; the source match holds for it too.
    let grpc = rds(
        &m,
        ProxyKind::Grpc,
        "default",
        "productpage",
        "1",
        &format!("outbound|9080||{REVIEWS}"),
    );
    let rc = RouteConfiguration::decode(grpc.value()).unwrap();
    // The source match is a catch-all for this proxy: it ends the routes (istiod's IsCatchAllRoute).
    assert_eq!(rc.virtual_hosts[0].routes.len(), 1);
    let v = json(&rc, "envoy.config.route.v3.RouteConfiguration");
    assert_eq!(
        v["virtualHosts"][0]["routes"][0]["route"]["cluster"],
        format!("outbound|9080|v2|{REVIEWS}")
    );
}

#[test]
fn grpc_is_told_which_fields_it_does_not_act_on() {
    let vs = config(
        "VirtualService",
        "default",
        "vs",
        "1",
        "hosts: [reviews]\nhttp:\n- match: [{queryParams: {a: {exact: '1'}}}]\n  \
         retries: {attempts: 2, retryOn: '5xx,unavailable,503', perTryTimeout: 1s}\n  \
         headers: {request: {set: {x-a: b}}}\n  route: [{destination: {host: reviews}}]",
    );
    let m = mesh(vec![vs]);
    let resolved = &m.traffic().virtual_services.for_host("default", REVIEWS)[0];
    let ignored = ignored_fields(ProxyKind::Grpc, resolved);
    let want = [
        "spec.http[0].headers",
        "spec.http[0].retries.perTryTimeout",
        "spec.http[0].retries.retryOn 5xx,503 (",
        "spec.http[0].match[0].queryParams",
    ];
    for w in want {
        assert!(
            ignored.iter().any(|f| f.starts_with(w)),
            "{w} missing from {ignored:?}"
        );
    }
    assert_eq!(ignored.len(), want.len(), "{ignored:?}");
    assert!(ignored_fields(ProxyKind::Sidecar, resolved).is_empty());
}

#[test]
fn registry_only_ends_port_routes_with_block_all() {
    let m = mesh(Vec::new());
    let sidecar = proxy(ProxyKind::Sidecar, "default");
    let got = rds::port_route(
        &m,
        &sidecar,
        9080,
        crate::config::mesh::OutboundMode::RegistryOnly,
    )
    .unwrap();
    let last = got.virtual_hosts.last().unwrap();
    assert_eq!(
        (last.name.as_str(), &last.domains[..]),
        ("block_all", &["*".to_owned()][..])
    );
    assert!(matches!(
        &last.routes[0].action,
        Some(route::Action::DirectResponse(d)) if d.status == 502
    ));
    assert_eq!(got.virtual_hosts.len(), 3, "reviews, ratings, block_all");
}
