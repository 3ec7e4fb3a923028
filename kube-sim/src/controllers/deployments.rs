//! The Deployment controller: a Deployment owns one ReplicaSet per pod template, named
//! `<deployment>-<pod-template-hash>`. A template change scales the new ReplicaSet up and the old ones to
//! zero at once (a synchronous, Recreate-like rollout), keeping `revisionHistoryLimit` old ones, and the
//! status reports the rollout with the real controller's conditions so `kubectl rollout status` ends.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{controlled_by, owner_ref, set_condition};
use super::{controller_opts, kind_named, namespace_active};
use crate::delete;
use crate::error::Error;
use crate::object::{Key, Obj};
use crate::store::Txn;
use crate::write::{self, StatusMode};

const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const DESIRED: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

pub(super) fn sync(txn: &mut Txn<'_>, key: &Key) -> Result<(), Error> {
    let kind = kind_named("apps", "Deployment");
    let Some(current) = txn.get(kind.id(), key).cloned() else {
        return Ok(());
    };
    let deploy = current.value();
    if !deploy["metadata"]["deletionTimestamp"].is_null() || !namespace_active(txn, &key.0) {
        return Ok(());
    }
    let replicas = deploy["spec"]["replicas"].as_u64().unwrap_or(1);
    let hash = template_hash(&deploy["spec"]["template"]);
    let new_name = format!("{}-{hash}", key.1);
    let mut owned = owned_replica_sets(txn, &deploy, &key.0);
    let top_revision = owned.iter().map(|(_, rs)| revision(rs)).max().unwrap_or(0);
    // Old ReplicaSets first, so scaling them down precedes scaling the new one up.
    for (obj, rs) in owned.iter().filter(|(o, _)| o.key.1 != new_name) {
        if rs["spec"]["replicas"].as_u64() != Some(0) {
            let mut body = rs.clone();
            body["spec"]["replicas"] = json!(0);
            body["metadata"]["annotations"][DESIRED] = json!(replicas.to_string());
            update(txn, obj, body)?;
        }
    }
    let new_rs = match owned.iter().find(|(o, _)| o.key.1 == new_name) {
        Some((obj, rs)) => {
            let mut body = rs.clone();
            body["spec"]["replicas"] = json!(replicas);
            let annotations = &mut body["metadata"]["annotations"];
            annotations[DESIRED] = json!(replicas.to_string());
            annotations[MAX_REPLICAS] = json!(replicas.to_string());
            if revision(rs) < top_revision {
                annotations[REVISION] = json!((top_revision + 1).to_string());
            }
            update(txn, obj, body)?
        }
        None => {
            let body = new_replica_set(&deploy, &new_name, &hash, replicas, top_revision + 1);
            let opts = controller_opts(StatusMode::Ignore);
            write::create_in(txn, kind_named("apps", "ReplicaSet"), &key.0, body, &opts)?
        }
    };
    prune_history(txn, &deploy, &mut owned, &new_name)?;
    let new_value = new_rs.value();
    let rev = revision(&new_value);
    let mut body = deploy.clone();
    if deploy["metadata"]["annotations"][REVISION] != json!(rev.to_string()) {
        body["metadata"]["annotations"][REVISION] = json!(rev.to_string());
        write::update_in(
            txn,
            kind,
            &current,
            body.clone(),
            &controller_opts(StatusMode::Keep),
        )?;
    }
    let Some(current) = txn.get(kind.id(), key).cloned() else {
        return Ok(());
    };
    let owned = owned_replica_sets(txn, &deploy, &key.0);
    let status = deployment_status(
        &current.value(),
        &owned.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        &new_value,
    );
    if current.value()["status"] != status {
        let mut body = current.value();
        body["status"] = status;
        write::update_in(txn, kind, &current, body, &controller_opts(StatusMode::Only))?;
    }
    Ok(())
}

