//! What a control plane's resources are in the bench world, whatever it names them: which EDS names a
//! CDS `Cluster` asks for, and which world service an EDS resource is, recognised by its addresses.
//!
//! Owns: the address → service table (the initial endpoints, then one entry per churned address,
//! written by the churn loop only) and the EDS name → service table learned from the first assignment
//! of each name that holds an address. Does NOT: decode on the clients' hot path beyond that first
//! assignment per name (after it, a response costs a name lookup and a byte search).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::Ipv4Addr,
    sync::Arc,
};

use envoy_types::pb::envoy::config::{
    cluster::v3::cluster::DiscoveryType,
    core::v3::{address, socket_address},
    endpoint::v3::{ClusterLoadAssignment, lb_endpoint},
};
use parking_lot::RwLock;
use prost::Message;

/// The part of a `Cluster` that says where its endpoints come from; prost skips every other field,
/// so reading a control plane's CDS costs little more than finding these two.
#[derive(Clone, PartialEq, Message)]
struct EdsRef {
    /// `Cluster.type` (the `cluster_discovery_type` oneof; unset is `STATIC`, as in Envoy).
    #[prost(int32, tag = "2")]
    discovery_type: i32,
    #[prost(message, optional, tag = "3")]
    eds_cluster_config: Option<EdsConfig>,
}

/// `Cluster.EdsClusterConfig`, without `eds_config` (the clients use ADS whatever it says).
#[derive(Clone, PartialEq, Message)]
struct EdsConfig {
    #[prost(string, tag = "2")]
    service_name: String,
}

/// The EDS resource the encoded CDS `Cluster` named `name` asks for, as Envoy resolves it:
/// `eds_cluster_config.service_name` when set, else the cluster's name. `None` for any other discovery
/// type (static, DNS, original destination, custom) and for a body that does not decode.
pub(super) fn eds_name(name: &str, body: &[u8]) -> Option<Arc<str>> {
    let cluster = EdsRef::decode(body).ok()?;
    if cluster.discovery_type != DiscoveryType::Eds as i32 {
        return None;
    }
    let service_name = cluster
        .eds_cluster_config
        .map(|c| c.service_name)
        .unwrap_or_default();
    Some(if service_name.is_empty() {
        name.into()
    } else {
        service_name.into()
    })
}

/// Which world service each address and each EDS name is. Shared by every client: a name is decoded
/// once for the whole run, not once per client.
#[derive(Default)]
pub(super) struct Directory {
    addresses: RwLock<HashMap<Ipv4Addr, usize>>,
    /// `None`: the name's endpoints are none of the world's (another control plane's extra clusters).
    names: RwLock<HashMap<Arc<str>, Option<usize>>>,
}

impl Directory {
    /// A directory of the world's initial `(address, service)` pairs.
    pub(super) fn new(addresses: impl IntoIterator<Item = (Ipv4Addr, usize)>) -> Self {
        Self {
            addresses: RwLock::new(addresses.into_iter().collect()),
            names: RwLock::default(),
        }
    }

    /// Records a churned address; called before any simulator holds it, so no assignment can carry
    /// an address the directory does not know yet.
    pub(super) fn add(&self, address: Ipv4Addr, service: usize) {
        self.addresses.write().insert(address, service);
    }

    /// The world service the EDS resource `name` is. Learned from the first `body` of `name` that
    /// holds any address (decoded once), then a lookup. Subset and per-port resources of one service
    /// hold its addresses, so they are that service too.
    pub(super) fn service(&self, name: &str, body: &[u8]) -> Option<usize> {
        if let Some(&known) = self.names.read().get(name) {
            return known;
        }
        let addresses = addresses(body);
        if addresses.is_empty() {
            return None;
        }
        let service = {
            let known = self.addresses.read();
            addresses.iter().find_map(|a| known.get(a).copied())
        };
        self.names.write().insert(name.into(), service);
        service
    }

    /// A client's endpoints per world service: the union of the addresses of every EDS resource that
    /// is that service (resources no world service owns are left out).
    pub(super) fn by_service(
        &self,
        endpoints: &BTreeMap<String, bytes::Bytes>,
    ) -> BTreeMap<usize, BTreeSet<Ipv4Addr>> {
        let mut out: BTreeMap<usize, BTreeSet<Ipv4Addr>> = BTreeMap::new();
        for (name, body) in endpoints {
            if let Some(service) = self.service(name, body) {
                out.entry(service).or_default().extend(addresses(body));
            }
        }
        out
    }
}

/// The IPv4 socket addresses in an encoded `ClusterLoadAssignment` (empty if it does not decode).
pub(super) fn addresses(body: &[u8]) -> BTreeSet<Ipv4Addr> {
    let Ok(cla) = ClusterLoadAssignment::decode(body) else {
        return BTreeSet::new();
    };
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(lb_endpoint::HostIdentifier::Endpoint(ep)) => ep.address.as_ref(),
            _ => None,
        })
        .filter_map(|a| match &a.address {
            Some(address::Address::SocketAddress(s))
                if matches!(
                    s.port_specifier,
                    Some(socket_address::PortSpecifier::PortValue(_))
                ) =>
            {
                s.address.parse().ok()
            }
            _ => None,
        })
        .collect()
}

