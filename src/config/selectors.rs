//! MeshConfig `discoverySelectors`: Kubernetes label selectors over Namespaces that decide which
//! namespaces meshd discovers (istiod's `discoveryNamespacesFilter`). Pure: parsing, validation and
//! matching; the registries, the config controller and the root publisher apply it.
//!
//! Semantics (istiod's): no selector at all selects every namespace; otherwise a namespace is selected
//! when any selector matches its labels (OR); within one selector `matchLabels` and every
//! `matchExpressions` entry must all hold (AND); an empty selector `{}` matches every namespace.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use serde::{Deserialize, Serialize};

/// A Kubernetes `LabelSelector` (`metav1.LabelSelector`, as MeshConfig carries it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements, all of which must hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: Operator,
    /// The values `In`/`NotIn` compare with (none for `Exists`/`DoesNotExist`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `LabelSelectorOperator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// A selector that the API server would refuse, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with some.
    #[error("selector {index}: matchExpressions key {key:?}: {reason}")]
    Values {
        /// Position of the selector in the list.
        index: usize,
        /// The requirement's key.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An empty label key.
    #[error("selector {index}: a label key is empty")]
    EmptyKey {
        /// Position of the selector in the list.
        index: usize,
    },
    /// The text is not a list of label selectors.
    #[error("not a list of label selectors: {0}")]
    Syntax(String),
}

/// Most selectors one list may hold (MeshConfig or a remote Secret's annotation).
const MAX_SELECTORS: usize = 64;

impl LabelSelector {
    /// Whether `labels` satisfy every part of the selector (an empty selector matches all).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// Checks what serde cannot: keys present, values as the operator needs them, a bounded list.
pub fn validate(selectors: &[LabelSelector]) -> Result<(), SelectorError> {
    if selectors.len() > MAX_SELECTORS {
        return Err(SelectorError::Syntax(format!(
            "{} selectors is over the limit of {MAX_SELECTORS}",
            selectors.len()
        )));
    }
    for (index, s) in selectors.iter().enumerate() {
        if s.match_labels.keys().any(String::is_empty) {
            return Err(SelectorError::EmptyKey { index });
        }
        for r in &s.match_expressions {
            if r.key.is_empty() {
                return Err(SelectorError::EmptyKey { index });
            }
            let reason = match (r.operator, r.values.is_empty()) {
                (Operator::In | Operator::NotIn, true) => "In and NotIn need at least one value",
                (Operator::Exists | Operator::DoesNotExist, false) => {
                    "Exists and DoesNotExist take no values"
                }
                _ => continue,
            };
            return Err(SelectorError::Values {
                index,
                key: r.key.clone(),
                reason,
            });
        }
    }
    Ok(())
}

/// The discovered namespaces, as the config controller and the root publisher read them: `None`
/// until the namespaces are listed, then `All` or the names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selected {
    /// No selectors: every namespace.
    All,
    /// Only these.
    Only(Arc<BTreeSet<String>>),
}

impl Selected {
    /// Whether objects of `namespace` are discovered (cluster-scoped ones, `""`, always are).
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => namespace.is_empty() || names.contains(namespace),
        }
    }
}

/// Parses a YAML or JSON list of label selectors (a remote Secret's annotation) and validates it.
pub fn parse(text: &str) -> Result<Vec<LabelSelector>, SelectorError> {
    let selectors: Vec<LabelSelector> =
        serde_yaml::from_str(text).map_err(|e| SelectorError::Syntax(e.to_string()))?;
    validate(&selectors)?;
    Ok(selectors)
}

/// Whether a namespace with `labels` is discovered under `selectors` (none: every namespace).
pub fn selects(selectors: &[LabelSelector], labels: &BTreeMap<String, String>) -> bool {
    selectors.is_empty() || selectors.iter().any(|s| s.matches(labels))
}

/// The namespaces discovered, given every namespace's labels; `None` when all are (no selectors), so
/// a namespace not listed yet is not excluded.
pub fn selected<'a>(
    selectors: &[LabelSelector],
    namespaces: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
) -> Option<BTreeSet<String>> {
    if selectors.is_empty() {
        return None;
    }
    Some(
        namespaces
            .into_iter()
            .filter(|(_, labels)| selects(selectors, labels))
            .map(|(name, _)| name.to_owned())
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn matching_follows_kubernetes_label_selectors_ored_across_the_list() {
        let sel = |yaml: &str| parse(yaml).expect(yaml);
        let team_a = labels(&[("team", "a"), ("env", "prod")]);
        let team_b = labels(&[("team", "b")]);
        let bare = labels(&[]);
        // (selectors, team_a, team_b, bare)
        let cases: &[(&str, bool, bool, bool)] = &[
            ("[]", true, true, true),
            ("[{}]", true, true, true),
            ("[{matchLabels: {team: a}}]", true, false, false),
            (
                "[{matchLabels: {team: a}}, {matchLabels: {team: b}}]",
                true,
                true,
                false,
            ),
            ("[{matchLabels: {team: a, env: dev}}]", false, false, false),
            (
                "[{matchExpressions: [{key: team, operator: In, values: [a, b]}]}]",
                true,
                true,
                false,
            ),
            (
                "[{matchExpressions: [{key: team, operator: NotIn, values: [a]}]}]",
                false,
                true,
                true,
            ),
            (
                "[{matchExpressions: [{key: env, operator: Exists}]}]",
                true,
                false,
                false,
            ),
            (
                "[{matchExpressions: [{key: env, operator: DoesNotExist}]}]",
                false,
                true,
                true,
            ),
            (
                "[{matchLabels: {team: a}, matchExpressions: [{key: env, operator: In, values: [dev]}]}]",
                false,
                false,
                false,
            ),
            (r#"[{"matchLabels": {"team": "b"}}]"#, false, true, false),
        ];
        for (yaml, a, b, none) in cases {
            let s = sel(yaml);
            assert_eq!(
                [selects(&s, &team_a), selects(&s, &team_b), selects(&s, &bare)],
                [*a, *b, *none],
                "{yaml}"
            );
        }
    }

    #[test]
    fn invalid_selectors_are_refused_with_the_reason() {
        let cases = [
            (
                "[{matchExpressions: [{key: team, operator: In}]}]",
                "need at least one value",
            ),
            (
                "[{matchExpressions: [{key: team, operator: Exists, values: [a]}]}]",
                "take no values",
            ),
            (
                "[{matchExpressions: [{key: team, operator: Maybe}]}]",
                "unknown variant `Maybe`",
            ),
            ("[{matchLabels: {'': a}}]", "a label key is empty"),
            ("[{matchLabel: {team: a}}]", "unknown field `matchLabel`"),
            ("{matchLabels: {team: a}}", "not a list of label selectors"),
        ];
        for (yaml, want) in cases {
            let err = parse(yaml).expect_err(yaml).to_string();
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }

    #[test]
    fn selected_is_none_without_selectors_and_the_matching_names_otherwise() {
        let a = labels(&[("mesh", "on")]);
        let b = labels(&[]);
        let namespaces = [("a", &a), ("b", &b)];
        assert_eq!(selected(&[], namespaces), None);
        let s = parse("[{matchLabels: {mesh: 'on'}}]").expect("parses");
        assert_eq!(selected(&s, namespaces), Some(BTreeSet::from(["a".to_owned()])));
    }
}
