//! Kubernetes `Service` → [`model::Service`] (istiod's `ConvertService`). Pure.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use k8s_openapi::{api::core::v1 as k8s, apimachinery::pkg::util::intstr::IntOrString};

use crate::model::{
    self, ClusterId, ExternalAddress, Hostname, Protocol, Resolution, ServicePort, TargetPort,
};

/// Annotation: NodePort services used as gateways (their node ports are published).
const ANNOTATION_NODE_SELECTOR: &str = "traffic.istio.io/nodeSelector";
/// Annotation: SPIFFE identities of the service, comma-separated.
const ANNOTATION_CANONICAL_SAS: &str = "alpha.istio.io/canonical-serviceaccounts";
/// Annotation: Kubernetes service accounts of the service, comma-separated.
const ANNOTATION_KUBERNETES_SAS: &str = "alpha.istio.io/kubernetes-serviceaccounts";

/// What conversion needs to know about the cluster.
#[derive(Debug, Clone)]
pub struct Context {
    /// The cluster the objects come from.
    pub cluster: ClusterId,
    /// DNS suffix, e.g. `cluster.local`.
    pub domain_suffix: Arc<str>,
    /// SPIFFE trust domain.
    pub trust_domain: Arc<str>,
}

impl Context {
    /// `name.namespace.svc.<suffix>`.
    pub fn hostname(&self, namespace: &str, name: &str) -> Hostname {
        Hostname::from(format!("{name}.{namespace}.svc.{}", self.domain_suffix))
    }

    /// `spiffe://<trust domain>/ns/<ns>/sa/<sa>`.
    pub fn spiffe(&self, namespace: &str, service_account: &str) -> Arc<str> {
        format!(
            "spiffe://{}/ns/{namespace}/sa/{service_account}",
            self.trust_domain
        )
        .into()
    }
}

/// Converts a Service; `None` when it has no name or namespace.
pub fn convert(svc: &k8s::Service, ctx: &Context) -> Option<model::Service> {
    let name = svc.metadata.name.as_deref()?;
    let namespace = svc.metadata.namespace.as_deref()?;
    let spec = svc.spec.clone().unwrap_or_default();
    let annotations = svc.metadata.annotations.clone().unwrap_or_default();
    let cluster = ctx.cluster.clone();

    let headless = spec.cluster_ip.as_deref() == Some("None");
    let resolution = match (spec.type_.as_deref(), &spec.external_name) {
        (Some("ExternalName"), Some(ext)) => Resolution::Alias(ext.as_str().into()),
        _ if headless => Resolution::Passthrough,
        _ => Resolution::ClientSideLb,
    };
    let vips: Vec<IpAddr> = match (&spec.cluster_ips, &spec.cluster_ip) {
        (Some(ips), _) if !ips.is_empty() => ips.iter().filter_map(|ip| ip.parse().ok()).collect(),
        (_, Some(ip)) => ip.parse().ok().into_iter().collect(),
        _ => Vec::new(),
    };

    let mut external: Vec<ExternalAddress> = Vec::new();
    if spec.type_.as_deref() == Some("LoadBalancer") {
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        for ing in ingress.into_iter().flatten() {
            if let Some(ip) = ing.ip.as_deref().and_then(|ip| ip.parse().ok()) {
                external.push(ExternalAddress::Ip(ip));
            } else if let Some(host) = ing.hostname.as_deref().filter(|h| !h.is_empty()) {
                external.push(ExternalAddress::Hostname(host.into()));
            }
        }
    }
    external.extend(
        spec.external_ips
            .iter()
            .flatten()
            .filter_map(|ip| ip.parse().ok())
            .map(ExternalAddress::Ip),
    );

    let k8s_ports = spec.ports.unwrap_or_default();
    let node_ports: BTreeMap<u16, u16> = if annotations.contains_key(ANNOTATION_NODE_SELECTOR) {
        k8s_ports
            .iter()
            .filter_map(|p| Some((port(p.port)?, port(p.node_port?)?)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let ports = k8s_ports
        .iter()
        .filter_map(|p| {
            let name = p.name.as_deref().unwrap_or_default();
            Some(ServicePort {
                name: name.into(),
                port: port(p.port)?,
                protocol: protocol(p.app_protocol.as_deref(), name, p.protocol.as_deref()),
                target_port: p.target_port.as_ref().and_then(|t| match t {
                    IntOrString::Int(n) => port(*n).map(TargetPort::Number),
                    IntOrString::String(s) => Some(TargetPort::Name(s.as_str().into())),
                }),
            })
        })
        .collect();

    let mut service_accounts = std::collections::BTreeSet::new();
    for sa in comma_list(&annotations, ANNOTATION_CANONICAL_SAS) {
        service_accounts.insert(Arc::from(sa));
    }
    for sa in comma_list(&annotations, ANNOTATION_KUBERNETES_SAS) {
        service_accounts.insert(ctx.spiffe(namespace, sa));
    }

    let per_cluster = |present: bool| present.then(|| cluster.clone());
    Some(model::Service {
        hostname: ctx.hostname(namespace, name),
        namespace: namespace.into(),
        name: name.into(),
        ports,
        cluster_vips: per_cluster(!vips.is_empty())
            .map(|c| (c, vips))
            .into_iter()
            .collect(),
        external_addresses: per_cluster(!external.is_empty())
            .map(|c| (c, external))
            .into_iter()
            .collect(),
        node_ports: per_cluster(!node_ports.is_empty())
            .map(|c| (c, node_ports))
            .into_iter()
            .collect(),
        labels: Arc::new(svc.metadata.labels.clone().unwrap_or_default()),
        service_accounts,
        creation_time: svc
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string().into()),
        resolution,
    })
}

/// Istio's protocol rules: Kubernetes `UDP`; else `appProtocol`; else the port name's prefix
/// (`http-web`, `grpc`, `tcp-db`...); else unknown (sniffed).
pub fn protocol(app_protocol: Option<&str>, port_name: &str, k8s_protocol: Option<&str>) -> Protocol {
    if k8s_protocol == Some("UDP") {
        return Protocol::Udp;
    }
    let from_app = app_protocol.map(|ap| match ap {
        "kubernetes.io/h2c" => Protocol::Http2,
        "kubernetes.io/ws" => Protocol::Http,
        "kubernetes.io/wss" => Protocol::Https,
        other => parse_protocol(other),
    });
    if let Some(p) = from_app.filter(|p| *p != Protocol::Unknown) {
        return p;
    }
    let name = port_name.to_ascii_lowercase();
    if name == "grpc-web" || name.starts_with("grpc-web-") {
        return Protocol::GrpcWeb;
    }
    parse_protocol(name.split('-').next().unwrap_or_default())
}

fn parse_protocol(s: &str) -> Protocol {
    match s.to_ascii_lowercase().as_str() {
        "http" => Protocol::Http,
        "http2" | "h2c" => Protocol::Http2,
        "grpc" => Protocol::Grpc,
        "grpc-web" => Protocol::GrpcWeb,
        "https" => Protocol::Https,
        "tls" => Protocol::Tls,
        "tcp" => Protocol::Tcp,
        "udp" => Protocol::Udp,
        "mongo" => Protocol::Mongo,
        "redis" => Protocol::Redis,
        "mysql" => Protocol::Mysql,
        _ => Protocol::Unknown,
    }
}

/// A Kubernetes port number, if it is one.
pub(super) fn port(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

fn comma_list<'a>(annotations: &'a BTreeMap<String, String>, key: &str) -> impl Iterator<Item = &'a str> {
    annotations
        .get(key)
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
