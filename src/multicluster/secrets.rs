//! From the labelled Secrets to the clusters meshd should run: a pure function, re-evaluated on every
//! Secret event, so a cluster ID claimed by two Secrets goes to a documented winner and falls to the
//! other when the winner goes (istiod keeps the first it saw and never re-evaluates: istio #36365).
//!
//! ★ A Secret may carry its clusters' own discovery selectors in the [`SELECTORS_ANNOTATION`]
//! annotation (istio#54402): they replace MeshConfig's `discoverySelectors` for those clusters; and its
//! own stale-endpoints policy ([`super::stale`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use sha2::{Digest, Sha256};

use super::{
    kubeconfig::{InsecureOption, sanitize},
    stale::{StaleOverride, StalePolicy},
};
use crate::{config::selectors, model::ClusterId, registry::namespaces::Override};

/// The remote Secret annotation holding its clusters' discovery selectors: a YAML or JSON list of
/// label selectors, as MeshConfig's `discoverySelectors` (`[]` discovers every namespace).
pub const SELECTORS_ANNOTATION: &str = "meshd.io/discovery-selectors";

/// A Secret's `namespace/name`.
pub type SecretName = String;

/// What one Secret (or kubeconfig file) provides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretEntry {
    /// Cluster ID → kubeconfig.
    pub data: BTreeMap<String, Arc<[u8]>>,
    /// The [`SELECTORS_ANNOTATION`] text, if set.
    pub selectors: Option<String>,
    /// ★ The stale-endpoints annotations' text.
    pub stale: StaleOverride,
}

/// The Secrets' data: secret → what it provides.
pub type SecretData = BTreeMap<SecretName, SecretEntry>;

/// A cluster meshd should be watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The Secret providing it.
    pub secret: SecretName,
    /// Its kubeconfig (already checked by [`sanitize`]).
    pub kubeconfig: Arc<[u8]>,
    /// sha256 of the kubeconfig: a change means rotation.
    pub sha: [u8; 32],
    /// The Secret's own discovery selectors (`None`: MeshConfig's).
    pub selectors: Override,
    /// ★ The Secret's own stale-endpoints policy (checked; resolved over the mesh-wide default).
    pub stale: StaleOverride,
}

/// A Secret entry that will not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The cluster ID (data key).
    pub cluster: ClusterId,
    /// The Secret.
    pub secret: SecretName,
    /// In words.
    pub reason: String,
}

/// What the Secrets ask for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// Clusters to run.
    pub clusters: BTreeMap<ClusterId, Wanted>,
    /// Entries not used.
    pub rejected: Vec<Rejected>,
}

