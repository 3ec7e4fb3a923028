//! Traffic config as proxies receive it: istiod's `PushContext` for Istio objects. An [`Index`] is
//! built once per mesh snapshot (lazily, by the first stream that needs it) from the Istio config in
//! force and the mesh config, and answers per-proxy questions: which DestinationRule applies to a
//! service, which mTLS mode a workload accepts, … Pure: no I/O, no locks; generators read it through
//! `envoy::Mesh::traffic`.

pub mod delegate;
pub mod destination_rule;
pub mod hosts;
pub mod peer_authn;
pub mod policy;
pub mod sidecar_scope;
pub mod virtual_service;
pub mod visibility;

use std::{
    collections::BTreeMap,
    sync::{Arc, LazyLock},
};

pub use destination_rule::{DrIndex, MergedRule};
pub use peer_authn::{PaIndex, PeerMode};
pub use policy::effective;
pub use sidecar_scope::{ProxyRef, Scopes, SidecarScope};
pub use virtual_service::VsIndex;
pub use visibility::{ExportDefault, Visibility};

use crate::{
    config::{MeshConfig, cluster_local::ClusterLocalHosts},
    config_controller::ConfigSnapshot,
    istio::Labels,
    model::Service,
};

/// What an index is built with besides the Istio objects.
#[derive(Debug, Clone)]
pub struct Settings {
    /// MeshConfig `rootNamespace`: its rules apply mesh-wide.
    pub root_namespace: Arc<str>,
    /// The cluster domain suffix short names resolve with.
    pub domain_suffix: Arc<str>,
    /// The mesh config in force.
    pub mesh: Arc<MeshConfig>,
    /// MeshConfig `defaultServiceExportTo`.
    pub default_service_export: ExportDefault,
    /// MeshConfig `defaultVirtualServiceExportTo`.
    pub default_vs_export: ExportDefault,
    /// MeshConfig `defaultDestinationRuleExportTo`.
    pub default_dr_export: ExportDefault,
    /// The hosts served to a proxy only from its own cluster.
    pub cluster_local: ClusterLocalHosts,
}

impl Settings {
    /// Settings from the mesh config and the domain suffix.
    pub fn new(mesh: Arc<MeshConfig>, domain_suffix: &str) -> Self {
        Self {
            root_namespace: mesh.root_namespace.as_str().into(),
            domain_suffix: domain_suffix.into(),
            cluster_local: ClusterLocalHosts::new(&mesh, domain_suffix),
            default_service_export: ExportDefault::of(&mesh.default_service_export_to),
            default_vs_export: ExportDefault::of(&mesh.default_virtual_service_export_to),
            default_dr_export: ExportDefault::of(&mesh.default_destination_rule_export_to),
            mesh,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::new(Arc::new(MeshConfig::default()), "cluster.local")
    }
}

/// The traffic config of one snapshot, indexed.
#[derive(Debug)]
pub struct Index {
    /// What it was built with.
    pub settings: Settings,
    /// The Istio objects in force.
    pub config: Arc<ConfigSnapshot>,
    /// DestinationRules.
    pub destination_rules: DrIndex,
    /// PeerAuthentications.
    pub peer_authn: PaIndex,
    /// Sidecars, and the scopes built from them.
    pub scopes: Scopes,
    /// Mesh-bound VirtualServices.
    pub virtual_services: VsIndex,
}

impl Default for Index {
    fn default() -> Self {
        Self::build(Arc::new(ConfigSnapshot::default()), Settings::default())
    }
}

impl Index {
    /// Indexes `config`.
    pub fn build(config: Arc<ConfigSnapshot>, settings: Settings) -> Self {
        Self {
            destination_rules: DrIndex::build(config.all(), &settings),
            peer_authn: PaIndex::build(config.all(), &settings),
            scopes: Scopes::build(&config),
            virtual_services: VsIndex::build(config.all(), &settings),
            settings,
            config,
        }
    }

    /// The index of no config at all (fixtures, the empty start): today's defaults everywhere.
    pub fn empty() -> &'static Index {
        static EMPTY: LazyLock<Index> = LazyLock::new(Index::default);
        &EMPTY
    }

    /// The DestinationRule a proxy in `proxy_ns` with `labels` uses for `service` (outbound).
    pub fn destination_rule(
        &self,
        proxy_ns: &str,
        labels: &BTreeMap<String, String>,
        service: &Service,
    ) -> Option<&Arc<MergedRule>> {
        self.destination_rules
            .lookup(&self.settings.root_namespace, proxy_ns, labels, service)
    }

    /// What `proxy` sees of mesh `version`, whose services (every namespace's copy) `services` lists
    /// (istiod's `SidecarScope`; built once per distinct scope and version).
    pub fn scope<'a>(
        &self,
        version: u64,
        proxy: ProxyRef<'_>,
        services: impl FnOnce() -> Box<dyn Iterator<Item = &'a Service> + 'a>,
    ) -> Arc<SidecarScope> {
        self.scopes
            .scope(version, proxy, &self.config, &self.settings, services)
    }

    /// The mTLS mode the workload in `namespace` with `labels` accepts on its target `port`.
    pub fn peer_mode(&self, namespace: &str, labels: &Labels, port: u16) -> PeerMode {
        self.peer_authn.mode(namespace, labels, port)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! Helpers for the traffic tables: Istio objects from YAML specs.

    use std::sync::Arc;

    use super::Settings;
    use crate::istio::{self, Config, Kind, ObjectMeta, Source};

    /// A parsed object of `kind` in `ns` named `name`, created at second `created`, with `spec` (YAML).
    pub(crate) fn config(kind: &str, ns: &str, name: &str, created: &str, spec: &str) -> Arc<Config> {
        let kind = Kind::from_name(kind).expect("kind");
        let meta = ObjectMeta {
            namespace: ns.into(),
            name: name.into(),
            labels: Default::default(),
            annotations: Default::default(),
            revision: "1".into(),
            creation_timestamp: Some(format!("2026-01-01T00:00:{created:0>2}Z")),
            source: Source::Cluster("c1".into()),
        };
        let spec: serde_json::Value = serde_yaml::from_str(spec).expect("yaml");
        Arc::new(istio::parse(kind, meta, &spec).expect("valid").0)
    }

    /// Default settings (root namespace `istio-system`, `cluster.local`).
    pub(crate) fn settings() -> Settings {
        Settings::default()
    }
}
