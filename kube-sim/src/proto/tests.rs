//! Round trips: k8s-pb values encoded as Go clients send them must decode to the JSON a real API server
//! would hold, for every decoded kind; malformed bodies are 400s, never panics.

use std::collections::{BTreeMap, BTreeSet};

use k8s_pb::api::{
    apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz, autoscaling::v1 as as1,
    autoscaling::v2 as as2, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
    discovery::v1 as disc, networking::v1 as net, policy::v1 as policy, rbac::v1 as rbac,
};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};

use super::{MAGIC, decode};
use crate::error::Error;

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn map<V>(entries: &[(&str, V)]) -> BTreeMap<String, V>
where
    V: Clone,
{
    entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// The envelope as client-go writes it (empty contentEncoding and contentType included).
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s(api_version),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

/// ObjectMeta as Go marshals it: every non-pointer field, so empty strings and a zero creationTimestamp.
fn meta(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: s(name),
        generate_name: s(""),
        namespace: s(""),
        self_link: s(""),
        uid: s(""),
        resource_version: s(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        labels: map(&[("app", "web".to_string())]),
        ..Default::default()
    })
}

/// The JSON of [`meta`]: the zero time is `null`, as Go renders it.
fn meta_json(name: &str) -> Value {
    json!({"name": name, "creationTimestamp": null, "labels": {"app": "web"}})
}

fn int(v: i32) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(0),
        int_val: Some(v),
        str_val: s(""),
    })
}

fn text(v: &str) -> Option<IntOrString> {
    Some(IntOrString {
        r#type: Some(1),
        int_val: Some(0),
        str_val: s(v),
    })
}

fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn template() -> Option<core::PodTemplateSpec> {
    Some(core::PodTemplateSpec {
        metadata: meta(""),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: s("web"),
                image: s("nginx:1.27"),
                working_dir: s(""),
                resources: Some(Default::default()),
                stdin: Some(false),
                ..Default::default()
            }],
            restart_policy: s(""),
            host_network: Some(false),
            ..Default::default()
        }),
    })
}

fn template_json() -> Value {
    json!({
        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "resources": {}}]}
    })
}

fn selector() -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_labels: map(&[("app", "web".to_string())]),
        ..Default::default()
    })
}

