//! The VirtualService index: which objects count, host resolution, istiod's order, and which one a
//! proxy gets for a host.

use std::{collections::BTreeMap, sync::Arc};

use super::*;
use crate::traffic::tests::{config, settings};

/// A VirtualService created at second `created`.
fn vs(ns: &str, name: &str, created: &str, spec: &str) -> Arc<Config> {
    config("VirtualService", ns, name, created, spec)
}

/// As a `--config-dir` file's object: no creation time (istiod's zero time sorts first).
fn untimed(c: Arc<Config>) -> Arc<Config> {
    let mut c = (*c).clone();
    c.meta.creation_timestamp = None;
    Arc::new(c)
}

const ROUTE: &str = "http: [{route: [{destination: {host: reviews}}]}]";

fn index(configs: &[Arc<Config>]) -> VsIndex {
    VsIndex::build(configs.iter(), &settings())
}

fn names<'a>(it: impl IntoIterator<Item = &'a Arc<ResolvedVs>>) -> Vec<String> {
    it.into_iter()
        .map(|v| format!("{}/{}", v.object.namespace, v.object.name))
        .collect()
}

#[test]
fn only_mesh_bound_virtual_services_with_hosts_count() {
    let idx = index(&[
        vs("a", "plain", "", &format!("hosts: [reviews]\n{ROUTE}")),
        vs(
            "a",
            "mesh",
            "",
            &format!("hosts: [reviews]\ngateways: [mesh]\n{ROUTE}"),
        ),
        vs(
            "a",
            "both",
            "",
            &format!("hosts: [reviews]\ngateways: [gw, mesh]\n{ROUTE}"),
        ),
        vs(
            "a",
            "gateway",
            "",
            &format!("hosts: [reviews]\ngateways: [gw]\n{ROUTE}"),
        ),
        vs("a", "delegate", "", ROUTE),
    ]);
    assert_eq!(idx.len(), 3);
    assert_eq!(names(idx.visible("a")), ["a/both", "a/mesh", "a/plain"]);
}

#[test]
fn hosts_resolve_in_the_virtual_service_namespace() {
    let idx = index(&[vs(
        "a",
        "r",
        "",
        "hosts: [reviews, ratings.b, '*.example.com']\nhttp: [{route: [{destination: {host: reviews}, weight: 0}, \
         {destination: {host: ratings.b}, weight: 100}]}]",
    )]);
    let r = &idx.visible("a").next().unwrap();
    let hosts: Vec<String> = r.hosts.iter().map(ToString::to_string).collect();
    // A name with a dot is taken verbatim, as istiod does.
    assert_eq!(
        hosts,
        ["reviews.a.svc.cluster.local", "ratings.b", "*.example.com"]
    );
    let dests: Vec<&str> = r.spec.http[0]
        .route
        .iter()
        .map(|d| d.destination.host.as_str())
        .collect();
    assert_eq!(dests, ["reviews.a.svc.cluster.local", "ratings.b"]);
    assert_eq!(
        r.config_path(),
        "/apis/networking.istio.io/v1/namespaces/a/virtual-service/r"
    );
}

#[test]
fn delegating_routes_are_dropped() {
    let idx = index(&[vs(
        "a",
        "r",
        "",
        "hosts: [reviews]\nhttp: [{delegate: {name: d}}, {route: [{destination: {host: reviews}}]}]",
    )]);
    assert_eq!(idx.visible("a").next().unwrap().spec.http.len(), 1);
}

#[test]
fn proxies_see_private_then_exported_then_public_each_by_age() {
    let spec = |export: &str| format!("hosts: [reviews.a.svc.cluster.local]\nexportTo: {export}\n{ROUTE}");
    let idx = index(&[
        vs("a", "public-old", "01", &spec("['*']")),
        vs("b", "exported", "02", &spec("[a]")),
        vs("a", "private", "03", &spec("['.']")),
        vs("a", "public-new", "04", &spec("['*']")),
        vs("c", "hidden", "00", &spec("['.']")),
        untimed(vs("b", "no-time", "", &spec("['*']"))),
    ]);
    assert_eq!(
        names(idx.visible("a")),
        [
            "a/private",
            "b/exported",
            "b/no-time",
            "a/public-old",
            "a/public-new"
        ]
    );
    assert_eq!(
        names(idx.visible("c")),
        ["c/hidden", "b/no-time", "a/public-old", "a/public-new"]
    );
    // Four name the same host: the first one a proxy sees wins.
    let host = "reviews.a.svc.cluster.local";
    assert_eq!(names(idx.for_host("a", host))[0], "a/private");
    assert_eq!(idx.duplicates()[host].len(), 6);
}

#[test]
fn exact_hosts_beat_wildcards_and_the_most_specific_wildcard_wins() {
    let idx = index(&[
        vs("a", "any-suffix", "01", &format!("hosts: ['*.com']\n{ROUTE}")),
        vs("a", "suffix", "02", &format!("hosts: ['*.example.com']\n{ROUTE}")),
        vs("a", "exact", "03", &format!("hosts: [api.example.com]\n{ROUTE}")),
    ]);
    let best = |h: &str| names(idx.for_host("a", h));
    assert_eq!(best("api.example.com"), ["a/exact"]);
    assert_eq!(best("web.example.com"), ["a/suffix"]);
    assert_eq!(best("web.other.com"), ["a/any-suffix"]);
    assert!(best("web.other.org").is_empty());
}

#[test]
fn label_key_is_empty_unless_labels_change_routes() {
    let labels = |l: &[(&str, &str)]| -> BTreeMap<String, String> {
        l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let plain = index(&[vs("a", "r", "", &format!("hosts: [reviews]\n{ROUTE}"))]);
    assert_eq!(plain.label_key("a", &labels(&[("app", "x")])), "");
    assert!(plain.shapes_routes());
    assert!(!index(&[]).shapes_routes());

    let by_source = index(&[vs(
        "a",
        "r",
        "",
        "hosts: [reviews]\nhttp: [{match: [{sourceLabels: {app: x}}, {sourceLabels: {app: y}}], \
         route: [{destination: {host: reviews}}]}]",
    )]);
    assert_eq!(
        by_source.label_key("a", &labels(&[("app", "x"), ("v", "1")])),
        "10"
    );
    assert_eq!(
        by_source.label_key("a", &labels(&[("app", "x"), ("v", "2")])),
        "10"
    );
    assert_eq!(by_source.label_key("a", &labels(&[])), "00");

    let dr = config(
        "DestinationRule",
        "a",
        "d",
        "",
        "host: reviews\nworkloadSelector: {matchLabels: {app: x}}\n\
         trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: u}}}",
    );
    let selecting = index(&[dr]);
    assert!(selecting.shapes_routes());
    assert_eq!(selecting.label_key("a", &labels(&[("app", "x")])), ";app=x");
    assert_eq!(selecting.label_key("b", &labels(&[("app", "x")])), "");
}
