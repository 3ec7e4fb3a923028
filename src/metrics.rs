//! Metric types shared by components.
//!
//! istiod exports its counters without the `_total` suffix (`pilot_xds_pushes`,
//! `pilot_total_xds_rejects`, `pilot_k8s_reg_events`: its OpenTelemetry exporter is built
//! `WithoutCounterSuffixes`), and dashboards query those names. prometheus-client's OpenMetrics
//! encoder appends `_total` to every counter, so [`IstioCounter`] counts like a counter but is
//! exposed with `# TYPE … unknown` under exactly the registered name; `rate()` works on it as on any
//! counter. Names that already end in `_total` in istiod (`remote_cluster_sync_timeouts_total`)
//! use it too, so nothing is doubled.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use prometheus_client::{
    encoding::{EncodeMetric, MetricEncoder},
    metrics::{MetricType, TypedMetric},
};

/// A monotonic counter exposed under its exact name (see the module docs). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct IstioCounter(Arc<AtomicU64>);

impl IstioCounter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for IstioCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for IstioCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn exposed_without_a_total_suffix() {
        let mut registry = Registry::default();
        let c = IstioCounter::default();
        registry.register("pilot_xds_pushes", "pushes", c.clone());
        c.inc();
        c.inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains("\npilot_xds_pushes 2\n"), "{out}");
        assert!(!out.contains("pilot_xds_pushes_total"), "{out}");
    }
}
