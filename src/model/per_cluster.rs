//! A per-cluster map for the few clusters a service has addresses in: almost always one, so a sorted
//! `Vec` (one allocation of one entry) rather than a `BTreeMap` (a node of eleven per service).

use std::{borrow::Borrow, slice};

use serde::{Serialize, Serializer, ser::SerializeMap};

use super::ClusterId;

/// Values by cluster, sorted by cluster ID; serialized as the map it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerCluster<V>(Vec<(ClusterId, V)>);

impl<V> Default for PerCluster<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> PerCluster<V> {
    /// No cluster.
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q: Ord + ?Sized>(&self, cluster: &Q) -> Result<usize, usize>
    where
        ClusterId: Borrow<Q>,
    {
        self.0.binary_search_by(|(c, _)| c.borrow().cmp(cluster))
    }

    /// The value of `cluster`.
    pub fn get<Q: Ord + ?Sized>(&self, cluster: &Q) -> Option<&V>
    where
        ClusterId: Borrow<Q>,
    {
        self.find(cluster).ok().map(|i| &self.0[i].1)
    }

    /// Sets the value of `cluster`, returning the one it replaces.
    pub fn insert(&mut self, cluster: ClusterId, value: V) -> Option<V> {
        match self.find(&cluster) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (cluster, value));
                None
            }
        }
    }

    /// The value of `cluster`, made by `make` if it has none.
    pub fn get_or_insert_with(&mut self, cluster: &ClusterId, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(cluster) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (cluster.clone(), make()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Whether no cluster has a value.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many clusters have a value.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Clusters and values, by cluster.
    pub fn iter(&self) -> impl Iterator<Item = (&ClusterId, &V)> {
        self.into_iter()
    }

    /// Clusters, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &ClusterId> {
        self.0.iter().map(|(c, _)| c)
    }

    /// Values, by cluster.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<'a, V> IntoIterator for &'a PerCluster<V> {
    type Item = (&'a ClusterId, &'a V);
    type IntoIter = std::iter::Map<slice::Iter<'a, (ClusterId, V)>, fn(&'a (ClusterId, V)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(c, v)| (c, v))
    }
}

/// Later values of a cluster replace earlier ones, as in a map.
impl<V> FromIterator<(ClusterId, V)> for PerCluster<V> {
    fn from_iter<I: IntoIterator<Item = (ClusterId, V)>>(iter: I) -> Self {
        let mut out = Self::new();
        for (c, v) in iter {
            out.insert(c, v);
        }
        out.0.shrink_to_fit();
        out
    }
}

impl<V: Serialize> Serialize for PerCluster<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (c, v) in &self.0 {
            map.serialize_entry(c, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn behaves_and_serializes_like_a_btreemap() {
        let entries = [("c2", 2), ("c1", 1), ("c3", 3), ("c1", 10)];
        let mut ours = PerCluster::new();
        let mut map = BTreeMap::new();
        for (c, v) in entries {
            assert_eq!(ours.insert(c.into(), v), map.insert(ClusterId::from(c), v), "{c}");
        }
        assert_eq!(ours.iter().collect::<Vec<_>>(), map.iter().collect::<Vec<_>>());
        assert_eq!(ours.get("c1"), Some(&10));
        assert_eq!(ours.get("c4"), None);
        assert_eq!(ours.len(), 3);
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        let collected: PerCluster<i32> = entries.iter().map(|(c, v)| ((*c).into(), *v)).collect();
        assert_eq!(collected, ours);
        assert!(PerCluster::<i32>::default().is_empty());
    }
}
