//! VirtualServices as istiod indexes them for sidecars and proxyless gRPC (`push_context.go:
//! initVirtualServices`, `model/virtualservice.go:resolveVirtualServiceShortnames`,
//! `computeWildcardHostVirtualServiceIndex`): built once per snapshot, asked per (proxy namespace,
//! service host).
//!
//! Mesh-bound VirtualServices (`gateways` empty or naming `mesh`) route sidecars and gRPC clients;
//! those naming a Gateway are kept apart for the gateways ([`VsIndex::for_gateway`], istiod's
//! `VirtualServicesForGateway`), their gateway names resolved as istiod's `resolveGatewayName`.
//! Delegates (no `hosts`) are not indexed themselves: their routes are merged into the roots that
//! delegate to them ([`delegate`](super::delegate)) before hosts are resolved, so a delegate's short
//! names resolve in the root's namespace, as in istiod.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use super::{
    Settings,
    delegate::{self, Delegates},
    hosts::{self, HostPattern},
    visibility::Visibility,
};
use crate::istio::{
    Config, ObjectRef, Spec, VirtualService,
    l4_route::{TcpRoute, TlsRoute},
};

/// The reserved gateway name of sidecars.
pub const MESH_GATEWAY: &str = "mesh";

/// One mesh-bound VirtualService, its hosts and destination hosts resolved in its namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedVs {
    /// The object.
    pub object: ObjectRef,
    /// `metadata.resourceVersion` (or a file's content hash): part of what routes built from it depend on.
    pub revision: String,
    /// `metadata.creationTimestamp`: istiod orders VirtualServices by it (files have none: first).
    pub created: Option<String>,
    /// `spec.hosts`, resolved.
    pub hosts: Vec<HostPattern>,
    /// The spec with delegates merged in and every destination host resolved.
    pub spec: VirtualService,
    /// Its `exportTo`.
    pub visibility: Visibility,
    /// Some match names `sourceLabels`: its routes depend on the proxy's labels.
    pub source_dependent: bool,
    /// The gateways it binds to, resolved (`ns/name`, or [`MESH_GATEWAY`]); `[mesh]` when none.
    pub gateways: Vec<String>,
    /// Its TCP routes, destination hosts resolved (routes that do not parse are left out: validation
    /// reported them).
    pub tcp: Vec<TcpRoute>,
    /// Its TLS routes, likewise.
    pub tls: Vec<TlsRoute>,
}

/// istiod's `resolveGatewayName`: `name` and `./name` are in the VirtualService's namespace, the
/// legacy `name.ns.svc.…` is `ns/name`; `mesh` stays.
pub fn resolve_gateway(name: &str, namespace: &str) -> String {
    if name == MESH_GATEWAY {
        return name.to_owned();
    }
    match name.split_once('/') {
        Some((".", gw)) => format!("{namespace}/{gw}"),
        Some(_) => name.to_owned(),
        None => match name.split_once('.') {
            None => format!("{namespace}/{name}"),
            Some((gw, rest)) => {
                let ns = rest.split('.').next().unwrap_or(rest);
                format!("{ns}/{gw}")
            }
        },
    }
}

impl ResolvedVs {
    fn from_config(
        cfg: &Config,
        vs: &VirtualService,
        settings: &Settings,
        delegates: &Delegates,
    ) -> Option<Self> {
        if vs.hosts.is_empty() {
            return None;
        }
        let ns = &*cfg.meta.namespace;
        let resolve = |h: &str| hosts::resolve(h, ns, &settings.domain_suffix);
        let mut spec = vs.clone();
        spec.http = delegate::merge(vs, ns, delegates);
        for route in &mut spec.http {
            let mirrors = route
                .mirrors
                .iter_mut()
                .flatten()
                .filter_map(|m| m.destination.as_mut());
            let dests = route.route.iter_mut().map(|d| &mut d.destination);
            for d in dests.chain(route.mirror.as_mut()).chain(mirrors) {
                d.host = resolve(&d.host).to_string();
            }
            for m in &mut route.matches {
                for g in &mut m.gateways {
                    *g = resolve_gateway(g, ns);
                }
            }
        }
        let mut gateways: Vec<String> = vs.gateways.iter().map(|g| resolve_gateway(g, ns)).collect();
        if gateways.is_empty() {
            gateways.push(MESH_GATEWAY.to_owned());
        }
        let l4 = |d: &mut crate::istio::l4_route::RouteDestination| {
            d.destination.host = resolve(&d.destination.host).to_string();
        };
        let mut tcp: Vec<TcpRoute> = vs
            .tcp
            .iter()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect();
        for r in &mut tcp {
            r.route.iter_mut().for_each(l4);
            for m in &mut r.matches {
                m.gateways.iter_mut().for_each(|g| *g = resolve_gateway(g, ns));
            }
        }
        let mut tls: Vec<TlsRoute> = vs
            .tls
            .iter()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect();
        for r in &mut tls {
            r.route.iter_mut().for_each(l4);
            for m in &mut r.matches {
                m.gateways.iter_mut().for_each(|g| *g = resolve_gateway(g, ns));
            }
        }
        let source_dependent = spec
            .http
            .iter()
            .any(|r| r.matches.iter().any(|m| !m.source_labels.is_empty()));
        Some(Self {
            object: cfg.object_ref(),
            revision: cfg.meta.revision.clone(),
            created: cfg.meta.creation_timestamp.clone(),
            hosts: vs.hosts.iter().map(|h| HostPattern::parse(&resolve(h))).collect(),
            visibility: Visibility::of_config(&vs.export_to, ns, settings.default_vs_export),
            spec,
            source_dependent,
            gateways,
            tcp,
            tls,
        })
    }

