//! Locality load balancing for one proxy and one cluster, as istiod's
//! `pilot/pkg/networking/core/loadbalancer/loadbalancer.go` computes it: which `localityLbSetting`
//! applies (`GetLocalityLbSetting`), then `distribute` (locality weights) or failover (priorities from
//! `failoverPriority` labels and the region/zone/subzone ladder with `failover` region pairs).
//!
//! Owns: the pure rules, the part of the EDS cache key they read from the proxy, and the reasons
//! `meshctl explain` shows. Does NOT: choose endpoints (split horizon, subsets) or encode
//! ([`super::eds`]); it reorders and reweighs an [`Assignment`] that is already grouped.

use std::{collections::BTreeMap, fmt::Write as _, sync::Arc};

use serde::Serialize;

use super::eds::{self, Assignment, Client};
use crate::{
    config::mesh,
    envoy::Proxy,
    istio::destination_rule::{Distribute, Failover, LocalityLbSetting},
    model::{
        ClusterId, Endpoint, LABEL_CLUSTER, LABEL_NETWORK, LABEL_REGION, LABEL_SUBZONE, LABEL_ZONE, Locality,
        ServicePort, StaleAction,
    },
};

/// Where a proxy is, as locality load balancing compares it (istiod's `setTopologyLabels`): its
/// locality from its topology labels, else `node.locality`; its labels augmented with that locality,
/// its cluster and its network (a network label of its own wins).
#[derive(Debug, Clone, Copy)]
pub struct Place<'p> {
    proxy: &'p Proxy,
    locality: Option<(&'p str, &'p str, &'p str)>,
}

impl<'p> Place<'p> {
    /// The place of `proxy`.
    pub fn of(proxy: &'p Proxy) -> Self {
        let label = |k: &str| proxy.labels.get(k).map(String::as_str);
        let from_labels = [LABEL_REGION, LABEL_ZONE, LABEL_SUBZONE]
            .iter()
            .any(|k| label(k).is_some())
            .then(|| {
                (
                    label(LABEL_REGION).unwrap_or(""),
                    label(LABEL_ZONE).unwrap_or(""),
                    label(LABEL_SUBZONE).unwrap_or(""),
                )
            });
        Self {
            proxy,
            locality: from_labels,
        }
    }

    /// `(region, zone, subzone)`.
    pub fn locality(&self) -> (&'p str, &'p str, &'p str) {
        self.locality.unwrap_or((
            &self.proxy.locality.region,
            &self.proxy.locality.zone,
            &self.proxy.locality.subzone,
        ))
    }

    /// A label of the proxy, augmented as istiod's `AugmentLabels` does.
    pub fn label(&self, key: &str) -> Option<&'p str> {
        let own = self.proxy.labels.get(key).map(String::as_str);
        let non_empty = |s: &'p str| Some(s).filter(|s| !s.is_empty());
        let (region, zone, subzone) = self.locality();
        match key {
            LABEL_REGION => non_empty(region).or(own),
            LABEL_ZONE => non_empty(zone).or(own),
            LABEL_SUBZONE => non_empty(subzone).or(own),
            LABEL_CLUSTER => self.proxy.cluster_id.as_deref().and_then(non_empty).or(own),
            LABEL_NETWORK => own.or(self.proxy.network.as_deref()),
            _ => own,
        }
    }

    /// Whether the augmented labels are empty (istiod then applies no `failoverPriority`).
    fn has_labels(&self) -> bool {
        let (r, z, s) = self.locality();
        let no_locality = r.is_empty() && z.is_empty() && s.is_empty();
        !(self.proxy.labels.is_empty() && no_locality)
            || self.proxy.cluster_id.as_deref().is_some_and(|c| !c.is_empty())
            || self.proxy.network.is_some()
    }
}

/// Where the setting in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The DestinationRule's `trafficPolicy.loadBalancer.localityLbSetting` (after port/subset merge).
    DestinationRule,
    /// MeshConfig's `localityLbSetting`.
    MeshConfig,
}

/// What locality load balancing does for a cluster (before looking at a proxy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum Mode {
    /// Nothing: every locality at priority 0 with its own weight.
    Off {
        /// Why.
        why: Off,
    },
    /// `distribute`: locality weights from the first rule whose `from` matches the proxy.
    Distribute {
        /// Where the rules came from.
        source: Source,
        /// The rules.
        rules: Vec<Distribute>,
    },
    /// Priorities: `failoverPriority` labels first, then the locality ladder when there is no
    /// `failoverPriority` or `failover` pairs are set too.
    Failover {
        /// Where the setting came from.
        source: Source,
        /// `failover` region pairs.
        failover: Vec<Failover>,
        /// `failoverPriority` labels, in order.
        priority: Vec<PriorityLabel>,
    },
}

