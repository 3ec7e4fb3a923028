//! The registry's watch streams: the cluster-scoped ones (Namespaces, Nodes) and the namespaced ones
//! (Services, EndpointSlices, Pods), cluster-wide or, when discovery selectors select a few
//! namespaces, one per selected namespace, so the objects of the others are not even listed (the API
//! server cannot filter by namespace labels). Each item names the scope it was listed in, since a
//! relist prunes only what its own scope lacks.

use std::sync::Arc;

use futures::{StreamExt, stream::BoxStream};
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{Namespace, Node},
};
use kube::{Api, Client, Resource, core::PartialObjectMeta, runtime::watcher};

use super::{
    Event, KINDS, Kind,
    objects::{EndpointSlice, Pod, Service},
};
use crate::kube_watch;

/// Where a watch lists: one namespace, or every one (`None`).
pub(super) type Scope = Option<Arc<str>>;

/// Selected namespaces up to which each gets its own watches (3 per namespace) instead of 3
/// cluster-wide ones: a watch costs its connection (buffers, TLS) for as long as it runs, while what
/// it saves is listing and decoding the objects of every namespace not selected, once per relist.
pub(super) const PER_NAMESPACE_WATCHES: usize = 3;

/// One event (or error) of one watch.
pub(super) struct WatchItem {
    /// The watch's scope.
    pub(super) scope: Scope,
    pub(super) result: Result<Event, (Kind, watcher::Error)>,
}

pub(super) type Watches = futures::stream::SelectAll<BoxStream<'static, WatchItem>>;

pub(super) type WatchBatches = futures::stream::ReadyChunks<Watches>;

/// The next batch of the namespaced watchers; never while they have not started.
pub(super) async fn next_batch(objects: &mut Option<WatchBatches>) -> Option<Vec<WatchItem>> {
    match objects {
        Some(o) => o.next().await,
        None => std::future::pending().await,
    }
}

fn boxed<K: 'static, S>(
    kind: Kind,
    scope: Scope,
    s: S,
    wrap: fn(watcher::Event<K>) -> Event,
) -> BoxStream<'static, WatchItem>
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    s.map(move |r| WatchItem {
        scope: scope.clone(),
        result: r.map(wrap).map_err(|e| (kind, e)),
    })
    .boxed()
}

/// The Namespace (metadata: labels) and Node watchers, merged; each backs off on errors (client-go's
/// schedule) and relists.
pub(super) fn watch_cluster_scoped(client: Client, timeout: u32) -> Watches {
    let cfg = || kube_watch::config(timeout);
    futures::stream::select_all([
        boxed(
            Kind::Namespace,
            None,
            kube_watch::watch(Api::<PartialObjectMeta<Namespace>>::all(client.clone()), cfg()),
            Event::Namespace,
        ),
        boxed(
            Kind::Node,
            None,
            kube_watch::watch(Api::<PartialObjectMeta<Node>>::all(client), cfg()),
            Event::Node,
        ),
    ])
}

fn api<K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>>(
    client: &Client,
    scope: &Scope,
) -> Api<K> {
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The Service, EndpointSlice and Pod watchers of each scope, merged.
pub(super) fn watch_namespaced(client: &Client, timeout: u32, scopes: &[Scope]) -> Watches {
    let cfg = || kube_watch::config(timeout);
    let mut streams = Vec::with_capacity(3 * scopes.len());
    for scope in scopes {
        streams.push(boxed(
            Kind::Service,
            scope.clone(),
            kube_watch::watch(api::<Service>(client, scope), cfg()),
            |e| Event::Service(Box::new(e)),
        ));
        streams.push(boxed(
            Kind::Slice,
            scope.clone(),
            kube_watch::watch(api::<EndpointSlice>(client, scope), cfg()),
            |e| Event::Slice(Box::new(e)),
        ));
        streams.push(boxed(
            Kind::Pod,
            scope.clone(),
            kube_watch::watch(api::<Pod>(client, scope), cfg().fields("status.phase!=Failed")),
            |e| Event::Pod(Box::new(e)),
        ));
    }
    futures::stream::select_all(streams)
}

/// Per kind, the scopes whose watch has not finished its first list since the watches (re)started: a
/// kind is listed once every scope has, however often one of them relists meanwhile.
#[derive(Default)]
pub(super) struct FirstLists {
    pending: [Vec<Scope>; KINDS],
}

impl FirstLists {
    /// The watches of `kind` (re)started with `scopes`.
    pub(super) fn start(&mut self, kind: Kind, scopes: &[Scope]) {
        self.pending[kind as usize] = scopes.to_vec();
    }

    /// `scope`'s watch of `kind` finished a list; true when no scope of `kind` still owes its first.
    pub(super) fn done(&mut self, kind: Kind, scope: &Scope) -> bool {
        let pending = &mut self.pending[kind as usize];
        pending.retain(|s| s != scope);
        pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_listed_once_every_scope_has_listed_whatever_relists_come_between() {
        let (a, b): (Scope, Scope) = (Some("a".into()), Some("b".into()));
        let mut lists = FirstLists::default();
        // Cluster-scoped kinds have the one scope and nothing started: listed on their first list.
        assert!(lists.done(Kind::Namespace, &None));
        lists.start(Kind::Pod, &[a.clone(), b.clone()]);
        assert!(!lists.done(Kind::Pod, &a));
        assert!(
            !lists.done(Kind::Pod, &a),
            "a relist of `a` does not stand for `b`'s first list"
        );
        assert!(lists.done(Kind::Pod, &b));
        lists.start(Kind::Pod, std::slice::from_ref(&a));
        assert!(lists.done(Kind::Pod, &a));
    }
}
