//! The aggregate's snapshots as the generators' [`Mesh`], and the feed turning published snapshots
//! into push updates.
//!
//! Owns: the adaptation only. Does NOT: debounce (the aggregate already has) or hold snapshots beyond
//! handing them on.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{
    generator::Mesh,
    push::{PushScope, Update},
};
use crate::{
    aggregate::{MeshSnapshot, Push, Snapshots},
    drain::Tasks,
    model::{Endpoint, NetworkGateway, Service, ServiceKey},
};

impl Mesh for MeshSnapshot {
    fn version(&self) -> u64 {
        self.version
    }

    fn services(&self) -> Box<dyn Iterator<Item = &Service> + '_> {
        Box::new(self.services.values().map(|s| &**s))
    }

    fn service(&self, hostname: &str) -> Option<&Service> {
        // Keys order by host name first: the first key at or after (hostname, "") is the one, if any.
        let from = ServiceKey::new(hostname, "");
        let (_, s) = self.services.range(from..).next()?;
        (&*s.hostname == hostname).then_some(&**s)
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
}

/// What `snapshot` changed for a reader that last saw version `seen`.
pub fn scope(snapshot: &MeshSnapshot, seen: Option<u64>) -> PushScope {
    let changes = &snapshot.changes;
    if seen != Some(changes.since) || changes.needs_full_push() {
        return PushScope::Full;
    }
    debug_assert!(changes.services.values().all(|c| c.push == Push::Eds));
    PushScope::Endpoints(changes.services.keys().map(|k| k.hostname.clone()).collect())
}

/// Forwards every published snapshot (after the empty start, version 0) to the push pipeline.
pub fn spawn_feed(tasks: &Tasks, mut snapshots: Snapshots, updates: mpsc::Sender<Update>) {
    let stop = tasks.cancelled();
    tasks.spawn("xds-snapshot-feed", async move {
        tokio::pin!(stop);
        let mut seen = None;
        let mut next = Some(snapshots.load());
        loop {
            if let Some(snapshot) = next.take().filter(|s| s.version > 0) {
                let update = Update {
                    scope: scope(&snapshot, seen),
                    mesh: snapshot.clone() as Arc<dyn Mesh>,
                };
                seen = Some(snapshot.version);
                if updates.send(update).await.is_err() {
                    return;
                }
            }
            next = tokio::select! {
                _ = &mut stop => return,
                s = snapshots.changed() => match s { Some(s) => Some(s), None => return },
            };
        }
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{
        aggregate::{ChangeSet, ServiceChange},
        model::Protocol,
        xds::generator::static_mesh::service,
    };

    fn snapshot(version: u64, since: u64, push: Push) -> MeshSnapshot {
        let svc = service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]);
        let other = service("echo", "other", &[("grpc", 7070, Protocol::Grpc)]);
        let change = ServiceChange {
            clusters: ["c1".into()].into(),
            push,
        };
        MeshSnapshot {
            version,
            services: [(svc.key(), Arc::new(svc.clone())), (other.key(), Arc::new(other))].into(),
            changes: ChangeSet {
                since,
                services: BTreeMap::from([(svc.key(), change)]),
                full: Default::default(),
            },
            ..Default::default()
        }
    }

    #[test]
    fn scope_is_incremental_only_from_the_version_seen() {
        let eds = snapshot(5, 4, Push::Eds);
        assert_eq!(
            scope(&eds, Some(4)),
            PushScope::Endpoints(["echo.default.svc.cluster.local".into()].into())
        );
        assert_eq!(scope(&eds, Some(3)), PushScope::Full, "a missed change set");
        assert_eq!(scope(&eds, None), PushScope::Full);
        assert_eq!(scope(&snapshot(5, 4, Push::Full), Some(4)), PushScope::Full);
    }

    #[test]
    fn looks_services_up_by_host_name() {
        let s = snapshot(1, 0, Push::Eds);
        assert_eq!(
            s.service("echo.other.svc.cluster.local").map(|s| &*s.namespace),
            Some("other")
        );
        assert!(s.service("echo.default.svc.cluster").is_none());
        assert_eq!(Mesh::services(&s).count(), 2);
    }
}