/// Encoded CDS and EDS resources for the tests here and in [`super::client`].
#[cfg(test)]
pub(super) mod tests {
    use envoy_types::pb::envoy::config::{
        cluster::v3::{
            Cluster,
            cluster::{ClusterDiscoveryType, CustomClusterType, EdsClusterConfig},
        },
        core::v3::{Address, SocketAddress},
        endpoint::v3::{Endpoint, LbEndpoint, LocalityLbEndpoints},
    };

    use super::*;

    pub(in crate::bench) fn cluster(
        name: &str,
        kind: Option<ClusterDiscoveryType>,
        service_name: Option<&str>,
    ) -> Vec<u8> {
        Cluster {
            name: name.into(),
            cluster_discovery_type: kind,
            eds_cluster_config: service_name.map(|s| EdsClusterConfig {
                service_name: s.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn eds_names_follow_envoy_rules() {
        let eds = Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32));
        let of = |t: DiscoveryType| Some(ClusterDiscoveryType::Type(t as i32));
        let custom = Some(ClusterDiscoveryType::ClusterType(CustomClusterType {
            name: "envoy.clusters.aggregate".into(),
            ..Default::default()
        }));
        let cases: [(&str, Vec<u8>, Option<&str>); 8] = [
            (
                "a",
                cluster("a", eds.clone(), Some("svc-a-eds")),
                Some("svc-a-eds"),
            ),
            ("b", cluster("b", eds.clone(), Some("")), Some("b")),
            ("c", cluster("c", eds, None), Some("c")),
            ("d", cluster("d", of(DiscoveryType::Static), Some("x")), None),
            ("e", cluster("e", of(DiscoveryType::OriginalDst), None), None),
            ("f", cluster("f", of(DiscoveryType::StrictDns), None), None),
            ("g", cluster("g", None, Some("x")), None),
            ("h", cluster("h", custom, None), None),
        ];
        for (name, body, want) in cases {
            assert_eq!(eds_name(name, &body).as_deref(), want, "{name}");
        }
        assert_eq!(eds_name("junk", &[0xff, 0xff]), None);
    }

    pub(in crate::bench) fn assignment(name: &str, ips: &[[u8; 4]]) -> Vec<u8> {
        let lb_endpoints = ips
            .iter()
            .map(|ip| LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(Address {
                        address: Some(address::Address::SocketAddress(SocketAddress {
                            address: Ipv4Addr::from(*ip).to_string(),
                            port_specifier: Some(socket_address::PortSpecifier::PortValue(8080)),
                            ..Default::default()
                        })),
                    }),
                    ..Default::default()
                })),
                ..Default::default()
            })
            .collect();
        ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints,
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn names_map_to_services_by_address() {
        let dir = Directory::new([
            ([10, 0, 0, 1].into(), 0),
            ([10, 0, 0, 2].into(), 0),
            ([10, 0, 0, 3].into(), 1),
        ]);
        dir.add([10, 0, 0, 4].into(), 1);
        // Another control plane's names, a subset of service 0, and one name nobody in the world owns.
        let main = assignment("svc0", &[[10, 0, 0, 1], [10, 0, 0, 2]]);
        let subset = assignment("svc0-v2", &[[10, 0, 0, 2]]);
        let churned = assignment("svc1", &[[10, 0, 0, 4]]);
        let foreign = assignment("api", &[[192, 0, 2, 1]]);
        let empty = assignment("later", &[]);
        assert_eq!(dir.service("svc0", &main), Some(0));
        assert_eq!(dir.service("svc0-v2", &subset), Some(0));
        assert_eq!(dir.service("svc1", &churned), Some(1));
        assert_eq!(dir.service("api", &foreign), None);
        // Learned once: later bodies are not decoded (an empty body still answers from the table).
        assert_eq!(dir.service("svc1", &empty), Some(1));
        // A name first seen empty is learned from its first body with addresses.
        assert_eq!(dir.service("later", &empty), None);
        assert_eq!(
            dir.service("later", &assignment("later", &[[10, 0, 0, 3]])),
            Some(1)
        );

        let endpoints = BTreeMap::from([
            ("svc0".to_owned(), main.into()),
            ("svc0-v2".to_owned(), subset.into()),
            ("svc1".to_owned(), churned.into()),
            ("api".to_owned(), foreign.into()),
        ]);
        let by_service = dir.by_service(&endpoints);
        let ips = |l: &[[u8; 4]]| l.iter().map(|&ip| Ipv4Addr::from(ip)).collect::<BTreeSet<_>>();
        assert_eq!(
            by_service,
            BTreeMap::from([
                (0, ips(&[[10, 0, 0, 1], [10, 0, 0, 2]])),
                (1, ips(&[[10, 0, 0, 4]]))
            ])
        );
    }
}
