//! The NodePort allocator: ports of NodePort and LoadBalancer Services get a `nodePort` unique in
//! 30000-32767; explicit ones must be in range and free, and an update keeps the ports allocated before.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::core_kind;
use crate::error::Error;
use crate::store::Txn;

const RANGE: std::ops::RangeInclusive<u64> = 30000..=32767;

pub(super) fn allocate(txn: &Txn<'_>, obj: &mut Value, prev: Option<&Value>) -> Result<(), Error> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let wants = matches!(obj["spec"]["type"].as_str(), Some("NodePort" | "LoadBalancer"));
    let Some(ports) = obj["spec"]["ports"].as_array_mut() else {
        return Ok(());
    };
    if !wants {
        return Ok(());
    }
    let before: Vec<Value> = prev
        .and_then(|p| p["spec"]["ports"].as_array().cloned())
        .unwrap_or_default();
    let mut used = used_node_ports(txn, &(ns, name.clone()));
    // Explicit ports first, so an allocation never takes one asked for later in the list.
    for (i, port) in ports.iter().enumerate() {
        let Some(asked) = port["nodePort"].as_u64().filter(|p| *p != 0) else {
            continue;
        };
        let mine = before.iter().any(|b| b["nodePort"].as_u64() == Some(asked));
        let field = format!("spec.ports[{i}].nodePort");
        if !RANGE.contains(&asked) {
            return Err(Error::invalid(
                "Service",
                &name,
                &field,
                format!(
                    "Invalid value: {asked}: provided port is not in the valid range. The range of valid ports is 30000-32767"
                ),
            ));
        }
        if !used.insert(asked) && !mine {
            return Err(Error::invalid(
                "Service",
                &name,
                &field,
                format!("Invalid value: {asked}: provided port is already allocated"),
            ));
        }
    }
    for port in ports.iter_mut() {
        if port["nodePort"].as_u64().is_some_and(|p| p != 0) {
            continue;
        }
        // The same service port (by name, else number and protocol) keeps its node port.
        let kept = before
            .iter()
            .find(|b| {
                b["name"] == port["name"]
                    && (port["name"].as_str().is_some_and(|n| !n.is_empty())
                        || (b["port"] == port["port"] && b["protocol"] == port["protocol"]))
            })
            .and_then(|b| b["nodePort"].as_u64());
        let Some(n) = kept.or_else(|| free_port(&used, txn.next_rv())) else {
            return Err(Error::invalid(
                "Service",
                &name,
                "spec.ports[0].nodePort",
                "Internal error: failed to allocate a nodePort: range is full",
            ));
        };
        used.insert(n);
        port["nodePort"] = json!(n);
    }
    Ok(())
}

/// The node ports of every Service but the one being written.
fn used_node_ports(txn: &Txn<'_>, except: &(String, String)) -> HashSet<u64> {
    txn.objects(core_kind("Service"))
        .filter(|o| &o.key != except)
        .flat_map(|o| {
            o.value()["spec"]["ports"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter_map(|p| p["nodePort"].as_u64())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// A free port searched from a position derived from `seed` (reproducible where the real allocator
/// picks at random).
fn free_port(used: &HashSet<u64>, seed: u64) -> Option<u64> {
    let size = RANGE.end() - RANGE.start() + 1;
    (0..size)
        .map(|i| RANGE.start() + (seed + i) % size)
        .find(|p| !used.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_in_range_and_unused() {
        let mut used = HashSet::new();
        for seed in [0, 0, 2767, u64::MAX / 2] {
            let p = free_port(&used, seed).unwrap();
            assert!(RANGE.contains(&p), "{p}");
            assert!(used.insert(p), "{p} twice");
        }
    }
}
