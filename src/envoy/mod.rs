//! Translation: what a proxy is sent. Istio config and the registries' services and endpoints (one
//! immutable [`Mesh`] snapshot) and one proxy ([`Proxy`]) in, encoded Envoy resources out.
//!
//! Owns: the proxy model ([`node`]), the resource types ([`resource`]), naming (which resource a name
//! means), what each resource depends on ([`Context::plan`], the cache's key) and its build: the shapes
//! in [`cds`], [`eds`], [`lds`] and [`rds`] as pure functions of model values, split horizon
//! ([`split_horizon`], the [`EndpointView`] meshd serves with), locality and priority ([`locality`]),
//! DestinationRule policy ([`cluster_policy`]), routes ([`route`]), the sidecar's inbound side
//! ([`virtual_inbound`], from its [`service_targets`]) and the reasons behind all of it
//! ([`explain`], computed by the same functions). Does NOT: hold state between calls, cache, or know
//! about streams and protocol (`xds` calls in here and sends the bytes).

pub mod cds;
pub mod cluster_discovery;
pub mod cluster_meta;
pub mod cluster_policy;
pub mod eds;
mod eds_wire;
pub mod explain;
pub mod gateway_listeners;
pub mod gateway_routes;
pub mod gateway_servers;
pub mod inbound;
pub mod lds;
pub mod locality;
pub mod mtls;
pub mod node;
pub mod pod_listeners;
pub mod rds;
pub mod resource;
pub mod route;
pub mod route_actions;
pub mod scoped;
pub mod sds;
pub mod service_targets;
pub mod split_horizon;
#[cfg(any(test, feature = "testing"))]
pub mod static_mesh;
pub mod virtual_inbound;

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use envoy_types::pb::{
    envoy::config::core::v3::{
        AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
    },
    google::protobuf::{Any, Duration},
};

pub use node::{NodeError, Proxy, ProxyKind};
pub use resource::{CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, Resource, XdsType};
pub use scoped::{ScopedMesh, scope_of};
pub use split_horizon::SplitHorizon;
#[cfg(any(test, feature = "testing"))]
pub use static_mesh::StaticMesh;

use crate::model::{
    ClusterId, Endpoint, NetworkGateway, NetworkId, Service, ServicePort, StaleAction, TlsMode,
};

/// What generators read from a mesh snapshot: services in host-name order and their endpoints in
/// every cluster. Implemented by the aggregate's snapshot; tests and benches use small fixtures.
pub trait Mesh: Send + Sync {
    /// The snapshot version (part of every cache key).
    fn version(&self) -> u64;
    /// Every service, ordered by host name.
    fn services(&self) -> Box<dyn Iterator<Item = &Service> + '_>;
    /// The service with this fully qualified host name.
    fn service(&self, hostname: &str) -> Option<&Service>;
    /// The service's endpoints across all clusters.
    fn endpoints(&self, service: &Service) -> Box<dyn Iterator<Item = &Endpoint> + '_>;
    /// The resolved network gateways (split horizon), sorted; none unless multi-network.
    fn gateways(&self) -> &[NetworkGateway] {
        &[]
    }
    /// ★ Remote clusters whose stale-endpoints action is in force; none by default.
    fn stale_clusters(&self) -> &BTreeMap<ClusterId, StaleAction> {
        no_stale()
    }
    /// The Istio traffic config in force, indexed (none by default: every service with defaults).
    fn traffic(&self) -> &crate::traffic::Index {
        crate::traffic::Index::empty()
    }
    /// Every service including each namespace's copy of a host name several define (Sidecar scopes
    /// choose among them per proxy).
    fn all_services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        self.services()
    }
    /// The copy of `hostname` defined in `namespace`.
    fn service_in(&self, hostname: &str, namespace: &str) -> Option<&Service> {
        self.service(hostname).filter(|s| &*s.namespace == namespace)
    }
    /// The whole mesh behind a proxy's scoped view (`None`: this is it). What a proxy serves (its
    /// inbound side) does not depend on what its Sidecar lets it reach.
    fn unscoped(&self) -> Option<&dyn Mesh> {
        None
    }
}

