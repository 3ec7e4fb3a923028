//! The generated mesh: N clusters, each with the same S services of E endpoints (one pod per
//! endpoint), as Kubernetes manifests, and the churn that replaces endpoints (in the remote clusters,
//! or in the only one).
//!
//! Owns: the truth. Every write to a simulator goes through [`World`], which therefore knows, at
//! any moment, which addresses every service has in every cluster. Does NOT: talk to meshd.

use std::{
    collections::{BTreeSet, VecDeque},
    net::Ipv4Addr,
};

use serde_json::{Value, json};

use kube_sim::ApiServer;
use meshd::sandbox::topology::ClusterManifests;

/// Namespace of every generated workload.
pub const NAMESPACE: &str = "bench";
/// The one service port (named `http`, so sidecars get an HTTP cluster).
const SERVICE_PORT: u16 = 80;
/// The pods' port.
const TARGET_PORT: u16 = 8080;
/// First endpoint address: 10.128.0.1, then one up per new pod (8M addresses).
const FIRST_ENDPOINT: u32 = u32::from_be_bytes([10, 128, 0, 1]);

/// How big the generated mesh is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shape {
    /// Clusters; the first is the primary, the others are remotes joined by remote secrets.
    pub clusters: usize,
    /// Services per cluster (the same names in every cluster: one merged service each).
    pub services: usize,
    /// Endpoints per service per cluster.
    pub endpoints: usize,
}

/// One endpoint change written to a simulator.
#[derive(Debug, Clone)]
pub struct Change {
    /// The cluster written to.
    pub cluster: usize,
    /// The service changed.
    pub service: usize,
    /// The address that replaced the oldest one.
    pub added: Ipv4Addr,
}

/// One write to an API server.
#[derive(Debug, Clone)]
pub enum Write {
    /// Create or update the object.
    Apply(Value),
    /// Delete a pod.
    DeletePod {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// The generated topology and its current truth.
pub struct World {
    shape: Shape,
    /// `[cluster][service]` → addresses, oldest first (churn replaces the oldest).
    endpoints: Vec<Vec<VecDeque<Ipv4Addr>>>,
    next_address: u32,
}

impl World {
    /// A world of `shape` with every endpoint at its initial address.
    pub fn new(shape: Shape) -> Self {
        let mut next_address = FIRST_ENDPOINT;
        let endpoints = (0..shape.clusters)
            .map(|_| {
                (0..shape.services)
                    .map(|_| {
                        (0..shape.endpoints)
                            .map(|_| {
                                next_address += 1;
                                Ipv4Addr::from(next_address - 1)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Self {
            shape,
            endpoints,
            next_address,
        }
    }

    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Cluster names, primary first.
    pub fn cluster_name(cluster: usize) -> String {
        format!("cluster-{cluster}")
    }

    /// The Kubernetes name of a service.
    pub fn service_name(service: usize) -> String {
        format!("svc-{service}")
    }

    /// Every current address and the service it belongs to.
    pub fn addresses(&self) -> impl Iterator<Item = (Ipv4Addr, usize)> + '_ {
        self.endpoints
            .iter()
            .flat_map(|c| c.iter().enumerate())
            .flat_map(|(s, addresses)| addresses.iter().map(move |&ip| (ip, s)))
    }

    /// Every cluster's manifests: the namespaces, then per service its ServiceAccount, Service, pods and
    /// EndpointSlice.
    pub fn manifests(&self) -> Vec<ClusterManifests> {
        (0..self.shape.clusters)
            .map(|c| {
                let mut objects: Vec<_> = [super::SYSTEM_NAMESPACE, NAMESPACE]
                    .into_iter()
                    .map(|ns| {
                        let object =
                            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                        (format!("namespace {ns}"), object)
                    })
                    .collect();
                for s in 0..self.shape.services {
                    // The hand-written slice first: its Service is then user-managed from the start, so
                    // the simulator's EndpointSlice controller never builds (and rebuilds per pod) its own.
                    objects.push((format!("svc-{s}/slice"), slice(s, &self.endpoints[c][s])));
                    objects.push((format!("svc-{s}/serviceaccount"), service_account(s)));
                    objects.push((format!("svc-{s}"), service(s)));
                    for &ip in &self.endpoints[c][s] {
                        objects.push((format!("svc-{s}/{ip}"), pod(s, ip)));
                    }
                }
                ClusterManifests {
                    name: Self::cluster_name(c),
                    objects,
                }
            })
            .collect()
    }

    /// Which cluster and service the `n`th change touches: remote clusters round-robin (the only
    /// cluster when there is one), then services, so one service changes again only after every
    /// (cluster, service) pair has.
    pub fn target(&self, n: u64) -> (usize, usize) {
        let remotes = (self.shape.clusters - 1).max(1) as u64;
        let first_remote = usize::from(self.shape.clusters > 1);
        let cluster = first_remote + (n % remotes) as usize;
        let service = ((n / remotes) % self.shape.services as u64) as usize;
        (cluster, service)
    }

    /// Applies a change's writes (from [`World::churn_writes`]) to a simulated cluster, in order.
    pub fn write_to(server: &ApiServer, writes: Vec<Write>) -> Result<(), kube_sim::Error> {
        let store = server.store();
        for write in writes {
            match write {
                Write::Apply(object) => {
                    store.apply(object)?;
                }
                Write::DeletePod { namespace, name } => {
                    store.delete("v1", "Pod", Some(&namespace), &name)?;
                }
            }
        }
        Ok(())
    }

    /// The `n`th change — replacing the target's oldest endpoint as a rolling restart of one replica
    /// does — and the writes that make it, in order, for any API server: the new pod, the slice, the
    /// old pod's deletion. The truth is updated; `announce` is called first.
    pub fn churn_writes(&mut self, n: u64, announce: impl FnOnce(Ipv4Addr, usize)) -> (Change, Vec<Write>) {
        let (cluster, service) = self.target(n);
        let added = Ipv4Addr::from(self.next_address);
        self.next_address += 1;
        announce(added, service);
        let addresses = &mut self.endpoints[cluster][service];
        let removed = addresses.pop_front();
        addresses.push_back(added);
        let mut writes = vec![
            Write::Apply(pod(service, added)),
            Write::Apply(slice(service, addresses)),
        ];
        writes.extend(removed.map(|old| Write::DeletePod {
            namespace: NAMESPACE.to_owned(),
            name: pod_name(old),
        }));
        (
            Change {
                cluster,
                service,
                added,
            },
            writes,
        )
    }

    /// What every client must end up with for `service`: its addresses across all clusters.
    pub fn truth(&self, service: usize) -> BTreeSet<Ipv4Addr> {
        self.endpoints
            .iter()
            .flat_map(|c| c[service].iter().copied())
            .collect()
    }
}

/// The bytes a `ClusterLoadAssignment` carries for `ip` (`SocketAddress.address`, field 2, length
/// prefixed): finding them in a resource shows the endpoint arrived, without decoding it.
pub fn wire_marker(ip: Ipv4Addr) -> Vec<u8> {
    let text = ip.to_string();
    let mut marker = vec![0x12, text.len() as u8];
    marker.extend_from_slice(text.as_bytes());
    marker
}

fn pod_name(ip: Ipv4Addr) -> String {
    format!("pod-{}", u32::from(ip))
}

/// The ServiceAccount the service's pods run as (the API server refuses pods whose account is missing).
fn service_account(s: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": format!("svc-{s}"), "namespace": NAMESPACE}})
}

/// VIPs from 10.96.0.2: 10.96.0.1 is the `kubernetes` Service every cluster has.
fn service(s: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("svc-{s}"), "namespace": NAMESPACE},
        "spec": {"clusterIP": format!("10.96.{}.{}", s / 250, s % 250 + 2),
                 "selector": {"app": format!("svc-{s}")},
                 "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": TARGET_PORT}]}})
}

fn pod(s: usize, ip: Ipv4Addr) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(ip), "namespace": NAMESPACE,
                     "labels": {"app": format!("svc-{s}"), "security.istio.io/tlsMode": "istio"}},
        "spec": {"containers": [{"name": "app", "image": "app"}], "serviceAccountName": format!("svc-{s}")},
        "status": {"phase": "Running", "podIP": ip.to_string()}})
}

