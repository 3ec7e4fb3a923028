//! istiod's host algebra for gateway virtual hosts.

use super::*;

#[test]
fn intersection_keeps_the_narrower_host() {
    let s = |v: &[&str]| v.iter().map(|h| h.to_string()).collect::<Vec<_>>();
    for (server, vs, want) in [
        (
            &["*.example.com"][..],
            &["a.example.com", "b.other.com"][..],
            &["a.example.com"][..],
        ),
        (
            &["a.example.com", "b.example.com"],
            &["*.example.com"],
            &["a.example.com", "b.example.com"],
        ),
        (&["*"], &["*.example.com", "a.io"], &["*.example.com", "a.io"]),
        (&["a.example.com"], &["b.example.com"], &[]),
    ] {
        assert_eq!(intersection(&s(server), &s(vs)), s(want), "{server:?} ∩ {vs:?}");
    }
}

#[test]
fn server_hosts_apply_to_their_namespace_only() {
    let hosts = [
        "default/a.example.com",
        "*/b.example.com",
        "other/c.example.com",
        "d.example.com",
    ]
    .map(str::to_owned);
    assert_eq!(
        hosts_for_namespace(&hosts, "default"),
        ["a.example.com", "b.example.com", "d.example.com"]
    );
}

#[test]
fn only_gateway_route_names_are_served_to_gateways() {
    assert!(is_gateway_route("http.8080"));
    assert!(is_gateway_route("https.443.https.gw.istio-system"));
    assert!(!is_gateway_route("8080"));
}
