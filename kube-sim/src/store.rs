//! The object store: per-kind ordered tables, one global resourceVersion, bounded watch history and event fan-out.
//!
//! All writes go through one short `parking_lot` write lock ([`Txn`]); watchers get events over a
//! bounded broadcast channel, so a slow watcher lags (and is closed) instead of blocking writers.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::broadcast;

use super::auth::Authority;
use super::crd::{self, Registry};
use super::delete;
use super::error::Error;
use super::kinds::{self, KINDS, KindId};
use super::object::{Key, Obj};
use super::persist::{self, Entry, EntryRef, Log, PersistError, Restored, frame::Writer};
use super::selector::Filter;
use super::typed::{FieldCheck, FieldValidation};
use super::write::{self, StatusMode, Track, WriteOpts};

/// Events a watcher may fall behind by before it is closed (the client then re-watches or relists).
const WATCH_BUFFER: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change; `prev` lets watchers with selectors see objects leave or enter, and lets
/// paginated lists rebuild the state at an older resourceVersion.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) kind: KindId,
    pub(crate) etype: EventType,
    pub(crate) obj: Arc<Obj>,
    pub(crate) prev: Option<Arc<Obj>>,
}

struct Inner {
    rv: u64,
    tables: Vec<BTreeMap<Key, Arc<Obj>>>,
    history: VecDeque<Arc<Event>>,
    /// History holds every event after this revision; older watches and continue tokens are expired.
    compacted: u64,
    /// Owner uid → the objects whose ownerReferences name it, for the garbage collector.
    dependents: HashMap<String, BTreeSet<(KindId, Key)>>,
    /// Where committed transactions are made durable, when the store is kept in a folder.
    log: Option<Log>,
    /// The running transaction's events, for the log.
    pending: Vec<Arc<Event>>,
}

/// The table of a kind that has none yet (a custom resource never written in this store).
static EMPTY: BTreeMap<Key, Arc<Obj>> = BTreeMap::new();

impl Inner {
    fn table(&self, kind: KindId) -> &BTreeMap<Key, Arc<Obj>> {
        self.tables.get(kind).unwrap_or(&EMPTY)
    }

    fn table_mut(&mut self, kind: KindId) -> &mut BTreeMap<Key, Arc<Obj>> {
        if kind >= self.tables.len() {
            self.tables.resize_with(kind + 1, BTreeMap::new);
        }
        &mut self.tables[kind]
    }

    /// Appends the finished transaction to the log (fsynced before the write is answered), and folds
    /// the log into a snapshot when it has grown or missed a write. A disk failure cannot undo a write
    /// clients already saw: it is logged, and the folder keeps its last complete state until a
    /// snapshot succeeds.
    fn persist(&mut self) {
        let events = std::mem::take(&mut self.pending);
        let Some(log) = self.log.as_mut() else {
            return;
        };
        if events.is_empty() {
            return;
        }
        let mut w = Writer::default();
        for e in &events {
            let Some(table) = persist::table_name(e.kind) else {
                continue;
            };
            let raw = (e.etype != EventType::Deleted).then_some(&e.obj.raw[..]);
            let entry = EntryRef {
                rv: e.rv,
                table: &table,
                key: &e.obj.key,
                raw,
            };
            persist::encode(&entry, &mut w);
        }
        if let Err(e) = log.append(&w.0) {
            tracing::error!(error = %e, "cannot append to the store's log; writing a snapshot instead");
        }
        if log.wants_snapshot()
            && let Err(e) = self.snapshot()
        {
            tracing::error!(error = %e, "cannot snapshot the store; its folder keeps its last complete state");
        }
    }

