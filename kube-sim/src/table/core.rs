//! Printers of the core (`v1`) kinds.

use serde_json::{Value, json};

use super::{
    AGE, Column, NAME, Printer, age, col, ingress_points, int, items, labels, len, name, since, text,
    text_or, wide,
};

pub(crate) static POD: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        col(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
        ),
        col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container \
             in this pod has restarted.",
        ),
        AGE,
        wide(
            "IP",
            "podIP address allocated to the pod. Routable at least within the cluster.",
        ),
        wide("Node", "NodeName indicates in which node this pod is scheduled."),
        wide(
            "Nominated Node",
            "nominatedNodeName is set when this pod preempts other pods on the node.",
        ),
        wide(
            "Readiness Gates",
            "If specified, all readiness gates will be evaluated for pod readiness.",
        ),
    ],
    cells: pod,
};

fn is_true(conditions: &Value, kind: &str) -> bool {
    items(conditions)
        .iter()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// A terminated container's reason, or `Signal:N` / `ExitCode:N` when it gives none.
fn terminated_reason(t: &Value) -> String {
    match text(&t["reason"]) {
        "" if int(&t["signal"]) != 0 => format!("Signal:{}", int(&t["signal"])),
        "" => format!("ExitCode:{}", int(&t["exitCode"])),
        r => r.to_string(),
    }
}

/// Whether an init container is a sidecar (`restartPolicy: Always`).
fn restartable(spec: &Value, name: &Value) -> bool {
    items(&spec["initContainers"])
        .iter()
        .any(|c| c["name"] == *name && c["restartPolicy"] == "Always")
}

/// The real printer's READY / STATUS / RESTARTS logic, init containers and sidecars included.
fn pod(o: &Value, now: i64) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let total = items(&spec["containers"]).len()
        + items(&spec["initContainers"])
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let mut reason = text_or(&status["reason"], text(&status["phase"])).to_string();
    if items(&status["conditions"])
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    // Restarts and the latest restart time, over init containers, then (when initialised) sidecars only.
    let (mut restarts, mut last) = (0i64, None::<Value>);
    let (mut sidecar_restarts, mut sidecar_last) = (0i64, None::<Value>);
    let later = |last: &mut Option<Value>, c: &Value| {
        let t = &c["lastState"]["terminated"]["finishedAt"];
        if t.is_string() && last.as_ref().is_none_or(|l| text(l) < text(t)) {
            *last = Some(t.clone());
        }
    };
    let init_statuses = items(&status["initContainerStatuses"]);
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += int(&c["restartCount"]);
        later(&mut last, c);
        let sidecar = restartable(spec, &c["name"]);
        if sidecar {
            sidecar_restarts += int(&c["restartCount"]);
            later(&mut sidecar_last, c);
        }
        let (state, terminated) = (&c["state"], &c["state"]["terminated"]);
        let waiting = text(&state["waiting"]["reason"]);
        if terminated.is_object() && int(&terminated["exitCode"]) == 0 {
            continue;
        }
        if sidecar && c["started"] == true {
            if c["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if terminated.is_object() {
            format!("Init:{}", terminated_reason(terminated))
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{}", items(&spec["initContainers"]).len())
        };
        initializing = true;
        break;
    }
    if !initializing || is_true(&status["conditions"], "Initialized") {
        (restarts, last) = (sidecar_restarts, sidecar_last);
        let mut running = false;
        for c in items(&status["containerStatuses"]).iter().rev() {
            restarts += int(&c["restartCount"]);
            later(&mut last, c);
            let state = &c["state"];
            let waiting = text(&state["waiting"]["reason"]);
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if state["terminated"].is_object() {
                reason = terminated_reason(&state["terminated"]);
            } else if c["ready"] == true && state["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = if is_true(&status["conditions"], "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }
    let deleting = o["metadata"]["deletionTimestamp"].is_string();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(text(&status["phase"]), "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    let restarts = match &last {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(t, now)),
        _ => restarts.to_string(),
    };
    let gates = items(&spec["readinessGates"]);
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let passing = gates
            .iter()
            .filter(|g| {
                items(&status["conditions"])
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{passing}/{}", gates.len())
    };
    let ip = items(&status["podIPs"]).first().map_or("", |p| text(&p["ip"]));
    vec![
        name(o),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        age(o, now),
        json!(if ip.is_empty() { "<none>" } else { ip }),
        json!(text_or(&spec["nodeName"], "<none>")),
        json!(text_or(&status["nominatedNodeName"], "<none>")),
        json!(gates),
    ]
}

pub(crate) static SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col("Type", "string", "type determines how the Service is exposed."),
        col(
            "Cluster-IP",
            "string",
            "clusterIP is the IP address of the service.",
        ),
        col(
            "External-IP",
            "string",
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        col(
            "Port(s)",
            "string",
            "The list of ports that are exposed by this service.",
        ),
        AGE,
        wide(
            "Selector",
            "Route service traffic to pods with label keys and values matching this selector.",
        ),
    ],
    cells: service,
};

fn service(o: &Value, now: i64) -> Vec<Value> {
    let spec = &o["spec"];
    let cluster_ip = items(&spec["clusterIPs"])
        .first()
        .map_or_else(|| text_or(&spec["clusterIP"], "<none>"), |ip| text(ip));
    let external: Vec<&str> = items(&spec["externalIPs"]).iter().map(text).collect();
    let ty = text_or(&spec["type"], "ClusterIP");
    let external = match ty {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let lb = ingress_points(&o["status"]["loadBalancer"]);
            let all: Vec<&str> = lb.split(',').filter(|s| !s.is_empty()).chain(external).collect();
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(&spec["externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = items(&spec["ports"])
        .iter()
        .map(|p| {
            let proto = text_or(&p["protocol"], "TCP");
            match int(&p["nodePort"]) {
                0 => format!("{}/{proto}", int(&p["port"])),
                node => format!("{}:{node}/{proto}", int(&p["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        name(o),
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age(o, now),
        json!(labels(&spec["selector"])),
    ]
}

pub(crate) static NODE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", "Kubelet Version reported by the node."),
        wide("Internal-IP", "List of addresses reachable to the node."),
        wide("External-IP", "List of addresses reachable to the node."),
        wide(
            "OS-Image",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        wide(
            "Kernel-Version",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        wide(
            "Container-Runtime",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ],
    cells: node,
};

fn node(o: &Value, now: i64) -> Vec<Value> {
    let status = &o["status"];
    let mut state: Vec<&str> = match items(&status["conditions"]).iter().find(|c| c["type"] == "Ready") {
        Some(c) if c["status"] == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if o["spec"]["unschedulable"] == true {
        state.push("SchedulingDisabled");
    }
    let mut roles: Vec<&str> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) => Some(role),
            None if k == "kubernetes.io/role" => v.as_str(),
            None => None,
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let address = |ty: &str| {
        items(&status["addresses"])
            .iter()
            .find(|a| a["type"] == ty)
            .map_or("<none>", |a| text(&a["address"]))
            .to_string()
    };
    let info = &status["nodeInfo"];
    vec![
        name(o),
        json!(state.join(",")),
        json!(if roles.is_empty() {
            "<none>".into()
        } else {
            roles.join(",")
        }),
        age(o, now),
        json!(text(&info["kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(text_or(&info["osImage"], "<unknown>")),
        json!(text_or(&info["kernelVersion"], "<unknown>")),
        json!(text_or(&info["containerRuntimeVersion"], "<unknown>")),
    ]
}

pub(crate) static NAMESPACE: Printer = Printer {
    columns: &[NAME, col("Status", "string", "The status of the namespace"), AGE],
    cells: |o, now| vec![name(o), json!(text(&o["status"]["phase"])), age(o, now)],
};

pub(crate) static SECRET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            "string",
            "Used to facilitate programmatic handling of secret data.",
        ),
        col("Data", "string", "Data contains the secret data."),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o),
            json!(text(&o["type"])),
            json!(len(&o["data"])),
            age(o, now),
        ]
    },
};

pub(crate) static CONFIG_MAP: Printer = Printer {
    columns: &[
        NAME,
        col("Data", "string", "Data contains the configuration data."),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o),
            json!(len(&o["data"]) + len(&o["binaryData"])),
            age(o, now),
        ]
    },
};

pub(crate) static SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Secrets",
            "string",
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        AGE,
    ],
    cells: |o, now| vec![name(o), json!(len(&o["secrets"])), age(o, now)],
};

pub(crate) static ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Endpoints",
            "string",
            "The set of all endpoints is the union of all subsets.",
        ),
        AGE,
    ],
    cells: |o, now| vec![name(o), json!(endpoints(o)), age(o, now)],
};

/// `ip:port` per address and port, at most three then ` + N more...`; `<none>` without subsets.
fn endpoints(o: &Value) -> String {
    let subsets = items(&o["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let (mut list, mut count) = (Vec::new(), 0);
    for ss in subsets {
        let addrs = items(&ss["addresses"]);
        let ports = items(&ss["ports"]);
        if ports.is_empty() {
            count += addrs.len();
            list.extend(addrs.iter().map(|a| text(&a["ip"]).to_string()));
        }
        for p in ports {
            count += addrs.len();
            list.extend(addrs.iter().map(|a| {
                let ip = text(&a["ip"]);
                match ip.contains(':') {
                    true => format!("[{ip}]:{}", int(&p["port"])),
                    false => format!("{ip}:{}", int(&p["port"])),
                }
            }));
        }
    }
    match super::list_with_more(list, count).as_str() {
        "<unset>" => "<none>".to_string(),
        s => s.to_string(),
    }
}

pub(crate) static EVENT: Printer = Printer {
    columns: &[
        col(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        col(
            "Type",
            "string",
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        col(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col("Object", "string", "The object that this event is about."),
        wide(
            "Subobject",
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
        ),
        wide(
            "Source",
            "The component reporting this event. Should be a short machine understandable string.",
        ),
        col(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
        ),
        wide(
            "First Seen",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        ),
        wide("Count", "The number of times this event has occurred."),
        Column { priority: 1, ..NAME },
    ],
    cells: event,
};

fn event(o: &Value, now: i64) -> Vec<Value> {
    let first = match &o["firstTimestamp"] {
        t @ Value::String(_) => since(t, now),
        _ => since(&o["eventTime"], now),
    };
    let mut last = match &o["lastTimestamp"] {
        t @ Value::String(_) => since(t, now),
        _ => first.clone(),
    };
    let mut count = int(&o["count"]);
    if o["series"].is_object() {
        last = since(&o["series"]["lastObservedTime"], now);
        count = int(&o["series"]["count"]);
    } else if count == 0 {
        count = 1;
    }
    let involved = &o["involvedObject"];
    let kind = text(&involved["kind"]).to_lowercase();
    let target = match text(&involved["name"]) {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = text_or(&o["source"]["component"], text(&o["reportingComponent"]));
    let instance = text_or(&o["source"]["host"], text(&o["reportingInstance"]));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(text(&o["type"])),
        json!(text(&o["reason"])),
        json!(target),
        json!(text(&involved["fieldPath"])),
        json!(source),
        json!(text(&o["message"]).trim()),
        json!(first),
        json!(count),
        name(o),
    ]
}

/// `RWO,ROX,RWX,RWOP` for the access modes present, in that order.
fn access_modes(modes: &Value) -> String {
    let has = |m: &str| items(modes).iter().any(|v| v == m);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .into_iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The phase, or `Terminating` while being deleted.
fn volume_phase(o: &Value) -> &str {
    if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        text(&o["status"]["phase"])
    }
}

pub(crate) static PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The phase of the claim."),
        col(
            "Volume",
            "string",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            "string",
            "capacity represents the actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains the desired access modes the volume should have.",
        ),
        col(
            "StorageClass",
            "string",
            "storageClassName is the name of the StorageClass required by the claim.",
        ),
        col(
            "VolumeAttributesClass",
            "string",
            "volumeAttributesClassName may be used to set the VolumeAttributesClass used by this claim.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let bound = !text(&spec["volumeName"]).is_empty();
        vec![
            name(o),
            json!(volume_phase(o)),
            json!(text(&spec["volumeName"])),
            json!(if bound {
                text(&status["capacity"]["storage"])
            } else {
                ""
            }),
            json!(if bound {
                access_modes(&status["accessModes"])
            } else {
                String::new()
            }),
            json!(text(&spec["storageClassName"])),
            json!(text_or(&spec["volumeAttributesClassName"], "<unset>")),
            age(o, now),
            json!(text_or(&spec["volumeMode"], "<unset>")),
        ]
    },
};

pub(crate) static PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Capacity",
            "string",
            "capacity is the description of the persistent volume's resources and capacity.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains all ways the volume can be mounted.",
        ),
        col(
            "Reclaim Policy",
            "string",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        col(
            "Status",
            "string",
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        col(
            "Claim",
            "string",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        col(
            "StorageClass",
            "string",
            "storageClassName is the name of StorageClass to which this persistent volume belongs.",
        ),
        col(
            "VolumeAttributesClass",
            "string",
            "Name of VolumeAttributesClass to which this persistent volume belongs.",
        ),
        col(
            "Reason",
            "string",
            "reason is a brief CamelCase string that describes any failure.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        ),
    ],
    cells: |o, now| {
        let spec = &o["spec"];
        let claim = &spec["claimRef"];
        let claim = if claim.is_object() {
            format!("{}/{}", text(&claim["namespace"]), text(&claim["name"]))
        } else {
            String::new()
        };
        vec![
            name(o),
            json!(text(&spec["capacity"]["storage"])),
            json!(access_modes(&spec["accessModes"])),
            json!(text(&spec["persistentVolumeReclaimPolicy"])),
            json!(volume_phase(o)),
            json!(claim),
            json!(text(&spec["storageClassName"])),
            json!(text_or(&spec["volumeAttributesClassName"], "<unset>")),
            json!(text(&o["status"]["reason"])),
            age(o, now),
            json!(text_or(&spec["volumeMode"], "<unset>")),
        ]
    },
};
