//! PodSpec validation (ValidatePodSpec, the parts clients trip over) and the Pod update rule.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::validate::{self, Errs, PROTOCOLS, q};

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const MESSAGE_POLICIES: &[&str] = &["File", "FallbackToLogsOnError"];

/// Validates a pod spec found at `path` (`spec` or `spec.template.spec`).
pub(super) fn spec(errs: &mut Errs, path: &str, spec: &PodSpec) {
    if spec.containers.is_empty() {
        errs.required(format!("{path}.containers"), "");
    }
    let mut names = HashSet::new();
    let init = spec.init_containers.iter().flatten().enumerate();
    let init = init.map(|(i, c)| (format!("{path}.initContainers[{i}]"), c));
    let main = spec.containers.iter().enumerate();
    let main = main.map(|(i, c)| (format!("{path}.containers[{i}]"), c));
    for (cpath, c) in init.chain(main) {
        container(errs, &cpath, c, &mut names);
    }
    let mut volumes = HashSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let vpath = format!("{path}.volumes[{i}].name");
        if v.name.is_empty() {
            errs.required(vpath, "");
        } else {
            validate::dns_label(errs, &vpath, &v.name);
            if !volumes.insert(v.name.as_str()) {
                errs.duplicate(vpath, q(&v.name));
            }
        }
    }
    for (field, value, supported) in [
        ("restartPolicy", &spec.restart_policy, RESTART_POLICIES),
        ("dnsPolicy", &spec.dns_policy, DNS_POLICIES),
    ] {
        if let Some(v) = value {
            errs.one_of(format!("{path}.{field}"), v, supported);
        }
    }
    if let Some(sa) = spec.service_account_name.as_deref().filter(|s| !s.is_empty())
        && (!sa.split('.').all(validate::is_dns1123_label) || sa.len() > 253)
    {
        errs.invalid(
            format!("{path}.serviceAccountName"),
            q(sa),
            &validate::dns1123_subdomain_msg(),
        );
    }
    if let Some(g) = spec.termination_grace_period_seconds.filter(|g| *g < 0) {
        errs.invalid(
            format!("{path}.terminationGracePeriodSeconds"),
            g,
            "must be greater than or equal to 0",
        );
    }
}

fn container<'a>(errs: &mut Errs, path: &str, c: &'a Container, names: &mut HashSet<&'a str>) {
    if c.name.is_empty() {
        errs.required(format!("{path}.name"), "");
    } else {
        validate::dns_label(errs, &format!("{path}.name"), &c.name);
        if !names.insert(c.name.as_str()) {
            errs.duplicate(format!("{path}.name"), q(&c.name));
        }
    }
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        errs.required(format!("{path}.image"), "");
    }
    let mut port_names = HashSet::new();
    for (i, p) in c.ports.iter().flatten().enumerate() {
        let ppath = format!("{path}.ports[{i}]");
        validate::port_number(errs, &format!("{ppath}.containerPort"), p.container_port);
        if let Some(h) = p.host_port.filter(|h| *h != 0) {
            validate::port_number(errs, &format!("{ppath}.hostPort"), h);
        }
        if let Some(proto) = &p.protocol {
            errs.one_of(format!("{ppath}.protocol"), proto, PROTOCOLS);
        }
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty())
            && !port_names.insert(name)
        {
            errs.duplicate(format!("{ppath}.name"), q(name));
        }
    }
    if let Some(p) = &c.image_pull_policy {
        errs.one_of(format!("{path}.imagePullPolicy"), p, PULL_POLICIES);
    }
    if let Some(p) = &c.termination_message_policy {
        errs.one_of(format!("{path}.terminationMessagePolicy"), p, MESSAGE_POLICIES);
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        if e.name.is_empty() {
            errs.required(format!("{path}.env[{i}].name"), "");
        }
    }
}

const POD_UPDATE: &str = "pod updates may not change fields other than `spec.containers[*].image`,\
`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// ValidatePodUpdate's spec rule: only images, activeDeadlineSeconds, added tolerations and
/// schedulingGates removals may change.
pub(super) fn update(errs: &mut Errs, new: &PodSpec, old: &PodSpec) {
    let mut mutated = new.clone();
    for (m, o) in mutated.containers.iter_mut().zip(&old.containers) {
        m.image.clone_from(&o.image);
    }
    for (m, o) in mutated
        .init_containers
        .iter_mut()
        .flatten()
        .zip(old.init_containers.iter().flatten())
    {
        m.image.clone_from(&o.image);
    }
    mutated.active_deadline_seconds = old.active_deadline_seconds;
    let old_tolerations = old.tolerations.as_deref().unwrap_or_default();
    let keeps_old = old_tolerations
        .iter()
        .all(|t| new.tolerations.iter().flatten().any(|n| n == t));
    if keeps_old {
        mutated.tolerations.clone_from(&old.tolerations);
    }
    let gates_removed = new
        .scheduling_gates
        .iter()
        .flatten()
        .all(|g| old.scheduling_gates.iter().flatten().any(|o| o == g));
    if gates_removed {
        mutated.scheduling_gates.clone_from(&old.scheduling_gates);
    }
    if old.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && new.termination_grace_period_seconds == Some(1)
    {
        mutated.termination_grace_period_seconds = old.termination_grace_period_seconds;
    }
    if &mutated != old {
        errs.forbidden("spec", POD_UPDATE);
    }
}
