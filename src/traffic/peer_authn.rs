//! PeerAuthentication as istiod composes it (`model/authentication.go`,
//! `security/authn/policy_applier.go:ComposePeerAuthentication`): the mTLS mode a workload's port
//! accepts. Clients use it to decide whether to send Istio mTLS to an endpoint (auto-mTLS) and whether
//! it may be reached through an east-west gateway (which needs mTLS).

use std::{collections::BTreeMap, sync::Arc};

use super::Settings;
use crate::istio::{
    Config, ObjectRef, PeerAuthentication, Spec,
    peer_authentication::{Mtls, MtlsMode},
};

/// One PeerAuthentication in force.
#[derive(Debug)]
struct Entry {
    object: ObjectRef,
    pa: PeerAuthentication,
}

/// Every PeerAuthentication, by level.
#[derive(Debug, Default)]
pub struct PaIndex {
    /// The oldest selector-less PA in the root namespace.
    mesh: Option<Entry>,
    /// The oldest selector-less PA per other namespace.
    namespaces: BTreeMap<Arc<str>, Entry>,
    /// PAs with a selector outside the root namespace, oldest first per namespace.
    workloads: BTreeMap<Arc<str>, Vec<Entry>>,
}

/// The mode a workload port accepts, and the PeerAuthentication that decided it (`None`: nothing
/// applies, PERMISSIVE by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMode {
    /// Never `Unset`.
    pub mode: MtlsMode,
    /// The deciding object.
    pub from: Option<ObjectRef>,
}

impl PaIndex {
    /// Indexes the PAs in `configs`.
    pub fn build<'c>(configs: impl Iterator<Item = &'c Arc<Config>>, settings: &Settings) -> Self {
        let mut pas: Vec<(&Config, &PeerAuthentication)> = configs
            .filter_map(|c| match &c.spec {
                Spec::PeerAuthentication(pa) => Some((&**c, &**pa)),
                _ => None,
            })
            .collect();
        pas.sort_by(|(a, _), (b, _)| {
            (a.meta.creation_timestamp.as_deref(), &a.meta.name)
                .cmp(&(b.meta.creation_timestamp.as_deref(), &b.meta.name))
        });
        let mut index = Self::default();
        for (cfg, pa) in pas {
            let ns = &cfg.meta.namespace;
            let entry = Entry {
                object: cfg.object_ref(),
                pa: pa.clone(),
            };
            let root = **ns == *settings.root_namespace;
            match (pa.selector.is_some(), root) {
                (false, true) => {
                    index.mesh.get_or_insert(entry);
                }
                (false, false) => {
                    index.namespaces.entry(ns.clone()).or_insert(entry);
                }
                // A selector PA in the root namespace is ignored, as in istiod.
                (true, true) => {}
                (true, false) => index.workloads.entry(ns.clone()).or_default().push(entry),
            }
        }
        index
    }

    /// The effective mode of a workload in `namespace` with `labels` on its target `port`: workload
    /// (port-level first) > namespace > mesh > PERMISSIVE; `UNSET` inherits from the level above.
    pub fn mode(&self, namespace: &str, labels: &BTreeMap<String, String>, port: u16) -> PeerMode {
        let mut found = PeerMode {
            mode: MtlsMode::Permissive,
            from: None,
        };
        let mut set = |m: Option<&Mtls>, obj: &ObjectRef| {
            if let Some(m) = m.filter(|m| m.mode != MtlsMode::Unset) {
                found = PeerMode {
                    mode: m.mode,
                    from: Some(obj.clone()),
                };
            }
        };
        if let Some(e) = &self.mesh {
            set(e.pa.mtls.as_ref(), &e.object);
        }
        if let Some(e) = self.namespaces.get(namespace) {
            set(e.pa.mtls.as_ref(), &e.object);
        }
        if let Some(e) = self.workload(namespace, labels) {
            set(e.pa.mtls.as_ref(), &e.object);
            let port_level =
                e.pa.port_level_mtls
                    .as_ref()
                    .and_then(|ports| ports.get(&u32::from(port)));
            set(port_level, &e.object);
        }
        found
    }

    /// The ports the workload's own PeerAuthentication sets a mode for (`portLevelMtls`), ascending:
    /// istiod's `PortLevelSetting`, which gives each port no Service targets a passthrough chain of its
    /// own on the sidecar's inbound listener.
    pub fn port_levels(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<u16> {
        self.workload(namespace, labels)
            .and_then(|e| e.pa.port_level_mtls.as_ref())
            .map(|ports| ports.keys().filter_map(|p| u16::try_from(*p).ok()).collect())
            .unwrap_or_default()
    }

    /// The oldest workload-level PeerAuthentication in `namespace` selecting `labels`.
    fn workload(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Option<&Entry> {
        self.workloads.get(namespace).and_then(|es| {
            es.iter().find(|e| {
                e.pa.selector
                    .as_ref()
                    .is_some_and(|s| s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
        })
    }

    /// The namespace-or-mesh mode (istiod's `GetNamespaceMutualTLSMode`): what a client may assume of
    /// every workload of a service in `namespace` when it cannot look at each one.
    pub fn namespace_mode(&self, namespace: &str) -> PeerMode {
        let mut found = PeerMode {
            mode: MtlsMode::Permissive,
            from: None,
        };
        for e in self.mesh.iter().chain(self.namespaces.get(namespace)) {
            if let Some(m) = e.pa.mtls.filter(|m| m.mode != MtlsMode::Unset) {
                found = PeerMode {
                    mode: m.mode,
                    from: Some(e.object.clone()),
                };
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::tests::{config, settings};

    #[test]
    fn levels_compose_like_istiod() {
        let configs = [
            config(
                "PeerAuthentication",
                "istio-system",
                "mesh",
                "1",
                "mtls: {mode: STRICT}",
            ),
            config("PeerAuthentication", "legacy", "ns", "1", "mtls: {mode: DISABLE}"),
            config(
                "PeerAuthentication",
                "legacy",
                "ns-newer",
                "2",
                "mtls: {mode: STRICT}",
            ),
            config(
                "PeerAuthentication",
                "legacy",
                "db",
                "1",
                "selector: {matchLabels: {app: db}}\nmtls: {mode: UNSET}\nportLevelMtls: {5432: {mode: STRICT}}",
            ),
            config(
                "PeerAuthentication",
                "istio-system",
                "root-selector",
                "1",
                "selector: {matchLabels: {app: x}}\nmtls: {mode: DISABLE}",
            ),
        ];
        let index = PaIndex::build(configs.iter(), &settings());
        let labels = |app: &str| BTreeMap::from([("app".to_string(), app.to_string())]);
        let cases = [
            ("default", "x", 80, MtlsMode::Strict, Some("mesh")),
            ("legacy", "web", 80, MtlsMode::Disable, Some("ns")),
            // UNSET at workload level inherits the namespace's DISABLE; its port-level STRICT wins on 5432.
            ("legacy", "db", 80, MtlsMode::Disable, Some("ns")),
            ("legacy", "db", 5432, MtlsMode::Strict, Some("db")),
        ];
        for (ns, app, port, mode, from) in cases {
            let got = index.mode(ns, &labels(app), port);
            assert_eq!(got.mode, mode, "{ns} {app} {port}");
            assert_eq!(got.from.as_ref().map(|o| &*o.name), from, "{ns} {app} {port}");
        }
        assert_eq!(index.namespace_mode("legacy").mode, MtlsMode::Disable);
        assert_eq!(
            PaIndex::default().mode("a", &labels("x"), 1).mode,
            MtlsMode::Permissive
        );
    }
}
