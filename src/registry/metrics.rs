//! The registries' metrics: `pilot_k8s_reg_events` (istiod's name), one count per watch event by kind,
//! and `meshd_registry_invalid_addresses_total`, addresses left out because they do not parse.
//! Does NOT: count cluster sync timeouts (`multicluster::Metrics`) or debounce (`aggregate::Metrics`).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
    registry::Registry,
};

use crate::{metrics::IstioCounter, model::ClusterId};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    r#type: &'static str,
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InvalidLabels {
    cluster: String,
    r#type: &'static str,
}

/// The handle every registry records through. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    reg_events: Family<EventLabels, IstioCounter>,
    invalid_addresses: Family<InvalidLabels, Counter>,
}

impl Metrics {
    /// Registers `pilot_k8s_reg_events` and `meshd_registry_invalid_addresses_total` in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            reg_events: Family::default(),
            invalid_addresses: Family::default(),
        };
        registry.register(
            "pilot_k8s_reg_events",
            "Events from k8s registry",
            m.reg_events.clone(),
        );
        registry.register(
            "meshd_registry_invalid_addresses",
            "Addresses left out of Services and EndpointSlices because they are not IP addresses, counted once per object",
            m.invalid_addresses.clone(),
        );
        m
    }

    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self::new(&mut Registry::default())
    }

    /// A registry saw an event: `kind` as istiod names it (`Services`, `EndpointSlice`, `Pods`,
    /// `Nodes`, `Namespaces`), `event` one of `add` (initial list), `update`, `delete`.
    pub(crate) fn reg_event(&self, kind: &'static str, event: &'static str) {
        self.reg_events
            .get_or_create(&EventLabels { r#type: kind, event })
            .inc();
    }

    /// An address of a `kind` object (`Services`, `EndpointSlice`) in `cluster` was left out: it does
    /// not parse.
    pub(crate) fn invalid_address(&self, cluster: &ClusterId, kind: &'static str) {
        self.invalid_addresses
            .get_or_create(&InvalidLabels {
                cluster: cluster.to_string(),
                r#type: kind,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_addresses_are_counted_by_cluster_and_type() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry);
        for kind in ["Services", "Services", "EndpointSlice"] {
            m.invalid_address(&"c2".into(), kind);
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        for line in [
            r#"meshd_registry_invalid_addresses_total{cluster="c2",type="Services"} 2"#,
            r#"meshd_registry_invalid_addresses_total{cluster="c2",type="EndpointSlice"} 1"#,
        ] {
            assert!(out.contains(line), "{out}");
        }
    }
}
