//! ServiceEntries, WorkloadEntries, pods and the Kubernetes Services that select WorkloadEntries → the
//! services and endpoint shards of the ServiceEntry registry (istiod's `convertServices`,
//! `convertServiceEntryToInstances`, `mergeServicesByNamespaceHost` and the Kubernetes controller's
//! WorkloadEntry handler). Pure: the whole registry view from the whole config, so the task sends it
//! as one `Update::Replace` and the aggregate diffs.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    sync::Arc,
};

use ipnet::IpNet;

use super::workload::{self, Context, Instance};
use crate::{
    istio::{Config, ServiceEntry, Spec, service_entry},
    model::{
        DnsTarget, DnsTargets, Endpoint, EndpointPort, ExportTo, Hostname, Labels, Origin, PerCluster,
        Resolution, Service, ServiceKey, ServicePort, TargetPort, WorkloadKind,
    },
    registry::{endpoints::PodWorkload, service::protocol},
};

/// What the registry sends the aggregate, and what it could not use.
#[derive(Debug, Default, PartialEq)]
pub struct Built {
    /// One service per (host, namespace) of the ServiceEntries.
    pub services: Vec<Arc<Service>>,
    /// Non-empty endpoint lists, sorted by address.
    pub endpoints: Vec<(ServiceKey, Arc<[Endpoint]>)>,
    /// ServiceEntries left out of a host they declare, with why (shown in the logs).
    pub ignored: Vec<(String, String)>,
}

/// A Kubernetes Service that may select WorkloadEntries: its key, selector and ports.
#[derive(Debug, Clone, PartialEq)]
pub struct Selecting {
    /// The service.
    pub key: ServiceKey,
    /// Its `spec.selector`.
    pub selector: Labels,
    /// Its ports (target ports map to WorkloadEntry ports).
    pub ports: Vec<ServicePort>,
}

/// Builds the registry view from every ServiceEntry and WorkloadEntry in `configs`, the Kubernetes
/// Services in `kubernetes` and the config cluster's ready pods (`pods`, sorted by namespace), which
/// ServiceEntries select beside WorkloadEntries.
pub fn build<'a>(
    configs: impl IntoIterator<Item = &'a Config>,
    kubernetes: &[Selecting],
    pods: &[PodWorkload],
    ctx: &Context,
) -> Built {
    let mut entries: Vec<(&Config, &ServiceEntry)> = Vec::new();
    // WorkloadEntries per namespace, in name order (istiod sorts selected workloads).
    let mut instances: BTreeMap<&str, Vec<Instance>> = BTreeMap::new();
    for c in configs {
        match &c.spec {
            Spec::ServiceEntry(se) => entries.push((c, se)),
            Spec::WorkloadEntry(we) => {
                let w = (WorkloadKind::WorkloadEntry, c.meta.name.clone());
                if let Some(i) = workload::instance(we, Some(&c.meta.labels), &c.meta.namespace, w, ctx) {
                    instances.entry(&c.meta.namespace).or_default().push(i);
                }
            }
            _ => {}
        }
    }
    for list in instances.values_mut() {
        list.sort_by(|a, b| a.name.cmp(&b.name));
    }
    // Oldest first within a namespace: the first ServiceEntry of a host supplies its attributes.
    entries.sort_by(|(a, _), (b, _)| {
        let order = |c: &'a Config| {
            (
                c.meta.namespace.clone(),
                c.meta.creation_timestamp.clone(),
                c.meta.name.clone(),
            )
        };
        order(a).cmp(&order(b))
    });

    let mut out = Built::default();
    let mut services: BTreeMap<ServiceKey, (Service, Vec<Endpoint>)> = BTreeMap::new();
    for (c, se) in entries {
        let ns = &*c.meta.namespace;
        let selected: Vec<Instance> = match &se.workload_selector {
            Some(sel) => instances
                .get(ns)
                .into_iter()
                .flatten()
                .filter(|i| i.selected_by(&sel.labels))
                .cloned()
                .chain(
                    pods_in(pods, ns)
                        .iter()
                        .filter(|p| workload::selects(&sel.labels, p.endpoint.labels()))
                        .map(workload::pod),
                )
                .collect(),
            None => Vec::new(),
        };
        let inline: Vec<Instance> = se
            .endpoints
            .iter()
            .enumerate()
            .filter_map(|(n, ep)| {
                let w = (WorkloadKind::ServiceEntry, format!("{}-{n}", c.meta.name).into());
                workload::instance(ep, None, ns, w, ctx)
            })
            .collect();
        for host in &se.hosts {
            let service = service(c, se, host, ctx);
            let ports = &service.ports;
            let eps: Vec<Endpoint> = inline
                .iter()
                .chain(&selected)
                .map(|i| i.endpoint(se_ports(ports, i), &ctx.cluster))
                .collect();
            let key = service.key();
            match services.get_mut(&key) {
                None => {
                    services.insert(key, (service, eps));
                }
                Some((first, first_eps)) => match merge(first, &service) {
                    Ok(()) => first_eps.extend(eps),
                    Err(why) => out.ignored.push((
                        format!("ServiceEntry {ns}/{} host {host}", c.meta.name),
                        why.to_owned(),
                    )),
                },
            }
        }
    }

    // Kubernetes Services selecting WorkloadEntries get them as endpoints; a ServiceEntry of the same
    // host and namespace adds none (the Kubernetes Service wins the host).
    let mut endpoints: BTreeMap<ServiceKey, Vec<Endpoint>> = BTreeMap::new();
    for k in kubernetes {
        let eps: Vec<Endpoint> = instances
            .get(&*k.key.namespace)
            .into_iter()
            .flatten()
            .filter(|i| i.selected_by(&k.selector))
            .filter_map(|i| {
                let ports = kubernetes_ports(&k.ports, i)?;
                Some(i.endpoint(ports, &ctx.cluster))
            })
            .collect();
        endpoints.insert(k.key.clone(), eps);
    }
    for (key, (service, eps)) in services {
        endpoints.entry(key).or_insert(eps);
        out.services.push(Arc::new(service));
    }
    out.endpoints = endpoints
        .into_iter()
        .filter(|(_, eps)| !eps.is_empty())
        .map(|(k, mut eps)| {
            eps.sort_by_key(|e| e.address);
            (k, eps.into())
        })
        .collect();
    out
}

