//! Sharing equal values: a registry keeps one copy of what many objects repeat (the replicas of a
//! deployment have identical labels and identity; a namespace or node name is named by thousands of
//! pods) instead of one per object.

use std::{collections::HashSet, hash::Hash, sync::Arc};

/// A table is never swept below this size.
const MIN_SWEEP: usize = 64;

/// A table of shared values. Values only the table still holds are forgotten whenever it has doubled
/// since the last sweep (amortised O(1) per call), so it costs memory only for values in use.
#[derive(Debug)]
pub struct Interner<T: ?Sized> {
    values: HashSet<Arc<T>, foldhash::fast::RandomState>,
    /// Size after the last sweep.
    swept: usize,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Self {
            values: HashSet::default(),
            swept: 0,
        }
    }
}

impl<T: ?Sized + Eq + Hash> Interner<T> {
    /// The shared copy of `value`: the one already held if equal, else `value`, which is then held.
    pub fn intern(&mut self, value: Arc<T>) -> Arc<T> {
        if let Some(held) = self.values.get(&*value) {
            return held.clone();
        }
        if self.values.len() >= (2 * self.swept).max(MIN_SWEEP) {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.swept = self.values.len();
        }
        self.values.insert(value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn equal_values_share_one_allocation() {
        let mut strings = Interner::<str>::default();
        let a = strings.intern("ns".into());
        assert!(Arc::ptr_eq(&a, &strings.intern("ns".into())));
        assert!(!Arc::ptr_eq(&a, &strings.intern("other".into())));

        let mut labels = Interner::<BTreeMap<String, String>>::default();
        let map = || Arc::new(BTreeMap::from([("app".to_owned(), "reviews".to_owned())]));
        assert!(Arc::ptr_eq(&labels.intern(map()), &labels.intern(map())));
    }

    #[test]
    fn values_nobody_holds_are_forgotten() {
        let mut strings = Interner::<str>::default();
        let kept = strings.intern("kept".into());
        let dropped = Arc::downgrade(&strings.intern("dropped".into()));
        // Fill the table to its first sweep; every value but `kept` is held by the table alone.
        for n in 0..MIN_SWEEP {
            strings.intern(n.to_string().into());
        }
        assert!(dropped.upgrade().is_none(), "swept");
        assert!(Arc::ptr_eq(&kept, &strings.intern("kept".into())), "still shared");
        assert!(strings.values.len() <= 3, "{} left", strings.values.len());
    }
}
