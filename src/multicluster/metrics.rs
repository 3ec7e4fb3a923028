//! Multi-cluster metrics under istiod's names: remote sync timeouts, and the cluster counts and sync
//! status.
//!
//! The cluster gauges are computed at scrape time from the cluster table (a [`Collector`]), so they
//! can never disagree with `/debug/clusterz`. Does NOT: decide when to record (cluster supervisors call
//! in), or count registry events (`registry::Metrics`) and debounce (`aggregate::Metrics`).

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
    registry::Registry,
};

use super::status::Clusters;
use crate::metrics::IstioCounter;

/// The cluster supervisors' handle. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Metrics {
    sync_timeouts: IstioCounter,
    stale: IstioCounter,
}

impl Metrics {
    /// Registers the sync-timeout counter and the cluster gauges in `registry`; the gauges read `clusters`.
    pub fn new(registry: &mut Registry, clusters: Clusters) -> Self {
        let m = Self {
            sync_timeouts: IstioCounter::default(),
            stale: IstioCounter::default(),
        };
        registry.register(
            "remote_cluster_sync_timeouts_total",
            "Number of times remote clusters took too long to sync, causing slow startup that excludes remote clusters",
            m.sync_timeouts.clone(),
        );
        registry.register(
            "remote_cluster_stale_total",
            "★ Number of times a remote cluster's API server stayed unreachable past its stale-endpoints policy",
            m.stale.clone(),
        );
        registry.register_collector(Box::new(ClusterGauges(clusters)));
        m
    }

    /// Metrics recorded nowhere (tests).
    pub fn unregistered() -> Self {
        Self::new(&mut Registry::default(), Clusters::default())
    }

    /// A remote cluster did not sync within the remote-cluster timeout.
    pub(crate) fn sync_timeout(&self) {
        self.sync_timeouts.inc();
    }

    /// ★ A remote cluster turned stale.
    pub(crate) fn stale(&self) {
        self.stale.inc();
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
