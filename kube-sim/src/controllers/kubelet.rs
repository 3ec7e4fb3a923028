//! The kubelet stand-in: a pod bound to an existing node and still Pending is started at once. It gets
//! an IP from the node's `spec.podCIDR` (unique on the node), the node's InternalIP as host IP, phase
//! Running, the conditions and container statuses a real kubelet reports, and a QoS class.
//!
//! Readiness knob: the annotation `kube-sim.meshd.dev/ready: "false"` on a pod (or its template) keeps
//! it `Ready=False`/`ContainersReady=False`; while the annotation is present, changing it to `"true"`
//! makes the pod ready. Pods without it are ready as soon as they run, and pods whose status came from
//! manifests are never touched.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::meta::set_condition;
use super::{controller_opts, kind_named, node_kind, pod_kind};
use crate::error::Error;
use crate::object::{Key, now_secs, rfc3339};
use crate::store::Txn;
use crate::write::{self, StatusMode};

pub(crate) const READY_ANNOTATION: &str = "kube-sim.meshd.dev/ready";

pub(super) fn sync(txn: &mut Txn<'_>, key: &Key) -> Result<(), Error> {
    let Some(current) = txn.get(pod_kind(), key).cloned() else {
        return Ok(());
    };
    // Unbound pods are not the kubelet's: known from the extracted field, without parsing.
    if current.node_name.as_deref().is_none_or(str::is_empty) {
        return Ok(());
    }
    let pod = current.value();
    let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let Some(node) = txn
        .get(node_kind(), &(String::new(), node.to_string()))
        .map(|n| n.value())
    else {
        return Ok(());
    };
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    let status = match phase {
        "Pending" if pod["status"]["podIP"].is_null() && pod["metadata"]["deletionTimestamp"].is_null() => {
            let Some(ip) = pod_ip(txn, &pod, &node) else {
                return Ok(());
            };
            started(&pod, &node, ip)
        }
        "Running" if pod["metadata"]["annotations"][READY_ANNOTATION].is_string() => {
            let mut status = pod["status"].clone();
            set_readiness(&pod, &mut status);
            status
        }
        _ => return Ok(()),
    };
    if status != pod["status"] {
        let mut body = pod.clone();
        body["status"] = status;
        let opts = controller_opts(StatusMode::Only);
        write::update_in(txn, kind_named("", "Pod"), &current, body, &opts)?;
    }
    Ok(())
}

fn wants_ready(pod: &Value) -> bool {
    pod["metadata"]["annotations"][READY_ANNOTATION] != "false"
}

fn container_names(pod: &Value) -> Vec<&str> {
    pod["spec"]["containers"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

/// The Ready and ContainersReady conditions and the containers' `ready` flags, from the knob.
fn set_readiness(pod: &Value, status: &mut Value) {
    let ready = wants_ready(pod);
    let message = format!(
        "containers with unready status: [{}]",
        container_names(pod).join(" ")
    );
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    for kind in ["Ready", "ContainersReady"] {
        if ready {
            set_condition(&mut conditions, kind, true, None, None, false);
        } else {
            set_condition(
                &mut conditions,
                kind,
                false,
                Some("ContainersNotReady"),
                Some(&message),
                false,
            );
        }
    }
    status["conditions"] = json!(conditions);
    if let Some(list) = status["containerStatuses"].as_array_mut() {
        for c in list {
            c["ready"] = json!(ready);
        }
    }
}

fn internal_ip(node: &Value) -> Option<&str> {
    node["status"]["addresses"]
        .as_array()?
        .iter()
        .find(|a| a["type"] == "InternalIP")?["address"]
        .as_str()
}

/// A free address of the node's pod CIDR (network and gateway `.1` skipped), or the host's for
/// host-network pods.
fn pod_ip(txn: &Txn<'_>, pod: &Value, node: &Value) -> Option<String> {
    if pod["spec"]["hostNetwork"] == true {
        return internal_ip(node).map(str::to_string);
    }
    let (base, prefix) = parse_cidr(node["spec"]["podCIDR"].as_str()?)?;
    let node_name = node["metadata"]["name"].as_str().unwrap_or_default();
    let used: HashSet<String> = txn
        .objects(pod_kind())
        .filter(|o| o.node_name.as_deref() == Some(node_name))
        .filter_map(|o| o.value()["status"]["podIP"].as_str().map(str::to_string))
        .collect();
    let size = 1u64 << (32 - u32::from(prefix));
    (2..size.saturating_sub(1))
        .map(|i| Ipv4Addr::from(u32::from(base).wrapping_add(i as u32)).to_string())
        .find(|ip| !used.contains(ip))
}

pub(super) fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, prefix) = cidr.split_once('/')?;
    let prefix: u8 = prefix.parse().ok().filter(|p| (8..=30).contains(p))?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let mask = u32::MAX << (32 - u32::from(prefix));
    Some((Ipv4Addr::from(u32::from(ip) & mask), prefix))
}

fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// `Guaranteed` when every container has equal cpu and memory requests and limits, `BestEffort` when
/// none sets any, `Burstable` otherwise.
fn qos_class(pod: &Value) -> &'static str {
    let containers = pod["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let any = containers.iter().any(|c| {
        ["requests", "limits"]
            .iter()
            .any(|f| c["resources"][f].as_object().is_some_and(|m| !m.is_empty()))
    });
    let guaranteed = !containers.is_empty()
        && containers.iter().all(|c| {
            ["cpu", "memory"].iter().all(|r| {
                let limit = &c["resources"]["limits"][r];
                !limit.is_null()
                    && (c["resources"]["requests"][r].is_null() || c["resources"]["requests"][r] == *limit)
            })
        });
    match (any, guaranteed) {
        (_, true) => "Guaranteed",
        (false, _) => "BestEffort",
        _ => "Burstable",
    }
}

/// The status of a pod the node has just started.
fn started(pod: &Value, node: &Value, ip: String) -> Value {
    let now = rfc3339(now_secs());
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let container_status = |c: &Value, init: bool| {
        let name = c["name"].as_str().unwrap_or_default();
        let image = c["image"].as_str().unwrap_or_default();
        let state = if init {
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now,
                "containerID": format!("containerd://{}", digest(&[uid, name]))}})
        } else {
            json!({"running": {"startedAt": now}})
        };
        json!({
            "name": name, "state": state, "lastState": {}, "ready": init, "restartCount": 0,
            "image": image, "imageID": format!("{image}@sha256:{}", digest(&[image])),
            "containerID": format!("containerd://{}", digest(&[uid, name])), "started": !init,
        })
    };
    let list = |field: &str, init: bool| -> Vec<Value> {
        pod["spec"][field]
            .as_array()
            .map(|cs| cs.iter().map(|c| container_status(c, init)).collect())
            .unwrap_or_default()
    };
    let mut conditions = pod["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for kind in ["PodReadyToStartContainers", "Initialized", "PodScheduled"] {
        set_condition(&mut conditions, kind, true, None, None, false);
    }
    let host_ip = internal_ip(node).unwrap_or_default();
    let mut status = json!({
        "phase": "Running", "conditions": conditions,
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now,
        "containerStatuses": list("containers", false), "qosClass": qos_class(pod),
    });
    let init = list("initContainers", true);
    if !init.is_empty() {
        status["initContainerStatuses"] = json!(init);
    }
    if let Some(o) = status.as_object_mut().filter(|_| host_ip.is_empty()) {
        o.remove("hostIP");
        o.remove("hostIPs");
    }
    set_readiness(pod, &mut status);
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: Value) -> Value {
        json!({"metadata": {"uid": "u1", "annotations": annotations},
               "spec": {"containers": [{"name": "web", "image": "nginx"}]}, "status": {"phase": "Pending"}})
    }

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap()
    }

    #[test]
    fn a_started_pod_runs_ready_on_its_node() {
        let node = json!({"status": {"addresses": [{"type": "InternalIP", "address": "172.18.0.2"}]}});
        let s = started(&pod(json!({})), &node, "10.244.0.2".into());
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIPs"], json!([{"ip": "10.244.0.2"}]));
        assert_eq!(s["hostIP"], "172.18.0.2");
        assert_eq!(s["qosClass"], "BestEffort");
        for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert_eq!(condition(&s, kind)["status"], "True", "{kind}");
        }
        let c = &s["containerStatuses"][0];
        assert_eq!(
            (
                c["ready"].clone(),
                c["started"].clone(),
                c["restartCount"].clone()
            ),
            (json!(true), json!(true), json!(0))
        );
        assert!(c["containerID"].as_str().unwrap().starts_with("containerd://"));
        assert!(c["state"]["running"]["startedAt"].is_string());
    }

    #[test]
    fn the_annotation_holds_a_pod_not_ready() {
        let s = started(
            &pod(json!({READY_ANNOTATION: "false"})),
            &json!({}),
            "10.0.0.2".into(),
        );
        assert_eq!(condition(&s, "Ready")["status"], "False");
        assert_eq!(condition(&s, "ContainersReady")["reason"], "ContainersNotReady");
        assert_eq!(
            condition(&s, "Ready")["message"],
            "containers with unready status: [web]"
        );
        assert_eq!(s["containerStatuses"][0]["ready"], false);
        assert!(s.get("hostIP").is_none());
    }

    #[test]
    fn qos_classes() {
        let with = |r: Value| json!({"spec": {"containers": [{"resources": r}]}});
        assert_eq!(qos_class(&with(json!({}))), "BestEffort");
        assert_eq!(qos_class(&with(json!({"requests": {"cpu": "1"}}))), "Burstable");
        assert_eq!(
            qos_class(&with(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
    }

    #[test]
    fn cidrs_parse_to_their_network() {
        assert_eq!(
            parse_cidr("10.244.3.7/24"),
            Some((Ipv4Addr::new(10, 244, 3, 0), 24))
        );
        assert_eq!(parse_cidr("10.244.3.0/33"), None);
        assert_eq!(parse_cidr("x/24"), None);
    }
}
