//! RBAC authorization, as kube-apiserver's RBAC authorizer decides: the Roles and ClusterRoles bound to
//! the user, one of its groups or its ServiceAccount, rule by rule (API group, resource or
//! `resource/subresource` or `*/subresource`, verb, resourceNames, nonResourceURLs with a trailing `*`;
//! `*` matches anything). `system:masters` may do everything (the server's privileged-group authorizer).
//!
//! One evaluation serves enforcement (opt-in `enforce_rbac`), the access reviews, impersonation and the
//! escalation checks, so they cannot disagree.

use serde_json::Value;

use super::auth::Identity;
use super::error::Error;
use super::requestlog::Entry;
use super::store::Store;

const RBAC: &str = "rbac.authorization.k8s.io/v1";
pub(crate) const MASTERS: &str = "system:masters";

/// What a request asks to do, in the authorizer's terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    /// A non-resource request (`/healthz`, `/api`) has a path and no resource.
    pub(crate) path: Option<&'a str>,
    pub(crate) api_group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
}

impl<'a> Attributes<'a> {
    pub(crate) fn of_entry(e: &Entry<'a>) -> Attributes<'a> {
        Attributes {
            verb: e.verb,
            path: None,
            api_group: e.api_group,
            resource: e.resource,
            subresource: e.subresource,
            namespace: e.namespace,
            name: e.name,
        }
    }
}

/// The user as RBAC sees it: a name and groups.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub(crate) user: &'a str,
    pub(crate) groups: &'a [String],
}

impl<'a> From<&'a Identity> for Subject<'a> {
    fn from(id: &'a Identity) -> Subject<'a> {
        Subject {
            user: &id.username,
            groups: &id.groups,
        }
    }
}

/// The authorizer's answer; `reason` is what SubjectAccessReview status and 403 messages carry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    pub(crate) reason: String,
}

/// Whether `subject` may do `attrs`, with the reason the real authorizer chain gives.
pub(crate) fn decide(store: &Store, subject: Subject<'_>, attrs: &Attributes<'_>) -> Decision {
    if subject.groups.iter().any(|g| g == MASTERS) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut reason = None;
    let errors = visit(store, subject, attrs.namespace, |source, rule| {
        if rule_allows(rule, attrs) {
            reason = Some(format!("RBAC: allowed by {source}"));
            return false;
        }
        true
    });
    match reason {
        Some(reason) => Decision {
            allowed: true,
            reason,
        },
        None => Decision {
            allowed: false,
            reason: if errors.is_empty() {
                String::new()
            } else {
                format!("RBAC: {}", aggregate(&errors))
            },
        },
    }
}

/// Enforcement: a refusal carries the API server's 403 message.
pub(crate) fn authorize(store: &Store, identity: &Identity, attrs: &Attributes<'_>) -> Result<(), Error> {
    let decision = decide(store, identity.into(), attrs);
    if decision.allowed {
        return Ok(());
    }
    Err(forbidden(&identity.username, attrs, &decision.reason))
}

/// Every rule that applies to `subject` in `namespace` (cluster-wide ones included), and the errors
/// met resolving role references.
pub(crate) fn rules_for(store: &Store, subject: Subject<'_>, namespace: &str) -> (Vec<Value>, Vec<String>) {
    let mut rules = Vec::new();
    let errors = visit(store, subject, namespace, |_, rule| {
        rules.push(rule.clone());
        true
    });
    (rules, errors)
}

/// Calls `visitor` with (source description, rule) for each rule bound to the subject, ClusterRoleBindings
/// first, until it returns false; returns the role-reference errors met on the way.
fn visit(
    store: &Store,
    subject: Subject<'_>,
    namespace: &str,
    mut visitor: impl FnMut(&str, &Value) -> bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut scopes = vec![("ClusterRoleBinding", None)];
    if !namespace.is_empty() {
        scopes.push(("RoleBinding", Some(namespace)));
    }
    for (kind, ns) in scopes {
        for binding in store.list(RBAC, kind, ns) {
            let binding_ns = ns.unwrap_or_default();
            let Some(matched) = applies_to(&binding, subject, binding_ns) else {
                continue;
            };
            let rules = match role_rules(store, &binding["roleRef"], binding_ns) {
                Ok(rules) => rules,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let source = describe(kind, &binding, matched, binding_ns);
            for rule in &rules {
                if !visitor(&source, rule) {
                    return errors;
                }
            }
        }
    }
    errors
}

/// `ClusterRoleBinding "x" of ClusterRole "y" to User "z"`, as the authorizer names where a rule came from.
fn describe(kind: &str, binding: &Value, subject: &Value, binding_ns: &str) -> String {
    let name = binding["metadata"]["name"].as_str().unwrap_or_default();
    let name = if binding_ns.is_empty() {
        name.to_owned()
    } else {
        format!("{name}/{binding_ns}")
    };
    let s_kind = subject["kind"].as_str().unwrap_or_default();
    let s_name = subject["name"].as_str().unwrap_or_default();
    let who = if s_kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        format!("{s_name}/{ns}")
    } else {
        s_name.to_owned()
    };
    format!(
        "{kind} {name:?} of {} {:?} to {s_kind} {who:?}",
        binding["roleRef"]["kind"].as_str().unwrap_or_default(),
        binding["roleRef"]["name"].as_str().unwrap_or_default(),
    )
}

