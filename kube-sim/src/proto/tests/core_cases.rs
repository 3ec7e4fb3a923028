//! Round-trip cases for the core (v1) kinds.

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::json;

use super::*;

pub(super) fn core_cases() -> Vec<Case> {
    vec![
        case!(
            "v1",
            "ConfigMap",
            core::ConfigMap {
                metadata: meta("cfg"),
                data: map(&[("empty", String::new()), ("a", "1".into())]),
                binary_data: map(&[("bin", vec![0u8, 1, 2])]),
                immutable: Some(false),
            },
            json!({"metadata": meta_json("cfg"), "data": {"empty": "", "a": "1"}, "binaryData": {"bin": "AAEC"}, "immutable": false})
        ),
        case!(
            "v1",
            "Endpoints",
            core::Endpoints {
                metadata: meta("web"),
                subsets: vec![core::EndpointSubset {
                    addresses: vec![core::EndpointAddress {
                        ip: s("10.0.0.1"),
                        hostname: s(""),
                        ..Default::default()
                    }],
                    ports: vec![core::EndpointPort {
                        name: s(""),
                        port: Some(80),
                        protocol: s("TCP"),
                        app_protocol: None
                    }],
                    ..Default::default()
                }],
            },
            json!({"metadata": meta_json("web"), "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]})
        ),
        case!(
            "v1",
            "Event",
            core::Event {
                metadata: meta("ev"),
                involved_object: Some(core::ObjectReference {
                    kind: s("Pod"),
                    name: s("web"),
                    ..Default::default()
                }),
                reason: s("Started"),
                count: Some(1),
                first_timestamp: Some(meta::Time {
                    seconds: Some(1_700_000_000),
                    nanos: Some(0)
                }),
                event_time: Some(meta::MicroTime {
                    seconds: Some(1_700_000_000),
                    nanos: Some(123_456_789)
                }),
                ..Default::default()
            },
            json!({"metadata": meta_json("ev"), "involvedObject": {"kind": "Pod", "name": "web"}, "reason": "Started",
                  "count": 1, "firstTimestamp": "2023-11-14T22:13:20Z", "eventTime": "2023-11-14T22:13:20.123456Z"})
        ),
        case!(
            "v1",
            "Namespace",
            core::Namespace {
                metadata: meta("team"),
                spec: Some(core::NamespaceSpec {
                    finalizers: strings(&["kubernetes"])
                }),
                status: Some(core::NamespaceStatus {
                    phase: s(""),
                    conditions: vec![]
                }),
            },
            json!({"metadata": meta_json("team"), "spec": {"finalizers": ["kubernetes"]}, "status": {}})
        ),
        case!(
            "v1",
            "Node",
            core::Node {
                metadata: meta("n1"),
                spec: Some(core::NodeSpec {
                    pod_cidr: s("10.244.0.0/24"),
                    unschedulable: Some(false),
                    taints: vec![core::Taint {
                        key: s("k"),
                        value: s(""),
                        effect: s("NoSchedule"),
                        time_added: None
                    }],
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("n1"), "spec": {"podCIDR": "10.244.0.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]}})
        ),
        case!(
            "v1",
            "PersistentVolume",
            core::PersistentVolume {
                metadata: meta("pv"),
                spec: Some(core::PersistentVolumeSpec {
                    capacity: map(&[("storage", quantity("1Gi"))]),
                    persistent_volume_source: Some(core::PersistentVolumeSource {
                        host_path: Some(core::HostPathVolumeSource {
                            path: s("/data"),
                            r#type: None
                        }),
                        ..Default::default()
                    }),
                    access_modes: strings(&["ReadWriteOnce"]),
                    storage_class_name: s(""),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("pv"), "spec": {"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/data"}, "accessModes": ["ReadWriteOnce"]}})
        ),
        case!(
            "v1",
            "PersistentVolumeClaim",
            core::PersistentVolumeClaim {
                metadata: meta("data"),
                spec: Some(core::PersistentVolumeClaimSpec {
                    storage_class_name: s(""),
                    resources: Some(core::VolumeResourceRequirements {
                        requests: map(&[("storage", quantity("500Mi"))]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("data"), "spec": {"storageClassName": "", "resources": {"requests": {"storage": "500Mi"}}}})
        ),
        case!(
            "v1",
            "Pod",
            core::Pod {
                metadata: meta("web"),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: s(""),
                        ports: vec![core::ContainerPort {
                            container_port: Some(80),
                            host_port: Some(0),
                            protocol: s("TCP"),
                            ..Default::default()
                        }],
                        liveness_probe: Some(core::Probe {
                            handler: Some(core::ProbeHandler {
                                http_get: Some(core::HttpGetAction {
                                    path: s("/healthz"),
                                    port: int(8080),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            timeout_seconds: Some(0),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    volumes: vec![core::Volume {
                        name: s("cfg"),
                        volume_source: Some(core::VolumeSource {
                            config_map: Some(core::ConfigMapVolumeSource {
                                local_object_reference: Some(core::LocalObjectReference { name: s("cfg") }),
                                default_mode: Some(420),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    }],
                    termination_grace_period_seconds: Some(0),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("web"), "spec": {
            "containers": [{"name": "", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420}}],
            "terminationGracePeriodSeconds": 0}})
        ),
        case!(
            "v1",
            "ReplicationController",
            core::ReplicationController {
                metadata: meta("rc"),
                spec: Some(core::ReplicationControllerSpec {
                    replicas: Some(0),
                    min_ready_seconds: Some(0),
                    selector: map(&[("app", "web".to_string())]),
                    template: template(),
                }),
                status: None,
            },
            json!({"metadata": meta_json("rc"), "spec": {"replicas": 0, "selector": {"app": "web"}, "template": template_json()}})
        ),
        case!(
            "v1",
            "Secret",
            core::Secret {
                metadata: meta("creds"),
                data: map(&[("password", b"hunter2".to_vec())]),
                string_data: map(&[("user", "admin".to_string())]),
                r#type: s(""),
                immutable: None,
            },
            json!({"metadata": meta_json("creds"), "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}})
        ),
        case!(
            "v1",
            "Service",
            core::Service {
                metadata: meta("web"),
                spec: Some(core::ServiceSpec {
                    ports: vec![core::ServicePort {
                        name: s("http"),
                        protocol: s("TCP"),
                        port: Some(80),
                        target_port: text("http"),
                        node_port: Some(0),
                        app_protocol: None,
                    }],
                    cluster_ip: s("None"),
                    r#type: s("ClusterIP"),
                    session_affinity: s(""),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("web"), "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"}],
                  "clusterIP": "None", "type": "ClusterIP"}})
        ),
        case!(
            "v1",
            "ServiceAccount",
            core::ServiceAccount {
                metadata: meta("bot"),
                secrets: vec![core::ObjectReference {
                    name: s("bot-token"),
                    ..Default::default()
                }],
                image_pull_secrets: vec![core::LocalObjectReference { name: s("registry") }],
                automount_service_account_token: Some(false),
            },
            json!({"metadata": meta_json("bot"), "secrets": [{"name": "bot-token"}], "imagePullSecrets": [{"name": "registry"}],
                  "automountServiceAccountToken": false})
        ),
        case!(
            "v1",
            "ResourceQuota",
            core::ResourceQuota {
                metadata: meta("q"),
                spec: Some(core::ResourceQuotaSpec {
                    hard: map(&[("pods", quantity("2")), ("requests.cpu", quantity("500m"))]),
                    ..Default::default()
                }),
                status: Some(Default::default()),
            },
            json!({"metadata": meta_json("q"), "spec": {"hard": {"pods": "2", "requests.cpu": "500m"}}, "status": {}})
        ),
    ]
}
