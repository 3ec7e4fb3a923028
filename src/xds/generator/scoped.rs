//! A proxy's view of a mesh through its [`SidecarScope`]: generators read this instead of the whole
//! snapshot, so every type (cluster and listener lists, named lookups, routes per port) shows only what
//! the proxy's Sidecar imports and `exportTo` lets it see. A hidden name behaves as a missing one.
//!
//! Owns: the lookup rules (imported hosts only, the copy of a host the scope chose, services trimmed to
//! the ports a Sidecar imported) and where a proxy's scope comes from ([`scope_of`]). Does NOT: decide
//! what a scope contains (`traffic::sidecar_scope`).

use std::sync::Arc;

use super::Mesh;
use crate::{
    model::{Endpoint, NetworkGateway, Service},
    traffic::{Index, ProxyRef, SidecarScope},
    xds::{Proxy, ProxyKind},
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

    fn traffic(&self) -> &Index {
        self.mesh.traffic()
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