/// The networks a proxy sees endpoints from: its own network and `REQUESTED_NETWORK_VIEW`. Proxies
/// with the same view get the same endpoints, so it is part of the EDS cache key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct NetworkView {
    /// The proxy's network.
    pub network: Option<NetworkId>,
    /// Networks it asked to see (sorted, deduplicated).
    pub requested: Vec<NetworkId>,
    /// Proxyless gRPC: it cannot cross an east-west gateway (its TLS carries no SNI and offers ALPN
    /// `h2`; the gateway routes by the Istio mTLS SNI), so another network's endpoints behind a
    /// gateway are dropped for it instead of being replaced by the gateway.
    pub proxyless: bool,
}

impl NetworkView {
    /// The view of `proxy`.
    pub fn of(proxy: &Proxy) -> Self {
        Self {
            network: proxy.network.clone(),
            requested: proxy.requested_network_view.clone(),
            proxyless: proxy.kind == ProxyKind::Grpc,
        }
    }
}

/// What EDS asks of a service port's endpoints for one cluster and proxy.
#[derive(Clone, Copy)]
pub struct EndpointQuery<'q> {
    /// The service.
    pub service: &'q Service,
    /// Its port.
    pub port: &'q ServicePort,
    /// The proxy's network view.
    pub view: &'q NetworkView,
    /// A subset's labels: only endpoints whose (augmented) labels include them; `None` is all.
    pub subset: Option<&'q BTreeMap<String, String>>,
    /// Whether the client sends the endpoint Istio mTLS that it takes (istiod's `checkMtlsEnabled`
    /// on a sidecar endpoint): required through a gateway, and `tlsMode: istio` is sent only then.
    pub mtls: &'q dyn Fn(&Endpoint) -> bool,
    /// For a cluster-local service, the proxy's cluster: only its endpoints are sent (istiod's
    /// `IsClusterLocal` in the endpoint builder); `None` is every cluster.
    pub cluster_local: Option<&'q ClusterId>,
    /// Label keys a gateway standing in for remote endpoints must carry their values of (the
    /// `failoverPriority` labels), so that it is ranked as they would be without a gateway.
    pub keep_labels: &'q [String],
    /// ★ Remote clusters whose stale-endpoints action is in force: `drop` drops their endpoints here.
    pub stale: &'q BTreeMap<ClusterId, StaleAction>,
}

impl<'q> EndpointQuery<'q> {
    /// Every endpoint, mTLS wherever there is a sidecar (no policy).
    pub fn all(service: &'q Service, port: &'q ServicePort, view: &'q NetworkView) -> Self {
        Self {
            service,
            port,
            view,
            subset: None,
            mtls: &has_sidecar,
            cluster_local: None,
            keep_labels: &[],
            stale: no_stale(),
        }
    }

    /// Whether `ep` may be sent as far as cluster-local services go.
    pub fn in_cluster(&self, ep: &Endpoint) -> bool {
        self.cluster_local.is_none_or(|c| ep.cluster() == c)
    }

    /// Whether `ep` belongs to the subset (istiod's `subsetLabels.SubsetOf(ep.Labels)`).
    pub fn in_subset(&self, ep: &Endpoint) -> bool {
        self.subset
            .is_none_or(|want| want.iter().all(|(k, v)| ep.label(k) == Some(v.as_str())))
    }

    /// See [`EndpointQuery::mtls`].
    pub fn mtls(&self, ep: &Endpoint) -> bool {
        (self.mtls)(ep)
    }

    /// The `tlsMode` sent for `ep`: `istio` only when the client sends it mTLS.
    pub fn tls_mode(&self, ep: &Endpoint) -> TlsMode {
        if self.mtls(ep) {
            TlsMode::Istio
        } else {
            TlsMode::Disabled
        }
    }
}

/// No stale cluster.
fn no_stale() -> &'static BTreeMap<ClusterId, StaleAction> {
    static NONE: BTreeMap<ClusterId, StaleAction> = BTreeMap::new();
    &NONE
}

fn has_sidecar(ep: &Endpoint) -> bool {
    ep.tls_mode == TlsMode::Istio
}

