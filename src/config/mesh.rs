//! The subset of Istio's MeshConfig that meshd uses. Unknown fields are tolerated with a warning, as
//! istiod tolerates fields a given version does not know.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ParseError, selectors::LabelSelector};

/// Mesh-wide settings (Istio `MeshConfig`, camelCase YAML as in the `istio` ConfigMap's `mesh` key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MeshConfig {
    /// SPIFFE trust domain of workload identities.
    pub trust_domain: String,
    /// Other trust domains accepted as this mesh's.
    pub trust_domain_aliases: Vec<String>,
    /// Namespace whose config applies mesh-wide (Istio's `rootNamespace`).
    pub root_namespace: String,
    /// Send mTLS automatically to endpoints that can take it.
    pub enable_auto_mtls: bool,
    /// Upstream connect timeout, e.g. `10s`.
    #[serde(with = "super::duration")]
    pub connect_timeout: Duration,
    /// What sidecars do with traffic to unknown destinations.
    pub outbound_traffic_policy: OutboundTrafficPolicy,
    /// Locality-aware load balancing.
    pub locality_lb_setting: LocalityLbSetting,
    /// Defaults handed to proxies.
    pub default_config: ProxyConfig,
    /// Label selectors over Namespaces: only the namespaces they select are discovered, in every
    /// cluster (none: all namespaces). See [`super::selectors`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discovery_selectors: Vec<LabelSelector>,
    /// Per-host settings: which hosts are cluster-local. See [`super::cluster_local`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_settings: Vec<ServiceSettings>,
    /// `exportTo` of Services and ServiceEntries that set none (`.` or `*`; unset: `*`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_service_export_to: Vec<String>,
    /// `exportTo` of VirtualServices that set none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_virtual_service_export_to: Vec<String>,
    /// `exportTo` of DestinationRules that set none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_destination_rule_export_to: Vec<String>,
}

/// Istio's `MeshConfig.ServiceSettings`: settings for the services whose host matches `hosts`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceSettings {
    /// The settings.
    pub settings: ServiceSettingsValues,
    /// Host names or `*.`-prefixed patterns (`*.ns.svc.cluster.local`, `*.cluster.local`).
    pub hosts: Vec<String>,
}

/// Istio's `MeshConfig.ServiceSettings.Settings`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceSettingsValues {
    /// Served to a proxy only from the proxy's own cluster (false: removes a default).
    pub cluster_local: bool,
}

/// Istio's `OutboundTrafficPolicy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboundTrafficPolicy {
    /// `ALLOW_ANY` or `REGISTRY_ONLY`.
    pub mode: OutboundMode,
}

/// Istio's `OutboundTrafficPolicy.Mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OutboundMode {
    /// Pass unknown destinations through.
    #[default]
    AllowAny,
    /// Only known services are reachable.
    RegistryOnly,
}

/// Istio's `LocalityLoadBalancerSetting`, the mesh-wide default a DestinationRule's replaces whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityLbSetting {
    /// Prefer endpoints in the proxy's own locality.
    pub enabled: bool,
    /// Weights from a source locality to destination localities.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distribute: Vec<LocalityDistribute>,
    /// Region to fail over to when a region has no healthy endpoint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<LocalityFailover>,
    /// Label keys (or `key=value`) ordering endpoints into priorities.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
}

/// Istio's `LocalityLoadBalancerSetting.Distribute`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityDistribute {
    /// Source locality (`region/zone/subzone`, `*` per segment).
    pub from: String,
    /// Destination locality → weight.
    pub to: std::collections::BTreeMap<String, u32>,
}

/// Istio's `LocalityLoadBalancerSetting.Failover`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityFailover {
    /// Source region.
    pub from: String,
    /// Region to fail over to.
    pub to: String,
}

/// Istio's `ProxyConfig` (the fields meshd reads).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyConfig {
    /// Address proxies dial for xDS, e.g. `istiod.istio-system.svc:15012`.
    pub discovery_address: String,
    /// Mesh ID reported to proxies.
    pub mesh_id: String,
}

impl Default for MeshConfig {
    fn default() -> Self {
        Self {
            trust_domain: "cluster.local".into(),
            trust_domain_aliases: Vec::new(),
            root_namespace: "istio-system".into(),
            enable_auto_mtls: true,
            connect_timeout: Duration::from_secs(10),
            outbound_traffic_policy: OutboundTrafficPolicy {
                mode: OutboundMode::AllowAny,
            },
            locality_lb_setting: LocalityLbSetting::default(),
            default_config: ProxyConfig {
                discovery_address: "istiod.istio-system.svc:15012".into(),
                mesh_id: String::new(),
            },
            discovery_selectors: Vec::new(),
            service_settings: Vec::new(),
            default_service_export_to: Vec::new(),
            default_virtual_service_export_to: Vec::new(),
            default_destination_rule_export_to: Vec::new(),
        }
    }
}

