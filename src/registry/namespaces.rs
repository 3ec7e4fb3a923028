//! Which of a cluster's namespaces are discovered (MeshConfig `discoverySelectors`, or the remote
//! Secret's override): every namespace's labels, the selectors in force, and what a change adds or
//! removes. Pure; the registry acts on the [`Diff`]s (drops a removed namespace's objects at once,
//! relists for an added one).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use tokio::sync::watch;

use crate::config::{
    MeshConfig,
    selectors::{self, LabelSelector, Selected},
};

/// A remote's own selectors (its Secret's annotation), replacing the mesh-wide ones; `None`: mesh-wide.
pub type Override = Option<Arc<Vec<LabelSelector>>>;

/// Where a cluster's selectors come from: the mesh config, unless the cluster overrides them.
#[derive(Clone)]
pub struct Selection {
    /// The mesh config (its `discoverySelectors`).
    pub mesh: watch::Receiver<Arc<MeshConfig>>,
    /// The cluster's override.
    pub cluster: watch::Receiver<Override>,
}

impl Selection {
    /// The mesh-wide selectors only.
    pub fn mesh_wide(mesh: watch::Receiver<Arc<MeshConfig>>) -> Self {
        Self {
            mesh,
            cluster: watch::channel(None).1,
        }
    }

    /// The selectors in force, marking both inputs seen.
    pub fn current(&mut self) -> Vec<LabelSelector> {
        match &*self.cluster.borrow_and_update() {
            Some(own) => {
                self.mesh.borrow_and_update();
                own.to_vec()
            }
            None => self.mesh.borrow_and_update().discovery_selectors.clone(),
        }
    }

    /// Resolves when either input may have changed; never once both are closed.
    pub async fn changed(&mut self) {
        let (mut mesh_open, mut cluster_open) = (true, true);
        loop {
            tokio::select! {
                r = self.mesh.changed(), if mesh_open => match r {
                    Ok(()) => return,
                    Err(_) => mesh_open = false,
                },
                r = self.cluster.changed(), if cluster_open => match r {
                    Ok(()) => return,
                    Err(_) => cluster_open = false,
                },
                else => std::future::pending::<()>().await,
            }
        }
    }
}

/// What a change did to the selection.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Namespaces now discovered that were not (their objects must be listed).
    pub added: bool,
    /// Namespaces no longer discovered (their objects must go).
    pub removed: BTreeSet<String>,
}

impl Diff {
    /// Whether the selection changed.
    pub fn is_empty(&self) -> bool {
        !self.added && self.removed.is_empty()
    }
}

/// Every namespace's labels and the selection they give.
#[derive(Debug, Default)]
pub struct Namespaces {
    labels: BTreeMap<String, BTreeMap<String, String>>,
    selectors: Vec<LabelSelector>,
    /// `None`: every namespace.
    selected: Option<BTreeSet<String>>,
}

impl Namespaces {
    /// Whether objects of `namespace` are discovered.
    pub fn contains(&self, namespace: &str) -> bool {
        self.selected
            .as_ref()
            .is_none_or(|s| namespace.is_empty() || s.contains(namespace))
    }

    /// The selection as readers see it.
    pub fn selected(&self) -> Selected {
        match &self.selected {
            None => Selected::All,
            Some(names) => Selected::Only(Arc::new(names.clone())),
        }
    }

    /// Where the namespaced watchers list: each selected namespace on its own when selectors select
    /// a few (so the objects of the others are not even listed), else every namespace at once.
    pub fn watch_scopes(&self) -> Vec<Option<Arc<str>>> {
        match &self.selected {
            Some(names) if !names.is_empty() && names.len() <= super::watches::PER_NAMESPACE_WATCHES => {
                names.iter().map(|n| Some(Arc::from(n.as_str()))).collect()
            }
            _ => vec![None],
        }
    }

