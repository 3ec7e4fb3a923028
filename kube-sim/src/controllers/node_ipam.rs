//! Node IPAM, as kube-controller-manager's range allocator: a Node without `spec.podCIDR` gets the
//! first free /24 of the cluster CIDR 10.244.0.0/16; a CIDR once given is kept.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::node_kind;
use crate::store::Txn;

pub(super) fn assign(txn: &Txn<'_>, node: &mut Value, prev: Option<&Value>) {
    let spec = &node["spec"];
    if !(spec.is_object() || spec.is_null()) || spec["podCIDR"].as_str().is_some_and(|c| !c.is_empty()) {
        return;
    }
    let kept = prev
        .and_then(|p| p["spec"]["podCIDR"].as_str())
        .map(str::to_string);
    let name = node["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let cidr = kept.or_else(|| {
        let used: HashSet<String> = txn
            .objects(node_kind())
            .filter(|o| o.key.1 != name)
            .filter_map(|o| o.value()["spec"]["podCIDR"].as_str().map(str::to_string))
            .collect();
        (0..=255)
            .map(|n| format!("10.244.{n}.0/24"))
            .find(|c| !used.contains(c))
    });
    if let Some(cidr) = cidr {
        node["spec"]["podCIDR"] = json!(cidr);
        node["spec"]["podCIDRs"] = json!([cidr]);
    }
}
