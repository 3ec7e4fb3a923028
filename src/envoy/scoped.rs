//! A proxy's view of a mesh through its [`SidecarScope`]: generators read this instead of the whole
//! snapshot, so every type (cluster and listener lists, named lookups, routes per port) shows only what
//! the proxy's Sidecar imports and `exportTo` lets it see. A hidden name behaves as a missing one.
//!
//! Owns: the lookup rules (imported hosts only, the copy of a host the scope chose, services trimmed to
//! the ports a Sidecar imported) and where a proxy's scope comes from ([`scope_of`]). Does NOT: decide
//! what a scope contains (`traffic::sidecar_scope`).

use std::{collections::BTreeMap, sync::Arc};

use super::Mesh;
use crate::{
    envoy::{Proxy, ProxyKind},
    model::{ClusterId, Endpoint, NetworkGateway, Service, StaleAction},
    traffic::{Index, ProxyRef, SidecarScope},
};

/// `mesh` as a proxy with `scope` sees it.
pub struct ScopedMesh<'a> {
    mesh: &'a dyn Mesh,
    scope: &'a SidecarScope,
}

impl<'a> ScopedMesh<'a> {
    /// The view of `mesh` through `scope`.
    pub fn new(mesh: &'a dyn Mesh, scope: &'a SidecarScope) -> Self {
        Self { mesh, scope }
    }
}

impl Mesh for ScopedMesh<'_> {
    fn version(&self) -> u64 {
        self.mesh.version()
    }

    fn services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        match self.scope.imports() {
            // A Sidecar's few imports, not the whole mesh.
            Some(imports) => Box::new(imports.keys().filter_map(|h| self.service(h))),
            None => Box::new(self.mesh.services().filter_map(|s| self.service(&s.hostname))),
        }
    }

    fn service(&self, hostname: &str) -> Option<&Service> {
        if !self.scope.sees_host(hostname) {
            return None;
        }
        if let Some(trimmed) = self.scope.trimmed(hostname) {
            return Some(trimmed);
        }
        match self.scope.chosen_namespace(hostname) {
            Some(ns) => self.mesh.service_in(hostname, ns),
            None => self.mesh.service(hostname),
        }
    }

    fn endpoints(&self, service: &Service) -> Box<dyn Iterator<Item = &Endpoint> + '_> {
        self.mesh.endpoints(service)
    }

    fn gateways(&self) -> &[NetworkGateway] {
        self.mesh.gateways()
    }

    fn stale_clusters(&self) -> &BTreeMap<ClusterId, StaleAction> {
        self.mesh.stale_clusters()
    }

    fn traffic(&self) -> &Index {
        self.mesh.traffic()
    }

    fn unscoped(&self) -> Option<&dyn Mesh> {
        Some(self.mesh)
    }
}

