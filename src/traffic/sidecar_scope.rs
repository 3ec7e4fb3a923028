//! istiod's `SidecarScope`: the part of the mesh one proxy sees.
//!
//! A Sidecar applies to a proxy when its `workloadSelector` matches the proxy's labels (oldest first),
//! else its namespace's oldest selector-less Sidecar, else the root namespace's (`.` then means the
//! proxy's namespace). Its egress hosts (`ns/host`, `./*`, `*/*`, `~/*`, `*/*.example.com`) import the
//! services exported to the proxy's namespace that they match; a port-bound egress listener imports only
//! services with that port, trimmed to it. Services the selected VirtualServices route to are imported
//! too (istiod's `collectImportedServices`). Without a Sidecar, and for routers (which ignore Sidecars),
//! every service exported to the namespace is visible. Where several namespaces define a host, the
//! proxy's own namespace's copy wins, else a Kubernetes Service over a ServiceEntry, else the first
//! namespace by name.
//!
//! Pure: built from one snapshot's config objects and services. Generators read it through
//! `envoy::ScopedMesh`, push decisions through [`SidecarScope::sees_host`] and
//! [`SidecarScope::depends_on`]. [`Scopes`] builds each distinct scope once per snapshot.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    hash::{Hash, Hasher},
    sync::Arc,
};

use parking_lot::Mutex;
use serde::Serialize;

use super::{
    Settings,
    hosts::{HostPattern, resolve},
    visibility::{ExportDefault, Visibility},
};
use crate::{
    config::mesh::OutboundMode,
    config_controller::ConfigSnapshot,
    istio::{Config, Kind, Labels, ObjectRef, Spec, VirtualService},
    model::{Hostname, Provider, Service},
};

/// Who asks: what Sidecar selection and visibility read from a proxy.
#[derive(Debug, Clone, Copy)]
pub struct ProxyRef<'a> {
    /// The proxy's namespace (`""` when it did not say: it then sees only public services).
    pub namespace: &'a str,
    /// Its labels (`workloadSelector`).
    pub labels: &'a Labels,
    /// Gateways ignore Sidecars.
    pub router: bool,
}

/// The Sidecars of one config snapshot per namespace, in the order istiod tries them.
#[derive(Debug, Default)]
pub struct SidecarIndex {
    by_namespace: BTreeMap<Arc<str>, NamespaceSidecars>,
}

#[derive(Debug, Default)]
struct NamespaceSidecars {
    /// With a `workloadSelector`, oldest first.
    selecting: Vec<Arc<Config>>,
    /// The oldest without one (the others are ignored, as in istiod; `meshctl analyze` names them).
    default: Option<Arc<Config>>,
}

/// istiod's "oldest wins" order: creation time, then name (files have no creation time).
fn age(c: &Config) -> (Option<&str>, &str) {
    (c.meta.creation_timestamp.as_deref(), &c.meta.name)
}

impl SidecarIndex {
    /// Indexes the Sidecars among `configs`.
    pub fn build<'a>(configs: impl IntoIterator<Item = &'a Arc<Config>>) -> Self {
        let mut by_namespace: BTreeMap<Arc<str>, NamespaceSidecars> = BTreeMap::new();
        for c in configs {
            let Spec::Sidecar(sc) = &c.spec else { continue };
            let ns = by_namespace.entry(c.meta.namespace.clone()).or_default();
            if sc.workload_selector.is_some() {
                ns.selecting.push(c.clone());
            } else if ns.default.as_ref().is_none_or(|d| age(c) < age(d)) {
                ns.default = Some(c.clone());
            }
        }
        for ns in by_namespace.values_mut() {
            ns.selecting.sort_by(|a, b| age(a).cmp(&age(b)));
        }
        Self { by_namespace }
    }

    /// The Sidecar that applies to a proxy in `namespace` with `labels` (istiod's `getSidecarScope`).
    pub fn select(&self, namespace: &str, labels: &Labels, root: &str) -> Option<&Arc<Config>> {
        let own = self.by_namespace.get(namespace);
        let selected = own.and_then(|ns| {
            ns.selecting.iter().find(|c| match &c.spec {
                Spec::Sidecar(sc) => sc
                    .workload_selector
                    .as_ref()
                    .is_some_and(|s| s.labels.iter().all(|(k, v)| labels.get(k) == Some(v))),
                _ => false,
            })
        });
        selected
            .or_else(|| own.and_then(|ns| ns.default.as_ref()))
            .or_else(|| self.by_namespace.get(root).and_then(|ns| ns.default.as_ref()))
    }
}

