//! The EndpointSlice controller: every Service with a selector gets slices named `<svc>-<random>`,
//! labelled `kubernetes.io/service-name` and managed-by `endpointslice-controller.k8s.io`, owned by the
//! Service, listing the selected pods that have an IP (at most 100 endpoints per slice, one group of
//! slices per distinct resolution of the ports).
//!
//! User-managed services: a Service that has any slice labelled with its name that this controller did
//! not make (no controller reference to the Service) is left to whoever made that slice, and the
//! controller removes its own slices for it. Real clusters would add managed slices next to them; the
//! hand-written slices of the embedded topology (clusters/) imitate the controller's output, and this rule
//! keeps them the only ones, so meshd sees exactly what the manifests say.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::{controller_of, map_selector_matches, owner_ref};
use super::{controller_opts, kind_named, namespace_active, node_kind, pod_kind, slice_kind};
use crate::delete;
use crate::error::Error;
use crate::object::{Key, Obj, now_secs, rfc3339};
use crate::store::Txn;
use crate::write::{self, StatusMode};

pub(super) const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpointslice-controller.k8s.io";
const MAX_ENDPOINTS: usize = 100;

/// Whose a slice of the Service with `uid` is.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    /// Made by this controller for this Service.
    Ours,
    /// Made by this controller for an earlier Service of the same name.
    Stale,
    /// Made by someone else: the Service is user-managed.
    Foreign,
}

fn owner(slice: &Value, uid: &str) -> Owner {
    let managed = slice["metadata"]["labels"][MANAGED_BY] == CONTROLLER;
    match controller_of(slice) {
        Some(("Service", _, u)) if managed && u == uid => Owner::Ours,
        Some(("Service", _, _)) if managed => Owner::Stale,
        _ => Owner::Foreign,
    }
}

/// Whether a slice write should make the controller look at its Service again: anything but its own
/// slices being written (its deletes are looked at too, so a removed slice comes back).
pub(super) fn concerns_controller(slice: &Value) -> bool {
    !(slice["metadata"]["labels"][MANAGED_BY] == CONTROLLER
        && matches!(controller_of(slice), Some(("Service", _, _))))
}

pub(super) fn sync(txn: &mut Txn<'_>, key: &Key) -> Result<(), Error> {
    // Parsed only once the Service is known to be the controller's (most pod changes stop before).
    let service = txn.get(kind_named("", "Service").id(), key).cloned();
    let uid = service.as_ref().map(|o| o.uid.clone()).unwrap_or_default();
    let mut foreign = false;
    let mut managed = Vec::new();
    for obj in txn
        .in_namespace(slice_kind(), &key.0)
        .filter(|o| o.labels.get(SERVICE_NAME) == Some(&key.1))
    {
        // Without the controller's label a slice is foreign, known without parsing it: this runs for
        // every pod change, and hand-written slices can be large.
        if obj.labels.get(MANAGED_BY).map(String::as_str) != Some(CONTROLLER) {
            foreign = true;
            continue;
        }
        let slice = obj.value();
        match owner(&slice, &uid) {
            Owner::Foreign => foreign = true,
            whose => managed.push((obj.clone(), slice, whose)),
        }
    }
    let mut ours = Vec::new();
    for (obj, slice, whose) in managed {
        if whose == Owner::Ours && !foreign {
            ours.push((obj, slice));
        } else {
            delete::delete_in(txn, kind_named("discovery.k8s.io", "EndpointSlice"), &obj.key)?;
        }
    }
    let service = service.filter(|_| !foreign).map(|o| o.value());
    let Some(service) = service.filter(|s| selects_pods(s) && namespace_active(txn, &key.0)) else {
        for (obj, _) in ours {
            delete::delete_in(txn, kind_named("discovery.k8s.io", "EndpointSlice"), &obj.key)?;
        }
        return Ok(());
    };
    let desired = desired_slices(txn, &service);
    reconcile(txn, &service, ours, desired)
}

