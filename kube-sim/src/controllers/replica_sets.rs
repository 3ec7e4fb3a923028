//! The ReplicaSet controller: keeps `spec.replicas` pods made from the template, owned by the
//! ReplicaSet, and reports how many exist, are fully labelled, ready and available.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{controlled_by, labels_of, owner_ref, selector_matches};
use super::{controller_opts, kind_named, namespace_active, pod_kind};
use crate::delete;
use crate::error::Error;
use crate::object::{Key, Obj};
use crate::store::Txn;
use crate::write::{self, StatusMode};

/// Attempts at a free generated pod name before giving up on one pod.
const NAME_ATTEMPTS: usize = 5;

pub(super) fn sync(txn: &mut Txn<'_>, key: &Key) -> Result<(), Error> {
    let rs_kind = kind_named("apps", "ReplicaSet");
    let Some(current) = txn.get(rs_kind.id(), key).cloned() else {
        return Ok(());
    };
    let rs = current.value();
    let mut pods = owned_pods(txn, &rs, &key.0);
    let desired = rs["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
    let alive = rs["metadata"]["deletionTimestamp"].is_null() && namespace_active(txn, &key.0);
    if alive && pods.len() < desired {
        for _ in pods.len()..desired {
            pods.extend(create_pod(txn, &rs)?);
        }
    } else if alive && pods.len() > desired {
        pods.sort_by_key(|(obj, pod)| deletion_rank(obj, pod));
        for (obj, _) in pods.drain(desired..) {
            delete::delete_in(txn, kind_named("", "Pod"), &obj.key)?;
        }
    }
    let template_labels = labels_of(&rs["spec"]["template"]["metadata"]["labels"]);
    let count = |f: &dyn Fn(&Value) -> bool| pods.iter().filter(|(_, p)| f(p)).count();
    let status = replica_status(
        pods.len(),
        count(&|p| {
            let l = labels_of(&p["metadata"]["labels"]);
            template_labels.iter().all(|(k, v)| l.get(k) == Some(v))
        }),
        count(&is_ready),
        rs["metadata"]["generation"].as_i64().unwrap_or(1),
    );
    if rs["status"] != status {
        let mut body = rs.clone();
        body["status"] = status;
        let opts = controller_opts(StatusMode::Only);
        write::update_in(txn, rs_kind, &current, body, &opts)?;
    }
    Ok(())
}

/// `ReplicaSetStatus` with Go's omitempty: `replicas` is always present, the counters only when set.
fn replica_status(replicas: usize, labelled: usize, ready: usize, generation: i64) -> Value {
    let mut status = json!({"replicas": replicas});
    for (field, n) in [
        ("fullyLabeledReplicas", labelled),
        ("readyReplicas", ready),
        // No minReadySeconds wait is simulated: a ready pod is available at once.
        ("availableReplicas", ready),
    ] {
        if n > 0 {
            status[field] = json!(n);
        }
    }
    status["observedGeneration"] = json!(generation);
    status
}

pub(super) fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Pods selected by the ReplicaSet and controlled by it, not being deleted.
fn owned_pods(txn: &Txn<'_>, rs: &Value, ns: &str) -> Vec<(Arc<Obj>, Value)> {
    let uid = rs["metadata"]["uid"].as_str().unwrap_or_default();
    let pods = pod_kind();
    txn.in_namespace(pods, ns)
        .filter(|o| selector_matches(&rs["spec"]["selector"], &o.labels))
        .map(|o| (o.clone(), o.value()))
        .filter(|(_, p)| controlled_by(p, uid) && p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

/// Which pods go first on scale-down: unscheduled, then not running, then not ready, newest first.
fn deletion_rank(obj: &Obj, pod: &Value) -> (bool, bool, bool, std::cmp::Reverse<(String, u64)>) {
    let created = pod["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (
        obj.node_name.is_some(),
        obj.phase.as_deref() == Some("Running"),
        is_ready(pod),
        std::cmp::Reverse((created, obj.rv)),
    )
}

/// One pod from the template, named `<rs>-<5 random chars>`.
fn create_pod(txn: &mut Txn<'_>, rs: &Value) -> Result<Option<(Arc<Obj>, Value)>, Error> {
    let template = &rs["spec"]["template"];
    let mut meta = json!({
        "generateName": format!("{}-", rs["metadata"]["name"].as_str().unwrap_or_default()),
        "ownerReferences": owner_ref("apps/v1", "ReplicaSet", rs),
    });
    for field in ["labels", "annotations"] {
        if template["metadata"][field].is_object() {
            meta[field] = template["metadata"][field].clone();
        }
    }
    let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]});
    let ns = rs["metadata"]["namespace"].as_str().unwrap_or_default();
    let opts = controller_opts(StatusMode::Ignore);
    for _ in 0..NAME_ATTEMPTS {
        match write::create_in(txn, kind_named("", "Pod"), ns, body.clone(), &opts) {
            Ok(pod) => {
                // Follow-up writes (scheduling) happen later in the queue; the fresh state is enough here.
                let value = pod.value();
                return Ok(Some((pod, value)));
            }
            Err(Error::AlreadyExists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_omits_zero_counters_but_not_replicas() {
        assert_eq!(
            replica_status(0, 0, 0, 1),
            json!({"replicas": 0, "observedGeneration": 1})
        );
        assert_eq!(
            replica_status(3, 3, 2, 4),
            json!({"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 4})
        );
    }
}
