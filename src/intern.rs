//! Hash-consing: equal values share one `Arc`, so state repeated across thousands of owners is stored
//! once: the labels and identity of a deployment's replicas, namespace and node names named by every
//! pod, the names 1,000 sidecars subscribe to and their identical subscription sets.
//!
//! Entries no one else holds are swept whenever the table has doubled since the last sweep
//! (amortised O(1) per insert), so a value costs memory only while some owner holds it.

use std::{borrow::Borrow, collections::HashSet, hash::Hash, sync::Arc};

/// A table is never swept below this size.
const MIN_SWEEP: usize = 64;

/// A table of shared values.
pub struct Interner<T: ?Sized> {
    values: HashSet<Arc<T>, foldhash::fast::RandomState>,
    /// Size after the last sweep.
    live: usize,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Self {
            values: HashSet::default(),
            live: 0,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interner<T> {
    /// The shared value equal to `key`, made by `make` if there is none.
    pub fn get_or_insert<Q>(&mut self, key: &Q, make: impl FnOnce(&Q) -> Arc<T>) -> Arc<T>
    where
        Arc<T>: Borrow<Q>,
        Q: ?Sized + Eq + Hash,
    {
        if let Some(v) = self.values.get(key) {
            return v.clone();
        }
        if self.values.len() >= 2 * self.live.max(MIN_SWEEP) {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.live = self.values.len();
        }
        let v = make(key);
        self.values.insert(v.clone());
        v
    }

    /// The shared copy of `value`: the one already held if equal, else `value`, which is then held.
    pub fn intern(&mut self, value: Arc<T>) -> Arc<T> {
        self.get_or_insert(&*value, |_| value.clone())
    }

    /// How many values the table holds (swept or not).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_are_shared_and_unused_ones_swept() {
        let mut i = Interner::<str>::default();
        let a = i.get_or_insert("a", |n: &str| Arc::from(n));
        assert!(Arc::ptr_eq(&a, &i.get_or_insert("a", |n: &str| Arc::from(n))));
        // Twice the smallest sweep size, all but `a` dropped at once.
        for n in 1..2 * MIN_SWEEP {
            i.get_or_insert(&*n.to_string(), |n: &str| Arc::from(n));
        }
        i.get_or_insert("trigger", |n: &str| Arc::from(n));
        assert_eq!(i.len(), 2, "only the held value and the new one survive a sweep");
        assert!(Arc::ptr_eq(&a, &i.get_or_insert("a", |n: &str| Arc::from(n))));
    }

    #[test]
    fn owned_values_are_shared_by_content() {
        use std::collections::BTreeMap;
        let mut labels = Interner::<BTreeMap<String, String>>::default();
        let map = || Arc::new(BTreeMap::from([("app".to_owned(), "reviews".to_owned())]));
        let a = labels.intern(map());
        assert!(Arc::ptr_eq(&a, &labels.intern(map())));
        let dropped = Arc::downgrade(&labels.intern(Arc::new(BTreeMap::new())));
        for n in 0..2 * MIN_SWEEP {
            labels.intern(Arc::new(BTreeMap::from([(n.to_string(), String::new())])));
        }
        assert!(
            dropped.upgrade().is_none(),
            "a value only the table held is forgotten"
        );
        assert!(Arc::ptr_eq(&a, &labels.intern(map())), "a held one stays shared");
    }

    #[test]
    fn sized_values_are_shared_by_content() {
        let mut i = Interner::<Vec<u8>>::default();
        let a = i.get_or_insert(&vec![1, 2], |v| Arc::new(v.clone()));
        let b = i.get_or_insert(&vec![1, 2], |_| unreachable!("already interned"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(
            &a,
            &i.get_or_insert(&vec![3], |v| Arc::new(v.clone()))
        ));
    }
}
