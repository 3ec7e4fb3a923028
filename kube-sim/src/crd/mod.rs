//! CustomResourceDefinitions: a stored CRD that is established adds one kind per served version to the
//! store's [`Registry`]; its objects live in one table (shared by the versions) under the storage version
//! and are read back under the version asked for (conversion strategy `None`).
//!
//! Kinds are `&'static` like the built-in table: each distinct (definition, version) is interned once
//! and leaked, so memory is bounded by the distinct definitions a process ever sees, and the static
//! path stays a plain pointer.

mod cel_lib;
mod cost;
mod definition;
mod registry;
mod rules;
mod schema;
mod values;

use std::collections::HashMap;
use std::sync::LazyLock;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, CRUD, KINDS, Kind, KindId};
use super::object::Obj;
use super::typed::{FieldCheck, FieldValidation};

pub(crate) use definition::{CLEANUP_FINALIZER, admit_definition, definition_status, kinds_of};
pub(crate) use registry::Registry;

/// An `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: u8,
    pub(crate) json_path: String,
}

/// What a served version of a custom resource adds to its [`Kind`].
#[derive(Debug)]
pub(crate) struct Custom {
    /// The store table of the resource (every version shares it).
    pub(crate) table: KindId,
    /// The CRD's name (`<plural>.<group>`).
    pub(crate) definition: String,
    /// The storage version's `apiVersion`.
    pub(crate) storage: String,
    /// The version's structural schema (`openAPIV3Schema`).
    pub(crate) schema: Value,
    /// NAME plus these; empty means the default NAME and AGE.
    pub(crate) columns: Vec<PrinterColumn>,
}

/// The CustomResourceDefinition kind of the built-in table.
pub(crate) fn definition_kind() -> &'static Kind {
    static KIND: LazyLock<&'static Kind> = LazyLock::new(|| {
        KINDS
            .iter()
            .find(|k| k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition")
            .unwrap_or(&KINDS[0])
    });
    &KIND
}

/// The CustomResourceDefinition table's id (the store checks it on every write).
pub(crate) fn definition_id() -> KindId {
    static ID: LazyLock<KindId> = LazyLock::new(|| definition_kind().id());
    *ID
}

pub(crate) fn is_definition(kind: &Kind) -> bool {
    std::ptr::eq(kind, definition_kind())
}

/// Custom resource tables by `plural.group`.
static TABLES: LazyLock<Mutex<HashMap<String, KindId>>> = LazyLock::new(Mutex::default);

/// The table id of `plural.group`: stable for the process, so a CRD updated or re-created keeps its table.
pub(crate) fn table_id(resource: &str) -> KindId {
    let mut tables = TABLES.lock();
    let next = KINDS.len() + tables.len();
    *tables.entry(resource.to_string()).or_insert(next)
}

/// The `plural.group` of a custom resource table (how the persisted store names it).
pub(crate) fn table_resource(id: KindId) -> Option<String> {
    TABLES
        .lock()
        .iter()
        .find(|(_, t)| **t == id)
        .map(|(r, _)| r.clone())
}

fn leak(s: &str) -> &'static str {
    static STRS: LazyLock<Mutex<HashMap<String, &'static str>>> = LazyLock::new(Mutex::default);
    let mut strs = STRS.lock();
    if let Some(s) = strs.get(s) {
        return s;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    strs.insert(s.to_string(), leaked);
    leaked
}

fn leak_list(list: &[String]) -> &'static [&'static str] {
    if list.is_empty() {
        return &[];
    }
    Box::leak(
        list.iter()
            .map(|s| leak(s))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    )
}

/// Everything that makes one served version's kind.
#[derive(Debug)]
pub(crate) struct VersionSpec {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) namespaced: bool,
    pub(crate) status: bool,
    pub(crate) custom: Custom,
}

