//! `Sidecar` (networking.istio.io): what a namespace's (or selected) proxies import — egress hosts,
//! ingress listeners — and their outbound traffic policy.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{
    common::LabelSelector,
    destination_rule::ConnectionPoolSettings,
    destination_rule_rules,
    gateway::{self, ServerTlsMode, ServerTlsSettings},
    http_actions,
    service_entry::ServicePort,
    validate::{self, Report},
    virtual_service::Destination,
    workload_entry::{self, UNIX_PREFIX},
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
    /// TLS on the listener (not implemented by meshd: kept as JSON, validated as a gateway's
    /// `ServerTlsSettings`, then reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<serde_json::Value>,
    /// Connection pool (not implemented by meshd: validated as a DestinationRule's, then reported).
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
pub(crate) fn validate(sc: &Sidecar, namespace: &str, r: &mut Report) {
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
        if sel.labels.is_empty() {
            r.warn(
                "spec.workloadSelector",
                "a workloadSelector without labels applies to every workload of the namespace",
            );
        }
    }
    if let Some(pool) = &sc.inbound_connection_pool {
        connection_pool(pool, "spec.inboundConnectionPool", r);
    }
    r.unsupported("spec.inboundConnectionPool", sc.inbound_connection_pool.is_some());
    let mut ports = BTreeSet::new();
    for (i, l) in sc.ingress.iter().enumerate() {
        ingress(l, &format!("spec.ingress[{i}]"), &mut ports, r);
    }
    let (mut ports, mut sockets) = (BTreeSet::new(), BTreeSet::new());
    let mut catch_all = false;
    for (i, l) in sc.egress.iter().enumerate() {
        let f = format!("spec.egress[{i}]");
        match &l.port {
            Some(p) => {
                egress_port(p, &l.bind, &l.capture_mode, &f, r);
                let unique = if p.number == 0 {
                    sockets.insert(l.bind.as_str())
                } else {
                    ports.insert(p.number)
                };
                if !unique {
                    r.error(
                        format!("{f}.port.number"),
                        "ports (and unix sockets) of egress listeners must be unique",
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
        egress_hosts(&l.hosts, namespace, &f, r);
    }
    if let Some(otp) = &sc.outbound_traffic_policy
        && let Some(proxy) = &otp.egress_proxy
    {
        let f = "spec.outboundTrafficPolicy.egressProxy";
        if otp.mode != OutboundMode::AllowAny {
            r.error(f, "egressProxy needs mode ALLOW_ANY");
        } else {
            if !validate::is_dns_name(&proxy.host) || proxy.host.contains('*') {
                r.error(
                    format!("{f}.host"),
                    format!("{:?} is not a fully qualified name", proxy.host),
                );
            }
            match proxy.port {
                None => r.error(format!("{f}.port"), "port is required"),
                Some(_) => http_actions::destination(proxy, f, r),
            }
        }
        r.unsupported(f, true);
    }
}

/// One ingress listener: port and bind, a local `defaultEndpoint`, TLS only on TLS ports with what
/// a sidecar supports, and its connection pool.
fn ingress(l: &IngressListener, f: &str, ports: &mut BTreeSet<u32>, r: &mut Report) {
    if l.port.target_port > 0 {
        r.error(
            format!("{f}.port.targetPort"),
            "targetPort has no effect on Sidecars",
        );
    }
    if !l.port.name.is_empty() {
        validate::port_name(&l.port.name, &format!("{f}.port.name"), r);
    }
    validate::protocol(&l.port.protocol, &format!("{f}.port.protocol"), r);
    validate::port(l.port.number, &format!("{f}.port.number"), r);
    bind_ip(&l.bind, f, r);
    if !ports.insert(l.port.number) {
        r.error(
            format!("{f}.port.number"),
            format!("port {} is used by another ingress listener", l.port.number),
        );
    }
    default_endpoint(&l.default_endpoint, &format!("{f}.defaultEndpoint"), r);
    if let Some(v) = &l.tls {
        let tf = format!("{f}.tls");
        if let Some(tls) = validate::typed::<ServerTlsSettings>(v, &tf, r) {
            for (name, set) in [
                ("subjectAltNames", !tls.subject_alt_names.is_empty()),
                ("httpsRedirect", tls.https_redirect),
                ("credentialName", !tls.credential_name.is_empty()),
                ("credentialNames", !tls.credential_names.is_empty()),
                ("tlsCertificates", !tls.tls_certificates.is_empty()),
            ] {
                if set {
                    r.error(format!("{tf}.{name}"), "not supported in a Sidecar's ingress tls");
                }
            }
            if matches!(
                tls.mode,
                ServerTlsMode::IstioMutual | ServerTlsMode::AutoPassthrough
            ) {
                r.error(
                    format!("{tf}.mode"),
                    "ISTIO_MUTUAL and AUTO_PASSTHROUGH are not for Sidecar ingress",
                );
            }
            if !validate::is_tls(&l.port.protocol) {
                r.error(&tf, "TLS settings need an HTTPS or TLS port");
            }
            gateway::server_tls(&tls, &tf, r);
        }
        r.unsupported(tf, true);
    }
    if let Some(pool) = &l.connection_pool {
        let pf = format!("{f}.connectionPool");
        if pool.get("http").is_some_and(|h| !h.is_null()) && !validate::is_http(&l.port.protocol) {
            r.warn(
                &pf,
                "HTTP settings on a non-HTTP port: only the TCP settings apply",
            );
        }
        connection_pool(pool, &pf, r);
        r.unsupported(pf, true);
    }
}

/// A connection pool meshd keeps as JSON here, with a DestinationRule's rules.
fn connection_pool(v: &serde_json::Value, f: &str, r: &mut Report) {
    if let Some(pool) = validate::typed::<ConnectionPoolSettings>(v, f, r) {
        destination_rule_rules::connection_pool(&pool, f, r);
    }
}

/// `127.0.0.1:PORT`, `0.0.0.0:PORT`, `[::1]:PORT`, `[::]:PORT`, `:PORT` or an absolute unix socket.
fn default_endpoint(ep: &str, f: &str, r: &mut Report) {
    if ep.is_empty() {
        return;
    }
    if let Some(path) = ep.strip_prefix(UNIX_PREFIX) {
        workload_entry::unix_path(path, f, r);
        return;
    }
    let Some((host, port)) = ep.rsplit_once(':') else {
        r.error(f, format!("{ep:?} is not host:port"));
        return;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        r.error(
            f,
            "defaultEndpoint must be 127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT or unix://path",
        );
    }
    match port.parse::<u32>() {
        Ok(p) => validate::port(p, f, r),
        Err(_) => r.error(f, format!("port {port:?} is not a number")),
    }
}

fn bind_ip(bind: &str, f: &str, r: &mut Report) {
    if !bind.is_empty() && bind.parse::<std::net::IpAddr>().is_err() {
        r.error(format!("{f}.bind"), format!("{bind:?} is not an IP address"));
    }
}

/// istiod's `validateSidecarEgressPortBindAndCaptureMode`: port 0 is a unix socket listener.
fn egress_port(p: &ServicePort, bind: &str, capture: &str, f: &str, r: &mut Report) {
    if p.target_port > 0 {
        r.error(
            format!("{f}.port.targetPort"),
            "targetPort has no effect on Sidecars",
        );
    }
    if !p.name.is_empty() {
        validate::port_name(&p.name, &format!("{f}.port.name"), r);
    }
    validate::protocol(&p.protocol, &format!("{f}.port.protocol"), r);
    if p.number == 0 {
        match bind.strip_prefix(UNIX_PREFIX) {
            None => r.error(format!("{f}.port.number"), "port 0 needs a unix:// bind"),
            Some(path) => workload_entry::unix_path(path, &format!("{f}.bind"), r),
        }
        if !matches!(capture, "" | "DEFAULT" | "NONE") {
            r.error(
                format!("{f}.captureMode"),
                "a unix domain socket listener takes captureMode DEFAULT or NONE",
            );
        }
    } else {
        validate::port(p.number, &format!("{f}.port.number"), r);
        bind_ip(bind, f, r);
    }
}

/// The hosts of one egress listener: each `namespace/dnsName`, duplicates and `*/*` beside others
/// warned about (as istiod does).
fn egress_hosts(hosts: &[String], namespace: &str, f: &str, r: &mut Report) {
    if hosts.is_empty() {
        r.error(format!("{f}.hosts"), "at least one host is required");
    }
    let mut seen: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (j, h) in hosts.iter().enumerate() {
        let hf = format!("{f}.hosts[{j}]");
        egress_host(h, &hf, r);
        let Some((ns, name)) = h.split_once('/') else {
            continue;
        };
        let ns = if ns == "." { namespace } else { ns };
        let names = seen.entry(ns).or_default();
        let dup = if name == "*" {
            !names.is_empty()
        } else {
            names.contains(name) || names.contains("*")
        };
        if dup {
            r.warn(&hf, format!("duplicated egress host {h:?}"));
        }
        names.insert(name);
    }
    if seen.get("*").is_some_and(|n| n.contains("*")) && seen.len() > 1 {
        r.warn(
            format!("{f}.hosts"),
            "`*/*` selects everything: no other host can add to it",
        );
    }
}

/// `namespace/dnsName`: `*`, `.`, `~` or a namespace (`~namespace`: Istio 1.31's exclusion); then
/// `*`, `*.suffix` or a fully qualified name.
fn egress_host(host: &str, f: &str, r: &mut Report) {
    let Some((ns, name)) = host.split_once('/') else {
        r.error(f, format!("{host:?} must be namespace/dnsName"));
        return;
    };
    if ns.is_empty() || name.is_empty() {
        r.error(f, "namespace and dnsName must not be empty");
        return;
    }
    match ns.strip_prefix('~') {
        Some(excluded) if !excluded.is_empty() || name != "*" => {
            if !excluded.is_empty() && !validate::is_dns1123_label(excluded) {
                r.error(f, format!("{excluded:?} is not a namespace name"));
            }
            r.warn(
                f,
                "an exclusion (`~namespace/` or `~/host`, Istio 1.31): not implemented by meshd; it imports nothing and excludes nothing",
            );
        }
        Some(_) => {}
        None if matches!(ns, "*" | ".") || validate::is_dns1123_label(ns) => {}
        None => r.error(f, format!("{ns:?} is not `*`, `.`, `~` or a namespace name")),
    }
    if name != "*" && !name.contains('.') {
        r.error(
            f,
            format!("{name:?}: short names (not fully qualified) are not allowed"),
        );
    } else if name.contains('*') && name != "*" && !name.starts_with("*.") {
        r.error(f, format!("{name:?}: a partial wildcard is not allowed"));
    } else if name != "*" {
        validate::wildcard_domain(name, f, r);
    }
}
