//! The config controller's metrics, under istiod's names where istiod has one.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::{istio::Kind, metrics::IstioCounter};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    r#type: &'static str,
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    r#type: &'static str,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    r#type: &'static str,
    status: &'static str,
}

/// `pilot_k8s_cfg_events`, `pilot_total_rejected_configs` and `meshd_config_objects`.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    events: Family<EventLabels, IstioCounter>,
    rejected: Family<ObjectLabels, IstioCounter>,
    objects: Family<StatusLabels, Gauge>,
}

impl Metrics {
    /// Registers the metrics.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "pilot_k8s_cfg_events",
            "Events from k8s config (type = kind, event = add/update/delete)",
            m.events.clone(),
        );
        registry.register(
            "pilot_total_rejected_configs",
            "Total number of configs that Pilot had to reject or ignore (type = kind, name = namespace/name)",
            m.rejected.clone(),
        );
        registry.register(
            "meshd_config_objects",
            "Istio objects held, by kind and status (valid, rejected, ignored)",
            m.objects.clone(),
        );
        m
    }

    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self::default()
    }

    pub(crate) fn cfg_event(&self, kind: Kind, event: &'static str) {
        self.events
            .get_or_create(&EventLabels {
                r#type: kind.name(),
                event,
            })
            .inc();
    }

    pub(crate) fn rejected(&self, kind: Kind, name: String) {
        self.rejected
            .get_or_create(&ObjectLabels {
                r#type: kind.name(),
                name,
            })
            .inc();
    }

    /// Sets the per-kind, per-status object counts.
    pub(crate) fn set_objects(&self, counts: &[(Kind, &'static str, i64)]) {
        self.objects.clear();
        for (kind, status, n) in counts {
            self.objects
                .get_or_create(&StatusLabels {
                    r#type: kind.name(),
                    status,
                })
                .set(*n);
        }
    }

    /// The number of rejections of `kind` `name` so far (tests).
    pub fn rejections(&self, kind: Kind, name: &str) -> u64 {
        self.rejected
            .get_or_create(&ObjectLabels {
                r#type: kind.name(),
                name: name.to_owned(),
            })
            .get()
    }
}