/// The first of the binding's subjects that names the user, one of its groups, or its ServiceAccount.
fn applies_to<'b>(binding: &'b Value, subject: Subject<'_>, namespace: &str) -> Option<&'b Value> {
    let subjects = binding["subjects"].as_array()?;
    subjects.iter().find(|s| {
        let name = s["name"].as_str().unwrap_or_default();
        match s["kind"].as_str() {
            Some("ServiceAccount") => {
                let ns = s["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(namespace);
                !ns.is_empty() && subject.user == format!("system:serviceaccount:{ns}:{name}")
            }
            Some("User") => subject.user == name,
            Some("Group") => subject.groups.iter().any(|g| g == name),
            _ => false,
        }
    })
}

/// The rules of the role a binding in `namespace` (empty: a ClusterRoleBinding) refers to.
pub(crate) fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Result<Vec<Value>, String> {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str().unwrap_or_default() {
        "ClusterRole" => store
            .get(RBAC, "ClusterRole", None, name)
            .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {name:?} not found"))?,
        "Role" if !namespace.is_empty() => store
            .get(RBAC, "Role", Some(namespace), name)
            .ok_or_else(|| format!("role.rbac.authorization.k8s.io {name:?} not found"))?,
        "Role" => return Err("must provide namespace when getting role".into()),
        other => return Err(format!("unsupported role reference kind: {other:?}")),
    };
    Ok(role["rules"].as_array().cloned().unwrap_or_default())
}

/// `["a", "b"]` items of a rule's string list.
pub(crate) fn strings<'v>(rule: &'v Value, field: &str) -> Vec<&'v str> {
    rule[field]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

pub(crate) fn rule_allows(rule: &Value, attrs: &Attributes<'_>) -> bool {
    let verbs = strings(rule, "verbs");
    if !verbs.iter().any(|v| *v == "*" || *v == attrs.verb) {
        return false;
    }
    if let Some(path) = attrs.path {
        return strings(rule, "nonResourceURLs")
            .iter()
            .any(|u| url_covers(u, path));
    }
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.to_owned()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let names = strings(rule, "resourceNames");
    strings(rule, "apiGroups")
        .iter()
        .any(|g| *g == "*" || *g == attrs.api_group)
        && strings(rule, "resources").iter().any(|r| {
            *r == "*"
                || *r == combined
                || (!attrs.subresource.is_empty() && r.strip_prefix("*/") == Some(attrs.subresource))
        })
        && (names.is_empty() || names.contains(&attrs.name))
}

/// A nonResourceURLs entry matches its path exactly, or as a prefix when it ends in `*`.
pub(crate) fn url_covers(rule_url: &str, path: &str) -> bool {
    rule_url == "*"
        || rule_url == path
        || rule_url
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: one message alone, several in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut unique: Vec<&str> = Vec::new();
    for e in errors {
        if !unique.contains(&e.as_str()) {
            unique.push(e);
        }
    }
    match unique[..] {
        [one] => one.to_owned(),
        _ => format!("[{}]", unique.join(", ")),
    }
}

/// The 403 the server's authorization filter writes: which user cannot do what, plus the reason.
pub(crate) fn forbidden(user: &str, attrs: &Attributes<'_>, reason: &str) -> Error {
    let what = match attrs.path {
        Some(path) => format!("User {user:?} cannot {} path {path:?}", attrs.verb),
        None => {
            let resource = if attrs.subresource.is_empty() {
                attrs.resource.to_owned()
            } else {
                format!("{}/{}", attrs.resource, attrs.subresource)
            };
            let scope = if attrs.namespace.is_empty() {
                "at the cluster scope".to_owned()
            } else {
                format!("in the namespace {:?}", attrs.namespace)
            };
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
                attrs.verb, attrs.api_group
            )
        }
    };
    let detail = if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    };
    Error::Forbidden {
        group: attrs.api_group.to_owned(),
        resource: attrs.resource.to_owned(),
        name: attrs.name.to_owned(),
        detail,
    }
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
