use serde_json::{Value, json};

use super::*;

/// 2023-11-14T22:13:20Z; objects below are created 10 minutes earlier.
const NOW: i64 = 1_700_000_000;
const CREATED: &str = "2023-11-14T22:03:20Z";

fn cells(printer: &Printer, mut o: Value) -> Vec<Value> {
    o["metadata"]["name"] = json!("x");
    o["metadata"]["creationTimestamp"] = json!(CREATED);
    let cells = (printer.cells)(&o, NOW);
    assert_eq!(cells.len(), printer.columns.len(), "one cell per column");
    cells
}

fn strs(cells: &[Value]) -> Vec<String> {
    cells
        .iter()
        .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string))
        .collect()
}

#[test]
fn pod_ready_status_restarts() {
    let running = |ready: bool| json!({"ready": ready, "restartCount": 0, "state": {"running": {}}});
    let cases = [
        (
            "pending, no statuses",
            json!({"spec": {"containers": [{}]}, "status": {"phase": "Pending"}}),
            ["0/1", "Pending", "0"],
        ),
        (
            "running and ready",
            json!({"spec": {"containers": [{}, {}]}, "status": {"phase": "Running",
                "containerStatuses": [running(true), running(true)]}}),
            ["2/2", "Running", "0"],
        ),
        (
            "running, one not ready",
            json!({"spec": {"containers": [{}, {}]}, "status": {"phase": "Running",
                "containerStatuses": [running(true), running(false)]}}),
            ["1/2", "Running", "0"],
        ),
        (
            "crash loop with a restart 3 minutes ago",
            json!({"spec": {"containers": [{}]}, "status": {"phase": "Running", "containerStatuses": [{
                "ready": false, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2023-11-14T22:10:20Z"}}}]}}),
            ["0/1", "CrashLoopBackOff", "4 (3m ago)"],
        ),
        (
            "terminated without a reason",
            json!({"spec": {"containers": [{}]}, "status": {"phase": "Running", "containerStatuses": [{
                "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}]}}),
            ["0/1", "ExitCode:137", "0"],
        ),
        (
            "waiting on the second init container",
            json!({"spec": {"initContainers": [{"name": "a"}, {"name": "b"}], "containers": [{}]},
                "status": {"phase": "Pending", "initContainerStatuses": [
                  {"name": "a", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
                  {"name": "b", "restartCount": 0, "state": {"running": {}}}]}}),
            ["0/1", "Init:1/2", "0"],
        ),
        (
            "sidecar counts toward total",
            json!({"spec": {"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{}]},
                "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                  "initContainerStatuses": [{"name": "s", "started": true, "ready": true, "restartCount": 0,
                    "state": {"running": {}}}],
                  "containerStatuses": [running(true)]}}),
            ["2/2", "Running", "0"],
        ),
        (
            "being deleted",
            json!({"metadata": {"deletionTimestamp": CREATED}, "spec": {"containers": [{}]},
                "status": {"phase": "Running", "containerStatuses": [running(true)]}}),
            ["1/1", "Terminating", "0"],
        ),
        (
            "evicted",
            json!({"spec": {"containers": [{}]}, "status": {"phase": "Failed", "reason": "Evicted"}}),
            ["0/1", "Evicted", "0"],
        ),
    ];
    for (what, pod, want) in cases {
        let got = strs(&cells(&POD, pod));
        assert_eq!(&got[1..4], &want, "{what}");
        assert_eq!(got[4], "10m", "{what}");
    }
}

#[test]
fn pod_wide_columns() {
    let pod = json!({"spec": {"containers": [{}], "nodeName": "n1", "readinessGates": [{"conditionType": "g"}]},
                     "status": {"podIPs": [{"ip": "10.0.0.5"}], "conditions": [{"type": "g", "status": "True"}]}});
    assert_eq!(&strs(&cells(&POD, pod))[5..], ["10.0.0.5", "n1", "<none>", "1/1"]);
    let bare = strs(&cells(&POD, json!({"spec": {"containers": [{}]}})));
    assert_eq!(&bare[5..], ["<none>", "<none>", "<none>", "<none>"]);
}

#[test]
fn service_columns() {
    let ports = json!([{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP", "nodePort": 30053}]);
    let cases = [
        (
            json!({"spec": {"type": "ClusterIP", "clusterIPs": ["10.96.0.10"], "ports": ports,
                          "selector": {"app": "web", "a": "b"}}}),
            [
                "ClusterIP",
                "10.96.0.10",
                "<none>",
                "80/TCP,53:30053/UDP",
                "10m",
                "a=b,app=web",
            ],
        ),
        (
            json!({"spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"]}}),
            [
                "LoadBalancer",
                "10.96.0.11",
                "<pending>",
                "<none>",
                "10m",
                "<none>",
            ],
        ),
        (
            json!({"spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"], "externalIPs": ["1.2.3.4"]},
                "status": {"loadBalancer": {"ingress": [{"ip": "172.18.0.9"}, {"hostname": "lb.example"}]}}}),
            [
                "LoadBalancer",
                "10.96.0.11",
                "172.18.0.9,lb.example,1.2.3.4",
                "<none>",
                "10m",
                "<none>",
            ],
        ),
        (
            json!({"spec": {"type": "NodePort", "clusterIPs": ["10.96.0.12"], "externalIPs": ["5.6.7.8"]}}),
            ["NodePort", "10.96.0.12", "5.6.7.8", "<none>", "10m", "<none>"],
        ),
        (
            json!({"spec": {"type": "ExternalName", "externalName": "db.example"}}),
            ["ExternalName", "<none>", "db.example", "<none>", "10m", "<none>"],
        ),
    ];
    for (svc, want) in cases {
        assert_eq!(&strs(&cells(&SERVICE, svc))[1..], &want);
    }
}

#[test]
fn workload_columns() {
    let template =
        json!({"spec": {"containers": [{"name": "a", "image": "img:1"}, {"name": "b", "image": "img:2"}]}});
    let deploy = json!({"spec": {"replicas": 3, "template": template,
                                 "selector": {"matchLabels": {"app": "web"},
                                              "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}},
                        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    assert_eq!(
        strs(&cells(&DEPLOYMENT, deploy)),
        [
            "x",
            "2/3",
            "3",
            "2",
            "10m",
            "a,b",
            "img:1,img:2",
            "app=web,tier in (a,b)"
        ]
    );
    let rc = json!({"spec": {"selector": {"app": "web"}, "template": template}, "status": {"replicas": 1}});
    assert_eq!(strs(&cells(&REPLICAS, rc))[1..4], ["1", "1", "0"]);
    assert_eq!(
        strs(&cells(&REPLICAS, json!({"spec": {"selector": {"app": "web"}}})))[7],
        "app=web"
    );
    let job = json!({"spec": {"completions": 2}, "status": {"succeeded": 2, "startTime": "2023-11-14T22:03:20Z",
                     "completionTime": "2023-11-14T22:04:00Z", "conditions": [{"type": "Complete", "status": "True"}]}});
    assert_eq!(strs(&cells(&JOB, job))[1..4], ["Complete", "2/2", "40s"]);
    let cron = json!({"spec": {"schedule": "*/5 * * * *", "suspend": false}});
    assert_eq!(
        strs(&cells(&CRON_JOB, cron))[1..6],
        ["*/5 * * * *", "<none>", "False", "0", "<none>"]
    );
}

#[test]
fn cluster_kind_columns() {
    let node = json!({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
                      "spec": {"unschedulable": true},
                      "status": {"conditions": [{"type": "Ready", "status": "False"}],
                                 "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                                 "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
    assert_eq!(
        strs(&cells(&NODE, node)),
        [
            "x",
            "NotReady,SchedulingDisabled",
            "control-plane",
            "10m",
            "v1.33.0",
            "10.0.0.1",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>"
        ]
    );
    let secret = json!({"type": "Opaque", "data": {"a": "", "b": ""}});
    assert_eq!(strs(&cells(&SECRET, secret))[1..3], ["Opaque", "2"]);
    let cm = json!({"data": {"a": ""}, "binaryData": {"b": ""}});
    assert_eq!(strs(&cells(&CONFIG_MAP, cm))[1], "2");
    let ep = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                                 "ports": [{"port": 80}, {"port": 443}]}]});
    assert_eq!(
        strs(&cells(&ENDPOINTS, ep))[1],
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
    );
    assert_eq!(strs(&cells(&ENDPOINTS, json!({})))[1], "<none>");
    let slice = json!({"addressType": "IPv4", "ports": [{"port": 80}, {"name": "dns"}],
                       "endpoints": [{"addresses": ["10.0.0.1"]}]});
    assert_eq!(
        strs(&cells(&ENDPOINT_SLICE, slice))[1..4],
        ["IPv4", "80,dns", "10.0.0.1"]
    );
    assert_eq!(
        strs(&cells(&ENDPOINT_SLICE, json!({})))[2..4],
        ["<unset>", "<unset>"]
    );
    let binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
                         "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                                      {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                                      {"kind": "User", "name": "bob"}]});
    assert_eq!(
        strs(&cells(&ROLE_BINDING, binding))[1..],
        ["ClusterRole/view", "10m", "alice, bob", "devs", "ns/sa"]
    );
    assert_eq!(strs(&cells(&CLUSTER_ROLE, json!({})))[1], CREATED);
    let pdb = json!({"spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
    assert_eq!(
        strs(&cells(&POD_DISRUPTION_BUDGET, pdb))[1..4],
        ["50%", "N/A", "1"]
    );
    let hpa = json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                              "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                           "target": {"type": "Utilization", "averageUtilization": 80}}}]},
                     "status": {"currentReplicas": 2}});
    assert_eq!(
        strs(&cells(&HORIZONTAL_POD_AUTOSCALER, hpa))[1..6],
        ["Deployment/web", "cpu: <unknown>/80%", "<unset>", "5", "2"]
    );
    let ev = json!({"type": "Warning", "reason": "BackOff", "message": " restarting \n", "count": 3,
                    "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{a}"},
                    "source": {"component": "kubelet", "host": "n1"},
                    "firstTimestamp": CREATED, "lastTimestamp": "2023-11-14T22:12:20Z"});
    assert_eq!(
        strs(&cells(&EVENT, ev)),
        [
            "60s",
            "Warning",
            "BackOff",
            "pod/web-1",
            "spec.containers{a}",
            "kubelet, n1",
            "restarting",
            "10m",
            "3",
            "x"
        ]
    );
}

#[test]
fn definitions_mark_wide_columns() {
    let defs = column_definitions(&POD);
    let wide: Vec<&str> = defs
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 1)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(wide, ["IP", "Node", "Nominated Node", "Readiness Gates"]);
    assert_eq!(column_definitions(&DEFAULT)[0]["format"], "name");
}
