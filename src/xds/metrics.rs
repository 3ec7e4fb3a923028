//! xDS metrics under istiod's names and labels (`type="cds"`), so existing dashboards work: istiod's
//! counters are [`IstioCounter`]s, exposed without a `_total` suffix as istiod does.
//!
//! Owns: metric handles. Does NOT: decide when to record (the streams do).

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use super::XdsType;
use crate::metrics::IstioCounter;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabel {
    r#type: &'static str,
}

fn seconds_buckets() -> impl Iterator<Item = f64> {
    [0.001, 0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0].into_iter()
}

/// The handles. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    connected: Gauge,
    pushes: Family<TypeLabel, IstioCounter>,
    rejects: Family<TypeLabel, IstioCounter>,
    expired_nonce: Family<TypeLabel, IstioCounter>,
    push_time: Family<TypeLabel, Histogram>,
    send_time: Histogram,
    convergence: Histogram,
    cache: Family<CacheLabel, Counter>,
    virtual_services: Gauge,
    duplicate_hosts: Gauge,
    duplicate_subsets: Gauge,
    /// Per type, its `pushes` counter and `push_time` histogram, looked up in the families on the
    /// type's first push and kept: every later push of every stream counts without the families' lock
    /// and label hash, while `/metrics` still lists only the types pushed.
    per_type: Arc<[OnceLock<(IstioCounter, Histogram)>; XdsType::PUSH_ORDER.len()]>,
    /// The `cache` counters `hit` and `miss`, kept likewise.
    cache_reads: Arc<[OnceLock<Counter>; 2]>,
}

