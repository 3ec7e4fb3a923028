//! The scheduler stand-in: a pending pod without `spec.nodeName` is bound to the Ready node (matching
//! its `nodeSelector`) that runs the fewest pods; with none it stays Pending with `PodScheduled=False`,
//! reason `Unschedulable`, and is tried again when nodes change.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::meta::{labels_of, set_condition};
use super::{controller_opts, kind_named, node_kind, pod_kind};
use crate::error::Error;
use crate::object::Key;
use crate::store::Txn;
use crate::write::{self, StatusMode};

/// Whether a pod is waiting for the scheduler.
pub(super) fn unscheduled(pod: &Value) -> bool {
    pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
        && pod["status"]["phase"].as_str().is_none_or(|p| p == "Pending")
        && pod["metadata"]["deletionTimestamp"].is_null()
}

pub(super) fn node_ready(node: &Value) -> bool {
    node["spec"]["unschedulable"] != true
        && node["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// Binds one pod if it waits for a node; returns whether it did.
pub(super) fn schedule(txn: &mut Txn<'_>, key: &Key) -> Result<bool, Error> {
    let Some(current) = txn.get(pod_kind(), key).cloned() else {
        return Ok(false);
    };
    // The extracted fields rule out most pods without parsing them.
    let bound = current.node_name.as_deref().is_some_and(|n| !n.is_empty());
    if bound || current.phase.as_deref().is_some_and(|p| p != "Pending") {
        return Ok(false);
    }
    let mut pod = current.value();
    if !unscheduled(&pod) {
        return Ok(false);
    }
    let mut conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match pick_node(txn, &pod["spec"]["nodeSelector"]) {
        Ok(node) => {
            pod["spec"]["nodeName"] = json!(node);
            set_condition(&mut conditions, "PodScheduled", true, None, None, false);
        }
        Err(message) => {
            set_condition(
                &mut conditions,
                "PodScheduled",
                false,
                Some("Unschedulable"),
                Some(&message),
                false,
            );
        }
    }
    pod["status"]["phase"] = json!("Pending");
    pod["status"]["conditions"] = json!(conditions);
    let opts = controller_opts(StatusMode::Bind);
    let stored = write::update_in(txn, kind_named("", "Pod"), &current, pod, &opts)?;
    Ok(stored.node_name.is_some())
}

/// Every pod still waiting for a node, tried again (nodes were added or changed).
pub(super) fn pending_pods(txn: &Txn<'_>) -> Vec<Key> {
    txn.objects(pod_kind())
        .filter(|o| o.node_name.is_none() && o.phase.as_deref().is_none_or(|p| p == "Pending"))
        .map(|o| o.key.clone())
        .collect()
}

/// The least loaded schedulable node, or the scheduler's message for why there is none.
fn pick_node(txn: &Txn<'_>, node_selector: &Value) -> Result<String, String> {
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in txn.objects(pod_kind()) {
        if let Some(n) = &pod.node_name {
            *load.entry(n.as_str()).or_default() += 1;
        }
    }
    let nodes: Vec<_> = txn.objects(node_kind()).collect();
    if nodes.is_empty() {
        return Err("no nodes available to schedule pods".into());
    }
    let wanted = labels_of(node_selector);
    let mut not_ready = 0;
    let mut mismatched = 0;
    let mut fit = Vec::new();
    for node in &nodes {
        if !wanted.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
            mismatched += 1;
        } else if !node_ready(&node.value()) {
            not_ready += 1;
        } else {
            fit.push(node.key.1.as_str());
        }
    }
    fit.into_iter()
        .min_by_key(|n| (load.get(n).copied().unwrap_or(0), *n))
        .map(str::to_string)
        .ok_or_else(|| {
            let mut reasons = Vec::new();
            if mismatched > 0 {
                reasons.push(format!("{mismatched} node(s) didn't match Pod's node affinity/selector"));
            }
            if not_ready > 0 {
                reasons.push(format!("{not_ready} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}"));
            }
            format!(
                "0/{} nodes are available: {}. preemption: 0/{} nodes are available: {} Preemption is not helpful for scheduling.",
                nodes.len(),
                reasons.join(", "),
                nodes.len(),
                nodes.len()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pending_unbound_pods_wait_for_the_scheduler() {
        assert!(unscheduled(&json!({"spec": {}, "status": {"phase": "Pending"}})));
        assert!(!unscheduled(
            &json!({"spec": {"nodeName": "n"}, "status": {"phase": "Pending"}})
        ));
        // Pods loaded from manifests with a running status are left alone.
        assert!(!unscheduled(&json!({"spec": {}, "status": {"phase": "Running"}})));
    }

    #[test]
    fn nodes_must_be_ready_and_schedulable() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(node_ready(&ready));
        let mut cordoned = ready.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        assert!(!node_ready(&cordoned));
        assert!(!node_ready(&json!({"status": {}})));
    }
}
