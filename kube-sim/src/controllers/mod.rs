//! The built-in controllers clients rely on (namespace defaults, service-account tokens, deletion cascades),
//! run synchronously inside the write transaction so their effects are atomic and deterministic.

pub(crate) mod apiserver_service;
mod cascade;
mod deployments;
mod endpoint_slices;
mod kubelet;
mod meta;
mod node_ipam;
mod node_ports;
mod replica_sets;
mod scheduler;
mod service_ips;
mod tokens;
mod workqueue;

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::Error;
use super::kinds::{self, KINDS, Kind, KindId};
use super::object::Obj;
use super::store::Txn;
use super::write::{self, StatusMode, WriteOpts};
use workqueue::Work;

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
    Ok(())
}

/// Mutating admission: fills what controllers add to an object before it is stored.
pub(crate) fn admit(txn: &Txn<'_>, kind: &Kind, obj: &mut Value) {
    if is_core(kind, "Secret") {
        tokens::fill(txn, obj);
    }
}

/// Every namespace gets a `default` ServiceAccount.
pub(crate) fn after_create(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    workqueue::defer(
        txn,
        |txn| {
            workqueue::enqueue(work_for(txn, kind, None, Some(obj)));
            default_service_account(txn, kind, obj)
        },
        sync,
    )
}

fn default_service_account(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    if is_core(kind, "Namespace") {
        let ns = obj.key.1.clone();
        let sa = kinds::by_id(service_account_kind());
        if txn.get(sa.id(), &(ns.clone(), "default".into())).is_none() {
            let opts = WriteOpts {
                dry_run: false,
                status: StatusMode::Ignore,
            };
            write::create_in(txn, sa, &ns, json!({"metadata": {"name": "default"}}), &opts)?;
        }
    }
    Ok(())
}

/// Deleting a namespace deletes its contents; deleting a ServiceAccount deletes its token Secrets.
pub(crate) fn after_delete(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
    workqueue::defer(
        txn,
        |txn| {
            workqueue::enqueue(work_for(txn, kind, Some(obj), None));
            cascade::delete_dependents(txn, kind, obj)?;
            delete_contents(txn, kind, obj)
        },
        sync,
    )
}

/// A changed object's effects on the workload controllers.
pub(crate) fn after_update(
    txn: &mut Txn<'_>,
    kind: &'static Kind,
    prev: &Arc<Obj>,
    obj: &Arc<Obj>,
) -> Result<(), Error> {
    workqueue::defer(
        txn,
        |txn| {
            workqueue::enqueue(work_for(txn, kind, Some(prev), Some(obj)));
            Ok(())
        },
        sync,
    )
}

/// What the controllers must look at after `kind` changed from `prev` to `cur` (`None`: absent).
fn work_for(txn: &Txn<'_>, kind: &Kind, prev: Option<&Arc<Obj>>, cur: Option<&Arc<Obj>>) -> Vec<Work> {
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
        ("apps", "Deployment") => work.push(Work::Deployment(key)),
        ("apps", "ReplicaSet") => {
            if cur.is_some() {
                work.push(Work::ReplicaSet(key.clone()));
            }
            work.extend(owner("Deployment").map(Work::Deployment));
        }
        ("", "Pod") => {
            if cur.is_some() {
                work.push(Work::Pod(key.clone()));
            }
            work.extend(owner("ReplicaSet").map(Work::ReplicaSet));
            let selects = |svc: &Obj, o: Option<&Arc<Obj>>| {
                svc.selector
                    .as_ref()
                    .zip(o)
                    .is_some_and(|(sel, o)| sel.iter().all(|(k, v)| o.labels.get(k) == Some(v)))
            };
            for svc in txn.in_namespace(core_kind("Service"), &key.0) {
                if selects(svc, prev) || selects(svc, cur) {
                    work.push(Work::Slices(svc.key.clone()));
                }
            }
        }
        ("", "Service") => work.push(Work::Slices(key)),
        ("", "Node") => work.push(Work::PendingPods),
        ("discovery.k8s.io", "EndpointSlice")
            if cur.is_none() || endpoint_slices::concerns_controller(&any.value()) =>
        {
            if let Some(svc) = any.labels.get(endpoint_slices::SERVICE_NAME) {
                work.push(Work::Slices((key.0, svc.clone())));
            }
        }
        _ => {}
    }
    work
}

/// Runs one item of controller work.
fn sync(txn: &mut Txn<'_>, work: &Work) -> Result<(), Error> {
    match work {
        Work::Deployment(key) => deployments::sync(txn, key),
        Work::ReplicaSet(key) => replica_sets::sync(txn, key),
        Work::Pod(key) => {
            scheduler::schedule(txn, key)?;
            kubelet::sync(txn, key)
        }
        Work::Slices(key) => endpoint_slices::sync(txn, key),
        Work::PendingPods => {
            workqueue::enqueue(scheduler::pending_pods(txn).into_iter().map(Work::Pod));
            Ok(())
        }
    }
}

fn delete_contents(txn: &mut Txn<'_>, kind: &'static Kind, obj: &Arc<Obj>) -> Result<(), Error> {
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
