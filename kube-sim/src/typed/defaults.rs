//! The API server's defaulting (pkg/apis/*/v1/defaults.go) plus the admission plugins every cluster runs
//! (ServiceAccount, Priority, DefaultTolerationSeconds), applied to the typed values.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    ClientIPConfig, Container, NodeStatus, PodSecurityContext, PodSpec, PodStatus, Probe,
    ResourceRequirements, ServicePort, ServiceSpec, SessionAffinityConfig, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn or_default<T: Clone>(slot: &mut Option<T>, value: T) {
    if slot.is_none() {
        *slot = Some(value);
    }
}

fn or_str(slot: &mut Option<String>, value: &str) {
    if slot.as_deref().is_none_or(str::is_empty) {
        *slot = Some(value.to_string());
    }
}

/// Empty strings from decoders that cannot tell "absent" from "" (protobuf) count as absent.
pub(super) fn object_meta(meta: &mut ObjectMeta) {
    for field in [
        &mut meta.generate_name,
        &mut meta.namespace,
        &mut meta.resource_version,
        &mut meta.uid,
        &mut meta.self_link,
    ] {
        if field.as_deref() == Some("") {
            *field = None;
        }
    }
}

/// SetDefaults_PodSpec and the container defaults: what a Pod and a pod template share.
pub(super) fn pod_spec(spec: &mut PodSpec) {
    or_str(&mut spec.dns_policy, "ClusterFirst");
    or_str(&mut spec.restart_policy, "Always");
    or_default(&mut spec.termination_grace_period_seconds, 30);
    or_default(&mut spec.security_context, PodSecurityContext::default());
    or_str(&mut spec.scheduler_name, "default-scheduler");
    let host_network = spec.host_network == Some(true);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        container(c, host_network);
    }
    for v in spec.volumes.iter_mut().flatten() {
        volume(v);
    }
}

fn container(c: &mut Container, host_network: bool) {
    or_str(&mut c.termination_message_path, "/dev/termination-log");
    or_str(&mut c.termination_message_policy, "File");
    or_default(&mut c.resources, ResourceRequirements::default());
    if c.image_pull_policy.as_deref().is_none_or(str::is_empty) {
        c.image_pull_policy = Some(pull_policy(c.image.as_deref().unwrap_or_default()).into());
    }
    for p in c.ports.iter_mut().flatten() {
        or_str(&mut p.protocol, "TCP");
        if host_network && p.host_port.is_none_or(|h| h == 0) {
            p.host_port = Some(p.container_port);
        }
    }
    for probe in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        probe_defaults(probe);
    }
    for env in c.env.iter_mut().flatten() {
        if let Some(field_ref) = env.value_from.as_mut().and_then(|f| f.field_ref.as_mut()) {
            or_str(&mut field_ref.api_version, "v1");
        }
    }
}

/// `Always` for `:latest` or an untagged image, else `IfNotPresent` (digests count as tags).
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn probe_defaults(p: &mut Probe) {
    or_default(&mut p.timeout_seconds, 1);
    or_default(&mut p.period_seconds, 10);
    or_default(&mut p.success_threshold, 1);
    or_default(&mut p.failure_threshold, 3);
    if let Some(http) = p.http_get.as_mut() {
        or_str(&mut http.scheme, "HTTP");
    }
}

fn volume(v: &mut Volume) {
    const MODE: i32 = 0o644;
    if let Some(s) = v.secret.as_mut() {
        or_default(&mut s.default_mode, MODE);
    }
    if let Some(s) = v.config_map.as_mut() {
        or_default(&mut s.default_mode, MODE);
    }
    if let Some(s) = v.projected.as_mut() {
        or_default(&mut s.default_mode, MODE);
    }
    if let Some(s) = v.downward_api.as_mut() {
        or_default(&mut s.default_mode, MODE);
    }
    if let Some(s) = v.host_path.as_mut() {
        or_default(&mut s.type_, String::new());
    }
}

/// Pod-only defaults: SetDefaults_Pod plus the admission plugins that always run on Pod creation.
pub(super) fn pod(spec: &mut PodSpec, status: &mut Option<PodStatus>) {
    pod_spec(spec);
    or_default(&mut spec.enable_service_links, true);
    // ServiceAccount admission; the deprecated `serviceAccount` mirrors the name, as conversion does.
    or_str(&mut spec.service_account_name, "default");
    spec.service_account.clone_from(&spec.service_account_name);
    // Priority admission with no PriorityClass.
    if spec.priority_class_name.as_deref().is_none_or(str::is_empty) {
        or_default(&mut spec.priority, 0);
    }
    or_str(&mut spec.preemption_policy, "PreemptLowerPriority");
    // DefaultTolerationSeconds admission: 300s for not-ready and unreachable nodes.
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let has = tolerations.iter().any(|t| {
            t.key.as_deref() == Some(key)
                && t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "NoExecute")
        });
        if !has {
            tolerations.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(300),
                value: None,
            });
        }
    }
    let status = status.get_or_insert_with(PodStatus::default);
    if status.qos_class.is_none() {
        status.qos_class = Some(qos_class(spec).into());
    }
}

