//! The CustomResourceDefinition object itself: validation and defaulting on write, the status the
//! apiextensions controllers report (NamesAccepted, Established, acceptedNames, storedVersions), and the
//! kinds an established definition serves.

use serde_json::{Value, json};

use super::{Custom, PrinterColumn, VersionSpec, intern, table_id};
use crate::error::Error;
use crate::kinds::Kind;
use crate::object::{now_secs, rfc3339};
use crate::typed::{Errs, is_dns1123_label};

/// The finalizer that deletes a definition's objects before the definition goes.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Validation (apiextensions' `ValidateCustomResourceDefinition`, its common rules) and defaulting of
/// `spec.names`, `spec.conversion` and the finalizer, on create and update.
pub(crate) fn admit_definition(obj: &mut Value, prev: Option<&Value>) -> Result<(), Error> {
    let name = text(&obj["metadata"]["name"]).to_string();
    let spec = &obj["spec"];
    let (group, plural, kind) = (
        text(&spec["group"]).to_string(),
        text(&spec["names"]["plural"]).to_string(),
        text(&spec["names"]["kind"]).to_string(),
    );
    let (group, plural, kind) = (group.as_str(), plural.as_str(), kind.as_str());
    let mut errs = Errs::default();
    if name != format!("{plural}.{group}") {
        errs.invalid(
            "metadata.name",
            format!("{name:?}"),
            "must be spec.names.plural+\".\"+spec.group",
        );
    }
    if group.is_empty() {
        errs.required("spec.group", "");
    } else if !group.contains('.') {
        errs.invalid(
            "spec.group",
            format!("{group:?}"),
            "should be a domain with at least one dot",
        );
    }
    if plural.is_empty() {
        errs.required("spec.names.plural", "");
    } else if !is_dns1123_label(plural) {
        errs.invalid(
            "spec.names.plural",
            format!("{plural:?}"),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
        );
    }
    if kind.is_empty() {
        errs.required("spec.names.kind", "");
    }
    let scope = text(&spec["scope"]).to_string();
    let scope = scope.as_str();
    errs.one_of("spec.scope", scope, &["Cluster", "Namespaced"]);
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        errs.required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        );
    } else if versions.iter().filter(|v| v["storage"] == true).count() != 1 {
        errs.invalid(
            "spec.versions",
            "[]apiextensions.CustomResourceDefinitionVersion{...}",
            "must have exactly one version marked as storage version",
        );
    }
    for (i, v) in versions.iter().enumerate() {
        let vname = text(&v["name"]);
        if !is_dns1123_label(vname) {
            errs.invalid(
                format!("spec.versions[{i}].name"),
                format!("{vname:?}"),
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-'",
            );
        }
        let root = &v["schema"]["openAPIV3Schema"];
        if !root.is_object() {
            errs.required(
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "schemas are required",
            );
        } else if root["type"] != "object" {
            errs.push(
                format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                "Unsupported value: must be object at the root".to_string(),
            );
        }
    }
    // kube-apiserver names the shared `spec.validation` when every version has the same schema.
    let shared = versions.windows(2).all(|w| w[0]["schema"] == w[1]["schema"]);
    let mut found = Vec::new();
    for (i, v) in versions
        .iter()
        .enumerate()
        .take(if shared { 1 } else { versions.len() })
    {
        let base = if shared {
            "spec.validation.openAPIV3Schema".to_string()
        } else {
            format!("spec.versions[{i}].schema.openAPIV3Schema")
        };
        super::rules::definition_errors(&v["schema"]["openAPIV3Schema"], &base, &mut found);
    }
    for (field, detail) in found {
        errs.push(field, detail);
    }
    if let Some(prev) = prev {
        // The table's keys depend on the scope, and the objects on the group: both are fixed.
        if prev["spec"]["group"] != obj["spec"]["group"] {
            errs.invalid("spec.group", format!("{group:?}"), "field is immutable");
        }
        if prev["spec"]["scope"] != obj["spec"]["scope"] {
            errs.invalid("spec.scope", format!("{scope:?}"), "field is immutable");
        }
    }
    errs.into_result("CustomResourceDefinition.apiextensions.k8s.io", &name)?;
    let names = &mut obj["spec"]["names"];
    if names["singular"].as_str().is_none_or(str::is_empty) {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names["listKind"].as_str().is_none_or(str::is_empty) {
        names["listKind"] = json!(format!("{kind}List"));
    }
    if obj["spec"]["conversion"].is_null() {
        obj["spec"]["conversion"] = json!({"strategy": "None"});
    }
    if prev.is_none() {
        let meta = &mut obj["metadata"];
        let mut finalizers = strings(&meta["finalizers"]);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
        }
        meta["finalizers"] = json!(finalizers);
    }
    Ok(())
}

