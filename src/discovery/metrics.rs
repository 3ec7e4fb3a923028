//! Discovery metrics under istiod's names: registry events, cluster counts and sync status, sync
//! timeouts, and how long the aggregate debounced a burst.
//!
//! The cluster gauges are computed at scrape time from the cluster table (a [`Collector`]), so they
//! can never disagree with `/debug/clusterz`. Does NOT: decide when to record (registries, cluster
//! supervisors and the aggregate call in).

use std::time::Duration;

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, family::Family, gauge::ConstGauge, histogram::Histogram},
    registry::Registry,
};

use crate::{metrics::IstioCounter, multicluster::status::Clusters};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    r#type: &'static str,
    event: &'static str,
}

/// The handles. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    reg_events: Family<EventLabels, IstioCounter>,
    sync_timeouts: IstioCounter,
    debounce: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Registers every discovery metric in `registry`; the cluster gauges read `clusters`.
    pub fn new(registry: &mut Registry, clusters: Clusters) -> Self {
        let m = Self {
            reg_events: Family::default(),
            sync_timeouts: IstioCounter::default(),
            debounce: Histogram::new([0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0]),
        };
        registry.register(
            "pilot_k8s_reg_events",
            "Events from k8s registry",
            m.reg_events.clone(),
        );
        registry.register(
            "remote_cluster_sync_timeouts_total",
            "Number of times remote clusters took too long to sync, causing slow startup that excludes remote clusters",
            m.sync_timeouts.clone(),
        );
        registry.register(
            "pilot_debounce_time",
            "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue",
            m.debounce.clone(),
        );
        registry.register_collector(Box::new(ClusterGauges(clusters)));
        m
    }

    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self::new(&mut Registry::default(), Clusters::default())
    }

    /// A registry saw an event: `kind` as istiod names it (`Services`, `EndpointSlice`, `Pods`,
    /// `Nodes`, `Namespaces`), `event` one of `add` (initial list), `update`, `delete`.
    pub(crate) fn reg_event(&self, kind: &'static str, event: &'static str) {
        self.reg_events
            .get_or_create(&EventLabels { r#type: kind, event })
            .inc();
    }

    /// A remote cluster did not sync within the remote-cluster timeout.
    pub(crate) fn sync_timeout(&self) {
        self.sync_timeouts.inc();
    }

    /// The aggregate published a burst that started `since` ago.
    pub(crate) fn debounced(&self, since: Duration) {
        self.debounce.observe(since.as_secs_f64());
    }
}

/// `istiod_managed_clusters{cluster_type}` and `istiod_remote_cluster_sync_status{cluster}`, from the
/// cluster table at scrape time.
#[derive(Debug)]
struct ClusterGauges(Clusters);

impl Collector for ClusterGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct ClusterType {
            cluster_type: &'static str,
        }
        #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
        struct Cluster {
            cluster: String,
        }
        let rows = self.0.rows();
        let (local, remote): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r.secret_name.is_empty());
        let mut managed = encoder.encode_descriptor(
            "istiod_managed_clusters",
            "Number of clusters managed by istiod",
            None,
            MetricType::Gauge,
        )?;
        for (cluster_type, n) in [("local", local.len()), ("remote", remote.len())] {
            ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
                .encode(managed.encode_family(&ClusterType { cluster_type })?)?;
        }
        let mut sync = encoder.encode_descriptor(
            "istiod_remote_cluster_sync_status",
            "Current synced state of remote clusters (1 synced)",
            None,
            MetricType::Gauge,
        )?;
        for r in remote {
            ConstGauge::new(i64::from(r.sync_status == "synced")).encode(sync.encode_family(
                &Cluster {
                    cluster: r.id.to_string(),
                },
            )?)?;
        }
        Ok(())
    }
}