    /// Bound to sidecars (`mesh`).
    pub fn mesh_bound(&self) -> bool {
        self.gateways.iter().any(|g| g == MESH_GATEWAY)
    }

    /// The VirtualService as istiod's route metadata names it
    /// (`/apis/networking.istio.io/v1/namespaces/<ns>/virtual-service/<name>`: istiod's kind is v1).
    pub fn config_path(&self) -> String {
        format!(
            "/apis/{}/v1/namespaces/{}/virtual-service/{}",
            self.object.kind.group(),
            self.object.namespace,
            self.object.name
        )
    }
}

/// Every mesh-bound VirtualService in istiod's order (creation time, then name, then namespace).
#[derive(Debug, Default)]
pub struct VsIndex {
    all: Vec<Arc<ResolvedVs>>,
    /// Those bound to some Gateway, in the same order.
    gateway_bound: Vec<Arc<ResolvedVs>>,
    /// Exact hosts that several VirtualServices name (`pilot_vservice_dup_domain`, IST0109).
    duplicates: BTreeMap<Arc<str>, Vec<ObjectRef>>,
    /// Namespaces with a DestinationRule that selects workloads: a consistent-hash policy read by
    /// routes there depends on the proxy's labels.
    selector_rule_namespaces: BTreeSet<Arc<str>>,
    /// Some DestinationRule asks for a consistent hash: routes carry hash policies.
    hashing_rules: bool,
}