/// Which endpoints of a service a proxy with a given network view sees. Split-horizon EDS (`network`)
/// replaces the default by keeping same-network endpoints and standing in one gateway endpoint per
/// remote network. Must be a pure function of its arguments: results are cached per view.
pub trait EndpointView: Send + Sync + 'static {
    /// The endpoints to balance `port` of `service` over, before any policy.
    fn endpoints<'a>(
        &self,
        mesh: &'a dyn Mesh,
        service: &'a Service,
        port: &ServicePort,
        view: &NetworkView,
    ) -> Vec<Cow<'a, Endpoint>>;

    /// The endpoints of a cluster (subset, mTLS policy): by default every endpoint in the subset, its
    /// `tlsMode` as the query decides.
    fn select<'a>(&self, mesh: &'a dyn Mesh, q: &EndpointQuery<'_>) -> Vec<Cow<'a, Endpoint>> {
        mesh.endpoints(q.service)
            .filter(|e| q.in_cluster(e) && q.in_subset(e))
            .map(|e| match q.tls_mode(e) {
                tls if tls == e.tls_mode => Cow::Borrowed(e),
                tls_mode => Cow::Owned(Endpoint {
                    tls_mode,
                    ..e.clone()
                }),
            })
            .collect()
    }
}

/// The default view: every endpoint, whatever its network.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllEndpoints;

impl EndpointView for AllEndpoints {
    fn endpoints<'a>(
        &self,
        mesh: &'a dyn Mesh,
        service: &'a Service,
        _port: &ServicePort,
        _view: &NetworkView,
    ) -> Vec<Cow<'a, Endpoint>> {
        mesh.endpoints(service).map(Cow::Borrowed).collect()
    }
}

/// Everything a generator needs for one proxy.
pub struct Context<'a> {
    /// The snapshot being served.
    pub mesh: &'a dyn Mesh,
    /// The proxy.
    pub proxy: &'a Proxy,
    /// Its network view.
    pub view: &'a NetworkView,
    /// The split-horizon hook.
    pub endpoints: &'a dyn EndpointView,
    /// What the proxy sees of the mesh ([`scope_of`]): generation reads `mesh` through it.
    pub scope: &'a crate::traffic::SidecarScope,
}

impl<'a> Context<'a> {
    /// Every name of a wildcard type (LDS/CDS).
    pub fn all_names(&self, ty: XdsType) -> BTreeSet<Arc<str>> {
        match ty {
            XdsType::Cluster => cds::all_names(self),
            XdsType::Listener => lds::all_names(self),
            XdsType::Endpoint | XdsType::Route | XdsType::Secret => BTreeSet::new(),
        }
    }

