//! ObjectMeta and LabelSelector rules shared by every kind (ValidateObjectMeta, ValidateLabelSelector).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::validate::{self, Errs, q};

/// kube-apiserver's cap on the summed size of an object's annotation keys and values.
const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

pub(super) fn object_meta(errs: &mut Errs, meta: &ObjectMeta) {
    validate::labels(errs, "metadata.labels", meta.labels.as_ref());
    let mut size = 0;
    for (k, v) in meta.annotations.iter().flatten() {
        for msg in validate::qualified_name(&k.to_lowercase()) {
            errs.invalid("metadata.annotations", q(k), &msg);
        }
        size += k.len() + v.len();
    }
    if size > TOTAL_ANNOTATION_SIZE {
        errs.push(
            "metadata.annotations",
            format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes"),
        );
    }
    for (i, f) in meta.finalizers.iter().flatten().enumerate() {
        for msg in validate::qualified_name(f) {
            errs.invalid(format!("metadata.finalizers[{i}]"), q(f), &msg);
        }
    }
}

/// Whether `selector` selects an object with `labels` (an empty selector selects everything), by the
/// one evaluator ([`crate::selector::LabelSelector::from_api`]).
pub(super) fn matches(selector: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Ok(api) = serde_json::to_value(selector) else {
        return false;
    };
    let none = BTreeMap::new();
    crate::selector::LabelSelector::from_api(&api).is_some_and(|s| s.matches(labels.unwrap_or(&none)))
}

pub(super) fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

pub(super) fn label_selector(errs: &mut Errs, field: &str, selector: &LabelSelector) {
    validate::labels(
        errs,
        &format!("{field}.matchLabels"),
        selector.match_labels.as_ref(),
    );
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let path = format!("{field}.matchExpressions[{i}]");
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => errs.required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            "Exists" | "DoesNotExist" if has_values => errs.forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.invalid(
                format!("{path}.operator"),
                q(other),
                "not a valid selector operator",
            ),
        }
        for msg in validate::qualified_name(&e.key) {
            errs.invalid(format!("{path}.key"), q(&e.key), &msg);
        }
    }
}

/// Go's `%#v` of a v1.LabelSelector, as immutability errors print it.
pub(super) fn go_selector(s: &LabelSelector) -> String {
    let exprs = match &s.match_expressions {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match &e.values {
                        None => "[]string(nil)".to_string(),
                        Some(v) => format!(
                            "[]string{{{}}}",
                            v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ")
                        ),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        q(&e.key),
                        q(&e.operator)
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{exprs}}}",
        validate::go_map(s.match_labels.as_ref())
    )
}
