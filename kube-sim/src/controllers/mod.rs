//! The built-in controllers and admission plugins clients rely on (namespace lifecycle, service accounts and
//! their tokens, the root CA publisher, the garbage collector, ClusterRole aggregation), run synchronously
//! inside the write transaction so their effects are atomic and deterministic: a cascade is complete when
//! the request returns.

mod aggregation;
pub(crate) mod apiserver_service;
mod bootstrap_policy;
mod definitions;
mod deployments;
mod endpoint_slices;
mod gc;
mod kubelet;
mod meta;
mod namespaces;
mod node_ipam;
mod node_ports;
mod replica_sets;
mod root_ca;
mod scheduler;
mod service_accounts;
mod service_ips;
mod tokens;
mod workqueue;

use std::collections::VecDeque;

pub(crate) use bootstrap_policy::bootstrap as bootstrap_rbac;
use std::sync::Arc;

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, KINDS, Kind, KindId};
use super::object::{Key, Obj};
use super::store::Txn;
use super::typed::{FieldCheck, FieldValidation};
use super::write::{self, StatusMode, Track, WriteOpts};
use workqueue::Task;

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

/// The kind `group`/`kind` of the table (every kind the controllers name is in it).
fn kind_named(group: &str, kind: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.group == group && k.kind == kind)
        .unwrap_or(&KINDS[0])
}

fn pod_kind() -> KindId {
    core_kind("Pod")
}

fn node_kind() -> KindId {
    core_kind("Node")
}

fn slice_kind() -> KindId {
    kind_named("discovery.k8s.io", "EndpointSlice").id()
}

/// Controllers create nothing in a namespace that is gone or terminating.
fn namespace_active(txn: &Txn<'_>, ns: &str) -> bool {
    txn.get(namespace_kind(), &(String::new(), ns.to_string()))
        .is_some_and(|n| n.phase.as_deref() != Some("Terminating"))
}

