//! istiod's per-endpoint outbound listeners of passthrough services (the StatefulSet case of
//! `buildSidecarOutboundListeners`). A headless Service, or a ServiceEntry `resolution: NONE` without
//! addresses, has no address of its own to listen on, so for each port that is neither HTTP nor UDP a
//! sidecar gets one listener per endpoint, `<endpoint IP>_<port>`, proxying to the service's
//! `ORIGINAL_DST` cluster: a client that dials one pod of a StatefulSet by its IP gets that service's
//! cluster (its DestinationRule, mTLS to the pod) instead of the catch-all. HTTP ports keep the shared
//! `0.0.0.0_<port>` listener, whose routes pick the service by host.
//!
//! As istiod's (`ServiceEndpointsByPort`), every endpoint of the port counts, whatever its health,
//! cluster or network; only the proxy's own (first) IP is left out of its listener names, since its
//! traffic to itself never leaves through the outbound side. A ServiceEntry `NONE` with no endpoint on a
//! port and no workload selector gets istiod's fallback instead, a `0.0.0.0_<port>` TCP listener,
//! unless an HTTP service port holds that listener (istiod would sniff the two apart; meshd does not
//! sniff).
//!
//! Owns: which listeners these are, the service each proxies to, and which services' listeners follow
//! their endpoints ([`follows_endpoints`]). Does NOT: build the listener ([`super::lds`]) or push
//! (`xds::push` asks [`follows_endpoints`]).

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr},
    sync::Arc,
};

use super::{Mesh, Proxy, lds};
use crate::model::{Origin, Protocol, Resolution, Service, ServicePort};

/// Whether `service`'s sidecar listeners follow its endpoints: a passthrough service with a port that
/// is neither HTTP nor UDP. A change of its endpoints pushes the sidecars that see it their listeners
/// (istiod's `HeadlessEndpointUpdate` push, of which sidecars take LDS and nothing else EDS does not
/// carry); an HTTP-only headless service changes no listener.
pub fn follows_endpoints(service: &Service) -> bool {
    service.resolution == Resolution::Passthrough && service.ports.iter().any(per_endpoint)
}

/// A port a passthrough service gets per-endpoint listeners on: TCP and undeclared protocols alike.
fn per_endpoint(port: &ServicePort) -> bool {
    !port.protocol.is_http() && port.protocol != Protocol::Udp
}

/// The names of the per-endpoint (and fallback) listeners `proxy` gets, but its own address's.
pub fn names(mesh: &dyn Mesh, proxy: &Proxy) -> BTreeSet<Arc<str>> {
    let own = proxy.ips.first();
    targets(mesh, proxy)
        .into_iter()
        .filter(|(ip, _, _)| Some(ip) != own)
        .map(|(ip, port, _)| Arc::from(format!("{ip}_{port}")))
        .collect()
}

/// The service whose listener `<ip>_<port>` is: the first, in host-name order, to claim the address and
/// port (istiod keeps the first listener built for a key). Independent of the proxy's own address, so
/// proxies that share a cache view share the answer.
pub fn owner<'m>(mesh: &'m dyn Mesh, proxy: &Proxy, ip: IpAddr, port: u16) -> Option<&'m Service> {
    targets(mesh, proxy)
        .into_iter()
        .find(|(i, p, _)| *i == ip && *p == port)
        .map(|(_, _, s)| s)
}

/// Every (address, service port, service) a per-endpoint or fallback listener stands for, in service
/// and port order: a passthrough service with no address for the proxy gets one per endpoint of each
/// [`per_endpoint`] port; a ServiceEntry's port with no endpoint and no workload selector gets
/// `0.0.0.0` instead, unless an HTTP port holds it.
fn targets<'m>(mesh: &'m dyn Mesh, proxy: &Proxy) -> Vec<(IpAddr, u16, &'m Service)> {
    let addressless = mesh
        .services()
        .filter(|s| s.resolution == Resolution::Passthrough && lds::vips(s, proxy).next().is_none());
    let mut out = Vec::new();
    let mut http: Option<BTreeSet<u16>> = None;
    for s in addressless {
        for p in s.ports.iter().filter(|p| per_endpoint(p)) {
            let before = out.len();
            out.extend(
                mesh.endpoints(s)
                    .filter(|e| e.port(&p.name).is_some())
                    .map(|e| (e.address, p.port, s)),
            );
            if out.len() == before && fallback(s) {
                let http = http.get_or_insert_with(|| http_ports(mesh));
                if !http.contains(&p.port) {
                    out.push((IpAddr::V4(Ipv4Addr::UNSPECIFIED), p.port, s));
                }
            }
        }
    }
    out
}

/// istiod's wildcard fallback applies: a ServiceEntry (not a Kubernetes Service, whose empty endpoints
/// mean nothing to reach) selecting no workloads that may appear later.
fn fallback(service: &Service) -> bool {
    matches!(service.origin, Origin::ServiceEntry { .. }) && service.selector.is_none()
}

/// The ports some service serves HTTP on: their `0.0.0.0_<port>` listener is the HTTP one.
fn http_ports(mesh: &dyn Mesh) -> BTreeSet<u16> {
    mesh.services()
        .flat_map(|s| &s.ports)
        .filter(|p| p.protocol.is_http())
        .map(|p| p.port)
        .collect()
}

#[cfg(test)]
#[path = "pod_listeners_tests.rs"]
mod tests;
