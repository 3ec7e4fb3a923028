//! DestinationRules as istiod indexes and looks them up (`push_context.go:setDestinationRules`,
//! `destinationRule`; `model/destination_rule.go:mergeDestinationRule`): built once per snapshot, asked
//! per (proxy namespace, proxy labels, service).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use super::{
    Settings,
    hosts::{self, HostPattern},
    visibility::Visibility,
};
use crate::{
    istio::{Config, DestinationRule, ObjectRef, Spec, destination_rule::Subset},
    model::Service,
};

/// The DestinationRule a proxy gets for a host: one rule, or several merged (subsets appended, the
/// first top-level policy kept).
#[derive(Debug, Clone, PartialEq)]
pub struct MergedRule {
    /// Every contributing DR, oldest first (explain, push dependencies, cache keys).
    pub from: Vec<ObjectRef>,
    /// `from` with each object's revision: what a cache entry built from this rule depends on.
    pub key: Arc<str>,
    /// The resolved host it is written for.
    pub host: Arc<str>,
    /// The namespace its DRs live in.
    pub namespace: Arc<str>,
    /// Its `exportTo`.
    pub visibility: Visibility,
    /// `workloadSelector.matchLabels`: only proxies carrying them use it (outbound, own namespace).
    pub selector: Option<BTreeMap<String, String>>,
    /// The merged spec.
    pub rule: DestinationRule,
    /// Subsets dropped because an older DR for the host already named them (`pilot_destrule_subsets`).
    pub duplicate_subsets: Vec<(ObjectRef, String)>,
}

impl MergedRule {
    /// The subset called `name`.
    pub fn subset(&self, name: &str) -> Option<&Subset> {
        self.rule.subsets.iter().find(|s| s.name == name)
    }

    fn from_config(cfg: &Config, dr: &DestinationRule, host: Arc<str>, settings: &Settings) -> Self {
        let obj = cfg.object_ref();
        let selector = dr.workload_selector.as_ref().map(|s| s.match_labels.clone());
        Self {
            key: format!("{obj}@{}", cfg.meta.revision).into(),
            from: vec![obj],
            host,
            namespace: cfg.meta.namespace.clone(),
            visibility: Visibility::of_config(&dr.export_to, &cfg.meta.namespace, settings.default_dr_export),
            selector,
            rule: dr.clone(),
            duplicate_subsets: Vec::new(),
        }
    }

    /// Folds a newer DR for the same host into this one (istiod's `mergeDestinationRule`).
    fn merge(&mut self, cfg: &Config, dr: &DestinationRule) {
        let obj = cfg.object_ref();
        for subset in &dr.subsets {
            if self.subset(&subset.name).is_some() {
                self.duplicate_subsets.push((obj.clone(), subset.name.clone()));
            } else {
                self.rule.subsets.push(subset.clone());
            }
        }
        if self.rule.traffic_policy.is_none() {
            self.rule.traffic_policy = dr.traffic_policy.clone();
        }
        self.key = format!("{},{obj}@{}", self.key, cfg.meta.revision).into();
        self.from.push(obj);
    }

    fn applies_to(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector
            .as_ref()
            .is_none_or(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)))
    }
}

/// Rules by host within one index bucket: exact names, and wildcards most specific first.
#[derive(Debug, Default)]
struct Bucket {
    exact: HashMap<Arc<str>, Vec<Arc<MergedRule>>>,
    wildcard: Vec<(HostPattern, Vec<Arc<MergedRule>>)>,
}

impl Bucket {
    fn entries(&mut self, host: &Arc<str>) -> &mut Vec<Arc<MergedRule>> {
        match HostPattern::parse(host) {
            HostPattern::Exact(h) => self.exact.entry(h).or_default(),
            pattern => {
                let i = match self.wildcard.iter().position(|(p, _)| *p == pattern) {
                    Some(i) => i,
                    None => {
                        self.wildcard.push((pattern, Vec::new()));
                        self.wildcard.len() - 1
                    }
                };
                &mut self.wildcard[i].1
            }
        }
    }

    /// Adds a DR, merging it into an entry of the same host with the same visibility and selector.
    fn add(&mut self, cfg: &Config, dr: &DestinationRule, host: &Arc<str>, settings: &Settings) {
        let rule = MergedRule::from_config(cfg, dr, host.clone(), settings);
        let entries = self.entries(host);
        match entries
            .iter_mut()
            .find(|e| e.visibility == rule.visibility && e.selector == rule.selector)
        {
            Some(existing) => Arc::make_mut(existing).merge(cfg, dr),
            None => entries.push(Arc::new(rule)),
        }
    }

