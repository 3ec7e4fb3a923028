//! Namespace lifecycle: the `kubernetes` finalizer, the namespace controller that empties a terminating
//! namespace before it goes (so its DELETED event comes after its contents'), and the NamespaceLifecycle
//! admission plugin (no new content in a terminating namespace; the system namespaces stay).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Queue, namespace_kind};
use crate::delete::{self, Propagation};
use crate::error::Error;
use crate::kinds::{self, Handling, KINDS, Kind};
use crate::object::{now_secs, rfc3339};
use crate::store::Txn;

/// The finalizer the namespace controller owns (`spec.finalizers`, not `metadata.finalizers`).
const KUBERNETES: &str = "kubernetes";
const TERMINATING: &str = "Terminating";
/// NamespaceLifecycle's immortal namespaces.
const IMMORTAL: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The namespace strategy: created with the `kubernetes` finalizer; only the finalize subresource changes
/// `spec.finalizers`, so an update keeps them.
pub(super) fn spec_finalizers(obj: &mut Value, prev: Option<&Value>) {
    let finalizers = match prev {
        Some(prev) => delete::spec_finalizers(prev),
        None => {
            let mut have = delete::spec_finalizers(obj);
            if !have.iter().any(|f| f == KUBERNETES) {
                have.push(KUBERNETES.into());
            }
            have
        }
    };
    set_spec_finalizers(obj, finalizers);
}

fn set_spec_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    if let Some(spec) = obj["spec"].as_object_mut() {
        if finalizers.is_empty() {
            spec.remove("finalizers");
        } else {
            spec.insert("finalizers".into(), json!(finalizers));
        }
    }
}

/// No new objects in a terminating namespace.
pub(super) fn admit_create(txn: &Txn<'_>, kind: &Kind, ns: &str, obj: &Value) -> Result<(), Error> {
    let terminating = txn
        .get(namespace_kind(), &(String::new(), ns.to_string()))
        .is_some_and(|n| n.value()["status"]["phase"] == TERMINATING);
    if !terminating {
        return Ok(());
    }
    Err(Error::Denied {
        resource: kind.qualified_plural(),
        name: obj["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        detail: format!("unable to create new content in namespace {ns} because it is being terminated"),
        causes: vec![json!({
            "reason": "NamespaceTerminating",
            "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace",
        })],
    })
}

pub(super) fn admit_delete(name: &str) -> Result<(), Error> {
    if IMMORTAL.contains(&name) {
        return Err(Error::Denied {
            resource: "namespaces".into(),
            name: name.to_string(),
            detail: "this namespace may not be deleted".into(),
            causes: Vec::new(),
        });
    }
    Ok(())
}

/// Every stored namespaced kind, one per table: the built-in ones and the custom resources' storage versions.
fn stored_namespaced(txn: &Txn<'_>) -> Vec<&'static Kind> {
    let custom = txn.kinds();
    KINDS
        .iter()
        .chain(custom.storage_kinds())
        .filter(|k| k.namespaced && k.handling == Handling::Stored)
        .collect()
}

/// The namespace controller: deletes everything in a terminating namespace; once nothing is left it
/// removes its `kubernetes` finalizer and deletes the namespace.
pub(super) fn finalize(txn: &mut Txn<'_>, name: &str, queue: &mut Queue) -> Result<(), Error> {
    let ns_kind = kinds::by_id(namespace_kind());
    let key = (String::new(), name.to_string());
    let Some(ns) = txn.get(ns_kind.id(), &key).cloned() else {
        return Ok(());
    };
    let mut v = ns.value();
    if v["metadata"]["deletionTimestamp"].is_null() {
        return Ok(());
    }
    let mut finalizers = delete::spec_finalizers(&v);
    if finalizers.iter().any(|f| f == KUBERNETES) {
        for kind in stored_namespaced(txn) {
            for k in txn.keys(kind.id(), name) {
                if let Some(obj) = txn.get(kind.id(), &k).cloned() {
                    delete::request(txn, kind, &obj, Some(Propagation::Background), false, queue)?;
                }
            }
        }
        if stored_namespaced(txn).iter().any(|k| txn.any_in(k.id(), name)) {
            // Content waiting on finalizers keeps the namespace terminating until it goes; its conditions say why.
            v["status"]["conditions"] = json!(conditions(txn, name, &ns.value()));
            if v != ns.value() {
                txn.put(ns_kind.id(), v)?;
            }
            return Ok(());
        }
        finalizers.retain(|f| f != KUBERNETES);
        set_spec_finalizers(&mut v, finalizers.clone());
        txn.put(ns_kind.id(), v)?;
    }
    if finalizers.is_empty()
        && let Some(ns) = txn.get(ns_kind.id(), &key).cloned()
    {
        delete::request(txn, ns_kind, &ns, None, false, queue)?;
    }
    Ok(())
}

/// The namespace deleter's status conditions while content remains (kept unchanged once reported, so
/// their transition times hold).
fn conditions(txn: &Txn<'_>, name: &str, ns: &Value) -> Vec<Value> {
    let mut resources = Vec::new();
    let mut finalizers: BTreeMap<String, usize> = BTreeMap::new();
    for kind in stored_namespaced(txn) {
        let keys = txn.keys(kind.id(), name);
        if keys.is_empty() {
            continue;
        }
        resources.push(format!(
            "{} has {} resource instances",
            kind.qualified_plural(),
            keys.len()
        ));
        for key in keys {
            let obj = txn.get(kind.id(), &key).map(|o| o.value()).unwrap_or_default();
            for f in delete::finalizers(&obj) {
                *finalizers.entry(f).or_default() += 1;
            }
        }
    }
    let remaining: Vec<String> = finalizers
        .iter()
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    let now = rfc3339(now_secs());
    let condition = |ctype: &str, status: &str, reason: &str, message: String| {
        let since = ns["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == ctype && c["status"] == status))
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone());
        json!({"type": ctype, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    };
    let mut out = vec![
        condition(
            "NamespaceDeletionDiscoveryFailure",
            "False",
            "ResourcesDiscovered",
            "All resources successfully discovered".into(),
        ),
        condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            "False",
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        condition(
            "NamespaceDeletionContentFailure",
            "False",
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        ),
        condition(
            "NamespaceContentRemaining",
            "True",
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", resources.join(", ")),
        ),
    ];
    out.push(if remaining.is_empty() {
        condition(
            "NamespaceFinalizersRemaining",
            "False",
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished".into(),
        )
    } else {
        condition(
            "NamespaceFinalizersRemaining",
            "True",
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                remaining.join(", ")
            ),
        )
    });
    out
}

/// The last object of a terminating namespace gone: the namespace controller finishes the namespace.
pub(super) fn content_removed(txn: &Txn<'_>, ns: &str, queue: &mut Queue) {
    let ns_kind = kinds::by_id(namespace_kind());
    let terminating = txn
        .get(ns_kind.id(), &(String::new(), ns.to_string()))
        .is_some_and(|n| n.value()["status"]["phase"] == TERMINATING);
    if terminating && !stored_namespaced(txn).iter().any(|k| txn.any_in(k.id(), ns)) {
        queue.push_back(super::Work::Marked(ns_kind, (String::new(), ns.to_string())));
    }
}

#[cfg(test)]
#[path = "namespaces_tests.rs"]
mod tests;