fn update(txn: &mut Txn<'_>, obj: &Arc<Obj>, body: Value) -> Result<Arc<Obj>, Error> {
    let opts = controller_opts(StatusMode::Ignore);
    write::update_in(txn, kind_named("apps", "ReplicaSet"), obj, body, &opts)
}

fn revision(rs: &Value) -> u64 {
    rs["metadata"]["annotations"][REVISION]
        .as_str()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn owned_replica_sets(txn: &Txn<'_>, deploy: &Value, ns: &str) -> Vec<(Arc<Obj>, Value)> {
    let uid = deploy["metadata"]["uid"].as_str().unwrap_or_default();
    let kind = kind_named("apps", "ReplicaSet").id();
    txn.in_namespace(kind, ns)
        .map(|o| (o.clone(), o.value()))
        .filter(|(_, rs)| controlled_by(rs, uid))
        .collect()
}

/// Deletes the oldest scaled-down ReplicaSets beyond `revisionHistoryLimit` (default 10).
fn prune_history(
    txn: &mut Txn<'_>,
    deploy: &Value,
    owned: &mut [(Arc<Obj>, Value)],
    new_name: &str,
) -> Result<(), Error> {
    let limit = deploy["spec"]["revisionHistoryLimit"].as_u64().unwrap_or(10) as usize;
    let mut old: Vec<&(Arc<Obj>, Value)> = owned
        .iter()
        .filter(|(o, rs)| {
            o.key.1 != new_name
                && rs["spec"]["replicas"].as_u64() == Some(0)
                && rs["status"]["replicas"].as_u64().unwrap_or(0) == 0
        })
        .collect();
    old.sort_by_key(|(_, rs)| revision(rs));
    let excess = old.len().saturating_sub(limit);
    for (obj, _) in old.into_iter().take(excess) {
        delete::delete_in(txn, kind_named("apps", "ReplicaSet"), &obj.key)?;
    }
    Ok(())
}

fn new_replica_set(deploy: &Value, name: &str, hash: &str, replicas: u64, revision: u64) -> Value {
    let mut template = deploy["spec"]["template"].clone();
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let mut selector = deploy["spec"]["selector"].clone();
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let mut spec = json!({"replicas": replicas, "selector": selector, "template": template});
    if let Some(m) = deploy["spec"]["minReadySeconds"].as_u64() {
        spec["minReadySeconds"] = json!(m);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "labels": template["metadata"]["labels"],
            "annotations": {
                DESIRED: replicas.to_string(), MAX_REPLICAS: replicas.to_string(),
                REVISION: revision.to_string(),
            },
            "ownerReferences": owner_ref("apps/v1", "Deployment", deploy),
        },
        "spec": spec,
    })
}

/// The `pod-template-hash`: FNV-1a (32 bit) of the template, its decimal digits mapped onto the
/// alphabet generated names use, which is how the real controller spells it.
pub(super) fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    let hash = bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    hash.to_string()
        .bytes()
        .map(|d| ALPHABET[usize::from(d) % ALPHABET.len()] as char)
        .collect()
}

/// `maxUnavailable` resolved against the replica count (Recreate: none; default 25%, rounded down).
fn max_unavailable(deploy: &Value, replicas: u64) -> u64 {
    if deploy["spec"]["strategy"]["type"] == "Recreate" {
        return 0;
    }
    match &deploy["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::String(s) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<u64>().ok())
            .map_or(0, |p| replicas * p / 100),
        _ => replicas * 25 / 100,
    }
}

