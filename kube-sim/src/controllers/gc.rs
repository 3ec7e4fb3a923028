//! The garbage collector: dependents (objects whose `metadata.ownerReferences` name an owner by uid) are
//! deleted once every owner is gone (background), deleted before their owner (foreground, the
//! `foregroundDeletion` finalizer) or released from it (orphan, the `orphan` finalizer).
//!
//! Unlike kube-controller-manager's collector, this one runs synchronously after each delete, so a
//! cascade is complete when the request that started it returns.

use std::sync::Arc;

use serde_json::Value;

use super::{Queue, Work};
use crate::delete::{self, FOREGROUND, ORPHAN, Propagation};
use crate::error::Error;
use crate::kinds::{self, Kind};
use crate::object::{Key, Obj};
use crate::store::Txn;

/// How a dependent's owner reference resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// Exists and is not waiting for its dependents: the dependent stays.
    Solid,
    /// Gone, or replaced by an object with another uid.
    Dangling,
    /// Being deleted in the foreground: waits for its dependents.
    Waiting,
}

fn refs(obj: &Value) -> &[Value] {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn deleting(obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null()
}

/// The owner an owner reference names (namespaced owners live in the dependent's namespace); `None` when
/// the reference cannot be resolved (unknown kind, namespaced owner of a cluster-scoped dependent).
fn owner_of(txn: &Txn<'_>, dependent_ns: &str, r: &Value) -> Option<(&'static Kind, Option<Arc<Obj>>)> {
    let kind = txn
        .kinds()
        .by_type(r["apiVersion"].as_str()?, r["kind"].as_str()?)?;
    let ns = match (kind.namespaced, dependent_ns) {
        (true, "") => return None,
        (true, ns) => ns,
        (false, _) => "",
    };
    let key = (ns.to_string(), r["name"].as_str()?.to_string());
    Some((kind, txn.get(kind.id(), &key).cloned()))
}

fn classify(txn: &Txn<'_>, dependent_ns: &str, r: &Value) -> Owner {
    match owner_of(txn, dependent_ns, r) {
        None => Owner::Solid,
        Some((_, None)) => Owner::Dangling,
        Some((_, Some(owner))) if r["uid"] != owner.uid.as_str() => Owner::Dangling,
        Some((_, Some(owner))) => {
            let v = owner.value();
            if deleting(&v) && delete::finalizers(&v).iter().any(|f| f == FOREGROUND) {
                Owner::Waiting
            } else {
                Owner::Solid
            }
        }
    }
}

/// Rewrites a dependent without its references to `uids`.
fn drop_refs(txn: &mut Txn<'_>, kind: &'static Kind, dep: &Obj, uids: &[String]) -> Result<(), Error> {
    let mut v = dep.value();
    let kept: Vec<Value> = refs(&v)
        .iter()
        .filter(|r| !uids.iter().any(|u| r["uid"] == u.as_str()))
        .cloned()
        .collect();
    if let Some(meta) = v["metadata"].as_object_mut() {
        if kept.is_empty() {
            meta.remove("ownerReferences");
        } else {
            meta.insert("ownerReferences".into(), Value::Array(kept));
        }
    }
    txn.put(kind.id(), v).map(|_| ())
}

/// The collector's `attemptToDeleteItem` for one dependent.
fn attempt_to_delete(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    key: &Key,
    queue: &mut Queue,
) -> Result<(), Error> {
    let Some(dep) = txn.get(kind.id(), key).cloned() else {
        return Ok(());
    };
    let v = dep.value();
    if deleting(&v) || refs(&v).is_empty() {
        return Ok(());
    }
    let states: Vec<(String, Owner)> = refs(&v)
        .iter()
        .map(|r| {
            (
                r["uid"].as_str().unwrap_or_default().to_string(),
                classify(txn, &key.0, r),
            )
        })
        .collect();
    if states.iter().any(|(_, s)| *s == Owner::Solid) {
        // Kept by a live owner; references to owners that are gone or waiting are dropped.
        let stale: Vec<String> = states
            .into_iter()
            .filter(|(_, s)| *s != Owner::Solid)
            .map(|(u, _)| u)
            .collect();
        return if stale.is_empty() {
            Ok(())
        } else {
            drop_refs(txn, kind, &dep, &stale)
        };
    }
    let waiting = states.iter().any(|(_, s)| *s == Owner::Waiting);
    let own = txn.dependents(&dep.uid);
    if !waiting || own.is_empty() {
        return delete::request(txn, kind, &dep, None, false, queue).map(|_| ());
    }
    // Its owner waits for it and it has dependents: deleted in the foreground too. One of its own dependents
    // already waiting the same way would be a cycle: its references stop blocking, as the collector does.
    let cycle = own.iter().any(|(dk, dkey)| {
        txn.get(*dk, dkey).is_some_and(|d| {
            let v = d.value();
            deleting(&v) && delete::finalizers(&v).iter().any(|f| f == FOREGROUND)
        })
    });
    let dep = if cycle { unblock(txn, kind, &dep)? } else { dep };
    delete::request(txn, kind, &dep, Some(Propagation::Foreground), false, queue).map(|_| ())
}

/// Rewrites a dependent with `blockOwnerDeletion: false` on each owner reference.
fn unblock(txn: &mut Txn<'_>, kind: &'static Kind, dep: &Obj) -> Result<Arc<Obj>, Error> {
    let mut v = dep.value();
    if let Some(refs) = v["metadata"]["ownerReferences"].as_array_mut() {
        for r in refs.iter_mut().filter(|r| r["blockOwnerDeletion"] == true) {
            r["blockOwnerDeletion"] = Value::Bool(false);
        }
    }
    txn.put(kind.id(), v)
}

/// An object is gone: its dependents are collected, and owners waiting on it in the foreground re-checked.
pub(super) fn removed(
    txn: &mut Txn<'_>,
    _kind: &'static Kind,
    obj: &Obj,
    queue: &mut Queue,
) -> Result<(), Error> {
    for (dk, dkey) in txn.dependents(&obj.uid) {
        attempt_to_delete(txn, kinds::by_id(dk), &dkey, queue)?;
    }
    if obj.owners.is_empty() {
        return Ok(());
    }
    for r in refs(&obj.value()) {
        if let Some((okind, Some(owner))) = owner_of(txn, &obj.key.0, r)
            && r["uid"] == owner.uid.as_str()
            && classify(txn, &obj.key.0, r) == Owner::Waiting
        {
            queue.push_back(Work::Marked(okind, owner.key.clone()));
        }
    }
    Ok(())
}

/// An object marked for deletion: the `orphan` and `foregroundDeletion` finalizers are carried out, and the
/// object removed once no finalizer is left.
pub(super) fn marked(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    key: &Key,
    queue: &mut Queue,
) -> Result<(), Error> {
    let Some(owner) = txn.get(kind.id(), key).cloned() else {
        return Ok(());
    };
    let mut v = owner.value();
    if !deleting(&v) {
        return Ok(());
    }
    let before = delete::finalizers(&v);
    let mut finalizers = before.clone();
    if finalizers.iter().any(|f| f == ORPHAN) {
        for (dk, dkey) in txn.dependents(&owner.uid) {
            if let Some(dep) = txn.get(dk, &dkey).cloned() {
                drop_refs(txn, kinds::by_id(dk), &dep, std::slice::from_ref(&owner.uid))?;
            }
        }
        finalizers.retain(|f| f != ORPHAN);
    }
    if finalizers.iter().any(|f| f == FOREGROUND) {
        for (dk, dkey) in txn.dependents(&owner.uid) {
            attempt_to_delete(txn, kinds::by_id(dk), &dkey, queue)?;
        }
        let blocked = txn.dependents(&owner.uid).iter().any(|(dk, dkey)| {
            txn.get(*dk, dkey).is_some_and(|dep| {
                refs(&dep.value())
                    .iter()
                    .any(|r| r["uid"] == owner.uid.as_str() && r["blockOwnerDeletion"] == true)
            })
        });
        if !blocked {
            finalizers.retain(|f| f != FOREGROUND);
        }
    }
    if finalizers == before {
        return Ok(());
    }
    if finalizers.is_empty() && delete::spec_finalizers(&v).is_empty() {
        // As an update that empties the finalizers: the object goes, its DELETED event shows the last state.
        return delete::remove(txn, kind, key, queue);
    }
    delete::set_finalizers(&mut v, finalizers);
    txn.put(kind.id(), v).map(|_| ())
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
