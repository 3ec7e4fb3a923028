//! The cache-key audit as a property: whatever order proxies ask in, a cache shared by all of them
//! answers each exactly as a build without a cache would. Every input a resource depends on (proxy
//! kind, network and requested view, locality, Sidecar scope, DestinationRule, absence) has to be in
//! its key for this to hold; dropping any one of them makes some proxy here get another's bytes.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use super::*;
use crate::{
    envoy::{
        NetworkView, Proxy, ProxyKind, SplitHorizon, StaticMesh, scope_of,
        static_mesh::{self, service},
    },
    model::{Endpoint, Locality, NetworkGateway, Protocol, TlsMode},
    traffic::tests::config,
};

const ECHO: &str = "echo.app.svc.cluster.local";

/// `echo` in `app` on two networks (subsets v1/v2, locality failover), bookinfo in `sample` behind a
/// Sidecar that imports only reviews and echo, and a PeerAuthentication DISABLE on one endpoint.
fn mesh() -> StaticMesh {
    let ep = |ip: &str, net: &str, cluster: &str, zone: &str, version: &str, port: (&str, u16)| {
        let mut e: Endpoint = static_mesh::endpoint(ip.parse().unwrap(), &[port], cluster);
        e.placement_mut().network = Some(net.into());
        e.placement_mut().locality = Locality {
            region: "r".into(),
            zone: zone.into(),
            subzone: "".into(),
        };
        e.tls_mode = TlsMode::Istio;
        let labels: BTreeMap<String, String> = [("version", version), ("security.istio.io/tlsMode", "istio")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        e.info_mut().labels = Arc::new(labels);
        e
    };
    let g = ("grpc", 7070);
    let mut m = StaticMesh::new(3).with(
        service("echo", "app", &[("grpc", 7070, Protocol::Grpc)]),
        vec![
            ep("10.1.0.1", "net1", "c1", "a", "v1", g),
            ep("10.1.0.2", "net1", "c1", "b", "v2", g),
            ep("10.2.0.1", "net2", "c2", "a", "v1", g),
            ep("10.2.0.2", "net2", "c2", "c", "v2", g),
        ],
    );
    for (i, name) in ["details", "reviews", "ratings"].into_iter().enumerate() {
        let h = ("http", 9080);
        let eps = vec![
            ep(&format!("10.1.1.{i}"), "net1", "c1", "a", "v1", h),
            ep(&format!("10.2.1.{i}"), "net2", "c2", "c", "v2", h),
        ];
        m = m.with(service(name, "sample", &[("http", 9080, Protocol::Http)]), eps);
    }
    m = m.with_config([
        config(
            "DestinationRule",
            "app",
            "echo",
            "1",
            "host: echo\ntrafficPolicy: {outlierDetection: {consecutive5xxErrors: 3}, \
             loadBalancer: {localityLbSetting: {enabled: true}}}\n\
             subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]\n",
        ),
        config(
            "Sidecar",
            "sample",
            "default",
            "1",
            "egress: [{hosts: [./reviews.sample.svc.cluster.local, app/echo.app.svc.cluster.local]}]",
        ),
        config(
            "PeerAuthentication",
            "sample",
            "off",
            "1",
            "selector: {matchLabels: {version: v2}}\nmtls: {mode: DISABLE}\n",
        ),
    ]);
    let gw = |net: &str, cluster: &str, ip: &str| NetworkGateway {
        network: net.into(),
        cluster: Some(cluster.into()),
        address: ip.parse::<IpAddr>().unwrap(),
        port: 15443,
        hostname: None,
    };
    m.gateways = vec![gw("net1", "c1", "192.0.2.1"), gw("net2", "c2", "192.0.2.2")];
    m
}

/// Every combination that may change what a proxy is sent.
fn proxies() -> Vec<Proxy> {
    let mut out = Vec::new();
    for kind in [ProxyKind::Grpc, ProxyKind::Sidecar, ProxyKind::Router] {
        for ns in ["app", "sample", "default"] {
            for net in ["net1", "net2"] {
                for zone in ["a", "c"] {
                    let mut p = static_mesh::proxy(kind, ns);
                    p.id = format!("{kind:?}.{ns}.{net}.{zone}").into();
                    p.network = Some(net.into());
                    p.cluster_id = Some(if net == "net1" { "c1" } else { "c2" }.into());
                    p.locality = Locality {
                        region: "r".into(),
                        zone: zone.into(),
                        subzone: "".into(),
                    };
                    if kind == ProxyKind::Router && zone == "a" {
                        // An east-west gateway: it asks to see its own network only.
                        p.requested_network_view = vec![net.into()];
                    }
                    out.push(p);
                }
            }
        }
    }
    out
}

/// What each proxy asks for: wildcard LDS and CDS, and by name every cluster of every service
/// (subsets and SNI-DNAT ones too), a name that exists nowhere, and the routes of both ports.
fn asks() -> Vec<(XdsType, Subscription)> {
    let mut names: Vec<Arc<str>> = vec!["outbound|1|x|nowhere.svc.cluster.local".into()];
    for host in [
        ECHO,
        "details.sample.svc.cluster.local",
        "reviews.sample.svc.cluster.local",
        "ratings.sample.svc.cluster.local",
    ] {
        let port = if host == ECHO { 7070 } else { 9080 };
        for subset in ["", "v1", "v2"] {
            names.push(format!("outbound|{port}|{subset}|{host}").into());
            names.push(format!("outbound_.{port}_.{subset}_.{host}").into());
        }
    }
    let by_name = |names: &[Arc<str>]| Subscription {
        wildcard: false,
        names: Arc::new(names.iter().cloned().collect()),
    };
    let wildcard = Subscription {
        wildcard: true,
        names: Default::default(),
    };
    let routes: Vec<Arc<str>> = ["7070", "9080", "echo.app.svc.cluster.local:7070", "reviews:9080"]
        .map(Arc::from)
        .to_vec();
    vec![
        (XdsType::Listener, wildcard.clone()),
        (XdsType::Cluster, wildcard),
        (XdsType::Cluster, by_name(&names)),
        (XdsType::Endpoint, by_name(&names)),
        (XdsType::Route, by_name(&routes)),
    ]
}

/// `(name, version)` of what `p` gets for `sub` through `cache`.
fn answer(
    m: &StaticMesh,
    cache: &ResourceCache,
    p: &Proxy,
    ty: XdsType,
    sub: &Subscription,
) -> Vec<(String, u64)> {
    let view = NetworkView::of(p);
    let ctx = Context {
        mesh: m,
        proxy: p,
        view: &view,
        endpoints: &SplitHorizon,
        scope: &scope_of(m, p),
    };
    let mut got: Vec<(String, u64)> = generate(&ctx, cache, ty, sub, None)
        .iter()
        .map(|r| (r.name.to_string(), r.version))
        .collect();
    got.sort();
    got
}

/// Proxies in a fixed pseudo-random order (a small LCG: the test is the same on every run).
fn shuffled(mut v: Vec<Proxy>, seed: u64) -> Vec<Proxy> {
    let mut state = seed;
    for i in (1..v.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (state >> 33) as usize % (i + 1));
    }
    v
}

#[test]
fn a_shared_cache_answers_every_proxy_as_a_fresh_build_would() {
    let m = mesh();
    let asks = asks();
    let fresh: BTreeMap<(String, usize), Vec<(String, u64)>> = proxies()
        .iter()
        .flat_map(|p| {
            let m = &m;
            asks.iter().enumerate().map(move |(i, (ty, sub))| {
                let uncached = ResourceCache::new(0, None);
                ((p.id.to_string(), i), answer(m, &uncached, p, *ty, sub))
            })
        })
        .collect();
    // The test sees something: resources differ between proxies, so a shared answer would show.
    let distinct: std::collections::BTreeSet<&Vec<(String, u64)>> = fresh.values().collect();
    assert!(distinct.len() > 20, "only {} distinct answers", distinct.len());
    for seed in [1, 7, 42, 1234] {
        let cache = ResourceCache::new(10_000, None);
        for p in shuffled(proxies(), seed) {
            for (i, (ty, sub)) in asks.iter().enumerate() {
                let got = answer(&m, &cache, &p, *ty, sub);
                assert_eq!(got, fresh[&(p.id.to_string(), i)], "seed {seed}: {} {ty}", p.id);
            }
        }
        assert!(!cache.is_empty(), "the cache was used");
    }
}