fn slice(s: usize, addresses: &VecDeque<Ipv4Addr>) -> Value {
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|ip| {
            json!({"addresses": [ip.to_string()], "conditions": {"ready": true},
                   "targetRef": {"kind": "Pod", "name": pod_name(*ip), "namespace": NAMESPACE}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{s}-slice"), "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": format!("svc-{s}")}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": TARGET_PORT}],
        "endpoints": endpoints})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_targets_remotes_round_robin() {
        let w = World::new(Shape {
            clusters: 3,
            services: 2,
            endpoints: 1,
        });
        let targets: Vec<_> = (0..5).map(|n| w.target(n)).collect();
        assert_eq!(targets, [(1, 0), (2, 0), (1, 1), (2, 1), (1, 0)]);
        assert_eq!(w.truth(0).len(), 3);
    }

    #[test]
    fn churn_targets_the_only_cluster() {
        let w = World::new(Shape {
            clusters: 1,
            services: 2,
            endpoints: 1,
        });
        let targets: Vec<_> = (0..3).map(|n| w.target(n)).collect();
        assert_eq!(targets, [(0, 0), (0, 1), (0, 0)]);
    }

    #[test]
    fn addresses_name_their_service() {
        let w = World::new(Shape {
            clusters: 2,
            services: 2,
            endpoints: 2,
        });
        let addresses: Vec<_> = w.addresses().collect();
        assert_eq!(addresses.len(), 8);
        for s in 0..2 {
            let of_s: BTreeSet<_> = addresses.iter().filter(|a| a.1 == s).map(|a| a.0).collect();
            assert_eq!(of_s, w.truth(s));
        }
    }

    #[test]
    fn marker_is_the_length_prefixed_address() {
        assert_eq!(wire_marker(Ipv4Addr::new(10, 0, 0, 1)), b"\x12\x0810.0.0.1");
    }
}
