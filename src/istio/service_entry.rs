//! `ServiceEntry` (networking.istio.io): services outside the Kubernetes registries — external APIs,
//! VMs — with their hosts, addresses, ports and endpoints (inline or selected WorkloadEntries/pods).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{
    common::LabelSelector,
    validate::{self, Report},
    workload_entry::{self, WorkloadEntry},
};

/// Istio's `ServiceEntry`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntry {
    /// Host names (may start with `*`), matched by VirtualServices and DestinationRules.
    pub hosts: Vec<String>,
    /// Virtual IPs or CIDRs of the service.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// The service's ports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// Inside or outside the mesh (mTLS, telemetry).
    pub location: Location,
    /// How endpoints are found.
    pub resolution: Resolution,
    /// Inline endpoints (exclusive with `workloadSelector`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<WorkloadEntry>,
    /// Selects WorkloadEntries and pods in the entry's namespace as endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<LabelSelector>,
    /// Namespaces the service is visible in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Identities the endpoints may present (SANs checked by clients).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
}

/// Istio's `ServicePort` (also a Sidecar's and Gateway's `port`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServicePort {
    /// The port number.
    pub number: u32,
    /// `HTTP`, `HTTP2`, `GRPC`, `HTTPS`, `TLS`, `TCP`, …; empty: sniffed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The port's name (endpoints' `ports` refer to it).
    pub name: String,
    /// The endpoints' port when they do not name one (0: same as `number`).
    #[serde(skip_serializing_if = "is_zero")]
    pub target_port: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Istio's `ServiceEntry.Location`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Location {
    /// Outside the mesh (the protobuf default).
    #[default]
    MeshExternal,
    /// Part of the mesh.
    MeshInternal,
}

/// Istio's `ServiceEntry.Resolution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Resolution {
    /// Use the destination address the client connected to (the protobuf default).
    #[default]
    None,
    /// Endpoints are IPs given inline or selected.
    Static,
    /// Endpoints (or the hosts) are resolved by DNS, all addresses used.
    Dns,
    /// Resolved by DNS, one address used at a time.
    DnsRoundRobin,
}

/// istiod's `ValidateServiceEntry`.
pub(crate) fn validate(se: &ServiceEntry, namespace: &str, r: &mut Report) {
    if se.hosts.is_empty() {
        r.error("spec.hosts", "at least one host is required");
    }
    for (i, host) in se.hosts.iter().enumerate() {
        let f = format!("spec.hosts[{i}]");
        if host == "*" {
            r.error(&f, "the wildcard host `*` is not allowed in a ServiceEntry");
        } else {
            validate::wildcard_domain(host, &f, r);
            if host.starts_with('*') && host.len() > 1 && !host.starts_with("*.") {
                r.warn(&f, "a partial wildcard host matches only that suffix");
            }
        }
    }
    let mut cidr = false;
    for (i, addr) in se.addresses.iter().enumerate() {
        cidr |= validate::ip_or_cidr(addr, &format!("spec.addresses[{i}]"), r);
    }
    if cidr && !matches!(se.resolution, Resolution::None | Resolution::Static) {
        r.error(
            "spec.addresses",
            "CIDR addresses are allowed only with resolution NONE or STATIC",
        );
    }
    if se.ports.is_empty() {
        // istiod admits this; the service then has no port to listen on or route to.
        r.warn(
            "spec.ports",
            "no ports: the service gets no listeners or clusters",
        );
    }
    let (mut names, mut numbers) = (BTreeSet::new(), BTreeSet::new());
    for (i, p) in se.ports.iter().enumerate() {
        let f = format!("spec.ports[{i}]");
        validate::port(p.number, &format!("{f}.number"), r);
        validate::port_name(&p.name, &format!("{f}.name"), r);
        validate::protocol(&p.protocol, &format!("{f}.protocol"), r);
        if p.target_port != 0 {
            validate::port(p.target_port, &format!("{f}.targetPort"), r);
        }
        if !names.insert(p.name.as_str()) {
            r.error(
                format!("{f}.name"),
                format!("port name {:?} is already defined", p.name),
            );
        }
        if !numbers.insert(p.number) {
            r.error(
                format!("{f}.number"),
                format!("port {} is already defined", p.number),
            );
        }
        if se.addresses.is_empty()
            && (p.protocol.is_empty() || p.protocol.eq_ignore_ascii_case("TCP"))
            && se.resolution != Resolution::None
        {
            r.warn(
                &f,
                "a TCP port without addresses captures all traffic to that port",
            );
        }
    }
    if let Some(sel) = &se.workload_selector {
        sel.validate("spec.workloadSelector", r);
        if sel.labels.is_empty() {
            r.warn(
                "spec.workloadSelector",
                "a workloadSelector without labels selects every workload of the namespace",
            );
        }
        if se.resolution == Resolution::None {
            r.warn(
                "spec.workloadSelector",
                "a workloadSelector should not be set with resolution NONE",
            );
        }
        if !se.endpoints.is_empty() {
            r.error(
                "spec.endpoints",
                "only one of workloadSelector or endpoints is allowed",
            );
        }
    }
    endpoints(se, &names, r);
    if se.resolution != Resolution::None && se.hosts.len() > 1 {
        let distinguishable = se
            .ports
            .iter()
            .all(|p| validate::is_http(&p.protocol) || validate::is_tls(&p.protocol));
        if !distinguishable {
            r.error(
                "spec.hosts",
                "multiple hosts with non-HTTP, non-TLS ports need resolution NONE",
            );
        }
    }
    validate::export_to(&se.export_to, namespace, true, "spec.exportTo", r);
}

/// The resolution-dependent rules for inline endpoints.
fn endpoints(se: &ServiceEntry, port_names: &BTreeSet<&str>, r: &mut Report) {
    match se.resolution {
        Resolution::None if !se.endpoints.is_empty() => {
            r.error("spec.endpoints", "no endpoints may be given with resolution NONE");
        }
        Resolution::Dns | Resolution::DnsRoundRobin
            if se.endpoints.is_empty() && se.workload_selector.is_none() =>
        {
            for (i, host) in se.hosts.iter().enumerate() {
                if !validate::is_fqdn(host) {
                    r.error(
                        format!("spec.hosts[{i}]"),
                        "hosts must be fully qualified when resolution DNS has no endpoints",
                    );
                }
            }
        }
        Resolution::DnsRoundRobin if se.endpoints.len() > 1 => {
            r.error(
                "spec.endpoints",
                "resolution DNS_ROUND_ROBIN takes at most one endpoint",
            );
        }
        _ => {}
    }
    let mut unix = false;
    for (i, ep) in se.endpoints.iter().enumerate() {
        let f = format!("spec.endpoints[{i}]");
        workload_entry::validate(ep, &f, r);
        if se.resolution == Resolution::Static
            && !ep.address.is_empty()
            && !ep.is_unix()
            && ep.address.parse::<std::net::IpAddr>().is_err()
        {
            r.error(
                format!("{f}.address"),
                format!(
                    "{:?} is not an IP address (resolution STATIC takes IPs or unix://)",
                    ep.address
                ),
            );
        }
        unix |= ep.is_unix();
        for name in ep.ports.keys() {
            if !port_names.contains(name.as_str()) {
                r.error(
                    format!("{f}.ports.{name}"),
                    format!("port {name:?} is not defined by the ServiceEntry"),
                );
            }
        }
    }
    if unix && se.ports.len() != 1 {
        r.error("spec.ports", "unix:// endpoints need exactly one service port");
    }
}
