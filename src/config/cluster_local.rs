//! Cluster-local hosts (istiod's `clusterLocalProvider`): services a proxy is served only from its own
//! cluster. MeshConfig `serviceSettings[].settings.clusterLocal` lists host names or `*.` patterns;
//! the defaults are every service of `kube-system`, the Kubernetes API service and the discovery
//! address's host, and a `clusterLocal: false` entry covering a default removes it. Pure.

use super::MeshConfig;

/// Namespaces whose services are cluster-local by default.
const DEFAULT_NAMESPACES: [&str; 1] = ["kube-system"];
/// Services (short host, before the domain suffix) that are cluster-local by default.
const DEFAULT_SERVICES: [&str; 1] = ["kubernetes.default.svc"];

/// The cluster-local host patterns in force, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterLocalHosts(Vec<String>);

impl ClusterLocalHosts {
    /// The patterns of `mesh`, with istiod's defaults for `domain_suffix`.
    pub fn new(mesh: &MeshConfig, domain_suffix: &str) -> Self {
        let mut defaults: Vec<String> = DEFAULT_NAMESPACES
            .iter()
            .map(|ns| format!("*.{ns}.svc.{domain_suffix}"))
            .chain(DEFAULT_SERVICES.iter().map(|s| format!("{s}.{domain_suffix}")))
            .collect();
        if let Some(host) = discovery_host(&mesh.default_config.discovery_address) {
            defaults.push(if host.ends_with(domain_suffix) {
                host.to_owned()
            } else {
                format!("{host}.{domain_suffix}")
            });
        }
        let mut hosts = Vec::new();
        for s in &mesh.service_settings {
            if s.settings.cluster_local {
                hosts.extend(s.hosts.iter().cloned());
            } else {
                // istiod's rule: a host equal to a default, or under a wildcard default, removes it.
                defaults.retain(|d| {
                    !s.hosts
                        .iter()
                        .any(|h| h == d || d.strip_prefix('*').is_some_and(|suffix| h.ends_with(suffix)))
                });
            }
        }
        hosts.extend(defaults);
        hosts.sort();
        hosts.dedup();
        Self(hosts)
    }

    /// Whether `host` is cluster-local: equal to a pattern, or under a `*.` pattern (`*` alone: every host).
    pub fn contains(&self, host: &str) -> bool {
        self.0.iter().any(|p| match p.strip_prefix('*') {
            Some(suffix) => suffix.is_empty() || (host.len() > suffix.len() && host.ends_with(suffix)),
            None => p == host,
        })
    }

    /// The patterns, sorted.
    pub fn patterns(&self) -> &[String] {
        &self.0
    }
}

/// The host of a `host:port` discovery address (none when empty or an IP literal in brackets).
fn discovery_host(address: &str) -> Option<&str> {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    (!host.is_empty() && !host.starts_with('[')).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(settings: &str) -> ClusterLocalHosts {
        let (mesh, _) = MeshConfig::parse(settings).expect("parses");
        ClusterLocalHosts::new(&mesh, "cluster.local")
    }

    #[test]
    fn defaults_are_kube_system_the_api_service_and_the_discovery_host() {
        assert_eq!(
            hosts("").patterns(),
            [
                "*.kube-system.svc.cluster.local",
                "istiod.istio-system.svc.cluster.local",
                "kubernetes.default.svc.cluster.local",
            ]
        );
    }

    #[test]
    fn settings_add_patterns_and_remove_defaults() {
        let cases: &[(&str, &str, bool)] = &[
            ("", "kube-dns.kube-system.svc.cluster.local", true),
            ("", "kubernetes.default.svc.cluster.local", true),
            ("", "echo.default.svc.cluster.local", false),
            (
                "serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.db.svc.cluster.local']}]",
                "pg.db.svc.cluster.local",
                true,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.db.svc.cluster.local']}]",
                "pg.dbx.svc.cluster.local",
                false,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.cluster.local']}]",
                "echo.default.svc.cluster.local",
                true,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: true}, hosts: [echo.default.svc.cluster.local]}]",
                "echo.default.svc.cluster.local",
                true,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: false}, hosts: ['*.kube-system.svc.cluster.local']}]",
                "kube-dns.kube-system.svc.cluster.local",
                false,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: false}, hosts: [kube-dns.kube-system.svc.cluster.local]}]",
                "metrics.kube-system.svc.cluster.local",
                false,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: false}, hosts: [kubernetes.default.svc.cluster.local]}]",
                "kubernetes.default.svc.cluster.local",
                false,
            ),
            (
                "serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*']}]",
                "a.b",
                true,
            ),
        ];
        for (yaml, host, want) in cases {
            assert_eq!(hosts(yaml).contains(host), *want, "{yaml} / {host}");
        }
    }
}