/// Why locality load balancing does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Off {
    /// `enabled: false` where the setting came from.
    Disabled(Source),
    /// Failover needs `outlierDetection`: without it Envoy would never leave priority 0 (istiod PR #14099).
    NoOutlierDetection(Source),
}

/// One `failoverPriority` entry: a label key, and for `key=value` the value compared instead of the
/// proxy's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityLabel {
    /// The label.
    pub key: String,
    /// The pinned value (`key=value`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl PriorityLabel {
    /// istiod's `priorityLabelOverrides`: `key=value` pins the value; anything else is a key.
    fn parse(s: &str) -> Self {
        let parts: Vec<&str> = s.split('=').collect();
        match parts.as_slice() {
            [key, value] => Self {
                key: (*key).to_owned(),
                value: Some((*value).to_owned()),
            },
            _ => Self {
                key: parts[0].to_owned(),
                value: None,
            },
        }
    }
}

impl Mode {
    /// The `failoverPriority` label keys (none unless failing over).
    pub fn priority_keys(&self) -> Vec<String> {
        match self {
            Self::Failover { priority, .. } => priority.iter().map(|l| l.key.clone()).collect(),
            Self::Off { .. } | Self::Distribute { .. } => Vec::new(),
        }
    }
}

/// istiod's `GetLocalityLbSetting` and the branch of `ApplyLocalityLoadBalancer`: the DR's setting
/// wins whole (`enabled: false` turns it off), else the mesh's; `distribute` beats failover, and
/// failover needs outlier detection.
pub fn mode(dr: Option<&LocalityLbSetting>, mesh: &mesh::LocalityLbSetting, outlier_detection: bool) -> Mode {
    // MeshConfig has its own copies of the types (`config` does not depend on `istio`).
    let (mesh_distribute, mesh_failover): (Vec<Distribute>, Vec<Failover>) = match dr {
        Some(_) => Default::default(),
        None => (
            mesh.distribute
                .iter()
                .map(|d| Distribute {
                    from: d.from.clone(),
                    to: d.to.clone(),
                })
                .collect(),
            mesh.failover
                .iter()
                .map(|f| Failover {
                    from: f.from.clone(),
                    to: f.to.clone(),
                })
                .collect(),
        ),
    };
    let (source, enabled, distribute, failover, priority): (_, _, &[Distribute], &[Failover], &[String]) =
        match dr {
            Some(s) => (
                Source::DestinationRule,
                s.enabled != Some(false),
                &s.distribute,
                &s.failover,
                &s.failover_priority,
            ),
            None => (
                Source::MeshConfig,
                mesh.enabled,
                &mesh_distribute,
                &mesh_failover,
                &mesh.failover_priority,
            ),
        };
    if !enabled {
        Mode::Off {
            why: Off::Disabled(source),
        }
    } else if !distribute.is_empty() {
        Mode::Distribute {
            source,
            rules: distribute.to_vec(),
        }
    } else if !outlier_detection {
        Mode::Off {
            why: Off::NoOutlierDetection(source),
        }
    } else {
        Mode::Failover {
            source,
            failover: failover.to_vec(),
            priority: priority.iter().map(|p| PriorityLabel::parse(p)).collect(),
        }
    }
}

/// A [`Mode`] applied for one proxy.
#[derive(Debug, Clone, Copy)]
pub struct Plan<'a> {
    mode: &'a Mode,
    place: Place<'a>,
}

/// Why an endpoint (or the gateway standing in for it) has its priority or weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityWhy {
    /// The first `failoverPriority` label whose value differs from the proxy's (index, key, the
    /// proxy's or pinned value, the endpoint's); `None` when all match or none apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_mismatch: Option<LabelMismatch>,
    /// Where its locality stands against the proxy's (when the ladder applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ladder: Option<Ladder>,
    /// The `distribute` entry that weighs its locality (`from`, `to`, percent), or `None` when no
    /// entry names it (its locality is emptied, as istiod does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribute: Option<Option<(String, String, u32)>>,
}

/// A `failoverPriority` label that did not match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelMismatch {
    /// Its position in `failoverPriority`.
    pub index: usize,
    /// The label.
    pub key: String,
    /// The proxy's value (or the pinned one).
    pub want: String,
    /// The endpoint's.
    pub got: String,
}

/// The locality ladder (istiod's `LbPriority` plus `failover`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "match")]
pub enum Ladder {
    /// Region, zone and subzone match: 0.
    SameSubzone,
    /// Region and zone: 1.
    SameZone,
    /// Region: 2.
    SameRegion,
    /// Another region: 3 (the `failover` target when one is set for the proxy's region).
    OtherRegion,
    /// Another region that is not the `failover` target for the proxy's region: 4.
    NotFailoverTarget {
        /// The proxy's region.
        from: String,
        /// The region failed over to.
        to: String,
    },
}

