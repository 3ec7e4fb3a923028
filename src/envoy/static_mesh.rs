//! An in-memory [`Mesh`]: services and endpoints given directly. Used by tests, benchmarks and the ADS
//! test harness (`xds::harness`, the `xds-fixture` example) to serve a known mesh without any cluster.

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use super::{Mesh, Proxy, ProxyKind};
use crate::{
    config::MeshConfig,
    config_controller::ConfigSnapshot,
    istio,
    model::{
        ClusterId, Endpoint, EndpointPort, Health, Hostname, Locality, NetworkGateway, Placement, Protocol,
        Resolution, Service, ServicePort, TlsMode, WorkloadInfo,
    },
    traffic,
};

/// A fixed mesh.
#[derive(Debug, Clone, Default)]
pub struct StaticMesh {
    /// The version reported to caches and clients.
    pub version: u64,
    /// Services and their endpoints, by host name.
    pub services: BTreeMap<Hostname, (Service, Vec<Endpoint>)>,
    /// Network gateways, sorted.
    pub gateways: Vec<NetworkGateway>,
    /// Istio config, indexed.
    pub traffic: Arc<traffic::Index>,
}

impl StaticMesh {
    /// An empty mesh at `version`.
    pub fn new(version: u64) -> Self {
        Self {
            version,
            ..Self::default()
        }
    }

    /// Serves these Istio objects (and keeps the mesh config).
    pub fn with_config(mut self, configs: impl IntoIterator<Item = Arc<istio::Config>>) -> Self {
        let snapshot = ConfigSnapshot::from_configs(self.version, configs);
        self.traffic = Arc::new(traffic::Index::build(
            Arc::new(snapshot),
            self.traffic.settings.clone(),
        ));
        self
    }

    /// Serves with this mesh config (and keeps the Istio objects).
    pub fn with_mesh_config(mut self, mesh: MeshConfig) -> Self {
        let settings = traffic::Settings::new(Arc::new(mesh), &self.traffic.settings.domain_suffix);
        self.traffic = Arc::new(traffic::Index::build(self.traffic.config.clone(), settings));
        self
    }

    /// Adds (or replaces) a service with its endpoints.
    pub fn with(mut self, service: Service, endpoints: Vec<Endpoint>) -> Self {
        self.services
            .insert(service.hostname.clone(), (service, endpoints));
        self
    }
}

impl Mesh for StaticMesh {
    fn version(&self) -> u64 {
        self.version
    }

    fn services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        Box::new(self.services.values().map(|(s, _)| s))
    }

    fn service(&self, hostname: &str) -> Option<&Service> {
        self.services.get(hostname).map(|(s, _)| s)
    }

    fn endpoints(&self, service: &Service) -> Box<dyn Iterator<Item = &Endpoint> + '_> {
        match self.services.get(&service.hostname) {
            Some((_, eps)) => Box::new(eps.iter()),
            None => Box::new(std::iter::empty()),
        }
    }

    fn gateways(&self) -> &[NetworkGateway] {
        &self.gateways
    }

    fn traffic(&self) -> &traffic::Index {
        &self.traffic
    }
}

/// A ClusterIP service `name.ns.svc.cluster.local` with `(port name, number, protocol)` ports.
pub fn service(name: &str, ns: &str, ports: &[(&str, u16, Protocol)]) -> Service {
    Service {
        hostname: format!("{name}.{ns}.svc.cluster.local").into(),
        namespace: ns.into(),
        name: name.into(),
        ports: ports
            .iter()
            .map(|(n, p, proto)| ServicePort {
                name: (*n).into(),
                port: *p,
                protocol: *proto,
                target_port: None,
            })
            .collect(),
        cluster_vips: Default::default(),
        external_addresses: Default::default(),
        node_ports: Default::default(),
        labels: Arc::default(),
        service_accounts: Default::default(),
        creation_time: None,
        resolution: Resolution::ClientSideLb,
        origin: crate::model::Origin::Kubernetes,
        mesh_external: false,
        export_to: Default::default(),
        selector: None,
    }
}

/// A healthy, plaintext endpoint in `cluster` listening on `(port name, number)`.
pub fn endpoint(ip: IpAddr, ports: &[(&str, u16)], cluster: &str) -> Endpoint {
    Endpoint {
        address: ip,
        ports: ports
            .iter()
            .map(|(n, p)| EndpointPort {
                service_port_name: (*n).into(),
                port: *p,
            })
            .collect(),
        placement: Placement::new(ClusterId::from(cluster), None, Locality::default()),
        info: WorkloadInfo::new(Arc::default(), None),
        workload_meta: crate::model::workload_meta("", "", &Default::default(), cluster),
        tls_mode: TlsMode::Disabled,
        health: Health::Healthy,
        workload: None,
        kind: crate::model::WorkloadKind::Pod,
        weight: 1,
    }
}

/// A proxy of `kind` with node ID `p` in namespace `ns`, no cluster, network or labels.
pub fn proxy(kind: ProxyKind, ns: &str) -> Proxy {
    Proxy {
        id: "p".into(),
        kind,
        cluster_id: None,
        network: None,
        requested_network_view: vec![],
        namespace: Some(ns.into()),
        labels: Default::default(),
        ips: vec![],
        service_account: None,
        istio_version: None,
        locality: Locality::default(),
        user_agent: String::new(),
    }
}
