//! The apiextensions controllers for CustomResourceDefinitions: the naming and establishing controllers
//! (run on every write of a definition) and the finalizer that deletes a definition's objects first.

use serde_json::Value;

use super::{Queue, StatusMode, Work, controller_opts};
use crate::crd::{self, CLEANUP_FINALIZER};
use crate::delete::{self, Propagation};
use crate::error::Error;
use crate::kinds::Kind;
use crate::store::Txn;
use crate::write;

/// Validates and defaults a definition, then sets its status against the other stored definitions.
pub(super) fn admit(txn: &Txn<'_>, obj: &mut Value, prev: Option<&Value>) -> Result<(), Error> {
    crd::admit_definition(obj, prev)?;
    let others: Vec<Value> = txn
        .objects(crd::definition_kind().id())
        .map(|o| o.value())
        .collect();
    let others: Vec<&Value> = others.iter().collect();
    crd::definition_status(obj, &others);
    Ok(())
}

/// A definition being deleted: its objects are deleted; once none is left the cleanup finalizer is
/// removed, which removes the definition.
pub(super) fn finalize(txn: &mut Txn<'_>, name: &str, queue: &mut Queue) -> Result<(), Error> {
    let def = crd::definition_kind();
    let key = (String::new(), name.to_string());
    let Some(current) = txn.get(def.id(), &key).cloned() else {
        return Ok(());
    };
    let v = current.value();
    let finalizers = delete::finalizers(&v);
    if v["metadata"]["deletionTimestamp"].is_null() || !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
        return Ok(());
    }
    let kinds = txn.kinds();
    let storage = kinds
        .storage_kinds()
        .find(|k| k.custom.is_some_and(|c| c.definition == name));
    if let Some(kind) = storage {
        let objs: Vec<_> = txn.objects(kind.id()).cloned().collect();
        for obj in &objs {
            delete::request(txn, kind, obj, Some(Propagation::Background), false, queue)?;
        }
        if txn.objects(kind.id()).next().is_some() {
            // Objects held by their own finalizers keep the definition terminating until they go.
            return Ok(());
        }
    }
    let mut released = v;
    let rest: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    delete::set_finalizers(&mut released, rest);
    write::update_in(txn, def, &current, released, &controller_opts(StatusMode::Keep))?;
    Ok(())
}

/// The last object of a terminating definition gone: the finalizer finishes the definition.
pub(super) fn content_removed(txn: &Txn<'_>, kind: &'static Kind, queue: &mut Queue) {
    let Some(custom) = kind.custom else {
        return;
    };
    let def = crd::definition_kind();
    let key = (String::new(), custom.definition.clone());
    let terminating = txn
        .get(def.id(), &key)
        .is_some_and(|d| !d.value()["metadata"]["deletionTimestamp"].is_null());
    if terminating && txn.objects(kind.id()).next().is_none() {
        queue.push_back(Work::Marked(def, key));
    }
}