impl Ladder {
    fn rank(&self) -> u32 {
        match self {
            Self::SameSubzone => 0,
            Self::SameZone => 1,
            Self::SameRegion => 2,
            Self::OtherRegion => 3,
            Self::NotFailoverTarget { .. } => 4,
        }
    }
}

impl<'a> Plan<'a> {
    /// `mode` for the proxy at `place`.
    pub fn new(mode: &'a Mode, place: Place<'a>) -> Self {
        Self { mode, place }
    }

    /// Whether locality load balancing changes anything (the mode is not off).
    pub fn applies(&self) -> bool {
        !matches!(self.mode, Mode::Off { .. })
    }

    /// The `failoverPriority` labels that apply for this proxy (none when it has no labels at all).
    fn labels(&self) -> &'a [PriorityLabel] {
        match self.mode {
            Mode::Failover { priority, .. } if self.place.has_labels() => priority,
            _ => &[],
        }
    }

    /// Whether the region/zone/subzone ladder applies.
    fn ladder_applies(&self) -> bool {
        matches!(self.mode, Mode::Failover { failover, priority, .. } if priority.is_empty() || !failover.is_empty())
    }

    /// What of the proxy the result depends on, for the EDS cache key: its locality when the ladder
    /// or `distribute` reads it, the values of the `failoverPriority` labels
    /// (istiod's `GetFailoverPriorityLabels`). Empty when nothing does, so those proxies share.
    pub fn key(&self) -> String {
        let mut key = String::new();
        let (r, z, s) = self.place.locality();
        match self.mode {
            Mode::Off { .. } => {}
            Mode::Distribute { rules, .. } => {
                // Proxies matched by the same rule get the same weights.
                let rule = rules.iter().position(|d| locality_match((r, z, s), &d.from));
                let _ = write!(key, "dist={rule:?}");
            }
            Mode::Failover { failover, .. } => {
                if self.ladder_applies() {
                    let _ = write!(key, "loc={r}/{z}/{s}");
                    // Only the failover pair of the proxy's region matters.
                    if let Some(f) = failover.iter().find(|f| f.from == r) {
                        let _ = write!(key, ">{}", f.to);
                    }
                }
                for l in self.labels() {
                    let value = l.value.as_deref().or_else(|| self.place.label(&l.key));
                    let _ = write!(key, "|{}:{}", l.key, value.unwrap_or(""));
                }
            }
        }
        key
    }

    /// An endpoint's `failoverPriority` rank before renumbering (istiod's
    /// `applyFailoverPriorityPerLocality`): n − j for the first label j that differs, else 0.
    pub fn rank(&self, ep: &Endpoint) -> u32 {
        self.mismatch(ep).map_or(0, |m| {
            u32::try_from(self.labels().len() - m.index).unwrap_or(u32::MAX)
        })
    }

    fn mismatch(&self, ep: &Endpoint) -> Option<LabelMismatch> {
        self.labels().iter().enumerate().find_map(|(index, l)| {
            let want = l
                .value
                .as_deref()
                .or_else(|| self.place.label(&l.key))
                .unwrap_or("");
            let got = ep.label(&l.key).unwrap_or("");
            (want != got).then(|| LabelMismatch {
                index,
                key: l.key.clone(),
                want: want.to_owned(),
                got: got.to_owned(),
            })
        })
    }

    fn ladder(&self, locality: &Locality) -> Option<Ladder> {
        let Mode::Failover { failover, .. } = self.mode else {
            return None;
        };
        if !self.ladder_applies() {
            return None;
        }
        let (r, z, s) = self.place.locality();
        Some(if *locality.region != *r {
            match failover.iter().find(|f| f.from == r) {
                Some(f) if *locality.region != *f.to => Ladder::NotFailoverTarget {
                    from: f.from.clone(),
                    to: f.to.clone(),
                },
                _ => Ladder::OtherRegion,
            }
        } else if *locality.zone != *z {
            Ladder::SameRegion
        } else if *locality.subzone != *s {
            Ladder::SameZone
        } else {
            Ladder::SameSubzone
        })
    }

    /// The assignment of `endpoints` for this proxy: grouped by locality and `failoverPriority` rank,
    /// prioritised or reweighed, then duplicates merged into their best priority. ★ Endpoints of a
    /// `stale` cluster whose action is `deprioritize` come after every other (a rank past any
    /// `failoverPriority` rank, so past any ladder step too).
    pub fn assignment<'e>(
        &self,
        cluster: Arc<str>,
        port: &ServicePort,
        endpoints: impl IntoIterator<Item = &'e Endpoint>,
        client: Client,
        stale: &BTreeMap<ClusterId, StaleAction>,
    ) -> Assignment {
        let last = u32::try_from(self.labels().len() + 1).unwrap_or(u32::MAX);
        let rank = |e: &Endpoint| match stale.get(e.cluster()) {
            Some(StaleAction::Deprioritize) => last,
            _ => self.rank(e),
        };
        let mut a = eds::grouped(cluster, port, endpoints, rank);
        // Weights are set last: a merge sums the weights of what it moves.
        if matches!(self.mode, Mode::Distribute { .. }) {
            a.merge_duplicates();
            self.apply(&mut a);
            if client == Client::Grpc {
                // istiod keeps a locality `distribute` empties; grpcio reports an EDS resource with
                // empty localities as an error, and an empty locality takes no traffic anyway.
                a.localities.retain(|g| !g.endpoints.is_empty());
            }
        } else {
            self.apply(&mut a);
            a.merge_duplicates();
        }
        // Without failover, a deprioritised rank is the only priority besides 0.
        a.renumber();
        a
    }

    /// Applies the plan to an assignment grouped by (locality, [`Plan::rank`]) with the rank as each
    /// group's priority: the ladder (`rank × 5 + ladder`, istiod's `applyLocalityFailover`) and
    /// renumbering without gaps, or the `distribute` weights.
    pub fn apply(&self, a: &mut Assignment) {
        match self.mode {
            Mode::Off { .. } => {}
            Mode::Failover { .. } => {
                if self.ladder_applies() {
                    for g in &mut a.localities {
                        let ladder = self.ladder(&g.locality).map_or(0, |l| l.rank());
                        g.priority = g.priority.saturating_mul(5).saturating_add(ladder);
                    }
                }
                a.renumber();
            }
            Mode::Distribute { rules, .. } => self.distribute(a, rules),
        }
    }

    /// istiod's `applyLocalityWeights`: each `to` pattern's percentage is shared by the localities it
    /// matches, in proportion to their weights (rounded up); localities no pattern names are emptied.
    fn distribute(&self, a: &mut Assignment, rules: &[Distribute]) {
        let Some(rule) = rules
            .iter()
            .find(|d| locality_match(self.place.locality(), &d.from))
        else {
            return;
        };
        let mut unmatched: Vec<bool> = vec![true; a.localities.len()];
        for (pattern, pct) in &rule.to {
            let matched: Vec<usize> = (0..a.localities.len())
                .filter(|&i| unmatched[i] && locality_match(parts(&a.localities[i].locality), pattern))
                .collect();
            let total: u64 = matched.iter().map(|&i| u64::from(a.localities[i].weight)).sum();
            for &i in &matched {
                unmatched[i] = false;
                let w = u64::from(a.localities[i].weight) * u64::from(*pct);
                let new = w.div_ceil(total.max(1));
                if new > 0 {
                    a.localities[i].weight = u32::try_from(new).unwrap_or(u32::MAX);
                }
            }
        }
        for (g, unmatched) in a.localities.iter_mut().zip(unmatched) {
            if unmatched {
                g.endpoints.clear();
            }
        }
    }

    /// Why an endpoint in a group at `locality` gets its priority or weight (`meshctl explain`).
    pub fn why(&self, ep: &Endpoint, locality: &Locality) -> PriorityWhy {
        let distribute = match self.mode {
            Mode::Distribute { rules, .. } => rules
                .iter()
                .find(|d| locality_match(self.place.locality(), &d.from))
                .map(|d| {
                    d.to.iter()
                        .find(|(pattern, _)| locality_match(parts(locality), pattern))
                        .map(|(to, pct)| (d.from.clone(), to.clone(), *pct))
                }),
            _ => None,
        };
        PriorityWhy {
            label_mismatch: self.mismatch(ep),
            ladder: self.ladder(locality),
            distribute,
        }
    }
}

fn parts(l: &Locality) -> (&str, &str, &str) {
    (&l.region, &l.zone, &l.subzone)
}

/// istiod's `LocalityMatch`: a rule `region[/zone[/subzone]]` where `*` matches any segment and a
/// missing zone or subzone matches any.
fn locality_match((region, zone, subzone): (&str, &str, &str), rule: &str) -> bool {
    let mut it = rule.split('/');
    let (r, z, s) = (
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
    );
    (r == "*" || r == region)
        && (z == "*" || z.is_empty() || z == zone)
        && (s == "*" || s.is_empty() || s == subzone)
}

#[cfg(test)]
#[path = "locality_tests.rs"]
mod tests;
