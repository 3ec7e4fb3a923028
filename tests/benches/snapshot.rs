//! Aggregate snapshot rebuild after one endpoint change, at 10 clusters × 1,000 services × 10
//! endpoints (the same service names in every cluster: 1,000 merged services of 10 shards): one
//! `Update::Endpoints` into the running aggregator until the next snapshot is published.

use std::{hint::black_box, net::IpAddr, sync::Arc, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use meshd::{
    aggregate::{self, Options, RegistryId, Update},
    config::MeshNetworks,
    drain::Tasks,
    envoy::static_mesh::{endpoint, service},
    model::{Endpoint, Protocol},
};
use tokio::sync::watch;

const CLUSTERS: u8 = 10;
const SERVICES: usize = 1000;
const ENDPOINTS: usize = 10;

fn endpoints(cluster: u8, s: usize, salt: u8) -> Arc<[Endpoint]> {
    (0..ENDPOINTS)
        .map(|e| {
            let ip = IpAddr::from([10, cluster, (s >> 4) as u8, ((s & 15) * 16 + e) as u8 ^ salt]);
            endpoint(ip, &[("http", 8080)], &format!("cluster-{cluster}"))
        })
        .collect()
}

fn from(cluster: u8) -> RegistryId {
    RegistryId::kubernetes(format!("cluster-{cluster}").as_str().into(), 1)
}

fn rebuild(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tasks = Tasks::new();
    let (_networks_tx, networks) = watch::channel(Arc::new(MeshNetworks::default()));
    let opts = Options {
        primary: "cluster-0".into(),
        debounce_after: Duration::ZERO,
        debounce_max: Duration::ZERO,
        eds_debounce: aggregate::EdsDebounce::Quiet,
        metrics: aggregate::Metrics::unregistered(),
        domain_suffix: "cluster.local".into(),
    };
    let (aggregator, tx, mut snapshots) = aggregate::new(opts, networks);
    let services: Vec<_> = (0..SERVICES)
        .map(|s| {
            Arc::new(service(
                &format!("svc-{s}"),
                "bench",
                &[("http", 80, Protocol::Http)],
            ))
        })
        .collect();
    rt.block_on(async {
        aggregator.spawn(&tasks);
        for cluster in 0..CLUSTERS {
            let update = Update::Replace {
                from: from(cluster),
                services: services.clone(),
                endpoints: (0..SERVICES)
                    .map(|s| (services[s].key(), endpoints(cluster, s, 0)))
                    .collect(),
            };
            assert!(tx.send(update).await);
        }
        let total = usize::from(CLUSTERS) * SERVICES * ENDPOINTS;
        snapshots
            .wait_for(|s| s.endpoints.values().map(|e| e.iter().count()).sum::<usize>() == total)
            .await;
    });
    let mut salt = 0u8;
    c.bench_function("snapshot rebuild after one endpoint change (10x1000x10)", |b| {
        b.iter(|| {
            salt ^= 1;
            let update = Update::Endpoints {
                from: from(3),
                key: services[7].key(),
                endpoints: endpoints(3, 7, salt),
            };
            rt.block_on(async {
                tx.send(update).await;
                black_box(snapshots.changed().await)
            })
        })
    });
    tasks.cancel();
}

criterion_group!(benches, rebuild);
criterion_main!(benches);
