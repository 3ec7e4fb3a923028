//! Deletes what a deleted owner controlled: Deployment → ReplicaSets → Pods, Service → its
//! EndpointSlices. A stand-in for the garbage collector, limited to what the workload controllers create.

use super::kind_named;
use super::meta::controlled_by;
use crate::error::Error;
use crate::kinds::Kind;
use crate::object::Obj;
use crate::store::Txn;
use crate::write;

pub(super) fn delete_dependents(txn: &mut Txn<'_>, kind: &Kind, owner: &Obj) -> Result<(), Error> {
    let dependent = match (kind.group, kind.kind) {
        ("apps", "Deployment") => kind_named("apps", "ReplicaSet"),
        ("apps", "ReplicaSet") => kind_named("", "Pod"),
        ("", "Service") => kind_named("discovery.k8s.io", "EndpointSlice"),
        _ => return Ok(()),
    };
    for key in txn.keys(dependent.id(), &owner.key.0) {
        if txn
            .get(dependent.id(), &key)
            .is_some_and(|o| controlled_by(&o.value(), &owner.uid))
        {
            write::delete_in(txn, dependent, &key)?;
        }
    }
    Ok(())
}
