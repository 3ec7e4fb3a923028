//! Delegate merging: istiod's `mergeVirtualServicesIfNeeded` cases (virtualservice_test.go) on
//! meshd's model.

use super::*;

fn spec(yaml: &str) -> VirtualService {
    serde_yaml::from_str(yaml).expect("VirtualService")
}

/// The merged routes as `name: [match summaries] -> destination`, compact enough to compare.
fn summary(routes: &[HttpRoute]) -> Vec<String> {
    routes
        .iter()
        .map(|r| {
            let matches: Vec<String> = r
                .matches
                .iter()
                .map(|m| {
                    let uri = m.uri.as_ref().map(|u| {
                        u.exact
                            .clone()
                            .or(u.prefix.clone().map(|p| format!("{p}*")))
                            .unwrap_or_default()
                    });
                    let headers: Vec<String> = m.headers.keys().cloned().collect();
                    format!(
                        "{}{}",
                        uri.unwrap_or_default(),
                        if headers.is_empty() {
                            String::new()
                        } else {
                            format!("+{}", headers.join("+"))
                        }
                    )
                })
                .collect();
            let dest = r
                .route
                .first()
                .map(|d| d.destination.host.clone())
                .unwrap_or_default();
            let timeout = r
                .timeout
                .map(|t| format!(" t={}s", t.as_secs()))
                .unwrap_or_default();
            format!("{}: [{}] -> {dest}{timeout}", r.name, matches.join(","))
        })
        .collect()
}

#[test]
fn delegates_merge_as_istiod_merges_them() {
    let root = spec(
        "hosts: [bookinfo.com]\nhttp:\n\
         - name: productpage\n  match: [{uri: {prefix: /productpage}}]\n  timeout: 5s\n  delegate: {name: productpage, namespace: ns2}\n\
         - name: reviews\n  match: [{uri: {prefix: /reviews}, headers: {x-a: {exact: a}}}]\n  delegate: {name: reviews}\n\
         - name: missing\n  delegate: {name: nope}\n\
         - name: hidden\n  delegate: {name: private, namespace: ns3}\n\
         - name: rest\n  route: [{destination: {host: default}}]\n",
    );
    let productpage = spec(
        "http:\n\
         - name: v2\n  match: [{uri: {exact: /productpage/v2}}]\n  route: [{destination: {host: productpage-v2}}]\n  timeout: 9s\n\
         - name: conflict\n  match: [{uri: {prefix: /other}}]\n  route: [{destination: {host: never}}]\n\
         - route: [{destination: {host: productpage-v1}}]\n",
    );
    let reviews = spec(
        "http:\n- name: all\n  match: [{uri: {prefix: /reviews/v1}, headers: {x-b: {exact: b}}}]\n  route: [{destination: {host: reviews}}]\n",
    );
    let private = spec("exportTo: [.]\nhttp: [{route: [{destination: {host: private}}]}]");
    let mut delegates = Delegates::new();
    delegates.insert(("ns2", "productpage"), (&productpage, Visibility::Public));
    delegates.insert(("ns1", "reviews"), (&reviews, Visibility::Public));
    let private_vis = Visibility::of_config(&private.export_to, "ns3", crate::traffic::ExportDefault::Public);
    delegates.insert(("ns3", "private"), (&private, private_vis));
    assert_eq!(
        summary(&merge(&root, "ns1", &delegates)),
        [
            // The delegate's own match and timeout win; the root's fill the gaps.
            "productpage-v2: [/productpage/v2] -> productpage-v2 t=9s",
            // `/other` is not under `/productpage`: dropped. A route without a match takes the root's.
            "productpage: [/productpage*] -> productpage-v1 t=5s",
            // Headers merge; the narrower prefix stays.
            "reviews-all: [/reviews/v1*+x-a+x-b] -> reviews",
            // The missing delegate and the one not exported to ns1 drop only their routes.
            "rest: [] -> default",
        ]
    );
}

#[test]
fn string_match_conflicts_follow_istiod() {
    let sm = |kind: &str, v: &str| -> Option<StringMatch> {
        serde_yaml::from_str(&format!("{{{kind}: {v:?}}}")).ok()
    };
    let cases = [
        // (root, leaf, conflict)
        (None, sm("exact", "/a"), false),
        (sm("prefix", "/a"), None, false),
        (sm("prefix", "/a"), sm("prefix", "/a/b"), false),
        (sm("prefix", "/a/b"), sm("prefix", "/a"), true),
        (sm("prefix", "/a"), sm("exact", "/a/x"), false),
        (sm("exact", "/a"), sm("exact", "/a"), false),
        (sm("exact", "/a"), sm("exact", "/b"), true),
        (sm("exact", "/a"), sm("prefix", "/a"), true),
        (sm("regex", "/a.*"), sm("prefix", "/a"), true),
        (sm("prefix", "/a"), sm("regex", "/a.*"), true),
    ];
    for (root, leaf, want) in cases {
        assert_eq!(
            string_conflict(root.as_ref(), leaf.as_ref()),
            want,
            "{root:?} {leaf:?}"
        );
    }
}