fn selects_pods(service: &Value) -> bool {
    service["spec"]["type"] != "ExternalName"
        && service["spec"]["selector"]
            .as_object()
            .is_some_and(|m| !m.is_empty())
}

/// (ports, endpoints) per slice, in a stable order.
fn desired_slices(txn: &Txn<'_>, service: &Value) -> Vec<(Vec<Value>, Vec<Value>)> {
    let ns = service["metadata"]["namespace"].as_str().unwrap_or_default();
    let publish_not_ready = service["spec"]["publishNotReadyAddresses"] == true;
    let mut groups: BTreeMap<String, (Vec<Value>, Vec<Value>)> = BTreeMap::new();
    for obj in txn.in_namespace(pod_kind(), ns) {
        if map_selector_matches(&service["spec"]["selector"], &obj.labels) != Some(true) {
            continue;
        }
        let pod = obj.value();
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        let Some(ip) = pod["status"]["podIP"].as_str().filter(|ip| !ip.is_empty()) else {
            continue;
        };
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        let ports = resolve_ports(service, &pod);
        let endpoint = endpoint(txn, &pod, ip, &obj.uid, publish_not_ready);
        let group = groups
            .entry(serde_json::to_string(&ports).unwrap_or_default())
            .or_insert_with(|| (ports, Vec::new()));
        group.1.push(endpoint);
    }
    let mut out = Vec::new();
    for (ports, endpoints) in groups.into_values() {
        for chunk in endpoints.chunks(MAX_ENDPOINTS) {
            out.push((ports.clone(), chunk.to_vec()));
        }
    }
    out
}

/// The Service's ports as this pod serves them: a named `targetPort` resolves through the pod's
/// container ports (a name the pod lacks drops that port for it); a missing one is the port itself.
fn resolve_ports(service: &Value, pod: &Value) -> Vec<Value> {
    let ports = service["spec"]["ports"].as_array().cloned().unwrap_or_default();
    ports
        .iter()
        .filter_map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            let number = match &p["targetPort"] {
                Value::Number(n) => n.as_u64(),
                Value::String(name) => name.parse().ok().or_else(|| named_port(pod, name, protocol)),
                _ => p["port"].as_u64(),
            }?;
            let mut out =
                json!({"name": p["name"].as_str().unwrap_or_default(), "port": number, "protocol": protocol});
            if let Some(app) = p["appProtocol"].as_str() {
                out["appProtocol"] = json!(app);
            }
            Some(out)
        })
        .collect()
}

fn named_port(pod: &Value, name: &str, protocol: &str) -> Option<u64> {
    pod["spec"]["containers"].as_array()?.iter().find_map(|c| {
        c["ports"].as_array()?.iter().find_map(|p| {
            (p["name"] == name && p["protocol"].as_str().unwrap_or("TCP") == protocol)
                .then(|| p["containerPort"].as_u64())
                .flatten()
        })
    })
}

fn endpoint(txn: &Txn<'_>, pod: &Value, ip: &str, uid: &str, publish_not_ready: bool) -> Value {
    let ready = super::replica_sets::is_ready(pod);
    let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
    let mut e = json!({
        "addresses": [ip],
        "conditions": {"ready": (ready || publish_not_ready) && !terminating, "serving": ready || publish_not_ready, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": pod["metadata"]["namespace"], "name": pod["metadata"]["name"], "uid": uid},
    });
    if let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        e["nodeName"] = json!(node);
        let zone = txn
            .get(node_kind(), &(String::new(), node.to_string()))
            .and_then(|n| n.labels.get("topology.kubernetes.io/zone").cloned());
        if let Some(zone) = zone {
            e["zone"] = json!(zone);
        }
    }
    e
}

