//! The delete path as the real registry runs it: `DeleteOptions`, preconditions, finalizers and
//! `deletionTimestamp`, the garbage collector's orphan/foreground finalizers, and what a delete answers.
//!
//! Objects with finalizers are only marked (deletionTimestamp set) and removed once an update empties
//! their finalizers. The simulator's controllers (garbage collector, namespace controller) run
//! synchronously after each write, so cascades are complete when the request returns.

use std::sync::Arc;

use serde_json::{Value, json};

use super::controllers::{self, Queue, Work};
use super::error::Error;
use super::kinds::Kind;
use super::object::{Key, Obj, now_secs, rfc3339};
use super::selector::Filter;
use super::store::{Store, Txn};

pub(crate) const ORPHAN: &str = "orphan";
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// `DeleteOptions.preconditions`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) pre: Preconditions,
    pub(crate) dry_run: bool,
    pub(crate) propagation: Option<Propagation>,
    /// The legacy `orphanDependents: false`: a delete left pending answers 202 Accepted.
    pub(crate) orphan_dependents_false: bool,
}

impl DeleteOpts {
    /// Reads a `DeleteOptions` body (or the same fields given as query parameters).
    pub(crate) fn parse(options: &Value, dry_run: bool) -> Result<DeleteOpts, Error> {
        let pre = &options["preconditions"];
        let orphan = match &options["orphanDependents"] {
            Value::Bool(b) => Some(*b),
            Value::String(s) if s == "true" || s == "false" => Some(s == "true"),
            _ => None,
        };
        let policy = options["propagationPolicy"].as_str();
        let invalid =
            |detail: String| Error::invalid("DeleteOptions.meta.k8s.io", "", "propagationPolicy", detail);
        if let (Some(_), Some(p)) = (orphan, policy) {
            return Err(invalid(format!(
                "Invalid value: {p:?}: orphanDependents and deletionPropagation cannot be both set"
            )));
        }
        let propagation = match (policy, orphan) {
            (Some("Orphan"), _) | (None, Some(true)) => Some(Propagation::Orphan),
            (Some("Background"), _) | (None, Some(false)) => Some(Propagation::Background),
            (Some("Foreground"), _) => Some(Propagation::Foreground),
            (Some(other), _) => {
                return Err(invalid(format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                )));
            }
            (None, None) => None,
        };
        Ok(DeleteOpts {
            pre: Preconditions {
                uid: pre["uid"].as_str().map(str::to_string),
                resource_version: pre["resourceVersion"].as_str().map(str::to_string),
            },
            dry_run: dry_run
                || options["dryRun"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|v| v == "All")),
            propagation,
            orphan_dependents_false: orphan == Some(false),
        })
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Removed from the store; carries the last stored state.
    Removed(Arc<Obj>),
    /// Marked for deletion, waiting on finalizers; carries the marked object.
    Pending(Arc<Obj>),
}

impl Outcome {
    pub(crate) fn obj(&self) -> &Arc<Obj> {
        match self {
            Outcome::Removed(o) | Outcome::Pending(o) => o,
        }
    }
}

fn not_found(kind: &Kind, name: &str) -> Error {
    Error::NotFound {
        resource: kind.qualified_plural(),
        name: name.to_string(),
    }
}

fn conflict(kind: &Kind, name: &str, detail: String) -> Error {
    Error::Conflict {
        resource: kind.qualified_plural(),
        name: name.to_string(),
        detail,
    }
}

pub(crate) fn delete(
    store: &Store,
    kind: &'static Kind,
    key: &Key,
    opts: &DeleteOpts,
) -> Result<Outcome, Error> {
    store.write(|txn| {
        let current = txn.get(kind.id(), key).cloned().ok_or_else(|| not_found(kind, &key.1))?;
        if let Some(uid) = opts.pre.uid.as_deref().filter(|u| *u != current.uid) {
            let detail = format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", current.uid);
            return Err(conflict(kind, &key.1, detail));
        }
        if let Some(rv) = opts.pre.resource_version.as_deref().filter(|rv| *rv != current.rv.to_string()) {
            let detail = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                current.rv
            );
            return Err(conflict(kind, &key.1, detail));
        }
        controllers::admit_delete(kind, key)?;
        let mut queue = Queue::new();
        let outcome = request(txn, kind, &current, opts.propagation, opts.dry_run, &mut queue)?;
        controllers::settle(txn, queue)?;
        Ok(outcome)
    })
}

