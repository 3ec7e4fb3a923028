//! Opt-in RBAC authorization, as Kubernetes' RBAC authorizer decides a resource request: the Roles and
//! ClusterRoles bound to the user, one of its groups or its ServiceAccount, rule by rule (API group,
//! resource or `resource/subresource`, verb, resourceNames; `*` matches anything). `system:masters`
//! may do everything. Not simulated: aggregated ClusterRoles, non-resource URLs (discovery stays open
//! to every authenticated user, as the default `system:discovery` binding allows) and the escalation
//! check on writing RBAC objects.

use serde_json::Value;

use super::auth::Identity;
use super::error::Error;
use super::requestlog::Entry;
use super::store::Store;

const RBAC: &str = "rbac.authorization.k8s.io/v1";
const MASTERS: &str = "system:masters";

/// Whether `request` is allowed; a refusal carries the API server's message.
pub(crate) fn authorize(store: &Store, identity: &Identity, request: &Entry<'_>) -> Result<(), Error> {
    if identity.groups.iter().any(|g| g == MASTERS) || allowed(store, identity, request) {
        return Ok(());
    }
    Err(Error::Forbidden(forbidden_message(request)))
}

fn allowed(store: &Store, identity: &Identity, request: &Entry<'_>) -> bool {
    let cluster_wide = store
        .list(RBAC, "ClusterRoleBinding", None)
        .into_iter()
        .filter(|b| binds(b, identity, ""))
        .any(|b| role_allows(store, &b["roleRef"], "", request));
    cluster_wide
        || (!request.namespace.is_empty()
            && store
                .list(RBAC, "RoleBinding", Some(request.namespace))
                .into_iter()
                .filter(|b| binds(b, identity, request.namespace))
                .any(|b| role_allows(store, &b["roleRef"], request.namespace, request)))
}

/// Whether the binding (in `namespace`, empty for a ClusterRoleBinding) names the identity.
fn binds(binding: &Value, identity: &Identity, namespace: &str) -> bool {
    let subjects = binding["subjects"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    subjects.iter().any(|s| {
        let name = s["name"].as_str().unwrap_or_default();
        match s["kind"].as_str() {
            Some("ServiceAccount") => {
                let ns = s["namespace"].as_str().unwrap_or(namespace);
                identity.username == format!("system:serviceaccount:{ns}:{name}")
            }
            Some("User") => identity.username == name,
            Some("Group") => identity.groups.iter().any(|g| g == name),
            _ => false,
        }
    })
}

fn role_allows(store: &Store, role_ref: &Value, namespace: &str, request: &Entry<'_>) -> bool {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str() {
        Some("ClusterRole") => store.get(RBAC, "ClusterRole", None, name),
        Some("Role") if !namespace.is_empty() => store.get(RBAC, "Role", Some(namespace), name),
        _ => None,
    };
    let rules = role
        .as_ref()
        .and_then(|r| r["rules"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    rules.iter().any(|rule| rule_allows(rule, request))
}

fn rule_allows(rule: &Value, request: &Entry<'_>) -> bool {
    let has = |field: &str, want: &str| {
        rule[field]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "*" || x == want))
    };
    let resource = if request.subresource.is_empty() {
        request.resource.to_owned()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let names = rule["resourceNames"].as_array().filter(|n| !n.is_empty());
    has("apiGroups", request.api_group)
        && has("resources", &resource)
        && has("verbs", request.verb)
        && names.is_none_or(|n| !request.name.is_empty() && n.iter().any(|x| x == request.name))
}

fn forbidden_message(r: &Entry<'_>) -> String {
    let qualified = match r.api_group {
        "" => r.resource.to_owned(),
        g => format!("{}.{g}", r.resource),
    };
    let name = if r.name.is_empty() {
        String::new()
    } else {
        format!(" \"{}\"", r.name)
    };
    let resource = if r.subresource.is_empty() {
        r.resource.to_owned()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    };
    let scope = if r.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace \"{}\"", r.namespace)
    };
    format!(
        "{qualified}{name} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        r.user, r.verb, r.api_group
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry<'a>(
        verb: &'static str,
        resource: &'static str,
        sub: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> Entry<'a> {
        Entry {
            cluster: "c",
            user: "system:serviceaccount:istio-system:meshd",
            groups: &[],
            verb,
            api_group: "",
            resource,
            subresource: sub,
            namespace: ns,
            name,
        }
    }

    #[test]
    fn rules_match_group_resource_verb_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"],
                          "resourceNames": ["istio-ca-secret"]});
        assert!(rule_allows(
            &rule,
            &entry("get", "secrets", "", "ns", "istio-ca-secret")
        ));
        assert!(!rule_allows(&rule, &entry("get", "secrets", "", "ns", "other")));
        assert!(!rule_allows(&rule, &entry("list", "secrets", "", "ns", "")));
        assert!(!rule_allows(
            &rule,
            &entry("get", "configmaps", "", "ns", "istio-ca-secret")
        ));
        let sub = json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]});
        assert!(rule_allows(
            &sub,
            &entry("create", "serviceaccounts", "token", "ns", "reader")
        ));
        assert!(!rule_allows(
            &sub,
            &entry("create", "serviceaccounts", "", "ns", "")
        ));
        let any = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(&any, &entry("delete", "pods", "", "ns", "p")));
    }

    #[test]
    fn bindings_name_service_accounts_users_and_groups() {
        let id = Identity {
            username: "system:serviceaccount:istio-system:meshd".into(),
            uid: String::new(),
            groups: vec!["system:serviceaccounts".into()],
        };
        let sa =
            json!({"subjects": [{"kind": "ServiceAccount", "name": "meshd", "namespace": "istio-system"}]});
        let sa_in_binding_ns = json!({"subjects": [{"kind": "ServiceAccount", "name": "meshd"}]});
        let other_ns = json!({"subjects": [{"kind": "ServiceAccount", "name": "meshd", "namespace": "x"}]});
        let group = json!({"subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]});
        let user = json!({"subjects": [{"kind": "User", "name": "someone"}]});
        assert!(binds(&sa, &id, ""));
        assert!(binds(&sa_in_binding_ns, &id, "istio-system"));
        assert!(!binds(&other_ns, &id, ""));
        assert!(binds(&group, &id, ""));
        assert!(!binds(&user, &id, ""));
        assert!(!binds(&json!({}), &id, ""));
    }

    #[test]
    fn refusals_read_like_the_api_server() {
        assert_eq!(
            forbidden_message(&entry("list", "secrets", "", "sample", "")),
            "secrets is forbidden: User \"system:serviceaccount:istio-system:meshd\" cannot list resource \
             \"secrets\" in API group \"\" in the namespace \"sample\""
        );
        assert_eq!(
            forbidden_message(&entry("create", "serviceaccounts", "token", "ns", "r")),
            "serviceaccounts \"r\" is forbidden: User \"system:serviceaccount:istio-system:meshd\" cannot \
             create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"ns\""
        );
    }
}
