//! Write rules shared by the API and manifest loading: body checks, server-set metadata, status semantics,
//! preconditions and no-op detection.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use rand::Rng;
use serde_json::{Map, Value, json};

use super::controllers;
use super::crd;
use super::delete;
use super::error::Error;
use super::kinds::{self, Kind};
use super::object::{Key, Obj, now_secs, rfc3339, validate_name};
use super::ssa::{self, Writer};
use super::store::{Store, Txn};
use super::typed::{self, FieldCheck};

/// Who owns `status` in a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusMode {
    /// The main resource via the API: status in the body is ignored (kept on update, initialised on create).
    Ignore,
    /// The `/status` subresource: only status changes.
    Only,
    /// Manifest loading: the body is taken whole.
    Keep,
    /// The scheduler's binding (a real server's `pods/binding`): taken whole like `Keep`, but the
    /// update rules that forbid clients to set `spec.nodeName` do not apply.
    Bind,
}

/// How a write records field ownership in `metadata.managedFields`.
#[derive(Debug, Clone)]
pub(crate) enum Track {
    /// Not recorded (manifest loading, controllers): an update keeps the managedFields it finds.
    None,
    /// A create, update or non-apply patch by this writer.
    Update(Writer),
    /// Server-side apply: the body already carries the managedFields [`ssa::apply`] computed.
    Applied,
}

#[derive(Debug, Clone)]
pub(crate) struct WriteOpts {
    pub(crate) dry_run: bool,
    pub(crate) status: StatusMode,
    pub(crate) track: Track,
    /// `fieldValidation`, and the warnings it produced.
    pub(crate) fields: FieldCheck,
}

fn not_found(kind: &Kind, name: &str) -> Error {
    Error::NotFound {
        resource: kind.qualified_plural(),
        name: name.to_string(),
    }
}

fn conflict(kind: &Kind, name: &str, detail: impl Into<String>) -> Error {
    Error::Conflict {
        resource: kind.qualified_plural(),
        name: name.to_string(),
        detail: detail.into(),
    }
}

pub(crate) fn create(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    body: Value,
    opts: &WriteOpts,
) -> Result<Arc<Obj>, Error> {
    store.write(|txn| create_in(txn, kind, ns, body, opts))
}

