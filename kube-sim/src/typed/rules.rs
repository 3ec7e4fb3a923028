//! Per-kind defaulting, validation and update rules (pkg/apis/*/validation) for the served kinds.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscaler, MetricSpec, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, NamespaceSpec, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::validate::{self, Errs, PROTOCOLS, q};
use super::{Typed, defaults, meta, pod};

const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

impl Typed for Namespace {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        // The namespace strategy labels every namespace with its own name.
        if let Some(name) = self.metadata.name.clone() {
            self.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("kubernetes.io/metadata.name".into(), name);
        }
        let spec = self.spec.get_or_insert_with(NamespaceSpec::default);
        if spec.finalizers.is_none() {
            spec.finalizers = Some(vec!["kubernetes".into()]);
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

impl Typed for Pod {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        defaults::pod(self.spec.get_or_insert_with(Default::default), &mut self.status);
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        if let Some(spec) = &self.spec {
            pod::spec(errs, "spec", spec);
        }
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        if let (Some(new), Some(old)) = (&self.spec, &old.spec) {
            pod::update(errs, new, old);
        }
    }
}

impl Typed for Deployment {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        if let Some(spec) = self.spec.as_mut() {
            defaults::deployment(spec);
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        let Some(spec) = &self.spec else {
            return;
        };
        if let Some(r) = spec.replicas.filter(|r| *r < 0) {
            errs.invalid("spec.replicas", r, "must be greater than or equal to 0");
        }
        if meta::is_empty(&spec.selector) {
            errs.invalid(
                "spec.selector",
                meta::go_selector(&spec.selector),
                "empty selector is invalid for deployment",
            );
        } else {
            meta::label_selector(errs, "spec.selector", &spec.selector);
            let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.as_ref());
            if !meta::matches(&spec.selector, labels) {
                errs.invalid(
                    "spec.template.metadata.labels",
                    validate::go_map(labels),
                    "`selector` does not match template `labels`",
                );
            }
        }
        if let Some(m) = &spec.template.metadata {
            validate::labels(errs, "spec.template.metadata.labels", m.labels.as_ref());
        }
        match &spec.template.spec {
            None => errs.required("spec.template.spec.containers", ""),
            Some(p) => {
                pod::spec(errs, "spec.template.spec", p);
                if let Some(policy) = &p.restart_policy {
                    errs.one_of("spec.template.spec.restartPolicy", policy, &["Always"]);
                }
            }
        }
        if let Some(t) = spec.strategy.as_ref().and_then(|s| s.type_.as_ref()) {
            errs.one_of("spec.strategy.type", t, &["Recreate", "RollingUpdate"]);
        }
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        if let (Some(new), Some(old)) = (&self.spec, &old.spec)
            && new.selector != old.selector
        {
            errs.invalid(
                "spec.selector",
                meta::go_selector(&new.selector),
                "field is immutable",
            );
        }
    }
}

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

