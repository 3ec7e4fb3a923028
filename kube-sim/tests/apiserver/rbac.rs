//! RBAC as kube-apiserver does it, through kube-rs: access reviews, impersonation, escalation prevention,
//! the bootstrap policy and ClusterRole aggregation.

use http_body_util::BodyExt;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::PostParams;
use kube::{Api, Client};
use kube_sim::ApiServerConfig;
use kube_sim::testing::{Sim, client_for, kubeconfig_with_user, start, start_with};
use serde_json::{Value, json};

const RBAC: &str = "rbac.authorization.k8s.io/v1";

async fn enforcing() -> Sim {
    let mut cfg = ApiServerConfig::new("rbac");
    cfg.enforce_rbac = true;
    start_with(cfg).await
}

/// A request with extra headers; returns the code and the JSON body.
async fn send(
    client: &Client,
    method: &str,
    path: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    let resp = client
        .send(req.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .expect("send");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn post(client: &Client, path: &str, body: Value) -> (u16, Value) {
    send(client, "POST", path, body, &[]).await
}

/// A client for a new ServiceAccount `name` in `default` (a TokenRequest token).
async fn service_account(sim: &Sim, name: &str) -> Client {
    let sas: Api<ServiceAccount> = Api::namespaced(sim.client.clone(), "default");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
    )
    .await
    .unwrap();
    let token = sas
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    client_for(&kubeconfig_with_user(sim, json!({"token": token}))).await
}

fn apply(sim: &Sim, objects: Vec<Value>) {
    for o in objects {
        sim.server.store().apply(o).unwrap();
    }
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": name, "namespace": "default"}, "rules": rules})
}

fn binding(kind: &str, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    let mut meta = json!({"name": name});
    if kind == "RoleBinding" {
        meta["namespace"] = json!("default");
    }
    json!({"apiVersion": RBAC, "kind": kind, "metadata": meta,
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": [subject]})
}

fn sa(name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": "default"})
}

fn ssar(verb: &str, resource: &str, sub: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
           "spec": {"resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource, "subresource": sub}}})
}

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

#[tokio::test]
async fn self_subject_access_reviews_answer_from_rbac_with_or_without_enforcement() {
    for sim in [start().await, enforcing().await] {
        // The admin (system:masters) may do anything; kube-rs' typed client round-trips the review.
        let reviews: Api<SelfSubjectAccessReview> = Api::all(sim.client.clone());
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("delete".into()),
                    resource: Some("nodes".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let status = reviews
            .create(&PostParams::default(), &review)
            .await
            .unwrap()
            .status
            .unwrap();
        assert!(status.allowed && !status.denied.unwrap_or(false));

        let bot = service_account(&sim, "bot").await;
        let (code, body) = post(&bot, SSAR, ssar("get", "pods", "log")).await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["status"], json!({"allowed": false}));
        apply(
            &sim,
            vec![
                role(
                    "logs",
                    json!([{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]),
                ),
                binding("RoleBinding", "bot-logs", "Role", "logs", sa("bot")),
            ],
        );
        let (_, body) = post(&bot, SSAR, ssar("get", "pods", "log")).await;
        assert_eq!(
            body["status"],
            json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"bot-logs/default\" of Role \"logs\" to ServiceAccount \"bot/default\""})
        );
        assert_eq!(
            body["spec"]["resourceAttributes"]["subresource"], "log",
            "the spec is echoed"
        );
        let (_, body) = post(&bot, SSAR, ssar("get", "pods", "")).await;
        assert_eq!(body["status"]["allowed"], false, "pods/log does not grant pods");
        let non_resource = json!({"spec": {"nonResourceAttributes": {"path": "/apis", "verb": "get"}}});
        let (_, body) = post(&bot, SSAR, non_resource).await;
        assert_eq!(
            body["status"]["allowed"], true,
            "system:discovery is bound to every authenticated user"
        );
        let (code, body) = post(&bot, SSAR, json!({"spec": {}})).await;
        assert_eq!(code, 422, "{body}");
        assert_eq!(
            body["message"],
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
    }
}

#[tokio::test]
async fn subject_access_reviews_check_someone_else() {
    let sim = start().await;
    apply(
        &sim,
        vec![
            cluster_role(
                "reader",
                json!([{"apiGroups": ["apps"], "resources": ["*"], "verbs": ["get", "list"]}]),
            ),
            binding(
                "ClusterRoleBinding",
                "devs-read",
                "ClusterRole",
                "reader",
                json!({"kind": "Group", "name": "devs"}),
            ),
        ],
    );
    let sar = |user: &str, groups: Value, ns: &str| {
        json!({"spec": {"user": user, "groups": groups,
        "resourceAttributes": {"namespace": ns, "verb": "list", "group": "apps", "resource": "deployments"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (code, body) = post(&sim.client, path, sar("alice", json!(["devs"]), "")).await;
    assert_eq!(code, 201);
    assert_eq!(
        body["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"devs-read\" of ClusterRole \"reader\" to Group \"devs\""
    );
    let (_, body) = post(&sim.client, path, sar("alice", json!([]), "")).await;
    assert_eq!(body["status"], json!({"allowed": false}));
    let (code, body) = post(&sim.client, path, sar("", json!([]), "")).await;
    assert_eq!(code, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("spec.user: Invalid value: \"\": at least one of user or group must be specified"),
        "{body}"
    );

    let local = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews";
    let (code, body) = post(&sim.client, local, sar("bob", json!(["devs"]), "default")).await;
    assert_eq!((code, &body["status"]["allowed"]), (201, &json!(true)), "{body}");
    assert_eq!(body["metadata"]["namespace"], "default");
    let (code, body) = post(&sim.client, local, sar("bob", json!(["devs"]), "other")).await;
    assert_eq!(code, 422);
    assert!(
        body["message"].as_str().unwrap().contains(
            "spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
        ),
        "{body}"
    );
}

#[tokio::test]
async fn self_subject_rules_reviews_list_what_applies_in_the_namespace() {
    let sim = enforcing().await;
    let bot = service_account(&sim, "bot").await;
    apply(
        &sim,
        vec![
            role(
                "cm",
                json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["app"]}]),
            ),
            binding("RoleBinding", "bot-cm", "Role", "cm", sa("bot")),
        ],
    );
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let (code, body) = post(&bot, path, json!({"spec": {"namespace": "default"}})).await;
    assert_eq!(code, 201, "{body}");
    let status = &body["status"];
    let rules = status["resourceRules"].as_array().unwrap();
    assert!(rules.contains(
        &json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app"]})
    ));
    assert!(
        rules.contains(
            &json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                                   "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})
        ),
        "{status}"
    );
    assert!(status["nonResourceRules"].as_array().unwrap().iter().any(|r| {
        r["nonResourceURLs"]
            .as_array()
            .unwrap()
            .contains(&json!("/apis/*"))
    }));
    assert_eq!(status["incomplete"], false);
    let (_, other) = post(&bot, path, json!({"spec": {"namespace": "kube-system"}})).await;
    assert_eq!(
        other["status"]["resourceRules"].as_array().unwrap().len(),
        rules.len() - 1
    );
    let (code, _) = post(&bot, path, json!({"spec": {}})).await;
    assert_eq!(code, 400, "no namespace on request");
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb_when_rbac_is_enforced() {
    let sim = enforcing().await;
    let bot = service_account(&sim, "bot").await;
    let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let ssr = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    // A ServiceAccount may ask who it is (system:basic-user), but not impersonate.
    let (code, body) = post(&bot, ssr, whoami.clone()).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        &bot,
        "GET",
        "/api/v1/namespaces/default/pods",
        Value::Null,
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "users \"alice\" is forbidden: User \"system:serviceaccount:default:bot\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    assert_eq!(body["details"], json!({"name": "alice", "kind": "users"}));

    apply(
        &sim,
        vec![
            cluster_role(
                "impersonator",
                json!([{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["alice"]}]),
            ),
            binding(
                "ClusterRoleBinding",
                "bot-impersonates",
                "ClusterRole",
                "impersonator",
                sa("bot"),
            ),
        ],
    );
    let (code, body) = send(
        &bot,
        "POST",
        ssr,
        whoami.clone(),
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "alice", "groups": ["system:authenticated"]})
    );
    let (code, body) = send(
        &bot,
        "GET",
        "/api/v1/namespaces/default/pods",
        Value::Null,
        &[("Impersonate-User", "alice")],
    )
    .await;
    assert_eq!(code, 403, "the request runs as alice, who may not list pods");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("User \"alice\" cannot list resource \"pods\""),
        "{body}"
    );
    let (code, body) = send(
        &bot,
        "GET",
        "/api/v1/pods",
        Value::Null,
        &[("Impersonate-User", "alice"), ("Impersonate-Group", "admins")],
    )
    .await;
    assert_eq!(code, 403);
    assert!(body["message"].as_str().unwrap().starts_with("groups \"admins\" is forbidden: User \"system:serviceaccount:default:bot\" cannot impersonate resource \"groups\""), "{body}");

    // The admin may impersonate anyone, a ServiceAccount included (its groups follow).
    let (code, body) = send(
        &sim.client,
        "POST",
        ssr,
        whoami,
        &[
            ("Impersonate-User", "system:serviceaccount:default:bot"),
            ("Impersonate-Extra-Scopes", "a"),
        ],
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "system:serviceaccount:default:bot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
        "extra": {"scopes": ["a"]}})
    );
    let (code, _) = send(
        &sim.client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
        &[("Impersonate-User", "system:serviceaccount:default:bot")],
    )
    .await;
    assert_eq!(
        code, 403,
        "as the ServiceAccount, the admin is refused what the ServiceAccount is"
    );
}

#[tokio::test]
async fn without_enforcement_anyone_may_impersonate() {
    let sim = start().await;
    let bot = service_account(&sim, "bot").await;
    let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, body) = send(
        &bot,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        whoami,
        &[("Impersonate-User", "alice"), ("Impersonate-Group", "devs")],
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "alice", "groups": ["devs"]})
    );
}

