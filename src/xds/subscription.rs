//! What a stream subscribed to, with the names interned: shared by both protocol state machines.

use std::{
    collections::BTreeSet,
    sync::{Arc, LazyLock},
};

use parking_lot::Mutex;

use crate::intern::Interner;

/// Resource names as clients send them, shared by every stream that names them: 1,000 sidecars watching
/// the same 1,000 clusters hold one copy of each name (and so do the cache keys and resources built
/// for them), not 1,000.
pub(crate) fn intern(name: &str) -> Arc<str> {
    static NAMES: LazyLock<Mutex<Interner<str>>> = LazyLock::new(Mutex::default);
    NAMES.lock().get_or_insert(name, |n: &str| Arc::from(n))
}

/// A set of subscribed names, shared by every stream subscribed to exactly that set: sidecars of one
/// mesh without a `Sidecar` scope all watch the same clusters.
pub(crate) fn intern_names(names: &BTreeSet<Arc<str>>) -> Arc<BTreeSet<Arc<str>>> {
    static SETS: LazyLock<Mutex<Interner<BTreeSet<Arc<str>>>>> = LazyLock::new(Mutex::default);
    SETS.lock().get_or_insert(names, |n| Arc::new(n.clone()))
}

/// What a stream subscribed to for one type.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Subscription {
    /// Every resource of the type (LDS/CDS `*` or the legacy empty first request).
    pub wildcard: bool,
    /// Names asked for explicitly (may include names that do not exist yet). Shared: debug status
    /// and every response build take it by `Arc`; only a subscription change copies it.
    pub names: Arc<BTreeSet<Arc<str>>>,
}

impl Subscription {
    /// The wildcard name.
    pub(crate) const WILDCARD: &'static str = "*";

    /// Whether nothing at all is subscribed.
    pub fn is_empty(&self) -> bool {
        !self.wildcard && self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_subscriptions_share_one_set() {
        let set = |names: &[&str]| names.iter().map(|n| intern(n)).collect::<BTreeSet<_>>();
        let a = intern_names(&set(&["x", "y"]));
        assert!(Arc::ptr_eq(&a, &intern_names(&set(&["y", "x"]))));
        assert!(!Arc::ptr_eq(&a, &intern_names(&set(&["x"]))));
    }
}