impl Default for OutboundTrafficPolicy {
    fn default() -> Self {
        MeshConfig::default().outbound_traffic_policy
    }
}

impl Default for LocalityLbSetting {
    fn default() -> Self {
        Self {
            enabled: true,
            distribute: Vec::new(),
            failover: Vec::new(),
            failover_priority: Vec::new(),
        }
    }
}

impl MeshConfig {
    /// Parses mesh config YAML. Returns the config and the paths of fields meshd ignores.
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ParseError> {
        let mut unknown = Vec::new();
        let cfg: Self = super::parse_yaml(text, |p| unknown.push(p))?;
        if cfg.trust_domain.is_empty() {
            return Err(ParseError {
                field: "trustDomain".into(),
                message: "must not be empty".into(),
                line: None,
                column: None,
            });
        }
        if let Err(e) = super::selectors::validate(&cfg.discovery_selectors) {
            return Err(ParseError {
                field: "discoverySelectors".into(),
                message: e.to_string(),
                line: None,
                column: None,
            });
        }
        Ok((cfg, unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_all_defaults() {
        let (cfg, unknown) = MeshConfig::parse("").expect("parses");
        assert_eq!(cfg, MeshConfig::default());
        assert!(unknown.is_empty());
    }

    #[test]
    fn known_fields_parse_and_unknown_are_reported() {
        let (cfg, unknown) = MeshConfig::parse(
            "trustDomain: example.org\ntrustDomainAliases: [old.org]\nconnectTimeout: 1.5s\n\
             outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n\
             localityLbSetting: {enabled: false, failover: [{from: us-east1, to: us-west1}], failoverPriority: [topology.istio.io/network]}\n\
             enableAutoMtls: false\nrootNamespace: mesh-root\n\
             defaultConfig: {discoveryAddress: 'meshd.mesh:15012', meshId: m1, holdApplicationUntilProxyStarts: true}\n\
             accessLogFile: /dev/stdout\n\
             discoverySelectors: [{matchLabels: {mesh: 'on'}}]\n\
             serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.db.svc.cluster.local']}]\n",
        )
        .expect("parses");
        assert_eq!(cfg.trust_domain, "example.org");
        assert_eq!(cfg.trust_domain_aliases, ["old.org"]);
        assert_eq!(cfg.connect_timeout, Duration::from_millis(1500));
        assert_eq!(cfg.outbound_traffic_policy.mode, OutboundMode::RegistryOnly);
        assert!(!cfg.locality_lb_setting.enabled && !cfg.enable_auto_mtls);
        assert_eq!(cfg.locality_lb_setting.failover[0].to, "us-west1");
        assert_eq!(
            cfg.locality_lb_setting.failover_priority,
            ["topology.istio.io/network"]
        );
        assert_eq!(cfg.root_namespace, "mesh-root");
        assert_eq!(cfg.default_config.discovery_address, "meshd.mesh:15012");
        assert_eq!(cfg.default_config.mesh_id, "m1");
        assert_eq!(cfg.discovery_selectors[0].match_labels["mesh"], "on");
        assert!(cfg.service_settings[0].settings.cluster_local);
        assert_eq!(
            unknown,
            ["defaultConfig.holdApplicationUntilProxyStarts", "accessLogFile"]
        );
    }

    #[test]
    fn errors_name_the_field_and_line() {
        let cases = [
            ("connectTimeout: soon\n", "connectTimeout", "invalid duration"),
            (
                "outboundTrafficPolicy:\n  mode: SOMETIMES\n",
                "outboundTrafficPolicy.mode",
                "unknown variant",
            ),
            ("trustDomain: ''\n", "trustDomain", "must not be empty"),
            (
                "discoverySelectors: [{matchExpressions: [{key: team, operator: In}]}]\n",
                "discoverySelectors",
                "need at least one value",
            ),
            (
                "trustDomain: 'unclosed\n",
                "trustDomain",
                "unexpected end of stream",
            ),
        ];
        for (yaml, field, msg) in cases {
            let err = MeshConfig::parse(yaml).expect_err(yaml);
            assert_eq!(err.field.trim_matches('.'), field, "{yaml}");
            assert!(err.message.contains(msg), "{yaml}: {err}");
        }
        let err = MeshConfig::parse("outboundTrafficPolicy:\n  mode: SOMETIMES\n").unwrap_err();
        assert_eq!(err.line, Some(2));
    }
}