#[tokio::test]
async fn writing_rbac_cannot_grant_what_the_writer_does_not_hold() {
    let sim = enforcing().await;
    let bot = service_account(&sim, "bot").await;
    apply(
        &sim,
        vec![
            role(
                "rbac-writer",
                json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
            ),
            binding("RoleBinding", "bot-rbac", "Role", "rbac-writer", sa("bot")),
        ],
    );
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let secrets = json!({"metadata": {"name": "secrets"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]});
    let (code, body) = post(&bot, roles, secrets.clone()).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "roles.rbac.authorization.k8s.io \"secrets\" is forbidden: user \"system:serviceaccount:default:bot\" \
        (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is attempting to grant \
        RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"*\"]}"
    );
    assert_eq!(
        body["details"],
        json!({"name": "secrets", "group": "rbac.authorization.k8s.io", "kind": "roles"})
    );
    // What it holds it may grant.
    let configmaps = json!({"metadata": {"name": "cm-reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    assert_eq!(post(&bot, roles, configmaps).await.0, 201);
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let bind = |role_kind: &str, name: &str| {
        json!({"metadata": {"name": format!("to-{name}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "User", "name": "alice"}]})
    };
    assert_eq!(post(&bot, bindings, bind("Role", "cm-reader")).await.0, 201);
    let (code, body) = post(&bot, bindings, bind("ClusterRole", "cluster-admin")).await;
    assert_eq!(code, 403);
    assert!(body["message"].as_str().unwrap().starts_with("rolebindings.rbac.authorization.k8s.io \"to-cluster-admin\" is forbidden: user \"system:serviceaccount:default:bot\""), "{body}");
    let (code, _) = post(&bot, bindings, bind("ClusterRole", "no-such-role")).await;
    assert_eq!(code, 404);

    // `escalate` on roles and `bind` on a ClusterRole lift the checks.
    apply(
        &sim,
        vec![
            role(
                "escalator",
                json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
                                 {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]}]),
            ),
            binding("RoleBinding", "bot-escalates", "Role", "escalator", sa("bot")),
        ],
    );
    assert_eq!(post(&bot, roles, secrets).await.0, 201);
    assert_eq!(post(&bot, bindings, bind("ClusterRole", "view")).await.0, 201);
    assert_eq!(post(&bot, bindings, bind("ClusterRole", "edit")).await.0, 403);
}

#[tokio::test]
async fn without_enforcement_rbac_writes_are_not_checked() {
    let sim = start().await;
    let bot = service_account(&sim, "bot").await;
    let (code, _) = post(
        &bot,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        cluster_role(
            "all",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        ),
    )
    .await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn the_bootstrap_policy_is_there_and_aggregates() {
    let sim = start().await;
    let roles: Api<ClusterRole> = Api::all(sim.client.clone());
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        let role = roles.get(name).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        let meta = role.metadata;
        assert_eq!(
            meta.labels.unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(
            meta.annotations.unwrap()["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    let rules_of = |r: ClusterRole| serde_json::to_value(r.rules.unwrap_or_default()).unwrap();
    let view = rules_of(roles.get("view").await.unwrap());
    let edit = rules_of(roles.get("edit").await.unwrap());
    let admin = rules_of(roles.get("admin").await.unwrap());
    let pods_log = json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]});
    let has = |rules: &Value, rule: &Value| rules.as_array().unwrap().iter().any(|r| r == rule);
    assert!(view.as_array().unwrap().len() > 3);
    // edit gathers view's rules, admin gathers edit's.
    for rule in view.as_array().unwrap() {
        assert!(has(&edit, rule) && has(&admin, rule), "{rule}");
    }
    assert!(!has(&view, &pods_log));

    // A new aggregate-to-view role flows into view, edit and admin, and out again when deleted.
    let mut extra = cluster_role("logs-viewer", json!([pods_log]));
    extra["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    let created = roles
        .create(&PostParams::default(), &serde_json::from_value(extra).unwrap())
        .await
        .unwrap();
    assert!(created.metadata.name.is_some());
    for name in ["view", "edit", "admin"] {
        assert!(
            has(&rules_of(roles.get(name).await.unwrap()), &pods_log),
            "{name}"
        );
    }
    roles.delete("logs-viewer", &Default::default()).await.unwrap();
    assert!(!has(&rules_of(roles.get("admin").await.unwrap()), &pods_log));
}

#[tokio::test]
async fn aggregation_rules_need_cluster_admin_powers() {
    let sim = enforcing().await;
    let bot = service_account(&sim, "bot").await;
    apply(
        &sim,
        vec![
            cluster_role(
                "role-writer",
                json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]),
            ),
            binding(
                "ClusterRoleBinding",
                "bot-writes-roles",
                "ClusterRole",
                "role-writer",
                sa("bot"),
            ),
        ],
    );
    let aggregated = json!({"metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
    let (code, body) = post(
        &bot,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        aggregated,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "clusterroles.rbac.authorization.k8s.io \"gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
}

#[tokio::test]
async fn the_request_log_names_the_impersonated_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.jsonl");
    let mut cfg = ApiServerConfig::new("logged");
    cfg.request_log = Some(std::sync::Arc::new(kube_sim::RequestLog::open(&path).unwrap()));
    let sim = start_with(cfg).await;
    let (code, _) = send(
        &sim.client,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
        &[("Impersonate-User", "alice"), ("Impersonate-Group", "devs")],
    )
    .await;
    assert_eq!(code, 200);
    let line: Value =
        serde_json::from_str(std::fs::read_to_string(&path).unwrap().lines().last().unwrap()).unwrap();
    assert_eq!(
        (&line["user"], &line["groups"], &line["resource"]),
        (&json!("alice"), &json!(["devs"]), &json!("configmaps"))
    );
}
