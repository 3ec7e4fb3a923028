//! The traffic policy that applies to one cluster (port, subset) of a DestinationRule: istiod's
//! `GetPortLevelTrafficPolicy` then `MergeSubsetTrafficPolicy`, as a pure function.

use crate::istio::{
    DestinationRule,
    destination_rule::{PortTrafficPolicy, TrafficPolicy},
};

/// `p` at `port`, as a port-level entry without its port: a `portLevelSettings` entry for the port
/// replaces the whole policy (fields it leaves out take defaults, not the top level's values, as in
/// istiod); whether one did.
fn at_port(p: &TrafficPolicy, port: u16) -> (PortTrafficPolicy, bool) {
    match p
        .port_level_settings
        .iter()
        .find(|s| s.port.is_some_and(|sel| sel.number == u32::from(port)))
    {
        Some(level) => (
            PortTrafficPolicy {
                port: None,
                ..level.clone()
            },
            true,
        ),
        None => (
            PortTrafficPolicy {
                port: None,
                load_balancer: p.load_balancer.clone(),
                connection_pool: p.connection_pool.clone(),
                outlier_detection: p.outlier_detection.clone(),
                tls: p.tls.clone(),
            },
            false,
        ),
    }
}

/// The policy of `rule`'s cluster for `port` and `subset` (`None`: the default cluster), in Istio's
/// own shape for a port's settings (`port` unset). A subset's own policy overrides field by field; a
/// subset port-level entry replaces every field, even with unset.
pub fn effective(rule: Option<&DestinationRule>, port: u16, subset: Option<&str>) -> PortTrafficPolicy {
    let Some(rule) = rule else {
        return PortTrafficPolicy::default();
    };
    let mut policy = rule
        .traffic_policy
        .as_ref()
        .map(|p| at_port(p, port).0)
        .unwrap_or_default();
    let Some(sp) = subset
        .and_then(|name| rule.subsets.iter().find(|s| s.name == name))
        .and_then(|s| s.traffic_policy.as_ref())
    else {
        return policy;
    };
    let (s, port_level) = at_port(sp, port);
    if s.connection_pool.is_some() || port_level {
        policy.connection_pool = s.connection_pool;
    }
    if s.outlier_detection.is_some() || port_level {
        policy.outlier_detection = s.outlier_detection;
    }
    if s.load_balancer.is_some() || port_level {
        policy.load_balancer = s.load_balancer;
    }
    if s.tls.is_some() || port_level {
        policy.tls = s.tls;
    }
    policy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::istio::destination_rule::SimpleLb;

    fn dr(yaml: &str) -> DestinationRule {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn lb(p: &PortTrafficPolicy) -> Option<SimpleLb> {
        p.load_balancer.as_ref().and_then(|l| l.simple)
    }

    #[test]
    fn port_level_then_subset_like_istiod() {
        let rule = dr(r#"
host: r
trafficPolicy:
  loadBalancer: {simple: RANDOM}
  outlierDetection: {consecutive5xxErrors: 7}
  portLevelSettings:
  - port: {number: 9080}
    loadBalancer: {simple: LEAST_REQUEST}
subsets:
- name: v1
  labels: {version: v1}
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN}
- name: v2
  labels: {version: v2}
  trafficPolicy:
    portLevelSettings:
    - port: {number: 80}
      tls: {mode: DISABLE}
- name: v3
  labels: {version: v3}
"#);
        let cases = [
            // (port, subset, lb, outlier kept, tls set)
            (80, None, Some(SimpleLb::Random), true, false),
            (9080, None, Some(SimpleLb::LeastRequest), false, false),
            (80, Some("v1"), Some(SimpleLb::RoundRobin), true, false),
            (9080, Some("v1"), Some(SimpleLb::RoundRobin), false, false),
            // A subset port-level entry replaces every field, even with nothing.
            (80, Some("v2"), None, false, true),
            (9080, Some("v2"), Some(SimpleLb::LeastRequest), false, false),
            (80, Some("v3"), Some(SimpleLb::Random), true, false),
            (80, Some("missing"), Some(SimpleLb::Random), true, false),
        ];
        for (port, subset, want_lb, outlier, tls) in cases {
            let p = effective(Some(&rule), port, subset);
            assert_eq!(lb(&p), want_lb, "{port} {subset:?}");
            assert_eq!(p.outlier_detection.is_some(), outlier, "{port} {subset:?}");
            assert_eq!(p.tls.is_some(), tls, "{port} {subset:?}");
        }
        assert_eq!(effective(None, 80, Some("v1")), PortTrafficPolicy::default());
    }
}
