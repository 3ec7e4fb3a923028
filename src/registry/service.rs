//! Kubernetes `Service` → [`model::Service`] (istiod's `ConvertService`). Pure.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    invalid::{InvalidAddress, parse_ip},
    objects as k8s,
};
use crate::model::{
    self, ClusterId, ExternalAddress, Hostname, Protocol, Resolution, ServicePort, TargetPort,
};

/// Annotation: NodePort services used as gateways (their node ports are published).
const ANNOTATION_NODE_SELECTOR: &str = "traffic.istio.io/nodeSelector";
/// Annotation: SPIFFE identities of the service, comma-separated.
const ANNOTATION_CANONICAL_SAS: &str = "alpha.istio.io/canonical-serviceaccounts";
/// Annotation: Kubernetes service accounts of the service, comma-separated.
const ANNOTATION_KUBERNETES_SAS: &str = "alpha.istio.io/kubernetes-serviceaccounts";
/// Namespaces the Service is visible in, comma-separated (`exportTo` of a Kubernetes Service).
const ANNOTATION_EXPORT_TO: &str = "networking.istio.io/exportTo";

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

/// Converts a Service; `None` when it has no name or namespace. Addresses that do not parse are left
/// out and returned beside it.
pub fn convert(svc: &k8s::Service, ctx: &Context) -> Option<(model::Service, Vec<InvalidAddress>)> {
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
    let mut invalid = Vec::new();
    // `None` (headless) and empty (ExternalName) say there is no cluster IP; they are not invalid.
    let is_ip = |ip: &&String| !ip.is_empty() && *ip != "None";
    let vips: Vec<IpAddr> = match (&spec.cluster_ips, &spec.cluster_ip) {
        (Some(ips), _) if !ips.is_empty() => ips
            .iter()
            .filter(is_ip)
            .filter_map(|ip| parse_ip("spec.clusterIPs", ip, &mut invalid))
            .collect(),
        (_, Some(ip)) => Some(ip)
            .filter(is_ip)
            .and_then(|ip| parse_ip("spec.clusterIP", ip, &mut invalid))
            .into_iter()
            .collect(),
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
            let ip = ing.ip.as_deref().filter(|ip| !ip.is_empty());
            if let Some(ip) = ip.and_then(|ip| parse_ip("status.loadBalancer.ingress[].ip", ip, &mut invalid))
            {
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
            .filter_map(|ip| parse_ip("spec.externalIPs", ip, &mut invalid))
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
    let service = model::Service {
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
        origin: model::Origin::Kubernetes,
        mesh_external: false,
        export_to: model::ExportTo::parse(comma_list(&annotations, ANNOTATION_EXPORT_TO), namespace),
        // istiod's `LabelSelectors`: a Service without a selector selects nothing, not everything.
        selector: spec.selector.filter(|s| !s.is_empty()).map(Arc::new),
    };
    Some((service, invalid))
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
        other => Protocol::from_name(other),
    });
    if let Some(p) = from_app.filter(|p| *p != Protocol::Unknown) {
        return p;
    }
    let name = port_name.to_ascii_lowercase();
    if name == "grpc-web" || name.starts_with("grpc-web-") {
        return Protocol::GrpcWeb;
    }
    Protocol::from_name(name.split('-').next().unwrap_or_default())
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
mod tests {
    //! Service conversion, table-driven from Kubernetes JSON.

    use serde_json::json;

    use super::*;

    fn ctx() -> Context {
        Context {
            cluster: "c2".into(),
            domain_suffix: "cluster.local".into(),
            trust_domain: "td".into(),
        }
    }

    fn svc(spec: serde_json::Value, extra: serde_json::Value) -> k8s::Service {
        let mut v = json!({
            "metadata": {"name": "reviews", "namespace": "bookinfo", "creationTimestamp": "2024-05-01T10:00:00Z"},
            "spec": spec,
        });
        if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in extra {
                obj.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).expect("valid Service")
    }

    #[test]
    fn services_convert_like_istiod() {
        // (case, spec, extra top-level fields, expected JSON subset of the converted service)
        let cases = [
            (
                "ClusterIP, ports by appProtocol and name prefix",
                json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::a"], "ports": [
                    {"name": "http-web", "port": 9080, "targetPort": 8080},
                    {"name": "grpc", "port": 9090, "appProtocol": "kubernetes.io/h2c", "targetPort": "grpc-port"},
                    {"name": "metrics", "port": 15020},
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                ]}),
                json!({}),
                json!({
                    "hostname": "reviews.bookinfo.svc.cluster.local",
                    "clusterVIPs": {"c2": ["10.96.0.10", "fd00::a"]},
                    "ports": [
                        {"name": "http-web", "port": 9080, "protocol": "HTTP", "targetPort": 8080},
                        {"name": "grpc", "port": 9090, "protocol": "HTTP2", "targetPort": "grpc-port"},
                        {"name": "metrics", "port": 15020, "protocol": "UnsupportedProtocol", "targetPort": null},
                        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": null},
                    ],
                    "resolution": "ClientSideLb",
                    "creationTime": "2024-05-01T10:00:00Z",
                }),
            ),
            (
                "headless",
                json!({"clusterIP": "None", "ports": [{"name": "tcp-db", "port": 5432}]}),
                json!({}),
                json!({"clusterVIPs": {}, "resolution": "Passthrough", "ports": [{"name": "tcp-db", "port": 5432, "protocol": "TCP", "targetPort": null}]}),
            ),
            (
                "ExternalName",
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
                json!({}),
                json!({"resolution": {"Alias": "db.example.com"}}),
            ),
            (
                "LoadBalancer ingress (ip, else hostname) and externalIPs",
                json!({"type": "LoadBalancer", "clusterIP": "10.96.0.11", "externalIPs": ["198.51.100.7"],
                       "ports": [{"name": "tls", "port": 15443, "nodePort": 31443}]}),
                json!({"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}, {"hostname": "lb.example.com"}]}}}),
                json!({"externalAddresses": {"c2": ["203.0.113.5", "lb.example.com", "198.51.100.7"]}, "nodePorts": {}}),
            ),
            (
                "NodePort only with the gateway node selector annotation",
                json!({"type": "NodePort", "clusterIP": "10.96.0.12", "ports": [{"name": "tls", "port": 15443, "nodePort": 31443}]}),
                json!({"metadata": {"name": "reviews", "namespace": "bookinfo", "annotations": {"traffic.istio.io/nodeSelector": "{}"}}}),
                json!({"nodePorts": {"c2": {"15443": 31443}}}),
            ),
            (
                "selector and exportTo annotation",
                json!({"clusterIP": "10.96.0.14", "selector": {"app": "reviews"}}),
                json!({"metadata": {"name": "reviews", "namespace": "bookinfo", "annotations": {
                    "networking.istio.io/exportTo": ".,istio-system"}}}),
                json!({"selector": {"app": "reviews"}, "exportTo": {"Namespaces": ["bookinfo", "istio-system"]},
                       "origin": {"registry": "Kubernetes"}, "meshExternal": false}),
            ),
            (
                "no selector selects nothing",
                json!({"clusterIP": "10.96.0.15", "selector": {}}),
                json!({}),
                json!({"selector": null, "exportTo": "Default"}),
            ),
            (
                "service accounts from annotations",
                json!({"clusterIP": "10.96.0.13"}),
                json!({"metadata": {"name": "reviews", "namespace": "bookinfo", "annotations": {
                    "alpha.istio.io/kubernetes-serviceaccounts": "reviews, ratings",
                    "alpha.istio.io/canonical-serviceaccounts": "spiffe://other/ns/x/sa/y"}}}),
                json!({"serviceAccounts": ["spiffe://other/ns/x/sa/y", "spiffe://td/ns/bookinfo/sa/ratings", "spiffe://td/ns/bookinfo/sa/reviews"]}),
            ),
        ];
        for (name, spec, extra, want) in cases {
            let (converted, invalid) = convert(&svc(spec, extra), &ctx()).expect(name);
            assert!(invalid.is_empty(), "{name}: {invalid:?}");
            let got = serde_json::to_value(converted).unwrap();
            for (field, value) in want.as_object().unwrap() {
                assert_eq!(&got[field], value, "{name}: field {field}");
            }
        }
    }

    #[test]
    fn addresses_that_do_not_parse_are_left_out_and_returned() {
        let cases = [
            (
                "a bad clusterIP",
                json!({"clusterIP": "10.96.0.300"}),
                json!({}),
                json!({"clusterVIPs": {}}),
                vec![("spec.clusterIP", "10.96.0.300")],
            ),
            (
                "clusterIPs: the good one kept (clusterIP is not read then)",
                json!({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00::zz"]}),
                json!({}),
                json!({"clusterVIPs": {"c2": ["10.96.0.1"]}}),
                vec![("spec.clusterIPs", "fd00::zz")],
            ),
            (
                "headless clusterIPs are not invalid",
                json!({"clusterIP": "None", "clusterIPs": ["None"]}),
                json!({}),
                json!({"clusterVIPs": {}, "resolution": "Passthrough"}),
                vec![],
            ),
            (
                "an ingress with a bad ip falls back to its hostname; an empty ip is no ip",
                json!({"type": "LoadBalancer", "clusterIP": "10.96.0.2"}),
                json!({"status": {"loadBalancer": {"ingress": [
                    {"ip": "203.0.113", "hostname": "lb.example.com"}, {"ip": "", "hostname": "lb2.example.com"}]}}}),
                json!({"externalAddresses": {"c2": ["lb.example.com", "lb2.example.com"]}}),
                vec![("status.loadBalancer.ingress[].ip", "203.0.113")],
            ),
            (
                "externalIPs, several bad",
                json!({"clusterIP": "10.96.0.3", "externalIPs": ["bogus", "198.51.100.7", "198.51.100.7/32"]}),
                json!({}),
                json!({"externalAddresses": {"c2": ["198.51.100.7"]}}),
                vec![
                    ("spec.externalIPs", "bogus"),
                    ("spec.externalIPs", "198.51.100.7/32"),
                ],
            ),
        ];
        for (name, spec, extra, want, want_invalid) in cases {
            let (converted, invalid) = convert(&svc(spec, extra), &ctx()).expect(name);
            let got = serde_json::to_value(converted).unwrap();
            for (field, value) in want.as_object().unwrap() {
                assert_eq!(&got[field], value, "{name}: field {field}");
            }
            let invalid: Vec<_> = invalid.iter().map(|i| (i.field, i.value.as_str())).collect();
            assert_eq!(invalid, want_invalid, "{name}");
        }
    }

    #[test]
    fn protocol_rules() {
        let cases = [
            (None, "http", None, Protocol::Http),
            (None, "HTTP2-x", None, Protocol::Http2),
            (None, "grpc-web", None, Protocol::GrpcWeb),
            (None, "grpc-api", None, Protocol::Grpc),
            (None, "https", None, Protocol::Https),
            (None, "tcp-db", None, Protocol::Tcp),
            (None, "mongo", None, Protocol::Mongo),
            (None, "web", None, Protocol::Unknown),
            (Some("http"), "tcp", None, Protocol::Http),
            (Some("kubernetes.io/wss"), "", None, Protocol::Https),
            (Some("custom"), "redis", None, Protocol::Redis),
            (None, "http", Some("UDP"), Protocol::Udp),
        ];
        for (app, name, k8s_proto, want) in cases {
            assert_eq!(protocol(app, name, k8s_proto), want, "{app:?} {name}");
        }
    }

    #[test]
    fn nameless_service_is_skipped() {
        let s: k8s::Service = serde_json::from_value(json!({"metadata": {"namespace": "x"}})).unwrap();
        assert!(convert(&s, &ctx()).is_none());
    }
}
