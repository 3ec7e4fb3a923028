//! The aggregate's snapshots as what the ADS server serves: each `MeshSnapshot` is the generators'
//! [`Mesh`] and a stream's [`Snapshot`] (its change set turned into a [`PushScope`]), and the
//! aggregate's `Snapshots` handle is the server's [`SnapshotSource`].
//!
//! Owns: the adaptation only. Does NOT: debounce (the aggregate does) or hold snapshots.

use std::{collections::BTreeMap, sync::Arc};

use tokio::{sync::watch, time::Instant};

use super::push::{Changes, PushScope, Snapshot, SnapshotSource};
use crate::envoy::Mesh;
use crate::{
    aggregate::{ChangeKind, MeshSnapshot, Snapshots},
    model::{ClusterId, Endpoint, NetworkGateway, Service, ServiceKey, StaleAction},
    traffic::hosts::{HostPattern, resolve},
};

impl Mesh for MeshSnapshot {
    fn version(&self) -> u64 {
        self.version
    }

    fn services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        // One per host name (cluster names are per host): the one `service` picks.
        Box::new(
            self.services
                .values()
                .filter(|s| self.service(&s.hostname).is_some_and(|w| std::ptr::eq(w, &***s)))
                .map(|s| &**s),
        )
    }

    fn service(&self, hostname: &str) -> Option<&Service> {
        // Keys order by host name first: the keys at or after (hostname, "") with that host name are
        // its services, one per namespace.
        let from = ServiceKey::new(hostname, "");
        let same_host = self
            .services
            .range(from..)
            .map(|(_, s)| &**s)
            .take_while(|s| &*s.hostname == hostname);
        pick(same_host)
    }

    fn endpoints(&self, service: &Service) -> Box<dyn Iterator<Item = &Endpoint> + '_> {
        match self.endpoints.get(&service.key()) {
            Some(shards) => Box::new(shards.iter()),
            None => Box::new(std::iter::empty()),
        }
    }

    fn gateways(&self) -> &[NetworkGateway] {
        &self.gateways
    }

    fn stale_clusters(&self) -> &BTreeMap<ClusterId, StaleAction> {
        &self.stale
    }

    fn traffic(&self) -> &crate::traffic::Index {
        MeshSnapshot::traffic(self)
    }

    fn all_services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        Box::new(self.services.values().map(|s| &**s))
    }

    fn service_in(&self, hostname: &str, namespace: &str) -> Option<&Service> {
        self.services
            .get(&ServiceKey::new(hostname, namespace))
            .map(|s| &**s)
    }
}

/// Which of the services sharing a host name (in different namespaces) proxies see: a Kubernetes
/// Service over a ServiceEntry (istiod's sidecar scope does the same), else the first namespace in name
/// order (istiod keeps the first seen; meshd stays deterministic). Preferring the proxy's own namespace,
/// as istiod's sidecar scope also does, is left to `exportTo` and Sidecar scoping.
pub fn pick<'a>(same_host: impl Iterator<Item = &'a Service>) -> Option<&'a Service> {
    same_host.min_by(|a, b| (a.provider(), &a.namespace).cmp(&(b.provider(), &b.namespace)))
}

impl Snapshot for MeshSnapshot {
    fn mesh(&self) -> &dyn Mesh {
        self
    }

    fn since(&self) -> u64 {
        self.changes.since
    }