impl VsIndex {
    /// Indexes the VirtualServices in `configs`; of DestinationRules it notes only what makes routes
    /// depend on the proxy (see [`VsIndex::label_key`], [`VsIndex::shapes_routes`]).
    pub fn build<'c>(configs: impl Iterator<Item = &'c Arc<Config>>, settings: &Settings) -> Self {
        let mut index = Self::default();
        let configs: Vec<&Arc<Config>> = configs.collect();
        let mut delegates = Delegates::new();
        for cfg in &configs {
            if let Spec::VirtualService(vs) = &cfg.spec
                && vs.hosts.is_empty()
            {
                let ns = &*cfg.meta.namespace;
                let visibility = Visibility::of_config(&vs.export_to, ns, settings.default_vs_export);
                delegates.insert((ns, &*cfg.meta.name), (vs, visibility));
            }
        }
        for cfg in &configs {
            match &cfg.spec {
                Spec::VirtualService(vs) => {
                    if let Some(r) = ResolvedVs::from_config(cfg, vs, settings, &delegates) {
                        let r = Arc::new(r);
                        if r.gateways.iter().any(|g| g != MESH_GATEWAY) {
                            index.gateway_bound.push(r.clone());
                        }
                        if r.mesh_bound() {
                            index.all.push(r);
                        }
                    }
                }
                Spec::DestinationRule(dr) => {
                    if dr.workload_selector.is_some() {
                        index.selector_rule_namespaces.insert(cfg.meta.namespace.clone());
                    }
                    let hashes = |p: &crate::istio::destination_rule::TrafficPolicy| {
                        let lb = |l: Option<&crate::istio::destination_rule::LoadBalancerSettings>| {
                            l.is_some_and(|l| l.consistent_hash.is_some())
                        };
                        lb(p.load_balancer.as_ref())
                            || p.port_level_settings.iter().any(|s| lb(s.load_balancer.as_ref()))
                    };
                    index.hashing_rules |= dr.traffic_policy.as_ref().is_some_and(hashes)
                        || dr
                            .subsets
                            .iter()
                            .any(|s| s.traffic_policy.as_ref().is_some_and(hashes));
                }
                _ => {}
            }
        }
        let by_age = |a: &Arc<ResolvedVs>, b: &Arc<ResolvedVs>| {
            (a.created.as_deref(), &a.object.name, &a.object.namespace).cmp(&(
                b.created.as_deref(),
                &b.object.name,
                &b.object.namespace,
            ))
        };
        index.all.sort_by(by_age);
        index.gateway_bound.sort_by(by_age);
        let mut by_host: BTreeMap<Arc<str>, Vec<ObjectRef>> = BTreeMap::new();
        for vs in &index.all {
            for h in &vs.hosts {
                if let HostPattern::Exact(h) = h {
                    by_host.entry(h.clone()).or_default().push(vs.object.clone());
                }
            }
        }
        by_host.retain(|_, v| v.len() > 1);
        index.duplicates = by_host;
        index
    }

    /// Every mesh-bound VirtualService, in istiod's order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResolvedVs>> {
        self.all.iter()
    }

    /// How many mesh-bound VirtualServices are in force (`pilot_virt_services`).
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// No mesh-bound VirtualService.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Whether routes can differ from the defaults at all: some VirtualService is in force or some
    /// DestinationRule asks for a consistent hash. When not, every proxy of a kind shares its routes.
    pub fn shapes_routes(&self) -> bool {
        !self.all.is_empty() || self.hashing_rules
    }

    /// Exact hosts that several VirtualServices name, with those VirtualServices in order (the first
    /// one a proxy sees wins).
    pub fn duplicates(&self) -> &BTreeMap<Arc<str>, Vec<ObjectRef>> {
        &self.duplicates
    }

    /// The VirtualServices a proxy in `namespace` sees, in istiod's order (`VirtualServicesForGateway`):
    /// those private to the namespace, then those exported to it, then public ones, each by age.
    pub fn visible<'s>(&'s self, namespace: &str) -> impl Iterator<Item = &'s Arc<ResolvedVs>> + use<'s> {
        self.ordered(namespace, |_| true).into_iter()
    }

    /// The VirtualServices bound to `gateway` (`ns/name`) that a gateway proxy in `namespace` sees,
    /// in [`VsIndex::visible`] order (istiod's `VirtualServicesForGateway`).
    pub fn for_gateway<'s>(&'s self, namespace: &str, gateway: &str) -> Vec<&'s Arc<ResolvedVs>> {
        order(&self.gateway_bound, namespace, |vs| {
            vs.gateways.iter().any(|g| g == gateway)
        })
    }

    /// Some VirtualService is bound to a Gateway.
    pub fn any_gateway_bound(&self) -> bool {
        !self.gateway_bound.is_empty()
    }

    /// [`VsIndex::visible`], only those `keep` accepts (filtered before ordering: cheap per host).
    fn ordered<'s>(
        &'s self,
        namespace: &str,
        keep: impl Fn(&ResolvedVs) -> bool,
    ) -> Vec<&'s Arc<ResolvedVs>> {
        order(&self.all, namespace, keep)
    }

    /// The VirtualServices that may route `host` for a proxy in `namespace`, best first: every one
    /// naming the host exactly, in [`VsIndex::visible`] order; failing that, the one with the most
    /// specific wildcard matching it (the first seen on a tie), as istiod's
    /// `mostSpecificWildcardVsIndex`. The first whose routes survive the proxy's source matches wins;
    /// the rest are duplicates.
    pub fn for_host<'s>(&'s self, namespace: &str, host: &str) -> Vec<&'s Arc<ResolvedVs>> {
        let exact = self.ordered(namespace, |vs| {
            vs.hosts.iter().any(|h| h.is_exact() && h.matches(host))
        });
        if !exact.is_empty() {
            return exact;
        }
        let specificity = |vs: &ResolvedVs| {
            vs.hosts
                .iter()
                .filter(|h| !h.is_exact() && h.matches(host))
                .map(|h| h.specificity())
                .max()
        };
        let mut best: Option<(usize, &'s Arc<ResolvedVs>)> = None;
        for vs in self.ordered(namespace, |vs| specificity(vs).is_some()) {
            let s = specificity(vs).unwrap_or_default();
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, vs));
            }
        }
        best.map(|(_, vs)| vs).into_iter().collect()
    }

    /// What of a proxy's labels its routes depend on, for a proxy in `namespace`: empty when nothing
    /// does (the common case, so every proxy of the namespace shares one encode). Else one character
    /// per `sourceLabels` match of the VirtualServices it sees (`1` holds), and, when a
    /// DestinationRule there selects workloads (its consistent hash becomes a route hash policy), the
    /// labels themselves.
    pub fn label_key(&self, namespace: &str, labels: &BTreeMap<String, String>) -> String {
        let mut key: String = self
            .visible(namespace)
            .filter(|vs| vs.source_dependent)
            .flat_map(|vs| vs.spec.http.iter().flat_map(|r| &r.matches))
            .filter(|m| !m.source_labels.is_empty())
            .map(|m| {
                let hit = m.source_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
                if hit { '1' } else { '0' }
            })
            .collect();
        if self.selector_rule_namespaces.contains(namespace) {
            for (k, v) in labels {
                key.push_str(&format!(";{k}={v}"));
            }
        }
        key
    }
}

/// `list`'s VirtualServices visible in `namespace` that `keep` accepts: private to the namespace,
/// then exported to it, then public, each by age (`list` is by age already: the sort is stable).
fn order<'s>(
    list: &'s [Arc<ResolvedVs>],
    namespace: &str,
    keep: impl Fn(&ResolvedVs) -> bool,
) -> Vec<&'s Arc<ResolvedVs>> {
    let mut out: Vec<&Arc<ResolvedVs>> = list
        .iter()
        .filter(|vs| vs.visibility.visible_in(namespace) && keep(vs))
        .collect();
    out.sort_by_key(|vs| match &vs.visibility {
        Visibility::Public => 2,
        _ if *vs.object.namespace == *namespace => 0,
        _ => 1,
    });
    out
}

#[cfg(test)]
#[path = "virtual_service_tests.rs"]
mod tests;