/// (apiVersion, kind, encoded object, its JSON without apiVersion and kind).
fn cases() -> Vec<(&'static str, &'static str, Vec<u8>, Value)> {
    macro_rules! case {
        ($api:literal, $kind:literal, $msg:expr, $json:expr) => {
            ($api, $kind, Message::encode_to_vec(&$msg), $json)
        };
    }
    let sel_json = json!({"matchLabels": {"app": "web"}});
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
            "apps/v1",
            "ControllerRevision",
            apps::ControllerRevision {
                metadata: meta("web-1"),
                data: Some(RawExtension {
                    raw: Some(br#"{"spec":{"template":{}}}"#.to_vec())
                }),
                revision: Some(1),
            },
            json!({"metadata": meta_json("web-1"), "data": {"spec": {"template": {}}}, "revision": 1})
        ),
        case!(
            "apps/v1",
            "DaemonSet",
            apps::DaemonSet {
                metadata: meta("agent"),
                spec: Some(apps::DaemonSetSpec {
                    selector: selector(),
                    template: template(),
                    revision_history_limit: Some(0),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("agent"), "spec": {"selector": sel_json, "template": template_json(), "revisionHistoryLimit": 0}})
        ),
        case!(
            "apps/v1",
            "Deployment",
            apps::Deployment {
                metadata: meta("web"),
                spec: Some(apps::DeploymentSpec {
                    replicas: Some(0),
                    selector: selector(),
                    template: template(),
                    strategy: Some(apps::DeploymentStrategy {
                        r#type: s(""),
                        rolling_update: None
                    }),
                    min_ready_seconds: Some(0),
                    paused: Some(false),
                    ..Default::default()
                }),
                status: Some(apps::DeploymentStatus {
                    replicas: Some(0),
                    ..Default::default()
                }),
            },
            json!({"metadata": meta_json("web"), "spec": {"replicas": 0, "selector": sel_json, "template": template_json(), "strategy": {}},
                  "status": {}})
        ),
        case!(
            "apps/v1",
            "ReplicaSet",
            apps::ReplicaSet {
                metadata: meta("web-1"),
                spec: Some(apps::ReplicaSetSpec {
                    replicas: Some(2),
                    selector: selector(),
                    template: template(),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("web-1"), "spec": {"replicas": 2, "selector": sel_json, "template": template_json()}})
        ),
        case!(
            "apps/v1",
            "StatefulSet",
            apps::StatefulSet {
                metadata: meta("db"),
                spec: Some(apps::StatefulSetSpec {
                    service_name: s("db"),
                    selector: selector(),
                    template: template(),
                    update_strategy: Some(apps::StatefulSetUpdateStrategy {
                        r#type: s("RollingUpdate"),
                        rolling_update: Some(apps::RollingUpdateStatefulSetStrategy {
                            partition: Some(0),
                            max_unavailable: None
                        }),
                    }),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("db"), "spec": {"serviceName": "db", "selector": sel_json, "template": template_json(),
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}})
        ),
        case!(
            "authentication.k8s.io/v1",
            "SelfSubjectReview",
            authn::SelfSubjectReview {
                metadata: meta(""),
                status: None,
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}}})
        ),
        case!(
            "authentication.k8s.io/v1",
            "TokenRequest",
            authn::TokenRequest {
                metadata: meta("bot"),
                spec: Some(authn::TokenRequestSpec {
                    audiences: strings(&["istio-ca"]),
                    expiration_seconds: Some(3600),
                    bound_object_ref: Some(authn::BoundObjectReference {
                        kind: s("Pod"),
                        api_version: s("v1"),
                        name: s("web"),
                        u_id: s("")
                    }),
                }),
                status: None,
            },
            json!({"metadata": meta_json("bot"), "spec": {"audiences": ["istio-ca"], "expirationSeconds": 3600,
                  "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}}})
        ),
        case!(
            "authentication.k8s.io/v1",
            "TokenReview",
            authn::TokenReview {
                metadata: meta(""),
                spec: Some(authn::TokenReviewSpec {
                    token: s("abc"),
                    audiences: vec![]
                }),
                status: None,
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}}, "spec": {"token": "abc"}})
        ),
        case!(
            "authorization.k8s.io/v1",
            "LocalSubjectAccessReview",
            authz::LocalSubjectAccessReview {
                metadata: meta(""),
                spec: Some(authz::SubjectAccessReviewSpec {
                    resource_attributes: Some(authz::ResourceAttributes {
                        namespace: s("default"),
                        verb: s("get"),
                        group: s(""),
                        resource: s("pods"),
                        ..Default::default()
                    }),
                    user: s("alice"),
                    extra: map(&[(
                        "scopes",
                        authz::ExtraValue {
                            items: strings(&["a", "b"])
                        }
                    )]),
                    ..Default::default()
                }),
                status: Some(authz::SubjectAccessReviewStatus {
                    allowed: Some(false),
                    denied: Some(false),
                    ..Default::default()
                }),
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                  "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}, "user": "alice",
                           "extra": {"scopes": ["a", "b"]}},
                  "status": {"allowed": false}})
        ),
        case!(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            authz::SelfSubjectAccessReview {
                metadata: meta(""),
                spec: Some(authz::SelfSubjectAccessReviewSpec {
                    non_resource_attributes: Some(authz::NonResourceAttributes {
                        path: s("/healthz"),
                        verb: s("get")
                    }),
                    resource_attributes: None,
                }),
                status: None,
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                  "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}})
        ),
        case!(
            "authorization.k8s.io/v1",
            "SelfSubjectRulesReview",
            authz::SelfSubjectRulesReview {
                metadata: meta(""),
                spec: Some(authz::SelfSubjectRulesReviewSpec {
                    namespace: s("default")
                }),
                status: None,
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}}, "spec": {"namespace": "default"}})
        ),
        case!(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            authz::SubjectAccessReview {
                metadata: meta(""),
                spec: Some(authz::SubjectAccessReviewSpec {
                    user: s("bob"),
                    groups: strings(&["devs"]),
                    uid: s(""),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": {"creationTimestamp": null, "labels": {"app": "web"}}, "spec": {"user": "bob", "groups": ["devs"]}})
        ),
        case!(
            "autoscaling/v1",
            "Scale",
            as1::Scale {
                metadata: meta("web"),
                spec: Some(as1::ScaleSpec { replicas: Some(3) }),
                status: Some(as1::ScaleStatus {
                    replicas: Some(0),
                    selector: s("")
                }),
            },
            json!({"metadata": meta_json("web"), "spec": {"replicas": 3}, "status": {"replicas": 0}})
        ),
        case!(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            as2::HorizontalPodAutoscaler {
                metadata: meta("web"),
                spec: Some(as2::HorizontalPodAutoscalerSpec {
                    scale_target_ref: Some(as2::CrossVersionObjectReference {
                        kind: s("Deployment"),
                        name: s("web"),
                        api_version: s("apps/v1")
                    }),
                    min_replicas: Some(1),
                    max_replicas: Some(5),
                    metrics: vec![as2::MetricSpec {
                        r#type: s("Resource"),
                        resource: Some(as2::ResourceMetricSource {
                            name: s("cpu"),
                            target: Some(as2::MetricTarget {
                                r#type: s("Utilization"),
                                average_utilization: Some(80),
                                ..Default::default()
                            }),
                        }),
                        ..Default::default()
                    }],
                    behavior: None,
                }),
                status: None,
            },
            json!({"metadata": meta_json("web"), "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"}, "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}})
        ),
        case!(
            "batch/v1",
            "CronJob",
            batch::CronJob {
                metadata: meta("nightly"),
                spec: Some(batch::CronJobSpec {
                    schedule: s("0 3 * * *"),
                    suspend: Some(false),
                    job_template: Some(batch::JobTemplateSpec {
                        metadata: meta(""),
                        spec: Some(batch::JobSpec {
                            template: template(),
                            ..Default::default()
                        }),
                    }),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("nightly"), "spec": {"schedule": "0 3 * * *", "suspend": false,
                  "jobTemplate": {"metadata": {"creationTimestamp": null, "labels": {"app": "web"}}, "spec": {"template": template_json()}}}})
        ),
        case!(
            "batch/v1",
            "Job",
            batch::Job {
                metadata: meta("once"),
                spec: Some(batch::JobSpec {
                    backoff_limit: Some(0),
                    completions: Some(1),
                    template: template(),
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("once"), "spec": {"backoffLimit": 0, "completions": 1, "template": template_json()}})
        ),
        case!(
            "coordination.k8s.io/v1",
            "Lease",
            coord::Lease {
                metadata: meta("leader"),
                spec: Some(coord::LeaseSpec {
                    holder_identity: s("pod-a"),
                    lease_duration_seconds: Some(15),
                    renew_time: Some(meta::MicroTime {
                        seconds: Some(1_700_000_000),
                        nanos: Some(5_000)
                    }),
                    ..Default::default()
                }),
            },
            json!({"metadata": meta_json("leader"), "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15,
                  "renewTime": "2023-11-14T22:13:20.000005Z"}})
        ),
        case!(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            disc::EndpointSlice {
                metadata: meta("web-abc"),
                address_type: s("IPv4"),
                endpoints: vec![disc::Endpoint {
                    addresses: strings(&["10.0.0.1"]),
                    conditions: Some(disc::EndpointConditions {
                        ready: Some(true),
                        serving: None,
                        terminating: Some(false)
                    }),
                    ..Default::default()
                }],
                ports: vec![disc::EndpointPort {
                    name: s(""),
                    port: Some(80),
                    ..Default::default()
                }],
            },
            json!({"metadata": meta_json("web-abc"), "addressType": "IPv4",
                  "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true, "terminating": false}}],
                  "ports": [{"name": "", "port": 80}]})
        ),
        case!(
            "meta.k8s.io/v1",
            "DeleteOptions",
            meta::DeleteOptions {
                grace_period_seconds: Some(0),
                propagation_policy: s("Foreground"),
                ..Default::default()
            },
            json!({"gracePeriodSeconds": 0, "propagationPolicy": "Foreground"})
        ),
        case!(
            "networking.k8s.io/v1",
            "Ingress",
            net::Ingress {
                metadata: meta("web"),
                spec: Some(net::IngressSpec {
                    ingress_class_name: s("nginx"),
                    rules: vec![net::IngressRule {
                        host: s("foo.com"),
                        ingress_rule_value: Some(net::IngressRuleValue {
                            http: Some(net::HttpIngressRuleValue {
                                paths: vec![net::HttpIngressPath {
                                    path: s("/"),
                                    path_type: s("Prefix"),
                                    backend: Some(net::IngressBackend {
                                        service: Some(net::IngressServiceBackend {
                                            name: s("web"),
                                            port: Some(net::ServiceBackendPort {
                                                name: s(""),
                                                number: Some(80)
                                            }),
                                        }),
                                        resource: None,
                                    }),
                                }],
                            }),
                        }),
                    }],
                    ..Default::default()
                }),
                status: None,
            },
            json!({"metadata": meta_json("web"), "spec": {"ingressClassName": "nginx", "rules": [{"host": "foo.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
        ),
        case!(
            "policy/v1",
            "Eviction",
            policy::Eviction {
                metadata: meta("web"),
                delete_options: Some(meta::DeleteOptions {
                    dry_run: strings(&["All"]),
                    ..Default::default()
                }),
            },
            json!({"metadata": meta_json("web"), "deleteOptions": {"dryRun": ["All"]}})
        ),
        case!(
            "policy/v1",
            "PodDisruptionBudget",
            policy::PodDisruptionBudget {
                metadata: meta("web"),
                spec: Some(policy::PodDisruptionBudgetSpec {
                    min_available: text("50%"),
                    selector: selector(),
                    ..Default::default()
                }),
                status: Some(policy::PodDisruptionBudgetStatus {
                    current_healthy: Some(0),
                    ..Default::default()
                }),
            },
            json!({"metadata": meta_json("web"), "spec": {"minAvailable": "50%", "selector": sel_json},
                  "status": {"currentHealthy": 0}})
        ),
        case!(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            rbac::ClusterRole {
                metadata: meta("reader"),
                rules: vec![rbac::PolicyRule {
                    verbs: strings(&["get", "list"]),
                    api_groups: strings(&[""]),
                    resources: strings(&["pods"]),
                    ..Default::default()
                }],
                aggregation_rule: None,
            },
            json!({"metadata": meta_json("reader"), "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]})
        ),
        case!(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            rbac::ClusterRoleBinding {
                metadata: meta("reader"),
                subjects: vec![rbac::Subject {
                    kind: s("ServiceAccount"),
                    api_group: s(""),
                    name: s("bot"),
                    namespace: s("default")
                }],
                role_ref: Some(rbac::RoleRef {
                    api_group: s("rbac.authorization.k8s.io"),
                    kind: s("ClusterRole"),
                    name: s("reader")
                }),
            },
            json!({"metadata": meta_json("reader"), "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "default"}],
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"}})
        ),
        case!(
            "rbac.authorization.k8s.io/v1",
            "Role",
            rbac::Role {
                metadata: meta("reader"),
                rules: vec![rbac::PolicyRule {
                    verbs: strings(&["get"]),
                    resource_names: strings(&["one"]),
                    ..Default::default()
                }],
            },
            json!({"metadata": meta_json("reader"), "rules": [{"verbs": ["get"], "resourceNames": ["one"]}]})
        ),
        case!(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            rbac::RoleBinding {
                metadata: meta("reader"),
                subjects: vec![rbac::Subject {
                    kind: s("User"),
                    api_group: s("rbac.authorization.k8s.io"),
                    name: s("alice"),
                    namespace: s("")
                }],
                role_ref: Some(rbac::RoleRef {
                    api_group: s(""),
                    kind: s("Role"),
                    name: s("reader")
                }),
            },
            json!({"metadata": meta_json("reader"), "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
                  "roleRef": {"apiGroup": "", "kind": "Role", "name": "reader"}})
        ),
    ]
}

#[test]
fn every_decoded_kind_round_trips_to_kubernetes_json() {
    let cases = cases();
    let covered: BTreeSet<_> = cases.iter().map(|c| (c.0, c.1)).collect();
    let decoded: BTreeSet<_> = super::codegen::ROOTS.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(covered, decoded, "every decoded kind has a case");
    for (api_version, kind, raw, mut want) in cases {
        want["apiVersion"] = json!(api_version);
        want["kind"] = json!(kind);
        let got = decode(&envelope(api_version, kind, raw)).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(got, want, "{kind}");
    }
}

fn bad_request(body: &[u8]) -> String {
    match decode(body) {
        Err(Error::BadRequest(msg)) => msg,
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn malformed_bodies_are_bad_requests_that_say_why() {
    assert!(bad_request(b"{\"kind\":\"ConfigMap\"}").contains("expected prefix [107 56 115 0]"));
    assert!(bad_request(b"k8s\0\x0a\x05ab").contains("envelope"));
    assert!(bad_request(&envelope("v1", "", vec![])).contains("names no kind"));
    let not_utf8 = core::ConfigMap {
        data: map(&[("a", "x".to_string())]),
        ..Default::default()
    }
    .encode_to_vec()
    .iter()
    .map(|b| if *b == b'x' { 0xff } else { *b })
    .collect();
    assert!(bad_request(&envelope("v1", "ConfigMap", not_utf8)).contains("UTF-8"));
    let bad_time = core::Event {
        first_timestamp: Some(meta::Time {
            seconds: Some(i64::MAX),
            nanos: None,
        }),
        ..Default::default()
    };
    assert!(bad_request(&envelope("v1", "Event", bad_time.encode_to_vec())).contains("out of range"));
    let bad_int = policy::PodDisruptionBudgetSpec {
        min_available: Some(IntOrString {
            r#type: Some(7),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pdb = policy::PodDisruptionBudget {
        spec: Some(bad_int),
        ..Default::default()
    };
    assert!(
        bad_request(&envelope("policy/v1", "PodDisruptionBudget", pdb.encode_to_vec()))
            .contains("IntOrString")
    );
    let bad_raw = apps::ControllerRevision {
        data: Some(RawExtension {
            raw: Some(b"{".to_vec()),
        }),
        ..Default::default()
    };
    assert!(
        bad_request(&envelope(
            "apps/v1",
            "ControllerRevision",
            bad_raw.encode_to_vec()
        ))
        .contains("not JSON")
    );
}

#[test]
fn kinds_without_a_decoder_are_unsupported_media_types() {
    let body = envelope("example.com/v1", "Widget", vec![]);
    assert!(matches!(decode(&body), Err(Error::UnsupportedMediaType(m)) if m.contains("Widget")));
}

#[test]
fn floods_of_tiny_messages_are_refused_before_decoding() {
    // 150k empty containers: 300 kB on the wire, each a ~1 kB struct once decoded.
    let spec = [0x12u8, 0x00].repeat(150_000);
    let mut pod = vec![0x12];
    prost::encoding::encode_varint(spec.len() as u64, &mut pod);
    pod.extend(spec);
    assert!(bad_request(&envelope("v1", "Pod", pod)).contains("more than 100000 fields"));
}

#[test]
fn truncated_and_corrupted_bodies_never_panic() {
    let (api_version, kind, raw, _) = cases()
        .into_iter()
        .find(|c| c.1 == "Deployment")
        .expect("a Deployment case");
    let body = envelope(api_version, kind, raw);
    for len in 0..body.len() {
        // A cut at a field boundary is a valid (smaller) message; anything else is a 400.
        if let Err(e) = decode(&body[..len]) {
            assert!(matches!(e, Error::BadRequest(_)), "{e:?}");
        }
    }
    let mut state = 0x2545_f491_u32;
    for _ in 0..2000 {
        let mut corrupt = body.clone();
        for _ in 0..3 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let at = MAGIC.len() + state as usize % (corrupt.len() - MAGIC.len());
            corrupt[at] = (state >> 8) as u8;
        }
        if let Err(e) = decode(&corrupt) {
            assert!(
                matches!(e, Error::BadRequest(_) | Error::UnsupportedMediaType(_)),
                "{e:?}"
            );
        }
    }
}