/// The first name of `crd` that clashes with another definition of the same group, as the naming
/// controller reports it: (reason, message).
fn conflict(crd: &Value, others: &[&Value]) -> Option<(&'static str, String)> {
    let names = &crd["spec"]["names"];
    let group = &crd["spec"]["group"];
    for other in others.iter().filter(|o| o["spec"]["group"] == *group) {
        if other["metadata"]["name"] == crd["metadata"]["name"] {
            continue;
        }
        let accepted = &other["status"]["acceptedNames"];
        for (field, reason) in [
            ("kind", "KindConflict"),
            ("listKind", "ListKindConflict"),
            ("singular", "SingularConflict"),
        ] {
            if names[field].as_str().is_some_and(|n| !n.is_empty()) && accepted[field] == names[field] {
                return Some((reason, format!("{:?} is already in use", text(&names[field]))));
            }
        }
        let theirs = strings(&accepted["shortNames"]);
        if let Some(s) = strings(&names["shortNames"]).iter().find(|s| theirs.contains(s)) {
            return Some(("ShortNamesConflict", format!("{s:?} is already in use")));
        }
    }
    None
}

/// The status the naming and establishing controllers write: acceptedNames, the NamesAccepted and
/// Established conditions (transition times kept while unchanged) and storedVersions.
pub(crate) fn definition_status(crd: &mut Value, others: &[&Value]) {
    let now = rfc3339(now_secs());
    let old = crd["status"].clone();
    let condition = |ctype: &str, status: &str, reason: &str, message: String| {
        let since = old["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == ctype && c["status"] == status))
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone());
        json!({"type": ctype, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    };
    let clash = conflict(crd, others);
    let mut conditions = Vec::new();
    match &clash {
        None => {
            conditions.push(condition(
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found".into(),
            ));
            conditions.push(condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted".into(),
            ));
        }
        Some((reason, why)) => {
            conditions.push(condition("NamesAccepted", "False", reason, why.clone()));
            conditions.push(condition(
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted".into(),
            ));
        }
    }
    if !crd["metadata"]["deletionTimestamp"].is_null() {
        conditions.push(condition(
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress".into(),
        ));
    }
    let mut stored = strings(&old["storedVersions"]);
    let storage = crd["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .map(|v| text(&v["name"]).to_string());
    if let Some(s) = storage.filter(|s| !stored.contains(s)) {
        stored.push(s);
    }
    let accepted = if clash.is_none() {
        crd["spec"]["names"].clone()
    } else {
        old["acceptedNames"].clone()
    };
    crd["status"] = json!({
        "acceptedNames": if accepted.is_null() { json!({"kind": "", "plural": ""}) } else { accepted },
        "conditions": conditions,
        "storedVersions": stored,
    });
}

#[cfg(test)]
#[path = "definition_tests.rs"]
mod tests;

fn established(crd: &Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

fn columns(version: &Value) -> Vec<PrinterColumn> {
    version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| PrinterColumn {
            name: text(&c["name"]).to_string(),
            kind: text(&c["type"]).to_string(),
            format: text(&c["format"]).to_string(),
            description: text(&c["description"]).to_string(),
            priority: c["priority"].as_u64().unwrap_or_default().min(1) as u8,
            json_path: text(&c["jsonPath"]).to_string(),
        })
        .collect()
}

/// The kinds an established definition serves, one per served version (none otherwise).
pub(crate) fn kinds_of(crd: &Value) -> Vec<&'static Kind> {
    if !established(crd) {
        return Vec::new();
    }
    let spec = &crd["spec"];
    let names = &crd["status"]["acceptedNames"];
    let group = text(&spec["group"]).to_string();
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let Some(storage) = versions.iter().find(|v| v["storage"] == true) else {
        return Vec::new();
    };
    let storage = format!("{group}/{}", text(&storage["name"]));
    let plural = text(&names["plural"]).to_string();
    let table = table_id(&format!("{plural}.{group}"));
    versions
        .iter()
        .filter(|v| v["served"] == true)
        .map(|v| {
            intern(VersionSpec {
                group: group.clone(),
                version: text(&v["name"]).to_string(),
                kind: text(&names["kind"]).to_string(),
                plural: plural.clone(),
                singular: text(&names["singular"]).to_string(),
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                namespaced: spec["scope"] == "Namespaced",
                status: v["subresources"]["status"].is_object(),
                custom: Custom {
                    table,
                    definition: text(&crd["metadata"]["name"]).to_string(),
                    storage: storage.clone(),
                    schema: v["schema"]["openAPIV3Schema"].clone(),
                    columns: columns(v),
                },
            })
        })
        .collect()
}
