//! Types several kinds share (Istio's `type.v1beta1.WorkloadSelector`, networking's `WorkloadSelector`
//! as `LabelSelector`, `PortSelector`, `StringMatch`,
//! `Percent`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::validate::{self, Report};

/// Label sets (`labels`, `matchLabels`), sorted for stable output.
pub type Labels = BTreeMap<String, String>;

/// Istio's `WorkloadSelector`: `matchLabels` (a workload matches when its labels include them all).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    /// Labels a workload must carry.
    pub match_labels: Labels,
}

impl WorkloadSelector {
    /// istiod's `validateWorkloadSelector` under `field`: valid labels without wildcards; none at
    /// all is a warning (it selects every workload of the namespace).
    pub(crate) fn validate(&self, field: &str, r: &mut Report) {
        validate::selector(&self.match_labels, &format!("{field}.matchLabels"), r);
        if self.match_labels.is_empty() {
            r.warn(
                field,
                "a selector without matchLabels selects every workload of the namespace",
            );
        }
    }
}

/// `networking.v1alpha3.WorkloadSelector`, the `workloadSelector` of a ServiceEntry or Sidecar:
/// `labels` (not `matchLabels`, which is `type.v1beta1`'s, used by DestinationRule and the security
/// kinds).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    /// Labels a workload must carry.
    pub labels: Labels,
}

impl LabelSelector {
    /// istiod's selector checks under `field`.
    pub(crate) fn validate(&self, field: &str, r: &mut Report) {
        validate::selector(&self.labels, &format!("{field}.labels"), r);
    }
}

/// Istio's `PortSelector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// The port number.
    pub number: u32,
}

/// Istio's `StringMatch`: one of `exact`, `prefix`, `regex` (RE2). All unset matches anything present.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StringMatch {
    /// Exact value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// RE2 regular expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

impl StringMatch {
    /// istiod's `validateStringMatch`: at most one of the three (a protobuf `oneof`), a non-empty
    /// valid regex, and a non-empty prefix unless `empty_prefix_ok` (a URI: Envoy takes `prefix: ""`
    /// there, not in its string matchers).
    pub(crate) fn validate(&self, field: &str, empty_prefix_ok: bool, r: &mut Report) {
        let set = [self.exact.is_some(), self.prefix.is_some(), self.regex.is_some()];
        if set.iter().filter(|s| **s).count() > 1 {
            r.error(field, "only one of exact, prefix or regex may be set");
        }
        if !empty_prefix_ok && self.prefix.as_deref() == Some("") {
            r.error(format!("{field}.prefix"), "a prefix match must not be empty");
        }
        match self.regex.as_deref() {
            Some("") => r.error(format!("{field}.regex"), "a regex match must not be empty"),
            Some(re) => validate::regex(re, &format!("{field}.regex"), r),
            None => {}
        }
    }
}

/// Istio's `Percent` (a double in 0..100).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Percent {
    /// The percentage.
    pub value: f64,
}