impl Metrics {
    /// Registers every xDS metric in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            connected: Gauge::default(),
            pushes: Family::default(),
            rejects: Family::default(),
            expired_nonce: Family::default(),
            push_time: Family::new_with_constructor(|| Histogram::new(seconds_buckets())),
            send_time: Histogram::new(seconds_buckets()),
            convergence: Histogram::new(seconds_buckets()),
            cache: Family::default(),
            virtual_services: Gauge::default(),
            duplicate_hosts: Gauge::default(),
            duplicate_subsets: Gauge::default(),
            per_type: Default::default(),
            cache_reads: Default::default(),
        };
        registry.register(
            "pilot_xds",
            "Number of endpoints connected to this pilot using XDS",
            m.connected.clone(),
        );
        registry.register(
            "pilot_xds_pushes",
            "Pilot build and send errors for lds, rds, cds and eds",
            m.pushes.clone(),
        );
        registry.register(
            "pilot_total_xds_rejects",
            "Total number of XDS responses from pilot rejected by proxy",
            m.rejects.clone(),
        );
        registry.register(
            "pilot_xds_expired_nonce",
            "Total number of XDS requests with an expired nonce",
            m.expired_nonce.clone(),
        );
        registry.register(
            "pilot_xds_push_time",
            "Total time in seconds Pilot takes to push lds, rds, cds and eds",
            m.push_time.clone(),
        );
        registry.register(
            "pilot_xds_send_time",
            "Total time in seconds Pilot takes to send generated configuration",
            m.send_time.clone(),
        );
        registry.register(
            "pilot_proxy_convergence_time",
            "Delay in seconds between config change and a proxy receiving all required configuration",
            m.convergence.clone(),
        );
        registry.register(
            "xds_cache_reads",
            "Total number of xds cache reads",
            m.cache.clone(),
        );
        registry.register(
            "pilot_virt_services",
            "Total virtual services known to pilot.",
            m.virtual_services.clone(),
        );
        registry.register(
            "pilot_vservice_dup_domain",
            "Virtual services with dup domains.",
            m.duplicate_hosts.clone(),
        );
        registry.register(
            "pilot_destrule_subsets",
            "Duplicate subsets across destination rules for same host",
            m.duplicate_subsets.clone(),
        );
        m
    }

    /// The config gauges of the snapshot being pushed: mesh-bound VirtualServices in force, hosts
    /// several of them name, and DestinationRule subsets dropped as duplicates when rules for one host
    /// merged (istiod sets these per push context).
    pub(crate) fn config_in_force(&self, traffic: &crate::traffic::Index) {
        let vs = &traffic.virtual_services;
        self.virtual_services.set(vs.len() as i64);
        self.duplicate_hosts.set(vs.duplicates().len() as i64);
        self.duplicate_subsets
            .set(traffic.destination_rules.duplicate_subsets().len() as i64);
    }

    /// Metrics recorded nowhere (tests, benches).
    pub fn unregistered() -> Self {
        Self::new(&mut Registry::default())
    }

    pub(crate) fn stream_opened(&self) {
        self.connected.inc();
    }

    pub(crate) fn stream_closed(&self) {
        self.connected.dec();
    }

    pub(crate) fn pushed(&self, ty: XdsType, build: Duration, send: Duration) {
        let (pushes, push_time) = self.per_type[ty as usize].get_or_init(|| {
            let label = TypeLabel {
                r#type: ty.metric_label(),
            };
            (
                self.pushes.get_or_create(&label).clone(),
                self.push_time.get_or_create(&label).clone(),
            )
        });
        pushes.inc();
        push_time.observe(build.as_secs_f64());
        self.send_time.observe(send.as_secs_f64());
    }

    pub(crate) fn rejected(&self, ty: XdsType) {
        self.rejects
            .get_or_create(&TypeLabel {
                r#type: ty.metric_label(),
            })
            .inc();
    }

    pub(crate) fn expired_nonce(&self, ty: XdsType) {
        self.expired_nonce
            .get_or_create(&TypeLabel {
                r#type: ty.metric_label(),
            })
            .inc();
    }

    pub(crate) fn converged(&self, since_change: Duration) {
        self.convergence.observe(since_change.as_secs_f64());
    }

    pub(crate) fn cache_hit(&self) {
        self.cache_read(0, "hit");
    }

    pub(crate) fn cache_miss(&self) {
        self.cache_read(1, "miss");
    }

    fn cache_read(&self, slot: usize, r#type: &'static str) {
        self.cache_reads[slot]
            .get_or_init(|| self.cache.get_or_create(&CacheLabel { r#type }).clone())
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use prometheus_client::{encoding::text::encode, registry::Registry};

    use super::{Metrics, XdsType};
    use crate::{
        config_controller::ConfigSnapshot,
        traffic::{Index, Settings, tests::config},
    };

    #[test]
    fn config_gauges_count_virtual_services_and_shared_hosts() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry);
        let route = "http: [{route: [{destination: {host: a}}]}]";
        let configs = [
            config(
                "VirtualService",
                "ns",
                "one",
                "1",
                &format!("hosts: [a, b]\n{route}"),
            ),
            config(
                "VirtualService",
                "ns",
                "two",
                "2",
                &format!("hosts: [a]\n{route}"),
            ),
            config(
                "VirtualService",
                "ns",
                "gateway-only",
                "3",
                &format!("hosts: [c]\ngateways: [gw]\n{route}"),
            ),
            config(
                "DestinationRule",
                "ns",
                "dr-a",
                "4",
                "host: a\nsubsets: [{name: v1, labels: {v: '1'}}]",
            ),
            config(
                "DestinationRule",
                "ns",
                "dr-b",
                "5",
                "host: a\nsubsets: [{name: v1, labels: {v: '2'}}]",
            ),
        ];
        let index = Index::build(
            Arc::new(ConfigSnapshot::from_configs(1, configs)),
            Settings::default(),
        );
        m.config_in_force(&index);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("\npilot_virt_services 2\n"), "{text}");
        assert!(text.contains("\npilot_vservice_dup_domain 1\n"), "{text}");
        assert!(text.contains("\npilot_destrule_subsets 1\n"), "{text}");
    }

    #[test]
    fn kept_handles_count_into_the_registered_families_and_only_what_happened_is_listed() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry);
        let other = m.clone();
        m.pushed(XdsType::Endpoint, Duration::from_millis(2), Duration::ZERO);
        other.pushed(XdsType::Endpoint, Duration::from_millis(2), Duration::ZERO);
        m.pushed(XdsType::Listener, Duration::ZERO, Duration::ZERO);
        m.cache_hit();
        other.cache_hit();
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "pilot_xds_pushes{type=\"eds\"} 2",
            "pilot_xds_pushes{type=\"lds\"} 1",
            "pilot_xds_push_time_count{type=\"eds\"} 2",
            "xds_cache_reads_total{type=\"hit\"} 2",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line} in {text}");
        }
        for absent in ["type=\"cds\"", "type=\"miss\""] {
            assert!(!text.contains(absent), "{absent} never happened: {text}");
        }
    }
}
