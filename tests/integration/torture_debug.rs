//! Torture list C (rows 21–23 of docs/torture.md): debug access is istiod's "authenticated or localhost". The real admin
//! router is driven with the peer address a TCP accept would record (`ConnectInfo`), since every test
//! socket is loopback: a non-loopback peer without a token the authenticator accepts gets 401 on every
//! `/debug/*` path — mutating query strings, forged `X-Forwarded-For` / `X-Forwarded-Client-Cert` /
//! `Host: localhost` included; a system-namespace identity sees everything, any other identity only
//! `/debug/config_dump` (403 elsewhere); `/ready`, `/metrics` and `/version` stay public and a
//! loopback peer is served.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Extension,
    body::Body,
    extract::ConnectInfo,
    http::{Request, StatusCode},
    routing::get,
};
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use meshd::{
    admin::{self, Debug, DebugCaller},
    auth::{AuthError, AuthRequest, Authenticator, Identity},
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

/// Vouches for two fixed tokens, as TokenReview would: one in the system namespace, one in `sample`.
struct FixedTokens;

impl Authenticator for FixedTokens {
    fn authenticate<'a>(&'a self, req: AuthRequest<'a>) -> BoxFuture<'a, Result<Identity, AuthError>> {
        let token = req.metadata.get("authorization").and_then(|v| v.to_str().ok());
        let identity = match token {
            Some("Bearer system-token") => Ok(Identity::new("cluster.local", "istio-system", "istiod")),
            Some("Bearer tenant-token") => Ok(Identity::new("cluster.local", "sample", "reader")),
            _ => Err(AuthError::NoCredentials),
        };
        Box::pin(async move { identity })
    }
}

fn router() -> axum::Router {
    router_with(None)
}

/// The admin router with stub debug handlers; `/debug/config_dump` answers with the caller it was given.
fn router_with(authenticator: Option<Arc<dyn Authenticator>>) -> axum::Router {
    let mut debug = Debug::default();
    for path in [
        "/debug/configz",
        "/debug/connections",
        "/debug/clusterz",
        "/debug/registryz",
    ] {
        debug = debug.route(path, "test", get(|| async { SECRET }));
    }
    debug = debug.route(
        "/debug/config_dump",
        "test",
        get(|Extension(caller): Extension<DebugCaller>| async move { format!("{caller:?}") }),
    );
    let auth = admin::DebugAuth {
        authenticator,
        system_namespace: "istio-system".into(),
    };
    admin::router(Ready::new(), Arc::new(Registry::default()), debug, auth)
}

async fn call(peer: &str, path: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
    call_router(router(), peer, path, headers).await
}

async fn call_router(
    mut router: axum::Router,
    peer: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut req = Request::builder().uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut req = req.body(Body::empty()).expect("request");
    let peer: SocketAddr = peer.parse().expect("peer");
    req.extensions_mut().insert(ConnectInfo(peer));
    let resp = router.call(req).await.expect("infallible");
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

/// Row 21: a non-loopback caller is refused (401/403) on every debug path, mutating ones included; nothing leaks.
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

/// Row 22: a bearer token no authenticator vouches for grants nothing to a non-loopback peer, for
/// config_dump and for syncz/registryz alike.
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

/// Row 23: forwarding headers and Host are ignored; only the socket peer counts.
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

/// Row 22: a token the authenticator accepts opens debug by namespace, as istiod: the system namespace
/// sees everything, another namespace only `/debug/config_dump` (whose handler then limits it to that
/// namespace's proxies); an unknown token is 401, the reason in words, nothing leaks.
#[tokio::test]
async fn authenticated_remote_callers_get_what_their_namespace_allows() {
    let authenticator: Arc<dyn Authenticator> = Arc::new(FixedTokens);
    let call = |path: &'static str, token: &'static str| {
        let router = router_with(Some(authenticator.clone()));
        async move {
            let auth = format!("Bearer {token}");
            call_router(
                router,
                "10.0.0.7:40000",
                path,
                &[("authorization", auth.as_str())],
            )
            .await
        }
    };
    for path in ["/debug", "/debug/configz", "/debug/registryz"] {
        assert_eq!(call(path, "system-token").await.0, StatusCode::OK, "{path}");
        let (status, body) = call(path, "tenant-token").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        assert!(
            !body.contains(SECRET) && body.contains("/debug/config_dump"),
            "{body}"
        );
        let (status, body) = call(path, "forged-token").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!body.contains(SECRET) && body.contains("token"), "{body}");
    }
    let (status, body) = call("/debug/config_dump", "tenant-token").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, r#"Namespace("sample")"#)
    );
    let tenant = DebugCaller::Namespace("sample".into());
    assert!(tenant.may_see(Some("sample")));
    assert!(!tenant.may_see(Some("istio-system")) && !tenant.may_see(None));
    let (status, body) = call("/debug/config_dump", "system-token").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.starts_with("System("), "{body}");
}
