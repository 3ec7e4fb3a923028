//! DestinationRule lookup and merge, table-driven (istiod's `push_context_test.go` cases by meaning).

use std::collections::BTreeMap;

use super::DrIndex;
use crate::{
    envoy::static_mesh::service,
    model::Service,
    traffic::tests::{config, settings},
};

fn svc(name: &str, ns: &str) -> Service {
    service(name, ns, &[])
}

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

#[test]
fn lookup_precedence_like_istiod() {
    let dr =
        |ns: &str, name: &str, created: &str, spec: &str| config("DestinationRule", ns, name, created, spec);
    let configs = [
        dr("svc", "in-service-ns", "1", "host: reviews"),
        dr(
            "client",
            "in-client-ns",
            "2",
            "host: reviews.svc.svc.cluster.local",
        ),
        dr(
            "client",
            "selected",
            "3",
            "host: reviews.svc.svc.cluster.local\nworkloadSelector: {matchLabels: {app: canary}}",
        ),
        dr("istio-system", "root", "4", "host: '*.svc.cluster.local'"),
        dr("svc", "private", "5", "host: ratings\nexportTo: ['.']"),
        dr("svc", "to-other", "6", "host: details\nexportTo: ['other']"),
        dr("svc", "wild", "7", "host: '*.svc.svc.cluster.local'"),
        dr("svc", "exact", "8", "host: exact.svc.svc.cluster.local"),
    ];
    let index = DrIndex::build(configs.iter(), &settings());
    let cases = [
        // (proxy ns, proxy app, service, service ns, expected DR)
        ("client", "web", "reviews", "svc", Some("in-client-ns")),
        ("client", "canary", "reviews", "svc", Some("selected")),
        ("other", "web", "reviews", "svc", Some("in-service-ns")),
        ("svc", "web", "reviews", "svc", Some("in-service-ns")),
        ("other", "web", "ratings", "svc", Some("wild")),
        ("svc", "web", "ratings", "svc", Some("private")),
        ("other", "web", "details", "svc", Some("to-other")),
        ("client", "web", "details", "svc", Some("wild")),
        ("other", "web", "exact", "svc", Some("exact")),
        ("other", "web", "productpage", "bookinfo", Some("root")),
        ("other", "web", "x", "svc", Some("wild")),
    ];
    for (proxy_ns, app, name, ns, want) in cases {
        let got = index.lookup("istio-system", proxy_ns, &labels(app), &svc(name, ns));
        assert_eq!(
            got.map(|r| &*r.from[0].name),
            want,
            "proxy {proxy_ns}/{app} → {name}.{ns}"
        );
    }
}

#[test]
fn several_rules_for_one_host_merge_like_istiod() {
    let configs = [
        config(
            "DestinationRule",
            "svc",
            "newer",
            "2",
            "host: reviews\ntrafficPolicy: {loadBalancer: {simple: RANDOM}}\nsubsets: [{name: v1, labels: {v: '9'}}, {name: v3, labels: {v: '3'}}]",
        ),
        config(
            "DestinationRule",
            "svc",
            "older",
            "1",
            "host: reviews\nsubsets: [{name: v1, labels: {v: '1'}}, {name: v2, labels: {v: '2'}}]",
        ),
        config(
            "DestinationRule",
            "svc",
            "private",
            "3",
            "host: reviews\nexportTo: ['.']\nsubsets: [{name: p, labels: {v: p}}]",
        ),
    ];
    let index = DrIndex::build(configs.iter(), &settings());
    let rule = index
        .lookup("istio-system", "other", &BTreeMap::new(), &svc("reviews", "svc"))
        .expect("rule");
    let from: Vec<&str> = rule.from.iter().map(|o| &*o.name).collect();
    assert_eq!(from, ["older", "newer"]);
    let subsets: Vec<(&str, &str)> = rule
        .rule
        .subsets
        .iter()
        .map(|s| (s.name.as_str(), s.labels["v"].as_str()))
        .collect();
    assert_eq!(
        subsets,
        [("v1", "1"), ("v2", "2"), ("v3", "3")],
        "older subsets win"
    );
    assert!(
        rule.rule.traffic_policy.is_some(),
        "policy from the newer when the older has none"
    );
    assert_eq!(rule.duplicate_subsets.len(), 1);
    // Counted once although the merged rule sits in two index buckets.
    assert_eq!(index.duplicate_subsets().len(), 1);
    assert_eq!(rule.subset("v3").map(|s| s.labels["v"].as_str()), Some("3"));
    // Different exportTo: kept apart; the service's own namespace sees the older merged entry first.
    let own = index
        .lookup("istio-system", "svc", &BTreeMap::new(), &svc("reviews", "svc"))
        .expect("rule");
    assert_eq!(own.from[0].name.as_ref(), "older");
}

#[test]
fn mesh_default_export_to_applies_to_rules_that_set_none() {
    let configs = [
        config("DestinationRule", "svc", "plain", "1", "host: reviews"),
        config(
            "DestinationRule",
            "svc",
            "public",
            "2",
            "host: ratings\nexportTo: ['*']",
        ),
    ];
    // (MeshConfig defaultDestinationRuleExportTo, service, the rule a proxy in "other" gets)
    let cases: [(&[&str], &str, Option<&str>); 5] = [
        (&[], "reviews", Some("plain")),
        (&["*"], "reviews", Some("plain")),
        (&["."], "reviews", None),
        (&["~"], "reviews", None),
        (&["."], "ratings", Some("public")),
    ];
    for (default, name, want) in cases {
        let mesh = crate::config::mesh::MeshConfig {
            default_destination_rule_export_to: default.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let index = DrIndex::build(
            configs.iter(),
            &crate::traffic::Settings::new(mesh.into(), "cluster.local"),
        );
        let got = index.lookup("istio-system", "other", &labels("web"), &svc(name, "svc"));
        assert_eq!(got.map(|r| &*r.from[0].name), want, "{default:?} {name}");
        // The rule's own namespace always sees it.
        let own = index.lookup("istio-system", "svc", &labels("web"), &svc(name, "svc"));
        assert!(own.is_some(), "{default:?} {name} in its own namespace");
    }
}
