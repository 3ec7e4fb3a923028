//! The built-in controllers and admission plugins clients rely on (namespace lifecycle, service accounts and
//! their tokens, the root CA publisher, the garbage collector, ClusterRole aggregation), run synchronously
//! inside the write transaction so their effects are atomic and deterministic: a cascade is complete when
//! the request returns.

mod aggregation;
mod bootstrap_policy;
mod gc;
mod namespaces;
mod root_ca;
mod service_accounts;
mod service_ips;
mod tokens;

use std::collections::VecDeque;

pub(crate) use bootstrap_policy::bootstrap as bootstrap_rbac;
use std::sync::Arc;

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, Kind, KindId};
use super::object::{Key, Obj};
use super::store::Txn;
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
    if is_namespace(kind) {
        namespaces::spec_finalizers(obj, prev);
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

/// Every namespace gets a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap; aggregated
/// ClusterRoles follow new roles.
pub(crate) fn after_create(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if aggregation::is_cluster_role(kind) {
        aggregation::reconcile(txn)?;
    }
    if is_namespace(kind) {
        let ns = obj.key.1.clone();
        let sa = kinds::by_id(service_account_kind());
        if txn.get(sa.id(), &(ns.clone(), "default".into())).is_none() {
            let opts = WriteOpts {
                dry_run: false,
                status: StatusMode::Ignore,
                track: Track::None,
            };
            write::create_in(txn, sa, &ns, json!({"metadata": {"name": "default"}}), &opts)?;
        }
        root_ca::publish(txn, &ns)?;
    }
    Ok(())
}

/// Validating admission on create: namespace lifecycle, then the ServiceAccount plugin.
pub(crate) fn admit_create(
    txn: &Txn<'_>,
    kind: &'static Kind,
    ns: &str,
    obj: &mut Value,
) -> Result<(), Error> {
    if kind.namespaced {
        namespaces::admit_create(txn, kind, ns, obj)?;
    }
    if is_core(kind, "Pod") {
        service_accounts::admit_pod(txn, kind, ns, obj)?;
    }
    Ok(())
}

/// Admission on delete: the namespaces a cluster cannot do without are kept.
pub(crate) fn admit_delete(kind: &Kind, key: &Key) -> Result<(), Error> {
    if is_namespace(kind) {
        namespaces::admit_delete(&key.1)?;
    }
    Ok(())
}

pub(crate) fn is_namespace(kind: &Kind) -> bool {
    is_core(kind, "Namespace")
}

/// Follow-up work for the controllers after a delete-path write.
#[derive(Debug)]
pub(crate) enum Work {
    /// An object is gone (carries its last state): collect its dependents, wake owners and namespaces
    /// waiting on it, run the kind's cascades.
    Removed(&'static Kind, Arc<Obj>),
    /// An object was marked for deletion: run the finalizers the built-in controllers own.
    Marked(&'static Kind, Key),
}

pub(crate) type Queue = VecDeque<Work>;

/// A bound on one transaction's controller steps, so a bug cannot spin forever under the write lock.
const MAX_STEPS: usize = 10_000_000;

/// Runs the controllers until no work is left, inside the write transaction.
pub(crate) fn settle(txn: &mut Txn<'_>, mut queue: Queue) -> Result<(), Error> {
    let mut steps = 0usize;
    while let Some(work) = queue.pop_front() {
        steps += 1;
        if steps > MAX_STEPS {
            return Err(Error::Internal("deletion cascade did not settle".into()));
        }
        match work {
            Work::Removed(kind, obj) => {
                if is_core(kind, "ServiceAccount") {
                    tokens::revoke(txn, &obj, &mut queue)?;
                }
                if root_ca::is_root_ca(kind, &obj) {
                    root_ca::republish(txn, &obj.key.0)?;
                }
                if aggregation::is_cluster_role(kind) {
                    // Deleting a ClusterRole takes its rules out of the roles that aggregated them.
                    aggregation::reconcile(txn)?;
                }
                gc::removed(txn, kind, &obj, &mut queue)?;
                if kind.namespaced {
                    namespaces::content_removed(txn, &obj.key.0, &mut queue);
                }
            }
            Work::Marked(kind, key) => {
                if is_namespace(kind) {
                    namespaces::finalize(txn, &key.1, &mut queue)?;
                }
                gc::marked(txn, kind, &key, &mut queue)?;
            }
        }
    }
    Ok(())
}

/// A store with the built-in namespaces, for the controllers' unit tests.
#[cfg(test)]
pub(crate) fn test_store() -> crate::store::Store {
    let authority = crate::auth::Authority::new("test").expect("authority");
    crate::store::Store::new(1000, Arc::new(authority)).expect("store")
}