    /// Writes the whole store as the folder's snapshot; CRDs first, so that custom objects restore
    /// under the kinds their definitions make.
    fn snapshot(&mut self) -> Result<(), PersistError> {
        let Inner { log, tables, rv, .. } = self;
        let Some(log) = log.as_mut() else {
            return Ok(());
        };
        let names: Vec<Option<String>> = (0..tables.len()).map(persist::table_name).collect();
        let definitions = crd::definition_id();
        let order = std::iter::once(definitions).chain((0..tables.len()).filter(|k| *k != definitions));
        let mut objects = Vec::new();
        for kind in order {
            let (Some(table), Some(Some(name))) = (tables.get(kind), names.get(kind)) else {
                continue;
            };
            objects.extend(table.values().map(|o| EntryRef {
                rv: o.rv,
                table: name,
                key: &o.key,
                raw: Some(&o.raw[..]),
            }));
        }
        log.snapshot(*rv, &objects)
    }

    fn index_owners(&mut self, kind: KindId, obj: &Obj, add: bool) {
        for owner in &obj.owners {
            let entry = (kind, obj.key.clone());
            if add {
                self.dependents.entry(owner.clone()).or_default().insert(entry);
            } else if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(&entry);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
    }
}

/// The simulated cluster's state (etcd plus the few controllers clients rely on).
pub struct Store {
    inner: RwLock<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    history_limit: usize,
    pub(crate) authority: Arc<Authority>,
    /// The served kinds; replaced (under the write lock) whenever a CRD is written.
    kinds: ArcSwap<Registry>,
}

/// The write side of one locked transaction; controllers use it to make follow-up writes atomically.
pub(crate) struct Txn<'a> {
    inner: &'a mut Inner,
    store: &'a Store,
}

