//! Printers of the networking, coordination, RBAC, policy and autoscaling kinds.

use serde_json::{Value, json};

use super::{
    AGE, NAME, Printer, age, col, ingress_points, int, int_or_string, items, list_with_more, name, text,
    text_or, wide,
};

pub(crate) static ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "AddressType",
            "string",
            "addressType specifies the type of address carried by this EndpointSlice.",
        ),
        col(
            "Ports",
            "string",
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
        ),
        col(
            "Endpoints",
            "string",
            "endpoints is a list of unique endpoints in this slice.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let ports = items(&o["ports"]);
        let port_list = ports
            .iter()
            .map(|p| match (p["port"].as_i64(), p["name"].as_str()) {
                (Some(n), _) => n.to_string(),
                (None, Some(n)) => n.to_string(),
                _ => "*".to_string(),
            })
            .collect();
        let addresses: Vec<String> = items(&o["endpoints"])
            .iter()
            .flat_map(|e| items(&e["addresses"]).iter().map(|a| text(a).to_string()))
            .collect();
        let count = addresses.len();
        vec![
            name(o),
            json!(text(&o["addressType"])),
            json!(list_with_more(port_list, ports.len())),
            json!(list_with_more(addresses, count)),
            age(o, now),
        ]
    },
};

pub(crate) static LEASE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Holder",
            "string",
            "holderIdentity contains the identity of the holder of a current lease.",
        ),
        AGE,
    ],
    cells: |o, now| vec![name(o), json!(text(&o["spec"]["holderIdentity"])), age(o, now)],
};

/// Role and ClusterRole.
pub(crate) static CLUSTER_ROLE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Created At",
            "date",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
    ],
    cells: |o, _| vec![name(o), o["metadata"]["creationTimestamp"].clone()],
};

/// RoleBinding and ClusterRoleBinding.
pub(crate) static ROLE_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Role",
            "string",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
        ),
        AGE,
        wide("Users", "Users in the roleBinding"),
        wide("Groups", "Groups in the roleBinding"),
        wide("ServiceAccounts", "ServiceAccounts in the roleBinding"),
    ],
    cells: |o, now| {
        let role = &o["roleRef"];
        let subjects = items(&o["subjects"]);
        let of = |kind: &str| {
            subjects
                .iter()
                .filter(|s| s["kind"] == kind)
                .map(|s| match kind {
                    "ServiceAccount" => format!("{}/{}", text(&s["namespace"]), text(&s["name"])),
                    _ => text(&s["name"]).to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            name(o),
            json!(format!("{}/{}", text(&role["kind"]), text(&role["name"]))),
            age(o, now),
            json!(of("User")),
            json!(of("Group")),
            json!(of("ServiceAccount")),
        ]
    },
};

pub(crate) static POD_DISRUPTION_BUDGET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        col(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let spec = &o["spec"];
        let or_na = |v: &Value| int_or_string(v).unwrap_or_else(|| "N/A".to_string());
        vec![
            name(o),
            json!(or_na(&spec["minAvailable"])),
            json!(or_na(&spec["maxUnavailable"])),
            json!(int(&o["status"]["disruptionsAllowed"])),
            age(o, now),
        ]
    },
};

pub(crate) static HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Reference",
            "string",
            "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
        ),
        col(
            "Targets",
            "string",
            "metrics contains the specifications for which to use to calculate the desired replica count.",
        ),
        col(
            "MinPods",
            "string",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
        ),
        col(
            "MaxPods",
            "string",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
        ),
        col(
            "Replicas",
            "string",
            "currentReplicas is current number of replicas of pods managed by this autoscaler.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let target = &spec["scaleTargetRef"];
        vec![
            name(o),
            json!(format!("{}/{}", text(&target["kind"]), text(&target["name"]))),
            json!(hpa_targets(
                items(&spec["metrics"]),
                items(&status["currentMetrics"])
            )),
            json!(
                spec["minReplicas"]
                    .as_i64()
                    .map_or_else(|| "<unset>".to_string(), |m| m.to_string())
            ),
            json!(int(&spec["maxReplicas"])),
            json!(int(&status["currentReplicas"])),
            age(o, now),
        ]
    },
};

/// `cpu: 40%/80%, memory: <unknown>/200Mi` (at most two, then ` + N more...`); `<none>` without metrics.
fn hpa_targets(specs: &[Value], current: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let ty = text(&m["type"]);
            let field = match ty {
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                "Pods" => "pods",
                "Object" => "object",
                _ => "external",
            };
            let (src, cur) = (&m[field], current.get(i).map(|c| &c[field]["current"]));
            let t = &src["target"];
            let (target, now) = if let Some(u) = t["averageUtilization"].as_i64() {
                let now = cur
                    .and_then(|c| c["averageUtilization"].as_i64())
                    .map(|u| format!("{u}%"));
                (format!("{u}%"), now)
            } else {
                let key = if t["averageValue"].is_null() {
                    "value"
                } else {
                    "averageValue"
                };
                let now = cur.and_then(|c| int_or_string(&c[key]));
                (
                    int_or_string(&t[key]).unwrap_or_else(|| "<auto>".to_string()),
                    now,
                )
            };
            let pair = format!("{}/{target}", now.as_deref().unwrap_or("<unknown>"));
            match ty {
                "Resource" | "ContainerResource" => format!("{}: {pair}", text(&src["name"])),
                _ => pair,
            }
        })
        .collect();
    if list.len() > 2 {
        format!("{} + {} more...", list[..2].join(", "), list.len() - 2)
    } else {
        list.join(", ")
    }
}

pub(crate) static INGRESS: Printer = Printer {
    columns: &[
        NAME,
        col("Class", "string", "The name of the IngressClass resource."),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ],
    cells: |o, now| {
        let spec = &o["spec"];
        let rules = items(&spec["rules"]);
        let hosts: Vec<&str> = rules
            .iter()
            .map(|r| text(&r["host"]))
            .filter(|h| !h.is_empty())
            .collect();
        let hosts = match hosts.len() {
            0 => "*".to_string(),
            n if rules.len() > 3 => format!("{} + {} more...", hosts[..n.min(3)].join(","), rules.len() - 3),
            _ => hosts.join(","),
        };
        let ports = if items(&spec["tls"]).is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            name(o),
            json!(text_or(&spec["ingressClassName"], "<none>")),
            json!(hosts),
            json!(ingress_points(&o["status"]["loadBalancer"])),
            json!(ports),
            age(o, now),
        ]
    },
};
