//! Round-trip cases for the kinds of named API groups.

use k8s_pb::api::{
    apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz, autoscaling::v1 as as1,
    autoscaling::v2 as as2, batch::v1 as batch, coordination::v1 as coord, discovery::v1 as disc,
    networking::v1 as net, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use serde_json::json;

use super::*;

pub(super) fn group_cases() -> Vec<Case> {
    let sel_json = json!({"matchLabels": {"app": "web"}});
    vec![
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
            "apps/v1",
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
        case!(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            scheduling::PriorityClass {
                metadata: meta("high"),
                value: Some(0),
                global_default: Some(false),
                description: s(""),
                preemption_policy: None,
            },
            json!({"metadata": meta_json("high"), "value": 0})
        ),
    ]
}