/// Creates inside an open transaction (also used by controllers for follow-up objects).
pub(crate) fn create_in(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    ns: &str,
    body: Value,
    opts: &WriteOpts,
) -> Result<Arc<Obj>, Error> {
    let mut obj = normalize(kind, ns, body)?;
    let meta = &mut obj["metadata"];
    let name = match (meta["name"].as_str(), meta["generateName"].as_str()) {
        (Some(n), _) if !n.is_empty() => n.to_string(),
        (_, Some(prefix)) if !prefix.is_empty() => generate_name(prefix),
        _ => {
            return Err(Error::invalid(
                kind.kind,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
    };
    // A custom object's bad name is reported with what its schema finds, as kube-apiserver does.
    let bad_name = match validate_name(kind, &name) {
        Err(e) if kind.custom.is_some() => Some(e),
        Err(e) => return Err(e),
        Ok(()) => None,
    };
    let key = (
        if kind.namespaced {
            ns.to_string()
        } else {
            String::new()
        },
        name.clone(),
    );
    if txn.get(kind.id(), &key).is_some() {
        return Err(Error::AlreadyExists {
            resource: kind.qualified_plural(),
            name,
        });
    }
    if kind.namespaced
        && txn
            .get(controllers::namespace_kind(), &(String::new(), ns.to_string()))
            .is_none()
    {
        return Err(Error::NotFound {
            resource: "namespaces".into(),
            name: ns.to_string(),
        });
    }
    controllers::admit_create(txn, kind, ns, &mut obj)?;
    let meta = obj["metadata"]
        .as_object_mut()
        .ok_or_else(|| Error::Internal("metadata vanished".into()))?;
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(rfc3339(now_secs())));
    for server_owned in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(server_owned);
    }
    if matches!(opts.track, Track::None) {
        meta.remove("managedFields");
    }
    if kind.status || kind.custom.is_some() {
        meta.insert("generation".into(), json!(1));
    }
    // A custom resource without a status subresource takes `status` like any other field.
    let status_free = kind.custom.is_some() && !kind.status;
    if !status_free && (opts.status != StatusMode::Keep || obj.get("status").is_none()) {
        controllers::initial_status(kind, &mut obj);
    }
    typed::admit(kind, &mut obj, None, &opts.fields)?;
    crd::admit(kind, &mut obj, &opts.fields, bad_name)?;
    if let Track::Update(writer) = &opts.track {
        ssa::track_update(kind, None, &mut obj, writer);
    }
    controllers::defaults(txn, kind, &mut obj, None)?;
    controllers::admit(txn, kind, &mut obj);
    if opts.dry_run {
        return Obj::freeze(kind, &obj).map(Arc::new);
    }
    crd::to_storage(kind, &mut obj);
    let stored = txn.put(kind.id(), obj)?;
    controllers::after_create(txn, kind, &stored)?;
    Ok(stored)
}

/// Replaces an object with what `f` makes of its current state, enforcing the update rules.
pub(crate) fn update(
    store: &Store,
    kind: &'static Kind,
    key: &Key,
    opts: &WriteOpts,
    f: impl FnOnce(&Value) -> Result<Value, Error>,
) -> Result<Arc<Obj>, Error> {
    store.write(|txn| {
        let current = txn
            .get(kind.id(), key)
            .cloned()
            .ok_or_else(|| not_found(kind, &key.1))?;
        let mut view = current.value();
        crd::as_version(kind, &mut view);
        update_in(txn, kind, &current, f(&view)?, opts)
    })
}

/// Updates inside an open transaction (also used by controllers for follow-up writes).
pub(crate) fn update_in(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    current: &Arc<Obj>,
    body: Value,
    opts: &WriteOpts,
) -> Result<Arc<Obj>, Error> {
    let (ns, name) = &current.key;
    let mut cur = current.value();
    crd::as_version(kind, &mut cur);
    let mut new = normalize(kind, if kind.namespaced { ns } else { "" }, body)?;
    let applied_fields = new["metadata"].get("managedFields").cloned();
    match new["metadata"]["name"].as_str() {
        Some(n) if n == name => {}
        None | Some("") => new["metadata"]["name"] = json!(name),
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "the name of the object ({other}) does not match the name on the URL ({name})"
            )));
        }
    }
    match new["metadata"]["resourceVersion"].as_str() {
        Some(rv) if !rv.is_empty() && rv != current.rv.to_string() => {
            return Err(conflict(
                kind,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        _ => {}
    }
    match new["metadata"]["uid"].as_str() {
        Some(uid) if !uid.is_empty() && uid != current.uid => {
            return Err(conflict(
                kind,
                name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.uid
                ),
            ));
        }
        _ => {}
    }
    let status_free = kind.custom.is_some() && !kind.status;
    match opts.status {
        _ if status_free => {}
        StatusMode::Ignore => set_or_remove(&mut new, "status", cur.get("status")),
        StatusMode::Only => {
            let status = new.get("status").cloned();
            new = cur.clone();
            set_or_remove(&mut new, "status", status.as_ref());
        }
        StatusMode::Keep | StatusMode::Bind if new.get("status").is_none() => {
            set_or_remove(&mut new, "status", cur.get("status"))
        }
        StatusMode::Keep | StatusMode::Bind => {}
    }
    for kept in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
        set_or_remove(&mut new["metadata"], kept, cur["metadata"].get(kept));
    }
    let rules_from = (opts.status != StatusMode::Bind).then_some(&cur);
    typed::admit(kind, &mut new, rules_from, &opts.fields)?;
    crd::admit(kind, &mut new, &opts.fields, None)?;
    match &opts.track {
        Track::None => set_or_remove(
            &mut new["metadata"],
            "managedFields",
            cur["metadata"].get("managedFields"),
        ),
        Track::Update(writer) => ssa::track_update(kind, Some(&cur), &mut new, writer),
        Track::Applied => set_or_remove(&mut new["metadata"], "managedFields", applied_fields.as_ref()),
    }
    delete::check_update(kind, &cur, &mut new)?;
    if (kind.status || kind.custom.is_some()) && spec_of(&new) != spec_of(&cur) {
        let generation = cur["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        new["metadata"]["generation"] = json!(generation);
    }
    controllers::defaults(txn, kind, &mut new, Some(&cur))?;
    controllers::admit(txn, kind, &mut new);
    if new == cur || opts.dry_run {
        // An unchanged object is not rewritten: no new resourceVersion, no watch event.
        return if new == cur {
            Ok(current.clone())
        } else {
            Obj::freeze(kind, &new).map(Arc::new)
        };
    }
    if let Some(removed) = delete::release(txn, kind, current, &new, opts.dry_run)? {
        return Ok(removed);
    }
    crd::to_storage(kind, &mut new);
    let stored = txn.put(kind.id(), new)?;
    controllers::after_update(txn, kind, current, &stored)?;
    Ok(stored)
}

/// Store::apply: create-or-replace, creating the namespace implicitly so manifests load in any order.
pub(crate) fn apply(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    mut body: Value,
    opts: &WriteOpts,
) -> Result<Arc<Obj>, Error> {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("uid");
    }
    store.write(|txn| {
        let ns_kind = kinds::by_id(controllers::namespace_kind());
        if kind.namespaced && txn.get(ns_kind.id(), &(String::new(), ns.to_string())).is_none() {
            create_in(txn, ns_kind, "", json!({"metadata": {"name": ns}}), opts)?;
        }
        let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = (
            if kind.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name,
        );
        match txn.get(kind.id(), &key).cloned() {
            Some(current) => update_in(txn, kind, &current, body, opts),
            None => create_in(txn, kind, ns, body, opts),
        }
    })
}