impl Typed for Service {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        defaults::service(self.spec.get_or_insert_with(Default::default));
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        if let Some(name) = self
            .metadata
            .name
            .as_deref()
            .filter(|n| !validate::is_dns1035_label(n))
        {
            errs.invalid("metadata.name", q(name), &validate::dns1035_label_msg());
        }
        let Some(spec) = &self.spec else {
            return;
        };
        let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
        let headless = spec.cluster_ip.as_deref() == Some("None");
        let ports = spec.ports.as_deref().unwrap_or_default();
        if ports.is_empty() && !headless && ty != "ExternalName" {
            errs.required("spec.ports", "");
        }
        errs.one_of("spec.type", ty, SERVICE_TYPES);
        if ty == "ExternalName" && spec.external_name.as_deref().is_none_or(str::is_empty) {
            errs.required("spec.externalName", "");
        }
        if let Some(a) = &spec.session_affinity {
            errs.one_of("spec.sessionAffinity", a, &["ClientIP", "None"]);
        }
        let mut names = HashSet::new();
        let mut seen = HashSet::new();
        for (i, p) in ports.iter().enumerate() {
            let path = format!("spec.ports[{i}]");
            match p.name.as_deref().unwrap_or_default() {
                "" if ports.len() > 1 => errs.required(format!("{path}.name"), ""),
                "" => {}
                name => {
                    validate::dns_label(errs, &format!("{path}.name"), name);
                    if !names.insert(name) {
                        errs.duplicate(format!("{path}.name"), q(name));
                    }
                }
            }
            validate::port_number(errs, &format!("{path}.port"), p.port);
            let proto = p.protocol.as_deref().unwrap_or_default();
            errs.one_of(format!("{path}.protocol"), proto, PROTOCOLS);
            match &p.target_port {
                Some(IntOrString::Int(n)) => validate::port_number(errs, &format!("{path}.targetPort"), *n),
                Some(IntOrString::String(s)) => port_name(errs, &format!("{path}.targetPort"), s),
                None => {}
            }
            if p.node_port.is_some_and(|n| n != 0) && ty == "ClusterIP" {
                errs.forbidden(
                    format!("{path}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                );
            }
            if !seen.insert((proto, p.port)) {
                errs.duplicate(
                    path,
                    format!(
                        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{}, \
                         TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                        q(proto),
                        p.port
                    ),
                );
            }
        }
    }
}

/// IsValidPortName: an IANA service name.
fn port_name(errs: &mut Errs, field: &str, s: &str) {
    let mut problems = Vec::new();
    if s.len() > 15 {
        problems.push("must be no more than 15 characters");
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        problems.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !s.chars().any(|c| c.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)");
    }
    if s.contains("--") {
        problems.push("must not contain consecutive hyphens");
    }
    if s.starts_with('-') || s.ends_with('-') {
        problems.push("must not begin or end with a hyphen");
    }
    for p in problems {
        errs.invalid(field, q(s), p);
    }
}

impl Typed for Node {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        if let Some(status) = self.status.as_mut() {
            defaults::node_status(status);
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

/// Data keys of ConfigMaps and Secrets, and the size cap they share.
fn data_keys<'a>(errs: &mut Errs, field: &str, keys: impl Iterator<Item = &'a String>) {
    for k in keys {
        validate::config_key(errs, field, k);
    }
}

const MAX_DATA_SIZE: usize = 1024 * 1024;

impl Typed for Secret {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        if self.type_.as_deref().is_none_or(str::is_empty) {
            self.type_ = Some("Opaque".into());
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        let data = self.data.as_ref();
        data_keys(errs, "data", data.into_iter().flat_map(BTreeMap::keys));
        let size: usize = data.into_iter().flatten().map(|(_, v)| v.0.len()).sum();
        if size > MAX_DATA_SIZE {
            errs.push(
                "data",
                format!("Too long: must have at most {MAX_DATA_SIZE} bytes"),
            );
        }
        let has = |k: &str| data.is_some_and(|d: &BTreeMap<String, ByteString>| d.contains_key(k));
        match self.type_.as_deref().unwrap_or_default() {
            "kubernetes.io/service-account-token" => {
                let annotated = self
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("kubernetes.io/service-account.name"));
                if !annotated {
                    errs.required("metadata.annotations[kubernetes.io/service-account.name]", "");
                }
            }
            "kubernetes.io/tls" => {
                for k in ["tls.key", "tls.crt"] {
                    if !has(k) {
                        errs.required(format!("data[{k}]"), "");
                    }
                }
            }
            _ => {}
        }
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        if self.type_ != old.type_ {
            errs.invalid(
                "type",
                q(self.type_.as_deref().unwrap_or_default()),
                "field is immutable",
            );
        }
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                errs.forbidden("immutable", IMMUTABLE_WHEN_SET);
            }
            if self.data != old.data {
                errs.forbidden("data", IMMUTABLE_WHEN_SET);
            }
        }
    }
}

impl Typed for ConfigMap {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        data_keys(errs, "data", self.data.iter().flat_map(BTreeMap::keys));
        data_keys(
            errs,
            "binaryData",
            self.binary_data.iter().flat_map(BTreeMap::keys),
        );
        for k in self.data.iter().flat_map(BTreeMap::keys) {
            if self.binary_data.as_ref().is_some_and(|b| b.contains_key(k)) {
                errs.invalid(
                    format!("data[{k}]"),
                    q(k),
                    "duplicate of key present in binaryData",
                );
            }
        }
        let size: usize = self
            .data
            .iter()
            .flatten()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
            + self
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| k.len() + v.0.len())
                .sum::<usize>();
        if size > MAX_DATA_SIZE {
            errs.push("", format!("Too long: must have at most {MAX_DATA_SIZE} bytes"));
        }
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        if old.immutable == Some(true) {
            if self.immutable != Some(true) {
                errs.forbidden("immutable", IMMUTABLE_WHEN_SET);
            }
            if self.data != old.data {
                errs.forbidden("data", IMMUTABLE_WHEN_SET);
            }
            if self.binary_data != old.binary_data {
                errs.forbidden("binaryData", IMMUTABLE_WHEN_SET);
            }
        }
    }
}