/// deletecollection: every matching object is deleted as by a single delete; the answer lists them.
pub(crate) fn delete_collection(
    store: &Store,
    kind: &'static Kind,
    filter: &Filter,
    opts: &DeleteOpts,
) -> Result<Vec<Arc<Obj>>, Error> {
    let page = store.list_page(kind.id(), filter, None, None, None)?;
    store.write(|txn| {
        let mut queue = Queue::new();
        let mut deleted = Vec::new();
        for listed in &page.items {
            let Some(current) = txn.get(kind.id(), &listed.key).cloned() else {
                continue;
            };
            if controllers::admit_delete(kind, &current.key).is_err() {
                continue;
            }
            request(txn, kind, &current, opts.propagation, opts.dry_run, &mut queue)?;
            deleted.push(current);
        }
        controllers::settle(txn, queue)?;
        Ok(deleted)
    })
}

/// The registry's delete of one object (also used by the controllers): removes it, or marks it when
/// finalizers remain, and queues the controllers' follow-up work.
pub(crate) fn request(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    current: &Arc<Obj>,
    propagation: Option<Propagation>,
    dry_run: bool,
    queue: &mut Queue,
) -> Result<Outcome, Error> {
    let mut obj = current.value();
    let deleting = !obj["metadata"]["deletionTimestamp"].is_null();
    if controllers::is_namespace(kind) {
        if !deleting {
            // The namespace registry: the first delete starts termination; the namespace controller finishes it.
            obj["status"]["phase"] = json!("Terminating");
            let finalizers = gc_finalizers(&obj, propagation);
            set_finalizers(&mut obj, finalizers);
            return mark(txn, kind, current, obj, dry_run, queue);
        }
        if !spec_finalizers(&obj).is_empty() {
            // Still being emptied: answered with the namespace as it is.
            return Ok(Outcome::Pending(current.clone()));
        }
    }
    let finalizers = gc_finalizers(&obj, propagation);
    if finalizers.is_empty() {
        if !dry_run {
            remove(txn, kind, &current.key, queue)?;
        }
        return Ok(Outcome::Removed(current.clone()));
    }
    set_finalizers(&mut obj, finalizers);
    mark(txn, kind, current, obj, dry_run, queue)
}

/// Stores `obj` marked for deletion (deletionTimestamp, grace period 0) unless it already is.
fn mark(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    current: &Arc<Obj>,
    mut obj: Value,
    dry_run: bool,
    queue: &mut Queue,
) -> Result<Outcome, Error> {
    let meta = &mut obj["metadata"];
    if meta["deletionTimestamp"].is_null() {
        meta["deletionTimestamp"] = json!(rfc3339(now_secs()));
    }
    if meta["deletionGracePeriodSeconds"].is_null() && !controllers::is_namespace(kind) {
        meta["deletionGracePeriodSeconds"] = json!(0);
    }
    if obj == current.value() {
        return Ok(Outcome::Pending(current.clone()));
    }
    if dry_run {
        return Obj::freeze(kind, &obj).map(|o| Outcome::Pending(Arc::new(o)));
    }
    let stored = txn.put(kind.id(), obj)?;
    queue.push_back(Work::Marked(kind, stored.key.clone()));
    Ok(Outcome::Pending(stored))
}

/// Removes an object and queues what its disappearance sets off.
pub(crate) fn remove(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    key: &Key,
    queue: &mut Queue,
) -> Result<(), Error> {
    if let Some(last) = txn.remove(kind.id(), key)? {
        queue.push_back(Work::Removed(kind, last));
    }
    Ok(())
}