/// The interned kind of `spec`: the same spec always yields the same `&'static Kind`.
pub(crate) fn intern(spec: VersionSpec) -> &'static Kind {
    static KINDS_SEEN: LazyLock<Mutex<HashMap<String, &'static Kind>>> = LazyLock::new(Mutex::default);
    let key = format!("{spec:?}");
    let mut seen = KINDS_SEEN.lock();
    if let Some(k) = seen.get(&key) {
        return k;
    }
    let custom: &'static Custom = Box::leak(Box::new(spec.custom));
    let kind: &'static Kind = Box::leak(Box::new(Kind {
        group: leak(&spec.group),
        version: leak(&spec.version),
        kind: leak(&spec.kind),
        plural: leak(&spec.plural),
        singular: leak(&spec.singular),
        short_names: leak_list(&spec.short_names),
        namespaced: spec.namespaced,
        verbs: CRUD,
        status: spec.status,
        names: kinds::NameRule::Subdomain,
        categories: leak_list(&spec.categories),
        printer: &super::table::DEFAULT,
        fields: &super::fields::META,
        subresources: &[],
        handling: kinds::Handling::Stored,
        returns_deleted: true,
        custom: Some(custom),
    }));
    seen.insert(key, kind);
    kind
}

/// Sets `apiVersion` to the version `kind` serves (custom kinds only; no other conversion: strategy `None`).
pub(crate) fn as_version(kind: &Kind, obj: &mut Value) {
    if kind.custom.is_some() && obj.is_object() {
        obj["apiVersion"] = json!(kind.api_version());
    }
}

/// Sets `apiVersion` to the storage version before a custom object is stored.
pub(crate) fn to_storage(kind: &Kind, obj: &mut Value) {
    if let Some(c) = kind.custom
        && obj.is_object()
    {
        obj["apiVersion"] = json!(c.storage);
    }
}

/// A stored custom object as served under `kind`'s version, when that differs from how it is stored.
pub(crate) fn served(kind: &Kind, obj: &Obj) -> Option<Obj> {
    kind.custom?;
    let want = kind.api_version();
    // `kind` and `apiVersion` lead the serialized object, so its first bytes tell without parsing.
    let text = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let head = format!("{{\"kind\":{},\"apiVersion\":{}", text(kind.kind), text(&want));
    if obj.raw.starts_with(head.as_bytes()) {
        return None;
    }
    let mut v = obj.value();
    v["apiVersion"] = json!(want);
    Obj::freeze(kind, &v).ok()
}

/// Admission of a custom object against its version's structural schema: unknown fields are pruned
/// (or refused / warned about per `fieldValidation`); what the schema's validations and CEL rules
/// refuse is 422, listed after `bad_name` (the name check's error, which kube-apiserver reports with them).
pub(crate) fn admit(
    kind: &Kind,
    obj: &mut Value,
    fields: &FieldCheck,
    bad_name: Option<Error>,
) -> Result<(), Error> {
    let Some(custom) = kind.custom else {
        return bad_name.map_or(Ok(()), Err);
    };
    let outcome = schema::check(&custom.schema, obj);
    if fields.mode != FieldValidation::Ignore {
        let unknown = outcome
            .unknown
            .iter()
            .map(|p| format!("unknown field {p:?}"))
            .collect();
        fields.report(kind, unknown)?;
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut errors = match bad_name {
        Some(Error::Invalid { causes, .. }) => causes,
        Some(other) => return Err(other),
        None => Vec::new(),
    };
    errors.extend(outcome.errors);
    // kube-apiserver runs the CEL rules only on an object the schema found no blocking error in.
    if rules::has_rules(&custom.schema) {
        if outcome.blocked {
            errors.push((
                "<nil>".into(),
                "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
            ));
        } else {
            rules::run(&custom.schema, obj, &mut errors);
        }
    }
    let mut errs = super::typed::Errs::default();
    for (field, detail) in errors {
        errs.push(field, detail);
    }
    errs.into_result(&format!("{}.{}", kind.kind, kind.group), &name)
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod schema_tests;