    /// Every service port a proxy may reach (UDP has no clusters or listeners).
    pub(crate) fn ports(&self) -> impl Iterator<Item = (&'a Service, &'a ServicePort)> + 'a {
        self.mesh
            .services()
            .flat_map(|s| s.ports.iter().map(move |p| (s, p)))
            .filter(|(_, p)| p.protocol != crate::model::Protocol::Udp)
    }

    /// What resource `name` of `ty` depends on besides its name and the snapshot, and how it is built.
    /// `base` is [`Self::view_key`] of the type, computed once per generate call. A name this proxy's
    /// scope cannot resolve (another namespace's Sidecar hides it, or it does not exist) is "absent"
    /// only for proxies with the same scope: the key says so, or one proxy's answer would be every
    /// other's.
    pub fn plan<'n>(&self, ty: XdsType, name: &'n str, base: &Arc<str>) -> Plan<'a, 'n> {
        let absent = |view: Arc<str>| -> Arc<str> {
            match self.scope.id() {
                id if id.is_empty() => format!("{view}|absent").into(),
                id => format!("{view}|absent:{id}").into(),
            }
        };
        // A scope that shows the whole mesh cannot make a name absent that exists: skip the lookup
        // (the common case, and most of an EDS cache hit's cost).
        let narrowed = !self.scope.sees_everything();
        match ty {
            // A cluster depends on the DestinationRule the proxy gets for its service: resolved once,
            // for the key and the build.
            // A sidecar's inbound side depends on its addresses and labels.
            XdsType::Cluster | XdsType::Listener
                if self.proxy.kind == ProxyKind::Sidecar && virtual_inbound::per_proxy(name) =>
            {
                Plan {
                    view: virtual_inbound::view_key(base, self.proxy),
                    resolved: None,
                }
            }
            XdsType::Cluster if name == virtual_inbound::INBOUND_PASSTHROUGH => Plan {
                view: base.clone(),
                resolved: None,
            },
            XdsType::Cluster => {
                let resolved = cds::resolve(self.mesh, self.proxy, name);
                let view = cds::view_key(resolved.as_ref(), base);
                let view = if resolved.is_some() || !narrowed {
                    view
                } else {
                    absent(view)
                };
                Plan { view, resolved }
            }
            // An assignment also depends on the DestinationRule the proxy uses for its service.
            XdsType::Endpoint => {
                let view = eds::name_key(self, base, name);
                let view = if !narrowed || parse_cluster(self.mesh, name).is_some() {
                    view
                } else {
                    absent(view)
                };
                Plan { view, resolved: None }
            }
            // A gRPC server listener also depends on the workload's labels.
            XdsType::Listener
                if self.proxy.kind == ProxyKind::Grpc
                    && name.starts_with(inbound::GRPC_SERVER_LISTENER_PREFIX) =>
            {
                Plan {
                    view: inbound::view_key(base, self.proxy),
                    resolved: None,
                }
            }
            XdsType::Listener | XdsType::Route | XdsType::Secret => Plan {
                view: base.clone(),
                resolved: None,
            },
        }
    }

    /// What besides the name and snapshot every resource of `ty` depends on ([`Self::plan`] refines
    /// it per name).
    pub fn view_key(&self, ty: XdsType) -> Arc<str> {
        let (view, scope) = match ty {
            XdsType::Endpoint => (eds::view_key(self), self.scope.services_id()),
            XdsType::Listener => (lds::view_key(self), self.scope.id()),
            // Refined per name in `plan` (`cds::view_key`).
            XdsType::Cluster => (self.kind_name().into(), self.scope.services_id()),
            XdsType::Route => (rds::view_key(self), self.scope.id()),
            // Secrets are not generated from the snapshot (`sds`): nothing is keyed.
            XdsType::Secret => return "secret".into(),
        };
        // Listener and route sets follow the whole scope; a cluster only which copy of its host it sees.
        if scope.is_empty() {
            view
        } else {
            format!("{view}|{scope}").into()
        }
    }

    /// The proxy kind as cache views spell it.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self.proxy.kind {
            ProxyKind::Grpc => "grpc",
            ProxyKind::Sidecar => "sidecar",
            ProxyKind::Router if self.proxy.is_east_west_gateway() => "east-west",
            ProxyKind::Router => "router",
        }
    }

    /// The proxy's requested network view, comma-joined (cache views).
    pub(crate) fn requested_networks(&self) -> String {
        let nets: Vec<&str> = self.view.requested.iter().map(|n| n.as_str()).collect();
        nets.join(",")
    }
}

/// A resource's cache view and what its build needs that computing the view already looked up.
pub struct Plan<'m, 'n> {
    /// What the resource depends on besides its name and the snapshot: proxies with equal views get
    /// the same bytes.
    pub view: Arc<str>,
    resolved: Option<cds::Resolved<'m, 'n>>,
}

impl Plan<'_, '_> {
    /// Builds resource `name` of `ty` for `ctx`'s proxy; `None` when no such resource exists for it.
    pub fn build(self, ctx: &Context<'_>, ty: XdsType, name: Arc<str>) -> Option<Resource> {
        match ty {
            XdsType::Cluster => cds::build(ctx, name, self.resolved),
            XdsType::Endpoint => eds::build(ctx, name),
            XdsType::Listener => lds::build(ctx, name),
            XdsType::Route => rds::build(ctx, name),
            XdsType::Secret => None,
        }
    }
}

/// What a cluster name refers to in a mesh.
#[derive(Debug, Clone, Copy)]
pub struct Target<'m, 'n> {
    /// The service.
    pub service: &'m Service,
    /// Its port.
    pub port: &'m ServicePort,
    /// The DestinationRule subset (empty: the whole service).
    pub subset: &'n str,
    /// An east-west gateway's SNI-DNAT cluster.
    pub sni_dnat: bool,
}