/// What `proxy` sees of `mesh`: its Sidecar's scope (routers: everything exported to their namespace).
pub fn scope_of(mesh: &dyn Mesh, proxy: &Proxy) -> Arc<SidecarScope> {
    let who = ProxyRef {
        namespace: proxy.namespace.as_deref().unwrap_or(""),
        labels: &proxy.labels,
        router: proxy.kind == ProxyKind::Router,
    };
    mesh.traffic().scope(mesh.version(), who, || mesh.all_services())
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, net::IpAddr};

    use envoy_types::pb::envoy::{
        config::listener::v3::{Listener, filter::ConfigType},
        extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy::ClusterSpecifier},
    };
    use prost::Message;

    use super::*;
    use crate::{
        envoy::{
            XdsType,
            {
                AllEndpoints, Context, NetworkView, StaticMesh,
                static_mesh::{endpoint, proxy, service},
            },
        },
        model::Protocol,
        traffic::tests::config,
        xds::{Subscription, cache::ResourceCache, generate::generate},
    };

    fn mesh(sidecar: &str) -> StaticMesh {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        StaticMesh::new(1)
            .with(
                service(
                    "echo",
                    "b",
                    &[("http", 80, Protocol::Http), ("grpc", 7070, Protocol::Grpc)],
                ),
                vec![endpoint(ip("10.0.0.1"), &[("http", 8080)], "c1")],
            )
            .with(
                service("other", "b", &[("http", 80, Protocol::Http)]),
                vec![endpoint(ip("10.0.0.2"), &[("http", 8080)], "c1")],
            )
            .with_config([config("Sidecar", "a", "default", "1", sidecar)])
    }

    #[test]
    fn a_scoped_mesh_lists_and_finds_only_what_the_scope_shows() {
        let m = mesh(
            "egress: [{port: {number: 7070, protocol: GRPC, name: g}, hosts: [b/echo.b.svc.cluster.local]}]",
        );
        let p = proxy(ProxyKind::Sidecar, "a");
        let scope = scope_of(&m, &p);
        let scoped = ScopedMesh::new(&m, &scope);
        let listed: Vec<(String, Vec<u16>)> = scoped
            .services()
            .map(|s| (s.hostname.to_string(), s.ports.iter().map(|p| p.port).collect()))
            .collect();
        assert_eq!(listed, [("echo.b.svc.cluster.local".to_owned(), vec![7070])]);
        assert!(scoped.service("other.b.svc.cluster.local").is_none(), "hidden");
        let echo = scoped.service("echo.b.svc.cluster.local").expect("imported");
        assert_eq!(scoped.endpoints(echo).count(), 1, "endpoints of the trimmed copy");
        let everything = scope_of(&m, &proxy(ProxyKind::Router, "a"));
        assert_eq!(
            ScopedMesh::new(&m, &everything).services().count(),
            2,
            "routers ignore Sidecars"
        );
    }

    /// The cluster `virtualOutbound` sends unknown destinations to, and the wildcard CDS names.
    fn catch_all(m: &StaticMesh) -> (String, BTreeSet<String>) {
        let p = proxy(ProxyKind::Sidecar, "a");
        let (cache, view) = (ResourceCache::new(10, None), NetworkView::default());
        let ctx = Context {
            mesh: m,
            proxy: &p,
            view: &view,
            endpoints: &AllEndpoints,
            scope: &scope_of(m, &p),
        };
        let wildcard = Subscription {
            wildcard: true,
            names: Default::default(),
        };
        let clusters = generate(&ctx, &cache, XdsType::Cluster, &wildcard, None);
        let listeners = generate(&ctx, &cache, XdsType::Listener, &wildcard, None);
        let outbound = listeners
            .iter()
            .find(|r| &*r.name == "virtualOutbound")
            .expect("virtualOutbound");
        let listener = Listener::decode(outbound.value()).expect("listener");
        let any = listener.filter_chains[0].filters[0].config_type.clone();
        let Some(ConfigType::TypedConfig(any)) = any else {
            panic!("typed config");
        };
        let tcp = TcpProxy::decode(any.value.as_slice()).expect("tcp proxy");
        let Some(ClusterSpecifier::Cluster(c)) = tcp.cluster_specifier else {
            panic!("cluster");
        };
        assert_eq!(tcp.stat_prefix, c, "istiod's stat prefix is the cluster");
        (c, clusters.iter().map(|r| r.name.to_string()).collect())
    }

    #[test]
    fn registry_only_sends_unknown_destinations_to_the_black_hole() {
        let cases = [
            ("outboundTrafficPolicy: {mode: REGISTRY_ONLY}", "BlackHoleCluster"),
            ("outboundTrafficPolicy: {mode: ALLOW_ANY}", "PassthroughCluster"),
        ];
        for (sidecar, want) in cases {
            let (cluster, clusters) = catch_all(&mesh(sidecar));
            assert_eq!(cluster, want, "{sidecar}");
            assert!(
                ["BlackHoleCluster", "PassthroughCluster"]
                    .iter()
                    .all(|c| clusters.contains(*c)),
                "both catch-alls are always sent: {clusters:?}"
            );
        }
        let mut registry_only = crate::config::MeshConfig::default();
        registry_only.outbound_traffic_policy.mode = crate::config::mesh::OutboundMode::RegistryOnly;
        let m = StaticMesh::new(1).with_mesh_config(registry_only);
        assert_eq!(
            catch_all(&m).0,
            "BlackHoleCluster",
            "MeshConfig's mode without a Sidecar"
        );
        assert_eq!(catch_all(&StaticMesh::new(1)).0, "PassthroughCluster");
    }
}