/// The pods of `namespace` in `pods` (sorted by namespace).
fn pods_in<'p>(pods: &'p [PodWorkload], namespace: &str) -> &'p [PodWorkload] {
    let start = pods.partition_point(|p| &*p.namespace < namespace);
    let len = pods[start..].partition_point(|p| &*p.namespace == namespace);
    &pods[start..start + len]
}

/// One host of a ServiceEntry as a service.
fn service(c: &Config, se: &ServiceEntry, host: &str, ctx: &Context) -> Service {
    let ns = &c.meta.namespace;
    let vips: Vec<IpAddr> = se.addresses.iter().filter_map(|a| vip(a)).collect();
    let ports: Vec<ServicePort> = se
        .ports
        .iter()
        .filter_map(|p| {
            Some(ServicePort {
                name: p.name.as_str().into(),
                port: u16::try_from(p.number).ok()?,
                protocol: protocol(
                    Some(&p.protocol).filter(|p| !p.is_empty()).map(String::as_str),
                    "",
                    None,
                ),
                target_port: u16::try_from(p.target_port)
                    .ok()
                    .filter(|t| *t != 0)
                    .map(TargetPort::Number),
            })
        })
        .collect();
    Service {
        hostname: Hostname::from(host),
        namespace: ns.clone(),
        name: host.into(),
        cluster_vips: if vips.is_empty() {
            PerCluster::new()
        } else {
            [(ctx.cluster.clone(), vips)].into_iter().collect()
        },
        external_addresses: PerCluster::new(),
        node_ports: PerCluster::new(),
        labels: Arc::new(c.meta.labels.clone()),
        service_accounts: se
            .subject_alt_names
            .iter()
            .map(|s| Arc::from(s.as_str()))
            .collect(),
        creation_time: c.meta.creation_timestamp.as_deref().map(Arc::from),
        resolution: match se.resolution {
            service_entry::Resolution::None => Resolution::Passthrough,
            service_entry::Resolution::Static => Resolution::ClientSideLb,
            service_entry::Resolution::Dns => Resolution::Dns(dns_targets(se, host, &ports)),
            service_entry::Resolution::DnsRoundRobin => {
                Resolution::DnsRoundRobin(dns_targets(se, host, &ports))
            }
        },
        origin: Origin::ServiceEntry {
            namespace: ns.clone(),
            names: vec![c.meta.name.clone()],
        },
        mesh_external: se.location == service_entry::Location::MeshExternal,
        ports,
        export_to: ExportTo::parse(se.export_to.iter().map(String::as_str), ns),
        selector: se.workload_selector.as_ref().map(|s| Arc::new(s.labels.clone())),
    }
}

