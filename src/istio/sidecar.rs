//! `Sidecar` (networking.istio.io): what a namespace's (or selected) proxies import — egress hosts,
//! ingress listeners — and their outbound traffic policy.

use serde::{Deserialize, Serialize};

use super::{
    common::LabelSelector,
    service_entry::ServicePort,
    validate::{self, Report},
    virtual_service::Destination,
};
use crate::config::mesh::OutboundMode;

/// Istio's `Sidecar`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sidecar {
    /// The workloads it applies to; none: every workload of its namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<LabelSelector>,
    /// Inbound listeners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<IngressListener>,
    /// Outbound listeners and the hosts they import.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<EgressListener>,
    /// Traffic to unknown destinations (default: the mesh config's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
    /// Inbound connection pool (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbound_connection_pool: Option<serde_json::Value>,
}

/// Istio's `IstioIngressListener`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressListener {
    /// The port traffic arrives on.
    pub port: ServicePort,
    /// Address to bind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// `DEFAULT`, `IPTABLES` or `NONE`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub capture_mode: String,
    /// Where traffic is forwarded (`127.0.0.1:PORT`, `0.0.0.0:PORT`, `unix://…`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
    /// TLS on the listener (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<serde_json::Value>,
    /// Connection pool (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<serde_json::Value>,
}

/// Istio's `IstioEgressListener`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EgressListener {
    /// The port; none: every port (the catch-all listener, last).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<ServicePort>,
    /// Address to bind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// `DEFAULT`, `IPTABLES` or `NONE`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub capture_mode: String,
    /// Imported hosts, `namespace/dnsName` (`*/*`, `./*`, `istio-system/*`, `ns/host.example.com`).
    pub hosts: Vec<String>,
}

/// Istio's `OutboundTrafficPolicy` as a Sidecar sets it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboundTrafficPolicy {
    /// `ALLOW_ANY` or `REGISTRY_ONLY`.
    pub mode: OutboundMode,
    /// Where ALLOW_ANY traffic goes (not implemented by meshd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_proxy: Option<Destination>,
}

/// istiod's `ValidateSidecar`.
pub(crate) fn validate(sc: &Sidecar, r: &mut Report) {
    if sc.egress.is_empty()
        && sc.ingress.is_empty()
        && sc.outbound_traffic_policy.is_none()
        && sc.inbound_connection_pool.is_none()
    {
        r.error(
            "spec",
            "a Sidecar must set egress, ingress, outboundTrafficPolicy or inboundConnectionPool",
        );
    }
    if let Some(sel) = &sc.workload_selector {
        sel.validate("spec.workloadSelector", r);
    }
    r.unsupported("spec.inboundConnectionPool", sc.inbound_connection_pool.is_some());
    let mut ports = std::collections::BTreeSet::new();
    for (i, l) in sc.ingress.iter().enumerate() {
        let f = format!("spec.ingress[{i}]");
        listener_port(&l.port, &l.bind, &f, r);
        if !ports.insert(l.port.number) {
            r.error(
                format!("{f}.port.number"),
                format!("port {} is used by another ingress listener", l.port.number),
            );
        }
        r.unsupported(format!("{f}.tls"), l.tls.is_some());
        r.unsupported(format!("{f}.connectionPool"), l.connection_pool.is_some());
    }
    let mut ports = std::collections::BTreeSet::new();
    let mut catch_all = false;
    for (i, l) in sc.egress.iter().enumerate() {
        let f = format!("spec.egress[{i}]");
        match &l.port {
            Some(p) => {
                listener_port(p, &l.bind, &f, r);
                if !ports.insert(p.number) {
                    r.error(
                        format!("{f}.port.number"),
                        format!("port {} is used by another egress listener", p.number),
                    );
                }
            }
            None => {
                if catch_all {
                    r.error(&f, "only one egress listener may omit the port");
                }
                if i + 1 != sc.egress.len() {
                    r.error(&f, "the egress listener without a port must be the last");
                }
                catch_all = true;
            }
        }
        if l.hosts.is_empty() {
            r.error(format!("{f}.hosts"), "at least one host is required");
        }
        for (j, h) in l.hosts.iter().enumerate() {
            egress_host(h, &format!("{f}.hosts[{j}]"), r);
        }
    }
    if let Some(otp) = &sc.outbound_traffic_policy
        && otp.egress_proxy.is_some()
    {
        if otp.mode != OutboundMode::AllowAny {
            r.error(
                "spec.outboundTrafficPolicy.egressProxy",
                "egressProxy needs mode ALLOW_ANY",
            );
        }
        r.unsupported("spec.outboundTrafficPolicy.egressProxy", true);
    }
}
fn listener_port(p: &ServicePort, bind: &str, f: &str, r: &mut Report) {
    if p.number == 0 {
        if !bind.starts_with("unix://") {
            r.error(format!("{f}.port.number"), "port 0 needs a unix:// bind");
        }
    } else {
        validate::port(p.number, &format!("{f}.port.number"), r);
    }
    validate::protocol(&p.protocol, &format!("{f}.port.protocol"), r);
    if !p.name.is_empty() {
        validate::port_name(&p.name, &format!("{f}.port.name"), r);
    }
}

/// `namespace/dnsName`: `*`, `.`, `~` or a namespace; then `*`, `*.suffix` or a fully qualified name.
fn egress_host(host: &str, f: &str, r: &mut Report) {
    let Some((ns, name)) = host.split_once('/') else {
        r.error(f, format!("{host:?} must be namespace/dnsName"));
        return;
    };
    if !matches!(ns, "*" | "." | "~") && !validate::is_dns1123_label(ns) {
        r.error(f, format!("{ns:?} is not `*`, `.`, `~` or a namespace name"));
    }
    let ok = name == "*"
        || name.strip_prefix("*.").is_some_and(|rest| !rest.contains('*'))
        || validate::is_fqdn(name);
    if !ok {
        r.error(
            f,
            format!("{name:?} is not `*`, `*.suffix` or a fully qualified name (no short names)"),
        );
    }
}