impl Typed for ServiceAccount {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

impl Typed for Endpoints {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        for p in self
            .subsets
            .iter_mut()
            .flatten()
            .flat_map(|s| s.ports.iter_mut().flatten())
        {
            if p.protocol.as_deref().is_none_or(str::is_empty) {
                p.protocol = Some("TCP".into());
            }
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        for (i, s) in self.subsets.iter().flatten().enumerate() {
            for (j, p) in s.ports.iter().flatten().enumerate() {
                validate::port_number(errs, &format!("subsets[{i}].ports[{j}].port"), p.port);
            }
        }
    }
}

impl Typed for Event {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const MAX_ADDRESSES: usize = 100;

impl Typed for EndpointSlice {
    fn default_fields(&mut self) {
        defaults::object_meta(&mut self.metadata);
        for p in self.ports.iter_mut().flatten() {
            if p.name.is_none() {
                p.name = Some(String::new());
            }
            if p.protocol.as_deref().is_none_or(str::is_empty) {
                p.protocol = Some("TCP".into());
            }
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        if self.address_type.is_empty() {
            errs.required("addressType", "");
        } else {
            errs.one_of("addressType", &self.address_type, ADDRESS_TYPES);
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            let path = format!("endpoints[{i}].addresses");
            match e.addresses.len() {
                0 => errs.required(path.clone(), "must contain at least 1 address"),
                n if n > MAX_ADDRESSES => errs.push(
                    path.clone(),
                    format!("Too many: {n}: must have at most {MAX_ADDRESSES} items"),
                ),
                _ => {}
            }
            for (j, a) in e.addresses.iter().enumerate() {
                let ok = match self.address_type.as_str() {
                    "IPv4" => a.parse::<std::net::Ipv4Addr>().is_ok(),
                    "IPv6" => a.parse::<std::net::Ipv6Addr>().is_ok(),
                    _ => true,
                };
                if !ok {
                    let family = &self.address_type;
                    errs.invalid(
                        format!("{path}[{j}]"),
                        q(a),
                        &format!("must be a valid {family} address"),
                    );
                }
            }
        }
        let mut names = HashSet::new();
        for (i, p) in self.ports.iter().flatten().enumerate() {
            let path = format!("ports[{i}]");
            let name = p.name.as_deref().unwrap_or_default();
            if !name.is_empty() {
                validate::dns_label(errs, &format!("{path}.name"), name);
            }
            if !names.insert(name) {
                errs.duplicate(format!("{path}.name"), q(name));
            }
            if let Some(proto) = &p.protocol {
                errs.one_of(format!("{path}.protocol"), proto, PROTOCOLS);
            }
            if let Some(port) = p.port.filter(|p| *p != 0) {
                validate::port_number(errs, &format!("{path}.port"), port);
            }
        }
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        if self.address_type != old.address_type {
            errs.invalid("addressType", q(&self.address_type), "field is immutable");
        }
    }
}

impl Typed for Lease {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

fn policy_rules(errs: &mut Errs, rules: Option<&Vec<PolicyRule>>, namespaced: bool) {
    for (i, r) in rules.into_iter().flatten().enumerate() {
        let path = format!("rules[{i}]");
        if r.verbs.is_empty() {
            errs.required(format!("{path}.verbs"), "verbs must contain at least one value");
        }
        let urls = r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty());
        if urls && namespaced {
            errs.invalid(
                format!("{path}.nonResourceURLs"),
                format!(
                    "[]string{{{}}}",
                    r.non_resource_urls
                        .iter()
                        .flatten()
                        .map(|u| q(u))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "namespaced rules cannot apply to non-resource URLs",
            );
        }
        let resources = r.resources.as_ref().is_some_and(|u| !u.is_empty());
        if resources && r.api_groups.as_ref().is_none_or(Vec::is_empty) {
            errs.required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            );
        }
        if !urls && !resources {
            errs.required(path, "rules must either have resources or nonResourceURLs");
        }
    }
}

impl Typed for ClusterRole {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        policy_rules(errs, self.rules.as_ref(), false);
    }
}

impl Typed for Role {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        policy_rules(errs, self.rules.as_ref(), true);
    }
}

/// SetDefaults_Subject: users and groups are RBAC's, service accounts the core group (`""`, which
/// `omitempty` leaves out of the JSON).
fn subject_defaults(subjects: Option<&mut Vec<Subject>>) {
    for s in subjects.into_iter().flatten() {
        if s.api_group.as_deref().is_none_or(str::is_empty) {
            s.api_group = matches!(s.kind.as_str(), "User" | "Group").then(|| RBAC_GROUP.into());
        }
    }
}

fn binding(
    errs: &mut Errs,
    role_ref: &RoleRef,
    subjects: Option<&Vec<Subject>>,
    kinds: &[&str],
    cluster: bool,
) {
    if role_ref.name.is_empty() {
        errs.required("roleRef.name", "");
    }
    errs.one_of("roleRef.kind", &role_ref.kind, kinds);
    errs.one_of("roleRef.apiGroup", &role_ref.api_group, &[RBAC_GROUP]);
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        let path = format!("subjects[{i}]");
        if s.name.is_empty() {
            errs.required(format!("{path}.name"), "");
        }
        match s.kind.as_str() {
            "ServiceAccount" => {
                if cluster && s.namespace.as_deref().is_none_or(str::is_empty) {
                    errs.required(format!("{path}.namespace"), "");
                }
                if let Some(g) = s.api_group.as_deref().filter(|g| !g.is_empty()) {
                    errs.one_of(format!("{path}.apiGroup"), g, &[""]);
                }
            }
            "User" | "Group" => {
                errs.one_of(
                    format!("{path}.apiGroup"),
                    s.api_group.as_deref().unwrap_or_default(),
                    &[RBAC_GROUP],
                );
            }
            other => errs.one_of(
                format!("{path}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            ),
        }
    }
}

/// `roleRef: Invalid value: rbac.RoleRef{…}: cannot change roleRef`.
fn role_ref_update(errs: &mut Errs, new: &RoleRef, old: &RoleRef) {
    if new != old {
        errs.invalid(
            "roleRef",
            format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                q(&new.api_group),
                q(&new.kind),
                q(&new.name)
            ),
            "cannot change roleRef",
        );
    }
}

impl Typed for ClusterRoleBinding {
    fn default_fields(&mut self) {
        subject_defaults(self.subjects.as_mut());
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        binding(
            errs,
            &self.role_ref,
            self.subjects.as_ref(),
            &["ClusterRole"],
            true,
        );
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        role_ref_update(errs, &self.role_ref, &old.role_ref);
    }
}

impl Typed for RoleBinding {
    fn default_fields(&mut self) {
        subject_defaults(self.subjects.as_mut());
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        binding(
            errs,
            &self.role_ref,
            self.subjects.as_ref(),
            &["Role", "ClusterRole"],
            false,
        );
    }