    fn finish(&mut self) {
        self.wildcard
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.specificity()));
    }

    /// The exact host's first acceptable rule, else the most specific wildcard's.
    fn find(&self, host: &str, ok: impl Fn(&MergedRule) -> bool) -> Option<&Arc<MergedRule>> {
        if let Some(hit) = self.exact.get(host).and_then(|es| es.iter().find(|e| ok(e))) {
            return Some(hit);
        }
        self.wildcard
            .iter()
            .filter(|(p, _)| p.matches(host))
            .find_map(|(_, es)| es.iter().find(|e| ok(e)))
    }

    fn rules(&self) -> impl Iterator<Item = &Arc<MergedRule>> {
        self.exact
            .values()
            .chain(self.wildcard.iter().map(|(_, es)| es))
            .flatten()
    }
}

/// Every DestinationRule, indexed for lookup.
#[derive(Debug, Default)]
pub struct DrIndex {
    namespace_local: HashMap<Arc<str>, Bucket>,
    exported: HashMap<Arc<str>, Bucket>,
    root_local: Bucket,
}

impl DrIndex {
    /// Indexes the DRs in `configs` (any kinds; others are skipped).
    pub fn build<'c>(configs: impl Iterator<Item = &'c Arc<Config>>, settings: &Settings) -> Self {
        let mut drs: Vec<(&Config, &DestinationRule)> = configs
            .filter_map(|c| match &c.spec {
                Spec::DestinationRule(dr) => Some((&**c, &**dr)),
                _ => None,
            })
            .collect();
        // istiod's sortConfigBySelectorAndCreationTime.
        drs.sort_by(|(a, da), (b, db)| {
            (
                da.workload_selector.is_none(),
                a.meta.creation_timestamp.as_deref(),
                &a.meta.name,
                &a.meta.namespace,
            )
                .cmp(&(
                    db.workload_selector.is_none(),
                    b.meta.creation_timestamp.as_deref(),
                    &b.meta.name,
                    &b.meta.namespace,
                ))
        });
        let mut index = Self::default();
        for (cfg, dr) in drs {
            let ns = &cfg.meta.namespace;
            let host = hosts::resolve(&dr.host, ns, &settings.domain_suffix);
            let vis = Visibility::of_config(&dr.export_to, ns, settings.default_dr_export);
            let private = dr.workload_selector.is_some() || vis.is_private_to(ns);
            // A rule that sets no exportTo always applies in its own namespace, whatever MeshConfig's
            // default (istiod: only an explicit `~` keeps it out).
            if vis.visible_in(ns) || dr.workload_selector.is_some() || dr.export_to.is_empty() {
                index
                    .namespace_local
                    .entry(ns.clone())
                    .or_default()
                    .add(cfg, dr, &host, settings);
            }
            if !private {
                index
                    .exported
                    .entry(ns.clone())
                    .or_default()
                    .add(cfg, dr, &host, settings);
            } else if **ns == *settings.root_namespace && dr.workload_selector.is_none() {
                index.root_local.add(cfg, dr, &host, settings);
            }
        }
        for b in index
            .namespace_local
            .values_mut()
            .chain(index.exported.values_mut())
        {
            b.finish();
        }
        index.root_local.finish();
        index
    }

    /// The rule a proxy in `proxy_ns` with `labels` uses for `service` (outbound), with istiod's
    /// precedence: the proxy's namespace (a matching `workloadSelector` first), then the service's
    /// namespace, then the root namespace; the first level with a match wins outright.
    pub fn lookup(
        &self,
        root: &str,
        proxy_ns: &str,
        labels: &BTreeMap<String, String>,
        service: &Service,
    ) -> Option<&Arc<MergedRule>> {
        let host = &*service.hostname;
        let own = if proxy_ns != root {
            self.namespace_local
                .get(proxy_ns)
                .and_then(|b| b.find(host, |r| r.applies_to(labels)))
        } else {
            self.root_local.find(host, |_| true)
        };
        own.or_else(|| {
            [&*service.namespace, root].into_iter().find_map(|ns| {
                self.exported
                    .get(ns)?
                    .find(host, |r| r.visibility.visible_in(proxy_ns))
            })
        })
    }

    /// Subsets dropped in merges, each once: (host, the DestinationRule that repeated it, subset)
    /// (`pilot_destrule_subsets`).
    pub fn duplicate_subsets(&self) -> std::collections::BTreeSet<(Arc<str>, ObjectRef, String)> {
        self.rules()
            .flat_map(|r| {
                r.duplicate_subsets
                    .iter()
                    .map(|(o, s)| (r.host.clone(), o.clone(), s.clone()))
            })
            .collect()
    }

    /// Every indexed rule once per bucket (metrics, debug).
    pub fn rules(&self) -> impl Iterator<Item = &Arc<MergedRule>> {
        self.namespace_local
            .values()
            .chain(self.exported.values())
            .chain(std::iter::once(&self.root_local))
            .flat_map(Bucket::rules)
    }
}

#[cfg(test)]
#[path = "destination_rule_tests.rs"]
mod tests;