impl Txn<'_> {
    pub(crate) fn store(&self) -> &Store {
        self.store
    }

    pub(crate) fn get(&self, kind: KindId, key: &Key) -> Option<&Arc<Obj>> {
        self.inner.table(kind).get(key)
    }

    pub(crate) fn next_rv(&self) -> u64 {
        self.inner.rv + 1
    }

    /// Every stored object of `kind`, all namespaces.
    pub(crate) fn objects(&self, kind: KindId) -> impl Iterator<Item = &Arc<Obj>> {
        self.inner.table(kind).values()
    }

    /// The stored objects of `kind` in one namespace, in name order.
    pub(crate) fn in_namespace<'s>(
        &'s self,
        kind: KindId,
        namespace: &'s str,
    ) -> impl Iterator<Item = &'s Arc<Obj>> + 's {
        range(self.inner.table(kind), Some(namespace), None).map(|(_, o)| o)
    }

    /// The objects whose ownerReferences name `owner_uid`.
    pub(crate) fn dependents(&self, owner_uid: &str) -> Vec<(KindId, Key)> {
        self.inner
            .dependents
            .get(owner_uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any object of `kind` is stored in `namespace`.
    pub(crate) fn any_in(&self, kind: KindId, namespace: &str) -> bool {
        range(self.inner.table(kind), Some(namespace), None)
            .next()
            .is_some()
    }

    pub(crate) fn keys(&self, kind: KindId, namespace: &str) -> Vec<Key> {
        range(self.inner.table(kind), Some(namespace), None)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Stores a fully prepared object under the next resourceVersion and emits ADDED or MODIFIED.
    pub(crate) fn put(&mut self, kind: KindId, mut value: Value) -> Result<Arc<Obj>, Error> {
        let rv = self.inner.rv + 1;
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let obj = Arc::new(Obj::freeze(self.kind_of_table(kind), &value)?);
        let prev = self.inner.table_mut(kind).insert(obj.key.clone(), obj.clone());
        if let Some(p) = &prev {
            self.inner.index_owners(kind, p, false);
        }
        self.inner.index_owners(kind, &obj, true);
        let etype = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(Event {
            rv,
            kind,
            etype,
            obj: obj.clone(),
            prev,
        });
        self.definitions_changed(kind);
        Ok(obj)
    }

    /// The kind a table's objects are frozen with: the built-in kind, or a custom table's storage version
    /// (any of its kinds extracts the same fields).
    fn kind_of_table(&self, kind: KindId) -> &'static kinds::Kind {
        if kind < KINDS.len() {
            return kinds::by_id(kind);
        }
        let reg = self.store.kinds.load();
        reg.custom()
            .find(|k| k.id() == kind)
            .unwrap_or(crd::definition_kind())
    }

    /// A CRD write changes what is served: the registry is rebuilt from the stored definitions.
    fn definitions_changed(&mut self, kind: KindId) {
        if kind == crd::definition_id() {
            let crds: Vec<Value> = self.objects(kind).map(|o| o.value()).collect();
            self.store.kinds.store(Arc::new(Registry::build(crds.iter())));
        }
    }

    /// The served kinds as of this transaction.
    pub(crate) fn kinds(&self) -> Arc<Registry> {
        self.store.kinds.load_full()
    }

    /// Removes an object and emits DELETED carrying its last state at the deletion's resourceVersion.
    pub(crate) fn remove(&mut self, kind: KindId, key: &Key) -> Result<Option<Arc<Obj>>, Error> {
        let Some(prev) = self.inner.table_mut(kind).remove(key) else {
            return Ok(None);
        };
        self.inner.index_owners(kind, &prev, false);
        let rv = self.inner.rv + 1;
        let mut last = prev.value();
        last["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let obj = Arc::new(Obj::freeze(self.kind_of_table(kind), &last)?);
        self.record(Event {
            rv,
            kind,
            etype: EventType::Deleted,
            obj: obj.clone(),
            prev: Some(prev),
        });
        self.definitions_changed(kind);
        Ok(Some(obj))
    }

    /// Puts back one persisted change at its own revision, without events (nobody watches yet).
    fn restore(&mut self, entry: Entry) -> Result<(), Error> {
        let unreadable = |why: String| {
            let (ns, name) = &entry.key;
            PersistError::Unreadable(format!(
                "{} {ns}/{name} at revision {}: {why}",
                entry.table, entry.rv
            ))
        };
        let kind = persist::table_id(&entry.table).ok_or_else(|| unreadable("an unknown kind".into()))?;
        let obj = match &entry.raw {
            Some(raw) => {
                let value: Value = serde_json::from_slice(raw).map_err(|e| unreadable(e.to_string()))?;
                let obj =
                    Obj::freeze(self.kind_of_table(kind), &value).map_err(|e| unreadable(e.to_string()))?;
                Some(Arc::new(obj))
            }
            None => None,
        };
        // As `put` and `remove` do: the replaced version leaves the owner index before the new one enters.
        if let Some(prev) = self.inner.table_mut(kind).remove(&entry.key) {
            self.inner.index_owners(kind, &prev, false);
        }
        if let Some(obj) = obj {
            self.inner.index_owners(kind, &obj, true);
            self.inner.table_mut(kind).insert(obj.key.clone(), obj);
        }
        self.inner.rv = self.inner.rv.max(entry.rv);
        self.definitions_changed(kind);
        Ok(())
    }

    fn record(&mut self, event: Event) {
        let event = Arc::new(event);
        if self.inner.log.is_some() {
            self.inner.pending.push(event.clone());
        }
        self.inner.rv = event.rv;
        self.inner.history.push_back(event.clone());
        while self.inner.history.len() > self.store.history_limit {
            if let Some(old) = self.inner.history.pop_front() {
                self.inner.compacted = old.rv;
            }
        }
        // No receivers is fine; lagging receivers notice on their next recv.
        let _ = self.store.events.send(event);
    }
}

/// One page of a list, as of `rv`.
pub(crate) struct Page {
    pub(crate) items: Vec<Arc<Obj>>,
    pub(crate) rv: u64,
    /// Set when more matching objects follow the last item.
    pub(crate) next: Option<Key>,
    /// How many objects follow this page, when known (no label or field selector).
    pub(crate) remaining: Option<u64>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchFrom {
    /// Synthetic ADDED events for the current state, then live events.
    Snapshot,
    /// Replay kept history after this revision, then live events.
    After(u64),
}

pub(crate) struct WatchStart {
    pub(crate) initial: Vec<Arc<Obj>>,
    pub(crate) replay: Vec<Arc<Event>>,
    pub(crate) rv: u64,
    pub(crate) rx: broadcast::Receiver<Arc<Event>>,
}

impl Store {
    /// An in-memory store with a new cluster's objects.
    pub(crate) fn new(history_limit: usize, authority: Arc<Authority>) -> Result<Store, Error> {
        let store = Store::empty(history_limit, authority);
        store.bootstrap()?;
        Ok(store)
    }

    /// A store kept in `opened`'s folder: restored from it, or (an empty folder) given a new cluster's
    /// objects and snapshotted. Revisions continue after the restored one; watches and continue tokens
    /// from before are expired (410), as after a real API server's restart.
    pub(crate) fn open(
        history_limit: usize,
        authority: Arc<Authority>,
        opened: persist::Opened,
    ) -> Result<(Store, Option<Restored>), Error> {
        let store = Store::empty(history_limit, authority);
        let persist::Opened {
            log,
            entries,
            truncated,
        } = opened;
        let restored = if entries.is_empty() {
            store.bootstrap()?;
            None
        } else {
            store.write(|txn| entries.into_iter().try_for_each(|e| txn.restore(e)))?;
            let mut inner = store.inner.write();
            inner.compacted = inner.rv;
            Some(Restored {
                objects: inner.tables.iter().map(BTreeMap::len).sum(),
                revision: inner.rv,
                truncated,
            })
        };
        let mut inner = store.inner.write();
        inner.log = Some(log);
        if restored.is_none() {
            inner.snapshot()?;
        }
        drop(inner);
        Ok((store, restored))
    }

    fn empty(history_limit: usize, authority: Arc<Authority>) -> Store {
        Store {
            inner: RwLock::new(Inner {
                rv: 0,
                tables: KINDS.iter().map(|_| BTreeMap::new()).collect(),
                history: VecDeque::new(),
                compacted: 0,
                dependents: HashMap::new(),
                log: None,
                pending: Vec::new(),
            }),
            events: broadcast::channel(WATCH_BUFFER).0,
            history_limit: history_limit.max(1),
            authority,
            kinds: ArcSwap::from_pointee(Registry::default()),
        }
    }

    /// A new cluster's objects: the system namespaces, bootstrap RBAC, the `kubernetes` Service.
    fn bootstrap(&self) -> Result<(), Error> {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            self.apply(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        super::controllers::bootstrap_rbac(self)?;
        for obj in super::controllers::apiserver_service::objects() {
            self.apply(obj)?;
        }
        Ok(())
    }

    /// Runs `f` as one atomic write transaction.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T, Error>) -> Result<T, Error> {
        let mut inner = self.inner.write();
        let result = f(&mut Txn {
            inner: &mut inner,
            store: self,
        });
        // Whatever the transaction committed before any error is kept, in memory and on disk alike.
        inner.persist();
        result
    }

    pub(crate) fn get_obj(&self, kind: KindId, key: &Key) -> Option<Arc<Obj>> {
        self.inner.read().table(kind).get(key).cloned()
    }

    /// The served kinds: the built-in table plus the established CRDs' versions.
    pub(crate) fn kinds(&self) -> Arc<Registry> {
        self.kinds.load_full()
    }

    /// Up to `limit` matching objects after `after`, as of revision `at` (default: now).
    ///
    /// An older revision is rebuilt by undoing the kept history newer than it, so pages of one list are
    /// a consistent snapshot; a revision older than the kept history is `Expired`.
    pub(crate) fn list_page(
        &self,
        kind: KindId,
        filter: &Filter,
        after: Option<&Key>,
        limit: Option<usize>,
        at: Option<u64>,
    ) -> Result<Page, Error> {
        self.page(kind, filter, after, limit, at, false)
    }

    /// [`Store::list_page`], also counting the objects after a full page when no selector narrows the list
    /// (O(objects): clients carry the count forward in the `continue` token).
    pub(crate) fn list_page_counted(
        &self,
        kind: KindId,
        filter: &Filter,
        after: Option<&Key>,
        limit: Option<usize>,
        at: Option<u64>,
    ) -> Result<Page, Error> {
        self.page(kind, filter, after, limit, at, filter.is_unselective())
    }

    fn page(
        &self,
        kind: KindId,
        filter: &Filter,
        after: Option<&Key>,
        limit: Option<usize>,
        at: Option<u64>,
        count: bool,
    ) -> Result<Page, Error> {
        let inner = self.inner.read();
        let at = at.unwrap_or(inner.rv).min(inner.rv);
        if at < inner.compacted {
            return Err(Error::Expired {
                message: format!("too old resource version: {at} ({})", inner.compacted),
                fresh_continue: None,
            });
        }
        // State before the first event after `at`, per key touched since.
        let mut undo: BTreeMap<Key, Option<Arc<Obj>>> = BTreeMap::new();
        for ev in inner
            .history
            .iter()
            .rev()
            .take_while(|e| e.rv > at)
            .filter(|e| e.kind == kind)
        {
            undo.insert(ev.obj.key.clone(), ev.prev.clone());
        }
        let ns = filter.namespace.as_deref();
        let mut current = range(inner.table(kind), ns, after).peekable();
        let mut undone = range(&undo, ns, after).peekable();
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut page = Page {
            items: Vec::new(),
            rv: at,
            next: None,
            remaining: None,
        };
        loop {
            // Merge the two key-ordered streams; an undo entry overrides the current object.
            let obj = match (current.peek(), undone.peek()) {
                (None, None) => break,
                (Some((ck, _)), Some((uk, _))) if ck < uk => current.next().map(|(_, o)| Some(o)),
                (Some(_), None) => current.next().map(|(_, o)| Some(o)),
                (Some((ck, _)), Some((uk, _))) if ck == uk => {
                    current.next();
                    undone.next().map(|(_, o)| o.as_ref())
                }
                (_, Some(_)) => undone.next().map(|(_, o)| o.as_ref()),
            };
            let Some(Some(obj)) = obj else { continue };
            if !filter.matches(obj) {
                continue;
            }
            if page.items.len() == limit {
                page.next = page.items.last().map(|o| o.key.clone());
                if count {
                    // This object plus the rest of both streams (undo entries replace current ones).
                    let rest = if undo.is_empty() {
                        current.count()
                    } else {
                        let mut seen: BTreeMap<&Key, bool> = current.map(|(k, _)| (k, true)).collect();
                        for (k, o) in undone {
                            seen.insert(k, o.is_some());
                        }
                        seen.values().filter(|v| **v).count()
                    };
                    page.remaining = Some(1 + rest as u64);
                }
                break;
            }
            page.items.push(obj.clone());
        }
        Ok(page)
    }

    /// Starts a watch atomically with respect to writes: no event is missed or seen twice.
    pub(crate) fn watch(&self, kind: KindId, filter: &Filter, from: WatchFrom) -> Result<WatchStart, Error> {
        let inner = self.inner.read();
        let rx = self.events.subscribe();
        let (initial, replay) = match from {
            WatchFrom::Snapshot => {
                let ns = filter.namespace.as_deref();
                let initial = range(inner.table(kind), ns, None)
                    .filter(|(_, o)| filter.matches(o))
                    .map(|(_, o)| o.clone())
                    .collect();
                (initial, Vec::new())
            }
            WatchFrom::After(rv) if rv < inner.compacted => {
                return Err(Error::Expired {
                    message: format!("too old resource version: {rv} ({})", inner.compacted),
                    fresh_continue: None,
                });
            }
            WatchFrom::After(rv) => {
                let start = inner.history.partition_point(|e| e.rv <= rv);
                (
                    Vec::new(),
                    inner
                        .history
                        .range(start..)
                        .filter(|e| e.kind == kind)
                        .cloned()
                        .collect(),
                )
            }
        };
        Ok(WatchStart {
            initial,
            replay,
            rv: inner.rv,
            rx,
        })
    }

    /// Drops all kept history: a watch or continue token from an older revision gets 410 Expired.
    pub fn compact(&self) {
        let mut inner = self.inner.write();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// Snapshots the store into its folder now.
    #[cfg(test)]
    pub(crate) fn snapshot_now(&self) -> Result<(), PersistError> {
        self.inner.write().snapshot()
    }

    /// The current global resourceVersion (etcd's revision).
    pub fn revision(&self) -> u64 {
        self.inner.read().rv
    }

    /// Number of stored objects across all kinds.
    pub fn len(&self) -> usize {
        self.inner.read().tables.iter().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Create-or-replace by apiVersion/kind/namespace/name, as manifest loading needs: server-set metadata is
    /// filled, `status` is kept as given, a missing namespace is created implicitly, and watchers see the change.
    pub fn apply(&self, obj: Value) -> Result<Value, Error> {
        let kind = self.kind_of(&obj)?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        // Manifests are held to kubectl's default: an unknown field is an error, not silently dropped.
        let opts = WriteOpts {
            dry_run: false,
            status: StatusMode::Keep,
            track: Track::None,
            fields: FieldCheck::new(FieldValidation::Strict),
        };
        let stored = write::apply(self, kind, &ns, obj, &opts)?;
        Ok(stored.value())
    }

    /// The stored object, if any (`namespace` is ignored for cluster-scoped kinds); a custom object under
    /// the version asked for.
    pub fn get(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let k = self.kinds().by_type(api_version, kind)?;
        let ns = if k.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        let mut v = self.get_obj(k.id(), &(ns.to_string(), name.to_string()))?.value();
        crd::as_version(k, &mut v);
        Some(v)
    }

    /// All stored objects of a kind, optionally in one namespace, in (namespace, name) order.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let Some(k) = self.kinds().by_type(api_version, kind) else {
            return Vec::new();
        };
        let filter = Filter {
            namespace: namespace.map(str::to_string),
            ..Filter::default()
        };
        let page = self.list_page(k.id(), &filter, None, None, None);
        let value = |o: &Arc<Obj>| {
            let mut v = o.value();
            crd::as_version(k, &mut v);
            v
        };
        page.map(|p| p.items.iter().map(value).collect())
            .unwrap_or_default()
    }

    /// Deletes an object as the API does (finalizers, garbage collection, namespace termination) and returns
    /// its last state, or its marked state when finalizers keep it.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, Error> {
        let k = self.kinds().by_type(api_version, kind).ok_or_else(|| {
            Error::BadRequest(format!(
                "no kind {kind:?} is registered for version {api_version:?}"
            ))
        })?;
        let ns = if k.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        let key = (ns.to_string(), name.to_string());
        delete::delete(self, k, &key, &delete::DeleteOpts::default()).map(|o| o.obj().value())
    }

    fn kind_of(&self, obj: &Value) -> Result<&'static kinds::Kind, Error> {
        let (av, kind) = (
            obj["apiVersion"].as_str().unwrap_or(""),
            obj["kind"].as_str().unwrap_or(""),
        );
        self.kinds()
            .by_type(av, kind)
            .ok_or_else(|| Error::BadRequest(format!("no kind {kind:?} is registered for version {av:?}")))
    }
}

/// Entries of a (namespace, name)-keyed map in key order, limited to a namespace and starting after a key.
pub(crate) fn range<'a, V>(
    map: &'a BTreeMap<Key, V>,
    namespace: Option<&'a str>,
    after: Option<&Key>,
) -> impl Iterator<Item = (&'a Key, &'a V)> + 'a {
    let ns_start = namespace.map(|ns| (ns.to_string(), String::new()));
    let lower = match (after, ns_start) {
        (Some(a), Some(s)) if *a >= s => Bound::Excluded(a.clone()),
        (Some(a), None) => Bound::Excluded(a.clone()),
        (_, Some(s)) => Bound::Included(s),
        (None, None) => Bound::Unbounded,
    };
    map.range((lower, Bound::Unbounded))
        .take_while(move |(k, _)| namespace.is_none_or(|ns| k.0 == ns))
}
