//! The registries' metric under istiod's name: `pilot_k8s_reg_events`, one count per watch event by kind.
//! Does NOT: count cluster sync timeouts (`multicluster::Metrics`) or debounce (`aggregate::Metrics`).

use prometheus_client::{encoding::EncodeLabelSet, metrics::family::Family, registry::Registry};

use crate::metrics::IstioCounter;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    r#type: &'static str,
    event: &'static str,
}

/// The handle every registry records through. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    reg_events: Family<EventLabels, IstioCounter>,
}

impl Metrics {
    /// Registers `pilot_k8s_reg_events` in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            reg_events: Family::default(),
        };
        registry.register(
            "pilot_k8s_reg_events",
            "Events from k8s registry",
            m.reg_events.clone(),
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
}
