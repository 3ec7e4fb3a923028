//! VirtualService references, istioctl's `virtualservice` analyzers: route and mirror destinations
//! whose host (IST0101), port (IST0101, IST0112) or subset (IST0101) does not exist in any cluster;
//! gateways that do not exist (IST0101) or serve none of the VirtualService's hosts (IST0132); and
//! mesh-bound VirtualServices that define the same host (IST0109).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Code, Input, Message, clusters_text, hosts};
use crate::{
    istio::{Config, Spec, VirtualService},
    traffic::hosts::{HostPattern, resolve},
};

/// istio's reserved gateway name for the sidecars.
const MESH: &str = "mesh";

/// A route or mirror destination, wherever the VirtualService names it.
struct Dest {
    /// `route`, `mirror host`, ….
    what: &'static str,
    host: String,
    subset: String,
    port: Option<u32>,
}

fn virtual_services(input: &Input) -> impl Iterator<Item = (&Config, &VirtualService)> {
    input.each(|s| match s {
        Spec::VirtualService(v) => Some(v),
        _ => None,
    })
}

/// `virtualservice.DestinationHostAnalyzer`: destination hosts and ports, and gateway-bound routes
/// without a subset to a host that mesh routes split by subset (IST0140).
pub(super) fn hosts(input: &Input, out: &mut Vec<Message>) {
    // VirtualServices routing one of their own hosts to a subset, with those destination hosts.
    let split: Vec<(&Config, Vec<String>)> = virtual_services(input)
        .map(|(c, vs)| {
            let hosts = dests(vs)
                .into_iter()
                .filter(|d| d.what == "host" && !d.subset.is_empty() && vs.hosts.contains(&d.host))
                .map(|d| d.host)
                .collect();
            (c, hosts)
        })
        .collect();
    for (c, vs) in virtual_services(input) {
        destinations(input, c, vs, out);
        if vs.gateways.is_empty() {
            continue;
        }
        for d in vs.http.iter().flat_map(|r| &r.route).map(|r| &r.destination) {
            if !d.subset.is_empty() {
                continue;
            }
            for (other, hosts) in &split {
                for _ in hosts.iter().filter(|h| **h == d.host) {
                    out.push(Message::new(
                        Code::IngressRouteRulesNotAffected,
                        &c.object_ref(),
                        format!(
                            "Subset in virtual service {}/{} has no effect on ingress gateway {}/{} requests",
                            other.meta.namespace, other.meta.name, c.meta.namespace, c.meta.name
                        ),
                    ));
                }
            }
        }
    }
}

/// `virtualservice.DestinationRuleAnalyzer`: destination subsets.
pub(super) fn subsets(input: &Input, out: &mut Vec<Message>) {
    for (c, vs) in virtual_services(input) {
        let ns = &*c.meta.namespace;
        for d in dests(vs).into_iter().filter(|d| !d.subset.is_empty()) {
            if !subset_defined(input, ns, &d.host, &d.subset) {
                out.push(Message::new(
                    Code::ReferencedResourceNotFound,
                    &c.object_ref(),
                    format!(
                        "Referenced {}+subset in destinationrule not found: \"{}+{}\"",
                        d.what, d.host, d.subset
                    ),
                ));
            }
        }
    }
}

/// `virtualservice.GatewayAnalyzer`.
pub(super) fn gateways(input: &Input, out: &mut Vec<Message>) {
    for (c, vs) in virtual_services(input) {
        gateway_refs(input, c, vs, out);
    }
}

fn destinations(input: &Input, c: &Config, vs: &VirtualService, out: &mut Vec<Message>) {
    let object = c.object_ref();
    let ns = &*c.meta.namespace;
    for d in dests(vs) {
        let Some(service) = hosts::lookup(input, ns, &vs.export_to, &d.host) else {
            let all: BTreeSet<String> = input
                .services
                .iter()
                .flat_map(|s| s.clusters.iter().cloned())
                .collect();
            let searched = clusters_text(&all);
            out.push(Message::new(
                Code::ReferencedResourceNotFound,
                &object,
                format!(
                    "Referenced {} not found: {:?} (no service of that name visible in namespace {ns} \
                     in any cluster: {searched})",
                    d.what, d.host
                ),
            ));
            continue;
        };
        match d.port {
            None if service.ports.len() > 1 => out.push(Message::new(
                Code::VirtualServiceDestinationPortSelectorRequired,
                &object,
                format!(
                    "This VirtualService routes to a service {:?} that exposes multiple ports {:?}. \
                     Specifying a port in the destination is required to disambiguate.",
                    d.host, service.ports
                ),
            )),
            Some(p) if !service.ports.contains(&p) => out.push(Message::new(
                Code::ReferencedResourceNotFound,
                &object,
                format!(
                    "Referenced host:port not found: \"{}:{p}\" (ports in {}: {:?})",
                    d.host,
                    clusters_text(&service.clusters),
                    service.ports
                ),
            )),
            _ => {}
        }
    }
}

/// Whether a DestinationRule for `host` (named in namespace `ns`) defines `subset`.
fn subset_defined(input: &Input, ns: &str, host: &str, subset: &str) -> bool {
    let fqdn = resolve(host, ns, &input.settings.domain_suffix);
    input
        .each(|s| match s {
            Spec::DestinationRule(d) => Some(d),
            _ => None,
        })
        .any(|(c, dr)| {
            let dr_host = resolve(&dr.host, &c.meta.namespace, &input.settings.domain_suffix);
            HostPattern::parse(&dr_host).matches(&fqdn) && dr.subsets.iter().any(|s| s.name == subset)
        })
}