/// `metadata.finalizers` after applying the propagation policy (the registry's
/// `deletionFinalizersForGarbageCollection`): no policy keeps what the object has.
fn gc_finalizers(obj: &Value, propagation: Option<Propagation>) -> Vec<String> {
    let mut finalizers = finalizers(obj);
    let (want, drop) = match propagation {
        None => return finalizers,
        Some(Propagation::Orphan) => (Some(ORPHAN), vec![FOREGROUND]),
        Some(Propagation::Foreground) => (Some(FOREGROUND), vec![ORPHAN]),
        Some(Propagation::Background) => (None, vec![ORPHAN, FOREGROUND]),
    };
    finalizers.retain(|f| !drop.contains(&f.as_str()));
    if let Some(want) = want.filter(|w| !finalizers.iter().any(|f| f == w)) {
        finalizers.push(want.to_string());
    }
    finalizers
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    strings(&obj["metadata"]["finalizers"])
}

/// A namespace's `spec.finalizers` (`kubernetes` until the namespace controller has emptied it).
pub(crate) fn spec_finalizers(obj: &Value) -> Vec<String> {
    strings(&obj["spec"]["finalizers"])
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

pub(crate) fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    if let Some(meta) = obj["metadata"].as_object_mut() {
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(finalizers));
        }
    }
}

/// The metadata rules of an update (the registry's `BeforeUpdate` and `ValidateObjectMetaUpdate`):
/// deletionTimestamp and deletionGracePeriodSeconds stay as the server set them, and an object being
/// deleted takes no new finalizers.
pub(crate) fn check_update(kind: &Kind, cur: &Value, new: &mut Value) -> Result<(), Error> {
    let name = cur["metadata"]["name"].as_str().unwrap_or_default();
    for field in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
        let (old, have) = (&cur["metadata"][field], &new["metadata"][field]);
        if !old.is_null() {
            new["metadata"][field] = old.clone();
        } else if !have.is_null() {
            return Err(Error::invalid(
                kind.kind,
                name,
                &format!("metadata.{field}"),
                format!("Invalid value: {have}: field is immutable"),
            ));
        }
    }
    if cur["metadata"]["deletionTimestamp"].is_null() {
        return Ok(());
    }
    let old = finalizers(cur);
    let added: Vec<String> = finalizers(new).into_iter().filter(|f| !old.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    let list = added
        .iter()
        .map(|f| format!("{f:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(Error::invalid(
        kind.kind,
        name,
        "metadata.finalizers",
        format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
        ),
    ))
}

/// An update that empties the finalizers of an object being deleted deletes it (the registry's
/// `shouldDeleteDuringUpdate`); the answer is the last stored state.
pub(crate) fn release(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    current: &Arc<Obj>,
    new: &Value,
    dry_run: bool,
) -> Result<Option<Arc<Obj>>, Error> {
    let cur = current.value();
    let released = !cur["metadata"]["deletionTimestamp"].is_null()
        && !finalizers(&cur).is_empty()
        && finalizers(new).is_empty()
        && spec_finalizers(new).is_empty();
    if !released {
        return Ok(None);
    }
    if !dry_run {
        let mut queue = Queue::new();
        remove(txn, kind, &current.key, &mut queue)?;
        controllers::settle(txn, queue)?;
    }
    Ok(Some(current.clone()))
}

/// A controller's delete (scale-down, superseded ReplicaSets, stale EndpointSlices): an API delete with
/// the default propagation, its cascade settled in the same transaction.
pub(crate) fn delete_in(txn: &mut Txn<'_>, kind: &'static Kind, key: &Key) -> Result<(), Error> {
    let Some(current) = txn.get(kind.id(), key).cloned() else {
        return Ok(());
    };
    let mut queue = Queue::new();
    request(txn, kind, &current, None, false, &mut queue)?;
    controllers::settle(txn, queue)
}

#[cfg(test)]
#[path = "delete_tests.rs"]
mod tests;