    /// Known namespace names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.labels.keys().map(String::as_str)
    }

    /// A namespace was created or relabelled (only its own membership is re-evaluated).
    pub fn apply(&mut self, name: &str, labels: &BTreeMap<String, String>) -> Diff {
        if self.labels.get(name) == Some(labels) {
            return Diff::default();
        }
        self.labels.insert(name.to_owned(), labels.clone());
        let Some(selected) = &mut self.selected else {
            return Diff::default();
        };
        match (
            selected.contains(name),
            selectors::selects(&self.selectors, labels),
        ) {
            (false, true) => {
                selected.insert(name.to_owned());
                Diff {
                    added: true,
                    removed: BTreeSet::new(),
                }
            }
            (true, false) => {
                selected.remove(name);
                Diff {
                    added: false,
                    removed: BTreeSet::from([name.to_owned()]),
                }
            }
            _ => Diff::default(),
        }
    }

    /// A namespace was deleted.
    pub fn remove(&mut self, name: &str) -> Diff {
        if self.labels.remove(name).is_none() {
            return Diff::default();
        }
        let was_selected = self.selected.as_mut().is_some_and(|s| s.remove(name));
        Diff {
            added: false,
            removed: if was_selected {
                BTreeSet::from([name.to_owned()])
            } else {
                BTreeSet::new()
            },
        }
    }

    /// New selectors (mesh config reload, Secret annotation).
    pub fn set_selectors(&mut self, selectors: Vec<LabelSelector>) -> Diff {
        if self.selectors == selectors {
            return Diff::default();
        }
        self.selectors = selectors;
        self.recompute()
    }

    fn recompute(&mut self) -> Diff {
        let new = selectors::selected(&self.selectors, self.labels.iter().map(|(n, l)| (n.as_str(), l)));
        let diff = match (&self.selected, &new) {
            (None, None) => Diff::default(),
            (None, Some(now)) => Diff {
                added: false,
                removed: self
                    .labels
                    .keys()
                    .filter(|n| !now.contains(*n))
                    .cloned()
                    .collect(),
            },
            (Some(_), None) => Diff {
                added: true,
                removed: BTreeSet::new(),
            },
            (Some(before), Some(now)) => Diff {
                added: now.difference(before).next().is_some(),
                removed: before.difference(now).cloned().collect(),
            },
        };
        self.selected = new;
        diff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::selectors::tests::labels;

    fn removed(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_few_selected_namespaces_are_watched_each_on_its_own() {
        let on = labels(&[("mesh", "on")]);
        let scopes = |ns: &Namespaces| -> Vec<Option<String>> {
            ns.watch_scopes()
                .into_iter()
                .map(|s| s.map(|s| s.to_string()))
                .collect()
        };
        let mut ns = Namespaces::default();
        for n in ["a", "b", "c", "d"] {
            ns.apply(n, &labels(&[]));
        }
        assert_eq!(scopes(&ns), [None], "no selectors: every namespace at once");
        ns.set_selectors(selectors::parse("[{matchLabels: {mesh: 'on'}}]").expect("parses"));
        assert_eq!(
            scopes(&ns),
            [None],
            "none selected: every namespace (nothing to list per namespace)"
        );
        ns.apply("b", &on);
        assert_eq!(scopes(&ns), [Some("b".to_owned())]);
        ns.apply("a", &on);
        ns.apply("c", &on);
        assert_eq!(
            scopes(&ns),
            [Some("a".into()), Some("b".into()), Some("c".into())]
        );
        ns.apply("d", &on);
        assert_eq!(scopes(&ns), [None], "more than a few: every namespace at once");
    }

    #[test]
    fn relabelling_and_new_selectors_add_and_remove_namespaces() {
        let mut ns = Namespaces::default();
        assert!(ns.apply("a", &labels(&[("mesh", "on")])).is_empty());
        assert!(ns.apply("b", &labels(&[])).is_empty());
        assert!(ns.contains("b"), "no selectors: every namespace");
        let sel = selectors::parse("[{matchLabels: {mesh: 'on'}}]").expect("parses");
        assert_eq!(
            ns.set_selectors(sel.clone()),
            Diff {
                added: false,
                removed: removed(&["b"])
            }
        );
        assert!(ns.contains("a") && !ns.contains("b") && ns.contains(""));
        assert_eq!(ns.selected(), Selected::Only(Arc::new(removed(&["a"]))));
        assert!(ns.set_selectors(sel).is_empty(), "same selectors: nothing");
        assert_eq!(
            ns.apply("b", &labels(&[("mesh", "on")])),
            Diff {
                added: true,
                removed: BTreeSet::new()
            }
        );
        assert_eq!(
            ns.apply("a", &labels(&[("mesh", "off")])),
            Diff {
                added: false,
                removed: removed(&["a"])
            }
        );
        assert!(
            ns.apply("c", &labels(&[])).is_empty(),
            "an unselected new namespace"
        );
        assert_eq!(ns.remove("b").removed, removed(&["b"]));
        assert_eq!(
            ns.set_selectors(Vec::new()),
            Diff {
                added: true,
                removed: BTreeSet::new()
            }
        );
        assert_eq!(ns.selected(), Selected::All);
    }
}