/// `DeploymentStatus` from the owned ReplicaSets (zero counters omitted, as Go's omitempty does).
fn deployment_status(deploy: &Value, owned: &[Value], new_rs: &Value) -> Value {
    let sum = |field: &str| {
        owned
            .iter()
            .map(|rs| rs["status"][field].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let replicas = deploy["spec"]["replicas"].as_u64().unwrap_or(1);
    let (total, ready, available) = (sum("replicas"), sum("readyReplicas"), sum("availableReplicas"));
    let updated = new_rs["status"]["replicas"].as_u64().unwrap_or(0);
    let mut status = json!({"observedGeneration": deploy["metadata"]["generation"]});
    for (field, n) in [
        ("replicas", total),
        ("updatedReplicas", updated),
        ("readyReplicas", ready),
        ("availableReplicas", available),
        ("unavailableReplicas", replicas.saturating_sub(available)),
    ] {
        if n > 0 {
            status[field] = json!(n);
        }
    }
    let mut conditions: Vec<Value> = deploy["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let minimum = available >= replicas.saturating_sub(max_unavailable(deploy, replicas));
    if minimum {
        set_condition(
            &mut conditions,
            "Available",
            true,
            Some("MinimumReplicasAvailable"),
            Some("Deployment has minimum availability."),
            true,
        );
    } else {
        set_condition(
            &mut conditions,
            "Available",
            false,
            Some("MinimumReplicasUnavailable"),
            Some("Deployment does not have minimum availability."),
            true,
        );
    }
    let name = new_rs["metadata"]["name"].as_str().unwrap_or_default();
    let complete = updated == replicas && available >= replicas && total == replicas;
    let (reason, message) = if complete {
        (
            "NewReplicaSetAvailable",
            format!("ReplicaSet {name:?} has successfully progressed."),
        )
    } else {
        (
            "ReplicaSetUpdated",
            format!("ReplicaSet {name:?} is progressing."),
        )
    };
    set_condition(
        &mut conditions,
        "Progressing",
        true,
        Some(reason),
        Some(&message),
        true,
    );
    status["conditions"] = json!(conditions);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_is_stable_and_template_sensitive() {
        let a = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "x", "image": "x"}]}});
        let mut b = a.clone();
        b["spec"]["containers"][0]["image"] = json!("y");
        let ha = template_hash(&a);
        assert_eq!(ha, template_hash(&a.clone()));
        assert_ne!(ha, template_hash(&b));
        assert!(!ha.is_empty() && ha.len() <= 10, "{ha}");
        assert!(
            ha.bytes().all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)),
            "{ha}"
        );
    }

    #[test]
    fn status_reports_progress_then_completion() {
        let deploy = json!({"metadata": {"generation": 2}, "spec": {"replicas": 4}});
        let mut new_rs = json!({"metadata": {"name": "web-abc"}, "status": {"replicas": 4, "readyReplicas": 2, "availableReplicas": 2}});
        let s = deployment_status(&deploy, std::slice::from_ref(&new_rs), &new_rs);
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["unavailableReplicas"], 2);
        assert_eq!(s["conditions"][0]["reason"], "MinimumReplicasUnavailable");
        assert_eq!(s["conditions"][1]["reason"], "ReplicaSetUpdated");
        new_rs["status"] = json!({"replicas": 4, "readyReplicas": 4, "availableReplicas": 4});
        let s = deployment_status(&deploy, std::slice::from_ref(&new_rs), &new_rs);
        assert!(s.get("unavailableReplicas").is_none());
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][1]["reason"], "NewReplicaSetAvailable");
        assert_eq!(
            s["conditions"][1]["message"],
            "ReplicaSet \"web-abc\" has successfully progressed."
        );
    }

    #[test]
    fn max_unavailable_follows_the_strategy() {
        let d = |s: Value| json!({"spec": {"strategy": s}});
        assert_eq!(max_unavailable(&d(json!({})), 8), 2);
        assert_eq!(max_unavailable(&d(json!({"type": "Recreate"})), 8), 0);
        assert_eq!(
            max_unavailable(&d(json!({"rollingUpdate": {"maxUnavailable": "50%"}})), 5),
            2
        );
        assert_eq!(
            max_unavailable(&d(json!({"rollingUpdate": {"maxUnavailable": 3}})), 5),
            3
        );
    }
}
