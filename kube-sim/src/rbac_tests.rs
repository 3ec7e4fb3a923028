use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::auth::Authority;

fn attrs<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes {
        verb,
        path: None,
        api_group: group,
        resource,
        subresource: sub,
        namespace: ns,
        name,
    }
}

fn url<'a>(verb: &'a str, path: &'a str) -> Attributes<'a> {
    Attributes {
        verb,
        path: Some(path),
        ..Attributes::default()
    }
}

#[test]
fn rules_match_as_the_rbac_authorizer() {
    let secret = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"],
                        "resourceNames": ["istio-ca-secret"]});
    let token = json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]});
    let any = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
    let any_log = json!({"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]});
    let health = json!({"nonResourceURLs": ["/healthz", "/api/*"], "verbs": ["get"]});
    let cases = [
        (
            &secret,
            attrs("get", "", "secrets", "", "ns", "istio-ca-secret"),
            true,
        ),
        (&secret, attrs("get", "", "secrets", "", "ns", "other"), false),
        // resourceNames never match a request without a name (list, create).
        (&secret, attrs("list", "", "secrets", "", "ns", ""), false),
        (
            &secret,
            attrs("get", "", "configmaps", "", "ns", "istio-ca-secret"),
            false,
        ),
        (
            &secret,
            attrs("get", "apps", "secrets", "", "ns", "istio-ca-secret"),
            false,
        ),
        (
            &token,
            attrs("create", "", "serviceaccounts", "token", "ns", "r"),
            true,
        ),
        (
            &token,
            attrs("create", "", "serviceaccounts", "", "ns", ""),
            false,
        ),
        (
            &any,
            attrs("delete", "apps", "deployments", "scale", "ns", "d"),
            true,
        ),
        (&any_log, attrs("get", "", "pods", "log", "ns", "p"), true),
        (&any_log, attrs("get", "", "pods", "", "ns", "p"), false),
        (&any_log, attrs("get", "", "pods", "exec", "ns", "p"), false),
        // Resource rules never allow a non-resource URL, and the other way round.
        (&any, url("get", "/healthz"), false),
        (&health, url("get", "/healthz"), true),
        (&health, url("get", "/healthz/ping"), false),
        (&health, url("get", "/api/v1"), true),
        (&health, url("post", "/api/v1"), false),
        (&health, attrs("get", "", "pods", "", "", ""), false),
    ];
    for (rule, request, want) in cases {
        assert_eq!(rule_allows(rule, &request), want, "{rule} {request:?}");
    }
}

fn store_with(objects: Vec<serde_json::Value>) -> Store {
    let authority = Arc::new(Authority::new("t").unwrap());
    let store = Store::new(100, authority).unwrap();
    for o in objects {
        store.apply(o).unwrap();
    }
    store
}

fn binding(
    kind: &str,
    name: &str,
    ns: Option<&str>,
    role: (&str, &str),
    subject: serde_json::Value,
) -> serde_json::Value {
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": RBAC, "kind": kind, "metadata": meta,
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
           "subjects": [subject]})
}

#[test]
fn decisions_name_the_binding_that_allowed() {
    let reader = json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "reader"},
                        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]});
    let store = store_with(vec![
        reader,
        json!({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "cm", "namespace": "apps"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
        binding(
            "ClusterRoleBinding",
            "x",
            None,
            ("ClusterRole", "reader"),
            json!({"kind": "User", "name": "alice"}),
        ),
        binding(
            "RoleBinding",
            "y",
            Some("apps"),
            ("Role", "cm"),
            json!({"kind": "ServiceAccount", "name": "bot"}),
        ),
        binding(
            "RoleBinding",
            "dangling",
            Some("apps"),
            ("Role", "gone"),
            json!({"kind": "Group", "name": "devs"}),
        ),
    ]);
    let alice = Subject {
        user: "alice",
        groups: &[],
    };
    let bot_groups = vec!["system:serviceaccounts".to_owned()];
    let bot = Subject {
        user: "system:serviceaccount:apps:bot",
        groups: &bot_groups,
    };
    let devs_groups = vec!["devs".to_owned()];
    let dev = Subject {
        user: "dave",
        groups: &devs_groups,
    };
    let masters = vec![MASTERS.to_owned()];
    let admin = Subject {
        user: "root",
        groups: &masters,
    };
    let cases = [
        (
            alice,
            attrs("get", "", "pods", "log", "apps", "p"),
            true,
            r#"RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "reader" to User "alice""#,
        ),
        (alice, attrs("delete", "", "pods", "", "apps", "p"), false, ""),
        (
            bot,
            attrs("patch", "", "configmaps", "", "apps", "c"),
            true,
            r#"RBAC: allowed by RoleBinding "y/apps" of Role "cm" to ServiceAccount "bot/apps""#,
        ),
        (bot, attrs("patch", "", "configmaps", "", "other", "c"), false, ""),
        (
            dev,
            attrs("get", "", "configmaps", "", "apps", "c"),
            false,
            r#"RBAC: role.rbac.authorization.k8s.io "gone" not found"#,
        ),
        (admin, attrs("delete", "", "nodes", "", "", "n"), true, ""),
        // The bootstrap policy: every authenticated user may discover and ask about itself.
        (
            Subject {
                user: "x",
                groups: &["system:authenticated".to_owned()],
            },
            url("get", "/apis"),
            true,
            r#"RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated""#,
        ),
    ];
    for (subject, request, allowed, reason) in cases {
        let d = decide(&store, subject, &request);
        assert_eq!(
            (d.allowed, d.reason.as_str()),
            (allowed, reason),
            "{subject:?} {request:?}"
        );
    }
}

#[test]
fn rules_for_collects_cluster_and_namespace_rules() {
    let store = store_with(vec![
        json!({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "cm", "namespace": "apps"},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        binding(
            "RoleBinding",
            "y",
            Some("apps"),
            ("Role", "cm"),
            json!({"kind": "User", "name": "u"}),
        ),
    ]);
    let groups = vec!["system:authenticated".to_owned()];
    let subject = Subject {
        user: "u",
        groups: &groups,
    };
    let (in_apps, errors) = rules_for(&store, subject, "apps");
    let (elsewhere, _) = rules_for(&store, subject, "default");
    assert!(errors.is_empty());
    assert_eq!(in_apps.len(), elsewhere.len() + 1);
    assert!(in_apps.iter().any(|r| r["resources"] == json!(["configmaps"])));
}

#[test]
fn refusals_read_like_the_api_server() {
    let cases = [
        (
            attrs("list", "", "secrets", "", "sample", ""),
            "",
            "secrets is forbidden: User \"u\" cannot list resource \"secrets\" in API group \"\" in the namespace \"sample\"",
        ),
        (
            attrs("create", "", "serviceaccounts", "token", "ns", "r"),
            "",
            "serviceaccounts \"r\" is forbidden: User \"u\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"ns\"",
        ),
        (
            attrs("impersonate", "", "users", "", "", "x"),
            "",
            "users \"x\" is forbidden: User \"u\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        ),
        (
            attrs("get", "apps", "deployments", "", "", ""),
            "RBAC: boom",
            "deployments.apps is forbidden: User \"u\" cannot get resource \"deployments\" in API group \"apps\" at the cluster scope: RBAC: boom",
        ),
        (
            url("get", "/metrics"),
            "",
            "forbidden: User \"u\" cannot get path \"/metrics\"",
        ),
    ];
    for (request, reason, want) in cases {
        assert_eq!(forbidden("u", &request, reason).to_string(), want);
    }
}
