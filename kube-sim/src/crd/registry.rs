//! The kinds one store serves: the built-in table plus the served versions of its established CRDs.
//! The store's single writer rebuilds it whenever a CRD is written; readers load an `Arc` snapshot.

use serde_json::Value;

use super::kinds_of;
use crate::kinds::{self, KINDS, Kind};

/// A snapshot of the served kinds. Lookups try the static table first, so built-in kinds cost what
/// they did before CRDs existed.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Custom kinds, by group, then version priority (v1 before v1beta1 before v1alpha3), then plural.
    custom: Vec<&'static Kind>,
}

/// kube's version priority: GA, then beta, then alpha, higher numbers first; others last by name.
fn version_rank(v: &str) -> (u8, i64, i64, String) {
    let parse = |rest: &str| -> Option<(u8, i64, i64)> {
        let (major, tail) = rest.split_at(rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len()));
        let major: i64 = major.parse().ok()?;
        if tail.is_empty() {
            return Some((0, -major, 0));
        }
        for (level, prefix) in [(1u8, "beta"), (2, "alpha")] {
            if let Some(n) = tail.strip_prefix(prefix) {
                return Some((level, -major, -n.parse::<i64>().ok()?));
            }
        }
        None
    };
    match v.strip_prefix('v').and_then(parse) {
        Some((level, major, minor)) => (level, major, minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

impl Registry {
    /// The registry for these stored CRDs (only established ones serve).
    pub(crate) fn build<'a>(crds: impl Iterator<Item = &'a Value>) -> Registry {
        let mut custom: Vec<&'static Kind> = crds.flat_map(kinds_of).collect();
        custom.sort_by_key(|k| (k.group, version_rank(k.version), k.plural));
        Registry { custom }
    }

    /// Every served kind: the built-in table, then the custom kinds.
    pub(crate) fn all(&self) -> impl Iterator<Item = &'static Kind> + '_ {
        KINDS.iter().chain(self.custom.iter().copied())
    }

    /// The custom kinds.
    pub(crate) fn custom(&self) -> impl Iterator<Item = &'static Kind> + '_ {
        self.custom.iter().copied()
    }

    /// The kind served at `/api(s)/{group}/{version}/{plural}`.
    pub(crate) fn by_resource(&self, group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
        kinds::by_resource(group, version, plural).or_else(|| {
            self.custom()
                .find(|k| k.group == group && k.version == version && k.plural == plural)
        })
    }

    /// The kind named by an object's `apiVersion` and `kind`.
    pub(crate) fn by_type(&self, api_version: &str, kind: &str) -> Option<&'static Kind> {
        kinds::by_type(api_version, kind).or_else(|| {
            self.custom()
                .find(|k| k.kind == kind && k.api_version() == api_version)
        })
    }

    /// The kind that stores a custom table's objects (its storage version), for whole-table work.
    pub(crate) fn storage_kinds(&self) -> impl Iterator<Item = &'static Kind> + '_ {
        self.custom()
            .filter(|k| k.custom.is_some_and(|c| c.storage == k.api_version()))
    }

    /// The distinct (group, version) pairs: built-in ones in table order, then the custom ones.
    pub(crate) fn group_versions(&self) -> Vec<(&'static str, &'static str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        for k in self.all() {
            if !out.contains(&(k.group, k.version)) {
                out.push((k.group, k.version));
            }
        }
        out
    }

    pub(crate) fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'static Kind> + 'a {
        self.all()
            .filter(move |k| k.group == group && k.version == version)
    }
}

#[cfg(test)]
mod tests {
    use super::version_rank;

    #[test]
    fn versions_sort_as_kube_does() {
        let mut vs = vec!["v1alpha3", "v1beta1", "v2", "v1", "foo", "v1alpha1", "v2beta1"];
        vs.sort_by_key(|v| version_rank(v));
        assert_eq!(
            vs,
            ["v2", "v1", "v2beta1", "v1beta1", "v1alpha3", "v1alpha1", "foo"]
        );
    }
}
