//! RBAC escalation prevention, as the API server's RBAC storage does it: a user may create or update a
//! Role/ClusterRole only with permissions it already holds (or with `escalate` on it), and a
//! RoleBinding/ClusterRoleBinding only to a role whose permissions it holds (or with `bind` on it).
//! `system:masters` is exempt. Only under `enforce_rbac`: without an authorizer the real server has no
//! rules to compare with either.

use serde_json::{Value, json};

use super::auth::Identity;
use super::error::Error;
use super::kinds::Kind;
use super::rbac::{self, Attributes, MASTERS, Subject, strings, url_covers};
use super::store::Store;

const GROUP: &str = "rbac.authorization.k8s.io";

/// What is being written: the kind, the namespace and name from the URL, the new and the old object.
pub(crate) struct Write<'a> {
    pub(crate) kind: &'a Kind,
    pub(crate) namespace: &'a str,
    pub(crate) url_name: &'a str,
    pub(crate) new: &'a Value,
    pub(crate) old: Option<&'a Value>,
}

/// Whether writes of `kind` are checked here (the four RBAC kinds).
pub(crate) fn applies(kind: &Kind) -> bool {
    kind.group == GROUP
}

/// Refuses the write with the real 403 if it would grant `identity` permissions it does not hold.
pub(crate) fn check(store: &Store, identity: &Identity, w: &Write<'_>) -> Result<(), Error> {
    // Updates that only touch what the garbage collector edits are never checked.
    if !applies(w.kind)
        || identity.groups.iter().any(|g| g == MASTERS)
        || w.old.is_some_and(|old| only_gc_fields_differ(old, w.new))
    {
        return Ok(());
    }
    let subject = Subject::from(identity);
    let name = w.new["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(w.url_name);
    let refuse = |detail: String| Error::Forbidden {
        group: GROUP.into(),
        resource: w.kind.plural.into(),
        name: name.into(),
        detail,
    };
    let allowed = |verb: &str, resource: &str, object: &str| {
        let attrs = Attributes {
            verb,
            api_group: GROUP,
            resource,
            namespace: w.namespace,
            name: object,
            ..Attributes::default()
        };
        rbac::decide(store, subject, &attrs).allowed
    };
    match w.kind.kind {
        "Role" | "ClusterRole" => {
            if allowed("escalate", w.kind.plural, w.url_name) {
                return Ok(());
            }
            let rules = w.new["rules"].as_array().cloned().unwrap_or_default();
            confirm_no_escalation(store, identity, w.namespace, &rules).map_err(refuse)?;
            let aggregation = &w.new["aggregationRule"];
            let changed = w.old.is_none_or(|old| old["aggregationRule"] != *aggregation);
            if w.kind.kind == "ClusterRole" && !aggregation.is_null() && changed {
                let full = [
                    json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                    json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
                ];
                confirm_no_escalation(store, identity, w.namespace, &full).map_err(|_| {
                    refuse("must have cluster-admin privileges to use the aggregationRule".into())
                })?;
            }
            Ok(())
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref = &w.new["roleRef"];
            let role_kind = role_ref["kind"].as_str().unwrap_or_default();
            let role_name = role_ref["name"].as_str().unwrap_or_default();
            let resource = match role_kind {
                "ClusterRole" => "clusterroles",
                _ => "roles",
            };
            if allowed("bind", resource, role_name) {
                return Ok(());
            }
            let rules = rbac::role_rules(store, role_ref, w.namespace).map_err(|_| Error::NotFound {
                resource: format!("{resource}.{GROUP}"),
                name: role_name.into(),
            })?;
            confirm_no_escalation(store, identity, w.namespace, &rules).map_err(refuse)
        }
        _ => Ok(()),
    }
}

/// Whether an update changes nothing but what the garbage collector edits (owners, finalizers).
fn only_gc_fields_differ(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v["metadata"].as_object_mut() {
            for field in [
                "ownerReferences",
                "finalizers",
                "resourceVersion",
                "managedFields",
            ] {
                meta.remove(field);
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// `ConfirmNoEscalation`: the identity's rules in `namespace` must cover `rules`; the error lists what
/// they do not, as the API server writes it.
fn confirm_no_escalation(
    store: &Store,
    identity: &Identity,
    namespace: &str,
    rules: &[Value],
) -> Result<(), String> {
    let (owner, errors) = rbac::rules_for(store, identity.into(), namespace);
    let missing = uncovered(&owner, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    let groups: Vec<String> = identity.groups.iter().map(|g| format!("{g:?}")).collect();
    let mut msg = format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        identity.username,
        groups.join(" "),
        lines.join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(msg)
}

/// One (group, resource, verb, name) or (URL, verb) atom of a rule.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Atom {
    groups: Vec<String>,
    resources: Vec<String>,
    urls: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
}

/// The atoms of `servant` rules no `owner` rule covers (`Covers` in the API server).
pub(crate) fn uncovered(owner: &[Value], servant: &[Value]) -> Vec<Atom> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !owner.iter().any(|o| covers(o, atom)))
        .collect()
}

fn breakdown(rule: &Value) -> Vec<Atom> {
    let one = |s: &str| vec![s.to_owned()];
    let verbs = strings(rule, "verbs");
    let names = strings(rule, "resourceNames");
    let mut atoms = Vec::new();
    for group in strings(rule, "apiGroups") {
        for resource in strings(rule, "resources") {
            for verb in &verbs {
                let atom = Atom {
                    groups: one(group),
                    resources: one(resource),
                    verbs: one(verb),
                    ..Atom::default()
                };
                if names.is_empty() {
                    atoms.push(atom);
                } else {
                    atoms.extend(names.iter().map(|n| Atom {
                        names: one(n),
                        ..atom.clone()
                    }));
                }
            }
        }
    }
    for url in strings(rule, "nonResourceURLs") {
        for verb in &verbs {
            atoms.push(Atom {
                urls: one(url),
                verbs: one(verb),
                ..Atom::default()
            });
        }
    }
    atoms
}

/// Whether one owner rule covers an atom: a `*` in the owner covers anything, a `*` in the atom is
/// covered only by a `*`.
fn covers(owner: &Value, atom: &Atom) -> bool {
    let has_all = |field: &str, wanted: &[String], wildcard: bool| {
        let own = strings(owner, field);
        (wildcard && own.contains(&"*")) || wanted.iter().all(|w| own.contains(&w.as_str()))
    };
    let own_names = strings(owner, "resourceNames");
    let names = if atom.names.is_empty() {
        own_names.is_empty()
    } else {
        own_names.is_empty() || has_all("resourceNames", &atom.names, false)
    };
    let urls = atom
        .urls
        .iter()
        .all(|u| strings(owner, "nonResourceURLs").iter().any(|o| url_covers(o, u)));
    has_all("verbs", &atom.verbs, true)
        && has_all("apiGroups", &atom.groups, true)
        && has_all("resources", &atom.resources, true)
        && names
        && urls
}

/// `CompactRules`: atoms of one group and resource (no names, no URLs) merged into one rule per
/// group/resource, verbs in order.
fn compact(atoms: Vec<Atom>) -> Vec<Atom> {
    let mut out: Vec<Atom> = Vec::new();
    let mut simple: Vec<Atom> = Vec::new();
    for atom in atoms {
        let is_simple = atom.names.is_empty()
            && atom.urls.is_empty()
            && atom.groups.len() == 1
            && atom.resources.len() == 1;
        if !is_simple {
            out.push(atom);
        } else if let Some(s) = simple
            .iter_mut()
            .find(|s| s.groups == atom.groups && s.resources == atom.resources)
        {
            s.verbs.extend(atom.verbs);
        } else {
            simple.push(atom);
        }
    }
    out.extend(simple);
    out
}

/// `CompactString`: `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`.
fn compact_string(atom: &Atom) -> String {
    let quoted = |v: &[String]| {
        let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", items.join(" "))
    };
    let parts: Vec<String> = [
        ("APIGroups", &atom.groups),
        ("Resources", &atom.resources),
        ("NonResourceURLs", &atom.urls),
        ("ResourceNames", &atom.names),
        ("Verbs", &atom.verbs),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(label, v)| format!("{label}:{}", quoted(v)))
    .collect();
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
        json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
    }

    #[test]
    fn covering_follows_the_policy_comparator() {
        let owner = [
            rule(&[""], &["secrets"], &["get", "list"]),
            rule(&["apps"], &["*"], &["get"]),
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"], "resourceNames": ["a"]}),
            json!({"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]}),
        ];
        let cases: &[(Value, usize)] = &[
            (rule(&[""], &["secrets"], &["get"]), 0),
            (rule(&[""], &["secrets"], &["get", "list", "watch"]), 1),
            // A `*` asked for is covered only by a `*`.
            (rule(&[""], &["secrets"], &["*"]), 1),
            (rule(&["apps"], &["deployments", "replicasets"], &["get"]), 0),
            (rule(&["apps"], &["deployments"], &["get", "delete"]), 1),
            (
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a"]}),
                0,
            ),
            (
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a", "b"]}),
                1,
            ),
            // A rule limited to names does not cover the whole resource.
            (rule(&[""], &["configmaps"], &["get"]), 1),
            (json!({"nonResourceURLs": ["/healthz/ping"], "verbs": ["get"]}), 0),
            (json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}), 1),
        ];
        for (servant, missing) in cases {
            assert_eq!(
                uncovered(&owner, std::slice::from_ref(servant)).len(),
                *missing,
                "{servant}"
            );
        }
    }

    #[test]
    fn missing_permissions_are_compacted_as_the_api_server_prints_them() {
        let missing = uncovered(
            &[],
            &[
                rule(&[""], &["secrets"], &["get", "list"]),
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["x"]}),
                json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
            ],
        );
        let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                r#"{APIGroups:[""], Resources:["configmaps"], ResourceNames:["x"], Verbs:["get"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}"#,
                r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#,
            ]
        );
    }

    #[test]
    fn gc_only_updates_are_not_checked() {
        let old = json!({"metadata": {"name": "b", "resourceVersion": "1"}, "roleRef": {"name": "x"}});
        let owned =
            json!({"metadata": {"name": "b", "ownerReferences": [{"name": "o"}]}, "roleRef": {"name": "x"}});
        let rebound = json!({"metadata": {"name": "b"}, "roleRef": {"name": "y"}});
        assert!(only_gc_fields_differ(&old, &owned));
        assert!(!only_gc_fields_differ(&old, &rebound));
    }
}
