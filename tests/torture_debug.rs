//! Torture list C (#21–#23): the debug server trusts only the socket peer. The real admin router is
//! driven with the peer address a TCP accept would record (`ConnectInfo`), since every test socket is
//! loopback: a non-loopback peer gets 403 on every `/debug/*` path — mutating query strings, forged
//! `X-Forwarded-For` / `X-Forwarded-Client-Cert` / `Host: localhost` and bearer tokens included —
//! while `/ready`, `/metrics` and `/version` stay public and a loopback peer is served.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    body::Body,
    extract::ConnectInfo,
    http::{Request, StatusCode},
    routing::get,
};
use http_body_util::BodyExt;
use meshd::{
    admin::{self, Debug},
    readiness::Ready,
};
use prometheus_client::registry::Registry;
use tower::Service;

const SECRET: &str = "debug-body-that-must-not-leak";

/// Every debug path istiod exposes that meshd serves, plus mutating variants.
const PATHS: &[&str] = &[
    "/debug",
    "/debug/configz",
    "/debug/connections",
    "/debug/clusterz",
    "/debug/registryz",
    "/debug/endpointz",
    "/debug/endpointShardz",
    "/debug/adsz?push=true",
    "/debug/cachez?clear=true",
    "/debug/config_dump?proxyID=x.b",
    "/debug/syncz",
];

fn router() -> axum::Router {
    let mut debug = Debug::default();
    for path in [
        "/debug/configz",
        "/debug/connections",
        "/debug/clusterz",
        "/debug/registryz",
    ] {
        debug = debug.route(path, "test", get(|| async { SECRET }));
    }
    let auth = admin::DebugAuth {
        authenticator: None,
        system_namespace: "istio-system".into(),
    };
    admin::router(Ready::new(), Arc::new(Registry::default()), debug, auth)
}

async fn call(peer: &str, path: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    let mut req = Request::builder().uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::empty()).expect("request");
    let peer: SocketAddr = peer.parse().expect("peer");
    req.extensions_mut().insert(ConnectInfo(peer));
    let resp = router().call(req).await.expect("infallible");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A refusal: 401 (no usable credentials) or 403 (not allowed).
fn refused(status: StatusCode) -> bool {
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// Served by [`router`]; the other [`PATHS`] do not exist in meshd (404 or 403 are both fine there).
const SERVED: &[&str] = &[
    "/debug",
    "/debug/configz",
    "/debug/connections",
    "/debug/clusterz",
    "/debug/registryz",
];

/// #21: a non-loopback caller is refused (401/403) on every debug path, mutating ones included; nothing leaks.
#[tokio::test]
async fn non_loopback_callers_are_refused_everywhere() {
    for peer in ["10.0.0.7:40000", "[2001:db8::1]:40000", "192.168.1.1:1"] {
        for path in PATHS {
            let (status, body) = call(peer, path, &[]).await;
            if SERVED.contains(path) {
                assert!(refused(status), "{peer} {path}: {status}");
            } else {
                assert!(
                    refused(status) || status == StatusCode::NOT_FOUND,
                    "{peer} {path}: {status}"
                );
            }
            assert!(!body.contains(SECRET), "{peer} {path} leaked the body");
        }
    }
}

/// #22: credentials do not widen access: a bearer token (any namespace) from a non-loopback peer
/// is still refused when no authenticator can vouch for it, for config_dump of another namespace and for syncz/registryz alike.
#[tokio::test]
async fn tokens_do_not_open_debug_to_remote_callers() {
    let auth = [("authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig")];
    for path in [
        "/debug/config_dump?proxyID=x.b",
        "/debug/syncz",
        "/debug/registryz",
        "/debug/configz",
    ] {
        let status = call("10.1.2.3:5", path, &auth).await.0;
        assert!(refused(status), "{path}: {status}");
    }
}

/// #23: forwarding headers and Host are ignored; only the socket peer counts.
#[tokio::test]
async fn forwarding_headers_grant_nothing() {
    let forged = [
        ("x-forwarded-for", "127.0.0.1"),
        ("x-real-ip", "127.0.0.1"),
        ("forwarded", "for=127.0.0.1"),
        (
            "x-forwarded-client-cert",
            "By=spiffe://cluster.local/ns/istio-system/sa/istiod",
        ),
        ("host", "localhost"),
    ];
    let (status, body) = call("172.16.0.9:443", "/debug/configz", &forged).await;
    assert!(refused(status), "{status}");
    assert!(!body.contains(SECRET));
    // A loopback peer (including 127.0.0.2 and ::1) is served; the public endpoints stay public.
    for peer in ["127.0.0.1:9", "127.0.0.2:9", "[::1]:9"] {
        let (status, body) = call(peer, "/debug/configz", &[]).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, SECRET));
    }
    assert_eq!(call("10.0.0.7:1", "/version", &[]).await.0, StatusCode::OK);
    assert_eq!(call("10.0.0.7:1", "/metrics", &[]).await.0, StatusCode::OK);
}
