//! Workload selectors against the workloads of every cluster: a Sidecar selecting no workload in its
//! namespace (IST0101), two Sidecars selecting the same workload (IST0110) or both without a selector
//! in one namespace (IST0111), and a PeerAuthentication selecting no workload (IST0127).

use std::collections::BTreeMap;

use super::{Code, Input, Message, Workload, clusters_text, destination_rule::labels_text};
use crate::istio::{Config, ObjectRef, Spec};

/// The workloads in `namespace` that `selector` selects.
fn selected<'a>(
    input: &'a Input,
    namespace: &'a str,
    selector: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = &'a Workload> + 'a {
    input
        .workloads
        .iter()
        .filter(move |w| w.namespace == namespace && w.selected_by(selector))
}

fn searched(input: &Input) -> String {
    let all: std::collections::BTreeSet<String> = input.workloads.iter().map(|w| w.cluster.clone()).collect();
    clusters_text(&all)
}

/// `sidecar.SelectorAnalyzer`.
pub(super) fn sidecars(input: &Input, out: &mut Vec<Message>) {
    let mut unselective: BTreeMap<&str, Vec<&Config>> = BTreeMap::new();
    let mut by_workload: BTreeMap<&Workload, Vec<&Config>> = BTreeMap::new();
    for (c, sc) in input.each(|s| match s {
        Spec::Sidecar(s) => Some(s),
        _ => None,
    }) {
        let ns = &*c.meta.namespace;
        let Some(selector) = sc.workload_selector.as_ref().filter(|s| !s.labels.is_empty()) else {
            unselective.entry(ns).or_default().push(c);
            continue;
        };
        let mut any = false;
        for w in selected(input, ns, &selector.labels) {
            any = true;
            by_workload.entry(w).or_default().push(c);
        }
        if !any {
            out.push(Message::new(
                Code::ReferencedResourceNotFound,
                &c.object_ref(),
                format!(
                    "Referenced selector not found: {:?} (no workload in namespace {ns} in any cluster: {})",
                    labels_text(&selector.labels),
                    searched(input)
                ),
            ));
        }
    }
    for (ns, list) in unselective.into_iter().filter(|(_, l)| l.len() > 1) {
        let names: Vec<&str> = list.iter().map(|c| &*c.meta.name).collect();
        for c in &list {
            out.push(Message::new(
                Code::MultipleSidecarsWithoutWorkloadSelectors,
                &c.object_ref(),
                format!(
                    "The Sidecars {names:?} in namespace {ns:?} have no workload selector, which can lead \
                     to undefined behavior."
                ),
            ));
        }
    }
    // One message per Sidecar and conflicting set, naming the first workload (istioctl repeats it
    // for every pod; with replicas in several clusters that would be one line per pod).
    let mut conflicts: BTreeMap<(Vec<&str>, ObjectRef), &Workload> = BTreeMap::new();
    for (w, list) in by_workload.iter().filter(|(_, l)| l.len() > 1) {
        let names: Vec<&str> = list.iter().map(|c| &*c.meta.name).collect();
        for c in list {
            conflicts.entry((names.clone(), c.object_ref())).or_insert(w);
        }
    }
    for ((names, object), w) in conflicts {
        out.push(Message::new(
            Code::ConflictingSidecarWorkloadSelectors,
            &object,
            format!(
                "The Sidecars {names:?} in namespace {:?} select the same workload pod {:?} (cluster {}), \
                 which can lead to undefined behavior.",
                w.namespace, w.name, w.cluster
            ),
        ));
    }
}

/// IST0127 for PeerAuthentications (istioctl checks only AuthorizationPolicies).
pub(super) fn peer_authentications(input: &Input, out: &mut Vec<Message>) {
    for (c, pa) in input.each(|s| match s {
        Spec::PeerAuthentication(p) => Some(p),
        _ => None,
    }) {
        let Some(selector) = pa.selector.as_ref().filter(|s| !s.match_labels.is_empty()) else {
            continue;
        };
        let ns = &*c.meta.namespace;
        let root = *ns == *input.settings.root_namespace;
        let found = input
            .workloads
            .iter()
            .any(|w| (root || w.namespace == ns) && w.selected_by(&selector.match_labels));
        if !found {
            out.push(Message::new(
                Code::NoMatchingWorkloadsFound,
                &c.object_ref(),
                format!(
                    "No matching workloads for this resource with the following labels: {} (searched \
                     namespace {ns} in {})",
                    labels_text(&selector.match_labels),
                    searched(input)
                ),
            ));
        }
    }
}