/// The names a `DNS` / `DNS_ROUND_ROBIN` entry's proxies resolve for `host` (istiod's
/// `convertServiceEntryToInstances`): the host itself on each port's `targetPort` or number when the
/// entry lists no endpoints and selects no workloads, else its endpoints whose address is a DNS name
/// (IP endpoints are ordinary endpoints; `unix://` sockets are not routed to).
fn dns_targets(se: &ServiceEntry, host: &str, ports: &[ServicePort]) -> DnsTargets {
    let port_of = |p: &ServicePort, named: Option<u32>| EndpointPort {
        service_port_name: p.name.clone(),
        port: named
            .and_then(|n| u16::try_from(n).ok())
            .or(match p.target_port {
                Some(TargetPort::Number(t)) => Some(t),
                _ => None,
            })
            .unwrap_or(p.port),
    };
    if se.endpoints.is_empty() && se.workload_selector.is_none() {
        return Arc::new([DnsTarget {
            address: host.into(),
            ports: ports.iter().map(|p| port_of(p, None)).collect(),
            locality: Default::default(),
            weight: 1,
        }]);
    }
    se.endpoints
        .iter()
        .filter(|ep| {
            !ep.address.is_empty()
                && !ep.address.starts_with("unix://")
                && ep.address.parse::<IpAddr>().is_err()
        })
        .map(|ep| DnsTarget {
            address: ep.address.as_str().into(),
            ports: ports
                .iter()
                .map(|p| port_of(p, ep.ports.get(&*p.name).copied()))
                .collect(),
            locality: workload::locality(&ep.locality, '/'),
            weight: ep.weight.max(1),
        })
        .collect()
}

/// An address as a VIP: an IP, or a single-address CIDR. Wider CIDRs match by destination range (a
/// listener concern, #19), not as a VIP.
fn vip(a: &str) -> Option<IpAddr> {
    a.parse::<IpAddr>().ok().or_else(|| {
        let net: IpNet = a.parse().ok()?;
        (net.prefix_len() == net.max_prefix_len()).then(|| net.addr())
    })
}

/// istiod merges two ServiceEntries of one host and namespace only when resolution, labels, selector
/// and exportTo agree: the later one's new ports are added; otherwise it is left out.
fn merge(first: &mut Service, later: &Service) -> Result<(), &'static str> {
    if std::mem::discriminant(&first.resolution) != std::mem::discriminant(&later.resolution)
        || first.labels != later.labels
        || first.selector != later.selector
        || first.export_to != later.export_to
    {
        return Err(
            "an older ServiceEntry declares this host with another resolution, labels, selector or exportTo",
        );
    }
    // Both entries' names are resolved (istiod keeps both entries' instances).
    if let (Resolution::Dns(t) | Resolution::DnsRoundRobin(t), more) =
        (&mut first.resolution, later.resolution.dns_targets())
    {
        let new: Vec<DnsTarget> = more.iter().filter(|m| !t.contains(m)).cloned().collect();
        if !new.is_empty() {
            *t = t.iter().cloned().chain(new).collect();
        }
    }
    let known: BTreeSet<u16> = first.ports.iter().map(|p| p.port).collect();
    first
        .ports
        .extend(later.ports.iter().filter(|p| !known.contains(&p.port)).cloned());
    if let (Origin::ServiceEntry { names, .. }, Origin::ServiceEntry { names: more, .. }) =
        (&mut first.origin, &later.origin)
    {
        names.extend(more.iter().cloned());
    }
    Ok(())
}

/// A ServiceEntry port's endpoint port: the entry's port of that name, else `targetPort`, else the
/// port number (istiod's order, without unix sockets).
fn se_ports(ports: &[ServicePort], i: &Instance) -> Arc<[EndpointPort]> {
    ports
        .iter()
        .map(|p| {
            let named = i.ports.get(&*p.name).and_then(|n| u16::try_from(*n).ok());
            let target = match p.target_port {
                Some(TargetPort::Number(t)) => Some(t),
                _ => None,
            };
            EndpointPort {
                service_port_name: p.name.clone(),
                port: named.or(target).unwrap_or(p.port),
            }
        })
        .collect()
}

/// A Kubernetes Service port's endpoint port on a WorkloadEntry: a named `targetPort` is looked up in
/// the entry's ports (left out when it has none of that name), a number is used as is. `None` when no
/// port maps.
fn kubernetes_ports(ports: &[ServicePort], i: &Instance) -> Option<Arc<[EndpointPort]>> {
    let mapped: Vec<EndpointPort> = ports
        .iter()
        .filter_map(|p| {
            let port = match &p.target_port {
                Some(TargetPort::Name(n)) => u16::try_from(*i.ports.get(&**n)?).ok()?,
                Some(TargetPort::Number(n)) => *n,
                None => p.port,
            };
            Some(EndpointPort {
                service_port_name: p.name.clone(),
                port,
            })
        })
        .collect();
    (!mapped.is_empty()).then(|| mapped.into())
}

#[cfg(test)]
#[path = "pods_tests.rs"]
mod pods_tests;
#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
