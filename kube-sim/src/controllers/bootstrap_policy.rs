//! The default RBAC objects kube-apiserver bootstraps (`bootstrappolicy`): `cluster-admin` bound to
//! `system:masters`, the discovery, basic-user and public-info roles every user gets, and the
//! aggregated user-facing `admin`, `edit` and `view` with the `system:aggregate-to-*` roles they
//! gather. Each carries the bootstrap label and the autoupdate annotation, as on a real cluster.

use serde_json::{Value, json};

use super::super::error::Error;
use super::super::store::Store;

const API: &str = "rbac.authorization.k8s.io/v1";
const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";
const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

fn metadata(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    json!({"name": name, "labels": labels,
           "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

fn role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({"apiVersion": API, "kind": "ClusterRole", "metadata": metadata(name, labels), "rules": rules})
}

fn aggregated(name: &str, labels: &[(&str, &str)], to: &str) -> Value {
    let selector = format!("rbac.authorization.k8s.io/aggregate-to-{to}");
    json!({"apiVersion": API, "kind": "ClusterRole", "metadata": metadata(name, labels),
           "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector: "true"}}]}, "rules": []})
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({"apiVersion": API, "kind": "ClusterRoleBinding", "metadata": metadata(name, &[]),
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
           "subjects": subjects})
}

fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            "",
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        rule(READ, "", &["namespaces"]),
        rule(READ, "discovery.k8s.io", &["endpointslices"]),
        rule(
            READ,
            "apps",
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        rule(
            READ,
            "autoscaling",
            &["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
        ),
        rule(
            READ,
            "batch",
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            "networking.k8s.io",
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

fn edit_rules() -> Vec<Value> {
    let pods = [
        "pods",
        "pods/attach",
        "pods/proxy",
        "pods/exec",
        "pods/portforward",
    ];
    vec![
        rule(
            READ,
            "",
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], "", &["serviceaccounts"]),
        rule(WRITE, "", &pods),
        rule(&["create"], "", &["pods/eviction"]),
        rule(
            WRITE,
            "",
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            WRITE,
            "apps",
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
        rule(WRITE, "batch", &["jobs", "cronjobs"]),
        rule(WRITE, "policy", &["poddisruptionbudgets"]),
        rule(WRITE, "networking.k8s.io", &["networkpolicies", "ingresses"]),
        rule(READ_WRITE, "coordination.k8s.io", &["leases"]),
    ]
}

/// The default ClusterRoles and ClusterRoleBindings, aggregated roles first (they start empty; the
/// aggregation controller fills them as their sources arrive).
pub(crate) fn objects() -> Vec<Value> {
    let to = |x: &'static str| ("rbac.authorization.k8s.io/aggregate-to-".to_owned() + x, "true");
    let (admin, edit, view) = (to("admin"), to("edit"), to("view"));
    vec![
        aggregated("admin", &[], "admin"),
        aggregated("edit", &[(&admin.0, admin.1)], "edit"),
        aggregated("view", &[(&edit.0, edit.1)], "view"),
        role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], "*", &["*"]), urls(&["*"], &["*"])],
        ),
        role(
            "system:discovery",
            &[],
            vec![urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    AUTHORIZATION,
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(&["create"], AUTHENTICATION, &["selfsubjectreviews"]),
            ],
        ),
        role(
            "system:public-info-viewer",
            &[],
            vec![urls(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        role(
            "system:aggregate-to-admin",
            &[(&admin.0, admin.1)],
            vec![
                rule(&["create"], AUTHORIZATION, &["localsubjectaccessreviews"]),
                rule(
                    READ_WRITE,
                    "rbac.authorization.k8s.io",
                    &["roles", "rolebindings"],
                ),
            ],
        ),
        role("system:aggregate-to-edit", &[(&edit.0, edit.1)], edit_rules()),
        role("system:aggregate-to-view", &[(&view.0, view.1)], view_rules()),
        binding("cluster-admin", &["system:masters"]),
        binding("system:discovery", &[AUTHENTICATED]),
        binding("system:basic-user", &[AUTHENTICATED]),
        binding("system:public-info-viewer", &[AUTHENTICATED, UNAUTHENTICATED]),
    ]
}

/// Stores the default policy in a new cluster.
pub(crate) fn bootstrap(store: &Store) -> Result<(), Error> {
    for obj in objects() {
        store.apply(obj)?;
    }
    Ok(())
}
