//! Sidecar-scoped runs (`--sidecar-hosts N`): clients spread over a few namespaces, each namespace
//! with one Istio `Sidecar` whose `egress.hosts` import N services (a different window per namespace),
//! so a client is sent only those N services' clusters and endpoints.
//!
//! Owns: which namespace a client is in, which services it sees, and the objects that say so. Does
//! NOT: write them (the world's manifests carry them) or count convergence (the run asks [`Scope::sees`]).

use serde_json::{Value, json};

use super::world::NAMESPACE;

/// Namespaces the clients of a scoped run are spread over (one `Sidecar` each).
pub const NAMESPACES: usize = 4;

/// What every client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    /// Services each namespace's `Sidecar` imports.
    pub hosts: usize,
    /// Services in the mesh (the windows wrap around).
    pub services: usize,
}

impl Scope {
    /// A window of `hosts` services per namespace, at most every service.
    pub fn new(hosts: usize, services: usize) -> Self {
        Self {
            hosts: hosts.min(services),
            services,
        }
    }

    /// The namespace index of `client`: round-robin.
    fn slot(client: usize) -> usize {
        client % NAMESPACES
    }

    /// The first service of namespace `slot`'s window: windows follow each other, wrapping around.
    fn first(&self, slot: usize) -> usize {
        (slot * self.hosts) % self.services.max(1)
    }

    /// The services namespace `slot` imports.
    fn window(&self, slot: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.first(slot);
        (0..self.hosts).map(move |i| (first + i) % self.services)
    }

    /// Whether `client` is sent `service`.
    pub fn sees(&self, client: usize, service: usize) -> bool {
        let offset = (service + self.services - self.first(Self::slot(client))) % self.services.max(1);
        offset < self.hosts
    }

    /// The services `client` is sent, ascending.
    pub fn services_of(&self, client: usize) -> Vec<usize> {
        let mut services: Vec<usize> = self.window(Self::slot(client)).collect();
        services.sort_unstable();
        services
    }

    /// The primary's extra objects: each client namespace and its `Sidecar`.
    pub fn manifests(&self) -> Vec<(String, Value)> {
        (0..NAMESPACES)
            .flat_map(|slot| {
                let ns = client_namespace(slot);
                let hosts: Vec<String> = self
                    .window(slot)
                    .map(|s| format!("{NAMESPACE}/svc-{s}.{NAMESPACE}.svc.cluster.local"))
                    .collect();
                let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                let sidecar = json!({"apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
                    "metadata": {"name": "default", "namespace": ns},
                    "spec": {"egress": [{"hosts": hosts}]}});
                [
                    (format!("namespace {ns}"), namespace),
                    (format!("{ns}/sidecar"), sidecar),
                ]
            })
            .collect()
    }
}

/// The namespace `client` runs in: the workloads' own without a scope, else one of the scoped ones.
pub fn namespace(scope: Option<&Scope>, client: usize) -> String {
    match scope {
        None => NAMESPACE.to_owned(),
        Some(_) => client_namespace(Scope::slot(client)),
    }
}

fn client_namespace(slot: usize) -> String {
    format!("{NAMESPACE}-clients-{slot}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_each_other_and_wrap() {
        let scope = Scope::new(3, 10);
        let cases = [
            (0, vec![0, 1, 2]),
            (1, vec![3, 4, 5]),
            (2, vec![6, 7, 8]),
            (3, vec![0, 1, 9]),
            (4, vec![0, 1, 2]),
        ];
        for (client, want) in cases {
            assert_eq!(scope.services_of(client), want, "client {client}");
            for s in 0..10 {
                assert_eq!(
                    scope.sees(client, s),
                    want.contains(&s),
                    "client {client} service {s}"
                );
            }
        }
        assert_eq!(Scope::new(50, 10).services_of(1), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn one_sidecar_per_client_namespace_lists_its_window() {
        let scope = Scope::new(2, 10);
        let objects = scope.manifests();
        assert_eq!(objects.len(), 2 * NAMESPACES);
        let sidecar = &objects[3].1;
        assert_eq!(sidecar["metadata"]["namespace"], "bench-clients-1");
        assert_eq!(
            sidecar["spec"]["egress"][0]["hosts"],
            json!([
                "bench/svc-2.bench.svc.cluster.local",
                "bench/svc-3.bench.svc.cluster.local"
            ])
        );
        assert_eq!(namespace(Some(&scope), 5), "bench-clients-1");
        assert_eq!(namespace(None, 5), NAMESPACE);
    }
}
