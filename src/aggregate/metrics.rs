//! The aggregate's metric under istiod's name: `pilot_debounce_time`, how long a burst of updates waited
//! before its snapshot was published. Does NOT: count registry events (`registry::Metrics`).

use std::time::Duration;

use prometheus_client::{metrics::histogram::Histogram, registry::Registry};

/// The aggregator's handle. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    debounce: Histogram,
}

impl Metrics {
    /// Registers `pilot_debounce_time` in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            debounce: Histogram::new([0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0]),
        };
        registry.register(
            "pilot_debounce_time",
            "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue",
            m.debounce.clone(),
        );
        m
    }

    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self::new(&mut Registry::default())
    }

    /// The aggregate published a burst that started `since` ago.
    pub(crate) fn debounced(&self, since: Duration) {
        self.debounce.observe(since.as_secs_f64());
    }
}