    fn changes(&self) -> PushScope {
        let changes = &self.changes;
        if !changes.full.is_empty() {
            return PushScope::Full;
        }
        if !changes.needs_full_push() {
            debug_assert!(changes.services.values().all(|c| c.kind == ChangeKind::Eds));
            return PushScope::Endpoints(changes.services.keys().map(|k| k.hostname.clone()).collect());
        }
        let hosts = |kind: ChangeKind| {
            changes
                .services
                .iter()
                .filter(move |(_, c)| c.kind == kind)
                .map(|(k, _)| k.hostname.clone())
                .collect()
        };
        let suffix = &self.settings.domain_suffix;
        let objects = changes
            .config
            .objects
            .iter()
            .map(|(obj, c)| {
                let hosts = c
                    .hosts
                    .iter()
                    .map(|h| HostPattern::parse(&resolve(h, &obj.namespace, suffix)))
                    .collect();
                (obj.clone(), hosts)
            })
            .collect();
        PushScope::Partial(Arc::new(Changes {
            endpoints: hosts(ChangeKind::Eds),
            services: hosts(ChangeKind::Full),
            objects,
        }))
    }

    fn changed_at(&self) -> Option<Instant> {
        self.changed_at
    }
}

/// The ADS server follows the aggregate directly: it already debounces, and its arc-swap load is what
/// every stream needs.
impl SnapshotSource for Snapshots {
    fn load(&self) -> Option<Arc<dyn Snapshot>> {
        let snapshot = Snapshots::load(self);
        // Version 0 is the empty start, not a mesh anyone synced.
        (snapshot.version > 0).then_some(snapshot as Arc<dyn Snapshot>)
    }

    fn versions(&self) -> watch::Receiver<u64> {
        Snapshots::versions(self)
    }