/// A cluster name → the service, its port, the subset, and whether it is an SNI-DNAT cluster.
pub fn parse_cluster<'m, 'n>(mesh: &'m dyn Mesh, name: &'n str) -> Option<Target<'m, 'n>> {
    let (port, subset, hostname, sni_dnat) = match cds::ClusterRef::parse(name)? {
        cds::ClusterRef::Outbound {
            port,
            subset,
            hostname,
        } => (port, subset, hostname, false),
        cds::ClusterRef::SniDnat {
            port,
            subset,
            hostname,
        } => (port, subset, hostname, true),
    };
    let service = mesh.service(hostname)?;
    Some(Target {
        service,
        port: service.ports.iter().find(|p| p.port == port)?,
        subset,
        sni_dnat,
    })
}

/// ADS as the config source (`{ads: {}, resource_api_version: V3}`).
pub(crate) fn ads_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// [`ads_source`] as istiod gives Envoy (CDS's EDS, RDS): `initial_fetch_timeout: 0s`, so a cluster
/// or listener waits for its endpoints or routes instead of warming without them after Envoy's 15 s.
/// gRPC clients get none, as from istiod's gRPC generator.
pub(crate) fn envoy_ads_source() -> ConfigSource {
    ConfigSource {
        initial_fetch_timeout: Some(Duration::default()),
        ..ads_source()
    }
}

