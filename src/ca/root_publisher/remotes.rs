//! One root publisher per remote cluster the secret controller runs, for as long as this replica leads.
//!
//! A publisher starts when its cluster joins, restarts with the new client when the cluster's secret
//! rotates, and is cancelled when the cluster is removed; the whole set is cancelled with the leadership
//! term. Each uses the remote's own credentials (the reader of the remote secret), so what it may write
//! is what the remote's RBAC grants: a refusal is logged by that publisher and touches nothing else.

use std::{collections::BTreeMap, sync::Arc};

use tokio::sync::watch;
use tracing::info;

use super::run as publish;
use crate::{
    ca::CaBundle,
    config::MeshConfig,
    drain::Tasks,
    model::ClusterId,
    multicluster::status::{ClientChannel, RemotesWatch},
    registry::namespaces::Selection,
};

/// What to change so that exactly one publisher follows each running remote's client channel.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// Publishers whose cluster is gone, or was replaced by a new one of the same ID.
    stop: Vec<ClusterId>,
    /// Indices into the remotes of the clusters that have no publisher (after the stops).
    start: Vec<usize>,
}

/// Compares the running publishers (by cluster, with the channel each follows) with the running remotes.
fn plan<T>(
    running: &BTreeMap<ClusterId, (ClientChannel, T)>,
    remotes: &[(ClusterId, ClientChannel)],
) -> Plan {
    let same = |id: &ClusterId, channel: &ClientChannel| {
        remotes
            .iter()
            .any(|(rid, rc)| rid == id && rc.same_channel(channel))
    };
    let stop: Vec<ClusterId> = running
        .iter()
        .filter(|(id, (channel, _))| !same(id, channel))
        .map(|(id, _)| id.clone())
        .collect();
    let start = remotes
        .iter()
        .enumerate()
        .filter(|(_, (id, _))| !running.contains_key(id) || stop.contains(id))
        .map(|(i, _)| i)
        .collect();
    Plan { stop, start }
}

/// One leadership term: keeps a publisher per running remote until `term` is cancelled. The publishers
/// run on children of `term`, so losing the lease cancels them all.
pub(super) async fn run(
    mut remotes: RemotesWatch,
    roots: watch::Receiver<Arc<CaBundle>>,
    mesh: watch::Receiver<Arc<MeshConfig>>,
    watch_timeout: u32,
    term: Tasks,
) {
    let mut running: BTreeMap<ClusterId, (ClientChannel, Tasks)> = BTreeMap::new();
    loop {
        let current = remotes.current();
        let Plan { stop, start } = plan(&running, &current);
        for id in stop {
            if let Some((_, tasks)) = running.remove(&id) {
                info!(cluster = %id, "root publisher: remote cluster gone; stopping its publisher");
                tasks.cancel();
            }
        }
        for i in start {
            let (id, channel) = current[i].clone();
            info!(cluster = %id, "root publisher: publishing in remote cluster");
            // The remote's own selectors (its Secret's annotation), else the mesh-wide ones.
            let selection = match remotes.selectors(&id) {
                Some(cluster) => Selection {
                    mesh: mesh.clone(),
                    cluster,
                },
                None => Selection::mesh_wide(mesh.clone()),
            };
            let tasks = term.child();
            tasks.spawn(
                &format!("ca-root-publisher:{id}"),
                follow(
                    id.clone(),
                    channel.clone(),
                    roots.clone(),
                    selection,
                    watch_timeout,
                    tasks.clone(),
                ),
            );
            running.insert(id, (channel, tasks));
        }
        tokio::select! {
            () = term.cancelled() => return,
            changed = remotes.changed() => if changed.is_err() { return },
        }
    }
}

/// Publishes in one remote with the client its channel holds, starting afresh with each new client (a
/// rotated secret), until the channel closes (the cluster stopped) or `stop` is cancelled.
async fn follow(
    cluster: ClusterId,
    mut client: ClientChannel,
    roots: watch::Receiver<Arc<CaBundle>>,
    selection: Selection,
    watch_timeout: u32,
    stop: Tasks,
) {
    loop {
        let current = client.borrow_and_update().clone();
        let publishing = async {
            if let Some(c) = current {
                publish(
                    &cluster,
                    c,
                    roots.clone(),
                    selection.clone(),
                    watch_timeout,
                    &stop,
                )
                .await;
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = stop.cancelled() => return,
            changed = client.changed() => if changed.is_err() { return },
            () = publishing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel() -> (watch::Sender<Option<kube::Client>>, ClientChannel) {
        watch::channel(None)
    }

    #[test]
    fn one_publisher_per_running_remote_and_a_new_one_for_a_replaced_cluster() {
        let (_a_tx, a) = channel();
        let (_b_tx, b) = channel();
        let (_b2_tx, b2) = channel();
        let (_c_tx, c) = channel();
        let running: BTreeMap<ClusterId, (ClientChannel, ())> = [
            ("a".into(), (a.clone(), ())),
            ("b".into(), (b.clone(), ())),
            ("gone".into(), (c.clone(), ())),
        ]
        .into();
        let remotes: Vec<(ClusterId, ClientChannel)> =
            vec![("a".into(), a.clone()), ("b".into(), b2), ("new".into(), c)];
        assert_eq!(
            plan(&running, &remotes),
            Plan {
                stop: vec!["b".into(), "gone".into()],
                start: vec![1, 2],
            },
            "a is kept; b was removed and re-added (a new channel); gone is gone; new is new"
        );
        assert_eq!(
            plan(&running, &[]),
            Plan {
                stop: vec!["a".into(), "b".into(), "gone".into()],
                start: vec![],
            }
        );
        let none: BTreeMap<ClusterId, (ClientChannel, ())> = BTreeMap::new();
        assert_eq!(
            plan(&none, &[("a".into(), a)]),
            Plan {
                stop: vec![],
                start: vec![0],
            }
        );
    }
}