/// Decides which clusters to run. Per cluster ID, the winner is the valid entry from the Secret whose
/// `namespace/name` sorts first; other claimants are reported as duplicates. Invalid kubeconfigs and
/// entries naming meshd's own cluster are reported too.
pub fn desired(secrets: &SecretData, own: &ClusterId, allowed: &BTreeSet<InsecureOption>) -> Desired {
    let mut out = Desired::default();
    // BTreeMap iteration is in secret-name order, which makes the first valid claimant the winner.
    for (secret, entry) in secrets {
        // An annotation that does not parse makes the whole Secret unusable: guessing would discover
        // namespaces its author meant to exclude.
        let own_selectors = match entry.selectors.as_deref().map(selectors::parse).transpose() {
            Ok(s) => s.map(Arc::new),
            Err(e) => {
                for id in entry.data.keys() {
                    out.rejected.push(Rejected {
                        cluster: ClusterId::from(id.as_str()),
                        secret: secret.clone(),
                        reason: format!("annotation {SELECTORS_ANNOTATION}: {e}"),
                    });
                }
                continue;
            }
        };
        // Likewise a stale-endpoints policy that does not parse: any default could be the opposite.
        if let Err(e) = entry.stale.resolve(StalePolicy::default()) {
            for id in entry.data.keys() {
                out.rejected.push(Rejected {
                    cluster: ClusterId::from(id.as_str()),
                    secret: secret.clone(),
                    reason: e.to_string(),
                });
            }
            continue;
        }
        for (id, kubeconfig) in &entry.data {
            let cluster = ClusterId::from(id.as_str());
            let reject = |reason: String| Rejected {
                cluster: cluster.clone(),
                secret: secret.clone(),
                reason,
            };
            if &cluster == own {
                out.rejected.push(reject(format!(
                    "cluster ID {cluster} is meshd's own cluster; ignored (it would replace the config cluster)"
                )));
                continue;
            }
            if let Some(winner) = out.clusters.get(&cluster) {
                out.rejected.push(reject(format!(
                    "cluster ID {cluster} is already provided by secret {}",
                    winner.secret
                )));
                continue;
            }
            match sanitize(kubeconfig, allowed) {
                Ok(_) => {
                    out.clusters.insert(
                        cluster,
                        Wanted {
                            secret: secret.clone(),
                            kubeconfig: kubeconfig.clone(),
                            sha: Sha256::digest(kubeconfig).into(),
                            selectors: own_selectors.clone(),
                            stale: entry.stale.clone(),
                        },
                    );
                }
                Err(e) => out.rejected.push(reject(e.to_string())),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(server: &str) -> Arc<[u8]> {
        format!(
            "current-context: x\ncontexts: [{{name: x, context: {{cluster: x, user: u}}}}]\n\
             clusters: [{{name: x, cluster: {{server: '{server}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n"
        )
        .into_bytes()
        .into()
    }

    fn data(entries: &[(&str, &str, Arc<[u8]>)]) -> SecretData {
        let mut out = SecretData::new();
        for (secret, id, kc) in entries {
            out.entry(secret.to_string())
                .or_default()
                .data
                .insert(id.to_string(), kc.clone());
        }
        out
    }

    fn run(entries: &[(&str, &str, Arc<[u8]>)]) -> (Vec<(String, String)>, Vec<String>) {
        let d = desired(&data(entries), &"primary".into(), &BTreeSet::new());
        let clusters = d
            .clusters
            .iter()
            .map(|(c, w)| (c.to_string(), w.secret.clone()))
            .collect();
        let rejected = d
            .rejected
            .iter()
            .map(|r| format!("{} {}: {}", r.secret, r.cluster, r.reason))
            .collect();
        (clusters, rejected)
    }

    #[test]
    fn duplicates_go_to_the_first_secret_and_fall_back_when_it_goes() {
        let a = kubeconfig("https://a");
        let both = [
            ("istio-system/b-secret", "c2", a.clone()),
            ("istio-system/a-secret", "c2", a.clone()),
        ];
        let (clusters, rejected) = run(&both);
        assert_eq!(clusters, [("c2".to_owned(), "istio-system/a-secret".to_owned())]);
        assert_eq!(
            rejected,
            ["istio-system/b-secret c2: cluster ID c2 is already provided by secret istio-system/a-secret"]
        );
        let (clusters, rejected) = run(&both[..1]);
        assert_eq!(clusters, [("c2".to_owned(), "istio-system/b-secret".to_owned())]);
        assert!(rejected.is_empty());
    }

    #[test]
    fn own_id_and_bad_kubeconfigs_are_reported_and_do_not_shadow_valid_ones() {
        let (clusters, rejected) = run(&[
            ("ns/a", "primary", kubeconfig("https://p")),
            (
                "ns/a",
                "c3",
                Arc::from(&b"users: [{name: u, user: {exec: {command: sh}}}]"[..]),
            ),
            ("ns/a", "c4", Arc::from(&b"{{{"[..])),
            ("ns/b", "c4", kubeconfig("https://c4")),
        ]);
        assert_eq!(clusters, [("c4".to_owned(), "ns/b".to_owned())]);
        assert_eq!(rejected.len(), 3, "{rejected:?}");
        assert!(
            rejected[0].starts_with("ns/a c3: kubeconfig has no current-context"),
            "{rejected:?}"
        );
        assert!(
            rejected[1].starts_with("ns/a c4: kubeconfig is not valid YAML"),
            "{rejected:?}"
        );
        assert!(rejected[2].starts_with("ns/a primary: cluster ID primary is meshd's own cluster"));
    }

    #[test]
    fn the_selectors_annotation_is_parsed_per_secret_and_a_bad_one_rejects_its_clusters() {
        let mut secrets = data(&[
            ("ns/a", "c2", kubeconfig("https://a")),
            ("ns/b", "c3", kubeconfig("https://b")),
            ("ns/c", "c4", kubeconfig("https://c")),
        ]);
        let annotate = |s: &mut SecretData, name: &str, text: &str| {
            s.get_mut(name).expect("secret").selectors = Some(text.to_owned());
        };
        annotate(&mut secrets, "ns/a", "[{matchLabels: {team: a}}]");
        annotate(
            &mut secrets,
            "ns/b",
            "[{matchExpressions: [{key: team, operator: In}]}]",
        );
        let d = desired(&secrets, &"p".into(), &BTreeSet::new());
        let own = d.clusters["c2"].selectors.as_deref().expect("own selectors");
        assert_eq!(own[0].match_labels["team"], "a");
        assert_eq!(d.clusters["c4"].selectors, None, "no annotation: MeshConfig's");
        assert!(!d.clusters.contains_key("c3"));
        assert_eq!(d.rejected.len(), 1);
        assert!(
            d.rejected[0].reason.starts_with(
                "annotation meshd.io/discovery-selectors: selector 0: matchExpressions key \"team\""
            ),
            "{:?}",
            d.rejected
        );
    }

    #[test]
    fn rotation_changes_the_sha() {
        let one = desired(
            &data(&[("s", "c2", kubeconfig("https://a"))]),
            &"p".into(),
            &BTreeSet::new(),
        );
        let two = desired(
            &data(&[("s", "c2", kubeconfig("https://b"))]),
            &"p".into(),
            &BTreeSet::new(),
        );
        assert_ne!(one.clusters["c2"].sha, two.clusters["c2"].sha);
    }
}