/// Packs a message into an `Any`.
pub(crate) fn any<M: prost::Name>(msg: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: msg.encode_to_vec(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Table-driven tests of the generators; EDS assignments are compared with JSON goldens in
    //! `src/envoy/testdata/` (`UPDATE_GOLDENS=1` rewrites them).

    use std::{collections::BTreeSet, net::IpAddr};

    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use prost::Message;

    use super::{
        ProxyKind, StaticMesh, eds, lds, rds,
        static_mesh::{endpoint, proxy, service},
    };
    use crate::model::{Endpoint, Health, Locality, Protocol};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn at(mut ep: Endpoint, zone: &str, health: Health, weight: u32) -> Endpoint {
        ep.placement_mut().locality = Locality {
            region: "r".into(),
            zone: zone.into(),
            subzone: "".into(),
        };
        ep.health = health;
        ep.weight = weight;
        ep
    }

    fn golden(name: &str, actual: &impl serde::Serialize) {
        crate::golden::check("src/envoy/testdata", name, actual);
    }

    #[test]
    fn eds_assignments_match_goldens() {
        let port = &service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0];
        let e = |addr: &str, p: u16| endpoint(ip(addr), &[("grpc", p)], "c1");
        let cases: Vec<(&str, Vec<Endpoint>)> = vec![
            ("eds-empty", vec![]),
            (
                "eds-localities",
                vec![
                    at(e("10.0.0.3", 80), "b", Health::Healthy, 1),
                    at(e("10.0.0.1", 80), "a", Health::Draining, 2),
                    at(e("10.0.0.2", 80), "a", Health::Unhealthy, 0),
                ],
            ),
            (
                "eds-dedup-and-missing-port",
                vec![
                    e("10.0.0.1", 80),
                    e("10.0.0.1", 80),
                    endpoint(ip("10.0.0.9"), &[("http", 8080)], "c1"),
                ],
            ),
        ];
        for (name, eps) in cases {
            let a = eds::grouped(
                "outbound|7070||echo.default.svc.cluster.local".into(),
                port,
                &eps,
                |_| 0,
            );
            golden(name, &a);
            // The proto carries the same shape; weights are never 0 (gRPC drops or NACKs those).
            let pb = ClusterLoadAssignment::decode(eds::encode(name.into(), &a).value()).unwrap();
            assert_eq!(pb.endpoints.len(), a.localities.len());
            assert!(
                pb.endpoints
                    .iter()
                    .all(|l| l.load_balancing_weight.is_some_and(|w| w.value > 0))
            );
        }
    }

    #[test]
    fn eds_version_is_stable_and_content_sensitive() {
        let port = &service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0];
        let eps = vec![endpoint(ip("10.0.0.1"), &[("grpc", 80)], "c1")];
        let v =
            |eps: &[Endpoint]| eds::encode("c".into(), &eds::grouped("c".into(), port, eps, |_| 0)).version;
        assert_eq!(v(&eps), v(&eps.clone()));
        let mut moved = eps.clone();
        moved[0].address = ip("10.0.0.2");
        assert_ne!(v(&eps), v(&moved));
        let mut renamed = eps.clone();
        renamed[0].workload_meta = "w;default;w;;c1".into();
        assert_ne!(v(&eps), v(&renamed), "the telemetry string is encoded");
    }

    #[test]
    fn eds_metadata_is_istiods() {
        use envoy_types::pb::google::protobuf::value::Kind;
        let port = &service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]).ports[0];
        let mut mtls = endpoint(ip("10.0.0.1"), &[("grpc", 80)], "c1");
        mtls.tls_mode = crate::model::TlsMode::Istio;
        mtls.workload_meta = "echo-v1;default;echo;v1;c1".into();
        let plain = endpoint(ip("10.0.0.2"), &[("grpc", 80)], "c1");
        let a = eds::grouped("c".into(), port, &[mtls, plain], |_| 0);
        let pb = ClusterLoadAssignment::decode(eds::encode("c".into(), &a).value()).unwrap();
        let got: Vec<Vec<(String, String, String)>> = pb.endpoints[0]
            .lb_endpoints
            .iter()
            .map(|lb| {
                let mut kv: Vec<_> = lb
                    .metadata
                    .as_ref()
                    .unwrap()
                    .filter_metadata
                    .iter()
                    .flat_map(|(filter, st)| {
                        st.fields.iter().map(move |(k, v)| match &v.kind {
                            Some(Kind::StringValue(s)) => (filter.clone(), k.clone(), s.clone()),
                            other => panic!("{other:?}"),
                        })
                    })
                    .collect();
                kv.sort();
                kv
            })
            .collect();
        let row = |f: &str, k: &str, v: &str| (f.to_owned(), k.to_owned(), v.to_owned());
        assert_eq!(
            got,
            [
                vec![
                    row("envoy.transport_socket_match", "tlsMode", "istio"),
                    row("istio", "workload", "echo-v1;default;echo;v1;c1"),
                ],
                // Plaintext: no socket match (the cluster's catch-all), no pod: only the cluster.
                vec![row("istio", "workload", ";;;;c1")],
            ]
        );
    }

    #[test]
    fn route_domains_cover_every_dialled_spelling() {
        let mut svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
        svc.cluster_vips.insert("c1".into(), vec![ip("10.96.0.10")]);
        let d = rds::domains(&svc, 7070);
        for want in [
            "echo.default.svc.cluster.local:7070",
            "echo.default.svc.cluster.local",
            "echo.default.svc:7070",
            "echo.default:7070",
            "echo:7070",
            "echo",
            "10.96.0.10:7070",
        ] {
            assert!(d.contains(&want.to_owned()), "{want} missing from {d:?}");
        }
        assert_eq!(d.len(), d.iter().collect::<BTreeSet<_>>().len(), "unique");
    }

    /// `echo` on 7070 in namespaces `default` and `other`, one endpoint each.
    pub(crate) fn mesh() -> StaticMesh {
        let eps = vec![endpoint(ip("10.0.0.1"), &[("grpc", 80)], "c1")];
        StaticMesh::new(1)
            .with(
                service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
                eps.clone(),
            )
            .with(service("echo", "other", &[("grpc", 7070, Protocol::Grpc)]), eps)
    }

    #[test]
    fn listener_targets_resolve_like_istiod() {
        let m = mesh();
        let p = proxy(ProxyKind::Grpc, "other");
        let cases = [
            (
                "echo.default.svc.cluster.local:7070",
                Some("echo.default.svc.cluster.local"),
            ),
            ("echo:7070", Some("echo.other.svc.cluster.local")),
            ("echo.default:7070", Some("echo.default.svc.cluster.local")),
            ("echo.default.svc:7070", Some("echo.default.svc.cluster.local")),
            ("echo:7071", None),
            ("echo", None),
            ("nope.default:7070", None),
            ("a.b.c.d:7070", None),
        ];
        for (target, want) in cases {
            let got = lds::resolve_target(&m, &p, target).map(|(s, _)| s.hostname.to_string());
            assert_eq!(got.as_deref(), want, "{target}");
        }
    }
}