/// Checks a request body against the kind and namespace it was sent to, and applies API conversions.
pub(crate) fn normalize(kind: &Kind, ns: &str, body: Value) -> Result<Value, Error> {
    let Value::Object(mut obj) = body else {
        return Err(Error::BadRequest(
            "the request body must be a JSON or YAML object".into(),
        ));
    };
    let name = obj
        .get("metadata")
        .and_then(|m| m["name"].as_str())
        .unwrap_or_default()
        .to_string();
    for (field, want) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind.to_string()),
    ] {
        match obj.get(field) {
            None | Some(Value::Null) => {
                obj.insert(field.into(), json!(want));
            }
            Some(Value::String(have)) if *have == want => {}
            Some(have) => {
                return Err(Error::invalid(
                    kind.kind,
                    &name,
                    field,
                    format!("Invalid value: {have}: must be {want:?} for this endpoint"),
                ));
            }
        }
    }
    let meta = obj.entry("metadata").or_insert_with(|| json!({}));
    let Value::Object(meta) = meta else {
        return Err(Error::invalid(
            kind.kind,
            &name,
            "metadata",
            "Invalid value: must be an object",
        ));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        _ if !kind.namespaced => {
            meta.remove("namespace");
        }
        Some(have) if !have.is_empty() && have != ns => {
            return Err(Error::invalid(
                kind.kind,
                &name,
                "metadata.namespace",
                format!(
                    "Invalid value: {have:?}: the namespace of the object does not match the namespace on the request ({ns})"
                ),
            ));
        }
        _ => {
            meta.insert("namespace".into(), json!(ns));
        }
    }
    // Go's omitempty: an empty or null map is not serialized. Other shapes are for typed decoding to refuse.
    for map in ["labels", "annotations"] {
        if meta
            .get(map)
            .is_some_and(|m| m.is_null() || m.as_object().is_some_and(Map::is_empty))
        {
            meta.remove(map);
        }
    }
    if kind.kind == "Secret" && kind.group.is_empty() {
        secret_data(&mut obj, &name)?;
    }
    Ok(Value::Object(obj))
}

/// Folds `stringData` into base64 `data` and checks `data` is base64, as the Secret strategy does.
fn secret_data(obj: &mut Map<String, Value>, name: &str) -> Result<(), Error> {
    let string_data = obj.remove("stringData");
    let data = obj.entry("data").or_insert_with(|| json!({}));
    let Value::Object(data) = data else {
        return Err(Error::invalid(
            "Secret",
            name,
            "data",
            "Invalid value: must be a map",
        ));
    };
    for (k, v) in data.iter() {
        if v.as_str().is_none_or(|s| B64.decode(s).is_err()) {
            return Err(Error::invalid(
                "Secret",
                name,
                &format!("data[{k}]"),
                "Invalid value: must be base64-encoded bytes",
            ));
        }
    }
    if let Some(Value::Object(sd)) = string_data {
        for (k, v) in sd {
            data.insert(k, json!(B64.encode(v.as_str().unwrap_or_default())));
        }
    }
    if data.is_empty() {
        obj.remove("data");
    }
    Ok(())
}

/// Everything except metadata and status: a change here bumps `metadata.generation`.
fn spec_of(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !["metadata", "status"].contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn set_or_remove(obj: &mut Value, field: &str, value: Option<&Value>) {
    match (obj.as_object_mut(), value) {
        (Some(o), Some(v)) => {
            o.insert(field.into(), v.clone());
        }
        (Some(o), None) => {
            o.remove(field);
        }
        (None, _) => {}
    }
}

/// `generateName` plus five characters from the real server's alphabet (no vowels, no confusables).
fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}