/// The namespace part of an egress host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum NsMatch {
    /// `*`: any namespace.
    Any,
    /// One namespace (`.` resolved to the proxy's).
    Exact(Arc<str>),
    /// `~`: none (imports nothing).
    Nothing,
}

impl NsMatch {
    fn matches(&self, namespace: &str) -> bool {
        match self {
            NsMatch::Any => true,
            NsMatch::Exact(ns) => &**ns == namespace,
            NsMatch::Nothing => false,
        }
    }
}

/// One egress host, `namespace/dnsName`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EgressHost {
    /// Which namespaces' services it imports.
    pub namespace: NsMatch,
    /// Which host names.
    pub host: HostPattern,
}

impl EgressHost {
    /// Parses `ns/dnsName` as a Sidecar in effect for `proxy_ns` means it; `None` for a malformed
    /// host (validation rejects those).
    pub fn parse(text: &str, proxy_ns: &str) -> Option<Self> {
        let (ns, host) = text.split_once('/')?;
        let namespace = match ns {
            "*" => NsMatch::Any,
            "." => NsMatch::Exact(proxy_ns.into()),
            "~" => NsMatch::Nothing,
            ns => NsMatch::Exact(ns.into()),
        };
        Some(Self {
            namespace,
            host: HostPattern::parse(host),
        })
    }

    /// Whether it imports `service`.
    fn imports(&self, service: &Service) -> bool {
        self.namespace.matches(&service.namespace) && self.host.matches(&service.hostname)
    }

    /// Whether it selects a VirtualService in `namespace` for `host` (both ways round, as istiod
    /// matches wildcard VirtualService hosts against egress hosts).
    fn selects(&self, namespace: &str, host: &str) -> bool {
        self.namespace.matches(namespace)
            && (self.host.matches(host) || HostPattern::parse(host).matches(&self.host.to_string()))
    }
}

impl std::fmt::Display for EgressHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            NsMatch::Any => write!(f, "*/{}", self.host),
            NsMatch::Exact(ns) => write!(f, "{ns}/{}", self.host),
            NsMatch::Nothing => write!(f, "~/{}", self.host),
        }
    }
}

/// One egress listener: the port it binds (none: every port) and the hosts it imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// istiod matches service ports only for a port-bound listener that is not an `HTTP_PROXY`.
    pub port: Option<u16>,
    /// Imported hosts.
    pub hosts: Vec<EgressHost>,
}

/// Which ports of an imported service a proxy sees.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Ports {
    /// Every port.
    All,
    /// These only (port-bound egress listeners, VirtualService destination ports).
    Only(BTreeSet<u16>),
}

impl Ports {
    fn merge(&mut self, other: Ports) {
        match (&mut *self, other) {
            (Ports::All, _) => {}
            (_, Ports::All) => *self = Ports::All,
            (Ports::Only(a), Ports::Only(b)) => a.extend(b),
        }
    }
}

/// Why a service is in a Sidecar's scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Via {
    /// An egress host imports it.
    Egress(String),
    /// A selected VirtualService routes to it.
    VirtualService(ObjectRef),
}

/// One service a Sidecar imports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Import {
    /// The namespace of the copy seen.
    pub namespace: Arc<str>,
    /// Its ports seen.
    pub ports: Ports,
    /// Why (the first reason found).
    pub via: Via,
}

/// Why a service is not in a proxy's scope (for `explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "reason")]
pub enum Hidden {
    /// No copy is exported to the proxy's namespace (`exportTo`).
    NotExported,
    /// The Sidecar's egress hosts (and the VirtualServices they select) do not import it.
    NotImported {
        /// The Sidecar.
        sidecar: ObjectRef,
        /// Its egress hosts.
        egress: Vec<String>,
    },
}

