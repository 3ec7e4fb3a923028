//! The built-in controllers clients rely on (namespace defaults, service-account tokens, deletion cascades,
//! ClusterRole aggregation), run synchronously inside the write transaction so their effects are atomic
//! and deterministic.

mod aggregation;
mod bootstrap_policy;
mod service_ips;
mod tokens;

pub(crate) use bootstrap_policy::bootstrap as bootstrap_rbac;

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, KINDS, Kind, KindId};
use super::object::Obj;
use super::store::Txn;
use super::typed::{FieldCheck, FieldValidation};
use super::write::{self, StatusMode, Track, WriteOpts};

pub(crate) const SA_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
pub(crate) const SA_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";

fn core_kind(kind: &str) -> KindId {
    kinds::by_type("v1", kind).map(Kind::id).unwrap_or_default()
}

pub(crate) fn namespace_kind() -> KindId {
    core_kind("Namespace")
}

pub(crate) fn service_account_kind() -> KindId {
    core_kind("ServiceAccount")
}

pub(crate) fn secret_kind() -> KindId {
    core_kind("Secret")
}

fn is_core(kind: &Kind, name: &str) -> bool {
    kind.group.is_empty() && kind.kind == name
}

/// The status a freshly created object starts with.
pub(crate) fn initial_status(kind: &Kind, obj: &mut Value) {
    let status = match kind.kind {
        "Namespace" if kind.group.is_empty() => Some(json!({"phase": "Active"})),
        "Pod" if kind.group.is_empty() => Some(json!({"phase": "Pending"})),
        "Service" if kind.group.is_empty() => Some(json!({"loadBalancer": {}})),
        _ => None,
    };
    if let (Some(status), Some(o)) = (status, obj.as_object_mut()) {
        o.insert("status".into(), status);
    } else if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}

/// Defaulting and allocation the real server does on write.
pub(crate) fn defaults(
    txn: &Txn<'_>,
    kind: &Kind,
    obj: &mut Value,
    prev: Option<&Value>,
) -> Result<(), Error> {
    if is_core(kind, "Service") {
        service_ips::allocate(txn, obj, prev)?;
    }
    Ok(())
}

/// Mutating admission: fills what controllers add to an object before it is stored.
pub(crate) fn admit(txn: &Txn<'_>, kind: &Kind, obj: &mut Value) {
    if is_core(kind, "Secret") {
        tokens::fill(txn, obj);
    }
}

/// After an update: aggregated ClusterRoles follow the roles they gather.
pub(crate) fn after_update(txn: &mut Txn<'_>, kind: &'static Kind) -> Result<(), Error> {
    if aggregation::is_cluster_role(kind) {
        aggregation::reconcile(txn)?;
    }
    Ok(())
}

/// Every namespace gets a `default` ServiceAccount; aggregated ClusterRoles follow new roles.
pub(crate) fn after_create(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if aggregation::is_cluster_role(kind) {
        aggregation::reconcile(txn)?;
    }
    if is_core(kind, "Namespace") {
        let ns = obj.key.1.clone();
        let sa = kinds::by_id(service_account_kind());
        if txn.get(sa.id(), &(ns.clone(), "default".into())).is_none() {
            let opts = WriteOpts {
                dry_run: false,
                status: StatusMode::Ignore,
                track: Track::None,
                fields: FieldCheck::new(FieldValidation::Ignore),
            };
            write::create_in(txn, sa, &ns, json!({"metadata": {"name": "default"}}), &opts)?;
        }
    }
    Ok(())
}

/// Deleting a namespace deletes its contents; deleting a ServiceAccount deletes its token Secrets;
/// deleting a ClusterRole takes its rules out of the roles that aggregated them.
pub(crate) fn after_delete(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if aggregation::is_cluster_role(kind) {
        aggregation::reconcile(txn)?;
    }
    if is_core(kind, "Namespace") {
        for k in KINDS.iter().filter(|k| k.namespaced) {
            for key in txn.keys(k.id(), &obj.key.1) {
                write::delete_in(txn, k, &key)?;
            }
        }
    } else if is_core(kind, "ServiceAccount") {
        let secrets = kinds::by_id(secret_kind());
        for key in txn.keys(secrets.id(), &obj.key.0) {
            let bound = txn.get(secrets.id(), &key).is_some_and(|s| {
                let v = s.value();
                v["type"] == SA_TOKEN_TYPE
                    && v["metadata"]["annotations"][SA_NAME_ANNOTATION] == obj.key.1.as_str()
            });
            if bound {
                write::delete_in(txn, secrets, &key)?;
            }
        }
    }
    Ok(())
}
