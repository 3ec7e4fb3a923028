//! A sidecar's service targets (istiod's `ServiceTarget`s): the ports it serves a Service on, which
//! its inbound side ([`super::virtual_inbound`]) is built from, and what a stream remembers of them
//! to push when a change moves them.
//!
//! A proxy serves every port of a Service one of whose endpoints (in the proxy's cluster) has one of
//! the proxy's IPs (`INSTANCE_IPS`, else the node id's), by target port; when two Services target the
//! same port, the older one wins, as in istiod. Only Services of the proxy's namespace are looked at (a
//! workload serves those), read from the whole mesh, not through the proxy's Sidecar scope.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Mesh, Proxy, ProxyKind};
use crate::model::{Endpoint, Hostname, Protocol, Service};

/// One port the proxy serves a Service on (istiod's `ServiceTarget`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTarget {
    /// The workload's port (the endpoint's port for the service port).
    pub target_port: u16,
    /// The service port.
    pub port: u16,
    /// Its protocol.
    pub protocol: Protocol,
    /// The service.
    pub hostname: Hostname,
}

/// The proxy's service targets, one per target port, ascending (see the module doc).
pub fn service_targets(mesh: &dyn Mesh, proxy: &Proxy) -> Vec<ServiceTarget> {
    let mesh = mesh.unscoped().unwrap_or(mesh);
    if proxy.ips.is_empty() {
        return Vec::new();
    }
    let mut services: Vec<&Service> = mesh.services().filter(|s| may_serve(proxy, s)).collect();
    // istiod keeps the oldest Service's port when two target the same one.
    services.sort_by(|a, b| (&a.creation_time, &a.hostname).cmp(&(&b.creation_time, &b.hostname)));
    let mut by_port = BTreeMap::new();
    for s in services {
        for t in targets_in(mesh, proxy, s) {
            by_port.entry(t.target_port).or_insert(t);
        }
    }
    by_port.into_values().collect()
}

/// Whether `proxy` can be an endpoint of `service`: a workload serves the Services of its own namespace
/// (istiod finds them by the pod's namespace), so the rest of the mesh's endpoints are never read.
fn may_serve(proxy: &Proxy, service: &Service) -> bool {
    proxy
        .namespace
        .as_deref()
        .is_none_or(|ns| *service.namespace == *ns)
}

/// The targets `service` has on the proxy, in port order (with repeats when several of its endpoints
/// are the proxy's).
pub fn targets_in(mesh: &dyn Mesh, proxy: &Proxy, service: &Service) -> Vec<ServiceTarget> {
    if !may_serve(proxy, service) {
        return Vec::new();
    }
    let own = |e: &&Endpoint| {
        proxy.ips.contains(&e.address) && proxy.cluster_id.as_ref().is_none_or(|c| c == e.cluster())
    };
    let mut out = Vec::new();
    for ep in mesh.endpoints(service).filter(own) {
        for p in service.ports.iter().filter(|p| p.protocol != Protocol::Udp) {
            out.push(ServiceTarget {
                target_port: ep.port(&p.name).unwrap_or(p.port),
                port: p.port,
                protocol: p.protocol,
                hostname: service.hostname.clone(),
            });
        }
    }
    out
}

/// A proxy's service targets by service, as a stream last saw them: a change that moves them (an
/// endpoint of the proxy's IP added to or removed from a service, a service's ports changed) changes
/// its inbound listener and clusters, which an endpoint-only push would not send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served(BTreeMap<Hostname, Vec<ServiceTarget>>);

impl Served {
    /// The targets of `proxy` in `mesh`; `None` for a proxy with no inbound side (not a sidecar, or
    /// no address).
    pub fn of(mesh: &dyn Mesh, proxy: &Proxy) -> Option<Self> {
        if proxy.kind != ProxyKind::Sidecar || proxy.ips.is_empty() {
            return None;
        }
        let mut served = Self::default();
        for s in mesh.services() {
            served.set(mesh, proxy, s);
        }
        Some(served)
    }

    /// These targets after a change to the services `hosts` alone.
    pub fn after(&self, mesh: &dyn Mesh, proxy: &Proxy, hosts: &BTreeSet<Hostname>) -> Self {
        let mut next = self.clone();
        for h in hosts {
            next.0.remove(h);
            if let Some(s) = mesh.service(h) {
                next.set(mesh, proxy, s);
            }
        }
        next
    }

    fn set(&mut self, mesh: &dyn Mesh, proxy: &Proxy, service: &Service) {
        let targets = targets_in(mesh, proxy, service);
        if !targets.is_empty() {
            self.0.insert(service.hostname.clone(), targets);
        }
    }
}

#[cfg(test)]
#[path = "service_targets_tests.rs"]
mod tests;