/// Writes the desired slices into the existing ones (same port group first), creates what is missing
/// and deletes the rest. A Service with no endpoints keeps one empty placeholder slice, as the real
/// controller does.
fn reconcile(
    txn: &mut Txn<'_>,
    service: &Value,
    mut ours: Vec<(Arc<Obj>, Value)>,
    mut desired: Vec<(Vec<Value>, Vec<Value>)>,
) -> Result<(), Error> {
    if desired.is_empty() {
        desired.push((Vec::new(), Vec::new()));
    }
    let kind = kind_named("discovery.k8s.io", "EndpointSlice");
    let ns = service["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = service["metadata"]["name"].as_str().unwrap_or_default();
    for (ports, endpoints) in desired {
        let reuse = ours
            .iter()
            .position(|(_, s)| s["ports"] == json!(ports))
            .or((!ours.is_empty()).then_some(0));
        let mut body = match reuse {
            Some(i) => ours.remove(i).1,
            None => json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": format!("{name}-"), "ownerReferences": owner_ref("v1", "Service", service)},
                "addressType": "IPv4",
            }),
        };
        let mut labels = service["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        labels.insert(SERVICE_NAME.into(), json!(name));
        labels.insert(MANAGED_BY.into(), json!(CONTROLLER));
        if service["spec"]["clusterIP"] == "None" {
            labels.insert("service.kubernetes.io/headless".into(), json!(""));
        }
        let changed = body["endpoints"] != json!(endpoints)
            || body["ports"] != json!(ports)
            || body["metadata"]["labels"] != json!(labels);
        if !changed {
            continue;
        }
        body["metadata"]["labels"] = json!(labels);
        body["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"] =
            json!(rfc3339(now_secs()));
        body["endpoints"] = json!(endpoints);
        match ports.is_empty() {
            true => body.as_object_mut().map(|o| o.remove("ports")),
            false => body
                .as_object_mut()
                .map(|o| o.insert("ports".into(), json!(ports))),
        };
        let opts = controller_opts(StatusMode::Keep);
        let existing = body["metadata"]["name"]
            .as_str()
            .and_then(|n| txn.get(kind.id(), &(ns.clone(), n.to_string())).cloned());
        match existing {
            Some(cur) => write::update_in(txn, kind, &cur, body, &opts)?,
            None => write::create_in(txn, kind, &ns, body, &opts)?,
        };
    }
    for (obj, _) in ours {
        delete::delete_in(txn, kind, &obj.key)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_resolve_by_number_name_or_default() {
        let svc = json!({"spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": "web"},
            {"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"},
            {"name": "plain", "port": 9090},
            {"name": "missing", "port": 1, "targetPort": "nope"},
        ]}});
        let pod = json!({"spec": {"containers": [{"ports": [{"name": "web", "containerPort": 8080}]}]}});
        assert_eq!(
            resolve_ports(&svc, &pod),
            vec![
                json!({"name": "http", "port": 8080, "protocol": "TCP"}),
                json!({"name": "grpc", "port": 17070, "protocol": "TCP", "appProtocol": "grpc"}),
                json!({"name": "plain", "port": 9090, "protocol": "TCP"}),
            ]
        );
    }

    #[test]
    fn slices_are_ours_stale_or_foreign() {
        let slice = |managed: bool, owner: Option<&str>| {
            let mut s = json!({"metadata": {"labels": {}}});
            if managed {
                s["metadata"]["labels"][MANAGED_BY] = json!(CONTROLLER);
            }
            if let Some(uid) = owner {
                s["metadata"]["ownerReferences"] =
                    json!([{"kind": "Service", "name": "s", "uid": uid, "controller": true}]);
            }
            s
        };
        assert_eq!(owner(&slice(true, Some("u1")), "u1"), Owner::Ours);
        assert_eq!(owner(&slice(true, Some("u0")), "u1"), Owner::Stale);
        // Hand-written slices imitating the controller (the embedded topology's) have no owner.
        assert_eq!(owner(&slice(true, None), "u1"), Owner::Foreign);
        assert_eq!(owner(&slice(false, Some("u1")), "u1"), Owner::Foreign);
        assert!(concerns_controller(&slice(true, None)));
        assert!(!concerns_controller(&slice(true, Some("u1"))));
    }
}
