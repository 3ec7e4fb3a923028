//! The clusterrole-aggregation controller: a ClusterRole with an `aggregationRule` gets the rules of
//! every other ClusterRole its selectors match (selector by selector, matches in name order, duplicates
//! dropped), so `admin`, `edit` and `view` grow with the `rbac.authorization.k8s.io/aggregate-to-*`
//! roles. Run after every ClusterRole write, until nothing changes (aggregates may aggregate aggregates).

use serde_json::{Value, json};

use super::super::error::Error;
use super::super::kinds::{self, Kind, KindId};
use super::super::store::Txn;
use crate::selector::LabelSelector;

/// More rounds than any sane chain of aggregated roles needs; a cycle stops here.
const MAX_ROUNDS: usize = 8;

pub(crate) fn is_cluster_role(kind: &Kind) -> bool {
    kind.group == "rbac.authorization.k8s.io" && kind.kind == "ClusterRole"
}

fn cluster_role_kind() -> Option<KindId> {
    kinds::by_type("rbac.authorization.k8s.io/v1", "ClusterRole").map(Kind::id)
}

/// Brings every aggregated ClusterRole's rules up to date inside the write transaction.
pub(crate) fn reconcile(txn: &mut Txn<'_>) -> Result<(), Error> {
    let Some(kind) = cluster_role_kind() else {
        return Ok(());
    };
    for _ in 0..MAX_ROUNDS {
        let roles: Vec<Value> = txn.objects(kind).map(|o| o.value()).collect();
        let mut changed = false;
        for role in roles.iter().filter(|r| r["aggregationRule"].is_object()) {
            let rules = aggregate(role, &roles);
            if role["rules"] != rules {
                let mut updated = role.clone();
                updated["rules"] = rules;
                txn.put(kind, updated)?;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    Ok(())
}

/// The rules `role`'s aggregation rule gathers from `roles` (sorted by name, as the store keeps them).
pub(crate) fn aggregate(role: &Value, roles: &[Value]) -> Value {
    let name = &role["metadata"]["name"];
    let mut rules: Vec<Value> = Vec::new();
    let selectors = role["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for selector in selectors {
        for other in roles.iter().filter(|r| r["metadata"]["name"] != *name) {
            if !selects(selector, &other["metadata"]["labels"]) {
                continue;
            }
            for rule in other["rules"].as_array().map(Vec::as_slice).unwrap_or_default() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    json!(rules)
}

/// A metav1.LabelSelector (matchLabels and matchExpressions) against an object's labels.
pub(crate) fn selects(selector: &Value, labels: &Value) -> bool {
    LabelSelector::from_api(selector).is_some_and(|s| s.matches(&super::meta::labels_of(labels)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn aggregation_unions_matching_roles_without_duplicates() {
        let get = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let list = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]});
        let aggregator = json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"x": "true"}}, {"matchLabels": {"y": "true"}}]}});
        let roles = [
            role("a", json!({"x": "true"}), json!([get])),
            role("b", json!({"x": "true", "y": "true"}), json!([get, list])),
            role("c", json!({"z": "true"}), json!([{"verbs": ["*"]}])),
            aggregator.clone(),
        ];
        assert_eq!(aggregate(&aggregator, &roles), json!([get, list]));
        let none = json!({"metadata": {"name": "n"}, "aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(aggregate(&none, &roles), json!([]));
    }
}