/// The QoS class the Pod strategy records on create.
fn qos_class(spec: &PodSpec) -> &'static str {
    let all: Vec<&Container> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .collect();
    let set = |m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
               r: &str| { m.and_then(|m| m.get(r)).is_some_and(|q| q.0 != "0") };
    let mut any = false;
    let mut guaranteed = true;
    for c in &all {
        let res = c.resources.as_ref();
        let (req, lim) = (
            res.and_then(|r| r.requests.as_ref()),
            res.and_then(|r| r.limits.as_ref()),
        );
        for r in ["cpu", "memory"] {
            any |= set(req, r) || set(lim, r);
            let equal =
                set(lim, r) && (!set(req, r) || req.and_then(|m| m.get(r)) == lim.and_then(|m| m.get(r)));
            guaranteed &= equal;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

pub(super) fn deployment(spec: &mut DeploymentSpec) {
    or_default(&mut spec.replicas, 1);
    let strategy = spec.strategy.get_or_insert_with(DeploymentStrategy::default);
    or_str(&mut strategy.type_, "RollingUpdate");
    if strategy.type_.as_deref() == Some("RollingUpdate") {
        let ru = strategy
            .rolling_update
            .get_or_insert_with(RollingUpdateDeployment::default);
        or_default(&mut ru.max_unavailable, IntOrString::String("25%".into()));
        or_default(&mut ru.max_surge, IntOrString::String("25%".into()));
    }
    or_default(&mut spec.revision_history_limit, 10);
    or_default(&mut spec.progress_deadline_seconds, 600);
    if let Some(pod) = spec.template.spec.as_mut() {
        pod_spec(pod);
    }
}

pub(super) fn service(spec: &mut ServiceSpec) {
    or_str(&mut spec.type_, "ClusterIP");
    or_str(&mut spec.session_affinity, "None");
    let ty = spec.type_.clone().unwrap_or_default();
    if spec.session_affinity.as_deref() == Some("ClientIP") {
        let cfg = spec
            .session_affinity_config
            .get_or_insert_with(SessionAffinityConfig::default);
        let ip = cfg.client_ip.get_or_insert_with(ClientIPConfig::default);
        or_default(&mut ip.timeout_seconds, 10800);
    }
    for p in spec.ports.iter_mut().flatten() {
        service_port(p);
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        or_str(&mut spec.external_traffic_policy, "Cluster");
    }
    if ty == "LoadBalancer" {
        or_default(&mut spec.allocate_load_balancer_node_ports, true);
    }
    if ty != "ExternalName" {
        or_str(&mut spec.internal_traffic_policy, "Cluster");
        // The simulated cluster is single-stack IPv4, as kube-apiserver's default service range.
        or_default(&mut spec.ip_families, vec!["IPv4".to_string()]);
        or_str(&mut spec.ip_family_policy, "SingleStack");
    }
}

fn service_port(p: &mut ServicePort) {
    or_str(&mut p.protocol, "TCP");
    let unset = match &p.target_port {
        None => true,
        Some(IntOrString::Int(0)) => true,
        Some(IntOrString::String(s)) => s.is_empty(),
        Some(IntOrString::Int(_)) => false,
    };
    if unset {
        p.target_port = Some(IntOrString::Int(p.port));
    }
}

/// SetDefaults_NodeStatus: allocatable defaults to capacity.
pub(super) fn node_status(status: &mut NodeStatus) {
    if status.allocatable.is_none() {
        status.allocatable.clone_from(&status.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_follows_the_tag() {
        for (image, want) in [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("localhost:5000/app", "Always"),
            ("localhost:5000/app:v1", "IfNotPresent"),
            ("app@sha256:abcd", "IfNotPresent"),
        ] {
            assert_eq!(pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn service_ports_default_protocol_and_target_port() {
        let mut spec = ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        };
        service(&mut spec);
        let p = &spec.ports.as_ref().unwrap()[0];
        assert_eq!(
            (p.protocol.as_deref(), p.target_port.clone()),
            (Some("TCP"), Some(IntOrString::Int(80)))
        );
        assert_eq!(spec.session_affinity.as_deref(), Some("None"));
        assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
    }
}