    fn validate_update(&self, old: &Self, errs: &mut Errs) {
        role_ref_update(errs, &self.role_ref, &old.role_ref);
    }
}

impl Typed for PodDisruptionBudget {
    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
    }
}

impl Typed for HorizontalPodAutoscaler {
    fn default_fields(&mut self) {
        if let Some(spec) = self.spec.as_mut() {
            if spec.min_replicas.is_none() {
                spec.min_replicas = Some(1);
            }
            if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
                spec.metrics = Some(vec![MetricSpec {
                    type_: "Resource".into(),
                    resource: Some(ResourceMetricSource {
                        name: "cpu".into(),
                        target: MetricTarget {
                            type_: "Utilization".into(),
                            average_utilization: Some(80),
                            ..Default::default()
                        },
                    }),
                    ..Default::default()
                }]);
            }
        }
    }

    fn validate(&self, errs: &mut Errs) {
        meta::object_meta(errs, &self.metadata);
        let Some(spec) = &self.spec else {
            return;
        };
        if spec.scale_target_ref.kind.is_empty() {
            errs.required("spec.scaleTargetRef.kind", "");
        }
        if spec.scale_target_ref.name.is_empty() {
            errs.required("spec.scaleTargetRef.name", "");
        }
        if let Some(min) = spec.min_replicas.filter(|m| *m < 1) {
            errs.invalid("spec.minReplicas", min, "must be greater than or equal to 1");
        }
        if spec.max_replicas < 1 {
            errs.invalid("spec.maxReplicas", spec.max_replicas, "must be greater than 0");
        }
    }
}