/// Every destination: HTTP, TLS and TCP routes, HTTP mirrors.
fn dests(vs: &VirtualService) -> Vec<Dest> {
    let mut out = Vec::new();
    for kind in [&vs.tcp, &vs.tls] {
        for route in kind {
            for rd in route["route"].as_array().into_iter().flatten() {
                out.extend(json_dest("host", &rd["destination"]));
            }
        }
    }
    for route in &vs.http {
        for rd in &route.route {
            out.push(Dest {
                what: "host",
                host: rd.destination.host.clone(),
                subset: rd.destination.subset.clone(),
                port: rd.destination.port.as_ref().map(|p| p.number),
            });
        }
        let mirrors = route
            .mirrors
            .iter()
            .flatten()
            .filter_map(|m| m.destination.as_ref());
        for d in route.mirror.iter().chain(mirrors) {
            out.push(Dest {
                what: "mirror host",
                host: d.host.clone(),
                subset: d.subset.clone(),
                port: d.port.as_ref().map(|p| p.number),
            });
        }
    }
    out
}

/// A destination the model keeps as JSON (TCP and TLS routes).
fn json_dest(what: &'static str, d: &Value) -> Option<Dest> {
    Some(Dest {
        what,
        host: d["host"].as_str()?.to_owned(),
        subset: d["subset"].as_str().unwrap_or_default().to_owned(),
        port: d["port"]["number"].as_u64().and_then(|n| u32::try_from(n).ok()),
    })
}

fn gateway_refs(input: &Input, c: &Config, vs: &VirtualService, out: &mut Vec<Message>) {
    let object = c.object_ref();
    let vs_ns = &*c.meta.namespace;
    for name in vs.gateways.iter().filter(|g| *g != MESH) {
        let (gw_ns, gw_name) = name.split_once('/').unwrap_or((vs_ns, name));
        let gw = input.configs.iter().find_map(|g| match &g.spec {
            Spec::Gateway(spec) if *g.meta.namespace == *gw_ns && *g.meta.name == *gw_name => Some(spec),
            _ => None,
        });
        if gw.is_none() {
            out.push(Message::new(
                Code::ReferencedResourceNotFound,
                &object,
                format!("Referenced gateway not found: {name:?}"),
            ));
        }
        let served = gw
            .into_iter()
            .flat_map(|g| g.servers.iter().flat_map(|s| s.hosts.iter()))
            .filter_map(|h| match h.split_once('/') {
                Some((".", h)) if gw_ns == vs_ns => Some(h),
                Some(("*", h)) => Some(h),
                Some((ns, h)) if ns == vs_ns => Some(h),
                Some(_) => None,
                None => Some(h.as_str()),
            });
        if !served
            .into_iter()
            .any(|g| vs.hosts.iter().any(|h| hosts::overlap(g, h)))
        {
            out.push(Message::new(
                Code::VirtualServiceHostNotFoundInGateway,
                &object,
                format!(
                    "one or more host {:?} defined in VirtualService {vs_ns}/{} not found in Gateway \
                     {gw_ns}/{gw_name}.",
                    vs.hosts, c.meta.name
                ),
            ));
        }
    }
}

/// `virtualservice.ConflictingMeshGatewayHostsAnalyzer` (IST0109): mesh-bound VirtualServices
/// visible in the same namespaces defining the same host.
pub(super) fn mesh_conflicts(input: &Input, out: &mut Vec<Message>) {
    let mut by_host: BTreeMap<(String, String), Vec<&Config>> = BTreeMap::new();
    for (c, vs) in virtual_services(input) {
        if !(vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == MESH)) {
            continue;
        }
        let ns = &*c.meta.namespace;
        let scopes: Vec<String> = if vs.export_to.is_empty() || vs.export_to.iter().any(|e| e == "*") {
            vec!["*".into()]
        } else {
            let mut s: Vec<String> = vs
                .export_to
                .iter()
                .map(|e| if e == "." { ns.to_owned() } else { e.clone() })
                .collect();
            s.sort();
            s.dedup();
            s
        };
        for scope in &scopes {
            for h in &vs.hosts {
                let fqdn = resolve(h, ns, &input.settings.domain_suffix).to_string();
                by_host.entry((scope.clone(), fqdn)).or_default().push(c);
            }
        }
    }
    // A namespace-scoped host also conflicts with every exported-to-all VirtualService whose host
    // overlaps it; each VirtualService is reported once, for the first conflict found.
    let mut reported = BTreeSet::new();
    for ((scope, host), list) in &by_host {
        let mut list = list.clone();
        if scope != "*" {
            for ((other_scope, other), more) in &by_host {
                if other_scope == "*" && hosts::overlap(host, other) {
                    list.extend(more);
                }
            }
        }
        if list.len() < 2 {
            continue;
        }
        let names: Vec<String> = list
            .iter()
            .map(|c| format!("{}/{}", c.meta.namespace, c.meta.name))
            .collect();
        for c in list {
            if !reported.insert(c.object_ref()) {
                continue;
            }
            out.push(Message::new(
                Code::ConflictingMeshGatewayVirtualServiceHosts,
                &c.object_ref(),
                format!(
                    "The VirtualServices {} associated with mesh gateway define the same host {scope}/{host} \
                     which can lead to undefined behavior. This can be fixed by merging the conflicting \
                     VirtualServices into a single resource.",
                    names.join(",")
                ),
            ));
        }
    }
}