/// What one proxy sees of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarScope {
    /// The namespace it was built for.
    pub namespace: Arc<str>,
    /// The Sidecar in effect; none: the default scope.
    pub sidecar: Option<ObjectRef>,
    /// Traffic to unknown destinations: the Sidecar's `outboundTrafficPolicy`, else MeshConfig's.
    pub outbound: OutboundMode,
    /// MeshConfig's `defaultServiceExportTo`, for [`Self::hidden`].
    service_export: ExportDefault,
    egress: Vec<Egress>,
    /// `None`: every host exported to the namespace; else the imported ones.
    imports: Option<BTreeMap<Hostname, Import>>,
    /// Hosts defined in several namespaces → the namespace of the copy this proxy sees.
    choice: BTreeMap<Hostname, Arc<str>>,
    /// Hosts no copy of which is exported here (default scope only).
    invisible: BTreeSet<Hostname>,
    /// Imported services trimmed to some of their ports.
    trimmed: BTreeMap<Hostname, Service>,
    /// VirtualServices selected (default scope: every one visible): a change of one pushes the proxy.
    virtual_services: BTreeSet<ObjectRef>,
    id: Arc<str>,
    services_id: Arc<str>,
}

/// Per host name: how many namespaces define it, and the copies visible to the proxy, by namespace.
type Copies<'a> = BTreeMap<&'a str, (usize, Vec<&'a Service>)>;

impl SidecarScope {
    /// istiod's `DefaultSidecarScopeForNamespace` / `ConvertToSidecarScope` for `proxy`, with
    /// `sidecar` in effect (ignored for routers), the snapshot's VirtualServices and every copy of
    /// every service.
    pub fn build<'v, 's>(
        proxy: ProxyRef<'_>,
        sidecar: Option<&Config>,
        virtual_services: impl IntoIterator<Item = &'v Arc<Config>>,
        services: impl IntoIterator<Item = &'s Service>,
        settings: &Settings,
    ) -> Self {
        let ns = proxy.namespace;
        let sidecar = sidecar.filter(|_| !proxy.router);
        let spec = sidecar.and_then(|c| match &c.spec {
            Spec::Sidecar(sc) => Some(sc),
            _ => None,
        });
        let outbound = spec
            .and_then(|sc| sc.outbound_traffic_policy.as_ref())
            .map_or(settings.mesh.outbound_traffic_policy.mode, |p| p.mode);
        let mut copies: Copies = BTreeMap::new();
        for s in services {
            let (defined, group) = copies.entry(&s.hostname).or_default();
            *defined += 1;
            if Visibility::of_service(s, settings.default_service_export).visible_in(ns) {
                group.push(s);
            }
        }
        for (_, group) in copies.values_mut() {
            group.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        }
        let vss: Vec<(&Arc<Config>, &VirtualService)> = virtual_services
            .into_iter()
            .filter_map(|c| match &c.spec {
                Spec::VirtualService(vs) => Some((c, &**vs)),
                _ => None,
            })
            .filter(|(c, vs)| {
                (vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh"))
                    && Visibility::of_config(&vs.export_to, &c.meta.namespace, settings.default_vs_export)
                        .visible_in(ns)
            })
            .collect();
        // A Sidecar without egress listeners imports `*/*` (istiod's default listener).
        let default_egress = [crate::istio::sidecar::EgressListener {
            hosts: vec!["*/*".into()],
            ..Default::default()
        }];
        let egress: Vec<Egress> = spec
            .map(|sc| {
                let listeners = if sc.egress.is_empty() {
                    &default_egress[..]
                } else {
                    &sc.egress[..]
                };
                listeners
                    .iter()
                    .map(|l| Egress {
                        port: l
                            .port
                            .as_ref()
                            .filter(|p| p.number != 0 && !p.protocol.eq_ignore_ascii_case("HTTP_PROXY"))
                            .and_then(|p| u16::try_from(p.number).ok()),
                        hosts: l.hosts.iter().filter_map(|h| EgressHost::parse(h, ns)).collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut scope = Self {
            namespace: ns.into(),
            sidecar: sidecar.map(Config::object_ref),
            outbound,
            service_export: settings.default_service_export,
            egress,
            imports: None,
            choice: BTreeMap::new(),
            invisible: BTreeSet::new(),
            trimmed: BTreeMap::new(),
            virtual_services: BTreeSet::new(),
            id: "".into(),
            services_id: "".into(),
        };
        if scope.sidecar.is_none() {
            scope.virtual_services = vss.iter().map(|(c, _)| c.object_ref()).collect();
            for (host, (defined, group)) in &copies {
                match prefer(group, ns) {
                    None => {
                        scope.invisible.insert((*host).into());
                    }
                    // The mesh-wide pick among several may be another namespace's, or a hidden one.
                    Some(seen) if *defined > 1 => {
                        scope.choice.insert((*host).into(), seen.namespace.clone());
                    }
                    Some(_) => {}
                }
            }
        } else {
            scope.import(&copies, &vss, settings);
        }
        scope.finish(&copies);
        scope
    }

    /// Egress imports, then the services the VirtualServices they select route to.
    fn import(&mut self, copies: &Copies, vss: &[(&Arc<Config>, &VirtualService)], settings: &Settings) {
        let ns = self.namespace.clone();
        let mut imports: BTreeMap<Hostname, Import> = BTreeMap::new();
        for (host, (_, group)) in copies {
            let mut found: Option<(&Service, Ports, String)> = None;
            for listener in &self.egress {
                let matched = group
                    .iter()
                    .filter(|s| {
                        listener
                            .port
                            .is_none_or(|p| s.ports.iter().any(|sp| sp.port == p))
                    })
                    .filter_map(|s| listener.hosts.iter().find(|h| h.imports(s)).map(|h| (*s, h)))
                    .collect::<Vec<_>>();
                let Some(svc) = prefer(&matched.iter().map(|(s, _)| *s).collect::<Vec<_>>(), &ns) else {
                    continue;
                };
                let by = matched
                    .iter()
                    .find(|(s, _)| std::ptr::eq(*s, svc))
                    .map(|(_, h)| h.to_string());
                let ports = listener.port.map_or(Ports::All, |p| Ports::Only([p].into()));
                match &mut found {
                    Some((s, p, _)) if s.namespace == svc.namespace => p.merge(ports),
                    Some(_) => {}
                    None => found = Some((svc, ports, by.unwrap_or_default())),
                }
            }
            if let Some((svc, ports, by)) = found {
                imports.insert(
                    (*host).into(),
                    Import {
                        namespace: svc.namespace.clone(),
                        ports,
                        via: Via::Egress(by),
                    },
                );
            }
        }
        // Per egress listener, as istiod: the VirtualServices its hosts select, and their destinations
        // (trimmed to the listener's port, else to the destination's).
        for listener in &self.egress {
            for (c, vs) in vss {
                let vs_ns = &*c.meta.namespace;
                let selected = vs.hosts.iter().any(|h| {
                    let h = resolve(h, vs_ns, &settings.domain_suffix);
                    listener.hosts.iter().any(|e| e.selects(vs_ns, &h))
                });
                if !selected {
                    continue;
                }
                let object = c.object_ref();
                for d in vs.http.iter().flat_map(|r| &r.route) {
                    let host = resolve(&d.destination.host, vs_ns, &settings.domain_suffix);
                    // The proxy's namespace's copy, else the first visible namespace (istiod's
                    // `pickFirstVisibleNamespace`).
                    let group = copies.get(&*host).map_or(&[][..], |(_, g)| g.as_slice());
                    let Some(svc) = group.iter().find(|s| s.namespace == ns).or(group.first()) else {
                        continue;
                    };
                    let has = |p: u16| svc.ports.iter().any(|sp| sp.port == p);
                    let port = d
                        .destination
                        .port
                        .as_ref()
                        .and_then(|p| u16::try_from(p.number).ok());
                    let ports = match (listener.port, port) {
                        (Some(p), _) | (None, Some(p)) if has(p) => Ports::Only([p].into()),
                        (Some(_), _) | (None, Some(_)) => continue,
                        (None, None) => Ports::All,
                    };
                    match imports.get_mut(&*host) {
                        Some(i) if i.namespace == svc.namespace => i.ports.merge(ports),
                        Some(_) => {}
                        None => {
                            imports.insert(
                                (*host).into(),
                                Import {
                                    namespace: svc.namespace.clone(),
                                    ports,
                                    via: Via::VirtualService(object.clone()),
                                },
                            );
                        }
                    }
                }
                self.virtual_services.insert(object);
                // Its delegates' routes are merged into it: their changes change it.
                for d in vs.http.iter().filter_map(|r| r.delegate.as_ref()) {
                    let d_ns = if d.namespace.is_empty() {
                        vs_ns
                    } else {
                        &d.namespace
                    };
                    self.virtual_services
                        .insert(ObjectRef::new(Kind::VirtualService, d_ns, &d.name));
                }
            }
        }
        self.imports = Some(imports);
    }

    /// The derived parts: copies chosen among several, port-trimmed services, the cache ids.
    fn finish(&mut self, copies: &Copies) {
        if let Some(imports) = &self.imports {
            for (host, import) in imports {
                let (defined, group) = copies
                    .get(&**host)
                    .map_or((0, &[][..]), |(n, g)| (*n, g.as_slice()));
                if defined > 1 {
                    self.choice.insert(host.clone(), import.namespace.clone());
                }
                if let Ports::Only(ports) = &import.ports
                    && let Some(svc) = group.iter().find(|s| s.namespace == import.namespace)
                    && svc.ports.iter().any(|p| !ports.contains(&p.port))
                {
                    let mut svc = (*svc).clone();
                    svc.ports.retain(|p| ports.contains(&p.port));
                    self.trimmed.insert(host.clone(), svc);
                }
            }
        }
        self.services_id = if self.choice.is_empty() {
            "".into()
        } else {
            hash_of(&self.choice).into()
        };
        let mode = match self.outbound {
            OutboundMode::AllowAny => "A",
            OutboundMode::RegistryOnly => "R",
        };
        self.id = if self.imports.is_none() && self.choice.is_empty() && self.invisible.is_empty() {
            format!("{mode}*").into()
        } else {
            format!(
                "{mode}{}",
                hash_of(&(&self.imports, &self.choice, &self.invisible))
            )
            .into()
        };
    }

    /// Whether `host` is in scope (some copy of it, some of its ports).
    pub fn sees_host(&self, host: &str) -> bool {
        match &self.imports {
            Some(imports) => imports.contains_key(host),
            None => !self.invisible.contains(host),
        }
    }

    /// Whether the scope shows every host as the mesh has it: no Sidecar imports, no host another
    /// namespace's `exportTo` hides, no copy chosen over the mesh-wide one. Such proxies resolve every
    /// name alike, so what does not exist for one does not exist for any.
    pub fn sees_everything(&self) -> bool {
        self.imports.is_none() && self.choice.is_empty() && self.invisible.is_empty()
    }

    /// Whether some host in scope falls under `pattern` (a rule's host, possibly a wildcard). The
    /// default scope sees every exported host, so only an exact host it cannot see is out of it.
    pub fn sees_pattern(&self, pattern: &HostPattern) -> bool {
        match (&self.imports, pattern) {
            (_, HostPattern::Exact(h)) => self.sees_host(h),
            (Some(imports), p) => imports.keys().any(|h| p.matches(h)),
            (None, _) => true,
        }
    }

    /// Whether some service of `namespace` is in scope (the default scope: assumed).
    pub fn sees_namespace(&self, namespace: &str) -> bool {
        self.imports
            .as_ref()
            .is_none_or(|imports| imports.values().any(|i| &*i.namespace == namespace))
    }

    /// Whether a change of `object` (a Sidecar or VirtualService) can change what this proxy gets.
    pub fn depends_on(&self, object: &ObjectRef) -> bool {
        match object.kind {
            Kind::Sidecar => self.sidecar.as_ref() == Some(object),
            Kind::VirtualService => self.virtual_services.contains(object),
            _ => false,
        }
    }

    /// The namespace of the copy of `host` this proxy sees, when several namespaces define it.
    pub fn chosen_namespace(&self, host: &str) -> Option<&Arc<str>> {
        self.choice.get(host)
    }

    /// `host` trimmed to the ports a port-bound egress listener or a VirtualService imported.
    pub fn trimmed(&self, host: &str) -> Option<&Service> {
        self.trimmed.get(host)
    }

    /// The imported hosts (`None`: every host exported to the namespace).
    pub fn imports(&self) -> Option<&BTreeMap<Hostname, Import>> {
        self.imports.as_ref()
    }

    /// The selected VirtualServices.
    pub fn virtual_services(&self) -> &BTreeSet<ObjectRef> {
        &self.virtual_services
    }

    /// The egress hosts of the Sidecar in effect, as written (with `.` resolved).
    pub fn egress_hosts(&self) -> Vec<String> {
        self.egress
            .iter()
            .flat_map(|l| l.hosts.iter().map(ToString::to_string))
            .collect()
    }

    /// Identifies what LDS and RDS read from the scope: proxies with equal ids share those encodes.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Identifies what CDS and EDS read from the scope (which copy of a host): empty unless this proxy
    /// sees another copy than the mesh-wide one might be.
    pub fn services_id(&self) -> &Arc<str> {
        &self.services_id
    }

    /// Why `host` is out of scope, given every copy of it; `None` when it is in scope (or unknown).
    pub fn hidden<'a>(&self, host: &str, copies: impl IntoIterator<Item = &'a Service>) -> Option<Hidden> {
        if self.sees_host(host) {
            return None;
        }
        let mut copies = copies.into_iter().peekable();
        copies.peek()?;
        if !copies.any(|s| Visibility::of_service(s, self.service_export).visible_in(&self.namespace)) {
            return Some(Hidden::NotExported);
        }
        Some(Hidden::NotImported {
            sidecar: self.sidecar.clone()?,
            egress: self.egress_hosts(),
        })
    }
}

/// The copy a proxy in `ns` sees among `group` (sorted by namespace): its own namespace's, else a
/// Kubernetes Service over a ServiceEntry, else the first namespace.
fn prefer<'a>(group: &[&'a Service], ns: &str) -> Option<&'a Service> {
    let find = |f: &dyn Fn(&Service) -> bool| group.iter().copied().find(|s| f(s));
    find(&|s| &*s.namespace == ns)
        .or_else(|| find(&|s| s.provider() == Provider::Kubernetes))
        .or_else(|| group.first().copied())
}

fn hash_of(value: &impl Hash) -> String {
    let mut h = std::hash::DefaultHasher::new();
    value.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// What identifies a scope within one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ScopeKey {
    namespace: Arc<str>,
    sidecar: Option<ObjectRef>,
    router: bool,
}

/// The Sidecars of one config snapshot and the scopes built from them, each once per mesh version:
/// 1,000 proxies of one namespace share one scope.
#[derive(Debug, Default)]
pub struct Scopes {
    sidecars: SidecarIndex,
    built: Mutex<(u64, HashMap<ScopeKey, Arc<SidecarScope>>)>,
}

impl Scopes {
    /// Indexes `config`'s Sidecars.
    pub fn build(config: &ConfigSnapshot) -> Self {
        Self {
            sidecars: SidecarIndex::build(config.of_kind(Kind::Sidecar)),
            built: Mutex::default(),
        }
    }

    /// The Sidecar in effect for `proxy` (none for routers).
    pub fn sidecar_for(&self, proxy: ProxyRef<'_>, settings: &Settings) -> Option<&Arc<Config>> {
        if proxy.router {
            return None;
        }
        self.sidecars
            .select(proxy.namespace, proxy.labels, &settings.root_namespace)
    }

    /// `proxy`'s scope in mesh `version`, whose services (every copy) `services` lists. Built outside
    /// the lock; two proxies racing for a new key may both build it, and the first kept wins.
    pub fn scope<'a>(
        &self,
        version: u64,
        proxy: ProxyRef<'_>,
        config: &ConfigSnapshot,
        settings: &Settings,
        services: impl FnOnce() -> Box<dyn Iterator<Item = &'a Service> + 'a>,
    ) -> Arc<SidecarScope> {
        let sidecar = self.sidecar_for(proxy, settings);
        let key = ScopeKey {
            namespace: proxy.namespace.into(),
            sidecar: sidecar.map(|c| c.object_ref()),
            router: proxy.router,
        };
        {
            let built = self.built.lock();
            if built.0 == version
                && let Some(s) = built.1.get(&key)
            {
                return s.clone();
            }
        }
        let scope = Arc::new(SidecarScope::build(
            proxy,
            sidecar.map(|c| &**c),
            config.of_kind(Kind::VirtualService),
            services(),
            settings,
        ));
        let mut built = self.built.lock();
        if built.0 != version {
            *built = (version, HashMap::new());
        }
        built.1.entry(key).or_insert(scope).clone()
    }
}

#[cfg(test)]
#[path = "sidecar_scope_tests.rs"]
mod tests;
