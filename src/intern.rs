//! Hash-consing: equal values share one `Arc`, so state repeated across thousands of owners (the
//! names 1,000 sidecars subscribe to, their identical subscription sets) is stored once.
//!
//! Entries no one else holds are swept whenever the table has doubled since the last sweep
//! (amortised O(1) per insert), so a value costs memory only while some owner holds it.

use std::{borrow::Borrow, collections::HashSet, hash::Hash, sync::Arc};

/// Smallest table size that triggers a sweep.
const MIN_SWEEP: usize = 1024;

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
        // 2,048 values (the first sweep is at 2 × 1,024), all but `a` dropped at once.
        for n in 1..2048 {
            i.get_or_insert(&*n.to_string(), |n: &str| Arc::from(n));
        }
        i.get_or_insert("trigger", |n: &str| Arc::from(n));
        assert_eq!(i.len(), 2, "only the held value and the new one survive a sweep");
        assert!(Arc::ptr_eq(&a, &i.get_or_insert("a", |n: &str| Arc::from(n))));
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