    fn debouncing(&self) -> Option<crate::envoy::explain::Debouncing> {
        let p = self.pending()?;
        let now = Instant::now();
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Some(crate::envoy::explain::Debouncing {
            since_ms: ms(now.saturating_duration_since(p.first)),
            publish_within_ms: ms(p.deadline.saturating_duration_since(now)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::{
        aggregate::{ChangeSet, ServiceChange},
        envoy::static_mesh::service,
        istio::{Kind, ObjectRef},
        model::Hostname,
        model::Protocol,
        xds::push::scope,
    };

    fn snapshot(version: u64, since: u64, kind: ChangeKind) -> MeshSnapshot {
        let svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
        let other = service("echo", "other", &[("grpc", 7070, Protocol::Grpc)]);
        let change = ServiceChange {
            clusters: ["c1".into()].into(),
            kind,
        };
        MeshSnapshot {
            version,
            services: [(svc.key(), Arc::new(svc.clone())), (other.key(), Arc::new(other))].into(),
            changes: ChangeSet {
                since,
                services: BTreeMap::from([(svc.key(), change)]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn one_service_per_host_kubernetes_first_then_namespace_order() {
        let host = "api.example.com";
        let make = |ns: &str, se: bool| {
            let mut s = service("x", ns, &[("http", 80, Protocol::Http)]);
            s.hostname = host.into();
            if se {
                s.origin = crate::model::Origin::ServiceEntry {
                    namespace: ns.into(),
                    names: vec!["e".into()],
                };
            }
            Arc::new(s)
        };
        let other = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
        // (services with that host, the namespace proxies see)
        let cases: [(Vec<Arc<Service>>, &str); 3] = [
            (vec![make("b", true), make("a", true)], "a"),
            (vec![make("a", true), make("z", false)], "z"),
            (vec![make("a", true), make("m", false), make("z", false)], "m"),
        ];
        for (services, want) in cases {
            let mut snap = MeshSnapshot::default();
            for s in services.iter().chain([&Arc::new(other.clone())]) {
                snap.services.insert(s.key(), s.clone());
            }
            assert_eq!(Mesh::service(&snap, host).map(|s| &*s.namespace), Some(want));
            let listed: Vec<(&str, &str)> = Mesh::services(&snap)
                .map(|s| (s.hostname.as_str(), &*s.namespace))
                .collect();
            assert_eq!(
                listed,
                [(host, want), ("echo.default.svc.cluster.local", "default")]
            );
        }
    }

    #[test]
    fn scope_is_incremental_only_from_the_version_seen() {
        let eds = snapshot(5, 4, ChangeKind::Eds);
        assert_eq!(
            scope(&eds, Some(4)),
            PushScope::Endpoints(["echo.default.svc.cluster.local".into()].into())
        );
        assert_eq!(scope(&eds, Some(3)), PushScope::Full, "a missed change set");
        assert_eq!(scope(&eds, None), PushScope::Full);
        let echo = || -> BTreeSet<Hostname> { ["echo.default.svc.cluster.local".into()].into() };
        let service_changed = PushScope::Partial(Arc::new(Changes {
            services: echo(),
            ..Changes::default()
        }));
        assert_eq!(scope(&snapshot(5, 4, ChangeKind::Full), Some(4)), service_changed);
        let mut mesh_wide = snapshot(5, 4, ChangeKind::Eds);
        mesh_wide
            .changes
            .full
            .insert(crate::aggregate::FullReason::Networks);
        assert_eq!(scope(&mesh_wide, Some(4)), PushScope::Full);
    }

    #[test]
    fn config_hosts_resolve_in_the_objects_namespace() {
        let mut s = snapshot(5, 4, ChangeKind::Eds);
        let vs = ObjectRef::new(Kind::VirtualService, "other", "vs");
        let hosts = ["echo", "*.example.com", "api.example.com"]
            .map(String::from)
            .into();
        s.changes
            .config
            .objects
            .insert(vs.clone(), crate::config_controller::Change { hosts });
        let want = Changes {
            endpoints: echo_host(),
            services: BTreeSet::new(),
            objects: [(
                vs,
                ["*.example.com", "api.example.com", "echo.other.svc.cluster.local"]
                    .map(HostPattern::parse)
                    .into(),
            )]
            .into(),
        };
        assert_eq!(s.changes(), PushScope::Partial(Arc::new(want)));
    }

    fn echo_host() -> BTreeSet<Hostname> {
        ["echo.default.svc.cluster.local".into()].into()
    }

    #[tokio::test(start_paused = true)]
    async fn the_aggregate_is_a_source_once_it_has_published() {
        let tasks = crate::drain::Tasks::new();
        let (_networks_tx, networks) = watch::channel(Arc::default());
        let opts = crate::aggregate::Options {
            primary: "c1".into(),
            debounce_after: std::time::Duration::from_millis(100),
            debounce_max: std::time::Duration::from_secs(1),
            eds_debounce: crate::aggregate::EdsDebounce::Quiet,
            metrics: crate::aggregate::Metrics::unregistered(),
            domain_suffix: "cluster.local".into(),
        };
        let (aggregator, updates, snapshots) = crate::aggregate::new(opts, networks);
        let source: Arc<dyn SnapshotSource> = Arc::new(snapshots);
        let mut versions = source.versions();
        assert!(source.load().is_none(), "the empty start is not served");
        aggregator.spawn(&tasks);
        let svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
        let from = crate::aggregate::RegistryId::kubernetes("c1".into(), 1);
        updates
            .send(crate::aggregate::Update::Replace {
                from,
                services: vec![Arc::new(svc)],
                endpoints: vec![],
            })
            .await;
        versions.changed().await.expect("published");
        let snapshot = source.load().expect("served once published");
        assert_eq!((snapshot.mesh().version(), snapshot.since()), (1, 0));
        assert!(snapshot.changed_at().is_some());
        assert_eq!(snapshot.mesh().services().count(), 1);
        tasks.cancel();
        tasks
            .drain(std::time::Duration::from_secs(1))
            .await
            .expect("drained");
    }

    #[test]
    fn looks_services_up_by_host_name() {
        let s = snapshot(1, 0, ChangeKind::Eds);
        assert_eq!(
            s.service("echo.other.svc.cluster.local").map(|s| &*s.namespace),
            Some("other")
        );
        assert!(s.service("echo.default.svc.cluster").is_none());
        assert_eq!(Mesh::services(&s).count(), 2);
    }
}