/// What the controllers write with: no field-ownership tracking, the given status rule.
fn controller_opts(status: StatusMode) -> WriteOpts {
    WriteOpts {
        dry_run: false,
        status,
        track: Track::None,
        fields: FieldCheck::new(FieldValidation::Ignore),
    }
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
        // The kubelet stand-in reports a new node Ready at once.
        "Node" if kind.group.is_empty() => {
            let now = crate::object::rfc3339(crate::object::now_secs());
            Some(
                json!({"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}),
            )
        }
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
        node_ports::allocate(txn, obj, prev)?;
    } else if is_core(kind, "Node") {
        node_ipam::assign(txn, obj, prev);
    } else if kind.group == "apps"
        && matches!(kind.kind, "Deployment" | "ReplicaSet")
        && obj["spec"].is_object()
        && obj["spec"]["replicas"].is_null()
    {
        obj["spec"]["replicas"] = json!(1);
    }
    if is_namespace(kind) {
        namespaces::spec_finalizers(obj, prev);
    }
    if crate::crd::is_definition(kind) {
        definitions::admit(txn, obj, prev)?;
    }
    Ok(())
}

/// Mutating admission: fills what controllers add to an object before it is stored.
pub(crate) fn admit(txn: &Txn<'_>, kind: &Kind, obj: &mut Value) {
    if is_core(kind, "Secret") {
        tokens::fill(txn, obj);
    }
}

/// After an update: aggregated ClusterRoles follow the roles they gather; the workload controllers
/// look at what changed.
pub(crate) fn after_update(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    prev: &Arc<Obj>,
    obj: &Arc<Obj>,
) -> Result<(), Error> {
    if aggregation::is_cluster_role(kind) {
        aggregation::reconcile(txn)?;
    }
    workloads(txn, kind, Some(prev), Some(obj))
}

/// Queues the workload controllers' work for a change of `kind` from `prev` to `cur` and, unless an
/// outer write is already doing so, runs it.
fn workloads(
    txn: &mut Txn<'_>,
    kind: &Kind,
    prev: Option<&Arc<Obj>>,
    cur: Option<&Arc<Obj>>,
) -> Result<(), Error> {
    workqueue::defer(
        txn,
        |txn| {
            workqueue::enqueue(work_for(txn, kind, prev, cur));
            Ok(())
        },
        sync,
    )
}

/// Every namespace gets a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap; aggregated
/// ClusterRoles follow new roles.
pub(crate) fn after_create(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    workqueue::defer(
        txn,
        |txn| {
            workqueue::enqueue(work_for(txn, kind, None, Some(obj)));
            namespace_defaults(txn, kind, obj)
        },
        sync,
    )
}

fn namespace_defaults(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
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
                fields: FieldCheck::new(FieldValidation::Ignore),
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
pub(crate) fn settle(txn: &mut Txn<'_>, queue: Queue) -> Result<(), Error> {
    workqueue::defer(txn, |txn| settle_deletions(txn, queue), sync)
}

fn settle_deletions(txn: &mut Txn<'_>, mut queue: Queue) -> Result<(), Error> {
    let mut steps = 0usize;
    while let Some(work) = queue.pop_front() {
        steps += 1;
        if steps > MAX_STEPS {
            return Err(Error::Internal("deletion cascade did not settle".into()));
        }
        match work {
            Work::Removed(kind, obj) => {
                workqueue::enqueue(work_for(txn, kind, Some(&obj), None));
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
                definitions::content_removed(txn, kind, &mut queue);
                workloads(txn, kind, Some(&obj), None)?;
                if kind.namespaced {
                    namespaces::content_removed(txn, &obj.key.0, &mut queue);
                }
            }
            Work::Marked(kind, key) => {
                if is_namespace(kind) {
                    namespaces::finalize(txn, &key.1, &mut queue)?;
                }
                if crate::crd::is_definition(kind) {
                    definitions::finalize(txn, &key.1, &mut queue)?;
                }
                gc::marked(txn, kind, &key, &mut queue)?;
                if let Some(obj) = txn.get(kind.id(), &key).cloned() {
                    workloads(txn, kind, None, Some(&obj))?;
                }
            }
        }
    }
    Ok(())
}

/// What the controllers must look at after `kind` changed from `prev` to `cur` (`None`: absent).
fn work_for(txn: &Txn<'_>, kind: &Kind, prev: Option<&Arc<Obj>>, cur: Option<&Arc<Obj>>) -> Vec<Task> {
    let Some(any) = cur.or(prev) else {
        return Vec::new();
    };
    let key = any.key.clone();
    // Parsed only for the kinds that need more than the extracted fields.
    let owner = |owner_kind: &str| {
        meta::controller_of(&any.value())
            .filter(|(k, _, _)| *k == owner_kind)
            .map(|(_, name, _)| (key.0.clone(), name.to_string()))
    };
    let mut work = Vec::new();
    match (kind.group, kind.kind) {
        ("apps", "Deployment") => work.push(Task::Deployment(key)),
        ("apps", "ReplicaSet") => {
            if cur.is_some() {
                work.push(Task::ReplicaSet(key.clone()));
            }
            work.extend(owner("Deployment").map(Task::Deployment));
        }
        ("", "Pod") => {
            if cur.is_some() {
                work.push(Task::Pod(key.clone()));
            }
            work.extend(owner("ReplicaSet").map(Task::ReplicaSet));
            let selects = |svc: &Obj, o: Option<&Arc<Obj>>| {
                svc.selector
                    .as_ref()
                    .zip(o)
                    .is_some_and(|(sel, o)| sel.iter().all(|(k, v)| o.labels.get(k) == Some(v)))
            };
            for svc in txn.in_namespace(core_kind("Service"), &key.0) {
                if selects(svc, prev) || selects(svc, cur) {
                    work.push(Task::Slices(svc.key.clone()));
                }
            }
        }
        ("", "Service") => work.push(Task::Slices(key)),
        ("", "Node") => work.push(Task::PendingPods),
        ("discovery.k8s.io", "EndpointSlice")
            if cur.is_none() || endpoint_slices::concerns_controller(&any.value()) =>
        {
            if let Some(svc) = any.labels.get(endpoint_slices::SERVICE_NAME) {
                work.push(Task::Slices((key.0, svc.clone())));
            }
        }
        _ => {}
    }
    work
}

/// Runs one item of controller work.
fn sync(txn: &mut Txn<'_>, work: &Task) -> Result<(), Error> {
    match work {
        Task::Deployment(key) => deployments::sync(txn, key),
        Task::ReplicaSet(key) => replica_sets::sync(txn, key),
        Task::Pod(key) => {
            scheduler::schedule(txn, key)?;
            kubelet::sync(txn, key)
        }
        Task::Slices(key) => endpoint_slices::sync(txn, key),
        Task::PendingPods => {
            workqueue::enqueue(scheduler::pending_pods(txn).into_iter().map(Task::Pod));
            Ok(())
        }
    }
}

/// A store with the built-in namespaces, for the controllers' unit tests.
#[cfg(test)]
pub(crate) fn test_store() -> crate::store::Store {
    let authority = crate::auth::Authority::new("test").expect("authority");
    crate::store::Store::new(1000, Arc::new(authority)).expect("store")
}
