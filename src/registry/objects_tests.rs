//! The slim objects against k8s-openapi's full ones, decoded from the same JSON: every field the
//! registry reads is the same, what it does not read is gone.

use kube::Resource;
use serde_json::{Value, json};

use super::*;

/// A pod as the API server returns it for a StatefulSet's replica (managedFields, annotations, init
/// containers, status with times), trimmed to what keeps it readable.
fn real_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-0", "generateName": "web-", "namespace": "ns", "uid": "0b5c",
            "resourceVersion": "4711", "creationTimestamp": "2026-11-27T10:00:00Z",
            "deletionTimestamp": "2026-11-27T11:00:00Z", "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web", "statefulset.kubernetes.io/pod-name": "web-0"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "9f1e",
                                 "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["example.com/keep"],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-27T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
        },
        "spec": {
            "serviceAccountName": "web-sa", "nodeName": "node-1",
            "initContainers": [{"name": "init", "image": "busybox", "ports": [{"name": "ignored", "containerPort": 1}]}],
            "containers": [
                {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "b"}],
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090}],
                 "readinessProbe": {"httpGet": {"path": "/", "port": 8080}}},
                {"name": "sidecar", "image": "proxy"}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}]
        },
        "status": {
            "phase": "Running", "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}], "hostIP": "192.168.0.2",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-27T10:00:01Z"},
                {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-27T10:00:02Z"}
            ],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "image": "nginx", "imageID": "x",
                                   "state": {"running": {"startedAt": "2026-11-27T10:00:02Z"}}}]
        }
    })
}

/// What the registry reads of any object's metadata, from the full type.
fn read_meta(m: &ObjectMeta, annotations: bool) -> ObjectMeta {
    ObjectMeta {
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        generate_name: m.generate_name.clone(),
        resource_version: m.resource_version.clone(),
        labels: m.labels.clone(),
        annotations: m.annotations.clone().filter(|_| annotations),
        owner_references: m.owner_references.clone(),
        creation_timestamp: m.creation_timestamp.clone(),
        deletion_timestamp: m.deletion_timestamp.clone(),
        ..ObjectMeta::default()
    }
}

#[test]
fn pods_keep_what_the_registry_reads() {
    let bare =
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": null}, "status": {}});
    for (case, v) in [("real", real_pod()), ("bare", bare), ("empty", json!({}))] {
        let full: core::Pod = serde_json::from_value(v.clone()).expect(case);
        let slim: Pod = serde_json::from_value(v).expect(case);
        assert_eq!(slim.metadata, read_meta(&full.metadata, false), "{case}");
        assert_eq!(slim.spec.is_some(), full.spec.is_some(), "{case}");
        if let (Some(s), Some(f)) = (&slim.spec, &full.spec) {
            assert_eq!(s.service_account_name, f.service_account_name, "{case}");
            assert_eq!(s.node_name, f.node_name, "{case}");
            let slim_ports: Vec<_> = s.containers.iter().map(|c| c.ports.clone()).collect();
            let full_ports: Vec<_> = f.containers.iter().map(|c| c.ports.clone()).collect();
            assert_eq!(slim_ports, full_ports, "{case}");
        }
        assert_eq!(slim.status.is_some(), full.status.is_some(), "{case}");
        if let (Some(s), Some(f)) = (&slim.status, &full.status) {
            assert_eq!(s.phase, f.phase, "{case}");
            assert_eq!(s.pod_ip, f.pod_ip, "{case}");
            let slim_conditions = s.conditions.as_ref().map(|c| {
                c.iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect::<Vec<_>>()
            });
            let full_conditions = f.conditions.as_ref().map(|c| {
                c.iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect::<Vec<_>>()
            });
            assert_eq!(slim_conditions, full_conditions, "{case}");
        }
    }
    // What is gone: annotations, managedFields, finalizers, uid.
    let slim: Pod = serde_json::from_value(real_pod()).expect("pod");
    let m = &slim.metadata;
    assert!(
        m.annotations.is_none() && m.managed_fields.is_none() && m.finalizers.is_none() && m.uid.is_none()
    );
}

#[test]
fn slices_keep_what_the_registry_reads() {
    let real = json!({
        "metadata": {"name": "web-abc", "namespace": "ns", "resourceVersion": "12",
                     "labels": {"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "x"},
                     "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-27T10:00:02Z"},
                     "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:endpoints": {}}}]},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.7"], "conditions": {"ready": true, "serving": true, "terminating": false},
             "hostname": "web-0", "nodeName": "node-1", "zone": "z1", "hints": {"forZones": [{"name": "z1"}]},
             "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "0b5c", "resourceVersion": "4711"}},
            {"addresses": null, "conditions": {}}
        ],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
    });
    // An empty slice as the API server sends it.
    let empty = json!({"metadata": {"name": "e", "namespace": "ns"}, "addressType": "IPv4", "endpoints": null, "ports": null});
    for (case, v) in [("real", real), ("empty", empty), ("nothing", json!({}))] {
        let full: discovery::EndpointSlice = serde_json::from_value(v.clone()).expect(case);
        let slim: EndpointSlice = serde_json::from_value(v).expect(case);
        assert_eq!(slim.metadata, read_meta(&full.metadata, false), "{case}");
        assert_eq!(slim.address_type, full.address_type, "{case}");
        assert_eq!(slim.ports, full.ports, "{case}");
        // The same field names on both types: one expression reads either.
        macro_rules! read {
            ($slice:expr) => {
                $slice
                    .endpoints
                    .iter()
                    .map(|e| {
                        let r = e.target_ref.as_ref();
                        (
                            e.addresses.clone(),
                            e.conditions.clone(),
                            e.node_name.clone(),
                            r.and_then(|r| r.kind.clone()),
                            r.and_then(|r| r.name.clone()),
                        )
                    })
                    .collect::<Vec<_>>()
            };
        }
        let (slim_endpoints, full_endpoints) = (read!(slim), read!(full));
        assert_eq!(slim_endpoints, full_endpoints, "{case}");
    }
}

#[test]
fn services_keep_their_annotations() {
    let v = json!({
        "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "3", "creationTimestamp": "2026-11-27T10:00:00Z",
                     "labels": {"app": "web"}, "annotations": {"networking.istio.io/exportTo": "."},
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"], "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080, "appProtocol": "http"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}, {"hostname": "lb.example"}]}}
    });
    let full: core::Service = serde_json::from_value(v.clone()).expect("full");
    let slim: Service = serde_json::from_value(v).expect("slim");
    assert_eq!(slim.metadata, read_meta(&full.metadata, true));
    assert!(slim.metadata.annotations.is_some() && slim.metadata.managed_fields.is_none());
    assert_eq!(slim.spec, full.spec);
    assert_eq!(slim.status, full.status);
}

#[test]
fn each_kind_is_served_at_its_full_kinds_url() {
    let ns = Some("ns");
    assert_eq!(Pod::url_path(&(), ns), core::Pod::url_path(&(), ns));
    assert_eq!(Service::url_path(&(), None), core::Service::url_path(&(), None));
    assert_eq!(
        EndpointSlice::url_path(&(), None),
        discovery::EndpointSlice::url_path(&(), None)
    );
    assert_eq!(EndpointSlice::api_version(&()), "discovery.k8s.io/v1");
    assert_eq!(Pod::kind(&()), "Pod");
}
