//! What one client holds: per type, the resources last sent to it.
//!
//! Owns: the one record both a stream's protocol state machine (which compares versions against it)
//! and `/debug/config_dump` (which shows it) read. It keeps references to the shared encoded
//! resources, sorted by name: 8 bytes a resource, where a name → version map plus a separate debug map
//! took ≈ 85 bytes (170 KiB for a sidecar watching 2,000 resources, 1,000 sidecars 166 MiB). Does NOT:
//! decide what to send (see [`super::sotw`], [`super::delta`]).

use std::{collections::BTreeMap, sync::Arc};

use parking_lot::{Mutex, MutexGuard};

use super::{Resource, XdsType};

/// A stream's record, shared between its task (the only writer) and debug readers. The lock is taken
/// once per response and by a debug read to copy out `Arc`s; never across `.await`.
#[derive(Debug, Clone, Default)]
pub struct Held(Arc<Mutex<BTreeMap<XdsType, Holding>>>);

impl Held {
    /// Write access to the record (the stream).
    pub(crate) fn lock(&self) -> MutexGuard<'_, BTreeMap<XdsType, Holding>> {
        self.0.lock()
    }

    /// A copy of what is held, per type.
    pub fn snapshot(&self) -> BTreeMap<XdsType, Vec<Arc<Resource>>> {
        let all = self.0.lock();
        all.iter().map(|(ty, h)| (*ty, h.0.clone())).collect()
    }
}

/// The resources of one type a client holds, sorted by name, one per name.
#[derive(Debug, Default)]
pub(crate) struct Holding(Vec<Arc<Resource>>);

/// Above this many updates at once, append and sort instead of inserting one by one.
const BULK: usize = 16;

impl Holding {
    /// The version of `name` the client holds.
    pub(crate) fn version(&self, name: &str) -> Option<u64> {
        self.find(name).ok().map(|i| self.0[i].version)
    }

    /// How many resources the client holds.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Every held name.
    pub(crate) fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.0.iter().map(|r| &r.name)
    }

    /// The client now holds exactly `resources`.
    pub(crate) fn replace<'a>(&mut self, resources: impl IntoIterator<Item = &'a Arc<Resource>>) {
        self.0.clear();
        self.insert(resources);
    }

    /// The client now also holds `resources` (replacing what it had under the same names).
    pub(crate) fn insert<'a>(&mut self, resources: impl IntoIterator<Item = &'a Arc<Resource>>) {
        let resources: Vec<&Arc<Resource>> = resources.into_iter().collect();
        if resources.len() <= BULK {
            for r in resources {
                match self.find(&r.name) {
                    Ok(i) => self.0[i] = r.clone(),
                    Err(i) => self.0.insert(i, r.clone()),
                }
            }
            return;
        }
        // Newer entries after older ones, so that de-duplication (which keeps the first of equal
        // names after a stable sort in reverse) keeps the newest.
        self.0.extend(resources.into_iter().cloned());
        self.0.reverse();
        self.0.sort_by(|a, b| a.name.cmp(&b.name));
        self.0.dedup_by(|later, earlier| later.name == earlier.name);
        self.shrink();
    }

    /// The client no longer holds `name`.
    pub(crate) fn remove(&mut self, name: &str) {
        if let Ok(i) = self.find(name) {
            self.0.remove(i);
        }
    }

    /// Keeps only the names `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|r| keep(&r.name));
        self.shrink();
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|r| (*r.name).cmp(name))
    }

    /// Gives back what a shrunken set no longer needs (a sidecar's set stays about the same size, so
    /// this rarely triggers).
    fn shrink(&mut self) {
        if self.0.capacity() > 2 * self.0.len() + BULK {
            self.0.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(name: &str, version: u64) -> Arc<Resource> {
        Resource::empty(XdsType::Endpoint, name, version)
    }

    fn held(h: &Holding) -> Vec<(&str, u64)> {
        h.0.iter().map(|r| (&*r.name, r.version)).collect()
    }

    #[test]
    fn few_and_many_updates_keep_one_newest_entry_per_name_in_order() {
        for n in [3, 40] {
            let mut h = Holding::default();
            let first: Vec<_> = (0..n).rev().map(|i| res(&format!("r{i:02}"), 1)).collect();
            h.insert(&first);
            assert_eq!(h.len(), n, "{n} distinct names");
            // Every name again, plus duplicates within one update: the last one wins.
            let mut again: Vec<_> = (0..n).map(|i| res(&format!("r{i:02}"), 2)).collect();
            again.push(res("r00", 3));
            h.insert(&again);
            let got = held(&h);
            assert_eq!(got.len(), n);
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "sorted, unique");
            assert_eq!(h.version("r00"), Some(3), "newest of duplicates ({n})");
            assert_eq!(h.version("r01"), Some(2));
            assert_eq!(h.version("zz"), None);
        }
    }

    #[test]
    fn replace_remove_and_retain() {
        let mut h = Holding::default();
        h.insert(&[res("b", 1), res("a", 1), res("c", 1)]);
        h.remove("b");
        h.remove("missing");
        assert_eq!(held(&h), [("a", 1), ("c", 1)]);
        h.retain(|n| n != "a");
        assert_eq!(held(&h), [("c", 1)]);
        h.replace(&[res("d", 4)]);
        assert_eq!(held(&h), [("d", 4)]);
        assert_eq!((h.version("d"), h.version("c")), (Some(4), None));
        assert_eq!(h.names().map(|n| &**n).collect::<Vec<_>>(), ["d"]);
    }

    #[test]
    fn debug_readers_see_what_the_stream_recorded() {
        let held = Held::default();
        held.lock()
            .entry(XdsType::Endpoint)
            .or_default()
            .insert(&[res("a", 1)]);
        let snap = held.snapshot();
        assert_eq!(snap[&XdsType::Endpoint].len(), 1);
        assert_eq!(&*snap[&XdsType::Endpoint][0].name, "a");
    }
}
